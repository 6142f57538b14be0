"""The option set: what the user hands a decision, read into options the loop can use.

`kinds` (the option kinds — function, value, schema), `entries` (how an entry of an option set
becomes one, and the check of `context=`), `examples` (the worked picks an option carries),
`option_set` (`normalize`: the option set as a `Menu`), `cache` (options built once per
function), `user_classes` (the user's pydantic models, dataclasses and TypedDicts),
`tool_definitions` (OpenAI / Anthropic / MCP tool definitions and `JsonSchema`), `menu` (the menu
text), `shortlist` (a menu narrowed to the k options a ranker puts first) and `sources` (where
each menu line came from). The schema model they build on (`Field`, the validator, the type
table) is the package below, `decision.schema`. This package exports what the loop and the
runtimes use, so `openprogram.decision.options.<name>` keeps working.
"""
from __future__ import annotations

from ...base.errors import OptionError
from ..schema.fields import (
    META_KEYS,
    META_PARAM_KEYS,
    MISSING,
    RUNTIME_PARAM_NAMES,
    Field,
    Param,
    annotation_field,
    function_params,
    register_annotation_hook,
    schema_field,
    validate,
)
from ..schema.reply_values import check_json_value, describe_value, safe_key
from .cache import MENU_CACHE_SIZE, OPTION_CACHE_SIZE, clear_option_cache
from .entries import build_option, check_context, check_hidden, register_list_reader, tool_shape
from .kinds import (
    FunctionOption,
    Option,
    SchemaOption,
    ValueOption,
    call_function,
    positional_only,
    register_option_kind,
)
from .menu import Menu, field_line, option_infos, param_lines, render_menu, shown
from .option_set import normalize

# Importing these registers their kinds: the user's classes and tool definitions as options. The
# kind registered last is asked first, so the order is kept as it is (not sorted).
# isort: off
from . import user_classes as _user_classes  # noqa: F401
from . import tool_definitions as _tool_definitions  # noqa: F401
# isort: on

__all__ = ["OptionError", "Option", "FunctionOption", "ValueOption", "SchemaOption",
           "build_option", "call_function", "check_context", "check_hidden", "positional_only",
           "register_list_reader", "register_option_kind", "tool_shape", "Menu", "field_line",
           "option_infos", "param_lines", "render_menu", "shown", "normalize",
           "MENU_CACHE_SIZE", "OPTION_CACHE_SIZE", "clear_option_cache", "META_KEYS",
           "META_PARAM_KEYS", "RUNTIME_PARAM_NAMES", "Field", "Param", "annotation_field",
           "function_params", "register_annotation_hook", "schema_field", "validate",
           "safe_key"]
