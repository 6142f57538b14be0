"""Text that UTF-8 cannot encode, which a model or a server can still hand over.

A JSON reply may hold `"\ud800"`, the escape of a lone surrogate: it decodes to a Python string
that is fine in memory but fails the first time it is encoded — when the next request carries it
back to the server, or when a cassette is written. `sendable` makes a request sendable (a lone
surrogate becomes U+FFFD, a surrogate pair held as two code points becomes its character);
`escape_surrogates` keeps such text in a JSON document as its escape, so it reads back unchanged.
"""
from __future__ import annotations

from typing import Any

from ...base.json_form import SURROGATE as _SURROGATE


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_surrogate(v) for v in value)
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_replaced(v) for v in value)
    return value


def sendable(value: Any) -> Any:
    """`value` (a request: dicts, lists and strings) as UTF-8 can encode it; the same object
    when it already can."""
    return _replaced(value) if _has_surrogate(value) else value


def escape_surrogates(json_text: str) -> str:
    """JSON text (as `json.dumps(..., ensure_ascii=False)` makes it) with every surrogate code
    point written as its `\\uXXXX` escape: the only ones are inside strings, where JSON allows
    the escape, and a JSON parser reads it back as the same code point."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)
