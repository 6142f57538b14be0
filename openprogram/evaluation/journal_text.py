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

from ..base.json_form import is_plain, json_ready
from ..base.jsonl import encoder
from ..base.text import repr_head
from ..trace.decision_trace import DecisionTrace
from ..trace.records import (
    AS_IS,
    ATTEMPT_JSON,
    JSON,
    JSON_LIST,
    LIST,
    RECORD,
    RECORDS,
    REPLY,
    SPAN,
    Attempt,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["row_text", "trace_text"]

_string = _json.encode_basestring   # what the journal's encoder (ensure_ascii=False) writes
_float = float.__repr__
_int = int.__repr__

#: The journal's encoder (journal._FORMAT's options), for the values that may be anything.
_enc = encoder(ensure_ascii=False, separators=(",", ":"), default=repr)

#: The longest repr of a result the row's "result_repr" holds whole (repr_head's limit), and the
#: types whose repr is written here rather than through repr_head: theirs cannot fail but by
#: raising (an int too long to write, nesting too deep), which sends the row the general way.
_SHOWN = 500
_REPRS = frozenset((str, int, float, bool, dict, list, tuple))


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
    """A value as the journal writes `json_ready(v)`: a value of plain JSON as it is (the one
    test of it, json_form.is_plain), anything else as `to_jsonable` makes it."""
    t = type(v)
    if t is str:
        return _string(v) if v.isascii() else _string(json_ready(v))
    if v is None:
        return "null"
    if (t is dict or t is list) and is_plain(v):   # most arguments, inputs and results
        return _enc(v)
    return _value(json_ready(v))


def _span(s: Any) -> str:
    if s is None:
        return "null"
    if type(s) is tuple and len(s) == 2:
        a, b = s
        if type(a) is int and type(b) is int:
            return f"[{a},{b}]"
    return _value(list(s))


# -- an attempt's record, written from Attempt's own field list ------------------------------

#: How each form of records.ATTEMPT_JSON is written, as an expression of the field's value: the
#: common values (None, text, a whole number, an empty list) inline, anything else as
#: `Attempt.to_dict(json_ready)` writes it, through the encoder. `{v}` is where the value is
#: read: the part of the expression Python evaluates first (a condition's); `_v` holds it after.
_FORMS = {
    AS_IS: ("'null' if ({v}) is None else 'true' if _v is True else 'false' if _v is False "
            "else _string(_v) if type(_v) is str else _int(_v) if type(_v) is int "
            "else _float(_v) if type(_v) is float and _v - _v == 0 else _value(_v)"),
    JSON: ("'null' if ({v}) is None else _string(_v) if type(_v) is str and _v.isascii() "
           "else _ready(_v)"),
    REPLY: ("'null' if ({v}) is None else _string(_v) if type(_v) is str and _v.isascii() "
            "else _ready(_v if isinstance(_v, str) else repr(_v))"),
    SPAN: "_span({v})",
    JSON_LIST: "'[]' if type({v}) is list and not _v else _ready(list(_v))",
    LIST: "'[]' if type({v}) is list and not _v else _value(list(_v))",
    RECORD: "'null' if ({v}) is None else _value(_v.to_dict())",
    RECORDS: "'[]' if not ({v}) else _value([r.to_dict() for r in _v])",
}
#: A field written as it is whose type the record declares (`int`, `float | None`, ...) has its
#: own value's case tried first.
_DECLARED = {
    "int": "_int(_v) if type({v}) is int else _value(_v)",
    "bool": "'true' if ({v}) is True else 'false' if _v is False else _value(_v)",
    "int | None": "'null' if ({v}) is None else _int(_v) if type(_v) is int else _value(_v)",
    "float": "_float(_v) if type({v}) is float and _v - _v == 0 else _value(_v)",
    "float | None": ("'null' if ({v}) is None else _float(_v) if type(_v) is float "
                     "and _v - _v == 0 else _value(_v)"),
    "str | None": "'null' if ({v}) is None else _string(_v) if type(_v) is str else _value(_v)",
}


def _attempt_writer() -> Any:
    """`_attempt(record, menu, args=None, args_text=None)`, made once from ATTEMPT_JSON: one
    text join of each field's key and the expression its form writes its value with (a call
    per field would cost more than the general encoder's own look at each key). Two fields
    are the journal's own: the prompt is written without the section's menu when it ends
    with it (`"menu_appended": true` says so), and the pick's arguments, when they are
    `args`, as `args_text`, which the caller wrote already for the row's columns."""
    declared = {name: f.type for name, f in Attempt.__dataclass_fields__.items()}
    parts = []
    for k, (name, key, form) in enumerate(ATTEMPT_JSON):
        read = "_v := prompt" if name == "prompt" else f"_v := d[{name!r}]"
        how = _FORMS[form] if form != AS_IS else _DECLARED.get(declared[name], _FORMS[form])
        if name == "args":
            written = (f"args_text if ({read}) is args and args_text is not None else "
                       + how.format(v="_v"))
        else:
            written = how.format(v=read)
        parts.append(f"        {(',' if k else '{') + _string(key) + ':'!r}, {written},")
    source = (
        "def _attempt(a, menu, args=None, args_text=None):\n"
        "    d = a.__dict__\n"
        "    prompt = d['prompt']\n"
        "    if type(prompt) is not str or not prompt.isascii():\n"
        "        prompt = json_ready(prompt)\n"
        "    appended = bool(menu) and type(prompt) is str and prompt.endswith(menu)\n"
        "    if appended:\n"
        "        prompt = prompt[:len(prompt) - len(menu)]\n"
        "    return ''.join((\n" + "\n".join(parts) + "\n"
        "        ',\"menu_appended\":true}' if appended else '}'))\n")
    scope = {"json_ready": json_ready, "_string": _string, "_int": _int, "_float": _float,
             "_value": _value, "_ready": _ready, "_span": _span}
    exec(compile(source, f"<{__name__}: the attempt writer>", "exec"), scope)
    return scope["_attempt"]


#: An attempt's record as a packed trace holds it: `_attempt(record, menu, args, args_text)`
#: (see `_attempt_writer`).
_attempt = _attempt_writer()


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
            _ready(args)
        resolved = status == "resolved"
        result = row.result if resolved else None
        result_text = _string(result) if type(result) is str and result.isascii() \
            else _ready(result)
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
            ',"input":', _ready(record),
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
