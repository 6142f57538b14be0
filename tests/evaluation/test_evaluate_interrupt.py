"""Ctrl-C / a kernel interrupt during evaluate: the run stops, finished rows are kept, unfinished
rows are "cancelled", and the partial result is returned (or carried by the re-raised
KeyboardInterrupt with on_interrupt="raise").

The model rule calls `_thread.interrupt_main()`, which raises KeyboardInterrupt in the main thread
exactly as Ctrl-C or Jupyter's interrupt button does."""
import _thread
import itertools
import json
import threading

import pytest

from openprogram import compare, decision
from openprogram.evaluation.evaluate import ComparisonResult, EvaluationResult
from openprogram.runtimes import ScriptedRuntime

# interrupt_main() needs Python's SIGINT handler, absent when pytest started with SIGINT ignored
pytestmark = pytest.mark.usefixtures("python_sigint")

OPTIONS = {"echo": lambda n: n, "skip": "SKIPPED"}
N = 300


def interrupting_model(after: int):
    """Replies {"call": "echo", "args": {"n": <row>}}; interrupts the main thread on call
    `after`."""
    counter = itertools.count(1)

    def model(prompt):
        if next(counter) == after:
            _thread.interrupt_main()
        return json.dumps({"call": "echo", "args": {"n": row_of(prompt)}})
    return model


def row_of(prompt: str) -> int:
    return int(prompt.split()[1])  # the prompt is "row <i>" followed by the menu


def join_workers():
    for t in threading.enumerate():
        if t.name.startswith("openprogram-evaluate"):
            t.join(10)


def rows(n=N):
    return [{"i": i} for i in range(n)]


def test_interrupt_keeps_finished_rows_and_cancels_the_rest():
    rt = ScriptedRuntime(rule=interrupting_model(after=6), latency=0.005)
    with pytest.warns(RuntimeWarning, match=r"evaluate was interrupted: \d+ of 300 inputs"):
        res = decision.evaluate("row {i}", OPTIONS, rows(), runtime=rt, concurrency=1,
                                progress=False)
    join_workers()
    assert isinstance(res, EvaluationResult) and res.interrupted
    # concurrency 1 runs rows in order: the five before the interrupting call had finished
    assert res.statuses[:5] == ["resolved"] * 5 and res.results[:5] == [0, 1, 2, 3, 4]
    finished = res.finished
    assert res.statuses[finished:] == ["cancelled"] * (N - finished)
    assert finished < N // 2  # it stopped, far from the end
    assert len(rt.calls) <= finished + 1  # nothing ran after the stop but the row in flight
    df = res.to_frame()
    assert (df["status"] == "cancelled").sum() == N - finished
    assert df.loc[N - 1, "attempts"] == 0 and res.traces[N - 1] is None
    assert res.summary["cancelled"] == N - finished
    assert res.failure_rate == 0  # rates are over finished rows only
    assert "INTERRUPTED" in repr(res) and "cancelled" in res._repr_html_()
    with pytest.raises(ValueError, match="cancelled before its decision ran"):
        res.panel(N - 1)


def test_on_interrupt_raise_carries_the_partial_result():
    rt = ScriptedRuntime(rule=interrupting_model(after=6), latency=0.005)
    with pytest.raises(KeyboardInterrupt) as info:
        decision.evaluate("row {i}", OPTIONS, rows(), runtime=rt, concurrency=2,
                          progress=False, on_interrupt="raise")
    join_workers()
    res = info.value.result
    assert isinstance(res, EvaluationResult) and res.interrupted
    # with two workers, call 6 starts only after four rows have finished
    assert res.finished >= 4 and res.results[:4] == [0, 1, 2, 3]
    assert res.statuses.count("cancelled") > N // 2
    assert any("partial result" in note for note in info.value.__notes__)


def test_a_keyboard_interrupt_inside_a_worker_stops_the_run_too():
    def model(prompt):
        if row_of(prompt) == 3:
            raise KeyboardInterrupt
        return '{"call": "skip"}'
    rt = ScriptedRuntime(rule=model, latency=0.005)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = decision.evaluate("row {i}", OPTIONS, rows(), runtime=rt, concurrency=1,
                                progress=False)
    join_workers()
    assert res.interrupted and res.statuses[:3] == ["resolved"] * 3
    assert res.statuses[3] == "cancelled" and res.finished < N // 2


def test_rows_in_flight_make_no_further_model_calls_after_the_stop():
    # Row 0 interrupts; row 1 is in flight with an unusable reply, released only after evaluate
    # has returned. Its re-ask must never reach the model.
    started, release = threading.Event(), threading.Event()

    def model(prompt):
        if prompt.startswith("Your previous reply"):
            return '{"call": "skip"}'
        if row_of(prompt) == 0:
            assert started.wait(10)
            _thread.interrupt_main()
            return '{"call": "skip"}'
        if row_of(prompt) == 1:
            started.set()
            assert release.wait(10)
            return "not a pick"
        return '{"call": "skip"}'
    rt = ScriptedRuntime(rule=model)
    with pytest.warns(RuntimeWarning):
        res = decision.evaluate("row {i}", OPTIONS, rows(50), runtime=rt, concurrency=2,
                                progress=False)
    release.set()
    join_workers()
    assert res.interrupted and res.statuses[1] == "cancelled"
    assert [row_of(c.prompt) for c in rt.calls[:2]] in ([0, 1], [1, 0])
    assert not any(c.prompt.startswith("Your previous reply") for c in rt.calls)


def test_compare_interrupted_cancels_the_variants_not_yet_run():
    rt = ScriptedRuntime(rule=interrupting_model(after=4), latency=0.005)
    with pytest.warns(RuntimeWarning, match="compare was interrupted"):
        res = compare("row {i}", {"a": OPTIONS, "b": OPTIONS}, rows(), runtime=rt,
                      concurrency=1, progress=False)
    join_workers()
    assert isinstance(res, ComparisonResult) and res.interrupted
    assert res["a"].interrupted and res["a"].statuses[:3] == ["resolved"] * 3
    assert res["b"].statuses == ["cancelled"] * N
    df = res.to_frame()
    assert df["agree"].isna().all()  # no row finished in both variants
    assert res.differences.empty


def test_a_nested_decision_in_a_row_in_flight_makes_no_model_call_after_the_stop():
    # Row 1's picked function is running when row 0 interrupts the run; the decision it makes
    # afterwards belongs to a stopped run's row and must never reach the model (the run's
    # attempt gate holds in every decision made inside a row, not only the row's own).
    started, release = threading.Event(), threading.Event()

    def slow(n: int) -> str:
        started.set()
        assert release.wait(10)
        return decision.make("nested pick", {"a": "A", "b": "B"}, runtime=rt)

    def model(prompt):
        if prompt.startswith("nested pick"):
            return '{"call": "a"}'
        if row_of(prompt) == 0:
            assert started.wait(10)
            _thread.interrupt_main()
            return '{"call": "skip"}'
        if row_of(prompt) == 1:
            return '{"call": "slow", "args": {"n": 1}}'
        return '{"call": "skip"}'
    rt = ScriptedRuntime(rule=model)
    with pytest.warns(RuntimeWarning):
        res = decision.evaluate("row {i}", {"slow": slow, "skip": "SKIPPED"}, rows(50),
                                runtime=rt, concurrency=2, progress=False)
    release.set()
    join_workers()
    assert res.interrupted and res.statuses[1] == "cancelled"
    assert not any(c.prompt.startswith("nested pick") for c in rt.calls)


def test_rows_whose_settings_fail_each_fail_with_their_decisions_error():
    # The rows share one Plan; settings it refuses leave each row to fail as its own make()
    # would (evaluate checks its settings first, so this is the runner's own guard).
    import asyncio

    from openprogram.decision.options import normalize
    from openprogram.evaluation import runner
    menu, rt = normalize(OPTIONS), ScriptedRuntime(['{"call": "skip"}'])
    bad = {"max_retries": -1, "context": None, "timeout_s": None, "validate": None,
           "reask": None, "mode": "menu", "repair": None}
    assert runner.shared_plan(menu, rt, bad, sync=False) is None
    row = asyncio.run(runner.decide("row 0", menu, rt, bad, threading.Event(), sync=False))
    assert row.status == "failed" and "max_retries" in str(row.error) and not rt.calls
    good = dict(bad, max_retries=0)
    row = asyncio.run(runner.decide("row 0", menu, rt, good, threading.Event(), sync=False,
                                    prepared=runner.shared_plan(menu, rt, good, sync=False)))
    assert row.status == "resolved" and row.result == "SKIPPED" and row.trace.prompt == "row 0"
