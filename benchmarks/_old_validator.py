"""The validator the core had before issue 23 (options.validate over a Field, at commit
3c70f10), kept verbatim so benchmarks/bench_core.py can time the new validator beside it in one
run. Not imported by the library or the tests."""
from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from openprogram.base.errors import AttemptError

Field = Any


def safe_key(key: str) -> str:
    return key if key.isascii() or not _SURROGATE.search(key) else \
        key.encode("utf-8", "backslashreplace").decode("utf-8")



_JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
               dict: "object", type(None): "null"}


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


def _json_head(v: Any) -> str:
    """The start of `v` as JSON text (a lone surrogate escaped), for an error message."""
    return json.dumps(_preview(v), default=repr)[:60]


def _describe_value(v: Any) -> str:
    return f"{_JSON_NAMES.get(type(v), type(v).__name__)} {_json_head(v)}"


def _enum_index(v: Any, options: list) -> int | None:
    """Which allowed value `v` equals; a JSON `true` never equals the allowed 1."""
    for i, o in enumerate(options):
        if v == o and isinstance(v, bool) == isinstance(o, bool):
            return i
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


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


def _check_json_value(value: Any, path: str, deep: bool = False, numbers: bool = True) -> None:
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
            raise AttemptError("invalid_value", f"{where} {problem}", where)
        if deep and isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
        elif deep and isinstance(v, dict):
            for k, x in v.items():
                # The key goes on last, so it is checked before any value under it: a path
                # is built only from keys that passed.
                stack.append((x, f"{where}.{k}"))
                stack.append((k, f"{where} (a key)"))


def _check_enum(value: Any, f: Field, path: str) -> int | None:
    """Which allowed value `value` equals (None when any value is allowed)."""
    if f.options is None:
        return None
    i = _enum_index(value, f.options)
    if i is None:
        allowed = ", ".join(json.dumps(o, default=repr) for o in f.options)
        raise AttemptError("enum_violation", f"{path} must be one of {allowed}; got "
                                           f"{_json_head(value)}", path)
    return i


def _validate_union(value: Any, f: Field, path: str, dropped: list[str]) -> Any:
    """The value as the first alternative it fits (`int | str`: 3 stays an int). When none
    does, the error of an alternative of the right JSON type (`float | str` given 1e400 says
    the number is not finite), else a type mismatch naming them all."""
    closest = None
    for alt in f.alts or ():
        trial: list[str] = []
        try:
            out = validate(value, alt, path, trial)
        except AttemptError as err:
            if err.kind != "type_mismatch" and closest is None:
                closest = err
            continue
        dropped.extend(trial)
        return out
    raise closest or AttemptError("type_mismatch", f"{path} must be {f.type_name()}, got "
                                                 f"{_describe_value(value)}", path)


def validate(value: Any, f: Field, path: str, dropped: list[str]) -> Any:
    """Check `value` against `f`; return it with fields outside the schema dropped (their paths
    go to `dropped`). Raises AttemptError(type_mismatch / enum_violation / missing_required)."""
    if value is None and f.nullable:
        return None
    if f.user is not None and f.options is None:
        return f.user.validate(value, path, dropped)
    if f.type == "union":
        value = _validate_union(value, f, path, dropped)
        _check_enum(value, f, path)
        return value
    t = f.type
    ok = {
        "any": True,
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "list": isinstance(value, list),
        "dict": isinstance(value, dict),
        "object": isinstance(value, dict),
    }[t]
    if not ok:
        raise AttemptError("type_mismatch", f"{path} must be {f.type_name()}, got "
                                          f"{_describe_value(value)}", path)
    if t in ("str", "int", "float"):
        _check_json_value(value, path)
    elif t == "any" or (t in ("list", "dict") and f.items is None):
        _check_json_value(value, path, deep=True)
    i = _check_enum(value, f, path)
    if i is not None:
        if f.values is not None:  # an Enum member or a date: the Python value behind the JSON
            return f.values[i]
        if t == "any":
            # A mixed enum (Literal[1, "a"]) hands over its own value: the model's 1.0 equals
            # the allowed 1 but is not of its type.
            option = f.options[i]
            import copy
            return copy.deepcopy(option) if isinstance(option, (list, dict)) else option
    if t == "float" and isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # an integer literal of 309 digits or more
            # (bit_length, not str(): an int of over 4300 digits cannot be printed)
            digits = int(value.bit_length() * math.log10(2)) + 1
            raise AttemptError("invalid_value", f"{path} must be a finite number, got an "
                                              f"integer of about {digits} digits, too large "
                                              f"for a float", path) from None
    if t == "list" and f.items is not None:
        return [validate(v, f.items, f"{path}[{i}]", dropped) for i, v in enumerate(value)]
    if t == "dict" and f.items is not None:  # dict[str, X]: every value is an X
        for k in value:
            _check_json_value(k, f"{path} (a key)")
        return {k: validate(v, f.items, f"{path}.{k}", dropped) for k, v in value.items()}
    if t == "object":
        out = {}
        for k, sub in (f.fields or {}).items():
            if k not in value:
                raise AttemptError("missing_required",
                                   f"{path}.{k} is required ({sub.type_name()})", f"{path}.{k}")
            out[k] = validate(value[k], sub, f"{path}.{k}", dropped)
        dropped.extend(f"{path}.{safe_key(k)}" for k in value if k not in out)
        return out
    return value
