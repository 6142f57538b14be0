"""The environments the notebooks are opened in run every notebook: Binder's, built from binder/
alone, whose JupyterLab also opens on the tour, trusted, with the project's settings; and a plain
install of the notebook extra, which must bring everything the notebooks import.

repo2docker reads only binder/ (requirements.txt, runtime.txt, postBuild); the first test does what
it does without Docker: a new venv, `pip install -r binder/requirements.txt` from (a copy of) the
repository root (so its `.` is this checkout, installed as users install it, not editable), a
kernel of that venv, postBuild run with that venv first on PATH and a fresh home, and every
notebook executed with nbclient from its own folder. Then the venv's `jupyter lab`, started with no
option of ours but a port and a token as Binder starts it, is asked over HTTP what a visitor would
get: where `/` leads, the news setting, whether the tour's cells are trusted, and that jupytext
pairs it with its .py source. (Binder itself cannot be reached from here.)
"""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
from build_inputs import copy_build_inputs  # noqa: E402
from labhelp import JupyterServer, free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

RUN_ALL = r"""
import sys, nbformat
from pathlib import Path
from nbclient import NotebookClient
kernel_name, paths = sys.argv[1], sys.argv[2:]
for path in paths:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    print("ran", path)
"""


def new_venv(path: Path, *pip_args: str) -> Path:
    """A fresh venv with `pip install PIP_ARGS` run from (a copy of) the repository root, its
    project installed as users install it (not editable); its python."""
    # a copy, so the build writes nothing (build/, egg-info) into the checkout other tests read
    src = copy_build_inputs(path.parent / (path.name + "-src"), "binder", "requirements-dev.txt")
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    py = path / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    *pip_args], cwd=src, check=True)
    where = subprocess.run([str(py), "-c", "import openprogram, openprogram.widgets as w; "
                            "print(openprogram.__file__); print(w.__file__)"],
                           cwd=path, capture_output=True, text=True, check=True).stdout.split()
    assert all(f.startswith(str(path)) for f in where), f"not the venv's own copy: {where}"
    return py


def fresh_home(tmp_path: Path) -> dict:
    """This environment with a fresh home and Jupyter folders (none of the user's settings)."""
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home), "IPYTHONDIR": str(home / ".ipython"),
           "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
           "JUPYTER_PATH": str(tmp_path / "jupyter-data")}
    env.pop("PYTHONPATH", None)
    return env


def run_every_notebook(py: Path, kernel_name: str, env: dict, cwd: Path) -> None:
    """Execute every committed notebook with nbclient in py's environment, from a folder outside
    the checkout (so nothing but that environment provides openprogram)."""
    out = subprocess.run([str(py), "-c", RUN_ALL, kernel_name, *map(str, NOTEBOOKS)], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    for nb in NOTEBOOKS:
        assert f"ran {nb}" in out.stdout


@pytest.mark.slow
def test_binder_requirements_alone_run_every_notebook(tmp_path):
    assert NOTEBOOKS, "no notebooks under notebooks/"
    venv = tmp_path / "binder-venv"
    py = new_venv(venv, "-r", "binder/requirements.txt", "nbclient")
    env = fresh_home(tmp_path)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    # postBuild, as repo2docker runs it: the image's python and jupyter first on PATH (it writes
    # the IPython profile and the notebooks' signatures under $HOME, settings into the venv)
    subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], env=env, check=True)
    prefix = tmp_path / "kernel-prefix"
    subprocess.run([str(py), "-m", "ipykernel", "install", "--prefix", str(prefix),
                    "--name", "binder-check"], env=env, check=True, capture_output=True)
    env["JUPYTER_PATH"] = str(prefix / "share" / "jupyter")
    spec = json.loads((prefix / "share/jupyter/kernels/binder-check/kernel.json").read_text())
    assert spec["argv"][0] == str(py), spec
    run_every_notebook(py, "binder-check", env, tmp_path)

    # The image's JupyterLab, serving the repository as Binder does.
    port, token = free_port(), secrets.token_hex(16)
    cmd = [str(venv / "bin" / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0",
           f"--ServerApp.root_dir={ROOT}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = tmp_path / "lab.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    server = JupyterServer(proc, f"http://127.0.0.1:{port}", token, ROOT, env, log)
    try:
        server.wait_ready(120, "the Binder venv's JupyterLab")
        # `/` leads to the tour (urllib follows the redirect: the final address is the tour's).
        req = urllib.request.Request(f"{server.url}/?token={token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.url.split("?")[0].endswith("/lab/tree/notebooks/01-tour.ipynb"), resp.url
        news = server.api("GET", "/lab/api/settings/@jupyterlab/apputils-extension:notification")
        # (the overrides become the defaults of the setting's schema; the user has set nothing)
        defaults = {k: v.get("default") for k, v in news["schema"]["properties"].items()}
        assert defaults["fetchNews"] == "false" and news["settings"] == {}, (defaults, news)
        tour = server.api("GET", "/api/contents/notebooks/01-tour.ipynb")["content"]
        code = [c for c in tour["cells"] if c["cell_type"] == "code"]
        assert code and all(c["metadata"].get("trusted") for c in code)
        assert "jupytext" in tour["metadata"], "jupytext's contents manager did not read the pair"
    finally:
        server.stop()


@pytest.mark.slow
def test_the_notebook_extra_brings_everything_the_notebooks_import(tmp_path):
    """`pip install 'openprogram-decisions[notebook]'`, and nothing else but nbclient to run them:
    requirements-dev.txt is only a constraint here (the same pinned versions, installed only when
    the extra asks for them)."""
    venv = tmp_path / "extra-venv"
    # pip takes no extras in a constraint (`ray[data]==...`): the same pins, without them
    pins = tmp_path / "constraints.txt"
    pins.write_text(re.sub(r"^([A-Za-z0-9_.-]+)\[[^\]]*\]", r"\1",
                           (ROOT / "requirements-dev.txt").read_text(), flags=re.M))
    py = new_venv(venv, "-c", str(pins), ".[notebook]", "nbclient")
    env = fresh_home(tmp_path)
    # The venv's own kernel (ipykernel's `python3`, run by the venv's python).
    env["JUPYTER_PATH"] = str(venv / "share" / "jupyter")
    run_every_notebook(py, "python3", env, tmp_path)
