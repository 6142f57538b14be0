"""OpenAI's strict structured outputs: a JSON Schema made to follow its rules, and the reply made
to read as if the original schema had been sent.

Strict mode (`"strict": true`) accepts a subset of JSON Schema (platform.openai.com, Structured
Outputs, "Supported schemas"): the root is an object (not an `anyOf`); every object lists all its
properties in `required` and sets `additionalProperties: false`, so an optional property is sent
as required and nullable; only some keywords are understood (types, `enum`, `const`, `anyOf`,
`$ref`/`$defs`, string `pattern` and a few `format`s, number bounds and `multipleOf`, array
`items`/`minItems`/`maxItems`); and a schema has at most 5,000 properties, 10 levels of nested
objects, 1,000 enum values, 120,000 characters of property names, definition names, enum and
const values, and 15,000 characters of values in any one string enum of more than 250 values.

`to_strict(schema)` returns the schema following those rules, or raises `NotStrict` naming what
cannot follow them without changing what the schema accepts (an object with free-form keys, a
value of any type, a schema over the limits); the runtime then sends the schema with
`strict: false`. Keywords strict mode does not understand are dropped: the server then enforces
less, and the option's own validation still checks every reply. `strip_forced_nulls(value,
schema)` removes from a reply the nulls that strict mode forced on optional properties (those
the original schema did not make nullable), so the option sees "not given", as in menu mode.
"""
from __future__ import annotations

from typing import Any

from ...base.errors import OpenProgramError, OptionError
from ...decision.modes import api_name  # noqa: F401  (the runtimes import it from here)
from ...decision.schema.refs import Document
from ...decision.schema.type_table import JSON_TYPES as _JSON_TYPES

__all__ = ["NotStrict", "to_strict", "strip_forced_nulls", "check_limits", "api_name",
           "FORMATS", "LIMITS", "unexpressed"]

#: The string formats strict mode understands.
FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4",
                     "ipv6", "uuid"})

#: The documented size limits of a strict schema.
LIMITS = {"properties": 5000, "depth": 10, "enum_values": 1000, "chars": 120_000,
          "big_enum": 250, "big_enum_chars": 15_000}

_ANY = {"type", "description", "title", "enum", "const", "anyOf", "$ref"}
_BY_TYPE = {
    "string": {"pattern", "format"},
    "number": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "integer": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "array": {"items", "minItems", "maxItems"},
    "object": {"properties", "required", "additionalProperties"},
    "boolean": set(), "null": set(),
}


#: Keywords that change what is valid and that strict mode drops (the server enforces less).
_DROPPED = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas",
            "propertyNames", "contains", "minContains", "maxContains", "unevaluatedItems",
            "uniqueItems", "minLength", "maxLength", "minProperties", "maxProperties",
            "prefixItems", "oneOf")


def unexpressed(schema: Any) -> list[str]:
    """What `to_strict` leaves for the option's validation alone: `keyword at pointer` for each
    keyword strict mode drops (`oneOf` is sent as the looser `anyOf`), and each format it does
    not know."""
    out: list[str] = []
    stack = [(schema, "#")]
    while stack:
        s, ptr = stack.pop()
        if not isinstance(s, dict):
            continue
        out += [f"{k} at {ptr}" for k in _DROPPED if k in s]
        if "format" in s and s["format"] not in FORMATS:
            out.append(f"format {s['format']!r} at {ptr}")
        for k in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
            if isinstance(s.get(k), dict):
                stack.append((s[k], f"{ptr}/{k}"))
        for k in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if isinstance(s.get(k), list):
                stack += [(x, f"{ptr}/{k}/{i}") for i, x in enumerate(s[k])]
        for k in ("properties", "$defs", "definitions", "dependentSchemas"):
            if isinstance(s.get(k), dict):
                stack += [(x, f"{ptr}/{k}/{n}") for n, x in s[k].items()]
    return sorted(out, key=lambda t: t.split(" at ")[1])


class NotStrict(OpenProgramError, ValueError):
    """A schema that strict mode cannot express without changing what it accepts."""


def _types(s: dict) -> list[str]:
    t = s.get("type")
    return [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []


def _value_types(values: list) -> list[str]:
    out: list[str] = []
    for v in values:
        t = _JSON_TYPES.get(type(v), "string")
        if t not in out:
            out.append(t)
    return out


def is_nullable(s: Any) -> bool:
    """Whether `s` accepts null as it stands."""
    if not isinstance(s, dict):
        return True
    return ("null" in _types(s) or None in (s.get("enum") or ()) or
            ("const" in s and s["const"] is None) or
            any(is_nullable(v) for v in s.get("anyOf") or s.get("oneOf") or ()))


def _nullable(s: dict) -> dict:
    """`s`, also accepting null: a plain scalar type gets "null" in its type list; anything
    else (an object, an array, an enum, a const, a union, a reference) becomes one alternative
    of an `anyOf`."""
    if is_nullable(s):
        return s
    if "anyOf" in s:
        return {**s, "anyOf": [*s["anyOf"], {"type": "null"}]}
    scalar = {"string", "number", "integer", "boolean"}
    if _types(s) and set(_types(s)) <= scalar and not {"enum", "const", "$ref"} & set(s):
        return {**s, "type": [*_types(s), "null"]}
    desc = {k: s[k] for k in ("description",) if k in s}
    inner = {k: v for k, v in s.items() if k != "description"}
    return {**desc, "anyOf": [inner, {"type": "null"}]}


def _resolve(root: dict, ref: str) -> dict:
    """The schema `ref` refers to, as every reader of a schema resolves one
    (decision/schema/refs.py); `NotStrict` for one that points at nothing or outside."""
    try:
        node = Document(root).resolve(ref)[0]
    except OptionError as exc:
        raise NotStrict(str(exc)) from None
    if not isinstance(node, dict):
        raise NotStrict(f"the reference {ref!r} is not a schema object")
    return node


def _sent_as_is(ref: Any) -> bool:
    """A reference strict mode follows itself: a definition by plain name, or the root."""
    return isinstance(ref, str) and (ref == "#" or (
        ref.startswith(("#/$defs/", "#/definitions/")) and ref.count("/") == 2
        and not set(ref) & {"~", "%"}))


def to_strict(schema: dict) -> dict:
    """`schema` following strict mode's rules (a new dict; `schema` is not changed)."""
    if not isinstance(schema, dict) or "object" not in _types(schema) or "anyOf" in schema:
        raise NotStrict("the root of a strict schema must be an object, not a union or "
                        "another type")
    out = _Strict(schema).node(schema, "", root=True)
    check_limits(out)
    return out


class _Strict:
    def __init__(self, root: dict):
        self.root = root
        self.inlining: list[str] = []   # the references being written out, outermost first

    def node(self, s: Any, path: str, root: bool = False) -> dict:
        where = path or "the root"
        if s is False:
            raise NotStrict(f"{where} allows no value (a false schema), which strict mode "
                            f"cannot express")
        if not isinstance(s, dict) or not s:
            raise NotStrict(f"{where} accepts any value, which strict mode cannot express")
        s = dict(s)
        if "$ref" in s and (len(s) > 1 or not _sent_as_is(s["$ref"])):
            # a reference with siblings (they win), or one strict mode does not follow (to a
            # property, an anchor, an escaped name): written out in place
            ref = s.pop("$ref")
            if ref in self.inlining:
                raise NotStrict(f"{where} refers to {ref!r} from inside it; strict mode "
                                f"expresses a recursive type only through #/$defs/Name")
            target = _resolve(self.root, ref)
            self.inlining.append(ref)
            try:
                return self.node({**target, **s}, path, root)
            finally:
                self.inlining.pop()
        if isinstance(s.get("allOf"), list):
            parts = s.pop("allOf")
            if len(parts) != 1:
                raise NotStrict(f"{where} combines {len(parts)} schemas with allOf")
            s = {**parts[0], **s}
            return self.node(s, path, root)
        if "oneOf" in s and "anyOf" not in s:  # a superset: the option's validation decides
            s["anyOf"] = s.pop("oneOf")
        types = _types(s)
        if not types and not {"anyOf", "$ref"} & set(s):
            values = s["enum"] if isinstance(s.get("enum"), list) else \
                [s["const"]] if "const" in s else None
            if values is None:
                raise NotStrict(f"{where} accepts any value, which strict mode cannot express")
            types = _value_types(values)
            s["type"] = types[0] if len(types) == 1 else types
        keep = set(_ANY).union(*(_BY_TYPE.get(t, set()) for t in types))
        if root:
            keep |= {"$defs", "definitions"}
        out = {k: v for k, v in s.items() if k in keep}
        if "format" in out and out["format"] not in FORMATS:
            del out["format"]
        if "anyOf" in out:
            out["anyOf"] = [self.node(v, f"{path}.anyOf[{i}]" if path else f"anyOf[{i}]")
                            for i, v in enumerate(out["anyOf"])]
        if "object" in types:
            self._object(s, out, path)
        if "array" in types:
            if "items" not in s:
                raise NotStrict(f"{where} is an array of any values, which strict mode cannot "
                                f"express")
            out["items"] = self.node(s["items"], f"{path}[]")
        for key in ("$defs", "definitions"):
            if isinstance(out.get(key), dict):
                out[key] = {n: self.node(d, f"{key}.{n}") for n, d in out[key].items()}
        return out

    def _object(self, s: dict, out: dict, path: str) -> None:
        props = s.get("properties") or {}
        for key in ("patternProperties", "unevaluatedProperties"):
            if key in s and s[key] is not False:
                # strict mode closes every object, which would forbid the keys these allow
                raise NotStrict(f"{path or 'the root'} allows keys beyond its properties "
                                f"({key}), which strict mode cannot express")
        extra = s.get("additionalProperties", True if not props else False)
        if extra is not False:
            raise NotStrict(f"{path or 'the root'} is an object with free-form keys (a dict), "
                            f"which strict mode cannot express")
        required = set(s.get("required") or ())
        new = {}
        for name, sub in props.items():
            child = self.node(sub, f"{path}.{name}" if path else name)
            new[name] = child if name in required else _nullable(child)
        out["properties"] = new
        out["required"] = list(props)
        out["additionalProperties"] = False


def _walk(s: Any, depth: int, stats: dict) -> None:
    """Count what the limits count, below `s` (references are counted where they are defined)."""
    if not isinstance(s, dict):
        return
    if "object" in _types(s):
        depth += 1
        stats["depth"] = max(stats["depth"], depth)
    props = s.get("properties") or {}
    stats["properties"] += len(props)
    stats["chars"] += sum(len(n) for n in props)
    if isinstance(s.get("enum"), list):
        values = s["enum"]
        stats["enum_values"] += len(values)
        strings = sum(len(v) for v in values if isinstance(v, str))
        stats["chars"] += strings
        if len(values) > LIMITS["big_enum"]:
            stats["big_enum_chars"] = max(stats["big_enum_chars"], strings)
    if isinstance(s.get("const"), str):
        stats["chars"] += len(s["const"])
    for sub in props.values():
        _walk(sub, depth, stats)
    for sub in s.get("anyOf") or ():
        _walk(sub, depth, stats)
    _walk(s.get("items"), depth, stats)
    for key in ("$defs", "definitions"):
        for name, sub in (s.get(key) or {}).items():
            stats["chars"] += len(name)
            _walk(sub, 0, stats)


def check_limits(schema: dict) -> dict:
    """The figures the limits bound, for `schema`; `NotStrict` naming the first one exceeded."""
    stats = {"properties": 0, "depth": 0, "enum_values": 0, "chars": 0, "big_enum_chars": 0}
    _walk(schema, 0, stats)
    names = {"properties": "object properties", "depth": "levels of nested objects",
             "enum_values": "enum values", "chars": "characters of names and values",
             "big_enum_chars": "characters in one enum of more than 250 values"}
    for key, what in names.items():
        if stats[key] > LIMITS[key]:
            raise NotStrict(f"the schema has {stats[key]} {what}; strict mode allows at most "
                            f"{LIMITS[key]}")
    return stats


# -- the reply ----------------------------------------------------------------------------------

def _matches(value: Any, s: Any, root: dict) -> bool:
    """Whether `value` plausibly is an instance of `s`: its type, its const and enum, the
    consts of its properties (the tag that tells alternatives apart), and no unknown keys."""
    if not isinstance(s, dict):
        return True
    if "$ref" in s:
        try:
            s = {**_resolve(root, s["$ref"]), **{k: v for k, v in s.items() if k != "$ref"}}
        except NotStrict:
            return True
    if "const" in s and value != s["const"]:
        return False
    if isinstance(s.get("enum"), list) and value not in s["enum"]:
        return False
    alternatives = s.get("anyOf") or s.get("oneOf")
    if alternatives and not any(_matches(value, a, root) for a in alternatives):
        return False
    types = _types(s)
    if types and _JSON_TYPES.get(type(value)) not in types and not (
            "number" in types and type(value) is int):
        return False
    if isinstance(value, dict) and isinstance(s.get("properties"), dict):
        props = s["properties"]
        if s.get("additionalProperties") is False and set(value) - set(props):
            return False
        return all(_matches(value[k], p, root) for k, p in props.items()
                   if k in value and isinstance(p, dict) and ("const" in p or "enum" in p))
    return True


def strip_forced_nulls(value: Any, schema: dict, root: dict | None = None,
                       path: str = "", removed: list | None = None) -> Any:
    """`value` (a reply to the strict form of `schema`) without the nulls strict mode forced:
    a null for a property that `schema` does not require and does not make nullable is
    removed. `removed`, if given, receives the path of each."""
    root = schema if root is None else root
    if not isinstance(schema, dict):
        return value
    if "$ref" in schema:
        try:
            schema = {**_resolve(root, schema["$ref"]),
                      **{k: v for k, v in schema.items() if k != "$ref"}}
        except NotStrict:
            return value
    for part in schema.get("allOf") or ():
        value = strip_forced_nulls(value, part, root, path, removed)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        for alt in alternatives:
            if _matches(value, alt, root):
                value = strip_forced_nulls(value, alt, root, path, removed)
                break
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        required = set(schema.get("required") or ())
        out = {}
        for k, v in value.items():
            sub = schema["properties"].get(k)
            where = f"{path}.{k}" if path else k
            if v is None and sub is not None and k not in required and not is_nullable(sub):
                if removed is not None:
                    removed.append(where)
                continue
            out[k] = strip_forced_nulls(v, sub, root, where, removed) if sub is not None else v
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [strip_forced_nulls(v, schema["items"], root, f"{path}[{i}]", removed)
                for i, v in enumerate(value)]
    return value
