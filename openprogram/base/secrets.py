"""Secrets: the one type that holds one, the words that name one, and the one walk that masks them.

A secret — a provider's API key, a token an MCP server is given in its environment or a header —
must reach no trace, export, file, notebook output or repr. `Secret` holds one: its repr and str
are masked, pickling it is refused, and while it lives every file the library writes masks it:
`scrub`, which each file writer (the journal, cassettes, the cache, the MCP result cache) applies
to every line through base/jsonl.py, masks every secret of this process in what it writes, whole
or in part, as written or spelled with JSON escapes, whichever path produced the text (a batch
API's errors and ids, request settings recorded beside each call, a server that echoes a key).
What is only shaped like a key is left to the provider runtimes, which mask it in what their
servers send (a prompt about "Bearer tokens" is recorded as it was asked). `SECRET_WORDS` are the
words that say a name holds a secret, read two ways: a setting's name word by word
(`names_secret`: "api_key", not "max_tokens") and a server's environment variable or header
name by substring (`env_holds_secret`: "GITHUB_TOKEN"). `redacted(value, redact)` is the one
walk of JSON data that passes every string, object keys included, through a redaction: files
(`scrub`), a decoded pick before anything reads it (`redact_decoded`), what a server sends back
(the provider runtimes, MCP results), strings under a secret's name (`without_secrets`). A
secret is found in a text by its pieces (`PIECE` characters of it, as written or spelled with
JSON escapes: `secret_hits`, over `JsonView`, the text as JSON decodes it) and masked there
(`mask_secrets`); what is only shaped like a key, and a stream masked piece by piece, are the
provider runtimes' (runtimes/providers/key_redaction.py), which build on these. A process that
holds no secret writes its files untouched.
"""
from __future__ import annotations

import bisect
import functools
import re
import weakref

from .json_form import SURROGATE

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["Secret", "MASK", "SECRET_WORDS", "names_secret", "env_holds_secret", "holding",
           "scrub", "redacted", "redact_decoded", "without_secrets", "PIECE", "mask_secrets",
           "secret_hits", "masked_runs", "json_view", "JsonView", "valid_secrets"]

#: What a masked stretch of text shows in its place.
MASK = "[redacted]"

#: The words of a name that say it holds a secret ("api_key", "x-auth-token", GITHUB_TOKEN).
SECRET_WORDS = frozenset({"key", "apikey", "auth", "authorization", "secret", "password",
                          "passwd", "credential", "credentials", "signature", "token",
                          "bearer", "cookie"})
#: The words of a sampling setting's name that keep it a setting ("stop_token", "max_tokens").
SETTING_WORDS = frozenset({"max", "min", "stop", "eos", "bos", "pad", "logit"})
#: The shortest text a server's environment variable or header must hold to be masked
#: everywhere it appears (a shorter one would mask common words).
MIN_SECRET = 8

_live: weakref.WeakSet = weakref.WeakSet()   # every Secret of this process


class Secret:
    """A secret that does not show itself: its repr and str are masked, pickling it is refused,
    and every file written while it lives masks it. `reveal()` is the value itself (what is
    sent); `masked` is the part of it files mask (a header's credential after its scheme: masking
    the whole `Bearer <token>` would mask "Bearer t" in any text about bearer tokens)."""
    __slots__ = ("_value", "masked", "__weakref__")

    def __init__(self, value: str, masked: str | None = None) -> None:
        self._value = value
        self.masked = value if masked is None else masked
        _live.add(self)   # every file written from now on masks it

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a secret cannot be pickled; create what holds it again in the other "
                        "process (a runtime reads its key from the environment)")


def names_secret(name: str) -> bool:
    """Whether a setting named `name` holds a secret: one of its words is a secret word and none
    a sampling setting's (`extra_query={"api_key": ...}` does, `max_tokens` does not)."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    return bool(words & SECRET_WORDS) and not words & SETTING_WORDS


def env_holds_secret(name: Any, value: Any) -> bool:
    """Whether an environment variable or a header a server is given holds a secret: a secret
    word anywhere in its name (GITHUB_TOKEN, X-Api-Key) and a value long enough to be one."""
    if not isinstance(name, str) or not isinstance(value, str) or len(value) < MIN_SECRET:
        return False
    upper = name.upper()
    return any(word.upper() in upper for word in SECRET_WORDS)


# -- finding a secret in a text ---------------------------------------------------------------

#: A stretch of this many characters of a secret is masked wherever it appears (the whole
#: secret when it is shorter): a server often echoes part of a bad key.
PIECE = 8


@functools.lru_cache(maxsize=16)
def _pieces(secret: str) -> frozenset[str]:
    n = min(PIECE, len(secret))
    return frozenset(secret[i:i + n] for i in range(len(secret) - n + 1))


def _hits(text: str, secrets: tuple[str, ...]) -> bytearray:
    """For each character of `text`, whether it lies in an occurrence of a piece of a secret."""
    hit = bytearray(len(text))
    for secret in secrets:
        n, pieces = min(PIECE, len(secret)), _pieces(secret)
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


class JsonView:
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
        if SURROGATE.search(decoded):  # surrogate halves to pair up: the exact walk now
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


def json_view(text: str, secrets: tuple[str, ...] = ()) -> JsonView | None:
    """The decoded view of `text`, or None when decoding cannot spell a piece of a secret: no
    `\\u` or `\\/` escape, no surrogate, no backslash at the end that the next piece of a
    stream may make one (the short escapes, `\\n`, `\\"`, ..., spell characters that keys do
    not hold; they count only for a secret that holds one)."""
    if "\\u" in text or "\\/" in text or text.endswith("\\") or \
            ("\\" in text and _odd(secrets)) or SURROGATE.search(text):
        return JsonView(text)
    return None


@functools.lru_cache(maxsize=16)
def _odd(secrets: tuple[str, ...]) -> bool:
    """Whether a secret holds a character JSON writes with a short escape (`"`, `\\`, ...)."""
    return any(c in '"\\\b\f\n\r\t' for secret in secrets for c in secret)


def secret_hits(text: str, secrets: tuple[str, ...], view: Any = False) -> bytearray:
    """`_hits` of `text` as written and as JSON decodes it (`view`, when the caller has it):
    the characters that spell a piece of a secret through escapes are hits too."""
    hit = _hits(text, secrets)
    if view is False:
        view = json_view(text, secrets)
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


def masked_runs(text: str, hit: bytearray, start: int = 0, end: int | None = None) -> str:
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


def valid_secrets(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """The secrets that are text and not empty."""
    return tuple(s for s in secrets if isinstance(s, str) and s)


def mask_secrets(text: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`text` with every stretch of 8+ characters of a secret masked (as written or spelled
    with JSON escapes), and nothing else: what the file writers apply to everything they
    write. Not the key-shaped words `redact` also masks: a prompt about "Bearer tokens" is the
    program's own text, and a cassette must record it as it was asked."""
    secrets = valid_secrets(secrets)
    if not isinstance(text, str) or not text or not secrets:
        return text
    hit = secret_hits(text, secrets)
    return masked_runs(text, hit) if any(hit) else text



# -- every file's masking --------------------------------------------------------------------


def _held() -> tuple[str, ...]:
    return tuple(sorted({s.masked for s in list(_live)} - {""}))


def holding() -> bool:
    """Whether `scrub` may change anything: some secret of this process is alive (an empty one
    too: no need to reveal them to tell). A writer that writes its lines without building JSON
    data first (a journal row's trace) asks this, and writes the general way while it is so."""
    return bool(_live)


def scrub(value: Any) -> Any:
    """`value` (JSON data: dicts, lists, strings, numbers) with every string masked of every
    secret this process holds; a value of any other type as its masked repr (what the writers'
    json.dumps(default=repr) would write). Nothing changes (the same object comes back) while
    no secret is alive."""
    if not _live:   # no secret alive: nothing to sort out of the weak set
        return value
    keys = _held()
    if not keys:
        return value
    # a text shorter than a masked stretch (8 characters of a key) holds none: most strings of a
    # line are field names and short values, passed as they are
    least = min([8, *(len(k) for k in keys)])

    def one(s: str) -> str:
        return s if len(s) < least else mask_secrets(s, keys)
    return redacted(value, one, objects=lambda v: one(repr(v)))


# -- the one walk ----------------------------------------------------------------------------


def redacted(value: Any, redact: Callable[[Any], Any], *, where: list[str] | None = None,
             path: str = "", objects: Callable[[Any], Any] | None = None) -> Any:
    """`value` (JSON data) with every string in it, keys of objects at any depth included,
    passed through `redact`; tuples become lists. A number, a boolean and None are kept; a
    value of any other type is kept too, or passed to `objects`. With `where`, the path of
    every place `redact` changed (`args.opts.k`, `args.items[0]`, a key as it reads after
    redaction) is appended to it."""
    if isinstance(value, str):
        new = redact(value)
        if where is not None and new != value:
            where.append(path or "(the value)")
        return new
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = redact(k) if isinstance(k, str) else k
            at = ""
            if where is not None:
                at = f"{path}.{key}" if path else str(key)
                if key != k:
                    where.append(at)
            out[key] = redacted(v, redact, where=where, path=at, objects=objects)
        return out
    if isinstance(value, (list, tuple)):
        return [redacted(v, redact, where=where, path=f"{path}[{i}]" if where is not None
                         else "", objects=objects) for i, v in enumerate(value)]
    if objects is None or value is None or isinstance(value, (int, float, bool)):
        return value
    return objects(value)


def redact_decoded(value: Any, redact: Callable[[Any], Any] | None,
                   path: str = "") -> tuple[Any, list[str]]:
    """A pick as decoded, redacted before anything reads it: `(value redacted, the paths where
    something was redacted)`. A runtime that holds a key redacts the text its server sends, but
    JSON can spell the key in ways the text does not show (`\\u0073k-...`, an escape written
    inside a string that is itself JSON), so every string of the decoded pick goes through the
    runtime's `redact` (a runtime without a key has none, and nothing changes) before
    validation: the option's function, the result, the messages built from the arguments and
    every view of them see only the redacted value. The same object comes back when nothing
    changed."""
    if redact is None:
        return value, []
    where: list[str] = []
    out = redacted(value, redact, where=where, path=path)
    return (value if not where else out), where


def without_secrets(value: Any) -> Any:
    """`value` (a setting's or a request body's JSON form) with every string under a name that
    holds a secret (`extra_query={"api_key": ...}`, `extra_body={"auth": {"signature": ...}}`)
    masked, at any depth. Only strings: a tool's schema may well have a parameter named "key"."""
    if isinstance(value, dict):
        return {k: MASK if isinstance(v, str) and isinstance(k, str) and names_secret(k)
                else without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value
