"""The rows of a trace's tables, built once for every view of them: `DecisionTrace.to_frame()`
makes a pandas DataFrame of them, the HTML view an escaped table, so a column added here shows in
both.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Sequence

__all__ = ["attempt_rows"]

ATTEMPT_COLUMNS = ["attempt", "last", "chosen", "error_kind", "error_path", "error_message",
                   "args", "dropped", "injected", "found_in", "key", "candidates", "reply",
                   "duration_s", "tokens_in", "tokens_out"]


def attempt_rows(attempts: Sequence[Any]) -> tuple[list[str], list[list]]:
    """(columns, one row per attempt). The `cached` column comes only when a cache answered an
    attempt: most traces never meet one."""
    cached = any(a.cached for a in attempts)
    return ATTEMPT_COLUMNS + ["cached"] * cached, [
        [a.number, a.is_last, a.chosen, a.error_kind, a.error_path, a.error_message, a.args,
         a.dropped, a.injected, a.found_in, a.key_alias, a.candidates, a.reply, a.duration_s,
         (a.usage or {}).get("input_tokens"), (a.usage or {}).get("output_tokens")]
        + [a.cached] * cached for a in attempts]
