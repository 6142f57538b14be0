"""Tool definitions and plain JSON Schema as options.

A user who already has tool definitions hands them over as they are: in the list form, an OpenAI
tool (chat-completions `{"type": "function", "function": {...}}` or responses `{"type":
"function", "name", "parameters"}`), an Anthropic tool (`input_schema`) or an MCP tool
(`inputSchema`) is one option. Where the specification already gives a dict a meaning (O2: a
value; S1/S3: the spec form) a definition is marked: `openprogram.tool(definition, fn=None)`,
`openprogram.JsonSchema(schema)`. A definition without a function is a schema option (the pick
is `{"decision": name, **arguments}`; a tool whose author named a parameter `decision` is never
refused: its picks are `SchemaPick`s, whose `.arguments` holds every argument apart); with one,
the function runs with the arguments the definition's schema validated. The schema is read
once, when the option set is built, as written: JSON Schema's meaning holds (validator.py, and
schemaeval.py for the keywords beyond it; what cannot be followed is refused there, and
annotations are named once in an `OptionWarning`), so keys the schema allows are kept, not
dropped as the spec's forms drop them; the menu lines, the `Call:` example and the schema sent
in the tools and json_schema modes all come from it.
"""
from __future__ import annotations

import copy
import warnings

from ...base.errors import OptionError, OptionWarning
from ...base.text import repr_head
from ..schema.fields import MISSING, Field, Param, user_stacklevel
from ..schema.reader import WRITTEN_FORMAT_EXAMPLES, SchemaDoc, UserType
from ..schema.type_table import python_type
from ..schema.validator import FORMATS, compile_schema, merge_all_of
from .entries import register_list_reader
from .examples import redescribe
from .kinds import Option, call_function, register_option_kind, schema_pick

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["JsonSchema", "ToolDefinition", "tool", "read_definition", "sdk_tool",
           "JsonSchemaOption"]


class JsonSchema:
    """A plain JSON Schema (of an object) marked as such: `{"order": JsonSchema(schema)}` is a
    schema option whose fields the schema describes, where an unmarked dict would be the spec
    form (S1). `name` and `description` serve the list form (the schema's `title` and
    `description` otherwise)."""

    def __init__(self, schema: dict, *, name: str | None = None,
                 description: str | None = None):
        if not isinstance(schema, dict):
            raise OptionError(f"JsonSchema takes a JSON Schema object (a dict), got "
                              f"{type(schema).__name__}")
        self.schema, self.name, self.description = schema, name, description

    def __repr__(self) -> str:
        return f"JsonSchema({self.name or self.schema.get('title') or '...'})"


class ToolDefinition:
    """A provider's tool definition marked as such (`openprogram.tool(definition, fn)`)."""

    def __init__(self, definition: Any, fn: Callable | None = None):
        read = read_definition(definition)
        if read is None:
            raise OptionError(
                "tool() takes a tool definition: OpenAI's {'type': 'function', 'function': "
                "{'name', 'description', 'parameters'}} (or the responses form with 'name' and "
                "'parameters' at the top), Anthropic's {'name', 'description', 'input_schema'} "
                f"or MCP's {{'name', 'description', 'inputSchema'}} (or the mcp SDK's Tool "
                f"object); got {_head(definition)}")
        if fn is not None and not callable(fn):
            raise OptionError(f"tool(definition, fn): fn must be callable, got {fn!r}")
        self.definition, self.fn = sdk_tool(definition) or definition, fn
        self.name, self.description, self.schema = read
        self.option: Option | None = None  # the option it makes, once made (_list_item)

    def __repr__(self) -> str:
        return f"tool({self.name!r})"


def tool(definition: Any, fn: Callable | None = None) -> ToolDefinition:
    """Mark a tool definition (OpenAI, Anthropic or MCP shape, or the mcp SDK's `Tool`) as an
    option. Without `fn` the
    pick is the filled arguments (`{"decision": name, **arguments}`); with it, `fn(**arguments)`
    runs and its return value is the result."""
    return ToolDefinition(definition, fn)


def _head(x: Any) -> str | None:
    return repr_head(x, 80, "")


def sdk_tool(d: Any) -> dict | None:
    """The definition an SDK's tool object stands for (the `mcp` SDK's `Tool`, a pydantic model
    with `input_schema` aliased `inputSchema`), read by duck typing so the SDK need not be
    imported; None for anything else."""
    if isinstance(d, dict) or not callable(getattr(d, "model_dump", None)) or \
            not hasattr(d, "input_schema") or not isinstance(getattr(d, "name", None), str):
        return None
    dumped = d.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {"name": dumped.get("name"), "description": dumped.get("description") or "",
            "inputSchema": dumped.get("inputSchema")}


def read_definition(d: Any) -> tuple[str, str, dict] | None:
    """(name, description, input schema) of a tool definition in a provider's shape (or an
    SDK's tool object), or None when `d` is not one."""
    d = sdk_tool(d) or d
    if not isinstance(d, dict):
        return None
    if d.get("type") == "function" and isinstance(d.get("function"), dict):
        f = d["function"]      # OpenAI chat completions
        schema = f.get("parameters", {"type": "object", "properties": {}})
        name, desc = f.get("name"), f.get("description")
    elif d.get("type") == "function" and "name" in d:
        schema = d.get("parameters", {"type": "object", "properties": {}})   # OpenAI responses
        name, desc = d.get("name"), d.get("description")
    elif "name" in d and "input_schema" in d:
        schema, name, desc = d["input_schema"], d["name"], d.get("description")   # Anthropic
    elif "name" in d and "inputSchema" in d:
        schema, name, desc = d["inputSchema"], d["name"], d.get("description")    # MCP
    else:
        return None
    if not isinstance(name, str) or not name:
        raise OptionError(f"a tool definition needs a non-empty name, got {name!r} in "
                          f"{_head(d)}")
    if not isinstance(schema, dict):
        raise OptionError(f"tool {name!r}: its input schema must be a JSON Schema object, got "
                          f"{_head(schema)}")
    return name, desc if isinstance(desc, str) else "", schema


class JsonSchemaOption(Option):
    """A tool definition or a plain JSON Schema as an option: the model fills the arguments the
    schema describes; the pick runs `fn` with them, or resolves to `{"decision": name,
    **arguments}` (O1's schema option)."""
    kind = "json_schema"

    def __init__(self, name: str, description: str, schema: dict, fn: Callable | None,
                 where: str):
        # Read whole now, so what it cannot follow is refused when the option set is built; the
        # compiled check is made again at this option's first pick (`check`), not kept: a
        # menu of 1,841 tools kept some 180,000 objects of checks no decision used, and every
        # full garbage collection walked them all.
        annotations = compile_schema(schema, where, as_written=True).annotations
        self.given, self._where, self._check = schema, where, None
        schema = merge_all_of(schema, where)   # (for the menu: allOf of objects as one object)
        defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
        doc = SchemaDoc(defs, root=self.given, where=where)   # (references: as written)
        doc.formats = WRITTEN_FORMAT_EXAMPLES
        if "$ref" in schema:  # pydantic's form for a recursive model: the root is a reference
            root, _ = doc.deref(schema)
            schema = {**root, **{k: schema[k] for k in ("$defs", "definitions") if k in schema}}
        if "type" in schema and schema["type"] != "object" or \
                not isinstance(schema.get("properties", {}), dict):
            raise OptionError(f"{where}: the arguments of an option are an object; its schema "
                              f"must have type 'object' (with properties), got "
                              f"{_head(schema)}")
        self.schema = schema
        # (kept: a plain list given again is served from the list cache, which says them again)
        self.warnings: tuple[str, ...] = ()
        if annotations:
            self.warnings += (f"{where}: kept as annotations, not checked: "
                              f"{', '.join(annotations)} (words that are not JSON Schema "
                              f"keywords, and formats other than {', '.join(sorted(FORMATS))} "
                              f"and OpenAPI's numeric ones)",)
        props = schema.get("properties") or {}
        self._apart = fn is None and "decision" in props
        if self._apart:   # (the tool's author named it: never refused)
            self.warnings += (f"{where}: the tool has a parameter named 'decision'; a pick of "
                              f"it resolves to {{'decision': {name!r}, ...}} as every schema "
                              f"option's does, so that argument is read as "
                              f"result.arguments['decision'] (every argument is in "
                              f"result.arguments)",)
        for message in self.warnings:
            warnings.warn(message, OptionWarning, stacklevel=user_stacklevel())
        required = set(schema.get("required") or ())
        props = {k: p if isinstance(p, dict) else {} for k, p in props.items()}
        params = [Param(k, Field(doc.project_type(p), doc.description(p),
                                 user=UserType(doc, p if isinstance(p, dict) else {})),
                        required=k in required,
                        default=p.get("default", MISSING) if isinstance(p, dict) else MISSING)
                  for k, p in props.items()]
        super().__init__(name, description or doc.description(schema), params)
        self.handler = fn
        self._convert = _conversions(fn, props) if fn is not None else {}

    @property
    def check(self) -> Any:
        """The schema's compiled check (validator.compile_schema), made at the first pick."""
        c = self._check
        if c is None:
            c = self._check = compile_schema(self.given, self._where, as_written=True)
        return c

    def menu_lines(self) -> list[str]:
        lines = super().menu_lines()
        extra = self.schema.get("additionalProperties")
        doc = self.params[0].field.user.doc if self.params else SchemaDoc({}, root=self.given)
        if isinstance(extra, dict) and extra:  # keys beyond the named ones, and what they hold
            lines[-1:-1] = doc.field_lines("<other keys>", extra, False, "    ", ())
        rules = [n for n in doc.rule_notes(self.schema) if n != "no other keys"]
        if rules:   # what relates the arguments to one another (dependentRequired, if/then...)
            lines[-1:-1] = [f"    - the arguments together: {'; '.join(rules)}"]
        return lines

    @classmethod
    def from_handler(cls, name: str, handler: Any, description: str | None,
                     where: str) -> JsonSchemaOption | None:
        if isinstance(handler, JsonSchema):
            return cls(name, description or handler.description or "", handler.schema, None,
                       where)
        if isinstance(handler, ToolDefinition):
            return _input_examples(cls(name, description or handler.description,
                                       handler.schema, handler.fn, where), handler.definition)
        return None

    def json_schema(self) -> dict:
        # The schema as given (allOf kept: flattened, a sibling additionalProperties would
        # judge other keys), but for a root that is a reference, sent written out. Its `$id`
        # stays: a reference may be written relative to it, or as its absolute URI.
        base = self.schema if "$ref" in self.given else self.given
        out = {k: v for k, v in copy.deepcopy(base).items() if k not in ("$schema", "title")}
        out.setdefault("type", "object")
        out.setdefault("properties", {})
        out = redescribe(out, self.described)
        if self.description:
            out["description"] = self.description
        return out

    def bind(self, args: dict, *, runtime: Any, context: dict, dropped: list[str],
             injected: list[str], prefix: str = "args") -> tuple[dict, dict]:
        kwargs = self.check(args, prefix, dropped)
        kept = dict(kwargs)
        for k, convert in self._convert.items():
            if k in kwargs:
                kwargs[k] = convert(kwargs[k])
        return kwargs, kept

    def head_sources(self, options: Any, code: tuple) -> tuple[dict, dict]:
        return ({"kind": "json_pointer", "pointer": "#/properties",
                 "label": "JSON Schema keyword #/properties"},
                {"kind": "json_pointer", "pointer": "#/description",
                 "label": "the tool's description (JSON Schema #/description)"})

    def param_source(self, name: str, nested: list[str], options: Any, code: tuple) -> dict:
        pointer = "#/properties/" + name + "".join(f"/properties/{n}" for n in nested)
        return {"kind": "json_pointer", "pointer": pointer,
                "label": f"JSON Schema keyword {pointer}"}

    def resolve(self, kwargs: dict) -> Any:
        if self.handler is None:
            return schema_pick(self.code_name, kwargs, self._apart)
        return call_function(self.handler, kwargs)

    def chosen(self) -> Any:
        return self.handler if self.handler is not None else self.code_name


def _conversions(fn: Callable, props: dict) -> dict[str, Callable]:
    """For each parameter whose annotation asks for a Python type the table knows (a date, a
    UUID), the function that makes it from the validated JSON value."""
    import typing
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return {}
    out = {}
    for k in props:
        found = python_type(hints.get(k))
        if found is not None:
            out[k] = found[1]
    return out


def _list_item(item: Any, where: str) -> Option | None:
    """A list-form item that is a tool definition (marked or not) or a marked JSON Schema."""
    if isinstance(item, ToolDefinition):
        # built once: a server's hundreds of tools are not read again for every decision
        if item.option is None:
            item.option = JsonSchemaOption(item.name, item.description, item.schema, item.fn,
                                           where)
            item.option._cached = True  # the same object every time: its Menu may be cached
        return item.option
    if isinstance(item, JsonSchema):
        name = item.name or item.schema.get("title")
        if not isinstance(name, str) or not name:
            raise OptionError(f"{where}: a JsonSchema in the list form needs a name: "
                              f"JsonSchema(schema, name='...') or a 'title' in the schema")
        return JsonSchemaOption(name, item.description or "", item.schema, None, where)
    definition = item if isinstance(item, dict) else sdk_tool(item)  # the mcp SDK's Tool too
    read = read_definition(definition) if definition is not None else None
    if read is not None:
        return _input_examples(JsonSchemaOption(*read, None, where), definition)
    return None


def _input_examples(option: JsonSchemaOption, definition: dict) -> JsonSchemaOption:
    """The option with the worked inputs of Anthropic's `input_examples` field (a list of
    input objects), each checked against the tool's schema and cited by its JSON pointer."""
    found = definition.get("input_examples")
    if found is None:
        return option
    if not isinstance(found, list):
        raise OptionError(f"tool {option.name!r}: input_examples is a list of input objects, "
                          f"got {_head(found)}")
    return option.with_examples(
        [(None, e, {"kind": "json_pointer", "pointer": f"#/input_examples/{i}",
                    "label": f"the tool definition's input_examples[{i}]"})
         for i, e in enumerate(found)], None)


register_option_kind(JsonSchemaOption)
register_list_reader(_list_item)
