"""The validator: a model-written value checked against a JSON Schema, with error kinds and paths.

`compile_schema(schema, where)` reads a JSON Schema (draft 2020-12, the keywords in `SUPPORTED`)
once, when the option set is built, and returns a `Checker`: `checker(value, path, dropped)`
returns the value as the option receives it or raises `AttemptError` with the kind
(`type_mismatch`, `enum_violation`, `missing_required`, `invalid_value`) and the path of the
field at fault (`args.steps[0].action`). A keyword that would change what is valid but is not
supported is refused there and then (`OptionError` naming the keyword and where it is);
words that are not JSON Schema (`optional`, `x-...`) and formats other than the checked ones
are annotations, kept and reported once (`Checker.annotations`). Where the spec's own forms
differ from the specification on purpose: a boolean is never an integer or a number, fields
outside the schema are dropped (their paths recorded) rather than refused, `2.0` is not an
integer, and an integer given for a `number` arrives as a float. A schema of the user's
(`as_written=True`: `JsonSchema`, a tool definition) follows the specification instead (keys
kept or refused, `2.0` an integer), and one using a keyword beyond `SUPPORTED` is judged
whole by schemaeval.py; what a reply may hold at all (finite numbers, valid Unicode) is
reply_values.py's, checked here for every value wherever it sits. Internal schemas built from
Python types (fields.py) carry, under keys no JSON Schema has, the name messages use (`NAME`),
a function that turns the validated JSON value into the Python one (`PY`: an Enum member, a
date) and one that validates the node itself (`CHECK`: a class of the user's, validated by
pydantic). It is long for one concept, reading a schema into checks: each supported
keyword's step is written out once; what a compiled node runs per value, with its fast paths for
the nodes most schemas are made of, is compiled_nodes.py's.
"""
from __future__ import annotations

from ...base.errors import AttemptError, OptionError
from .budget import counted, measure, spend
from .compiled_nodes import any_value as _any
from .compiled_nodes import make_node as _make_node
from .compiled_nodes import no_value as _nothing
from .compiled_nodes import refused_key as _refused
from .reader import SchemaDoc, type_name
from .reply_values import (
    FORMAT_CHECKS,
    OPENAPI_FORMATS,
    PYTHON_FORMAT_CHECKS,
    check_json_value,
    describe_value,
    equal,
    is_json_value,
    json_head,
    json_text,
    safe_key,
)
from .type_table import SHORT
from .value_keywords import (
    BOUNDS,
    bound_text,
    first_repeat,
    format_text,
    is_finite,
    is_number,
    multiple_text,
    non_finite_text,
    not_multiple,
    pattern_text,
    repeat_text,
    size_text,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["compile_schema", "merge_all_of", "Checker", "SUPPORTED", "REFUSED", "ANNOTATIONS",
           "FORMATS", "PY", "CHECK", "NAME", "check_json_value", "describe_value", "json_head",
           "safe_key", "equal"]

#: Keywords that decide what is valid, all checked.
SUPPORTED = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "minItems", "maxItems", "uniqueItems", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "format", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "nullable",
    "minProperties", "maxProperties"})
#: Keywords of the specification that only describe (kept, never reported).
ANNOTATIONS = frozenset({
    "description", "title", "examples", "default", "$comment", "$schema", "$id", "readOnly",
    "writeOnly", "deprecated", "contentMediaType", "contentEncoding", "discriminator"})
#: Standard keywords that change what is valid and are not compiled here: refused when built
#: for the spec's forms; for a schema as written, schemaeval.py judges them.
REFUSED = frozenset({
    "if", "then", "else", "not", "patternProperties", "dependentRequired", "dependentSchemas",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains",
    "maxContains", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
    "additionalItems", "dependencies", "$anchor", "$vocabulary", "contentSchema"})
#: The `format` values checked; any other is an annotation (OpenAPI's numeric ones are bounds).
FORMATS = frozenset(FORMAT_CHECKS)
#: Keywords only a schema as written may use (schemaeval.py judges a document that has one).
WRITTEN_ONLY = REFUSED | {"allOf", "$id"}

PY = object()     # internal key: JSON value -> Python value, after validation
CHECK = object()  # internal key: a function that validates the node itself
NAME = object()   # internal key: the type's name in error messages (`list[str]`, `Order`)



class Checker:
    """A compiled schema: call it as `checker(value, path, dropped)`."""
    __slots__ = ("run", "annotations", "schema")

    def __init__(self, run: Callable, annotations: list[str], schema: Any):
        self.run, self.annotations, self.schema = run, annotations, schema

    def __call__(self, value: Any, path: str, dropped: list[str]) -> Any:
        return self.run(value, path, dropped)


# ---------------------------------------------------------------------------------------------
# Compiling a schema
# ---------------------------------------------------------------------------------------------


def compile_schema(schema: Any, where: str, as_written: bool = False) -> Checker:
    """`schema` read once into a `Checker`; `OptionError` (naming `where`, the keyword and its
    place in the schema) for a keyword that would change what is valid but is not supported,
    for a `$ref` that points at nothing and for a malformed keyword value.

    `as_written` is for a schema of the user's (`JsonSchema`, a tool definition): JSON Schema's
    meaning holds — keys the schema allows are kept, `additionalProperties: false` refuses
    others, `1.0` is an integer (delivered as `1`) — and a document using any keyword beyond
    the ones compiled here is judged by schemaeval.py, the value delivered as written."""
    try:
        return _compiled(schema, where, as_written)
    except RecursionError:   # (measure bounds the nesting; this is for a caller deep already)
        raise OptionError(f"{where}: the schema nests too deeply to be read here (Python's "
                          f"stack ran out); flatten it") from None


def _compiled(schema: Any, where: str, as_written: bool) -> Checker:
    if as_written:   # a schema from outside: what reading and checking it may cost, bounded
        shape = measure(schema, where)
    if as_written and _needs_evaluator(schema):
        from .schemaeval import Evaluator
        ev = Evaluator(schema, where)

        def run(v, p, d, check=ev.check):
            if not is_json_value(v):
                check_json_value(v, p, deep=True)
            return check(v, p)
        return Checker(counted(run, shape.recursive), ev.annotations, schema)
    if as_written:   # its depth bounded, a cycle of bare references refused, by name
        from .schemaeval import Evaluator
        Evaluator(schema, where, compile=False)
    c = _Compiler(schema, where, as_written)
    run = c.node(schema, "#")
    return Checker(counted(run, shape.recursive) if as_written else run, c.annotations, schema)


def _needs_evaluator(schema: Any) -> bool:
    """Whether a document uses what only schemaeval.py judges: a keyword of WRITTEN_ONLY, a
    boolean subschema, a reference beyond a plain pointer, an empty enum."""
    stack = [(schema, True)]
    while stack:
        node, at_root = stack.pop()
        if isinstance(node, list):
            stack += [(x, False) for x in node]
            continue
        if not isinstance(node, dict):
            if isinstance(node, bool) and not at_root:
                return True
            continue
        for k, v in node.items():
            if k in WRITTEN_ONLY or k in ("$anchor", "$dynamicRef", "$dynamicAnchor"):
                return True
            if k == "$ref" and (not isinstance(v, str) or not v.startswith("#")
                                or "%" in v or (len(v) > 1 and not v.startswith("#/"))):
                return True
            if k == "enum" and v == []:
                return True
            if k == "items" and isinstance(v, bool):
                return True
            if k in ("properties", "$defs", "definitions") and isinstance(v, dict):
                stack += [(x, False) for x in v.values()]
            elif k not in ("enum", "const", "default", "examples") and \
                    isinstance(v, (dict, list, bool)):
                stack.append((v, False))
    return False


def merge_all_of(schema: Any, where: str = "the schema") -> Any:
    """`schema` with every `allOf` of objects written as one object (what the menu shows and
    the modes send); `OptionError` for parts that cannot be joined. A schema with no `allOf`
    comes back as it is (not copied)."""
    if not _has_all_of(schema):
        return schema
    c = _Compiler(schema, where)

    def walk(node: Any, ptr: str) -> Any:
        if isinstance(node, list):
            return [walk(x, f"{ptr}/{i}") for i, x in enumerate(node)]
        if not isinstance(node, dict):
            return node
        if "allOf" in node:
            try:
                node = c.merge_all_of(node, ptr)
            except OptionError:
                pass   # parts that do not join (booleans, conflicts): shown as they are
        return {k: v if k in ("enum", "const", "default", "examples") else walk(v, f"{ptr}/{k}")
                for k, v in node.items()}
    return walk(schema, "#")


def _has_all_of(schema: Any) -> bool:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "allOf" in node:
                return True
            stack += [v for k, v in node.items()
                      if k not in ("enum", "const", "default", "examples")]
        elif isinstance(node, list):
            stack += node
    return False


class _Compiler:
    def __init__(self, root: Any, where: str, as_written: bool = False):
        self.root, self.where, self.as_written = root, where, as_written
        self.refs: dict[str, list] = {}   # "$ref" -> [checker], filled once compiled
        self.names = SchemaDoc({}, root=root, where=where)   # (type names in messages,
                                                             # references followed)
        self.doc = self.names.document
        self.annotations: list[str] = []

    def fail(self, ptr: str, text: str) -> OptionError:
        return OptionError(f"{self.where}: {text} (at {ptr} of the schema)")

    # -- references ----------------------------------------------------------------------------
    def resolve(self, ref: Any, ptr: str) -> Any:
        return self.doc.resolve(ref, "", ptr)[0]

    def ref(self, ref: str, ptr: str) -> Callable:
        cell = self.refs.get(ref)
        if cell is None:
            cell = self.refs[ref] = []
            target = self.resolve(ref, ptr)
            cell.append(self.node(target, ref))
        if cell:
            return cell[0]
        # Recursion: the reference is being compiled; call it through the cell once it is.
        return lambda v, p, d: cell[0](v, p, d)

    # -- one node ------------------------------------------------------------------------------
    def node(self, s: Any, ptr: str) -> Callable:
        if s is True or (isinstance(s, dict) and not s):
            return _any
        if s is False:
            return _nothing
        if not isinstance(s, dict):
            raise self.fail(ptr, f"a schema is an object (or true / false), got {s!r}")
        if CHECK in s:
            check = s[CHECK]
            if s.get("nullable") is True:
                return lambda v, p, d: None if v is None else check(v, p, d)
            return check
        words = [k for k in s if isinstance(k, str)]
        for k in words:
            if k in REFUSED:
                raise self.fail(ptr, f"the keyword {k!r} changes what is valid and is not "
                                     f"supported; express the rule with the supported keywords "
                                     f"({', '.join(sorted(SUPPORTED))}) or check it in a "
                                     f"validate= rule")
            if k not in SUPPORTED and k not in ANNOTATIONS:
                self.annotations.append(f"{k!r} at {ptr}")
        fmt = s.get("format")
        if fmt is not None and fmt not in FORMATS and fmt not in OPENAPI_FORMATS:
            self.annotations.append(f"format {fmt!r} at {ptr}")
        if "allOf" in s:
            s = self.merge_all_of(s, ptr)
        if "$ref" in s:
            target = self.ref(s["$ref"], ptr)
            rest = {k: v for k, v in s.items() if k not in ("$ref", "$defs", "definitions")}
            if not [k for k in rest if k in SUPPORTED]:
                return self.wrap_py(s, target)
            own = self.node(rest, ptr)

            def both(v, p, d, target=target, own=own):
                return own(target(v, p, d), p, d)
            return self.wrap_py(s, both)
        return self.wrap_py(s, self.plain(s, ptr))

    def wrap_py(self, s: dict, run: Callable) -> Callable:
        py = s.get(PY)
        if py is None:
            return run
        return lambda v, p, d: py(run(v, p, d))

    def merge_all_of(self, s: dict, ptr: str) -> dict:
        """`allOf` of objects as one object: properties and required joined (a property in
        two parts must fit both), other keywords taken when the parts agree."""
        parts = s["allOf"]
        if not isinstance(parts, list) or not parts:
            raise self.fail(ptr, "allOf takes a non-empty list of schemas")
        out = {k: v for k, v in s.items() if k != "allOf"}
        for i, part in enumerate(parts):
            here = f"{ptr}/allOf/{i}"
            if part is True:   # allows anything: adds nothing to join
                continue
            seen = set()
            while isinstance(part, dict) and "$ref" in part:
                ref = part["$ref"]
                if ref in seen:
                    raise self.fail(here, "allOf of a schema that refers to itself")
                seen.add(ref)
                part = {**self.resolve(ref, here), **{k: v for k, v in part.items()
                                                      if k != "$ref"}}
            if not isinstance(part, dict):
                raise self.fail(here, "allOf combines objects; this part is not a schema")
            if "allOf" in part:
                part = self.merge_all_of(part, here)
            for k, v in part.items():
                if k == "properties":
                    props = dict(out.get("properties") or {})
                    for name, sub in (v or {}).items():
                        props[name] = {"allOf": [props[name], sub]} if name in props else sub
                    out["properties"] = props
                elif k == "required":
                    out["required"] = list(dict.fromkeys([*(out.get("required") or []), *v]))
                elif k in ANNOTATIONS or k in ("$defs", "definitions"):
                    out.setdefault(k, v)
                elif k in out and not equal(out[k], v):
                    raise self.fail(here, f"allOf combines parts that set {k!r} differently; "
                                          f"write the combined schema out")
                else:
                    out[k] = v
        return out

    def plain(self, s: dict, ptr: str) -> Callable:
        types = s.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else types
            if not isinstance(types, list) or not all(t in SHORT for t in types):
                raise self.fail(ptr, f"type must be a JSON type name or a list of them "
                                     f"({', '.join(SHORT)}), got {s['type']!r}")
            if s.get("nullable") is True and "null" not in types:
                types = [*types, "null"]
        name = s.get(NAME) or type_name(s, self.names)
        steps: list[Callable] = []
        if "enum" in s or "const" in s:
            steps.append(self.choice(s, ptr))
        for key in ("anyOf", "oneOf"):
            if key in s:
                steps.append(self.alternatives(s, key, ptr, name))
        if types is None or set(types) & {"string"} or "pattern" in s or "format" in s \
                or "minLength" in s or "maxLength" in s:
            steps += self.string(s, ptr)
        steps += self.number(s, ptr, types)
        if types is None or "array" in types:
            steps += self.array(s, ptr)
        obj = self.object(s, ptr) if types is None or "object" in types else None
        # OpenAPI's `nullable: true` lets null through whatever else the node says.
        return _make_node(types, name, steps, obj, s.get("nullable") is True,
                          "anyOf" in s or "oneOf" in s, self.as_written)

    def choice(self, s: dict, ptr: str) -> Callable:
        if "const" in s:
            values, what = [s["const"]], f"always {json_text(s['const'])}"
        else:
            values = s["enum"]
            if not isinstance(values, list) or not values:
                raise self.fail(ptr, "enum takes a non-empty list of allowed values")
            what = "one of " + ", ".join(json_text(v) for v in values)
        if s.get("nullable") is True and None not in values:
            values = [*values, None]

        texts = frozenset(x for x in values if type(x) is str)

        def step(v, p, d):
            if type(v) is str and v in texts:  # the common case, without a loop
                return v
            for allowed in values:
                if equal(v, allowed):
                    return v
            raise AttemptError("enum_violation", f"{p} must be {what}; got {json_head(v)}", p)
        step.texts = texts
        return step

    def alternatives(self, s: dict, key: str, ptr: str, name: str) -> Callable:
        alts = s[key]
        if not isinstance(alts, list) or not alts:
            raise self.fail(ptr, f"{key} takes a non-empty list of schemas")
        runs = [self.node(a, f"{ptr}/{key}/{i}") for i, a in enumerate(alts)]
        names = s.get(NAME) or type_name({key: alts}, self.names)
        one = key == "oneOf"
        nullable = s.get("nullable") is True

        def step(v, p, d):
            if v is None and nullable:
                return v
            spend(len(runs), p)
            closest = None
            found, out, trial_kept = 0, v, None
            for run in runs:
                trial: list[str] = []
                try:
                    got = run(v, p, trial)
                except AttemptError as err:
                    if err.kind != "type_mismatch" and closest is None:
                        closest = err
                    continue
                found += 1
                if found == 1:
                    out, trial_kept = got, trial
                if not one:
                    break
            if found == 0:
                raise closest or AttemptError("type_mismatch", f"{p} must be {names}, got "
                                                             f"{describe_value(v)}", p)
            if one and found > 1:
                raise AttemptError("invalid_value", f"{p} fits {found} of the alternatives of "
                                                  f"oneOf ({names}); it must fit exactly one",
                                 p)
            d.extend(trial_kept)
            return out
        return step

    def string(self, s: dict, ptr: str) -> list[Callable]:
        steps = self.sized(s, ptr, "minLength", "maxLength", str, "characters")
        if "pattern" in s:
            text = s["pattern"]
            from .patterns import compile_pattern  # (loaded with the first pattern met)
            try:
                rx = compile_pattern(text)
            except OptionError as exc:
                raise self.fail(ptr, str(exc)) from None

            def pattern(v, p, d):
                if isinstance(v, str) and not rx.search(v, p):
                    raise AttemptError("invalid_value", pattern_text(p, v, text), p)
                return v
            steps.append(pattern)
        fmt = s.get("format")
        if fmt in FORMAT_CHECKS:
            test = (FORMAT_CHECKS if self.as_written else PYTHON_FORMAT_CHECKS)[fmt]

            def form(v, p, d):
                if isinstance(v, str) and not test(v):
                    raise AttemptError("invalid_value", format_text(p, v, fmt), p)
                return v
            steps.append(form)
        return steps

    def sized(self, s: dict, ptr: str, low: str, high: str, kind: type,
              unit: str) -> list[Callable]:
        """The step checking a text's length or a list's count against `low` / `high`."""
        lo, hi = s.get(low), s.get(high)
        for k, n in ((low, lo), (high, hi)):
            if isinstance(n, float) and n.is_integer():
                n = int(n)   # JSON Schema counts 1.0 as an integer
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
                raise self.fail(ptr, f"{k} takes a non-negative integer, got {n!r}")
        lo, hi = (int(n) if isinstance(n, float) else n for n in (lo, hi))
        if lo is None and hi is None:
            return []

        def size(v, p, d):
            if isinstance(v, kind):
                n = len(v)
                if lo is not None and n < lo:
                    raise AttemptError("invalid_value", size_text(p, lo, True, unit, n), p)
                if hi is not None and n > hi:
                    raise AttemptError("invalid_value", size_text(p, hi, False, unit, n), p)
            return v
        return [size]

    def number(self, s: dict, ptr: str, types: list | None) -> list[Callable]:
        bounds = []
        for key, test, text in BOUNDS:
            if key in s:
                b = s[key]
                if not is_number(b):
                    raise self.fail(ptr, f"{key} takes a number, got {b!r} (the boolean form "
                                         f"is draft 4's; write the bound itself)")
                if not is_finite(b):
                    raise self.fail(ptr, non_finite_text(key, b))
                bounds.append((test, b, text))
        lo, hi = OPENAPI_FORMATS.get(s.get("format"), (None, None))
        if lo is not None:   # OpenAPI's int32 / int64: the range the format names
            bounds += [(BOUNDS[0][1], lo, ">="), (BOUNDS[2][1], hi, "<=")]
        steps = []
        if bounds:
            def bound(v, p, d):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    for test, b, text in bounds:
                        if not test(v, b):
                            raise AttemptError("invalid_value", bound_text(p, v, text, b), p)
                return v
            steps.append(bound)
        if "multipleOf" in s:
            m = s["multipleOf"]
            if not is_number(m) or m <= 0:
                raise self.fail(ptr, f"multipleOf takes a number above 0, got {m!r}")
            if not is_finite(m):
                raise self.fail(ptr, non_finite_text("multipleOf", m))

            def multiple(v, p, d):
                if is_number(v) and not_multiple(v, m):
                    raise AttemptError("invalid_value", multiple_text(p, v, m), p)
                return v
            steps.append(multiple)
        return steps

    def array(self, s: dict, ptr: str) -> list[Callable]:
        steps = []
        items, prefix = s.get("items"), s.get("prefixItems")
        if isinstance(items, list):
            raise self.fail(ptr, "items holds one schema in draft 2020-12; a list of schemas "
                                 "(one per position) is written prefixItems")
        head = [self.node(x, f"{ptr}/prefixItems/{i}") for i, x in enumerate(prefix or [])]
        rest = self.node(items, f"{ptr}/items") if items is not None else None
        if not head and rest is None:
            steps.append(_any)   # an array of anything: each value still JSON's
        else:
            def each(v, p, d):
                if not isinstance(v, list):
                    return v
                out = []
                for i, x in enumerate(v):
                    run = head[i] if i < len(head) else rest
                    out.append(run(x, f"{p}[{i}]", d) if run is not None else
                               _any(x, f"{p}[{i}]", d))
                return out
            if not head:
                each.item = rest  # an array of one item schema: see _fast
            steps.append(each)
        steps += self.sized(s, ptr, "minItems", "maxItems", list, "items")
        if s.get("uniqueItems") is True:
            def unique(v, p, d):
                if isinstance(v, list):
                    at = first_repeat(v)
                    if at is not None:
                        raise AttemptError("invalid_value", repeat_text(p, *at), f"{p}[{at[0]}]")
                return v
            steps.append(unique)
        return steps

    def object(self, s: dict, ptr: str) -> tuple | None:
        props = s.get("properties")
        if props is not None and not isinstance(props, dict):
            raise self.fail(ptr, "properties takes an object of schemas")
        required = s.get("required") or []
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self.fail(ptr, "required takes a list of property names")
        fields = [(k, self.node(sub, f"{ptr}/properties/{k}"), k in required, f".{k}")
                  for k, sub in (props or {}).items()]
        missing_only = [r for r in required if r not in (props or {})]
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) or extra is True:
            extra_run = self.node(extra, f"{ptr}/additionalProperties")
        elif self.as_written:   # JSON Schema's meaning: kept when allowed, refused when not
            extra_run = _any if extra is None else _refused
        else:
            extra_run = None  # absent or false: outside the schema, so dropped
        lo, hi = s.get("minProperties"), s.get("maxProperties")
        titles = {k: sub.get(NAME) or type_name(sub, self.names) if isinstance(sub, dict)
                  else "any" for k, sub in (props or {}).items()}
        if props is None and extra is None:
            extra_run = _any   # a free-form object keeps what it holds
        return fields, missing_only, extra_run, lo, hi, titles
