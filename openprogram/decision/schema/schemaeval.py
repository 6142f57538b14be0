"""JSON Schema draft 2020-12 as written: the whole validation vocabulary, for a schema of
the user's.

validator.py's compiler covers the keywords most schemas are made of, fast, and turns values
into what an option receives. A schema brought from elsewhere (`JsonSchema(...)`, a tool
definition) may use any keyword of the specification, and means by it what the specification
says: this module reads such a document once (`Evaluator(schema, where)`: every `$id`,
`$anchor` and JSON Pointer of the document resolved, every keyword's value checked, an
`OptionError` naming the keyword and its place otherwise) and judges a value against it without
changing it — boolean schemas anywhere, `allOf` / `anyOf` / `oneOf` / `not` / `if`-`then`-`else`,
`patternProperties`, `propertyNames`, `dependentRequired` / `dependentSchemas`, `contains`
with its bounds, and `unevaluatedProperties` / `unevaluatedItems` through the annotations each
subschema reports (the names and positions it evaluated). What it cannot follow is refused at
build time by name: a reference to another document (inline it under `$defs`) and
`$dynamicRef` / `$dynamicAnchor`. A failure is a `AttemptError` with the kind and the path of the
value at fault, as validator.py's. It is long for one concept, a document of the whole
vocabulary judged: each keyword's check is written once (the value keywords' tests and texts
are value_keywords.py's, shared with validator.py), and what stays beside them belongs to the
judging — the failure whose message is written only when read (`SchemaParseError`, since
inside `not` / `if` / `anyOf` most failures are never read) and the delivery of `1.0` as `1`
(`_whole`), which asks the same compiled branches which alternative a value fits.
"""
from __future__ import annotations

from ...base.errors import AttemptError, OptionError
from .budget import spend
from .patterns import compile_pattern
from .refs import LISTS as _LISTS
from .refs import MAPS as _MAPS
from .refs import SINGLE as _SINGLE
from .refs import Document
from .refs import join_uri as _join
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

__all__ = ["Evaluator", "KEYWORDS"]

#: Every keyword this module gives a meaning to (the rest are annotations).
KEYWORDS = frozenset({
    *_SINGLE, *_LISTS, *_MAPS, "type", "enum", "const", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties",
    "minProperties", "required", "dependentRequired", "format", "$ref", "$id", "$anchor",
    "nullable"})
_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
_WORDS = {"null": "null", "boolean": "a boolean", "object": "an object", "array": "a list",
          "number": "a number", "string": "a string", "integer": "an integer"}
_PY = {"null": type(None), "boolean": bool, "object": dict, "array": list, "string": str}
_NONE = (frozenset(), frozenset())   # a subschema's annotations: no property, no item
_HOLDS_FLOATS = (float, dict, list)   # the values `_whole` may change


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


def _has_float(v: Any) -> bool:
    """Whether a JSON value holds a float anywhere (else no integer is to be written as one)."""
    stack = [v]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is float:
            return True
        if t is dict:
            stack += x.values()
        elif t is list:
            stack += x
    return False


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


def _fail(kind: str, make: Callable[[], str], p: str) -> AttemptError:
    return SchemaParseError(kind, make, p)


class Evaluator:
    """A JSON Schema document read once: `evaluator.check(value, path)` raises `AttemptError`
    for a value the schema does not allow, and returns the value unchanged otherwise."""

    def __init__(self, root: Any, where: str, compile: bool = True):
        self.root, self.where = root, where
        self.doc = Document(root, where).scan()   # its $ids, $anchors and pointers
        self.pointers = self.doc.pointers     # id(node) -> its JSON Pointer, for messages
        self.nodes = self.doc.nodes           # every subschema: (node, base, pointer)
        self.compiled: dict[tuple, list] = {}
        self.annotations: list[str] = []
        self.patterns: dict[str, Any] = {}    # pattern text -> its Pattern, compiled once
        self.integers = any(n.get("type") == "integer" or (isinstance(n.get("type"), list)
                                                           and "integer" in n["type"])
                            for n, _, _ in self.nodes)
        self._no_empty_cycles()
        if compile:   # (without: the document's references checked, and nothing more)
            self.run = self._compile(root, "", "#")

    def fail(self, ptr: str, text: str) -> OptionError:
        return OptionError(f"{self.where}: {text} (at {ptr} of the schema)")

    def check(self, value: Any, path: str) -> Any:
        self.run(value, path)
        return self._whole(self.root, "", value, 0) if self.integers and _has_float(value) \
            else value

    def _whole(self, s: Any, base: str, v: Any, depth: int) -> Any:
        """A valid `v` with each integer-valued float that the schema declares an integer
        written as one: JSON Schema counts `1.0` an integer, and a Python function asking for
        an int gets `1`. The declaration may sit in the structure (properties, pattern-keyed
        and other properties, items, prefixItems, $ref, allOf) or in a branch the value takes:
        the first alternative of anyOf / oneOf it fits, `then` when it fits `if` (and `if`
        itself), `else` when not, the dependentSchemas of the keys it has."""
        if type(v) not in _HOLDS_FLOATS or not isinstance(s, dict) or depth > 200:
            return v   # (a string, an int, a boolean, null: nothing to write as an int)
        if isinstance(s.get("$id"), str):
            base = _join(base, s["$id"]).partition("#")[0]
        if "$ref" in s:
            target, tbase, _ = self._resolve(s["$ref"], base, "#")
            v = self._whole(target, tbase, v, depth + 1)
        t = s.get("type")
        if type(v) is float:
            types = (t,) if isinstance(t, str) else t if isinstance(t, list) else ()
            if "integer" in types and "number" not in types and v.is_integer():
                return int(v)
        elif type(v) is dict and ("properties" in s or "patternProperties" in s
                                  or "additionalProperties" in s):
            v = {k: self._whole_key(s, base, k, x, depth) if type(x) in _HOLDS_FLOATS else x
                 for k, x in v.items()}
        elif type(v) is list and (isinstance(s.get("prefixItems"), list) or "items" in s):
            prefix, items = s.get("prefixItems") or [], s.get("items")
            v = [self._whole(prefix[i] if i < len(prefix) else items, base, x, depth + 1)
                 for i, x in enumerate(v)]
        for part in s.get("allOf") or ():   # every part holds, so each one's types do
            v = self._whole(part, base, v, depth + 1)
        for key in ("anyOf", "oneOf"):
            for part in s.get(key) or ():
                if self._fits(part, base, v):
                    v = self._whole(part, base, v, depth + 1)
                    break
        if "if" in s:
            if self._fits(s["if"], base, v):
                for key in ("if", "then"):
                    v = self._whole(s.get(key), base, v, depth + 1)
            else:
                v = self._whole(s.get("else"), base, v, depth + 1)
        if type(v) is dict and isinstance(s.get("dependentSchemas"), dict):
            for k, part in s["dependentSchemas"].items():
                if k in v:
                    v = self._whole(part, base, v, depth + 1)
        return v

    def _whole_key(self, s: dict, base: str, k: str, x: Any, depth: int) -> Any:
        """One property's value, with the integers of every subschema that judges it."""
        props = s.get("properties")
        matched = isinstance(props, dict) and k in props
        if matched:
            x = self._whole(props[k], base, x, depth + 1)
        for text, sub in (s.get("patternProperties") or {}).items():
            if self._pattern(text).search(k):
                x, matched = self._whole(sub, base, x, depth + 1), True
        if not matched and isinstance(s.get("additionalProperties"), dict):
            x = self._whole(s["additionalProperties"], base, x, depth + 1)
        return x

    def _fits(self, s: Any, base: str, v: Any) -> bool:
        """Whether `v` is valid under the subschema `s` (compiled once, with the document)."""
        try:
            self._compile(s, base, self.pointers.get(id(s), "#"))(v, "")
        except AttemptError:
            return False
        return True

    def _pattern(self, text: str) -> Any:
        rx = self.patterns.get(text)
        if rx is None:
            rx = self.patterns[text] = compile_pattern(text)
        return rx

    # -- reading the document ------------------------------------------------------------------
    def _no_empty_cycles(self) -> None:
        """Refuse a cycle of references with no structure in between (`a` -> `b` -> `a`, or
        through allOf / anyOf / not ...): it would judge the same value against itself for
        ever. A cycle through properties or items is a recursive type, and ends with the value."""
        state: dict[int, int] = {}   # id -> 1 on the path, 2 done
        stack = [(node, base, ptr, False) for node, base, ptr in reversed(self.nodes)]
        while stack:
            node, base, ptr, leaving = stack.pop()
            if leaving:
                state[id(node)] = 2
                continue
            if not isinstance(node, dict) or state.get(id(node)) == 2:
                continue
            if state.get(id(node)) == 1:
                raise self.fail(ptr, "the references form a cycle with no properties or items "
                                     "in between, so no value could ever be judged; give the "
                                     "recursion a shape (a property or items)")
            state[id(node)] = 1
            stack.append((node, base, ptr, True))
            if isinstance(node.get("$id"), str):
                base = _join(base, node["$id"]).partition("#")[0]
            if "$ref" in node:
                target, tbase, tptr = self._resolve(node["$ref"], base, ptr)
                stack.append((target, tbase, tptr, False))
            for k in ("not", "if", "then", "else"):
                if k in node:
                    stack.append((node[k], base, f"{ptr}/{k}", False))
            for k in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(k), list):
                    stack += [(x, base, f"{ptr}/{k}/{i}", False) for i, x in enumerate(node[k])]
            if isinstance(node.get("dependentSchemas"), dict):
                stack += [(x, base, f"{ptr}/dependentSchemas/{n}", False)
                          for n, x in node["dependentSchemas"].items()]

    def _resolve(self, ref: Any, base: str, ptr: str) -> tuple[Any, str, str]:
        return self.doc.resolve(ref, base, ptr)

    # -- compiling -----------------------------------------------------------------------------
    def _compile(self, s: Any, base: str, ptr: str) -> Callable:
        key = (id(s), base)
        cell = self.compiled.get(key)
        if cell is not None:
            return cell[0] if cell else (lambda v, p: cell[0](v, p))   # a recursive schema
        cell = self.compiled[key] = []
        run = self._node(s, base, ptr)
        cell.append(run)
        return run

    def _node(self, s: Any, base: str, ptr: str) -> Callable:
        if s is True:
            return lambda v, p: _NONE
        if s is False:
            def nothing(v, p):
                raise _fail("invalid_value", lambda: f"{p} must not be given (the schema allows no "
                                             f"value here)", p)
            return nothing
        if not isinstance(s, dict):
            raise self.fail(ptr, f"a schema is an object (or true / false), got {json_head(s)}")
        if "$id" in s and isinstance(s["$id"], str):
            base = _join(base, s["$id"]).partition("#")[0]
        for k in s:
            if k not in KEYWORDS and isinstance(k, str) and not k.startswith("x-"):
                self.annotations.append(f"{k!r} at {ptr}")
        steps: list[Callable] = []
        c = self._compile
        if "$ref" in s:
            target, tbase, tptr = self._resolve(s["$ref"], base, ptr)
            steps.append(c(target, tbase, tptr))
        steps += self._scalar_steps(s, ptr)
        if "items" in s and isinstance(s["items"], list):
            raise self.fail(ptr, "items holds one schema in draft 2020-12; a list of schemas "
                                 "(one per position) is written prefixItems")
        for k in _LISTS:
            if k in s and (not isinstance(s[k], list) or not s[k]):
                self._bad(ptr, k, "a non-empty list of schemas")
        for k in _MAPS:
            if k in s and not isinstance(s[k], dict):
                self._bad(ptr, k, "an object of schemas")
        if "allOf" in s:
            parts = [c(x, base, f"{ptr}/allOf/{i}") for i, x in enumerate(s["allOf"])]

            def all_of(v, p):
                spend(len(parts), p)
                return _merge([run(v, p) for run in parts])
            steps.append(all_of)
        for key in ("anyOf", "oneOf"):
            if key in s:
                steps.append(self._alternatives(s, key, base, ptr))
        if "not" in s:
            inner = c(s["not"], base, f"{ptr}/not")

            def not_(v, p):
                spend(1, p)
                try:
                    inner(v, p)
                except AttemptError:
                    return _NONE
                raise _fail("invalid_value", lambda: f"{p} must not match the schema under 'not' "
                                             f"({ptr}/not); got {json_head(v)}", p)
            steps.append(not_)
        if "if" in s:
            cond = c(s["if"], base, f"{ptr}/if")
            then = c(s["then"], base, f"{ptr}/then") if "then" in s else None
            else_ = c(s["else"], base, f"{ptr}/else") if "else" in s else None

            def if_(v, p):
                spend(2, p)
                try:
                    got = cond(v, p)
                except AttemptError:
                    return else_(v, p) if else_ is not None else _NONE
                return _merge([got, then(v, p)]) if then is not None else got
            steps.append(if_)
        steps += self._object_steps(s, base, ptr)
        steps += self._array_steps(s, base, ptr)
        unevaluated = self._unevaluated(s, base, ptr)
        nullable = s.get("nullable") is True

        def run(v, p):
            if v is None and nullable:
                return _NONE
            got = _NONE
            for step in steps:
                found = step(v, p)
                if found is not _NONE:
                    got = found if got is _NONE else (got[0] | found[0], got[1] | found[1])
            return unevaluated(v, p, got) if unevaluated else got
        if not steps and unevaluated is None:
            return lambda v, p: _NONE
        if len(steps) == 1 and unevaluated is None and not nullable:
            return steps[0]
        return run

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
                    return _NONE
                for t in types:
                    if _is(v, t):
                        return _NONE
                raise _fail("type_mismatch", lambda: f"{p} must be {words}, got {_type_of(v)} "
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
                    return _NONE
                for allowed in values:
                    if equal(v, allowed):
                        return _NONE
                raise _fail("enum_violation", lambda: f"{p} must be {what}; got {json_head(v)}", p)
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
                    raise _fail("invalid_value", lambda: pattern_text(p, v, text), p)
                return _NONE
            steps.append(pattern)
        fmt = s.get("format")
        if fmt in FORMAT_CHECKS:
            test = FORMAT_CHECKS[fmt]

            def form(v, p):
                if isinstance(v, str) and not test(v):
                    raise _fail("invalid_value", lambda: format_text(p, v, fmt), p)
                return _NONE
            steps.append(form)
        elif fmt in OPENAPI_FORMATS:
            lo, hi = OPENAPI_FORMATS[fmt]

            def bits(v, p):
                if _number(v) and lo is not None and not lo <= v <= hi:
                    raise _fail("invalid_value", lambda: f"{p} must fit the format {fmt} "
                                                 f"(from {lo} to {hi}), got {json_head(v)}", p)
                return _NONE
            steps.append(bits)
        elif fmt is not None:
            self.annotations.append(f"format {fmt!r} at {ptr}")
        if s.get("uniqueItems") is True:
            def unique(v, p):
                if isinstance(v, list):
                    at = first_repeat(v)
                    if at is not None:
                        raise _fail("invalid_value", lambda: repeat_text(p, *at), f"{p}[{at[0]}]")
                return _NONE
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
                raise _fail(first.kind, lambda: f"{p} fits none of the alternatives of {key}; the "
                                        f"closest: {first}", first.path or p)
            if one and passed > 1:
                raise _fail("invalid_value", lambda: f"{p} fits {passed} of the alternatives of "
                                             f"oneOf; it must fit exactly one", p)
            return _merge(found)
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
                            raise _fail("missing_required", lambda r=r: f"{p}.{r} is required",
                                        f"{p}.{r}")
                return _NONE
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
                                    raise _fail("missing_required",
                                                lambda r=r, k=k: f"{p}.{r} is required when "
                                                                 f"{p}.{k} is given",
                                                f"{p}.{r}")
                return _NONE
            steps.append(dependent_required)
        if "dependentSchemas" in s:
            dep_runs = {k: c(x, base, f"{ptr}/dependentSchemas/{k}")
                        for k, x in s["dependentSchemas"].items()}

            def dependent_schemas(v, p):
                if not isinstance(v, dict):
                    return _NONE
                spend(len(dep_runs), p)
                return _merge([run(v, p) for k, run in dep_runs.items() if k in v])
            steps.append(dependent_schemas)
        if "propertyNames" in s:
            names = c(s["propertyNames"], base, f"{ptr}/propertyNames")

            def property_names(v, p):
                if isinstance(v, dict):
                    for k in v:
                        names(k, f"{p} (the key {json_head(safe_key(k))})")
                return _NONE
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
                    return _NONE
                seen = []
                for k, run in props.items():
                    if k in v:
                        run(v[k], p + "." + k if k.isascii() else f"{p}.{safe_key(k)}")
                        seen.append(k)
                return (frozenset(seen), frozenset()) if seen else _NONE
            steps.append(named_only)
        elif props or patterns or extra is not None:
            def properties(v, p):
                if not isinstance(v, dict):
                    return _NONE
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
                            raise _fail("invalid_value",
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
                    return _NONE
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
                    return _NONE
                spend(len(v), p)
                hits = []
                for i, x in enumerate(v):
                    try:
                        inner(x, f"{p}[{i}]")
                        hits.append(i)
                    except AttemptError:
                        pass
                if len(hits) < lo:
                    raise _fail("invalid_value", lambda: f"{p} must hold at least {int(lo)} "
                                                 f"item(s) matching 'contains' ({ptr}/contains), "
                                                 f"holds {len(hits)}", p)
                if hi is not None and len(hits) > hi:
                    raise _fail("invalid_value", lambda: f"{p} must hold at most {int(hi)} item(s) "
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
                        raise _fail("invalid_value",
                                    lambda here=here: f"{here} is not allowed (no part of the "
                                                      f"schema allows this key)", here)
                    props(v[k], here)
                done_props = done_props | frozenset(extra)
            if items is not None and isinstance(v, list):
                extra = [i for i in range(len(v)) if i not in done_items]
                for i in extra:
                    if no_items:
                        raise _fail("invalid_value",
                                    lambda i=i: f"{p}[{i}] is not allowed (no part of the "
                                                f"schema allows this item)", f"{p}[{i}]")
                    items(v[i], f"{p}[{i}]")
                done_items = done_items | frozenset(extra)
            return (done_props, done_items)
        return unevaluated


def _merge(found: list) -> tuple:
    """The annotations of several subschemas that all passed: what any of them evaluated."""
    found = [f for f in found if f is not _NONE]
    if not found:
        return _NONE
    if len(found) == 1:
        return found[0]
    return (frozenset().union(*(f[0] for f in found)), frozenset().union(*(f[1] for f in found)))


def _bound(test: Callable, b: Any, text: str) -> Callable:
    def bound(v, p):
        if _number(v) and not test(v, b):
            raise _fail("invalid_value", lambda: bound_text(p, v, text, b), p)
        return _NONE
    return bound


def _multiple(m: Any) -> Callable:
    def multiple(v, p):
        if _number(v) and not_multiple(v, m):
            raise _fail("invalid_value", lambda: multiple_text(p, v, m), p)
        return _NONE
    return multiple


def _size(kind: type, n: int, at_least: bool, unit: str) -> Callable:
    def size(v, p):
        if isinstance(v, kind) and (len(v) < n if at_least else len(v) > n):
            raise _fail("invalid_value", lambda: size_text(p, n, at_least, unit, len(v)), p)
        return _NONE
    return size
