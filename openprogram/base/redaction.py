"""Redaction of what the mechanism decodes from a reply, before anything uses it.

A runtime that holds an API key redacts the text a server sends back, but a pick is decoded from
that text afterwards, and JSON can spell the key in ways the text does not show (`\\u0073k-...`,
an escape written inside a string that is itself JSON). `redact_decoded` passes every string of
a decoded pick — keys of objects at any depth included — through the runtime's own `redact`
(a runtime without a key has none, and nothing changes), and says where it changed something,
so the trace records the redaction. It runs before validation: the option's function, the
result, the error messages built from the arguments, and every view of them only ever see the
redacted value. There is no way to opt in to the value the model wrote: a function that needs
the key takes it from `context=` or its runtime, never from what a model wrote.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["redact_decoded"]


def redact_decoded(value: Any, redact: Callable[[Any], Any] | None,
                   path: str = "") -> tuple[Any, list[str]]:
    """`(value redacted, the paths where something was redacted)`. `value` is decoded JSON
    (dicts, lists, strings, numbers); a path reads like an error path (`args.opts.k`,
    `args.items[0]`), a redacted key shown as it reads after redaction. The same object comes
    back when nothing changed."""
    if redact is None:
        return value, []
    where: list[str] = []
    out = _walk(value, redact, path, where)
    return (value if not where else out), where


def _walk(value: Any, redact: Callable[[Any], Any], path: str, where: list[str]) -> Any:
    if isinstance(value, str):
        new = redact(value)
        if new != value:
            where.append(path or "(the value)")
        return new
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = redact(k) if isinstance(k, str) else k
            at = f"{path}.{key}" if path else str(key)
            if key != k:
                where.append(at)
            out[key] = _walk(v, redact, at, where)
        return out
    if isinstance(value, list):
        return [_walk(v, redact, f"{path}[{i}]", where) for i, v in enumerate(value)]
    return value
