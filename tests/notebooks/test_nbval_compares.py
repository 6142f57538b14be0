"""nbval compares what the committed notebooks show: a panel's text, and its static HTML copy, are
compared line for line (notebooks/sanitize.cfg replaces only tokens that vary from run to run:
model ids, addresses, durations, loopback ports), so a saved panel edited by hand fails the run.

The smallest notebook with a panel is copied three times into a scratch folder: as committed, with
one line of its panel's text changed, and with one word of its panel's HTML copy changed. nbval runs
the three as the project runs it (pyproject's options and plugin) and must fail exactly the two
edited panel cells.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = NOTEBOOKS / "sanitize.cfg"
NOTEBOOK = NOTEBOOKS / "03-retries.ipynb"   # the smallest notebook with a decision panel
FILES = ["as-committed.ipynb", "edited-text.ipynb", "edited-copy.ipynb"]


def sanitize_rules() -> list[str]:
    return [line.removeprefix("regex:").strip() for line in SANITIZE.read_text().splitlines()
            if line.startswith("regex:")]


def test_no_sanitize_rule_swallows_the_rest_of_an_output():
    rules = sanitize_rules()
    assert rules
    for rule in rules:
        # a rule matches one token: no "anything" run, no dot that crosses lines
        assert not re.search(r"\.[*+]|\[\\s\\S\]|\[\^[^]]*\][*+]|\(\?s\)", rule), rule
    # and what the panels show is left as it is
    sample = ("<DecisionTrace #7 make resolved: 2 attempt(s), result='meeting'>\n"
              '  error type_mismatch at args.hour: args.hour must be int, got string "10"')
    text = sample
    for rule, replace in zip(rules, re.findall(r"^replace: ?(.*)$", SANITIZE.read_text(), re.M)):
        text = re.sub(rule, replace, text)
    assert text == sample


def panel_cell(nb: dict) -> tuple[int, dict]:
    """(nbval's number of the cell, its panel output): the first code cell that shows a panel."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for number, cell in enumerate(code):
        for out in cell["outputs"]:
            if "op-widget-copy" in "".join(out.get("data", {}).get("text/html", "")):
                return number, out
    raise AssertionError(f"no panel in {NOTEBOOK.name}")


def edited(nb: dict, mime: str, old: str, new: str) -> dict:
    """A copy of the notebook with `old` changed to `new` in its panel's `mime` output."""
    nb = json.loads(json.dumps(nb))
    _, out = panel_cell(nb)
    text = "".join(out["data"][mime])
    assert text.count(old) == 1, (mime, old)
    out["data"][mime] = text.replace(old, new)
    return nb


def test_nbval_fails_a_panel_whose_saved_text_or_copy_was_edited_by_hand(tmp_path):
    nb = json.loads(NOTEBOOK.read_text())
    number, _ = panel_cell(nb)
    shutil.copy2(NOTEBOOK, tmp_path / "as-committed.ipynb")
    # a line of the trace's text well after its header line
    (tmp_path / "edited-text.ipynb").write_text(json.dumps(edited(
        nb, "text/plain", "args.hour must be int,", "args.hour must be float,")))
    # the outcome of an attempt in the static copy GitHub and nbconvert show
    (tmp_path / "edited-copy.ipynb").write_text(json.dumps(edited(
        nb, "text/html", "failed: type_mismatch</div>", "failed: bad_args</div>")))

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=run.xml",
         "--nbval", "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE),
         "-p", "nbval_displays", *FILES],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})
    out = run.stdout + run.stderr
    # nbval names its items by cell only (its node ids lose the file), and pytest runs the files
    # in the order given: case i is cell i % cells of file i // cells
    cells = sum(c["cell_type"] == "code" for c in nb["cells"])
    cases = list(ElementTree.parse(tmp_path / "run.xml").getroot().iter("testcase"))
    assert [c.get("name") for c in cases] == [f"Cell {i}" for i in range(cells)] * 3, out
    failed = [(FILES[i // cells], case.get("name")) for i, case in enumerate(cases)
              if case.find("failure") is not None or case.find("error") is not None]
    assert failed == [("edited-text.ipynb", f"Cell {number}"),
                      ("edited-copy.ipynb", f"Cell {number}")], out
    assert "mismatch 'text/plain'" in out and "must be float" in out
    assert "mismatch 'text/html'" in out
    assert re.search(rf"\b2 failed, {3 * cells - 2} passed\b", run.stdout), out
    # every refresh of a panel was applied to the output nbval compares
    assert "unhandled iopub msg" not in out
