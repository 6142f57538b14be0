"""The `repair=` levels, each a strategy the decision loop asks, and the fixed set of repair kinds.

`NoRepair` ("off") re-asks every deviation, as the specification says; `SyntaxRepair` ("safe")
fixes JSON syntax where exactly one JSON value is meant (syntax.py); `MenuRepair` ("menu") also
fixes what the option set makes unambiguous (menu.py). `repair_level` picks one from what
`repair=` says, and `KINDS` names every repair kind with the level that allows it. The decision
loop calls in only after the strict path has failed, so a reply valid as written is never
changed, and it asks its level at each point rather than comparing the level's name.
"""
from __future__ import annotations

import json
import re

from ...base.errors import ArgumentError, AttemptError
from ...trace.records import Repair
from ..extract import Extraction, call_key, find_action, normalize_action
from .menu import _json, repair_name, repair_wrapper, value_fix, value_hint
from .syntax import repair_syntax

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any, ClassVar

__all__ = ["LEVELS", "DEFAULT_REPAIR", "KINDS", "RepairLevel", "NoRepair", "SyntaxRepair",
           "MenuRepair", "REPAIR_LEVELS", "repair_level", "repair_extraction", "redact_repairs",
           "allows", "MAX_VALUE_FIXES"]



#: Every repair kind: the level that allows it and what it does.
KINDS: dict[str, tuple[str, str]] = {
    "trailing_comma": ("safe", "a comma before a closing } or ] was removed"),
    "single_quotes": ("safe", "a single-quoted string was written with double quotes"),
    "python_literal": ("safe", "Python's True / False / None was written as true / false / null"),
    "unquoted_key": ("safe", "an object key without quotes was quoted"),
    "comment": ("safe", "a // or /* */ comment inside the JSON was removed"),
    "closed_truncation": ("safe", "a reply cut off at the token limit inside the pick got its "
                                  "missing closing quotes and brackets"),
    "option_name": ("menu", "an option name differing only in case or -, _, . and spaces was "
                            "read as the one option it matches"),
    "enum_value": ("menu", "an allowed value differing only in case or surrounding whitespace "
                           "was read as the one allowed value it matches"),
    "string_to_number": ("menu", "a number written as a string was read as the number, where "
                                 "the schema wants a number and the conversion is exact"),
    "string_to_boolean": ("menu", "\"true\" / \"false\" written as a string was read as the "
                                  "boolean, where the schema wants a boolean"),
    "number_to_string": ("menu", "a number or boolean was read as its JSON text, where the "
                                 "schema wants a string"),
    "call_wrapper": ("menu", "a lone object of arguments without \"call\" (the whole reply, "
                             "or in a fence) was read as a pick of the one option whose "
                             "parameters its keys match"),
}

MAX_VALUE_FIXES = 32   # menu repairs of values in one attempt (each costs one validation)


def allows(level: str, kind: str) -> bool:
    """Whether the level named `level` allows the repair kind `kind`."""
    return repair_level(level).allows(kind)


def redact_repairs(repairs: list[Repair], redact: Callable[[Any], Any] | None) -> list[Repair]:
    """The records with what the runtime redacts taken out of their before / after text (a
    key can sit in a string a repair touched)."""
    if redact is None:
        return list(repairs)
    out = []
    for r in repairs:
        b, a = redact(r.before), redact(r.after)
        out.append(r if (b, a) == (r.before, r.after) else
                   Repair(r.kind, r.path, b, a, r.span))
    return out


_FENCE = re.compile(r"```[A-Za-z0-9_+.-]{0,32}")


def _lone(text: str, span: tuple[int, int]) -> bool:
    """Whether the object at `span` is all the reply holds: nothing else but whitespace,
    or a ``` fence around it."""
    before, after = text[:span[0]].strip(), text[span[1]:].strip()
    if not before and not after:
        return True
    return after == "```" and _FENCE.fullmatch(before) is not None


def repair_extraction(text: Any, strict: Any, level: str, menu: list[Any],
                      cut: bool = False) -> tuple[Any, list[Repair]]:
    """After the strict reading (`strict`, an `Extraction`) found no pick: the pick the
    repairs `level` allows find, as an `Extraction`, with the repairs; else `strict` and []."""
    return repair_level(level).read(text, strict, menu, cut)


def _syntax_read(text: Any, strict: Any, cut: bool) -> tuple[Any, list[Repair]] | None:
    """The pick the syntax repair finds in `text`, as an `Extraction`, with its repairs."""
    if not isinstance(text, str):
        return None
    got = repair_syntax(text, cut)
    if got is None:
        return None
    obj, span, repairs = got
    key = call_key(obj)
    found_in = "fence" if text.count("```", 0, span[0]) % 2 == 1 else "text"
    return Extraction(normalize_action(obj, key or "call"), key, found_in,
                      max(strict.candidates, 1), span=span), repairs


# -- the levels ---------------------------------------------------------------------------------


class RepairLevel:
    """A `repair=` level: what the decision loop may read of a reply without a re-ask once the
    strict reading failed. The level owns each point where the loop asks: the reply read again
    (`read`), a broken pick around the one the strict reading found (`encloses`), an option
    name (`option_name`), a lone object of arguments (`unwrap`) and the arguments bound with
    the values the option's schema makes unambiguous repaired (`bind`). The loop asks its level
    and never compares the level's name."""
    name: ClassVar[str]
    #: How far it goes, from 0 ("off"): a repair kind is allowed from its own level's rank on.
    rank: ClassVar[int]
    #: A broken pick that encloses the one the strict reading found (an argument object keyed
    #: "action") may be the one meant, once its syntax is repaired.
    encloses: ClassVar[bool] = False

    def allows(self, kind: str) -> bool:
        """Whether this level makes repairs of `kind` (a key of `KINDS`)."""
        return self.rank >= REPAIR_LEVELS[KINDS[kind][0]].rank

    def read(self, text: Any, strict: Any, menu: list[Any],
             cut: bool = False) -> tuple[Any, list[Repair]]:
        """After the strict reading (`strict`, an `Extraction`) found no pick: the pick this
        level's repairs find, as an `Extraction`, with the repairs; else `strict` and []."""
        return strict, []

    def option_name(self, name: str, names: list[str]) -> tuple[str, Repair] | None:
        """The option meant by `name`, which names none, with the repair's record; None."""
        return None

    def unwrap(self, action: Any, menu: list[Any]) -> tuple[dict[str, Any], Repair] | None:
        """A pick of an object without "call" (`{"call": name, "args": ...}`), with the
        repair's record; None."""
        return None

    def bind(self, bind: Callable[[Any, dict[str, Any], list[str]], dict[str, Any]],
             option: Any, args: dict[str, Any], dropped: list[str],
             repaired: Callable[[list[Repair]], None]) -> dict[str, Any]:
        """`bind(option, args, dropped)`, the option's validated arguments. A failure carries,
        for the re-ask, the fix a level that repairs values would have made (`hint`)."""
        try:
            return bind(option, args, dropped)
        except AttemptError as err:
            err.hint = value_hint(err, option, args)
            raise

    def __repr__(self) -> str:
        return repr(self.name)


class NoRepair(RepairLevel):
    """"off": every deviation is re-asked, as the specification says."""
    name, rank = "off", 0


class SyntaxRepair(RepairLevel):
    """"safe": JSON syntax is repaired where exactly one JSON value is meant."""
    name, rank = "safe", 1
    encloses = True

    def read(self, text: Any, strict: Any, menu: list[Any],
             cut: bool = False) -> tuple[Any, list[Repair]]:
        got = _syntax_read(text, strict, cut)
        return (strict, []) if got is None else got


class MenuRepair(SyntaxRepair):
    """"menu": also what the option set makes unambiguous — an option name in other case, a
    lone object of arguments, a value the schema reads one way only."""
    name, rank = "menu", 2

    def read(self, text: Any, strict: Any, menu: list[Any],
             cut: bool = False) -> tuple[Any, list[Repair]]:
        got = _syntax_read(text, strict, cut)
        if got is not None:
            return got
        if not isinstance(text, str):
            return strict, []
        loose = find_action(text, require_key=False)
        # only a lone object: one in prose (a refusal quoting the format, an example) or the
        # last of several is not a pick the model made, whatever keys it has
        if loose.span is None or not _lone(text, loose.span):
            return strict, []
        picked = repair_wrapper(loose.action, menu)
        if picked is None:
            return strict, []
        name, args = picked
        action = {"call": name, "args": args}
        return (Extraction(action, "call", loose.found_in, 1, span=loose.span),
                [Repair("call_wrapper", "call", _json(loose.action), _json(action), loose.span)])

    def option_name(self, name: str, names: list[str]) -> tuple[str, Repair] | None:
        near = repair_name(name, names)
        if near is None:
            return None
        return near, Repair("option_name", "call", json.dumps(name, ensure_ascii=False),
                            json.dumps(near, ensure_ascii=False))

    def unwrap(self, action: Any, menu: list[Any]) -> tuple[dict[str, Any], Repair] | None:
        got = repair_wrapper(action, menu)
        if got is None:
            return None
        pick = {"call": got[0], "args": got[1]}
        return pick, Repair("call_wrapper", "call", _json(action), _json(pick))

    def bind(self, bind: Callable[[Any, dict[str, Any], list[str]], dict[str, Any]],
             option: Any, args: dict[str, Any], dropped: list[str],
             repaired: Callable[[list[Repair]], None]) -> dict[str, Any]:
        """Where a value fails that the option's schema makes unambiguous (an enum value in
        other case, "3" for an integer), the value repaired and bound again: a bounded number
        of times, each fix recorded (`repaired`)."""
        fixes: list[Repair] = []
        for _ in range(MAX_VALUE_FIXES):
            try:
                out = bind(option, args, list(dropped))
                break
            except AttemptError as err:
                fix = (value_fix(option, args, err.path)
                       if err.kind in ("type_mismatch", "enum_violation") and err.path else None)
                if fix is None:
                    if fixes:
                        repaired(fixes)
                    raise
                args, done = fix
                fixes.append(done)
        else:
            out = bind(option, args, list(dropped))
        if fixes:
            repaired(fixes)
        return out


#: The levels by the name `repair=` takes, from strictest.
REPAIR_LEVELS: dict[str, RepairLevel] = {c.name: c() for c in (NoRepair, SyntaxRepair,
                                                                MenuRepair)}
#: The level names, from strictest.
LEVELS = tuple(REPAIR_LEVELS)
#: The level a decision uses unless told otherwise (docs/rules.md, "Repair", says why).
DEFAULT_REPAIR = "safe"


def repair_level(level: Any) -> RepairLevel:
    """`repair=` checked before any model call: the level it names (None: the default)."""
    if level is None:
        return REPAIR_LEVELS[DEFAULT_REPAIR]
    if isinstance(level, RepairLevel):
        return level
    found = REPAIR_LEVELS.get(level) if isinstance(level, str) else None
    if found is None:
        raise ArgumentError(f"unknown repair level {level!r}: repair= takes one of "
                            f"{', '.join(map(repr, LEVELS))} (\"off\" re-asks every deviation, "
                            f"\"safe\" fixes JSON syntax only, \"menu\" also what the option set "
                            f"makes unambiguous)")
    return found
