"""The playground's exercises: goals that tick themselves when a played decision meets them.

A `Goal` is a title, a check (a predicate over a `DecisionTrace`, asked after every reply the
learner types, the decision running or finished) and a hint shown on request. `builtin_goals(menu)`
is the built-in set for an option set, only the goals it makes reachable: meet each error kind a
typed reply can cause, resolve in one attempt, pick a value option, fill a structure, try to set
a hidden parameter and see it dropped, make the extractor pick the last of two candidates, and
recover after a re-ask. `read_goals` reads what `Playground(goals=...)` is given: `Goal`s or
`(title, check)` / `(title, check, hint)` tuples written by a teacher. A goal once met stays met;
a check that raises is said next to the goal and counts as not met.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openprogram.base.errors import UsageError
from openprogram.decision.modes import get_mode
from openprogram.trace.decision_trace import DecisionTrace

__all__ = ["Goal", "builtin_goals", "read_goals"]

# The error kinds a person typing a reply in the menu way of asking can cause, with a hint each.
_KIND_HINTS = {
    "no_action": "Reply with prose only: no JSON object with a \"call\" key.",
    "bad_args": "Pick with \"call\" set to a number, or \"args\" set to a list.",
    "unknown_call": "Pick an option name that is not on the menu.",
    "missing_required": "Leave out an argument the menu marks as required.",
    "type_mismatch": "Give text where the menu says int (or true where it says str).",
    "enum_violation": "Give a value that is not one of the allowed ones.",
    "invalid_value": "Give a number JSON cannot hold, such as 1e400, or break a constraint.",
}
_FILLED = ("schema", "class", "json_schema")


@dataclass(frozen=True)
class Goal:
    """One exercise: `check(trace)` says whether a played decision meets it."""
    id: str
    title: str
    check: Callable[[DecisionTrace], bool]
    hint: str = ""


def _kind_of(trace: DecisionTrace, name: Any) -> str | None:
    return next((o["kind"] for o in trace.options if o["name"] == name), None)


def builtin_goals(menu: Any, mode: str = "menu") -> list[Goal]:
    """The built-in goals that the option set `menu` (normalized options) makes reachable in
    the way of asking `mode`. Under structured output (json_schema) the reply must fit the
    schema before it is sent, so no error kind and no hidden value can be reached, and one
    document holds one pick; in the tools way a call holds one pick too."""
    way = get_mode(mode)
    infos = [o.info() for o in menu]
    params = [p for o in infos for p in o["params"] if not p["hidden"]]
    reachable = not way.checked_before_sent  # can a reply break the pick's shape at all
    kinds = ["no_action", "bad_args", "unknown_call"] if reachable else []
    if params and reachable:
        kinds += ["type_mismatch", "invalid_value"]
    if any(p["required"] for p in params) and reachable:
        kinds.append("missing_required")
    if any(p["options"] for p in params) and reachable:
        kinds.append("enum_violation")
    goals = [Goal(f"error:{k}", f"Meet the error kind {k}",
                  lambda t, k=k: k in t.error_kinds, _KIND_HINTS[k]) for k in kinds]
    goals.append(Goal("one_attempt", "Resolve in one attempt",
                      lambda t: t.status == "resolved" and len(t.attempts) == 1,
                      "Copy an option's Call: line from the menu and fill in its arguments."))
    if any(o["kind"] == "value" for o in infos):
        goals.append(Goal("value_option", "Pick a value option",
                          lambda t: t.status == "resolved"
                          and _kind_of(t, t.chosen) == "value",
                          "A value option has no arguments: {\"call\": \"<its name>\"}."))
    if any(o["kind"] in _FILLED for o in infos):
        goals.append(Goal("fill_structure", "Fill a structure",
                          lambda t: t.status == "resolved" and _kind_of(t, t.chosen) in _FILLED,
                          "Pick a schema option and give every field it declares."))
    hidden = {(o["name"], p["name"]) for o in infos for p in o["params"] if p["hidden"]}
    if hidden and reachable:
        def dropped_hidden(t: DecisionTrace) -> bool:
            return any((a.extracted or {}).get("call") == o and f"args.{p}" in a.dropped
                       for a in t.attempts for o, p in hidden)
        names = ", ".join(sorted(f"{o}.{p}" for o, p in hidden))
        goals.append(Goal("hidden_dropped", "Try to set a hidden parameter and see it dropped",
                          dropped_hidden, f"The menu leaves it out; write it anyway ({names})."))
    if way.several_candidates:
        goals.append(Goal("last_of_two", "Make the extractor pick the last of two candidates",
                          lambda t: any(a.candidates >= 2 and a.extracted is not None
                                        for a in t.attempts),
                          "Write two JSON objects with a \"call\" key in one reply: "
                          "which one wins?"))
    if reachable:
        goals.append(Goal("recover", "Recover after a re-ask",
                          lambda t: t.status == "resolved" and len(t.attempts) >= 2,
                          "Fail the first attempt on purpose, then read the re-ask and fix "
                          "it."))
    return goals


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "goal"


def read_goals(goals: Any) -> list[Goal]:
    """`goals=` as a list of `Goal`: each item a `Goal`, `(title, check)` or
    `(title, check, hint)`. Anything else is refused, naming the item and the forms."""
    if goals is None:
        return []
    if isinstance(goals, (str, bytes, dict)) or not hasattr(goals, "__iter__"):
        raise UsageError(f"goals= takes a list of goals, got {type(goals).__name__}; write "
                         f"goals=[('Pick wait', lambda trace: trace.chosen == 'wait')]")
    out: list[Goal] = []
    for i, g in enumerate(goals):
        if isinstance(g, Goal):
            out.append(g)
            continue
        if isinstance(g, tuple) and len(g) in (2, 3) and isinstance(g[0], str) \
                and callable(g[1]) and (len(g) == 2 or isinstance(g[2], str)):
            out.append(Goal(f"user:{_slug(g[0])}", g[0], g[1], g[2] if len(g) == 3 else ""))
            continue
        raise UsageError(f"goal #{i} ({type(g).__name__}) is not a goal: write a (title, check) "
                         f"or (title, check, hint) tuple, where check(trace) returns True when "
                         f"the decision meets it, or a widgets.goals.Goal")
    ids = [g.id for g in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise UsageError(f"two goals share the id {dup[0]!r}: give them different titles")
    return out
