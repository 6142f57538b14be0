"""The probability of each option of a menu, read from an OpenAI-compatible reply's token
log-probabilities (`logprobs` / `top_logprobs`).

The option name a reply picks is the value of its "call" key (menu mode: in the JSON object
that ends the reply; json_schema mode: under the decision's root key). The probability of the
name the model wrote is the product of the probabilities of the tokens that wrote it, through
its closing quote (so `refund` is not confused with `refund_partial`). The other options get
what the server shows of them: the alternatives at the name's first token (`top_logprobs`),
each grouped under the option name it begins; an alternative that begins several names (a first
token those names share with each other) cannot be told apart from this position, so its mass
goes to `other` with a note, as does every alternative that begins no name and the mass the
server did not list. A reply without log-probabilities, or with ones that do not spell the
reply, gives `other` = 1 and a note: never an invented number. The work is bounded by the
reply's token count times `top_logprobs`.
"""
from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["distribution", "tokens_of", "MAX_TOKENS"]

_CALL = re.compile(r'"call"\s*:\s*"')
#: at most this many tokens are read: a decision's reply is short, a runaway one is not read whole
MAX_TOKENS = 20_000
#: and at most this many alternatives at a token (OpenAI sends 20 at most; a server may not)
MAX_ALTERNATIVES = 64


def tokens_of(content: Any) -> list[dict] | None:
    """`choices[0].logprobs.content` (SDK objects or JSON) as `[{"token", "logprob",
    "top_logprobs": [alternative, ...]}]`, at most `MAX_TOKENS` tokens and `MAX_ALTERNATIVES`
    alternatives each; None when there is none. The alternatives are kept as the server sent
    them (SDK objects or dicts): `distribution` reads those of one token only, the name's
    first, so the others are never taken apart (a streamed reply calls this for every token)."""
    if content is None:
        return None
    out = []
    for item in itertools.islice(content, MAX_TOKENS):
        if isinstance(item, dict):
            token, logprob, tops = item.get("token"), item.get("logprob"), \
                item.get("top_logprobs")
        else:
            token, logprob, tops = getattr(item, "token", None), getattr(item, "logprob", None), \
                getattr(item, "top_logprobs", None)
        out.append({"token": token, "logprob": logprob,
                    "top_logprobs": list(itertools.islice(tops, MAX_ALTERNATIVES))
                    if tops else []})
    return out


def _field(alternative: Any, key: str) -> Any:
    """A field of one alternative, a dict (JSON) or an SDK object."""
    if isinstance(alternative, dict):
        return alternative.get(key)
    return getattr(alternative, key, None)


def _missing(names: Sequence[str], why: str) -> dict:
    return {"probs": {n: 0.0 for n in names}, "other": 1.0, "source": "logprobs", "note": why}


def _p(logprob: Any) -> float | None:
    """exp(logprob) of a log-probability (a float or int <= 0, not NaN, not a bool); None
    otherwise. Called for every alternative of the name's first token: kept cheap."""
    if (logprob.__class__ is float or logprob.__class__ is int) and logprob <= 1e-9 \
            and logprob == logprob:
        return math.exp(logprob) if logprob > -1e4 else 0.0
    return None


def distribution(text: Any, tokens: list[dict] | None, names: Sequence[str]) -> dict:
    """The seam's confidence dict (`probs` over `names`, `other`, `source`, `note`) of one
    reply `text` from its log-probability `tokens`."""
    names = list(names)
    if not tokens:
        return _missing(names, "the server sent no log-probabilities with this reply")
    if not isinstance(text, str):
        return _missing(names, "the reply is not text")
    pieces = [t.get("token") for t in tokens]
    if not all(isinstance(p, str) for p in pieces) or "".join(pieces) != text:
        return _missing(names, "the log-probabilities do not spell the reply's text")
    where = _name_at(text, names)
    if where is None:
        return _missing(names, 'no "call" value in the reply to read a name at')
    start, written = where
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
            if rest > 0 and any(n != written for n in _begun(tok, head, ordered)):
                shared += rest
            continue
        begun = _begun(tok, head, ordered)
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


def _name_at(text: str, names: Sequence[str]) -> tuple[int, str] | None:
    """Where the picked name starts in `text` and the name as written (up to its closing
    quote): the last "call" value that is a menu name, else the last "call" value."""
    found = list(_CALL.finditer(text))
    fallback = None
    for m in reversed(found):
        start = m.end()
        close = text.find('"', start)
        if close < 0:
            continue
        value = text[start:close]
        if value in names:
            return start, value
        if fallback is None:
            fallback = (start, value)
    return fallback


def _begun(token: str, head: str, names: list[str]) -> list[str]:
    """The option names an alternative token at the name's first position begins: the token
    must repeat what the chosen token had before the name (`head`, e.g. the opening quote),
    and what follows must be the start of a name (or a whole name and its closing quote).
    `names` is sorted, so the names a text begins are one range of it."""
    if not token.startswith(head):
        return []
    rest = token[len(head):]
    if not rest:
        return []
    if '"' in rest:  # a whole name and its closing quote (and what follows it)
        whole = rest.split('"', 1)[0]
        i = bisect.bisect_left(names, whole)
        return [whole] if i < len(names) and names[i] == whole else []
    lo = bisect.bisect_left(names, rest)
    hi = bisect.bisect_left(names, rest + "\U0010ffff", lo)
    return names[lo:hi]
