"""Finding the model's pick in its reply: the last JSON object with a `call` key.

The reply is untrusted text of any size and shape, so the json module's C decoder (`scan_once`)
does the reading and Python only steps from one place an object can start (a `{` and a quoted
key, before the last `}`, found by substring search) to the next. A decoded object is skipped
whole, or searched inside when it holds a call key without having one; a failed one is retried
from just after its start, within a budget of about one extra pass, because an object can begin
inside what looked like a string; a failed nest of openers is settled by decoding its innermost
level; a nest deeper than the decoder allows is passed a few hundred levels at a time. Each object
is decoded from a slice just long enough to settle it, because the decoder's error counts the
lines before its position. A model stuck in a loop writes the same text over and over: when a
block of steps does what the block before it did, on text that repeats, the blocks that follow
on the same text are counted by comparing text rather than decoded, so no reply makes the
decoder re-read it once per candidate. Between looks for a repeat, plain steps (a `{"`, decoded
in place, until the first failure) run in a tight loop of their own, and a reply with no call key
anywhere is answered without decoding anything. The pick comes back with the option's name under
`call` whichever alias named it (the original project's `_normalize_action`); `candidates` lists
the objects the same search counts (the step-through outlines them, so what it shows is what
was searched). Where a value sits in the raw reply after a failure (`value_span`) is found off
this search, in repair/spans.py. It is long for one concept: the search and its guards against
hostile replies belong together, since each guard is only correct beside the step it bounds.
"""
from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass

from ..base.errors import UsageError

#: Accepted names of the key that names the option, by precedence.
CALL_KEYS = ("call", "action", "function", "tool")
_KEY_RE = re.compile(r'"(?:call|action|function|tool)"[ \t\r\n]*:')
_WS = r"[ \t\r\n]*"
_STRING = r'"[^"\\]*+(?:\\[\s\S][^"\\]*+)*+"'
_WS_RE = re.compile(_WS)
_START = re.compile(r'\{[ \t\r\n]*"')
_START_ANY = re.compile(r'\{[ \t\r\n]*["}]')
# A nest of openers: `{"key":` whose value opens the next level, or `[`; group 1 is the last
# object level. (Greedy, not possessive: re in 3.11 mis-reports groups of possessive repeats.)
_LEVEL = rf"\{{{_WS}{_STRING}{_WS}:{_WS}|\[{_WS}"
_NEST = re.compile(rf"(?:(\{{{_WS}{_STRING}{_WS}:{_WS})|\[{_WS})+")
# A nest deeper than the decoder allows is passed this many levels at a time; group 1 of
# _DEEP_LEVELS is the last level passed.
_DEEP_STEP = 512
_BLOCK = 8  # repeats are noticed in blocks of up to this many steps
_MAX_WAIT = 256  # steps between looks for a repeat, at most (a look costs a few steps)
_TOO_DEEP = "it is nested deeper than the JSON decoder allows"
_DEEP_LEVELS = re.compile(rf"(?:({_LEVEL})){{1,{_DEEP_STEP}}}")
_DEEP_BRACKETS = re.compile(rf"(?:[^{{\[]*+[{{\[]){{1,{_DEEP_STEP}}}+")
_NOT_JSON = re.compile(r"[0-9]{1000,}|-?Infinity|NaN")
_NO_KEY = ('the reply holds no JSON object with a "call" key (nor "action", "function" or '
           '"tool")')
# Text is compared, and decoded after the first try, in slices of at most these many characters,
# so the memory a long reply costs beside itself stays bounded.
_COMPARE_CHUNK = 1 << 20
_SLICE_CAP = 1 << 24
_FIRST_SLICE = 256  # most objects a model writes fit; the decoder stops at the object's end
_SLICE_STEP = 4096


def _not_json(name: str):
    raise ValueError(f"{name} is not JSON")


# strict=False: models write raw newlines inside strings. NaN and Infinity are Python's, not JSON.
_DECODER = json.JSONDecoder(strict=False, parse_constant=_not_json)
_scan = _DECODER.scan_once  # the C scanner: (value, end) for the JSON value starting at an index


@dataclass
class Extraction:
    """The pick found in a reply, and how it was found."""
    action: dict | None         # the JSON object, the option's name under "call" (None: none)
    key: str | None             # which alias named the option, as the model wrote it
    found_in: str | None        # "fence" (inside a ``` block) or "text"
    candidates: int             # how many objects with a call key the reply holds
    problem: str | None = None  # why nothing was found, for the error message
    span: tuple[int, int] | None = None  # where the object sits in the reply: [start, end)


_NOT_A_PICK = frozenset(CALL_KEYS).isdisjoint  # (a dict) has none of the call keys


def call_key(obj: dict) -> str | None:
    """The key `obj` names its option under (the first of `CALL_KEYS` it has), or None."""
    for k in CALL_KEYS:
        if k in obj:
            return k
    return None


def normalize_action(obj: dict, key: str) -> dict:
    """The pick with the option's name under "call" (the original project's _normalize_action)."""
    if key == "call":
        return obj
    out = {"call": obj[key]}
    out.update((k, v) for k, v in obj.items() if k != key)
    return out


def _start_finder(text: str, stop: int, require_key: bool):
    """next_start(pos): the next index in [pos, stop] of a `{` that can open an object (a quoted
    key follows, after optional whitespace; or `}` when any object will do), or -1. Plain
    substring search does most of the work: it skips runs of braces and long strings that a
    regular expression would try one position at a time."""
    find, end = text.find, stop + 1
    search = (_START if require_key else _START_ANY).search
    hit = [-2, -2]  # the next `{"` and `{}` found, -1 when there is none

    def plain(pos: int) -> int:
        """The next `{"` (or `{}`): an object starts just before a quote, so jump to one first."""
        if -1 != hit[0] < pos:
            mark = find('"', pos + 1, end)
            hit[0] = find('{"', mark - 1, end) if mark > 0 else -1
        if require_key:
            return hit[0]
        if -1 != hit[1] < pos:
            hit[1] = find("{}", pos, end)
        return min(hit) if min(hit) >= 0 else max(hit)

    quick = ('"',) if require_key else ('"', "}")

    def next_start(pos: int) -> int:
        f = find("{", pos, end)
        if f < 0 or text.startswith(quick, f + 1):  # the usual case: a `{` right before a key
            return f
        q = plain(pos)
        if q < 0:
            q = end
        # A start with whitespace after its `{` lies before q only if a `{` does, and after it
        # a quote (or a `}`).
        f = find("{", pos, q)
        if f >= 0 and (find('"', f, q) >= 0 or (not require_key and find("}", f, q) >= 0)):
            f = _run_end(text, f, q) - 1  # of a run of braces only the last can open an object
            m = search(text, f, q)
            if m is not None:
                return m.start()
        return q if q < end else -1
    return next_start


def _run_end(text: str, i: int, end: int) -> int:
    """The end of the run of `{` that starts at i (read in slices, so memory stays bounded)."""
    while i < end:
        chunk = text[i:min(i + 4096, end)]
        rest = chunk.lstrip("{")
        i += len(chunk) - len(rest)
        if rest:
            break
    return i


def _repeat_end(text: str, a: int, period: int) -> int:
    """The end of the stretch from `a` over which the text repeats with `period`."""
    n = len(text)
    i, size = a + period, period
    while i < n:
        size = min(size, n - i, _COMPARE_CHUNK)
        if text[i:i + size] == text[i - period:i - period + size]:
            i += size
            size *= 2
            continue
        lo, hi = i, i + size  # the first difference lies in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if text[lo:mid] == text[lo - period:mid - period]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


def _held(obj) -> tuple[int, tuple]:
    """How many objects with a call key `obj` holds (not counting ones inside those), and the
    path to the last one, in document order."""
    count, last = 0, ()
    stack = [((), obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            if path and call_key(value):
                count, last = count + 1, path
                continue
            items = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            continue
        stack.extend((path + (k,), v) for k, v in reversed(items) if isinstance(v, (dict, list)))
    return count, last


def find_action(text: str, *, require_key: bool = True) -> Extraction:
    """Find the last JSON object with a call key in `text` (linear time). With
    `require_key=False`, the last top-level JSON object of any keys (for response_format)."""
    return _find(text, require_key, None)


class _Kept(list):
    """The first `most` candidates a search finds, as (start, end, object, path inside it)."""

    def __init__(self, most: int):
        super().__init__()
        self.most = most

    def add(self, rec: tuple) -> None:
        if len(self) < self.most:
            self.append(rec)


def candidates(text: str, most: int = 50) -> tuple[list[tuple[int, int, str, object]], int]:
    """The objects with a call key that `find_action` counts in `text`, the first `most` of
    them in order, as (start, end, the key as written, the value under it), and how many it
    counts in all: the same search, with its bounds (outermost objects only; an object whose
    inner ones it counts without searching, past its budget, gives the last of them)."""
    kept = _Kept(most)
    total = _find(text, True, kept).candidates
    out = []
    for start, end, obj, path in kept:
        for k in path:
            obj = obj[k]
        span = path_span(text, start, path) if path else (start, end)
        key = call_key(obj)
        if span is not None and key is not None:
            out.append((span[0], span[1], key, obj[key]))
    return out, total


def _find(text: str, require_key: bool, kept: _Kept | None) -> Extraction:
    """find_action, keeping the first candidates in `kept` when it is given."""
    # A key can be spelled only as itself or with \u escapes: without either, there is nothing
    # to find and nothing needs decoding.
    if require_key and _KEY_RE.search(text) is None and "\\" not in text:
        return Extraction(None, None, None, 0, problem=_NO_KEY)
    # The usual reply: one pick, bare or fenced, and no `{` after it.
    n = len(text)
    stop = text.rfind("}")  # an object that can close starts before the last `}`
    first = text.find("{")
    if 0 <= first < stop and text.startswith('"', first + 1):
        decoded = _decode_in_place(text, first)
        obj, end, reason, _ = decoded
        if reason is None and (not require_key or not _NOT_A_PICK(obj)) \
                and text.find("{", end) < 0:
            if kept is not None:
                kept.add((first, end, obj, ()))
            return _result(text, 1, (first, end, obj, ()), None, require_key)
        first = (first, decoded)  # the search below starts there: not decoded twice
    else:
        first = None
    next_start = _start_finder(text, stop, require_key)
    count = 0
    last = None        # (start, end, decoded object, path inside it) of the last candidate
    failed = None      # (start, at, reason) of the last object that failed and held a call key
    budget = n + 65536  # characters the decoder may read again after failures
    pos = 0
    steps: deque = deque(maxlen=2 * _BLOCK)  # the last steps, to notice text that repeats
    quiet_until = -1   # a repeat was looked for and not found up to here
    clean = True       # no object has failed to decode yet: decode in place
    wait = waited = 0  # steps until the next look for a repeat, after looks that found none
    while pos <= stop:
        if clean and waited + 2 * _BLOCK + 1 < wait:
            # No look for a repeat is due for a while, so the steps need no record: take the
            # plain ones (an object right after its `{"`, decoded, with a call key or none held
            # inside) in a tight loop, and leave any other step to the loop below.
            pos, n, cands, rec, failed_at = _plain_steps(text, pos, stop,
                                                         wait - waited - 2 * _BLOCK - 1,
                                                         require_key, kept)
            if failed_at is not None:  # the step below takes that failure, not decoded twice
                first, clean = failed_at, False
            waited += n
            count += cands
            if rec is not None:
                last = rec
            if pos > stop:
                break
        s = next_start(pos)
        if s < 0:
            break
        # One step: decode the object at s, then decide where the search goes on. What the step
        # does depends only on text[pos:window] and on the budget.
        found, rec, fail, spent = 0, None, None, 0
        if first is not None and first[0] == s:
            (obj, end, reason, window), first = first[1], None
            clean = reason is None
        elif clean:
            obj, end, reason, window = _decode_in_place(text, s)
            clean = reason is None
        else:
            obj, end, reason, window = _decode(text, s)
        if reason is None:
            nxt = end
            if not require_key or not _NOT_A_PICK(obj):
                found, rec = 1, (s, end, obj, ())
            elif _KEY_RE.search(text, s, end):
                # An object without a call key holds one: search inside it, or, out of budget,
                # count what its decoded value holds.
                if end - s <= budget:
                    spent, nxt = end - s, s + 1
                else:
                    found, path = _held(obj)
                    if found:
                        rec = (s, end, obj, path)
        elif reason is _TOO_DEEP:
            nxt, reach = _past_deep(text, s)
            fail, window = (s, nxt, reason), max(window, reach)
        else:
            fail, nxt = (s, end, reason), max(end, s + 1)
            if window - s <= budget:
                # Retry from just after s: an object may begin inside what looked like a string.
                spent, nxt = window - s, s + 1
                nest = _past_nest(text, s, end)
                if nest is not None:
                    nxt, reach = nest
                    spent += reach - s
                    window = max(window, reach)
        if fail is not None and (not require_key or _KEY_RE.search(text, s, fail[1] + 1)):
            failed = fail
        budget -= spent
        count += found
        if rec is not None:
            last = rec
            if kept is not None:
                kept.add(rec)
        waited += 1
        if waited + 2 * _BLOCK < wait:  # no look for a repeat soon: keep no record
            pos = nxt
            continue
        kind = (nxt - pos, s - pos, found, rec is not None, reason, spent)
        steps.append((pos, kind, found, rec, fail if fail is failed else None, spent, window, s))
        block = None
        if pos >= quiet_until and waited > wait:
            block = _repeating(text, steps, nxt)
            wait, waited = (0 if block else min(2 * wait + 1, _MAX_WAIT)), 0
            if wait > 2 * _BLOCK:
                steps.clear()
        if block is not None:
            # The same steps on the same text as just before: the blocks of steps that follow on
            # the same text again do the same, so they are counted by comparing text.
            period, block = block
            repeat_end = _repeat_end(text, block[0][0], period)
            fits = (repeat_end - max(st[6] for st in block)) // period
            reps = min(fits, (stop - block[-1][7]) // period)
            spent_each = sum(st[5] for st in block)
            if spent_each:
                reps = min(reps, budget // spent_each)
            if reps > 0:
                shift = reps * period
                if kept is not None:  # the candidates counted, in order, while room is left
                    for k in range(1, reps + 1):
                        if len(kept) >= kept.most:
                            break
                        for st in block:
                            if st[3] is not None:
                                r = st[3]
                                kept.add((r[0] + k * period, r[1] + k * period, r[2], r[3]))
                count += reps * sum(st[2] for st in block)
                budget -= reps * spent_each
                rec = next((st[3] for st in reversed(block) if st[3] is not None), None)
                if rec is not None:
                    last = (rec[0] + shift, rec[1] + shift, rec[2], rec[3])
                fail = next((st[4] for st in reversed(block) if st[4] is not None), None)
                if fail is not None:
                    failed = (fail[0] + shift, fail[1] + shift, fail[2])
                nxt += shift
                steps.clear()
            elif fits <= 0:
                quiet_until = repeat_end
        pos = nxt
    if last is None and failed is None and stop + 1 < n:
        # Nothing after the last `}` can close, so it was not decoded above; the object there
        # that holds a call key is most likely the pick the reply was cut off in.
        s = _start_finder(text, n - 1, require_key)(stop + 1)
        if s >= 0 and (not require_key or _KEY_RE.search(text, s)):
            _, at, reason, _ = _decode(text, s)
            if reason is _TOO_DEEP:
                at = _past_deep(text, s)[0]
            failed = (s, at, reason) if reason else None
    return _result(text, count, last, failed, require_key)


def _plain_steps(text: str, pos: int, stop: int, limit: int, require_key: bool,
                 kept: _Kept | None = None) -> tuple:
    """Up to `limit` steps of find_action's search from pos that need nothing but a decode in
    place: (where the search goes on, steps taken, candidates found, the last one or None, and
    for an object that failed to decode, (its start, what `_decode_in_place` says of it)).
    Stops before any other step."""
    find, startswith, scan, not_a_pick = text.find, text.startswith, _scan, _NOT_A_PICK
    end, count, last, failed_at, taken = stop + 1, 0, None, None, 0
    quick = '"' if require_key else ('"', "}")
    while taken < limit:
        s = find("{", pos, end)
        if s < 0 or not startswith(quick, s + 1):
            break
        try:
            obj, nxt = scan(text, s)
        except (ValueError, StopIteration, RecursionError) as err:
            failed_at = (s, _failed_in_place(text, s, err))
            break
        if not require_key or not not_a_pick(obj):
            count += 1
            last = (s, nxt, obj)
            if kept is not None:
                kept.add((s, nxt, obj, ()))
        elif _KEY_RE.search(text, s, nxt):
            break  # a call key held inside: the loop searches it
        pos = nxt
        taken += 1
    return pos, taken, count, (*last, ()) if last else None, failed_at


def _repeating(text: str, steps: deque, nxt: int):
    """(period, the last j steps) when the last j steps did what the j before them did, on text
    that repeats from one block to the next; None otherwise."""
    steps = list(steps)
    kinds = [st[1] for st in steps]
    for j in range(1, len(steps) // 2 + 1):
        if kinds[-j:] != kinds[-2 * j:-j]:
            continue
        a, b = steps[-2 * j][0], steps[-j][0]
        if nxt - b == b - a and text.startswith(text[a:b], b):
            return b - a, steps[-j:]
    return None


def _decode_in_place(text: str, s: int) -> tuple:
    """`_decode` on the whole text rather than a slice, which gives the same answer: until the
    first failure, objects are decoded in place (a success reads the same either way, and the
    one failure's line count over the text before it is paid once; then slices are used)."""
    try:
        value, end = _scan(text, s)
        return value, end, None, end
    except (ValueError, StopIteration, RecursionError) as err:
        return _failed_in_place(text, s, err)


def _failed_in_place(text: str, s: int, err: Exception) -> tuple:
    """What `_decode_in_place` says of the object at s, whose decode in place raised `err`."""
    if isinstance(err, RecursionError):
        return _decode(text, s)  # how far it read is found on slices
    at, reason, read_to = _failure(text, s, err)
    if at >= len(text):
        reason = "the reply ends inside a JSON object"
    return None, at, reason, read_to


def _decode(text: str, s: int) -> tuple:
    """Decode the object at s: (value, end, None, end), or (None, at, reason, read_to) when it
    does not decode (`at` where it failed, `read_to` how far the decoder read; reason _TOO_DEEP
    for a nest deeper than the decoder allows). The decoder gets the shortest slice that settles
    the object, because a JSONDecodeError counts the lines before its position: on the whole
    reply, every failure would cost a pass over the reply."""
    close = text.find("}", s + _FIRST_SLICE, s + _SLICE_STEP)  # nothing closes before a `}`
    size = close + 1 - s if close >= 0 else _FIRST_SLICE
    while True:
        if s and size <= _SLICE_CAP:
            piece, shift = text[s:s + size], s
        else:
            piece, shift, size = text, 0, len(text) - s
        try:
            value, end = _scan(piece, s - shift)
            return value, end + shift, None, end + shift
        except RecursionError:
            # how far it read before giving up: the shortest doubling slice on which it gives up
            # too (so a nest that repeats can be compared rather than decoded again)
            reach, probe = s + size, 4096
            while probe < size // 2:
                try:
                    _scan(text[s:s + probe], 0)
                except RecursionError:
                    reach = s + probe
                    break
                except (ValueError, StopIteration):
                    probe *= 2
                else:
                    break
            return None, s, _TOO_DEEP, reach
        except (ValueError, StopIteration) as err:
            at, reason, read_to = _failure(piece, s - shift, err)
            if read_to < len(piece) or s + size >= len(text):
                if at + shift >= len(text):
                    reason = "the reply ends inside a JSON object"
                return None, at + shift, reason, read_to + shift
        more = text.find("}", s + 2 * size - 1, s + 4 * size)  # twice as much, up to a `}`
        size = more + 1 - s if more >= 0 else 2 * size


def _failure(text: str, s: int, err: Exception) -> tuple[int, str, int]:
    """Where the decoder failed on the object at s, why, and how far it read (len(text) when it
    may have needed more)."""
    n = len(text)
    if isinstance(err, json.JSONDecodeError):
        if err.msg.startswith("Unterminated string"):
            return err.pos, "an unterminated string", n
        # The number scanner looks a few characters past where it reports.
        return err.pos, err.msg[:1].lower() + err.msg[1:], min(err.pos + 8, n)
    if isinstance(err, StopIteration):  # the C scanner's "no value here", at err.value
        at = err.value if isinstance(err.value, int) else s
        return at, "expecting value", min(at + 8, n)
    # NaN or Infinity, or a number with more digits than int() takes (sys.set_int_max_str_digits)
    m = _NOT_JSON.search(text, s)
    if m is None:
        return s, str(err), n
    what = "a number with too many digits" if m.group()[-1].isdigit() else f"{m.group()} (not JSON)"
    return m.start(), what, min(m.end() + 8, n)


def _past_deep(text: str, s: int) -> tuple[int, int]:
    """The object at s nests deeper than the decoder allows: where the search goes on, past the
    first _DEEP_STEP levels of the nest, and how far that was read."""
    m = _DEEP_LEVELS.match(text, s)
    if m is not None and m.start(1) > s:
        return m.start(1), m.end()
    m = _DEEP_BRACKETS.match(text, s + 1)  # levels with members before the next one: count brackets
    nxt = max(m.end() - 1, s + 1) if m is not None else s + 1
    return nxt, nxt + 1


def _past_nest(text: str, s: int, at: int) -> tuple[int, int] | None:
    """For a failed object at s that opens a nest of levels (`{"k": {"k": [ ...`) up to the
    failure at `at`: each level reads on as s did, and fails as s did unless the levels inside
    it close, so when the innermost object level fails too, so does every level. Returns where
    the search goes on then (past that level) and how far the probe read; None otherwise."""
    m = _NEST.match(text, s, at)
    if m is None or m.start(1) <= s:
        return None
    inner = m.start(1)
    _, _, reason, read_to = _decode(text, inner)
    if reason is None or reason is _TOO_DEEP:
        return None
    return inner + 1, max(at, read_to)


def _result(text: str, count: int, last, failed, require_key: bool) -> Extraction:
    if last is None:
        if require_key and _KEY_RE.search(text) is None:
            problem = _NO_KEY
        elif failed is not None:
            s, at, reason = failed
            problem = (f"the JSON object starting at character {s} is not valid JSON: {reason} "
                       f"at character {at}")
        else:
            problem = ("the reply holds no complete JSON object"
                       + (' with a "call" key' if require_key else ""))
        return Extraction(None, None, None, count, problem=problem)
    start, end, obj, path = last
    for k in path:
        obj = obj[k]
    span = path_span(text, start, path) if path else (start, end)
    found_in = "fence" if text.count("```", 0, span[0]) % 2 == 1 else "text"
    key = call_key(obj)
    if not require_key:  # a response format's object, as written
        return Extraction(obj, key, found_in, count, span=span)
    return Extraction(normalize_action(obj, key), key, found_in, count, span=span)


def extract_action(text: str) -> dict | None:
    """The JSON object with a `call` key (or `action` / `function` / `tool`) that the reply ends
    its decision with, from a ```json fence or bare text, with the option's name under `call`;
    None when there is none."""
    if not isinstance(text, str):
        raise UsageError(f"extract_action needs the reply text (str), got "
                         f"{type(text).__name__}")
    return find_action(text).action


# -- where a value sits inside an object: a nested pick's span here, a failed value's in
# repair/spans.py (`value_span`), which walks the object with these


def _skip_ws(text: str, i: int) -> int:
    return _WS_RE.match(text, i).end()


def _value_at(text: str, i: int) -> tuple[object, int]:
    """The C scanner's `(value, end)` at i, its "no value here" (StopIteration) as ValueError:
    a StopIteration raised inside a generator (`members`) would leave it as Python's bare
    `RuntimeError: generator raised StopIteration` (PEP 479). A reply the syntax repair read
    is not JSON as written, so the scanner can fail anywhere in it."""
    try:
        return _scan(text, i)
    except StopIteration as stop:
        raise ValueError(f"no JSON value at character {stop.value}") from None


def members(text: str, o: int):
    """(key, value start, value end) of each member of the object at o, or (index, start, end)
    of each element of the array at o."""
    is_object = text.startswith("{", o)
    close, index = "}" if is_object else "]", 0
    i = _skip_ws(text, o + 1)
    while not text.startswith(close, i):
        if is_object:
            key, i = _value_at(text, i)
            i = _skip_ws(text, _skip_ws(text, i) + 1)  # past ':'
        else:
            key, index = index, index + 1
        _, end = _value_at(text, i)
        yield key, i, end
        i = _skip_ws(text, end)
        if not text.startswith(",", i):
            return
        i = _skip_ws(text, i + 1)


def member_span(text: str, o: int, key) -> tuple[int, int] | None:
    """Where the value at `key` (a member name, or an index) of the container at o sits."""
    if not text.startswith("{" if isinstance(key, str) else "[", o):
        return None
    found = None
    for k, start, end in members(text, o):
        if k == key:
            found = (start, end)  # a repeated key: the decoder keeps the last one
    return found


def path_span(text: str, start: int, path) -> tuple[int, int] | None:
    """Follow member names and indices from the value at start."""
    span = (start, None)
    for step in path:
        span = member_span(text, span[0], step)
        if span is None:
            return None
    return span if span[1] is not None else (start, _scan(text, start)[1])
