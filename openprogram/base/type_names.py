"""The names the public signatures are typed with: `Options`, what an option set may be, and
`ModeName`, the ways of asking. They live apart from the modules that use them because those
import `typing` only while a type checker reads them (it costs the import of openprogram
milliseconds it does not need); this module is loaded when a user asks for the names
(`openprogram.Options`), and a test keeps `ModeName` equal to the registered modes."""
from __future__ import annotations

from typing import Any, Literal, Union

# The dict form {name: handler} or the list form [handler, ...] (modes.py and option_set.py
# say what a handler may be: a function, a value, a schema, a class, a tool definition).
# (a typing.Union, not `X | Y`: the runtime value users see in help() stays what it was)
Options = Union[dict[str, Any], list[Any], tuple[Any, ...]]  # noqa: UP007

# "menu" (the text menu), "tools" (one native tool per option), "json_schema" (the provider's
# structured output): modes.MODES.
ModeName = Literal["menu", "tools", "json_schema"]

__all__ = ["Options", "ModeName"]
