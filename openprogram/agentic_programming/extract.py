"""Finding the model's pick in its reply: the last JSON object with a `call` key.

The reply is untrusted text. The scan is one pass of a small JSON tokenizer that starts at each
`{` outside any open object, recovers from prose (a stray brace, an unterminated quote) by
rescanning from just after the failed object's start — within a budget of about one extra pass,
so the total work stays linear in the reply's length — and records every object that has a call
key. Nested candidates fold into the object that holds them; only the last candidate is parsed
with `json.loads`. A reply without any call key is answered by one regular-expression search.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: Accepted names of the key that names the option, by precedence.
CALL_KEYS = ("call", "action", "function", "tool")
_QUOTED_KEYS = {f'"{k}"': k for k in CALL_KEYS}
_KEY_RE = re.compile(r'"(?:call|action|function|tool)"\s*:')
_WS = re.compile(r"[ \t\r\n]*")
# Control characters are allowed inside strings (models write raw newlines); json.loads runs
# with strict=False to match.
_STRING = re.compile(r'"(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_OBJ_START = re.compile(r'\{[ \t\r\n]*["}]')
_MAX_DEPTH = 256

# What the tokenizer expects next.
_KEY_OR_CLOSE, _KEY, _COLON, _VALUE, _VALUE_OR_CLOSE, _AFTER_VALUE = range(6)


@dataclass
class Extraction:
    """The pick found in a reply, and how it was found."""
    action: dict | None         # the JSON object (None when nothing usable was found)
    key: str | None             # which alias named the option
    found_in: str | None        # "fence" (inside a ``` block) or "text"
    candidates: int             # how many objects with a call key the reply holds
    problem: str | None = None  # why nothing was found, for the error message
    start: int | None = None


class _ScanError(Exception):
    pass


def _scan_object(text: str, s: int, spans: list, record_all: bool = False) -> tuple[int, bool]:
    """Tokenize the JSON value starting with `{` at `s`. Returns the end index. Appends
    (start, end, key) for every object with a call key, folding nested ones. Raises _ScanError
    with the position reached."""
    n = len(text)
    stack = [["{", s, None]]          # [kind, start, call key of this object]
    i = s + 1
    expect = _KEY_OR_CLOSE
    saw_key = False
    try:
        while True:
            i = _WS.match(text, i).end()
            if i >= n:
                raise _ScanError(i, "the reply ends inside a JSON object", saw_key)
            c = text[i]
            if expect in (_KEY_OR_CLOSE, _KEY):
                if c == '"':
                    m = _STRING.match(text, i)
                    if m is None:
                        raise _ScanError(i, "an unterminated string", saw_key)
                    key = _QUOTED_KEYS.get(m.group())
                    if key is not None:
                        saw_key = True
                        top = stack[-1]
                        if top[2] is None or CALL_KEYS.index(key) < CALL_KEYS.index(top[2]):
                            top[2] = key
                    i = m.end()
                    expect = _COLON
                    continue
                if c == "}" and expect == _KEY_OR_CLOSE:
                    pass  # falls through to the close below
                else:
                    raise _ScanError(i, f"expected a quoted key, found {c!r}", saw_key)
            elif expect == _COLON:
                if c != ":":
                    raise _ScanError(i, f"expected ':' after a key, found {c!r}", saw_key)
                i += 1
                expect = _VALUE
                continue
            elif expect in (_VALUE, _VALUE_OR_CLOSE):
                if c in "{[":
                    if len(stack) >= _MAX_DEPTH:
                        raise _ScanError(i, f"JSON nested deeper than {_MAX_DEPTH}", saw_key)
                    stack.append([c, i, None])
                    i += 1
                    expect = _KEY_OR_CLOSE if c == "{" else _VALUE_OR_CLOSE
                    continue
                if c == "]" and expect == _VALUE_OR_CLOSE:
                    pass  # close below
                elif c == '"':
                    m = _STRING.match(text, i)
                    if m is None:
                        raise _ScanError(i, "an unterminated string", saw_key)
                    i = m.end()
                    expect = _AFTER_VALUE
                    continue
                else:
                    m = _SCALAR.match(text, i)
                    if m is None:
                        raise _ScanError(i, f"expected a JSON value, found {c!r}", saw_key)
                    i = m.end()
                    expect = _AFTER_VALUE
                    continue
            else:  # _AFTER_VALUE
                if c == ",":
                    i += 1
                    expect = _KEY if stack[-1][0] == "{" else _VALUE
                    continue
                if not ((c == "}" and stack[-1][0] == "{") or (c == "]" and stack[-1][0] == "[")):
                    raise _ScanError(i, f"expected ',' or a closing bracket, found {c!r}",
                                     saw_key)
            # close the innermost container at i
            kind, start, key = stack.pop()
            i += 1
            if kind == "{" and (key is not None or (record_all and not stack)):
                while spans and spans[-1][0] > start:
                    spans.pop()   # a candidate inside this one is part of it, not a pick
                spans.append((start, i, key))
            if not stack:
                return i, saw_key
            expect = _AFTER_VALUE
    except IndexError:  # defensive: never let a tokenizer slip become an uncaught error
        raise _ScanError(i, "malformed JSON", saw_key)


def find_action(text: str, *, require_key: bool = True) -> Extraction:
    """Find the last JSON object with a call key in `text` (linear time). With
    `require_key=False`, the last top-level JSON object of any keys (for response_format)."""
    last_key = len(text)
    if require_key:
        keys = [m.start() for m in _KEY_RE.finditer(text)]
        if not keys:
            return Extraction(None, None, None, 0, problem=(
                'the reply holds no JSON object with a "call" key (nor "action", "function" or '
                '"tool")'))
        last_key = keys[-1]
    n = len(text)
    spans: list[tuple[int, int, str]] = []
    rescan_budget = n + 65536
    problem = None
    pos = 0
    while True:
        m = _OBJ_START.search(text, pos)
        if m is None or m.start() > last_key:
            break
        s = m.start()
        mark = len(spans)
        try:
            pos, _ = _scan_object(text, s, spans, record_all=not require_key)
        except _ScanError as err:
            at, reason, saw_key = err.args
            if saw_key or not require_key:
                problem = (f"the JSON object starting at character {s} is not valid JSON: "
                           f"{reason} at character {at}")
            scanned = at - s
            if at >= n or reason.startswith("JSON nested deeper"):
                # Nothing new starts inside what was read: every object in it that closed is
                # recorded, and the rest is cut by the end of the reply or the depth limit.
                pos = max(at, s + 1)
            elif scanned <= rescan_budget:
                # Rescan from just after this start: an object may begin inside what looked
                # like a string or a broken object. Drop what this run found; the rescan finds
                # it again.
                rescan_budget -= scanned
                del spans[mark:]
                pos = s + 1
            else:
                pos = max(at, s + 1)
    candidates = len(spans)
    for start, end, key in reversed(spans):
        try:
            obj = json.loads(text[start:end], strict=False)
        except (ValueError, RecursionError) as exc:
            problem = f"the JSON object starting at character {start} is not valid JSON: {exc}"
            continue
        found_in = "fence" if text.count("```", 0, start) % 2 == 1 else "text"
        return Extraction(obj, key, found_in, candidates, start=start)
    return Extraction(None, None, None, candidates, problem=problem or (
        'the reply holds no complete JSON object' + (' with a "call" key' if require_key else '')))


def extract_action(text: str) -> dict | None:
    """The JSON object with a `call` key (or `action` / `function` / `tool`) that the reply ends
    its decision with, from a ```json fence or bare text; None when there is none."""
    if not isinstance(text, str):
        raise TypeError(f"extract_action needs the reply text (str), got {type(text).__name__}")
    return find_action(text).action
