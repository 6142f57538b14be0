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
Every test in this folder gets the `browser` marker. Follows shared/recipes/browser-tests.md.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
KERNEL_NAME = "openprogram-test"
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
# From the recipe: without the background-networking flags chromium keeps dialing out, and the
# closed network refuses it many times over.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    def __init__(self, proc, url, token, root, env, log):
        self.proc, self.url, self.token, self.root, self.env, self.log = \
            proc, url, token, root, env, log

    def api(self, method: str, path: str):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        for k in self.api("GET", "/api/kernels") or []:
            try:
                self.api("DELETE", f"/api/kernels/{k['id']}")
            except OSError:
                pass

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory):
    """One JupyterLab for the session, stopped at its end."""
    base = tmp_path_factory.mktemp("jupyter")
    dirs = {name: base / name for name in ("config", "data", "runtime", "ipython", "prefix",
                                           "root")}
    for d in dirs.values():
        d.mkdir()
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), IPYTHONDIR=str(dirs["ipython"]),
               JUPYTER_PATH=str(dirs["prefix"] / "share" / "jupyter"),
               JUPYTER_PLATFORM_DIRS="1", PYTHONDONTWRITEBYTECODE="1")
    # The kernel must be this Python (the project's .venv): a kernelspec pointing at it, in the
    # isolated data path, named in every test notebook's metadata.
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(dirs["prefix"]),
                    "--name", KERNEL_NAME, "--display-name", "openprogram (.venv)"],
                   check=True, env=env, capture_output=True, cwd=dirs["root"])
    # The "news" toast covers part of the page even with news_url=None (recipe).
    settings = (dirs["config"] / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension")
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={dirs['root']}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--ServerApp.port_retries=0"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = base / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=dirs["root"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    server = JupyterServer(proc, f"http://127.0.0.1:{port}", token, dirs["root"], env, log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with code {proc.returncode}:\n{server.log_tail()}")
            try:
                server.api("GET", "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer /api/status in 120 s:\n"
                                f"{server.log_tail()}")
                time.sleep(0.25)
        yield server
    finally:
        try:
            if proc.poll() is None:
                server.shutdown_kernels()
        except OSError:
            pass
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


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


class Lab:
    """Opens notebooks in JupyterLab and runs them."""

    def __init__(self, server: JupyterServer, context):
        self.server, self.context = server, context
        self.root: Path = server.root

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        """A notebook of code cells (a cell starting with '# md' is markdown) in the server
        root, on this Python's kernel."""
        import nbformat
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "openprogram (.venv)",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(c[4:].lstrip()) if c.startswith("# md")
                    else nbformat.v4.new_code_cell(c) for c in cells]
        path = self.root / name
        nbformat.write(nb, path)
        return path

    def copy_in(self, path: Path, name: str | None = None) -> Path:
        """Copy a notebook into the server root (set its kernel to this Python)."""
        import nbformat
        nb = nbformat.read(path, as_version=4)
        nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "openprogram (.venv)",
                                     "language": "python"}
        target = self.root / (name or Path(path).name)
        nbformat.write(nb, target)
        return target

    def open_notebook(self, path: Path, timeout_ms: int = 90_000):
        """A new page with the notebook open and its kernel idle."""
        rel = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        page = self.context.new_page()
        page.goto(f"{self.server.url}/lab/tree/{rel}?token={self.server.token}")
        page.wait_for_function(
            """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                       const k = w && w.sessionContext && w.sessionContext.session
                                 && w.sessionContext.session.kernel;
                       return !!(k && k.status === 'idle' && w.content
                                 && w.content.widgets.length); }""",
            timeout=timeout_ms)
        return page

    def kernel_name(self, page) -> str:
        return page.evaluate("() => window.jupyterapp.shell.currentWidget"
                             ".sessionContext.session.kernel.name")

    def run_all_and_wait(self, page, timeout_ms: int = 120_000) -> bool:
        """Run every cell; returns True when all ran without error. Waits for the kernel to be
        idle again and for widget views to be drawn."""
        page.set_default_timeout(timeout_ms)
        ok = page.evaluate("async () => await window.jupyterapp.commands.execute("
                           "'notebook:run-all-cells')")
        page.wait_for_function(
            """() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel
                     .status === 'idle'""", timeout=timeout_ms)
        return bool(ok)

    def cell(self, page, index: int):
        """The locator of the index-th cell (0-based, markdown cells included)."""
        return page.locator(".jp-Notebook .jp-Cell").nth(index)

    def close(self, page) -> None:
        """Close the page and shut its kernel down (kernels outlive pages)."""
        kernel_id = None
        try:
            kernel_id = page.evaluate(
                "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
        except Exception:  # a page that never opened a notebook
            pass
        page.close()
        if kernel_id:
            try:
                self.server.api("DELETE", f"/api/kernels/{kernel_id}")
            except OSError:
                pass


@pytest.fixture(scope="session")
def lab(jupyter_server, browser_context):
    return Lab(jupyter_server, browser_context)


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
