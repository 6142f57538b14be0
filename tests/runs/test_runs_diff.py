"""Diffs of two runs (issue 51): aligned by call site and order, the first divergence names the
decision and the part that differs first — a decision's result only after the decisions made
while it resolved — then what follows on each side; `to_frame()` lists every aligned pair."""
from __future__ import annotations

import json

import pytest

import openprogram
from openprogram import Agent, UsageError, agent, decision
from openprogram.runs import RunDiff, on_run
from openprogram.runtimes import ScriptedRuntime


def pick(name, **args):
    return "```json\n" + json.dumps({"call": name, **({"args": args} if args else {})}) + "\n```"


class Support(Agent):
    method_options = {"handle_ticket": {"tool": True}}

    def handle_ticket(self, ticket: str) -> str:
        """Handle a support ticket."""
        kind = decision.make(f"Ticket: {ticket}. Kind?", ["billing", "shipping"])
        return decision.make(f"Ticket: {ticket} ({kind}). Outcome?",
                             {"refund": "REFUNDED", "close": "CLOSED"})


SUPPORT = Support()


def router(message: str) -> str:
    """The specification's router: its option is the support agent's method, which decides
    twice while the router's decision resolves."""
    return decision.make(f"Message: {message}. Route it.",
                         {"support": SUPPORT.handle_ticket, "ignore": "IGNORED"})


def routes(prompt: str) -> str:
    if "Route it" in prompt:
        return pick("support", ticket="where is 42")
    if "Kind?" in prompt:
        return pick("shipping")
    return pick("close")


def test_the_same_program_run_twice_agrees_everywhere():
    a = openprogram.run(router, "hi", runtime=ScriptedRuntime(rule=routes))
    b = openprogram.run(router, "hi", runtime=ScriptedRuntime(rule=routes))
    d = a.diff(b)
    assert d.first is None and d.same and d.common == 3 and d.after_a == [] == d.after_b
    assert [p.part for p in d.pairs] == [None, None, None]
    assert "every decision agrees" in repr(d)


def test_a_nested_decision_is_found_before_the_result_it_changes():
    a = openprogram.run(router, "hi", runtime=ScriptedRuntime(rule=routes))
    assert a.result == "CLOSED"
    assert [d.up.index for d in a.decisions[1:]] == [None, None]  # under the method's node
    assert a.decisions[1].in_decision == 1 and a.decisions[0] in a.decisions[1].path
    b = a.fork(at=2, reply=pick("refund"))
    assert b.result == "REFUNDED"
    d = a.diff(b)
    # decision 0's result differs too, but only because decision 2, made inside it, did
    assert (d.first.index, d.first.part) == (2, "reply") and d.common == 2
    assert d.first.a is a.decisions[2] and d.first.b is b.decisions[2]
    assert "refund" in json.dumps(d.first.b_value)
    # after decision 2 each side ends decision 0: no decision starts after it
    assert d.after_a == [] and d.after_b == []
    # the pairs compare each decision whole: decision 0 differs in its result
    assert [p.part for p in d.pairs] == ["result", None, "reply"]
    frame = d.to_frame()
    assert [p if isinstance(p, str) else None for p in frame["part"]] == ["result", None, "reply"]
    assert list(frame["a_chosen"]) == ["support", "shipping", "close"]
    assert list(frame["b_chosen"]) == ["support", "shipping", "refund"]
    assert list(frame["same"]) == [False, True, False]


def branchy(urgent: bool) -> str:
    first = decision.make("First?", ["x", "y"])
    if urgent:
        return decision.make("Urgent path?", ["x", "y"])
    second = decision.make("Calm path?", ["x", "y"])
    return first + second + decision.make("And?", ["x", "y"])


def test_another_place_and_a_missing_decision_are_named():
    a = openprogram.run(branchy, False, runtime=ScriptedRuntime(rule=lambda p: pick("x")))
    b = openprogram.run(branchy, True, runtime=ScriptedRuntime(rule=lambda p: pick("x")))
    d = a.diff(b)
    assert d.first.index == 1 and d.first.part == "call_site" and d.common == 1
    assert d.first.a_value.line != d.first.b_value.line
    assert d.after_a == [a.decisions[2]] and d.after_b == []
    # aligned by place: the calm path and "And?" have no counterpart, the urgent path neither
    assert [(p.a is not None, p.b is not None, p.part) for p in d.pairs] == [
        (True, True, None), (True, False, "missing"), (True, False, "missing"),
        (False, True, "missing")]
    c = openprogram.run(branchy, False, runtime=ScriptedRuntime([pick("x")] * 2 + ["oops"] * 2))
    d = a.diff(c)
    assert d.first.index == 2 and d.first.part == "reply"


def test_a_result_that_differs_with_the_same_pick_is_named():
    state = {"n": 0}

    def count() -> int:
        state["n"] += 1
        return state["n"]

    def program():
        return decision.make("Count?", {"count": count, "stop": 0})
    a = openprogram.run(program, runtime=ScriptedRuntime(rule=lambda p: pick("count")))
    b = a.fork(at=0)  # asked again: the same pick, but the function runs again
    d = a.diff(b)
    assert (d.first.part, d.first.a_value, d.first.b_value) == ("result", 1, 2)


def test_diff_takes_a_run():
    a = openprogram.run(router, "hi", runtime=ScriptedRuntime(rule=routes))
    with pytest.raises(UsageError, match="another Run"):
        a.diff("b")
    assert isinstance(a.diff(a), RunDiff)
    # two runs that decide nothing: they agree, their results may not
    d = openprogram.run(lambda: 1).diff(openprogram.run(lambda: 2))
    assert d.same and d.results == (1, 2) and d.to_frame().empty


def test_on_run_sees_a_fork_start_before_its_program_runs():
    a = openprogram.run(router, "hi", runtime=ScriptedRuntime(rule=routes))
    seen = []
    with on_run(lambda r: seen.append((r.forked_from is a, len(r.nodes), r.status))):
        b = a.fork(at=1, reply=pick("billing"))
    assert seen == [(True, 1, "running")] and b.decisions[1].trace.chosen == "billing"


def test_a_turn_with_tools_differs_in_its_tool_round():
    calls = {"n": 0}

    def lookup(q: str) -> str:
        """Look it up."""
        calls["n"] += 1
        return f"{q}:{calls['n']}"

    def program():
        return agent("Look it up, then decide.", tools=[lookup], options={"done": "DONE"})
    from openprogram import ToolCall
    script = [ToolCall("lookup", {"q": "a"}), pick("done")]
    a = openprogram.run(program, runtime=ScriptedRuntime(list(script)))
    b = openprogram.run(program, runtime=ScriptedRuntime(list(script)))
    d = a.diff(b)
    assert (d.first.index, d.first.part) == (0, "tools")  # the tool's own result differs
    assert (d.first.a_value[0], d.first.b_value[0]) == ("a:1", "a:2")
