"""The raw request and response of one model call, as a trace keeps them.

`ModelResponse.raw` is `{"request": <the body sent>, "response": <the provider's response as
JSON>}` (and `notes` on how the request was carried out, when there is something to say). Both
sides are redacted — every string, keys of objects included, through the runtime's `redact` —
and bounded: each side is cut to at most `LIMIT` characters of JSON, keeping its shape (the
first items of a long list, the first keys of a big object, the head of a long string) with a
marker saying how much was left out. A trace, an export and a cassette all hold this, so a
reply of megabytes costs them kilobytes. A streamed response is kept as its events, and its
text is redacted as the stream joined it (`redact_stream`): the strings at one place of the
events (every `delta.text`, every tool call's `arguments` piece) are one text cut into pieces,
so a key split across deltas of any length is masked and no run of pieces rebuilds it.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .key_redaction import redact_json, redact_pieces

__all__ = ["LIMIT", "bounded", "raw_record", "redact_stream", "size"]

#: The most characters of JSON each side of a raw record keeps.
LIMIT = 64 * 1024
_MARK_ROOM = 64   # what a marker takes, kept free when a container is cut


def size(value: Any) -> int:
    """The length of `value` as JSON."""
    return len(json.dumps(value, ensure_ascii=False, default=repr))


def bounded(value: Any, limit: int = LIMIT) -> Any:
    """`value` (JSON data) cut to at most about `limit` characters of JSON, with markers."""
    if size(value) <= limit:
        return value
    return _cut(value, limit)


def _cut(value: Any, budget: int) -> Any:
    if isinstance(value, str):
        keep = max(0, budget - _MARK_ROOM)
        while keep and size(value[:keep]) > budget - _MARK_ROOM:  # escapes take room too
            keep = max(0, keep - (size(value[:keep]) - (budget - _MARK_ROOM)))
        return value[:keep] + f"... [{len(value) - keep} more characters cut]"
    if isinstance(value, list):
        out: list = []
        used = 2
        for i, item in enumerate(value):
            n = size(item)
            if used + n + _MARK_ROOM > budget:
                room = budget - used - _MARK_ROOM
                if room > _MARK_ROOM and isinstance(item, (str, list, dict)):
                    out.append(_cut(item, room))
                    i += 1
                rest = len(value) - i
                if rest:
                    out.append(f"[{rest} more items cut]")
                return out
            out.append(item)
            used += n + 2
        return out
    if isinstance(value, dict):
        obj: dict = {}
        used = 2
        items = list(value.items())
        for i, (k, v) in enumerate(items):
            n = size(k) + size(v) + 4
            if used + n + _MARK_ROOM > budget:
                room = budget - used - size(k) - _MARK_ROOM
                if room > _MARK_ROOM and isinstance(v, (str, list, dict)):
                    obj[k] = _cut(v, room)
                    i += 1
                rest = len(items) - i
                if rest:
                    obj["..."] = f"[{rest} more keys cut]"
                return obj
            obj[k] = v
            used += n
        return obj
    return value


def raw_record(request: Any, response: Any, redact: Callable[[Any], Any],
               notes: list[str] | None = None) -> dict:
    """The raw record of one call: both sides redacted, then bounded (redacted first, so a cut
    never leaves a piece of a key too short to be recognised)."""
    out = {"request": bounded(redact_json(request, redact)),
           "response": bounded(redact_json(response, redact))}
    if notes:
        out["notes"] = [redact(n) for n in notes]
    return out


def redact_stream(events: list, secrets: tuple[str, ...]) -> list:
    """Streamed events (JSON data) with their strings redacted over the stream: the strings at
    the same place in the events — the same keys and list positions, e.g. `delta.text` or
    `choices[0].delta.content` — are redacted as one text (`redact_pieces`), in event order.
    Only strings change; the events keep their structure."""
    places: dict[tuple, list[tuple[Any, Any]]] = {}

    def copy(value: Any, path: tuple) -> Any:
        """`value` copied (so its strings can be replaced in place), each string's place noted."""
        if isinstance(value, dict):
            new: Any = {}
            items = value.items()
        elif isinstance(value, list):
            new, items = [None] * len(value), enumerate(value)
        else:
            return value
        for k, v in items:
            new[k] = copy(v, (*path, k))
            if isinstance(v, str):
                places.setdefault((*path, k), []).append((new, k))
        return new

    out = [copy(event, ()) for event in events]
    for spots in places.values():
        redacted = redact_pieces([holder[key] for holder, key in spots], secrets)
        for (holder, key), text in zip(spots, redacted):
            holder[key] = text
    return out
