"""Notebook viewers without widgets (GitHub, nbviewer, nbconvert) show the decisions: every
widget output of the notebook layer also carries a `text/html` copy with the decision's tables,
in its final state (the magics refresh their output when the decision ends, and nbclient stores
that refresh), and `jupyter nbconvert --to html` of an executed notebook shows the first
decision's menu and result as page text.

A small notebook of our own is executed here with nbclient, so the checks prove themselves on
every run; the committed notebooks are checked too (they pass once re-executed with this layer).
"""
from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
# tqdm's bar (evaluate / compare progress) is the one widget output that is not a decision view.
PROGRESS = re.compile(r"\d+%\|.*\| *\d+/\d+ \[")

CELLS = [
    '''%load_ext openprogram
from typing import Literal
from openprogram import decision, observe
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.widgets import DecisionPanel, Playground

def book(city: Literal["Paris", "Rome"], nights: int = 1):
    """Book a hotel in the city."""
    return {"booked": city, "nights": nights}

def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q

OPTIONS = {"book": book, "wait": ("WAIT", "Do nothing until the guest answers.")}
rt = ScriptedRuntime(['{"call": "book", "args": {"city": "Rome", "nights": "two"}}',
                      '{"call": "book", "args": {"city": "Rome", "nights": 2}}'], stream_chunk=9)
tool_rt = ScriptedRuntime([ToolCall("lookup", {"q": "trains"}), '{"call": "wait"}'])
failing_rt = ScriptedRuntime(["no idea", '{"call": "fly"}'])''',
    "%%decide OPTIONS -r rt\nA guest asks for two nights in Rome. Pick the next step.",
    "%%agent OPTIONS --tools lookup -r tool_rt\nCheck the trains, then pick.",
    "%decision_trace -2",
    'pg = Playground(OPTIONS, prompt="A guest asks for a room. Pick.")\npg',
    '''panel = DecisionPanel(options=OPTIONS)
panel.show()
with observe(panel.observer):
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(['{"call": "wait"}']))''',
    "%%decide OPTIONS -r failing_rt\nPick.",
]


def widget_outputs(nb) -> list[tuple[int, dict]]:
    return [(i, out) for i, cell in enumerate(nb.cells) for out in cell.get("outputs", [])
            if WIDGET in out.get("data", {})]


def text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def assert_every_decision_view_has_its_html(nb, where: str) -> list[str]:
    """Every widget output is a progress bar or carries a text/html view with a table; returns
    those views."""
    views = []
    for i, out in widget_outputs(nb):
        data = out["data"]
        if PROGRESS.search(text_of(data.get("text/plain", ""))):
            continue
        assert "text/html" in data, f"{where}, cell {i}: a widget output without text/html"
        view = text_of(data["text/html"])
        assert "<table" in view, f"{where}, cell {i}: its text/html has no table"
        assert "mathjax_ignore" in view.split(">", 1)[0], f"{where}, cell {i}: not wrapped"
        views.append(view)
    return views


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook above, executed by nbclient (as the committed notebooks are) in a scratch
    folder with its own Jupyter and IPython folders, on this Python."""
    import nbformat
    from nbclient import NotebookClient
    base = tmp_path_factory.mktemp("static-views")
    env = {name: str(base / name) for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                                               "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")}
    # pytest's own MonkeyPatch restores the environment (a module-scoped fixture has no
    # `monkeypatch`)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {**env, "JUPYTER_PATH": str(base / "JUPYTER_DATA_DIR")}.items():
            mp.setenv(k, v)
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
        nb.cells[-1].metadata["tags"] = ["raises-exception"]
        # the kernel starts in the scratch folder: at the repository root the checkout would
        # shadow the installed package (recipes/nbval-and-binder.md)
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(base)}}).execute()
    path = base / "views.ipynb"
    nbformat.write(nb, path)
    return nb, path


def test_every_widget_output_of_a_fresh_notebook_carries_the_final_decision_as_html(executed):
    nb, _ = executed
    views = assert_every_decision_view_has_its_html(nb, "fresh notebook")
    # %%decide, %%agent, %decision_trace, the playground, panel.show(), the failing %%decide
    assert len(views) == len(widget_outputs(nb)) == 6
    decide, agent, again, playground, shown, failed = views
    # stored in their final state, not the state they were first shown in
    for view in (decide, agent, shown):
        assert "Result (option" in view and "running" not in re.sub(r"<[^>]+>", "", view)
    assert "op-attempt-failed" in decide and "op-attempt-ok" in decide
    assert "found trains" in agent and "op-table-options" in agent
    assert again == decide
    assert "op-table-options" in playground and "A guest asks for a room. Pick." in playground
    assert "op-final-error" in failed and "unknown_call" in failed


class _PageText(HTMLParser):
    """The text a browser would lay out: everything but script and style elements."""

    def __init__(self):
        super().__init__()
        self.parts, self._skip = [], 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def test_nbconvert_html_shows_the_first_decision_s_menu_and_result(executed, tmp_path):
    """As JupyterLab saves a notebook by default (its "save widget state" setting is off), so
    nbconvert shows each output's text/html."""
    import nbformat
    nb, _ = executed
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    nb.metadata.pop("widgets", None)
    src = tmp_path / "saved.ipynb"
    nbformat.write(nb, src)
    run = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", str(src)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    page = (tmp_path / "saved.html").read_text()
    parser = _PageText()
    parser.feed(page)
    text = "".join(parser.parts)
    first = nb.cells[1].outputs[0]["data"]
    menu = re.search(r"Options \(reply.*?(?=</pre>)", text_of(first["text/html"]), re.S).group(0)
    assert html.unescape(menu) in text                      # the menu the model was sent
    assert "- book(city: str" in text and "Result (option book)" in text
    assert '"booked": "Rome"' in text and '"nights": 2' in text   # the result itself
    assert "args.nights must be int" in text                # the failed first attempt


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_every_widget_output_of_a_committed_notebook_carries_a_table(path):
    import nbformat
    nb = nbformat.read(path, as_version=4)
    assert widget_outputs(nb), f"{path.name} has no widget output"
    assert_every_decision_view_has_its_html(nb, path.name)
