"""The decision trace: what one decision did, assembled from the events it emitted.

The decision loop emits one event per step (decision started, attempt sent, reply chunk, reply
received, extracted, validated or failed, tool round, resolved or failed), each carrying an
immutable record (`records.Attempt`, `records.ToolRound`). `DecisionTrace` is assembled from
those events and nothing else (`DecisionTrace._apply`); observers (the notebook panel, progress
bars, a logger) see the same events as they happen, after the trace has taken them in. Nothing here
imports pandas until `to_frame()` is called.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import time
import warnings
import weakref
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading
from collections import deque
from dataclasses import dataclass, field

from ..base.errors import ERROR_KINDS, ArgumentError, RecordedError, explain, require
from ..base.json_form import to_jsonable
from ..base.secrets import scrub
from ..base.text import MORE, cut, repr_head
from .confidence import Confidence
from .records import Attempt, Repair, ToolRound, build
from .safe_html import quiet_frame
from .tables import table_rows
from .view import trace_html

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any
    Observer = Callable[["TraceEvent"], None]

__all__ = ["ERROR_KINDS", "explain", "Attempt", "ToolRound", "DecisionTrace", "TraceEvent",
           "trace_from_dict", "recorded_trace", "RecordedError",
           "EVENT_KINDS", "add_observer", "remove_observer", "observe", "emit", "last_trace",
           "history", "register_trace_view", "trace_view", "register_batch_hook", "batch",
           "record", "recorded_readers", "register_recorded_reader"]


def _now() -> float:
    return time.time()


_ids = itertools.count(1)


@dataclass
class DecisionTrace:
    """Everything one decision did: its menu, every attempt, the tool rounds, the outcome."""
    prompt: str
    menu: str
    options: list[dict]
    entry: str = "make"                # "make", "agent" or "format"
    max_attempts: int = 2
    runtime: str | None = None
    id: int = field(default_factory=lambda: next(_ids))
    status: str = "running"            # "running", "resolved", "failed" (or "recorded": read
                                       # from a cassette)
    attempts: list[Attempt] = field(default_factory=list)
    tool_rounds: list[ToolRound] = field(default_factory=list)
    result: Any = None
    error: Exception | None = None
    started_at: float = field(default_factory=_now)
    duration_s: float | None = None
    context_keys: list[str] = field(default_factory=list)
    mode: str = "menu"                 # the way of asking: "menu", "tools" or "json_schema"
    model: str | None = None           # the runtime's model name, when it has one
    provider: str | None = None        # the runtime's provider ("openai", "anthropic", ...)
    # shortlist= : the ranker, k, the ranking (names and scores, best first), shown, left_out
    shortlist: dict | None = None

    @property
    def chosen(self) -> str | None:
        return self.attempts[-1].chosen if self.attempts and self.status == "resolved" else None

    @property
    def confidence(self) -> Any:
        """The final attempt's `Confidence` (None when the decision asked for none)."""
        return self.attempts[-1].confidence if self.attempts else None

    @property
    def pick_rank(self) -> int | None:
        """With a shortlist: the rank the ranker gave the option finally picked (1 = first)."""
        picked = self.attempts[-1].chosen if self.attempts else None
        if not self.shortlist or picked is None:
            return None
        return next((i for i, (n, _) in enumerate(self.shortlist["ranking"], 1) if n == picked),
                    None)

    @property
    def error_kinds(self) -> list[str]:
        return [a.error_kind for a in self.attempts if a.error_kind]

    def usage(self) -> dict:
        total = {"input_tokens": 0, "output_tokens": 0}
        for a in self.attempts:
            for k in total:
                total[k] += (a.usage or {}).get(k) or 0
        return total

    def to_dict(self, jsonable: Any = to_jsonable) -> dict:
        """The trace as JSON data; a writer that encodes it at once (the journal) passes
        `jsonable=json_ready`, which shares what is already JSON instead of copying it."""
        return {
            "id": self.id, "entry": self.entry, "mode": self.mode, "status": self.status,
            "prompt": jsonable(self.prompt),
            "menu": self.menu, "options": self.options, "runtime": self.runtime,
            "max_attempts": self.max_attempts, "context_keys": list(self.context_keys),
            "attempts": [a.to_dict(jsonable) for a in self.attempts],
            "tool_rounds": [t.to_dict(jsonable) for t in self.tool_rounds],
            "chosen": self.chosen, "result": jsonable(self.result),
            "error": None if self.error is None else {
                "type": type(self.error).__name__, "kind": getattr(self.error, "kind", None),
                "message": jsonable(str(self.error))},
            "started_at": self.started_at, "duration_s": self.duration_s,
            **({"shortlist": self.shortlist} if self.shortlist else {}),
        }

    def _apply(self, event: TraceEvent) -> None:
        """Take in one event: the only way a trace changes."""
        self._take(event.kind, event.attempt, event.data)

    def _take(self, kind: str, att: Attempt | None, data: dict) -> None:
        """`_apply` of an event's parts (`emit` builds the event only when an observer wants
        it). A new or updated attempt record replaces the one with its number in a new list, so
        a list of attempts that a view already holds is never changed under it."""
        if att is not None:
            attempts = self.attempts
            if attempts and attempts[-1].number == att.number:
                if attempts[-1] is not att:  # (the loop completed a record nobody saw yet)
                    self.attempts = [*attempts[:-1], att]
            else:
                self.attempts = [*attempts, att]
        if kind == "tool_call":
            self.tool_rounds = [*self.tool_rounds, data["round"]]
        elif kind in _ENDS:
            self.status = "resolved" if kind == "resolved" else "failed"
            self.result, self.error = data.get("result"), data.get("error")
            self.duration_s = data.get("duration_s")

    def to_frame(self, table: str = "attempts"):
        """A pandas DataFrame of one of the trace's tables: "attempts" (one row per attempt),
        "options" (the menu), "tools" (tool rounds) or "summary" (one row). It displays in the
        wrapper MathJax skips, as the trace's HTML does: a reply's `$...$` is not typeset."""
        return quiet_frame(self._table_frame(table))

    def _table_frame(self, table: str):
        pd = require("pandas", "pandas", "DecisionTrace.to_frame()")
        columns, rows = table_rows(self, table)
        frame = pd.DataFrame(rows, columns=columns)
        index = _FRAME_INDEX.get(table)
        return frame if index is None else frame.set_index(index)

    def __repr__(self) -> str:
        outcome = (f"result={repr_head(self.result)}" if self.status == "resolved"
                   else f"error={getattr(self.error, 'kind', None)!r}" if self.status == "failed"
                   else "running")
        return scrub(f"<DecisionTrace #{self.id} {self.entry} {self.status}: "
                     f"{len(self.attempts)} attempt(s), {outcome}>")

    def _repr_pretty_(self, p, cycle):  # IPython's plain-text repr (terminal, nbconvert)
        p.text(self.format_text())

    def format_text(self) -> str:
        """A readable plain-text rendering of the whole trace."""
        lines = [repr(self)]
        for a in self.attempts:
            state = "ok" if a.ok else (a.error_kind or "pending")
            lines.append(f"  attempt {a.number}{' (last)' if a.is_last else ''}: {state}")
            if a.reply is not None:
                lines.append(f"    reply: {cut(a.reply, 200, MORE)!r}")
            if a.extracted is not None:
                lines.append(f"    extracted ({a.found_in}, key {a.key_alias!r}, "
                             f"{a.candidates} candidate(s)): {a.extracted}")
            for r in a.repairs:
                lines.append(f"    repaired {r}")
            if a.error_kind:
                where = f" at {a.error_path}" if a.error_path else ""
                lines.append(f"    error {a.error_kind}{where}: {a.error_message}")
            if a.chosen:
                lines.append(f"    chosen: {a.chosen} args={a.args} dropped={a.dropped} "
                             f"injected={a.injected}")
            if a.confidence is not None:
                lines.append(f"    confidence: {a.confidence!r}")
        for t in self.tool_rounds:
            lines.append(f"  tool {t.name}({t.args}) -> {repr_head(t.result)}"
                         + (f" error: {t.error}" if t.error else ""))
        if self.status == "resolved":
            lines.append(f"  result: {repr_head(self.result)}")
        elif self.status == "failed":
            lines.append(f"  error: {self.error}")
        # what a model, a server or an option set wrote is shown, never obeyed by the terminal:
        # its control characters (an OSC title, a screen clear, a carriage return) as escapes,
        # as the step-through's text shows them
        return scrub("\n".join(lines)).translate(_CONTROL_ESCAPES)

    def _repr_mimebundle_(self, include=None, exclude=None):
        """In a notebook (or a static export of one), a trace shows as the decision's tables;
        everywhere else, as text. Plain HTML from the standard library: the core never imports
        the notebook layer."""
        return {"text/plain": self.format_text(), "text/html": trace_html(self)}


#: The column that names a row of a table's frame (the tool rounds are numbered by the frame).
_FRAME_INDEX = {"attempts": "attempt", "options": "name", "summary": "id"}


class _ControlEscapes(dict):
    """str.translate's table: every character that is not printable (a newline and a tab
    excepted) becomes its escape, found as the text is translated (no table of all Unicode)."""

    def __missing__(self, code: int) -> str | int:
        c = chr(code)
        out = code if c in "\n\t" or c.isprintable() else ascii(c)[1:-1]
        if code < 0x3000:   # the common scripts are kept; a text of every code point is not
            self[code] = out
        return out


_CONTROL_ESCAPES = _ControlEscapes()

# ---------------------------------------------------------------------------------------------
# Events and observers
# ---------------------------------------------------------------------------------------------

#: The event kinds, in the order a decision emits them.
EVENT_KINDS = (
    "decision_started",   # the menu is built; no model call yet
    "attempt_sent",       # a prompt went to the model (attempt number, is_last)
    "reply_chunk",        # a streamed piece of the reply: data["text"] is only the new text
    "reply_received",     # the whole reply is in (attempt.reply)
    "tool_call",          # a native tool ran (data["round"] is the frozen ToolRound)
    "extracted",          # the JSON object was found (attempt.extracted), or not
    "repaired",           # the reply was repaired, not re-asked (attempt.repairs; decision/repair/)
    "validated",          # the pick and its arguments passed (attempt.chosen, attempt.args)
    "attempt_failed",     # attempt.error_kind / error_message say why
    "resolved",           # data["result"]; trace.result holds it too
    "decision_failed",    # data["error"]: the DecisionError (or what ended the decision)
)
_KINDS = frozenset(EVENT_KINDS)


@dataclass(frozen=True)
class TraceEvent:
    """One step of one decision. `attempt` is the frozen record of the attempt as of this step;
    `data` holds what the step adds: the new text of a `reply_chunk` (never the whole reply so
    far), the `ToolRound` of a `tool_call`, the result or error of the outcome."""
    kind: str
    trace: DecisionTrace
    attempt: Attempt | None = None
    data: dict = field(default_factory=dict)
    time: float = field(default_factory=_now)

    @property
    def attempt_number(self) -> int | None:
        return self.attempt.number if self.attempt else None

    @property
    def is_last_attempt(self) -> bool:
        return bool(self.attempt and self.attempt.is_last)



_global_observers: list[Observer] = []
# each scoped observer with the event kinds it wants (None: every kind)
_scoped_observers: contextvars.ContextVar[tuple[tuple[Observer, frozenset | None], ...]] = \
    contextvars.ContextVar("openprogram_observers", default=())
_lock = Lock()
# The observers already reported, held weakly: an id would be reused by a later observer, and a
# set of them would grow with every failing observer a long-lived kernel ever made.
_warned: weakref.WeakSet = weakref.WeakSet()

#: The most recent finished traces of this process, newest last.
history: deque[DecisionTrace] = deque(maxlen=100)


def add_observer(fn: Observer) -> Observer:
    """Let `fn(event)` see every event of every decision in this process. Returns `fn`."""
    with _lock:
        _global_observers.append(fn)
    return fn


def remove_observer(fn: Observer) -> None:
    with _lock:
        if fn in _global_observers:
            _global_observers.remove(fn)


class observe:
    """Let `fn(event)` see the events of decisions made inside this block (and in threads or
    tasks that copy this context); with `kinds=`, only the events of those kinds (an event no
    observer wants is never built). A class rather than a generator-based context manager:
    every row of an evaluation opens one."""

    __slots__ = ("fn", "kinds", "token")

    def __init__(self, fn: Observer, kinds: Iterable[str] | None = None):
        self.fn = fn
        self.kinds = kinds if kinds is None or type(kinds) is frozenset else frozenset(kinds)
        if self.kinds is not None and not self.kinds <= _KINDS:
            raise ArgumentError(f"observe(kinds=) names unknown event kind(s) "
                                f"{sorted(self.kinds - _KINDS)}; the kinds are {EVENT_KINDS}")

    def __enter__(self) -> Observer:
        self.token = _scoped_observers.set(_scoped_observers.get() + ((self.fn, self.kinds),))
        return self.fn

    def __exit__(self, *exc: Any) -> None:
        _scoped_observers.reset(self.token)


_time = time.time
_ENDS = frozenset(("resolved", "decision_failed"))


def emit(kind: str, trace: DecisionTrace, attempt: Attempt | None = None, **data) -> bool:
    """Send one event to every observer. An observer that raises is reported once as a warning
    and never breaks the decision. True when some observer was handed the event (and so may
    keep its attempt record): the loop then makes its next change on a copy."""
    trace._take(kind, attempt, data)
    if kind in _ENDS:
        history.append(trace)
    scoped = _scoped_observers.get()
    if not scoped and not _global_observers:
        return False
    # The frozen dataclass's __init__ sets each field through object.__setattr__; six events
    # per decision made that a measurable part of a decision's own time. Built once, and only
    # when an observer wants this kind (an evaluation's rows want two of the six).
    event = None
    for fn, kinds in ([(g, None) for g in _global_observers] + list(scoped)
                      if _global_observers else scoped):
        if kinds is not None and kind not in kinds:
            continue
        if event is None:
            event = build(TraceEvent, {"kind": kind, "trace": trace, "attempt": attempt,
                                       "data": data, "time": _time()})
        try:
            fn(event)
        except Exception as exc:
            if _first_failure(fn):
                warnings.warn(f"decision observer {fn!r} raised {exc!r}; it is ignored",
                              RuntimeWarning, stacklevel=2)
    return event is not None


def record(kind: str, trace: DecisionTrace, attempt: Attempt | None = None, **data) -> bool:
    """Apply one event to its trace without publishing it: for decisions that are only
    re-checked (`decision.revalidate`), which observers and `last_trace()` must not see."""
    trace._take(kind, attempt, data)
    return False


_batch_hooks: list[Callable[..., Any]] = []


def register_batch_hook(fn: Callable[..., Any], remove: bool = False) -> None:
    """Plug in something that wraps each batch of decisions (an `evaluate` or `compare` run):
    `fn(kind, name, attrs)` returns a context manager entered around the run, in the caller's
    context (OpenTelemetry's parent span is one)."""
    if remove:
        if fn in _batch_hooks:
            _batch_hooks.remove(fn)
    elif fn not in _batch_hooks:
        _batch_hooks.append(fn)


@contextlib.contextmanager
def batch(kind: str, name: str | None = None, **attrs) -> Iterator[None]:
    """Run a batch of decisions inside every registered batch hook's context manager."""
    with contextlib.ExitStack() as stack:
        for fn in list(_batch_hooks):
            stack.enter_context(fn(kind, name, attrs))
        yield


def _first_failure(fn: Observer) -> bool:
    try:
        if fn in _warned:
            return False
        _warned.add(fn)
    except TypeError:  # not weakly referenceable: report every time rather than keep it
        pass
    return True


_trace_view: Callable[[DecisionTrace], Any] | None = None


def register_trace_view(factory: Callable[[DecisionTrace], Any] | None) -> None:
    """Plug in the view that shows one finished trace (`EvaluationResult.panel(i)`,
    `%decision_trace`): the notebook layer registers its panel when it loads. None unregisters."""
    global _trace_view
    _trace_view = factory


def trace_view(trace: DecisionTrace) -> Any:
    """The registered view of `trace`, or the trace itself (which displays as HTML)."""
    return trace if _trace_view is None else _trace_view(trace)


#: Readers of recordings (`fn(recorded)`: traces, or None when `fn` does not read that kind of
#: thing) that `decision.revalidate` tries in turn.
recorded_readers: list[Callable[[Any], list[DecisionTrace] | None]] = []


def register_recorded_reader(fn: Callable[[Any], list[DecisionTrace] | None]) -> None:
    """Plug in a reader of recordings `revalidate` takes besides traces (the runtimes package
    registers the cassette reader; it lives here, not in decision/recheck.py, so registering it does
    not import revalidation)."""
    if fn not in recorded_readers:
        recorded_readers.append(fn)


def last_trace() -> DecisionTrace | None:
    """The trace of the most recent decision that finished in this process."""
    return history[-1] if history else None


# ---------------------------------------------------------------------------------------------
# A trace read back from its JSON form
# ---------------------------------------------------------------------------------------------



def trace_from_dict(d: dict[str, Any]) -> DecisionTrace:
    """A `DecisionTrace` rebuilt from its `to_dict()` (as a journal holds it). It lives with the
    trace so that the records' shapes and their reading back change together."""
    trace = DecisionTrace(prompt=d.get("prompt") or "", menu=d.get("menu") or "",
                          options=d.get("options") or [], entry=d.get("entry") or "make",
                          max_attempts=d.get("max_attempts") or 1, runtime=d.get("runtime"),
                          mode=d.get("mode") or "menu", status=d.get("status") or "failed")
    fields = set(Attempt.__dataclass_fields__)
    attempts = []
    for a in d.get("attempts") or []:
        kw = {k: v for k, v in a.items() if k in fields}
        kw["number"], kw["is_last"] = a.get("attempt", 1), a.get("is_last", False)
        kw["confidence"] = Confidence.from_dict(a.get("confidence"))
        for k in ("span", "error_span"):
            if kw.get(k) is not None:
                kw[k] = tuple(kw[k])
        if kw.get("repairs"):
            kw["repairs"] = [Repair(r.get("kind"), r.get("path") or "", r.get("before") or "",
                                    r.get("after") or "",
                                    None if r.get("span") is None else tuple(r["span"]))
                             for r in kw["repairs"]]
        attempts.append(Attempt(**kw))
    trace.attempts = attempts
    trace.tool_rounds = [ToolRound(round=t.get("round"), name=t.get("tool"), args=t.get("args"),
                                   result=t.get("result"), error=t.get("error"),
                                   duration_s=t.get("duration_s"))
                         for t in d.get("tool_rounds") or []]
    trace.result = d.get("result")
    err = d.get("error")
    if err:
        trace.error = RecordedError(err.get("kind"), err.get("type") or "Exception",
                                    err.get("message") or "")
    trace.duration_s, trace.started_at = d.get("duration_s"), d.get("started_at") or 0.0
    context = d.get("context_keys")
    if context:
        trace.context_keys = list(context)
    return trace


def recorded_trace(attempts: list[Attempt], *, entry: str, mode: str) -> DecisionTrace:
    """A trace of recorded attempts alone (a cassette's decision: what each attempt sent and got
    back, not what the decision resolved to), with status "recorded"."""
    trace = DecisionTrace(prompt=attempts[0].prompt if attempts else "", menu="", options=[],
                          entry=entry, max_attempts=len(attempts), mode=mode, status="recorded")
    trace.attempts = list(attempts)
    return trace
