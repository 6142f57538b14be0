"""What llama.cpp's grammar converter can read: a schema made looser wherever it cannot.

llama-cpp-python's `SchemaConverter` turns a JSON Schema into a grammar the model's writing is
held to, but it reads only part of the vocabulary: `not`, `if` / `then` / `else`,
`dependentSchemas`, `contains` and the like stop it with "Unrecognized schema", a boolean
subschema with an AttributeError, and an empty schema `{}` (any value) it reads as "any object",
so a schema that allows more than the converter says would keep the model from writing values
the schema allows. `for_grammar(schema)` returns a copy the converter reads and that allows at
least everything the schema does (keywords it cannot express removed, `true` / `false` / `{}`
written as "any JSON value", keys by pattern let through as any key), and the list of what was
loosened: the option's own validation checks the reply afterwards and re-asks on failure, as in
menu mode, instead of the option set being refused.
"""
from __future__ import annotations

import copy
from typing import Any

from ...decision.schema.refs import Document, join_uri

__all__ = ["for_grammar", "NOT_EXPRESSED"]

#: Keywords the converter cannot express: removed (the validator judges them after the reply).
NOT_EXPRESSED = frozenset({
    "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "propertyNames",
    "contains", "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems",
    "patternProperties", "$anchor", "$dynamicAnchor", "$dynamicRef", "contentSchema"})
_ANY = {"type": ["null", "boolean", "object", "array", "number", "string"]}
_SINGLE = ("items", "additionalProperties")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAPS = ("properties", "$defs", "definitions")
_WORDS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated",
                    "readOnly", "writeOnly"})


def for_grammar(schema: Any) -> tuple[Any, list[str]]:
    """(a copy of `schema` the converter reads and that allows at least what it allows, the
    places loosened as `keyword at pointer`)."""
    loosened: list[str] = []
    refs = _Refs(schema)
    out = _node(copy.deepcopy(schema), "#", loosened, root=True, refs=refs)
    if refs.names and isinstance(out, dict):
        out["$defs"] = {**(out.get("$defs") or {}), **refs.written(loosened)}
    return out, loosened


class _Refs:
    """The converter follows only a plain `#/a/b` from the root: every other reference (an
    anchor, `#`, an escaped token, one relative to an `$id`) is resolved here by the one rule
    (decision/schema/refs.py) and pointed at a copy of its target under `$defs`."""

    def __init__(self, schema: Any):
        self.doc = Document(schema)
        self.names: dict[int, str] = {}   # id(target) -> its name under $defs
        self.targets: list[tuple[str, Any, str]] = []

    def plain(self, ref: Any, base: str) -> bool:
        return isinstance(ref, str) and base == self.doc.base_of(self.doc.root) and \
            ref.startswith("#/") and not set(ref) & {"~", "%"}

    def point(self, ref: str, base: str) -> str:
        target, tbase, ptr = self.doc.resolve(ref, base)
        name = self.names.get(id(target))
        if name is None:
            name = self.names[id(target)] = f"ref-{len(self.names)}"
            self.targets.append((name, target, tbase))
        return f"#/$defs/{name}"

    def written(self, loosened: list[str]) -> dict:
        out, done = {}, 0
        while done < len(self.targets):   # (a target may refer on: those join the list)
            name, target, base = self.targets[done]
            out[name] = _node(copy.deepcopy(target), f"#/$defs/{name}", loosened, refs=self,
                              base=base)
            done += 1
        return out


def _node(s: Any, ptr: str, loosened: list[str], root: bool = False,
          refs: _Refs | None = None, base: str = "") -> Any:
    if s is True or s is False:
        if s is False:   # (true is any value, exactly what the grammar then allows)
            loosened.append(f"false at {ptr}")
        return dict(_ANY)
    if not isinstance(s, dict):
        return s
    if not root and not (set(s) - _WORDS):
        return {**s, **_ANY}   # `{}`: any value, not the converter's "any object"
    if isinstance(s.get("$id"), str):
        base = join_uri(base, s["$id"]).partition("#")[0]
    if refs is not None and "$ref" in s and not refs.plain(s["$ref"], base):
        s["$ref"] = refs.point(s["$ref"], base)
    found = [k for k in s if k in NOT_EXPRESSED]
    if found:
        loosened += [f"{k} at {ptr}" for k in found]
        if "patternProperties" in s and s.get("additionalProperties") is not True:
            # keys the patterns allow must stay writable: any key, any value
            s["additionalProperties"] = dict(_ANY)
        s = {k: v for k, v in s.items() if k not in NOT_EXPRESSED}
        if not root and not (set(s) - _WORDS):
            return {**s, **_ANY}
    for k in _SINGLE:
        if k in s and not (k == "additionalProperties" and s[k] is False):
            s[k] = _node(s[k], f"{ptr}/{k}", loosened, refs=refs, base=base)
    for k in _LISTS:
        if isinstance(s.get(k), list):
            s[k] = [_node(x, f"{ptr}/{k}/{i}", loosened, refs=refs, base=base)
                    for i, x in enumerate(s[k])]
    for k in _MAPS:
        if isinstance(s.get(k), dict):
            s[k] = {n: _node(x, f"{ptr}/{k}/{n}", loosened, refs=refs, base=base)
                    for n, x in s[k].items()}
    return s
