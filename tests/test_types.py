"""The public modules type-check strict (mypy, configured in pyproject.toml's [tool.mypy]), and
the names the signatures are typed with say what the code accepts."""
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_mypy_is_clean_on_the_public_modules(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MYPY_FORCE_COLOR": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout


def test_mode_name_lists_the_registered_ways_of_asking():
    from openprogram import ModeName
    from openprogram.decision.modes import MODES
    assert typing.get_args(ModeName) == tuple(MODES)


def test_options_takes_both_forms_of_an_option_set():
    from openprogram import Options
    assert {typing.get_origin(a) for a in typing.get_args(Options)} == {dict, list, tuple}


@pytest.mark.parametrize("module", ["openprogram", "openprogram.decision"])
def test_importing_the_package_does_not_import_typing(module):
    """The aliases load when asked for: `import openprogram` stays on what it needs."""
    code = f"import sys, {module}; print('typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout.strip()
    assert out == "False"
