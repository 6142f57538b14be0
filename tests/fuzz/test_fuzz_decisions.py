"""Property-based tests of whole decisions (issue 18, item 6): generated option sets, generated
replies, every entry point. Whatever the model writes:
- only `DecisionError` (or the user's own exception, raised by their own function) escapes;
- every value a function receives, and every result, fits its declared type;
- hidden, context and runtime parameters hold the context's value, their default or the runtime,
  never a reply's, and the attempt records say so;
- every HTML view shows the reply (and the author's names) as text.
"""
from __future__ import annotations

import asyncio

import pytest
from checks import (
    check_error,
    check_html,
    check_kwargs,
    check_received,
    check_result,
    check_trace,
    check_views,
    check_writable,
)
from fuzzhelp import (
    PROSE,
    Generated,
    UserBoom,
    budget,
    dump,
    fits,
    hostile_values,
    object_types,
    option_sets,
    replies,
    schema_spec,
    schema_types,
    valid_value,
)
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from openprogram import DecisionError, agent, decision, last_trace
from openprogram.runtimes import ScriptedRuntime

PROMPT = "Choose the next step <opxss> $x$."
ENTRIES = ["make", "make", "make_no_retry", "amake", "agent", "parse"]


def run_entry(entry: str, gen: Generated, first: str, second: str):
    """One decision through `entry`: (result, the exception that ended it, the runtime)."""
    rt = ScriptedRuntime([first, second], usage=False)
    kw = dict(runtime=rt, context=gen.context)
    try:
        if entry == "make":
            return decision.make(PROMPT, gen.options, **kw), None, rt
        if entry == "make_no_retry":
            return decision.make(PROMPT, gen.options, max_retries=0, **kw), None, rt
        if entry == "amake":
            return asyncio.run(decision.amake(PROMPT, gen.options, **kw)), None, rt
        if entry == "agent":
            return agent(PROMPT, options=gen.options, **kw), None, rt
        return decision.parse_args(first, gen.options, context=gen.context), None, None
    except DecisionError as err:
        return None, err, rt
    except UserBoom as exc:
        assert any(exc is e for e in gen.raised), f"a UserBoom no generated function raised: {exc}"
        return None, exc, rt


def fuzz_one(gen: Generated, data) -> object:
    """Draw two replies and an entry, run the decision, check every promise; return the trace."""
    first, second = data.draw(replies(gen), "reply"), data.draw(replies(gen), "re-ask reply")
    entry = data.draw(st.sampled_from(ENTRIES), "entry")
    result, exc, rt = run_entry(entry, gen, first, second)
    trace = exc.trace if isinstance(exc, DecisionError) else last_trace()
    for name, received, _ in gen.calls:
        check_received(gen, gen.spec(name), received, rt)
    if isinstance(exc, DecisionError):
        check_error(exc)
    elif exc is None and entry == "parse":
        chosen, kwargs = result
        spec = next(s for s in gen.specs if chosen is s.fn or (s.fn is None and chosen == s.name))
        check_kwargs(gen, spec, kwargs, None)
    elif exc is None:
        check_result(gen, result, trace)
    check_trace(gen, trace)
    return trace


@budget(ci=400, long=20_000)
@given(gen=option_sets(), data=st.data())
def test_fuzz_only_decision_errors_escape_and_every_value_fits(gen, data):
    fuzz_one(gen, data)


@budget(ci=100, long=4_000)
@given(gen=option_sets(max_options=2), data=st.data())
def test_fuzz_every_html_view_shows_the_reply_as_text(gen, data):
    check_views(fuzz_one(gen, data))


@settings(budget(ci=60, long=4_000), phases=[Phase.explicit, Phase.generate])
@given(gen=option_sets(max_options=2), data=st.data())
def test_fuzz_what_a_trace_records_can_be_written_out(gen, data):
    check_writable(fuzz_one(gen, data))


@budget(ci=120, long=8_000)
@given(data=st.data())
def test_fuzz_response_format_values_fit_the_schema(data):
    """exec(response_format=schema): the value returned fits the schema, or DecisionError."""
    t = data.draw(object_types(schema_types(1)), "schema type")
    schema = {n: schema_spec(data.draw, ft) for n, ft in t.fields}
    raw = data.draw(st.booleans(), "raw")

    def reply():
        value = data.draw(st.one_of(valid_value(t), st.fixed_dictionaries(
            {n: st.one_of(valid_value(ft), hostile_values()) for n, ft in t.fields}),
            hostile_values()))
        return data.draw(PROSE) + dump(value, raw) + data.draw(PROSE)

    rt = ScriptedRuntime([reply(), reply()], usage=False)
    try:
        value = rt.exec("Fill it in <opxss>.", response_format=schema)
    except DecisionError as err:
        check_error(err)
        trace = err.trace
    else:
        assert fits(value, t), f"{value!r:.300} does not fit {t}"
        trace = last_trace()
    check_views(trace)


@pytest.mark.parametrize("html", [
    '<div class="mathjax_ignore">a</div>$x$',
    '<div class="mathjax_ignore"><img src=x onerror=alert(1)></div>',
    '<div class="mathjax_ignore"><opxss>text</opxss></div>',
    '<div class="mathjax_ignore" onclick="x">a</div>',
    '<div class="mathjax_ignore"><!-- a --></div>',
])
def test_the_html_check_is_not_blind(html):
    with pytest.raises(AssertionError):
        check_html(html)
