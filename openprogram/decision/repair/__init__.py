"""Repairing a reply the menu makes unambiguous, instead of re-asking for it (`repair=`).

A reply that fails is often almost right: a trailing comma, single quotes, Python's `True`, a
pick cut off before its closing braces, an option name in another case, `"3"` for an integer.
The package holds the levels of the one setting and the fixed set of repair kinds (levels.py:
`NoRepair` "off", `SyntaxRepair` "safe", `MenuRepair` "menu", `repair_level`, `KINDS`), the
syntax repair (syntax.py, `repair_syntax`), the repairs the option set makes unambiguous
(menu.py) and where a value sits in the raw reply as the repair read it (spans.py,
`value_span`); each repair leaves a `Repair` record on the attempt. This module re-exports
their names, so `openprogram.decision.repair` reads as it did when it was one module.
"""
from ...trace.records import Repair  # the record lives with the attempt
from .levels import (
                     DEFAULT_REPAIR,
                     KINDS,
                     LEVELS,
                     MAX_VALUE_FIXES,
                     REPAIR_LEVELS,
                     MenuRepair,
                     NoRepair,
                     RepairLevel,
                     SyntaxRepair,
                     allows,
                     redact_repairs,
                     repair_extraction,
                     repair_level,
)
from .menu import (
                     name_hint,
                     near_names,
                     repair_name,
                     repair_value,
                     repair_wrapper,
                     value_fix,
                     value_hint,
)
from .spans import value_span
from .syntax import may_enclose, repair_syntax

__all__ = ["LEVELS", "DEFAULT_REPAIR", "KINDS", "Repair", "RepairLevel", "NoRepair",
           "SyntaxRepair", "MenuRepair", "REPAIR_LEVELS", "repair_level", "repair_syntax",
           "repair_name", "repair_value", "repair_wrapper", "value_fix", "near_names",
           "repair_extraction", "redact_repairs", "allows", "MAX_VALUE_FIXES", "name_hint",
           "value_hint", "value_span", "may_enclose"]
