"""The evaluation runner: many decisions at once, on threads or one event loop, with a clean Ctrl-C.

Rows are pulled one at a time from the input table as workers free up — `concurrency` threads
for a synchronous model, or as many tasks on one event loop (in a worker thread, or the caller's
own with `aevaluate`) for an async one — so a million-row input is never expanded up front. Each
row runs in its own copy of the caller's context (the bound Runtime, Agent and scoped observers
hold in every row). A finished row is handed to the `Board`, which passes it to the result's
sink (and so to the journal) and keeps the counts the progress bar shows: rows done, rows per
second, failures so far and the retry rate. Ctrl-C stops the run at once: rows not started never
start, finished rows are kept, rows in flight make no further model call and are "cancelled".
The rows share one `Plan` (the decision's settings checked and its menu rendered once), and a
row's trace comes from its decision directly, not through an observer.
"""
from __future__ import annotations

import contextvars
import threading
import time

from ..base.errors import OpenProgramError
from ..base.model_protocol import ModelCaller as Runtime
from ..base.model_protocol import run_sync
from ..decision.entry import Plan
from ..decision.loop import attempt_gate
from ..decision.options import Option
from ..decision.settings import Settings
from ..trace.decision_trace import DecisionTrace

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, TypeVar
    R = TypeVar("R")

__all__ = ["Row", "Board", "run", "arows", "interrupted"]


class _Cancelled(BaseException):
    """Raised inside a worker (by the run's attempt gate, before a model call) once the run is
    interrupted, so an in-flight decision makes no further model calls. A BaseException, so a
    picked function's `except Exception` does not swallow it."""


class RowInterrupted(OpenProgramError, RuntimeError):
    """A row raised KeyboardInterrupt; the run stops as on Ctrl-C."""


class Row:
    """What one worker brings back; everything else is derived from the trace later."""
    __slots__ = ("status", "trace", "result", "error", "duration_s")

    def __init__(self):
        self.status = "running"
        self.trace: DecisionTrace | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.duration_s: float | None = None


def plan(menu: Sequence[Option], rt: Runtime, settings: Settings | Mapping[str, Any],
         sync: bool) -> Plan:
    """The rows' decision settings (a `Settings`, or the keywords of `make`), checked once
    against their menu and runtime (raises what `make` would)."""
    where = "decision.make" if sync else "decision.amake"
    if not isinstance(settings, Settings):
        settings = Settings.of(settings, where)
    return Plan(menu, settings, where=where, runtime=rt)


def shared_plan(menu: Sequence[Option], rt: Runtime, settings: Settings, sync: bool) -> Plan | None:
    """`plan`, or None when the settings do not pass, so that each row fails with the error its
    own decision raises, as `make` would."""
    try:
        return plan(menu, rt, settings, sync)
    except Exception:
        return None


def stopping(stop: threading.Event) -> Callable[[], None]:
    """The attempt gate of a run's rows: once the run is stopped, a decision of one of its rows
    (or a decision a picked function makes inside one) makes no further model call. The gate
    of an enclosing run still holds (an evaluation run inside a row of another)."""
    outer = attempt_gate.get()

    def gate() -> None:
        if stop.is_set():
            raise _Cancelled()
        if outer is not None:
            outer()
    return gate


async def decide(text: str, menu: Sequence[Option], rt: Runtime, settings: Settings,
                 stop: threading.Event, sync: bool, prepared: Plan | None = None) -> Row | None:
    """One input's decision: on a worker thread (`sync`, driven by run_sync) or on an event
    loop. None when the run stopped first. The row's context carries the run's attempt gate
    (`stopping`)."""
    if stop.is_set():
        return None
    row = Row()
    # The row's own trace comes from its decision as it starts (a decision a picked function
    # makes inside it is not the row's): no observer, so no event is built for the row.
    box: list[DecisionTrace] = []
    t0 = time.perf_counter()
    try:
        if prepared is None:
            prepared = plan(menu, rt, settings, sync)
        if sync:
            row.result = run_sync(prepared.run(text, sync=True, keep=box))
        else:
            row.result = await prepared.run(text, sync=False, keep=box)
        row.status = "resolved"
    except Exception as exc:  # DecisionError, a picked function's error: this row only
        row.status, row.error = "failed", exc
    except _Cancelled:
        return None
    except KeyboardInterrupt:
        if sync:
            raise
        raise RowInterrupted() from None  # inside a task it would escape the event loop
    row.duration_s = time.perf_counter() - t0
    row.trace = box[0] if box else getattr(row.error, "trace", None)
    return row


class Board:
    """Where rows land as they finish, from any thread, and what the progress bar reads. Once
    closed (the run stopped) a row that finishes late is not taken: it stays "cancelled", as the
    result returned at the stop says. `sink(i, extra, row)` takes each finished row."""

    def __init__(self, sink: Callable, total: int | None, progress: Any, desc: str | None,
                 done_before: int = 0, failed_before: int = 0, retried_before: int = 0,
                 waiting: Callable[[], str | None] | None = None):
        self.sink = sink
        self.waiting = waiting  # why the run waits now (a rate limit), for the bar
        self._note: str | None = None
        self.finished, self.failed, self.retried = done_before, failed_before, retried_before
        self._shown = done_before
        self._start = done_before
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self.bar = _progress_bar(total, progress, desc, done_before)

    def put(self, i: int, extra: Any, row: Row | None) -> None:
        with self._lock:
            if self._closed or row is None:
                return
            self.sink(i, extra, row)
            self.finished += 1
            self.failed += row.status == "failed"
            self.retried += row.trace is not None and len(row.trace.attempts) > 1

    def fail(self, exc: BaseException) -> None:
        """A BaseException out of a row (a KeyboardInterrupt raised inside one included), or
        out of the inputs (a bad row of a streamed table)."""
        with self._lock:
            if self.error is None:
                self.error = exc
        self.done.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def show(self) -> None:
        note = self.waiting() if self.waiting is not None else None
        if self.bar is None or (self.finished == self._shown and note == self._note):
            return
        post = {}
        if self.finished:
            post = {"failed": self.failed,
                    "retried": f"{self.retried / self.finished:.0%}"}
        if note:
            post["waiting"] = note
        if post or self._note:
            self.bar.set_postfix(post, refresh=self.finished == self._shown)
        self._note = note
        self.bar.update(self.finished - self._shown)
        self._shown = self.finished


def _progress_bar(total: int | None, progress: Any, desc: str | None, initial: int = 0):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm  # a widget in notebooks, text on a terminal
    except ImportError:
        # The core install has no tqdm (the core depends on nothing): a plain line instead
        bar = _TextProgress(total, initial)
    else:
        # tqdm's own rate (rows/s) counts from `initial`: rows a journal already held are not
        # counted as done in no time
        bar = tqdm(total=total, initial=initial, unit="decision", leave=True)
    if desc:
        # Never as the first `desc`: tqdm's notebook bar shows that one unescaped (as HTML), and
        # a label is the user's text (a compare() variant name). set_description_str escapes.
        bar.set_description_str(f"{desc}: ")
    return bar


class _TextProgress:
    """The progress bar's stand-in where tqdm is not installed (the core install): a line on
    stderr at every tenth of the run (every 1,000 rows when the total is unknown) and one at
    the end, with the same counts tqdm's bar shows."""

    def __init__(self, total: int | None, initial: int = 0):
        self.total, self.n, self.desc, self.post = total, initial, "", {}
        self._step = max(1, total // 10) if total else 1000
        self._next = initial + self._step

    def set_description_str(self, desc: str) -> None:
        self.desc = desc

    def set_postfix(self, post: dict, refresh: bool = True) -> None:
        self.post = dict(post)

    def update(self, n: int) -> None:
        self.n += n
        if n and self.n >= self._next:
            self._next = self.n + self._step
            self._line()

    def close(self) -> None:
        self._line()

    def _line(self) -> None:
        import sys
        of = f"/{self.total}" if self.total is not None else ""
        extra = "".join(f", {k}={v}" for k, v in self.post.items())
        print(f"{self.desc}{self.n}{of} decisions{extra}", file=sys.stderr, flush=True)


class _Pool:
    """Rows on `concurrency` threads, each pulling the next row when it is free: for runtimes
    whose model is synchronous."""

    def __init__(self, items, menu, rt, settings, concurrency, stop, board):
        self.items, self.stop_event, self.board = items, stop, board
        self._lock = threading.Lock()
        self._left = concurrency
        ctx = contextvars.copy_context()
        ctx.run(attempt_gate.set, ctx.run(stopping, stop))
        self.threads = [threading.Thread(
            target=self._work, args=(ctx, menu, rt, settings), daemon=True,
            name=f"openprogram-evaluate_{k}") for k in range(concurrency)]
        for t in self.threads:
            t.start()

    def _next(self):
        with self._lock:
            if self.stop_event.is_set():
                return None
            return next(self.items, None)

    def _work(self, ctx, menu, rt, settings) -> None:
        prepared = shared_plan(menu, rt, settings, sync=True)
        try:
            while True:
                item = self._next()
                if item is None:
                    return
                i, text, extra = item
                # One copy per row: each row must see the caller's Runtime binding, Agent and
                # scoped observers, and nothing an earlier row set
                row = ctx.copy().run(run_sync, decide(text, menu, rt, settings,
                                                      self.stop_event, sync=True,
                                                      prepared=prepared))
                self.board.put(i, extra, row)
        except BaseException as exc:
            self.board.fail(exc)
        finally:
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self.board.done.set()

    def stop(self) -> None:
        # rows not started never start; in-flight rows stop before their next model call (a
        # thread cannot be killed, so their current call ends in the background)
        pass

    def finish(self) -> None:
        for t in self.threads:
            t.join()


class _Loop:
    """Rows as tasks on an event loop of their own, in one worker thread, for runtimes whose
    model is async: a hundred rows in flight cost a hundred tasks, not a hundred threads. The
    caller's thread keeps the progress bar and Ctrl-C (and it may be running a loop of its own,
    as every notebook cell does)."""

    def __init__(self, items, menu, rt, settings, concurrency, stop, board):
        self.loop = self.task = None
        ctx = contextvars.copy_context()
        self.thread = threading.Thread(
            target=self._main, name="openprogram-evaluate-loop", daemon=True,
            args=(items, menu, rt, settings, concurrency, stop, board, ctx))
        self.started = threading.Event()
        self.thread.start()
        self.started.wait()

    def _main(self, items, menu, rt, settings, concurrency, stop, board, ctx) -> None:
        import asyncio
        self.loop = loop = asyncio.new_event_loop()
        try:
            self.task = loop.create_task(
                arows(items, menu, rt, settings, concurrency, stop, ctx, board.put))
            self.started.set()
            if loop.run_until_complete(self.task):
                board.fail(KeyboardInterrupt("a row of evaluate raised KeyboardInterrupt"))
        except BaseException as exc:  # the task cancelled by stop(), or a bug: never lost
            board.fail(exc)
        finally:
            self.started.set()
            board.done.set()
            try:
                # tasks a runtime started on this loop (the batch path's rounds) end with it,
                # running their own cleanup (an interrupted batch is cancelled at the provider)
                # (first those already cancelled, whose cleanup may start tasks of its own)
                for pick in (lambda t: t.cancelling(), lambda t: True):
                    left = [t for t in asyncio.all_tasks(loop) if pick(t)]
                    for t in left:
                        if not t.cancelling():
                            t.cancel()
                    if left:
                        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
                # an async model may have used asyncio.to_thread
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    def stop(self) -> None:
        # Cancelling the rows in flight ends their model calls now and finishes their traces
        # as failed; it takes a moment, so it is waited for.
        if self.task is not None and not self.task.done():
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)

    def finish(self) -> None:
        self.thread.join()


async def arows(items: Iterator, menu: Sequence[Option], rt: Runtime, settings: Settings,
                concurrency: int, stop: threading.Event, ctx: contextvars.Context,
                on_row: Callable[[int, Any, Row | None], None]) -> bool:
    """Every row of `items` (`(i, text, extra)`) as a task on the running loop, at most
    `concurrency` in flight, each in its own copy of `ctx`; `on_row(i, extra, row)` as each
    finishes. Returns True when a row raised KeyboardInterrupt (the run stops: rows in flight
    are cancelled). Cancelling this coroutine cancels the rows in flight, whose traces finish
    as failed."""
    import asyncio
    loop = asyncio.get_running_loop()
    ctx = ctx.copy()
    ctx.run(attempt_gate.set, ctx.run(stopping, stop))
    prepared = shared_plan(menu, rt, settings, sync=False)

    async def worker() -> None:
        for i, text, extra in items:
            if stop.is_set():
                return
            # ctx.run: the task copies the context current at its creation
            on_row(i, extra, await ctx.run(loop.create_task,
                                           decide(text, menu, rt, settings, stop, sync=False,
                                                  prepared=prepared)))

    workers = [loop.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*workers)
        return False
    except RowInterrupted:
        return True
    finally:
        stop.set()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def run(items: Iterator, menu: Sequence[Option], rt: Runtime, *, concurrency: int,
        settings: Settings, board: Board) -> tuple[float, bool]:
    """Run every row of `items`; returns the wall time and whether the run was interrupted.
    KeyboardInterrupt is caught here and reported, never lost. Rows run as tasks on an event
    loop when the runtime's model is async (`Runtime.async_native`), else on threads."""
    stop = threading.Event()
    kind = _Loop if rt.async_native else _Pool
    runner = None
    was_interrupted = False
    t0 = time.perf_counter()
    try:
        runner = kind(items, menu, rt, settings, concurrency, stop, board)
        while not board.done.wait(0.1):  # a timed wait, so Ctrl-C reaches this thread promptly
            board.show()
        if board.error is not None:  # a BaseException out of a row, or a bad input row
            raise board.error
    except KeyboardInterrupt:
        was_interrupted = True
    except BaseException:
        halt(stop, board, runner)
        raise
    finally:
        wall = time.perf_counter() - t0
        board.show()
        if board.bar is not None:
            board.bar.close()
    if was_interrupted:
        halt(stop, board, runner)
    else:
        runner.finish()
    return wall, was_interrupted


def halt(stop: threading.Event, board: Board, runner: Any) -> None:
    """Stop a run: rows not started never start, what finished is kept, the rest is
    "cancelled"."""
    stop.set()
    board.close()
    if runner is not None:
        runner.stop()


def interrupted(result: R, on_interrupt: str, exc_text: str) -> R:
    import warnings
    if on_interrupt == "raise":
        ki = KeyboardInterrupt(exc_text)
        setattr(ki, "result", result)  # what finished travels with the interrupt
        ki.add_note("the partial result is on this exception's .result")
        raise ki
    warnings.warn(exc_text + "; the partial result is returned (unfinished rows have status "
                  "'cancelled')", RuntimeWarning, stacklevel=3)
    return result
