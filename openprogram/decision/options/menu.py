"""The menu: an option set as the text the model reads (rules R1-R3).

`render_menu` writes the menu of a normalized option set: a line telling the model how to pick,
then each option's block (`Option.menu_lines()`: its signature, description, one line per
parameter from `param_lines`, and the `Call:` example). A `Menu` is a normalized option set
whose text, option table and hidden parameters are derived once and kept (a batch hands one Menu
to every decision). The lines of a user's class or a JSON Schema below a parameter come from
user_classes.py's reading of that schema, through the same `field_line`.
"""
from __future__ import annotations

import functools

from ..schema.fields import Param
from ..schema.reader import field_line, shown  # noqa: F401  (re-exported)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Sequence
    from typing import Any

    # `Option` in annotations: kinds.py's, never imported, not even here (kinds.py imports this
    # module, and tests/package/test_core_layers.py counts an import for annotations as a cycle)
    Option = Any


class Menu(tuple):
    """A normalized option set, as `normalize` returns it: a tuple of `Option`s whose menu text
    and option table are derived once and kept. A batch run (evaluate) hands one Menu to every
    decision, and rebuilding these was about half of a decision's own time; a tuple, so what
    they are derived from cannot change under them."""

    #: Held by a fork to the one option it picks (`openprogram.runs`, `fork(pick=)`): the pick
    #: is the user's, so no threshold (min_confidence=, pick_set=) judges it.
    held = False

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
    def warnings(self) -> tuple[str, ...]:
        """The OptionWarnings its options gave when they were built (a tool definition's
        unchecked annotations, ...), for a menu served from a cache to give again."""
        return tuple(m for o in self for m in getattr(o, "warnings", ()))

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


def option_infos(menu: Sequence[Option]) -> list[dict]:
    """The option table of a menu (one `Option.info()` row per option), a list of its own."""
    return list(menu.infos) if isinstance(menu, Menu) else [o.info() for o in menu]


def _hidden(option: Option) -> list[Param]:
    return _derived(option, "_hidden", lambda: [p for p in option.params
                                                if p.source == "context" and p.required])


def param_lines(option: Option) -> list[str]:
    """The detail lines of an option's parameters, as the menu shows them (R1)."""
    lines = []
    for p in option.llm_params:
        u = p.field.view()
        lines += u.doc.field_lines(p.name, u.node, p.required, "    ", u.stack, u.extra_notes,
                                   default=p.default, description=p.field.description)
    return lines


def render_menu(menu: Sequence[Any]) -> str:  # of Options (a Menu, or a list of them)
    """The menu text of normalized options (R1-R3); a Menu's is rendered once."""
    return menu.text if isinstance(menu, Menu) else _render_menu(menu)


def _render_menu(menu: Sequence[Option]) -> str:
    return "\n\n".join([
        'Options (reply with one JSON object that picks exactly one, as in its "Call:" line):',
        *[_derived(o, "_block", lambda o=o: "\n".join(o.menu_lines() + o.example_lines()))
          for o in menu]])
