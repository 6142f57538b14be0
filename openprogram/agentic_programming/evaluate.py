"""Prototyping at scale: run one option set over a table of inputs, and line option sets up.

One decision shows how the mechanism works; an option set is only designed well once it has been
run over many inputs. `evaluate` fills a prompt template from each row of a DataFrame (or a list of
dicts), runs the decisions on a thread pool, or as tasks on one event loop when the model is
async (`aevaluate` runs them on the caller's own loop) — each row in its own copy of the caller's
context, so the bound Runtime and scoped observers hold in every row — and returns an
`EvaluationResult`: one row per input (the pick, its arguments, the result or error, attempts,
error kinds, time, tokens) and the summaries that judge an option set (pick distribution, retry
and failure rates, accuracy and a confusion table against expected picks). `compare` runs two or
more option sets, or runtimes, over the same inputs and puts their picks side by side. A failing
input never stops a run; Ctrl-C keeps what finished. pandas and tqdm are imported only inside
functions, so the core stays standard-library-only at import time.
"""
from __future__ import annotations

import contextvars
import functools
from dataclasses import dataclass
import math
import threading
import time
import warnings
from collections import Counter
from collections.abc import Mapping
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Callable

from .loop import amake, check_reask, check_validate, make, max_attempts as _max_attempts
from .model import ModelCaller as Runtime, check_modes, check_timeout, resolve_runtime, run_sync
from .modes import get_mode
from .options import Option, check_context, normalize
from .trace import DecisionTrace, TraceEvent, _safe_repr, batch, observe, trace_view

__all__ = ["evaluate", "aevaluate", "compare", "EvaluationResult", "ComparisonResult"]

#: The pick column's label for a finished row whose model never made a valid pick.
NO_PICK = "(no pick)"

_ROW_COLUMNS = ["chosen", "args", "result", "error", "attempts", "error_kinds", "duration_s",
                "tokens_in", "tokens_out", "status"]


class _Cancelled(BaseException):
    """Raised inside a worker (from its observer, before a model call) once the run is
    interrupted, so an in-flight decision makes no further model calls. A BaseException, so
    neither the core's observer guard nor a picked function's `except Exception` swallows it."""


class _Row:
    """What one worker brings back. Everything else in the frame is derived from the trace later,
    off the hot path."""
    __slots__ = ("status", "trace", "result", "error", "duration_s")

    def __init__(self):
        self.status = "running"
        self.trace: DecisionTrace | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.duration_s: float | None = None


# ---------------------------------------------------------------------------------------------
# Checking the inputs (everything here runs before any model call)
# ---------------------------------------------------------------------------------------------


def _records(inputs: Any) -> tuple[list[str], list[Mapping]]:
    """The input rows as mappings, and the column names in first-seen order."""
    if hasattr(inputs, "columns") and hasattr(inputs, "to_dict"):  # a DataFrame, no pandas import
        if not inputs.columns.is_unique:
            dup = sorted({str(c) for c in inputs.columns[inputs.columns.duplicated()]})
            raise ValueError(f"the inputs DataFrame has duplicate columns {dup}; rename them so "
                             f"each template field names one column")
        return list(inputs.columns), inputs.to_dict("records")
    if isinstance(inputs, (str, bytes, Mapping)) or not hasattr(inputs, "__iter__") or \
            hasattr(inputs, "to_frame"):
        hint = (" (for a pandas Series, use series.to_frame())"
                if hasattr(inputs, "to_frame") else "")
        raise TypeError(f"inputs must be a pandas DataFrame or a list of dicts (one per input), "
                        f"got {type(inputs).__name__}{hint}")
    records = list(inputs)
    columns: dict[Any, None] = {}
    for i, row in enumerate(records):
        if not isinstance(row, Mapping):
            raise TypeError(f"inputs[{i}] is a {type(row).__name__}, not a dict; every input "
                            f"is a dict of the columns the prompt template uses")
        columns.update(dict.fromkeys(row))
    return list(columns), records


def _fill(prompt: Any, columns: list, records: list[Mapping]) -> list[str]:
    """The prompt of every row: `prompt.format_map(row)`. A bad template or a missing column
    fails here, naming the column and the row, before any model call."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str template such as 'Route this: {{message}}', got "
                        f"{type(prompt).__name__}")
    texts = []
    for i, row in enumerate(records):
        try:
            texts.append(prompt.format_map(row))
        except KeyError as exc:
            have = ", ".join(map(repr, columns)) or "none"
            raise ValueError(
                f"the prompt template uses {{{exc.args[0]}}} but input row {i} has no column "
                f"{exc.args[0]!r} (the columns are {have}); add the column, or write a literal "
                f"brace as {{{{ or }}}}") from None
        except (IndexError, ValueError, AttributeError, TypeError) as exc:
            raise ValueError(
                f"the prompt template could not be filled from input row {i}: {exc}. Fields are "
                f"named after columns, e.g. {{message}}; write a literal brace as {{{{ or }}}}"
            ) from None
    return texts


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _expected(expected: Any, columns: list, records: list[Mapping],
              names: list[str]) -> list[str | None] | None:
    """The expected option name of each row (None where unknown), checked against `names`."""
    if expected is None:
        return None
    if isinstance(expected, str):
        if expected not in columns:
            raise ValueError(f"expected={expected!r} is not a column of the inputs (the columns "
                             f"are {', '.join(map(repr, columns))}); pass a column name or a list "
                             f"of expected option names, one per input")
        values = [row.get(expected) for row in records]
    else:
        try:
            values = list(expected)
        except TypeError:
            raise TypeError(f"expected must be a column name or a list of option names, got "
                            f"{type(expected).__name__}") from None
        if len(values) != len(records):
            raise ValueError(f"expected has {len(values)} items but there are {len(records)} "
                             f"inputs; give one expected option name per input (None if unknown)")
    values = [None if _is_missing(v) else v for v in values]
    known = set(names)
    bad = [v for v in values if v is not None and (not isinstance(v, str) or v not in known)]
    if bad:
        shown = ", ".join(sorted({repr(v) for v in bad})[:5])
        raise ValueError(f"expected names {shown} are not options of the option set (the "
                         f"options are {', '.join(names)}); fix the spelling, or use None for "
                         f"inputs with no expected pick")
    return values


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
    return value


def _check_on_interrupt(value: Any) -> None:
    if value not in ("return", "raise"):
        raise ValueError(f"on_interrupt must be 'return' (give back what finished) or 'raise' "
                         f"(re-raise KeyboardInterrupt with the partial result on its .result), "
                         f"got {value!r}")


# ---------------------------------------------------------------------------------------------
# Running: rows on a thread pool or as tasks on an event loop, a copied context per row, a
# progress bar, a clean Ctrl-C
# ---------------------------------------------------------------------------------------------


async def _decide(text: str, menu: list[Option], rt: Runtime, settings: dict,
                  stop: threading.Event, sync: bool) -> _Row | None:
    """One input's decision, in a copy of the caller's context: on a worker thread (`sync`,
    driven by run_sync) or as a task on an event loop. None when the run stopped first."""
    if stop.is_set():
        return None
    row = _Row()
    box: list[DecisionTrace] = []

    # A scoped observer, not last_trace(): last_trace is process-wide and other rows finish
    # decisions at the same time. The first decision started in this context is this row's own;
    # later ones are nested decisions made by a picked function.
    def capture(event: TraceEvent) -> None:
        if not box:
            box.append(event.trace)
        elif event.kind == "attempt_sent" and stop.is_set():
            raise _Cancelled()

    t0 = time.perf_counter()
    with observe(capture):
        try:
            if sync:
                row.result = make(text, menu, runtime=rt, **settings)
            else:
                row.result = await amake(text, menu, runtime=rt, **settings)
            row.status = "resolved"
        except Exception as exc:  # DecisionError, a picked function's error: this row only
            row.status, row.error = "failed", exc
        except _Cancelled:
            return None
        except KeyboardInterrupt:
            if sync:
                raise
            raise _RowInterrupted() from None  # inside a task it would escape the event loop
    row.duration_s = time.perf_counter() - t0
    row.trace = box[0] if box else getattr(row.error, "trace", None)
    return row


class _Board:
    """Where rows land as they finish, from any thread, and what the progress bar reads. Once
    closed (the run stopped) a row that finishes late is not taken: its status stays
    "cancelled", as the result returned at the stop says."""

    def __init__(self, n: int, progress: Any, desc: str | None):
        self.rows: list[_Row | None] = [None] * n
        self.finished = self.failed = self._shown = 0
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self.bar = _progress_bar(n, progress, desc)

    def put(self, i: int, row: _Row | None) -> None:
        with self._lock:
            if self._closed or row is None:
                return
            self.rows[i] = row
            self.finished += 1
            self.failed += row.status == "failed"
            if self.finished == len(self.rows):
                self.done.set()

    def fail(self, exc: BaseException) -> None:
        """A BaseException out of a row (a KeyboardInterrupt raised inside one included)."""
        with self._lock:
            if self.error is None:
                self.error = exc
        self.done.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def show(self) -> None:
        if self.bar is None or self.finished == self._shown:
            return
        if self.failed:
            self.bar.set_postfix(failed=self.failed, refresh=False)
        self.bar.update(self.finished - self._shown)
        self._shown = self.finished


class _Pool:
    """Rows on a thread pool, `concurrency` threads: for runtimes whose model is synchronous."""

    def __init__(self, texts, menu, rt, settings, concurrency, stop, board):
        import concurrent.futures as cf
        self.pool = cf.ThreadPoolExecutor(max_workers=min(concurrency, len(texts)),
                                          thread_name_prefix="openprogram-evaluate")
        for i, text in enumerate(texts):
            # One copy per row: a Context can be entered by one thread at a time, and each
            # row must see the caller's Runtime binding, Agent and scoped observers.
            ctx = contextvars.copy_context()
            f = self.pool.submit(ctx.run, _thread_row, text, menu, rt, settings, stop)
            f.add_done_callback(functools.partial(_settled, board, i))

    def stop(self) -> None:
        # queued rows return at once; in-flight rows stop before their next model call (a
        # thread cannot be killed, so their current call ends in the background)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def finish(self) -> None:
        self.pool.shutdown(wait=True)


def _thread_row(text: str, menu: list[Option], rt: Runtime, settings: dict,
                stop: threading.Event) -> _Row | None:
    # The coroutine is made here, in the worker: a queued row cancelled at a stop never runs,
    # and a coroutine made for it up front would be reported as never awaited.
    return run_sync(_decide(text, menu, rt, settings, stop, sync=True))


def _settled(board: _Board, i: int, f) -> None:
    if f.cancelled():
        return
    exc = f.exception()
    if exc is not None:
        board.fail(exc)
    else:
        board.put(i, f.result())


class _Loop:
    """Rows as tasks on an event loop of their own, in one worker thread, for runtimes whose
    model is async: a hundred rows in flight cost a hundred tasks, not a hundred threads. The
    caller's thread keeps the progress bar and Ctrl-C, exactly as with the pool (and it may be
    running a loop of its own, as every notebook cell does)."""

    def __init__(self, texts, menu, rt, settings, concurrency, stop, board):
        self.loop = self.task = None
        ctx = contextvars.copy_context()
        self.thread = threading.Thread(
            target=self._main, name="openprogram-evaluate-loop", daemon=True,
            args=(texts, menu, rt, settings, concurrency, stop, board, ctx))
        self.started = threading.Event()
        self.thread.start()
        self.started.wait()

    def _main(self, texts, menu, rt, settings, concurrency, stop, board, ctx) -> None:
        import asyncio
        self.loop = loop = asyncio.new_event_loop()
        try:
            self.task = loop.create_task(
                _arows(texts, menu, rt, settings, concurrency, stop, ctx, board.put))
            self.started.set()
            if loop.run_until_complete(self.task):
                board.fail(KeyboardInterrupt("a row of evaluate raised KeyboardInterrupt"))
        except BaseException as exc:  # the task cancelled by stop(), or a bug: never lost
            board.fail(exc)
        finally:
            self.started.set()
            try:  # an async model may have used asyncio.to_thread
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


async def _arows(texts: list[str], menu: list[Option], rt: Runtime, settings: dict,
                 concurrency: int, stop: threading.Event, ctx: contextvars.Context,
                 on_row: Callable[[int, _Row | None], None]) -> bool:
    """Every row as a task on the running loop, at most `concurrency` in flight, each in its
    own copy of `ctx`; `on_row(i, row)` as each finishes. Returns True when a row raised
    KeyboardInterrupt (the run stops: rows in flight are cancelled). Cancelling this coroutine
    cancels the rows in flight, whose traces finish as failed."""
    import asyncio
    loop = asyncio.get_running_loop()
    pending = iter(range(len(texts)))

    async def worker() -> None:
        for i in pending:
            if stop.is_set():
                return
            # ctx.run: the task copies the context current at its creation
            on_row(i, await ctx.run(loop.create_task,
                                    _decide(texts[i], menu, rt, settings, stop, sync=False)))

    workers = [loop.create_task(worker()) for _ in range(min(concurrency, len(texts)))]
    try:
        await asyncio.gather(*workers)
        return False
    except _RowInterrupted:
        return True
    finally:
        stop.set()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


class _RowInterrupted(Exception):
    """A row raised KeyboardInterrupt; the run stops as on Ctrl-C."""


def _progress_bar(total: int, progress: Any, desc: str | None):
    if not progress:
        return None
    from tqdm.auto import tqdm  # a widget in notebooks, text on a terminal
    bar = tqdm(total=total, unit="decision", leave=True)
    if desc:
        # Never as the first `desc`: tqdm's notebook bar shows that one unescaped (as HTML), and
        # a label is the user's text (a compare() variant name). set_description_str escapes.
        bar.set_description_str(f"{desc}: ")
    return bar


def _run(texts: list[str], menu: list[Option], rt: Runtime, *, concurrency: int,
         settings: dict, progress: Any, desc: str | None
         ) -> tuple[list[_Row | None], float, bool]:
    """Run every decision; returns the rows (None = cancelled), the wall time, and whether the
    run was interrupted. KeyboardInterrupt is caught here and reported, never lost. Rows run as
    tasks on an event loop when the runtime's model is async (`Runtime.async_native`), else on
    a thread pool."""
    board = _Board(len(texts), progress, desc)
    stop = threading.Event()
    kind = _Loop if getattr(rt, "async_native", False) else _Pool
    runner: _Pool | _Loop | None = None
    interrupted = False
    t0 = time.perf_counter()
    try:
        runner = kind(texts, menu, rt, settings, concurrency, stop, board)
        while not board.done.wait(0.1):  # a timed wait, so Ctrl-C reaches this thread promptly
            board.show()
        if board.error is not None:  # a BaseException out of a row
            raise board.error
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        _halt(stop, board, runner)
        raise
    finally:
        wall = time.perf_counter() - t0
        board.show()
        if board.bar is not None:
            board.bar.close()
    if interrupted:
        _halt(stop, board, runner)
    else:
        runner.finish()
    return board.rows, wall, interrupted


def _halt(stop: threading.Event, board: _Board, runner: _Pool | _Loop | None) -> None:
    """Stop a run: rows not started never start, what finished is kept, the rest is
    "cancelled"."""
    stop.set()
    board.close()
    if runner is not None:
        runner.stop()


def _interrupted(result, on_interrupt: str, exc_text: str):
    if on_interrupt == "raise":
        ki = KeyboardInterrupt(exc_text)
        ki.result = result
        ki.add_note("the partial result is on this exception's .result")
        raise ki
    warnings.warn(exc_text + "; the partial result is returned (unfinished rows have status "
                  "'cancelled')", RuntimeWarning, stacklevel=3)
    return result


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def _settings(on_interrupt: Any, concurrency: Any, max_retries: Any, timeout_s: Any,
              context: Any, validate: Any, reask: Any, mode: Any = None) -> tuple[int, dict]:
    """The run settings shared by evaluate, aevaluate and compare, checked before anything
    runs: the concurrency, and the keyword arguments every row's decision gets."""
    _check_on_interrupt(on_interrupt)
    concurrency = _positive_int(concurrency, "concurrency")
    _max_attempts(max_retries)
    check_timeout(timeout_s)
    return concurrency, {"context": context, "max_retries": max_retries,
                         "timeout_s": timeout_s, "validate": check_validate(validate),
                         "reask": check_reask(reask), "mode": get_mode(mode).name}


def _table(prompt: Any, inputs: Any, expected: Any, names: list[str], what: str):
    """The inputs as (columns, records, filled prompts, expected picks)."""
    columns, records = _records(inputs)
    if not records:
        raise ValueError(f"inputs is empty: give at least one row to {what}")
    texts = _fill(prompt, columns, records)
    return columns, records, texts, _expected(expected, columns, records, names)


def _plan(prompt, options, inputs, runtime, expected, context, what: str):
    """An evaluation's option set, inputs and runtime, checked before any model call."""
    menu = normalize(options)
    check_context(menu, context)
    names = [o.name for o in menu]
    columns, records, texts, exp = _table(prompt, inputs, expected, names, what)
    return menu, names, columns, records, texts, exp, resolve_runtime(runtime, what)


def evaluate(prompt: str, options: Any, inputs: Any, *, runtime: Runtime | None = None,
             concurrency: int = 8, max_retries: int = 1, expected: Any = None,
             context: dict | None = None, timeout_s: float | None = None,
             progress: bool = True, on_interrupt: str = "return",
             validate: Callable | None = None, reask: Any = None,
             mode: str = "menu") -> "EvaluationResult":
    """Run the decision `prompt.format_map(row)` over `options` for every row of `inputs` (a
    pandas DataFrame or a list of dicts) and return an `EvaluationResult`.

    The decisions run `concurrency` at a time, each in a copy of the caller's context, on
    `runtime` (else the Runtime bound by the enclosing Agent method): on a thread pool, or, when
    the runtime's model is async (`Runtime(call=async_fn)`, `runtime.async_native`), as tasks
    on one event loop in a worker thread, so a concurrency of hundreds needs no thread per row.
    `expected` (a column name, or a list of option names, one per input) adds accuracy and a
    confusion table. `validate=`, `reask=` and `mode=` apply to every decision, as in
    `decision.make`. A failing input (no valid pick, a model error, or an exception in a picked function) is
    recorded on its row and never stops the run.

    Ctrl-C (or interrupting the kernel) stops the run at once: rows not yet started are
    cancelled, finished rows are kept, and rows in flight are marked "cancelled" too — on the
    pool their current model call ends in the background (a thread cannot be killed) but they
    make no further model call; on the event loop they are cancelled at once. With
    `on_interrupt="return"` (the default, so a notebook keeps what finished) the partial result
    is returned with `.interrupted` set and status "cancelled" on unfinished rows; with
    `"raise"` the KeyboardInterrupt is re-raised carrying the partial result as `.result`.
    """
    concurrency, settings = _settings(on_interrupt, concurrency, max_retries, timeout_s,
                                      context, validate, reask, mode)
    menu, names, columns, records, texts, exp, rt = _plan(prompt, options, inputs, runtime,
                                                          expected, context, "evaluate")
    check_modes(rt, settings["mode"])
    with batch("evaluate", None, inputs=len(texts), concurrency=concurrency,
               mode=settings["mode"]):
        rows, wall, interrupted = _run(texts, menu, rt, concurrency=concurrency,
                                       settings=settings, progress=progress, desc="evaluate")
    result = EvaluationResult(prompt=prompt, options=names, columns=columns, records=records,
                              rows=rows, expected=exp, wall_s=wall, concurrency=concurrency,
                              runtime=rt.name, interrupted=interrupted)
    if interrupted:
        return _interrupted(result, on_interrupt, f"evaluate was interrupted: {result.finished} "
                            f"of {len(rows)} inputs finished")
    return result


async def aevaluate(prompt: str, options: Any, inputs: Any, *, runtime: Runtime | None = None,
                    concurrency: int = 8, max_retries: int = 1, expected: Any = None,
                    context: dict | None = None, timeout_s: float | None = None,
                    progress: bool = True, on_interrupt: str = "return",
                    validate: Callable | None = None, reask: Any = None, mode: str = "menu"
                    ) -> "EvaluationResult":
    """`evaluate`, awaitable: every row is a `decision.amake` task on the running event loop,
    at most `concurrency` in flight, each in a copy of the caller's context. Same arguments
    and the same `EvaluationResult`; with a synchronous model each call runs in a worker thread
    (see `Runtime.acomplete`), with an async one nothing but the loop is needed.

    A KeyboardInterrupt (raised inside a row, or reaching this coroutine) stops the run as in
    `evaluate`: rows in flight are cancelled, finished rows are kept, and `on_interrupt` says
    whether the partial result is returned or raised. Cancelling the task that awaits
    `aevaluate` cancels every row in flight (each trace finishes as failed) and re-raises the
    CancelledError, carrying the partial result as `.result`.
    """
    import asyncio
    concurrency, settings = _settings(on_interrupt, concurrency, max_retries, timeout_s,
                                      context, validate, reask, mode)
    menu, names, columns, records, texts, exp, rt = _plan(prompt, options, inputs, runtime,
                                                          expected, context, "aevaluate")
    check_modes(rt, settings["mode"])
    board = _Board(len(texts), progress, "evaluate")
    stop = threading.Event()

    def on_row(i: int, row: _Row | None) -> None:
        board.put(i, row)
        board.show()

    def result_of(wall: float, interrupted: bool) -> EvaluationResult:
        return EvaluationResult(prompt=prompt, options=names, columns=columns, records=records,
                                rows=board.rows, expected=exp, wall_s=wall,
                                concurrency=concurrency, runtime=rt.name,
                                interrupted=interrupted)

    t0 = time.perf_counter()
    try:
        with batch("evaluate", None, inputs=len(texts), concurrency=concurrency,
                   mode=settings["mode"]):
            interrupted = await _arows(texts, menu, rt, settings, concurrency, stop,
                                       contextvars.copy_context(), on_row)
    except KeyboardInterrupt:
        interrupted = True
    except asyncio.CancelledError as exc:
        board.close()
        exc.result = result_of(time.perf_counter() - t0, True)
        raise
    finally:
        if board.bar is not None:
            board.bar.close()
    board.close()
    result = result_of(time.perf_counter() - t0, interrupted)
    if interrupted:
        return _interrupted(result, on_interrupt, f"aevaluate was interrupted: "
                            f"{result.finished} of {len(texts)} inputs finished")
    return result


@dataclass(frozen=True)
class Variant:
    """One column of `compare`: what differs from compare's own arguments. Whatever is left
    None comes from them — so `{"menu": Variant(mode="menu"), "tools": Variant(mode="tools")}`
    compares ways of asking on the same options, runtime and inputs."""
    options: Any = None
    runtime: Any = None
    mode: str | None = None
    prompt: str | None = None
    max_retries: int | None = None
    validate: Any = None
    reask: Any = None


def _variants(variants: Any, options: Any, runtime: Runtime | None):
    if not isinstance(variants, Mapping):
        raise TypeError(f"variants must be a dict {{name: option set}}, {{name: Runtime}} or "
                        f"{{name: (option set, Runtime)}}, got {type(variants).__name__}")
    if len(variants) < 2:
        raise ValueError(f"compare needs two or more variants, got {len(variants)}; for one "
                         f"option set use evaluate()")
    out = []
    for name, v in variants.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"variant names must be non-empty strings, got {name!r}")
        overrides: dict = {}
        if isinstance(v, Variant):
            overrides = {k: getattr(v, k) for k in ("mode", "prompt", "max_retries", "validate",
                                                    "reask") if getattr(v, k) is not None}
            if "mode" in overrides:
                overrides["mode"] = get_mode(overrides["mode"]).name
            if "max_retries" in overrides:
                _max_attempts(overrides["max_retries"])
            if "validate" in overrides:
                overrides["validate"] = check_validate(overrides["validate"])
            if "reask" in overrides:
                overrides["reask"] = check_reask(overrides["reask"])
            opts = v.options if v.options is not None else options
            rt = v.runtime if v.runtime is not None else runtime
            if opts is None:
                raise ValueError(f"variant {name!r} sets no options, so compare needs options=")
        elif isinstance(v, Runtime):
            if options is None:
                raise ValueError(f"variant {name!r} is a Runtime, so compare needs options= "
                                 f"(the option set the runtime variants run)")
            opts, rt = options, v
        elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], Runtime):
            opts, rt = v
        else:
            opts, rt = v, runtime
        try:
            menu = normalize(opts)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"variant {name!r}: {exc}") from None
        out.append((name, menu, resolve_runtime(rt, f"compare variant {name!r}"), overrides))
    return out


def compare(prompt: str, variants: Any, inputs: Any, *, options: Any = None,
            runtime: Runtime | None = None, concurrency: int = 8, max_retries: int = 1,
            expected: Any = None, context: dict | None = None, timeout_s: float | None = None,
            progress: bool = True, on_interrupt: str = "return",
            validate: Callable | None = None, reask: Any = None,
            mode: str = "menu") -> "ComparisonResult":
    """Run two or more variants over the same inputs and line their picks up side by side.

    `variants` maps a name to an option set (run on `runtime`, else the bound Runtime), to a
    Runtime (running `options=`), to an `(option set, Runtime)` pair, or to a `Variant` whose
    unset fields come from compare's own arguments (ways of asking: `Variant(mode="tools")`). The variants run one
    after another, each with `concurrency` workers, exactly as `evaluate` runs them (`validate=`
    and `reask=` included). Returns a `ComparisonResult`: `.to_frame()` (one pick column per
    variant), `.differences`, `.summary` (retry and failure rates, accuracy, per variant),
    `.picks`, `.plot()`. Ctrl-C behaves as in `evaluate`; variants not yet started are all
    "cancelled".
    """
    concurrency, settings = _settings(on_interrupt, concurrency, max_retries, timeout_s,
                                      context, validate, reask, mode)
    plan = _variants(variants, options, runtime)
    for name, menu, rt, overrides in plan:
        check_context(menu, context)
        check_modes(rt, overrides.get("mode", settings["mode"]))
    names = list(dict.fromkeys(o.name for _, menu, _, _ in plan for o in menu))
    columns, records, texts, exp = _table(prompt, inputs, expected, names, "compare on")
    results: dict[str, EvaluationResult] = {}
    interrupted = False
    with batch("compare", None, variants=len(plan), inputs=len(texts)):
        for name, menu, rt, overrides in plan:
            own = {k: v for k, v in overrides.items() if k != "prompt"}
            own_prompt = overrides.get("prompt", prompt)
            rows_text = texts if own_prompt == prompt else _fill(own_prompt, columns, records)
            if interrupted:
                rows, wall = [None] * len(texts), 0.0
            else:
                rows, wall, interrupted = _run(rows_text, menu, rt, concurrency=concurrency,
                                               settings={**settings, **own},
                                               progress=progress, desc=name)
            results[name] = EvaluationResult(
                prompt=own_prompt, options=[o.name for o in menu], columns=columns,
                records=records, rows=rows, expected=exp, wall_s=wall, concurrency=concurrency,
                runtime=rt.name, interrupted=interrupted, name=name)
    result = ComparisonResult(results, columns=columns, records=records, expected=exp,
                              interrupted=interrupted)
    if interrupted:
        return _interrupted(result, on_interrupt, "compare was interrupted")
    return result


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def _pick(row: _Row | None) -> str | None:
    """The option the model validly picked (kept even when the picked function then raised)."""
    if row is None or row.trace is None or not row.trace.attempts:
        return None
    last = row.trace.attempts[-1]
    return last.chosen if last.error_kind is None else None


def _rate(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else float("nan")


def _input_frame(columns: list, records: list[Mapping], taken: set[str]):
    """The input columns as a frame indexed by input position; an input column whose name
    clashes with a result column is shown as `input_<name>`."""
    import pandas as pd
    frame = pd.DataFrame.from_records(list(records), columns=columns) if records else \
        pd.DataFrame(columns=columns)
    frame.index = pd.RangeIndex(len(records), name="input")
    return frame.rename(columns={c: f"input_{c}" for c in columns if c in taken})


def _shown(key: str, value: Any) -> Any:
    """A summary figure as it reads best in a table: rates as percentages, times in seconds."""
    if not isinstance(value, float):
        return value
    if math.isnan(value):
        return "n/a"
    if key in ("retry_rate", "failure_rate", "accuracy"):
        return f"{value:.1%}"
    return f"{value:.3f}"


def _shown_summary(table):
    """The summary (a Series, or a frame with one row per variant) formatted for display."""
    if hasattr(table, "columns"):
        return table.apply(lambda col: col.map(lambda v: _shown(col.name, v)))
    return table.to_frame("value").apply(
        lambda col: [_shown(k, v) for k, v in col.items()])


def _tables_html(title: str, tables: list[tuple[str, Any]]) -> str:
    """Tables side by side, each rendered by pandas (which escapes every cell), in the wrapper
    every view of the library has (no MathJax, no link detection)."""
    import html
    from .view import wrap
    parts = [f'<div class="openprogram-eval"><p>{title}</p>'
             '<div style="display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start">']
    for caption, table in tables:
        parts.append(f"<div><b>{html.escape(caption)}</b>{table.to_html(escape=True)}</div>")
    parts.append("</div></div>")
    return wrap("".join(parts), "op-eval-view")


def _new_axes(ax):
    """A fresh figure unless the caller gave axes: pandas draws a Series into the current axes,
    which would stack a second plot onto the first in the same notebook cell."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots()[1]


class EvaluationResult:
    """The outcome of `evaluate`: one row per input plus summaries.

    `.to_frame()` — one row per input (index = input position): the input columns, `chosen`,
    `args`, `result` (repr), `error`, `attempts`, `error_kinds`, `duration_s`, `tokens_in`,
    `tokens_out`, `status` ("resolved", "failed" or "cancelled"), and `expected` / `correct` when
    expected picks were given. Summaries: `.picks`, `.retry_rate`, `.failure_rate`,
    `.error_counts`, `.accuracy`, `.confusion`, `.summary`. `.traces[i]` / `.panel(i)` open one
    row's decision; `.plot()` draws the pick distribution. Rates are over finished rows.
    """

    def __init__(self, *, prompt: str, options: list[str], columns: list,
                 records: list[Mapping], rows: list[_Row | None], expected: list | None,
                 wall_s: float, concurrency: int, runtime: str | None, interrupted: bool,
                 name: str | None = None):
        self.prompt, self.options, self.columns = prompt, options, columns
        self.records, self._rows, self.expected = records, rows, expected
        self.wall_s, self.concurrency, self.runtime = wall_s, concurrency, runtime
        self.interrupted, self.name = interrupted, name

    # -- per row ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rows)

    @property
    def statuses(self) -> list[str]:
        return [r.status if r is not None else "cancelled" for r in self._rows]

    @property
    def picks_list(self) -> list[str | None]:
        """The option picked for each input (None: no valid pick, or cancelled)."""
        return [_pick(r) for r in self._rows]

    @property
    def traces(self) -> list[DecisionTrace | None]:
        """The DecisionTrace of each input (None for a cancelled row)."""
        return [r.trace if r is not None else None for r in self._rows]

    @property
    def results(self) -> list[Any]:
        """Each input's resolved result (None unless its status is "resolved")."""
        return [r.result if r is not None and r.status == "resolved" else None
                for r in self._rows]

    @property
    def errors(self) -> list[BaseException | None]:
        return [r.error if r is not None else None for r in self._rows]

    def _trace(self, i: int) -> DecisionTrace:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"row must be an input position (int), got {type(i).__name__}")
        if not -len(self._rows) <= i < len(self._rows):
            raise IndexError(f"row {i} is out of range: there are {len(self._rows)} inputs")
        row = self._rows[i]
        if row is None or row.trace is None:
            raise ValueError(f"input {i} has no trace: it was cancelled before its decision ran")
        return row.trace

    def panel(self, i: int):
        """The decision panel of input `i`: the view registered with `register_trace_view`
        (the notebook layer registers its panel when it loads), else the trace itself, which
        displays as HTML."""
        return trace_view(self._trace(i))

    # -- the table ----------------------------------------------------------------------------
    @property
    def finished(self) -> int:
        return sum(1 for r in self._rows if r is not None)

    def to_frame(self):
        """One row per input; see the class docstring for the columns."""
        import pandas as pd
        extra = ["expected", "correct"] if self.expected is not None else []
        frame = _input_frame(self.columns, self.records, set(_ROW_COLUMNS + extra))
        out = []
        for i, row in enumerate(self._rows):
            trace = row.trace if row is not None else None
            last = trace.attempts[-1] if trace is not None and trace.attempts else None
            usage = trace.usage() if trace is not None else {}
            chosen = _pick(row)
            rec = {
                "chosen": chosen,
                "args": last.args if last is not None and chosen is not None else None,
                "result": _safe_repr(row.result) if row and row.status == "resolved" else None,
                "error": (f"{type(row.error).__name__}: {row.error}"
                          if row is not None and row.error is not None else None),
                "attempts": len(trace.attempts) if trace is not None else 0,
                "error_kinds": trace.error_kinds if trace is not None else [],
                "duration_s": row.duration_s if row is not None else None,
                "tokens_in": usage.get("input_tokens"),
                "tokens_out": usage.get("output_tokens"),
                "status": row.status if row is not None else "cancelled",
            }
            if self.expected is not None:
                exp = self.expected[i]
                rec["expected"] = exp
                rec["correct"] = (None if exp is None or row is None else chosen == exp)
            out.append(rec)
        table = pd.DataFrame(out, columns=_ROW_COLUMNS + extra, index=frame.index)
        table["tokens_in"] = table["tokens_in"].astype("Int64")
        table["tokens_out"] = table["tokens_out"].astype("Int64")
        return pd.concat([frame, table], axis=1)

    # -- summaries ----------------------------------------------------------------------------
    def _finished_rows(self) -> list[_Row]:
        return [r for r in self._rows if r is not None]

    @property
    def picks(self):
        """The pick distribution over finished rows: a count and a share for every option (zero
        for options never picked), plus "(no pick)" when some rows got no valid pick."""
        import pandas as pd
        rows = self._finished_rows()
        counts = Counter(_pick(r) or NO_PICK for r in rows)
        index = list(self.options) + ([NO_PICK] if counts.get(NO_PICK) else [])
        count = pd.Series([counts.get(k, 0) for k in index], index=pd.Index(index, name="option"),
                          dtype="int64")
        share = count / len(rows) if rows else count.astype(float) * float("nan")
        return pd.DataFrame({"count": count, "share": share})

    @property
    def retry_rate(self) -> float:
        """The share of finished rows that needed more than one attempt."""
        rows = self._finished_rows()
        return _rate(sum(1 for r in rows if r.trace is not None and len(r.trace.attempts) > 1),
                     len(rows))

    @property
    def failure_rate(self) -> float:
        """The share of finished rows that failed (no valid pick, model error, or an exception
        in the picked function)."""
        rows = self._finished_rows()
        return _rate(sum(1 for r in rows if r.status == "failed"), len(rows))

    @property
    def error_counts(self):
        """How often each error kind occurred, over every attempt of every finished row (a row
        that was re-asked and then resolved counts its first attempt's error). A picked
        function's exception counts as "raised <ExceptionType>"."""
        import pandas as pd
        counts: Counter = Counter()
        for r in self._finished_rows():
            if r.trace is not None:
                counts.update(r.trace.error_kinds)
            if r.error is not None and getattr(r.error, "trace", None) is None:
                counts[f"raised {type(r.error).__name__}"] += 1
        items = counts.most_common()
        return pd.Series([c for _, c in items], index=pd.Index([k for k, _ in items],
                                                                 name="error_kind"),
                         name="count", dtype="int64")

    def _scored(self) -> list[tuple[str, str | None]]:
        """(expected, pick) for finished rows with a known expected pick."""
        if self.expected is None:
            return []
        return [(e, _pick(r)) for e, r in zip(self.expected, self._rows)
                if e is not None and r is not None]

    @property
    def accuracy(self) -> float | None:
        """The share of finished rows with an expected pick whose pick matched it (a failed row
        counts as wrong; None when no expected picks were given)."""
        if self.expected is None:
            return None
        scored = self._scored()
        return _rate(sum(1 for e, p in scored if e == p), len(scored))

    @property
    def confusion(self):
        """A table of expected pick (rows) by actual pick (columns), over finished rows with an
        expected pick; None when no expected picks were given."""
        if self.expected is None:
            return None
        import pandas as pd
        scored = self._scored()
        cols = list(self.options) + ([NO_PICK] if any(p is None for _, p in scored) else [])
        table = pd.DataFrame(0, index=pd.Index(list(self.options), name="expected"),
                             columns=pd.Index(cols, name="picked"), dtype="int64")
        for e, p in scored:
            table.loc[e, p or NO_PICK] += 1
        return table

    @property
    def summary(self):
        """The headline figures, as a pandas Series."""
        import pandas as pd
        statuses = Counter(self.statuses)
        rows = self._finished_rows()
        durations = [r.duration_s for r in rows if r.duration_s is not None]
        tokens = [r.trace.usage() for r in rows if r.trace is not None]
        data = {
            "inputs": len(self._rows), "resolved": statuses.get("resolved", 0),
            "failed": statuses.get("failed", 0), "cancelled": statuses.get("cancelled", 0),
            "retry_rate": self.retry_rate, "failure_rate": self.failure_rate,
        }
        if self.expected is not None:
            data["accuracy"] = self.accuracy
        data.update({
            "mean_duration_s": sum(durations) / len(durations) if durations else float("nan"),
            "wall_s": self.wall_s, "concurrency": self.concurrency,
            "tokens_in": sum(t["input_tokens"] for t in tokens),
            "tokens_out": sum(t["output_tokens"] for t in tokens),
        })
        return pd.Series(data, name=self.name or "evaluation", dtype=object)

    # -- views --------------------------------------------------------------------------------
    def _headline(self) -> str:
        s = Counter(self.statuses)
        text = (f"{len(self._rows)} inputs: {s.get('resolved', 0)} resolved, "
                f"{s.get('failed', 0)} failed")
        if s.get("cancelled"):
            text += f", {s['cancelled']} cancelled"
        text += f" · retry rate {self.retry_rate:.1%} · failure rate {self.failure_rate:.1%}"
        if self.expected is not None:
            text += f" · accuracy {self.accuracy:.1%}"
        text += f" · {self.wall_s:.2f} s at concurrency {self.concurrency}"
        if self.interrupted:
            text += " · INTERRUPTED"
        return text

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<EvaluationResult{label} on {self.runtime!r}: {self._headline()}>"

    def _repr_html_(self) -> str:
        import html
        title = (f"<b>evaluate</b>{' ' + html.escape(self.name) if self.name else ''} on "
                 f"{html.escape(str(self.runtime))}: {html.escape(self._headline())}")
        picks = self.picks
        picks["share"] = [f"{v:.1%}" if v == v else "n/a" for v in picks["share"]]
        tables = [("summary", _shown_summary(self.summary)), ("picks", picks)]
        errors = self.error_counts
        if len(errors):
            tables.append(("error kinds", errors.to_frame()))
        if self.expected is not None:
            tables.append(("confusion (expected × picked)", self.confusion))
        return _tables_html(title, tables)

    def plot(self, ax=None, **kwargs):
        """A bar chart of the pick distribution (pandas plotting); returns the matplotlib axes."""
        kwargs.setdefault("title", f"picks over {self.finished} inputs")
        kwargs.setdefault("rot", 0)
        ax = self.picks["count"].plot.bar(ax=_new_axes(ax), **kwargs)
        ax.set_ylabel("inputs")
        return ax


class ComparisonResult:
    """The outcome of `compare`: one `EvaluationResult` per variant (`result[name]`), lined up.

    `.to_frame()` — the input columns, one pick column per variant, `expected` when given, and
    `agree` (every variant picked the same; None while a row is cancelled somewhere).
    `.differences` — the rows where the variants picked differently. `.summary` — retry and
    failure rates (and accuracy) per variant. `.picks` — pick counts per option per variant.
    """

    def __init__(self, results: dict[str, EvaluationResult], *, columns: list,
                 records: list[Mapping], expected: list | None, interrupted: bool):
        self.results, self.columns, self.records = results, columns, records
        self.expected, self.interrupted = expected, interrupted

    def __getitem__(self, name: str) -> EvaluationResult:
        return self.results[name]

    @property
    def variants(self) -> list[str]:
        return list(self.results)

    def to_frame(self):
        import pandas as pd
        extra = (["expected"] if self.expected is not None else []) + ["agree"]
        frame = _input_frame(self.columns, self.records, set(self.variants) | set(extra))
        picks = {name: r.picks_list for name, r in self.results.items()}
        statuses = {name: r.statuses for name, r in self.results.items()}
        for name in self.variants:
            frame[name] = picks[name]
        if self.expected is not None:
            frame["expected"] = self.expected
        agree = []
        for i in range(len(self.records)):
            if any(statuses[name][i] == "cancelled" for name in self.variants):
                agree.append(None)
            else:
                agree.append(len({picks[name][i] for name in self.variants}) == 1)
        frame["agree"] = pd.Series(agree, index=frame.index, dtype=object)
        return frame

    @property
    def differences(self):
        """The rows (finished in every variant) where the variants picked differently; a
        failure with no valid pick counts as a pick of its own."""
        frame = self.to_frame()
        from .view import quiet_frame  # model and row text: shown in the library's wrapper
        return quiet_frame(frame[frame["agree"] == False])  # noqa: E712 (None too)

    @property
    def summary(self):
        import pandas as pd
        table = pd.DataFrame({name: r.summary for name, r in self.results.items()}).T
        table.index.name = "variant"
        return table

    @property
    def picks(self):
        import pandas as pd
        counts = {name: r.picks["count"] for name, r in self.results.items()}
        order = list(dict.fromkeys(k for c in counts.values() for k in c.index if k != NO_PICK))
        if any(NO_PICK in c.index for c in counts.values()):
            order.append(NO_PICK)
        table = pd.DataFrame({name: c.reindex(order, fill_value=0) for name, c in counts.items()},
                             index=pd.Index(order, name="option")).astype("int64")
        table.columns.name = "variant"
        return table

    def plot(self, ax=None, **kwargs):
        """Grouped bars: the picks of each variant per option; returns the matplotlib axes."""
        kwargs.setdefault("title", "picks per variant")
        kwargs.setdefault("rot", 0)
        ax = self.picks.plot.bar(ax=_new_axes(ax), **kwargs)
        ax.set_ylabel("inputs")
        return ax

    def _headline(self) -> str:
        diff = len(self.differences)
        text = (f"{len(self.variants)} variants over {len(self.records)} inputs; they pick "
                f"differently on {diff} input{'s' if diff != 1 else ''}")
        if self.interrupted:
            text += " · INTERRUPTED"
        return text

    def __repr__(self) -> str:
        return f"<ComparisonResult {', '.join(map(repr, self.variants))}: {self._headline()}>"

    def _repr_html_(self) -> str:
        import html
        title = f"<b>compare</b> {html.escape(', '.join(self.variants))}: " \
                f"{html.escape(self._headline())}"
        tables = [("summary", _shown_summary(self.summary)), ("picks", self.picks)]
        diffs = self.differences
        if len(diffs):
            shown = diffs.head(20)
            caption = "where they differ" + (f" (first 20 of {len(diffs)})"
                                             if len(diffs) > 20 else "")
            tables.append((caption, shown))
        return _tables_html(title, tables)
