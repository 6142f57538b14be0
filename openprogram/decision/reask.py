"""The words of a decision's request beyond the menu: the instruction that ends a turn with a
decision (`DECISION_FINISH_INSTRUCTION`), and the re-ask (rule P7) — by default the request, the
previous reply (its middle cut past a bound), the problem with the fix a higher repair level
would have made, and the menu again; or the user's own text (`reask=`) from the same facts.
"""
from __future__ import annotations

from ..base.errors import AttemptError, UsageError, explain
from ..base.text import cut_middle
from ..trace.records import Reask
from .options import normalize, render_menu

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

    from ..base.type_names import Options

__all__ = ["DECISION_FINISH_INSTRUCTION", "DEFAULT_REASK", "render_options", "reask_prompt"]

DECISION_FINISH_INSTRUCTION = (
    "Do the work the request needs first (reason, call tools). Then finish: end your reply with "
    "your decision, one JSON object in a ```json fenced block that picks exactly one of the "
    "options below, written as in its \"Call:\" line. Write nothing after it.")

_REASK_REPLY_LIMIT = 4000


def render_options(options: Options) -> str:
    """The menu text for an option set (rules R1-R3 of docs/rules.md)."""
    return render_menu(normalize(options))


DEFAULT_REASK = (
    "Your previous reply could not be used as a decision.\n\n"
    "The request was:\n{request}\n\n"
    "Your previous reply was:\n<<<\n{reply}\n>>>\n\n"
    "The problem ({kind}{at_path}): {error}\n{advice}\n\n"
    "Reply again, ending with exactly one JSON object that picks one option, written as in "
    "its \"Call:\" line.\n\n"
    "{menu}")


def reask_prompt(request: str, reply: Any, err: AttemptError, menu_text: str,
                 reask: Callable[[Reask], str] | None = None, attempt: int = 1) -> str:
    """The re-ask (P7): by default the request, the previous reply, the problem, and the menu
    again; `reask` (a checked `reask=`, settings.py) writes the user's own text from the same
    facts."""
    shown = cut_middle(reply if isinstance(reply, str) else repr(reply), _REASK_REPLY_LIMIT,
                       "\n[... {n} characters left out ...]\n")
    hint = err.hint  # the fix a repair level above would have made (decision/repair/)
    facts = Reask(request=request, reply=shown, kind=err.kind, error=err.message,
                  path=err.path or "", menu=menu_text, attempt=attempt, hint=hint)
    if reask is not None:
        text = reask(facts)
        if not isinstance(text, str):
            raise UsageError(f"reask= callable returned {type(text).__name__}; it must return "
                            f"the text to send (a str)")
        return text
    return DEFAULT_REASK.format(request=request, reply=shown, kind=err.kind, error=err.message,
                               menu=menu_text, advice=explain(err.kind) + (
                                   f"\n{hint}" if hint else ""),
                               at_path=f" at {err.path}" if err.path else "")
