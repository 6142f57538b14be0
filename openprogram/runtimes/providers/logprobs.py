"""The probability of each option of a menu, read from an OpenAI-compatible reply's token
log-probabilities (`logprobs` / `top_logprobs`).

The option name a reply picks is the value of its "call" key in the pick, found as the decision
finds it (`name_at`: the object `find_action` reads, under the decision's root key in
json_schema mode, or the one the syntax repair reads), never a "call" elsewhere in the reply (in
the pick's arguments, in prose after it). The probability of the
name the model wrote is the product of the probabilities of the tokens that wrote it, through
its closing quote (so `refund` is not confused with `refund_partial`). The other options get
what the server shows of them: the alternatives at the name's first token (`top_logprobs`),
each grouped under the option name it begins; an alternative that begins several names (a first
token those names share with each other) cannot be told apart from this position, so its mass
goes to `other` with a note, as does every alternative that begins no name and the mass the
server did not list. A reply without log-probabilities, or with ones that do not spell the
reply, gives `other` = 1 and a note: never an invented number, and a malformed field never fails
the reply it came with. The work is bounded by the reply's token count times `top_logprobs`.
"""
from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

from ...decision.extract import CALL_KEYS, find_action
from ...decision.repair import repair_syntax, value_span

__all__ = ["distribution", "tokens_of", "name_at", "MAX_TOKENS"]

# A pick the syntax repair reads starts with its call key (repair/syntax.py's `_PICK_START`, which a
# comment may precede): the name's opening quote, whichever quotes the key has.
_PICK_NAME = re.compile(r"""\{(?:[ \t\r\n]|//[^\n]{0,200}\n|/\*[^*]{0,200}\*/){0,16}"""
                        r"""(?:"|'|)(call|action|function|tool)(?:"|'|)"""
                        r"""[ \t\r\n]*:[ \t\r\n]*(["'])""")
#: at most this many tokens are read: a decision's reply is short, a runaway one is not read whole
MAX_TOKENS = 20_000
#: and at most this many alternatives at a token (OpenAI sends 20 at most; a server may not)
MAX_ALTERNATIVES = 64


def tokens_of(content: Any) -> list[dict] | None:
    """`choices[0].logprobs.content` (SDK objects or JSON) as `[{"token", "logprob",
    "top_logprobs": [alternative, ...]}]`, at most `MAX_TOKENS` tokens and `MAX_ALTERNATIVES`
    alternatives each; None when there is none. The alternatives are kept as the server sent
    them (SDK objects or dicts): `distribution` reads those of one token only, the name's
    first, so the others are never taken apart (a streamed reply calls this for every token).
    A field of another shape (the SDK keeps what the server sent, unchecked) is one token
    with `malformed` saying what it was, which `distribution` reports; it never raises."""
    if content is None:
        return None
    if not isinstance(content, (list, tuple)):
        return [_malformed(f"logprobs.content is {_shape(content)}, not a list of tokens")]
    out = []
    for item in itertools.islice(content, MAX_TOKENS):
        if isinstance(item, dict):
            token, logprob, tops = item.get("token"), item.get("logprob"), \
                item.get("top_logprobs")
        else:
            token, logprob, tops = getattr(item, "token", None), getattr(item, "logprob", None), \
                getattr(item, "top_logprobs", None)
        if tops is not None and not isinstance(tops, (list, tuple)):
            out.append(_malformed(f"a token's top_logprobs is {_shape(tops)}, not a list"))
            continue
        out.append({"token": token, "logprob": logprob,
                    "top_logprobs": list(itertools.islice(tops, MAX_ALTERNATIVES))
                    if tops else []})
    return out


def _malformed(why: str) -> dict:
    return {"token": None, "logprob": None, "top_logprobs": [], "malformed": why}


def _shape(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:40] + '…'}"


def _field(alternative: Any, key: str) -> Any:
    """A field of one alternative, a dict (JSON) or an SDK object."""
    if isinstance(alternative, dict):
        return alternative.get(key)
    return getattr(alternative, key, None)


def _missing(names: Sequence[str], why: str) -> dict:
    return {"probs": {n: 0.0 for n in names}, "other": 1.0, "source": "logprobs", "note": why}


def _p(logprob: Any) -> float | None:
    """exp(logprob) of a log-probability (a float or int <= 0, not NaN, not a bool; a server's
    rounding up to 1e-9 above 0 is read as 0, so p is never above 1); None otherwise. Called
    for every alternative of the name's first token: kept cheap."""
    if (logprob.__class__ is float or logprob.__class__ is int) and logprob <= 1e-9 \
            and logprob == logprob:
        return math.exp(min(logprob, 0.0)) if logprob > -1e4 else 0.0
    return None


def distribution(text: Any, tokens: list[dict] | None, names: Sequence[str],
                 cut: bool = False) -> dict:
    """The seam's confidence dict (`probs` over `names`, `other`, `source`, `note`) of one
    reply `text` from its log-probability `tokens`, at the pick's name (`name_at`; `cut`: the
    reply was cut at the token limit, as the decision reads it)."""
    names = list(names)
    if not tokens:
        return _missing(names, "the server sent no log-probabilities with this reply")
    bad = next((t["malformed"] for t in tokens if "malformed" in t), None)
    if bad is not None:
        return _missing(names, f"the server's log-probabilities are malformed: {bad}")
    if not isinstance(text, str):
        return _missing(names, "the reply is not text")
    pieces = [t.get("token") for t in tokens]
    if not all(isinstance(p, str) for p in pieces) or "".join(pieces) != text:
        return _missing(names, "the log-probabilities do not spell the reply's text")
    where = name_at(text, cut)
    if where is None:
        return _missing(names, 'the reply holds no pick with a quoted "call" value to read '
                               'a name at')
    start, written = where
    quote = text[start - 1]
    # the token that holds the name's first character, and the name's last (its closing quote)
    ends = list(itertools.accumulate(map(len, pieces)))
    first = bisect.bisect_right(ends, start)
    close = start + len(written)   # the closing quote's offset
    last = min(bisect.bisect_right(ends, close), len(ends) - 1)
    probs = {n: 0.0 for n in names}
    p_written = 1.0
    for t in tokens[first:last + 1]:
        p = _p(t.get("logprob"))
        if p is None:
            return _missing(names, f"a token's logprob is not a log-probability "
                                   f"({t.get('logprob')!r})")
        p_written *= p
    notes: list[str] = []
    ordered = sorted(names)
    head = text[ends[first] - len(pieces[first]):start]   # the token's text before the name
    chosen = pieces[first]
    alts = tokens[first].get("top_logprobs") or []
    seen_chosen = False
    seen: set = set()
    listed = 0.0
    other = 0.0
    shared = 0.0
    for alt in alts:
        tok, p = _field(alt, "token"), _p(_field(alt, "logprob"))
        if not isinstance(tok, str) or p is None:
            notes.append("an alternative token without a usable log-probability was skipped")
            continue
        if tok in seen:
            continue  # a server that lists a token twice
        seen.add(tok)
        listed += p
        if tok == chosen:
            seen_chosen = True
            # the chosen first token: the name written gets its whole path; the rest of this
            # token's mass went on to other names sharing it or to other replies, which the
            # server does not show, so it is other
            rest = max(p - p_written, 0.0)
            if written in probs:
                probs[written] += p_written
            else:
                other += p_written
            other += rest
            if rest > 0 and any(n != written for n in _begun(tok, head, ordered, quote)):
                shared += rest
            continue
        begun = _begun(tok, head, ordered, quote)
        if len(begun) == 1:
            probs[begun[0]] += p
        else:
            other += p
            if len(begun) > 1:
                shared += p
    if not seen_chosen:  # the server did not list the token it chose among the alternatives
        first_p = _p(tokens[first].get("logprob")) or 0.0
        listed += first_p
        if written in probs:
            probs[written] += p_written
        else:
            other += p_written
        other += max(first_p - p_written, 0.0)
    unlisted = max(1.0 - listed, 0.0)
    other += unlisted
    if shared > 0:
        notes.append(f"{shared:.3g} of the mass began several option names at once (a first "
                     f"token they share) and is counted as other")
    if not alts:
        notes.append("the server listed no alternatives (top_logprobs): only the name written "
                     "has a probability")
    total = sum(probs.values()) + other
    if total > 1 + 1e-6:  # a server's rounding: scaled back to 1
        probs = {k: v / total for k, v in probs.items()}
        other /= total
    return {"probs": probs, "other": max(0.0, 1.0 - sum(probs.values())), "source": "logprobs",
            "note": "; ".join(dict.fromkeys(notes)) or None}


def name_at(text: str, cut: bool = False) -> tuple[int, str] | None:
    """Where the name of the reply's pick starts in `text` (just after its opening quote) and
    the name as written, up to its closing quote; None when the pick's name is not a quoted
    string, or there is no pick. The pick is the one the decision reads: the object
    `find_action` finds (the last with a call key, A6; not one inside another's arguments, not
    text outside an object), its name under the call key that wins (`CALL_KEYS`); else the one
    the syntax repair reads (`repair="safe"`, the default; `cut`: the reply was cut at the
    token limit), which starts with its call key."""
    found = find_action(text)
    if found.span is not None:
        at = value_span(text, found.span, "call")
        if at is None or text[at[0]] != '"' or at[1] - at[0] < 2:
            return None
        return at[0] + 1, text[at[0] + 1:at[1] - 1]
    repaired = repair_syntax(text, cut)
    if repaired is None:
        return None
    obj, span, _ = repaired
    m = _PICK_NAME.match(text, span[0])
    if m is None or m.group(1) != next((k for k in CALL_KEYS if k in obj), None):
        return None  # (a key of higher precedence further on names the option)
    close = text.find(m.group(2), m.end(), span[1])
    return None if close < 0 else (m.end(), text[m.end():close])


def _begun(token: str, head: str, names: list[str], quote: str = '"') -> list[str]:
    """The option names an alternative token at the name's first position begins: the token
    must repeat what the chosen token had before the name (`head`, e.g. the opening quote),
    and what follows must be the start of a name (or a whole name and its closing `quote`).
    `names` is sorted, so the names a text begins are one range of it."""
    if not token.startswith(head):
        return []
    rest = token[len(head):]
    if not rest:
        return []
    if quote in rest:  # a whole name and its closing quote (and what follows it)
        whole = rest.split(quote, 1)[0]
        i = bisect.bisect_left(names, whole)
        return [whole] if i < len(names) and names[i] == whole else []
    lo = bisect.bisect_left(names, rest)
    hi = bisect.bisect_left(names, rest + "\U0010ffff", lo)
    return names[lo:hi]
