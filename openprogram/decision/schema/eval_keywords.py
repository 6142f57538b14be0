"""The checks of each keyword schemaeval.py's `Evaluator` compiles, for a schema as written.

schemaeval.py reads a document (its `$id`s, anchors and pointers, the cycles it may not have),
compiles each subschema once and combines what its keywords say (`$ref`, `allOf`, `not`,
`if`-`then`-`else`); this module holds the step each other keyword compiles to — `type`, `enum`
/ `const`, the value keywords (their tests and texts are value_keywords.py's, shared with
validator.py), `anyOf` / `oneOf`, the object keywords (`properties`, `patternProperties`,
`additionalProperties`, `propertyNames`, `dependentRequired` / `dependentSchemas`), the array
keywords (`prefixItems`, `items`, `contains`) and `unevaluatedProperties` / `unevaluatedItems`
— with what every step returns (the annotations it made, `NONE` for none; `merge` joins them) and
the failure whose message is written only when read (`SchemaParseError`). The steps are a mixin
of `Evaluator` (`KeywordSteps`) rather than functions so each keeps the evaluator's compile
cache, patterns and error wording at hand as before the split; only building goes through it,
and a compiled step runs as the closure it always was.
"""
from __future__ import annotations

from ...base.errors import AttemptError, OptionError
from .budget import spend
from .reply_values import FORMAT_CHECKS, OPENAPI_FORMATS, equal, json_head, json_text, safe_key
from .value_keywords import (
    BOUNDS,
    SIZES,
    bound_text,
    first_repeat,
    format_text,
    is_finite,
    multiple_text,
    non_finite_text,
    not_multiple,
    pattern_text,
    repeat_text,
    size_text,
)
from .value_keywords import is_count as _count
from .value_keywords import is_number as _number

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["KeywordSteps", "SchemaParseError", "NONE", "fault", "merge"]

_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
_WORDS = {"null": "null", "boolean": "a boolean", "object": "an object", "array": "a list",
          "number": "a number", "string": "a string", "integer": "an integer"}
_PY = {"null": type(None), "boolean": bool, "object": dict, "array": list, "string": str}
NONE = (frozenset(), frozenset())   # a subschema's annotations: no property, no item


def _type_of(v: Any) -> str:
    if v is None:
        return "null"
    if v is True or v is False:
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is(v: Any, t: str) -> bool:
    if t == "integer":   # JSON Schema counts 1.0 as an integer
        return (isinstance(v, int) and not isinstance(v, bool)) or \
            (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return _type_of(v) == t


class SchemaParseError(AttemptError):
    """A `AttemptError` whose message is written when it is first read: inside `if`, `not`,
    `anyOf`, `contains` most failures only answer "no", and a caller asking only whether a
    value is valid never reads it; the message (the value's head as JSON) costs more than the
    check itself. It reads, prints and pickles as the `AttemptError` it stands for."""

    def __init__(self, kind: str, make: Callable[[], str], path: str):
        self.kind, self.path, self._make, self._text = kind, path, make, None

    @property
    def message(self) -> str:   # type: ignore[override]
        if self._text is None:
            self._text = self._make()
        return self._text

    @property
    def args(self) -> tuple:   # type: ignore[override]
        return (self.message,)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"AttemptError({self.kind!r}, {self.message!r}, {self.path!r})"

    def __reduce__(self) -> tuple:
        return AttemptError, (self.kind, self.message, self.path)


def fault(kind: str, make: Callable[[], str], p: str) -> AttemptError:
    """A step's failure, its message (`make()`) written only if it is read."""
    return SchemaParseError(kind, make, p)


class KeywordSteps:
    """The compilers of each keyword's step, for `Evaluator` (schemaeval.py), which provides
    what they build with: `_compile(subschema, base, ptr)` (a subschema's check, compiled once),
    `_pattern(text)` (a pattern compiled once), `fail(ptr, text)` (the `OptionError` naming the
    schema's place) and `annotations` (the words kept but not judged)."""

    def _bad(self, ptr: str, key: str, what: str) -> None:
        raise self.fail(ptr, f"{key} takes {what}")

    def _scalar_steps(self, s: dict, ptr: str) -> list[Callable]:
        steps = []
        if "type" in s:
            types = s["type"]
            types = [types] if isinstance(types, str) else types
            if not isinstance(types, list) or not types or \
                    not all(t in _TYPES for t in types):
                raise self.fail(ptr, f"type must be a JSON type name or a list of them "
                                     f"({', '.join(_TYPES)}), got {json_head(s['type'])}")
            if s.get("nullable") is True:
                types = [*types, "null"]
            words = " or ".join(_WORDS[t] for t in types)
            exact = frozenset(_PY[t] for t in types if t in _PY)
            if "number" in types:
                exact |= {int, float}
            elif "integer" in types:
                exact |= {int}

            def type_(v, p):
                if type(v) in exact:
                    return NONE
                for t in types:
                    if _is(v, t):
                        return NONE
                raise fault("type_mismatch", lambda: f"{p} must be {words}, got {_type_of(v)} "
                                             f"{json_head(v)}", p)
            steps.append(type_)
        if "enum" in s or "const" in s:
            if "const" in s:
                values, what = [s["const"]], f"always {json_text(s['const'])}"
            else:
                values = s["enum"]
                if not isinstance(values, list):
                    raise self.fail(ptr, "enum takes a list of the allowed values")
                what = "one of " + ", ".join(json_text(x) for x in values) if values else \
                    "nothing (the enum is empty)"
            if s.get("nullable") is True:
                values = [*values, None]
            texts = frozenset(x for x in values if type(x) is str)

            def choice(v, p):
                if type(v) is str and v in texts:
                    return NONE
                for allowed in values:
                    if equal(v, allowed):
                        return NONE
                raise fault("enum_violation", lambda: f"{p} must be {what}; got {json_head(v)}", p)
            steps.append(choice)
        for key, test, text in BOUNDS:
            if key in s:
                b = s[key]
                if not _number(b):
                    raise self.fail(ptr, f"{key} takes a number, got {json_head(b)}")
                if not is_finite(b):
                    raise self.fail(ptr, non_finite_text(key, b))
                steps.append(_bound(test, b, text))
        if "multipleOf" in s:
            m = s["multipleOf"]
            if not _number(m) or m <= 0:
                raise self.fail(ptr, f"multipleOf takes a number above 0, got {json_head(m)}")
            if not is_finite(m):
                raise self.fail(ptr, non_finite_text("multipleOf", m))
            steps.append(_multiple(m))
        for key, kind, unit, more in SIZES:
            if key in s:
                if not _count(s[key]):
                    raise self.fail(ptr, f"{key} takes a non-negative integer, got "
                                         f"{json_head(s[key])}")
                steps.append(_size(kind, int(s[key]), more, unit))
        if "pattern" in s:
            text = s["pattern"]
            try:
                rx = self._pattern(text)
            except OptionError as exc:
                raise self.fail(ptr, str(exc)) from None

            def pattern(v, p):
                if isinstance(v, str) and not rx.search(v, p):
                    raise fault("invalid_value", lambda: pattern_text(p, v, text), p)
                return NONE
            steps.append(pattern)
        fmt = s.get("format")
        if fmt in FORMAT_CHECKS:
            test = FORMAT_CHECKS[fmt]

            def form(v, p):
                if isinstance(v, str) and not test(v):
                    raise fault("invalid_value", lambda: format_text(p, v, fmt), p)
                return NONE
            steps.append(form)
        elif fmt in OPENAPI_FORMATS:
            lo, hi = OPENAPI_FORMATS[fmt]

            def bits(v, p):
                if _number(v) and lo is not None and not lo <= v <= hi:
                    raise fault("invalid_value", lambda: f"{p} must fit the format {fmt} "
                                                 f"(from {lo} to {hi}), got {json_head(v)}", p)
                return NONE
            steps.append(bits)
        elif fmt is not None:
            self.annotations.append(f"format {fmt!r} at {ptr}")
        if s.get("uniqueItems") is True:
            def unique(v, p):
                if isinstance(v, list):
                    at = first_repeat(v)
                    if at is not None:
                        raise fault("invalid_value", lambda: repeat_text(p, *at), f"{p}[{at[0]}]")
                return NONE
            steps.append(unique)
        return steps

    def _alternatives(self, s: dict, key: str, base: str, ptr: str) -> Callable:
        runs = [self._compile(x, base, f"{ptr}/{key}/{i}") for i, x in enumerate(s[key])]
        one = key == "oneOf"

        def alternatives(v, p):
            spend(len(runs), p)
            found, first, passed = [], None, 0
            for run in runs:
                try:
                    found.append(run(v, p))
                    passed += 1
                except AttemptError as err:
                    if first is None or (first.kind == "type_mismatch"
                                         and err.kind != "type_mismatch"):
                        first = err
            if not passed:
                assert first is not None
                raise fault(first.kind, lambda: f"{p} fits none of the alternatives of {key}; the "
                                        f"closest: {first}", first.path or p)
            if one and passed > 1:
                raise fault("invalid_value", lambda: f"{p} fits {passed} of the alternatives of "
                                             f"oneOf; it must fit exactly one", p)
            return merge(found)
        return alternatives

    def _object_steps(self, s: dict, base: str, ptr: str) -> list[Callable]:
        steps = []
        c = self._compile
        required = s.get("required")
        if required is not None:
            if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                raise self.fail(ptr, "required takes a list of property names")

            def required_(v, p):
                if isinstance(v, dict):
                    for r in required:
                        if r not in v:
                            raise fault("missing_required", lambda r=r: f"{p}.{r} is required",
                                        f"{p}.{r}")
                return NONE
            steps.append(required_)
        deps = s.get("dependentRequired")
        if deps is not None:
            if not isinstance(deps, dict) or not all(
                    isinstance(x, list) and all(isinstance(r, str) for r in x)
                    for x in deps.values()):
                raise self.fail(ptr, "dependentRequired takes an object of lists of property "
                                     "names")

            def dependent_required(v, p):
                if isinstance(v, dict):
                    for k, needs in deps.items():
                        if k in v:
                            for r in needs:
                                if r not in v:
                                    raise fault("missing_required",
                                                lambda r=r, k=k: f"{p}.{r} is required when "
                                                                 f"{p}.{k} is given",
                                                f"{p}.{r}")
                return NONE
            steps.append(dependent_required)
        if "dependentSchemas" in s:
            dep_runs = {k: c(x, base, f"{ptr}/dependentSchemas/{k}")
                        for k, x in s["dependentSchemas"].items()}

            def dependent_schemas(v, p):
                if not isinstance(v, dict):
                    return NONE
                spend(len(dep_runs), p)
                return merge([run(v, p) for k, run in dep_runs.items() if k in v])
            steps.append(dependent_schemas)
        if "propertyNames" in s:
            names = c(s["propertyNames"], base, f"{ptr}/propertyNames")

            def property_names(v, p):
                if isinstance(v, dict):
                    for k in v:
                        names(k, f"{p} (the key {json_head(safe_key(k))})")
                return NONE
            steps.append(property_names)
        props = {k: c(x, base, f"{ptr}/properties/{k}")
                 for k, x in (s.get("properties") or {}).items()}
        patterns = []
        for text, x in (s.get("patternProperties") or {}).items():
            try:
                rx = self._pattern(text)
            except OptionError as exc:
                raise self.fail(ptr, f"patternProperties: {exc}") from None
            # (a pattern `re` runs in bounded work is called directly: the hot loop)
            patterns.append((rx.plain.search if rx.plain is not None else None, rx.plain_max,
                             rx, c(x, base, f"{ptr}/patternProperties/{text}")))
        extra = c(s["additionalProperties"], base, f"{ptr}/additionalProperties") \
            if "additionalProperties" in s else None
        if props and not patterns and extra is None:
            def named_only(v, p):   # (the common case: the named keys, looked up)
                if not isinstance(v, dict):
                    return NONE
                seen = []
                for k, run in props.items():
                    if k in v:
                        run(v[k], p + "." + k if k.isascii() else f"{p}.{safe_key(k)}")
                        seen.append(k)
                return (frozenset(seen), frozenset()) if seen else NONE
            steps.append(named_only)
        elif props or patterns or extra is not None:
            def properties(v, p):
                if not isinstance(v, dict):
                    return NONE
                seen = set()
                for k, x in v.items():
                    here = p + "." + k if k.isascii() else f"{p}.{safe_key(k)}"
                    run = props.get(k)
                    matched = run is not None
                    if matched:
                        run(x, here)
                    spend(len(patterns), here)
                    for find, most, rx, prun in patterns:
                        if find(k) if find is not None and len(k) <= most else \
                                rx.search(k, here):
                            prun(x, here)
                            matched = True
                    if not matched and extra is not None:
                        if s["additionalProperties"] is False:
                            raise fault("invalid_value",
                                        lambda here=here: f"{here} is not allowed (the schema "
                                                          f"allows no other keys)", here)
                        extra(x, here)
                        matched = True
                    if matched:
                        seen.add(k)
                return (frozenset(seen), frozenset())
            steps.append(properties)
        return steps

    def _array_steps(self, s: dict, base: str, ptr: str) -> list[Callable]:
        steps = []
        c = self._compile
        prefix = [c(x, base, f"{ptr}/prefixItems/{i}") for i, x in
                  enumerate(s.get("prefixItems") or [])]
        items = c(s["items"], base, f"{ptr}/items") if "items" in s else None
        if prefix or items is not None:
            n = len(prefix)

            def each(v, p):
                if not isinstance(v, list):
                    return NONE
                for i, x in enumerate(v):
                    if i < n:
                        prefix[i](x, f"{p}[{i}]")
                    elif items is not None:
                        items(x, f"{p}[{i}]")
                    else:
                        return (frozenset(), frozenset(range(n)))
                return (frozenset(), frozenset(range(len(v))))
            steps.append(each)
        if "contains" in s:
            inner = c(s["contains"], base, f"{ptr}/contains")
            lo, hi = s.get("minContains", 1), s.get("maxContains")
            for k, x in (("minContains", lo), ("maxContains", hi)):
                if x is not None and not _count(x):
                    raise self.fail(ptr, f"{k} takes a non-negative integer, got {json_head(x)}")

            def contains(v, p):
                if not isinstance(v, list):
                    return NONE
                spend(len(v), p)
                hits = []
                for i, x in enumerate(v):
                    try:
                        inner(x, f"{p}[{i}]")
                        hits.append(i)
                    except AttemptError:
                        pass
                if len(hits) < lo:
                    raise fault("invalid_value", lambda: f"{p} must hold at least {int(lo)} "
                                                 f"item(s) matching 'contains' ({ptr}/contains), "
                                                 f"holds {len(hits)}", p)
                if hi is not None and len(hits) > hi:
                    raise fault("invalid_value", lambda: f"{p} must hold at most {int(hi)} item(s) "
                                                 f"matching 'contains', holds {len(hits)}", p)
                return (frozenset(), frozenset(hits))
            steps.append(contains)
        return steps

    def _unevaluated(self, s: dict, base: str, ptr: str) -> Callable | None:
        props = self._compile(s["unevaluatedProperties"], base, f"{ptr}/unevaluatedProperties") \
            if "unevaluatedProperties" in s else None
        items = self._compile(s["unevaluatedItems"], base, f"{ptr}/unevaluatedItems") \
            if "unevaluatedItems" in s else None
        if props is None and items is None:
            return None
        no_props = s.get("unevaluatedProperties") is False
        no_items = s.get("unevaluatedItems") is False

        def unevaluated(v, p, got):
            done_props, done_items = got
            if props is not None and isinstance(v, dict):
                extra = [k for k in v if k not in done_props]
                for k in extra:
                    here = f"{p}.{safe_key(k)}"
                    if no_props:
                        raise fault("invalid_value",
                                    lambda here=here: f"{here} is not allowed (no part of the "
                                                      f"schema allows this key)", here)
                    props(v[k], here)
                done_props = done_props | frozenset(extra)
            if items is not None and isinstance(v, list):
                extra = [i for i in range(len(v)) if i not in done_items]
                for i in extra:
                    if no_items:
                        raise fault("invalid_value",
                                    lambda i=i: f"{p}[{i}] is not allowed (no part of the "
                                                f"schema allows this item)", f"{p}[{i}]")
                    items(v[i], f"{p}[{i}]")
                done_items = done_items | frozenset(extra)
            return (done_props, done_items)
        return unevaluated


def merge(found: list) -> tuple:
    """The annotations of several subschemas that all passed: what any of them evaluated."""
    found = [f for f in found if f is not NONE]
    if not found:
        return NONE
    if len(found) == 1:
        return found[0]
    return (frozenset().union(*(f[0] for f in found)), frozenset().union(*(f[1] for f in found)))


def _bound(test: Callable, b: Any, text: str) -> Callable:
    def bound(v, p):
        if _number(v) and not test(v, b):
            raise fault("invalid_value", lambda: bound_text(p, v, text, b), p)
        return NONE
    return bound


def _multiple(m: Any) -> Callable:
    def multiple(v, p):
        if _number(v) and not_multiple(v, m):
            raise fault("invalid_value", lambda: multiple_text(p, v, m), p)
        return NONE
    return multiple


def _size(kind: type, n: int, at_least: bool, unit: str) -> Callable:
    def size(v, p):
        if isinstance(v, kind) and (len(v) < n if at_least else len(v) > n):
            raise fault("invalid_value", lambda: size_text(p, n, at_least, unit, len(v)), p)
        return NONE
    return size
