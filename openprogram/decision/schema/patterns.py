"""A schema's regular expressions run with bounded work, whatever the pattern and the text.

`pattern` and `patternProperties` come from a schema written elsewhere and the text they are run
on comes from a model: both are untrusted. Python's `re` backtracks, so a pattern such as
`^(a+)+$` or `(a|a)*$` takes time exponential in the length of a text it does not match, and a
decision would hang on a 40-character string. `compile_pattern(text)` reads the pattern with the
standard library's own parser (so it means exactly what `re.search` means) and runs it as an
automaton instead: each character of the text moves a set of positions in the pattern one step
(the sets met are kept, as a small DFA built while matching), so the work is at most the text's
length times the pattern's size, and it is counted (`Pattern.work`). The patterns whose
backtracking is bounded by their shape (no repetition or alternation; or anchored at the start
with single characters repeated, at most one without a bound: `^[a-z_]+$`) run on `re`
directly, which is faster, on a text short enough for that bound to stay under `WORK_LIMIT`.
What an automaton cannot run — backreferences, lookahead / lookbehind, conditionals, atomic
groups, possessive repeats, the flags (?m) (?a) (?L) — is refused when the schema is read, with
an `OptionError` naming the construct; a pattern whose counted repeats make it too large once
written out (`(a{1000}){1000}`) likewise. A text whose check would go past `WORK_LIMIT` steps is
refused (a `AttemptError` saying so), never run to the end.
"""
from __future__ import annotations

import re

from ...base.errors import AttemptError, OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["Pattern", "compile_pattern", "WORK_LIMIT", "MAX_STATES"]

#: The most positions a pattern may have once its counted repeats are written out.
MAX_STATES = 5000
#: The most steps (positions visited) one check of one text may take.
WORK_LIMIT = 2_000_000
_CACHE = 20_000   # transitions kept per pattern before the cache starts over

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)
_REFUSED = {
    "GROUPREF": "a backreference (\\1)", "GROUPREF_EXISTS": "a conditional group (?(1)...)",
    "ASSERT": "a lookahead or lookbehind ((?=...), (?<=...))",
    "ASSERT_NOT": "a negative lookahead or lookbehind ((?!...), (?<!...))",
    "ATOMIC_GROUP": "an atomic group ((?>...))",
    "POSSESSIVE_REPEAT": "a possessive repeat (a*+)", "FAILURE": "(?!)"}


def _parser() -> Any:
    try:
        import re._parser as parser  # Python 3.11 and later
    except ImportError:   # pragma: no cover (3.10)
        import sre_parse as parser
    return parser


_CATEGORIES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
               "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _one(c: int) -> str:
    return re.escape(chr(c)) if chr(c) not in "-]" else "\\" + chr(c)


def _char_test(op: str, av: Any, flags: int) -> Callable[[str], Any]:
    """One character position as a test of one character: the position written back as a
    one-character expression, which `re` runs with the flags in force there (so that \\w,
    case-insensitivity and `.` mean exactly what they mean to `re.search`; matching one
    character cannot backtrack)."""
    if op == "LITERAL":
        src = re.escape(chr(av))
    elif op == "NOT_LITERAL":
        src = f"[^{_one(av)}]"
    elif op == "ANY":
        src = "."
    else:   # IN
        parts = []
        for item, arg in av:
            item = str(item)
            if item == "NEGATE":
                parts.insert(0, "^")
            elif item == "LITERAL":
                parts.append(_one(arg))
            elif item == "RANGE":
                parts.append(f"{_one(arg[0])}-{_one(arg[1])}")
            elif item == "CATEGORY" and str(arg) in _CATEGORIES:
                parts.append(_CATEGORIES[str(arg)])
            else:
                raise OptionError(f"the character class uses {item}, which is not run here")
        src = f"[{''.join(parts)}]"
    return re.compile(src, flags & (re.IGNORECASE | re.DOTALL)).fullmatch


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


class Pattern:
    """One compiled pattern: `pattern.search(text)` is `re.search(text, ...) is not None`, in
    work bounded by `len(text)` times the pattern's size."""

    def __init__(self, text: str):
        self.text, self.work = text, 0
        parsed = _parser().parse(text)
        flags = parsed.state.flags
        self.kind: list[int] = []
        self.arg: list[Any] = []
        self.out: list[Any] = []
        self.uses: set[str] = set()   # the assertions the pattern holds
        self.ops: set[str] = set()
        self.match = self._add(_MATCH, None, None)
        self.start = self._seq(list(parsed), self.match, flags)
        self.anchored = bool(parsed) and str(parsed[0][0]) == "AT" and \
            str(parsed[0][1]) in ("AT_BEGINNING", "AT_BEGINNING_STRING")
        self.ways = 1   # (for `re`: the ways its backtracking may take at one position)
        self.plain = re.compile(text) if self._bounded_for_re(list(parsed)) else None
        #: The longest text `re` runs this pattern on (longer ones go to the automaton).
        self.plain_max = WORK_LIMIT // (len(self.kind) * self.ways)
        self.states: dict[frozenset, int] = {}
        self.sets: list[frozenset] = []
        self.closed: dict[tuple, tuple] = {}   # (state, context) -> (chars, matched)
        self.moves: dict[tuple, int] = {}      # (state, context, char) -> state

    def _bounded_for_re(self, items: list) -> bool:
        """Whether `re` itself runs this pattern in bounded work (it is faster than the
        automaton): without repetition or alternation it tries each start once, each try no
        longer than the pattern; anchored at the start, a row of single characters each
        repeated (`^[A-Z]{2}[0-9]{8,12}$`, `^[a-z_]+$`) has one try, and its backtracking
        goes through at most (text length) x (the product of the counted repeats' ranges)
        ways, when at most one repeat is unbounded and that product is small."""
        if not self.ops & {"MAX_REPEAT", "MIN_REPEAT", "BRANCH"}:
            return True
        if not self.anchored:
            return False
        unbounded, ways = 0, 1
        for op, av in items:
            op = str(op)
            if op in ("LITERAL", "NOT_LITERAL", "ANY", "IN", "AT"):
                continue
            if op not in ("MAX_REPEAT", "MIN_REPEAT"):
                return False
            lo, hi, body = av
            if len(body) != 1 or str(body[0][0]) not in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
                return False
            if hi == _parser().MAXREPEAT:
                unbounded += 1
            else:
                ways *= hi - lo + 1
        self.ways = ways
        return unbounded <= 1 and ways <= 64

    # -- the automaton -------------------------------------------------------------------------
    def _add(self, kind: int, arg: Any, out: Any) -> int:
        if len(self.kind) >= MAX_STATES:
            raise OptionError(f"pattern {self.text!r} is too large once its counted repeats "
                              f"are written out (over {MAX_STATES} positions); write it with "
                              f"smaller counts, or check the rule in a validate= function")
        self.kind.append(kind)
        self.arg.append(arg)
        self.out.append(out)
        return len(self.kind) - 1

    def _seq(self, items: list, nxt: int, flags: int) -> int:
        for op, av in reversed(items):
            nxt = self._item(str(op), av, nxt, flags)
        return nxt

    def _item(self, op: str, av: Any, nxt: int, flags: int) -> int:
        self.ops.add(op)
        if flags & (re.MULTILINE | re.ASCII | re.LOCALE):
            raise OptionError(f"pattern {self.text!r} sets the flag (?m), (?a) or (?L), which "
                              f"JSON Schema's regular expressions do not have; write the "
                              f"pattern without it")
        if op in _REFUSED:
            raise OptionError(f"pattern {self.text!r} uses {_REFUSED[op]}, which cannot be "
                              f"run with bounded work (patterns run as automata here, so that "
                              f"one like (a+)+$ cannot hang a decision on a model's text): "
                              f"rewrite the pattern without it, or check the rule in a "
                              f"validate= function")
        if op in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            try:
                return self._add(_CHAR, _char_test(op, av, flags), nxt)
            except OptionError as exc:
                raise OptionError(f"pattern {self.text!r}: {exc}; write the class out") \
                    from None
        if op == "AT":
            code = str(av)
            self.uses.add(code)
            return self._add(_ASSERT, code, nxt)
        if op == "SUBPATTERN":
            _group, add, remove, body = av
            return self._seq(list(body), nxt, (flags | add) & ~remove)
        if op == "BRANCH":
            starts = [self._seq(list(b), nxt, flags) for b in av[1]]
            node = starts[-1]
            for s in reversed(starts[:-1]):
                node = self._add(_SPLIT, None, (s, node))
            return node
        if op in ("MAX_REPEAT", "MIN_REPEAT"):   # (greedy or not: the same yes / no)
            lo, hi, body = av
            body = list(body)
            if hi == _parser().MAXREPEAT:
                loop = self._add(_SPLIT, None, None)
                self.out[loop] = (self._seq(body, loop, flags), nxt)
                tail = loop
            else:
                tail = nxt
                for _ in range(hi - lo):
                    tail = self._add(_SPLIT, None, (self._seq(body, tail, flags), nxt))
            for _ in range(lo):
                tail = self._seq(body, tail, flags)
            return tail
        raise OptionError(f"pattern {self.text!r} uses {op}, which is not run here; rewrite "
                          f"the pattern without it, or check the rule in a validate= function")

    def _holds(self, code: str, at: tuple) -> bool:
        first, end, end_nl, before, after = at
        if code in ("AT_BEGINNING", "AT_BEGINNING_STRING"):
            return first
        if code == "AT_END":
            return end or end_nl
        if code == "AT_END_STRING":
            return end
        if code == "AT_BOUNDARY":
            return before != after
        if code == "AT_NON_BOUNDARY":
            return before == after
        return False   # the MULTILINE / LOCALE forms: never produced without their flags

    def _close(self, state: int, at: tuple) -> tuple:
        """The character positions reachable from `state` without reading, and whether the
        end of the pattern is among them."""
        stack = list(self.sets[state])
        if not (self.anchored and not at[0]):
            stack.append(self.start)   # a search may start here
        seen, chars, matched = set(), [], False
        kind, out = self.kind, self.out
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            k = kind[i]
            if k == _CHAR:
                chars.append(i)
            elif k == _SPLIT:
                stack += out[i]
            elif k == _ASSERT:
                if self._holds(self.arg[i], at):
                    stack.append(out[i])
            else:
                matched = True
        self.work += len(seen) + 1
        return tuple(chars), matched

    def _state(self, positions: frozenset) -> int:
        n = self.states.get(positions)
        if n is None:
            n = self.states[positions] = len(self.sets)
            self.sets.append(positions)
        return n

    def search(self, text: str, path: str | None = None) -> bool:
        """Whether the pattern matches somewhere in `text` (`re.search`'s answer); a
        `AttemptError` when the check would take more than `WORK_LIMIT` steps."""
        if self.plain is not None and len(text) <= self.plain_max:
            self.work += len(text) + 1
            return self.plain.search(text) is not None
        n, limit = len(text), self.work + WORK_LIMIT
        bounds = bool(self.uses & {"AT_BOUNDARY", "AT_NON_BOUNDARY"})
        ends = bool(self.uses & {"AT_END", "AT_END_STRING"})
        state = self._state(frozenset())
        closed, moves, arg = self.closed, self.moves, self.arg
        before = False
        for pos in range(n + 1):
            c = text[pos] if pos < n else ""
            after = bounds and pos < n and _word(c)
            at = (pos == 0, ends and pos == n, ends and pos == n - 1 and c == "\n",
                  before, after)
            key = (state, at)
            got = closed.get(key)
            if got is None:
                got = closed[key] = self._close(state, at)
            chars, matched = got
            if matched:
                return True
            if pos == n or (not chars and self.anchored and pos > 0):
                return False
            move = (state, at, c)
            nxt = moves.get(move)
            if nxt is None:
                self.work += len(chars) + 1
                nxt = moves[move] = self._state(frozenset(
                    self.out[i] for i in chars if arg[i](c)))
            else:
                self.work += 1
            state, before = nxt, after
            if len(moves) > _CACHE:   # the sets met so far start over: memory stays bounded
                state = self._forget(state)
            if self.work > limit:
                raise AttemptError("invalid_value", f"{path or 'the text'}: matching the pattern "
                                                  f"{self.text} on a text of {n} characters "
                                                  f"would take more than {WORK_LIMIT} steps; "
                                                  f"give a shorter text", path)
        return False   # (not reached: the loop returns at pos == n)

    def _forget(self, state: int) -> int:
        """Empty the kept sets and moves but the current set; its new number."""
        current = self.sets[state]
        self.states.clear()
        self.sets.clear()
        self.closed.clear()
        self.moves.clear()
        return self._state(current)


def compile_pattern(text: Any) -> Pattern:
    """`text` as a `Pattern`; `OptionError` saying why for text that is not a regular
    expression, or that uses what the automaton cannot run."""
    if not isinstance(text, str):
        raise OptionError(f"a pattern is text, got {text!r}")
    try:
        re.compile(text)
        return Pattern(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise OptionError(f"pattern {text!r} is not a regular expression ({exc})") from None
