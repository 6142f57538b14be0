"""`CascadeRuntime([small, large], min_confidence=...)` (issue 35): the large runtime is asked only
when the small one's pick is below the threshold; the attempt records every stage asked, the
tokens are all of theirs, and `evaluate` counts the rows each runtime answered and the tokens it
spent."""
import json

import pytest

from openprogram import ArgumentError, ModelResponse, Runtime, UsageError, decision
from openprogram.runtimes import CascadeRuntime, ScriptedRuntime


class Sure(Runtime):
    """A small model with its own distribution: it picks `name` with probability `p`."""
    confidence_source = "exact"

    def __init__(self, by_prompt):
        super().__init__(name="small")
        self.by_prompt, self.calls = by_prompt, 0

    def complete(self, messages, *, tools=None, on_text=None, timeout=None, confidence=None,
                 **kw):
        self.calls += 1
        text = messages[-1]["content"]
        text = text if isinstance(text, str) else text[0]["text"]
        name, p = next(v for k, v in self.by_prompt.items() if k in text)
        rest = [n for n in confidence if n != name]
        probs = {name: p, **{n: (1 - p) / len(rest) for n in rest}}
        return ModelResponse(text=json.dumps({"call": name}), confidence={
            "probs": probs, "other": 0.0, "source": "exact", "note": None},
            usage={"input_tokens": 10, "output_tokens": 1})


MENU = {"a": "A", "b": "B"}


def large(replies):
    """The large model: scripted replies, each reporting 100 tokens in and 5 out."""
    return ScriptedRuntime([ModelResponse(text=r, usage={"input_tokens": 100,
                                                         "output_tokens": 5}) for r in replies])


def test_the_large_runtime_is_asked_only_below_the_threshold():
    small, big = Sure({"easy": ("a", 0.9), "hard": ("a", 0.55)}), large(['{"call": "b"}'])
    rt = CascadeRuntime([small, big], min_confidence=0.8)
    assert decision.make("easy one", MENU, runtime=rt) == "A"
    att = decision.last_trace().attempts[-1]
    assert [s["runtime"] for s in att.cascade] == ["small"] and att.cascade[0]["answered"]
    assert len(big.calls) == 0 and att.confidence.p_pick == 0.9

    assert decision.make("hard one", MENU, runtime=rt) == "B"
    t = decision.last_trace()
    stages = t.attempts[-1].cascade
    assert [(s["runtime"], s["pick"], s["answered"]) for s in stages] == [
        ("small", "a", False), ("scripted", "b", True)]
    assert stages[0]["p_pick"] == pytest.approx(0.55) and stages[1]["p_pick"] is None
    assert len(big.calls) == 1
    assert t.usage() == {"input_tokens": 110, "output_tokens": 6}


def test_samples_make_any_runtime_a_first_stage():
    small = ScriptedRuntime(['{"call": "a"}', '{"call": "b"}', '{"call": "a"}'])
    big = large(['{"call": "b"}'])
    rt = CascadeRuntime([small, big], min_confidence=0.8, confidence=decision.Samples(3))
    assert decision.make("Pick.", MENU, runtime=rt) == "B"
    stages = decision.last_trace().attempts[-1].cascade
    assert stages[0]["p_pick"] == pytest.approx(2 / 3) and len(small.calls) == 3
    assert stages[0]["confidence"]["source"] == "samples"


def test_evaluate_counts_the_rows_each_runtime_answered_and_its_tokens():
    small = Sure({"x=0": ("a", 0.95), "x=1": ("a", 0.5), "x=2": ("b", 0.85)})
    big = large(['{"call": "b"}'])
    rt = CascadeRuntime([small, big], min_confidence=0.8)
    r = decision.evaluate("Route x={x}.", MENU, [{"x": i} for i in range(3)], runtime=rt,
                          progress=False, concurrency=1)
    counts = r.cascade_counts
    assert counts.loc["small"].tolist() == [2, 3, 30, 3]
    assert counts.loc["scripted"].tolist() == [1, 1, 100, 5]
    assert r.picks == ["a", "b", "b"]


def test_bad_cascades_are_refused_where_written():
    with pytest.raises(UsageError, match="two or more"):
        CascadeRuntime([large([])], min_confidence=0.5)
    with pytest.raises(ArgumentError, match=r"\(0, 1\]"):
        CascadeRuntime([Sure({}), large([])], min_confidence=0)
    with pytest.raises(UsageError, match=r"decision\.Samples\(n\)"):
        CascadeRuntime([large([]), large([])], min_confidence=0.5)
    with pytest.raises(UsageError, match="answers decisions"):
        CascadeRuntime([Sure({}), large([])], min_confidence=0.5).exec("hello")


def test_a_runtime_of_its_own_can_answer_in_stages_through_the_declared_protocol():
    # The loop asks any runtime that declares `staged` to answer a call in stages, handing it
    # the decision's own call of one stage (which reads the pick and its probability); no
    # attribute of CascadeRuntime's is looked for. Here: ask every stage, keep the surest.
    from openprogram.base.model_protocol import add_usage
    from openprogram.decision.confidence import NO_CONFIDENCE, RuntimeConfidence

    class Surest(Runtime):
        staged = True

        def __init__(self, stages):
            super().__init__(call=lambda content: "", name="surest")
            self.stages = stages

        async def answer_in_stages(self, ask):
            got = [await ask(rt, source, k == 0) for k, (rt, source) in enumerate(self.stages)]
            best = max(got, key=lambda g: g.p_pick or 0.0)
            return (best.response.__class__(text=best.response.text,
                                             usage=add_usage([g.response.usage for g in got])),
                    best.node, best.confidence,
                    [{"runtime": rt.name, "pick": g.pick, "p_pick": g.p_pick}
                     for (rt, _), g in zip(self.stages, got)])

    small = Sure({"Pick.": ("a", 0.6)})
    sure_b = Sure({"Pick.": ("b", 0.9)})
    sure_b.name = "other"
    rt = Surest([(small, RuntimeConfidence()), (sure_b, RuntimeConfidence()),
                 (large(['{"call": "a"}']), NO_CONFIDENCE)])
    assert decision.make("Pick.", MENU, runtime=rt) == "B"
    att = decision.last_trace().attempts[0]
    assert [s["runtime"] for s in att.cascade] == ["small", "other", "scripted"]
    assert [s["pick"] for s in att.cascade] == ["a", "b", "a"]
    assert att.cascade[1]["p_pick"] == 0.9 and att.confidence.pick == "b"
    assert att.usage == {"input_tokens": 120, "output_tokens": 7}
