"""The playground's goals in a real JupyterLab and chromium (issue 27): replies typed into the
page in each of the three ways of asking tick the goals they meet, and `progress()`, run in the
kernel afterwards, says what the page shows."""
import json

import pytest

# The cells of the notebook on show: JupyterLab may restore, in hidden tabs, notebooks that an
# earlier test's page left open in the workspace, and their cells come first in the page.
CELL_SELECTOR = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"


JS_CELLS = f"document.querySelectorAll('{CELL_SELECTOR}')"


def cell(page, index: int):
    return page.locator(CELL_SELECTOR).nth(index)


SETUP = '''%load_ext openprogram
import json
from openprogram.widgets import Playground

def book(city: str, nights: int = 1, user: str = "anon"):
    """Book a hotel."""
    return f"{city} x{nights} for {user}"
book.input_meta = {"user": {"hidden": True}}
OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet"),
           "note": ("Write a note.", {"text": str})}
pgs = {mode: Playground(OPTIONS, prompt="Where to? Pick.", context={"user": "ann"}, mode=mode)
       for mode in ("menu", "tools", "json_schema")}'''
PROGRESS = "print(json.dumps({mode: pg.progress() for mode, pg in pgs.items()}))"
CELLS = [SETUP, "pgs['menu']", "pgs['tools']", "pgs['json_schema']", PROGRESS]
# per way of asking: the replies typed, and the goals they meet
PLAYS = {
    "menu": (["I would book Rome.",
              'Not {"call": "wait"} but {"call": "book", "args": {"city": "Rome", "user": "me"}}'],
             {"error:no_action", "hidden_dropped", "last_of_two", "recover"}),
    "tools": (['book {"city": 3}', 'book {"city": "Oslo"}'],
              {"error:type_mismatch", "recover"}),
    "json_schema": (['{"call": "wait"}', '{"decision": {"call": "wait", "args": {}}}'],
                    {"one_attempt", "value_option"}),
}


@pytest.fixture(scope="module")
def page(lab):
    path = lab.write_notebook("goals_test.ipynb", CELLS)
    page = lab.open_notebook(path)
    try:
        assert lab.run_all_and_wait(page), "a cell failed"
        for i in (1, 2, 3):
            cell(page, i).locator(".op-playground").wait_for(state="visible")
        yield page
    finally:
        lab.close(page)


def ticked(pg) -> set:
    return {li.get_attribute("data-goal")
            for li in pg.locator('.op-playground-goals li[data-met="true"]').all()}


@pytest.mark.parametrize("index, mode", [(1, "menu"), (2, "tools"), (3, "json_schema")])
def test_goals_tick_as_typed_replies_meet_them(lab, page, index, mode):
    pg = cell(page, index).locator(".op-playground")
    assert ticked(pg) == set()
    replies, goals = PLAYS[mode]
    reply = pg.locator(".op-playground-reply textarea")
    status = pg.locator(".op-playground-status")
    first, last = replies
    reply.fill(first)
    pg.locator("button.op-playground-run").click()
    # the kernel has dealt with the first reply (it clears the box when it re-asks): only then
    # the second is typed
    expected = "could not have written this" if mode == "json_schema" else "attempt 2"
    page.wait_for_function(
        f"([i, text]) => {JS_CELLS}[i]"
        ".querySelector('.op-playground-status').innerText.includes(text)",
        arg=[index, expected])
    assert expected in status.inner_text()
    reply.fill(last)
    pg.locator("button.op-playground-run").click()
    pg.locator(".op-result").wait_for(state="visible")
    page.wait_for_function(
        f"([i, n]) => {JS_CELLS}[i]"
        ".querySelectorAll('.op-playground-goals li[data-met=\"true\"]').length === n",
        arg=[index, len(goals)])
    assert ticked(pg) == goals
    pg.locator(".op-playground-hints").click()
    pg.locator(".op-goal-hint").first.wait_for(state="visible")
    total = pg.locator(".op-playground-goals li").count()
    assert pg.locator(".op-goal-hint").count() == total - len(goals)
    if mode == "json_schema":  # the first reply was refused before it was sent
        assert pg.locator(".op-attempt-ok").count() == 1
        assert pg.locator(".op-attempt-failed").count() == 0


def test_progress_says_what_the_page_shows(lab, page):
    shown = {mode: ticked(cell(page, i).locator(".op-playground"))
             for i, mode in ((1, "menu"), (2, "tools"), (3, "json_schema"))}
    assert shown == {mode: goals for mode, (_, goals) in PLAYS.items()}
    page.evaluate("""(i) => { const nb = window.jupyterapp.shell.currentWidget;
                              nb.content.activeCellIndex = i;
                              window.jupyterapp.commands.execute('notebook:run-cell'); }""", 4)
    out = cell(page, 4).locator(".jp-OutputArea-output")
    page.wait_for_function(
        f"(i) => {JS_CELLS}[i].innerText.includes"
        "('\"replies_typed\": 2')", arg=4)
    progress = json.loads(out.inner_text())
    for mode, record in progress.items():
        assert {g["id"] for g in record["goals"] if g["met"]} == shown[mode]
        assert record["total"] == cell(page, {"menu": 1, "tools": 2, "json_schema": 3}[mode]) \
            .locator(".op-playground-goals li").count()
