"""Every HTML view of the notebook layer shows markup as text: option names, descriptions,
schema field names, enum values, tool names' arguments and results, result reprs, error
messages, and what a person types in the playground or the test box. Each payload is placed
where a model or an option set could put it; every view must hold its escaped form and none of
its tags or attribute breakouts."""
import html
import json
import re

import pytest
from widgethelp import all_html

from openprogram import DecisionError, agent, decision
from openprogram.decision.options import normalize
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.widgets.magics import menu_frame
from openprogram.widgets.panel import DecisionPanel, trace_html
from openprogram.widgets.playground import Playground

IMG = "<img src=x onerror=alert(1)>"
PRE = "</pre><script>alert(1)</script>"
QUOTE = "\"'><svg/onload=alert(1)>"
# A tag that opens anywhere (an element a browser would build) means the payload got through.
TAG = re.compile(r"<\s*/?\s*(script|img|svg)\b", re.I)


class Markup:
    """A result whose repr is markup."""

    def __repr__(self):
        return IMG + PRE


def lookup(q: str):
    """Look it up."""
    return Markup()


lookup.__doc__ = PRE


def fails():
    """Raises with markup in its message."""
    raise RuntimeError(IMG + QUOTE)


OPTIONS = {
    IMG: (PRE, {QUOTE: {"type": str, "description": PRE, "options": [QUOTE, "ok"]}}),
    "value": (Markup(), QUOTE),
    "fails": fails,
}


def assert_inert(text: str, *payloads: str) -> None:
    assert not TAG.search(text), TAG.search(text).group(0)
    for p in payloads:
        assert p not in text
        assert html.escape(p) in text or html.escape(p, quote=False) in text


def views(trace):
    return {"panel": all_html(DecisionPanel(trace)), "trace_html": trace_html(trace),
            "display(trace)": trace._repr_mimebundle_()["text/html"],
            "the panel output's HTML copy": DecisionPanel(trace)._repr_mimebundle_()["text/html"]}


def test_schema_names_descriptions_and_enum_values_are_text_in_every_view():
    rt = ScriptedRuntime([f'{{"call": "{IMG}", "args": {{"x": 1}}}}',
                          '{"call": "%s", "args": {"%s": "%s"}}' % (
                              IMG, QUOTE.replace('"', '\\"'), QUOTE.replace('"', '\\"'))])
    result = decision.make("Pick.", OPTIONS, runtime=rt)
    assert result == {"decision": IMG, QUOTE: QUOTE}
    for text in views(decision.last_trace()).values():
        assert_inert(text, IMG, PRE, QUOTE)


def test_a_result_repr_a_tool_round_and_a_failure_message_are_text():
    rt = ScriptedRuntime([ToolCall("lookup", {"q": IMG + QUOTE}), '{"call": "value"}'])
    assert isinstance(agent("Look, then pick.", tools=[lookup], choices=OPTIONS, runtime=rt),
                      Markup)
    trace = decision.last_trace()
    for text in views(trace).values():
        # the tool's arguments show as the JSON the model sent (its quotes escaped as \")
        assert_inert(text, json.dumps(IMG + QUOTE)[1:-1], IMG + PRE)
    assert "op-tools" in all_html(DecisionPanel(trace))

    with pytest.raises(RuntimeError):
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(['{"call": "fails"}']))
    for text in views(decision.last_trace()).values():
        assert_inert(text, IMG + QUOTE)

    with pytest.raises(DecisionError):
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([PRE, IMG]))
    for text in views(decision.last_trace()).values():
        assert_inert(text, PRE, IMG)


def test_the_option_table_of_decision_menu_renders_as_text():
    table = menu_frame(normalize(OPTIONS))
    assert_inert(table._repr_html_(), IMG, PRE, QUOTE)
    # and MathJax leaves it alone: an author's $...$ shows as written
    assert re.search(r'<table [^>]*class="[^"]*\bmathjax_ignore\b', table._repr_html_())


def test_the_playground_shows_the_menu_and_a_failing_option_as_text():
    pg = Playground(OPTIONS, prompt=PRE)
    assert_inert(all_html(pg).replace(pg.prompt.value, ""), IMG, PRE)
    pg.run('{"call": "fails"}')
    assert pg.state == "failed"
    assert_inert(pg.status.value, IMG + QUOTE)
    assert_inert(pg._repr_mimebundle_()["text/html"], IMG, PRE, IMG + QUOTE)


def test_the_test_box_shows_errors_about_typed_text_as_text():
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(['{"call": "value"}']))
    panel = DecisionPanel(decision.last_trace())
    panel.test_box.module.value = IMG
    panel.test_box.button.click()
    assert "is not a dotted module path" in panel.test_box.status.value
    assert_inert(panel.test_box.status.value, IMG)


def test_the_confidence_bars_show_names_and_descriptions_as_text():
    # option names and descriptions that are markup, picked by samples: every bar is inert
    options = {IMG: PRE, QUOTE: IMG, "plain": QUOTE}
    rt = ScriptedRuntime(['{"call": "%s"}' % IMG, '{"call": "%s"}' % QUOTE.replace('"', '\\"'),
                          '{"call": "%s"}' % IMG])
    decision.make("Pick.", options, runtime=rt, confidence=decision.Samples(3))
    trace = decision.last_trace()
    assert trace.confidence.probs[IMG] == pytest.approx(2 / 3)
    for name, text in views(trace).items():
        assert_inert(text, IMG, PRE, QUOTE)
        assert text.count('class="op-conf-bar"') == 4, name  # three options and other
    from openprogram.decision.stepthrough import steps
    assert_inert(steps(trace).to_html(), IMG, PRE, QUOTE)
