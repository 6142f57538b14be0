"""How sure the model was, drawn in a real browser (issue 35): the live %%decide panel in
JupyterLab and the panel's static HTML copy opened in chromium on its own (as GitHub or an
nbconvert export shows it) both draw one bar per option plus one for `other`, most probable
first, each as wide as its probability; option names and descriptions that are script payloads
show as text and run nothing. Nothing is clicked."""
import pytest

PAYLOAD = "<img src=x onerror=\"window.__pwned=1\">"
SCRIPT = "<script>window.__pwned=2</script>"
SETUP = f'''%load_ext openprogram
from openprogram import decision
from openprogram.runtimes import ScriptedRuntime
OPTIONS = {{{PAYLOAD!r}: ("X", {SCRIPT!r}), "refund": ("R", "give the money back"),
           "wait": ("W", "do nothing yet")}}
pick = lambda name: '{{"call": %s}}' % __import__("json").dumps(name)
rt = ScriptedRuntime([pick("refund"), pick({PAYLOAD!r}), pick("refund"), "no pick",
                      pick("refund")])'''
DECIDE = '''%%decide OPTIONS -r rt --confidence 5
Pick <i>one</i>.'''
# the bars of one panel: each row's class, its name, and its bar's drawn width and track width
BARS = """(root) => [...root.querySelectorAll('.op-conf-row')].map(row => ({
    cls: row.className, name: row.querySelector('.op-conf-name').textContent,
    width: row.querySelector('.op-conf-bar').getBoundingClientRect().width,
    track: row.querySelector('.op-conf-bar').parentElement.getBoundingClientRect().width}))"""
WANT = [("op-conf-pick", "refund", 0.6), ("op-conf-option", PAYLOAD, 0.2),
        ("op-conf-option", "wait", 0.0), ("op-conf-other", "other", 0.2)]


def check(bars):
    assert [(b["cls"].split()[-1], b["name"].split(" ◀")[0].split(" (")[0]) for b in bars] == \
        [(c, n) for c, n, _ in WANT]
    for b, (_, _, p) in zip(bars, WANT):
        assert b["track"] > 0 and b["width"] == pytest.approx(p * b["track"], abs=1.5)


def test_the_live_panel_draws_a_bar_per_option(lab):
    path = lab.write_notebook("confidence_test.ipynb", [SETUP, DECIDE])
    page = lab.open_notebook(path)
    try:
        assert lab.run_all_and_wait(page), page.locator(".jp-OutputArea-output").all_inner_texts()
        panel = lab.cell(page, 1).locator(".op-panel").first
        panel.locator(".op-conf-row").first.wait_for(state="visible")
        check(panel.evaluate(BARS))
        assert "samples, n=5" in panel.inner_text()
        assert page.evaluate("() => window.__pwned === undefined")
    finally:
        lab.close(page)


def test_the_static_copy_draws_the_same_bars_with_no_script(browser_context):
    import json

    from openprogram import decision
    from openprogram.runtimes import ScriptedRuntime
    from openprogram.widgets.panel import DecisionPanel

    options = {PAYLOAD: ("X", SCRIPT), "refund": ("R", "give the money back"),
               "wait": ("W", "do nothing yet")}
    pick = lambda name: '{"call": %s}' % json.dumps(name)  # noqa: E731
    rt = ScriptedRuntime([pick("refund"), pick(PAYLOAD), pick("refund"), "no pick",
                          pick("refund")])
    decision.make("Pick <i>one</i>.", options, runtime=rt, confidence=decision.Samples(5))
    html = DecisionPanel(decision.last_trace()).static_html()
    page = browser_context.new_page()
    try:
        page.set_content(f"<!doctype html><html><body>{html}</body></html>")
        check(page.evaluate(f"() => ({BARS})(document)"))
        assert page.evaluate("() => window.__pwned === undefined")
        assert page.evaluate("() => document.querySelectorAll('img, script').length") == 0
    finally:
        page.close()
