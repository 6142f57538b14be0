"""Where the value an error path names sits in the raw reply, as the syntax repair read it.

After a pick failed its check, the step-through, the re-ask and a provider's token
probabilities want the characters of the value an error path names (`args.items[0].qty`) in
the reply as the model wrote it. `value_span` follows the path through the one object the pick
was read from; where the syntax repair read it (`Repair` records of the "safe" kinds), the path
is followed through the reply as repaired, each repair undone in place so every character keeps
its offset in the raw reply. It runs off the search for the pick (extract.py), on one object.
"""
from __future__ import annotations

from ..extract import CALL_KEYS, member_span, members, path_span
from .menu import _PATH_PART

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Sequence
    from typing import Any

__all__ = ["value_span"]

# The syntax repairs (syntax.py's "safe" kinds), each undone in place by `_as_read`.
_SYNTAX_KINDS = ("trailing_comma", "comment", "python_literal", "single_quotes", "unquoted_key",
                 "closed_truncation")
_LITERALS = {"True": "true", "False": "false", "None": "null"}


def _as_read(text: str, repairs: Sequence[Any]) -> str | None:
    """`text` as the syntax repair read it, every character at its offset in the raw reply:
    a trailing comma or a comment becomes spaces, Python's literal JSON's (the same length), a
    single-quoted string a double-quoted one of the same length (`_double_quoted`), and the
    brackets a cut-off reply was closed with are appended. None when that cannot be done in
    place (a key without quotes needs two more characters): the value is then not marked."""
    out, at, tail = [], 0, ""
    for r in sorted((r for r in repairs if getattr(r, "span", None) is not None
                     and r.kind in _SYNTAX_KINDS), key=lambda r: r.span[0]):
        a, b = r.span
        if r.kind == "closed_truncation":
            tail = r.after
            continue
        if a < at or r.kind == "unquoted_key":
            return None
        raw = text[a:b]
        if r.kind in ("trailing_comma", "comment"):
            piece: str | None = " " * len(raw)
        elif r.kind == "python_literal":
            piece = _LITERALS.get(raw)
        else:
            piece = _double_quoted(raw)
        if piece is None:
            return None
        out += (text[at:a], piece)
        at = b
    out += (text[at:], tail)
    return "".join(out)


def _double_quoted(raw: str) -> str | None:
    """A single-quoted string as a JSON string of the same length: its `\\'` written `\\"`, a
    bare `"` in it as `'`. Only where the value is found matters, not what it says."""
    if len(raw) < 2 or raw[0] != "'" or raw[-1] != "'":
        return None
    body, out, i = raw[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append('\\"' if body[i + 1] == "'" else body[i:i + 2])
            i += 2
            continue
        out.append("'" if c == '"' else c)
        i += 1
    return '"' + "".join(out) + '"'


def value_span(text: str, span: tuple[int, int], path: str,
               repairs: Sequence[Any] = ()) -> tuple[int, int] | None:
    """Where the value an error path names sits in the raw reply: [start, end) character offsets
    into `text`, for the object at `span` (an `Extraction.span`). The path is as the checks
    write it: `call` (the option's name, under whichever alias the model used), `args.x`,
    `args.items[0].qty`, `response.age` (for a response format). `args.` paths also find a field
    written flat beside the call key (`{"call": "x", "qty": 1}`). None when the path leads to
    no value there (a missing field). Reads only that object; meant for after a failure.
    `repairs`: the syntax repairs the pick was read with (`Repair` records), so the path is
    followed through the pick as the repair read it (`_as_read`)."""
    if any(getattr(r, "kind", None) in _SYNTAX_KINDS for r in repairs):
        read = _as_read(text, repairs)
        if read is None:
            return None
        text = read
    start = span[0]
    if not text.startswith("{", start):
        return None
    parts = [int(m.group(2)) if m.group(2) is not None else m.group(1)
             for m in _PATH_PART.finditer(path)]
    if not parts:
        return None
    try:
        head = parts[0]
        if head in CALL_KEYS:  # the name, under whichever alias the object has (by precedence)
            names = {k: (v, end) for k, v, end in members(text, start) if k in CALL_KEYS}
            key = next((k for k in CALL_KEYS if k in names), None)
            return names[key] if key and len(parts) == 1 else None
        rest = parts[1:]
        if head == "response":
            at = start
        elif head == "args":
            inner = member_span(text, start, "args")
            if inner is None and not rest:
                return None
            # No "args" member: the fields sit beside the call key (the flat form).
            at = inner[0] if inner is not None else start
        else:
            at, rest = start, parts
        return path_span(text, at, rest)
    except (ValueError, StopIteration, RecursionError, IndexError):
        return None
