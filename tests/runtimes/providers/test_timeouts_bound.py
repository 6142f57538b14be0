"""`timeout_s` bounds every kind of model (issue 41, finding 7): an async model function is
cancelled when the budget runs out (in make and amake), a sync one's late reply is not used, a
scripted or replayed call (realtime=True) never outlasts the budget, and a provider call through
the real SDK client against the loopback server ends as a timeout. The models would answer, well
after the budget: every test asserts the call ended as a timeout and, where it can be seen, that
the model was stopped rather than awaited."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from fakeserver import text

from openprogram import DecisionError, decision
from openprogram.runtimes import ReplayRuntime, Runtime, ScriptedRuntime

OPTIONS = {"a": ("A", "one"), "b": ("B", "two")}
BUDGET = 0.3
SLOW = 4.0     # how long each model takes: far over the budget


def _timed_out(run) -> list:
    with pytest.raises(DecisionError) as info:
        run()
    kinds = [a.error_kind for a in info.value.trace.attempts]
    assert kinds == ["timeout"], (kinds, str(info.value))
    return kinds


@pytest.mark.parametrize("way", ["make", "amake"])
def test_an_async_model_function_is_cancelled(way):
    state = {"started": 0, "cancelled": 0, "finished": 0}

    async def model(content):
        state["started"] += 1
        try:
            await asyncio.sleep(SLOW)
        except asyncio.CancelledError:
            state["cancelled"] += 1
            raise
        state["finished"] += 1
        return '{"call": "a"}'

    rt = Runtime(call=model)
    if way == "make":
        _timed_out(lambda: decision.make("pick", OPTIONS, runtime=rt, max_retries=0,
                                         timeout_s=BUDGET))
    else:
        _timed_out(lambda: asyncio.run(decision.amake("pick", OPTIONS, runtime=rt,
                                                      max_retries=0, timeout_s=BUDGET)))
    assert state == {"started": 1, "cancelled": 1, "finished": 0}


@pytest.mark.parametrize("way", ["make", "amake"])
def test_a_sync_models_late_reply_is_not_used(way):
    calls = []

    def model(content):      # takes no timeout: it cannot be told about the budget
        calls.append(content)
        time.sleep(BUDGET * 3)
        return '{"call": "a"}'

    rt = Runtime(call=model)
    if way == "make":
        _timed_out(lambda: decision.make("pick", OPTIONS, runtime=rt, max_retries=0,
                                         timeout_s=BUDGET))
    else:
        _timed_out(lambda: asyncio.run(decision.amake("pick", OPTIONS, runtime=rt,
                                                      max_retries=0, timeout_s=BUDGET)))
    assert len(calls) == 1


def test_a_scripted_model_with_a_latency_over_the_budget():
    rt = ScriptedRuntime(['{"call": "a"}'], latency=SLOW)
    _timed_out(lambda: decision.make("pick", OPTIONS, runtime=rt, max_retries=0,
                                     timeout_s=BUDGET))


@pytest.mark.parametrize("way", ["make", "amake"])
def test_a_realtime_replay_is_capped_by_the_budget(tmp_path, way):
    from openprogram.runtimes import RecordingRuntime
    path = tmp_path / "slow.jsonl"
    rec = RecordingRuntime(ScriptedRuntime(['{"call": "a"}']), path)
    decision.make("pick", OPTIONS, runtime=rec)
    lines = path.read_text().splitlines()
    call = json.loads(lines[1])
    call["duration_s"] = SLOW           # as a slow model's recording says
    path.write_text("\n".join([lines[0], json.dumps(call)]) + "\n")
    rt = ReplayRuntime(path, realtime=True)
    if way == "make":
        _timed_out(lambda: decision.make("pick", OPTIONS, runtime=rt, max_retries=0,
                                         timeout_s=BUDGET))
    else:
        _timed_out(lambda: asyncio.run(decision.amake("pick", OPTIONS, runtime=rt,
                                                      max_retries=0, timeout_s=BUDGET)))
    # without a budget the same replay answers: the cap is the budget's
    assert decision.make("pick", OPTIONS, runtime=ReplayRuntime(path)) == "A"


@pytest.mark.parametrize("way", ["make", "amake"])
def test_a_provider_call_that_answers_too_late(server, make_runtime, way):
    server.responder = lambda body: text('{"call": "a"}', delay=SLOW)
    rt = make_runtime()
    if way == "make":
        _timed_out(lambda: decision.make("pick", OPTIONS, runtime=rt, max_retries=0,
                                         timeout_s=BUDGET))
    else:
        _timed_out(lambda: asyncio.run(decision.amake("pick", OPTIONS, runtime=rt,
                                                      max_retries=0, timeout_s=BUDGET)))


@pytest.mark.parametrize("way", ["make", "amake"])
def test_a_model_that_stops_itself_at_the_budget_keeps_its_partial_reply(way):
    """A model given the timeout stops itself and keeps what it wrote (as the provider and
    local runtimes do): the bound leaves it the moment to do so, so its error, partial reply
    included, is the one on the trace."""
    from openprogram.runtimes import ModelCallError

    async def model(content, timeout=None):
        await asyncio.sleep(timeout)
        raise ModelCallError("stopped after 12 tokens; they are kept as the partial reply",
                             partial='{"call": "a"', kind="timeout")

    rt = Runtime(call=model)
    run = (lambda: decision.make("pick", OPTIONS, runtime=rt, max_retries=0, timeout_s=BUDGET)) \
        if way == "make" else (lambda: asyncio.run(decision.amake(
            "pick", OPTIONS, runtime=rt, max_retries=0, timeout_s=BUDGET)))
    with pytest.raises(DecisionError) as info:
        run()
    (att,) = info.value.trace.attempts
    assert att.error_kind == "timeout" and "stopped after 12 tokens" in att.error_message
    assert att.reply == '{"call": "a"'
