"""Binder opens the notebooks: a fresh venv built from binder/ alone runs every notebook.

repo2docker reads only binder/ (requirements.txt, runtime.txt, postBuild); this test does what it
does without Docker: a new venv, `pip install -r binder/requirements.txt` from the repository root
(so its `-e .` is this checkout), a kernel of that venv, postBuild's IPython profile, and every
notebook executed with nbclient from its own folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

RUN_ALL = r"""
import sys, nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    # Cells that show a DecisionError on purpose carry the raises-exception tag.
    NotebookClient(nb, timeout=120, kernel_name="binder-check",
                   resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
    print("ran", path)
"""


@pytest.mark.slow
def test_binder_requirements_alone_run_every_notebook(tmp_path):
    assert NOTEBOOKS, "no notebooks under notebooks/"
    venv = tmp_path / "binder-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["-r", "binder/requirements.txt", "nbclient"], cwd=ROOT, check=True)
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home), "IPYTHONDIR": str(home / ".ipython"),
           "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
           "JUPYTER_PATH": str(tmp_path / "jupyter-data")}
    env.pop("PYTHONPATH", None)
    # postBuild, as repo2docker runs it (it writes the IPython profile under $HOME)
    subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], env=env, check=True)
    prefix = tmp_path / "kernel-prefix"
    subprocess.run([str(py), "-m", "ipykernel", "install", "--prefix", str(prefix),
                    "--name", "binder-check"], env=env, check=True, capture_output=True)
    env["JUPYTER_PATH"] = str(prefix / "share" / "jupyter")
    spec = json.loads((prefix / "share/jupyter/kernels/binder-check/kernel.json").read_text())
    assert spec["argv"][0] == str(py), spec
    # Run from a folder outside the checkout, so nothing but the binder venv provides openprogram.
    out = subprocess.run([str(py), "-c", RUN_ALL, *map(str, NOTEBOOKS)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    for nb in NOTEBOOKS:
        assert f"ran {nb}" in out.stdout
