"""One entry of an option set read into its option: the dict form's `name: handler` and the list
form's items (`build_option`), asking the registered kinds first, warning where an entry keeps its
specified meaning but looks like a mistake (a tool definition or a JSON Schema given as a value),
and the check of `context=` against the hidden parameters before any model call
(`check_context`). Apart from kinds.py because reading an entry chooses among the kinds, while
each kind in kinds.py owns only its own behaviour; this module sits above kinds.py and imports it,
never the other way.
"""
from __future__ import annotations

import warnings

from ...base.errors import OptionError, OptionWarning, UsageError
from ...base.text import repr_head, safe_repr
from ..schema.fields import looks_like_json_schema, user_stacklevel
from .examples import WithExamples
from .kinds import FunctionOption, SchemaOption, ValueOption, _plugged
from .menu import Menu, _hidden

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Sequence
    from typing import Any

    from ..schema.fields import Param
    from .kinds import Option


def _fn_name(fn: Callable, where: str) -> str:
    name = getattr(fn, "__name__", None)
    if not name or name == "<lambda>":
        raise OptionError(f"{where}: a callable in the list form needs a name ({fn!r} has "
                          f"none); use the dict form {{'name': fn}} or a def")
    return name


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
                          stacklevel=user_stacklevel())
        elif looks_like_json_schema(value):
            warnings.warn(f"{where}: this value looks like a JSON Schema, but a dict handler is "
                          f"a value option (rule O2). To have the model fill it in, write "
                          f"openprogram.JsonSchema(schema)", OptionWarning,
                          stacklevel=user_stacklevel())
        elif any(isinstance(v, type) or (isinstance(v, list) and len(v) == 1 and
                                         isinstance(v[0], type)) for v in value.values()):
            warnings.warn(f"{where}: this value option's dict holds Python types "
                          f"({repr_head(value, 60, '...', fit=True)}); picking it returns that "
                          f"dict. For a schema "
                          f"option whose fields the model fills in, write "
                          f"{{{name!r}: ('description', {repr_head(value, 60, '...', fit=True)})}}",
                          OptionWarning,
                          stacklevel=user_stacklevel())
    return ValueOption(name, value, description)


def tool_shape(d: Any) -> str | None:
    """Which provider's tool definition `d` is shaped like (for tool_definitions.py and the warning
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


_list_readers: list[Callable[[Any, str], Option | None]] = []


def register_list_reader(reader: Callable[[Any, str], Option | None]) -> None:
    """Let `reader(item, where)` read list-form items that carry their own name (tool
    definitions: tool_definitions.py); it returns an Option, or None for an item it does not
    know."""
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
                      f"('name', 'description'), ('name', 'description', schema) or a tool "
                      f"definition (OpenAI's, Anthropic's or MCP's dict, the mcp SDK's Tool, "
                      f"another SDK's model as .model_dump(by_alias=True), or "
                      f"openprogram.tool(definition, fn) to run a function); use the dict form "
                      f"for value options")


def _head(value: Any, n: int = 60) -> str:
    """The first `n` characters of `value`'s repr, for the name of a list-form entry, written
    only as far as they go (a tool of 50,000 properties has a repr of megabytes, and every
    entry of a list is named so)."""
    out: list[str] = []
    size = 0

    def put(text: str) -> bool:
        nonlocal size
        out.append(text)
        size += len(text)
        return size >= n

    def walk(v: Any) -> bool:   # True once n characters are written
        t = type(v)
        if t is dict or t is list or t is tuple:
            opening, closing = {dict: "{}", list: "[]", tuple: "()"}[t]
            if put(opening):
                return True
            for i, x in enumerate(v.items() if t is dict else v):
                if (i and put(", ")) or (t is dict and (walk(x[0]) or put(": ")))\
                        or walk(x[1] if t is dict else x):
                    return True
            return put("," + closing if t is tuple and len(v) == 1 else closing)
        return put(repr(v[:n + 1]) if t is str else safe_repr(v)[:n + 1])
    walk(value)
    return "".join(out)[:n]


def build_option(name: str | None, handler: Any, position: int | None) -> Option:
    if isinstance(handler, WithExamples):
        inner = build_option(name, handler.handler, position)
        return inner.with_examples(handler.examples, f"with_examples() on option "
                                                     f"{inner.name!r} in the option set",
                                   replace=False)
    if name is None:
        return _list_option(handler, f"option #{position} ({_head(handler)})")
    return _dict_option(name, handler, f"option {name!r}")


def check_context(menu: Sequence[Option], context: dict[str, Any] | None) -> None:
    """Fail before any model call when a hidden parameter without a default has no value."""
    if context is not None and not isinstance(context, dict):
        raise UsageError(f"context= must be a dict, got {type(context).__name__}")
    pairs = menu.hidden if isinstance(menu, Menu) else [(o, _hidden(o)) for o in menu]
    for o, hidden in pairs:
        if hidden:
            check_hidden(f"option {o.name!r}", hidden, context)


def check_hidden(where: str, params: list[Param], context: dict | None) -> None:
    """Fail when one of `params` is hidden, has no default and has no value in `context`."""
    for p in params:
        if p.source == "context" and p.required and p.name not in (context or {}):
            raise OptionError(
                f"{where}: hidden parameter {p.name!r} has no default and is not in context; "
                f"pass context={{{p.name!r}: ...}} or give it a default")
