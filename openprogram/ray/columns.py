"""The columns a decision adds to a row of a Ray Dataset, and a finished job read back.

`OUTPUT_COLUMNS` and `output_schema` are the one schema of a success row and a failure row;
`row_columns` writes a finished row's columns (what `evaluate` keeps of a row, its arguments,
result and trace as JSON text, masked of the keys this process holds); `result` reads a
finished `decide` / `processor` job back as an `EvaluationResult`.
"""
from __future__ import annotations

import json
import math

from ..base.errors import ArgumentError, RecordedError, UsageError, require
from ..base.json_form import json_ready
from ..base.secrets import scrub
from ..evaluation.outcomes import Outcomes, summarize
from ..evaluation.results import EvaluationResult
from ..evaluation.runner import Row
from ..trace.decision_trace import trace_from_dict
from ..trace.tables import CONFIDENCE_COLUMNS, confidence_row

ray = require("ray", "ray", "openprogram.ray")
pa = require("pyarrow", "ray", "openprogram.ray")

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from ..base.type_names import Options

#: The columns `decide` and `processor` add to every row, in order (the confidence columns
#: follow when the decision asks for a distribution). An input column of the same name is kept
#: as `input_<name>`, as `to_frame()` does.
OUTPUT_COLUMNS = ("chosen", "args", "result", "error", "error_kind", "error_kinds", "attempts",
                  "duration_s", "tokens_in", "tokens_out", "status", "cached", "trace")

#: The column a row's pending request and earlier replies travel in between passes.
STATE = "__decision_state"
#: The column Ray's engine stages set on a row they failed on (`should_continue_on_error`).
ERROR_COLUMN = "__inference_error__"


def output_schema(confidence: bool = False) -> Any:
    """The pyarrow schema of the columns a decision adds to a row, the same for a row that
    resolved and one that failed."""
    fields = [("chosen", pa.string()), ("args", pa.string()), ("result", pa.string()),
              ("error", pa.string()), ("error_kind", pa.string()),
              ("error_kinds", pa.list_(pa.string())), ("attempts", pa.int64()),
              ("duration_s", pa.float64()), ("tokens_in", pa.int64()),
              ("tokens_out", pa.int64()), ("status", pa.string()), ("cached", pa.bool_()),
              ("trace", pa.string())]
    if confidence:
        fields += [("p_pick", pa.float64()), ("runner_up", pa.string()),
                   ("p_runner_up", pa.float64()), ("margin", pa.float64()),
                   ("entropy", pa.float64()), ("confidence_source", pa.string())]
    return pa.schema(fields)


def _json(value: Any) -> str:
    return json.dumps(json_ready(value), ensure_ascii=False)


def row_columns(status: str, trace: Any, result: Any, error: BaseException | None,
                duration_s: float | None = None, confidence: bool = False) -> dict[str, Any]:
    """One finished row's output columns: what `evaluate` keeps of a row (`summarize`), its
    arguments, result and trace as JSON text, every string masked of the keys this process
    holds (as a journal line is)."""
    row = Row()
    row.status, row.trace, row.result, row.error = status, trace, result, error
    row.duration_s = duration_s if duration_s is not None else (
        trace.duration_s if trace is not None else None)
    status, pick, attempts, kinds, _, tin, tout, duration, cached = summarize(row)
    last = trace.attempts[-1] if trace is not None and trace.attempts else None
    out = {
        "chosen": pick,
        "args": _json(last.args) if last is not None and pick is not None else None,
        "result": _json(result) if status == "resolved" else None,
        # json_ready: the message may quote a reply's text that UTF-8 cannot encode
        "error": json_ready(f"{type(error).__name__}: {error}") if error is not None else None,
        "error_kind": (getattr(error, "kind", None) or (last.error_kind if last else None))
        if error is not None else None,
        "error_kinds": list(kinds), "attempts": attempts,
        "duration_s": None if duration is None or duration != duration else float(duration),
        "tokens_in": tin, "tokens_out": tout, "status": status, "cached": bool(cached),
        # to_dict(json_ready) is JSON data already: no second walk over it
        "trace": json.dumps(trace.to_dict(json_ready), ensure_ascii=False)
        if trace is not None else None,
    }
    if confidence:
        out.update(confidence_row(trace.confidence if trace is not None else None))
    return scrub(out)


def _table(batch: Any, rows: list[dict[str, Any]], schema: Any) -> Any:
    """`batch` (a pyarrow Table) with the output columns of `rows` appended; an input column
    of an output column's name kept as `input_<name>`."""
    names = [n if n not in schema.names else f"input_{n}" for n in batch.column_names]
    table = batch.rename_columns(names)
    for f in schema:
        table = table.append_column(f, pa.array([r[f.name] for r in rows], type=f.type))
    return table


# ---------------------------------------------------------------------------------------------
# result: a finished job read back
# ---------------------------------------------------------------------------------------------


def result(ds: Any, options: Options, *, expected: Any = None,
           template: str | None = None) -> EvaluationResult:
    """A finished `decide` / `processor` job's output (a Ray Dataset, a pyarrow Table or a
    pandas DataFrame of one) as an `EvaluationResult`: accuracy, the confusion table,
    calibration, `traces[i]` and the panel work as on `evaluate`'s. Rows are in the order the
    dataset gives them; each result is its JSON form (as a journaled evaluation's). `expected`
    is a column name or a list of option names, one per row; `template` is kept as the
    result's prompt."""
    from ..decision.options import normalize
    table = _arrow(ds)
    missing = [c for c in OUTPUT_COLUMNS if c not in table.column_names]
    if missing:
        raise ArgumentError(f"the dataset has no column {', '.join(map(repr, missing))}: it is "
                            f"not the output of openprogram.ray.decide() or processor()")
    names = [o.name for o in normalize(options)]
    n = table.num_rows
    o = Outcomes(names, n)
    inputs = [c for c in table.column_names if c not in OUTPUT_COLUMNS and c != STATE
              and c not in CONFIDENCE_COLUMNS]
    shown = [c[6:] if c.startswith("input_") and c[6:] in OUTPUT_COLUMNS else c for c in inputs]
    exp = _expected(expected, table, n, names)
    records, rows = [], []
    for i, r in enumerate(table.to_pylist()):
        status = r["status"] if r["status"] in ("resolved", "failed") else "cancelled"
        trace = trace_from_dict(json.loads(r["trace"])) if r["trace"] else None
        error = None
        if r["error"] is not None:
            type_name, _, message = r["error"].partition(": ")
            error = RecordedError(r["error_kind"], type_name, message)
        raised = f"raised {error.type_name}" if error is not None and error.kind is None \
            else None
        o.set(i, (status, r["chosen"], r["attempts"] or 0, tuple(r["error_kinds"] or ()),
                  raised, r["tokens_in"], r["tokens_out"], r["duration_s"], bool(r["cached"])))
        if exp is not None and exp[i] is not None:
            o.expected[i] = o.code(exp[i])
        if trace is not None and trace.confidence is not None:
            o.conf[i] = trace.confidence
        row = Row()
        row.status, row.trace, row.error = status, trace, error
        row.result = json.loads(r["result"]) if r["result"] is not None else None
        row.duration_s = r["duration_s"]
        rows.append(row)
        records.append({k: r[c] for k, c in zip(shown, inputs)})
    runtime = next((x.trace.runtime for x in rows if x.trace is not None), None)
    return EvaluationResult(prompt=template or "", options=names, columns=shown,
                            records=records, outcomes=o, rows=rows,
                            has_expected=exp is not None, wall_s=float("nan"), concurrency=1,
                            runtime=runtime, interrupted=False, name=None)


def _arrow(ds: Any) -> Any:
    """A job's output as one pyarrow Table (its values read back as plain Python)."""
    if isinstance(ds, pa.Table):
        return ds
    if hasattr(ds, "columns") and hasattr(ds, "to_dict"):   # a pandas DataFrame
        return pa.Table.from_pandas(ds, preserve_index=False)
    if hasattr(ds, "to_arrow_refs"):
        tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
        if not tables:
            raise ArgumentError("the dataset has no rows to read back")
        return pa.concat_tables(tables, promote_options="permissive")
    raise UsageError(f"result() takes the Ray Dataset decide() or processor() returned (or its "
                     f"pandas DataFrame / pyarrow Table), got {type(ds).__name__}")


def _expected(expected: Any, table: Any, n: int, names: list[str]) -> list | None:
    if expected is None:
        return None
    if isinstance(expected, str):
        if expected not in table.column_names:
            raise ArgumentError(f"expected={expected!r} is not a column of the dataset (its "
                                f"columns are {', '.join(map(repr, table.column_names))})")
        values = table.column(expected).to_pylist()
    else:
        values = list(expected)
        if len(values) != n:
            raise ArgumentError(f"expected has {len(values)} items but the dataset has {n} "
                                f"rows; give one expected option name per row (None if unknown)")
    out = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
    bad = sorted({repr(v) for v in out if v is not None and v not in names})
    if bad:
        raise ArgumentError(f"expected names {', '.join(bad[:5])} are not options of the option "
                            f"set (the options are {', '.join(names)})")
    return out
