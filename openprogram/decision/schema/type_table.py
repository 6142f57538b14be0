"""The one table from Python types to JSON types, and back.

Every place that needs to know which JSON type a Python type (or value) is — describing a
parameter, naming a value in an error, writing a JSON Schema for a provider, making a schema
strict — reads it from here. `JSON_TYPES` maps the six JSON-native Python types (and None);
`SHORT` gives the name the menu shows for each JSON type (`int`, not `integer`); `python_type`
describes the standard-library types a dataclass field may carry that JSON holds as text or a
number (dates, times, UUIDs, Decimal, paths): their JSON Schema and how a JSON value becomes one.
The standard-library modules behind those are imported only when such a type is met.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

#: Python type -> JSON Schema type name.
JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               list: "array", dict: "object", type(None): "null"}

#: JSON Schema type name -> the name the menu and error messages show.
SHORT: dict[str, str] = {"string": "str", "integer": "int", "number": "float",
                         "boolean": "bool", "array": "list", "object": "dict", "null": "null"}

#: The Python types a spec form or an annotation names as a scalar, with their menu name.
SCALARS: dict[type, str] = {t: SHORT[j] for t, j in JSON_TYPES.items() if t is not type(None)}

#: A JSON type name in either spelling (`"int"` or `"integer"`) -> the menu name.
TYPE_NAMES: dict[str, str] = {**{v: v for v in SCALARS.values()},
                              **{j: s for j, s in SHORT.items() if j != "null"}}

#: Menu name -> JSON Schema type name.
LONG: dict[str, str] = {s: j for j, s in SHORT.items()}


#: A valid example of each checked string format (the menu's placeholders).
FORMAT_EXAMPLES: dict[str, str] = {
    "date": "2000-01-31", "date-time": "2000-01-31T12:00:00Z", "time": "12:00:00",
    "uuid": "00000000-0000-0000-0000-000000000000", "email": "user@example.com",
    "uri": "https://example.com/"}


def json_type(value: Any) -> str | None:
    """The JSON Schema type of a Python value (`True` is a boolean, never an integer), or None
    for a value JSON has no type for."""
    if value is True or value is False:
        return "boolean"
    return JSON_TYPES.get(type(value))


def python_type(t: Any) -> tuple[dict, Callable[[Any], Any]] | None:
    """For a standard-library type JSON can carry (`datetime.date`, `datetime.datetime`,
    `datetime.time`, `uuid.UUID`, `decimal.Decimal`, `pathlib.Path` and subclasses of those
    last two's bases): its JSON Schema and the function that turns a valid JSON value into it.
    None for any other type."""
    if not isinstance(t, type):
        return None
    import sys
    mods = sys.modules
    # Only a module that is loaded can have made `t`: nothing is imported for a plain type.
    if "datetime" in mods:
        dt = mods["datetime"]
        if issubclass(t, dt.datetime):
            return {"type": "string", "format": "date-time"}, _parse_datetime
        if issubclass(t, dt.date):
            return {"type": "string", "format": "date"}, dt.date.fromisoformat
        if issubclass(t, dt.time):
            return {"type": "string", "format": "time"}, _parse_time
    if "uuid" in mods and issubclass(t, mods["uuid"].UUID):
        return {"type": "string", "format": "uuid"}, mods["uuid"].UUID
    if "decimal" in mods and issubclass(t, mods["decimal"].Decimal):
        dec = mods["decimal"].Decimal
        return {"type": "number"}, lambda v: dec(str(v))
    if "pathlib" in mods and issubclass(t, mods["pathlib"].PurePath):
        return {"type": "string"}, t
    return None


def _parse_datetime(text: str) -> Any:
    import datetime
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))


def _parse_time(text: str) -> Any:
    import datetime
    return datetime.time.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
