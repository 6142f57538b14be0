"""The user's own types — pydantic models, dataclasses, TypedDicts — as options and parameters.

A class given as an option (`{"order": Order}`, `{"order": ("Place an order.", Order)}`, `Order`
in the list form) becomes a `ClassOption`: the model fills in the class's fields and the pick
resolves to an instance. A function parameter annotated with such a class (also `list[Order]`,
`dict[str, Order]`, `Order | None`, a discriminated `Cat | Dog`) becomes a `Field` whose `user` is a
`UserType`, and the function receives instances. Both are described by the type's JSON Schema —
pydantic's own (`TypeAdapter(t).json_schema()`) when pydantic is installed, else one built here
from options.py's own description of each field — and the menu lines, the `Call:` placeholder and
the native-tool schema are all read from it. Validation is pydantic's own (validators,
constraints, coercion, `allow_inf_nan` as the user configured them), its errors mapped to the
project's error kinds with the path into the arguments; without pydantic, dataclasses and
TypedDicts are checked field by field by options.py's `validate`. pydantic is imported only when
a class of the user's is met, so `import openprogram` never needs it. The package registers this
module's option kind and annotation hook when it loads.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import sys
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Callable

from .errors import OptionError, ParseError, SchemaError
from .jsonable import to_jsonable
from .pytypes import FORMAT_EXAMPLES, SHORT, json_type
from .options import (_MISSING, Field, Option, Param, _check_json_value, _describe_value,
                      annotation_field, field_line, register_annotation_hook,
                      register_option_kind, validate)

__all__ = ["ClassOption", "UserType", "is_user_class", "user_type"]


def _pydantic():
    """The pydantic module (imported now), or None when it is not installed."""
    try:
        import pydantic
    except ImportError:
        return None
    return pydantic


def _is_model(obj: Any) -> bool:
    # A class can be a pydantic model only once pydantic is imported: this never imports it.
    mod = sys.modules.get("pydantic")
    return mod is not None and isinstance(obj, type) and issubclass(obj, mod.BaseModel)


def _is_typeddict(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, dict) and hasattr(obj, "__required_keys__")


def is_user_class(obj: Any) -> bool:
    """A pydantic model, a dataclass or a TypedDict class."""
    return isinstance(obj, type) and (
        _is_model(obj) or dataclasses.is_dataclass(obj) or _is_typeddict(obj))


def _pydantic_metadata(x: Any) -> bool:
    return type(x).__module__.split(".")[0] in ("pydantic", "annotated_types")


def _involves(ann: Any) -> bool:
    """Whether `ann` holds a class of the user's, or pydantic's own metadata
    (`Annotated[int, Field(ge=1)]`)."""
    import typing  # loaded with the first annotation read, not with openprogram
    if is_user_class(ann):
        return True
    if typing.get_origin(ann) is typing.Annotated:
        return any(_pydantic_metadata(x) for x in ann.__metadata__) or \
            _involves(typing.get_args(ann)[0])
    return any(_involves(a) for a in typing.get_args(ann))


def _first_paragraph(text: Any) -> str:
    text = text if isinstance(text, str) else ""
    return text.strip().split("\n\n")[0].replace("\n", " ")


# ---------------------------------------------------------------------------------------------
# Reading a JSON Schema: type names, placeholders, notes and the menu's nested lines
# ---------------------------------------------------------------------------------------------

_JSON_TYPES = SHORT
_FORMAT_EXAMPLES = FORMAT_EXAMPLES
_CONSTRAINTS = [("minimum", ">= {}"), ("exclusiveMinimum", "> {}"), ("maximum", "<= {}"),
                ("exclusiveMaximum", "< {}"), ("multipleOf", "a multiple of {}"),
                ("minLength", "at least {} characters"), ("maxLength", "at most {} characters"),
                ("pattern", "matching the pattern {}"), ("format", "format {}"),
                ("minItems", "at least {} items"), ("maxItems", "at most {} items"),
                ("minProperties", "at least {} keys"), ("maxProperties", "at most {} keys")]
_CUT = object()  # a placeholder that would expand a recursive type into itself


class _Doc:
    """A JSON Schema document: its `$defs` and, for pydantic models, the aliases of their
    fields (`{model title: {alias: field name}}`), which the schema itself does not keep."""

    def __init__(self, defs: dict, aliases: dict | None = None):
        self.defs, self.aliases = defs, aliases or {}

    def deref(self, node: dict) -> tuple[dict, str | None]:
        """`node` with a `$ref` to one of the defs followed (the node's own keys win), and the
        def's name."""
        if not isinstance(node, dict):  # a boolean schema: `true` is any value
            return {}, None
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = "#" if ref == "#" else ref.rpartition("/")[2] \
                if ref.startswith(("#/$defs/", "#/definitions/")) else None
            if name in self.defs:
                return {**self.defs[name], **{k: v for k, v in node.items() if k != "$ref"}}, name
        return node, None

    def variants(self, node: dict) -> list[dict]:
        """The non-null members of an anyOf / oneOf."""
        return [v for v in node.get("anyOf") or node.get("oneOf") or []
                if v.get("type") != "null"]

    def type_name(self, node: dict) -> str:
        node, ref = self.deref(node)
        if ref is not None and ("properties" in node or "enum" in node):
            return node.get("title") or (ref if ref != "#" else "object")
        members = node.get("anyOf") or node.get("oneOf")
        if members:
            return " | ".join(dict.fromkeys(self.type_name(m) for m in members))
        if "const" in node or "enum" in node:
            values = [node["const"]] if "const" in node else node["enum"]
            kinds = {_JSON_TYPES.get(_json_type(v), "any") for v in values}
            return kinds.pop() if len(kinds) == 1 else "any"
        t = node.get("type")
        null = " | null" if node.get("nullable") is True else ""  # OpenAPI's spelling
        if isinstance(t, list):
            return " | ".join(self._one_type(x, node) for x in t) + null
        return self._one_type(t, node) + null

    def _one_type(self, t: Any, node: dict) -> str:
        if t == "array":
            items = node.get("items")
            return f"list[{self.type_name(items)}]" if isinstance(items, dict) and items \
                else "list"
        if t == "object" or "properties" in node:
            if "properties" in node:
                return node.get("title") or "object"
            extra = node.get("additionalProperties")
            return f"dict[str, {self.type_name(extra)}]" if isinstance(extra, dict) and extra \
                else "dict"
        return _JSON_TYPES.get(t, "any")

    def project_type(self, node: dict) -> str:
        """The `Field.type` of options.py closest to `node`."""
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
            return _FORMAT_EXAMPLES.get(node.get("format"), "<str>")
        return {"boolean": False, "null": None}.get(t, "<any>")

    def _object_example(self, node: dict, stack: tuple) -> Any:
        props = node.get("properties")
        if props:
            out = {}
            for key, sub in props.items():
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
        """What the menu says about a value besides its type: allowed values, constraints."""
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
            out.append(f"always {json.dumps(node['const'])}")
        elif node.get("enum"):
            out.append("one of: " + ", ".join(json.dumps(v) for v in node["enum"]))
        out += [text.format(json.dumps(node[key])) for key, text in _CONSTRAINTS if key in node]
        if node.get("uniqueItems"):
            out.append("no repeated items")
        return out

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
                head += f" ({tag} = {json.dumps(tag_node['const'])})"
            lines += [head + ":", *inner]
        return lines

    def field_lines(self, name: str, node: dict, required: bool, indent: str, stack: tuple,
                    notes: list[str] = (), only_shapes: bool = False) -> list[str]:
        """A field's line (`- name (type, required): description; notes`) and those below it;
        with `only_shapes`, nothing for a field with nothing below it."""
        inner = self.nested(node, name, indent + "  ", stack)
        if only_shapes and not inner and not self.notes(node):
            return []
        line = field_line(name, self.type_name(node), required, node.get("default", _MISSING),
                          self.description(node), [*self.notes(node), *notes], indent)
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


# ---------------------------------------------------------------------------------------------
# A user type as options.py sees it
# ---------------------------------------------------------------------------------------------


class UserType:
    """A type of the user's, as a `Field.user`: a node of a JSON Schema document, and the check
    that turns a JSON value into the Python one (None for the fields of a `ClassOption`, which
    validates the class as a whole)."""

    def __init__(self, doc: _Doc, node: dict, check: Callable | None = None,
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
            defs.pop(ref)
        else:
            node = {k: v for k, v in self.node.items() if k != "$defs"}
        import copy
        return {**copy.deepcopy(node), **({"$defs": copy.deepcopy(defs)} if defs else {})}

    def validate(self, value: Any, path: str, dropped: list[str]) -> Any:
        if self.check is None:
            raise TypeError(f"{path}: a field of a class is validated with its class")
        return self.check(value, path, dropped)


def _memo(fn: Callable) -> Callable:
    """`fn(ann)` remembered per annotation (building a TypeAdapter takes milliseconds, and a
    notebook rebuilds its menus often); an unhashable annotation is simply not remembered."""
    cached = functools.lru_cache(maxsize=256)(fn)

    @functools.wraps(fn)
    def wrapper(ann):
        try:
            hash(ann)
        except TypeError:
            return fn(ann)
        return cached(ann)
    return wrapper


@_memo
def user_type(ann: Any) -> UserType | None:
    """The `UserType` of an annotation that holds a class of the user's; None for a list,
    union or `Optional` of one that options.py reads itself (asking again for the class).
    Raises TypeError (with pydantic's message) for one that cannot be described."""
    import typing  # loaded with the first annotation read, not with openprogram
    pyd = _pydantic()
    if pyd is not None:
        try:
            adapter = pyd.TypeAdapter(ann)
            schema = adapter.json_schema()
        except pyd.PydanticUserError as exc:
            if getattr(exc, "code", None) != "typed-dict-version":
                raise SchemaError(_cannot(ann, exc)) from None
            # typing.TypedDict before Python 3.12: pydantic refuses it, the fallback does not.
        except Exception as exc:
            raise SchemaError(_cannot(ann, exc)) from None
        else:
            doc = _Doc(schema.get("$defs", {}), _aliases(ann))
            node = {k: v for k, v in schema.items() if k != "$defs"}
            return UserType(doc, node, functools.partial(_pydantic_check, adapter, doc, node))
    if is_user_class(ann):
        return _fallback_class(ann)
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is dict and len(args) == 2:
        return _fallback_mapping(ann, annotation_field(args[1], f"{_name(ann)} values"))
    return None


def _user_type_at(ann: Any, where: str, error: type[Exception]) -> UserType | None:
    """`user_type(ann)`, its refusal raised as `error` naming `where` (the option, the
    parameter)."""
    try:
        return user_type(ann)
    except TypeError as exc:
        raise error(f"{where}: {exc}") from None


def _cannot(ann: Any, exc: Exception) -> str:
    # pydantic's first paragraph names the type at fault and the fix; the rest is a URL.
    return f"pydantic cannot describe {_name(ann)}: {str(exc).split(chr(10) * 2)[0]}"


def _name(ann: Any) -> str:
    return getattr(ann, "__name__", None) or repr(ann)


def _aliases(ann: Any) -> dict[str, dict[str, str]]:
    """`{model title: {alias: field name}}` for the pydantic models reachable from `ann`."""
    out: dict[str, dict[str, str]] = {}
    seen: set[int] = set()

    def walk(t: Any) -> None:
        import typing  # loaded with the first annotation read, not with openprogram
        if id(t) in seen:
            return
        seen.add(id(t))
        if _is_model(t):
            names = {f.alias: n for n, f in t.model_fields.items() if f.alias and f.alias != n}
            if names:
                out[t.model_config.get("title") or t.__name__] = names
            for f in t.model_fields.values():
                walk(f.annotation)
        elif is_user_class(t):
            try:
                hints = typing.get_type_hints(t)
            except Exception:  # unresolvable names: pydantic will say so itself
                hints = {}
            for h in hints.values():
                walk(h)
        for a in typing.get_args(t):
            walk(a)
    walk(ann)
    return out


# -- validation by pydantic -------------------------------------------------------------------

_KINDS = {
    "missing_required": {"missing", "union_tag_not_found", "missing_argument",
                         "missing_keyword_only_argument", "missing_positional_only_argument"},
    "enum_violation": {"literal_error", "enum", "union_tag_invalid"},
    "type_mismatch": {"int_parsing", "float_parsing", "bool_parsing", "int_from_float",
                      "none_required", "is_instance_of"},
}


def _kind(error_type: str) -> str:
    """The project's error kind of a pydantic error type: a missing field, a value outside a
    Literal or Enum, a wrong JSON type, or else a value its type refuses (a constraint, a
    validator's ValueError)."""
    for kind, types in _KINDS.items():
        if error_type in types:
            return kind
    return "type_mismatch" if error_type.endswith("_type") else "invalid_value"


def _loc_path(prefix: str, loc: tuple, value: Any) -> str:
    """The path of a pydantic error location into the arguments (`args.items[0].qty`). The
    location also names union members (`Cat`, `function-after[...]`); walking the value tells
    them from its fields."""
    out, cur = prefix, value
    for i, part in enumerate(loc):
        if isinstance(part, int) and isinstance(cur, list) and 0 <= part < len(cur):
            out, cur = f"{out}[{part}]", cur[part]
        elif isinstance(cur, dict) and (part in cur or i == len(loc) - 1):
            out, cur = f"{out}.{part}", cur.get(part)
    return out


def _error_text(error: dict, value: Any, prefix: str) -> tuple[str, str]:
    """(path, message) of one pydantic error; a validator's message is its own."""
    path = _loc_path(prefix, error["loc"], value)
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found") and "discriminator" in ctx:
        path = f"{path}.{str(ctx['discriminator']).strip(chr(39))}"
    if kind in _KINDS["missing_required"]:
        return path, f"{path} is required ({error['msg']})"
    message = str(ctx["error"]) if kind == "value_error" and "error" in ctx else error["msg"]
    return path, f"{path}: {message} (got {_describe_value(error.get('input'))})"


def _pydantic_check(adapter: Any, doc: _Doc, node: dict, value: Any, path: str,
                    dropped: list[str]) -> Any:
    # Lone surrogates never reach the user's code; non-finite numbers are the type's own
    # business (pydantic's allow_inf_nan).
    _check_json_value(value, path, deep=True, numbers=False)
    try:
        out = adapter.validate_python(value)
    except sys.modules["pydantic"].ValidationError as exc:
        errors = exc.errors(include_url=False)
        where, message = _error_text(errors[0], value, path)
        more = [_error_text(e, value, path)[1] for e in errors[1:4]]
        if more:
            message += "; also " + "; ".join(more)
        if len(errors) > 4:
            message += f" (and {len(errors) - 4} more problems)"
        raise ParseError(_kind(errors[0]["type"]), message, where) from None
    doc.extra_paths(node, value, path, dropped)
    return out


# -- validation without pydantic: dataclasses and TypedDicts, field by field -------------------

_fallback_types: dict[type, UserType] = {}


def _fallback_class(cls: type) -> UserType:
    """A dataclass or TypedDict described and checked with options.py's own fields. Registered
    before its fields are read, so a class that refers to itself finds itself."""
    if cls in _fallback_types:
        return _fallback_types[cls]
    name = cls.__name__
    defs: dict = {name: {}}
    t = UserType(_Doc(defs), {"$ref": f"#/$defs/{name}"})
    _fallback_types[cls] = t
    try:
        fields = _class_fields(cls)
    except Exception:
        del _fallback_types[cls]
        raise
    spec: dict = {"type": "object", "title": name, "properties": {}, "required": []}
    doc = cls.__dict__.get("__doc__")
    if doc and not doc.startswith(f"{name}("):  # not the signature dataclass() writes
        spec["description"] = doc.strip()
    for key, f, required, default in fields:
        spec["properties"][key] = prop = f.json_schema(defs)
        if required:
            spec["required"].append(key)
        elif default is not _MISSING:
            prop["default"] = to_jsonable(default)
    defs[name].update(spec)  # in place: a class met while reading the fields holds this dict
    t.check = functools.partial(_check_class, cls, fields)
    return t


def _class_fields(cls: type) -> list[tuple[str, Field, bool, Any]]:
    """(name, Field, required, default) of each field the model fills in."""
    import typing  # loaded with the first annotation read, not with openprogram
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise SchemaError(f"cannot read the annotations of {cls.__name__} ({exc})") from None
    where = f"field {{!r}} of {cls.__name__}"
    if _is_typeddict(cls):
        out = []
        for key, ann in hints.items():
            if typing.get_origin(ann) in (typing.Required, typing.NotRequired):
                ann = typing.get_args(ann)[0]
            out.append((key, annotation_field(ann, where.format(key)),
                        key in cls.__required_keys__, _MISSING))
        return out
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or \
            f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else _MISSING
        out.append((f.name, annotation_field(hints.get(f.name, typing.Any), where.format(f.name)),
                    not has_default, default))
    return out


def _check_class(cls: type, fields: list, value: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(value, dict):
        raise ParseError("type_mismatch", f"{path} must be an object ({cls.__name__}), got "
                                          f"{_describe_value(value)}", path)
    kwargs = {}
    for key, f, required, _ in fields:
        if key in value:
            kwargs[key] = validate(value[key], f, f"{path}.{key}", dropped)
        elif required:
            raise ParseError("missing_required", f"{path}.{key} is required by "
                                                 f"{cls.__name__} ({f.type_name()})",
                             f"{path}.{key}")
    names = {name for name, *_ in fields}
    dropped.extend(f"{path}.{k}" for k in value if k not in names)
    if _is_typeddict(cls):
        return kwargs
    try:
        return cls(**kwargs)
    except (ValueError, AssertionError) as exc:  # __post_init__ refusing a value
        raise ParseError("invalid_value", f"{path}: {exc}", path) from None


def _fallback_mapping(ann: Any, values: Field) -> UserType:
    """`dict[str, X]` with X a class of the user's: each value checked as X."""
    defs: dict = {}
    node = {"type": "object", "additionalProperties": values.json_schema(defs)}

    def check(value: Any, path: str, dropped: list[str]) -> dict:
        if not isinstance(value, dict):
            raise ParseError("type_mismatch", f"{path} must be an object ({_name(ann)}), got "
                                              f"{_describe_value(value)}", path)
        return {k: validate(v, values, f"{path}.{k}", dropped) for k, v in value.items()}
    return UserType(_Doc(defs), node, check)


# ---------------------------------------------------------------------------------------------
# Where options.py asks
# ---------------------------------------------------------------------------------------------


def _annotation_hook(ann: Any, where: str) -> Field | None:
    """A parameter annotated with a class of the user's (or a container of one) as a Field.
    Without pydantic, lists, unions and `Optional` of such a class are left to options.py,
    which asks again for the class itself."""
    if not _involves(ann):
        return None
    t = _user_type_at(ann, where, TypeError)
    if t is None:
        return None
    return Field(t.doc.project_type(t.node), description=t.doc.description(t.node), user=t)


class _Validated(dict):
    """The fields of a validated instance, by name, carrying the instance itself: `resolve`
    returns the very object the validation made (running a class's validators or
    `__post_init__` a second time could change it)."""
    instance: Any = None


def _fields_of(instance: Any) -> dict:
    if isinstance(instance, dict):
        return dict(instance)
    if dataclasses.is_dataclass(instance):
        return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}
    names = type(instance).model_fields  # a pydantic model
    return {**{n: getattr(instance, n) for n in names}, **(instance.model_extra or {})}


class ClassOption(Option):
    """A pydantic model, dataclass or TypedDict as an option: the model fills in the class's
    fields and the pick resolves to an instance (`Order(...)`, the dataclass, a plain dict for
    a TypedDict). The menu shows the class docstring, each field's type, description, alias,
    default, allowed values and constraints, nested types as nested shapes."""
    kind = "class"

    def __init__(self, name: str, cls: type, utype: UserType, description: str | None):
        self.cls, self.utype = cls, utype
        doc = utype.doc
        root, ref = doc.deref(utype.node)
        stack = (ref,) if ref is not None else ()
        aliases = doc.aliases.get(root.get("title") or ref, {})
        required = set(root.get("required", ()))
        params = []
        for key, prop in (root.get("properties") or {}).items():
            t = UserType(doc, prop, None, stack,
                         [f"alias of {aliases[key]}"] if key in aliases else [])
            params.append(Param(key, Field(doc.project_type(prop), doc.description(prop),
                                           user=t),
                                required=key in required, default=prop.get("default", _MISSING)))
        self._names = aliases  # alias -> field name, to tell which fields the model gave
        super().__init__(name, description if description is not None else
                         doc.description(root), params)

    @classmethod
    def from_handler(cls, name: str, handler: Any, description: str | None,
                     where: str) -> "ClassOption | None":
        if not is_user_class(handler):
            return None
        return cls(name, handler, _user_type_at(handler, where, OptionError), description)

    def json_schema(self) -> dict:
        return self.utype.document()

    def pick_schema(self) -> dict:
        out = super().pick_schema()
        defs = out["properties"]["args"].pop("$defs", None)
        if defs:  # `#/$defs/...` points at the root of the document
            out["$defs"] = defs
        return out

    def bind(self, args: dict, *, runtime: Any, context: dict, dropped: list[str],
             injected: list[str], prefix: str = "args") -> tuple[dict, dict]:
        instance = self.utype.validate(args, prefix, dropped)
        kwargs = _Validated(_fields_of(instance))
        kwargs.instance = instance
        given = {self._names.get(k, k) for k in args}
        return kwargs, {k: v for k, v in kwargs.items() if k in given}

    def resolve(self, kwargs: dict) -> Any:
        if isinstance(kwargs, _Validated):
            return kwargs.instance
        # kwargs written by hand (resolve_decision(name, {...}, options)): validate them now.
        return self.utype.validate(dict(kwargs), "args", [])


register_option_kind(ClassOption)
register_annotation_hook(_annotation_hook)
