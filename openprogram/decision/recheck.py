"""Re-checking recorded replies against an edited option set, offline.

`revalidate(recorded, options)` takes what a run recorded — an evaluation result, a trace, a list
of traces — and checks every recorded reply again, in the way of asking it was recorded with,
against the edited option set and rule. No function runs and no model is called: this is the
cheap turn of the prototyping loop (change a name, a type, a rule; look again). A recorded
decision's attempts are re-checked in order: the first that now passes is the new outcome, and
later recorded attempts are marked as answers to a re-ask that would no longer be sent; when
every recorded attempt now fails, the new outcome is that failure, marked as one a new model call
might change.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..base.errors import AttemptError, UsageError, require
from ..base.model_protocol import ModelResponse, ToolCall, run_sync
from ..trace.decision_trace import (
    DecisionTrace,
    recorded_readers,
    register_recorded_reader,
    trace_view,
)
from .loop import Decider
from .modes import get_mode
from .options import normalize, render_menu
from .settings import REVALIDATE, Settings, takes_settings

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from typing_extensions import Unpack

    from ..base.type_names import Options
    from .options.menu import Menu
    from .settings import Keywords

__all__ = ["revalidate", "Revalidation", "RevalidationRow", "register_recorded_reader"]

_LATER = "answered a re-ask that would no longer be sent"
_ALL_FAIL = "every recorded reply fails now; a new model call might change this"


@dataclass(frozen=True)
class RevalidationRow:
    """One recorded decision, before and after the edit."""
    input: str
    before: str | None           # the pick, or the error kind, as recorded
    after: str | None            # the pick, or the error kind, now
    before_ok: bool
    after_ok: bool
    error_kind: str | None       # the new outcome's error, when it fails
    error_message: str | None
    error_path: str | None
    passing_attempt: int | None  # which recorded attempt passes now
    note: str | None
    repairs: int = 0             # repairs the passing attempt needed (repair=)

    @property
    def changed(self) -> bool:
        return (self.before, self.before_ok) != (self.after, self.after_ok)


def _recorded_traces(recorded: Any) -> list[DecisionTrace]:
    if isinstance(recorded, DecisionTrace):
        return [recorded]
    for read in recorded_readers:
        traces = read(recorded)
        if traces is not None:
            return traces
    if isinstance(recorded, (str, os.PathLike)):
        raise UsageError("revalidate() reads a cassette path once the runtimes are loaded: "
                        "import openprogram.runtimes first")
    traces = getattr(recorded, "traces", None)  # an EvaluationResult
    if traces is not None:
        return [t for t in traces if t is not None]
    if isinstance(recorded, (list, tuple)) and all(isinstance(t, DecisionTrace) for t in recorded):
        return list(recorded)
    raise UsageError(f"revalidate() takes an evaluation result, a DecisionTrace or a list of "
                    f"them, or a cassette path; got {type(recorded).__name__}")


def _outcome(trace: DecisionTrace) -> tuple[str | None, bool]:
    if trace.status == "recorded":  # a cassette keeps the replies, not what they resolved to
        return None, False
    if trace.status == "resolved":
        return trace.chosen, True
    kinds = trace.error_kinds
    return (kinds[-1] if kinds else getattr(trace.error, "kind", None)), False


async def _recheck(trace: DecisionTrace, menu: Menu, menu_text: str,
                   settings: Settings) -> tuple[DecisionTrace, int | None]:
    """Re-check one trace's attempts; returns (new trace, passing attempt number or None)."""
    mode = get_mode(trace.mode)(menu)
    validate = settings.validate
    d = Decider(None, menu, settings.bound(context={k: None for k in trace.context_keys}),
                request=trace.prompt, max_attempts=max(len(trace.attempts), 1),
                entry="revalidate", menu_text=menu_text, mode=mode, quiet=True)
    for old in trace.attempts:
        d.new_attempt(old.prompt)
        calls = [ToolCall(c["name"], c.get("args") or {}, c.get("id"))
                 for c in old.tool_calls or []]
        d.resp = ModelResponse(text=old.reply, tool_calls=calls,
                               finish_reason=old.finish_reason)
        d._step("reply_received", reply=old.reply, tool_calls=old.tool_calls,
                finish_reason=old.finish_reason)
        try:
            option, _ = d.check()
            if validate is not None:
                await d._rule(option)  # the loop's own rule check: Retry is `rejected`
        except AttemptError as err:
            d.record_failure(err)
            continue
        d._step("validated")
        d.finish("resolved", result=None)
        return d.trace, old.number
    last = d.att
    d.finish("decision_failed", error=AttemptError(last.error_kind or "no_action",
                                                 last.error_message or "",
                                                 last.error_path) if last else None)
    return d.trace, None


@takes_settings(REVALIDATE)
def revalidate(recorded: Any, options: Options,
               **settings: Unpack[Keywords]) -> Revalidation:
    """Check every recorded reply again against `options` (and `validate=`), in the way of
    asking it was recorded with. Runs no function and calls no model. `repair=` re-reads the
    replies at another repair level ("off", "safe", "menu"), so a run shows what each level
    would save from a re-ask before one is chosen (the `repairs` column counts them)."""
    checked = Settings.of(settings, "revalidate", REVALIDATE)
    menu = normalize(options)
    menu_text = render_menu(menu)
    rows, before, after = [], [], []
    for trace in _recorded_traces(recorded):
        new, passing = run_sync(_recheck(trace, menu, menu_text, checked))
        b, b_ok = _outcome(trace)
        last = new.attempts[-1] if new.attempts else None
        if passing is not None:
            ok_att = new.attempts[passing - 1]
            a, a_ok = ok_att.chosen, True
            note = _LATER if passing < len(trace.attempts) else None
            err: tuple[str | None, str | None, str | None] = (None, None, None)
        else:
            a, a_ok = (last.error_kind if last else None), False
            note = _ALL_FAIL
            err = (last.error_kind, last.error_message, last.error_path) if last else (None,) * 3
        repairs = len(new.attempts[passing - 1].repairs) if passing is not None else 0
        rows.append(RevalidationRow(trace.prompt, b, a, b_ok, a_ok, *err, passing, note,
                                    repairs))
        before.append(trace)
        after.append(new)
    return Revalidation(rows, before, after)


class Revalidation:
    """What `revalidate` found: `.rows` (one `RevalidationRow` per recorded decision),
    `.to_frame()`, `.summary` (how many got better, worse, changed pick, stayed), and the
    traces before and after (`.before[i]`, `.after[i]`, `.panel(i)`)."""

    def __init__(self, rows: list[RevalidationRow], before: list[DecisionTrace],
                 after: list[DecisionTrace]) -> None:
        self.rows, self.before, self.after = rows, before, after

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def summary(self) -> Any:
        """How many decisions got better, worse, another pick, another error, or stayed: a
        pandas Series, as every result's `.summary` is."""
        pd = require("pandas", "pandas", "a re-check's .summary")
        return pd.Series(self._counts(), name="revalidation", dtype="int64")

    def _counts(self) -> dict[str, int]:
        out = {"decisions": len(self.rows), "better": 0, "worse": 0, "other_pick": 0,
               "other_error": 0, "same": 0}
        for r in self.rows:
            if not r.changed:
                out["same"] += 1
            elif r.after_ok and not r.before_ok:
                out["better"] += 1
            elif r.before_ok and not r.after_ok:
                out["worse"] += 1
            elif r.after_ok:
                out["other_pick"] += 1
            else:
                out["other_error"] += 1
        return out

    def to_frame(self) -> Any:
        pd = require("pandas", "pandas", "a re-check's to_frame()")
        from ..trace.safe_html import (
            quiet_frame,  # recorded replies and messages: the library's wrapper
        )
        return quiet_frame(pd.DataFrame([{
            "input": r.input, "before": r.before, "after": r.after, "changed": r.changed,
            "before_ok": r.before_ok, "after_ok": r.after_ok, "error_kind": r.error_kind,
            "error_message": r.error_message, "error_path": r.error_path,
            "passing_attempt": r.passing_attempt, "note": r.note, "repairs": r.repairs}
            for r in self.rows]))

    def panel(self, i: int) -> Any:
        """The re-checked decision of row `i` (its attempts, now), in the registered view."""
        return trace_view(self.after[i])

    def _repr_html_(self) -> str:
        from ..trace.safe_html import esc, wrap
        return wrap(f"<p>{esc(repr(self))}</p>" + self.to_frame().to_html(escape=True),
                    "op-revalidation-view")

    def __repr__(self) -> str:
        s = self._counts()
        return (f"<Revalidation of {s['decisions']} decision(s): {s['better']} better, "
                f"{s['worse']} worse, {s['other_pick']} other pick, {s['same']} same>")
