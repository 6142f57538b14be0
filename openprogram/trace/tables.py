"""The rows of a trace's tables, built once for every view of them: `DecisionTrace.to_frame()`
makes a pandas DataFrame of them, the HTML view an escaped table, so a column added here shows in
both. `table_rows(trace, table)` is each table ("attempts", "options", "tools", "summary") as its
columns and rows; the values are the ones a frame holds, or with `shown=True` the text each cell of
the HTML view shows (an option's parameters and examples summed up, a result as a person reads
it, cut to a cell).
"""
from __future__ import annotations

import json

from ..base.errors import ArgumentError
from ..base.json_form import to_jsonable
from ..base.secrets import holding, scrub
from ..base.text import repr_head, safe_repr, safe_str
from .safe_html import json_text, result_text, short_cell

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["attempt_rows", "CONFIDENCE_COLUMNS", "confidence_row", "TABLES", "table_rows",
           "option_rows", "param_summary", "example_summary"]

ATTEMPT_COLUMNS = ["attempt", "last", "chosen", "error_kind", "error_path", "error_message",
                   "args", "dropped", "injected", "found_in", "key", "candidates", "reply",
                   "duration_s", "tokens_in", "tokens_out"]


#: The columns a distribution adds to a table of picks (a trace's attempts, an evaluation's rows).
CONFIDENCE_COLUMNS = ("p_pick", "runner_up", "p_runner_up", "margin", "entropy",
                      "confidence_source")


def confidence_row(conf: Any) -> dict:
    """The `CONFIDENCE_COLUMNS` of one `Confidence` (all None without one)."""
    if conf is None:
        return dict.fromkeys(CONFIDENCE_COLUMNS)
    return {"p_pick": conf.p_pick, "runner_up": conf.runner_up, "p_runner_up": conf.p_runner_up,
            "margin": conf.margin, "entropy": conf.entropy, "confidence_source": conf.source}


def attempt_rows(attempts: Sequence[Any]) -> tuple[list[str], list[list]]:
    """(columns, one row per attempt). The `cached` column comes only when a cache answered an
    attempt (most traces never meet one), `repairs` (how many) and `repaired` always, the
    confidence columns only when the decision asked for a distribution."""
    cached = any(a.cached for a in attempts)
    conf = any(a.confidence for a in attempts)
    return (ATTEMPT_COLUMNS + ["cached"] * cached + ["repairs", "repaired"]
            + list(CONFIDENCE_COLUMNS) * conf), [
        [a.number, a.is_last, a.chosen, a.error_kind, a.error_path, a.error_message, a.args,
         a.dropped, a.injected, a.found_in, a.key_alias, a.candidates, a.reply, a.duration_s,
         (a.usage or {}).get("input_tokens"), (a.usage or {}).get("output_tokens")]
        + [a.cached] * cached + [len(a.repairs), bool(a.repairs)]
        + (list(confidence_row(a.confidence).values()) if conf else []) for a in attempts]


OPTION_COLUMNS = ["name", "kind", "description", "examples", "params", "signature"]
TOOL_COLUMNS = ["round", "tool", "args", "result", "error", "duration_s"]
SUMMARY_COLUMNS = ["id", "entry", "status", "chosen", "attempts", "error_kinds", "result",
                   "error", "duration_s", "input_tokens", "output_tokens"]


def option_rows(infos: Sequence[dict], shown: bool = False) -> tuple[list[str], list[list]]:
    """The option table of a menu (one `Option.info()` row per option): what the model can
    pick."""
    return OPTION_COLUMNS, [
        [o.get("name"), o.get("kind"), o.get("description"),
         example_summary(o.get("examples") or []) if shown else o.get("examples"),
         param_summary(o.get("params") or []) if shown else o.get("params"),
         o.get("signature")] for o in infos]


def param_summary(params: list[dict]) -> str:
    """A function's or schema's parameters, one a line: type, default, allowed values, hidden."""
    out = []
    for p in params:
        s = f"{p['name']}: {p['type']}"
        if not p.get("required", True):  # the default as JSON, as the menu writes it
            s += f" = {json.dumps(p.get('default'), ensure_ascii=False, default=safe_repr)}"
        if p.get("options"):
            s += f" (one of {', '.join(map(safe_repr, p['options']))})"
        if p.get("hidden") or p.get("source") != "llm":
            s += f" [hidden: from {p.get('source')}]"
        out.append(s)
    return "\n".join(out)


def example_summary(examples: list[dict]) -> str:
    """An option's worked examples, one a line: the request (when there is one) and the args."""
    return "\n".join((f"{e['request']!r} -> " if e.get("request") else "")
                     + json_text(e.get("args"), None) for e in examples)


def _tool_rows(trace: Any, shown: bool) -> tuple[list[str], list[list]]:
    return TOOL_COLUMNS, [
        [t.round, t.name, t.args if shown else to_jsonable(t.args),
         short_cell(result_text(t.result)) if shown else to_jsonable(t.result), t.error,
         t.duration_s] for t in trace.tool_rounds]


def _summary_rows(trace: Any, shown: bool) -> tuple[list[str], list[list]]:
    u = trace.usage()
    if shown:
        result = short_cell(result_text(trace.result)) if trace.status == "resolved" else None
        error = safe_str(trace.error) if trace.error is not None else None
    else:
        result = repr_head(trace.result)
        error = None if trace.error is None else to_jsonable(str(trace.error))
    return SUMMARY_COLUMNS, [[trace.id, trace.entry, trace.status, trace.chosen,
                              len(trace.attempts), trace.error_kinds, result, error,
                              trace.duration_s, u["input_tokens"], u["output_tokens"]]]


_TABLES: dict[str, Callable[[Any, bool], tuple[list[str], list[list]]]] = {
    "attempts": lambda trace, shown: attempt_rows(trace.attempts),
    "options": lambda trace, shown: option_rows(trace.options, shown),
    "tools": _tool_rows,
    "summary": _summary_rows,
}
#: The tables of a trace.
TABLES = tuple(_TABLES)


def table_rows(trace: Any, table: str, shown: bool = False) -> tuple[list[str], list[list]]:
    """One of the trace's tables as `(columns, rows)`: the values `trace.to_frame(table)`
    holds, or with `shown` the text each cell of the HTML view shows."""
    rows = _TABLES.get(table)
    if rows is None:
        raise ArgumentError(f"unknown table {table!r}: use one of {', '.join(TABLES)}")
    columns, values = rows(trace, shown)
    if holding():   # a result or an error is the program's text: it may hold a key
        values = [[scrub(v) if isinstance(v, str) else v for v in row] for row in values]
    return columns, values
