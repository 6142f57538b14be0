"""A long-lived runtime holds a bounded window: after N decisions its DAG, its scripted calls and
the process's history hold at most their window, a node whose parent fell out says so, and the
window can be changed or turned off; and importing the package loads no heavier module until it
is used. Bounded by counting entries and modules, never by time or memory."""
from __future__ import annotations

import gc
import warnings
from pathlib import Path

import pytest

import openprogram
from openprogram import Agent, Runtime, decision
from openprogram.runtime.runtime import DEFAULT_WINDOW, Window
from openprogram.runtimes import ScriptedRuntime
from openprogram.trace import decision_trace as trace_mod

PICK = '{"call": "yes"}'


def decide(rt, n: int) -> None:
    for i in range(n):
        assert decision.make(f"Pick {i}.", ["yes", "no"], runtime=rt) == "yes"


@pytest.mark.rule("A2", "A3")
def test_A2_A3_after_many_decisions_the_dag_and_calls_hold_their_window():
    rt = ScriptedRuntime(rule=lambda p: PICK, window=50)
    decide(rt, 200)  # two nodes per decision: the decision and its model call
    assert len(rt.dag) == 50 and rt.dag.dropped == 350
    assert len(rt.calls) == 50 and rt.calls.dropped == 150
    assert rt.calls[-1].prompt.startswith("Pick 199.")
    assert [n.id for n in rt.dag] == list(range(351, 401))  # ids keep counting
    assert len(trace_mod.history) <= trace_mod.history.maxlen == 100


@pytest.mark.rule("A2", "A3")
def test_A2_A3_the_default_window_is_documented_and_applies_to_every_runtime():
    assert DEFAULT_WINDOW == 1000
    assert Runtime(call=lambda c: PICK).window == DEFAULT_WINDOW
    rt = ScriptedRuntime(rule=lambda p: PICK)
    assert rt.window == rt.dag.window == rt.calls.maxlen == DEFAULT_WINDOW
    decide(rt, DEFAULT_WINDOW + 5)
    assert len(rt.calls) == DEFAULT_WINDOW and len(rt.dag) == DEFAULT_WINDOW


@pytest.mark.rule("A2", "A3")
def test_A2_A3_window_none_keeps_everything_and_can_be_set_later():
    rt = ScriptedRuntime(rule=lambda p: PICK, window=None)
    decide(rt, 30)
    assert len(rt.dag) == 60 and len(rt.calls) == 30 and rt.dag.dropped == 0
    rt.window = 10  # shrinking drops the oldest at once
    assert len(rt.dag) == 10 and len(rt.calls) == 10
    assert rt.dag.dropped == 50 and rt.calls.dropped == 20
    assert rt.calls[0].prompt.startswith("Pick 20.")


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "100"])
def test_a_bad_window_is_refused_with_the_fix(bad):
    with pytest.raises(ValueError, match="window must be a whole number >= 1.*or None"):
        ScriptedRuntime(["x"], window=bad)
    rt = Runtime(call=lambda c: PICK)
    with pytest.raises(ValueError, match="window must be"):
        rt.window = bad


@pytest.mark.rule("A3")
def test_A3_a_node_whose_parent_fell_out_of_the_window_shows_as_such():
    class Desk(Agent):
        def triage(self, n):
            return [decision.make(f"Pick {i}.", ["yes", "no"]) for i in range(n)]

    rt = ScriptedRuntime(rule=lambda p: PICK, window=6)
    Desk(runtime=rt).triage(5)  # 1 method node, then 5 x (decision, model call)
    method_id = 1
    assert rt.dag.node(method_id) is None  # fell out
    decisions = [n for n in rt.dag if n.kind == "decision"]
    assert decisions and all(n.parent == method_id for n in decisions)
    assert all(rt.dag.parent_dropped(n) for n in decisions)
    calls = [n for n in rt.dag if n.kind == "model_call"]
    assert not any(rt.dag.parent_dropped(n) for n in calls if rt.dag.node(n.parent))
    assert "5 earlier dropped" in repr(rt.dag)  # 11 nodes, 6 kept
    frame = rt.dag.to_frame()
    assert frame.loc[decisions[-1].id, "parent_dropped"]
    assert frame.loc[decisions[-1].id, "parent"] == method_id
    assert not frame.loc[calls[-1].id, "parent_dropped"]


def test_a_window_reads_like_a_list():
    w = Window(3)
    for i in range(5):
        w.append(i)
    assert w == [2, 3, 4] and w[0] == 2 and w[-1] == 4 and w[1:] == [3, 4]
    assert list(w) == [2, 3, 4] and len(w) == 3 and 3 in w and w.dropped == 2
    assert w != [0, 1, 2, 3, 4]
    assert "the most recent 3; 2 dropped" in repr(w)
    w.maxlen = None
    w.append(5)
    assert w == [2, 3, 4, 5]


@pytest.mark.rule("A2")
def test_A2_the_exhausted_script_counts_calls_that_fell_out():
    rt = ScriptedRuntime([PICK] * 5, window=2)
    decide(rt, 5)
    with pytest.raises(decision.DecisionError, match=r"5 given, call #6 asked for one more"):
        decision.make("Pick.", ["yes", "no"], runtime=rt)


def test_failing_observers_are_reported_once_each_and_not_kept():
    rt = ScriptedRuntime(rule=lambda p: PICK)

    def make_observer(i):
        def observer(event):
            raise RuntimeError(f"observer {i} broke")
        return observer

    for i in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with openprogram.observe(make_observer(i)):
                decide(rt, 2)
        # each new observer is reported once, however many events it failed on
        assert [str(w.message).count(f"observer {i} broke") for w in caught] == [1]
    gc.collect()
    assert len(trace_mod._warned) == 0  # nothing is held for observers that are gone


def test_importing_loads_no_heavier_module_until_first_use():
    # Counting the modules loaded, not the milliseconds: the import stays light as long as
    # these arrive at first use (benchmarks/bench_core.py prints the time).
    import subprocess
    import sys
    heavy = ("concurrent", "asyncio", "queue", "logging", "random", "string", "openai",
             "anthropic", "pandas", "openprogram.runtimes.providers.openai_runtime",
             "openprogram.runtimes.providers.anthropic_runtime", "openprogram.runtimes.cassette")
    code = (f"import sys, openprogram, openprogram.runtimes; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, "
                          f"{str(Path(openprogram.__file__).parents[1])!r}); {code}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # ... and they do arrive when used
    used = subprocess.run([sys.executable, "-c", "import sys, asyncio, openprogram; "
                           "from openprogram import Runtime, decision\n"
                           "async def model(c): return '{\"call\": \"a\"}'\n"
                           "r = decision.evaluate('{x}', ['a', 'b'], [{'x': 1}], "
                           "runtime=Runtime(call=model), progress=False)\n"
                           "print(r.picks)"], capture_output=True, text=True, timeout=60)
    assert used.returncode == 0, used.stderr
    assert used.stdout.strip() == "['a']"
