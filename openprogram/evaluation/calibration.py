"""Confidence over an evaluation: how well the model's probabilities matched the expected picks
(`mean_p_expected` and its bootstrap interval, `calibration`, `ece`, `brier`, `selective`),
which options they show the model confuses (`confusability`, `confused_pairs`; the arithmetic
is `confusability`'s), a pick-set policy fitted on the rows by split conformal prediction
(`conformal`; the rule is `decision.conformal`'s) and the coverage its sets reach on rows it was
not fitted on (`coverage`, `mean_set_size`), and their plots. A mixin of `EvaluationResult`,
which supplies the rows it reads.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from ..base.errors import ArgumentError, require
from ..trace.confidence import Confidence

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any


def bootstrap_interval(values: Sequence[float], level: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values`: resample the values with
    replacement `resamples` times (a fixed seed: the same values give the same interval) and
    take the central `level` of the resampled means. (nan, nan) for no values."""
    n = len(values)
    if not n:
        return (math.nan, math.nan)
    import random
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return (means[int(tail * resamples)], means[min(resamples - 1, int((1 - tail) * resamples))])




def new_axes(ax: Any) -> Any:
    """A fresh figure unless the caller gave axes: pandas draws a Series into the current axes,
    which would stack a second plot onto the first in the same notebook cell."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots()[1]


class ConfidenceMetrics:
    """The confidence figures of an `EvaluationResult` (see the module's opening)."""

    def _confident(self) -> list[tuple[Confidence, str, str | None]]:
        """(confidence, expected, pick) of the finished rows that have both a distribution
        and an expected pick."""
        o = self._outcomes
        if not self._has_expected:
            return []
        names = o.names
        return [(o.conf[i], names[o.expected[i]], names[o.pick[i]] if o.pick[i] >= 0 else None)
                for i in sorted(o.conf) if i < len(o) and o.status[i] and o.expected[i] >= 0]

    def _confident_at(self) -> list[tuple[int, Confidence, str]]:
        """(input position, confidence, expected) of the same rows as `_confident`."""
        o = self._outcomes
        if not self._has_expected:
            return []
        return [(i, o.conf[i], o.names[o.expected[i]])
                for i in sorted(o.conf) if i < len(o) and o.status[i] and o.expected[i] >= 0]

    def _need_confidence(self, what: str) -> list[tuple[Confidence, str, str | None]]:
        if not self._has_expected:
            raise ArgumentError(f"{what} compares the model's probabilities with the expected "
                                f"picks: run evaluate(..., expected=...)")
        rows = self._confident()
        if not rows and not self._outcomes.conf:
            raise ArgumentError(f"{what} needs each row's distribution: run evaluate(..., "
                                f"confidence=True) or confidence=decision.Samples(n)")
        return rows

    @property
    def mean_p_expected(self) -> float | None:
        """The mean probability the model gave the expected option, over the rows with a
        distribution and an expected pick (None without either). It moves with every edit of
        an option's description, where accuracy on twenty rows moves in steps of 5 %."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        ps = [c.probs.get(e, 0.0) for c, e, _ in self._confident()]
        return sum(ps) / len(ps) if ps else float("nan")

    @property
    def mean_p_expected_ci(self) -> tuple[float, float] | None:
        """The 95 % bootstrap interval of `mean_p_expected` (2,000 resamples of the rows, a
        fixed seed, so the same rows give the same interval)."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        ps = [c.probs.get(e, 0.0) for c, e, _ in self._confident()]
        return bootstrap_interval(ps)

    def calibration(self, bins: int = 10) -> Any:
        """Reliability table: the rows binned by the probability of their pick (`bins` equal
        widths over [0, 1]); per bin the count, the mean confidence and the accuracy (the
        share whose pick was the expected one). Rows without a pick have no confidence in one
        and are left out."""
        pd = require("pandas", "pandas", "the result's calibration()")
        rows = self._binned(bins, "calibration()")
        out = []
        for k, members in enumerate(rows):
            n = len(members)
            out.append({"bin": f"[{k / bins:.2f}, {(k + 1) / bins:.2f}" +
                               ("]" if k == bins - 1 else ")"),
                        "count": n,
                        "mean_confidence": sum(p for p, _ in members) / n if n else math.nan,
                        "accuracy": sum(ok for _, ok in members) / n if n else math.nan})
        return pd.DataFrame(out, columns=["bin", "count", "mean_confidence", "accuracy"])

    def _binned(self, bins: Any, what: str) -> list[list[tuple[float, bool]]]:
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ArgumentError(f"{what}: bins must be a whole number >= 1, got {bins!r}")
        out: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
        for c, e, p in self._need_confidence(what):
            if c.p_pick is not None:
                out[min(int(c.p_pick * bins), bins - 1)].append((c.p_pick, p == e))
        return out

    @property
    def ece(self) -> float | None:
        """Expected calibration error over 10 bins: the count-weighted mean of
        |accuracy − mean confidence| per bin (0 for a model exactly as sure as it is right)."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        binned = self._binned(10, "ece")
        total = sum(len(b) for b in binned)
        if not total:
            return float("nan")
        return sum(abs(sum(ok for _, ok in b) - sum(p for p, _ in b)) for b in binned) / total

    @property
    def brier(self) -> float | None:
        """The multi-class Brier score: the mean over rows of Σ (p_option − [option is
        expected])² over every option, `other` counted as one more outcome that is never
        expected. 0 is a certain, right model; 2 a certain, wrong one."""
        if not self._has_expected or not self._outcomes.conf:
            return None
        rows = self._confident()
        if not rows:
            return float("nan")
        total = 0.0
        for c, e, _ in rows:
            total += sum((p - (name == e)) ** 2 for name, p in c.probs.items())
            # `other` is never expected; an expected name off this menu had probability 0
            total += c.other ** 2 + (0.0 if e in c.probs else 1.0)
        return total / len(rows)

    def selective(self, coverage: Any = None) -> Any:
        """What a threshold would buy: the rows sorted by the probability of their pick, and
        for each `coverage` (a share of rows, or a list of them; default 0.1 to 1.0) the
        accuracy of that most confident share, the number of rows and the threshold (the
        lowest p_pick kept). Rows without a pick count as least confident."""
        pd = require("pandas", "pandas", "the result's selective()")
        if coverage is None:
            coverage = [k / 10 for k in range(1, 11)]
        many = isinstance(coverage, (list, tuple))
        covs = list(coverage) if many else [coverage]
        for c in covs:
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c <= 1:
                raise ArgumentError(f"selective(coverage=...) takes shares of the rows in (0, 1], "
                                    f"e.g. 0.8 or [0.5, 0.8, 1.0], got {c!r}")
        rows = self._need_confidence("selective()")
        ranked = sorted(((c.p_pick if c.p_pick is not None else -1.0, p == e)
                         for c, e, p in rows), key=lambda r: -r[0])
        out = []
        for c in covs:
            k = max(1, math.ceil(c * len(ranked) - 1e-9)) if ranked else 0
            kept = ranked[:k]
            out.append({"coverage": c, "rows": k,
                        "threshold": (kept[-1][0] if kept and kept[-1][0] >= 0 else math.nan),
                        "accuracy": sum(ok for _, ok in kept) / k if k else math.nan})
        return pd.DataFrame(out, columns=["coverage", "rows", "threshold", "accuracy"])

    def plot_calibration(self, bins: int = 10, ax: Any = None) -> Any:
        """A reliability diagram: accuracy against mean confidence per bin, the diagonal of a
        calibrated model, each bin's count written over its point. Returns the matplotlib
        figure (`fig.savefig("calibration.png")`)."""
        table = self.calibration(bins)
        ax = new_axes(ax)
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
        shown = table[table["count"] > 0]
        ax.plot(shown["mean_confidence"], shown["accuracy"], marker="o", label="this run")
        for _, r in shown.iterrows():
            ax.annotate(str(int(r["count"])), (r["mean_confidence"], r["accuracy"]),
                        textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("mean probability of the pick")
        ax.set_ylabel("accuracy")
        ax.set_title(f"calibration (ECE {self.ece:.3f}, rows per point shown)")
        ax.legend(loc="lower right")
        return ax.figure

    def plot_selective(self, ax: Any = None) -> Any:
        """Accuracy of the most confident share of rows against that share (coverage), with
        the threshold each point needs; returns the matplotlib figure."""
        grid = [k / 20 for k in range(1, 21)]
        table = self.selective(grid)
        ax = new_axes(ax)
        ax.plot(table["coverage"], table["accuracy"], marker=".")
        for _, r in table.iloc[::4].iterrows():
            if r["threshold"] == r["threshold"]:
                ax.annotate(f"p≥{r['threshold']:.2f}", (r["coverage"], r["accuracy"]),
                            textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("coverage (share of rows answered, most confident first)")
        ax.set_ylabel("accuracy")
        ax.set_title("selective accuracy")
        return ax.figure

    # -- which options the model confuses -----------------------------------------------------
    def _mass(self, what: str) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
        from .confusability import mass_table
        self._need_confidence(what)
        return mass_table(((e, c.probs, c.other) for _, c, e in self._confident_at()),
                          list(self.options))

    def confusability(self) -> Any:
        """Which options the model confuses: a table of expected option (rows) by option
        (columns) holding the mean probability each other option took over the rows expected to
        pick the row's option, the column `(no option)` the mass on replies that named none
        (when there was any), and `rows` how many rows each mean is over. The diagonal (the
        mass the expected option kept: its `mean_p_expected`) is left empty, so the table and
        its heatmap show only what the menu failed to tell apart. Any confidence source reads
        the same (exact, log-probabilities, samples); rows without a distribution are left out.
        """
        pd = require("pandas", "pandas", "the result's confusability()")
        from ..trace.safe_html import quiet_frame
        from .confusability import NONE
        means, counts = self._mass("confusability()")
        names = list(self.options)
        cols = names + ([NONE] if any(means[e][NONE] > 0 for e in names if counts[e]) else [])
        table = pd.DataFrame([[math.nan if o == e else means[e][o] for o in cols]
                              for e in names],
                             index=pd.Index(names, name="expected"),
                             columns=pd.Index(cols, name="mass on"))
        table["rows"] = [counts[e] for e in names]
        return quiet_frame(table)

    def confused_pairs(self, k: int = 5) -> Any:
        """The `k` pairs of options the model confuses most: per pair the mean mass each took
        on the other's rows (`a_to_b`: on rows expected to pick `a`, the mass `b` took), their
        mean over both options' rows (`mass`, the ranking), the rows behind it (input
        positions, the most confused first) and the words the two options' menu lines share
        (what in their texts overlaps; words every option says are left out)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ArgumentError(f"confused_pairs(k=...) is how many pairs to show, a whole "
                                f"number >= 1; got {k!r}")
        pd = require("pandas", "pandas", "the result's confused_pairs()")
        from .confusability import ranked_pairs
        means, counts = self._mass("confused_pairs()")
        names = list(self.options)
        rows = self._confident_at()
        words = self._option_words()
        out = []
        for a, b, mass, ab, ba in ranked_pairs(means, counts, names)[:k]:
            behind = sorted(((c.probs.get(b if e == a else a, 0.0), i) for i, c, e in rows
                             if e in (a, b)), key=lambda t: (-t[0], t[1]))
            out.append({"option_a": a, "option_b": b, "mass": mass, "a_to_b": ab,
                        "b_to_a": ba, "rows": [i for p, i in behind if p > 0],
                        "shared_words": (words and _shared(words, a, b))})
        return pd.DataFrame(out, columns=["option_a", "option_b", "mass", "a_to_b", "b_to_a",
                                          "rows", "shared_words"])

    def _option_words(self) -> dict[str, set[str]] | None:
        """Each option's menu words, read from the first row's trace (the option table it
        keeps); None when no row kept one."""
        from .confusability import option_words
        traces = self.traces
        for i in range(len(self)):
            trace = traces[i]
            if trace is not None and trace.options:
                return {str(info.get("name")): option_words(info) for info in trace.options}
        return None

    def plot_confusability(self, ax: Any = None) -> Any:
        """The `confusability()` table as a heatmap: a row per expected option (its row count
        in the label), a column per option the mass went to, each cell's mean written on it.
        Returns the matplotlib figure (`fig.savefig("confusability.png")`)."""
        table = self.confusability()
        counts = table.pop("rows")
        ax = new_axes(ax)
        values = table.to_numpy(dtype=float)
        top = max(0.05, max((v for v in values.flat if v == v), default=0.0))
        import matplotlib
        # the diagonal (an option's own rows, left out) in grey
        cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#e8e8e8")
        image = ax.imshow(values, cmap=cmap, vmin=0.0, vmax=top)
        for (r, c), v in _cells(values):
            if v == v and v >= 0.005:   # dark cells get white text
                ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v > 0.6 * top else "black")
        ax.set_xticks(range(len(table.columns)))
        ax.set_xticklabels(list(table.columns), rotation=45, ha="right")
        ax.set_yticks(range(len(table.index)))
        ax.set_yticklabels([f"{e} ({n})" for e, n in counts.items()])
        ax.set_xlabel("probability mass on")
        ax.set_ylabel("expected option (rows)")
        ax.set_title("confusability: mean mass on a wrong option")
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.figure.tight_layout()
        return ax.figure

    # -- pick sets with a guarantee -------------------------------------------------------------
    def conformal(self, alpha: float = 0.1, rows: Sequence[int] | None = None) -> Any:
        """A pick-set policy calibrated on this evaluation's rows by split conformal prediction
        (`decision.conformal`): the options whose probability is at least its threshold form a
        set that holds the right option on at least `1 − alpha` of rows like these. `rows` are
        the input positions to fit on (default: every finished row with a distribution and an
        expected pick); keep others aside to measure it (`pick_set_figures(policy)`), or
        evaluate new rows with `pick_set=policy` (`coverage`, `mean_set_size`). Needs at least
        ⌈1/α⌉ − 1 rows; refuses rows asked with different menus (a shortlist) or confidence
        sources, since one threshold cannot hold for both."""
        from ..decision.conformal import PickSetPolicy, check_alpha, fit, text_key
        a = check_alpha(alpha, "conformal")
        self._need_confidence("conformal()")
        eligible = {i: (c, e) for i, c, e in self._confident_at()}
        chosen = sorted(eligible) if rows is None else self._calibration_rows(rows, eligible)
        traces = self.traces
        asked = [traces[i] for i in chosen]
        if any(t.shortlist for t in asked):
            raise ArgumentError("conformal(): these rows were asked with a shortlist, so each "
                                "saw its own part of the menu and no one threshold over the "
                                "whole menu holds for them; evaluate without shortlist=")
        for what, seen in (("menus", {t.menu for t in asked}), ("ways of asking",
                                                                {t.mode for t in asked}),
                           ("confidence sources", {(eligible[i][0].source, eligible[i][0].n)
                                                   for i in chosen})):
            if len(seen) > 1:
                raise ArgumentError(f"conformal(): the rows were asked with {len(seen)} "
                                    f"different {what}; a threshold is calibrated on one: fit "
                                    f"on rows asked one way (rows=...)")
        scores = [1 - eligible[i][0].probs.get(eligible[i][1], 0.0) for i in chosen]
        qhat, k = fit(scores, alpha, "conformal")
        first = eligible[chosen[0]][0]
        return PickSetPolicy(alpha=float(a), qhat=qhat, n=len(chosen), rank=k,
                             options=tuple(self.options), menu=text_key(asked[0].menu),
                             mode=asked[0].mode, source=first.source,
                             samples=first.n if first.source == "samples" else None,
                             rows=tuple(chosen),
                             keys=frozenset(text_key(t.prompt) for t in asked))

    def _calibration_rows(self, rows: Any, eligible: dict[int, Any]) -> list[int]:
        if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
            raise ArgumentError(f"conformal(rows=...) is a list of input positions, got "
                                f"{type(rows).__name__}")
        out = []
        for i in rows:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self):
                raise ArgumentError(f"conformal(rows=...): {i!r} is not an input position "
                                    f"(0 to {len(self) - 1})")
            if i not in eligible:
                raise ArgumentError(f"conformal(rows=...): row {i} has no distribution and "
                                    f"expected pick to calibrate on (it failed, was "
                                    f"cancelled, or has no expected pick)")
            out.append(i)
        return sorted(set(out))

    def pick_set_figures(self, policy: Any = None) -> dict[str, Any]:
        """What `policy` (default: the one this run decided with, `pick_set=`) gives on this
        evaluation's rows it was not fitted on: `coverage` (the share of rows with an expected
        pick whose set holds it), `mean_set_size`, `singletons` (the share of rows whose set is
        one option: those a decision resolves), `empty`, and the `rows` counted. A row counts
        when it finished with a distribution; a row whose request the policy was fitted on is
        left out."""
        policy = policy if policy is not None else getattr(self, "pick_set", None)
        if policy is None:
            raise ArgumentError("pick_set_figures(): this run decided with no pick set; pass "
                                "the policy to measure, e.g. result.pick_set_figures(policy)")
        if tuple(self.options) != tuple(policy.options):
            raise ArgumentError(f"pick_set_figures(): the policy was fitted on the options "
                                f"{list(policy.options)}, and this evaluation's are "
                                f"{list(self.options)}")
        o, traces = self._outcomes, self.traces
        sets, hits = [], []
        for i in sorted(o.conf):
            if i >= len(o) or not o.status[i]:
                continue
            trace = traces[i]
            if trace is not None and policy.fitted_on(trace.prompt):
                continue
            got = policy.pick_set(o.conf[i].probs)
            sets.append(got)
            if self._has_expected and o.expected[i] >= 0:
                hits.append(o.names[o.expected[i]] in got)
        n = len(sets)
        return {"coverage": sum(hits) / len(hits) if hits else math.nan,
                "mean_set_size": sum(map(len, sets)) / n if n else math.nan,
                "singletons": sum(len(s) == 1 for s in sets) / n if n else math.nan,
                "empty": sum(not s for s in sets) / n if n else math.nan,
                "rows": n, "rows_with_expected": len(hits)}

    @property
    def coverage(self) -> float | None:
        """With `pick_set=policy`: the share of rows (with an expected pick, not among those
        the policy was fitted on) whose pick set held the expected option; the policy promises
        at least `1 − alpha`. None for a run without a pick set."""
        if getattr(self, "pick_set", None) is None or not self._has_expected:
            return None
        return self.pick_set_figures()["coverage"]

    @property
    def mean_set_size(self) -> float | None:
        """With `pick_set=policy`: the mean number of options in a row's pick set, over the
        rows the policy was not fitted on (1 would resolve every row). None without one."""
        if getattr(self, "pick_set", None) is None:
            return None
        return self.pick_set_figures()["mean_set_size"]

    # -- views --------------------------------------------------------------------------------


def _cells(values: Any) -> Any:
    for r, row in enumerate(values):
        for c, v in enumerate(row):
            yield (r, c), float(v)


def _shared(words: dict[str, set[str]], a: str, b: str) -> list[str] | None:
    from .confusability import shared_words
    if a not in words or b not in words:
        return None
    return shared_words(words[a], words[b], list(words.values()))
