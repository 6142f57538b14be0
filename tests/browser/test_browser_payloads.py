"""No markup from outside, in a real JupyterLab and in a static export.

Script payloads (an `<img onerror>`, a `<script>`, an `<svg onload>`, an attribute breakout, an
`<iframe srcdoc>`, a `javascript:` link, a `<details ontoggle>`, an `<input onfocus>`, plain
`<b>` markup and `$\\href{...}{...}$` for MathJax) are put in every place a model, a server or an
option set's author can write to: replies, option names and descriptions, schema fields and
enums, results, an exception, tool calls (arguments, an unknown tool's name, a tool's result), the
playground (its prompt, and a reply typed into it), the magics (a prompt, `%decision_menu`,
`%decision_trace`), `display(trace)` and `compare()` variant names (its progress bars). Each
payload sets `window.__pwned` to its place's number when it runs. The notebook runs in
JupyterLab; then it is saved (JupyterLab keeps no widget state by default, so an export shows the
outputs' HTML copies) and exported with `jupyter nbconvert --to html`, and the export is opened
in the same browser. In both: no payload ran, no element a payload would create exists, no link
to the payloads' address, nothing of ours typeset by MathJax — while two controls show that the
page would have run such a payload and typeset such math had they been given raw.
"""
from __future__ import annotations

import pytest

PLACES = {
    1: "a reply", 2: "an option name", 3: "an option description", 4: "a schema option's "
    "description", 5: "a schema field name", 6: "a schema field description", 7: "an enum value",
    8: "a result's repr", 9: "a value option's value", 10: "an exception message",
    11: "a tool call's arguments", 12: "an unknown tool's name", 13: "a tool's result",
    14: "the playground's prompt", 15: "a reply typed into the playground",
    16: "a %%decide prompt", 17: "a compare() variant name", 18: "a failed decision's reply",
}
MATH = "$\\href{https://example.com/pwned}{mathlink}$"


def payload(n: int) -> str:
    """Every kind of markup at once; the ones that can run set window.__pwned = n. The math
    comes first, so that it is still there where a view cuts a long text short."""
    return (f"{MATH} <img src=x onerror=window.__pwned={n}><script>window.__pwned={n}</script>"
            f"<svg/onload=window.__pwned={n}>\"'><img src=x onerror=window.__pwned={n}>"
            f"<iframe srcdoc=\"<script>parent.__pwned={n}</script>\"></iframe>"
            f"<a href=\"javascript:window.__pwned={n}\">jslink{n}</a>"
            f"<details open ontoggle=window.__pwned={n}>d</details>"
            f"<input autofocus onfocus=window.__pwned={n}><b>bold{n}</b>")


P = {n: payload(n) for n in PLACES}
# A URL a front end makes a link of where it shows plain text (JupyterLab does in printed
# output): in an option's description, it reaches %decision_menu's menu.
DATA_URL = "data:text/html;base64,PGI+eDwvYj4="
P[3] += f" (see {DATA_URL})"

SETUP = f'''%load_ext openprogram
import json
from IPython.display import HTML, display
from openprogram import decision, compare
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.widgets import Playground

class Shown:
    def __repr__(self):
        return {P[8]!r}

def shown():
    """Returns an object whose repr is markup."""
    return Shown()

def lookup(q: str) -> str:
    """Look something up."""
    return {P[13]!r}

def fails():
    """Raises with markup in its message."""
    raise RuntimeError({P[10]!r})

OPTIONS = {{
    {P[2]!r}: ("picked", {P[3]!r}),
    "form": ({P[4]!r}, {{{P[5]!r}: {{"type": str, "description": {P[6]!r},
                                    "options": [{P[7]!r}, "ok"]}}}}),
    "shown": shown,
    "value": ({P[9]!r}, "a value option"),
    "fails": fails,
}}
pick_form = json.dumps({{"call": "form", "args": {{{P[5]!r}: "ok"}}}})
reply_rt = ScriptedRuntime([{P[1]!r} + pick_form], stream_chunk=40)
shown_rt = ScriptedRuntime(['{{"call": "shown"}}'])
tool_rt = ScriptedRuntime([ToolCall("lookup", {{"q": {P[11]!r}}}), ToolCall({P[12]!r}, {{}}),
                           '{{"call": "value"}}'])
failing_rt = ScriptedRuntime([{P[18]!r}, '{{"call": "fails"}}'])
'''
CONTROL = ("<div class='mj-control'><img src=x onerror=window.__control=1>"
           "<p>$\\href{https://example.com/control}{control}$</p></div>")

CELLS = [
    SETUP,
    # the controls: raw HTML given to the page does run, and math in it is typeset
    f"display(HTML({CONTROL!r}))",
    "%decision_menu OPTIONS",
    f"%%decide OPTIONS --runtime reply_rt\n{P[16]}Pick one.",
    "%%decide OPTIONS -r shown_rt\nPick.",
    "%%agent OPTIONS --tools lookup -r tool_rt\nLook, then pick.",
    "%decision_trace -2",
    "display(decision.last_trace())",
    f'''runs = compare("Pick for {{x}}.", {{{P[17]!r}: OPTIONS, "plain": OPTIONS}}, [{{"x": 1}}],
               runtime=ScriptedRuntime(rule=lambda prompt: '{{"call": "value"}}'),
               progress=True)''',
    f"pg = Playground(OPTIONS, prompt={P[14]!r})\npg",
    "%%decide OPTIONS --runtime failing_rt\nPick.",
]
# What a payload would leave behind had it been taken as markup.
INJECTED = ("img[src='x'], script, svg[onload], iframe, a[href^='javascript'], "
            "details[ontoggle], input[onfocus]")
CLEAN = {"pwned": None, "elements": [], "links_in_html": [], "disguised_links": [],
         "data_links": [],
         "typeset": 0, "bold": 0}


def injected(page) -> dict:
    """Within every output but the controls': the elements the payloads would have made, any
    link in an HTML or widget output, any link to a data: URL (even one JupyterLab made of
    plain text), any link to an address (scheme:...) whose text is not that address
    (JupyterLab turns a URL in plain text into a link to itself, which hides nothing, and a
    traceback's file names into links to the files), the math MathJax typeset, and the flag a
    payload that ran would have set."""
    return page.evaluate(
        """(selector) => {
             // this notebook only (JupyterLab may restore other open notebooks in the page);
             // an exported page has only this one
             const app = window.jupyterapp;
             const notebookRoot = () => app ? app.shell.currentWidget.node : document.body;
             const root = notebookRoot();
             const outs = [...root.querySelectorAll('.jp-OutputArea-output')]
                          .filter(o => !o.querySelector('.mj-control'));
             const all = sel => outs.flatMap(o => [...o.querySelectorAll(sel)]);
             const show = e => e.outerHTML.slice(0, 160);
             const links = all('a');
             return {pwned: window.__pwned === undefined ? null : window.__pwned,
                     elements: all(selector).map(show),
                     links_in_html: links.filter(a => !a.closest('.jp-RenderedText')).map(show),
                     data_links: links.filter(a => /^data:/i.test(a.getAttribute('href')))
                                      .map(show),
                     disguised_links: links.filter(a => /^(\\w+:)/.test(a.getAttribute('href'))
                                          && a.textContent.trim() !== a.getAttribute('href'))
                                       .map(show),
                     typeset: all('mjx-container, .MathJax').length,
                     bold: all('b').filter(b => /^bold\\d+$/.test(b.textContent)).length};
           }""", INJECTED)


def open_all_details(page) -> None:
    page.evaluate("() => (window.jupyterapp ? window.jupyterapp.shell.currentWidget.node "
                  ": document).querySelectorAll('.jp-OutputArea-output details')"
                  ".forEach(d => { d.open = true; })")


def page_text(page) -> str:
    return page.evaluate("() => (window.jupyterapp ? window.jupyterapp.shell.currentWidget"
                         ".node : document.body).innerText")


def assert_payloads_shown_as_text(text: str, places=PLACES) -> None:
    for n in places:
        if n != 17:      # (a progress bar's label: tqdm shows its spaces as figure spaces)
            assert f"<img src=x onerror=window.__pwned={n}>" in text, PLACES[n]
    if 17 in places:
        assert "<svg/onload=window.__pwned=17>" in text
    assert MATH in text


@pytest.fixture(scope="module")
def ran(lab):
    path = lab.write_notebook("payloads.ipynb", CELLS)
    page = lab.open_notebook(path)
    # JupyterLab draws only the cells in view: a page taller than the notebook has them all
    page.set_viewport_size({"width": 1400, "height": 24_000})
    try:
        lab.run_all_and_wait(page)     # the last cell fails on purpose (the option raises)
        # this notebook's own panel (JupyterLab may also restore notebooks other tests opened)
        notebook = page.locator("[id='%s']" % page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.id"))
        notebook.locator(".op-playground").wait_for(state="visible")
        yield page, path, notebook
    finally:
        lab.close(page)


def test_no_payload_runs_or_makes_markup_live(lab, ran):
    page, _, notebook = ran
    page.wait_for_function("() => window.__control === 1")
    notebook.locator(".mj-control mjx-container").first.wait_for(state="attached", timeout=30_000)
    # the playground: its prompt holds a payload, and a reply holding another is typed in
    pg = notebook.locator(".op-playground")
    pg.locator(".op-playground-reply textarea").fill(P[15] + ' {"call": "value"}')
    pg.locator("button.op-playground-run").click()
    pg.locator(".op-result").wait_for(state="visible")
    # 4 magics, %decision_trace, display(trace), the playground's
    assert notebook.locator(".op-panel").count() == 7
    open_all_details(page)
    page.wait_for_timeout(500)     # a bounded settle, for ontoggle / onfocus handlers
    assert_payloads_shown_as_text(page_text(page))
    found = injected(page)
    assert found == CLEAN, found


def test_no_payload_runs_or_makes_markup_in_an_nbconvert_export(lab, ran, tmp_path):
    page, path, _ = ran
    export = lab.save_and_export(page, path, tmp_path / "export")
    # our views in the export are the outputs' HTML copies, each wrapped against MathJax
    assert export.read_text().count('class="op-view mathjax_ignore tex2jax_ignore') >= 6
    view = lab.context.new_page()
    try:
        view.goto(export.as_uri())
        view.wait_for_function("() => window.__control === 1")   # raw HTML runs here too
        open_all_details(view)
        view.wait_for_timeout(500)
        # (not what was typed into the playground, nor the progress bars: a widget's output
        # keeps the copy made when it was shown, and the bars have none)
        assert_payloads_shown_as_text(page_text(view),
                                      set(PLACES) - {15, 17})
        found = injected(view)
        assert found == CLEAN, found
    finally:
        view.close()
