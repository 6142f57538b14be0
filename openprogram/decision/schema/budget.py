"""What reading a schema and checking a value against it may cost, whatever either holds.

A schema from outside (a tool definition, an MCP server's, a `JsonSchema`) is read by the menu,
the validator and the modes with each reference written out where it is used, so a kilobyte of
`anyOf` whose two `$ref`s point at the next level unfolds to a million subschemas at depth 20.
`measure(schema, where)` reads a document once — each subschema's unfolded size worked out once,
a reference back into its own path counted as one (the recursion every reader shows once) — and
refuses, by an `OptionError` naming the place and the budget, a document of more than
`SCHEMA_BUDGET` subschemas, one that unfolds to more, and one nested deeper than `MAX_DEPTH`
through its references. What a check of a value costs beyond the value's size (each alternative
of `anyOf` / `oneOf` tried, each part of `allOf`, `not`, `if`, `contains` ...) is counted as it
is spent (`spend`, inside a check begun by `counted`): past `CHECK_BUDGET` steps the check fails
naming the budget, and past the decision's deadline (`checking_until`, which the decision loop
sets from `timeout_s`) it stops as a timeout. A value nested deeper than `MAX_VALUE_DEPTH` is
refused by a recursive schema before it is walked, so no check ends in a bare `RecursionError`.
"""
from __future__ import annotations

import contextvars
from time import monotonic as _clock

from ...base.errors import AttemptError
from .refs import LISTS, MAPS, MAX_DEPTH, SINGLE, Document, join_uri

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["SCHEMA_BUDGET", "CHECK_BUDGET", "MAX_VALUE_DEPTH", "Shape", "measure", "counted",
           "spend", "steps_spent", "checking_until"]

#: The subschemas one option's schema may have, and may unfold to with its references written
#: out where they are used (what the menu, the validator and the modes read).
SCHEMA_BUDGET = 10_000
#: The steps one check of a value may take beyond walking the value: alternatives tried, parts
#: of allOf / not / if, items tried against `contains`, keys against patterns.
CHECK_BUDGET = 1_000_000
#: How deep a value may nest where the schema is recursive (elsewhere the schema bounds it).
MAX_VALUE_DEPTH = 100
#: Steps between two looks at the clock (each about a microsecond of checking).
_CLOCK_EVERY = 4096
_STRUCTURE = tuple(k for k in MAPS if k not in ("$defs", "definitions"))


class Shape:
    """What `measure` found: the unfolded size and depth, and whether the schema refers back
    into its own path (a recursive type, whose values may nest without end)."""
    __slots__ = ("size", "depth", "recursive")

    def __init__(self, size: int, depth: int, recursive: bool):
        self.size, self.depth, self.recursive = size, depth, recursive


def _parts(node: dict, ptr: str) -> list[tuple[Any, str]]:
    """The subschemas read where `node` is read (its `$defs` only where referred to)."""
    out: list = []
    for k in SINGLE:
        if k in node:
            v = node[k]
            if isinstance(v, list):   # (draft 7's tuple `items`: refused, by name, later)
                out += [(x, f"{ptr}/{k}/{i}") for i, x in enumerate(v)]
            else:
                out.append((v, f"{ptr}/{k}"))
    for k in LISTS:
        v = node.get(k)
        if isinstance(v, list):
            out += [(x, f"{ptr}/{k}/{i}") for i, x in enumerate(v)]
    for k in _STRUCTURE:
        v = node.get(k)
        if isinstance(v, dict):
            out += [(x, f"{ptr}/{k}/{n}") for n, x in v.items()]
    return out


def _too_many(root: Any, budget: int) -> bool:
    """Whether the document holds more than `budget` subschemas ($defs included), counted
    without reading past the budget."""
    stack, n = [root], 0
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        n += 1
        if n > budget:
            return True
        for k in (*SINGLE, *LISTS):
            v = node.get(k)
            if isinstance(v, list):
                stack += v
            elif v is not None:
                stack.append(v)
        for k in MAPS:
            v = node.get(k)
            if isinstance(v, dict):
                stack += v.values()
    return False


def measure(schema: Any, where: str, budget: int | None = None,
            doc: Document | None = None) -> Shape:
    """`schema`'s unfolded size and depth, or an `OptionError` naming where it passes the
    budget: more than `budget` subschemas, an unfolded size above it, a depth above
    `MAX_DEPTH`. Linear in the document (each subschema's size is worked out once); a
    reference it cannot follow is the `OptionError` the validator gives for it."""
    budget = SCHEMA_BUDGET if budget is None else budget
    doc = doc or Document(schema, where)
    if _too_many(doc.root, budget):
        raise doc.fail("#", f"the schema has more than {budget:,} subschemas, the budget of one "
                            f"option's schema (decision.schema.budget.SCHEMA_BUDGET); a model "
                            f"could not read its menu either: split the tool, or describe "
                            f"fewer fields")
    done: dict[int, tuple[int, int]] = {}   # id(node) -> (unfolded size, depth)
    on_path: set[int] = set()
    recursive = False
    stack: list = [(doc.root, "#", "", None)]
    while stack:
        node, ptr, base, parts = stack.pop()
        if parts is not None:   # every part is done (or was a reference back: one)
            on_path.discard(id(node))
            size, depth = 1, 1
            for x, _, _, deeper in parts:
                s, d = done.get(id(x), (1, 1))
                size += s
                depth = max(depth, d + deeper)   # (a reference nests nothing itself)
            if size > budget:
                raise doc.fail(ptr, f"the schema unfolds to more than {budget:,} subschemas "
                                    f"here, its references written out where they are used "
                                    f"(as the menu, the validator and the modes read it); "
                                    f"{budget:,} is the budget of one option's schema "
                                    f"(decision.schema.budget.SCHEMA_BUDGET): refer to a "
                                    f"shared part from fewer places, or drop alternatives "
                                    f"that repeat one another")
            if depth > MAX_DEPTH:
                raise doc.fail(ptr, f"the schema nests deeper than {MAX_DEPTH} levels (its "
                                    f"references followed), more than its readers follow "
                                    f"(decision.schema.refs.MAX_DEPTH); flatten it")
            done[id(node)] = (size, depth)
            continue
        if not isinstance(node, dict) or id(node) in done:
            continue
        if id(node) in on_path:
            recursive = True
            continue
        if isinstance(node.get("$id"), str):
            base = join_uri(base, node["$id"]).partition("#")[0]
        parts = [(x, p, base, 1) for x, p in _parts(node, ptr)]
        ref = node.get("$ref")
        if ref is not None:
            target, tbase, tptr = doc.resolve(ref, base, ptr)
            parts.append((target, tptr, tbase, 0))
        on_path.add(id(node))
        stack.append((node, ptr, base, parts))
        stack += [(x, p, b, None) for x, p, b, _ in reversed(parts)]
    size, depth = done.get(id(doc.root), (1, 1))
    return Shape(size, depth, recursive)


# -- checking a value ---------------------------------------------------------------------------

_DEADLINE: contextvars.ContextVar = contextvars.ContextVar("openprogram_check_deadline",
                                                          default=None)
_WORK: contextvars.ContextVar = contextvars.ContextVar("openprogram_check_work", default=None)


class checking_until:
    """`with checking_until(deadline):` the checks begun inside stop at `deadline` (a
    time.monotonic() value; None: no deadline), as a decision's `timeout_s` asks."""

    def __init__(self, deadline: float | None):
        self.deadline, self.token = deadline, None

    def __enter__(self) -> checking_until:
        self.token = _DEADLINE.set(self.deadline)
        return self

    def __exit__(self, *exc: Any) -> None:
        _DEADLINE.reset(self.token)


class _Work:
    """The steps left to one check before it looks at the clock, and how many it took."""
    __slots__ = ("left", "spent", "deadline")

    def __init__(self, deadline: float | None):
        self.left, self.spent, self.deadline = _CLOCK_EVERY, 0, deadline

    def over(self, path: str) -> None:
        self.spent += _CLOCK_EVERY - self.left
        self.left = _CLOCK_EVERY
        if self.spent > CHECK_BUDGET:
            raise AttemptError("invalid_value", f"{path}: checking the value against the "
                                                f"option's schema took more than "
                                                f"{CHECK_BUDGET:,} steps, the budget of one "
                                                f"check (decision.schema.budget.CHECK_BUDGET); "
                                                f"write a smaller value", path)
        if self.deadline is not None and _clock() > self.deadline:
            raise AttemptError("timeout", f"checking {path} against the option's schema ran "
                                          f"past the decision's timeout_s (after {self.spent:,} "
                                          f"steps); raise timeout_s, or simplify the schema",
                               path)


def spend(n: int, path: str) -> None:
    """Count `n` steps of the check under way (none outside one)."""
    w = _WORK.get()
    if w is not None:
        w.left -= n
        if w.left < 0:
            w.over(path)


def steps_spent() -> int | None:
    """The steps the check under way has taken so far (None outside one): what a test bounds."""
    w = _WORK.get()
    return None if w is None else w.spent + _CLOCK_EVERY - w.left


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if t is dict or t is list:
            if depth >= limit:
                return True
            stack += [(x, depth + 1) for x in (v.values() if t is dict else v)
                      if type(x) is dict or type(x) is list]
    return False


def counted(run: Callable, recursive: bool) -> Callable:
    """A check `run(value, path, dropped)` begun with its own step count (under the deadline
    `checking_until` set), refusing first, for a recursive schema, a value nested deeper than
    `MAX_VALUE_DEPTH`. Should Python's stack still run out, the value is refused as too deep:
    never a bare RecursionError."""
    def check(v: Any, p: str, d: list[str]) -> Any:
        if recursive and _deeper_than(v, MAX_VALUE_DEPTH):
            raise AttemptError("invalid_value", f"{p} nests deeper than {MAX_VALUE_DEPTH} "
                                                f"levels, more than a check follows "
                                                f"(decision.schema.budget.MAX_VALUE_DEPTH); "
                                                f"write a flatter value", p)
        token = _WORK.set(_Work(_DEADLINE.get()))
        try:
            return run(v, p, d)
        except RecursionError:
            raise AttemptError("invalid_value", f"{p} nests too deeply to be checked here "
                                                f"(Python's stack ran out); write a flatter "
                                                f"value", p) from None
        finally:
            _WORK.reset(token)
    return check
