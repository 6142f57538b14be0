"""Text for people: how every layer cuts a long string and writes a value's repr.

Traces, errors, views and files all show text a model, a server or a user's object wrote, and all
of it can be long or can fail to print. Cutting happens here, in one function for a head (`cut`)
and one for a head and a tail (`cut_middle`), with the mark each place has always shown (`"..."`,
`"…"`, or one naming how much was dropped, `MORE`), so a reader sees the same kind of cut
everywhere and a change to the rule is made once; `repr_head` is a value's repr cut so, never
raising on a user's object.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["cut", "cut_middle", "repr_head", "safe_str", "safe_repr", "MORE"]

#: The mark of a cut that says how much was dropped.
MORE = "... [{n} more chars]"


def cut(text: str, limit: int, mark: str = "...", *, fit: bool = False) -> str:
    """`text` as it is when it has at most `limit` characters, else its head followed by `mark`.
    A mark with a field (`"... [{n} more chars]"`, `"{n:,}"`) is formatted with `n`, the number of
    characters dropped. With `fit`, head and mark together take at most `limit` characters (for
    columns of a fixed width)."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(mark)) if fit else limit
    return text[:keep] + (mark.format(n=len(text) - keep) if "{" in mark else mark)


def cut_middle(text: str, limit: int, mark: str = "…") -> str:
    """`text` as it is when it has at most `limit` characters, else its first and last
    `limit // 2` characters with `mark` between them (formatted with `n`, the number of
    characters dropped, when it has a field): where the end of a text matters as much as its
    start (a reply the model is shown again, the text a repair replaced)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + (mark.format(n=len(text) - limit) if "{" in mark else mark) + \
        text[len(text) - half:]


def repr_head(value: Any, limit: int = 500, mark: str = MORE, *,
              fit: bool = False) -> str | None:
    """The head of a value's repr, cut as `cut` cuts (None for None), never raising on a
    user's object."""
    return None if value is None else cut(safe_repr(value), limit, mark, fit=fit)


def safe_str(value: Any) -> str:
    """`str(value)`, or a note saying it failed: a view never breaks on a user's object."""
    try:
        return str(value)
    except Exception as exc:
        return f"<{type(value).__name__} whose str() raised {type(exc).__name__}>"


def safe_repr(value: Any) -> str:
    """`repr(value)`, or a note saying it failed (a user's object whose repr raises)."""
    try:
        return repr(value)
    except Exception as exc:
        return f"<unrepresentable {type(value).__name__}: {safe_str(exc)}>"
