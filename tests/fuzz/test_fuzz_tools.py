"""Property-based tests of native tool calls (issue 18, items 1 and 6). A provider's SDK decodes
a tool call's arguments with json.loads, so they may hold inf, NaN, lone surrogates and huge
integers as Python values. Whatever they hold, the turn goes on: a tool runs only with values
that fit its declared types, its hidden and runtime parameters are never taken from the call,
and what goes back to the model is text a provider's HTTP request can carry.
"""
from __future__ import annotations

from checks import check_received
from fuzzhelp import (
    IDENT_NAMES,
    Generated,
    budget,
    function_option,
    text_values,
    twisted_value,
    valid_value,
)
from hypothesis import given
from hypothesis import strategies as st

from openprogram import ToolCall, agent
from openprogram.runtimes import ScriptedRuntime

PY_HOSTILE = [float("inf"), float("-inf"), float("nan"), "\ud800", "a\udfffb", 10**400,
              -(10**5000), "\x00", "<opxss>", [float("nan")], {"k": float("inf")},
              {"\ud800": 1}, [[[[[]]]]], None, True, 0, "", [], {}]


def py_values(t) -> st.SearchStrategy:
    return st.one_of(valid_value(t), twisted_value(t), st.sampled_from(PY_HOSTILE))


@st.composite
def tool_calls(draw, gen: Generated, specs: list) -> ToolCall:
    spec = draw(st.sampled_from(specs))
    name = spec.fn.__name__ if draw(st.integers(0, 7)) else draw(text_values(8))
    args: dict = {}
    for p in spec.llm:
        if draw(st.integers(0, 5)):
            args[p.name] = draw(py_values(p.ty))
    for pname in spec.not_llm:
        if draw(st.booleans()):
            args[pname] = draw(st.sampled_from(["attacker", *PY_HOSTILE]))
    if draw(st.integers(0, 9)) == 0:
        return ToolCall(name, draw(st.sampled_from([None, [1], "x", 3, float("nan")])))
    return ToolCall(name, args, id=draw(st.one_of(st.none(), text_values(6))))


@budget(ci=200, long=10_000)
@given(data=st.data())
def test_fuzz_tool_arguments_never_break_a_turn_or_a_declared_type(data):
    gen = Generated(None, [], {})
    idents = data.draw(st.lists(st.sampled_from(IDENT_NAMES), min_size=1, max_size=2,
                                unique=True), "tools")
    specs = [data.draw(function_option(i, i, gen), f"tool {i}") for i in idents]
    calls = data.draw(st.lists(tool_calls(gen, specs), min_size=1, max_size=3), "tool calls")
    rt = ScriptedRuntime([*[[c] for c in calls], "Done <opxss>."], usage=False)

    assert agent("Use the tools.", tools=[s.fn for s in specs], runtime=rt,
                 context=gen.context) == "Done <opxss>."

    by_name = {s.name: s for s in specs}
    for name, received, _ in gen.calls:
        check_received(gen, by_name[name], received, rt)
    for message in rt.calls[-1].messages:
        if message.get("role") == "tool":
            assert isinstance(message["content"], str)
            message["content"].encode("utf-8")   # a provider's request can carry it
