"""Pick sets with a guarantee (issue 53): `EvaluationResult.conformal(alpha)` fits the threshold of
split conformal prediction, checked here against a hand computation; the sets it makes, their
coverage and size on rows it was not fitted on (`pick_set_figures`); and every bad input gets an
error that names it: alpha outside (0, 1), too few calibration rows for the alpha asked, an
evaluation without distributions or expected picks, a decision asked another way than the
policy was fitted on."""
import json
import math
import re

import pytest

from openprogram import ArgumentError, ModelResponse, Runtime, UsageError, decision
from openprogram.decision.conformal import PickSetPolicy, min_rows, quantile_rank, text_key
from openprogram.decision.options import normalize, render_menu

PROMPT = "Route ticket {x}."
MENU = {"a": ("A", "first"), "b": ("B", "second"), "c": ("C", "third")}
# p(a), p(b), p(c) of each row (expected: a): the scores 1 - p(a) are 0.1, 0.2, ..., 0.9
P_A = [0.9, 0.8, 0.95, 0.6, 0.3, 0.99, 0.7, 0.85, 0.5]


class Exact(Runtime):
    """Gives row x the distribution `table[x]` (a dict over MENU), picking its top option."""
    confidence_source = "exact"

    def __init__(self, table):
        super().__init__(name="exact-stub")
        self.table = table

    def complete(self, messages, *, confidence=None, **kw):
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        probs = self.table[int(re.search(r"ticket (\d+)", text).group(1))]
        return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                             confidence={"probs": probs, "other": 0.0, "source": "exact"})


def spread(p_a):
    """A distribution with p(a) given, the rest split 2:1 between b and c."""
    return {"a": p_a, "b": (1 - p_a) * 2 / 3, "c": (1 - p_a) / 3}


def evaluated(table, expected, **kw):
    return decision.evaluate(PROMPT, MENU, [{"x": i} for i in range(len(table))],
                             runtime=Exact(table), expected=expected, confidence=True,
                             progress=False, concurrency=1, **kw)


def test_the_threshold_is_the_hand_computed_quantile():
    result = evaluated([spread(p) for p in P_A], ["a"] * len(P_A))
    policy = result.conformal(alpha=0.2)
    # by hand: scores 1 - p(a) sorted are 0.01, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7;
    # n = 9, alpha = 0.2: the rank is ceil((9 + 1) * 0.8) = 8, so qhat = 0.5, threshold 0.5
    assert policy.n == 9 and policy.rank == 8
    assert policy.qhat == pytest.approx(0.5) and policy.threshold == pytest.approx(0.5)
    assert policy.alpha == 0.2 and policy.rows == tuple(range(9))
    # the guarantee: at least 1 - alpha, at most 1 - alpha + 1 / (n + 1) without ties
    assert policy.guarantee == pytest.approx((0.8, 0.9))
    # alpha = 0.1 asks for rank ceil(10 * 0.9) = 9: the largest score, 0.7
    strict = result.conformal(alpha=0.1)
    assert strict.rank == 9 and strict.qhat == pytest.approx(0.7)
    assert strict.threshold == pytest.approx(0.3)
    # calibrated on the first five rows only: scores 0.1, 0.2, 0.05, 0.4, 0.7; at alpha 0.5
    # the rank is ceil(6 * 0.5) = 3: the third smallest, 0.2
    assert result.conformal(0.5, rows=[4, 3, 2, 1, 0]).qhat == pytest.approx(0.2)
    assert result.conformal(0.5, rows=[0, 1, 2, 3, 4]).rows == (0, 1, 2, 3, 4)


def test_the_rank_is_computed_exactly_and_the_minimum_rows_are_ceil_one_over_alpha_minus_one():
    # (9 + 1) * (1 - 0.3) is 7.000000000000001 in binary floating point: the rank is 7
    assert quantile_rank(9, 0.3) == 7
    assert quantile_rank(19, 0.1) == 18 and quantile_rank(9, 0.1) == 9
    assert [min_rows(a) for a in (0.1, 0.2, 0.05, 0.3, 0.5)] == [9, 4, 19, 3, 1]
    # with the minimum the rank is n (the largest score); one row fewer has none
    for alpha in (0.1, 0.2, 0.05, 0.3):
        n = min_rows(alpha)
        assert quantile_rank(n, alpha) <= n and quantile_rank(n - 1, alpha) > n - 1


def test_the_sets_hold_every_option_at_the_threshold_and_a_calibration_row_its_own():
    policy = evaluated([spread(p) for p in P_A], ["a"] * 9).conformal(alpha=0.2)
    assert policy.pick_set({"a": 0.6, "b": 0.3, "c": 0.1}) == ("a",)
    assert policy.pick_set({"a": 0.5, "b": 0.5, "c": 0.0}) == ("a", "b")   # ties kept
    assert policy.pick_set({"a": 0.4, "b": 0.35, "c": 0.25}) == ()      # none is sure enough
    assert policy.pick_set({"c": 0.7, "a": 0.2, "b": 0.1}) == ("c",)
    # the row whose score is qhat holds its expected option: the same arithmetic both ways
    assert "a" in policy.pick_set(spread(0.5))


def test_coverage_and_set_size_on_rows_the_policy_was_not_fitted_on():
    table = [spread(p) for p in P_A] + [
        {"a": 0.7, "b": 0.2, "c": 0.1},    # expected a: set {a}, covered
        {"a": 0.55, "b": 0.45, "c": 0.0},  # expected b: set {a}, missed
        {"a": 0.5, "b": 0.5, "c": 0.0},    # expected b: set {a, b}, covered
        {"a": 0.2, "b": 0.2, "c": 0.6},    # expected c: set {c}, covered
    ]
    expected = ["a"] * 9 + ["a", "b", "b", "c"]
    result = evaluated(table, expected)
    policy = result.conformal(alpha=0.2, rows=list(range(9)))
    figures = result.pick_set_figures(policy)
    assert figures == {"coverage": 0.75, "mean_set_size": 1.25, "singletons": 0.75,
                       "empty": 0.0, "rows": 4, "rows_with_expected": 4}
    # a run without a pick set reports none, and says what to pass for figures
    assert result.coverage is None and result.mean_set_size is None
    with pytest.raises(ArgumentError, match="pick_set_figures\\(policy\\)"):
        result.pick_set_figures()
    # a row of another evaluation with the same request counts as fitted on: left out
    again = evaluated(table, expected)
    assert again.pick_set_figures(policy)["rows"] == 4


def test_alpha_outside_zero_one_is_refused():
    result = evaluated([spread(p) for p in P_A], ["a"] * 9)
    for bad in (0, 1, -0.1, 1.5, float("nan"), "0.1", True, None):
        with pytest.raises(ArgumentError, match=r"conformal\(alpha=...\) is the share of rows "
                                                r"whose pick set may miss"):
            result.conformal(alpha=bad)


def test_too_few_calibration_rows_names_the_minimum():
    result = evaluated([spread(p) for p in P_A[:8]], ["a"] * 8)
    with pytest.raises(ArgumentError, match=r"conformal\(alpha=0.1\) needs at least 9 "
                                            r"calibration rows \(ceil\(1/alpha\) - 1\).*has 8"):
        result.conformal(alpha=0.1)
    assert result.conformal(alpha=0.2).n == 8
    with pytest.raises(ArgumentError, match="needs at least 4 calibration rows.*has 3"):
        result.conformal(alpha=0.2, rows=[0, 1, 2])


def test_rows_that_cannot_calibrate_are_named():
    result = evaluated([spread(p) for p in P_A], ["a"] * 8 + [None])
    with pytest.raises(ArgumentError, match="row 8 has no distribution and expected pick"):
        result.conformal(alpha=0.5, rows=[0, 8])
    with pytest.raises(ArgumentError, match="99 is not an input position"):
        result.conformal(alpha=0.5, rows=[99])
    with pytest.raises(ArgumentError, match="list of input positions"):
        result.conformal(alpha=0.5, rows="0,1")
    assert result.conformal(alpha=0.2).n == 8   # the unlabelled row is left out


def test_an_evaluation_without_distributions_or_labels_says_what_to_pass():
    rt = Exact([spread(p) for p in P_A])
    rows = [{"x": i} for i in range(9)]
    plain = decision.evaluate(PROMPT, MENU, rows, runtime=rt, expected=["a"] * 9,
                              progress=False)
    with pytest.raises(ArgumentError, match=r"confidence=True\) or confidence="):
        plain.conformal(0.1)
    unlabelled = decision.evaluate(PROMPT, MENU, rows, runtime=rt, confidence=True,
                                   progress=False)
    with pytest.raises(ArgumentError, match=r"expected=\.\.\."):
        unlabelled.conformal(0.1)


def test_a_policy_refuses_a_decision_asked_another_way_naming_both():
    policy = evaluated([spread(p) for p in P_A], ["a"] * 9).conformal(alpha=0.2)
    names, menu = list(MENU), render_menu(normalize(MENU))
    assert policy.options == ("a", "b", "c") and policy.menu == text_key(menu)
    assert (policy.mode, policy.source, policy.samples) == ("menu", "exact", None)
    policy.check(names, menu, "menu", "native", None)   # as fitted: no error
    with pytest.raises(ArgumentError, match=r"fitted on the options \['a', 'b', 'c'\], and "
                                            r"this decision's are \['a', 'b'\]"):
        policy.check(["a", "b"], menu, "menu", "native", None)
    edited = render_menu(normalize({**MENU, "a": ("A", "the first one")}))
    with pytest.raises(ArgumentError, match=f"another menu \\(menu {policy.menu}, this one "
                                            f"{text_key(edited)}\\)"):
        policy.check(names, edited, "menu", "native", None)
    with pytest.raises(ArgumentError, match="fitted on decisions asked in mode 'menu', and "
                                            "this one is asked in mode 'json_schema'"):
        policy.check(names, menu, "json_schema", "native", None)
    with pytest.raises(ArgumentError, match=r"fitted on the runtime's own distribution "
                                            r"\(confidence=True\) and this decision asks for "
                                            r"distributions counted from Samples\(5\)"):
        policy.check(names, menu, "menu", "samples", 5)


def test_a_policy_is_plain_data_and_says_what_it_promises():
    policy = evaluated([spread(p) for p in P_A], ["a"] * 9).conformal(alpha=0.2)
    data = json.loads(json.dumps(policy.to_dict()))
    assert PickSetPolicy.from_dict(data) == policy
    assert data["keys"] == sorted(text_key(PROMPT.format(x=i)) for i in range(9))
    assert repr(policy) == ("PickSetPolicy(alpha=0.2: an option is in the set at p >= 0.5; "
                            "the set holds the right option on >= 80% (<= 90.0%) of rows like "
                            "the 9 it was fitted on; 3 options, mode 'menu', the runtime's own "
                            "distribution (confidence=True))")
    assert policy.confidence_setting() is True
    with pytest.raises(UsageError, match="not a pick-set policy's data"):
        PickSetPolicy.from_dict({"alpha": 0.1})
    samples = PickSetPolicy(alpha=0.1, qhat=0.4, n=9, rank=9, options=("a",), menu="m",
                            mode="menu", source="samples", samples=7)
    assert samples.confidence_setting() == decision.Samples(7)
    assert math.isclose(samples.threshold, 0.6)
