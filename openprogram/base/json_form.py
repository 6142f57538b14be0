"""Any Python value as a JSON value, for exports that must survive `json.dumps`.

A trace's results, arguments and defaults are whatever the user's functions return and accept.
`to_jsonable(value)` keeps everything JSON can hold as that JSON value — dicts, lists (tuples and
sets become lists), strings, integers, finite floats, booleans, null — and writes the rest in a
JSON form: an enum member as its value, a pydantic model (recognised by its `model_dump`, pydantic
is never imported) as `model_dump(mode="json")`, a dataclass as a dict of its fields, a date or
time as its ISO text. Anything else, exceptions included, becomes a tagged repr
`{"repr": "...", "type": "module.Class"}` of bounded length. Non-finite floats, strings with lone
surrogates, huge integers, reference cycles and very deep nesting are made safe, and the function
never raises, so `json.dumps(to_jsonable(x), allow_nan=False)` always works.

`json_ready(value)` is the same for a writer that encodes at once (a journal line): a value that
is already JSON — which most of a trace is — comes back as itself, checked but not copied, so
`json.dumps` writes the same text for it as for `to_jsonable(value)`; anything else goes through
`to_jsonable`. What it returns may share objects with `value`: it is for encoding, not keeping.
`is_plain(value)` is that check, the one place the library decides whether a value is plain
JSON.

`sendable(request)` is a request as UTF-8 can encode it: a JSON reply may hold `"\\ud800"`, the
escape of a lone surrogate, which decodes to a string that is fine in memory but fails when the
next request carries it back to the server (a lone surrogate becomes U+FFFD, a pair held as two
code points becomes its character).
"""
from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
import sys
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["to_jsonable", "json_ready", "is_plain", "sendable", "SURROGATE"]

#: A surrogate code point: not valid Unicode text (UTF-8 refuses it), whether lone or written as
#: one half of a pair; a JSON parser lets one through from a `\ud800` escape.
SURROGATE = re.compile("[\ud800-\udfff]")
#: Nesting deeper than this is cut (json.dumps itself fails near the interpreter's recursion limit).
MAX_DEPTH = 200
#: The longest text a tagged repr keeps.
REPR_LIMIT = 1000
# ~4200 decimal digits: below the interpreter's default limit on int-to-text conversion (4300),
# beyond which json.dumps raises.
_SAFE_INT_BITS = 14_000
_SCALARS = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    """`value` as a JSON value (see the module's text); never raises."""
    try:
        return _convert(value, set(), 0)
    except Exception:  # a hook of the value's own failed in a way no branch below foresaw
        return _tagged(value)


def json_ready(value: Any) -> Any:
    """`value` when json.dumps writes it as it writes `to_jsonable(value)` (plain JSON:
    `is_plain`); otherwise `to_jsonable(value)`. Never raises."""
    t = type(value)
    if t is str:
        return value if value.isascii() else _text(value)
    return value if is_plain(value) else to_jsonable(value)


def is_plain(value: Any) -> bool:
    """Whether `value` is plain JSON, as `to_jsonable` would return it: the exact builtin types
    (a dict with text keys, a list or a tuple, text, a whole number of at most
    `_SAFE_INT_BITS` bits, a finite float, a boolean, None), text that UTF-8 can encode (no
    surrogate code point), nested less than MAX_DEPTH deep (which a reference cycle is too).
    The one test of it: `json_ready` shares such a value instead of copying it, a journal line
    writes it as it is, a reply's value passes the validator's quick check."""
    t = type(value)
    if t is str:
        return value.isascii() or not SURROGATE.search(value)
    if value is None or t is bool:
        return True
    if t is int:
        return value.bit_length() <= _SAFE_INT_BITS
    if t is float:
        return value - value == 0
    return _plain(value, 0)


def _plain(v: Any, depth: int) -> bool:
    """`is_plain` of a dict, a list or a tuple. The test of one item is written out twice, for a
    dict's values and a list's items, on purpose: this runs for every value of every journaled
    row, and a function call per item would add to that."""
    if depth >= MAX_DEPTH:
        return False
    t = type(v)
    if t is dict:
        for k, x in v.items():
            if type(k) is not str or not (k.isascii() or not SURROGATE.search(k)):
                return False
            tx = type(x)
            if tx is str:
                if not (x.isascii() or not SURROGATE.search(x)):
                    return False
            elif not (x is None or tx is bool or tx is int and x.bit_length() <= _SAFE_INT_BITS
                      or tx is float and x - x == 0 or _plain(x, depth + 1)):
                return False
        return True
    if t is list or t is tuple:
        for x in v:
            tx = type(x)
            if tx is str:
                if not (x.isascii() or not SURROGATE.search(x)):
                    return False
            elif not (x is None or tx is bool or tx is int and x.bit_length() <= _SAFE_INT_BITS
                      or tx is float and x - x == 0 or _plain(x, depth + 1)):
                return False
        return True
    return False


def _convert(v: Any, path: set[int], depth: int) -> Any:
    if v is None or v is True or v is False:
        return v
    if isinstance(v, enum.Enum):  # before str/int: IntEnum and StrEnum members are both
        if isinstance(v.value, (*_SCALARS, list, tuple, dict)):
            return _convert(v.value, path, depth)
        return _tagged(v)
    # Subclasses become the plain type through the base class's own method, whatever the
    # subclass overrides (numpy.float64 is a float, a str subclass may redefine __str__).
    if isinstance(v, str):
        return _text(str.__str__(v))
    if isinstance(v, int):
        return _integer(int.__int__(v))
    if isinstance(v, float):
        f = float.__float__(v)
        return f if math.isfinite(f) else _tagged(f)
    dt = sys.modules.get("datetime")  # no date exists before the module that makes them is loaded
    if dt is not None and isinstance(v, (dt.date, dt.time)):
        return _text(v.isoformat())
    if depth >= MAX_DEPTH:
        return _tagged(v, f"<{_type_name(v)} nested deeper than {MAX_DEPTH} levels>")
    if id(v) in path:
        return _tagged(v, f"<reference cycle: this {_type_name(v)} contains itself>")
    path.add(id(v))
    try:
        return _container(v, path, depth + 1)
    finally:
        path.discard(id(v))


def _container(v: Any, path: set[int], depth: int) -> Any:
    """A value that may hold other values."""
    if isinstance(v, Mapping):
        return _mapping(v, path, depth)
    if isinstance(v, (list, tuple)):
        return [_convert(x, path, depth) for x in v]
    if isinstance(v, (set, frozenset)):
        try:
            items = sorted(v)
        except Exception:  # mixed or unorderable members: their iteration order
            items = list(v)
        return [_convert(x, path, depth) for x in items]
    if not isinstance(v, type):
        dump = getattr(v, "model_dump", None)
        if callable(dump):  # a pydantic model
            try:
                return _convert(dump(mode="json"), path, depth)
            except Exception:
                return _tagged(v)
        if dataclasses.is_dataclass(v):
            # Field by field rather than dataclasses.asdict, which deep-copies every value and
            # recurses without end on a cycle.
            try:
                fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
            except Exception:
                return _tagged(v)
            return _mapping(fields, path, depth)
    if hasattr(type(v), "__index__"):  # integer types of other libraries (numpy.int64, ...)
        try:
            return _integer(v.__index__())
        except Exception:
            pass
    return _tagged(v)


def _mapping(v: Mapping, path: set[int], depth: int) -> Any:
    try:
        pairs = list(v.items())
    except Exception:
        return _tagged(v)
    out: dict[str, Any] = {}
    for key, item in pairs:
        name = _key(key)
        if name in out:
            # Two keys that read the same as JSON object keys (1 and "1"): keep both, as pairs.
            return {"type": _type_name(v),
                    "items": [[_convert(k, path, depth), _convert(x, path, depth)]
                              for k, x in pairs]}
        out[name] = _convert(item, path, depth)
    return out


def _key(key: Any) -> str:
    """A mapping key as a JSON object key: a string as itself, a scalar as json.dumps writes it
    (1 -> "1", None -> "null"), anything else as its bounded repr."""
    if isinstance(key, enum.Enum) and isinstance(key.value, _SCALARS):
        key = key.value
    if isinstance(key, str):
        return _text(str.__str__(key))
    if isinstance(key, (int, float, bool, type(None))):
        try:
            return json.dumps(key)
        except Exception:  # an integer too long to write out
            pass
    return _tagged(key)["repr"]


def _integer(n: int) -> Any:
    if n.bit_length() <= _SAFE_INT_BITS:
        return n
    try:
        str(n)
        return n
    except ValueError:
        return {"repr": f"<int of {n.bit_length()} bits>", "type": "int"}


def _text(s: str) -> str:
    """`s` with every lone surrogate (not valid Unicode, refused by UTF-8 encoders) replaced by
    U+FFFD; a surrogate pair written as two code points becomes the character it encodes."""
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _type_name(v: Any) -> str:
    cls = type(v)
    name = str(getattr(cls, "__qualname__", None) or cls.__name__)
    module = getattr(cls, "__module__", None)
    return name if module in (None, "builtins") else f"{module}.{name}"


def _tagged(v: Any, text: str | None = None) -> dict:
    """`{"repr": ..., "type": ...}` for a value JSON cannot hold."""
    try:
        name = _type_name(v)
    except Exception:
        name = "object"
    if text is None:
        try:
            text = repr(v)
        except Exception as exc:
            text = f"<{name} object; its repr raised {type(exc).__name__}>"
        if not isinstance(text, str):
            text = f"<{name} object>"
    if len(text) > REPR_LIMIT:
        text = f"{text[:REPR_LIMIT]}... [{len(text) - REPR_LIMIT} more characters]"
    return {"repr": _text(text), "type": _text(name)}


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_surrogate(v) for v in value)
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_replaced(v) for v in value)
    return value


def sendable(value: Any) -> Any:
    """`value` (a request: dicts, lists and strings) as UTF-8 can encode it; the same object
    when it already can."""
    return _replaced(value) if _has_surrogate(value) else value
