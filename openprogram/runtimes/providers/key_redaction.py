r"""Keeping an API key out of everything a server sends back.

A server can echo the key it was sent: whole, in part (a "key ...uJ3 is invalid" error), inside a
reply, a tool call's name, id or arguments, an error body, or cut across two streamed chunks.
`redact` masks, in one string, every stretch made of 8-character pieces of a secret (the whole
secret when it is shorter) and anything shaped like a key or an auth header. A stretch is found
as written and as JSON decodes it: `\u0073k-...`, `\/`, an escaped surrogate pair and any mix of
escapes and plain characters spell the key to whoever decodes the text (the mechanism decodes
every pick), so the characters that spell it are masked too. `StreamRedactor` does the same to a
stream piece by piece before the pieces reach an observer: it holds back the end of the text
received so far that could still become part of a masked stretch (a bit of the key, a partial
escape, the start of "Bearer ..."), and passes on the rest, so the pieces it passes on add up to
`redact` of the whole text while the stream keeps flowing. `redact_pieces` redacts pieces that
were cut from one text (a stream's deltas) as that one text, so no piece keeps a part of the key
that only the joined text shows. The key itself is a `base.secrets.Secret`, which never shows
itself; the masking of every file the library writes is `mask_secrets`, installed into
`base.secrets` when this module is imported.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...base.json_form import SURROGATE
from ...base.secrets import (
    MASK,
    PIECE,
    JsonView,
    json_view,
    mask_secrets,
    masked_runs,
    redacted,
    secret_hits,
    valid_secrets,
    without_secrets,
)

__all__ = ["MASK", "redact", "redact_json", "redact_pieces", "mask_secrets", "StreamRedactor",
           "without_secrets"]



_KEYLIKE = re.compile(r"(?i)\b(sk-(?:ant-|proj-)?[A-Za-z0-9_\-\*]{6,}|bearer\s+[^\s'\",}]+|"
                      r"(x-api-key|api[_-]?key|authorization)(['\"]?\s*[:=]\s*['\"]?)"
                      r"(?=[^\s'\",}]*\d)[^\s'\",}]{8,})")

# The end of a text that could be the beginning of a _KEYLIKE match: a word that starts one of
# its leading words, or one of them followed by what the match would take next.
_TRIGGERS = ("sk-", "bearer", "x-api-key", "api_key", "api-key", "apikey", "authorization")
_KEYLIKE_START = re.compile(
    r"(?i)\b(?:" + "|".join(sorted({re.escape(w[:i]) for w in _TRIGGERS
                                    for i in range(1, len(w))}, key=len, reverse=True))
    + r"|sk-[\w\-\*]*|bearer\s*[^\s'\",}]*"
    r"|(?:x-api-key|api[_-]?key|authorization)['\"]?\s*(?:[:=]\s*['\"]?[^\s'\",}]*)?)\Z")
#: A key-like word longer than this is passed on rather than held back for good.
_MAX_HELD_KEYLIKE = 512


def _mask_keylike(m: re.Match) -> str:
    if m.group(2):
        return m.group(2) + m.group(3) + MASK
    return m.group(0).split()[0] + " " + MASK if m.group(0).lower().startswith(
        "bearer") else "sk-" + MASK


def redact(text: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`text` with every secret, every run of 8+ characters taken from a secret (servers often
    echo part of a bad key), and anything shaped like a key or an auth header masked."""
    if not isinstance(text, str) or not text:
        return text
    secrets = valid_secrets(secrets)
    if secrets:
        hit = secret_hits(text, secrets)
        if any(hit):
            text = masked_runs(text, hit)
    return _KEYLIKE.sub(_mask_keylike, text)


def redact_json(value: Any, redact_text: Callable[[Any], Any]) -> Any:
    """`value` (decoded JSON) with every string in it, keys included, redacted."""
    return redacted(value, redact_text)


def _keylike_hits(text: str, hit: bytearray) -> None:
    """Mark in `hit` what `redact` masks of each key-like word of `text` (all but the word or
    header name it keeps in front of the mask)."""
    for m in _KEYLIKE.finditer(text):
        if m.group(2):
            keep = len(m.group(2) + m.group(3))
        elif m.group(0).lower().startswith("bearer"):
            keep = len(m.group(0).split()[0])
        else:
            keep = len("sk-")
        hit[m.start() + keep:m.end()] = b"\1" * (m.end() - m.start() - keep)


def redact_pieces(pieces: list[str], secrets: tuple[str, ...] = ()) -> list[str]:
    """`pieces` (the deltas of one stream, in order) redacted as the one text they join into:
    a key cut into pieces of any length, even one character, is masked, each masked stretch
    once, in the piece where it begins; the pieces after it keep only what is not the key."""
    secrets = valid_secrets(secrets)
    joined = "".join(pieces)
    if not joined:
        return list(pieces)
    hit = secret_hits(joined, secrets) if secrets else bytearray(len(joined))
    _keylike_hits(joined, hit)
    if not any(hit):
        return list(pieces)
    out, at = [], 0
    for piece in pieces:
        out.append(masked_runs(joined, hit, at, at + len(piece)) if piece else piece)
        at += len(piece)
    return out


def _tail_in(text: str, secret: str) -> int:
    """The length of the longest end of `text` that occurs in `secret`. (If an end does not
    occur in it, no longer end does, so the search stops at the first miss.)"""
    k, most = 0, min(len(text), len(secret))
    while k < most and text[len(text) - k - 1:] in secret:
        k += 1
    return k


class StreamRedactor:
    """`feed(piece)` for each streamed piece, `close()` at the end; `out` receives the redacted
    text as it becomes safe to show.

    What is held back: the longest end of the text that occurs in a secret (the next piece
    could complete a masked stretch with it), and the start of a key-like word. The last few
    characters passed on are kept as context, so a stretch of the key that begins in one piece
    and goes on in the next is recognised, and a masked run that goes on is masked once. The
    work per piece is bounded by the secret's length and the piece, not by the text so far."""

    def __init__(self, secrets: tuple[str, ...], out: Callable[[str], None]):
        self._secrets = valid_secrets(secrets)
        self._out = out
        self._shown = ""   # the last characters passed on: context for the next piece
        self._held = ""

    def feed(self, piece: str) -> None:
        if not piece:
            return
        text = self._shown + self._held + piece
        start = len(self._shown)
        view = json_view(text, self._secrets) if self._secrets else None  # once per piece
        cut = max(start, self._safe_end(text, start, view))
        self._held = text[cut:]
        self._send(text, start, cut, view)

    def close(self) -> None:
        """Pass on what was held back (the stream is complete)."""
        text, start = self._shown + self._held, len(self._shown)
        self._held = ""
        self._send(text, start, len(text),
                   json_view(text, self._secrets) if self._secrets else None)

    def _safe_end(self, text: str, start: int, view: JsonView | None) -> int:
        end = len(text)
        body = text
        while view is not None and view.open_at is not None:
            # an escape the next piece may finish (or the high half of a pair it may complete)
            # is held back, and so is the end of what comes before it that could begin the key
            end = view.open_at
            body = text[:end]
            view = json_view(body, self._secrets)
        for secret in self._secrets:
            end = min(end, len(body) - _tail_in(body, secret))
            if view is not None:  # the end as decoded may be the start of the key, escaped
                k = _tail_in(view.text, secret)
                if k:
                    end = min(end, view.tail_start(k))
        m = _KEYLIKE_START.search(text, start)
        if m and len(text) - m.start() <= _MAX_HELD_KEYLIKE:
            end = min(end, m.start())
        for m in _KEYLIKE.finditer(text, start):  # nor cut through a complete one
            if m.start() < end < m.end() and len(text) - m.start() <= _MAX_HELD_KEYLIKE:
                end = m.start()
        return end

    def _send(self, text: str, start: int, cut: int, view: JsonView | None) -> None:
        if cut <= start:
            return
        # hits over all of `text`: a piece of the key that begins before the cut and ends
        # after it masks the characters before the cut now
        hit = secret_hits(text, self._secrets, view) if self._secrets else bytearray(len(text))
        shown = _KEYLIKE.sub(_mask_keylike, masked_runs(text, hit, start, cut))
        # the context holds PIECE decoded characters: near escapes, each may be spelled by up
        # to 12 (an escaped surrogate pair), and it begins where no escape is cut through
        at = max(0, cut - PIECE * 12)
        near = text[at:cut]
        if view is not None and ("\\" in near or SURROGATE.search(near)):
            self._shown = text[view.boundary(at):cut]
        else:
            self._shown = text[max(0, cut - PIECE):cut]
        if shown:
            self._out(shown)


