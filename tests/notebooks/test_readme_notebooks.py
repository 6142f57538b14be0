"""The README lists every notebook of notebooks/, and only those, and the tour points onward.

A newcomer finds the notebooks through the README's list ("The notebooks ...", one `- `NAME`: what
it is for` line each) and leaves the tour through its last cell: a notebook added to the folder must
appear in both places' reach, and a listed one must exist.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"


def readme_notebooks() -> list[str]:
    """The names of the README's notebook list, in its order."""
    text = (REPO / "README.md").read_text()
    start = re.search(r"^The notebooks \(in `notebooks/`.*$", text, re.M)
    assert start, "the README has no notebook list (a line starting " \
                  "'The notebooks (in `notebooks/`')"
    block = text[start.end():].split("\n\n", 1)[0]
    return re.findall(r"^- `([^`]+)`: \S", block, re.M)


def test_readme_lists_exactly_the_notebooks_of_the_folder():
    listed = readme_notebooks()
    present = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    assert listed == sorted(listed), f"keep the README's notebook list in order: {listed}"
    missing, extra = sorted(set(present) - set(listed)), sorted(set(listed) - set(present))
    assert not missing, f"notebooks/ has {missing}, which the README's notebook list omits"
    assert not extra, f"the README lists {extra}, which notebooks/ does not have"


def test_the_tour_ends_by_pointing_at_each_use_and_at_the_live_local_model():
    nb = nbformat.read(NOTEBOOKS / "01-tour.ipynb", as_version=4)
    last = nb.cells[-1]
    assert last.cell_type == "markdown"
    links = re.findall(r"\]\(([\w-]+\.ipynb)\)", last.source)
    # every other notebook of the folder, linked, each one existing
    others = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if p.stem != "01-tour")
    assert sorted(links) == others, links
    for use, notebook in (("prototype", "02-prototyping"), ("inspect retries", "03-retries"),
                          ("teach", "04-teaching")):
        row = next((line for line in last.source.splitlines() if use in line), "")
        assert f"({notebook}.ipynb)" in row, f"the tour's end does not send '{use}' to {notebook}"
    # one command for the live local model, and ./dev knows it
    assert "`./dev local`" in last.source
    assert re.search(r"^  local\)$", (REPO / "dev").read_text(), re.M)
