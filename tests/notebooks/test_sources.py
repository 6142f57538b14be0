"""The notebooks are jupytext pairs that JupyterLab opens without changing anything.

Each notebooks/NAME.ipynb has its source NAME.py (percent format, see notebooks/jupytext.toml).
Reading a pair and saving it back through jupytext's contents manager — what JupyterLab does when
it opens a notebook and saves it — must leave both files as they are: otherwise a .py was edited
without `./dev notebooks`, or the notebook holds metadata JupyterLab would rewrite. And the kernel
metadata must be what JupyterLab writes when the notebook's kernel connects (its kernelspec and the
kernel's language_info), or the notebook is marked modified as soon as it is opened.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PAIRS = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
REBUILD = "run ./dev notebooks and commit both files of each pair"


def test_every_notebook_has_its_source_and_every_source_its_notebook():
    sources = sorted(p.stem for p in NOTEBOOKS.glob("*.py") if p.name != "build.py")
    assert PAIRS and sources == PAIRS
    assert "formats" in (NOTEBOOKS / "jupytext.toml").read_text()


@pytest.fixture(scope="module")
def pairs_copy(tmp_path_factory):
    """A copy of the pairs and their jupytext configuration (saving must not touch the checkout)."""
    copy = tmp_path_factory.mktemp("notebooks")
    for name in PAIRS:
        for ext in (".ipynb", ".py"):
            shutil.copy2(NOTEBOOKS / f"{name}{ext}", copy)
    shutil.copy2(NOTEBOOKS / "jupytext.toml", copy)
    return copy


@pytest.mark.parametrize("name", PAIRS)
def test_opening_and_saving_in_jupyterlab_changes_neither_file(name, pairs_copy, tmp_path,
                                                               monkeypatch):
    # Saving signs the notebook: keep the signature out of the user's Jupyter folder.
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))
    from jupytext import TextFileContentsManager
    cm = TextFileContentsManager(root_dir=str(pairs_copy))
    before = {ext: (pairs_copy / f"{name}{ext}").read_text() for ext in (".ipynb", ".py")}
    model = cm.get(f"{name}.ipynb")
    cm.save({"type": "notebook", "format": "json", "content": model["content"]}, f"{name}.ipynb")
    for ext, text in before.items():
        assert (pairs_copy / f"{name}{ext}").read_text() == text, \
            f"saving {name}.ipynb from JupyterLab rewrites {name}{ext}: {REBUILD}"


@pytest.fixture(scope="module")
def connected_kernel():
    """What JupyterLab writes into a notebook when a `python3` kernel connects: the spec's name,
    display name and language, and the language_info of the kernel's own info reply."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import start_new_kernel
    spec = KernelSpecManager().get_kernel_spec("python3")
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        reply = kc.kernel_info(reply=True, timeout=60)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return ({"name": "python3", "display_name": spec.display_name, "language": spec.language},
            reply["content"]["language_info"])


@pytest.mark.parametrize("name", PAIRS)
def test_the_kernel_metadata_is_what_jupyterlab_writes_on_connecting(name, connected_kernel):
    kernelspec, language_info = connected_kernel
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert nb.metadata.kernelspec == kernelspec, REBUILD
    assert nb.metadata.language_info == language_info, REBUILD
