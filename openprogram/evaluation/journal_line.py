"""A journaled row's trace written as JSON text straight from its records.

Every row of an evaluation's journal carries its decision's whole trace. The general way —
`DecisionTrace.to_dict(json_ready)`, the section's menu packed out of it (`journal.pack_trace`),
then the generic encoder — builds a dict of some forty keys per row, copies it to pack it, and
has the encoder look at every key again: about a sixth of a journaled row's processor time.
`trace_text` writes the same text field by field from the `DecisionTrace` and `Attempt` records,
their key names written once here as constant text, and only the values that may be anything (a
reply, the extracted pick, a result) go through the encoder. It is the general path's text, byte
for byte (tests/evaluation compare the two over traces of every shape): whatever it does not
expect (a subclass of a record, a field of an unusual type, a reference cycle) returns None, and
the journal writes that row the general way.
"""
from __future__ import annotations

import json.encoder as _json
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

from ..base.json_form import json_ready
from ..base.jsonl import encoder
from ..trace.decision_trace import DecisionTrace
from ..trace.records import Attempt

__all__ = ["trace_text"]

_string = _json.encode_basestring   # what the journal's encoder (ensure_ascii=False) writes
_float = float.__repr__


#: The journal's encoder (journal._FORMAT's options), for the values that may be anything.
_enc = encoder(ensure_ascii=False, separators=(",", ":"), default=repr)


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
        return int.__repr__(v)
    if t is float and v - v == 0:  # finite: NaN and infinities go the general way
        return _float(v)
    if t is list and not v:
        return "[]"
    return _enc(v)


def _ready(v: Any) -> str:
    """A value the general path passes through `json_ready` first."""
    t = type(v)
    if v is None:
        return "null"
    if t is str and v.isascii():
        return _string(v)
    return _value(json_ready(v))


def _span(s: Any) -> str:
    return "null" if s is None else _value(list(s))


def _attempt(a: Attempt, menu: str) -> str:
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
    number, cands, chosen = d["number"], d["candidates"], d["chosen"]
    plain = (d["error_span"] is None and d["error_message"] is None and d["error_path"] is None
             and d["sent"] is None and d["tool_calls"] is None and d["raw"] is None
             and d["low_pick"] is None and d["cascade"] is None)
    return "".join((
        '{"attempt":', int.__repr__(number) if type(number) is int else _value(number), ',"is_last":true' if d["is_last"] is True else
        ',"is_last":false' if d["is_last"] is False else ',"is_last":' + _value(d["is_last"]),
        ',"prompt":', _string(prompt) if type(prompt) is str else _value(prompt),
        ',"reply":', "null" if reply is None else _ready(reply if isinstance(reply, str)
                                                         else repr(reply)),
        ',"extracted":', _ready(d["extracted"]),
        ',"found_in":', _string(found) if type(found) is str else _value(found),
        ',"span":', _span(span),
        ',"error_span":', _span(d["error_span"]),
        ',"key_alias":', _string(key) if type(key) is str else _value(key),
        ',"candidates":', int.__repr__(cands) if type(cands) is int else _value(cands),
        ',"error_kind":', "null" if kind is None else _value(kind),
        ',"error_message":null,"error_path":null' if plain else "".join((
            ',"error_message":', _ready(d["error_message"]),
            ',"error_path":', _ready(d["error_path"]))),
        ',"chosen":', _string(chosen) if type(chosen) is str and chosen.isascii()
        else _ready(chosen), ',"args":', _ready(d["args"]),
        ',"dropped":', "[]" if type(dropped) is list and not dropped else _ready(list(dropped)),
        ',"injected":', "[]" if type(injected) is list and not injected
        else _value(list(injected)),
        ',"started_at":', _float(started) if type(started) is float and started - started == 0
        else _value(started),
        ',"duration_s":', _float(took) if type(took) is float and took - took == 0
        else _value(took),
        ',"model_call_id":', int.__repr__(call) if type(call) is int else _value(call),
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
    d = trace.__dict__
    if any(type(a) is not Attempt for a in d["attempts"]):
        return None
    try:
        err = d["error"]
        rounds = d["tool_rounds"]
        short = d["shortlist"]
        ident, entry, mode, status, runtime, most, keys = (
            d["id"], d["entry"], d["mode"], d["status"], d["runtime"], d["max_attempts"],
            d["context_keys"])
        started, took = d["started_at"], d["duration_s"]
        return "".join((
            '{"id":', int.__repr__(ident) if type(ident) is int else _value(ident),
            ',"entry":', _string(entry) if type(entry) is str else _value(entry),
            ',"mode":', _string(mode) if type(mode) is str else _value(mode),
            ',"status":', _string(status) if type(status) is str else _value(status),
            ',"prompt":', _ready(d["prompt"]),
            ',"runtime":', _string(runtime) if type(runtime) is str else _value(runtime),
            ',"max_attempts":', int.__repr__(most) if type(most) is int else _value(most),
            ',"context_keys":', "[]" if type(keys) is list and not keys else _value(list(keys)),
            ',"attempts":[', ",".join([_attempt(a, menu) for a in d["attempts"]]),
            '],"tool_rounds":',
            "[]" if not rounds else _value([t.to_dict(json_ready) for t in rounds]),
            ',"chosen":', _value(trace.chosen), ',"result":', _ready(d["result"]),
            ',"error":', "null" if err is None else "".join((
                '{"type":', _value(type(err).__name__),
                ',"kind":', _value(getattr(err, "kind", None)),
                ',"message":', _ready(str(err)), "}")),
            ',"started_at":', _float(started) if type(started) is float and started - started == 0
            else _value(started),
            ',"duration_s":', _float(took) if type(took) is float and took - took == 0
            else _value(took),
            ',"shortlist":' + _value(short) if short else "", "}"))
    except Exception:   # a value only the general path writes as the journal always has
        return None
