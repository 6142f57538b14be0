"""The user's own types — pydantic models, dataclasses, TypedDicts — as options and parameters.

A class given as an option (`{"order": Order}`, `{"order": ("Place an order.", Order)}`, `Order`
in the list form) becomes a `ClassOption`: the model fills in the class's fields and the pick
resolves to an instance. A function parameter annotated with such a class (also `list[Order]`,
`dict[str, Order]`, `Order | None`, a discriminated `Cat | Dog`) becomes a `Field` whose `user` is a
`UserType`, and the function receives instances. Both are described by the type's JSON Schema —
pydantic's own (`TypeAdapter(t).json_schema()`) when pydantic is installed, else one built here
from fields.py's description of each field — and the menu lines, the `Call:` placeholder and
the native-tool schema are all read from it (reader.py). Validation is pydantic's own (validators,
constraints, coercion, `allow_inf_nan` as the user configured them), its errors mapped to the
project's error kinds with the path into the arguments; without pydantic, dataclasses and
TypedDicts are checked field by field by fields.py's `validate` (validator.py's checks). pydantic is
imported only when a class of the user's is met, so `import openprogram` never needs it. The package
registers this module's option kind and annotation hook when it loads.
"""
from __future__ import annotations

import dataclasses
import functools
import sys

from ...base.errors import AttemptError, OptionError, SchemaError
from ...base.json_form import to_jsonable
from ..schema.fields import (
    MISSING,
    Field,
    Param,
    annotation_field,
    register_annotation_hook,
    validate,
)
from ..schema.reader import SchemaDoc, UserType
from ..schema.reply_values import check_json_value, describe_value
from . import sources
from .examples import redescribe
from .kinds import Option, register_option_kind

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

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
    union or `Optional` of one that fields.py reads itself (asking again for the class).
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
            doc = SchemaDoc(schema.get("$defs", {}), _aliases(ann))
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
    return path, f"{path}: {message} (got {describe_value(error.get('input'))})"


def _pydantic_check(adapter: Any, doc: SchemaDoc, node: dict, value: Any, path: str,
                    dropped: list[str]) -> Any:
    # Lone surrogates never reach the user's code; non-finite numbers are the type's own
    # business (pydantic's allow_inf_nan).
    check_json_value(value, path, deep=True, numbers=False)
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
        raise AttemptError(_kind(errors[0]["type"]), message, where) from None
    doc.extra_paths(node, value, path, dropped)
    return out


# -- validation without pydantic: dataclasses and TypedDicts, field by field -------------------

_fallback_types: dict[type, UserType] = {}


def _fallback_class(cls: type) -> UserType:
    """A dataclass or TypedDict described and checked with fields.py's own fields. Registered
    before its fields are read, so a class that refers to itself finds itself."""
    if cls in _fallback_types:
        return _fallback_types[cls]
    name = cls.__name__
    defs: dict = {name: {}}
    t = UserType(SchemaDoc(defs), {"$ref": f"#/$defs/{name}"})
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
        elif default is not MISSING:
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
                        key in cls.__required_keys__, MISSING))
        return out
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or \
            f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else MISSING
        out.append((f.name, annotation_field(hints.get(f.name, typing.Any), where.format(f.name)),
                    not has_default, default))
    return out


def _check_class(cls: type, fields: list, value: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(value, dict):
        raise AttemptError("type_mismatch", f"{path} must be an object ({cls.__name__}), got "
                                          f"{describe_value(value)}", path)
    kwargs = {}
    for key, f, required, _ in fields:
        if key in value:
            kwargs[key] = validate(value[key], f, f"{path}.{key}", dropped)
        elif required:
            raise AttemptError("missing_required", f"{path}.{key} is required by "
                                                 f"{cls.__name__} ({f.type_name()})",
                             f"{path}.{key}")
    names = {name for name, *_ in fields}
    dropped.extend(f"{path}.{k}" for k in value if k not in names)
    if _is_typeddict(cls):
        return kwargs
    try:
        return cls(**kwargs)
    except (ValueError, AssertionError) as exc:  # __post_init__ refusing a value
        raise AttemptError("invalid_value", f"{path}: {exc}", path) from None


def _fallback_mapping(ann: Any, values: Field) -> UserType:
    """`dict[str, X]` with X a class of the user's: each value checked as X."""
    defs: dict = {}
    node = {"type": "object", "additionalProperties": values.json_schema(defs)}

    def check(value: Any, path: str, dropped: list[str]) -> dict:
        if not isinstance(value, dict):
            raise AttemptError("type_mismatch", f"{path} must be an object ({_name(ann)}), got "
                                              f"{describe_value(value)}", path)
        return {k: validate(v, values, f"{path}.{k}", dropped) for k, v in value.items()}
    return UserType(SchemaDoc(defs), node, check)


# ---------------------------------------------------------------------------------------------
# Where fields.py asks (its annotation hook)
# ---------------------------------------------------------------------------------------------


def _annotation_hook(ann: Any, where: str) -> Field | None:
    """A parameter annotated with a class of the user's (or a container of one) as a Field.
    Without pydantic, lists, unions and `Optional` of such a class are left to fields.py,
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
                                required=key in required, default=prop.get("default", MISSING)))
        self._names = aliases  # alias -> field name, to tell which fields the model gave
        super().__init__(name, description if description is not None else
                         doc.description(root), params)

    @classmethod
    def from_handler(cls, name: str, handler: Any, description: str | None,
                     where: str) -> ClassOption | None:
        if not is_user_class(handler):
            return None
        return cls(name, handler, _user_type_at(handler, where, OptionError), description)

    def json_schema(self) -> dict:
        return redescribe(self.utype.document(), self.described)

    def bind(self, args: dict, *, runtime: Any, context: dict, dropped: list[str],
             injected: list[str], prefix: str = "args") -> tuple[dict, dict]:
        instance = self.utype.validate(args, prefix, dropped)
        kwargs = _Validated(_fields_of(instance))
        kwargs.instance = instance
        given = {self._names.get(k, k) for k in args}
        return kwargs, {k: v for k, v in kwargs.items() if k in given}

    def code_place(self) -> tuple[str | None, int | None, list[str]]:
        return sources.code_place(self.cls)

    def head_sources(self, options: Any, code: tuple) -> tuple[dict, dict]:
        file, start, lines = code
        name = self.cls.__name__
        return (sources.place(file, start, f"class {name}"),
                sources.place(file, sources.line_of(lines, start,
                                                    lambda s: '"""' in s or "'''" in s),
                              f"the docstring of {name}"))

    def param_source(self, name: str, nested: list[str], options: Any, code: tuple) -> dict:
        file, start, lines = code
        line = sources.line_of(lines, start,
                               lambda s: s.strip().startswith((f"{name}:", f"{name} :")))
        src = {**sources.place(file, line, f"field {self.cls.__name__}.{name}"), "field": name,
               "class": self.cls.__qualname__}
        if nested:
            src["nested"] = nested
        return src

    def resolve(self, kwargs: dict) -> Any:
        if isinstance(kwargs, _Validated):
            return kwargs.instance
        # kwargs written by hand (resolve_decision(name, {...}, options)): validate them now.
        return self.utype.validate(dict(kwargs), "args", [])


register_option_kind(ClassOption)
register_annotation_hook(_annotation_hook)
