"""Reading a JSON Schema for the menu: type names, placeholders, notes and nested lines.

A `SchemaDoc` is one JSON Schema document (its `$defs`, and the aliases of pydantic models' fields,
which the schema does not keep); it names a node's type as the menu does (`list[str]`,
`Order`, `int | null`), writes a valid placeholder for the `Call:` example, says what a node
allows besides its type (allowed values, bounds, lengths, patterns, formats, each union
member's), and writes the lines below a parameter for nested objects, items and union members
(a recursive type is shown once). A `UserType` is such a node as a `Field.user`, with the check
that validates it: the user's classes of options/user_classes.py (pydantic's schema, validated
by pydantic) and the definitions of options/tool_definitions.py (the user's schema, validated by
validator.py) are both shown this way. It is long because it is one walk over a schema document
that every reader of the menu shares (the type name, the placeholder and the notes of a node are
read together, with the same handling of `$ref`s, unions and recursion).
"""
from __future__ import annotations

import inspect
import json

from ...base.errors import OptionError
from ...base.json_form import to_jsonable
from .refs import Document
from .reply_values import SURROGATE as _SURROGATE
from .type_table import FORMAT_EXAMPLES, SHORT, json_type

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["UserType", "first_paragraph", "field_line", "shown", "type_name"]


def shown(value: Any) -> str:
    """A default or an allowed value as the menu shows it: its JSON text (an Enum member as its
    value, a date as ISO text), or its repr when JSON has no form for it."""
    j = to_jsonable(value)
    if isinstance(j, dict) and set(j) == {"repr", "type"}:
        j = j["repr"]
    return _json_text(j)


def _json_text(j: Any) -> str:
    """JSON text with what it holds as written (거실, not \\uac70\\uc2e4); a lone
    surrogate, which no text can be written out with, escaped."""
    text = json.dumps(j, ensure_ascii=False, default=repr)
    return text if text.isascii() or not _SURROGATE.search(text) else json.dumps(j, default=repr)


def field_line(name: str, type_name: str, required: bool, default: Any, description: str,
               notes: list[str], indent: str) -> str:
    """One line of the menu for a field: `- name (type, required): description; note; ...`."""
    if required:
        state = "required"
    else:
        state = "optional" if default is MISSING else f"optional, default {shown(default)}"
    line = f"{indent}- {name} ({type_name}, {state})"
    if description:
        line += f": {description}"
    return "".join([line, *(f"; {n}" for n in notes)])


def first_paragraph(text: Any) -> str:
    text = text if isinstance(text, str) else ""
    return text.strip().split("\n\n")[0].replace("\n", " ")


_first_paragraph = first_paragraph


_JSON_TYPES = SHORT
_FORMAT_EXAMPLES = FORMAT_EXAMPLES
#: Placeholders for a schema as written, whose formats follow their RFCs (a time has its offset;
#: a Python `datetime.time` may be naive, so the shared table keeps "12:00:00").
WRITTEN_FORMAT_EXAMPLES = {
    **FORMAT_EXAMPLES, "time": "12:00:00Z", "duration": "P1D", "hostname": "example.com",
    "idn-email": "user@example.com", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1",
    "uri-reference": "https://example.com/", "regex": ".*", "json-pointer": "/a"}
_CONSTRAINTS = [("minimum", ">= {}"), ("exclusiveMinimum", "> {}"), ("maximum", "<= {}"),
                ("exclusiveMaximum", "< {}"), ("multipleOf", "a multiple of {}"),
                ("minLength", "at least {} characters"), ("maxLength", "at most {} characters"),
                ("pattern", "matching the pattern {}"), ("format", "format {}"),
                ("minItems", "at least {} items"), ("maxItems", "at most {} items"),
                ("minProperties", "at least {} keys"), ("maxProperties", "at most {} keys")]
#: The longest type name written; a longer one (unions of unions, each level doubling it) is cut.
NAME_MAX = 200
MISSING = inspect.Parameter.empty  # (fields.py's: no default)
_CUT = object()  # a placeholder that would expand a recursive type into itself
_UNSET = object()


class SchemaDoc:
    """A JSON Schema document: its `$defs` and, for pydantic models, the aliases of their
    fields (`{model title: {alias: field name}}`), which the schema itself does not keep."""

    formats = _FORMAT_EXAMPLES   # the placeholder of each format

    def __init__(self, defs: dict, aliases: dict | None = None, root: Any = None,
                 where: str = "the schema"):
        self.defs, self.aliases = defs, aliases or {}
        # (`root`: the whole document, for references to any place in it; without one, the
        # defs are the document's `$defs` / `definitions`)
        self.document = Document(root if root is not None else
                                 {"$defs": defs, "definitions": defs}, where)
        # Each node's name and notes, made once: a node is named again wherever it is used,
        # and a union whose members refer to the next level would be named once per path to
        # it (2 ** depth). A name that cut a recursive reference depends on the references
        # being followed, and is kept for those only.
        # (Keyed by id, the nodes kept alive in `_pins` so no id is reused: keys and values are
        # then atomic, and the garbage collector does not walk them.)
        self._names: dict[tuple, str] | None = {}
        self._notes: dict[int, tuple[str, ...]] | None = {}
        self._pins: list = []
        self._cuts = 0

    def deref(self, node: dict) -> tuple[dict, str | None]:
        """`node` with its `$ref` followed as refs.py resolves one (the node's own keys win),
        and the name of what it refers to: a def's name, an anchor, `#` for the root, else the
        reference itself (`#/properties/a`); a boolean schema as an object (`true`: any value;
        `false`: none)."""
        if not isinstance(node, dict):  # a boolean schema: `true` is any value
            return ({"not": {}} if node is False else {}), None
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                target, _, name = self.document.follow(node)
            except OptionError:   # (the validator refuses it when the option set is built)
                return node, None
            if not ref.startswith(("#/$defs/", "#/definitions/")) and ref != "#" and \
                    ref.startswith("#/"):
                name = ref
            return (self.deref(target)[0] if not isinstance(target, dict) else target), name
        return node, None

    def variants(self, node: dict) -> list[dict]:
        """The non-null members of an anyOf / oneOf."""
        return [v for v in node.get("anyOf") or node.get("oneOf") or []
                if not isinstance(v, dict) or v.get("type") != "null"]

    def type_name(self, node: dict, stack: tuple = ()) -> str:
        """The name the menu and the messages give a node's type (`list[str]`, `Order`,
        `int | null`): the one way a JSON Schema node is named. A reference back into the
        references being followed (`stack`) is named by what it refers to (`list[Tree]`);
        a name longer than `NAME_MAX` is cut."""
        names = self._names
        if names is None:   # (the shared reader of plain nodes keeps nothing)
            return self._name(node, stack)
        got = names.get((id(node), None)) or names.get((id(node), stack))
        if got is not None:
            return got
        cuts = self._cuts
        name = self._name(node, stack)
        if len(name) > NAME_MAX:
            name = name[:NAME_MAX - 3] + "..."
        names[(id(node), None if self._cuts == cuts else stack)] = name
        self._pins.append(node)
        return name

    def _name(self, node: dict, stack: tuple) -> str:
        node, ref = self.deref(node)
        if ref is not None:
            if ref in stack:   # a recursive type: named by what it refers to, not unfolded
                self._cuts += 1
                title = node.get("title") if isinstance(node, dict) else None
                return title or (ref if not ref.startswith("#") else "object")
            stack = (*stack, ref)
        if ref is not None and ("properties" in node or "enum" in node):
            return node.get("title") or (ref if not ref.startswith("#") else "object")
        members = node.get("anyOf") or node.get("oneOf")
        if members:
            return " | ".join(dict.fromkeys(self.type_name(m, stack) for m in members))
        if "const" in node or "enum" in node:
            values = [node["const"]] if "const" in node else node["enum"]
            kinds = {_JSON_TYPES.get(_json_type(v), "any") for v in values}
            return kinds.pop() if len(kinds) == 1 else "any"
        t = node.get("type")
        null = " | null" if node.get("nullable") is True else ""  # OpenAPI's spelling
        if isinstance(t, list):
            return " | ".join(self._one_type(x, node, stack) for x in t) + null
        return self._one_type(t, node, stack) + null

    def _one_type(self, t: Any, node: dict, stack: tuple) -> str:
        if t == "array":
            items = node.get("items")
            return f"list[{self.type_name(items, stack)}]" if isinstance(items, dict) and items \
                else "list"
        if t == "object" or "properties" in node:
            if "properties" in node:
                return node.get("title") or "object"
            extra = node.get("additionalProperties")
            return f"dict[str, {self.type_name(extra, stack)}]" \
                if isinstance(extra, dict) and extra else "dict"
        return _JSON_TYPES.get(t, "any")

    def project_type(self, node: dict) -> str:
        """The `Field.type` (schema/fields.py) closest to `node`."""
        node, _ = self.deref(node)
        members = self.variants(node)
        if len(members) == 1:
            return self.project_type(members[0])
        t = node.get("type")
        if "properties" in node:
            return "object"
        return _JSON_TYPES.get(t, "any") if isinstance(t, str) and t != "null" else "any"

    def description(self, node: dict) -> str:
        return _first_paragraph(self.deref(node)[0].get("description"))

    def example(self, node: dict, stack: tuple = ()) -> Any:
        """A JSON value of `node`'s type, nested shapes included (R3); `_CUT` where it would
        expand a recursive type into itself."""
        node, ref = self.deref(node)
        if ref is not None:
            if ref in stack:
                return _CUT
            stack = (*stack, ref)
        if "const" in node:
            return node["const"]
        if node.get("enum"):
            return node["enum"][0]
        if node.get("anyOf") or node.get("oneOf"):
            members = self.variants(node)
            for m in members:
                x = self.example(m, stack)
                if x is not _CUT:
                    return x
            return None if len(members) < len(node.get("anyOf") or node.get("oneOf")) else _CUT
        t = node.get("type")
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), "null")
        if t == "object" or "properties" in node:
            return self._object_example(node, stack)
        if t == "array":
            items = node.get("items")
            x = self.example(items, stack) if isinstance(items, dict) and items else _CUT
            return [] if x is _CUT else [x]
        if t in ("integer", "number"):
            return _number_example(node, int if t == "integer" else float)
        if t == "string":
            return self.formats.get(node.get("format"), "<str>")
        return {"boolean": False, "null": None}.get(t, "<any>")

    def _object_example(self, node: dict, stack: tuple) -> Any:
        props = node.get("properties")
        if props:
            out = {}
            for key, sub in props.items():
                if sub is False:
                    continue   # a key that must not be given
                x = self.example(sub, stack)
                if x is _CUT:
                    if key in node.get("required", ()):
                        return _CUT
                    continue
                out[key] = x
            return out
        extra = node.get("additionalProperties")
        x = self.example(extra, stack) if isinstance(extra, dict) and extra else _CUT
        return {} if x is _CUT else {"<key>": x}

    def notes(self, node: dict) -> list[str]:
        """What the menu says about a value besides its type: allowed values, constraints
        (made once per node: a union's members are read for each union they are in)."""
        if self._notes is None:
            return self._node_notes(node)
        got = self._notes.get(id(node))
        if got is not None:
            return list(got)
        out = self._node_notes(node)
        self._notes[id(node)] = tuple(out)
        self._pins.append(node)
        return out

    def _node_notes(self, node: dict) -> list[str]:
        node, _ = self.deref(node)
        members = self.variants(node)
        if len(members) == 1:
            return self.notes(members[0])
        out = []
        for m in members:  # what each alternative of a union allows
            inner = self.notes(m)
            if inner:
                out.append(f"as {self.type_name(m)}: {', '.join(inner)}")
        if "const" in node:
            out.append(f"always {_json_text(node['const'])}")
        elif node.get("enum"):
            out.append("one of: " + ", ".join(_json_text(v) for v in node["enum"]))
        elif node.get("enum") == []:
            out.append("no value is allowed (the enum is empty)")
        out += [text.format(_json_text(node[key])) for key, text in _CONSTRAINTS if key in node]
        if node.get("uniqueItems"):
            out.append("no repeated items")
        return out + self.rule_notes(node)

    def rule_notes(self, node: dict, depth: int = 0) -> list[str]:
        """The keywords that relate parts of a value, in words (`not`, `if` / `then`, keys by
        pattern, `contains`, ...)."""
        out = []
        d = lambda sub: self.describe(sub, depth + 1)  # noqa: E731
        for part in node.get("allOf") or ():
            if part is not True and part != {} and \
                    not (isinstance(part, dict) and set(part) <= {"properties", "required"}):
                out.append(f"and {d(part)}")
        if node.get("not") in ({}, True):
            out.append("must not be given (the schema allows no value)")
        elif "not" in node:
            out.append(f"must not be {d(node['not'])}")
        if "if" in node and ("then" in node or "else" in node):
            text = f"if {'' if _keyed(node['if']) else 'it is '}{d(node['if'])}"
            if "then" in node:
                text += f", then {'' if _keyed(node['then']) else 'it must be '}" \
                        f"{d(node['then'])}"
            if "else" in node:
                text += f"; otherwise {'' if _keyed(node['else']) else 'it must be '}" \
                        f"{d(node['else'])}"
            out.append(text)
        for pattern, sub in (node.get("patternProperties") or {}).items():
            out.append(f"keys matching the pattern {_json_text(pattern)} hold {d(sub)}")
        if node.get("additionalProperties") is False:
            out.append("no other keys")
        if "propertyNames" in node:
            out.append(f"every key is {d(node['propertyNames'])}")
        for key, needs in (node.get("dependentRequired") or {}).items():
            if isinstance(needs, list) and needs:
                out.append(f"when {key} is given, {', '.join(map(str, needs))} must be too")
        for key, sub in (node.get("dependentSchemas") or {}).items():
            out.append(f"when {key} is given, it must be {d(sub)}")
        if "contains" in node:
            lo, hi = node.get("minContains", 1), node.get("maxContains")
            many = f"at least {lo}" if hi is None else f"{lo} to {hi}"
            out.append(f"holds {many} item(s) that are {d(node['contains'])}")
        for key, what in (("unevaluatedProperties", "keys"), ("unevaluatedItems", "items")):
            if node.get(key) is False:
                out.append(f"no {what} other than those described")
            elif isinstance(node.get(key), dict):
                out.append(f"other {what} hold {d(node[key])}")
        return out

    def describe(self, node: Any, depth: int = 0) -> str:
        """A subschema in a few words: its type and what it allows."""
        if node is True or node == {}:
            return "any value"
        if node is False:
            return "nothing (no value is allowed)"
        if depth > 3:
            return "as its schema says"
        node, _ = self.deref(node)
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        name = self.type_name(node)
        parts = [] if name == "any" or (_keyed(node) and name in ("object", "dict")) else [name]
        for key, sub in props.items():
            if isinstance(sub, dict) and "const" in sub:
                parts.append(f"{key} = {_json_text(sub['const'])}")
            elif sub is False:
                parts.append(f"{key} must not be given")
            else:
                parts.append(f"{key} {self.describe(sub, depth + 1)}")
        if node.get("required"):
            parts.append(f"{', '.join(map(str, node['required']))} must be given")
        parts += self.notes(node) if depth < 3 else []
        return ", ".join(parts) or "any value"

    def nested(self, node: dict, name: str, indent: str, stack: tuple) -> list[str]:
        """The menu lines below a field of type `node`: one per field of an object, and of the
        items of a list or a dict, all the way down; a recursive type is shown once."""
        node, ref = self.deref(node)
        if ref is not None:
            if ref in stack:
                return []
            stack = (*stack, ref)
        members = self.variants(node)
        if len(members) == 1:
            return self.nested(members[0], name, indent, stack)
        if members:
            return self._union_lines(node, members, name, indent, stack)
        if "properties" in node:
            title = node.get("title") or ref
            aliases = self.aliases.get(title, {})
            required = set(node.get("required", ()))
            return [line for key, sub in node["properties"].items()
                    for line in self.field_lines(
                        f"{name}.{key}", sub, key in required, indent, stack,
                        [f"alias of {aliases[key]}"] if key in aliases else [])]
        items, extra = node.get("items"), node.get("additionalProperties")
        if isinstance(node.get("prefixItems"), list):
            lines = [line for i, sub in enumerate(node["prefixItems"])
                     for line in self.field_lines(f"{name}[{i}]", sub, True, indent, stack)]
            if isinstance(items, dict):
                lines += self.field_lines(f"{name}[{len(node['prefixItems'])}:]", items, True,
                                          indent, stack, only_shapes=True)
            return lines
        if node.get("type") == "array" and isinstance(items, dict):
            return self.field_lines(f"{name}[]", items, True, indent, stack, only_shapes=True)
        if isinstance(extra, dict) and extra:
            return self.field_lines(f"{name}.<key>", extra, True, indent, stack,
                                    only_shapes=True)
        return []

    def _union_lines(self, node: dict, members: list[dict], name: str, indent: str,
                     stack: tuple) -> list[str]:
        tag = (node.get("discriminator") or {}).get("propertyName")
        lines = []
        for m in members:
            inner = self.nested(m, name, indent + "  ", stack)
            if not inner:
                continue  # a scalar member: the type name says all there is
            head = f"{indent}- {name} as {self.type_name(m)}"
            tag_node = self.deref(m)[0].get("properties", {}).get(tag or "", {})
            if "const" in tag_node:
                head += f" ({tag} = {_json_text(tag_node['const'])})"
            lines += [head + ":", *inner]
        return lines

    def field_lines(self, name: str, node: dict, required: bool, indent: str, stack: tuple,
                    notes: list[str] = (), only_shapes: bool = False, default: Any = _UNSET,
                    description: Any = _UNSET) -> list[str]:
        """A field's line (`- name (type, required): description; notes`) and those below it;
        with `only_shapes`, nothing for a field with nothing below it. `default` and
        `description` are a parameter's own, where the schema's are not the ones to show."""
        inner = self.nested(node, name, indent + "  ", stack)
        if only_shapes and not inner and not self.notes(node):
            return []
        own = node if isinstance(node, dict) else {}
        line = field_line(name, self.type_name(node), required,
                          own.get("default", MISSING) if default is _UNSET else default,
                          self.description(node) if description is _UNSET else description,
                          [*self.notes(node), *notes], indent)
        return [line, *inner]

    def inline(self, node: Any, stack: tuple = ()) -> Any:
        """`node` with every `$ref` written out in place (a schema to put inside another
        one, where `#/$defs/...` would point nowhere); a recursive reference becomes an open
        object."""
        if isinstance(node, list):
            return [self.inline(x, stack) for x in node]
        if not isinstance(node, dict):
            return node
        node, ref = self.deref(node)
        if ref is not None:
            if ref in stack:
                return {"type": "object", "description": f"a {ref}, as above"}
            stack = (*stack, ref)
        return {k: v if k in ("enum", "const", "default", "examples") else self.inline(v, stack)
                for k, v in node.items() if k not in ("$defs", "discriminator")}

    def extra_paths(self, node: dict, value: Any, path: str, dropped: list[str]) -> None:
        """Record the paths of fields in `value` that the type ignores (P5: dropped)."""
        node, _ = self.deref(node)
        members = self.variants(node)
        tag = (node.get("discriminator") or {}).get("propertyName")
        if tag and isinstance(value, dict):
            ref = (node["discriminator"].get("mapping") or {}).get(value.get(tag))
            if isinstance(ref, str):
                self.extra_paths({"$ref": ref}, value, path, dropped)
            return
        if len(members) == 1:
            self.extra_paths(members[0], value, path, dropped)
        elif isinstance(value, dict) and "properties" in node:
            props = node["properties"]
            names = set(self.aliases.get(node.get("title"), {}).values())
            ignored = "additionalProperties" not in node and "patternProperties" not in node
            for k, v in value.items():
                if k in props:
                    self.extra_paths(props[k], v, f"{path}.{k}", dropped)
                elif ignored and k not in names:
                    dropped.append(f"{path}.{k}")
        elif isinstance(value, dict) and isinstance(node.get("additionalProperties"), dict):
            for k, v in value.items():
                self.extra_paths(node["additionalProperties"], v, f"{path}.{k}", dropped)
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            for i, v in enumerate(value):
                self.extra_paths(node["items"], v, f"{path}[{i}]", dropped)


def _keyed(node: Any) -> bool:
    """A subschema about an object's keys (what a condition on the arguments is made of)."""
    return isinstance(node, dict) and bool({"properties", "required"} & set(node)) and \
        node.get("type") in (None, "object")


def _json_type(v: Any) -> str:
    return json_type(v) or "any"


def _number_example(node: dict, kind: type) -> Any:
    """The smallest value the bounds allow, else 0: a placeholder that passes `ge=1`."""
    lo = node.get("minimum")
    if lo is None and "exclusiveMinimum" in node:
        lo = node["exclusiveMinimum"] + 1
    hi = node.get("maximum")
    if hi is None and "exclusiveMaximum" in node:
        hi = node["exclusiveMaximum"] - 1
    x = lo if lo is not None else (min(0, hi) if hi is not None else 0)
    return kind(x)




_PLAIN = SchemaDoc({})
_PLAIN._names = _PLAIN._notes = None   # (shared by every caller: it would keep their nodes)


def type_name(node: Any, doc: SchemaDoc | None = None) -> str:
    """The name of a JSON Schema node's type, as the menu shows it and error messages say it
    (`list[str]`, `Order`, `int | null`, `any`): `SchemaDoc.type_name`, the one naming of a
    node, with `doc`'s references (none without one)."""
    return (doc or _PLAIN).type_name(node)


class UserType:
    """A type of the user's, as a `Field.user`: a node of a JSON Schema document, and the check
    that turns a JSON value into the Python one (None for the fields of a `ClassOption`, which
    validates the class as a whole)."""

    def __init__(self, doc: SchemaDoc, node: dict, check: Callable | None = None,
                 stack: tuple = (), notes: list[str] = ()):
        self.doc, self.node, self.check = doc, node, check
        self.stack, self.extra_notes = stack, list(notes)

    def __repr__(self) -> str:
        return f"UserType({self.type_name()})"

    def type_name(self) -> str:
        return self.doc.type_name(self.node)

    def placeholder(self) -> Any:
        x = self.doc.example(self.node, self.stack)
        return {} if x is _CUT else x

    def notes(self) -> list[str]:
        return [*self.doc.notes(self.node), *self.extra_notes]

    def nested_lines(self, name: str, indent: str) -> list[str]:
        return self.doc.nested(self.node, name, indent, self.stack)

    def json_schema(self, defs: dict | None = None) -> dict:
        if defs is None:
            return self.doc.inline(self.node, self.stack)
        defs.update(self.doc.defs)
        return {k: v for k, v in self.node.items() if k != "$defs"}

    def document(self) -> dict:
        """The whole JSON Schema: the type with its `$defs` beside it (the type written out at
        the top, unless it refers to itself)."""
        node, ref = self.doc.deref(self.node)
        defs = dict(self.doc.defs)
        if ref is not None and f'"#/$defs/{ref}"' not in json.dumps(self.doc.defs):
            defs.pop(ref, None)
        else:
            node = {k: v for k, v in self.node.items() if k != "$defs"}
        import copy
        return {**copy.deepcopy(node), **({"$defs": copy.deepcopy(defs)} if defs else {})}

    def validate(self, value: Any, path: str, dropped: list[str]) -> Any:
        if self.check is None:
            raise TypeError(f"{path}: a field of a class is validated with its class")
        return self.check(value, path, dropped)
