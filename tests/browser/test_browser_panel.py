"""The notebook layer in a real JupyterLab and chromium: the %%decide panel with its tables, the
playground's Run button, and replies full of script and markup that show as text and run
nothing. Saves a screenshot of the panel (one failed attempt, one good one) under artifacts/."""
import sys

import pytest

SETUP = '''%load_ext openprogram
from typing import Literal
from openprogram import decision
from openprogram.runtimes import ScriptedRuntime
from openprogram.widgets import Playground

def book(city: Literal["Paris", "Rome", "Oslo"], nights: int = 1):
    """Book a hotel in the city."""
    return {"booked": city, "nights": nights}

OPTIONS = {"book": book, "wait": ("WAIT", "Do nothing until the guest answers.")}
city = "Rome"
%decision_runtime ScriptedRuntime(['I would book it: {"call": "book", "args": {"city": "Rome", "nights": "two"}}', 'Sorry. ```json\\n{"call": "book", "args": {"city": "Rome", "nights": 2}}\\n```'], stream_chunk=16)
'''  # noqa: E501 (a cell's lines, typed into JupyterLab as they are)

DECIDE = '''%%decide OPTIONS --as picked
A guest asks for two nights in {city}. Pick the next step.'''

PAYLOAD_SCRIPT = "<script>window.__pwned=1</script>"
PAYLOAD_IMG = "<img src=x onerror=\"window.__pwned=1\">"
XSS = f'''XSS_OPTIONS = {{{PAYLOAD_IMG!r}: ("X", {PAYLOAD_SCRIPT!r}), "ok": ("OK", "<b>bold?</b>")}}
xss_rt = ScriptedRuntime([{PAYLOAD_SCRIPT + PAYLOAD_IMG!r}, 'fine {{"call": "ok"}} {PAYLOAD_IMG}'])'''  # noqa: E501

XSS_DECIDE = '''%%decide XSS_OPTIONS -r xss_rt
Pick <i>one</i>.'''

STATIC = "display(decision.last_trace())"

PLAYGROUND = '''pg = Playground(OPTIONS, prompt="A guest asks for a room. Pick.")
pg'''

SLOW_REPLY = ('The guest wants two nights in Rome, so I book them: '
              '{"call": "book", "args": {"city": "Rome", "nights": 2}}')
# a fresh slow model each time the cell runs
SLOW = '''%%decide OPTIONS --runtime "ScriptedRuntime(SLOW_REPLIES, latency=2.0, stream_chunk=8)"
Pick.'''

CELLS = ["import sys; print(sys.executable)", SETUP + f"SLOW_REPLIES = [{SLOW_REPLY!r}]", DECIDE,
         "print('picked:', picked)", XSS, XSS_DECIDE, STATIC, PLAYGROUND, SLOW]


@pytest.fixture(scope="module")
def page(lab):
    path = lab.write_notebook("panel_test.ipynb", CELLS)
    page = lab.open_notebook(path)
    try:
        ok = lab.run_all_and_wait(page)
        assert ok, "a cell failed:\n" + page.locator(".jp-OutputArea-output").all_inner_texts()[
            -1][:2000]
        # the widget views are drawn after the kernel is idle: wait for the last one
        page.locator(".op-playground").wait_for(state="visible")
        yield page
    finally:
        lab.close(page)


def test_the_kernel_is_this_python(lab, page):
    assert lab.kernel_name(page) == "openprogram-test"
    assert sys.executable in lab.cell(page, 0).locator(".jp-OutputArea-output").inner_text()


def test_the_panel_shows_both_attempts_the_result_and_its_tables(lab, page, artifacts_dir):
    cell = lab.cell(page, 2)
    panel = cell.locator(".op-panel")
    panel.wait_for(state="visible")
    failed = panel.locator(".op-attempt-failed")
    good = panel.locator(".op-attempt-ok")
    assert failed.count() == 1 and good.count() == 1
    assert "failed: type_mismatch" in failed.locator(".op-attempt-title").inner_text()
    assert "args.nights must be int" in failed.locator(".op-error").inner_text()
    assert '"nights": "two"' in failed.locator(".op-reply").inner_text()
    assert '"nights": 2' in good.locator(".op-extracted").inner_text()
    assert "picked book" in good.locator(".op-attempt-title").inner_text()
    assert '"booked": "Rome"' in panel.locator(".op-result").inner_text()
    assert "resolved" in panel.locator(".op-status").inner_text()
    # --as bound the result in the kernel
    assert "picked: {'booked': 'Rome', 'nights': 2}" in lab.cell(page, 3).inner_text()

    # the tables: open the accordion, read the attempts table, then the options tab
    panel.get_by_text("Tables", exact=True).click()
    table = panel.locator(".op-table-attempts table")
    table.wait_for(state="visible")
    headers = table.locator("thead th").all_inner_texts()
    for col in ("chosen", "error_kind", "error_path", "error_message", "reply"):
        assert col in headers
    rows = table.locator("tbody tr")
    assert rows.count() == 2
    assert "type_mismatch" in rows.nth(0).inner_text() and "args.nights" in rows.nth(0).inner_text()
    assert "book" in rows.nth(1).inner_text()
    panel.locator(".lm-TabBar-tabLabel:text-is('options')").click()
    options = panel.locator(".op-table-options table")
    options.wait_for(state="visible")
    text = options.inner_text()
    assert "city: str (one of 'Paris', 'Rome', 'Oslo')" in text and "nights: int = 1" in text
    panel.locator(".lm-TabBar-tabLabel:text-is('attempts')").click()

    shot = artifacts_dir / "panel.png"
    panel.locator(".op-attempt-failed .op-prompt summary").click()  # show one prompt + menu
    # JupyterLab scrolls inside its own panels: a viewport taller than the panel shows it whole
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": 3200})
    try:
        panel.scroll_into_view_if_needed()
        panel.screenshot(path=str(shot))
    finally:
        page.set_viewport_size(size)
    print(f"\npanel screenshot: {shot}")
    assert shot.stat().st_size > 10_000


def test_the_playground_run_button_adds_attempts(lab, page):
    pg = page.locator(".op-playground")
    reply = pg.locator(".op-playground-reply textarea")
    run = pg.locator("button.op-playground-run")
    reply.fill("I'd say Paris.")
    run.click()
    # attempt 1 shows as running until its failure reaches the page: wait for that first
    pg.locator(".op-attempt-failed").wait_for(state="visible")
    pending = pg.locator(".op-attempt-running")
    pending.wait_for(state="visible")
    assert pg.locator(".op-attempt-failed").count() == 1
    assert "no_action" in pg.locator(".op-attempt-failed .op-error").inner_text()
    assert "Write the reply of attempt 2" in pg.locator(".op-playground-status").inner_text()
    assert "waiting for the reply" in pending.locator(".op-attempt-title").inner_text()
    reply.fill('{"call": "book", "args": {"city": "Paris"}}')
    run.click()
    pg.locator(".op-result").wait_for(state="visible")
    assert pg.locator(".op-attempt-ok").count() == 1
    assert '"booked": "Paris"' in pg.locator(".op-result").inner_text()
    assert run.is_disabled()


def test_script_and_markup_in_replies_show_as_text_and_run_nothing(lab, page):
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    live = lab.cell(page, 5).locator(".op-panel")
    static = lab.cell(page, 6).locator(".op-static")
    for view in (live, static):
        view.wait_for(state="visible")
        reply = view.locator(".op-reply").first.inner_text()
        assert PAYLOAD_SCRIPT in reply and PAYLOAD_IMG in reply
        assert "Result (option ok)" in view.inner_text()
        assert view.locator("script").count() == 0
        assert view.locator("img").count() == 0
        assert view.locator("b:text('bold?')").count() == 0
    # the prompt's own markup is text too
    live.locator(".op-prompt summary").first.click()
    assert "Pick <i>one</i>." in live.locator(".op-prompt pre").first.inner_text()
    # the options table shows the option named with markup as text
    live.get_by_text("Tables", exact=True).click()
    live.locator(".lm-TabBar-tabLabel:text-is('options')").click()
    assert PAYLOAD_IMG in live.locator(".op-table-options table").inner_text()
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("() => typeof window.__pwned") == "undefined"


def test_a_slow_model_shows_each_stage_as_it_arrives(lab, page):
    index = CELLS.index(SLOW)
    page.evaluate("""(i) => { const nb = window.jupyterapp.shell.currentWidget;
                              nb.content.activeCellIndex = i;
                              window.jupyterapp.commands.execute('notebook:run-cell'); }""",
                  index)
    # while the cell runs: the reply has partly arrived and there is no result yet
    seen = page.wait_for_function(
        """(i) => { const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                    const title = cell.querySelector('.op-attempt-running .op-attempt-title');
                    const reply = cell.querySelector('.op-attempt-running .op-reply');
                    if (!reply || !reply.textContent || cell.querySelector('.op-result'))
                        return null;
                    return [title.textContent, reply.textContent]; }""",
        arg=index, timeout=60_000).json_value()
    title, partial = seen
    assert "reply arriving" in title
    assert SLOW_REPLY.startswith(partial) and len(partial) < len(SLOW_REPLY)
    result = lab.cell(page, index).locator(".op-result")
    result.wait_for(state="visible", timeout=60_000)
    assert SLOW_REPLY in lab.cell(page, index).locator(".op-reply").inner_text()
