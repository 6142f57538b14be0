"""What a build of the distribution reads, copied out of the checkout, so that the tests which build
or install the project never write build/ or egg-info folders into it (other tests, running at the
same time, read the checkout)."""
from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# setup.py finds the packages, MANIFEST.in adds the files the sdist carries beyond them
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "CHANGELOG.md",
                "LICENSE", "openprogram", "widgets")


def copy_build_inputs(dest: Path, *extra: str) -> Path:
    """Copy the build inputs (and `extra` names of the checkout) into the new folder `dest`."""
    dest.mkdir()
    for name in (*BUILD_INPUTS, *extra):
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, dest / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints"))
        else:
            shutil.copy2(p, dest / name)
    return dest
