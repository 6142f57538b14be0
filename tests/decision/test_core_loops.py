"""Sync decisions whose options await something that belongs to an event loop (issue 38).

An MCP session, an open connection, a queue a task serves: each belongs to the loop it was
opened on, and only that loop can finish an await on it. The sync API used to run every
awaitable of an option on a worker thread's own loop and join that thread, so an option awaiting
the caller's own running loop (a notebook: the session opened with top-level `await`, then a
sync `make`) waited forever, `timeout_s` included. These tests use a small service that lives on
one loop, as a session does: requests go through a queue that a task of that loop answers.

Each scenario runs in a thread of the test's own, joined with a generous bound: a deadlock fails
the test instead of hanging the suite. Nothing asserts how long anything took; work is counted
(requests served, requests cancelled)."""
from __future__ import annotations

import asyncio
import threading

import pytest
from corehelp import pick
from deadlock import finishes as _finishes  # tests/support

from openprogram import DecisionError, UsageError, decision
from openprogram.base.model_protocol import on_loop
from openprogram.runtimes import ScriptedRuntime

HARNESS_BOUND_S = 60  # only a deadlock gets near this: the scenarios themselves take milliseconds


def finishes(scenario):
    return _finishes(scenario, HARNESS_BOUND_S)


class LoopService:
    """A resource of one event loop: `ask(x)` puts a request on a queue that a task of that loop
    serves, and waits for the task's answer."""

    def __init__(self, loop, *, answer=True):
        self.loop, self.answer = loop, answer
        self.served = self.cancelled = 0
        self.queue = asyncio.Queue()
        self.task = None

    def start(self):
        self.task = self.loop.create_task(self._serve())

    async def _serve(self):
        while True:
            x, fut = await self.queue.get()
            if self.answer and not fut.done():  # an asker that gave up has cancelled it
                self.served += 1
                fut.set_result(f"answer to {x}")

    async def ask(self, x):
        # as an MCP session's request does: the answer comes back on the asker's own loop, from
        # the server's task, which only the service's loop runs
        fut = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((x, fut))
        try:
            return await fut
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


class LoopThread:
    """An event loop running in a thread of its own, with a LoopService on it."""

    def __init__(self, **kw):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.service = asyncio.run_coroutine_threadsafe(self._make(kw), self.loop).result()

    async def _make(self, kw):
        s = LoopService(asyncio.get_running_loop(), **kw)
        s.start()
        return s

    def close(self):
        # the server task ends on its loop first: a task destroyed pending with its loop would
        # be reported from the garbage collector, at any later moment of the run
        async def stop():
            self.service.task.cancel()
            await asyncio.gather(self.service.task, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(HARNESS_BOUND_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def other_loop():
    lt = LoopThread()
    yield lt
    lt.close()


def test_sync_make_inside_a_running_loop_is_ended_by_timeout_s_when_the_option_waits_on_it():
    # The case: the service lives on the loop this thread runs (the kernel's loop), a
    # sync make inside it. Nothing says where the awaitable belongs, so it cannot complete; but
    # timeout_s ends it, as a decision that ran out of time, with its trace.
    async def cell():
        service = LoopService(asyncio.get_running_loop())
        service.start()
        await asyncio.sleep(0)  # the server task is waiting on its queue, as a session's reader is

        async def lookup(order_id: int) -> str:
            return await service.ask(order_id)
        rt = ScriptedRuntime([pick("lookup", {"order_id": 7})])
        with pytest.raises(DecisionError) as info:
            decision.make("Which order?", [lookup], runtime=rt, timeout_s=0.5)
        return service, info.value

    service, err = finishes(lambda: asyncio.run(cell()))
    assert err.kind == "timeout"
    assert "amake" in err.message and "on_loop" in err.message  # what to do instead
    assert err.trace.status == "failed" and err.trace.attempts[0].chosen == "lookup"


def test_sync_make_runs_an_awaitable_bound_to_another_threads_loop_on_that_loop(other_loop):
    service = other_loop.service

    def lookup(order_id: int):
        return on_loop(service.ask(order_id), service.loop)

    def with_no_loop():  # a script
        rt = ScriptedRuntime([pick("lookup", {"order_id": 7})])
        return decision.make("Which order?", [lookup], runtime=rt, timeout_s=30)

    async def cell():  # a notebook cell, its own loop running in this thread
        rt = ScriptedRuntime([pick("lookup", {"order_id": 8})])
        return decision.make("Which order?", [lookup], runtime=rt, timeout_s=30)

    async def async_cell():
        rt = ScriptedRuntime([pick("lookup", {"order_id": 9})])
        return await decision.amake("Which order?", [lookup], runtime=rt, timeout_s=30)

    assert finishes(with_no_loop) == "answer to 7"
    assert finishes(lambda: asyncio.run(cell())) == "answer to 8"
    assert finishes(lambda: asyncio.run(async_cell())) == "answer to 9"
    assert service.served == 3


def test_amake_on_the_loop_an_awaitable_is_bound_to_awaits_it_there():
    async def main():
        service = LoopService(asyncio.get_running_loop())
        service.start()

        def lookup(order_id: int):
            return on_loop(service.ask(order_id), service.loop)
        rt = ScriptedRuntime([pick("lookup", {"order_id": 3})])
        return await decision.amake("Which order?", [lookup], runtime=rt), service.served
    assert finishes(lambda: asyncio.run(main())) == ("answer to 3", 1)


def test_an_awaitable_bound_to_the_loop_a_sync_call_blocks_is_refused_at_once():
    # It could only deadlock: the loop that must finish it is the one this sync call stops.
    async def cell():
        service = LoopService(asyncio.get_running_loop())
        service.start()
        started = []

        async def ask(order_id):
            started.append(order_id)
            return await service.ask(order_id)

        def lookup(order_id: int):
            return on_loop(ask(order_id), service.loop)
        rt = ScriptedRuntime([pick("lookup", {"order_id": 7})])
        with pytest.raises(UsageError) as info:
            decision.make("Which order?", [lookup], runtime=rt)
        return info.value, started, service.served

    err, started, served = finishes(lambda: asyncio.run(cell()))
    assert "amake" in str(err) and "this thread" in str(err)
    assert started == [] and served == 0  # the awaitable never ran
    assert decision.last_trace().status == "failed"


def test_timeout_s_ends_a_wait_on_another_threads_loop_and_cancels_it_there():
    lt = LoopThread(answer=False)  # a server that never answers
    try:
        service = lt.service

        def lookup(order_id: int):
            return on_loop(service.ask(order_id), service.loop)

        def with_no_loop():
            rt = ScriptedRuntime([pick("lookup", {"order_id": 7})])
            with pytest.raises(DecisionError) as info:
                decision.make("Which order?", [lookup], runtime=rt, timeout_s=0.3)
            return info.value
        err = finishes(with_no_loop)
        assert err.kind == "timeout" and err.trace.status == "failed"
        # the request was cancelled on its own loop: nothing of it is left waiting there
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), lt.loop).result(HARNESS_BOUND_S)
        assert service.cancelled == 1
    finally:
        lt.close()


def test_timeout_s_ends_an_async_option_on_the_async_path():
    async def main():
        never = asyncio.Event()

        async def wait_forever(note: str) -> str:
            await never.wait()
            return note
        rt = ScriptedRuntime([pick("wait_forever", {"note": "x"})])
        with pytest.raises(DecisionError) as info:
            await decision.amake("Pick.", [wait_forever], runtime=rt, timeout_s=0.3)
        return info.value
    err = finishes(lambda: asyncio.run(main()))
    assert err.kind == "timeout" and err.trace.status == "failed"
