"""What JSON Schema's value keywords ask of one value, written once for the two validators.

The number bounds (`minimum`, `exclusiveMinimum`, `maximum`, `exclusiveMaximum`), `multipleOf`,
the sizes (`minLength` ... `maxProperties`) and `uniqueItems` are judged the same way, and their
failures (and those of `pattern` and `format`) worded the same way, by validator.py (an option's own
schema, which also converts the value it checks) and by schemaeval.py (a schema as written, which
also tracks what each part evaluated). What differs between those two is the shape of their steps
and the kind of `AttemptError` they raise (schemaeval's writes its message only when it is read), so
each wraps these tests and texts in its own step; what a keyword's own value must be (`is_number`,
`is_count`) is here too.
"""
from __future__ import annotations

import operator
from fractions import Fraction

from .reply_values import equal, json_head

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["BOUNDS", "SIZES", "is_number", "is_count", "not_multiple", "first_repeat",
           "bound_text", "multiple_text", "size_text", "repeat_text", "pattern_text",
           "format_text"]

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


def not_multiple(v: Any, m: Any) -> bool:
    """Whether the number `v` is not a multiple of `m` (> 0); exact where floats would
    overflow (`1e308` by `0.5`), as fractions."""
    if isinstance(m, float) or isinstance(v, float):
        try:
            q = v / m
            return int(q) != q
        except OverflowError:
            return bool(Fraction(v) % Fraction(m))
    return bool(v % m)


def first_repeat(v: list) -> tuple[int, int] | None:
    """(i, j), j < i, for the first item of `v` equal (as JSON values) to an earlier one."""
    for i in range(len(v)):
        for j in range(i):
            if equal(v[i], v[j]):
                return i, j
    return None


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
