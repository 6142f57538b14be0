"""Evaluation results: what a run of one option set over many inputs came to, and its summaries.

An `EvaluationResult` keeps, for every input, what the summaries, the accuracy and the confusion
table need — the pick, the status, the error kinds, the attempts, tokens, latency, whether the
model was answered from a cache — in compact columns (a few dozen bytes a row, so a million rows
fit). Without a journal it also keeps each row's trace, result and error in memory, as a
notebook exploring a few hundred rows wants; with a journal those stay on disk and are read back
when asked for (`traces[i]`, `panel(i)`, `to_frame()`), which is what bounds a million-row run.
`EvaluationResult.from_journal(path)` loads a journaled run for analysis without any model.
`ComparisonResult` lines up the results of `compare`'s variants. pandas is imported only inside
methods.
"""
from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from pathlib import Path
    from typing import Any, Callable, Iterator

from ..trace.confidence import Confidence
from ..base.errors import ArgumentError, require
from ..trace.decision_trace import DecisionTrace, RecordedError, trace_from_dict, trace_view
from ..trace.tables import CONFIDENCE_COLUMNS, confidence_row
from ..trace.view import quiet_frame  # model and row text: every frame shown in the wrapper

__all__ = ["EvaluationResult", "ComparisonResult", "NO_PICK"]

#: The pick column's label for a finished row whose model never made a valid pick.
NO_PICK = "(no pick)"

ROW_COLUMNS = ["chosen", "args", "result", "error", "attempts", "error_kinds", "duration_s",
               "tokens_in", "tokens_out", "status", "cached"]
STATUSES = ("cancelled", "resolved", "failed")
_CODE = {s: k for k, s in enumerate(STATUSES)}


def cascade_of(trace: Any) -> list[tuple[Any, ...]]:
    """The stages a CascadeRuntime asked over a decision's attempts: (runtime, answered the
    attempt, tokens in, tokens out) each; [] for any other runtime."""
    out = []
    for a in (trace.attempts if trace is not None else ()):
        for st in getattr(a, "cascade", None) or ():
            u = st.get("usage") or {}
            out.append((st.get("runtime"), bool(st.get("answered")),
                        u.get("input_tokens") or 0, u.get("output_tokens") or 0))
    return out


def pick_of(row: Any) -> str | None:
    """The option the model validly picked (kept even when the picked function then raised)."""
    if row is None or row.trace is None or not row.trace.attempts:
        return None
    last = row.trace.attempts[-1]
    return last.chosen if last.error_kind is None else None


def summarize(row: Any) -> tuple[Any, ...]:
    """(status, pick, attempts, error kinds, raised type, tokens in, tokens out, duration,
    cached) of a finished row: what its result keeps of it."""
    trace = row.trace
    raised = None
    if row.error is not None and getattr(row.error, "trace", None) is None:
        raised = f"raised {type(row.error).__name__}"
    if trace is None:
        return (row.status, None, 0, (), raised, None, None, row.duration_s, False)
    attempts = trace.attempts
    tin = tout = 0
    for a in attempts:
        u = a.usage
        if u:
            tin += u.get("input_tokens") or 0
            tout += u.get("output_tokens") or 0
    return (row.status, pick_of(row), len(attempts),
            tuple(a.error_kind for a in attempts if a.error_kind), raised, tin, tout,
            row.duration_s, bool(attempts) and all(a.cached for a in attempts))


class Outcomes:
    """The per-row columns of a result, by input position: status, pick, expected pick,
    attempts, tokens, duration, cached, and where the row's line starts in the journal.
    Error kinds are kept only for the rows that have some."""

    def __init__(self, options: list[str], n: int = 0):
        self.names = list(options)
        self._index = {name: k for k, name in enumerate(self.names)}
        self.status = bytearray(n)
        self.pick = array("h", [-1]) * n
        self.expected = array("h", [-1]) * n
        self.attempts = array("I", [0]) * n
        self.tokens_in = array("q", [-1]) * n
        self.tokens_out = array("q", [-1]) * n
        self.duration = array("d", [math.nan]) * n
        self.cached = bytearray(n)
        self.offset = array("q", [-1]) * n
        self.kinds: dict[int, tuple[str, ...]] = {}
        self.raised: dict[int, str] = {}
        # each row's final Confidence, for the rows whose decision asked for one
        self.conf: dict[int, Confidence] = {}
        # CascadeRuntime rows: each stage asked, (runtime, answered, tokens in, tokens out)
        self.cascade: dict[int, list[tuple[Any, ...]]] = {}

    def __len__(self) -> int:
        return len(self.status)

    def grow(self, n: int) -> None:
        more = n - len(self.status)
        if more > 0:
            self.status.extend(bytes(more))
            self.pick.extend(array("h", [-1]) * more)
            self.expected.extend(array("h", [-1]) * more)
            self.attempts.extend(array("I", [0]) * more)
            self.tokens_in.extend(array("q", [-1]) * more)
            self.tokens_out.extend(array("q", [-1]) * more)
            self.duration.extend(array("d", [math.nan]) * more)
            self.cached.extend(bytes(more))
            self.offset.extend(array("q", [-1]) * more)

    def code(self, name: str | None) -> int:
        if name is None:
            return -1
        k = self._index.get(name)
        if k is None:  # a name outside the menu (a hand-edited journal): kept, not lost
            k = self._index[name] = len(self.names)
            self.names.append(name)
        return k

    def name(self, k: int) -> str | None:
        return None if k < 0 else self.names[k]

    def set(self, i: int, s: tuple[Any, ...], offset: int = -1) -> None:
        status, pick, attempts, kinds, raised, tin, tout, duration, cached = s
        if i >= len(self.status):
            self.grow(max(i + 1, 2 * len(self.status)))
        self.status[i] = _CODE[status]
        self.pick[i] = self.code(pick)
        self.attempts[i] = attempts
        self.tokens_in[i] = -1 if tin is None else tin
        self.tokens_out[i] = -1 if tout is None else tout
        self.duration[i] = math.nan if duration is None else duration
        self.cached[i] = cached
        self.offset[i] = offset
        if kinds:
            self.kinds[i] = kinds
        if raised:
            self.raised[i] = raised

    def trim(self, n: int) -> None:
        for col in (self.status, self.pick, self.expected, self.attempts, self.tokens_in,
                    self.tokens_out, self.duration, self.cached, self.offset):
            del col[n:]
        for kept in (self.conf, self.cascade):
            for i in [i for i in kept if i >= n]:
                del kept[i]

    def finished(self) -> list[int]:
        return [i for i, s in enumerate(self.status) if s]


class _Lazy(Sequence["Any"]):
    """A read-only list whose items are read from the journal when indexed."""

    def __init__(self, result: EvaluationResult, read: Callable[[int], Any]) -> None:
        self._result, self._read = result, read

    def __len__(self) -> int:
        return len(self._result)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._read(i)

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, tuple, Sequence)) and list(self) == list(other)

class _Picks(list["str | None"]):
    """The pick of each input, a plain list. `.picks` used to be the count table, so a key into
    it ("count", "share", a variant) is said to be that table's, now `.pick_counts`, instead of
    failing as a list index would."""

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, str):
            raise KeyError(f".picks is the pick of each input (a list, as .results and "
                           f".statuses are); {i!r} is a column of the pick counts: use "
                           f".pick_counts[{i!r}]")
        return super().__getitem__(i)


def bootstrap_interval(values: Sequence[float], level: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values`: resample the values with
    replacement `resamples` times (a fixed seed: the same values give the same interval) and
    take the central `level` of the resampled means. (nan, nan) for no values."""
    n = len(values)
    if not n:
        return (math.nan, math.nan)
    import random
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return (means[int(tail * resamples)], means[min(resamples - 1, int((1 - tail) * resamples))])


def _rate(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else float("nan")


def _input_frame(columns: list[str], records: Sequence[Mapping[str, Any]],
                 taken: set[str]) -> Any:
    """The input columns as a frame indexed by input position; an input column whose name
    clashes with a result column is shown as `input_<name>`."""
    pd = require("pandas", "pandas", "the result's input columns")
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


def _shown_summary(table: Any) -> Any:
    """The summary (a Series, or a frame with one row per variant) formatted for display."""
    if hasattr(table, "columns"):
        return table.apply(lambda col: col.map(lambda v: _shown(col.name, v)))
    return table.to_frame("value").apply(
        lambda col: [_shown(k, v) for k, v in col.items()])


def _tables_html(title: str, tables: list[tuple[str, Any]]) -> str:
    """Tables side by side, each rendered by pandas (which escapes every cell), in the wrapper
    every view of the library has (no MathJax, no link detection)."""
    import html
    from ..trace.view import wrap
    parts = [f'<div class="openprogram-eval"><p>{title}</p>'
             '<div style="display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start">']
    for caption, table in tables:
        parts.append(f"<div><b>{html.escape(caption)}</b>{table.to_html(escape=True)}</div>")
    parts.append("</div></div>")
    return wrap("".join(parts), "op-eval-view")


def _new_axes(ax: Any) -> Any:
    """A fresh figure unless the caller gave axes: pandas draws a Series into the current axes,
    which would stack a second plot onto the first in the same notebook cell."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots()[1]




class EvaluationResult:
    """The outcome of `evaluate`: one row per input plus summaries.

    Per input, as lists in input order: `.picks`, `.results`, `.statuses`, `.errors`,
    `.traces`, `.expected`. `.to_frame()` — one row per input (index = input position): the
    input columns, `chosen`, `args`, `result` (the object), `error`, `attempts`, `error_kinds`, `duration_s`, `tokens_in`,
    `tokens_out`, `status` ("resolved", "failed" or "cancelled"), `cached` (every model call of
    the row was answered from a cache), and `expected` / `correct` when expected picks were
    given. Summaries (pandas): `.pick_counts`, `.error_counts`, `.confusion`, `.summary`; and
    the figures `.retry_rate`, `.failure_rate`, `.accuracy`. `.traces[i]` / `.panel(i)` open one row's decision; `.plot()` draws
    the pick distribution. Rates are over finished rows. A journaled result (`journal=`, or
    `from_journal`) reads traces, results and errors back from its journal when asked for; its
    `errors` are the journaled errors' type and message. `.rate_limit` is the run's
    `RateLimit`, whose `.stats` count the 429s it absorbed and the pauses it made.
    """

    def __init__(self, *, prompt: str, options: list[str], columns: list[str],
                 records: list[Mapping[str, Any]] | None, outcomes: Outcomes,
                 rows: list[Any] | None, has_expected: bool, wall_s: float, concurrency: int,
                 runtime: str | None, interrupted: bool, name: str | None = None,
                 journal: Path | None = None, shared: list[Any] | None = None) -> None:
        self.prompt, self.options, self.columns = prompt, list(options), columns
        self.records, self._rows, self._outcomes = records, rows, outcomes
        self._has_expected = has_expected
        self.wall_s, self.concurrency, self.runtime = wall_s, concurrency, runtime
        self.interrupted, self.name = interrupted, name
        self.journal = journal  # the journal's path, when the rows are on disk
        self._shared = shared or []  # the journal's shared lines (menu, options) of this run
        #: the run's RateLimit (its `.stats`: rate-limit answers, pauses, seconds paused), set by
        #: the run; None when no request went through the provider transport, or rate_limit=False
        self.rate_limit: Any = None

    @classmethod
    def from_journal(cls, path: Any, section: str | None = None) -> "EvaluationResult":
        """The run journaled at `path`, loaded for analysis without any model: `section` names
        the evaluation when the journal holds several (compare writes one per variant)."""
        from pathlib import Path
        from .journal import read_journal
        shared: dict[str, Any] = {}
        sections, rows = read_journal(path, shared)
        names = [s["section"] for s in sections]
        if section is None:
            if len(names) != 1:
                raise ValueError(f"the journal {str(path)!r} holds {len(names)} evaluations "
                                 f"({', '.join(map(repr, names)) or 'none'}); pass section= "
                                 f"to say which")
            section = names[0]
        if section not in names:
            raise ValueError(f"the journal {str(path)!r} holds no evaluation {section!r}; it "
                             f"holds {', '.join(map(repr, names)) or 'none'}")
        head = [s for s in sections if s["section"] == section][-1]
        got = rows.get(section, [])
        n = max([r["row"] for r, _ in got], default=-1) + 1
        n = max(n, head.get("total") or 0)
        out = Outcomes(head.get("options") or [], n)
        columns: dict[str, None] = {}
        has_expected = False
        for r, offset in got:
            out.set(r["row"], (r["status"], r.get("pick"), r.get("attempts") or 0,
                               tuple(r.get("error_kinds") or ()), r.get("raised"),
                               r.get("tokens_in"), r.get("tokens_out"), r.get("latency_s"),
                               bool(r.get("cached"))), offset)
            if r.get("expected") is not None:
                has_expected = True
                out.expected[r["row"]] = out.code(r["expected"])
            conf = Confidence.from_dict(r.get("confidence"))
            if conf is not None:
                out.conf[r["row"]] = conf
            if r.get("cascade"):
                out.cascade[r["row"]] = [tuple(st) for st in r["cascade"]]
            columns.update(dict.fromkeys(r.get("input") or {}))
        has_expected = has_expected or bool(head.get("expected"))
        return cls(prompt=head.get("prompt") or "", options=head.get("options") or [],
                   columns=list(columns), records=None, outcomes=out, rows=None,
                   has_expected=has_expected, wall_s=float("nan"),
                   concurrency=head.get("concurrency") or 1, runtime=head.get("runtime"),
                   interrupted=False, name=None if section == "evaluate" else section,
                   journal=Path(path), shared=shared.get(section))

    # -- per row ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._outcomes)

    @property
    def statuses(self) -> list[str]:
        return [STATUSES[c] for c in self._outcomes.status]

    @property
    def expected(self) -> list[str | None] | None:
        """The expected pick of each input (None where unknown); None when none were given."""
        if not self._has_expected:
            return None
        names = self._outcomes.names
        return [None if k < 0 else names[k] for k in self._outcomes.expected]

    @property
    def picks(self) -> list[str | None]:
        """The option picked for each input (None: no valid pick, or cancelled)."""
        names = self._outcomes.names
        return _Picks(None if k < 0 else names[k] for k in self._outcomes.pick)

    @property
    def picks_list(self) -> list[str | None]:
        """`.picks` under its older name (from when `.picks` was the count table)."""
        import warnings
        warnings.warn(".picks_list is now .picks (the pick of each input); the count table is "
                      ".pick_counts", DeprecationWarning, stacklevel=2)
        return self.picks

    def _line(self, i: int) -> dict[str, Any] | None:
        offset = self._outcomes.offset[i]
        if offset < 0:
            return None
        from .journal import read_row
        assert self.journal is not None  # a row has an offset only in a journaled result
        line: dict[str, Any] | None = read_row(self.journal, offset)
        return line

    @property
    def traces(self) -> Sequence[DecisionTrace | None]:
        """The DecisionTrace of each input (None for a cancelled row); read from the journal as
        each is indexed, for a journaled result."""
        if self._rows is not None:
            return [r.trace if r is not None else None for r in self._rows]

        def read(i: int) -> DecisionTrace | None:
            from .journal import shared_at, unpack_trace
            line = self._line(i)
            if line is None or not line.get("trace"):
                return None
            shared = shared_at(self._shared, self._outcomes.offset[i])
            return trace_from_dict(unpack_trace(line["trace"], shared))
        return _Lazy(self, read)

    @property
    def results(self) -> Sequence[Any]:
        """Each input's resolved result (None unless its status is "resolved"); a journaled
        result gives each in its JSON form."""
        if self._rows is not None:
            return [r.result if r is not None and r.status == "resolved" else None
                    for r in self._rows]

        def read(i: int) -> Any:
            line = self._line(i)
            return line.get("result") if line and line.get("status") == "resolved" else None
        return _Lazy(self, read)

    @property
    def errors(self) -> Sequence[BaseException | None]:
        if self._rows is not None:
            return [r.error if r is not None else None for r in self._rows]

        def read(i: int) -> BaseException | None:
            line = self._line(i) or {}
            err = line.get("error")
            return None if not err else RecordedError(line.get("error_kind"), err["type"],
                                                      err["message"])
        return _Lazy(self, read)

    def _trace(self, i: int) -> DecisionTrace:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"row must be an input position (int), got {type(i).__name__}")
        if not -len(self) <= i < len(self):
            raise IndexError(f"row {i} is out of range: there are {len(self)} inputs")
        trace = self.traces[i]
        if trace is None:
            raise ValueError(f"input {i} has no trace: it was cancelled before its decision ran")
        return trace

    def panel(self, i: int) -> Any:
        """The decision panel of input `i`: the view registered with `register_trace_view`
        (the notebook layer registers its panel when it loads), else the trace itself, which
        displays as HTML."""
        return trace_view(self._trace(i))

    # -- the table ----------------------------------------------------------------------------
    @property
    def finished(self) -> int:
        return len(self._outcomes) - self._outcomes.status.count(0)

    def _details(self) -> tuple[list[Any], list[Any], list[Any], list[Any] | None]:
        """Per row: args, result (the object; its JSON form from a journal), error text (and
        the input rows, from a journal)."""
        n = len(self)
        args: list[Any]
        results: list[Any]
        errors: list[Any]
        if self._rows is not None:
            args, results, errors = [], [], []
            for row in self._rows:
                trace = row.trace if row is not None else None
                last = trace.attempts[-1] if trace is not None and trace.attempts else None
                args.append(last.args if last is not None and pick_of(row) is not None
                            else None)
                # the object itself: a frame is for analysis (df["result"] == "REFUND");
                # only a view turns it into text
                results.append(row.result if row and row.status == "resolved" else None)
                errors.append(f"{type(row.error).__name__}: {row.error}"
                              if row is not None and row.error is not None else None)
            return args, results, errors, None
        from .journal import read_journal
        args, results, errors = [None] * n, [None] * n, [None] * n
        inputs: list[Any] = [{}] * n
        assert self.journal is not None  # no rows in memory: they are in the journal
        _, rows = read_journal(self.journal)
        offsets = self._outcomes.offset
        for line, offset in rows.get(self.name or "evaluate", []):
            i = line["row"]
            if i < n and offsets[i] == offset:
                args[i] = line.get("args")
                results[i] = line.get("result")     # its JSON form, as the journal keeps it
                err = line.get("error")
                errors[i] = f"{err['type']}: {err['message']}" if err else None
                inputs[i] = line.get("input") or {}
        return args, results, errors, inputs

    def to_frame(self) -> Any:
        """One row per input; see the class docstring for the columns. A journaled result
        reads its journal for the arguments, results, errors and inputs."""
        pd = require("pandas", "pandas", "the result's to_frame()")
        extra = ["expected", "correct"] if self._has_expected else []
        args, results, errors, inputs = self._details()
        records = self.records if self.records is not None else inputs or []
        frame = _input_frame(self.columns, records, set(ROW_COLUMNS + extra))
        o = self._outcomes
        kinds = o.kinds
        table = pd.DataFrame({
            "chosen": self.picks, "args": args, "result": results, "error": errors,
            "attempts": list(o.attempts),
            "error_kinds": [list(kinds.get(i, ())) for i in range(len(o))],
            "duration_s": [None if math.isnan(d) else d for d in o.duration],
            "tokens_in": pd.array([None if t < 0 else t for t in o.tokens_in], dtype="Int64"),
            "tokens_out": pd.array([None if t < 0 else t for t in o.tokens_out], dtype="Int64"),
            "status": self.statuses, "cached": [bool(c) for c in o.cached],
        }, columns=ROW_COLUMNS, index=frame.index)
        if self._has_expected:
            exp, picks = self.expected or [], self.picks
            table["expected"] = exp
            table["correct"] = [None if e is None or not s else p == e
                                for e, p, s in zip(exp, picks, o.status)]
        if o.conf:  # the distribution's columns only when the run asked for one
            rows = [confidence_row(o.conf.get(i)) for i in range(len(o))]
            for col in CONFIDENCE_COLUMNS:
                table[col] = [r[col] for r in rows]
        return quiet_frame(pd.concat([frame, table], axis=1))

    # -- summaries ----------------------------------------------------------------------------
    @property
    def pick_counts(self) -> Any:
        """The pick distribution over finished rows: a count and a share for every option (zero
        for options never picked), plus "(no pick)" when some rows got no valid pick."""
        pd = require("pandas", "pandas", "the result's .pick_counts")
        o = self._outcomes
        counts: Counter[str] = Counter()
        finished = 0
        for s, k in zip(o.status, o.pick):
            if s:
                finished += 1
                counts[o.names[k] if k >= 0 else NO_PICK] += 1
        index = list(self.options) + [k for k in counts if k not in self.options and
                                      k != NO_PICK] + ([NO_PICK] if counts.get(NO_PICK) else [])
        count = pd.Series([counts.get(k, 0) for k in index], index=pd.Index(index, name="option"),
                          dtype="int64")
        share = count / finished if finished else count.astype(float) * float("nan")
        return quiet_frame(pd.DataFrame({"count": count, "share": share}))

    @property
    def retry_rate(self) -> float:
        """The share of finished rows that needed more than one attempt."""
        o = self._outcomes
        return _rate(sum(1 for s, a in zip(o.status, o.attempts) if s and a > 1), self.finished)

    @property
    def repair_counts(self) -> Any:
        """How many rows each repair kind saved from a re-ask (repair=, see repair.py): rows
        whose pick was resolved on an attempt that needed that kind of repair, each kind
        counted once per row."""
        pd = require("pandas", "pandas", "the result's .repair_counts")
        counts: Counter[str] = Counter()
        for t in self.traces:
            if t is None or t.status != "resolved" or not t.attempts:
                continue
            counts.update({r.kind for r in t.attempts[-1].repairs})
        items = counts.most_common()
        return pd.Series([c for _, c in items], index=pd.Index([k for k, _ in items],
                                                                 name="repair"),
                         name="rows", dtype="int64")

    @property
    def failure_rate(self) -> float:
        """The share of finished rows that failed (no valid pick, model error, or an exception
        in the picked function)."""
        return _rate(self._outcomes.status.count(_CODE["failed"]), self.finished)

    @property
    def error_counts(self) -> Any:
        """How often each error kind occurred, over every attempt of every finished row (a row
        that was re-asked and then resolved counts its first attempt's error). A picked
        function's exception counts as "raised <ExceptionType>"."""
        pd = require("pandas", "pandas", "the result's .error_counts")
        o = self._outcomes
        counts: Counter[str] = Counter()
        for i, kinds in o.kinds.items():
            if o.status[i]:
                counts.update(kinds)
        for i, raised in o.raised.items():
            if o.status[i]:
                counts[raised] += 1
        items = counts.most_common()
        return pd.Series([c for _, c in items], index=pd.Index([k for k, _ in items],
                                                                 name="error_kind"),
                         name="count", dtype="int64")

    def _scored(self) -> list[tuple[str, str | None]]:
        """(expected, pick) for finished rows with a known expected pick."""
        if not self._has_expected:
            return []
        o = self._outcomes
        names = o.names
        return [(names[e], names[p] if p >= 0 else None)
                for s, e, p in zip(o.status, o.expected, o.pick) if s and e >= 0]

    @property
    def accuracy(self) -> float | None:
        """The share of finished rows with an expected pick whose pick matched it (a failed row
        counts as wrong; None when no expected picks were given)."""
        if not self._has_expected:
            return None
        scored = self._scored()
        return _rate(sum(1 for e, p in scored if e == p), len(scored))

    @property
    def shortlist_recall(self) -> float | None:
        """With `shortlist=` and expected picks: the share of finished rows with an expected
        pick whose expected option was among those the model was shown (recall@k). Below 1,
        the shortlist hid the right option from some rows, whatever the model did; None without
        a shortlist or expected picks. With shortlist="native", the options shown are the ones
        the provider's search loaded; a row whose model searched nothing is not counted."""
        expected = self.expected
        if expected is None:
            return None
        shown = [(e, _shortlisted(t)) for e, t in zip(expected, self.traces)
                 if e is not None and t is not None and t.shortlist]
        shown = [(e, names) for e, names in shown if names is not None]
        if not shown:
            return None
        return _rate(sum(1 for e, names in shown if e in names), len(shown))

    @property
    def confusion(self) -> Any:
        """A table of expected pick (rows) by actual pick (columns), over finished rows with an
        expected pick; None when no expected picks were given."""
        if not self._has_expected:
            return None
        pd = require("pandas", "pandas", "the result's .confusion")
        scored = self._scored()
        cols = list(self.options) + ([NO_PICK] if any(p is None for _, p in scored) else [])
        table = pd.DataFrame(0, index=pd.Index(list(self.options), name="expected"),
                             columns=pd.Index(cols, name="picked"), dtype="int64")
        for (e, p), c in Counter(scored).items():
            table.loc[e, p or NO_PICK] += c
        return quiet_frame(table)

    @property
    def summary(self) -> Any:
        """The headline figures, as a pandas Series."""
        pd = require("pandas", "pandas", "the result's .summary")
        o = self._outcomes
        statuses = Counter(o.status)
        durations = [d for s, d in zip(o.status, o.duration) if s and not math.isnan(d)]
        data: dict[str, Any] = {
            "inputs": len(o), "resolved": statuses.get(_CODE["resolved"], 0),
            "failed": statuses.get(_CODE["failed"], 0),
            "cancelled": statuses.get(_CODE["cancelled"], 0),
            "retry_rate": self.retry_rate, "failure_rate": self.failure_rate,
        }
        if self._has_expected:
            data["accuracy"] = self.accuracy
            recall = self.shortlist_recall
            if recall is not None:
                data["shortlist_recall"] = recall
        if self._has_expected and self._outcomes.conf:
            lo, hi = self.mean_p_expected_ci or (math.nan, math.nan)
            data.update(mean_p_expected=self.mean_p_expected, mean_p_expected_lo=lo,
                        mean_p_expected_hi=hi, ece=self.ece, brier=self.brier)
        data.update({
            "mean_duration_s": sum(durations) / len(durations) if durations else float("nan"),
            "wall_s": self.wall_s, "concurrency": self.concurrency,
            "tokens_in": sum(t for t in o.tokens_in if t > 0),
            "tokens_out": sum(t for t in o.tokens_out if t > 0),
        })
        return pd.Series(data, name=self.name or "evaluation", dtype=object)

    @property
    def cascade_counts(self) -> Any:
        """For a run on a `CascadeRuntime`: per runtime, how many rows it answered (its reply
        was the row's last attempt's), how many it was asked on, and the tokens it spent; None
        for any other runtime."""
        o = self._outcomes
        if not o.cascade:
            return None
        pd = require("pandas", "pandas", "the result's .cascade_counts")
        table: dict[str, dict[str, int]] = {}
        for i, stages in o.cascade.items():
            if i >= len(o) or not o.status[i]:
                continue
            answered_by = None
            for rt, answered, tin, tout in stages:
                row = table.setdefault(str(rt), {"answered": 0, "asked": 0, "tokens_in": 0,
                                                 "tokens_out": 0})
                row["asked"] += 1
                row["tokens_in"] += tin
                row["tokens_out"] += tout
                if answered:
                    answered_by = str(rt)
            if answered_by is not None:
                table[answered_by]["answered"] += 1
        frame = pd.DataFrame.from_dict(table, orient="index",
                                       columns=["answered", "asked", "tokens_in", "tokens_out"])
        frame.index.name = "runtime"
        return frame

    # -- how sure, against the expected picks -------------------------------------------------
    def _confident(self) -> list[tuple[Confidence, str, str | None]]:
        """(confidence, expected, pick) of the finished rows that have both a distribution
        and an expected pick."""
        o = self._outcomes
        if not self._has_expected:
            return []
        names = o.names
        return [(o.conf[i], names[o.expected[i]], names[o.pick[i]] if o.pick[i] >= 0 else None)
                for i in sorted(o.conf) if i < len(o) and o.status[i] and o.expected[i] >= 0]

    def _need_confidence(self, what: str) -> list[tuple[Confidence, str, str | None]]:
        if not self._has_expected:
            raise ArgumentError(f"{what} compares the model's probabilities with the expected "
                                f"picks: run evaluate(..., expected=...)")
        rows = self._confident()
        if not rows and not self._outcomes.conf:
            raise ArgumentError(f"{what} needs each row's distribution: run evaluate(..., "
                                f"confidence=True) or confidence=decision.Samples(n)")
        return rows

    @property
    def mean_p_expected(self) -> float | None:
        """The mean probability the model gave the expected option, over the rows with a
        distribution and an expected pick (None without either). It moves with every edit of
        an option's description, where accuracy on twenty rows moves in steps of 5 %."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        ps = [c.probs.get(e, 0.0) for c, e, _ in self._confident()]
        return sum(ps) / len(ps) if ps else float("nan")

    @property
    def mean_p_expected_ci(self) -> tuple[float, float] | None:
        """The 95 % bootstrap interval of `mean_p_expected` (2,000 resamples of the rows, a
        fixed seed, so the same rows give the same interval)."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        ps = [c.probs.get(e, 0.0) for c, e, _ in self._confident()]
        return bootstrap_interval(ps)

    def calibration(self, bins: int = 10) -> Any:
        """Reliability table: the rows binned by the probability of their pick (`bins` equal
        widths over [0, 1]); per bin the count, the mean confidence and the accuracy (the
        share whose pick was the expected one). Rows without a pick have no confidence in one
        and are left out."""
        pd = require("pandas", "pandas", "the result's calibration()")
        rows = self._binned(bins, "calibration()")
        out = []
        for k, members in enumerate(rows):
            n = len(members)
            out.append({"bin": f"[{k / bins:.2f}, {(k + 1) / bins:.2f}" +
                               ("]" if k == bins - 1 else ")"),
                        "count": n,
                        "mean_confidence": sum(p for p, _ in members) / n if n else math.nan,
                        "accuracy": sum(ok for _, ok in members) / n if n else math.nan})
        return pd.DataFrame(out, columns=["bin", "count", "mean_confidence", "accuracy"])

    def _binned(self, bins: Any, what: str) -> list[list[tuple[float, bool]]]:
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ArgumentError(f"{what}: bins must be a whole number >= 1, got {bins!r}")
        out: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
        for c, e, p in self._need_confidence(what):
            if c.p_pick is not None:
                out[min(int(c.p_pick * bins), bins - 1)].append((c.p_pick, p == e))
        return out

    @property
    def ece(self) -> float | None:
        """Expected calibration error over 10 bins: the count-weighted mean of
        |accuracy − mean confidence| per bin (0 for a model exactly as sure as it is right)."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        binned = self._binned(10, "ece")
        total = sum(len(b) for b in binned)
        if not total:
            return float("nan")
        return sum(abs(sum(ok for _, ok in b) - sum(p for p, _ in b)) for b in binned) / total

    @property
    def brier(self) -> float | None:
        """The multi-class Brier score: the mean over rows of Σ (p_option − [option is
        expected])² over every option, `other` counted as one more outcome that is never
        expected. 0 is a certain, right model; 2 a certain, wrong one."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        rows = self._confident()
        if not rows:
            return float("nan")
        total = 0.0
        for c, e, _ in rows:
            total += sum((p - (name == e)) ** 2 for name, p in c.probs.items())
            # `other` is never expected; an expected name off this menu had probability 0
            total += c.other ** 2 + (0.0 if e in c.probs else 1.0)
        return total / len(rows)

    def selective(self, coverage: Any = None) -> Any:
        """What a threshold would buy: the rows sorted by the probability of their pick, and
        for each `coverage` (a share of rows, or a list of them; default 0.1 to 1.0) the
        accuracy of that most confident share, the number of rows and the threshold (the
        lowest p_pick kept). Rows without a pick count as least confident."""
        pd = require("pandas", "pandas", "the result's selective()")
        if coverage is None:
            coverage = [k / 10 for k in range(1, 11)]
        many = isinstance(coverage, (list, tuple))
        covs = list(coverage) if many else [coverage]
        for c in covs:
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c <= 1:
                raise ArgumentError(f"selective(coverage=...) takes shares of the rows in (0, 1], "
                                    f"e.g. 0.8 or [0.5, 0.8, 1.0], got {c!r}")
        rows = self._need_confidence("selective()")
        ranked = sorted(((c.p_pick if c.p_pick is not None else -1.0, p == e)
                         for c, e, p in rows), key=lambda r: -r[0])
        out = []
        for c in covs:
            k = max(1, math.ceil(c * len(ranked) - 1e-9)) if ranked else 0
            kept = ranked[:k]
            out.append({"coverage": c, "rows": k,
                        "threshold": (kept[-1][0] if kept and kept[-1][0] >= 0 else math.nan),
                        "accuracy": sum(ok for _, ok in kept) / k if k else math.nan})
        return pd.DataFrame(out, columns=["coverage", "rows", "threshold", "accuracy"])

    def plot_calibration(self, bins: int = 10, ax: Any = None) -> Any:
        """A reliability diagram: accuracy against mean confidence per bin, the diagonal of a
        calibrated model, each bin's count written over its point. Returns the matplotlib
        figure (`fig.savefig("calibration.png")`)."""
        table = self.calibration(bins)
        ax = _new_axes(ax)
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
        shown = table[table["count"] > 0]
        ax.plot(shown["mean_confidence"], shown["accuracy"], marker="o", label="this run")
        for _, r in shown.iterrows():
            ax.annotate(str(int(r["count"])), (r["mean_confidence"], r["accuracy"]),
                        textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("mean probability of the pick")
        ax.set_ylabel("accuracy")
        ax.set_title(f"calibration (ECE {self.ece:.3f}, rows per point shown)")
        ax.legend(loc="lower right")
        return ax.figure

    def plot_selective(self, ax: Any = None) -> Any:
        """Accuracy of the most confident share of rows against that share (coverage), with
        the threshold each point needs; returns the matplotlib figure."""
        grid = [k / 20 for k in range(1, 21)]
        table = self.selective(grid)
        ax = _new_axes(ax)
        ax.plot(table["coverage"], table["accuracy"], marker=".")
        for _, r in table.iloc[::4].iterrows():
            if r["threshold"] == r["threshold"]:
                ax.annotate(f"p≥{r['threshold']:.2f}", (r["coverage"], r["accuracy"]),
                            textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("coverage (share of rows answered, most confident first)")
        ax.set_ylabel("accuracy")
        ax.set_title("selective accuracy")
        return ax.figure

    # -- views --------------------------------------------------------------------------------
    def _headline(self) -> str:
        s = Counter(self.statuses)
        text = (f"{len(self)} inputs: {s.get('resolved', 0)} resolved, "
                f"{s.get('failed', 0)} failed")
        if s.get("cancelled"):
            text += f", {s['cancelled']} cancelled"
        text += f" · retry rate {self.retry_rate:.1%} · failure rate {self.failure_rate:.1%}"
        if self._has_expected:
            text += f" · accuracy {self.accuracy:.1%}"
            m = self.mean_p_expected
            if m is not None and m == m:
                text += f" · mean p(expected) {m:.3f}"
        if self.wall_s == self.wall_s:
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
        picks = self.pick_counts
        picks["share"] = [f"{v:.1%}" if v == v else "n/a" for v in picks["share"]]
        tables = [("summary", _shown_summary(self.summary)), ("picks", picks)]
        errors = self.error_counts
        if len(errors):
            tables.append(("error kinds", errors.to_frame()))
        if self._has_expected:
            tables.append(("confusion (expected × picked)", self.confusion))
        return _tables_html(title, tables)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """A bar chart of the pick distribution (pandas plotting); returns the matplotlib axes."""
        kwargs.setdefault("title", f"picks over {self.finished} inputs")
        kwargs.setdefault("rot", 0)
        ax = self.pick_counts["count"].plot.bar(ax=_new_axes(ax), **kwargs)
        ax.set_ylabel("inputs")
        return ax


class ComparisonResult:
    """The outcome of `compare`: one `EvaluationResult` per variant (`result[name]`), lined up.

    `.to_frame()` — the input columns, one pick column per variant, `expected` when given, and
    `agree` (every variant picked the same; None while a row is cancelled somewhere).
    `.differences` — the rows where the variants picked differently. `.summary` — retry and
    failure rates (and accuracy) per variant. `.picks` — each variant's pick of each input
    (`{variant: list}`); `.pick_counts` — pick counts per option per variant. `.results` maps
    each variant to its `EvaluationResult`.
    """

    def __init__(self, results: dict[str, EvaluationResult], *, columns: list[str],
                 records: list[Mapping[str, Any]], expected: list[str | None] | None,
                 interrupted: bool) -> None:
        self.results, self.columns, self.records = results, columns, records
        self.expected, self.interrupted = expected, interrupted

    def __getitem__(self, name: str) -> EvaluationResult:
        return self.results[name]

    @property
    def variants(self) -> list[str]:
        return list(self.results)

    def to_frame(self) -> Any:
        pd = require("pandas", "pandas", "the result's to_frame()")
        extra = (["expected"] if self.expected is not None else []) + ["agree"]
        frame = _input_frame(self.columns, self.records, set(self.variants) | set(extra))
        picks = self.picks
        statuses = {name: r.statuses for name, r in self.results.items()}
        for name in self.variants:
            frame[name] = picks[name]
        if self.expected is not None:
            frame["expected"] = self.expected
        agree: list[bool | None] = []
        for i in range(len(self.records)):
            if any(statuses[name][i] == "cancelled" for name in self.variants):
                agree.append(None)
            else:
                agree.append(len({picks[name][i] for name in self.variants}) == 1)
        frame["agree"] = pd.Series(agree, index=frame.index, dtype=object)
        return quiet_frame(frame)

    @property
    def differences(self) -> Any:
        """The rows (finished in every variant) where the variants picked differently; a
        failure with no valid pick counts as a pick of its own."""
        frame = self.to_frame()
        from ..trace.view import quiet_frame  # model and row text: shown in the library's wrapper
        return quiet_frame(frame[frame["agree"] == False])  # noqa: E712 (None too)

    @property
    def summary(self) -> Any:
        pd = require("pandas", "pandas", "the result's .summary")
        table = pd.DataFrame({name: r.summary for name, r in self.results.items()}).T
        table.index.name = "variant"
        return quiet_frame(table)

    @property
    def ranking(self) -> Any:
        """The variants ranked by `mean_p_expected` (best first), beside their accuracy, with
        each one's 95 % bootstrap interval and the variants whose interval overlaps it (an
        overlap means these rows cannot tell the two apart). None when the runs asked for no
        distribution or had no expected picks."""
        pd = require("pandas", "pandas", "the comparison's .ranking")
        rows: dict[str, dict[str, Any]] = {}
        for name, r in self.results.items():
            m = r.mean_p_expected
            if m is None:
                return None
            lo, hi = r.mean_p_expected_ci or (math.nan, math.nan)
            rows[name] = {"mean_p_expected": m, "lo": lo, "hi": hi, "accuracy": r.accuracy}
        for name, row in rows.items():
            row["overlaps"] = [other for other, o in rows.items() if other != name and
                               o["lo"] <= row["hi"] and row["lo"] <= o["hi"]]
        table = pd.DataFrame.from_dict(rows, orient="index",
                                       columns=["mean_p_expected", "lo", "hi", "accuracy",
                                                "overlaps"])
        table.index.name = "variant"
        return table.sort_values("mean_p_expected", ascending=False, kind="stable")

    @property
    def picks(self) -> dict[str, list[str | None]]:
        """Each variant's pick of each input: `{variant: [pick, ...]}`."""
        return {name: r.picks for name, r in self.results.items()}

    @property
    def pick_counts(self) -> Any:
        pd = require("pandas", "pandas", "the result's .pick_counts")
        counts = {name: r.pick_counts["count"] for name, r in self.results.items()}
        order = list(dict.fromkeys(k for c in counts.values() for k in c.index if k != NO_PICK))
        if any(NO_PICK in c.index for c in counts.values()):
            order.append(NO_PICK)
        table = pd.DataFrame({name: c.reindex(order, fill_value=0) for name, c in counts.items()},
                             index=pd.Index(order, name="option")).astype("int64")
        table.columns.name = "variant"
        return quiet_frame(table)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """Grouped bars: the picks of each variant per option; returns the matplotlib axes."""
        kwargs.setdefault("title", "picks per variant")
        kwargs.setdefault("rot", 0)
        ax = self.pick_counts.plot.bar(ax=_new_axes(ax), **kwargs)
        ax.set_ylabel("inputs")
        return ax

    def _headline(self) -> str:
        diff = len(self.differences)
        text = (f"{len(self.variants)} variants over {len(self.records)} inputs; they pick "
                f"differently on {diff} input{'s' if diff != 1 else ''}")
        ranking = self.ranking
        if ranking is not None and len(ranking):
            best = ranking.index[0]
            text += (f"; by mean p(expected) {best!r} leads "
                     f"({ranking.loc[best, 'mean_p_expected']:.3f})")
            tied = ranking.loc[best, "overlaps"]
            if tied:
                text += (f", but its 95 % interval overlaps {', '.join(map(repr, tied))}: "
                         f"these rows do not tell them apart")
        if self.interrupted:
            text += " · INTERRUPTED"
        return text

    def __repr__(self) -> str:
        return f"<ComparisonResult {', '.join(map(repr, self.variants))}: {self._headline()}>"

    def _repr_html_(self) -> str:
        import html
        title = f"<b>compare</b> {html.escape(', '.join(self.variants))}: " \
                f"{html.escape(self._headline())}"
        tables = [("summary", _shown_summary(self.summary)), ("picks", self.pick_counts)]
        ranking = self.ranking
        if ranking is not None:
            tables.insert(1, ("ranked by mean p(expected)", ranking))
        diffs = self.differences
        if len(diffs):
            shown = diffs.head(20)
            caption = "where they differ" + (f" (first 20 of {len(diffs)})"
                                             if len(diffs) > 20 else "")
            tables.append((caption, shown))
        return _tables_html(title, tables)


def _shortlisted(trace: DecisionTrace) -> list | None:
    """The options a row's model was shown: the shortlist's, or with shortlist="native" those
    the provider's search loaded over the decision's attempts (None: it searched nothing)."""
    if trace.shortlist.get("by") != "native":
        return trace.shortlist["shown"]
    from ..decision.options.shortlist import loaded_tools
    found = [loaded_tools(a.raw) for a in trace.attempts]
    if all(f is None for f in found):
        return None
    return [n for f in found for n in f or ()]
