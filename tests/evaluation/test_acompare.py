"""`acompare`: compare, awaitable. Each variant's rows run as tasks on the caller's event loop
(at most `concurrency` in flight), and the result is the one `compare` gives; a cancel keeps
what finished and marks the rest cancelled."""
from __future__ import annotations

import asyncio
import threading

import pytest
from evalhelp import OPTIONS, PROMPT, rule
from test_compare import V2, rule_v2
from test_evaluate_async import AsyncRule

from openprogram import Runtime, acompare, compare, decision
from openprogram.evaluation.evaluate import ComparisonResult
from openprogram.runtimes import ScriptedRuntime

ROWS = [{"message": m} for m in ("please refund me", "escalate this", "just saying hi",
                                 "garbage in", "typo here", "refund again")]


def test_acompare_gives_what_compare_gives():
    sync = compare(PROMPT, {"v1": OPTIONS, "v2": V2}, ROWS,
                   runtime=ScriptedRuntime(rule=rule_v2), progress=False)
    model = AsyncRule(answer=rule_v2)
    res = asyncio.run(acompare(PROMPT, {"v1": OPTIONS, "v2": V2}, ROWS, runtime=Runtime(
        call=model), concurrency=3, progress=False))
    assert isinstance(res, ComparisonResult) and res.variants == ["v1", "v2"]
    got, want = res.to_frame(), sync.to_frame()
    assert got["v1"].tolist() == want["v1"].tolist()
    assert got["v2"].tolist() == want["v2"].tolist()
    assert got["agree"].tolist() == want["agree"].tolist() == [False, True, True, True, True,
                                                               False]
    assert res["v1"].statuses == sync["v1"].statuses
    # the rows ran on the caller's own loop, at most 3 at a time
    assert model.threads == {threading.main_thread().name} and model.peak <= 3
    assert decision.acompare is acompare


def test_acompare_bounds_each_variants_rows_in_flight():
    model = AsyncRule(gate=4)  # every call waits until 4 are in flight: proves 4 run at once
    rows = [{"message": f"hi {i}"} for i in range(12)]
    res = asyncio.run(acompare(PROMPT, {"a": OPTIONS, "b": V2}, rows, runtime=Runtime(
        call=model), concurrency=4, progress=False))
    assert res["a"].statuses == res["b"].statuses == ["resolved"] * 12
    assert model.peak == 4 and model.calls == 24


def test_cancelling_acompare_keeps_the_finished_variant_and_cancels_the_rest():
    quick = ScriptedRuntime(rule=rule, name="quick")
    stuck = AsyncRule(gate=1000)  # never answers
    rows = [{"message": f"refund {i}"} for i in range(6)]

    async def main():
        task = asyncio.ensure_future(acompare(
            PROMPT, {"quick": quick, "stuck": Runtime(call=stuck), "later": quick}, rows,
            options=OPTIONS, concurrency=2, progress=False))
        while stuck.in_flight < 2:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        return info.value.result

    res = asyncio.run(main())
    assert res.interrupted and res.variants == ["quick", "stuck", "later"]
    assert res["quick"].statuses == ["resolved"] * 6
    assert res["stuck"].statuses == ["cancelled"] * 6
    assert res["later"].statuses == ["cancelled"] * 6
    assert len(quick.calls) == 6 and stuck.in_flight == 0


def test_acompare_checks_its_variants_before_any_call():
    rt = ScriptedRuntime(rule=rule)
    with pytest.raises(ValueError, match="two or more variants"):
        asyncio.run(acompare(PROMPT, {"only": OPTIONS}, ROWS, runtime=rt, progress=False))
    assert rt.calls == []
