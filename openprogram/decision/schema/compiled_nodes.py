"""What a compiled schema node runs when a value is checked: validator.py's hot path.

validator.py's `_Compiler` reads a schema once and hands each node's keyword steps to `make_node`,
which returns the function every value of that node goes through: the type test, the JSON checks
of reply_values.py, the steps, an object's fields (`_object`) and the conversion of an integer
for a `number`. For the nodes most schemas are made of, `_fast` puts a check in front that lets a
valid value through in a line of generated code (an object of named fields as one straight-line
function, compiled once per shape) and sends anything else, every error included, to the general
node, so results and messages are the same either way. It is a module of its own because this is
what runs per value while the compiler runs once per schema: the two change for different
reasons, and keeping the per-value code together keeps its cost in view.
"""
from __future__ import annotations

import math

from ...base.errors import AttemptError
from .reply_values import SURROGATE as _SURROGATE
from .reply_values import _bad_json_value, check_json_value, describe_value, safe_key
from .type_table import json_type

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["any_value", "refused_key", "no_value", "make_node"]


def any_value(v: Any, p: str, d: list[str]) -> Any:
    check_json_value(v, p, deep=True)
    return v


def refused_key(v: Any, p: str, d: list[str]) -> Any:
    raise AttemptError("invalid_value", f"{p} is not allowed (the schema allows no other keys)", p)


def no_value(v: Any, p: str, d: list[str]) -> Any:
    raise AttemptError("invalid_value", f"{p} must not be given (the schema allows no value)", p)


def make_node(types: list | None, name: str, steps: list[Callable], obj: tuple | None,
              nullable: bool, union: bool, as_written: bool = False) -> Callable:
    allowed = frozenset(types) if types is not None else None
    # (a schema as written delivers a number as the model wrote it: 2 stays 2)
    to_float = allowed is not None and "number" in allowed and "integer" not in allowed \
        and not as_written
    # JSON Schema counts 1.0 as an integer; Python annotations (the spec's forms) do not
    whole = as_written and allowed is not None and "integer" in allowed

    def run(v: Any, p: str, d: list[str]) -> Any:
        if v is None and nullable:
            return v
        if whole and type(v) is float and v.is_integer() and "number" not in allowed:
            v = int(v)
        if allowed is not None:
            t = json_type(v)
            if t not in allowed and not (t == "integer" and "number" in allowed):
                raise AttemptError("type_mismatch", f"{p} must be {name}, got "
                                                  f"{describe_value(v)}", p)
        if isinstance(v, (str, float)) or (isinstance(v, int) and not isinstance(v, bool)):
            problem = _bad_json_value(v)
            if problem:
                raise AttemptError("invalid_value", f"{p} {problem}", p)
        for step in steps:
            v = step(v, p, d)
        # (a union's object keywords are its own as well; the spec's forms never have both)
        if obj is not None and isinstance(v, dict) and (not union or as_written):
            v = _object(v, p, d, obj)
        if to_float and type(v) is int:
            try:
                return float(v)
            except OverflowError:  # an integer literal of 309 digits or more
                # (bit_length, not str(): an int of over 4300 digits cannot be printed)
                digits = int(v.bit_length() * math.log10(2)) + 1
                raise AttemptError("invalid_value", f"{p} must be a finite number, got an integer "
                                                  f"of about {digits} digits, too large for a "
                                                  f"float", p) from None
        return v
    return _fast(run, allowed, steps, obj, nullable, union, as_written) or run


_ABSENT = object()
#: What a field of each simple kind needs to be valid, as generated code tests it.
_VALID = {"string": "type(x) is str and (x.isascii() or not SUR(x))",
          "integer": "type(x) is int and x.bit_length() <= 14000",
          "number": "type(x) is float and x - x == 0.0",
          "written_number": "(type(x) is float and x - x == 0.0) or "
                            "(type(x) is int and x.bit_length() <= 14000)",
          "boolean": "type(x) is bool",
          "enum": "type(x) is str and x in {t}"}


def _scalar_code(kind: str, run: Callable, texts: frozenset | None = None) -> Callable:
    """A one-line check of a scalar node that only lets a valid value through (anything else
    goes to the node's `run`), marked with its kind so an object's generated code tests it
    inline."""
    env = {"run": run, "SUR": _SURROGATE.search, "T": texts}
    _define(f"def fast(x, p, d):\n    return x if {_VALID[kind].format(t='T')} else "
            f"run(x, p, d)", env)
    fast = env.pop("fast")   # (see _define: the function must not stay in its own globals)
    fast.fast = (kind, texts) if kind == "enum" else (kind,)
    return fast


def _fast(run: Callable, allowed: frozenset | None, steps: list, obj: tuple | None,
          nullable: bool, union: bool, as_written: bool = False) -> Callable | None:
    """For the nodes most schemas are made of (one scalar type, or an object, with nothing
    else to check), a check that does only what a valid value needs; anything else (and every
    error) goes through `run`, so messages and results are the same."""
    if nullable or union or allowed is None or len(allowed) != 1:
        return None
    (t,) = allowed
    texts = getattr(steps[0], "texts", None) if len(steps) == 1 else None
    item = getattr(steps[0], "item", None) if len(steps) == 1 else None
    if t == "array" and item is not None:
        def array(v, p, d):
            if type(v) is list:
                return [item(x, f"{p}[{i}]", d) for i, x in enumerate(v)]
            return run(v, p, d)
        return array
    if t == "string" and texts:  # an enum of strings
        return _scalar_code("enum", run, texts)
    if steps:
        return None
    if t == "number" and as_written:   # (an int stays an int)
        return _scalar_code("written_number", run)
    if t in _VALID:
        return _scalar_code(t, run)
    if t == "object" and obj is not None:
        def object_(v, p, d):
            return _object(v, p, d, obj) if type(v) is dict else run(v, p, d)
        return _object_code(obj, object_) or object_
    return None


def _object_code(obj: tuple, general: Callable) -> Callable | None:
    """An object of named fields as one generated function: a valid value is checked field by
    field in straight-line code (the kinds in `_VALID` tested inline, any other field by its
    own check), with no path built unless a field is checked by its own check; at the first
    doubt — a key outside the schema, a field missing or of another type — the whole object
    goes to `general`, which gives the same result, drops and error as ever."""
    fields, missing_only, extra_run, lo, hi, _ = obj
    # (a key outside the fields goes to `general` whatever `extra_run` does with it)
    if missing_only or lo is not None or hi is not None or not fields or len(fields) > 200:
        return None
    env: dict = {"KEYS": frozenset(k for k, *_ in fields), "general": general,
                 "ABSENT": _ABSENT, "SUR": _SURROGATE.search}
    code = ["def fast(v, p, d):",
            "    if type(v) is not dict or not v.keys() <= KEYS:",
            "        return general(v, p, d)",
            "    n = len(d)",
            "    out = {}"]
    bail = "del d[n:]; return general(v, p, d)"
    for i, (k, run, required, dot_k) in enumerate(fields):
        env[f"K{i}"], env[f"R{i}"], env[f"P{i}"], env[f"T{i}"] = k, run, dot_k, None
        fast = getattr(run, "fast", None)
        code += [f"    x = v.get(K{i}, ABSENT)",
                 "    if x is ABSENT:",
                 f"        {bail if required else 'pass'}"]
        if fast is None:
            code += ["    else:", f"        out[K{i}] = R{i}(x, p + P{i}, d)"]
            continue
        if fast[0] == "enum":
            env[f"T{i}"] = fast[1]
        code += [f"    elif {_VALID[fast[0]].format(t=f'T{i}')}:", f"        out[K{i}] = x"]
        if fast[0] == "number":  # an integer for a number arrives as a float
            code += ["    elif type(x) is int and x.bit_length() < 1000:",
                     f"        out[K{i}] = float(x)"]
        code += ["    else:", f"        {bail}"]
    code.append("    return out")
    _define("\n".join(code), env)
    return env.pop("fast")   # (see _define)


_CODE: dict[str, Any] = {}


def _define(source: str, env: dict) -> None:
    """Run the definition `source` (made in this module: from `_VALID` and numbered names whose
    values are in `env`) in `env`. The code depends only on the kinds of a node's fields, not
    on its names or checks, so each source is compiled once: compiling took about 80 us a
    node, most of building a 50,000-property schema. The caller takes the function out of
    `env` (`env.pop("fast")`): left there, the function and its globals would be a reference
    cycle, which only the garbage collector frees, and a check is built per option, so every
    decision on a freshly built menu left a few for it (a recorded run's collections doubled)."""
    code = _CODE.get(source)
    if code is None:
        code = compile(source, "<openprogram.validator>", "exec")
        if len(_CODE) < 4096:
            _CODE[source] = code
    exec(code, env)  # noqa: S102 (code made here, from _VALID and numbered names only)


def _object(v: dict, p: str, d: list[str], obj: tuple) -> dict:
    fields, missing_only, extra_run, lo, hi, titles = obj
    if extra_run is not None:  # keys that are kept: text a key holds is JSON's too
        for k in v:
            if isinstance(k, str) and not k.isascii() and _SURROGATE.search(k):
                raise AttemptError("invalid_value", f"{p} (a key) {_bad_json_value(k)}",
                                 f"{p} (a key)")
    out = {}
    for k, run, required, dot_k in fields:
        if k in v:
            out[k] = run(v[k], p + dot_k, d)
        elif required:
            raise AttemptError("missing_required", f"{p}.{k} is required ({titles[k]})", f"{p}.{k}")
    for k in missing_only:
        if k not in v:
            raise AttemptError("missing_required", f"{p}.{k} is required", f"{p}.{k}")
        out[k] = any_value(v[k], f"{p}.{k}", d)
    if len(out) < len(v):
        for k, x in v.items():
            if k in out:
                continue
            if extra_run is None:
                d.append(f"{p}.{safe_key(k)}")
            else:
                out[k] = extra_run(x, f"{p}.{safe_key(k)}", d)
    n = len(v)  # as the specification counts: the keys given, dropped ones too
    if lo is not None and n < lo:
        raise AttemptError("invalid_value", f"{p} must have at least {lo} keys, got {n}", p)
    if hi is not None and n > hi:
        raise AttemptError("invalid_value", f"{p} must have at most {hi} keys, got {n}", p)
    return out
