"""The live run view in a real JupyterLab and chromium.

One notebook: a 20-decision run on a slow scripted model under `%%run_program`, read from the
page while the cell still runs (the view grows as the run goes); the spec's shape of program (two
decisions, then a turn with a tool that ends in a third), forked from the view with the mouse —
a reply typed into the opened decision's box, then the runner-up in one click — each fork a second
run shown with its diff; and a run whose every field a model, a tool or an option set writes holds
a script payload (option names and descriptions, replies, an unknown tool's name, a tool's result,
a result's repr, a failed decision's error, the runner-up on the fork button, the pick menu),
opened in the view. Then the notebook is saved and exported with nbconvert: the runs' static
copies read as text in the export (header, tree, decisions table, diff), and no payload ran or
made markup, live or exported. Screenshots go to artifacts/.
"""
from __future__ import annotations

import re

import pytest
from test_browser_payloads import (
    CLEAN,
    MATH,
    injected,
    open_all_details,
    page_text,
    payload,
)

P = {n: payload(100 + n) for n in range(1, 10)}
PLACES = {1: "an option name", 2: "an option description", 3: "a reply", 4: "an unknown tool's "
          "name", 5: "a tool's result", 6: "a result's repr", 7: "a failed decision's reply",
          8: "a runner-up's name", 9: "a value option's value"}

SETUP = f'''%load_ext openprogram
from openprogram import Agent, DecisionError, agent, decision
from openprogram.runtimes import ScriptedRuntime, ToolCall

class Loop(Agent):
    def go(self, n):
        return [decision.make(f"Step {{i}}: pick.", ["left", "right"]) for i in range(n)]

slow = ScriptedRuntime(rule=lambda p: '{{"call": "left"}}', latency=0.3)

def lookup(q: str) -> str:
    """Look it up."""
    return "found " + q

def support(ticket):
    lang = decision.make("Which language? " + ticket, ["en", "de"])
    urgency = decision.make("How urgent? " + ticket, ["low", "high"],
                            confidence=decision.Samples(4))
    return agent("Handle: " + ticket, tools=[lookup], options=["refund", "escalate", "close"])

def support_model():
    asked = {{}}
    def reply(prompt):
        n = asked[prompt] = asked.get(prompt, 0) + 1
        if prompt.startswith("Which language"):
            return '{{"call": "en"}}'
        if prompt.startswith("How urgent"):
            return '{{"call": "low"}}' if n % 4 == 0 else '{{"call": "high"}}'
        return ToolCall("lookup", {{"q": "A-17"}}) if n % 2 else '{{"call": "refund"}}'
    return ScriptedRuntime(rule=reply)

model = support_model()

class Shown:
    def __repr__(self):
        return {P[6]!r}

def shown():
    """Returns an object whose repr is markup."""
    return Shown()

def found(q: str) -> str:
    """Look something up."""
    return {P[5]!r}

BAD = {{{P[1]!r}: ("X", {P[2]!r}), "shown": shown, {P[8]!r}: ({P[9]!r}, "a value")}}

def bad_program():
    decision.make("Pick.", BAD, confidence=decision.Samples(4))
    agent("Look.", tools=[found], options=BAD)
    try:
        decision.make("Pick again.", BAD, max_retries=0)
    except DecisionError:
        pass
    return "done"

import json
bad_model = ScriptedRuntime(
    [json.dumps({{"call": "shown"}})] * 3 + [json.dumps({{"call": {P[8]!r}}})]   # 4 samples
    + [ToolCall({P[4]!r}, {{}}), ToolCall("found", {{"q": "x"}}),           # the turn's tools
       {P[3]!r} + json.dumps({{"call": "shown"}}),                          # its pick
       {P[7]!r}])                                                         # a reply with no pick
'''
CELLS = [
    SETUP,
    "%%run_program --runtime slow --as long\nLoop().go(20)",
    "%%run_program --runtime model --as first\nsupport('My kettle arrived broken.')",
    "%%run_program --runtime bad_model --as bad\nbad_program()",
]
LONG, FIRST, BAD = 1, 2, 3


def open_button(page, view, k: int):
    """The magnifier of decision #k's row in `view`'s own tree (not a fork's, below it)."""
    tree = view.locator(".op-run-tree-box").first
    return tree.locator(".widget-hbox", has=page.locator(
        ".op-row-index", has_text=re.compile(f"^#{k}$"))).last.locator("button.op-run-open")


def wait_text(page, locator, text: str, timeout_s: float = 30) -> str:
    """Poll the locator's text until it holds `text` (widgets redraw after a click)."""
    for _ in range(int(timeout_s * 10)):
        shown = locator.inner_text()
        if text in shown:
            return shown
        page.wait_for_timeout(100)
    raise AssertionError(f"{text!r} never showed; last: {shown[:500]!r}")


def head_of(page, index: int) -> str | None:
    return page.evaluate(
        """(i) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                    const h = c && c.querySelector('.op-run-view .op-run-head');
                    return h ? h.innerText : null; }""", index)


@pytest.fixture(scope="module")
def ran(lab):
    path = lab.write_notebook("runs_test.ipynb", CELLS)
    page = lab.open_notebook(path)
    page.set_viewport_size({"width": 1400, "height": 6000})
    try:
        yield lab, page, path
    finally:
        lab.close(page)


def test_the_view_grows_while_a_20_decision_run_executes(ran, artifacts_dir):
    lab, page, _ = ran
    # Run All without waiting for it: the 20 decisions take about 6 s on the slow model
    page.evaluate("""() => { const app = window.jupyterapp;
                            app.commands.execute('notebook:run-all-cells'); }""")
    page.locator(".jp-Notebook .jp-Cell").nth(LONG).locator(".op-run-head").wait_for(
        timeout=60_000)
    seen = []
    while True:
        head = head_of(page, LONG) or ""
        running = "· running (" in head
        found = re.search(r"(\d+) decisions?\b", head)
        count = int(found.group(1)) if found else 0
        if not seen or seen[-1] != (count, running):
            seen.append((count, running))
        if not running and count == 20:
            break
        page.wait_for_timeout(100)
    # while the run went, the page showed the count rising: many steps, in order, then done
    growing = [c for c, running in seen if running]
    assert len(set(growing)) >= 5, seen
    assert growing == sorted(growing) and growing[0] < 5, seen
    assert seen[-1] == (20, False)
    row = lab.cell(page, LONG).locator(".op-row-decision")
    assert "×20" in row.inner_text() and "left ×20" in row.inner_text()
    lab.run_all_and_wait(page)       # the rest of the notebook, once it is idle again
    lab.cell(page, LONG).locator(".op-run-view").screenshot(
        path=str(artifacts_dir / "run-view-20.png"))


def test_the_fork_actions_make_a_second_run_and_show_the_diff(ran, artifacts_dir):
    lab, page, _ = ran
    view = lab.cell(page, FIRST).locator(".op-run-view").first
    view.wait_for()
    assert "3 decisions" in view.locator(".op-run-head").first.inner_text()
    rows = view.locator(".op-run-tree-box").first.locator(".op-run-row-view")
    # open decision #2 (the turn's pick) with its magnifier: its panel shows beneath
    open_button(page, view, 2).click()
    detail = view.locator(".op-run-detail").first
    detail.locator(".op-panel").wait_for()
    wait_text(page, detail.locator(".op-run-detail-title"), "Decision #2")
    assert "picked refund" in detail.locator(".op-panel").inner_text()
    detail.locator(".op-fork-reply textarea").fill('{"call": "escalate"}')
    detail.locator("button.op-fork-reply-button").click()
    section = view.locator(".op-fork-section").first
    section.locator(".op-run-diff-view").wait_for(timeout=30_000)
    diff = section.locator(".op-run-diff-view").inner_text()
    assert "First divergence: decision #2, in its reply" in diff
    assert "2 decision(s) the same in both runs" in diff
    fork_view = section.locator(".op-run-view")
    assert "fork of" in fork_view.inner_text() and "escalate" in fork_view.inner_text()
    # the runner-up of decision #1, in one click
    open_button(page, view, 1).click()
    button = detail.locator("button.op-fork-runner-up").first
    wait_text(page, button, "runner-up: low")
    button.click()
    view.locator(".op-fork-section").nth(1).locator(".op-run-diff-view").wait_for(
        timeout=30_000)
    second = view.locator(".op-fork-section").nth(1).inner_text()
    assert "First divergence: decision #1" in second
    assert rows.count() >= 3
    view.screenshot(path=str(artifacts_dir / "run-view-forks.png"))


def test_payloads_in_every_field_show_as_text_live_and_in_the_export(ran, tmp_path):
    lab, page, path = ran
    view = lab.cell(page, BAD).locator(".op-run-view").first
    view.wait_for()

    def open_decision(k: int) -> str:
        open_button(page, view, k).click()
        page.wait_for_function(
            """([i, k]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                             const t = c.querySelector('.op-run-detail-title');
                             return t && t.innerText.includes('Decision #' + k)
                                    && c.querySelector('.op-run-detail .op-panel'); }""",
            arg=[BAD, k])
        open_all_details(page)
        page.wait_for_timeout(300)
        return page_text(page)

    # the turn: the reply, an unknown tool's name, a tool's result, the result's repr
    shown = open_decision(1)
    for n in (3, 4, 5, 6):
        assert f"<img src=x onerror=window.__pwned={100 + n}>" in shown, PLACES[n]
    # the failed decision's reply
    assert "<img src=x onerror=window.__pwned=107>" in open_decision(2), PLACES[7]
    # the decision with confidence: the runner-up on its button, the options in the pick menu
    shown = open_decision(0)
    runner = view.locator(".op-run-detail").first.locator("button.op-fork-runner-up").first
    assert P[8][:60] in wait_text(page, runner, "onerror")
    # (ipywidgets writes an option's spaces as no-break spaces)
    options = [o.replace("\xa0", " ")
               for o in view.locator(".op-fork-pick select option").all_inner_texts()]
    assert P[1] in options and P[8] in options, PLACES[1]
    for n in (1, 2, 8, 9):     # the menu in the panel: names, descriptions, a value's repr
        assert f"<img src=x onerror=window.__pwned={100 + n}>" in shown, PLACES[n]
    assert MATH in shown
    found = injected(page)
    assert found == CLEAN, found

    # saved (no widget state kept by default: the export shows the static copies)
    export = lab.save_and_export(page, path, tmp_path / "export")
    assert export.read_text().count('class="op-view mathjax_ignore tex2jax_ignore op-run') >= 3
    exported = lab.context.new_page()
    try:
        exported.goto(export.as_uri())
        open_all_details(exported)
        exported.wait_for_timeout(500)
        shown = page_text(exported)
        # the static copies read: each run's header, its tree, its table of decisions
        assert "Run Loop().go(20) · ok (20 decisions" in shown
        assert "Run support('My kettle arrived broken.') · ok (3 decisions" in shown
        # the forks made with the mouse are kept too: each diff, each forked run
        assert "First divergence: decision #2, in its reply" in shown
        assert "First divergence: decision #1" in shown and "fork of support(" in shown
        assert "×20" in shown and "picks: left ×20" in shown
        assert "agent(options=)" in shown and "lookup" in shown and "p_pick" in shown
        for n in (6, 8):      # a result's repr and a runner-up's name, in the tree and table
            assert f"<img src=x onerror=window.__pwned={100 + n}>" in shown, PLACES[n]
        found = injected(exported)
        assert found == CLEAN, found
    finally:
        exported.close()
