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
value at fault, as validator.py's. This module holds the document's side: reading it,
compiling each subschema once, the keywords that combine subschemas (`$ref`, `allOf`, `not`,
`if`-`then`-`else`) and the delivery of `1.0` as `1` (`_whole`), which asks the same compiled
branches which alternative a value fits; the step each other keyword compiles to, and the failure
whose message is written only when read (`SchemaParseError`, since inside `not` / `if` / `anyOf`
most failures are never read), are eval_keywords.py's.
"""
from __future__ import annotations

from ...base.errors import AttemptError, OptionError
from .budget import spend
from .eval_keywords import NONE as _NONE
from .eval_keywords import KeywordSteps, SchemaParseError
from .eval_keywords import fault as _fail
from .eval_keywords import merge as _merge
from .patterns import compile_pattern
from .refs import LISTS as _LISTS
from .refs import MAPS as _MAPS
from .refs import SINGLE as _SINGLE
from .refs import Document
from .refs import join_uri as _join
from .reply_values import json_head

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["Evaluator", "KEYWORDS", "SchemaParseError"]

#: Every keyword this module gives a meaning to (the rest are annotations).
KEYWORDS = frozenset({
    *_SINGLE, *_LISTS, *_MAPS, "type", "enum", "const", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties",
    "minProperties", "required", "dependentRequired", "format", "$ref", "$id", "$anchor",
    "nullable"})
_HOLDS_FLOATS = (float, dict, list)   # the values `_whole` may change


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


class Evaluator(KeywordSteps):
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


