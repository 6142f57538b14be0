"""The schema model: every way of declaring a parameter, read once into a `Field`.

A `Field` is one node of a parameter's schema (a scalar, a list of `items`, an object of
`fields`, a union, a class of the user's), built from whichever way the caller declared it: the
spec forms (rules S1-S3: `str`, `"a description"`, `[item]`, `{field: spec}`, `{"type": ...,
"options": [...]}`), type annotations and defaults (`Literal`, `Enum`, `Optional`, `list[X]`,
`dict[str, X]`, the standard-library types of type_table.py, and through an annotation hook the
user's classes), and a function's signature with its `input_meta` (rule A8: `function_params`).
A Field writes itself out as the JSON Schema the tools and json_schema modes send
(`json_schema()`) and as the schema the validator checks (`internal()`: the same schema plus the
names messages use and the hooks that make Python values); `validate` checks a model-written
value against it with validator.py, compiled once per field. (Tool definitions and plain JSON
Schema need no Field: tool_definitions.py hands their schema to the validator as it is.)
"""
from __future__ import annotations

import enum
import functools
import inspect
import sys
import types
import warnings
from dataclasses import dataclass

from ...base.errors import OptionError, OptionWarning, SchemaError
from ...base.json_form import to_jsonable
from ...base.model_protocol import ModelCaller
from .reader import MISSING, SchemaDoc, UserType
from .reply_values import equal
from .type_table import LONG, python_type
from .type_table import SCALARS as _SCALARS
from .type_table import TYPE_NAMES as _TYPE_NAMES
from .validator import CHECK, NAME, PY, compile_schema

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

META_KEYS = frozenset({"type", "description", "options", "fields", "items"})


RUNTIME_PARAM_NAMES = frozenset({"runtime", "exec_runtime", "review_runtime"})


#: The keys of one parameter's entry in `input_meta` (rule A8).
META_PARAM_KEYS = frozenset({"description", "options", "hidden"})






@dataclass
class Field:
    """One node of a schema: a scalar, a list of `items`, or an object of `fields`."""
    type: str                                   # str int float bool list dict object any union
    description: str = ""
    options: list | None = None                 # allowed values (enum)
    fields: dict[str, Field] | None = None    # for type "object"
    items: Field | None = None                # a "list"'s item type, a "dict"'s value type
    nullable: bool = False
    # The Python values behind `options` where they are not JSON (Enum members, dates): the
    # model is shown and writes the JSON value, the function receives the Python one.
    values: list | None = None
    # A type of the user's (user_classes.py: a pydantic model, dataclass, TypedDict) describes and
    # validates itself: type_name(), placeholder(), json_schema(), notes(), nested_lines(name,
    # indent) and validate(value, path, dropped) take the place of the plain logic below.
    user: Any = None
    alts: list[Field] | None = None           # for type "union": the first that fits wins
    # A standard-library type JSON carries as text or a number (pytypes.python_type: a date,
    # a UUID, Decimal, a path): the JSON Schema `format` checked, and the function that makes
    # the Python value the function receives.
    format: str | None = None
    py: Any = None

    def view(self) -> UserType:
        """This field's schema as the menu reads it (reader.py): a class's or a
        definition's own node, else the field's JSON Schema; made once per field, so the menu
        lines, the `Call:` placeholder and the type names in messages come from one reading."""
        if self.user is not None:
            return self.user
        u = self.__dict__.get("_view")
        if u is None:
            defs: dict = {}
            node = self.json_schema(defs)
            u = self.__dict__["_view"] = UserType(SchemaDoc(defs), node)
        return u

    def type_name(self) -> str:
        return self.view().type_name()

    def placeholder(self) -> Any:
        return self.view().placeholder()

    def json_schema(self, defs: dict | None = None) -> dict:
        """The JSON Schema of this field (for native tool specs). The user's types inside it
        are written out in place, or, given a `defs` dict, put there and referred to by
        `$ref` (the form a recursive type needs)."""
        if self.user is not None:
            out = self.user.json_schema(defs)
            if self.description:
                out["description"] = self.description
            return {"anyOf": [out, {"type": "null"}]} if self.nullable else out
        base = "object" if self.type == "object" else LONG.get(self.type)
        out: dict = {} if base is None else {"type": base}
        if self.nullable and base:
            out["type"] = [base, "null"]
        if self.type == "union":
            out["anyOf"] = [a.json_schema() for a in self.alts or ()] + \
                ([{"type": "null"}] if self.nullable else [])
        if self.description:
            out["description"] = self.description
        if self.format:
            out["format"] = self.format
        if self.options:
            out["enum"] = list(self.options)
        if self.type == "object":
            out["properties"] = {k: f.json_schema(defs) for k, f in (self.fields or {}).items()}
            out["required"] = list(self.fields or {})
        if self.type == "list" and self.items is not None:
            out["items"] = self.items.json_schema(defs)
        if self.type == "dict" and self.items is not None:
            out["additionalProperties"] = self.items.json_schema(defs)
        return out


    def internal(self) -> dict:
        """The schema the validator checks this field against: its JSON Schema, with the names
        error messages use and the hooks that make Python values (an Enum member, a class of
        the user's) under keys no JSON Schema has."""
        if self.user is not None and self.options is None:
            out: dict = {CHECK: self.user.validate}
        elif self.type == "union":
            out = {"anyOf": [a.internal() for a in self.alts or ()]}
        else:
            out = {} if self.type == "any" else {"type": LONG.get(self.type, "object")}
            if self.type == "object":
                out["properties"] = {k: f.internal() for k, f in (self.fields or {}).items()}
                out["required"] = list(self.fields or {})
            elif self.type == "list" and self.items is not None:
                out["items"] = self.items.internal()
            elif self.type == "dict" and self.items is not None:
                out["additionalProperties"] = self.items.internal()
        if self.format:
            out["format"] = self.format
        if self.options is not None:
            out["enum"] = list(self.options)
            if self.values is not None or self.type in ("any", "union"):
                out[PY] = functools.partial(_own_value, self.options, self.values)
        elif self.py is not None:
            out[PY] = self.py
        if self.nullable:
            out["nullable"] = True
        out[NAME] = self.type_name()
        return out


def _own_value(options: list, values: list | None, v: Any) -> Any:
    """The allowed value `v` equals, as the option set holds it: the Python value behind a JSON
    one (an Enum member, a date), or a mixed enum's own value (`Literal[1, "a"]` given 1.0
    passes 1)."""
    for i, o in enumerate(options):
        if equal(v, o):
            if values is not None:
                return values[i]
            import copy
            return copy.deepcopy(o) if isinstance(o, (list, dict)) else o
    return v


@dataclass
class Param:
    name: str
    field: Field
    required: bool = True
    default: Any = MISSING
    source: str = "llm"            # "llm", "context" (hidden) or "runtime"


def schema_field(spec: Any, where: str) -> Field:
    """A schema entry as a `Field`. `where` names it in error messages."""
    if isinstance(spec, type) and spec in _SCALARS:
        return Field(_SCALARS[spec])
    if isinstance(spec, str):
        if spec.strip() in _TYPE_NAMES and spec.strip() not in ("str", "string"):
            t = _TYPE_NAMES[spec.strip()]
            warnings.warn(f"{where}: {spec!r} is a str field described as {spec!r} (rule S1: a "
                          f"string describes a str); for a field of type {t} write the type "
                          f"itself ({t}) or {{'type': {spec.strip()!r}}}", OptionWarning,
                          stacklevel=user_stacklevel())
        return Field("str", description=spec)
    if isinstance(spec, list):
        if len(spec) != 1:
            raise SchemaError(f"{where}: a list schema holds exactly one item template, e.g. "
                            f"[str] or [{{'name': str}}]; got {len(spec)} items {spec!r}")
        return Field("list", items=schema_field(spec[0], f"{where}[]"))
    if isinstance(spec, dict):
        if not spec:
            raise SchemaError(f"{where}: an empty dict is not a schema; give its fields, e.g. "
                            f"{{'name': str}}, or use dict for a free-form object")
        if set(spec) <= META_KEYS:
            return _meta_field(spec, where)
        if looks_like_json_schema(spec):
            warnings.warn(f"{where}: this dict looks like a JSON Schema, but a schema dict here "
                          f"is the spec form (rules S1, S3: its keys are field names); to give "
                          f"a JSON Schema, wrap it: openprogram.JsonSchema(schema)", OptionWarning,
                          stacklevel=user_stacklevel())
        return Field("object", fields={str(k): schema_field(v, f"{where}.{k}")
                                       for k, v in spec.items()})
    try:
        return annotation_field(spec, where)
    except TypeError:
        raise SchemaError(f"{where}: {spec!r} is not a schema. Use a type (str, int, float, bool, "
                        f"list, dict), a description string, [item_schema], {{field: schema}} or "
                        f"{{'type': ..., 'description': ..., 'options': [...]}}") from None


def _meta_field(spec: dict, where: str) -> Field:
    if "fields" in spec:
        f = schema_field(spec["fields"], where)
        if f.type != "object":
            raise SchemaError(f"{where}: 'fields' must be a dict of field schemas")
    elif "items" in spec:
        f = Field("list", items=schema_field(spec["items"], f"{where}[]"))
    elif "type" in spec:
        t = spec["type"]
        # In a meta-spec, a string names a type ("int", or JSON Schema's "integer"); elsewhere
        # a string is a described str field.
        f = Field(_TYPE_NAMES[t]) if isinstance(t, str) and t in _TYPE_NAMES else \
            schema_field(t, where)
    elif spec.get("options"):
        f = _enum_field(list(spec["options"]))
    else:
        f = Field("str")
    if "description" in spec:
        f.description = str(spec["description"])
    if "options" in spec:
        opts = spec["options"]
        if not isinstance(opts, (list, tuple)) or not opts:
            raise SchemaError(f"{where}: 'options' must be a non-empty list of allowed values")
        f.options = list(opts)
    return f


def _enum_field(values: list) -> Field:
    """A field whose value is one of `values`. Values JSON cannot hold (Enum members, dates) are
    shown and checked as their JSON value and map back to themselves (`Field.values`)."""
    shown_values = [to_jsonable(v) for v in values]
    kinds = {_SCALARS.get(type(v), "any") for v in shown_values}
    f = Field(kinds.pop() if len(kinds) == 1 else "any", options=shown_values)
    if any(type(a) is not type(b) or a != b for a, b in zip(values, shown_values)):
        f.values = list(values)
    return f


_annotation_hooks: list[Callable[[Any, str], Field | None]] = []


def register_annotation_hook(hook: Callable[[Any, str], Field | None]) -> None:
    """Let `hook(annotation, where)` describe annotations before the plain logic does: it returns
    a `Field` (usually one with `user` set) for an annotation it claims, else None. user_classes.py
    plugs in the user's own classes this way."""
    if hook not in _annotation_hooks:
        _annotation_hooks.insert(0, hook)


def annotation_field(ann: Any, where: str) -> Field:
    """A type annotation as a `Field`: str/int/float/bool/list/dict, list[X], dict[K, V],
    Optional[X], X | None, Literal[...], Annotated[X, "description"]."""
    import typing  # loaded with the first annotation read, not with openprogram
    if ann is MISSING or ann is typing.Any:
        return Field("any")
    if isinstance(ann, type) and ann in _SCALARS:
        return Field(_SCALARS[ann])
    for hook in _annotation_hooks:
        f = hook(ann, where)
        if f is not None:
            return f
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return _enum_field(list(ann))
    carried = python_type(ann)
    if carried is not None:  # a date, a UUID, Decimal, a path: as a dataclass field has them
        schema, make = carried
        return Field(_TYPE_NAMES[schema["type"]], format=schema.get("format"), py=make)
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        f = annotation_field(args[0], where)
        for extra in args[1:]:
            if isinstance(extra, str):
                f.description = extra
        return f
    if origin is typing.Literal:
        return _enum_field(list(args))
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        f = annotation_field(rest[0], where) if len(rest) == 1 else \
            Field("union", alts=[annotation_field(a, where) for a in rest])
        f.nullable = len(rest) < len(args)
        return f
    if origin is list:
        return Field("list", items=annotation_field(args[0], f"{where}[]") if args else None)
    if origin is dict:
        if args and args[0] not in (str, typing.Any):
            raise SchemaError(f"{where} is annotated {ann!r}, but the keys of a JSON object are "
                            f"always strings: annotate dict[str, ...]")
        return Field("dict", items=annotation_field(args[1], f"{where}[]") if args else None)
    raise SchemaError(f"{where} is annotated {ann!r}; decision options understand str, int, float, "
                      f"bool, list, dict, list[X], dict[str, X], Optional[X], Literal[...], "
                      f"Annotated[X, 'description'], Enums, dates, times, UUID, Decimal, paths "
                      f"and the user's classes: use one of those, or mark it hidden")


def _is_runtime_annotation(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, ModelCaller)


def function_params(fn: Callable, where: str) -> list[Param]:
    """The parameters of a function option, from its signature, annotations and `input_meta`."""
    import typing  # loaded with the first annotation read, not with openprogram
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise OptionError(f"{where}: cannot read the signature of {fn!r} ({exc}); wrap it in a "
                          f"def with named parameters") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    meta = getattr(fn, "input_meta", None) or {}
    if not isinstance(meta, dict):
        raise OptionError(f"{where}: input_meta must be a dict {{param: {{'description': ..., "
                          f"'options': [...], 'hidden': True}}}}")
    unknown = set(meta) - set(sig.parameters)
    if unknown:
        raise OptionError(f"{where}: input_meta names {sorted(unknown)}, which are not "
                          f"parameters of {getattr(fn, '__name__', fn)!r}; fix the names")
    for pname, m in meta.items():
        if not isinstance(m, dict):
            raise OptionError(f"{where}: input_meta[{pname!r}] must be a dict of "
                              f"{', '.join(sorted(META_PARAM_KEYS))}, got {m!r}")
        bad = sorted(set(m) - META_PARAM_KEYS, key=str)
        if bad:
            # A typo here ("hiden") would otherwise show the model a parameter meant to be hidden.
            raise OptionError(f"{where}: input_meta[{pname!r}] has unknown key(s) "
                              f"{', '.join(map(repr, bad))}; the keys are "
                              f"{', '.join(map(repr, sorted(META_PARAM_KEYS)))}")
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue  # fields outside the signature are dropped (P4), never sent to **kwargs
        ann = hints.get(p.name, p.annotation)
        m = meta.get(p.name, {})
        if p.name in RUNTIME_PARAM_NAMES or _is_runtime_annotation(ann):
            params.append(Param(p.name, Field("any"), required=False, default=p.default,
                                source="runtime"))
            continue
        if ann is MISSING and p.default is not MISSING and type(p.default) in _SCALARS:
            ann = type(p.default)
        try:
            f = annotation_field(ann, f"{where}: parameter {p.name!r}")
        except TypeError as exc:
            if m.get("hidden"):
                f = Field("any")
            else:
                raise OptionError(str(exc)) from None
        if "description" in m:
            f.description = str(m["description"])
        if "options" in m:
            choice = _enum_field(list(m["options"]))
            f.options, f.values = choice.options, choice.values
        source = "context" if m.get("hidden") else "llm"
        params.append(Param(p.name, f, required=p.default is MISSING, default=p.default,
                            source=source))
    return params


def looks_like_json_schema(d: dict) -> bool:
    return "$schema" in d or (d.get("type") in ("object", "array", "string", "integer", "number")
                              and isinstance(d.get("properties", d.get("items")), dict))


def user_stacklevel() -> int:
    """The stacklevel that points a warning at the user's call of make / normalize: the first
    frame outside this package."""
    f, n = sys._getframe(1), 1
    while f is not None and f.f_globals.get("__name__", "").startswith("openprogram."):
        f, n = f.f_back, n + 1
    return n


# Names older modules import from here; they live in validator.py.


def validate(value: Any, f: Field, path: str, dropped: list[str]) -> Any:
    """Check `value` against `f`; return it with fields outside the schema dropped (their paths
    go to `dropped`). Raises AttemptError(type_mismatch / enum_violation / missing_required /
    invalid_value). The check is validator.py's, over the field's schema, compiled once."""
    check = f.__dict__.get("_check")
    if check is None:
        check = f.__dict__["_check"] = compile_schema(f.internal(), "a field").run
    return check(value, path, dropped)
