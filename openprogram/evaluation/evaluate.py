"""Prototyping at scale: run one option set over a table of inputs, and line option sets up.

One decision shows how the mechanism works; an option set is only designed well once it has been
run over many inputs. `evaluate` fills a prompt template from each row of the inputs (a
DataFrame, a list of dicts, or any iterable of dicts: see `inputs`), runs the decisions
many at a time (see `runner`: threads, or tasks on one event loop for an async model;
`aevaluate` runs them on the caller's own loop) and returns an `EvaluationResult` (see
`results`): one row per input and the summaries that judge an option set — pick
distribution, retry and failure rates, accuracy and a confusion table against expected picks.
`compare` (in `variants`) runs two or more option sets, runtimes or ways of asking over the same
inputs, each as a run of this module, and puts their picks side by side. A failing input never stops
a run; Ctrl-C keeps what finished. With `journal=` every finished row is appended to a file as it
finishes (see `journal`), so a run that dies resumes where it stopped and a million rows need no
more memory than their summaries.
pandas and tqdm are imported only inside functions, so the core stays standard-library-only at
import time. It is long because one run has many parts only it uses (settings checked, rows pulled
from the table, finished rows summarised and journaled, the batch and rate-limit hooks); lining
runs up is `variants`'.
"""
from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Mapping

from ..base.json_form import json_ready
from ..base.model_protocol import ModelCaller as Runtime
from ..base.model_protocol import check_modes, resolve_runtime, wrapped
from ..base.text import repr_head
from ..decision.confidence import check_threshold
from ..decision.conformal import check_on
from ..decision.options import check_context, normalize, render_menu
from ..decision.settings import ALL, Settings, takes_settings
from ..trace.confidence import Confidence
from ..trace.decision_trace import batch as _trace_batch
from .comparison import ComparisonResult
from .inputs import Table, row_key
from .journal import Journal, JournalMismatch
from .journal_text import row_text
from .ratelimit import RateLimit, check_rate_limit, run_default
from .ratelimit import using as _limited
from .results import NO_PICK, EvaluationResult, Outcomes, cascade_of, summarize
from .runner import Board, arows
from .runner import interrupted as _interrupted
from .runner import run as _run_rows

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Iterator, Sequence
    from typing import Any

    from typing_extensions import Unpack

    from ..base.type_names import Options
    from ..decision.options.kinds import Option
    from ..decision.options.menu import Menu
    from ..decision.settings import Keywords

__all__ = ["evaluate", "aevaluate", "evaluation", "EvaluationResult", "ComparisonResult",
           "JournalMismatch", "NO_PICK", "RateLimit"]


def _known(**attrs: Any) -> dict[str, Any]:
    """The batch attributes that have a value (a streamed input's row count may be unknown)."""
    return {k: v for k, v in attrs.items() if v is not None}


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
    return value


def _check_on_interrupt(value: Any) -> None:
    if value not in ("return", "raise"):
        raise ValueError(f"on_interrupt must be 'return' (give back what finished) or 'raise' "
                         f"(re-raise KeyboardInterrupt with the partial result on its .result), "
                         f"got {value!r}")


def check_run(on_interrupt: Any, concurrency: Any) -> int:
    """The settings of a run of its own (evaluate, aevaluate and compare share them), checked
    before anything runs: the concurrency."""
    _check_on_interrupt(on_interrupt)
    return _positive_int(concurrency, "concurrency")


def check_run_confidence(settings: Settings, menu: Sequence[Option], rt: Runtime,
                         where: str) -> None:
    """The confidence settings of a run checked against its runtime and menu, once, before any
    row runs (each row's decision would otherwise fail with the same error)."""
    source = settings.confidence.on(rt, settings.mode, where)
    check_threshold(settings.min_confidence, settings.low_confidence, source,
                    [o.name for o in menu], where, settings.pick_set)
    if settings.pick_set is not None:
        check_on(settings.pick_set, [o.name for o in menu], render_menu(menu), settings.mode,
                 source, settings.shortlist, where)


# ---------------------------------------------------------------------------------------------
# One run: its rows pulled from the table, each finished row summarised (and journaled)
# ---------------------------------------------------------------------------------------------


class _Sink:
    """Takes each finished row: its summary into the result's columns, and the row itself into
    memory — or, with a journal, its line into the journal (and only the summary into memory)."""

    def __init__(self, names: list[str], total: int | None, journal: Journal | None):
        self.outcomes = Outcomes(names, total or 0)
        self.rows: list[Any] | None = None if journal is not None else [None] * (total or 0)
        self.journal = journal
        self.lock = threading.Lock()
        self.seen = total or 0  # rows read from the table so far (or its known total)
        self.failed = self.retried = 0
        if journal is not None:
            for i, (_, line, offset) in journal.done.items():
                self.outcomes.set(i, (line["status"], line.get("pick"),
                                      line.get("attempts") or 0,
                                      tuple(line.get("error_kinds") or ()), line.get("raised"),
                                      line.get("tokens_in"), line.get("tokens_out"),
                                      line.get("latency_s"), bool(line.get("cached"))), offset)
                if line.get("expected") is not None:
                    self.outcomes.expected[i] = self.outcomes.code(line["expected"])
                conf = Confidence.from_dict(line.get("confidence"))
                if conf is not None:
                    self.outcomes.conf[i] = conf
                if line.get("cascade"):
                    self.outcomes.cascade[i] = [tuple(s) for s in line["cascade"]]
                self.failed += line["status"] == "failed"
                self.retried += (line.get("attempts") or 0) > 1

    def expect(self, i: int, expected: str | None) -> None:
        with self.lock:
            if i >= self.seen:
                self.seen = i + 1
            o = self.outcomes
            if i >= len(o.status):
                o.grow(max(i + 1, 2 * len(o.status)))
            o.expected[i] = -1 if expected is None else o.code(expected)

    def __call__(self, i: int, extra: tuple[Any, ...], row: Any) -> None:
        s = summarize(row)
        trace = row.trace
        conf = trace.confidence if trace is not None else None
        stages = cascade_of(trace)
        with self.lock:
            offset = -1
            if self.journal is not None:
                offset = self._journal(i, extra, row, s, stages)
            if self.rows is not None:
                if i >= len(self.rows):
                    self.rows.extend([None] * (i + 1 - len(self.rows)))
                self.rows[i] = row
            self.outcomes.set(i, s, offset)
            if conf is not None:
                self.outcomes.conf[i] = conf
            else:
                self.outcomes.conf.pop(i, None)
            if stages:
                self.outcomes.cascade[i] = stages

    def _journal(self, i: int, extra: tuple[Any, ...], row: Any, s: tuple[Any, ...],
                 stages: list[tuple[Any, ...]]) -> int:
        """Write row `i`'s line; where it starts. In one pass from the row (`row_text`) when
        the journal allows it, else as JSON data (`_journal_row`): the same text."""
        journal = self.journal
        assert journal is not None
        key, record, expected = extra
        trace = row.trace
        if trace is not None:
            menu = journal.text_menu(trace)
            if menu is not None:
                text = row_text(journal.name, i, key, row, s, record, expected, stages, menu)
                if text is not None:
                    return journal.write_text(text)
        data = _journal_row(row, s, record, expected)
        return (journal.write_row(i, key, data) if trace is None else
                journal.write_trace_row(i, key, data, trace))

    def settle(self, n: int) -> None:
        """The run is over: `n` rows were (or would have been) read."""
        o = self.outcomes
        if len(o) < n:
            o.grow(n)
        o.trim(n)
        if self.rows is not None:
            del self.rows[n:]
            self.rows.extend([None] * (n - len(self.rows)))


def _journal_row(row: Any, s: tuple[Any, ...], record: Any,
                 expected: str | None) -> dict[str, Any]:
    # encoded into the journal at once: what is already JSON is shared, not copied
    status, pick, attempts, kinds, raised, tin, tout, duration, cached = s
    trace = row.trace
    last = trace.attempts[-1] if trace is not None and trace.attempts else None
    err = row.error
    return {
        "input": json_ready(dict(record)), "expected": expected, "pick": pick,
        "args": json_ready(last.args) if last is not None and pick is not None else None,
        "result": json_ready(row.result) if status == "resolved" else None,
        "result_repr": repr_head(row.result) if status == "resolved" else None,
        "status": status,
        "error": None if err is None else {"type": type(err).__name__,
                                           "message": json_ready(str(err))},
        "error_kind": None if err is None else (getattr(err, "kind", None) or
                                                (last.error_kind if last else None)),
        "error_kinds": list(kinds), "raised": raised, "attempts": attempts,
        "tokens_in": tin, "tokens_out": tout, "latency_s": duration, "cached": cached,
        "confidence": (trace.confidence.to_dict() if trace is not None and
                       trace.confidence is not None else None),
        "cascade": [list(st) for st in cascade_of(trace)] or None,
        # last, and the trace itself: the journal writes its JSON (Journal.write_trace_row)
        **({} if trace is not None else {"trace": None}),
    }


def _items(table: Table, journal: Journal | None,
           sink: _Sink) -> Iterator[tuple[int, str, tuple[Any, Any, Any]]]:
    """The rows still to run, as `(i, filled prompt, (key, record, expected))`."""
    done = journal.done if journal is not None else {}
    for i, record, text, expected in table.rows():
        sink.expect(i, expected)
        key = None
        if journal is not None:
            key = row_key(text)
            if i in done and journal.check_key(i, key):   # a row journaled before
                continue
        yield i, text, (key, record, expected)


def _open_journal(journal: Any, name: str, prompt: str, menu: Sequence[Option], rt: Runtime,
                  table: Table, concurrency: int, settings: Settings) -> Journal | None:
    if journal is None:
        return None
    return Journal(journal, {"section": name, "prompt": prompt, "menu": render_menu(menu),
                             "mode": settings.mode.name, "runtime": rt.name,
                             "repair": settings.repair.name,
                             "options": [o.name for o in menu], "total": table.total,
                             "expected": table.has_expected,
                             "concurrency": concurrency,
                             "confidence": _confidence_record(settings)})


def _confidence_record(settings: Settings) -> dict[str, Any] | None:
    """A run's confidence settings as the journal's section keeps them (in its fingerprint),
    or None when it asks for none."""
    out: dict[str, Any] = {}
    asked = settings.confidence.fingerprint()
    if asked is not None:
        out["confidence"] = asked
    if settings.min_confidence is not None:
        out["min_confidence"] = settings.min_confidence
    if settings.low_confidence is not None:
        out["low_confidence"] = settings.low_confidence
    if settings.pick_set is not None:   # another policy is another run
        out["pick_set"] = settings.pick_set.to_dict()
    return out or None


class Run:
    """One option set over one table: its journal, sink, board and the rows left to run."""

    def __init__(self, table: Table, menu: Sequence[Option], rt: Runtime, settings: Settings,
                 concurrency: int,
                 progress: Any, desc: str, journal: Any, name: str,
                 limit: RateLimit | None = None) -> None:
        self.table, self.menu, self.rt, self.settings = table, menu, rt, settings
        self.limit = limit
        self.concurrency, self.name = concurrency, name
        self.journal = _open_journal(journal, name, table.prompt, menu, rt, table, concurrency,
                                     settings)
        self.names = [o.name for o in menu]
        self.sink = _Sink(self.names, table.total, self.journal)
        before = len(self.journal.done) if self.journal is not None else 0
        self.board = Board(self.sink, table.total, progress, desc, done_before=before,
                           failed_before=self.sink.failed, retried_before=self.sink.retried,
                           waiting=limit.status if limit is not None else None)
        self.items = _items(table, self.journal, self.sink)

    def result(self, wall: float, was_interrupted: bool,
               label: str | None = None) -> EvaluationResult:
        table = self.table
        n = table.total if table.total is not None else self.sink.seen
        self.sink.settle(n)
        if self.journal is not None:
            self.journal.close()
        result = EvaluationResult(
            prompt=table.prompt, options=self.names, columns=table.columns,
            records=table.records, outcomes=self.sink.outcomes, rows=self.sink.rows,
            has_expected=table.has_expected, wall_s=wall, concurrency=self.concurrency,
            runtime=self.rt.name, interrupted=was_interrupted, name=label,
            journal=self.journal.path if self.journal is not None else None,
            shared=self.journal.shared_lines if self.journal is not None else None)
        result.rate_limit = self.limit
        result.pick_set = self.settings.pick_set
        return result

    def go(self) -> tuple[float, bool]:
        workers = self.concurrency if self.table.total is None else \
            max(1, min(self.concurrency, self.table.total - self.board.finished))
        with _limited(self.limit):  # the rows' contexts are copies of this one
            return _run_rows(self.items, self.menu, self.rt, concurrency=workers,
                             settings=self.settings, board=self.board)


def rate_limit_of(value: Any, rts: list[Runtime]) -> RateLimit | None:
    """`rate_limit=` checked: it paces HTTP requests, so a runtime that sends none through the
    provider transport (a scripted or local model) cannot keep to it, and says so. None (or
    True) is the default: when a runtime sends HTTP requests, the run handles 429 / 529 with a
    RateLimit of its own that paces nothing (`ratelimit.run_default`); False, no handling."""
    if value is None or value is True:
        return run_default() if any(_sends_http(rt) for rt in rts) else None
    limit = check_rate_limit(value)
    if limit is None:
        return None
    for rt in rts:
        if not _sends_http(rt):
            raise TypeError(f"rate_limit= paces the HTTP requests of OpenAIRuntime and "
                            f"AnthropicRuntime (also when recorded); runtime {rt.name!r} "
                            f"({type(rt).__name__}) sends none, so there is nothing to pace. "
                            f"Drop rate_limit= or use a provider runtime.")
    return limit


def _sends_http(rt: Runtime) -> bool:
    """Whether `rt` (or the runtime it wraps: a recorder, a cache) sends its calls through the
    provider transport, which keeps to a RateLimit."""
    return any(inner.honours_rate_limit for inner in wrapped(rt))


def _batched(batch: Any, rt: Runtime) -> Runtime:
    """The runtime that answers a run's calls: `rt`, or with `batch=` its batch path."""
    if batch is None or batch is False:
        return rt
    if batch is not True and not isinstance(batch, Mapping):
        raise TypeError(f"batch must be True, False or a dict of the batch path's settings "
                        f"(poll_s, settle_s, max_requests, max_bytes), got "
                        f"{type(batch).__name__}")
    make = getattr(rt, "batched", None)
    if make is None:
        raise TypeError(f"batch=True sends the run through a provider's batch API: it needs an "
                        f"OpenAIRuntime or an AnthropicRuntime, got {type(rt).__name__} "
                        f"({rt.name!r}). Run without batch=.")
    batched: Runtime = make(**({} if batch is True else dict(batch)))
    return batched


def _batch_hooks(one: Run, batched: Runtime, rt: Runtime) -> None:
    """On the batch path: the bar shows the batch's counts, and the journal holds its batches
    (those in flight are re-attached to, new ones recorded)."""
    if batched is rt:
        return
    one.board.waiting = getattr(batched, "status")  # a BatchRuntime's (runtimes/providers/batch.py)
    if one.journal is not None:
        getattr(batched, "attach")(one.journal.batches, one.journal.write_batch)


def new_run(table: Table, menu: Sequence[Option], rt: Runtime, batch: Any,
             settings: Settings, concurrency: int, progress: Any, desc: str, journal: Any,
             name: str, limit: RateLimit | None) -> Run:
    """A run of `menu` over `table` on `rt`, or on its batch path when `batch=` asks: there
    every row waits on its round, so all of them are in flight at once (a task each, no
    thread)."""
    batched = _batched(batch, rt)
    if batched is not rt:
        concurrency = max(concurrency, table.total or 50_000)
    one = Run(table, menu, batched, settings, concurrency, progress, desc, journal, name, limit)
    _batch_hooks(one, batched, rt)
    return one


def _evaluation(what: str, prompt: str, options: Options, inputs: Any, settings: Settings, *,
                concurrency: Any, expected: Any, progress: Any, on_interrupt: Any, journal: Any,
                total: int | None, rate_limit: Any, batch: Any) -> Run:
    """The one run of `evaluate` / `aevaluate` (`what`), every argument checked before any
    model call."""
    concurrency = check_run(on_interrupt, concurrency)
    menu, table, rt = _plan(prompt, options, inputs, settings.runtime, expected,
                            settings.context, what, total, journal)
    check_modes(rt, settings.mode.name)
    check_run_confidence(settings, menu, rt, what)
    return new_run(table, menu, rt, batch, settings, concurrency, progress, "evaluate",
                   journal, "evaluate", rate_limit_of(rate_limit, [rt]))


def _evaluation_span(one: Run) -> Any:
    return _trace_batch("evaluate", None, **_known(inputs=one.table.total),
                        concurrency=one.concurrency, mode=one.settings.mode.name)


def _plan(prompt: str, options: Options, inputs: Any, runtime: Runtime | None, expected: Any,
          context: dict[str, Any] | None, what: str, total: int | None,
          journal: Any) -> tuple[Menu, Table, Runtime]:
    """An evaluation's option set, inputs and runtime, checked before any model call."""
    menu = normalize(options)
    check_context(menu, context)
    names = [o.name for o in menu]
    table = Table(prompt, inputs, expected, names, what, total=total, keep=journal is None)
    return menu, table, resolve_runtime(runtime, what)


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


@takes_settings(ALL)
def evaluate(prompt: str, options: Options, inputs: Any, *, concurrency: int = 8,
             expected: Any = None, progress: bool = True, on_interrupt: str = "return",
             journal: Any = None, total: int | None = None, rate_limit: Any = None,
             batch: Any = False, **settings: Unpack[Keywords]) -> EvaluationResult:
    """Run the decision `prompt.format_map(row)` over `options` for every row of `inputs` (a
    pandas DataFrame, a list of dicts, or any iterable of dicts — a generator, a
    `csv.DictReader`, `pandas.read_csv(..., chunksize=)` chunks — with `total=` its row count
    for the progress bar) and return an `EvaluationResult`.

    The decisions run `concurrency` at a time, each in a copy of the caller's context, on
    `runtime` (else the Runtime bound by the enclosing Agent method): on threads, or, when
    the runtime's model is async (`Runtime(call=async_fn)`, `runtime.async_native`), as tasks
    on one event loop in a worker thread, so a concurrency of hundreds needs no thread per row.
    Rows are read from `inputs` as workers free up. `expected` (a column name, or a list of
    option names, one per input) adds accuracy and a confusion table. `validate=`, `reask=`,
    `mode=` and `repair=` apply to every decision, as in `decision.make`. A failing input (no valid
    pick, a model error, or an exception in a picked function) is recorded on its row and never
    stops the run.

    `journal="runs/x.jsonl"` appends every finished row to that file as it finishes (see
    `openprogram.evaluation.journal`), and keeps in memory only each row's summary
    (traces, results and errors are read back from the file when asked for). Calling the same
    evaluation again with the same journal resumes it: rows already journaled are not run again
    and the progress bar starts at their count. A journal of another evaluation (another
    prompt, option set, way of asking, runtime or `repair=` level) is refused with
    `JournalMismatch`.

    `batch=True` (OpenAIRuntime, AnthropicRuntime) sends the rows through the provider's
    batch API (half the price, answered within a day; see `openprogram.runtimes.providers.batch`):
    all rows are asked in one round, re-asks go in the next; a dict sets the path's options
    (`{"poll_s": 30}`).

    Rate limits are handled without any setting (OpenAIRuntime, AnthropicRuntime; see
    `ratelimit`): a 429 / 529 pauses the whole run for the server's retry-after and halves its
    concurrency (grown back by successes), and a row fails only after `patience_s` (600 s)
    without any success; the progress bar says when the run waits and why, and
    `result.rate_limit.stats` counts the 429s and the pauses.
    `rate_limit=RateLimit(requests_per_minute=..., tokens_per_minute=...)` (or a number of
    requests per minute) adds pacing: requests are sent no faster than the provider's limits
    (a runtime's own `rate_limit=` does the same for every call it makes, and is kept when
    evaluate is given none). `rate_limit=False` turns the handling off: the SDK's own retries
    (`max_retries=` of the runtime) see the 429s.

    Ctrl-C (or interrupting the kernel) stops the run at once: rows not yet started are
    cancelled, finished rows are kept, and rows in flight are marked "cancelled" too — on
    threads their current model call ends in the background (a thread cannot be killed) but
    they make no further model call; on the event loop they are cancelled at once. With
    `on_interrupt="return"` (the default, so a notebook keeps what finished) the partial result
    is returned with `.interrupted` set and status "cancelled" on unfinished rows; with
    `"raise"` the KeyboardInterrupt is re-raised carrying the partial result as `.result`.

    `shortlist=k` (or `Shortlist(k, by=...)`) narrows every row's menu as in `decision.make`;
    with `expected=`, `.shortlist_recall` (also in `.summary`) is how often the expected option
    was among those shown, beside `.accuracy`.
    """
    return evaluation(prompt, options, inputs, Settings.of(settings, "evaluate"),
                      concurrency=concurrency, expected=expected, progress=progress,
                      on_interrupt=on_interrupt, journal=journal, total=total,
                      rate_limit=rate_limit, batch=batch)


def evaluation(prompt: str, options: Options, inputs: Any, settings: Settings, *,
               concurrency: Any = 8, expected: Any = None, progress: Any = True,
               on_interrupt: Any = "return", journal: Any = None, total: int | None = None,
               rate_limit: Any = None, batch: Any = False) -> EvaluationResult:
    """`evaluate` with its decisions' settings checked already (`improve` runs its option
    sets so)."""
    one = _evaluation("evaluate", prompt, options, inputs, settings, concurrency=concurrency,
                      expected=expected, progress=progress, on_interrupt=on_interrupt,
                      journal=journal, total=total, rate_limit=rate_limit, batch=batch)
    with _evaluation_span(one):
        wall, was_interrupted = one.go()
    result = one.result(wall, was_interrupted)
    if was_interrupted:
        return _interrupted(result, on_interrupt, f"evaluate was interrupted: {result.finished} "
                            f"of {len(result)} inputs finished")
    return result


@takes_settings(ALL)
async def aevaluate(prompt: str, options: Options, inputs: Any, *, concurrency: int = 8,
                    expected: Any = None, progress: bool = True, on_interrupt: str = "return",
                    journal: Any = None, total: int | None = None, rate_limit: Any = None,
                    batch: Any = False, **settings: Unpack[Keywords]) -> EvaluationResult:
    """`evaluate`, awaitable: every row is a `decision.amake` task on the running event loop,
    at most `concurrency` in flight, each in a copy of the caller's context. Same arguments
    (`journal=`, `total=`, `rate_limit=` and `batch=` included) and the same
    `EvaluationResult`; with a synchronous model each call runs in a worker thread (see
    `Runtime.acomplete`), with an async one nothing but the loop is needed.

    A KeyboardInterrupt (raised inside a row, or reaching this coroutine) stops the run as in
    `evaluate`: rows in flight are cancelled, finished rows are kept, and `on_interrupt` says
    whether the partial result is returned or raised. Cancelling the task that awaits
    `aevaluate` cancels every row in flight (each trace finishes as failed) and re-raises the
    CancelledError, carrying the partial result as `.result`.
    """
    one = _evaluation("aevaluate", prompt, options, inputs,
                      Settings.of(settings, "aevaluate"), concurrency=concurrency,
                      expected=expected, progress=progress, on_interrupt=on_interrupt,
                      journal=journal, total=total, rate_limit=rate_limit, batch=batch)
    with _evaluation_span(one):
        wall, was_interrupted = await arun_one(one)
    result = one.result(wall, was_interrupted)
    if was_interrupted:
        return _interrupted(result, on_interrupt, f"aevaluate was interrupted: "
                            f"{result.finished} of {len(result)} inputs finished")
    return result


async def arun_one(one: Run) -> tuple[float, bool]:
    """One run's rows as tasks on the running loop: (wall seconds, interrupted). A cancel of
    the awaiting task re-raises with the partial result as `.result` (what finished is kept)."""
    import asyncio
    board = one.board
    stop = threading.Event()

    def on_row(i: int, extra: Any, row: Any) -> None:
        board.put(i, extra, row)
        board.show()

    t0 = time.perf_counter()
    try:
        with _limited(one.limit):
            was_interrupted = await arows(one.items, one.menu, one.rt, one.settings,
                                          one.concurrency, stop, contextvars.copy_context(),
                                          on_row)
    except KeyboardInterrupt:
        was_interrupted = True
    except asyncio.CancelledError as exc:
        board.close()
        setattr(exc, "result", one.result(time.perf_counter() - t0, True))
        raise
    finally:
        if board.bar is not None:
            board.bar.close()
    board.close()
    return time.perf_counter() - t0, was_interrupted
