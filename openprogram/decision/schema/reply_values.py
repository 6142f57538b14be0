"""What a reply's values may be: JSON's, and nothing else (rule P3, "decided here").

A reply may hold finite numbers and valid Unicode text; Python's json module lets through
`1e400`, `NaN` and lone surrogates, so `check_json_value` refuses them wherever they sit (kind
`invalid_value`, with the path). Here too: JSON equality (`equal`: `1 == 1.0`, but a boolean
never equals a number), how a value is named in an error message (`describe_value`,
`json_head`, a key made safe for a path), and the checks of the string formats the validator
asserts (`FORMAT_CHECKS`: date, date-time, time, email, uri, uuid).
"""
from __future__ import annotations

import json
import math
import re
import sys
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Callable

from ...base.errors import ParseError
from .type_table import json_type

__all__ = ["check_json_value", "describe_value", "json_head", "safe_key", "equal",
           "FORMAT_CHECKS"]

SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE = SURROGATE



def _preview(v: Any, depth: int = 0) -> Any:
    """Enough of `v` to show its start: an error message costs little however large the value."""
    if isinstance(v, str):
        return v[:61]
    if isinstance(v, int) and not isinstance(v, bool) and _too_many_digits(v):
        return f"<an integer of about {_too_many_digits(v)} digits>"
    if depth > 3 and isinstance(v, (list, dict)):
        return "..."
    if isinstance(v, list):
        return [_preview(x, depth + 1) for x in v[:8]]
    if isinstance(v, dict):
        return {str(k)[:30]: _preview(x, depth + 1) for k, x in list(v.items())[:8]}
    return v


def json_head(v: Any) -> str:
    """The start of `v` as JSON text (a lone surrogate escaped), for an error message."""
    return json.dumps(_preview(v), default=repr)[:60]


def describe_value(v: Any) -> str:
    """`boolean true`, `string "abc"`: a value as an error message names it."""
    return f"{json_type(v) or type(v).__name__} {json_head(v)}"


def _too_many_digits(value: int) -> int | None:
    """About how many digits `value` has when that is more than Python will print (and json
    will read or write: 4300 by default), else None."""
    limit = sys.get_int_max_str_digits()
    digits = int(value.bit_length() * math.log10(2)) + 1
    return digits if limit and digits > limit else None


def _bad_json_value(value: Any) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r} (write numbers JSON can hold)"
    if isinstance(value, int) and value.bit_length() > 14_000 and _too_many_digits(value):
        # Not from a reply (json refuses such a literal), but a tool call's arguments may come
        # from a runtime's own decoding: a number no trace, log or export could print.
        return (f"must be a number JSON can hold, got an integer of about "
                f"{_too_many_digits(value)} digits")
    if isinstance(value, str) and not value.isascii():
        bad = _SURROGATE.search(value)  # a search, not an encode: a huge text is not copied
        if bad:
            return (f"is not valid Unicode text (a lone surrogate at character {bad.start()}); "
                    f"write plain text")
    return None


def safe_key(key: str) -> str:
    """A key of the model's, fit to go into a path: a lone surrogate shows as its escape, so
    no error message, record or view ever holds text that cannot be written out."""
    return key if key.isascii() or not _SURROGATE.search(key) else \
        key.encode("utf-8", "backslashreplace").decode("utf-8")


def check_json_value(value: Any, path: str, deep: bool = False, numbers: bool = True) -> None:
    """A reply may hold only what JSON means: finite numbers and valid Unicode. Python's json
    module lets through `1e400` (as inf), `NaN`, `Infinity` and lone surrogates (`"\\ud800"`);
    a value of those never reaches a function, whatever its declared type says (`numbers=False`
    leaves numbers to a pydantic type's own `allow_inf_nan`). Iterative, so the deepest
    structure json accepted is checked without recursion."""
    stack = [(value, path)]
    while stack:
        v, where = stack.pop()
        problem = _bad_json_value(v) if numbers or isinstance(v, str) else None
        if problem:
            raise ParseError("invalid_value", f"{where} {problem}", where)
        if deep and isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
        elif deep and isinstance(v, dict):
            for k, x in v.items():
                # The key goes on last, so it is checked before any value under it: a path
                # is built only from keys that passed.
                stack.append((x, f"{where}.{k}"))
                stack.append((k, f"{where} (a key)"))


def equal(a: Any, b: Any) -> bool:
    """JSON equality: `1 == 1.0`, but a boolean never equals a number, all the way down."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    try:
        return a == b
    except Exception:
        return False


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIME = re.compile(r"\d{2}:\d{2}:\d{2}(\.\d+)?([zZ]|[+-]\d{2}:\d{2})?", re.ASCII)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _is_date(text: str) -> bool:
    import datetime
    if not _DATE.fullmatch(text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_time(text: str) -> bool:
    if not _TIME.fullmatch(text):
        return False
    h, m, s = int(text[:2]), int(text[3:5]), int(text[6:8])
    return h < 24 and m < 60 and s < 61


def _is_datetime(text: str) -> bool:
    head, sep, tail = text.partition("T") if "T" in text else text.partition("t")
    return bool(sep) and _is_date(head) and _is_time(tail) and tail[-1:] in "zZ0123456789" \
        and (tail[-1:] in "zZ" or tail[-6:-5] in "+-")


FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "date": _is_date, "time": _is_time, "date-time": _is_datetime,
    "email": lambda t: bool(_EMAIL.fullmatch(t)), "uri": lambda t: bool(_URI.fullmatch(t)),
    "uuid": lambda t: bool(_UUID.fullmatch(t))}
