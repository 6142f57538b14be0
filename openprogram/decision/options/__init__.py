"""Option sets, as the original project and earlier code import them: a thin re-export.

The mechanism lives in one module per stage, in the order a decision flows: `kinds` (the option
kinds and how an entry of an option set becomes one), `normalize` (the option set as a `Menu`),
`optioncache` (options built once per function), `schema` (the schema model: `Field` from the
spec forms, annotations and signatures), `validator` (one validator over JSON Schema), `menu`
(the menu text) and `pytypes` (the one Python-to-JSON type table). Import from those; this module
keeps `openprogram.decision.options.<name>` working.
"""
from __future__ import annotations

from ...base.errors import OptionError
from .kinds import (FunctionOption, Option, SchemaOption, ValueOption, build_option,
                    call_function, check_context, check_hidden, positional_only,
                    register_list_reader, register_option_kind, tool_shape)
from .menu import Menu, field_line, option_infos, param_lines, render_menu, shown
from .option_set import normalize
from .cache import MENU_CACHE_SIZE, OPTION_CACHE_SIZE, clear_option_cache
from ..schema.fields import (META_KEYS, META_PARAM_KEYS, RUNTIME_PARAM_NAMES, MISSING, Field, Param,
                             check_json_value, describe_value, annotation_field, function_params,
                             register_annotation_hook, schema_field, validate)
from ..schema.reply_values import safe_key
# Importing these registers their kinds: the user's classes and tool definitions as options.
from . import user_classes as _user_classes  # noqa: F401
from . import tool_definitions as _tool_definitions  # noqa: F401

__all__ = ["OptionError", "Option", "FunctionOption", "ValueOption", "SchemaOption",
           "build_option", "call_function", "check_context", "check_hidden", "positional_only",
           "register_list_reader", "register_option_kind", "tool_shape", "Menu", "field_line",
           "option_infos", "param_lines", "render_menu", "shown", "normalize",
           "MENU_CACHE_SIZE", "OPTION_CACHE_SIZE", "clear_option_cache", "META_KEYS",
           "META_PARAM_KEYS", "RUNTIME_PARAM_NAMES", "Field", "Param", "annotation_field",
           "function_params", "register_annotation_hook", "schema_field", "validate",
           "safe_key"]
