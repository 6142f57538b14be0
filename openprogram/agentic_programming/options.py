"""Option sets: from what the caller writes to a registry, a menu, and validated arguments.

An option set (dict or list form, rules O1-O4) becomes a `Menu` of `Option`s. Each option kind is a
class (`FunctionOption`, `ValueOption`, `SchemaOption`, and any kind registered with
`register_option_kind`) that owns its menu lines, the JSON Schema of its payload, the validation
of a pick's arguments (`bind`) and `resolve()`: the decision loop calls those methods and never
asks which kind it holds. Parameters are described as `Field`s (schemas nest recursively, rules
S1-S3; function parameters come from the signature, type annotations, defaults and `input_meta`,
rule A8). `render_menu` writes the menu text (R1-R3); `validate` checks a model-written value
against a `Field` (P3).
"""
from __future__ import annotations

import enum
import functools
import inspect
import json
import math
import re
import sys
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading
import types
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Callable, ClassVar

from .errors import OptionError, OptionWarning, ParseError, SchemaError
from .jsonable import to_jsonable
from .model import ModelCaller
from .pytypes import FORMAT_EXAMPLES, LONG, SCALARS as _SCALARS, TYPE_NAMES as _TYPE_NAMES
from .pytypes import python_type
from .validator import (CHECK, NAME, PY, check_json_value, compile_schema, describe_value, equal,
                        json_head, safe_key)

META_KEYS = frozenset({"type", "description", "options", "fields", "items"})
RUNTIME_PARAM_NAMES = frozenset({"runtime", "exec_runtime", "review_runtime"})
#: The keys of one parameter's entry in `input_meta` (rule A8).
META_PARAM_KEYS = frozenset({"description", "options", "hidden"})
_PLACEHOLDER = {"str": "<str>", "int": 0, "float": 0.0, "bool": False, "list": [], "dict": {},
                "any": "<any>"}
_MISSING = inspect.Parameter.empty





@dataclass
class Field:
    """One node of a schema: a scalar, a list of `items`, or an object of `fields`."""
    type: str                                   # str int float bool list dict object any union
    description: str = ""
    options: list | None = None                 # allowed values (enum)
    fields: dict[str, "Field"] | None = None    # for type "object"
    items: "Field | None" = None                # a "list"'s item type, a "dict"'s value type
    nullable: bool = False
    # The Python values behind `options` where they are not JSON (Enum members, dates): the
    # model is shown and writes the JSON value, the function receives the Python one.
    values: list | None = None
    # A type of the user's (usertypes.py: a pydantic model, dataclass, TypedDict) describes and
    # validates itself: type_name(), placeholder(), json_schema(), notes(), nested_lines(name,
    # indent) and validate(value, path, dropped) take the place of the plain logic below.
    user: Any = None
    alts: "list[Field] | None" = None           # for type "union": the first that fits wins
    # A standard-library type JSON carries as text or a number (pytypes.python_type: a date,
    # a UUID, Decimal, a path): the JSON Schema `format` checked, and the function that makes
    # the Python value the function receives.
    format: str | None = None
    py: Any = None

    def type_name(self) -> str:
        name = self.type if self.user is None else self.user.type_name()
        if self.type == "union":
            name = " | ".join(a.type_name() for a in self.alts or ())
        if self.type == "list" and self.items is not None:
            name = f"list[{self.items.type_name()}]"
        elif self.type == "dict" and self.items is not None:
            name = f"dict[str, {self.items.type_name()}]"
        return f"{name} | null" if self.nullable else name

    def placeholder(self) -> Any:
        if self.options:
            return self.options[0]
        if self.format in FORMAT_EXAMPLES:
            return FORMAT_EXAMPLES[self.format]
        if self.user is not None:
            return self.user.placeholder()
        if self.type == "object":
            return {k: f.placeholder() for k, f in (self.fields or {}).items()}
        if self.type == "list" and self.items is not None:
            return [self.items.placeholder()]
        if self.type == "union":
            return self.alts[0].placeholder()
        return _PLACEHOLDER[self.type]

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
    default: Any = _MISSING
    source: str = "llm"            # "llm", "context" (hidden) or "runtime"


class Option:
    """One entry of the menu. Subclasses are the option kinds; each owns what the menu says about
    it (`menu_lines`), the JSON Schema of its payload (`json_schema`), the validation of a pick's
    arguments (`bind`) and what a pick resolves to (`resolve`).

    A new kind plugs in with `register_option_kind(cls)`: `cls.from_handler(name, handler,
    description, where)` returns an option for a handler it recognises, or None.
    """
    kind: ClassVar[str] = "option"
    handler: Callable | None = None
    value: Any = None

    def __init__(self, name: str, description: str = "", params: list[Param] | None = None):
        self.name, self.description = name, description
        self.params = list(params or [])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @classmethod
    def from_handler(cls, name: str, handler: Any, description: str | None,
                     where: str) -> "Option | None":
        """The option for `handler` if this kind recognises it, else None (for kinds plugged in
        with `register_option_kind`)."""
        return None

    @property
    def llm_params(self) -> list[Param]:
        return [p for p in self.params if p.source == "llm"]

    # -- what the model is shown ---------------------------------------------------------------
    def signature(self) -> str:
        parts = []
        for p in self.llm_params:
            part = f"{p.name}: {p.field.type_name()}"
            if not p.required:  # a default made by a factory has no value to show
                part += " = ..." if p.default is _MISSING else f" = {shown(p.default)}"
            parts.append(part)
        return f"{self.name}({', '.join(parts)})"

    def example(self) -> str:
        call: dict = {"call": self.name}
        args = {p.name: p.field.placeholder() for p in self.llm_params}
        if args:
            call["args"] = args
        return json.dumps(call, ensure_ascii=False)

    def menu_lines(self) -> list[str]:
        """This option's block of the menu (R1): signature, description, one line per
        parameter, and the `Call:` example."""
        lines = [f"- {self.signature()}"]
        if self.description:
            lines.append(f"  {self.description}")
        lines += param_lines(self)
        lines.append(f"  Call: {self.example()}")
        return lines

    def json_schema(self) -> dict:
        """The JSON Schema of this option's payload (its `args` object): what the menu
        describes in text, for native tools and structured output."""
        props = {p.name: p.field.json_schema() for p in self.llm_params}
        out: dict = {"type": "object", "properties": props,
                     "required": [p.name for p in self.llm_params if p.required],
                     "additionalProperties": False}
        if self.description:
            out["description"] = self.description
        return out

    def pick_schema(self) -> dict:
        """The JSON Schema of a whole pick of this option: `{"call": name, "args": {...}}`."""
        args = self.json_schema()
        args.pop("description", None)
        return {"type": "object", "properties": {"call": {"const": self.name}, "args": args},
                "required": ["call", "args"], "additionalProperties": False}

    def info(self) -> dict:
        """One row of the option table (what `%decision_menu` and `trace.options` show)."""
        return {
            "name": self.name, "kind": self.kind, "description": self.description,
            "params": [{
                "name": p.name, "type": p.field.type_name(), "required": p.required,
                "default": None if p.default is _MISSING else to_jsonable(p.default),
                "options": None if p.field.options is None else to_jsonable(p.field.options),
                "source": p.source, "hidden": p.source != "llm",
                "description": p.field.description,
            } for p in self.params],
            "signature": self.signature(),
        }

    # -- what a pick becomes -------------------------------------------------------------------
    def bind(self, args: dict, *, runtime: Any, context: dict, dropped: list[str],
             injected: list[str], prefix: str = "args") -> tuple[dict, dict]:
        """Validate the model's `args` (P3-P5) into `(kwargs, kept)`: the keyword arguments
        for `resolve` (injected ones included) and the model-supplied ones that were kept.
        Paths into `dropped` and the names in `injected` are recorded even when a field
        fails, so the record holds up to the failure."""
        kwargs: dict = {}
        kept: dict = {}
        names = {p.name for p in self.params}
        # A5: a model value for a hidden parameter is never used. It is recorded as dropped up
        # front, so the record holds even when a later field fails the attempt.
        dropped += [f"{prefix}.{p.name}" for p in self.params
                    if p.source != "llm" and p.name in args]
        unknown = [f"{prefix}.{safe_key(k)}" for k in args if k not in names]
        try:
            for p in self.params:
                path = f"{prefix}.{p.name}"
                if p.source == "runtime":
                    kwargs[p.name] = runtime
                    injected.append(p.name)
                elif p.source == "context":
                    if p.name in context:
                        kwargs[p.name] = context[p.name]
                        injected.append(p.name)
                elif p.name in args:
                    kept[p.name] = kwargs[p.name] = validate(args[p.name], p.field, path,
                                                              dropped)
                elif p.required:
                    raise ParseError("missing_required",
                                     f"{path} is required by option {self.name!r} "
                                     f"({p.field.type_name()})", path)
        finally:
            dropped += unknown
        return kwargs, kept

    def resolve(self, kwargs: dict) -> Any:
        """The next step's result for a validated pick (Z1)."""
        raise NotImplementedError

    def chosen(self) -> Any:
        """What `parse_args` returns as the pick (P6): the name, for most kinds."""
        return self.name


class FunctionOption(Option):
    """Picked → the function runs with the validated and injected arguments (O1)."""
    kind = "function"

    def __init__(self, name: str, fn: Callable, description: str | None, where: str):
        super().__init__(name, description if description is not None else _describe(fn),
                         function_params(fn, where))
        self.handler = fn

    def resolve(self, kwargs: dict) -> Any:
        positional = self.__dict__.get("_positional")
        if positional is None:
            positional = self._positional = positional_only(self.handler)
        return call_function(self.handler, kwargs, positional)

    def chosen(self) -> Any:
        return self.handler


class ValueOption(Option):
    """Picked → the value itself (O1)."""
    kind = "value"

    def __init__(self, name: str, value: Any, description: str = ""):
        super().__init__(name, description)
        self.value = value

    def resolve(self, kwargs: dict) -> Any:
        return self.value


class SchemaOption(Option):
    """The model fills the declared fields → `{"decision": name, **fields}` (O1, Z1). Every
    field is required (P5)."""
    kind = "schema"

    def __init__(self, name: str, description: str, params: list[Param]):
        super().__init__(name, description, params)

    @classmethod
    def from_schema(cls, name: str, desc: str, schema: Any, where: str) -> "SchemaOption":
        if not isinstance(schema, dict) or not schema:
            raise OptionError(f"{where}: a schema option's schema must be a non-empty dict "
                              f"{{field: type}}, got {schema!r}")
        if _looks_like_json_schema(schema):
            warnings.warn(f"{where}: this schema looks like a JSON Schema, but a schema dict "
                          f"here is the spec form (rules S1, S3: its keys are field names, so "
                          f"'type' and 'properties' would be fields); to give a JSON Schema, "
                          f"wrap it: openprogram.JsonSchema(schema)", OptionWarning,
                          stacklevel=_stack())
        if "decision" in schema:
            # The result is {"decision": name, **fields}: the model's value would replace the name.
            raise OptionError(f"{where}: a schema option cannot have a field 'decision' (the "
                              f"result {{'decision': {name!r}, ...}} holds the option name "
                              f"there); rename the field")
        params = [Param(k, schema_field(v, f"{where}: field {k!r}")) for k, v in schema.items()]
        return cls(name, desc, params)

    def resolve(self, kwargs: dict) -> Any:
        return {"decision": self.name, **kwargs}


_option_kinds: list[type[Option]] = []


def register_option_kind(cls: type[Option]) -> type[Option]:
    """Plug in a new option kind: `cls.from_handler(name, handler, description, where)` is
    asked first (the latest registered first) for every handler of every option set, and returns
    an `Option` for a handler it recognises, or None. Usable as a class decorator."""
    if not (isinstance(cls, type) and issubclass(cls, Option)):
        raise SchemaError(f"register_option_kind takes a subclass of Option, got {cls!r}")
    if cls not in _option_kinds:
        _option_kinds.insert(0, cls)
        clear_option_cache()  # the new kind may claim a function a cached option was built from
    return cls


def _plugged(name: str, handler: Any, description: str | None, where: str) -> Option | None:
    for cls in _option_kinds:
        option = cls.from_handler(name, handler, description, where)
        if option is not None:
            return option
    return None


class Menu(tuple):
    """A normalized option set, as `normalize` returns it: a tuple of `Option`s whose menu text
    and option table are derived once and kept. A batch run (evaluate) hands one Menu to every
    decision, and rebuilding these was about half of a decision's own time; a tuple, so what
    they are derived from cannot change under them."""

    @functools.cached_property
    def text(self) -> str:
        return _render_menu(self)

    @functools.cached_property
    def infos(self) -> tuple[dict, ...]:
        return tuple(_derived(o, "_info", o.info) for o in self)

    @functools.cached_property
    def by_name(self) -> dict[str, Option]:
        return {o.name: o for o in self}

    @functools.cached_property
    def hidden(self) -> tuple[tuple[Option, list[Param]], ...]:
        """The options with hidden parameters that have no default (checked against context=)."""
        return tuple((o, h) for o in self if (h := _hidden(o)))


def _derived(option: Option, attr: str, make: Callable[[], Any]) -> Any:
    """What is derived from an option (its menu block, its table row, its hidden parameters),
    made once per option object: options do not change once built, and a cached function
    option recurs in every option set that names its function."""
    value = option.__dict__.get(attr)
    if value is None:
        value = option.__dict__[attr] = make()
    return value


def option_infos(menu: list[Option]) -> list[dict]:
    """The option table of a menu (one `Option.info()` row per option), a list of its own."""
    return list(menu.infos) if isinstance(menu, Menu) else [o.info() for o in menu]


# ---------------------------------------------------------------------------------------------
# Schemas (S1-S3)
# ---------------------------------------------------------------------------------------------


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
                          stacklevel=_stack())
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
        if _looks_like_json_schema(spec):
            warnings.warn(f"{where}: this dict looks like a JSON Schema, but a schema dict here "
                          f"is the spec form (rules S1, S3: its keys are field names); to give "
                          f"a JSON Schema, wrap it: openprogram.JsonSchema(schema)", OptionWarning,
                          stacklevel=_stack())
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


_annotation_hooks: list[Callable[[Any, str], "Field | None"]] = []


def register_annotation_hook(hook: Callable[[Any, str], "Field | None"]) -> None:
    """Let `hook(annotation, where)` describe annotations before the plain logic does: it returns
    a `Field` (usually one with `user` set) for an annotation it claims, else None. usertypes.py
    plugs in the user's own classes this way."""
    if hook not in _annotation_hooks:
        _annotation_hooks.insert(0, hook)


def annotation_field(ann: Any, where: str) -> Field:
    """A type annotation as a `Field`: str/int/float/bool/list/dict, list[X], dict[K, V],
    Optional[X], X | None, Literal[...], Annotated[X, "description"]."""
    import typing  # loaded with the first annotation read, not with openprogram
    if ann is _MISSING or ann is typing.Any:
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
    if origin in (list, typing.List):
        return Field("list", items=annotation_field(args[0], f"{where}[]") if args else None)
    if origin in (dict, typing.Dict):
        if args and args[0] not in (str, typing.Any):
            raise SchemaError(f"{where} is annotated {ann!r}, but the keys of a JSON object are "
                            f"always strings: annotate dict[str, ...]")
        return Field("dict", items=annotation_field(args[1], f"{where}[]") if args else None)
    raise SchemaError(f"{where} is annotated {ann!r}; decision options understand str, int, float, "
                      f"bool, list, dict, list[X], dict[str, X], Optional[X], Literal[...], "
                      f"Annotated[X, 'description'], Enums, dates, times, UUID, Decimal, paths "
                      f"and the user's classes: use one of those, or mark it hidden")


# ---------------------------------------------------------------------------------------------
# Options (O1-O4, A8)
# ---------------------------------------------------------------------------------------------


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
        if ann is _MISSING and p.default is not _MISSING and type(p.default) in _SCALARS:
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
        params.append(Param(p.name, f, required=p.default is _MISSING, default=p.default,
                            source=source))
    return params


def positional_only(fn: Callable) -> tuple[str, ...]:
    """The names of `fn`'s positional-only parameters, in order. A plain function's come from
    its code object, without reading its signature."""
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__ \
            and "__signature__" not in fn.__dict__:
        code = fn.__code__
        return code.co_varnames[:code.co_posonlyargcount]
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in params if p.kind is p.POSITIONAL_ONLY)


def call_function(fn: Callable, kwargs: dict, positional: tuple[str, ...] | None = None) -> Any:
    """`fn(**kwargs)`, except that positional-only parameters (`def f(x, /)`, many builtins)
    are passed by position, as they must be. `positional` is `positional_only(fn)` when the
    caller has it already."""
    head = positional_only(fn) if positional is None else positional
    if not head or head[0] not in kwargs:
        return fn(**kwargs)
    rest = dict(kwargs)
    args = []
    for name in head:  # up to the first one not given: the rest keep their defaults
        if name not in rest:
            break
        args.append(rest.pop(name))
    return fn(*args, **rest)


def _describe(fn: Callable) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def _fn_name(fn: Callable, where: str) -> str:
    name = getattr(fn, "__name__", None)
    if not name or name == "<lambda>":
        raise OptionError(f"{where}: a callable in the list form needs a name ({fn!r} has "
                          f"none); use the dict form {{'name': fn}} or a def")
    return name


def normalize(options: Any) -> Menu:
    """An option set (dict or list form) as a `Menu` of `Option`s; rejects bad sets (O4). A
    Menu comes back as it is, so its derived text is reused."""
    if isinstance(options, Menu):
        return options
    if isinstance(options, (list, tuple)) and options and \
            all(isinstance(o, Option) for o in options):
        return Menu(options)
    out: list[Option]
    if isinstance(options, dict):
        for name in options:
            if not isinstance(name, str) or not name:
                raise OptionError(f"option names must be non-empty strings, got {name!r}")
        out = [_cached_option(name, handler, None) for name, handler in options.items()]
    elif isinstance(options, (list, tuple)):
        out = [_cached_option(None, item, i) for i, item in enumerate(options)]
    else:
        raise OptionError(f"options must be a dict {{name: handler}} or a list, got "
                          f"{type(options).__name__}")
    if not out:
        raise OptionError("the option set is empty: give at least one option, e.g. "
                          "{'done': 'DONE'}")
    names = tuple([o.name for o in out])
    if len(set(names)) < len(names):
        seen: set[str] = set()
        for o in out:
            if o.name in seen:
                raise OptionError(f"option name {o.name!r} appears twice; option names must "
                                  f"be unique (rename one, or use the dict form)")
            seen.add(o.name)
    return _cached_menu(names, tuple(out))


def _dict_option(name: str, handler: Any, where: str) -> Option:
    plugged = _plugged(name, handler, None, where)
    if plugged is not None:
        return plugged
    if isinstance(handler, tuple) and len(handler) == 2 and isinstance(handler[1], str):
        plugged = _plugged(name, handler[0], handler[1], where)
        if plugged is not None:
            return plugged
    if callable(handler):
        return FunctionOption(name, handler, None, where)
    if isinstance(handler, tuple):
        if len(handler) != 2:
            raise OptionError(f"{where}: a tuple handler is (callable, 'description'), "
                              f"('description', schema) or (value, 'description'); got "
                              f"{len(handler)} items. To return a tuple value, wrap it: "
                              f"(your_tuple, 'description')")
        a, b = handler
        if isinstance(a, str) and isinstance(b, dict):
            return SchemaOption.from_schema(name, a, b, where)
        if isinstance(a, str):
            plugged = _plugged(name, b, a, where)   # ("description", a class of a plugged kind)
            if plugged is not None:
                return plugged
        if not isinstance(b, str):
            raise OptionError(f"{where}: the second item of a tuple handler must be the "
                              f"description string, got {b!r}")
        if callable(a):
            return FunctionOption(name, a, b, where)
        return _value_option(name, a, b, where)
    return _value_option(name, handler, "", where)


def _value_option(name: str, value: Any, description: str, where: str) -> ValueOption:
    """O2's value option, with a warning where the value looks like something else meant."""
    if isinstance(value, dict):
        shape = tool_shape(value)
        if shape:
            warnings.warn(f"{where}: this value looks like {shape}, but a dict handler is a value "
                          f"option (rule O2): picking it returns the dict. To offer it as a "
                          f"tool, write openprogram.tool(definition) (or "
                          f"openprogram.tool(definition, fn) to run a function)", OptionWarning,
                          stacklevel=_stack())
        elif _looks_like_json_schema(value):
            warnings.warn(f"{where}: this value looks like a JSON Schema, but a dict handler is "
                          f"a value option (rule O2). To have the model fill it in, write "
                          f"openprogram.JsonSchema(schema)", OptionWarning, stacklevel=_stack())
        elif any(isinstance(v, type) or (isinstance(v, list) and len(v) == 1 and
                                         isinstance(v[0], type)) for v in value.values()):
            warnings.warn(f"{where}: this value option's dict holds Python types "
                          f"({_head(value)}); picking it returns that dict. For a schema option "
                          f"whose fields the model fills in, write "
                          f"{{{name!r}: ('description', {_head(value)})}}", OptionWarning,
                          stacklevel=_stack())
    return ValueOption(name, value, description)


def tool_shape(d: Any) -> str | None:
    """Which provider's tool definition `d` is shaped like (for tooldefs.py and the warning
    about an unmarked one), or None."""
    if not isinstance(d, dict):
        return None
    if d.get("type") == "function" and isinstance(d.get("function"), dict):
        return "an OpenAI tool definition (chat completions)"
    if d.get("type") == "function" and "name" in d and "parameters" in d:
        return "an OpenAI tool definition (responses)"
    if "name" in d and "input_schema" in d:
        return "an Anthropic tool definition"
    if "name" in d and "inputSchema" in d:
        return "an MCP tool definition"
    return None


def _looks_like_json_schema(d: dict) -> bool:
    return "$schema" in d or (d.get("type") in ("object", "array", "string", "integer", "number")
                              and isinstance(d.get("properties", d.get("items")), dict))


def _head(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _stack() -> int:
    """The stacklevel that points a warning at the user's call of make / normalize: the first
    frame outside this package."""
    f, n = sys._getframe(1), 1
    while f is not None and f.f_globals.get("__name__", "").startswith("openprogram."):
        f, n = f.f_back, n + 1
    return n


_list_readers: list[Callable[[Any, str], "Option | None"]] = []


def register_list_reader(reader: Callable[[Any, str], "Option | None"]) -> None:
    """Let `reader(item, where)` read list-form items that carry their own name (tool
    definitions: tooldefs.py); it returns an Option, or None for an item it does not know."""
    if reader not in _list_readers:
        _list_readers.insert(0, reader)


def _list_option(item: Any, where: str) -> Option:
    if isinstance(item, str):
        return ValueOption(item, item)
    if not callable(item) and not isinstance(item, (str, tuple)):
        for reader in _list_readers:
            option = reader(item, where)
            if option is not None:
                return option
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
        a, desc = item
    else:
        a, desc = item, None
    if callable(a):
        name = _fn_name(a, where)
        return _plugged(name, a, desc, where) or FunctionOption(name, a, desc, where)
    if isinstance(a, str) and desc is not None:
        return ValueOption(a, a, desc)
    if isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], str) \
            and isinstance(item[1], str):
        plugged = _plugged(item[0], item[2], item[1], where)  # ("name", "desc", JsonSchema(...))
        if plugged is not None:
            return plugged
        return SchemaOption.from_schema(item[0], item[1], item[2], where)
    raise OptionError(f"{where}: a list item is a callable, (callable, 'description'), 'name', "
                      f"('name', 'description') or ('name', 'description', schema); use the "
                      f"dict form for value options")


# ---------------------------------------------------------------------------------------------
# The normalize cache
# ---------------------------------------------------------------------------------------------
# Re-running a notebook cell hands `make` a fresh dict of the same functions, and reading their
# signatures, type hints and docstrings again was most of a decision's own time. So the option
# built from a plain function is kept, with a fingerprint of everything it was built from: the
# code, name, docstring, defaults, annotations (and the globals a string annotation names),
# `input_meta`, `__signature__` and `__wrapped__`. A hit is served only when the very same
# function object (checked with `is`, never by id) has the same fingerprint; a changed or
# redefined function is rebuilt and replaces its entry. Entries are keyed by the option's name
# and the function's qualified name, so a redefinition releases the old function; the cache is
# a bounded LRU. Other callables (classes, methods, partials) are rebuilt every time: what their
# option depends on cannot be checked this cheaply. Value and schema entries of the dict form are
# kept too (a value while it is the very same object, a schema while it equals the one it was
# built from), so an option set made of functions, values and schemas that is handed to `make`
# again gets back the same Menu, and its menu text is rendered once.

#: How many options the normalize cache keeps (least recently used go first), and how many
#: option sets made only of those (with their menu text).
OPTION_CACHE_SIZE = 2048
MENU_CACHE_SIZE = 32

_cache: OrderedDict[tuple, tuple[tuple, Option, tuple]] = OrderedDict()
_menus: OrderedDict[tuple, Menu] = OrderedDict()
_cache_lock = Lock()
_NAME = re.compile(r"[A-Za-z_]\w*")


def clear_option_cache() -> None:
    """Forget every cached option (function, value and schema entries) and option set; each is
    rebuilt on next use."""
    with _cache_lock:
        _cache.clear()
        _menus.clear()


def _cached_option(name: str | None, handler: Any, position: int | None) -> Option:
    """The option of one entry of an option set (`name` None: the list form, at `position`),
    from the cache when its function is unchanged."""
    fn, description = None, None
    if type(handler) is types.FunctionType:
        fn = handler
    elif type(handler) is tuple and len(handler) == 2 and \
            type(handler[0]) is types.FunctionType and type(handler[1]) is str:
        fn, description = handler
    if fn is None:
        plain = _plain_key(name, handler) if name is not None else None
        if plain is None:
            return _build_option(name, handler, position)
        return _cached_plain(name, handler, *plain)
    key = (name, description, fn.__module__, fn.__qualname__)
    entry = _cache.get(key)
    try:
        if entry is not None:
            snapshot, option, names = entry
            # _state() holds the live objects and the entry copies of them, so this compares,
            # in C, the function as it is now with the function as it was.
            if option.handler is fn and snapshot == _state(fn, names):
                return _served(key, option)
        names = tuple(n for a in fn.__annotations__.values() if type(a) is str
                      for n in _NAME.findall(a))
        snapshot = _copied(_state(fn, names))
    except Exception:  # a value that cannot be compared or copied: build, do not cache
        return _build_option(name, handler, position)
    option = _build_option(name, handler, position)
    if type(option) is FunctionOption and option.handler is fn:
        _keep(key, (snapshot, option, names))
    return option


def _served(key: tuple, option: Option) -> Option:
    """A cache hit: the entry becomes the most recently used."""
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
    return option


def _keep(key: tuple, entry: tuple) -> None:
    """Cache an entry (snapshot, option, names), dropping the least recently used beyond the
    bound."""
    entry[1]._cached = True
    with _cache_lock:
        _cache[key] = entry
        _cache.move_to_end(key)
        while len(_cache) > OPTION_CACHE_SIZE:
            _cache.popitem(last=False)


def _plain_key(name: str, handler: Any) -> tuple | None:
    """For a value or schema entry of the dict form: its cache key, and the object a hit must
    match. A value must be the very same object (the pick returns it); a schema, equal to a copy
    of the one the option was built from (only its content is read). None for anything else."""
    if type(handler) is tuple:
        if len(handler) != 2:
            return None
        a, b = handler
        if type(a) is str and type(b) is dict:
            return ("schema", name, a), b
        if type(b) is str and not callable(a):
            return ("value", name, b), a
        return None
    if callable(handler):
        return None
    return ("value", name, None), handler


def _cached_plain(name: str, handler: Any, key: tuple, match: Any) -> Option:
    entry = _cache.get(key)
    if entry is not None:
        snapshot, option, _ = entry
        try:
            hit = option.value is match if key[0] == "value" else snapshot == match
        except Exception:  # a schema that cannot be compared: rebuilt each time
            hit = False
        if hit:
            return _served(key, option)
    option = _build_option(name, handler, None)
    if type(option) is (ValueOption if key[0] == "value" else SchemaOption):
        try:
            import copy
            snapshot = None if key[0] == "value" else copy.deepcopy(match)
        except Exception:  # a schema that cannot be copied: not cached
            return option
        _keep(key, (snapshot, option, ()))
    return option


def _cached_menu(names: tuple[str, ...], options: tuple[Option, ...]) -> Menu:
    """The Menu of these very option objects, made (and its text rendered) once: a fresh dict of
    the same functions gives the same cached options, hence the same Menu."""
    menu = _menus.get(names)
    if menu is not None and menu == options:  # tuple equality: the same objects
        return menu
    menu = Menu(options)
    if all(o.__dict__.get("_cached") for o in options):
        with _cache_lock:
            _menus[names] = menu
            _menus.move_to_end(names)
            while len(_menus) > MENU_CACHE_SIZE:
                _menus.popitem(last=False)
    return menu


def _build_option(name: str | None, handler: Any, position: int | None) -> Option:
    if name is None:
        return _list_option(handler, f"option #{position} ({handler!r:.60})")
    return _dict_option(name, handler, f"option {name!r}")


def _state(fn: types.FunctionType, names: tuple[str, ...] = ()) -> tuple:
    """Everything a function option is built from, as live objects. `names` are the globals its
    string annotations name (`x: "Order"` is read through the globals: a redefined Order
    counts)."""
    extra = fn.__dict__
    wrapped = extra.get("__wrapped__")
    return (fn.__code__, fn.__name__, fn.__doc__, fn.__defaults__, fn.__kwdefaults__,
            fn.__annotations__, extra.get("input_meta"), extra.get("__signature__"),
            _state(wrapped) if type(wrapped) is types.FunctionType else wrapped,
            names and tuple([_hint_globals(fn).get(n, _MISSING) for n in names]))


def _hint_globals(fn: types.FunctionType) -> dict:
    """The globals typing.get_type_hints reads a function's string annotations in: those of
    the function a decorator wrapped."""
    while type(fn.__dict__.get("__wrapped__")) is types.FunctionType:
        fn = fn.__dict__["__wrapped__"]
    return fn.__globals__


def _copied(value: Any) -> Any:
    """`value` with its dicts, lists, tuples and sets copied all the way down (the values in
    them kept as they are), so a later change made in place compares unequal."""
    t = type(value)
    if t is dict:
        return {k: _copied(v) if type(v) in _NESTED else v for k, v in value.items()}
    if t is list or t is tuple:
        return t(_copied(v) if type(v) in _NESTED else v for v in value)
    if t is set:
        return set(value)
    return value


_NESTED = frozenset({dict, list, tuple, set})


def check_context(menu: list[Option], context: dict | None) -> None:
    """Fail before any model call when a hidden parameter without a default has no value."""
    if context is not None and not isinstance(context, dict):
        raise SchemaError(f"context= must be a dict, got {type(context).__name__}")
    pairs = menu.hidden if isinstance(menu, Menu) else [(o, _hidden(o)) for o in menu]
    for o, hidden in pairs:
        if hidden:
            check_hidden(f"option {o.name!r}", hidden, context)


def _hidden(option: Option) -> list[Param]:
    return _derived(option, "_hidden", lambda: [p for p in option.params
                                                if p.source == "context" and p.required])


def check_hidden(where: str, params: list[Param], context: dict | None) -> None:
    """Fail when one of `params` is hidden, has no default and has no value in `context`."""
    for p in params:
        if p.source == "context" and p.required and p.name not in (context or {}):
            raise OptionError(
                f"{where}: hidden parameter {p.name!r} has no default and is not in context; "
                f"pass context={{{p.name!r}: ...}} or give it a default")


# ---------------------------------------------------------------------------------------------
# The menu (R1-R3)
# ---------------------------------------------------------------------------------------------


def shown(value: Any) -> str:
    """A default or an allowed value as the menu shows it: its JSON text (an Enum member as its
    value, a date as ISO text), or its repr when JSON has no form for it."""
    j = to_jsonable(value)
    if isinstance(j, dict) and set(j) == {"repr", "type"}:
        j = j["repr"]
    return json.dumps(j)


def field_line(name: str, type_name: str, required: bool, default: Any, description: str,
               notes: list[str], indent: str) -> str:
    """One line of the menu for a field: `- name (type, required): description; note; ...`."""
    if required:
        state = "required"
    else:
        state = "optional" if default is _MISSING else f"optional, default {shown(default)}"
    line = f"{indent}- {name} ({type_name}, {state})"
    if description:
        line += f": {description}"
    return "".join([line, *(f"; {n}" for n in notes)])


def _detail_lines(name: str, f: Field, required: bool, default: Any, indent: str) -> list[str]:
    notes = [f"one of: {', '.join(json.dumps(o, default=repr) for o in f.options)}"] \
        if f.options else []
    if f.format:
        notes.append(f"format {f.format}")
    if f.user is not None:
        notes += f.user.notes()
    lines = [field_line(name, f.type_name(), required, default, f.description, notes, indent)]
    if f.user is not None:
        lines += f.user.nested_lines(name, indent + "  ")
    elif f.type == "object":
        for k, sub in (f.fields or {}).items():
            lines += _detail_lines(f"{name}.{k}", sub, True, _MISSING, indent + "  ")
    elif f.type == "list" and f.items is not None and f.items.type in ("object", "list"):
        lines += _detail_lines(f"{name}[]", f.items, True, _MISSING, indent + "  ")
    return lines


def param_lines(option: Option) -> list[str]:
    """The detail lines of an option's parameters, as the menu shows them (R1)."""
    return [line for p in option.llm_params
            for line in _detail_lines(p.name, p.field, p.required, p.default, "    ")]


def render_menu(menu: list[Option]) -> str:
    """The menu text of normalized options (R1-R3); a Menu's is rendered once."""
    return menu.text if isinstance(menu, Menu) else _render_menu(menu)


def _render_menu(menu: list[Option]) -> str:
    return "\n\n".join([
        'Options (reply with one JSON object that picks exactly one, as in its "Call:" line):',
        *[_derived(o, "_block", lambda: "\n".join(o.menu_lines())) for o in menu]])


# ---------------------------------------------------------------------------------------------
# Validation (P3)
# ---------------------------------------------------------------------------------------------

# Names older modules import from here; they live in validator.py.
_check_json_value, _describe_value, _json_head = check_json_value, describe_value, json_head


def validate(value: Any, f: Field, path: str, dropped: list[str]) -> Any:
    """Check `value` against `f`; return it with fields outside the schema dropped (their paths
    go to `dropped`). Raises ParseError(type_mismatch / enum_violation / missing_required /
    invalid_value). The check is validator.py's, over the field's schema, compiled once."""
    check = f.__dict__.get("_check")
    if check is None:
        check = f.__dict__["_check"] = compile_schema(f.internal(), "a field").run
    return check(value, path, dropped)
