"""Async all the way: amake, aagent, Runtime.aexec, async models, async options and tools, the
sync API inside a running event loop, cancellation. Concurrency is bounded by counting calls in
flight, never by timing."""
from __future__ import annotations

import asyncio
import inspect

import pytest

import openprogram
from openprogram import DecisionError, Runtime, aagent, decision
from openprogram.runtimes import ScriptedRuntime, ToolCall


class AsyncModel:
    """An async model function that counts how many of its calls overlap."""

    def __init__(self, reply: str, seconds: float = 0.05):
        self.reply, self.seconds = reply, seconds
        self.in_flight = self.peak = self.calls = 0

    async def __call__(self, content):
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.seconds)
            return self.reply
        finally:
            self.in_flight -= 1


def test_fifty_amakes_on_one_loop_overlap():
    model = AsyncModel('{"call": "yes"}')
    rt = Runtime(call=model)

    async def main():
        return await asyncio.gather(*(decision.amake("Pick.", ["yes", "no"], runtime=rt)
                                      for _ in range(50)))
    assert asyncio.run(main()) == ["yes"] * 50
    assert model.calls == 50 and model.peak == 50  # all fifty were waiting at once


def test_amake_awaits_an_async_option_and_records_the_trace():
    async def lookup(order_id: int) -> str:
        await asyncio.sleep(0)
        return f"order {order_id} shipped"

    rt = ScriptedRuntime(['{"call": "lookup", "args": {"order_id": 7}}'], stream_chunk=4)
    chunks = []
    with openprogram.observe(lambda e: e.kind == "reply_chunk" and chunks.append(e.data["text"])):
        result = asyncio.run(decision.amake("Pick.", [lookup], runtime=rt))
    assert result == "order 7 shipped"
    trace = decision.last_trace()
    assert trace.status == "resolved" and trace.result == "order 7 shipped"
    assert "".join(chunks) == trace.attempts[0].reply


def test_sync_make_inside_a_running_loop_finishes_async_models_and_options():
    async def done(note: str) -> dict:
        await asyncio.sleep(0.01)
        return {"note": note}

    model = AsyncModel('{"call": "done", "args": {"note": "ok"}}', seconds=0.01)

    async def cell():  # what a notebook cell is: code running inside the kernel's event loop
        asyncio.get_running_loop()
        return decision.make("Pick.", {"done": done}, runtime=Runtime(call=model))
    result = asyncio.run(cell())
    assert not inspect.isawaitable(result) and result == {"note": "ok"}
    assert model.calls == 1


def test_sync_make_with_an_async_model_and_no_loop():
    rt = Runtime(call=AsyncModel('{"call": "no"}', seconds=0))
    assert decision.make("Pick.", ["yes", "no"], runtime=rt) == "no"


def test_an_async_model_that_fails_is_a_decision_error_with_its_trace():
    async def broken(content):
        raise ConnectionError("reset by peer")

    with pytest.raises(DecisionError) as info:
        asyncio.run(decision.amake("Pick.", ["a"], runtime=Runtime(call=broken)))
    assert info.value.kind == "model_error"
    assert "ConnectionError: reset by peer" in info.value.trace.attempts[0].error_message


def test_cancelling_an_amake_finishes_its_trace_as_failed():
    model = AsyncModel('{"call": "a"}', seconds=30)
    seen = []

    async def main():
        with openprogram.observe(seen.append):
            task = asyncio.create_task(decision.amake("Pick.", ["a"], runtime=Runtime(call=model)))
            while model.in_flight == 0:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    asyncio.run(main())
    trace = seen[0].trace
    assert trace.status == "failed" and isinstance(trace.error, asyncio.CancelledError)
    assert [e.kind for e in seen][-1] == "decision_failed"
    assert decision.last_trace() is trace


def test_aagent_runs_async_tools_then_resolves_the_choice():
    async def weather(city: str) -> str:
        await asyncio.sleep(0)
        return f"sunny in {city}"

    rt = ScriptedRuntime([ToolCall("weather", {"city": "Oslo"}),
                          'It is sunny.\n```json\n{"call": "go_out"}\n```'])
    result = asyncio.run(aagent("Plan the day.", tools=[weather],
                                options={"go_out": "OUT", "stay_in": "IN"}, runtime=rt))
    assert result == "OUT"
    trace = decision.last_trace()
    assert [t.result for t in trace.tool_rounds] == ["sunny in Oslo"]


def test_sync_agent_runs_an_async_tool_to_completion():
    async def weather(city: str) -> str:
        return f"rain in {city}"

    rt = ScriptedRuntime([ToolCall("weather", {"city": "Bergen"}), "Take an umbrella."])
    assert openprogram.agent("Plan.", tools=[weather], runtime=rt) == "Take an umbrella."
    tool_result = rt.calls[1].messages[-1]["content"]
    assert tool_result == "rain in Bergen"
