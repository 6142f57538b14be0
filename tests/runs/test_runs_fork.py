"""Forks (issue 51) on the scripted model: every edit (reply=, pick= by name and to the runner-up,
options= with another set or other descriptions, runtime=, none), after="recorded", a fork of a
fork, async programs and concurrent ones, and every bad input with the error that names the fix.
A fork never changes the run it forks."""
from __future__ import annotations

import asyncio
import json

import pytest

import openprogram
import openprogram.runs
from openprogram import (
    Agent,
    ArgumentError,
    OptionError,
    ToolCall,
    UsageError,
    agent,
    amake,
    decision,
)
from openprogram.runs import RunDiverged, with_descriptions
from openprogram.runtimes import ScriptedRuntime


def pick(name, **args):
    return "```json\n" + json.dumps({"call": name, **({"args": args} if args else {})}) + "\n```"


def refund(amount: int) -> str:
    """Refund part of the order."""
    return f"refunded {amount}"


OUTCOMES = {"refund": refund, "escalate": "ESCALATED", "close": "CLOSED"}


class Desk(Agent):
    def handle(self, ticket: str) -> str:
        team = decision.make(f"Ticket: {ticket}. Which team?", ["billing", "shipping"])
        urgency = decision.make(f"Ticket: {ticket}. How urgent?", {"high": "HIGH",
                                                                     "low": "LOW"})
        return decision.make(f"Ticket: {ticket} ({team}, {urgency}). What now?", OUTCOMES)


def answers(prompt: str) -> str:
    """A model that answers by what it is asked, so runs after a fork point can be asked."""
    if "Which team" in prompt:
        return pick("shipping")
    if "How urgent" in prompt:
        return pick("high")
    if "urgent_call" in prompt:   # an option added by a fork
        return pick("urgent_call")
    if "LOW" in prompt:
        return pick("close")
    return pick("refund", amount=5)


def recorded(rule=answers):
    r = openprogram.run(Desk().handle, "order 42 is late", runtime=ScriptedRuntime(rule=rule))
    assert r.status == "ok", r.error
    return r


def snapshot(run) -> str:
    return json.dumps(run.to_dict(), sort_keys=True, default=str)


def test_a_reply_fork_takes_the_reply_and_asks_nothing_before_it():
    r = recorded()
    rt = r.runtime
    asked = len(rt.calls)
    before = snapshot(r)
    f = r.fork(at=2, reply=pick("escalate"))
    assert f.result == "ESCALATED" and len(rt.calls) == asked
    assert snapshot(r) == before  # the original is never changed
    f2 = r.fork(at=-1, reply=pick("close"))  # the last decision
    assert f2.result == "CLOSED" and f2.fork_point == 2


def test_a_reply_that_fails_is_re_asked_of_the_runtime():
    r = recorded()
    f = r.fork(at=2, reply="I am not sure")  # no pick: re-asked as usual, of the runtime
    t = f.decisions[2].trace
    assert [a.error_kind for a in t.attempts] == ["no_action", None]
    assert f.result == "refunded 5"
    assert [c.source for c in f.calls] == ["recording", "recording", "edit", "live"]


def test_a_pick_with_arguments_is_filled_by_the_model_held_to_that_option():
    r = recorded(lambda p: pick("refund", amount=9) if "What now" in p and "escalate" not in p
                 else answers(p))
    r2 = r.fork(at=2, pick="escalate")  # a value: nothing to fill, no model call
    assert r2.result == "ESCALATED" and r2.calls[-1].source == "edit"
    f = r.fork(at=2, pick="refund")     # a function: the model fills its amount
    assert f.result == "refunded 9"
    t = f.decisions[2].trace
    assert [o["name"] for o in t.options] == ["refund"]  # the menu the model saw
    assert "escalate" not in t.attempts[0].prompt
    assert f.calls[-1].source == "live"


@pytest.mark.parametrize("mode", ["menu", "tools", "json_schema"])
def test_a_pick_with_nothing_to_fill_resolves_without_a_model_call_in_every_mode(mode):
    def program():
        return decision.make("Route it.", {"a": "A", "b": "B"}, mode=mode)
    first = {"menu": pick("a"), "tools": ToolCall("a", {}),
             "json_schema": json.dumps({"decision": {"call": "a", "args": {}}})}[mode]
    rt = ScriptedRuntime([first])
    r = openprogram.run(program, runtime=rt)
    assert r.result == "A"
    f = r.fork(at=0, pick="b")
    assert f.result == "B" and len(rt.calls) == 1  # the script was not asked again
    assert f.calls[0].source == "edit"


def test_pick_runner_up_follows_the_recorded_confidence():
    def program():
        return decision.make("Which?", {"a": "A", "b": "B", "c": "C"},
                             confidence=decision.Samples(3))
    rt = ScriptedRuntime([pick("a"), pick("c"), pick("a")])
    r = openprogram.run(program, runtime=rt)
    assert r.result == "A" and r.decisions[0].trace.confidence.runner_up == "c"
    f = r.fork(at=0, pick="runner_up")
    assert f.result == "C" and f.edit == {"kind": "pick", "value": "c", "after": "runtime"}
    # each of the decision's samples is the edit's: none is asked
    assert [c.source for c in f.calls] == ["edit"] * 3 and len(rt.calls) == 3
    assert f.decisions[0].trace.confidence.probs["c"] == 1.0


def test_options_another_set_or_other_descriptions():
    r = recorded()
    added = {**OUTCOMES, "urgent_call": "CALLED"}
    f = r.fork(at=2, options=added)
    assert f.result == "CALLED"
    assert [o["name"] for o in f.decisions[2].trace.options] == [*OUTCOMES, "urgent_call"]
    f = r.fork(at=2, options=with_descriptions({"escalate": "Hand it to a person"}))
    menu = f.decisions[2].trace.menu
    assert "Hand it to a person" in menu and "Hand it to a person" not in \
        r.decisions[2].trace.menu
    assert f.edit["value"] == {"escalate": "Hand it to a person"}
    d = r.diff(f)
    assert d.first.index == 2 and d.first.part == "menu"


def test_runtime_sends_every_call_from_the_fork_point_on_to_it():
    r = recorded()
    other = ScriptedRuntime([pick("low"), pick("close")])
    f = r.fork(at=1, runtime=other)
    assert f.result == "CLOSED" and len(other.calls) == 2
    assert [c.source for c in f.calls] == ["recording", "live", "live"]
    assert [n.runtime for n in f.nodes if n.kind == "model_call"] == \
        [r.calls[0].runtime_name, "scripted", "scripted"]


def test_no_edit_asks_the_runtime_again_from_the_fork_point():
    r = recorded()
    asked = len(r.runtime.calls)
    f = r.fork(at=1)
    assert f.result == r.result and len(r.runtime.calls) == asked + 2
    assert r.diff(f).first is None


def test_after_recorded_answers_what_the_recording_holds():
    def program():
        a = decision.make("First?", ["x", "y"])
        b = decision.make("Second?", ["x", "y"])
        c = decision.make(f"Third, after {a}?", ["x", "y"])   # depends on the first
        d = decision.make("Fourth?", ["x", "y"])               # does not
        return a, b, c, d
    rt = ScriptedRuntime(rule=lambda p: pick("x"))
    r = openprogram.run(program, runtime=rt)
    assert r.result == ("x", "x", "x", "x") and len(rt.calls) == 4
    f = r.fork(at=0, reply=pick("y"), after="recorded")
    assert f.result == ("y", "x", "x", "x")
    # the second and fourth requests are byte for byte the recorded ones; the third is not
    assert [c.source for c in f.calls] == ["edit", "recording", "live", "recording"]
    assert len(rt.calls) == 5 and "Third, after y?" in rt.calls[-1].prompt
    g = r.fork(at=0, reply=pick("y"))  # after="runtime": everything after it is asked
    assert [c.source for c in g.calls] == ["edit", "live", "live", "live"]


def test_a_fork_of_a_fork():
    r = recorded()
    f = r.fork(at=2, reply=pick("escalate"))
    g = f.fork(at=0, reply=pick("billing"))
    assert g.forked_from is f and g.decisions[0].trace.chosen == "billing"
    assert g.result == "refunded 5"  # decisions 1 and 2 asked again: the rule answers
    assert f.diff(g).first.index == 0 and f.diff(g).first.part == "reply"


def test_an_async_program_runs_and_forks():
    async def program():
        a, b = await asyncio.gather(amake("One?", ["x", "y"]), amake("Two?", ["x", "y"]))
        return a + b, await amake(f"Then {a}{b}?", ["x", "y"])

    async def main():
        r = await openprogram.arun(program, runtime=ScriptedRuntime(rule=lambda p: pick("x")))
        assert r.result == ("xx", "x") and len(r.decisions) == 3
        f = await r.afork(at=2, reply=pick("y"))
        assert f.result == ("xx", "y") and [c.source for c in f.calls] == \
            ["recording", "recording", "edit"]
        return r
    r = asyncio.run(main())
    f = r.fork(at=1, reply=pick("y"))  # and a sync fork of an async program
    assert f.status == "ok" and f.result == ("xy", "x")
    assert "Then xy?" in f.decisions[2].trace.prompt


class Turn(Agent):
    def go(self):
        return agent("Look it up, then decide.", tools=[look], options={"done": "DONE"})


def look(q: str) -> str:
    """Look something up."""
    return q.upper()


def test_a_tool_before_the_fork_point_runs_again_as_the_users_code():
    seen = []

    def watch(q: str) -> str:
        """Look something up."""
        seen.append(q)
        return q.upper()

    def program():
        a = agent("Look it up, then decide.", tools=[watch], options={"done": "DONE"})
        return a, decision.make("And then?", ["x", "y"])
    rt = ScriptedRuntime([ToolCall("watch", {"q": "a"}), pick("done"), pick("x")])
    r = openprogram.run(program, runtime=rt)
    assert r.result == ("DONE", "x") and seen == ["a"]
    f = r.fork(at=1, reply=pick("y"))
    assert f.result == ("DONE", "y") and seen == ["a", "a"]  # the tool ran again


# -- bad input ------------------------------------------------------------------------------

def test_at_past_the_last_decision_is_named():
    r = recorded()
    with pytest.raises(ArgumentError, match=r"past the run's last decision: the run made 3 "
                                            r"decision\(s\), indexed 0 to 2"):
        r.fork(at=3, reply=pick("x"))
    with pytest.raises(ArgumentError, match="past"):
        r.fork(at=-4, reply=pick("x"))
    with pytest.raises(UsageError, match="index"):
        r.fork(at=True, reply=pick("x"))


def test_a_decision_that_is_not_this_runs_is_named():
    r, other = recorded(), recorded()
    with pytest.raises(ArgumentError, match=r"not a decision of this run.*does not exist"):
        r.fork(at=other.decisions[1], reply=pick("x"))
    with pytest.raises(ArgumentError, match=r"names no node of this run"):
        r.fork(at="n99", reply=pick("x"))
    call = r.decisions[1].children[0]
    with pytest.raises(ArgumentError, match=rf"names a model_call node, not a decision; it is "
                                            rf"inside decision 1 \({r.decisions[1].id}\)"):
        r.fork(at=call.id, reply=pick("x"))
    assert r.fork(at=r.decisions[1].id, reply=pick("low")).fork_point == 1
    assert r.fork(at=r.decisions[1], reply=pick("low")).fork_point == 1


def test_two_edits_at_once_are_refused():
    r = recorded()
    with pytest.raises(UsageError, match=r"2 edits at once \(reply=, pick=\).*exactly one"):
        r.fork(at=1, reply=pick("low"), pick="low")
    with pytest.raises(UsageError, match=r"pick=, runtime="):
        r.fork(at=1, pick="low", runtime=ScriptedRuntime([]))


def test_pick_naming_no_option_and_runner_up_without_confidence():
    r = recorded()
    with pytest.raises(ArgumentError, match=r"pick='urgent'\) names no option of decision 1; "
                                            r"its options are 'high', 'low'"):
        r.fork(at=1, pick="urgent")
    with pytest.raises(ArgumentError, match=r"decision 1 recorded no confidence.*"
                                            r"confidence=True"):
        r.fork(at=1, pick="runner_up")
    with pytest.raises(UsageError, match="option's name"):
        r.fork(at=1, pick=3)


def test_other_bad_edits_are_named_before_anything_runs():
    r = recorded()
    asked = len(r.runtime.calls)
    with pytest.raises(OptionError, match="empty"):
        r.fork(at=2, options={})
    with pytest.raises(ArgumentError, match=r"'nope', not an option of decision 2"):
        r.fork(at=2, options=with_descriptions({"nope": "x"}))
    with pytest.raises(UsageError, match="runtime="):
        r.fork(at=2, runtime="gpt-4o")
    with pytest.raises(UsageError, match="reply="):
        r.fork(at=2, reply=42)
    with pytest.raises(ArgumentError, match="after="):
        r.fork(at=2, reply=pick("close"), after="never")
    assert len(r.runtime.calls) == asked and len(r.nodes) == 8


def test_a_format_decision_has_no_options_to_pick():
    def program():
        return agent("Fill it.", response_format={"city": str})
    r = openprogram.run(program, runtime=ScriptedRuntime(['{"city": "Oslo"}']))
    assert r.result == {"city": "Oslo"}
    with pytest.raises(UsageError, match="no option set to pick: fork it with reply= or "
                                         "runtime="):
        r.fork(at=0, pick="response")
    assert r.fork(at=0, reply='{"city": "Bergen"}').result == {"city": "Bergen"}


def test_a_program_that_asks_less_before_the_fork_point_diverges():
    state = {"n": 0}

    def program():
        state["n"] += 1
        if state["n"] == 1:   # a plain turn, asked only the first time
            agent("Say hello.")
        return decision.make("Last?", ["x", "y"])
    r = openprogram.run(program, runtime=ScriptedRuntime(["hello", pick("x")]))
    assert r.result == "x" and len(r.calls) == 2
    with pytest.raises(RunDiverged, match=r"reached decision 0 without asking 1 request") as e:
        r.fork(at=0, reply=pick("y"))
    assert e.value.actual is None and "Say hello." in json.dumps(e.value.expected)
    assert e.value.decision.index == 0 and e.value.run.decisions[0] is e.value.decision


def test_a_program_that_ends_before_the_fork_point_diverges():
    state = {"n": 0}

    def program():
        state["n"] += 1
        first = decision.make("First?", ["x", "y"])
        if state["n"] == 1:
            return decision.make("Second?", ["x", "y"])
        return first
    r = openprogram.run(program, runtime=ScriptedRuntime([pick("x")] * 2))
    with pytest.raises(RunDiverged, match=r"ended after 1 decision\(s\), before decision 1"):
        r.fork(at=1, reply=pick("y"))


DESK = Desk()  # a module's object: a saved run of DESK.handle imports it again


def test_a_fork_of_a_fork_makes_its_edited_decisions_again_with_their_edits(tmp_path):
    r = recorded()
    held = r.fork(at=1, pick="low")              # decision 1 held to "low": CLOSED
    assert held.result == "CLOSED" and held.menu_edits == [(1, "pick", "low")]
    asked = len(r.runtime.calls)
    again = held.fork(at=2, reply=pick("escalate"))
    # decision 1 asks the held menu again, which the fork's recording holds: nothing is asked
    assert again.result == "ESCALATED" and len(r.runtime.calls) == asked
    assert [c.source for c in again.calls] == ["recording", "recording", "edit"]
    assert again.decisions[1].trace.chosen == "low" and again.menu_edits == held.menu_edits
    assert r.diff(again).first.part == "pick"   # what the first fork changed
    # a fork at the edited decision itself replaces its edit
    described = r.fork(at=2, options=with_descriptions({"close": "Close it when it is done"}))
    more = described.fork(at=2, reply=pick("close"))
    assert more.menu_edits == [] and "Close it when" not in more.decisions[2].trace.menu


def test_a_saved_fork_keeps_the_option_sets_it_was_made_with(tmp_path):
    r = openprogram.run(DESK.handle, "order 42 is late", runtime=ScriptedRuntime(rule=answers))
    urgent = {"high": "HIGH", "low": "LOW", "urgent": "URGENT"}
    for name, edit in (("described", with_descriptions({"low": "It can wait"})),
                       ("added", urgent)):
        f = r.fork(at=1, options=edit)
        assert f.status == "ok", f.error
        f.save(tmp_path / f"{name}.jsonl")
    loaded = openprogram.runs.Run.load(tmp_path / "described.jsonl")
    assert loaded.menu_edits[0][:2] == (1, "options")
    g = loaded.fork(at=2, reply=pick("escalate"))  # decision 1 described again, from the file
    assert g.result == "ESCALATED" and [c.source for c in g.calls] == \
        ["recording", "recording", "edit"]
    assert "It can wait" in g.decisions[1].trace.menu
    # an option set of the user's own (functions, values) is not in the file: named
    with pytest.raises(RunDiverged, match=r"decision 1 was made.*with an option set given to "
                                          r"fork\(options=\) that a saved run cannot hold"):
        openprogram.runs.Run.load(tmp_path / "added.jsonl").fork(at=2, reply=pick("close"))
