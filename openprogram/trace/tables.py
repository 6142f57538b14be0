"""The rows of a trace's tables, built once for every view of them: `DecisionTrace.to_frame()`
makes a pandas DataFrame of them, the HTML view an escaped table, so a column added here shows in
both.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Sequence
    from typing import Any

__all__ = ["attempt_rows", "CONFIDENCE_COLUMNS", "confidence_row"]

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
