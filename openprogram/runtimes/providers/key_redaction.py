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
that only the joined text shows. `_Secret` holds the key itself without ever showing it.
"""
from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from typing import Any

from ...base import filesecrets

MASK = "[redacted]"
_PIECE = 8   # a stretch of this many characters of a secret is masked wherever it appears


class _Secret:
    """An API key that does not show itself: its repr, str and pickled form are masked."""
    __slots__ = ("_value", "__weakref__")

    def __init__(self, value: str):
        self._value = value
        filesecrets.remember(self)   # every file written from now on masks it

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


# A JSON escape, or a surrogate code point written as itself: each is one token of the decoded
# text (a surrogate pair, escaped or not, becomes one character).
_TOKEN = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])|[\ud800-\udfff]')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SURROGATE = re.compile("[\ud800-\udfff]")
# An escape that the next piece of a stream may complete, at the very end of the text, and a
# high surrogate there, which the next piece may pair with its low half.
_OPEN_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")
_HIGH_AT_END = re.compile(r"(?:\\u[dD][89abAB][0-9a-fA-F]{2}|[\ud800-\udbff])\Z")


def _token_char(token: str) -> str:
    if len(token) == 1:
        return token
    if token[1] == "u":
        return chr(int(token[2:], 16))
    return _SIMPLE[token[1]]


_CHARS: dict[str, str] = {}   # token -> character; at most every escape JSON has


def _sub_token(m: re.Match) -> str:
    token = m.group()
    ch = _CHARS.get(token)
    if ch is None:
        ch = _CHARS[token] = _token_char(token)
    return ch


class _Decoded:
    """`text` as JSON decodes its escapes (`.text`), with the way back: which characters of
    `text` spell each decoded one. Made of segments: a run of plain characters (one for one) or
    one decoded character spelled by an escape or a surrogate pair. The decoded text comes from
    one regular-expression pass; the segments are worked out only when asked for (a hit, the
    end of a stream's window), so a long reply with many escapes and no key costs little."""
    __slots__ = ("_src", "text", "_d", "_s", "_e", "_plain", "open_at")

    def __init__(self, text: str):
        self._src = text
        self._d = None
        decoded = _TOKEN.sub(_sub_token, text)
        if _SURROGATE.search(decoded):  # surrogate halves to pair up: the exact walk now
            self._walk()
        else:
            self.text = decoded
        self.open_at = None   # where an escape the next piece could finish begins
        tail = max(0, len(text) - 6)
        m = _OPEN_ESCAPE.search(text, tail)
        if m and _escape_is_open(text, m.start()):
            self.open_at = m.start()
        else:  # a high surrogate waiting for its low half
            m = _HIGH_AT_END.search(text, tail)
            if m and (len(m.group()) == 1 or _escape_is_open(text, m.start())):
                self.open_at = m.start()

    def _walk(self) -> None:
        text = self._src
        out: list[str] = []
        d_at, s_at, e_at, plain = [], [], [], []
        dpos = pos = 0
        tokens = list(_TOKEN.finditer(text))
        k = 0
        while k < len(tokens):
            m = tokens[k]
            if m.start() > pos:   # plain characters before this token
                d_at.append(dpos), s_at.append(pos), e_at.append(m.start()), plain.append(True)
                out.append(text[pos:m.start()])
                dpos += m.start() - pos
            ch, end = _token_char(m.group()), m.end()
            if "\ud800" <= ch <= "\udbff" and k + 1 < len(tokens) and tokens[k + 1].start() == end:
                low = _token_char(tokens[k + 1].group())
                if "\udc00" <= low <= "\udfff":
                    ch = (ch + low).encode("utf-16", "surrogatepass").decode("utf-16")
                    end = tokens[k + 1].end()
                    k += 1
            d_at.append(dpos), s_at.append(m.start()), e_at.append(end), plain.append(False)
            out.append(ch)
            dpos += 1
            pos = end
            k += 1
        if pos < len(text):
            d_at.append(dpos), s_at.append(pos), e_at.append(len(text)), plain.append(True)
            out.append(text[pos:])
        self.text = "".join(out)
        self._d, self._s, self._e, self._plain = d_at, s_at, e_at, plain

    def source(self, start: int, end: int) -> tuple[int, int]:
        """The characters of the source that spell decoded characters [start, end)."""
        return self._at(start)[0], self._at(end - 1)[1]

    def _at(self, d: int) -> tuple[int, int]:
        if self._d is None:
            self._walk()
        i = bisect.bisect_right(self._d, d) - 1
        if self._plain[i]:
            at = self._s[i] + d - self._d[i]
            return at, at + 1
        return self._s[i], self._e[i]

    def boundary(self, at: int) -> int:
        """The start of the token that holds source character `at` (`at` itself when it is
        plain): a place to resume decoding from that cuts through no escape. Worked out where
        `at` is, without the segments: a token is at most 12 characters long."""
        src = self._src
        for j in range(at, max(-1, at - 12), -1):
            m = _TOKEN.match(src, j) if src[j] == "\\" or "\ud800" <= src[j] <= "\udfff" \
                else None
            if m is None or (src[j] == "\\" and not _escape_is_open(src, j)):
                continue
            if j <= at < m.end():   # `at` is inside this token; a pair's low half counts too
                pair = self._pair_start(j)
                return j if pair is None else pair
        return at

    def tail_start(self, k: int) -> int:
        """Where the source of the last `k` decoded characters begins, worked out from the
        end (the segments are not needed)."""
        at = len(self._src)
        for _ in range(k):
            at = self._char_start(at)
        return at

    def _char_start(self, end: int) -> int:
        """The start of the token (or plain character) that ends at source index `end`."""
        src = self._src
        for size in (6, 2):
            j = end - size
            if j >= 0 and src[j] == "\\" and _escape_is_open(src, j):
                m = _TOKEN.match(src, j)
                if m is not None and m.end() == end:
                    pair = self._pair_start(j)
                    return j if pair is None else pair
        if end >= 2 and "\udc00" <= src[end - 1] <= "\udfff" and \
                "\ud800" <= src[end - 2] <= "\udbff":
            return end - 2
        return end - 1

    def _pair_start(self, low_at: int) -> int | None:
        """Where the high half begins when the token at `low_at` is the low half of a
        surrogate pair (escaped or not), else None."""
        src = self._src
        m = _TOKEN.match(src, low_at)
        if m is None or not "\udc00" <= _token_char(m.group()) <= "\udfff":
            return None
        for size in (6, 1):
            j = low_at - size
            if j < 0:
                continue
            h = _TOKEN.match(src, j)
            if h is not None and h.end() == low_at and \
                    "\ud800" <= _token_char(h.group()) <= "\udbff" and \
                    (size == 1 or _escape_is_open(src, j)):
                return j
        return None


def _escape_is_open(text: str, at: int) -> bool:
    """Whether the backslash at `at` starts an escape (it is not the second half of `\\\\`)."""
    n = 0
    while at - n - 1 >= 0 and text[at - n - 1] == "\\":
        n += 1
    return n % 2 == 0


def _decoded(text: str, secrets: tuple[str, ...] = ()) -> _Decoded | None:
    """The decoded view of `text`, or None when decoding cannot spell a piece of a secret: no
    `\\u` or `\\/` escape, no surrogate, no backslash at the end that the next piece of a
    stream may make one (the short escapes, `\\n`, `\\"`, ..., spell characters that keys do
    not hold; they count only for a secret that holds one)."""
    if "\\u" in text or "\\/" in text or text.endswith("\\") or \
            ("\\" in text and _odd(secrets)) or _SURROGATE.search(text):
        return _Decoded(text)
    return None


@functools.lru_cache(maxsize=16)
def _odd(secrets: tuple[str, ...]) -> bool:
    """Whether a secret holds a character JSON writes with a short escape (`"`, `\\`, ...)."""
    return any(c in '"\\\b\f\n\r\t' for secret in secrets for c in secret)


def _all_hits(text: str, secrets: tuple[str, ...], view: Any = False) -> bytearray:
    """`_hits` of `text` as written and as JSON decodes it (`view`, when the caller has it):
    the characters that spell a piece of a secret through escapes are hits too."""
    hit = _hits(text, secrets)
    if view is False:
        view = _decoded(text, secrets)
    if view is not None:
        dhit = _hits(view.text, secrets)
        at = dhit.find(1)
        while at != -1:
            end = dhit.find(0, at)
            end = len(dhit) if end == -1 else end
            s, e = view.source(at, end)
            hit[s:e] = b"\1" * (e - s)
            at = dhit.find(1, end)
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
        hit = _all_hits(text, secrets)
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
    secrets = _secrets(secrets)
    joined = "".join(pieces)
    if not joined:
        return list(pieces)
    hit = _all_hits(joined, secrets) if secrets else bytearray(len(joined))
    _keylike_hits(joined, hit)
    if not any(hit):
        return list(pieces)
    out, at = [], 0
    for piece in pieces:
        out.append(_masked(joined, hit, at, at + len(piece)) if piece else piece)
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
        self._secrets = _secrets(secrets)
        self._out = out
        self._shown = ""   # the last characters passed on: context for the next piece
        self._held = ""

    def feed(self, piece: str) -> None:
        if not piece:
            return
        text = self._shown + self._held + piece
        start = len(self._shown)
        view = _decoded(text, self._secrets) if self._secrets else None  # once per piece
        cut = max(start, self._safe_end(text, start, view))
        self._held = text[cut:]
        self._send(text, start, cut, view)

    def close(self) -> None:
        """Pass on what was held back (the stream is complete)."""
        text, start = self._shown + self._held, len(self._shown)
        self._held = ""
        self._send(text, start, len(text),
                   _decoded(text, self._secrets) if self._secrets else None)

    def _safe_end(self, text: str, start: int, view: _Decoded | None) -> int:
        end = len(text)
        body = text
        while view is not None and view.open_at is not None:
            # an escape the next piece may finish (or the high half of a pair it may complete)
            # is held back, and so is the end of what comes before it that could begin the key
            end = view.open_at
            body = text[:end]
            view = _decoded(body, self._secrets)
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

    def _send(self, text: str, start: int, cut: int, view: _Decoded | None) -> None:
        if cut <= start:
            return
        # hits over all of `text`: a piece of the key that begins before the cut and ends
        # after it masks the characters before the cut now
        hit = _all_hits(text, self._secrets, view) if self._secrets else bytearray(len(text))
        shown = _KEYLIKE.sub(_mask_keylike, _masked(text, hit, start, cut))
        # the context holds _PIECE decoded characters: near escapes, each may be spelled by up
        # to 12 (an escaped surrogate pair), and it begins where no escape is cut through
        at = max(0, cut - _PIECE * 12)
        near = text[at:cut]
        if view is not None and ("\\" in near or _SURROGATE.search(near)):
            self._shown = text[view.boundary(at):cut]
        else:
            self._shown = text[max(0, cut - _PIECE):cut]
        if shown:
            self._out(shown)


#: The words of a setting's name that say it holds a secret ("api_key", "x-auth-token"); the
#: words of a sampling setting ("stop_token", "max_tokens") keep it a setting.
_SECRET_WORDS = {"key", "apikey", "auth", "authorization", "secret", "password", "passwd",
                 "credential", "credentials", "signature", "token", "bearer", "cookie"}
_SETTING_WORDS = {"max", "min", "stop", "eos", "bos", "pad", "logit"}


def _holds_secret(name: str) -> bool:
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    return bool(words & _SECRET_WORDS) and not words & _SETTING_WORDS


def without_secrets(value: Any) -> Any:
    """`value` (a setting's or a request body's JSON form) with every string under a name that
    holds a secret (`extra_query={"api_key": ...}`, `extra_body={"auth": {"signature": ...}}`)
    masked, at any depth. Only strings: a tool's schema may well have a parameter named "key"."""
    if isinstance(value, dict):
        return {k: MASK if isinstance(v, str) and isinstance(k, str) and _holds_secret(k)
                else without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


def mask_secrets(text: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`text` with every stretch of 8+ characters of a secret masked (as written or spelled
    with JSON escapes), and nothing else: what the file writers apply to everything they
    write. Not the key-shaped words `redact` also masks: a prompt about "Bearer tokens" is the
    program's own text, and a cassette must record it as it was asked."""
    secrets = _secrets(secrets)
    if not isinstance(text, str) or not text or not secrets:
        return text
    hit = _all_hits(text, secrets)
    return _masked(text, hit) if any(hit) else text


filesecrets.install(mask_secrets)
