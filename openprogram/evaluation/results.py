"""Evaluation results: what a run of one option set over many inputs came to, and its summaries.

An `EvaluationResult` keeps, for every input, what the summaries, the accuracy and the confusion
table need — the pick, the status, the error kinds, the attempts, tokens, latency, whether the
model was answered from a cache — in compact columns (a few dozen bytes a row, so a million rows
fit). Without a journal it also keeps each row's trace, result and error in memory, as a
notebook exploring a few hundred rows wants; with a journal those stay on disk and are read back
when asked for (`traces[i]`, `panel(i)`, `to_frame()`), which is what bounds a million-row run.
`EvaluationResult.from_journal(path)` loads a journaled run for analysis without any model.
Its columns are in `outcomes`, its confidence figures in `calibration`, and `comparison`'s
`ComparisonResult` lines up the results of `compare`'s variants. pandas is imported only inside
methods. It is long because `EvaluationResult`'s summaries (pick counts, rates, accuracy, the
confusion table, cascade and repair counts, shortlist recall, the HTML view) all read the same
compact columns and lazy rows.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from ..base.errors import require
from ..trace.confidence import Confidence
from ..trace.decision_trace import DecisionTrace, RecordedError, trace_from_dict, trace_view
from ..trace.safe_html import quiet_frame  # model and row text: every frame shown in the wrapper
from ..trace.tables import CONFIDENCE_COLUMNS, confidence_row
from .calibration import ConfidenceMetrics, bootstrap_interval, new_axes
from .outcomes import (
    NO_PICK,
    ROW_COLUMNS,
    STATUS_CODE,
    STATUSES,
    LazyRows,
    Outcomes,
    PickList,
    cascade_of,
    pick_of,
    summarize,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from pathlib import Path
    from typing import Any

__all__ = ["EvaluationResult", "NO_PICK", "Outcomes", "bootstrap_interval", "cascade_of",
           "pick_of", "summarize"]


def _rate(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else float("nan")


def input_frame(columns: list[str], records: Sequence[Mapping[str, Any]],
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


def shown_summary(table: Any) -> Any:
    """The summary (a Series, or a frame with one row per variant) formatted for display."""
    if hasattr(table, "columns"):
        return table.apply(lambda col: col.map(lambda v: _shown(col.name, v)))
    return table.to_frame("value").apply(
        lambda col: [_shown(k, v) for k, v in col.items()])


def tables_html(title: str, tables: list[tuple[str, Any]]) -> str:
    """Tables side by side, each rendered by pandas (which escapes every cell), in the wrapper
    every view of the library has (no MathJax, no link detection)."""
    import html

    from ..trace.safe_html import wrap
    parts = [f'<div class="openprogram-eval"><p>{title}</p>'
             '<div style="display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start">']
    for caption, table in tables:
        parts.append(f"<div><b>{html.escape(caption)}</b>{table.to_html(escape=True)}</div>")
    parts.append("</div></div>")
    return wrap("".join(parts), "op-eval-view")





class EvaluationResult(ConfidenceMetrics):
    """The outcome of `evaluate`: one row per input plus summaries.

    Per input, as lists in input order: `.picks`, `.results`, `.statuses`, `.errors`, `.traces`,
    `.expected`. `.to_frame()` — one row per input (index = input position): the input columns,
    `chosen`, `args`, `result` (the object), `error`, `attempts`, `error_kinds`, `duration_s`,
    `tokens_in`, `tokens_out`, `status` ("resolved", "failed" or "cancelled"), `cached` (every model
    call of the row was answered from a cache), and `expected` / `correct` when expected picks were
    given. Summaries (pandas): `.pick_counts`, `.error_counts`, `.confusion`, `.summary`; and the
    figures `.retry_rate`, `.failure_rate`, `.accuracy`. `.traces[i]` / `.panel(i)` open one row's
    decision; `.plot()` draws the pick distribution. Rates are over finished rows. A journaled
    result (`journal=`, or `from_journal`) reads traces, results and errors back from its journal
    when asked for; its `errors` are the journaled errors' type and message. `.rate_limit` is the
    run's `RateLimit`, whose `.stats` count the 429s it absorbed and the pauses it made.
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
        #: the `PickSetPolicy` the run decided with (`pick_set=`), set by the run; its figures
        #: are `coverage`, `mean_set_size` and `pick_set_figures()`
        self.pick_set: Any = None

    @classmethod
    def from_journal(cls, path: Any, section: str | None = None) -> EvaluationResult:
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
        result = cls(prompt=head.get("prompt") or "", options=head.get("options") or [],
                   columns=list(columns), records=None, outcomes=out, rows=None,
                   has_expected=has_expected, wall_s=float("nan"),
                   concurrency=head.get("concurrency") or 1, runtime=head.get("runtime"),
                   interrupted=False, name=None if section == "evaluate" else section,
                   journal=Path(path), shared=shared.get(section))
        policy = (head.get("confidence") or {}).get("pick_set")
        if policy is not None:   # the run decided with a pick set: its figures come back
            from ..decision.conformal import PickSetPolicy
            result.pick_set = PickSetPolicy.from_dict(policy)
        return result

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
        return PickList(None if k < 0 else names[k] for k in self._outcomes.pick)

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
        return LazyRows(self, read)

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
        return LazyRows(self, read)

    @property
    def errors(self) -> Sequence[BaseException | None]:
        if self._rows is not None:
            return [r.error if r is not None else None for r in self._rows]

        def read(i: int) -> BaseException | None:
            line = self._line(i) or {}
            err = line.get("error")
            return None if not err else RecordedError(line.get("error_kind"), err["type"],
                                                      err["message"])
        return LazyRows(self, read)

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
        frame = input_frame(self.columns, records, set(ROW_COLUMNS + extra))
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
        """How many rows each repair kind saved from a re-ask (repair=, see decision/repair/): rows
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
        return _rate(self._outcomes.status.count(STATUS_CODE["failed"]), self.finished)

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
        listed = [(e, _shortlisted(t)) for e, t in zip(expected, self.traces)
                  if e is not None and t is not None and t.shortlist]
        shown = [(e, names) for e, names in listed if names is not None]
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
            "inputs": len(o), "resolved": statuses.get(STATUS_CODE["resolved"], 0),
            "failed": statuses.get(STATUS_CODE["failed"], 0),
            "cancelled": statuses.get(STATUS_CODE["cancelled"], 0),
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
        tables = [("summary", shown_summary(self.summary)), ("picks", picks)]
        errors = self.error_counts
        if len(errors):
            tables.append(("error kinds", errors.to_frame()))
        if self._has_expected:
            tables.append(("confusion (expected × picked)", self.confusion))
        if self._has_expected and self._confident_at():
            pairs = self.confused_pairs(5)
            if len(pairs):
                pairs["rows"] = [_few(r) for r in pairs["rows"]]
                pairs["shared_words"] = [_few(w) for w in pairs["shared_words"]]
                tables.append(("most confused pairs (mean probability mass)", pairs))
        return tables_html(title, tables)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """A bar chart of the pick distribution (pandas plotting); returns the matplotlib axes."""
        kwargs.setdefault("title", f"picks over {self.finished} inputs")
        kwargs.setdefault("rot", 0)
        ax = self.pick_counts["count"].plot.bar(ax=new_axes(ax), **kwargs)
        ax.set_ylabel("inputs")
        return ax


def _few(items: Any, k: int = 8) -> str:
    """A list as a table cell shows it: its first `k` items, and how many more."""
    if items is None:
        return ""
    items = list(items)
    more = f" … (+{len(items) - k})" if len(items) > k else ""
    return ", ".join(map(str, items[:k])) + more


def _shortlisted(trace: DecisionTrace) -> list[str] | None:
    """The options a row's model was shown: the shortlist's, or with shortlist="native" those
    the provider's search loaded over the decision's attempts (None: it searched nothing)."""
    listing = trace.shortlist or {}
    if listing.get("by") != "native":
        return list(listing.get("shown") or ())
    from ..decision.options.shortlist import loaded_tools
    found = [loaded_tools(a.raw) for a in trace.attempts]
    if all(f is None for f in found):
        return None
    return [n for f in found for n in f or ()]
