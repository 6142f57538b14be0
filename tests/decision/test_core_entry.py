"""Entry points (CONTRACT E1-E4) and resolution (Z1-Z2), checked through what the model received."""
import json

import pytest
from corehelp import pick

import openprogram
from openprogram import Agent, DecisionError, agent, decision
from openprogram.runtimes import ScriptedRuntime, ToolCall


def go(city: str, days: int = 1) -> str:
    """Travel to a city."""
    return f"went to {city} for {days} day(s)"


OPTIONS = {
    "go": go,
    "stay": ("STAYED", "stay where you are"),
    "plan": ("write a plan", {"steps": [str]}),
}


# -- E1 ---------------------------------------------------------------------------------------

@pytest.mark.rule("E1")
def test_E1_make_sends_prompt_and_menu_in_one_call():
    rt = ScriptedRuntime([pick("go", {"city": "Rome"})])
    prompt = "Where next? Pick one option."
    assert decision.make(prompt, OPTIONS, runtime=rt) == "went to Rome for 1 day(s)"
    assert len(rt.calls) == 1
    expected = prompt + "\n\n" + decision.render_options(OPTIONS)
    assert rt.calls[0].prompt == expected
    # one user turn holding exactly that text, and no native tools offered
    assert rt.calls[0].messages == [{"role": "user", "content": expected}]
    assert rt.calls[0].tools is None


@pytest.mark.rule("E1")
def test_E1_make_does_not_append_the_finish_instruction():
    rt = ScriptedRuntime([pick("stay")])
    decision.make("Pick.", OPTIONS, runtime=rt)
    assert decision.DECISION_FINISH_INSTRUCTION not in rt.calls[0].prompt
    assert "Do the work the request needs first" not in rt.calls[0].prompt


@pytest.mark.rule("E1")
def test_E1_make_default_max_retries_is_one():
    rt = ScriptedRuntime(["no pick", "still none", pick("stay")])
    with pytest.raises(DecisionError):
        decision.make("Pick.", OPTIONS, runtime=rt)
    assert len(rt.calls) == 2  # the first call and one re-ask, never a third
    assert rt.remaining == 1


@pytest.mark.rule("E1")
def test_E1_make_rejects_a_non_text_prompt_before_any_call():
    rt = ScriptedRuntime([pick("stay")])
    with pytest.raises(TypeError, match="prompt must be a str"):
        decision.make(["Pick."], OPTIONS, runtime=rt)
    assert rt.calls == []


# -- E2 ---------------------------------------------------------------------------------------

@pytest.mark.rule("E2")
def test_E2_agent_without_choices_returns_the_reply_text():
    rt = ScriptedRuntime(["Paris is the capital."])
    assert agent("Capital of France?", runtime=rt) == "Paris is the capital."
    assert rt.calls[0].prompt == "Capital of France?"
    assert decision.DECISION_FINISH_INSTRUCTION not in rt.calls[0].prompt


@pytest.mark.rule("E2")
def test_E2_agent_with_choices_appends_finish_instruction_and_menu():
    rt = ScriptedRuntime(["I think Rome.\n" + pick("go", {"city": "Rome", "days": 3})])
    prompt = "Plan the trip."
    assert agent(prompt, options=OPTIONS, runtime=rt) == "went to Rome for 3 day(s)"
    sent = rt.calls[0].prompt
    assert sent.startswith(prompt)
    tail = decision.DECISION_FINISH_INSTRUCTION + "\n\n" + decision.render_options(OPTIONS)
    assert sent.endswith(tail)
    assert sent.count(decision.DECISION_FINISH_INSTRUCTION) == 1
    trace = decision.last_trace()
    assert trace.entry == "agent" and trace.status == "resolved"


@pytest.mark.rule("E2")
def test_E2_agent_choices_runs_native_tools_then_decides():
    looked = []

    def lookup(q: str) -> str:
        """Look a fact up."""
        looked.append(q)
        return f"fact about {q}"

    rt = ScriptedRuntime([ToolCall("lookup", {"q": "Rome"}), pick("stay")])
    assert agent("Decide.", tools=[lookup], options=OPTIONS, runtime=rt) == "STAYED"
    assert looked == ["Rome"]
    assert [t["name"] for t in rt.calls[0].tools] == ["lookup"]
    # the tool's result went back to the model in the second call of the same turn
    tool_msgs = [m for m in rt.calls[1].messages if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == "fact about Rome"
    trace = decision.last_trace()
    assert [(r.name, r.args, r.result) for r in trace.tool_rounds] == [
        ("lookup", {"q": "Rome"}, "fact about Rome")]


@pytest.mark.rule("E2")
def test_E2_agent_choices_repick_count_is_fixed_at_one():
    rt = ScriptedRuntime(["no pick", "no pick either", pick("stay")])
    with pytest.raises(DecisionError) as info:
        agent("Decide.", options=OPTIONS, runtime=rt)
    assert len(info.value.trace.attempts) == 2
    assert len(rt.calls) == 2
    with pytest.raises(TypeError):
        agent("Decide.", options=OPTIONS, runtime=rt, max_retries=3)


@pytest.mark.rule("E2")
def test_E2_agent_choices_resolves_with_resolve_decision():
    rt = ScriptedRuntime([pick("plan", {"steps": ["pack", "fly"]})])
    assert agent("Decide.", options=OPTIONS, runtime=rt) == {"decision": "plan",
                                                              "steps": ["pack", "fly"]}


# -- E3 ---------------------------------------------------------------------------------------

class Chooser(Agent):
    def choose(self, prompt):
        return decision.make(prompt, OPTIONS)

    def turn(self, prompt):
        return agent(prompt, options=OPTIONS)


@pytest.mark.rule("E3")
def test_E3_both_entries_use_the_agents_runtime():
    rt = ScriptedRuntime([pick("stay"), pick("go", {"city": "Oslo"})])
    other = ScriptedRuntime([pick("go", {"city": "Nowhere"})])
    with openprogram.using_runtime(other):
        c = Chooser(runtime=rt)
        assert c.choose("Pick.") == "STAYED"
        assert c.turn("Pick.") == "went to Oslo for 1 day(s)"
    assert len(rt.calls) == 2 and other.calls == []


@pytest.mark.rule("E3")
def test_E3_agent_without_runtime_uses_the_callers_runtime():
    class Outer(Agent):
        def run(self):
            return Chooser().choose("Pick.")

    rt = ScriptedRuntime([pick("stay")])
    assert Outer(runtime=rt).run() == "STAYED"
    assert len(rt.calls) == 1


@pytest.mark.rule("E3")
def test_E3_make_without_runtime_outside_an_agent_raises_with_the_fix():
    with pytest.raises(RuntimeError) as info:
        decision.make("Pick.", OPTIONS)
    msg = str(info.value)
    assert "decision.make" in msg and "runtime=" in msg and "ScriptedRuntime" in msg
    with pytest.raises(RuntimeError, match=r"agent\(\) has no Runtime.*runtime="):
        agent("Hello")


@pytest.mark.rule("E3")
def test_E3_explicit_runtime_must_be_a_runtime():
    with pytest.raises(TypeError, match=r"Runtime\(call=fn\)"):
        decision.make("Pick.", OPTIONS, runtime=lambda c: "x")


# -- E4 ---------------------------------------------------------------------------------------

@pytest.mark.rule("E4")
def test_E4_public_imports_and_decision_exports():
    from openprogram import Agent as A  # noqa: F401
    from openprogram import decision as d
    assert d.__name__ == "openprogram.decision"
    assert d.__file__.replace("\\", "/").endswith("openprogram/decision/__init__.py")
    for name in ("make", "render_options", "extract_action", "parse_args", "resolve_decision",
                 "DecisionError", "DECISION_FINISH_INSTRUCTION"):
        assert name in d.__all__, name
        assert getattr(d, name) is not None
    assert issubclass(d.DecisionError, ValueError)
    assert openprogram.DecisionError is d.DecisionError
    assert isinstance(d.DECISION_FINISH_INSTRUCTION, str) and d.DECISION_FINISH_INSTRUCTION


# -- Z1 / Z2 ----------------------------------------------------------------------------------

@pytest.mark.rule("Z1")
def test_Z1_resolve_decision_for_each_kind():
    assert decision.resolve_decision(go, {"city": "Lima", "days": 2}) == \
        "went to Lima for 2 day(s)"
    assert decision.resolve_decision("stay", {}, OPTIONS) == "STAYED"
    assert decision.resolve_decision("plan", {"steps": ["a"]}, OPTIONS) == \
        {"decision": "plan", "steps": ["a"]}


@pytest.mark.rule("Z1")
def test_Z1_resolve_decision_by_name_needs_the_options_and_a_known_name():
    with pytest.raises(TypeError, match="needs the option set"):
        decision.resolve_decision("stay", {})
    with pytest.raises(KeyError, match="not an option"):
        decision.resolve_decision("fly", {}, OPTIONS)


@pytest.mark.rule("Z1")
def test_Z1_parse_then_resolve_equals_make():
    reply = pick("go", {"city": "Kyiv", "days": 4})
    chosen, kwargs = decision.parse_args(reply, OPTIONS)
    made = decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([reply]))
    assert decision.resolve_decision(chosen, kwargs, OPTIONS) == made


@pytest.mark.rule("Z2")
def test_Z2_the_decision_is_the_branch():
    # The caller writes no `if`: the picked function does the branch's work and its return
    # value is the result, with nothing added that names the pick.
    log = []

    def approve(note: str):
        log.append(("approve", note))

    def reject(reason: str):
        log.append(("reject", reason))
        return {"rejected": reason}

    options = [approve, reject]
    assert decision.make("Review.", options,
                         runtime=ScriptedRuntime([pick("approve", {"note": "ok"})])) is None
    assert decision.make("Review.", options,
                         runtime=ScriptedRuntime([pick("reject", {"reason": "typo"})])) == \
        {"rejected": "typo"}
    assert log == [("approve", "ok"), ("reject", "typo")]  # each branch ran exactly once


@pytest.mark.rule("Z2")
def test_Z2_an_exception_from_the_picked_function_propagates_unchanged():
    def explode():
        raise LookupError("branch failed")

    with pytest.raises(LookupError, match="branch failed") as info:
        decision.make("Pick.", [explode], runtime=ScriptedRuntime([pick("explode")]))
    assert not isinstance(info.value, DecisionError)
    trace = decision.last_trace()
    assert trace.status == "failed" and trace.error is info.value
    json.dumps(trace.to_dict())
