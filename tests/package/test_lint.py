"""The whole tree passes the linter configured in pyproject.toml ([tool.ruff]: pyflakes,
pycodestyle, isort, bugbear and pyupgrade at the project's line length), so a new finding fails the
test run as a failing test does. ruff is the version requirements-dev.txt pins, run from the venv
the tests run in."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff() -> str:
    here = Path(sys.executable).parent / "ruff"
    found = str(here) if here.exists() else shutil.which("ruff")
    assert found, "ruff is not installed: ./dev test installs it from requirements-dev.txt"
    return found


def test_the_configured_rule_sets_are_the_promised_ones():
    """What ruff itself reads from pyproject.toml (its resolved settings, not the file's text)."""
    shown = subprocess.run([ruff(), "check", "--show-settings", "setup.py"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60).stdout
    assert re.search(r"^linter\.line_length = 100$", shown, re.M), shown[:2000]
    rules = set(re.findall(r"^\t([a-z0-9-]+) \(([A-Z]+)[0-9]+\)", shown, re.M))
    families = {code for _, code in rules}
    assert {"E", "W", "F", "I", "B", "UP"} <= families, families


def test_ruff_check_finds_nothing_in_the_tree():
    done = subprocess.run([ruff(), "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ruff check found:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
