"""Which options the model confuses (issue 53): `confusability()` against a hand computation from
the rows' distributions (exact and counted from samples), `confused_pairs(k)` with the rows behind
each pair and the words the two options' menu lines share, the heatmap, the evaluation's view,
the errors that name what is missing, and `improve` proposing for the most confused pair first."""
import json
import math
import re

import pytest

from openprogram import ArgumentError, ModelResponse, Runtime, decision
from openprogram.evaluation.results import EvaluationResult
from openprogram.runtimes import ScriptedRuntime

PROMPT = "Route ticket {x}."
MENU = {"refund": ("REFUND", "give the customer their money back"),
        "credit": ("CREDIT", "give the customer store credit instead of money"),
        "track": ("TRACK", "tell the customer where the parcel is")}
# per row: the distribution (refund, credit, track), the mass on no option, the expected pick
TABLE = [
    ((0.7, 0.3, 0.0), 0.0, "refund"),
    ((0.4, 0.5, 0.1), 0.0, "refund"),
    ((0.6, 0.3, 0.0), 0.1, "credit"),
    ((0.1, 0.8, 0.1), 0.0, "credit"),
    ((0.0, 0.0, 1.0), 0.0, "track"),
    ((0.1, 0.0, 0.9), 0.0, "track"),
    ((0.2, 0.2, 0.6), 0.0, "track"),
]
ROWS = [{"x": i} for i in range(len(TABLE))]
EXPECTED = [e for *_, e in TABLE]


class Exact(Runtime):
    """Gives each row's distribution from TABLE (picking its most probable option)."""
    confidence_source = "exact"

    def __init__(self, table=TABLE):
        super().__init__(name="exact-stub")
        self.table = table

    def complete(self, messages, *, tools=None, on_text=None, timeout=None, confidence=None,
                 **mode_args):
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        ps, other, _ = self.table[int(re.search(r"ticket (\d+)", text).group(1))]
        probs = dict(zip(MENU, ps))
        return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                             confidence={"probs": probs, "other": other, "source": "exact"})


def evaluated(**kw):
    return decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), expected=EXPECTED,
                             confidence=True, progress=False, concurrency=1, **kw)


def hand():
    """The table worked out by hand: per expected option, the mean of each column over its rows."""
    out = {}
    for e in MENU:
        mine = [(ps, other) for ps, other, exp in TABLE if exp == e]
        out[e] = {o: sum(ps[k] for ps, _ in mine) / len(mine) for k, o in enumerate(MENU)}
        out[e]["(no option)"] = sum(other for _, other in mine) / len(mine)
        out[e]["rows"] = len(mine)
    return out


def test_confusability_equals_the_hand_computation():
    table = evaluated().confusability()
    assert list(table.index) == list(MENU)
    assert list(table.columns) == [*MENU, "(no option)", "rows"]
    want = hand()
    for e in MENU:
        for col in [*MENU, "(no option)", "rows"]:
            got = table.loc[e, col]
            if col == e:
                assert math.isnan(got)   # the option's own mass is left out of the map
            else:
                assert got == pytest.approx(want[e][col]), (e, col)
    # by hand, written out: refund rows gave credit (0.3 + 0.5) / 2, credit rows refund
    # (0.6 + 0.1) / 2, track rows refund (0 + 0.1 + 0.2) / 3
    assert table.loc["refund", "credit"] == pytest.approx(0.4)
    assert table.loc["credit", "refund"] == pytest.approx(0.35)
    assert table.loc["track", "refund"] == pytest.approx(0.1)
    assert table.loc["credit", "(no option)"] == pytest.approx(0.05)
    assert "mathjax_ignore" in table._repr_html_()


def test_a_distribution_counted_from_samples_reads_the_same():
    # four samples a row, in order: the counts make each row's distribution
    picks = [["refund", "refund", "credit", "credit"],
             ["credit", "refund", "credit", "credit"],
             ["track", "track", "track", "refund"]]
    rt = ScriptedRuntime([json.dumps({"call": p}) for row in picks for p in row])
    result = decision.evaluate("Route ticket {x}.", MENU, [{"x": i} for i in range(3)],
                               runtime=rt, expected=["refund", "credit", "track"],
                               confidence=decision.Samples(4), progress=False, concurrency=1)
    table = result.confusability()
    assert table.loc["refund", "credit"] == pytest.approx(0.5)
    assert table.loc["credit", "refund"] == pytest.approx(0.25)
    assert table.loc["track", "refund"] == pytest.approx(0.25)
    assert table.loc["track", "credit"] == 0 and list(table["rows"]) == [1, 1, 1]
    assert "(no option)" not in table.columns   # no sample named no option


def test_confused_pairs_rank_the_pairs_and_show_the_rows_and_the_shared_words():
    pairs = evaluated().confused_pairs(2)
    assert list(pairs.columns) == ["option_a", "option_b", "mass", "a_to_b", "b_to_a", "rows",
                                   "shared_words"]
    top, second = pairs.to_dict("records")
    # refund / credit: mass (0.4 * 2 + 0.35 * 2) / 4; refund / track: (0.05 * 2 + 0.1 * 3) / 5
    assert (top["option_a"], top["option_b"]) == ("refund", "credit")
    assert top["mass"] == pytest.approx(0.375)
    assert top["a_to_b"] == pytest.approx(0.4) and top["b_to_a"] == pytest.approx(0.35)
    assert top["rows"] == [2, 1, 0, 3]   # the credit row at 0.6 first, then 0.5, 0.3, 0.1
    # what their menu lines share, with the words every option says ("customer") left out
    assert top["shared_words"] == ["give", "money"]
    assert (second["option_a"], second["option_b"]) == ("refund", "track")
    assert second["mass"] == pytest.approx(0.4 / 5) and second["rows"] == [6, 1, 5]
    assert len(evaluated().confused_pairs(10)) == 3
    with pytest.raises(ArgumentError, match="confused_pairs\\(k=...\\)"):
        evaluated().confused_pairs(0)


def test_the_heatmap_and_the_evaluations_view(tmp_path):
    result = evaluated()
    fig = result.plot_confusability()
    fig.savefig(tmp_path / "confusability.png")
    assert (tmp_path / "confusability.png").stat().st_size > 1000
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["refund (2)", "credit (2)",
                                                            "track (3)"]
    assert "0.40" in [t.get_text() for t in ax.texts]
    html = result._repr_html_()
    assert "most confused pairs" in html and "give, money" in html


def test_the_view_escapes_the_option_texts():
    menu = {"<b>a</b>": ("A", "<script>x()</script> money"), "b": ("B", "money <i>back</i>")}
    table = [((0.6, 0.4), 0.0, "<b>a</b>"), ((0.3, 0.7), 0.0, "b")]

    class Hostile(Exact):
        def complete(self, messages, **kw):
            text = messages[-1]["content"]
            ps, other, _ = table[int(re.search(r"ticket (\d+)", text).group(1))]
            probs = dict(zip(menu, ps))
            return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                                 confidence={"probs": probs, "other": other, "source": "exact"})
    result = decision.evaluate(PROMPT, menu, [{"x": 0}, {"x": 1}], runtime=Hostile(),
                               expected=["<b>a</b>", "b"], confidence=True, progress=False)
    html = result._repr_html_()
    assert "most confused pairs" in html
    assert "<script>" not in html and "<b>a</b>" not in html and "&lt;b&gt;a&lt;/b&gt;" in html


def test_a_journaled_run_gives_the_same_map(tmp_path):
    path = tmp_path / "run.jsonl"
    first = evaluated(journal=path)
    loaded = EvaluationResult.from_journal(path)
    assert loaded.confusability().equals(first.confusability())
    assert loaded.confused_pairs().equals(first.confused_pairs())


def test_without_confidence_or_expected_picks_the_error_names_what_to_pass():
    plain = decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), expected=EXPECTED,
                              progress=False)
    for call in (plain.confusability, plain.confused_pairs, plain.plot_confusability):
        with pytest.raises(ArgumentError, match=r"confidence=True\) or "
                                                r"confidence=decision.Samples\(n\)"):
            call()
    unlabelled = decision.evaluate(PROMPT, MENU, ROWS, runtime=Exact(), confidence=True,
                                   progress=False)
    with pytest.raises(ArgumentError, match=r"expected=\.\.\."):
        unlabelled.confusability()
    assert "most confused" not in plain._repr_html_()


def test_improve_proposes_for_the_most_confused_pair_first():
    """Four teams; the picker's distribution puts 0.4 on `credit` for `refund` requests and
    the other way round (their menus share "money") though it picks right, and picks `login`
    for one `track` request (a wrong pick, but little mass over track's rows): the first
    candidates are for refund and credit, where counting wrong picks would put track and
    login first, and the proposer is told which option each is confused with."""
    menu = {"track": ("TRACK", "where a parcel is"), "login": ("LOGIN", "password trouble"),
            "refund": ("REFUND", "money back"), "credit": ("CREDIT", "money as store credit")}

    class Confuser(Runtime):
        confidence_source = "exact"

        def complete(self, messages, *, confidence=None, **kw):
            text = messages[-1]["content"]
            label = re.search(r"about (\w+)", text).group(1)
            probs = dict.fromkeys(menu, 0.0)
            if label in ("refund", "credit"):
                probs.update(refund=0.4, credit=0.4)
                probs[label] = 0.6
            elif label == "track":
                probs.update(track=0.45, login=0.55) if "#0 " in text or "#4 " in text \
                    else probs.update(track=0.9, login=0.1)
            else:
                probs[label] = 1.0
            return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                                 confidence={"probs": probs, "other": 0.0, "source": "exact"})

    rows = [{"text": f"#{i} about {label}", "label": label}
            for i in range(40) for label in [list(menu)[i % 4]]]
    asked = []

    def proposer(name, description, evidence):
        asked.append((name, evidence.get("confused_with")))
        return None

    imp = decision.improve("Ticket: {text}", menu, rows, expected="label",
                           runtime=Confuser(name="confuser"), proposer=proposer,
                           confidence=True, max_examples=1, budget=2000)
    assert imp.report["measured_on"] == "mean_p_expected"
    order = list(dict.fromkeys(e["option"] for e in imp.edits))
    assert order[:2] == ["refund", "credit"]
    top = imp.report["confused_pairs"][0]
    assert top["options"] == ["refund", "credit"] and top["mass"] == pytest.approx(0.4)
    assert asked[0] == ("refund", [("credit", ["money"])])
    assert dict(asked)["credit"] == [("refund", ["money"])]
    assert dict(asked)["track"] == [("login", [])]
