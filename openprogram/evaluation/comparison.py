"""`ComparisonResult`: the results of `compare`'s variants over the same inputs, lined up — their
picks and summaries side by side, where they differ, and a ranking by the expected option's mean
probability that says when the intervals overlap.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..base.errors import require
from ..trace.safe_html import quiet_frame  # model and row text: every frame shown in the wrapper
from .calibration import new_axes
from .outcomes import NO_PICK
from .results import EvaluationResult, input_frame, shown_summary, tables_html

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["ComparisonResult"]


class ComparisonResult:
    """The outcome of `compare`: one `EvaluationResult` per variant (`result[name]`), lined up.

    `.to_frame()` — the input columns, one pick column per variant, `expected` when given, and
    `agree` (every variant picked the same; None while a row is cancelled somewhere).
    `.differences` — the rows where the variants picked differently. `.summary` — retry and
    failure rates (and accuracy) per variant. `.picks` — each variant's pick of each input
    (`{variant: list}`); `.pick_counts` — pick counts per option per variant. `.results` maps
    each variant to its `EvaluationResult`.
    """

    def __init__(self, results: dict[str, EvaluationResult], *, columns: list[str],
                 records: list[Mapping[str, Any]], expected: list[str | None] | None,
                 interrupted: bool) -> None:
        self.results, self.columns, self.records = results, columns, records
        self.expected, self.interrupted = expected, interrupted

    def __getitem__(self, name: str) -> EvaluationResult:
        return self.results[name]

    @property
    def variants(self) -> list[str]:
        return list(self.results)

    def to_frame(self) -> Any:
        pd = require("pandas", "pandas", "the result's to_frame()")
        extra = (["expected"] if self.expected is not None else []) + ["agree"]
        frame = input_frame(self.columns, self.records, set(self.variants) | set(extra))
        picks = self.picks
        statuses = {name: r.statuses for name, r in self.results.items()}
        for name in self.variants:
            frame[name] = picks[name]
        if self.expected is not None:
            frame["expected"] = self.expected
        agree: list[bool | None] = []
        for i in range(len(self.records)):
            if any(statuses[name][i] == "cancelled" for name in self.variants):
                agree.append(None)
            else:
                agree.append(len({picks[name][i] for name in self.variants}) == 1)
        frame["agree"] = pd.Series(agree, index=frame.index, dtype=object)
        return quiet_frame(frame)

    @property
    def differences(self) -> Any:
        """The rows (finished in every variant) where the variants picked differently; a
        failure with no valid pick counts as a pick of its own."""
        frame = self.to_frame()
        from ..trace.safe_html import (
            quiet_frame,  # model and row text: shown in the library's wrapper
        )
        return quiet_frame(frame[frame["agree"] == False])  # noqa: E712 (None too)

    @property
    def summary(self) -> Any:
        pd = require("pandas", "pandas", "the result's .summary")
        table = pd.DataFrame({name: r.summary for name, r in self.results.items()}).T
        table.index.name = "variant"
        return quiet_frame(table)

    @property
    def ranking(self) -> Any:
        """The variants ranked by `mean_p_expected` (best first), beside their accuracy, with
        each one's 95 % bootstrap interval and the variants whose interval overlaps it (an
        overlap means these rows cannot tell the two apart). None when the runs asked for no
        distribution or had no expected picks."""
        pd = require("pandas", "pandas", "the comparison's .ranking")
        rows: dict[str, dict[str, Any]] = {}
        for name, r in self.results.items():
            m = r.mean_p_expected
            if m is None:
                return None
            lo, hi = r.mean_p_expected_ci or (math.nan, math.nan)
            rows[name] = {"mean_p_expected": m, "lo": lo, "hi": hi, "accuracy": r.accuracy}
        for name, row in rows.items():
            row["overlaps"] = [other for other, o in rows.items() if other != name and
                               o["lo"] <= row["hi"] and row["lo"] <= o["hi"]]
        table = pd.DataFrame.from_dict(rows, orient="index",
                                       columns=["mean_p_expected", "lo", "hi", "accuracy",
                                                "overlaps"])
        table.index.name = "variant"
        return table.sort_values("mean_p_expected", ascending=False, kind="stable")

    @property
    def picks(self) -> dict[str, list[str | None]]:
        """Each variant's pick of each input: `{variant: [pick, ...]}`."""
        return {name: r.picks for name, r in self.results.items()}

    @property
    def pick_counts(self) -> Any:
        pd = require("pandas", "pandas", "the result's .pick_counts")
        counts = {name: r.pick_counts["count"] for name, r in self.results.items()}
        order = list(dict.fromkeys(k for c in counts.values() for k in c.index if k != NO_PICK))
        if any(NO_PICK in c.index for c in counts.values()):
            order.append(NO_PICK)
        table = pd.DataFrame({name: c.reindex(order, fill_value=0) for name, c in counts.items()},
                             index=pd.Index(order, name="option")).astype("int64")
        table.columns.name = "variant"
        return quiet_frame(table)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """Grouped bars: the picks of each variant per option; returns the matplotlib axes."""
        kwargs.setdefault("title", "picks per variant")
        kwargs.setdefault("rot", 0)
        ax = self.pick_counts.plot.bar(ax=new_axes(ax), **kwargs)
        ax.set_ylabel("inputs")
        return ax

    def _headline(self) -> str:
        diff = len(self.differences)
        text = (f"{len(self.variants)} variants over {len(self.records)} inputs; they pick "
                f"differently on {diff} input{'s' if diff != 1 else ''}")
        ranking = self.ranking
        if ranking is not None and len(ranking):
            best = ranking.index[0]
            text += (f"; by mean p(expected) {best!r} leads "
                     f"({ranking.loc[best, 'mean_p_expected']:.3f})")
            tied = ranking.loc[best, "overlaps"]
            if tied:
                text += (f", but its 95 % interval overlaps {', '.join(map(repr, tied))}: "
                         f"these rows do not tell them apart")
        if self.interrupted:
            text += " · INTERRUPTED"
        return text

    def __repr__(self) -> str:
        return f"<ComparisonResult {', '.join(map(repr, self.variants))}: {self._headline()}>"

    def _repr_html_(self) -> str:
        import html
        title = f"<b>compare</b> {html.escape(', '.join(self.variants))}: " \
                f"{html.escape(self._headline())}"
        tables = [("summary", shown_summary(self.summary)), ("picks", self.pick_counts)]
        ranking = self.ranking
        if ranking is not None:
            tables.insert(1, ("ranked by mean p(expected)", ranking))
        diffs = self.differences
        if len(diffs):
            shown = diffs.head(20)
            caption = "where they differ" + (f" (first 20 of {len(diffs)})"
                                             if len(diffs) > 20 else "")
            tables.append((caption, shown))
        return tables_html(title, tables)

