"""The one redaction step every file the library writes goes through.

A runtime redacts what its own server sends back, but other paths put text into files too: a
batch API's errors and ids, request settings (`extra_query`, `extra_body`) recorded beside each
call, whatever a later feature adds. So no writer is trusted to have redacted its data: the
cassette and cache lines (`runtimes.cassette_file.line`) and the journal's lines
(`journal._line`) pass every string of what they write, keys of objects included, through
`scrub`, which masks every API key a runtime of this process holds, whole or in part, as
written or spelled with JSON escapes (`runtimes._secrets.mask_secrets`); what is only shaped
like a key is left to the runtimes, which mask it in what their servers send (a prompt about
"Bearer tokens" is recorded as it was asked). The keys themselves live in the runtimes'
`_Secret` objects; each registers itself here when it is made (`remember`), weakly, so a
dropped runtime's key is forgotten with it. This module imports nothing: `runtimes._secrets`
installs its masking here when it is imported, which is before any key exists, so the core
never imports the runtimes. A process that holds no key writes its files untouched.
"""
from __future__ import annotations

import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["scrub", "remember", "holding"]

_live: weakref.WeakSet = weakref.WeakSet()   # every _Secret of this process
_redact: Callable[[Any, tuple], Any] | None = None


def install(redact: Callable[[Any, tuple], Any]) -> None:
    """Set the function that masks secrets in one string (`runtimes._secrets.mask_secrets`)."""
    global _redact
    _redact = redact


def remember(secret: Any) -> None:
    """Note a live secret (an object with `reveal()`), so every file write masks it."""
    _live.add(secret)


def secrets() -> tuple[str, ...]:
    return tuple(sorted({s.reveal() for s in list(_live)} - {""}))


def holding() -> bool:
    """Whether `scrub` may change anything: some runtime of this process holds a key (or an
    empty one: no need to reveal them to tell). A writer that writes its lines without
    building JSON data first (a journal row's trace) asks this, and writes the general way
    while it is so."""
    return _redact is not None and bool(_live)


def scrub(value: Any) -> Any:
    """`value` (JSON data: dicts, lists, strings, numbers) with every string masked of every
    key this process holds. Nothing changes (the same object comes back) while no provider
    runtime holds a key: none exists to leak."""
    if _redact is None or not _live:   # no key alive: nothing to sort out of the weak set
        return value
    keys = secrets()
    if not keys:
        return value
    # a text shorter than a masked stretch (8 characters of a key, or a key-shaped word) holds
    # none: most strings of a line are field names and short values, passed as they are
    least = min([8, *(len(k) for k in keys)])
    return _walk(value, lambda s: s if len(s) < least else _redact(s, keys))


def _walk(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {(redact(k) if isinstance(k, str) else k): _walk(v, redact)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, redact) for v in value]
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return redact(repr(value))   # what the writers' json.dumps(default=repr) would write
