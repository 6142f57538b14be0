"""Pick sets with a guarantee: split conformal prediction over a menu.

A threshold on the probability of the pick (`min_confidence=`) is chosen by eye. Conformal
prediction chooses one from labelled rows with a stated guarantee: each calibration row scores
`1 − p(expected option)`; with n rows and a miss rate α, the threshold is the ⌈(n + 1)(1 − α)⌉-th
smallest score q̂, and a decision's *pick set* is every option whose `1 − p ≤ q̂` (its probability
at least `1 − q̂`). On a new row exchangeable with the calibration rows the set holds the right
option with probability at least 1 − α (and, when no two scores tie, at most
1 − α + 1/(n + 1)). A decision resolves when the set is its pick alone, and routes to
`low_confidence=` (or fails as `low_confidence`, carrying the set) otherwise. `PickSetPolicy` is
the fitted rule (`EvaluationResult.conformal(alpha)` fits it); it records what it was fitted on —
the option names and menu, the way of asking, the confidence source, the rows — so that a
decision asked another way is refused rather than given a guarantee that does not hold.
Standard library only.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..base.errors import ArgumentError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["PickSetPolicy", "check_alpha", "min_rows", "quantile_rank", "fit", "text_key",
           "check_pick_set", "check_on"]


def check_alpha(alpha: Any, where: str = "conformal") -> Fraction:
    """`alpha` as an exact fraction (0.1 is 1/10, not the float nearest it), or an
    `ArgumentError` unless it is a number in (0, 1)."""
    if isinstance(alpha, Fraction) and 0 < alpha < 1:
        return alpha
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha != alpha or \
            not 0 < alpha < 1:
        raise ArgumentError(f"{where}(alpha=...) is the share of rows whose pick set may miss "
                            f"the right option, a number in (0, 1) such as 0.1 (sets that hold "
                            f"it 90 % of the time); got {alpha!r}")
    return Fraction(repr(float(alpha)))


def min_rows(alpha: Any) -> int:
    """The fewest calibration rows that give a threshold at miss rate `alpha`:
    ⌈1/α⌉ − 1 (with fewer, ⌈(n + 1)(1 − α)⌉ is more than n: no score is high enough)."""
    return math.ceil(1 / check_alpha(alpha)) - 1


def quantile_rank(n: int, alpha: Any) -> int:
    """Which score (1-based, smallest first) of n calibration scores is the threshold:
    ⌈(n + 1)(1 − α)⌉, computed exactly."""
    return math.ceil((n + 1) * (1 - check_alpha(alpha)))


def fit(scores: Sequence[float], alpha: Any, where: str = "conformal") -> tuple[float, int]:
    """`(q̂, k)`: the k-th smallest of the calibration `scores` (each `1 − p(expected)`), k as
    `quantile_rank`; an `ArgumentError` naming the minimum when there are too few rows."""
    a = check_alpha(alpha, where)
    n = len(scores)
    need = math.ceil(1 / a) - 1
    if n < need:
        raise ArgumentError(
            f"{where}(alpha={float(a)}) needs at least {need} calibration rows (ceil(1/alpha) "
            f"- 1) with a distribution and an expected pick, and has {n}: label more rows, or "
            f"ask for a larger alpha (with {n} rows, alpha >= {1 / (n + 1):.3g})"
            if n else
            f"{where}(alpha={float(a)}) has no calibration row: it needs rows with a "
            f"distribution and an expected pick (at least {need})")
    k = quantile_rank(n, a)
    return sorted(scores)[k - 1], k


def check_pick_set(value: Any, where: str = "") -> PickSetPolicy | None:
    """`pick_set=`: None, or a `PickSetPolicy` (what `EvaluationResult.conformal` returns)."""
    if value is None or isinstance(value, PickSetPolicy):
        return value
    raise UsageError(f"{where or 'decision.make'}(pick_set=...) takes a PickSetPolicy, what "
                     f"result.conformal(alpha) returns for an evaluation with confidence= and "
                     f"expected=; got {type(value).__name__}")


def check_on(policy: PickSetPolicy, names: Sequence[str], menu_text: str, way: Any,
             source: Any, shortlist: Any, where: str) -> None:
    """A decision's `pick_set=` checked against what it asks, before any model call: the whole
    menu (no shortlist), the option set, menu text, way of asking and kind of distribution the
    policy was fitted on."""
    if shortlist is not None:
        raise UsageError(f"{where}(pick_set=..., shortlist=...): a pick set is calibrated over "
                         f"the whole menu, and a shortlist shows each request a part of it; "
                         f"drop shortlist=")
    policy.check(names, menu_text, way.name, source.distribution, source.sample_count, where)


def text_key(text: str) -> str:
    """A short digest of a request or a menu: how a policy remembers the rows and the menu it
    was fitted on without keeping their text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class PickSetPolicy:
    """A calibrated pick-set rule: the options whose probability is at least `threshold`
    (`1 − qhat`) make a decision's pick set, which holds the right option with probability at
    least `1 − alpha` on rows like the `n` it was fitted on (`guarantee`). Pass it as
    `decision.make(..., pick_set=policy)`. `options`, `menu` (a digest of the menu text),
    `mode` and `source` (with `samples`, the n of `Samples(n)`) say what it was fitted on;
    `rows` are the calibration rows' input positions, `keys` digests of their requests."""
    alpha: float
    qhat: float
    n: int
    rank: int
    options: tuple[str, ...]
    menu: str
    mode: str
    source: str
    samples: int | None = None
    rows: tuple[int, ...] = ()
    keys: frozenset[str] = field(default_factory=frozenset, repr=False)

    @property
    def threshold(self) -> float:
        """The probability an option needs to be in a pick set: `1 − qhat`."""
        return 1 - self.qhat

    @property
    def guarantee(self) -> tuple[float, float]:
        """The coverage the sets hold on exchangeable rows: at least `1 − alpha`, and at most
        `1 − alpha + 1/(n + 1)` when no two calibration scores tie."""
        return (1 - self.alpha, min(1.0, 1 - self.alpha + 1 / (self.n + 1)))

    def pick_set(self, probs: Mapping[str, float]) -> tuple[str, ...]:
        """The options of `probs` in the set, most probable first (a tie keeps menu order):
        each with `1 − p ≤ qhat`, the same arithmetic the calibration scores were made with."""
        inside = [(name, p) for name, p in probs.items() if 1 - p <= self.qhat]
        return tuple(name for name, _ in sorted(inside, key=lambda kv: -kv[1]))

    def fitted_on(self, request: str) -> bool:
        """Whether a row with this request was one the policy was fitted on."""
        return text_key(request) in self.keys

    def check(self, names: Sequence[str], menu_text: str, mode: str, source: str | None,
              samples: int | None, where: str = "decision.make") -> None:
        """Refuse a decision asked otherwise than the policy was fitted: another option set,
        menu text, way of asking or confidence source (the guarantee holds for none of them).
        The message names both."""
        if tuple(names) != self.options:
            raise ArgumentError(
                f"{where}(pick_set=...): the policy was fitted on the options "
                f"{list(self.options)}, and this decision's are {list(names)}; fit one on an "
                f"evaluation of this option set: evaluate(..., confidence=..., "
                f"expected=...).conformal(alpha)")
        if text_key(menu_text) != self.menu:
            raise ArgumentError(
                f"{where}(pick_set=...): the policy was fitted on the same option names with "
                f"another menu (menu {self.menu}, this one {text_key(menu_text)}): a "
                f"description, parameter or example changed since, and the probabilities with "
                f"it; fit the policy again on an evaluation of this option set")
        if mode != self.mode:
            raise ArgumentError(
                f"{where}(pick_set=...): the policy was fitted on decisions asked in mode "
                f"{self.mode!r}, and this one is asked in mode {mode!r}; ask with "
                f"mode={self.mode!r}, or fit a policy on an evaluation in mode {mode!r}")
        if (source, samples) != (self._kind(), self.samples):
            raise ArgumentError(
                f"{where}(pick_set=...): the policy was fitted on {self._source_text()} and "
                f"this decision asks for {_source_text(source, samples)}; pass "
                f"{self.confidence_setting()!r} as confidence= (or leave it out: the policy "
                f"sets it), or fit a policy on the distributions this decision asks for")

    def _kind(self) -> str:
        return "samples" if self.source == "samples" else "native"

    def _source_text(self) -> str:
        return _source_text(self._kind(), self.samples)

    def confidence_setting(self) -> Any:
        """The `confidence=` a decision needs to be judged by this policy: `True` for a
        runtime's own distribution, `Samples(n)` for counted samples."""
        if self.source == "samples":
            from ..trace.confidence import Samples
            return Samples(self.samples or 5)
        return True

    def to_dict(self) -> dict:
        """The policy as JSON data (a journal's fingerprint, an export); `from_dict` reads it."""
        return {"alpha": self.alpha, "qhat": self.qhat, "n": self.n, "rank": self.rank,
                "options": list(self.options), "menu": self.menu, "mode": self.mode,
                "source": self.source, "samples": self.samples, "rows": list(self.rows),
                "keys": sorted(self.keys)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PickSetPolicy:
        try:
            return cls(alpha=float(data["alpha"]), qhat=float(data["qhat"]), n=int(data["n"]),
                       rank=int(data["rank"]), options=tuple(map(str, data["options"])),
                       menu=str(data["menu"]), mode=str(data["mode"]),
                       source=str(data["source"]),
                       samples=None if data.get("samples") is None else int(data["samples"]),
                       rows=tuple(int(r) for r in data.get("rows") or ()),
                       keys=frozenset(map(str, data.get("keys") or ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"not a pick-set policy's data ({type(exc).__name__}: {exc}); "
                             f"give what PickSetPolicy.to_dict() wrote") from None

    def __repr__(self) -> str:
        lo, hi = self.guarantee
        return (f"PickSetPolicy(alpha={self.alpha:g}: an option is in the set at p >= "
                f"{self.threshold:.4g}; the set holds the right option on >= {lo:.0%} (<= "
                f"{hi:.1%}) of rows like the {self.n} it was fitted on; {len(self.options)} "
                f"options, mode {self.mode!r}, {self._source_text()})")


def _source_text(kind: str | None, samples: int | None) -> str:
    if kind == "samples":
        return f"distributions counted from Samples({samples})"
    if kind == "native":
        return "the runtime's own distribution (confidence=True)"
    return "no distribution"
