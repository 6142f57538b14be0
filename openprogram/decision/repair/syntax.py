"""The "safe" repairs: JSON syntax fixed where exactly one JSON value is meant.

A reply that fails is often almost right: a trailing comma, single quotes, Python's `True`, an
unquoted key, a comment, a pick cut off before its closing braces. `repair_syntax` reads the
reply once with one regular expression per token (`_one_value`, linear in the text, depth and
repair count bounded), a plain object a member at a time (`_lane`), and keeps a pick only where
one JSON value is meant; each repair leaves a `Repair` record (what, where, before -> after).
It is one module because the token loop, the object lane and the cut-off handling share one
work budget and one stack of open containers: split apart, each would need the others' state.
"""
from __future__ import annotations

import json
import re

from ...trace.records import Repair, repairs_of  # the record lives with the attempt

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any, NoReturn

__all__ = ["repair_syntax", "may_enclose"]

_MAX_REPAIRS = 1000     # syntax repairs recorded in one reply before giving up (bounded work)
_LANE_REPAIRS = _MAX_REPAIRS - 3  # more than this, and the object lane leaves a member's
                                  # repairs to the token loop, which counts each one
_MAX_DEPTH = 512        # nesting the syntax repair follows
_MAX_STARTS = 3         # tokens read per character of the reply, over all its candidate picks
_MAX_TEXT = 16_000_000  # a longer reply is re-asked: its repair would hold copies of it
_MAX_TRIES = 1000       # places a pick could start that are read, before giving up
_SHOWN = 200            # characters of a before / after kept on the record


_TOKEN = re.compile(
    r'(?P<ws>[ \t\r\n]+)'
    r'|(?P<dq>"[^"\\]*(?:\\.[^"\\]*)*")'
    r"|(?P<sq>'[^'\\]*(?:\\.[^'\\]*)*')"
    r'|(?P<num>-?(?:0|[1-9][0-9]{0,999})(?:\.[0-9]{1,1000})?(?:[eE][+-]?[0-9]{1,4})?'
    r'(?![0-9A-Za-z_.]))'
    r'|(?P<word>[A-Za-z_$][A-Za-z0-9_$]{0,99}(?![A-Za-z0-9_$]))'
    r'|(?P<p>[{}\[\]:,])'
    r'|(?P<lc>//[^\n]*)'
    r'|(?P<bc>/\*)'
    r'|(?P<cut>["\'])', re.S)
_SCALAR = (r'(?:-?(?:0|[1-9][0-9]{0,999})(?:\.[0-9]{1,1000})?(?:[eE][+-]?[0-9]{1,4})?'
           r'(?![0-9A-Za-z_.])|(?:true|false|null)(?![A-Za-z0-9_$]))')
# Possessive: a scalar and the whitespace around a comma each match one way only, so giving
# back never finds a longer run; without it the engine keeps a backtracking point per item,
# four times slower on a long list (extract.py keeps possessive repeats away from the groups
# it reads, as re in 3.11 mis-reports them; this pattern reads none).
_RUN = re.compile(rf"{_SCALAR}(?:[ \t\r\n]*+,[ \t\r\n]*+{_SCALAR})*+")
_SQ_BODY = re.compile(r"\\(.)|\"", re.S)
_LITERALS = {"true": "true", "false": "false", "null": "null"}
_PYTHON = {"True": "true", "False": "false", "None": "null"}
# Where a pick can start: a `{` before a call key, quoted either way or not at all.
# A comment may sit before the key; each is bounded, so every `{` costs a bounded look.
_PICK_START = re.compile(r"""\{(?:[ \t\r\n]|//[^\n]{0,200}\n|/\*[^*]{0,200}\*/){0,16}"""
                         r"""(?:"|'|)(?:call|action|function|tool)(?:"|'|)[ \t\r\n]*:""")


# The object lane of the syntax repair: after an object key (the token loop's own token), the
# rest of a member in one match: a scalar value (a string in either quotes, a number, a literal,
# each as _TOKEN reads it) and what follows it (a comma and the next key, or the object's `}`
# with or without a trailing comma), or a nested object's `{` and its first key, quoted with
# ' or bare (a `{"` goes to the token loop, which hands it to the C decoder). After a `}`,
# _AFTER reads on in the object around it. Only single spaces around the colon, the comma and
# the brace: each is one token of the loop, so a match spends exactly the budget its tokens
# would.
# Strings of a few hundred characters only: the token loop finds a long one's end by substring
# search, many times faster than a pattern reads it. (Possessive: a string ends at its first
# unescaped quote, one way only, so a match that fails is not tried a character shorter.)
# A single-quoted string only without a double quote or a backslash in it, so the lane writes
# it in double quotes by swapping its quotes; the token loop reads the others.
_DQ = r'"[^"\\]{0,256}+(?:\\.[^"\\]{0,256}+){0,16}+"'
_SQ = r"""'[^'"\\]{0,256}+'"""
_NUM = (r"-?(?:0|[1-9][0-9]{0,999})(?:\.[0-9]{1,1000})?(?:[eE][+-]?[0-9]{1,4})?"
        r"(?![0-9A-Za-z_.])")
_VALUE = rf"{_DQ}|{_SQ}|{_NUM}|(?:true|false|null|True|False|None)(?![A-Za-z0-9_$])"
_KEY = rf"{_DQ}|{_SQ}|[A-Za-z_$][A-Za-z0-9_$]{{0,99}}(?![A-Za-z0-9_$])"
_MEMBER = re.compile(rf" ?: ?(?:({_VALUE})(?: ?, ?({_KEY})| ?(,)? ?(\}}))?"
                     rf"|\{{({_SQ}|[A-Za-z_$][A-Za-z0-9_$]{{0,99}}(?![A-Za-z0-9_$])))", re.S)
_AFTER = re.compile(rf" ?, ?({_KEY})| ?(,)? ?(\}})", re.S)
# What can follow a `{` in JSON (the C decoder fails at once on anything else).
_OBJECT_GOES_ON = ('"', "}", " ", "\t", "\r", "\n")


def _not_json(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(strict=False, parse_constant=_not_json)
# The C scanner (NaN / Infinity are refused when the result is decoded again)
_scan = _DECODER.scan_once  # type: ignore[attr-defined]


def _sq_to_dq(tok: str) -> str:
    body = tok[1:-1]
    if "\\" not in body and '"' not in body:
        return '"' + body + '"'
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        if c is None:
            return '\\"'
        return "'" if c == "'" else "\\" + c
    return '"' + _SQ_BODY.sub(one, tok[1:-1]) + '"'


class _Fail(Exception):
    """A value that cannot be read as one JSON value. `left`: the token budget left when the
    object lane failed (the token loop keeps its own)."""
    left = 0


# A repair as _one_value notes it: kind, path, the span of the text it replaced, the text
# written, the text replaced (as the reply spells it: text[span[0]:span[1]])
_Note = tuple[str, str, tuple[int, int], str, str]


def _path(stack: list[list[Any]]) -> str:
    out = ""
    for frame in stack:
        at = frame[2]
        if at is None:
            continue
        if frame[0] == "{":
            out += f".{at}" if out else str(at)
        else:
            out += f"[{at}]"
    return out


def _dot(stack: list[list[Any]]) -> str:
    """What the path of a member of the object on top of `stack` starts with."""
    below = _path(stack[:-1])
    return below + "." if below else ""


def _records(notes: list[_Note]) -> list[Repair]:
    """The `Repair` records of _one_value's notes, made only for the pick that is kept."""
    return repairs_of(notes, _SHOWN)


def _one_value(text: str, start: int, budget: list[int], cut: bool = False
               ) -> tuple[str, list[_Note], int]:
    """The JSON text of the one value that starts at `start` (a `{`), with the syntax repairs
    it needed (as notes for _records, `_Note`s), and where it ends in `text`; _Fail when it
    cannot be read as exactly one value. (A comment at the very end of a cut-off reply is text,
    not a value: dropped.) `budget` holds the tokens the reading may still take; it is read
    into a local and written back however the reading ends.

    The token loop reads one token at a time (a string by substring search, the rest by
    `_TOKEN`), keeping a stack of frames: [bracket, state, key or index (None before the
    first), pending comma position]. Two readers take over where a token would be slow: a
    nested value the C decoder reads whole is copied as written (`_whole`), and after an
    object key the object lane (`_lane`) reads plain members a match at a time."""
    out: list[str] = []
    repairs: list[_Note] = []
    stack: list[list[Any]] = []
    match = _TOKEN.match
    pos, n = start, len(text)
    left = budget[0]
    scan_left = 8 * (n - start) + 64  # failed whole reads: a slip 8 levels deep, read fast

    def note(kind: str, a: int, b: int, after: str, path: str | None = None) -> None:
        if len(repairs) >= _MAX_REPAIRS:
            raise _Fail("too many repairs")
        repairs.append((kind, _path(stack) if path is None else path, (a, b), after,
                        text[a:b]))

    lane = False  # the token just read is an object key: the object lane reads on from it
    try:
        if text[start:start + 1] == "{":
            # the token loop's first steps, taken without it: the pick's own `{`, and the key
            # after it when it is a quoted string without escapes (as the loop would read it)
            left -= 1
            if left < 0:
                raise _Fail("the reply took more reading than its length allows")
            stack.append(["{", "key", None, None])
            out.append("{")
            pos += 1
            c = text[pos:pos + 1]
            if c == "'" or c == '"':
                close = text.find(c, pos + 1)
                if close > 0 and text.find("\\", pos + 1, close) < 0:
                    left -= 1
                    if left < 0:
                        raise _Fail("the reply took more reading than its length allows")
                    end = close + 1
                    tok = text[pos:end]
                    lane = True

        while True:
            if lane:
                lane = False
                try:
                    pos, done, left, scan_left = _lane(text, stack, out, repairs, tok, pos, end,
                                                       left, scan_left)
                except _Fail as failed:   # what the lane spent before it failed is spent
                    left = failed.left
                    raise
                if done:
                    return "".join(out), repairs, pos
                continue
            if pos >= n:
                break
            # -- the next token
            left -= 1
            if left < 0:
                raise _Fail("the reply took more reading than its length allows")
            c = text[pos]
            if c == " ":  # the usual whitespace, one space, without a pattern
                pos += 1
                continue
            close = text.find(c, pos + 1) if c in "\"'" else -1
            if c in "{}[]:,":  # a bracket, colon or comma is its own token (_TOKEN's `p`)
                kind, tok, end = "p", c, pos + 1
            elif close < 0 and c in "\"'":
                kind, tok, end = "cut", c, pos + 1  # no closing quote anywhere after it
            elif close > 0 and text.find("\\", pos + 1, close) < 0:
                # a string without escapes: found by substring search, much faster than a pattern
                kind, end = ("dq" if c == '"' else "sq"), close + 1
                tok = text[pos:end]
            else:
                m = match(text, pos)
                if m is None:
                    raise _Fail(f"no JSON at character {pos}")
                kind, tok, end = m.lastgroup or "", m.group(), m.end()
            # -- whitespace and comments
            if kind == "ws":
                pos = end
                continue
            if kind == "lc":
                note("comment", pos, end, "")
                pos = end
                continue
            if kind == "bc":
                close = text.find("*/", end)
                if close < 0:
                    raise _Fail("an unclosed comment")
                note("comment", pos, close + 2, "")
                pos = close + 2
                continue
            top = stack[-1] if stack else None
            state = top[1] if top else "value"
            # a pending comma is written only when what follows shows it is not a trailing one
            if top is not None and top[3] is not None and not (kind == "p" and tok in "}]"):
                out.append(",")
                top[3] = None
            if kind in ("num", "word") and top is not None and top[0] == "[" \
                    and state in ("first", "value"):
                run = _RUN.match(text, pos)
                if run is not None and run.end() > end:
                    # a list of plain numbers and literals, valid as written: copied in one step
                    # rather than a token at a time
                    items = run.group()
                    top[2] = (-1 if top[2] is None else top[2]) + items.count(",") + 1
                    out.append(items)
                    top[1] = "after"  # a value done
                    pos = run.end()
                    continue
            # -- brackets, a colon, a comma
            if kind == "p":
                if tok in "{[":
                    if state not in ("value", "first"):
                        raise _Fail("a bracket where a key or comma belongs")
                    if len(stack) >= _MAX_DEPTH:
                        raise _Fail("nested too deep")
                    if top is not None and top[0] == "[":
                        top[2] = 0 if top[2] is None else top[2] + 1
                    if top is not None and scan_left > 0:
                        whole, failed = _whole(text, pos, tok)
                        scan_left = 0 if failed is None else scan_left - failed
                        if whole > 0:   # copied as written
                            out.append(text[pos:whole])
                            top[1] = "after"
                            pos = whole
                            continue
                    stack.append([tok, "first" if tok == "[" else "key", None, None])
                    out.append(tok)
                elif tok in "}]":
                    if top is None or top[0] != ("{" if tok == "}" else "["):
                        raise _Fail("a closing bracket that does not match")
                    if top[3] is not None:
                        note("trailing_comma", top[3], top[3] + 1, "")
                        top[3] = None
                    elif not (state in ("after", "first") or (state == "key" and top[2] is None)):
                        raise _Fail("a closing bracket where a key or value belongs")
                    stack.pop()
                    out.append(tok)
                    if not stack:
                        return "".join(out), repairs, end
                    stack[-1][1] = "after"
                elif tok == ":":
                    if state != "colon" or top is None:
                        raise _Fail("a colon out of place")
                    top[1] = "value"
                    out.append(":")
                else:  # ","
                    if state != "after" or top is None:
                        raise _Fail("a comma out of place")
                    top[1] = "key" if top[0] == "{" else "value"
                    top[3] = pos
                pos = end
                continue
            if kind == "cut":  # a string that never closes runs to the end of the reply
                if not cut or state not in ("value", "first") or top is None or tok != '"':
                    raise _Fail("a string that never closes")
                return _cut_inside_string(text, end, stack, out, repairs, note)
            # -- a key (the object lane reads on from it), or a value
            if top is not None and state == "key":
                if kind not in ("dq", "sq", "word"):
                    raise _Fail("an object key that is not a string")
                lane = True
                continue
            if state not in ("value", "first"):
                raise _Fail("a value where a comma or bracket belongs")
            if top is None:
                raise _Fail("the pick is not an object")
            if top[0] == "[":
                top[2] = 0 if top[2] is None else top[2] + 1
            if kind == "sq":
                fixed = _sq_to_dq(tok)
                note("single_quotes", pos, end, fixed)
                out.append(fixed)
            elif kind == "word":
                if tok in _LITERALS:
                    out.append(tok)
                elif tok in _PYTHON:
                    note("python_literal", pos, end, _PYTHON[tok])
                    out.append(_PYTHON[tok])
                else:
                    raise _Fail(f"a bare word {tok!r}")
            else:  # dq, num
                out.append(tok)
            top[1] = "after"
            pos = end
        return _cut_after_value(text, stack, out, repairs, cut, note)
    finally:
        budget[0] = left


def _whole(text: str, pos: int, bracket: str) -> tuple[int, int | None]:
    """Most of a sloppy pick is valid JSON: a nested value the C decoder reads whole is copied
    as written. `(where the value at pos ends, or -1; the characters the failed read covered,
    or None when it recursed too deep)`: _one_value counts them, so these tries cost at most
    eight times the text before they stop. An object whose `{` is not followed by what JSON
    allows there (`{'` or `{key`) fails one character in, counted without raising the decoder's
    error (which costs more than the whole step)."""
    if bracket == "{" and text[pos + 1:pos + 2] not in _OBJECT_GOES_ON:
        return -1, 1
    try:
        return _scan(text, pos)[1], 0
    except StopIteration as exc:
        return -1, max(exc.value - pos, 1)
    except ValueError as exc:
        return -1, max(getattr(exc, "pos", len(text)) - pos, 1)
    except RecursionError:
        return -1, None


def _lane(text: str, stack: list[list[Any]], out: list[str], repairs: list[_Note], tok: str,
          pos: int, end: int, left: int, scan_left: int) -> tuple[int, bool, int, int]:
    """The object lane of the syntax repair, from the object key `tok` (at pos..end) the token
    loop just read: a member at a time while the members are plain (`key: scalar, key`, a
    nested `{'key'`, a closing `}`; single spaces), each match (`_MEMBER`, `_AFTER`) standing
    for the tokens it spans and leaving what they would. A match is taken only where none of
    its tokens could stop the reading (the budget, the depth, the count of repairs), so it
    spends what they would and the reading stops where the token loop's would; anything else
    goes back to the token loop, from the key just read or the `}` just closed. `left` and
    `scan_left` are the token budget and the failed-read budget. Returns where the token loop
    goes on, whether the whole value is read, and what is left of both budgets (a `_Fail`
    carries the token budget left as `.left`)."""
    top = stack[-1]
    try:
        # what the path of a member of this object starts with (its own path and a dot), once
        # a repair needs it
        dot = "" if len(stack) == 1 else None
        if tok[0] != '"' and len(repairs) >= _MAX_REPAIRS:
            # (checked once: a match below is taken with room for its repairs, so the
            # count is below the limit at every later key)
            raise _Fail("too many repairs")
        # The key's first character says what it is: ', " or a word's; a key in single
        # quotes with a double quote or a backslash in it is marked \ (the lane's own
        # patterns read no such string, so only the first key can be one).
        c = tok[0]
        if c == "'" and ("\\" in tok or '"' in tok):
            c = "\\"
        while True:
            if c == "'":
                name = tok[1:-1]  # (_sq_to_dq's plain case, without its call)
                key = '"' + name + '"'
                what = "single_quotes"
            elif c != '"' and c != "\\":
                name = tok
                key = '"' + tok + '"'  # json.dumps(tok): a word has nothing to escape
                what = "unquoted_key"
            else:
                key = tok if c == '"' else _sq_to_dq(tok)
                what = "single_quotes"
                try:
                    name = key[1:-1] if "\\" not in key else _DECODER.decode(key)
                except ValueError:
                    raise _Fail("an object key that is not JSON text") from None
            top[2] = name
            if c == '"':
                here = None
            else:
                if dot is None:
                    dot = _dot(stack)
                here = dot + name
                repairs.append((what, here, (pos, end), key, tok))
            # (the key is written with what follows it, and the frame's state and `pos`
            # are set only where the lane stops)
            m = _MEMBER.match(text, end)
            if m is None or len(repairs) > _LANE_REPAIRS:
                out.append(key)
                top[1], pos = "colon", end
                break
            # (a group at a time: m.regs would make a pair for each of the six)
            span = m.span(1)
            a, b = span
            if a < 0:
                # a nested object and its first key: the colon, spaces, the `{`, the key
                a, b = m.span(5)
                if a - end + 1 > left or len(stack) >= _MAX_DEPTH:
                    out.append(key)
                    top[1], pos = "colon", end
                    break
                left -= a - end + 1
                if scan_left > 0:
                    scan_left -= 1  # the C decoder's failure one character in
                top[1] = "value"
                if here is None:
                    here = (_dot(stack) if dot is None else dot) + name
                dot = here + "." if here else ""
                top = ["{", "key", None, None]
                stack.append(top)
                out.append(key + ":{")
                pos, end = a, b
                tok = text[a:b]
                c = tok[0]
                continue
            # the colon, the value, a space before either; then a space, the comma, a
            # space and the next key, or spaces, a comma and the `}`
            nxt = m.span(2)
            if nxt[0] >= 0:
                spend = a - end + nxt[0] - b + 2
            else:
                close = m.span(4)
                spend = a - end + 1 + (close[1] - b if close[0] >= 0 else 0)
            if spend > left:
                out.append(key)
                top[1], pos = "colon", end
                break
            left -= spend
            tok = text[a:b]
            c = tok[0]
            # (no count check below: the match is taken with room for its repairs)
            if c == "'":
                if here is None:
                    here = (_dot(stack) if dot is None else dot) + name
                fixed = '"' + tok[1:-1] + '"'  # (_SQ: no " or \ inside)
                repairs.append(("single_quotes", here, span, fixed, tok))
                tok = fixed
            elif c in "TFN":
                if here is None:
                    here = (_dot(stack) if dot is None else dot) + name
                fixed = _PYTHON[tok]
                repairs.append(("python_literal", here, span, fixed, tok))
                tok = fixed
            if nxt[0] >= 0:
                out.append(f"{key}:{tok},")
                pos, end = nxt
                tok = text[pos:end]
                c = tok[0]
                continue
            out.append(f"{key}:{tok}")
            pos = b
            if close[0] < 0:
                top[1] = "after"
                break
            comma = m.start(3)
            nxt = None
            while True:  # the object closes, and the objects around it while they do
                if comma >= 0:  # `here`: the path of the object's last member
                    if here is None:
                        here = (_dot(stack) if dot is None else dot) + top[2]
                    repairs.append(("trailing_comma", here, (comma, comma + 1), "", ","))
                stack.pop()
                out.append("}")
                pos = close[1]
                if not stack:
                    return pos, True, left, scan_left
                top = stack[-1]
                top[1] = "after"
                # the member of the object around it that held the one closed
                here = None if dot is None else dot[:-1]
                dot = None
                m = _AFTER.match(text, pos) if top[0] == "{" else None
                if m is None or len(repairs) >= _MAX_REPAIRS:
                    break
                span = m.span(1)
                if span[0] >= 0:  # a comma and the next key
                    if span[0] - pos + 1 <= left:
                        nxt = span
                    break
                close = m.span(3)
                if close[1] - pos > left:
                    break
                left -= close[1] - pos
                comma = m.start(2)
            if nxt is None:
                break
            left -= nxt[0] - pos + 1
            out.append(",")
            dot = None
            pos, end = nxt
            tok = text[pos:end]
            c = tok[0]
        return pos, False, left, scan_left
    except _Fail as failed:
        failed.left = left
        raise


def _cut_inside_string(text: str, end: int, stack: list[list[Any]], out: list[str],
                       repairs: list[_Note], note: Callable[..., None]) -> tuple[str, list[_Note],
                                                                              int]:
    """A reply cut off at the token limit inside a string value: the string and every bracket
    open around it closed (closed_truncation)."""
    n = len(text)
    top = stack[-1]
    if top[0] == "[":
        top[2] = 0 if top[2] is None else top[2] + 1
    body = text[end:]
    if body.endswith("\\") and not body.endswith("\\\\"):
        body = body[:-1]
    out.append('"' + body)
    tail = '"' + "".join("}" if f[0] == "{" else "]" for f in reversed(stack))
    note("closed_truncation", n, n, tail)
    out.append(tail)
    return "".join(out), repairs, n


def _cut_after_value(text: str, stack: list[list[Any]], out: list[str], repairs: list[_Note],
                     cut: bool, note: Callable[..., None]) -> tuple[str, list[_Note], int]:
    """The reply ended inside the pick: only closing brackets may be missing, after a whole
    value (a number or a word at the very end may itself be cut, so it is not closed), and only
    when the token limit cut the reply."""
    n = len(text)
    if not stack:
        raise _Fail("nothing")
    if not cut:
        raise _Fail("the reply ends inside the pick, and the token limit did not cut it")
    top = stack[-1]
    last = text.rstrip()[-1:]
    if top[1] in ("colon", "value") and top[3] is None:
        raise _Fail("cut off after a key")
    if top[1] == "after" and last not in ('"', "}", "]", "'"):
        raise _Fail("cut off after a number or a word")
    if top[3] is not None:
        note("trailing_comma", top[3], top[3] + 1, "")
    tail = "".join("}" if f[0] == "{" else "]" for f in reversed(stack))
    note("closed_truncation", n, n, tail)
    out.append(tail)
    return "".join(out), repairs, n


def may_enclose(text: Any, span: tuple[int, int]) -> bool:
    """Whether a pick can start before the one at `span` (so a broken pick may hold it): the
    one look the loop takes before reading a reply again, most replies hold one pick only."""
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        return False
    first = _PICK_START.search(text, 0, span[1])
    return first is not None and first.start() < span[0]


def repair_syntax(text: str, cut: bool = False) -> tuple[dict[str, Any], tuple[int, int],
                                                         list[Repair]] | None:
    """The last pick in `text` that only JSON syntax kept from being read: `(pick as decoded,
    its span, the repairs)`, or None. Places a pick can start are read from the first on; one
    that reads as a value hides the starts inside it (an argument object keyed "action" is
    not a pick of its own), and the last value read is the pick, as A6 says. All reads
    together take at most `_MAX_STARTS` tokens per character of the text. `cut`: the reply was
    cut at the token limit, so a pick it ends inside may be closed (a reply that stopped on its
    own inside a pick is not cut off; closing it would guess)."""
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        return None
    first = text.find("{")  # found many times faster than the pattern's own search finds it
    if first < 0:
        return None
    budget = [_MAX_STARTS * (len(text) + 1)]
    found = None
    after = 0
    tries = 0
    for m in _PICK_START.finditer(text, first):
        s = m.start()
        if s < after:
            continue  # inside the value read last
        tries += 1
        if tries > _MAX_TRIES:
            return None  # more places a pick could start than a reply with one pick has
        try:
            fixed, repairs, end = _one_value(text, s, budget, cut)
        except _Fail:
            if budget[0] <= 0:
                break
            continue
        after = end
        # (no repairs: valid as written, the strict path decides what it means)
        if repairs:
            try:  # `fixed` is one value, from its first character to its last: no decode()
                obj, stop = _scan(fixed, 0)
            except (ValueError, StopIteration, RecursionError):
                obj, stop = None, -1
            if stop == len(fixed) and isinstance(obj, dict) and (
                    "call" in obj or "action" in obj or "function" in obj or "tool" in obj):
                found = (obj, (s, end), repairs)
        if text.find("{", end) < 0:
            break  # every place a pick could start after this value is a `{`: none is left
    return None if found is None else (found[0], found[1], _records(found[2]))
