"""`normalize`: an option set (the dict or the list form) as a `Menu` of options (O1-O4).

Each entry becomes its option through the option cache (a function seen before, unchanged, is
not read again), and a list of plain data (tool definitions as dicts) is read once per content;
a set with no options or a repeated name is refused, naming the culprit.
"""
from __future__ import annotations

from ...base.errors import OptionError
from .cache import _cached_list, _cached_menu, _cached_option
from .kinds import Option
from .menu import Menu

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

def normalize(options: Any) -> Menu:
    """An option set (dict or list form) as a `Menu` of `Option`s; rejects bad sets (O4). A
    Menu comes back as it is, so its derived text is reused. An object that stands for an
    option set (an MCP connection) gives it through its `__option_set__()`."""
    if isinstance(options, Menu):
        return options
    stands_for = getattr(type(options), "__option_set__", None)
    if stands_for is not None:
        given = stands_for(options)
        if getattr(type(given), "__option_set__", None) is not None:
            raise OptionError(f"{type(options).__name__}.__option_set__() must give an option "
                              f"set (a dict or a list), got {type(given).__name__}")
        return normalize(given)
    if isinstance(options, (list, tuple)) and options and \
            all(isinstance(o, Option) for o in options):
        return Menu(options)
    if isinstance(options, dict):
        for name in options:
            if not isinstance(name, str) or not name:
                raise OptionError(f"option names must be non-empty strings, got {name!r}")
        return _checked([_cached_option(name, handler, None)
                         for name, handler in options.items()])
    if isinstance(options, (list, tuple)):
        # (plain data is kept by its content: the same tool dicts given again are not read again)
        return (_cached_list(options, _list_menu) if options else None) or _list_menu(options)
    raise OptionError(f"options must be a dict {{name: handler}} or a list, got "
                      f"{type(options).__name__}")


def _list_menu(items: list | tuple) -> Menu:
    return _checked([_cached_option(None, item, i) for i, item in enumerate(items)])


def _checked(out: list[Option]) -> Menu:
    """The Menu of these options, once no name is missing or repeated (O4)."""
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
