"""Keeping an API key out of everything a server sends back.

A server can echo the key it was sent: whole, in part (a "key ...uJ3 is invalid" error), inside a
reply, a tool call's name, id or arguments, an error body, or cut across two streamed chunks.
`redact` masks, in one string, every stretch made of 8-character pieces of a secret (the whole
secret when it is shorter) and anything shaped like a key or an auth header. `StreamRedactor`
does the same to a stream piece by piece before the pieces reach an observer: it holds back the
end of the text received so far that could still become part of a masked stretch (a bit of the
key, the start of "Bearer ..."), and passes on the rest, so the pieces it passes on add up to
`redact` of the whole text while the stream keeps flowing. `_Secret` holds the key itself
without ever showing it.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

MASK = "[redacted]"
_PIECE = 8   # a stretch of this many characters of a secret is masked wherever it appears


class _Secret:
    """An API key that does not show itself: its repr, str and pickled form are masked."""
    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("an API key cannot be pickled; create the runtime again in the other "
                        "process (it reads the key from the environment)")


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


@functools.lru_cache(maxsize=16)
def _pieces(secret: str) -> frozenset[str]:
    n = min(_PIECE, len(secret))
    return frozenset(secret[i:i + n] for i in range(len(secret) - n + 1))


def _hits(text: str, secrets: tuple[str, ...]) -> bytearray:
    """For each character of `text`, whether it lies in an occurrence of a piece of a secret."""
    hit = bytearray(len(text))
    for secret in secrets:
        n, pieces = min(_PIECE, len(secret)), _pieces(secret)
        if len(text) < 2 * len(pieces):  # a stream's window: look at each place once
            starts = (i for i in range(len(text) - n + 1) if text[i:i + n] in pieces)
        else:                            # a whole reply: str.find each piece
            starts = (at for piece in pieces for at in _find_all(text, piece))
        for at in starts:
            hit[at:at + n] = b"\1" * n
    return hit


def _find_all(text: str, piece: str):
    at = text.find(piece)
    while at != -1:
        yield at
        at = text.find(piece, at + 1)


def _masked(text: str, hit: bytearray, start: int = 0, end: int | None = None) -> str:
    """`text[start:end]` with each run of hit characters shown as one MASK. A run that began
    before `start` was shown already (by the piece of a stream before this one)."""
    end = len(text) if end is None else end
    out, i = [], start
    while i < end:
        j, flag = i, hit[i]
        while j < end and hit[j] == flag:
            j += 1
        if not flag:
            out.append(text[i:j])
        elif not (i == start and i > 0 and hit[i - 1]):
            out.append(MASK)
        i = j
    return "".join(out)


def _secrets(secrets: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for s in secrets if isinstance(s, str) and s)


def redact(text: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`text` with every secret, every run of 8+ characters taken from a secret (servers often
    echo part of a bad key), and anything shaped like a key or an auth header masked."""
    if not isinstance(text, str) or not text:
        return text
    secrets = _secrets(secrets)
    if secrets:
        hit = _hits(text, secrets)
        if any(hit):
            text = _masked(text, hit)
    return _KEYLIKE.sub(_mask_keylike, text)


def redact_json(value: Any, redact_text: Callable[[Any], Any]) -> Any:
    """`value` (decoded JSON) with every string in it, keys included, redacted."""
    if isinstance(value, dict):
        return {redact_text(k): redact_json(v, redact_text) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, redact_text) for v in value]
    return redact_text(value)


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
        self._secrets = _secrets(secrets)
        self._out = out
        self._shown = ""   # the last characters passed on: context for the next piece
        self._held = ""

    def feed(self, piece: str) -> None:
        if not piece:
            return
        text = self._shown + self._held + piece
        start = len(self._shown)
        cut = max(start, self._safe_end(text, start))
        self._held = text[cut:]
        self._send(text, start, cut)

    def close(self) -> None:
        """Pass on what was held back (the stream is complete)."""
        text, start = self._shown + self._held, len(self._shown)
        self._held = ""
        self._send(text, start, len(text))

    def _safe_end(self, text: str, start: int) -> int:
        end = len(text)
        for secret in self._secrets:
            end = min(end, len(text) - _tail_in(text, secret))
        m = _KEYLIKE_START.search(text, start)
        if m and len(text) - m.start() <= _MAX_HELD_KEYLIKE:
            end = min(end, m.start())
        for m in _KEYLIKE.finditer(text, start):  # nor cut through a complete one
            if m.start() < end < m.end() and len(text) - m.start() <= _MAX_HELD_KEYLIKE:
                end = m.start()
        return end

    def _send(self, text: str, start: int, cut: int) -> None:
        if cut <= start:
            return
        # hits over all of `text`: a piece of the key that begins before the cut and ends
        # after it masks the characters before the cut now
        hit = _hits(text, self._secrets) if self._secrets else bytearray(len(text))
        shown = _KEYLIKE.sub(_mask_keylike, _masked(text, hit, start, cut))
        self._shown = text[max(0, cut - _PIECE):cut]
        if shown:
            self._out(shown)
