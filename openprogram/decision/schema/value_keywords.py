"""What JSON Schema's value keywords ask of one value, written once for the two validators.

The number bounds (`minimum`, `exclusiveMinimum`, `maximum`, `exclusiveMaximum`), `multipleOf`, the
sizes (`minLength` ... `maxProperties`) and `uniqueItems` are judged the same way, and their
failures (and those of `pattern` and `format`) worded the same way, by validator.py (an option's own
schema, which also converts the value it checks) and by schemaeval.py (a schema as written, its
steps in eval_keywords.py, which also track what each part evaluated). What differs between those
two is the shape of their steps and the kind of `AttemptError` they raise (schemaeval's writes its
message only when it is read), so each wraps these tests and texts in its own step; what a keyword's
own value must be (`is_number`, `is_count`) is here too.
"""
from __future__ import annotations

import math
import operator
from fractions import Fraction

from .reply_values import equal, json_head

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["BOUNDS", "SIZES", "is_number", "is_count", "is_finite", "not_multiple", "json_key",
           "first_repeat", "non_finite_text", "bound_text", "multiple_text", "size_text",
           "repeat_text", "pattern_text", "format_text"]

#: (keyword, the test a value must pass against the keyword's number, how a message says it)
BOUNDS = (("minimum", operator.ge, ">="), ("exclusiveMinimum", operator.gt, ">"),
          ("maximum", operator.le, "<="), ("exclusiveMaximum", operator.lt, "<"))
#: (keyword, the values it counts, the unit a message counts in, whether it is a least count)
SIZES = (("minLength", str, "characters", True), ("maxLength", str, "characters", False),
         ("minItems", list, "items", True), ("maxItems", list, "items", False),
         ("minProperties", dict, "keys", True), ("maxProperties", dict, "keys", False))


def is_number(n: Any) -> bool:
    """A JSON number (a bool is not one)."""
    return isinstance(n, (int, float)) and not isinstance(n, bool)


def is_count(n: Any) -> bool:
    """A non-negative integer, as JSON Schema counts one (1.0 included)."""
    return is_number(n) and n >= 0 and float(n).is_integer()


def is_finite(n: Any) -> bool:
    """A JSON number a bound can be: not NaN, not an infinity (which no JSON text writes, and
    which bound nothing: `minimum: NaN` would refuse every value)."""
    return is_number(n) and (not isinstance(n, float) or math.isfinite(n))


def not_multiple(v: Any, m: Any) -> bool:
    """Whether the number `v` is not a multiple of `m` (> 0), judged in decimal: a number the
    model wrote as `0.07` is read into the float nearest it, whose binary value is no multiple
    of the float nearest `0.01`, yet the text was. A float's shortest repr is the decimal text
    it was read from (for any text of up to 15 significant digits, all a reply sensibly
    holds), so both are taken back to that text and compared as exact fractions: `0.07` is a
    multiple of `0.01` and `0.075` is not, at any magnitude (`1e308` by `0.5`)."""
    if type(v) is int and type(m) is int:
        return bool(v % m)
    return bool(_decimal(v) % _decimal(m))


def _decimal(x: Any) -> Fraction:
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


class _Close:
    """Where a list or an object of `json_key`'s walk ends: how many keys it gathers."""
    __slots__ = ("keys", "n")

    def __init__(self, keys: tuple | None, n: int):
        self.keys, self.n = keys, n


def json_key(v: Any) -> Any:
    """A hashable key that two values share exactly when they are equal as JSON values
    (`equal`: `1` and `1.0` alike, a boolean never a number, an object's keys in any order),
    made in one walk over the value without recursion, so that `uniqueItems` is judged in time
    linear in the list's size, however deep its items. A value that is not JSON and cannot be
    hashed raises TypeError."""
    out: list = []
    stack: list = [v]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is str or x is None:
            out.append(x)
        elif t is bool:
            out.append(("b", x))
        elif t is int or t is float:
            out.append(("n", x))
        elif t is list:
            stack.append(_Close(None, len(x)))
            stack += reversed(x)
        elif t is dict:
            stack.append(_Close(tuple(x), len(x)))
            stack += reversed(x.values())
        elif t is _Close:
            items = tuple(out[len(out) - x.n:]) if x.n else ()
            del out[len(out) - x.n:]
            out.append(("l", items) if x.keys is None else ("d", frozenset(zip(x.keys, items))))
        else:   # a Python value the option's hooks made (an Enum member, a date)
            hash(x)
            out.append(("o", x))
    return out[0]


def first_repeat(v: list) -> tuple[int, int] | None:
    """(i, j), j < i, for the first item of `v` equal (as JSON values) to an earlier one: each
    item's `json_key` looked up among the earlier ones', so a list of n items costs n keys,
    not n * n comparisons."""
    seen: dict = {}
    try:
        for i, x in enumerate(v):
            j = seen.setdefault(json_key(x), i)
            if j != i:
                return i, j
        return None
    except TypeError:   # an item no key can stand for: compared pair by pair
        for i in range(len(v)):
            for j in range(i):
                if equal(v[i], v[j]):
                    return i, j
        return None


def non_finite_text(key: str, b: float) -> str:
    """Why a schema whose `key` is NaN or an infinity is refused."""
    return (f"{key} takes a finite number, got {b!r}: NaN and infinity are not JSON numbers, "
            f"and a bound of NaN would refuse every value; write the number meant")


def bound_text(p: str, v: Any, text: str, b: Any) -> str:
    return f"{p} must be {text} {b}, got {json_head(v)}"


def multiple_text(p: str, v: Any, m: Any) -> str:
    return f"{p} must be a multiple of {m}, got {json_head(v)}"


def size_text(p: str, n: int, at_least: bool, unit: str, got: int) -> str:
    return f"{p} must have at {'least' if at_least else 'most'} {n} {unit}, got {got}"


def repeat_text(p: str, i: int, j: int) -> str:
    return f"{p}[{i}] repeats {p}[{j}]; items must differ"


def pattern_text(p: str, v: Any, pattern: str) -> str:
    return f"{p} must match the pattern {pattern}, got {json_head(v)}"


def format_text(p: str, v: Any, fmt: str) -> str:
    return f"{p} must be in the format {fmt}, got {json_head(v)}"
