"""A journaled row's line as JSON text, written in one pass from the finished row and its records.

The general way to journal a row (`journal.Journal.write_row`) builds a dict of the row's
columns (`evaluate._journal_row`, its values through `json_ready`), the trace's
`DecisionTrace.to_dict(json_ready)` packed against the section's menu (`journal.pack_trace`),
and has the encoder look at every one of some seventy keys again: most of what a journaled row
costs past its decision. `row_text` writes the same line byte for byte without any of that: key
names are constant text, the common value of each field (text, a whole number, a finite float,
null, a small dict or list of those: `_ready`) is written inline, only a value that may be
anything goes through the journal's own encoder, and a value the line holds twice (the pick's
arguments, the result: in the row's columns and in its trace) is written once. `trace_text`
is the trace part alone. Whatever they do not expect (a record's subclass, a field of an
unusual type, a cycle) makes them return None, and that row is written the general way, as the
journal always has: the two ways cannot drift apart unnoticed, since a test writes rows of every
shape both ways and compares the bytes (tests/evaluation/test_journal_row_text.py, and
test_journal_line.py for the trace).
"""
from __future__ import annotations

import json.encoder as _json

from ..base.json_form import json_ready
from ..base.jsonl import encoder
from ..base.text import repr_head
from ..trace.decision_trace import DecisionTrace
from ..trace.records import Attempt

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["row_text", "trace_text"]

_string = _json.encode_basestring   # what the journal's encoder (ensure_ascii=False) writes
_float = float.__repr__
_int = int.__repr__

#: The journal's encoder (journal._FORMAT's options), for the values that may be anything.
_enc = encoder(ensure_ascii=False, separators=(",", ":"), default=repr)

#: Nesting `_plain` writes itself; anything deeper goes through json_ready and the encoder,
#: which bound it (json_form.MAX_DEPTH) as they always have.
_DEEP = 16
#: Whole numbers `_plain` writes itself: far below json_form's bound on a number's digits.
_BIG = 1 << 62
#: The longest repr of a result the row's "result_repr" holds whole (repr_head's limit), and the
#: types whose repr is written here rather than through repr_head: theirs cannot fail but by
#: raising (an int too long to write, nesting too deep), which sends the row the general way.
_SHOWN = 500
_REPRS = frozenset((str, int, float, bool, dict, list, tuple))
#: The end of an attempt's record in the common case (`_attempt`), answered by the model or
#: from a cache.
_TAIL = (',"usage":null,"sent":null,"tool_calls":null,"finish_reason":null,"raw":null,'
         '"cached":false,"redacted":[],"confidence":null,"low_pick":null,"cascade":null,'
         '"repairs":[]')
_TAIL_CACHED = _TAIL.replace('"cached":false', '"cached":true')
#: `"key":` of the dict keys written so far (the same few names in every row's input,
#: arguments and result), up to _NAMED short ones.
_NAMES: dict[str, str] = {}
_NAMED = 2048


def _value(v: Any) -> str:
    """One value as the journal's encoder writes it."""
    t = type(v)
    if t is str:
        return _string(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return _int(v)
    if t is float and v - v == 0:  # finite: NaN and infinities go the general way
        return _float(v)
    if t is list and not v:
        return "[]"
    return _enc(v)


def _ready(v: Any) -> str:
    """A value as the journal writes `json_ready(v)`: text, null, or a dict or list of plain
    JSON written here; anything else through json_ready and the encoder."""
    t = type(v)
    if t is str:
        return _string(v) if v.isascii() else _string(json_ready(v))
    if v is None:
        return "null"
    if t is dict or t is list:
        text = _plain(v, 0)
        if text is not None:
            return text
    return _value(json_ready(v))


def _plain(v: Any, depth: int) -> str | None:
    """A dict, list or tuple of plain JSON (text UTF-8 can encode, whole numbers of sane size,
    finite floats, booleans, null, nested less than _DEEP) as the encoder writes it, or None
    when it holds anything else. The test of one item is written out twice, for a dict's values
    and a list's items, on purpose: a call per item would cost more than the encoder's own."""
    if depth >= _DEEP:
        return None
    out = []
    add = out.append
    if type(v) is dict:
        names = _NAMES
        for k, x in v.items():
            if type(k) is not str:
                return None
            name = names.get(k)
            if name is None:
                if not (k.isascii() or json_ready(k) is k):
                    return None
                name = _string(k) + ":"
                if len(names) < _NAMED and len(k) <= 64:
                    names[k] = name
            tx = type(x)
            if tx is str:
                if not (x.isascii() or json_ready(x) is x):
                    return None
                add(name + _string(x))
            elif x is None:
                add(name + "null")
            elif tx is int and -_BIG < x < _BIG:
                add(name + _int(x))
            elif tx is bool:
                add(name + ("true" if x else "false"))
            elif tx is float and x - x == 0:
                add(name + _float(x))
            elif tx is dict or tx is list or tx is tuple:
                text = _plain(x, depth + 1)
                if text is None:
                    return None
                add(name + text)
            else:
                return None
        return "{" + ",".join(out) + "}"
    for x in v:
        tx = type(x)
        if tx is str:
            if not (x.isascii() or json_ready(x) is x):
                return None
            add(_string(x))
        elif x is None:
            add("null")
        elif tx is int and -_BIG < x < _BIG:
            add(_int(x))
        elif tx is bool:
            add("true" if x else "false")
        elif tx is float and x - x == 0:
            add(_float(x))
        elif tx is dict or tx is list or tx is tuple:
            text = _plain(x, depth + 1)
            if text is None:
                return None
            add(text)
        else:
            return None
    return "[" + ",".join(out) + "]"


def _span(s: Any) -> str:
    if s is None:
        return "null"
    if type(s) is tuple and len(s) == 2:
        a, b = s
        if type(a) is int and type(b) is int:
            return f"[{a},{b}]"
    return _value(list(s))


def _attempt(a: Attempt, menu: str, args: Any = None, args_text: str | None = None) -> str:
    """An attempt's record as a packed trace holds it; `args_text` is `_ready(args)` when the
    caller wrote that dict already (the pick's arguments in the row's columns)."""
    # Written out with the common case of each field inline (text, None, a float): a call per
    # field would cost more than the general encoder's own look at each key.
    d = a.__dict__
    prompt = d["prompt"]
    if type(prompt) is not str or not prompt.isascii():
        prompt = json_ready(prompt)
    appended = bool(menu) and type(prompt) is str and prompt.endswith(menu)
    if appended:
        prompt = prompt[:len(prompt) - len(menu)]
    reply, found, key, kind, span = (d["reply"], d["found_in"], d["key_alias"], d["error_kind"],
                                     d["span"])
    started, took, call, usage = d["started_at"], d["duration_s"], d["model_call_id"], d["usage"]
    conf, repairs, finish = d["confidence"], d["repairs"], d["finish_reason"]
    dropped, injected, redacted = d["dropped"], d["injected"], d["redacted"]
    number, cands, chosen, picked = d["number"], d["candidates"], d["chosen"], d["args"]
    plain = (d["error_span"] is None and d["error_message"] is None and d["error_path"] is None
             and d["sent"] is None and d["tool_calls"] is None and d["raw"] is None
             and d["low_pick"] is None and d["cascade"] is None)
    last, cached, pick = d["is_last"], d["cached"], d["extracted"]
    if plain and kind is None and usage is None and finish is None and conf is None \
            and not repairs and type(dropped) is list and not dropped \
            and type(injected) is list and not injected and type(redacted) is list \
            and not redacted and (cached is True or cached is False) \
            and (last is True or last is False):
        # the common attempt (no error, nothing sent but text): its constant runs written whole
        return "".join((
            '{"attempt":', _int(number) if type(number) is int else _value(number),
            ',"is_last":true,"prompt":' if last else ',"is_last":false,"prompt":',
            _string(prompt) if type(prompt) is str else _value(prompt),
            ',"reply":', _string(reply) if type(reply) is str and reply.isascii()
            else "null" if reply is None
            else _ready(reply if isinstance(reply, str) else repr(reply)),
            ',"extracted":', (_plain(pick, 0) if type(pick) is dict else None) or _ready(pick),
            ',"found_in":', _string(found) if type(found) is str else _value(found),
            ',"span":', _span(span),
            ',"error_span":null,"key_alias":', _string(key) if type(key) is str
            else _value(key),
            ',"candidates":', _int(cands) if type(cands) is int else _value(cands),
            ',"error_kind":null,"error_message":null,"error_path":null,"chosen":',
            _string(chosen) if type(chosen) is str and chosen.isascii() else _ready(chosen),
            ',"args":', args_text if picked is args and args_text is not None
            else (_plain(picked, 0) if type(picked) is dict else None) or _ready(picked),
            ',"dropped":[],"injected":[],"started_at":',
            _float(started) if type(started) is float and started - started == 0
            else _value(started),
            ',"duration_s":', _float(took) if type(took) is float and took - took == 0
            else _value(took),
            ',"model_call_id":', _int(call) if type(call) is int else _value(call),
            _TAIL_CACHED if cached else _TAIL,
            ',"menu_appended":true}' if appended else "}"))
    return "".join((
        '{"attempt":', _int(number) if type(number) is int else _value(number),
        ',"is_last":true' if d["is_last"] is True else
        ',"is_last":false' if d["is_last"] is False else ',"is_last":' + _value(d["is_last"]),
        ',"prompt":', _string(prompt) if type(prompt) is str else _value(prompt),
        ',"reply":', "null" if reply is None else _ready(reply if isinstance(reply, str)
                                                         else repr(reply)),
        ',"extracted":', _ready(d["extracted"]),
        ',"found_in":', _string(found) if type(found) is str else _value(found),
        ',"span":', _span(span),
        ',"error_span":', _span(d["error_span"]),
        ',"key_alias":', _string(key) if type(key) is str else _value(key),
        ',"candidates":', _int(cands) if type(cands) is int else _value(cands),
        ',"error_kind":', "null" if kind is None else _value(kind),
        ',"error_message":null,"error_path":null' if plain else "".join((
            ',"error_message":', _ready(d["error_message"]),
            ',"error_path":', _ready(d["error_path"]))),
        ',"chosen":', _string(chosen) if type(chosen) is str and chosen.isascii()
        else _ready(chosen),
        ',"args":', args_text if picked is args and args_text is not None else _ready(picked),
        ',"dropped":', "[]" if type(dropped) is list and not dropped else _ready(list(dropped)),
        ',"injected":', "[]" if type(injected) is list and not injected
        else _value(list(injected)),
        ',"started_at":', _float(started) if type(started) is float and started - started == 0
        else _value(started),
        ',"duration_s":', _float(took) if type(took) is float and took - took == 0
        else _value(took),
        ',"model_call_id":', _int(call) if type(call) is int else _value(call),
        ',"usage":', "null" if usage is None else _value(usage),
        ',"sent":null,"tool_calls":null' if plain else "".join((
            ',"sent":', _ready(d["sent"]), ',"tool_calls":', _ready(d["tool_calls"]))),
        ',"finish_reason":', "null" if finish is None else _value(finish),
        ',"raw":null' if plain else ',"raw":' + _ready(d["raw"]),
        ',"cached":true' if d["cached"] is True else ',"cached":false' if d["cached"] is False
        else ',"cached":' + _value(d["cached"]),
        ',"redacted":', "[]" if type(redacted) is list and not redacted
        else _value(list(redacted)),
        ',"confidence":', "null" if conf is None else _value(conf.to_dict()),
        ',"low_pick":null,"cascade":null' if plain else "".join((
            ',"low_pick":', _value(d["low_pick"]), ',"cascade":', _ready(d["cascade"]))),
        ',"repairs":', "[]" if not repairs else _value([r.to_dict() for r in repairs]),
        ',"menu_appended":true}' if appended else "}"))


def trace_text(trace: Any, menu: str | None) -> str | None:
    """The trace as a journal row holds it — `pack_trace(trace.to_dict(json_ready), shared)`
    encoded, where the shared line's menu is `menu` — or None when it is not a plain
    `DecisionTrace` of plain `Attempt` records, or holds what only the general path writes."""
    if type(trace) is not DecisionTrace or not isinstance(menu, str):
        return None
    try:
        return _trace(trace, menu, None, None, None, None)
    except Exception:   # a value only the general path writes as the journal always has
        return None


def _trace(trace: DecisionTrace, menu: str, args: Any, args_text: str | None, result: Any,
           result_text: str | None) -> str | None:
    d = trace.__dict__
    tried = d["attempts"]
    for a in tried:
        if type(a) is not Attempt:
            return None
    err = d["error"]
    rounds = d["tool_rounds"]
    short = d["shortlist"]
    ident, entry, mode, status, runtime, most, keys = (
        d["id"], d["entry"], d["mode"], d["status"], d["runtime"], d["max_attempts"],
        d["context_keys"])
    started, took, res, asked = d["started_at"], d["duration_s"], d["result"], d["prompt"]
    if len(tried) == 1:   # most decisions: no re-ask
        attempts = _attempt(tried[0], menu, args, args_text)
    else:
        last = len(tried) - 1
        attempts = ",".join([_attempt(a, menu, args, args_text) if k == last
                             else _attempt(a, menu) for k, a in enumerate(tried)])
    return "".join((
        '{"id":', _int(ident) if type(ident) is int else _value(ident),
        ',"entry":', _string(entry) if type(entry) is str else _value(entry),
        ',"mode":', _string(mode) if type(mode) is str else _value(mode),
        ',"status":', _string(status) if type(status) is str else _value(status),
        ',"prompt":', _string(asked) if type(asked) is str and asked.isascii()
        else _ready(asked),
        ',"runtime":', _string(runtime) if type(runtime) is str else _value(runtime),
        ',"max_attempts":', _int(most) if type(most) is int else _value(most),
        ',"context_keys":', "[]" if type(keys) is list and not keys else _value(list(keys)),
        ',"attempts":[', attempts,
        '],"tool_rounds":',
        "[]" if not rounds else _value([t.to_dict(json_ready) for t in rounds]),
        ',"chosen":', _value(trace.chosen),
        ',"result":', result_text if res is result and result_text is not None
        else _ready(res),
        ',"error":', "null" if err is None else "".join((
            '{"type":', _value(type(err).__name__),
            ',"kind":', _value(getattr(err, "kind", None)),
            ',"message":', _ready(str(err)), "}")),
        ',"started_at":', _float(started) if type(started) is float and started - started == 0
        else _value(started),
        ',"duration_s":', _float(took) if type(took) is float and took - took == 0
        else _value(took),
        ',"shortlist":' + _value(short) if short else "", "}"))


def row_text(section: str, i: int, key: str | None, row: Any, summary: tuple[Any, ...],
             record: Any, expected: str | None, stages: list[tuple[Any, ...]],
             menu: str) -> str | None:
    """The line the journal writes for a finished row of `section` with a trace, as text with
    its newline: `journal.row_line(section, i, key, data)` of `evaluate._journal_row`'s `data`
    and the trace packed against the shared line whose menu is `menu`. `summary` is the row's
    `outcomes.summarize`, `stages` its `cascade_of`. None when the row holds what only the
    general path writes."""
    trace = row.trace
    if type(trace) is not DecisionTrace or not isinstance(menu, str):
        return None
    status, pick, attempts, kinds, raised, tin, tout, took, cached = summary
    tried = trace.attempts
    last = tried[-1] if tried else None
    err = row.error
    try:
        args = last.args if last is not None and pick is not None else None
        args_text = "null" if args is None else \
            (_plain(args, 0) if type(args) is dict else None) or _ready(args)
        resolved = status == "resolved"
        result = row.result if resolved else None
        result_text = _string(result) if type(result) is str and result.isascii() \
            else (_plain(result, 0) if type(result) is dict else None) or _ready(result)
        record = record if type(record) is dict else dict(record)
        body = _trace(trace, menu, args, args_text if args is not None else None, result,
                      result_text if resolved else None)
        if body is None:
            return None
        shown = "null"
        if resolved:
            shown = repr(result) if type(result) in _REPRS else None
            shown = _string(shown) if shown is not None and len(shown) <= _SHOWN \
                else _value(repr_head(result))
        conf = last.confidence if last is not None else None
        return "".join((
            '{"kind":"row","section":', _string(section) if type(section) is str
            else _value(section),
            ',"row":', _int(i) if type(i) is int else _value(i),
            ',"key":', _string(key) if type(key) is str else _value(key),
            ',"input":', _plain(record, 0) or _ready(record),
            ',"expected":', "null" if expected is None else _value(expected),
            ',"pick":', _string(pick) if type(pick) is str else _value(pick),
            ',"args":', args_text, ',"result":', result_text, ',"result_repr":', shown,
            ',"status":', _string(status) if type(status) is str else _value(status),
            ',"error":null,"error_kind":null,"error_kinds":[],"raised":null,"attempts":'
            if err is None and not kinds and raised is None else "".join((
                ',"error":null,"error_kind":null' if err is None else "".join((
                    ',"error":{"type":', _value(type(err).__name__),
                    ',"message":', _ready(str(err)),
                    '},"error_kind":', _value(getattr(err, "kind", None) or
                                              (last.error_kind if last else None)))),
                ',"error_kinds":', "[]" if not kinds else _value(list(kinds)),
                ',"raised":', "null" if raised is None else _value(raised), ',"attempts":')),
            _int(attempts) if type(attempts) is int else _value(attempts),
            ',"tokens_in":', _int(tin) if type(tin) is int else _value(tin),
            ',"tokens_out":', _int(tout) if type(tout) is int else _value(tout),
            ',"latency_s":', _float(took) if type(took) is float and took - took == 0
            else _value(took),
            ',"cached":true' if cached is True else ',"cached":false' if cached is False
            else ',"cached":' + _value(cached),
            ',"confidence":null,"cascade":null,"trace":' if conf is None and not stages
            else "".join((
                ',"confidence":', "null" if conf is None else _value(conf.to_dict()),
                ',"cascade":', _value([list(st) for st in stages]) if stages else "null",
                ',"trace":')),
            body, "}\n"))
    except Exception:   # a value only the general path writes as the journal always has
        return None
