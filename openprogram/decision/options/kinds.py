"""The option kinds: what one entry of an option set is, shows, accepts and becomes (O1-O4).

Each kind is a class (`FunctionOption`, `ValueOption`, `SchemaOption`, and any kind registered
with `register_option_kind`: user_classes.py's classes, tool_definitions.py's tool definitions) that
owns its menu lines, the JSON Schema of its payload, the validation of a pick's arguments (`bind`)
and `resolve()`: the decision loop calls those methods and never asks which kind it holds. Reading
an entry of the dict or the list form into its option (`build_option`) and checking `context=`
are entries.py's, above this module; the worked picks an option carries are examples.py's, below
it.
"""
from __future__ import annotations

import inspect
import json
import types
import warnings

from ...base.errors import AttemptError, OptionError, OptionWarning, UsageError
from ...base.json_form import to_jsonable
from ...base.text import safe_repr
from ...trace.safe_html import clip
from ..schema.fields import (
    MISSING,
    Param,
    function_params,
    looks_like_json_schema,
    schema_field,
    user_stacklevel,
    validate,
)
from ..schema.refs import embed
from ..schema.reply_values import safe_key
from . import sources
from .examples import docstring_examples, example_text, read_examples
from .menu import param_lines, shown

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any, ClassVar

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
    #: A few worked picks (issue 36): dicts {"request", "args", "source"}, shown after the
    #: `Call:` line, in the tool's description and as the pick schema's `examples`.
    examples: tuple = ()
    #: Parameters' descriptions set by `with_param_description` (name -> text): a kind whose
    #: JSON Schema is the one given (a tool definition, a user's class) writes them into it.
    described: dict = {}
    #: What was edited on this copy of an option ("name", "description", "param:<name>") ->
    #: where the new text came from (a source dict, as the step-through cites one).
    edited: dict = {}

    def __init__(self, name: str, description: str = "", params: list[Param] | None = None):
        self.name, self.description = name, description
        self.params = list(params or [])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @classmethod
    def from_handler(cls, name: str, handler: Any, description: str | None,
                     where: str) -> Option | None:
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
            part = f"{p.name}: {p.field.view().type_name()}"
            if not p.required:  # a default made by a factory has no value to show
                part += " = ..." if p.default is MISSING else f" = {shown(p.default)}"
            parts.append(part)
        return f"{self.name}({', '.join(parts)})"

    def example(self) -> str:
        call: dict = {"call": self.name}
        args = {p.name: p.field.view().placeholder() for p in self.llm_params}
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

    def example_lines(self) -> list[str]:
        """The menu's `Example:` lines of this option, one per worked pick. They follow the
        option's own `menu_lines()` (render_menu adds them), so a kind that overrides
        `menu_lines` shows its examples without knowing of them."""
        return [f"  Example: {example_text(self, e)}" for e in self.examples]

    def example_picks(self) -> list[dict]:
        """The examples as whole picks, `{"call": name, "args": {...}}` (the pick schema's
        `examples` in json_schema mode)."""
        return [{"call": self.name, "args": dict(e["args"])} for e in self.examples]

    def with_examples(self, examples: Any, source: Any = "with_examples() in the option set",
                      replace: bool = True) -> Option:
        """A copy of this option carrying `examples` (see `with_examples`), each checked as a
        pick of this option; the option itself is never changed (built options are shared)."""
        import copy
        made = read_examples(self, examples, source)
        out = copy.copy(self)
        for k in ("_block", "_info"):  # derived text of the original must not follow the copy
            out.__dict__.pop(k, None)
        out.examples = tuple(made) if replace else tuple(self.examples) + tuple(made)
        return out

    @property
    def code_name(self) -> str:
        """The name the user's code gave this option: what a pick of it returns where a pick
        returns a name (a value option's `parse_args`, a schema option's `"decision"`). It is
        `name` except on a copy made by `renamed`."""
        return self.__dict__.get("_code_name", self.name)

    def renamed(self, name: str, source: dict | None = None) -> Option:
        """A copy of this option shown to the model as `name` (what `decision.improve(...,
        rename=True)` proposes) whose pick still resolves as the original does: the same
        handler runs, and where a pick returns the option's name it returns `code_name`, so
        the caller's code does not change. `source` says where the name came from."""
        import copy
        out = copy.copy(self)
        for k in ("_block", "_info"):
            out.__dict__.pop(k, None)
        out._code_name = self.code_name
        out.name = name
        if source is not None:
            out.edited = {**self.edited, "name": dict(source)}
        return out

    def with_param_description(self, name: str, description: str,
                               source: dict | None = None) -> Option:
        """A copy of this option whose parameter `name` is described as `description` (what
        `decision.improve` proposes): the menu line, the tool's JSON Schema and the pick schema
        all show it; the option itself, shared through the option cache, is never changed.
        `source` says where the text came from."""
        import copy
        import dataclasses
        at = [i for i, p in enumerate(self.params) if p.name == name and p.source == "llm"]
        if not at:
            raise OptionError(f"option {self.name!r} has no parameter {name!r} the model sets; "
                              f"its parameters are {[p.name for p in self.llm_params]}")
        field = copy.copy(self.params[at[0]].field)
        field.__dict__.pop("_view", None)  # the view was read from the old description
        field.description = description
        out = copy.copy(self)
        for k in ("_block", "_info"):
            out.__dict__.pop(k, None)
        out.params = list(self.params)
        out.params[at[0]] = dataclasses.replace(self.params[at[0]], field=field)
        out.described = {**self.described, name: description}
        if source is not None:
            out.edited = {**self.edited, f"param:{name}": dict(source)}
        return out

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
        """The JSON Schema of a whole pick of this option: `{"call": name, "args": {...}}`, a
        document of its own. The arguments' schema sits below the pick's root, so each of its
        references is rewritten (`embed`) to mean what it means in `json_schema()`: pointed at
        a copy of its target under the pick's `$defs`."""
        defs: dict = {}
        args = embed(self.json_schema(), defs, f"option {self.name!r}")
        # The option's description says what picking it does, so it goes on the pick, where a
        # model reading the schema (json_schema mode sends no menu text) meets it beside the name.
        description = args.pop("description", None)
        pick = {"type": "object", "properties": {"call": {"const": self.name}, "args": args},
                "required": ["call", "args"], "additionalProperties": False}
        if description:
            pick = {"description": description, **pick}
        if defs:
            pick["$defs"] = defs
        return pick

    def info(self) -> dict:
        """One row of the option table (what `%decision_menu` and `trace.options` show)."""
        return {
            "name": self.name, "kind": self.kind, "description": self.description,
            "examples": [{"request": e["request"], "args": to_jsonable(e["args"]),
                          "source": dict(e["source"])} for e in self.examples],
            "params": [{
                "name": p.name, "type": p.field.type_name(), "required": p.required,
                "default": None if p.default is MISSING else to_jsonable(p.default),
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
                    raise AttemptError("missing_required",
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
        return self.code_name

    # Where the menu's lines came from, for the step-through (its menu stage shows each line
    # beside its source). Each kind says it of itself; a kind that cannot tell says so in a note.

    def code_place(self) -> tuple[str | None, int | None, list[str]]:
        """(file, first line, source lines) of the code that declared this option, if any."""
        return None, None, []

    def head_sources(self, options: Any, code: tuple) -> tuple[dict, dict]:
        """Where the signature line and the description line of this option came from, in the
        option set `options` as the user wrote it (`code` is `code_place()`)."""
        note = {"kind": "note", "label": f"option {self.name!r} ({self.kind})"}
        return note, note

    def param_source(self, name: str, nested: list[str], options: Any, code: tuple) -> dict:
        """Where the menu line of parameter `name` (and of `nested` fields under it) came from."""
        return {"kind": "note", "label": f"parameter {name!r} of option {self.name!r}"}


class FunctionOption(Option):
    """Picked → the function runs with the validated and injected arguments (O1)."""
    kind = "function"

    def __init__(self, name: str, fn: Callable, description: str | None, where: str):
        super().__init__(name, description if description is not None else _describe(fn),
                         function_params(fn, where))
        self.handler = fn
        found = docstring_examples(fn)
        if found:
            file, start, lines = sources.code_place(fn)
            made = []
            for request, args, text in found:
                line = sources.line_of(lines, start, lambda s, t=text: t in s) if lines else None
                made.append((request, args, sources.place(
                    file, line, f"the Examples section of {getattr(fn, '__name__', name)}'s "
                                "docstring")))
            self.examples = tuple(read_examples(self, made, None))

    def resolve(self, kwargs: dict) -> Any:
        positional = self.__dict__.get("_positional")
        if positional is None:
            positional = self._positional = positional_only(self.handler)
        return call_function(self.handler, kwargs, positional)

    def chosen(self) -> Any:
        return self.handler

    def code_place(self) -> tuple[str | None, int | None, list[str]]:
        return sources.code_place(self.handler)

    def head_sources(self, options: Any, code: tuple) -> tuple[dict, dict]:
        file, start, lines = code
        fn = self.handler
        sig = sources.place(file, sources.line_of(lines, start, lambda s: s.lstrip().startswith(
            ("def ", "async def "))), f"the signature of {getattr(fn, '__name__', self.name)}")
        doc = sources.place(file, sources.line_of(lines, start,
                                                  lambda s: '"""' in s or "'''" in s),
                            "the docstring's first paragraph")
        return sig, doc

    def param_source(self, name: str, nested: list[str], options: Any, code: tuple) -> dict:
        meta = getattr(self.handler, "input_meta", None) or {}
        file, start, lines = code
        if name in meta and not nested:
            return {**sources.place(file, sources.meta_line(file, start, self.handler, name),
                                    f"input_meta[{name!r}]"), "input_meta": name}
        line = sources.line_of(lines, start, lambda s: f"{name}" in s.split("#")[0]
                               and (":" in s or "=" in s or "," in s)) if lines else None
        return {**sources.place(file, line, f"parameter {name!r} of {self.handler.__name__}"
                                " (its annotation and default)"), "param": name}


class ValueOption(Option):
    """Picked → the value itself (O1)."""
    kind = "value"

    def __init__(self, name: str, value: Any, description: str = ""):
        super().__init__(name, description)
        self.value = value

    def resolve(self, kwargs: dict) -> Any:
        return self.value

    def head_sources(self, options: Any, code: tuple) -> tuple[dict, dict]:
        value = {"kind": "value", "value": safe_repr(self.value),
                 "label": f"the value {clip(safe_repr(self.value), 200)}"}
        desc = {"kind": "note", "label": "the description given with the value"}
        raw = options.get(self.name) if isinstance(options, dict) else None
        if isinstance(raw, tuple) and len(raw) == 2:  # O2's (value, "description")
            value.update(path=[self.name, 0])
            desc = {"kind": "option_set", "path": [self.name, 1],
                    "label": sources.path_text([self.name, 1])}
        elif isinstance(options, dict):
            value.update(path=[self.name])
        return value, desc


class SchemaPick(dict):
    """A schema pick `{"decision": name, **arguments}` (O1, Z1) whose arguments hold one named
    `decision` as well: the option's name stays under "decision", and the arguments are also
    kept apart, whole, as `.arguments` (the name as `.decision`). A tool definition's parameters
    are its author's to name, so such a tool is never refused: every pick of an option that
    declares a parameter `decision` is a SchemaPick, and so is a pick to which the model added
    that key where the schema allows other keys (`schema_pick`). Any other pick is the plain
    dict, as the fast paths of the journal and the JSON forms want it. A SchemaPick is a dict
    in every other way: it compares, prints and serializes as the flat form."""
    __slots__ = ("decision", "arguments")

    def __init__(self, name: str, arguments: dict):
        super().__init__(decision=name)
        self.update((k, v) for k, v in arguments.items() if k != "decision")
        self.decision, self.arguments = name, dict(arguments)


def schema_pick(name: str, arguments: dict, apart: bool = False) -> dict:
    """A schema pick's result: the plain `{"decision": name, **arguments}`, or a `SchemaPick`
    where an argument is named `decision` (always, with `apart`: for an option that declares
    one, so each of its picks reads alike)."""
    if apart or "decision" in arguments:
        return SchemaPick(name, arguments)
    return {"decision": name, **arguments}


class SchemaOption(Option):
    """The model fills the declared fields → `{"decision": name, **fields}` (O1, Z1). Every
    field is required (P5)."""
    kind = "schema"

    def __init__(self, name: str, description: str, params: list[Param]):
        super().__init__(name, description, params)

    @classmethod
    def from_schema(cls, name: str, desc: str, schema: Any, where: str) -> SchemaOption:
        if not isinstance(schema, dict) or not schema:
            raise OptionError(f"{where}: a schema option's schema must be a non-empty dict "
                              f"{{field: type}}, got {schema!r}")
        if looks_like_json_schema(schema):
            warnings.warn(f"{where}: this schema looks like a JSON Schema, but a schema dict "
                          f"here is the spec form (rules S1, S3: its keys are field names, so "
                          f"'type' and 'properties' would be fields); to give a JSON Schema, "
                          f"wrap it: openprogram.JsonSchema(schema)", OptionWarning,
                          stacklevel=user_stacklevel())
        if "decision" in schema:
            # The result is {"decision": name, **fields}: the model's value would replace the name.
            raise OptionError(f"{where}: a schema option cannot have a field 'decision' (the "
                              f"result {{'decision': {name!r}, ...}} holds the option name "
                              f"there); rename the field")
        params = [Param(k, schema_field(v, f"{where}: field {k!r}")) for k, v in schema.items()]
        return cls(name, desc, params)

    def resolve(self, kwargs: dict) -> Any:
        return {"decision": self.code_name, **kwargs}

    def head_sources(self, options: Any, code: tuple) -> tuple[dict, dict]:
        found = sources.raw_schema(options, self)
        if found is None:
            return super().head_sources(options, code)
        return ({"kind": "option_set", "path": found[0], "label": sources.path_text(found[0])},
                {"kind": "option_set", "path": [found[0][0], 0],
                 "label": sources.path_text([found[0][0], 0])})

    def param_source(self, name: str, nested: list[str], options: Any, code: tuple) -> dict:
        found = sources.raw_schema(options, self)
        if found is None:
            return super().param_source(name, nested, options, code)
        path = [*found[0], name, *nested]
        return {"kind": "option_set", "path": path, "label": sources.path_text(path)}


_option_kinds: list[type[Option]] = []
# What to call when a kind is registered (the option cache forgets what it built without it).
_kind_listeners: list[Callable[[], None]] = []


def register_option_kind(cls: type[Option]) -> type[Option]:
    """Plug in a new option kind: `cls.from_handler(name, handler, description, where)` is
    asked first (the latest registered first) for every handler of every option set, and returns
    an `Option` for a handler it recognises, or None. Usable as a class decorator."""
    if not (isinstance(cls, type) and issubclass(cls, Option)):
        raise UsageError(f"register_option_kind takes a subclass of Option, got {cls!r}")
    if cls not in _option_kinds:
        _option_kinds.insert(0, cls)
        # the new kind may claim a handler a cached option was built from
        for forget in _kind_listeners:
            forget()
    return cls


def _plugged(name: str, handler: Any, description: str | None, where: str) -> Option | None:
    for cls in _option_kinds:
        option = cls.from_handler(name, handler, description, where)
        if option is not None:
            return option
    return None


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

