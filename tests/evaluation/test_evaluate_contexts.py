"""Each worker runs in a copy of the caller's context: the Runtime bound by the enclosing Agent
method, the Agent itself and scoped observers all hold inside evaluate's threads."""
import json
import threading

from evalhelp import OPTIONS, PROMPT, rule

from openprogram import Agent, current_agent, current_runtime, decision, observe
from openprogram.runtimes import ScriptedRuntime


class Router(Agent):
    def triage(self, rows):
        return decision.evaluate(PROMPT, OPTIONS, rows, concurrency=3, progress=False)


def test_an_agent_methods_runtime_is_used_by_the_workers():
    rt = ScriptedRuntime(rule=rule, latency=0.002)
    rows = [{"message": f"refund {i}"} for i in range(6)]
    res = Router(runtime=rt).triage(rows)
    assert res.statuses == ["resolved"] * 6 and len(rt.calls) == 6
    assert res.runtime == "scripted"
    # the decisions are DAG children of the Agent method call, across threads
    method = [n for n in rt.dag.nodes if n.kind == "agent_method"]
    decisions = [n for n in rt.dag.nodes if n.kind == "decision"]
    assert len(method) == 1 and len(decisions) == 6
    assert {n.parent for n in decisions} == {method[0].id}


def test_picked_functions_see_the_bound_runtime_agent_and_can_decide_again():
    seen = []

    def lookup(order: str) -> str:
        seen.append((threading.current_thread().name, current_runtime(), current_agent()[0]))
        # a nested decision with no runtime= works only if the context reached this thread
        return decision.make("Which queue?", {"fast": "F", "slow": "S"})

    class Desk(Agent):
        def run(self, rows):
            return decision.evaluate("order {order}", [lookup], rows, concurrency=2,
                                     progress=False)

    def model(prompt):
        if prompt.startswith("Which queue?"):
            return '{"call": "fast"}'
        return json.dumps({"call": "lookup", "args": {"order": "A1"}})

    rt = ScriptedRuntime(rule=model)
    desk = Desk(runtime=rt)
    res = desk.run([{"order": i} for i in range(4)])
    assert res.results == ["F"] * 4
    assert all(t.startswith("openprogram-evaluate") for t, _, _ in seen)
    assert all(r is rt and a is desk for _, r, a in seen)
    # each row's trace is its own outer decision, not the nested one
    assert [t.prompt for t in res.traces] == [f"order {i}" for i in range(4)]
    assert all(t.chosen == "lookup" for t in res.traces)


def test_scoped_observers_see_every_rows_events():
    events = []
    rt = ScriptedRuntime(rule=rule, latency=0.001)
    with observe(events.append):
        res = decision.evaluate(PROMPT, OPTIONS, [{"message": f"hi {i}"} for i in range(5)],
                                runtime=rt, concurrency=5, progress=False)
    started = [e.trace for e in events if e.kind == "decision_started"]
    assert sorted(t.id for t in started) == sorted(t.id for t in res.traces)
    assert sum(e.kind == "resolved" for e in events) == 5


def test_observers_of_other_code_do_not_leak_into_the_run():
    # evaluate's own per-row observer must not stay installed after the run
    rt = ScriptedRuntime(rule=rule)
    decision.evaluate(PROMPT, OPTIONS, [{"message": "hi"}], runtime=rt, progress=False)
    from openprogram.trace.decision_trace import _scoped_observers
    assert _scoped_observers.get() == ()
