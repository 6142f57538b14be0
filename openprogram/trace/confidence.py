"""How sure the model was: the probability of every option of the menu, for one attempt.

A decision asked with `confidence=` gets, on each attempt, a frozen `Confidence`: the probability
the model gave each option's name (`probs`, every option of the menu, in menu order), the mass on
replies that name no option (`other`), where the numbers come from (`source`: "exact" from an
in-process model's own probabilities under the decision grammar, "logprobs" from a server's token
log-probabilities, "samples" from counting the picks of n replies) and how many replies were
drawn (`n`, samples only). A runtime that can give a distribution says so with the class attribute
`confidence_source` and fills `ModelResponse.confidence` (a plain dict, see model_protocol.py) when
the loop passes it `confidence=[names]`; this module turns that dict into the record, holds
`Samples(...)` (the value `confidence=` takes for counted samples), and counts samples. Which
source a decision asks is a strategy of the decision loop's (decision/confidence.py). Nothing
here imports anything outside the standard library.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..base.errors import ArgumentError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Iterable, Sequence
    from typing import Any

__all__ = ["Confidence", "Samples", "from_response", "from_counts", "saved_problem", "SOURCES"]

#: Where a distribution can come from, each with the sentence a view says of it (`{n}`: the
#: replies counted).
SOURCES = {
    "exact": ("Exact: the model's own probability of each option's whole name under the "
              "decision grammar, at the place where the name is written."),
    "logprobs": ("From the server's token log-probabilities: the name written gets the product "
                 "of its tokens' probabilities, the other options the alternatives listed at "
                 "its first token; what cannot be told apart is other."),
    "samples": ("Counted: the same request was sent {n} times and each bar is the share of "
                "replies that picked that option."),
}
#: How far `probs` + `other` may stray from 1 before a runtime's numbers are renormalised.
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Confidence:
    """The model's probability over the whole menu for one attempt. `probs` maps every option
    name to its probability (menu order), `other` is the mass on replies that name no option;
    they sum to 1. `pick` is the option the attempt's reply named (None before it is read or
    when it named none); `note` says why a distribution is partial (logprobs missing, ...);
    `pick_set`, with `pick_set=`, the options a calibrated policy put in this attempt's set
    (most probable first)."""
    probs: dict = field(default_factory=dict)
    other: float = 0.0
    source: str = "exact"
    n: int | None = None
    pick: str | None = None
    note: str | None = None
    pick_set: tuple | None = None

    @property
    def p_pick(self) -> float | None:
        """The probability of the option picked (None when the reply named no option)."""
        return None if self.pick is None else self.probs.get(self.pick, 0.0)

    @property
    def about(self) -> str | None:
        """One sentence on where the numbers come from (None for a source not known)."""
        said = SOURCES.get(self.source)
        return None if said is None else said.format(n=self.n)

    @property
    def runner_up(self) -> str | None:
        """The most probable option other than the pick (the first in menu order on a tie);
        without a pick, the second most probable option."""
        ranked = self.ranked()
        rest = [name for name, _ in ranked if name != self.pick]
        if self.pick is None:
            rest = rest[1:]
        return rest[0] if rest else None

    @property
    def p_runner_up(self) -> float | None:
        r = self.runner_up
        return None if r is None else self.probs[r]

    @property
    def margin(self) -> float | None:
        """`p_pick − p_runner_up`: how far the pick stood ahead (negative when the model wrote a
        name it found less likely than another, which sampling can do)."""
        p = self.p_pick
        if p is None:
            return None
        return p - (self.p_runner_up or 0.0)

    @property
    def entropy(self) -> float:
        """Shannon entropy in bits of the distribution, `other` counted as one more outcome:
        0 for a certain pick, log2(k) for k options equally likely."""
        return -sum(p * math.log2(p) for p in (*self.probs.values(), self.other) if p > 0)

    def ranked(self) -> list[tuple[str, float]]:
        """`(name, p)` from most to least probable; a tie keeps menu order."""
        return sorted(self.probs.items(), key=lambda kv: -kv[1])

    def to_dict(self) -> dict:
        out = {"probs": dict(self.probs), "other": self.other, "source": self.source,
               "n": self.n, "pick": self.pick, "note": self.note}
        if self.pick_set is not None:  # only with pick_set=: other records keep their form
            out["pick_set"] = list(self.pick_set)
        return out

    @classmethod
    def from_dict(cls, data: dict | None) -> Confidence | None:
        """The record again from `to_dict()` (a journal, an export); None from None. What is
        read back is checked as `saved_problem` says: anything else is an `ArgumentError`
        naming the problem, never a record whose numbers are not probabilities."""
        if data is None:
            return None
        problem = saved_problem(data)
        if problem is not None:
            raise ArgumentError(f"a saved confidence record is not one Confidence.to_dict() "
                                f"writes: {problem}")
        return cls(probs={k: float(v) for k, v in data["probs"].items()},
                   other=float(data.get("other") or 0.0), source=data.get("source"),
                   n=data.get("n"), pick=data.get("pick"), note=data.get("note"),
                   pick_set=None if data.get("pick_set") is None else tuple(data["pick_set"]))

    def __repr__(self) -> str:
        top = ", ".join(f"{k}={v:.3f}" for k, v in self.ranked()[:4])
        more = f", +{len(self.probs) - 4} more" if len(self.probs) > 4 else ""
        n = f", n={self.n}" if self.n is not None else ""
        chosen = "" if self.pick_set is None else f", pick_set={list(self.pick_set)}"
        return (f"Confidence({self.source}{n}: pick={self.pick!r}, {top}{more}, "
                f"other={self.other:.3f}{chosen})")


@dataclass(frozen=True)
class Samples:
    """`confidence=decision.Samples(n=5, temperature=1.0)`: draw `n` replies to the same
    request and count the picks they name; the decision resolves the most frequent (a tie goes
    to the one drawn first). Works with any runtime. `fallback=True` asks the runtime for its
    own distribution first and draws samples only when it can give none (a runtime without
    one, a server that refuses log-probabilities)."""
    n: int = 5
    temperature: float = 1.0
    fallback: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 2:
            raise ArgumentError(f"Samples(n=...) must be a whole number >= 2 (one reply is not a "
                                f"distribution), got {self.n!r}; e.g. decision.Samples(5)")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2 or t != t:
            raise ArgumentError(f"Samples(temperature=...) must be a number from 0 to 2 (samples "
                                f"drawn at 0 are all the same reply), got {t!r}")
        if not isinstance(self.fallback, bool):
            raise UsageError(f"Samples(fallback=...) must be True or False, got "
                             f"{self.fallback!r}")


def from_response(data: Any, names: Sequence[str]) -> Confidence:
    """The record from a runtime's `ModelResponse.confidence` dict. Whatever a runtime (or a
    server through it) wrote is checked: a name off the menu counts as `other`, a number that
    is not a probability is dropped with a note, and a total off 1 is renormalised, so the
    record always sums to 1 and never carries a made-up number."""
    notes: list[str] = []
    if not isinstance(data, dict):
        return Confidence({n: 0.0 for n in names}, 1.0, "logprobs",
                          note=f"the runtime's confidence was {type(data).__name__}, not a dict")
    source = data.get("source") if data.get("source") in SOURCES else "logprobs"
    probs = {n: 0.0 for n in names}
    other = _prob(data.get("other"), notes, "other")
    raw = data.get("probs")
    if not isinstance(raw, dict):
        raw = {}
        notes.append("no per-option probabilities")
    for k, v in raw.items():
        p = _prob(v, notes, repr(k))
        if k in probs:
            probs[k] += p
        else:
            other += p
    total = sum(probs.values()) + other
    if total <= 0:
        notes.append("no probability at all")
        other, total = 1.0, 1.0
    elif abs(total - 1) > _TOLERANCE:
        notes.append(f"probabilities summed to {total:.6g}; renormalised")
    else:  # within rounding of 1: the runtime's own numbers, untouched
        total = 1.0
    probs = {k: v / total for k, v in probs.items()}
    note = data.get("note")
    if notes:
        note = "; ".join([*([str(note)] if note else []), *notes])
    return Confidence(probs, other / total, source, note=None if note is None else str(note))


def _prob(value: Any, notes: list[str], what: str) -> float:
    if _is_p(value):
        return min(float(value), 1.0)
    if value is not None:
        notes.append(f"{what} was not a probability ({value!r})")
    return 0.0


def _is_p(value: Any) -> bool:
    """A probability: a number (not a bool) from 0 to 1, or above 1 by a rounding
    (`_TOLERANCE`); NaN and infinities are not."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and \
        0 <= value <= 1 + _TOLERANCE


def saved_problem(data: Any) -> str | None:
    """Why `data`, read back from a journal or an export, is not a distribution
    `Confidence.to_dict()` writes, or None when it is one: `probs` an object of option names
    and probabilities, `other` a probability, together summing to 1, `source` one of
    `SOURCES`, `n` a count of samples or null, `pick` and `note` text or null. A number out of
    [0, 1] (7.0, -50, NaN, inf) would make every figure computed from it meaningless or raise
    (calibration's bins, a view's bar)."""
    if not isinstance(data, dict):
        return f"it is {_show(data)}, not an object"
    probs = data.get("probs")
    if not isinstance(probs, dict):
        return f'its "probs" is {_show(probs)}, not an object of option names and probabilities'
    for name, p in probs.items():
        if not _is_p(p):
            return f"the probability of {name!r} is {_show(p)}, not a number from 0 to 1"
    other = data.get("other")
    if not _is_p(other):
        return f'its "other" is {_show(other)}, not a number from 0 to 1'
    total = sum(probs.values()) + other
    if abs(total - 1) > 1e-4:
        return f"its probabilities and other sum to {total:.6g}, not 1"
    if data.get("source") not in SOURCES:
        return f'its "source" is {_show(data.get("source"))}, not one of {", ".join(SOURCES)}'
    n = data.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        return f'its "n" is {_show(n)}, not a count of samples'
    for key in ("pick", "note"):
        if data.get(key) is not None and not isinstance(data[key], str):
            return f"its {key!r} is {_show(data[key])}, not text"
    chosen = data.get("pick_set")
    if chosen is not None and not (isinstance(chosen, list) and all(
            isinstance(c, str) and c in probs for c in chosen)):
        return f'its "pick_set" is {_show(chosen)}, not a list of its option names'
    return None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def from_counts(picks: Iterable[str | None], names: Sequence[str]) -> tuple[Confidence, int]:
    """The distribution of the picks n samples named (None or a name off the menu: `other`),
    and the index of the sample that resolves: the first drawn of the most frequent pick (the
    first sample when none named an option)."""
    picks = list(picks)
    counts = {n: 0 for n in names}
    other = 0
    first: dict[str, int] = {}
    for i, p in enumerate(picks):
        if p in counts:
            counts[p] += 1
            first.setdefault(p, i)
        else:
            other += 1
    n = len(picks)
    winner = None
    if first:
        best = max(counts.values())
        winner = min((first[k] for k, c in counts.items() if c == best and k in first))
    conf = Confidence({k: c / n for k, c in counts.items()}, other / n, "samples", n=n)
    return conf, (0 if winner is None else winner)
