"""How sure the model was (issue 35): the `Confidence` record on each attempt, `confidence=` on
every entry point, `decision.Samples(n)` for any runtime (counted, cached, replayed), the seam a
runtime with its own distribution fills (`ModelResponse.confidence`), the bad inputs, and
`min_confidence=` / `low_confidence=`."""
import asyncio
import dataclasses
import json
import math
import re

import pytest
from corehelp import pick

from openprogram import (
    ArgumentError,
    DecisionError,
    ModelResponse,
    Runtime,
    UsageError,
    agent,
    decision,
)
from openprogram.runtimes import CachedRuntime, RecordingRuntime, ReplayRuntime, ScriptedRuntime

A, B = pick("A"), pick("B")
MENU = {"A": "picked A", "B": "picked B"}


# -- the record -------------------------------------------------------------------------------

def test_the_record_derives_its_figures_from_the_distribution():
    c = decision.Confidence({"a": 0.5, "b": 0.3, "c": 0.1}, other=0.1, source="exact", pick="a")
    assert c.p_pick == 0.5 and c.runner_up == "b" and c.p_runner_up == 0.3
    assert c.margin == pytest.approx(0.2)
    by_hand = -(0.5 * math.log2(0.5) + 0.3 * math.log2(0.3) + 2 * 0.1 * math.log2(0.1))
    assert c.entropy == pytest.approx(by_hand)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.other = 0.0
    assert decision.Confidence.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_a_pick_below_another_option_has_a_negative_margin():
    c = decision.Confidence({"a": 0.2, "b": 0.8}, source="samples", n=5, pick="a")
    assert c.runner_up == "b" and c.margin == pytest.approx(-0.6)


# -- samples ----------------------------------------------------------------------------------

def test_three_a_and_two_b_give_point_six_and_resolve_a():
    rt = ScriptedRuntime([A, A, B, A, B])
    assert decision.make("Pick.", MENU, runtime=rt, confidence=decision.Samples(5)) == "picked A"
    conf = decision.last_trace().confidence
    assert conf.probs == {"A": 0.6, "B": 0.4} and conf.other == 0
    assert (conf.source, conf.n, conf.pick) == ("samples", 5, "A")
    # each sample is its own call: its index, how many samples there are (so a runtime may
    # draw them in one request) and the temperature go with it
    assert [c.mode_args for c in rt.calls] == [{"sample": i, "samples": 5, "temperature": 1.0}
                                              for i in range(5)]


def test_a_tie_resolves_the_pick_drawn_first():
    rt = ScriptedRuntime([B, A, A, B])
    assert decision.make("Pick.", MENU, runtime=rt, confidence=decision.Samples(4)) == "picked B"
    assert decision.last_trace().confidence.probs == {"A": 0.5, "B": 0.5}


def test_replies_that_name_no_option_are_other():
    rt = ScriptedRuntime([pick("Z"), "no idea", A, A, B])
    decision.make("Pick.", MENU, runtime=rt, confidence=decision.Samples(5))
    conf = decision.last_trace().confidence
    assert conf.probs == {"A": 0.4, "B": 0.2} and conf.other == pytest.approx(0.4)
    assert sum(conf.probs.values()) + conf.other == pytest.approx(1, abs=1e-12)


def test_the_tokens_of_every_sample_are_on_the_trace():
    def model(content):
        return ModelResponse(text=A, usage={"input_tokens": 10, "output_tokens": 2})
    decision.make("Pick.", MENU, runtime=Runtime(call=model), confidence=decision.Samples(5))
    assert decision.last_trace().usage() == {"input_tokens": 50, "output_tokens": 10}


def test_async_samples_are_drawn_concurrently():
    flying, most = 0, 0
    gate = asyncio.Event()
    replies = iter([A, B, A, B, A])

    async def model(content):
        nonlocal flying, most
        flying += 1
        most = max(most, flying)
        if most == 5:
            gate.set()
        await gate.wait()   # every sample waits until all five are in flight
        flying -= 1
        return next(replies)

    async def main():
        return await asyncio.wait_for(decision.amake(
            "Pick.", MENU, runtime=Runtime(call=model), confidence=decision.Samples(5)), 60)
    assert asyncio.run(main()) == "picked A"
    assert most == 5
    assert decision.last_trace().confidence.probs == {"A": 0.6, "B": 0.4}


def test_a_second_run_through_the_cache_makes_no_call(tmp_path):
    path = tmp_path / "cache.jsonl"
    first = CachedRuntime(ScriptedRuntime([A, A, B, A, B]), path)
    decision.make("Pick.", MENU, runtime=first, confidence=decision.Samples(5))
    before = decision.last_trace().confidence
    assert first.misses == 5
    inner = ScriptedRuntime([])
    again = CachedRuntime(inner, path)
    assert decision.make("Pick.", MENU, runtime=again,
                         confidence=decision.Samples(5)) == "picked A"
    assert len(inner.calls) == 0 and again.hits == 5
    after = decision.last_trace().confidence
    assert after.probs == before.probs == {"A": 0.6, "B": 0.4}
    assert decision.last_trace().attempts[-1].cached


def test_a_replay_gives_the_same_distribution(tmp_path):
    path = tmp_path / "c.jsonl"
    decision.make("Pick.", MENU, runtime=RecordingRuntime(ScriptedRuntime([B, A, B, B]), path),
                  confidence=decision.Samples(4))
    replay = ReplayRuntime(path)
    assert decision.make("Pick.", MENU, runtime=replay,
                         confidence=decision.Samples(4)) == "picked B"
    assert decision.last_trace().confidence.probs == {"A": 0.25, "B": 0.75}
    assert replay.remaining == 0


def test_agent_options_take_samples_and_refuse_them_with_tools():
    rt = ScriptedRuntime([A, B, B])
    assert agent("Pick.", options=MENU, runtime=rt,
                 confidence=decision.Samples(3)) == "picked B"
    assert decision.last_trace().confidence.probs["B"] == pytest.approx(2 / 3)

    def lookup(q: str) -> str:
        """Look q up."""
        return q
    rt = ScriptedRuntime([A])
    with pytest.raises(UsageError, match="tools"):
        agent("Pick.", options=MENU, tools=[lookup], runtime=rt, confidence=decision.Samples(3))
    assert len(rt.calls) == 0


# -- a runtime with its own distribution (the seam of docs/35-SEAM) ---------------------------

class Exact(Runtime):
    """A runtime that reports a distribution, as LlamaCppRuntime does: it is handed the menu's
    names and returns the distribution it was built with."""
    confidence_source = "exact"

    def __init__(self, reply, dist):
        super().__init__(name="exact-stub")
        self.reply, self.dist, self.asked = reply, dist, []

    def complete(self, messages, *, tools=None, on_text=None, timeout=None, confidence=None,
                 **mode_args):
        self.asked.append(confidence)
        return ModelResponse(text=self.reply, confidence=None if confidence is None
                             else self.dist)


def test_the_runtime_is_handed_the_names_and_its_numbers_become_the_record():
    rt = Exact(pick("b"), {"probs": {"b": 0.7, "a": 0.2}, "other": 0.1, "source": "exact",
                           "note": None})
    assert decision.make("Pick.", {"a": 1, "b": 2, "c": 3}, runtime=rt, confidence=True) == 2
    assert rt.asked == [["a", "b", "c"]]
    conf = decision.last_trace().confidence
    assert list(conf.probs) == ["a", "b", "c"] and conf.probs["c"] == 0
    assert (conf.pick, conf.p_pick, conf.runner_up, conf.source) == ("b", 0.7, "a", "exact")
    # without confidence= the runtime is asked for nothing
    decision.make("Pick.", {"a": 1, "b": 2, "c": 3}, runtime=rt)
    assert rt.asked[-1] is None and decision.last_trace().confidence is None


@pytest.mark.parametrize("bad", [None, "garbage", {"probs": {"a": "x", "b": 7}, "other": -1},
                                 {"probs": [], "other": None}])
def test_a_malformed_distribution_is_other_with_a_note_never_a_crash(bad):
    rt = Exact(pick("a"), bad)
    if bad is None:  # a runtime that gives nothing: a clear failure, the reply kept
        with pytest.raises(DecisionError) as info:
            decision.make("Pick.", {"a": 1, "b": 2}, runtime=rt, confidence=True)
        assert info.value.kind == "no_confidence"
        assert "Samples(5, fallback=True)" in str(info.value)
        assert info.value.trace.attempts[-1].reply == pick("a")
        return
    assert decision.make("Pick.", {"a": 1, "b": 2}, runtime=rt, confidence=True) == 1
    conf = decision.last_trace().confidence
    assert conf.other == 1.0 and conf.probs == {"a": 0.0, "b": 0.0} and conf.note


def test_probabilities_off_one_are_renormalised_and_names_off_the_menu_are_other():
    rt = Exact(pick("a"), {"probs": {"a": 0.4, "zz": 0.2}, "other": 0.2, "source": "logprobs"})
    decision.make("Pick.", {"a": 1, "b": 2}, runtime=rt, confidence=True)
    conf = decision.last_trace().confidence
    assert conf.probs["a"] == pytest.approx(0.5) and conf.other == pytest.approx(0.5)
    assert "renormalised" in conf.note and conf.source == "logprobs"


def test_samples_with_fallback_are_drawn_only_when_the_runtime_gives_nothing():
    rt = Exact(pick("a"), None)
    assert decision.make("Pick.", {"a": 1, "b": 2}, runtime=rt,
                         confidence=decision.Samples(3, fallback=True)) == 1
    conf = decision.last_trace().confidence
    assert (conf.source, conf.n, conf.probs["a"]) == ("samples", 3, 1.0)
    assert rt.asked == [["a", "b"], None, None, None]  # once natively, then three samples
    rt = Exact(pick("a"), {"probs": {"a": 0.9, "b": 0.1}, "other": 0.0, "source": "exact"})
    decision.make("Pick.", {"a": 1, "b": 2}, runtime=rt,
                  confidence=decision.Samples(3, fallback=True))
    assert decision.last_trace().confidence.source == "exact" and len(rt.asked) == 1


def test_a_wrapped_runtime_gives_its_inner_runtimes_distribution(tmp_path):
    rt = Exact(pick("a"), {"probs": {"a": 0.8, "b": 0.2}, "other": 0.0, "source": "exact"})
    cached = CachedRuntime(rt, tmp_path / "c.jsonl")
    decision.make("Pick.", {"a": 1, "b": 2}, runtime=cached, confidence=True)
    inner = Exact(pick("a"), None)
    decision.make("Pick.", {"a": 1, "b": 2},
                  runtime=CachedRuntime(inner, tmp_path / "c.jsonl"), confidence=True)
    assert inner.asked == [] and decision.last_trace().confidence.probs["a"] == 0.8


# -- min_confidence / low_confidence -----------------------------------------------------------

def test_a_low_pick_resolves_the_named_option_instead():
    menu = {"A": "picked A", "B": "picked B", "escalate": "to a person"}
    rt = ScriptedRuntime([A, A, B, A, B])
    assert decision.make("Pick.", menu, runtime=rt, confidence=decision.Samples(5),
                         min_confidence=0.7, low_confidence="escalate") == "to a person"
    att = decision.last_trace().attempts[-1]
    assert (att.chosen, att.low_pick, att.confidence.pick) == ("escalate", "A", "A")
    rt = ScriptedRuntime([A, A, B, A, A])
    assert decision.make("Pick.", menu, runtime=rt, confidence=decision.Samples(5),
                         min_confidence=0.7, low_confidence="escalate") == "picked A"


def test_a_low_pick_without_low_confidence_fails_carrying_the_distribution():
    rt = ScriptedRuntime([A, A, B, A, B])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", MENU, runtime=rt, confidence=decision.Samples(5),
                      min_confidence=0.7)
    err = info.value
    assert err.kind == "low_confidence" and err.confidence.probs == {"A": 0.6, "B": 0.4}
    assert len(rt.calls) == 5  # no re-ask: the same model asked again is as unsure
    assert err.trace.attempts[-1].confidence.p_pick == 0.6


# -- bad input: each refused at the call, before any model call --------------------------------

@pytest.mark.parametrize("kw, error, words", [
    (dict(confidence="yes"), UsageError, "True, False or decision.Samples"),
    (dict(confidence=1), UsageError, "True, False or decision.Samples"),
    (dict(confidence=True), UsageError, "confidence=decision.Samples(n)"),
    (dict(confidence=decision.Samples(2), min_confidence=0), ArgumentError, "(0, 1]"),
    (dict(confidence=decision.Samples(2), min_confidence=1.5), ArgumentError, "(0, 1]"),
    (dict(confidence=decision.Samples(2), min_confidence=True), ArgumentError, "(0, 1]"),
    (dict(min_confidence=0.5), UsageError, "needs confidence=True"),
    (dict(confidence=decision.Samples(2), min_confidence=0.5, low_confidence="C"),
     ArgumentError, "names no option"),
    (dict(confidence=decision.Samples(2), low_confidence="A"), UsageError, "min_confidence"),
])
def test_bad_confidence_arguments_are_refused_before_any_call(kw, error, words):
    rt = ScriptedRuntime([A, A, A])
    with pytest.raises(error) as info:
        decision.make("Pick.", MENU, runtime=rt, **kw)
    assert words in str(info.value)
    assert len(rt.calls) == 0


@pytest.mark.parametrize("kw", [dict(n=1), dict(n=0), dict(n=True), dict(n=2.5),
                                dict(temperature=-1), dict(temperature=float("nan")),
                                dict(fallback="yes")])
def test_bad_samples_are_refused_where_written(kw):
    with pytest.raises((ArgumentError, UsageError), match="Samples"):
        decision.Samples(**kw)


def test_tools_mode_has_no_log_probabilities_and_says_so():
    class Logprobs(Exact):
        confidence_source = "logprobs"
        modes = frozenset({"menu", "tools", "json_schema"})
    with pytest.raises(UsageError, match="no log-probabilities"):
        decision.make("Pick.", MENU, runtime=Logprobs(A, None), confidence=True, mode="tools")


# -- the trace's table and its export -----------------------------------------------------------

def test_the_attempts_table_and_the_export_carry_the_distribution():
    rt = ScriptedRuntime([A, A, B, A, B])
    decision.make("Pick.", MENU, runtime=rt, confidence=decision.Samples(5))
    t = decision.last_trace()
    row = t.to_frame().iloc[-1]
    assert (row["p_pick"], row["runner_up"], row["p_runner_up"]) == (0.6, "B", 0.4)
    assert row["margin"] == pytest.approx(0.2) and row["confidence_source"] == "samples"
    exported = json.loads(json.dumps(t.to_dict()))
    assert exported["attempts"][-1]["confidence"]["probs"] == {"A": 0.6, "B": 0.4}
    assert "confidence: Confidence(samples, n=5" in t.format_text()


def test_a_recorded_distribution_replays_with_confidence_true(tmp_path):
    path = tmp_path / "exact.jsonl"
    rt = Exact(pick("b"), {"probs": {"a": 0.25, "b": 0.75}, "other": 0.0, "source": "exact"})
    decision.make("Pick.", {"a": 1, "b": 2}, runtime=RecordingRuntime(rt, path), confidence=True)
    replay = ReplayRuntime(path)
    assert replay.confidence_source == "exact"
    assert decision.make("Pick.", {"a": 1, "b": 2}, runtime=replay, confidence=True) == 2
    conf = decision.last_trace().confidence
    assert (conf.probs, conf.source, conf.pick) == ({"a": 0.25, "b": 0.75}, "exact", "b")
    # a cassette recorded without any distribution cannot give one, and says so
    plain = tmp_path / "plain.jsonl"
    decision.make("Pick.", MENU, runtime=RecordingRuntime(ScriptedRuntime([A]), plain))
    with pytest.raises(UsageError, match=re.escape("decision.Samples(n)")):
        decision.make("Pick.", MENU, runtime=ReplayRuntime(plain), confidence=True)


def test_a_failing_async_sample_fails_the_attempt_and_cancels_the_others():
    started, cancelled = [], []

    async def model(content, sample=0):
        started.append(sample)
        if sample == 1:
            raise RuntimeError("sample 1 broke")
        try:
            await asyncio.sleep(3600)   # would hold the decision for an hour if left running
        except asyncio.CancelledError:
            cancelled.append(sample)
            raise
        return A

    async def main():
        with pytest.raises(DecisionError) as info:
            await decision.amake("Pick.", MENU, runtime=Runtime(call=model),
                                 confidence=decision.Samples(3), max_retries=0)
        await asyncio.sleep(0)
        # read before asyncio.run's own shutdown, which would cancel any task left over
        return info.value, sorted(cancelled)
    err, cancelled_in_time = asyncio.run(main())
    assert err.kind == "model_error" and "sample 1 broke" in str(err)
    assert sorted(started) == [0, 1, 2] and cancelled_in_time == [0, 2]
