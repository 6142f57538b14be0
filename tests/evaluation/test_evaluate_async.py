"""`decision.aevaluate`, and `evaluate` on an async model: rows run as tasks on one event loop
(no thread per row), at most `concurrency` in flight, each in a copy of the caller's context; the
same results, progress bar, interrupt and cancel behaviour as the thread pool. Concurrency is
bounded by counting calls in flight, never by timing."""
from __future__ import annotations

import _thread
import asyncio
import json
import threading

import pytest
from evalhelp import OPTIONS, PROMPT, message_of, rule

from openprogram import Agent, Retry, Runtime, current_runtime, decision, observe
from openprogram.evaluation.evaluate import EvaluationResult
from openprogram.runtimes import ScriptedRuntime

ROWS = [{"message": m} for m in ("please refund me", "escalate this", "just saying hi",
                                 "garbage in", "typo here", "refund crash")]


class AsyncRule:
    """An async model answering by `rule`, counting calls in flight and the threads it ran on."""

    def __init__(self, answer=rule, gate: int = 0, seconds: float = 0):
        self.answer, self.gate, self.seconds = answer, gate, seconds
        self.in_flight = self.peak = self.calls = 0
        self.threads: set[str] = set()
        self._full = None

    async def __call__(self, content):
        prompt = content[-1]["text"]
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.threads.add(threading.current_thread().name)
        try:
            if self.gate:  # hold every call until `gate` of them are waiting at once
                if self._full is None:
                    self._full = asyncio.Event()
                if self.in_flight >= self.gate:
                    self._full.set()
                await self._full.wait()
            await asyncio.sleep(self.seconds)
            return self.answer(prompt)
        finally:
            self.in_flight -= 1


def expected_rows(res: EvaluationResult) -> None:
    """Each row's outcome belongs to that row, whatever order the rows finished in."""
    assert res.statuses == ["resolved", "resolved", "resolved", "failed", "resolved", "failed"]
    assert res.picks == ["refund", "escalate", "ignore", None, "ignore", "refund"]
    assert res.results[:3] == ["refunded 5", {"decision": "escalate", "team": "tech"}, "IGNORED"]
    assert [message_of(t.prompt) for t in res.traces] == [r["message"] for r in ROWS]
    assert isinstance(res.errors[5], ZeroDivisionError)


def test_evaluate_on_an_async_model_runs_rows_as_tasks_on_one_loop_thread():
    model = AsyncRule()
    rt = Runtime(call=model)
    assert rt.async_native and not ScriptedRuntime(["x"]).async_native
    res = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, concurrency=4, progress=False)
    expected_rows(res)
    assert model.threads == {"openprogram-evaluate-loop"}  # one thread, not one per row


def test_evaluate_reaches_its_concurrency_on_the_loop_and_never_more():
    model = AsyncRule(gate=32)
    rt = Runtime(call=model)
    rows = [{"message": f"hi {i}"} for i in range(96)]
    res = decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, concurrency=32, progress=False)
    assert res.statuses == ["resolved"] * 96
    assert model.peak == 32 and model.calls == 96  # 32 waited at once; the gate opened then
    assert len(model.threads) == 1


def test_aevaluate_gives_what_evaluate_gives():
    model = AsyncRule()
    rt = Runtime(call=model)
    res = asyncio.run(decision.aevaluate(PROMPT, OPTIONS, ROWS, runtime=rt, concurrency=3,
                                         progress=False, expected=["refund", "escalate",
                                                                   "ignore", "ignore",
                                                                   "ignore", "refund"]))
    expected_rows(res)
    assert res.accuracy == 5 / 6 and res.concurrency == 3
    assert model.threads == {threading.main_thread().name}  # on the caller's own loop
    assert res.to_frame()["status"].tolist() == res.statuses


def test_aevaluate_bounds_rows_in_flight_by_concurrency():
    model = AsyncRule(gate=8)
    rt = Runtime(call=model)
    rows = [{"message": f"hi {i}"} for i in range(40)]
    res = asyncio.run(decision.aevaluate(PROMPT, OPTIONS, rows, runtime=rt, concurrency=8,
                                         progress=False))
    assert res.statuses == ["resolved"] * 40 and model.peak == 8


def test_aevaluate_on_a_scripted_runtime():
    rt = ScriptedRuntime(rule=rule, latency=0.001)
    res = asyncio.run(decision.aevaluate(PROMPT, OPTIONS, ROWS, runtime=rt, progress=False))
    expected_rows(res)
    assert len(rt.calls) == 8  # "typo" and "garbage" are re-asked once each


def test_rows_on_the_loop_see_the_callers_runtime_binding_and_observers():
    seen = []

    def lookup(order: str) -> str:
        seen.append(current_runtime())
        return order

    class Desk(Agent):
        def run(self, rows):
            return decision.evaluate("order {order}", [lookup], rows, concurrency=4,
                                     progress=False)

    model = AsyncRule(lambda p: json.dumps({"call": "lookup", "args": {"order": "A1"}}))
    rt = Runtime(call=model)
    events = []
    with observe(events.append):
        res = Desk(runtime=rt).run([{"order": i} for i in range(6)])
    assert res.results == ["A1"] * 6 and seen == [rt] * 6
    assert sum(e.kind == "resolved" for e in events) == 6
    decisions = [n for n in rt.dag if n.kind == "decision"]
    method = [n for n in rt.dag if n.kind == "agent_method"]
    assert {n.parent for n in decisions} == {method[0].id}


def test_validate_and_reask_apply_to_every_row():
    def no_refunds(pick):
        if pick.call == "refund":
            raise Retry("refunds are closed today")

    def model(prompt):
        if prompt.startswith("RETRY"):
            return '{"call": "ignore"}'
        return rule(prompt)
    rt = ScriptedRuntime(rule=model)
    rows = [{"message": "refund me"}, {"message": "hi"}]
    for run in (decision.evaluate, lambda *a, **k: asyncio.run(decision.aevaluate(*a, **k))):
        res = run(PROMPT, OPTIONS, rows, runtime=rt, progress=False, validate=no_refunds,
                  reask="RETRY: {error}")
        assert res.picks == ["ignore", "ignore"]
        assert res.traces[0].error_kinds == ["rejected"]
    with pytest.raises(ValueError, match="unknown field"):
        decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, reask="{nope}", progress=False)
    with pytest.raises(TypeError, match="validate= takes a callable"):
        decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, validate="x", progress=False)


def test_aevaluate_progress_bar_counts_every_decision(capsys):
    rt = Runtime(call=AsyncRule())
    asyncio.run(decision.aevaluate(PROMPT, OPTIONS, ROWS[:4], runtime=rt, progress=True))
    err = capsys.readouterr().err
    assert "evaluate" in err and "4/4" in err and "failed=1" in err


def interrupting(after: int):
    """Replies by `rule`; on call `after`, interrupts the main thread as Ctrl-C would."""
    count = [0]

    def answer(prompt):
        count[0] += 1
        if count[0] == after:
            _thread.interrupt_main()
        return rule(prompt)
    return answer


@pytest.mark.usefixtures("python_sigint")   # interrupt_main() needs Python's SIGINT handler
def test_ctrl_c_stops_evaluate_on_the_loop_and_cancels_rows_in_flight():
    # (a simulated Ctrl-C is seen when the waiting thread next wakes, a real one at once)
    model = AsyncRule(interrupting(after=20), seconds=0.005)
    rt = Runtime(call=model)
    rows = [{"message": f"hi {i}"} for i in range(500)]
    seen = []
    with observe(seen.append), pytest.warns(RuntimeWarning, match="evaluate was interrupted"):
        res = decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, concurrency=8,
                                progress=False)
    assert res.interrupted and 0 < res.finished < 250
    assert res.statuses.count("cancelled") == 500 - res.finished
    started = {e.trace.id: e.trace for e in seen if e.kind == "decision_started"}
    # every decision that started has finished its trace: none is left "running"
    assert all(t.status in ("resolved", "failed") for t in started.values())
    assert model.calls <= len(started) < 250 and model.in_flight == 0
    # Ctrl-C can fall between a decision's start and its model call: such a row was started and
    # never asked, at most one per worker (concurrency=8)
    assert len(started) - model.calls <= 8


def test_a_row_raising_keyboard_interrupt_stops_the_run_on_the_loop_too():
    def answer(prompt):
        if "hi 3" in prompt:
            raise KeyboardInterrupt
        return rule(prompt)
    rows = [{"message": f"hi {i}"} for i in range(200)]
    for run in (decision.evaluate, lambda *a, **k: asyncio.run(decision.aevaluate(*a, **k))):
        rt = Runtime(call=AsyncRule(answer))
        with pytest.warns(RuntimeWarning, match="interrupted"):
            res = run(PROMPT, OPTIONS, rows, runtime=rt, concurrency=1, progress=False)
        assert res.interrupted and res.statuses[:3] == ["resolved"] * 3
        assert res.statuses[3] == "cancelled" and res.finished == 3


def test_on_interrupt_raise_carries_the_partial_result_from_aevaluate():
    def answer(prompt):
        if "hi 5" in prompt:
            raise KeyboardInterrupt
        return rule(prompt)
    rt = Runtime(call=AsyncRule(answer))
    rows = [{"message": f"hi {i}"} for i in range(50)]
    with pytest.raises(KeyboardInterrupt) as info:
        asyncio.run(decision.aevaluate(PROMPT, OPTIONS, rows, runtime=rt, concurrency=1,
                                       progress=False, on_interrupt="raise"))
    res = info.value.result
    assert isinstance(res, EvaluationResult) and res.interrupted and res.finished == 5


def test_cancelling_aevaluate_cancels_rows_in_flight_and_finishes_their_traces():
    model = AsyncRule(gate=1000)  # no call ever returns: every row stays in flight
    rt = Runtime(call=model)
    rows = [{"message": f"hi {i}"} for i in range(30)]
    seen = []

    async def main():
        task = asyncio.ensure_future(decision.aevaluate(PROMPT, OPTIONS, rows, runtime=rt,
                                                        concurrency=10, progress=False))
        while model.in_flight < 10:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        return info.value

    with observe(seen.append):
        err = asyncio.run(main())
    res = err.result
    assert res.interrupted and res.statuses == ["cancelled"] * 30
    traces = [e.trace for e in seen if e.kind == "decision_started"]
    assert len(traces) == 10 and all(t.status == "failed" for t in traces)
    assert model.in_flight == 0 and model.calls == 10


def test_evaluate_on_an_async_model_inside_a_running_loop():
    # A notebook cell runs inside the kernel's event loop: evaluate's own loop is in a thread.
    model = AsyncRule()
    rt = Runtime(call=model)

    async def cell():
        return decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, concurrency=6,
                                 progress=False)
    expected_rows(asyncio.run(cell()))
    assert model.threads == {"openprogram-evaluate-loop"}
