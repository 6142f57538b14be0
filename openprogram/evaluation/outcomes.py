"""What a row of an evaluation came to, in compact columns: the pick, the status, the error kinds,
the attempts, tokens, latency and whether the row was answered from a cache (`Outcomes`, a few
dozen bytes a row, so a million rows fit), and the lazy sequences that read the rest of a row
back from a journal only when asked for.
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Sequence, Sized

from ..trace.confidence import Confidence

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Iterator
    from typing import Any


#: The pick column's label for a finished row whose model never made a valid pick.
NO_PICK = "(no pick)"

ROW_COLUMNS = ["chosen", "args", "result", "error", "attempts", "error_kinds", "duration_s",
               "tokens_in", "tokens_out", "status", "cached"]
STATUSES = ("cancelled", "resolved", "failed")
STATUS_CODE = {s: k for k, s in enumerate(STATUSES)}


def cascade_of(trace: Any) -> list[tuple[Any, ...]]:
    """The stages a CascadeRuntime asked over a decision's attempts: (runtime, answered the
    attempt, tokens in, tokens out) each; [] for any other runtime."""
    out = []
    for a in (trace.attempts if trace is not None else ()):
        for st in getattr(a, "cascade", None) or ():
            u = st.get("usage") or {}
            out.append((st.get("runtime"), bool(st.get("answered")),
                        u.get("input_tokens") or 0, u.get("output_tokens") or 0))
    return out


def pick_of(row: Any) -> str | None:
    """The option the model validly picked (kept even when the picked function then raised)."""
    if row is None or row.trace is None or not row.trace.attempts:
        return None
    last = row.trace.attempts[-1]
    return last.chosen if last.error_kind is None else None


def summarize(row: Any) -> tuple[Any, ...]:
    """(status, pick, attempts, error kinds, raised type, tokens in, tokens out, duration,
    cached) of a finished row: what its result keeps of it."""
    trace = row.trace
    err = row.error
    raised = None
    if err is not None and getattr(err, "trace", None) is None:
        raised = f"raised {type(err).__name__}"
    if trace is None:
        return (row.status, None, 0, (), raised, None, None, row.duration_s, False)
    attempts = trace.attempts
    if len(attempts) == 1:   # most rows: no re-ask, so no generator for the kinds and cached
        a = attempts[0]
        kind = a.error_kind
        u = a.usage
        return (row.status, a.chosen if kind is None else None, 1, (kind,) if kind else (),
                # 0 + ...: the sum the loop below makes (a count of True is 1, text raises)
                raised, 0 + (u.get("input_tokens") or 0) if u else 0,
                0 + (u.get("output_tokens") or 0) if u else 0, row.duration_s, bool(a.cached))
    tin = tout = 0
    for a in attempts:
        u = a.usage
        if u:
            tin += u.get("input_tokens") or 0
            tout += u.get("output_tokens") or 0
    return (row.status, pick_of(row), len(attempts),
            tuple(a.error_kind for a in attempts if a.error_kind), raised, tin, tout,
            row.duration_s, bool(attempts) and all(a.cached for a in attempts))


class Outcomes:
    """The per-row columns of a result, by input position: status, pick, expected pick,
    attempts, tokens, duration, cached, and where the row's line starts in the journal.
    Error kinds are kept only for the rows that have some."""

    def __init__(self, options: list[str], n: int = 0):
        self.names = list(options)
        self._index = {name: k for k, name in enumerate(self.names)}
        self.status = bytearray(n)
        self.pick = array("h", [-1]) * n
        self.expected = array("h", [-1]) * n
        self.attempts = array("I", [0]) * n
        self.tokens_in = array("q", [-1]) * n
        self.tokens_out = array("q", [-1]) * n
        self.duration = array("d", [math.nan]) * n
        self.cached = bytearray(n)
        self.offset = array("q", [-1]) * n
        self.kinds: dict[int, tuple[str, ...]] = {}
        self.raised: dict[int, str] = {}
        # each row's final Confidence, for the rows whose decision asked for one
        self.conf: dict[int, Confidence] = {}
        # CascadeRuntime rows: each stage asked, (runtime, answered, tokens in, tokens out)
        self.cascade: dict[int, list[tuple[Any, ...]]] = {}

    def __len__(self) -> int:
        return len(self.status)

    def grow(self, n: int) -> None:
        more = n - len(self.status)
        if more > 0:
            self.status.extend(bytes(more))
            self.pick.extend(array("h", [-1]) * more)
            self.expected.extend(array("h", [-1]) * more)
            self.attempts.extend(array("I", [0]) * more)
            self.tokens_in.extend(array("q", [-1]) * more)
            self.tokens_out.extend(array("q", [-1]) * more)
            self.duration.extend(array("d", [math.nan]) * more)
            self.cached.extend(bytes(more))
            self.offset.extend(array("q", [-1]) * more)

    def code(self, name: str | None) -> int:
        if name is None:
            return -1
        k = self._index.get(name)
        if k is None:  # a name outside the menu (a hand-edited journal): kept, not lost
            k = self._index[name] = len(self.names)
            self.names.append(name)
        return k

    def name(self, k: int) -> str | None:
        return None if k < 0 else self.names[k]

    def set(self, i: int, s: tuple[Any, ...], offset: int = -1) -> None:
        status, pick, attempts, kinds, raised, tin, tout, duration, cached = s
        if i >= len(self.status):
            self.grow(max(i + 1, 2 * len(self.status)))
        self.status[i] = STATUS_CODE[status]
        self.pick[i] = -1 if pick is None else self.code(pick)
        self.attempts[i] = attempts
        self.tokens_in[i] = -1 if tin is None else tin
        self.tokens_out[i] = -1 if tout is None else tout
        self.duration[i] = math.nan if duration is None else duration
        self.cached[i] = cached
        self.offset[i] = offset
        if kinds:
            self.kinds[i] = kinds
        if raised:
            self.raised[i] = raised

    def trim(self, n: int) -> None:
        for col in (self.status, self.pick, self.expected, self.attempts, self.tokens_in,
                    self.tokens_out, self.duration, self.cached, self.offset):
            del col[n:]
        for kept in (self.conf, self.cascade):
            for i in [i for i in kept if i >= n]:
                del kept[i]

    def finished(self) -> list[int]:
        return [i for i, s in enumerate(self.status) if s]


class LazyRows(Sequence["Any"]):
    """A read-only list whose items are read from the journal when indexed."""

    def __init__(self, result: Sized, read: Callable[[int], Any]) -> None:
        self._result, self._read = result, read

    def __len__(self) -> int:
        return len(self._result)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._read(i)

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, tuple, Sequence)) and list(self) == list(other)

class PickList(list["str | None"]):
    """The pick of each input, a plain list. `.picks` used to be the count table, so a key into
    it ("count", "share", a variant) is said to be that table's, now `.pick_counts`, instead of
    failing as a list index would."""

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, str):
            raise KeyError(f".picks is the pick of each input (a list, as .results and "
                           f".statuses are); {i!r} is a column of the pick counts: use "
                           f".pick_counts[{i!r}]")
        return super().__getitem__(i)

