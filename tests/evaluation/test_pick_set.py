"""`pick_set=` (issue 53): a decision judged by a calibrated pick-set policy resolves when the set
is its pick alone, and otherwise routes to `low_confidence=` or fails as `low_confidence` with
the set; the trace records the set; `evaluate` (and a `Variant`, the magics) take it and report
`coverage` and `mean_set_size` on rows the policy was not fitted on; a decision asked otherwise
than the policy was fitted on is refused, naming both."""
import json
import re

import pytest

from openprogram import (
    ArgumentError,
    DecisionError,
    ModelResponse,
    Runtime,
    UsageError,
    Variant,
    compare,
    decision,
)
from openprogram.evaluation.journal import JournalMismatch
from openprogram.evaluation.results import EvaluationResult

PROMPT = "Route ticket {x}."
MENU = {"a": ("A", "first"), "b": ("B", "second"), "c": ("C", "third"),
        "human": ("HUMAN", "a person looks at it")}


def dist(a, b, c):
    return {"a": a, "b": b, "c": c, "human": round(1 - a - b - c, 10)}


# Calibration rows, expected `a`: p(a) from 0.55 to 0.99, so 1 - p(a) runs 0.01 ... 0.45; at
# alpha = 0.2 over these 9 rows the rank is ceil(10 * 0.8) = 8: qhat = 0.4, threshold 0.6.
CALIBRATION = [dist(p, (1 - p) * 0.7, (1 - p) * 0.2) for p in
               (0.99, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.55)]
# The rows a decision meets afterwards
SURE = dist(0.9, 0.05, 0.03)            # set {a}: resolves a
UNSURE = dist(0.62, 0.3, 0.05)          # set {a}: 0.62 clears 0.6, 0.3 does not
SPLIT = dist(0.4, 0.35, 0.2)            # set {}: no option clears 0.6
OTHER = dist(0.05, 0.9, 0.02)           # set {b}: resolves b


class Exact(Runtime):
    """Gives row x the distribution `table[x]`, writing its most probable option."""
    confidence_source = "exact"
    modes = frozenset({"menu", "json_schema"})   # a reply in menu form reads in either

    def __init__(self, table, name="exact-stub"):
        super().__init__(name=name)
        self.table, self.calls = table, 0

    def complete(self, messages, *, confidence=None, **kw):
        self.calls += 1
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        probs = self.table[int(re.search(r"ticket (\d+)", text).group(1))]
        return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                             confidence={"probs": probs, "other": 0.0, "source": "exact"})


TABLE = CALIBRATION + [SURE, UNSURE, SPLIT, OTHER]
EXPECTED = ["a"] * 9 + ["a", "b", "a", "b"]


@pytest.fixture(scope="module")
def policy():
    result = decision.evaluate(PROMPT, MENU, [{"x": i} for i in range(9)],
                               runtime=Exact(TABLE), expected=EXPECTED[:9], confidence=True,
                               progress=False, concurrency=1)
    fitted = result.conformal(alpha=0.2)
    assert fitted.rank == 8 and fitted.threshold == pytest.approx(0.6)
    return fitted


def make(x, policy, **kw):
    return decision.make(PROMPT.format(x=x), MENU, runtime=Exact(TABLE), pick_set=policy, **kw)


def test_a_set_of_the_pick_alone_resolves_it_and_the_trace_records_the_set(policy):
    assert make(9, policy) == "A"
    conf = decision.last_trace().confidence
    assert conf.pick_set == ("a",) and conf.pick == "a"
    assert "pick_set=['a']" in repr(conf)
    assert "pick set (pick_set=): a" in \
        decision.last_trace()._repr_mimebundle_()["text/html"]
    assert make(12, policy) == "B"
    assert decision.last_trace().confidence.pick_set == ("b",)
    # confidence= was set from the policy: the decision asked for the runtime's distribution
    assert decision.last_trace().confidence.source == "exact"


def test_a_set_that_is_not_the_pick_alone_routes_to_low_confidence(policy):
    assert make(11, policy, low_confidence="human") == "HUMAN"   # the empty set
    trace = decision.last_trace()
    att = trace.attempts[-1]
    assert att.confidence.pick_set == () and att.low_pick == "a" and att.chosen == "human"
    assert trace.status == "resolved" and len(trace.attempts) == 1   # no re-ask


def test_without_low_confidence_the_decision_fails_with_the_set(policy):
    # p(a) = 0.62 clears the threshold, p(b) = 0.3 does not: {a} resolves; a wider set fails
    assert make(10, policy) == "A"
    wide = dist(0.65, 0.33, 0.01)
    rt = Exact([wide])
    loose = policy.__class__(**{**policy.__dict__, "qhat": 0.7})   # threshold 0.3: {a, b}
    with pytest.raises(DecisionError) as info:
        decision.make(PROMPT.format(x=0), MENU, runtime=rt, pick_set=loose)
    err = info.value
    assert err.kind == "low_confidence" and err.pick_set == ("a", "b")
    assert "the pick set (options at p >= 0.3" in str(err) and "['a', 'b']" in str(err)
    assert "not the pick alone" in str(err) and ".pick_set" in str(err)
    assert err.confidence.pick_set == ("a", "b")
    assert err.trace.attempts[-1].confidence.pick_set == ("a", "b")   # the whole trace kept
    assert len(err.trace.attempts) == 1


def test_evaluate_reports_coverage_and_set_size_on_rows_the_policy_was_not_fitted_on(policy):
    rows = [{"x": i} for i in range(len(TABLE))]
    result = decision.evaluate(PROMPT, MENU, rows, runtime=Exact(TABLE), expected=EXPECTED,
                               pick_set=policy, low_confidence="human", progress=False,
                               concurrency=1)
    assert result.pick_set is policy
    # the 9 calibration rows are left out; of the other 4: {a} (a: in), {a} (b: out),
    # {} (a: out), {b} (b: in)
    assert result.coverage == pytest.approx(0.5)
    assert result.mean_set_size == pytest.approx(0.75)
    assert result.pick_set_figures()["rows"] == 4
    assert result.picks[9:] == ["a", "a", "human", "b"]
    assert [t.confidence.pick_set for t in result.traces[9:]] == [("a",), ("a",), (), ("b",)]
    plain = decision.evaluate(PROMPT, MENU, rows, runtime=Exact(TABLE), expected=EXPECTED,
                              confidence=True, progress=False)
    assert plain.coverage is None and plain.mean_set_size is None
    assert plain.pick_set_figures(policy) == result.pick_set_figures()


def test_a_journal_keeps_the_policy_and_refuses_another(policy, tmp_path):
    path = tmp_path / "run.jsonl"
    rows = [{"x": i} for i in range(len(TABLE))]
    first = decision.evaluate(PROMPT, MENU, rows, runtime=Exact(TABLE), expected=EXPECTED,
                              pick_set=policy, low_confidence="human", progress=False,
                              journal=path)
    loaded = EvaluationResult.from_journal(path)
    assert loaded.pick_set == policy and loaded.coverage == first.coverage
    assert loaded.traces[11].confidence.pick_set == ()
    other = policy.__class__(**{**policy.__dict__, "qhat": 0.5})
    with pytest.raises(JournalMismatch, match="confidence setting"):
        decision.evaluate(PROMPT, MENU, rows, runtime=Exact(TABLE), expected=EXPECTED,
                          pick_set=other, low_confidence="human", progress=False,
                          journal=path)


def test_a_variant_takes_a_pick_set(policy):
    rows = [{"x": i} for i in range(len(TABLE))]
    lined = compare(PROMPT, {"calibrated": Variant(pick_set=policy, low_confidence="human"),
                             "plain": Variant(confidence=True)}, rows, options=MENU,
                    runtime=Exact(TABLE), expected=EXPECTED, progress=False, concurrency=1)
    assert lined["calibrated"].coverage == pytest.approx(0.5)
    assert lined["plain"].coverage is None
    assert lined["calibrated"].picks[11] == "human" and lined["plain"].picks[11] == "a"


def test_a_decision_asked_otherwise_is_refused_naming_both(policy):
    rt = Exact(TABLE)
    with pytest.raises(ArgumentError, match=r"fitted on the options \['a', 'b', 'c', "
                                            r"'human'\], and this decision's are \['a', 'b'\]"):
        decision.make("Route ticket 9.", {"a": "A", "b": "B"}, runtime=rt, pick_set=policy)
    edited = {**MENU, "a": ("A", "the first one")}
    with pytest.raises(ArgumentError, match="same option names with another menu"):
        decision.make("Route ticket 9.", edited, runtime=rt, pick_set=policy)
    with pytest.raises(ArgumentError, match="fitted on decisions asked in mode 'menu', and this "
                                            "one is asked in mode 'json_schema'"):
        decision.make("Route ticket 9.", MENU, runtime=rt, pick_set=policy, mode="json_schema")
    with pytest.raises(ArgumentError, match=r"this decision asks for distributions counted "
                                            r"from Samples\(3\)"):
        decision.make("Route ticket 9.", MENU, runtime=rt, pick_set=policy,
                      confidence=decision.Samples(3))
    with pytest.raises(UsageError, match="a decision takes one threshold"):
        decision.make("Route ticket 9.", MENU, runtime=rt, pick_set=policy, min_confidence=0.5)
    with pytest.raises(ArgumentError, match="low_confidence='nobody'.*the pick set is not the "
                                            "pick alone"):
        decision.make("Route ticket 9.", MENU, runtime=rt, pick_set=policy,
                      low_confidence="nobody")
    with pytest.raises(UsageError, match="a shortlist shows each request a part of it"):
        decision.make("Route ticket 9.", MENU, runtime=rt, pick_set=policy, shortlist=2)
    with pytest.raises(UsageError, match=r"pick_set=\.\.\.\) takes a PickSetPolicy"):
        decision.make("Route ticket 9.", MENU, runtime=rt, pick_set=0.6)
    with pytest.raises(ArgumentError, match="this decision's are"):
        decision.evaluate(PROMPT, {"a": "A"}, [{"x": 9}], runtime=rt, pick_set=policy,
                          progress=False)
    assert rt.calls == 0   # all refused before any model call


def test_an_agent_turn_takes_a_pick_set(policy):
    from openprogram import agent
    rt = Exact(TABLE)
    assert agent(PROMPT.format(x=9), options=MENU, runtime=rt, pick_set=policy) == "A"
    assert decision.last_trace().confidence.pick_set == ("a",)
    assert agent(PROMPT.format(x=11), options=MENU, runtime=rt, pick_set=policy,
                 low_confidence="human") == "HUMAN"
