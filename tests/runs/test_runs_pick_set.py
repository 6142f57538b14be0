"""A fork of a decision judged by a pick-set policy (`pick_set=`, a conformal threshold).

`fork(at=k, pick=...)` holds decision k to the option the user picks: no threshold judges that
pick, and the decision's `low_confidence=` option need not be on the one-option menu. A fork with
`options=` gives the decision another menu, which the policy was not fitted on: the fork stops
with the policy's own words, not with a guess that the program read the clock.
"""
from __future__ import annotations

import json
import re

import pytest

import openprogram
from openprogram import ModelResponse, Runtime, decision
from openprogram.runs import RunDiverged, with_descriptions

PROMPT = "Route ticket {x}."
MENU = {"a": ("A", "first"), "b": ("B", "second"), "human": ("HUMAN", "a person looks at it")}


def dist(a, b):
    return {"a": a, "b": b, "human": round(1 - a - b, 10)}


# expected `a` on every calibration row; the later row (9) is sure of `a`
TABLE = [dist(p, (1 - p) * 0.8) for p in (0.99, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.55)]
TABLE.append(dist(0.9, 0.08))


class Exact(Runtime):
    """Gives row x the distribution `TABLE[x]`, writing its most probable option."""
    confidence_source = "exact"
    modes = frozenset({"menu", "json_schema"})

    def __init__(self):
        super().__init__(name="exact-stub")
        self.calls = 0

    def complete(self, messages, *, confidence=None, **kw):
        self.calls += 1
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        probs = TABLE[int(re.search(r"ticket (\d+)", text).group(1))]
        return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                             confidence={"probs": probs, "other": 0.0, "source": "exact"})


@pytest.fixture(scope="module")
def recorded():
    result = decision.evaluate(PROMPT, MENU, [{"x": i} for i in range(9)], runtime=Exact(),
                               expected=["a"] * 9, confidence=True, progress=False,
                               concurrency=1)
    policy = result.conformal(alpha=0.2)

    def program():
        return decision.make(PROMPT.format(x=9), MENU, pick_set=policy,
                             low_confidence="human")
    run = openprogram.run(program, runtime=Exact())
    assert run.status == "ok" and run.decisions[0].trace.confidence.pick_set == ("a",)
    return run


def test_a_fork_held_to_a_pick_is_not_judged_by_the_decisions_pick_set(recorded):
    rt = recorded.runtime
    calls = rt.calls
    fork = recorded.fork(at=0, pick="b")
    assert fork.status == "ok" and fork.result == "B"
    assert rt.calls == calls   # an option with nothing to fill: no model call
    trace = fork.decisions[0].trace
    assert trace.chosen == "b" and trace.status == "resolved"


def test_a_fork_with_another_menu_stops_with_the_policys_words(recorded):
    with pytest.raises(RunDiverged) as info:
        recorded.fork(at=0, options=with_descriptions({"a": "the first one, said otherwise"}))
    message = str(info.value)
    assert "the program raised ArgumentError" in message and "pick_set" in message
    assert "fitted on the same option names with another menu" in message
    assert "took another path" not in message   # not the guess about the clock
    assert isinstance(info.value.__cause__, openprogram.ArgumentError)
    assert info.value.run.error is info.value.__cause__
