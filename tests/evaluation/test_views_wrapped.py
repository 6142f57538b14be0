"""Every HTML view the library emits beyond a single decision — an evaluation, a comparison, its
`.differences`, a re-check — is the library's one wrapper (`view.wrap`): MathJax skips it
(`mathjax_ignore`, `tex2jax_ignore`), and model, row and option text inside it is escaped text,
never a link or typeset math (issue 29). The inputs and the model's replies carry `$...$`, a
`data:` URL and markup."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pandas as pd

from openprogram import compare, decision
from openprogram.runtimes import ScriptedRuntime

MATH = r"$\frac{a}{b}$ and $$x^2$$"
URL = "data:text/html,<script>alert(1)</script>"
OPTIONS = {"note": ("Write a note.", {"text": str}), "skip": ("SKIP", f"skip it {MATH} {URL}")}
PROMPT = "Handle: {message}"


class Outer(HTMLParser):
    """The outer element's classes, and whether it closes only at the very end."""

    def __init__(self):
        super().__init__()
        self.depth, self.classes, self.closed_early, self.tags = 0, None, False, []

    def handle_starttag(self, tag, attrs):
        if self.depth == 0 and self.classes is not None:
            self.closed_early = True      # a second top-level element
        if self.classes is None:
            self.classes = (dict(attrs).get("class") or "").split()
        self.tags.append(tag)
        if tag not in ("br", "col", "img", "input", "meta", "hr"):
            self.depth += 1

    def handle_endtag(self, tag):
        self.depth -= 1

    def handle_data(self, data):
        if self.depth == 0 and data.strip():
            self.closed_early = True      # text outside the wrapper


def assert_wrapped(html: str, where: str, shows_rows: bool = False) -> None:
    p = Outer()
    p.feed(html)
    p.close()
    assert p.classes and {"op-view", "mathjax_ignore", "tex2jax_ignore"} <= set(p.classes), \
        f"{where}: the outer element is not the library's wrapper: {html[:120]!r}"
    assert not p.closed_early and p.depth == 0, f"{where}: content outside the wrapper"
    # what the model and the rows wrote is text: no link, no script, no element of theirs
    assert "a" not in p.tags and "script" not in p.tags, where
    assert "<script>" not in html, where
    if shows_rows:  # the rows' text is there, escaped
        assert "&lt;script&gt;" in html and MATH in html, where


def model(prompt: str) -> str:
    message = prompt.split("Handle: ", 1)[1].split("\n", 1)[0]
    if "skip" in message:
        return json.dumps({"call": "skip"})
    return f"{MATH} {URL} " + json.dumps({"call": "note", "args": {"text": f"{message} {URL}"}})


def model_v2(prompt: str) -> str:
    return json.dumps({"call": "skip"}) if "Handle" in prompt else model(prompt)


ROWS = pd.DataFrame({"message": [f"write {MATH}", f"skip {URL}", f"write {URL}"],
                     "label": ["note", "skip", "note"]})


def test_evaluation_and_comparison_views_are_wrapped():
    rt = ScriptedRuntime(rule=model)
    res = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, expected="label", progress=False)
    assert res.finished == 3
    assert_wrapped(res._repr_html_(), "EvaluationResult")
    both = compare(PROMPT, {"v1": ScriptedRuntime(rule=model),
                            "v2": ScriptedRuntime(rule=model_v2)}, ROWS, options=OPTIONS,
                   progress=False)
    html = both._repr_html_()
    assert_wrapped(html, "ComparisonResult")
    assert "where they differ" in html
    diffs = both.differences
    assert len(diffs) == 2   # the two "write" rows: v2 skips them
    derived = {".differences": diffs, "a frame made from it": diffs.sort_index(ascending=False),
               "a column selection": diffs[["message"]]}
    for where, frame in derived.items():
        assert_wrapped(frame._repr_html_(), where, shows_rows=True)
        # pandas' own MathJax marking is off too
        assert re.search(r'<table [^>]*class="[^"]*\btex2jax_ignore\b', frame._repr_html_())


def test_a_recheck_and_its_table_are_wrapped():
    rt = ScriptedRuntime(rule=model)
    res = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, progress=False)
    rv = decision.revalidate(res, {"note": OPTIONS["note"]})
    assert rv.summary["worse"] == 1  # the skipped row's option is gone
    assert_wrapped(rv._repr_html_(), "Revalidation", shows_rows=True)
    assert_wrapped(rv.to_frame()._repr_html_(), "Revalidation.to_frame()", shows_rows=True)


def test_an_improvement_is_wrapped():
    """`decision.improve`'s view shows what a proposer (a model) wrote: its proposed
    description is text in the wrapper, never typeset math or a link (issue 54, case 15)."""
    hostile = r"$\href{javascript:alert(1)}{click}$ " + f"{URL} <b>note</b>"
    rows = [{"message": f"{'write' if i % 2 else 'skip'} {i}",
             "label": "note" if i % 2 else "skip"} for i in range(24)]
    imp = decision.improve(PROMPT, OPTIONS, rows, expected="label",
                           runtime=ScriptedRuntime(rule=model),
                           proposer=lambda name, description, ev: hostile, max_examples=0)
    assert imp.edits and all(e["after"] == hostile for e in imp.edits if e["after"])
    html = imp._repr_html_()
    assert_wrapped(html, "Improvement")
    assert r"$\href{javascript:alert(1)}{click}$" in html and "&lt;b&gt;note&lt;/b&gt;" in html
