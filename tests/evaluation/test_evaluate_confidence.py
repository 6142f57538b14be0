"""How sure the model was, over a table (issue 35): the distribution's columns in `to_frame()`,
`mean_p_expected` and its bootstrap interval, `calibration`, `ece`, `brier`, `selective`, the
figures, `compare`'s ranking, and the journal keeping each row's `Confidence` (`from_journal`,
resume). Every figure is checked against a value worked out by hand on a small fixed table."""
import asyncio
import json
import re

import pytest

from openprogram import ArgumentError, ModelResponse, Runtime, UsageError, decision
from openprogram.evaluation.journal import JournalMismatch
from openprogram.evaluation.results import EvaluationResult, bootstrap_interval
from openprogram.runtimes import ScriptedRuntime

PROMPT = "Route x={x}."
MENU = {"a": "A", "b": "B"}
# per row: the distribution the model gives, the name it writes, the expected pick
TABLE = [
    ({"a": 0.9, "b": 0.1}, 0.0, "a", "a"),    # right, p_pick 0.9
    ({"a": 0.6, "b": 0.3}, 0.1, "a", "b"),    # wrong, p_pick 0.6, p(expected) 0.3
    ({"a": 0.2, "b": 0.8}, 0.0, "b", "b"),    # right, p_pick 0.8
    ({"a": 0.45, "b": 0.55}, 0.0, "b", "a"),  # wrong, p_pick 0.55, p(expected) 0.45
]
ROWS = [{"x": i} for i in range(len(TABLE))]
EXPECTED = [e for *_, e in TABLE]


class Exact(Runtime):
    """Gives each row's distribution from TABLE, as a runtime with its own distribution does
    through ModelResponse.confidence; counts its calls."""
    confidence_source = "exact"

    def __init__(self, table=TABLE):
        super().__init__(name="exact-stub")
        self.table, self.calls = table, 0

    def complete(self, messages, *, tools=None, on_text=None, timeout=None, confidence=None,
                 **mode_args):
        self.calls += 1
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        probs, other, name, _ = self.table[int(re.search(r"x=(\d+)", text).group(1))]
        return ModelResponse(text=json.dumps({"call": name}), confidence={
            "probs": probs, "other": other, "source": "exact", "note": None})


def _run(**kw):
    return decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), expected=EXPECTED,
                             confidence=True, progress=False, concurrency=1, **kw)


def test_the_frame_has_the_distributions_columns():
    df = _run().to_frame()
    assert list(df["p_pick"]) == [0.9, 0.6, 0.8, 0.55]
    assert list(df["runner_up"]) == ["b", "b", "a", "a"]
    assert list(df["p_runner_up"]) == [0.1, 0.3, 0.2, 0.45]
    assert df["margin"].tolist() == pytest.approx([0.8, 0.3, 0.6, 0.1])
    assert set(df["confidence_source"]) == {"exact"}
    # a run that asked for nothing has none of them
    plain = decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), progress=False)
    assert "p_pick" not in plain.to_frame().columns and plain.mean_p_expected is None


def test_the_figures_equal_those_worked_out_by_hand():
    r = _run()
    assert r.mean_p_expected == pytest.approx((0.9 + 0.3 + 0.8 + 0.45) / 4)
    # ECE over 10 bins: one row in each of bins 9, 6, 8 and 5
    assert r.ece == pytest.approx((0.1 + 0.6 + 0.2 + 0.55) / 4)
    # Brier: Σ over options (p − [expected])², `other` never expected, averaged over rows
    by_hand = [(0.9 - 1) ** 2 + 0.1 ** 2,
               0.6 ** 2 + (0.3 - 1) ** 2 + 0.1 ** 2,
               0.2 ** 2 + (0.8 - 1) ** 2,
               (0.45 - 1) ** 2 + 0.55 ** 2]
    assert r.brier == pytest.approx(sum(by_hand) / 4)
    assert r.accuracy == 0.5
    s = r.summary
    assert s["mean_p_expected"] == pytest.approx(r.mean_p_expected)
    assert s["ece"] == pytest.approx(r.ece) and s["brier"] == pytest.approx(r.brier)


def test_the_calibration_table():
    cal = _run().calibration(bins=4)
    assert list(cal["bin"]) == ["[0.00, 0.25)", "[0.25, 0.50)", "[0.50, 0.75)", "[0.75, 1.00]"]
    assert list(cal["count"]) == [0, 0, 2, 2]
    assert cal["mean_confidence"].iloc[2] == pytest.approx((0.6 + 0.55) / 2)
    assert cal["accuracy"].iloc[2] == 0 and cal["accuracy"].iloc[3] == 1
    assert cal["mean_confidence"].iloc[3] == pytest.approx((0.9 + 0.8) / 2)
    assert cal["count"].sum() == 4
    with pytest.raises(ArgumentError, match="bins"):
        _run().calibration(bins=0)


def test_selective_accuracy_of_the_most_confident_rows():
    sel = _run().selective([0.5, 0.75, 1.0])
    assert list(sel["rows"]) == [2, 3, 4]
    assert list(sel["threshold"]) == [0.8, 0.6, 0.55]
    assert sel["accuracy"].tolist() == pytest.approx([1.0, 2 / 3, 0.5])
    one = _run().selective(0.25)
    assert list(one["rows"]) == [1] and list(one["accuracy"]) == [1.0]
    with pytest.raises(ArgumentError, match="coverage"):
        _run().selective(0)


def test_the_bootstrap_interval():
    lo, hi = _run().mean_p_expected_ci
    assert 0.3 <= lo <= 0.6125 <= hi <= 0.9
    assert bootstrap_interval([0.4] * 7) == pytest.approx((0.4, 0.4))
    assert bootstrap_interval([0.1, 0.9, 0.5]) == bootstrap_interval([0.1, 0.9, 0.5])  # seeded
    wide, narrow = bootstrap_interval([0.0, 1.0] * 5), bootstrap_interval([0.0, 1.0] * 500)
    assert (wide[1] - wide[0]) > (narrow[1] - narrow[0]) > 0


def test_without_expected_or_a_distribution_the_calls_say_what_is_missing():
    r = decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), confidence=True, progress=False)
    with pytest.raises(ArgumentError, match="expected="):
        r.calibration()
    r = decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), expected=EXPECTED,
                          progress=False)
    with pytest.raises(ArgumentError, match="confidence=True"):
        r.selective()


def test_the_figures_render_and_save_as_png(tmp_path):
    r = _run()
    fig = r.plot_calibration()
    fig.savefig(tmp_path / "cal.png")
    fig2 = r.plot_selective()
    fig2.savefig(tmp_path / "sel.png")
    for name in ("cal.png", "sel.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    counts = sorted(t.get_text() for t in ax.texts)
    assert counts == ["1", "1", "1", "1"]  # each bin's row count written over its point


def test_bad_confidence_settings_fail_once_before_any_row():
    rt = ScriptedRuntime(["never"])
    with pytest.raises(UsageError, match=re.escape("confidence=decision.Samples(n)")):
        decision.evaluate(PROMPT, MENU, ROWS, runtime=rt, confidence=True, progress=False)
    with pytest.raises(ArgumentError, match="names no option"):
        decision.evaluate(PROMPT, MENU, ROWS, runtime=rt, confidence=decision.Samples(2),
                          min_confidence=0.5, low_confidence="c", progress=False)
    with pytest.raises(UsageError, match="Samples"):
        decision.compare(PROMPT, {"x": decision.Variant(confidence=True),
                                  "y": decision.Variant()}, ROWS, options=MENU, runtime=rt,
                         progress=False)
    assert len(rt.calls) == 0


def test_the_journal_keeps_each_rows_confidence(tmp_path):
    path = tmp_path / "run.jsonl"
    first = _run(journal=path)
    again = EvaluationResult.from_journal(path)
    assert again.mean_p_expected == pytest.approx(first.mean_p_expected)
    assert again.ece == pytest.approx(first.ece) and again.brier == pytest.approx(first.brier)
    assert list(again.to_frame()["p_pick"]) == [0.9, 0.6, 0.8, 0.55]
    assert again.traces[1].confidence == first.traces[1].confidence
    # resuming the same run asks nothing again and keeps the figures
    rt = Exact()
    resumed = decision.evaluate(PROMPT, MENU, ROWS, runtime=rt, expected=EXPECTED,
                                confidence=True, progress=False, journal=path)
    assert rt.calls == 0 and resumed.mean_p_expected == pytest.approx(first.mean_p_expected)


def test_a_journal_resumes_only_the_confidence_settings_it_was_run_with(tmp_path):
    """The confidence settings are in the section's fingerprint: rows journaled without a
    distribution, or with another threshold or sampler, are not mixed into a run that asks for
    them (the calibration of the whole would mean nothing)."""
    path = tmp_path / "run.jsonl"
    _run(journal=path)
    section = [json.loads(line) for line in path.read_text().splitlines()][1]
    assert section["confidence"] == {"confidence": True}
    changed = [{"confidence": False}, {"confidence": decision.Samples(3)},
               {"min_confidence": 0.7}, {"min_confidence": 0.7, "low_confidence": "a"}]
    for kw in changed:
        rt = Exact()
        kw = {"confidence": True, **kw}
        with pytest.raises(JournalMismatch, match=r"confidence setting \(confidence=, "
                                                  r"min_confidence=, low_confidence=\)"):
            decision.evaluate(PROMPT, MENU, ROWS, runtime=rt, expected=EXPECTED,
                              progress=False, journal=path, **kw)
        assert rt.calls == 0


def test_a_journal_of_a_run_without_confidence_keeps_its_fingerprint(tmp_path):
    """A run that asks for no distribution fingerprints its section as before the confidence
    settings were counted, so a journal written then still resumes."""
    from openprogram.evaluation.journal import fingerprint
    path = tmp_path / "plain.jsonl"
    decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), progress=False, journal=path)
    section = [json.loads(line) for line in path.read_text().splitlines()][1]
    assert section["confidence"] is None
    # the section as it was fingerprinted before confidence settings counted (repair= counts
    # since issue 39: a run at the default level journals "safe")
    before = {k: section[k] for k in ("prompt", "menu", "mode", "runtime", "repair")}
    assert section["fingerprint"] == fingerprint(before)
    samples = fingerprint({**before, "confidence": {"confidence": {"samples": 3,
                                                                   "temperature": 1.0,
                                                                   "fallback": False}}})
    assert samples != section["fingerprint"]
    rt = Exact()
    decision.evaluate(PROMPT, MENU, ROWS, runtime=rt, progress=False, journal=path)
    assert rt.calls == 0


def test_aevaluate_with_samples():
    rt = ScriptedRuntime(rule='{"call": "a"}')
    r = asyncio.run(decision.aevaluate(PROMPT, MENU, ROWS, runtime=rt, expected=EXPECTED,
                                       confidence=decision.Samples(3), progress=False))
    assert len(rt.calls) == 12
    assert list(r.to_frame()["p_pick"]) == [1.0] * 4
    assert r.mean_p_expected == pytest.approx(0.5) and r.brier == pytest.approx(1.0)


def test_compare_ranks_by_mean_p_expected_and_says_when_intervals_overlap():
    better = [({"a": 0.95, "b": 0.05}, 0.0, "a", "a"), ({"a": 0.05, "b": 0.95}, 0.0, "b", "b"),
              ({"a": 0.1, "b": 0.9}, 0.0, "b", "b"), ({"a": 0.9, "b": 0.1}, 0.0, "a", "a")]
    c = decision.compare(PROMPT, {"old": Exact(), "new": Exact(better)}, ROWS, options=MENU,
                         expected=EXPECTED, confidence=True, progress=False)
    ranking = c.ranking
    assert list(ranking.index) == ["new", "old"]
    assert ranking.loc["new", "mean_p_expected"] == pytest.approx(0.925)
    assert ranking.loc["old", "accuracy"] == 0.5 and ranking.loc["new", "accuracy"] == 1.0
    lo_new, lo_old = ranking.loc["new", "lo"], ranking.loc["old", "hi"]
    assert (ranking.loc["new", "overlaps"] == ["old"]) == (lo_new <= lo_old)
    same = decision.compare(PROMPT, {"one": Exact(), "two": Exact()}, ROWS, options=MENU,
                            expected=EXPECTED, confidence=True, progress=False)
    assert same.ranking.loc["one", "overlaps"] == ["two"]
    assert "overlaps 'two'" in repr(same) and "do not tell them apart" in repr(same)
