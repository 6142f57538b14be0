"""A real JupyterLab on loopback and Debian's chromium driven by Playwright, for browser tests.

Session-scoped and reusable: `jupyter_server` starts one JupyterLab for the whole run (loopback,
free port, token, isolated Jupyter/IPython folders in tmp, a kernelspec for this Python — the
project's .venv — installed into them); `browser_context` is one chromium profile; `lab` gives a
`Lab` helper:

    def test_something(lab):
        path = lab.write_notebook("x.ipynb", ["%load_ext openprogram", "..."])  # server root
        page = lab.open_notebook(path)          # waits for the kernel to be idle
        assert lab.run_all_and_wait(page)       # True when every cell ran without error
        lab.cell(page, 1).locator(".op-panel")  # a cell's locator (0-based)
        lab.close(page)                         # closes the page, shuts its kernel down

To open a notebook from the repository (e.g. notebooks/01-tour.ipynb), copy it into
`lab.root` (`lab.copy_in(path)`), so that the kernel does not start at the repository root.
The helpers themselves (`Lab`, `JupyterServer`, `free_port`) live in labhelp.py. Every test in
this folder gets the `browser` marker. Follows shared/recipes/browser-tests.md.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from labhelp import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    KERNEL_NAME,
    JupyterServer,
    Lab,
    free_port,
    ipc_runtime_dir,
    isolated_jupyter,
)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory):
    """One JupyterLab for the session, stopped at its end."""
    base = tmp_path_factory.mktemp("jupyter")
    dirs = isolated_jupyter(base, ("config", "data", "runtime", "ipython", "prefix", "root"))
    env = dict(os.environ, **{**dirs["env"],
                              "JUPYTER_RUNTIME_DIR": str(ipc_runtime_dir(dirs["runtime"]))},
               JUPYTER_PATH=str(dirs["prefix"] / "share" / "jupyter"),
               JUPYTER_PLATFORM_DIRS="1", PYTHONDONTWRITEBYTECODE="1")
    # The kernel must be this Python (the project's .venv): a kernelspec pointing at it, in the
    # isolated data path, named in every test notebook's metadata.
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(dirs["prefix"]),
                    "--name", KERNEL_NAME, "--display-name", "openprogram (.venv)"],
                   check=True, env=env, capture_output=True, cwd=dirs["root"])
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={dirs['root']}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--ServerApp.port_retries=0", "--KernelManager.transport=ipc"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = base / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=dirs["root"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    server = JupyterServer(proc, f"http://127.0.0.1:{port}", token, dirs["root"], env, log)
    try:
        server.wait_ready(120)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    """Debian's chromium with a fresh profile (never a downloaded browser)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium "
                    f"(apt-get install -y chromium; ./dev test does it)")
    from playwright.sync_api import sync_playwright
    pw = sync_playwright().start()
    try:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1100})
        try:
            yield ctx
        finally:
            ctx.close()
    finally:
        pw.stop()


@pytest.fixture(scope="session")
def lab(jupyter_server, browser_context):
    return Lab(jupyter_server, browser_context)


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
