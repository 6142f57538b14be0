"""`@agentic_function` (openprogram.runtime.function): code written for the original
OpenProgram passes the Runtime once, at the outermost call, and every decorated function, every
`decision.make` and every `agent()` inside finds it (rule E3 and its "decided here" section)."""
import asyncio

import pytest
from corehelp import pick

import openprogram
from openprogram import Agent, agent, current_runtime, decision
from openprogram.runtime.function import agentic_function
from openprogram.runtimes import ScriptedRuntime, ToolCall


def analyze(text: str) -> str:
    """Analyze the message."""
    return f"analyzed {text}"


OPTIONS = {"analyze": analyze, "done": ("OVER", "nothing left")}


@agentic_function
def route(msg: str) -> str:
    return decision.make(f"Pick one way to handle: {msg}", OPTIONS)


@agentic_function(expose="io")
def summarize(msg: str) -> str:
    return agent(f"Summarize: {msg}")


@agentic_function
def pipeline(msg: str) -> tuple:
    return summarize(msg), route(msg)


# -- binding ------------------------------------------------------------------------------------

@pytest.mark.rule("E3")
def test_E3_runtime_passed_to_a_decorated_function_is_bound_for_its_body():
    rt = ScriptedRuntime([pick("analyze", {"text": "hi"})])
    assert route("hi", runtime=rt) == "analyzed hi"
    assert [c.prompt.split("\n")[0] for c in rt.calls] == ["Pick one way to handle: hi"]
    assert current_runtime() is None            # the binding ends with the call
    with pytest.raises(RuntimeError, match="has no Runtime"):
        route("again")


@pytest.mark.rule("E3")
def test_E3_a_decorated_function_inside_another_inherits_the_callers_runtime():
    rt = ScriptedRuntime(["short", pick("done")])
    assert pipeline("long text", runtime=rt) == ("short", "OVER")
    assert [c.prompt.split("\n")[0] for c in rt.calls] == [
        "Summarize: long text", "Pick one way to handle: long text"]


@pytest.mark.rule("E3")
def test_E3_an_inner_runtime_overrides_for_the_inner_call_only():
    @agentic_function
    def outer():
        first = agent("outer one")
        inner = summarize("x", runtime=other)
        return first, inner, agent("outer two")

    rt, other = ScriptedRuntime(["o1", "o2"]), ScriptedRuntime(["i1"])
    assert outer(runtime=rt) == ("o1", "i1", "o2")
    assert [c.prompt for c in rt.calls] == ["outer one", "outer two"]
    assert [c.prompt for c in other.calls] == ["Summarize: x"]


@pytest.mark.rule("E3")
def test_E3_with_no_runtime_anywhere_make_raises_the_fix():
    with pytest.raises(RuntimeError) as info:
        route("hi")
    msg = str(info.value)
    assert "decision.make" in msg and "runtime=" in msg and "ScriptedRuntime" in msg

    @agentic_function
    def no_model(x: int) -> int:
        return x * 2

    assert no_model(21) == 42                   # no model call, no Runtime needed


@pytest.mark.rule("E3")
def test_E3_inside_an_agent_method_a_decorated_function_uses_the_agents_runtime():
    class Desk(Agent):
        def handle(self, msg):
            return pipeline(msg)

    rt = ScriptedRuntime(["sum", pick("analyze", {"text": "m"})])
    other = ScriptedRuntime([])
    with openprogram.using_runtime(other):
        assert Desk(runtime=rt).handle("m") == ("sum", "analyzed m")
    assert len(rt.calls) == 2 and other.calls == []
    kinds = [(n.kind, n.name) for n in rt.dag if n.kind != "model_call"]
    assert kinds == [("agent_method", "Desk.handle"), ("agentic_function", "pipeline"),
                     ("agentic_function", "summarize"), ("agentic_function", "route"),
                     ("decision", "decision.make")]


def test_a_decorated_agent_method_binds_the_agents_runtime_and_records_one_node():
    class Desk(Agent):
        @agentic_function
        def decide(self, msg: str):
            return decision.make(f"Handle {msg}.", OPTIONS)

    rt, other = ScriptedRuntime([pick("done")]), ScriptedRuntime([pick("done")])
    assert Desk(runtime=rt).decide("a") == "OVER"
    assert [(n.kind, n.name) for n in rt.dag] == [
        ("agent_method", "Desk.decide"), ("decision", "decision.make"),
        ("model_call", "model_call")]
    # runtime= at the call wins over the Agent's own, as it does for a plain decorated function
    assert Desk(runtime=rt).decide("b", runtime=other) == "OVER"
    assert len(rt.calls) == 1 and len(other.calls) == 1
    with pytest.raises(RuntimeError, match=r"Desk\.decide\(\).*Desk\(runtime=\.\.\.\)"):
        Desk().decide("c")


# -- runtime parameters ---------------------------------------------------------------------------

@pytest.mark.rule("A8")
def test_A8_a_declared_runtime_parameter_receives_the_bound_runtime():
    seen = []

    @agentic_function
    def review(text, runtime=None, exec_runtime=None):
        seen.append((runtime, exec_runtime, current_runtime()))
        return agent(f"Review {text}")

    @agentic_function
    def outer():
        return review("b")

    rt, other = ScriptedRuntime(["ok a", "ok b"]), ScriptedRuntime(["ok c"])
    assert review("a", runtime=rt) == "ok a"
    assert outer(runtime=rt) == "ok b"               # left out: injected from the caller
    assert review("c", other) == "ok c"              # passed by position
    assert seen == [(rt, rt, rt), (rt, rt, rt), (other, other, other)]
    # an exec_runtime passed alone is the Runtime of the call when nothing else is bound
    assert review("d", exec_runtime=ScriptedRuntime(["ok d"])) == "ok d"


@pytest.mark.rule("A8")
def test_A8_a_required_runtime_parameter_with_no_runtime_anywhere_raises_the_fix():
    @agentic_function
    def needs(runtime, x=1):
        return runtime

    with pytest.raises(RuntimeError, match=r"needs\(\) has no Runtime.*runtime="):
        needs()
    with pytest.raises(TypeError, match=r"Runtime\(call=fn\)"):
        needs(runtime="gpt-4")
    with pytest.raises(TypeError, match=r"Runtime\(call=fn\)"):
        route("x", runtime=lambda content: "reply")
    with pytest.raises(TypeError, match=r"route\(\): .*unexpected keyword argument 'nope'"):
        route("x", nope=1)


def test_runtime_is_not_passed_to_a_function_that_does_not_declare_it():
    @agentic_function
    def loose(**kwargs):
        return kwargs, current_runtime()

    rt = ScriptedRuntime([])
    assert loose(a=1, runtime=rt) == ({"a": 1}, rt)


# -- as an option and as a tool -------------------------------------------------------------------

@pytest.mark.rule("A8")
def test_A8_a_decorated_function_is_a_decision_option_with_its_input_metadata():
    @agentic_function(input={"user": {"hidden": True}, "mood": {"options": ["calm", "loud"]}},
                      description="Reply to the user.")
    def reply(text: str, mood: str, user: str, runtime=None):
        return f"{user}<-{text} ({mood}) via {agent('polish it')}"

    menu = decision.render_options([reply])
    assert "- reply(text: str, mood: str)" in menu and "  Reply to the user." in menu
    assert '; one of: "calm", "loud"' in menu and "- user" not in menu and '"user"' not in menu
    rt = ScriptedRuntime([pick("reply", {"text": "hi", "mood": "calm", "user": "evil"}),
                          "polished"])
    assert decision.make("Pick.", [reply], runtime=rt, context={"user": "ada"}) == \
        "ada<-hi (calm) via polished"
    att = decision.last_trace().attempts[0]
    assert att.dropped == ["args.user"] and sorted(att.injected) == ["runtime", "user"]


@pytest.mark.rule("A8")
def test_A8_a_decorated_native_tool_gets_the_runtime_and_decides_inside():
    @agentic_function(name="classify")
    def classify_ticket(ticket: str, runtime=None):
        """Classify a ticket."""
        return decision.make(f"Classify: {ticket}", ["bug", "question"])

    rt = ScriptedRuntime([ToolCall("classify", {"ticket": "crash"}), pick("bug"), "it is a bug"])
    assert agent("Handle the ticket.", tools=[classify_ticket], runtime=rt) == "it is a bug"
    assert rt.calls[0].tool_names == ["classify"]
    tool_msg = [m for m in rt.calls[2].messages if m["role"] == "tool"][0]
    assert tool_msg["content"] == "bug"


# -- async ----------------------------------------------------------------------------------------

@agentic_function
async def async_route(tag: str):
    await asyncio.sleep(0)
    inner = await async_inner(tag)
    await asyncio.sleep(0)
    return inner, decision.make(f"Pick {tag}.", ["a", "b"]), current_runtime()


@agentic_function
async def async_inner(tag: str):
    await asyncio.sleep(0)
    return agent(f"inner {tag}")


@pytest.mark.rule("E3")
def test_E3_async_functions_keep_their_runtime_across_awaits_and_tasks():
    rt1 = ScriptedRuntime([], rule=lambda p: pick("a") if p.startswith("Pick") else "one")
    rt2 = ScriptedRuntime([], rule=lambda p: pick("b") if p.startswith("Pick") else "two")

    async def main():
        return await asyncio.gather(async_route("x", runtime=rt1), async_route("y", runtime=rt2),
                                    async_route("z", runtime=rt1))

    assert asyncio.run(main()) == [("one", "a", rt1), ("two", "b", rt2), ("one", "a", rt1)]
    assert sorted(c.prompt.split("\n")[0] for c in rt1.calls) == [
        "Pick x.", "Pick z.", "inner x", "inner z"]
    assert sorted(c.prompt.split("\n")[0] for c in rt2.calls) == ["Pick y.", "inner y"]
    assert current_runtime() is None
    with pytest.raises(RuntimeError, match="has no Runtime"):
        asyncio.run(async_route("w"))


# -- the DAG --------------------------------------------------------------------------------------

@pytest.mark.rule("A3")
def test_A3_each_decorated_call_is_a_node_unless_hidden():
    @agentic_function(expose="hidden")
    def quiet():
        return agent("quiet")

    @agentic_function(expose="full")
    def loud():
        return quiet() + agent("loud")

    rt = ScriptedRuntime(["q", "l"])
    assert loud(runtime=rt) == "ql"
    nodes = {n.id: n for n in rt.dag}
    shape = [(n.kind, n.name, nodes[n.parent].name if n.parent else None) for n in rt.dag]
    assert shape == [("agentic_function", "loud", None), ("model_call", "model_call", "loud"),
                     ("model_call", "model_call", "loud")]
    assert all(n.status == "ok" for n in rt.dag)

    @agentic_function
    def fails():
        raise LookupError("no such thing")

    with pytest.raises(LookupError):
        fails(runtime=rt)
    assert rt.dag.nodes[-1].name == "fails" and rt.dag.nodes[-1].status == "error"


# -- the decorator's own arguments ----------------------------------------------------------------

def test_the_decorator_keeps_the_function_and_the_originals_arguments():
    @agentic_function(expose="llm", render_range={"callers": 0}, label="Route", as_tool=False)
    def documented(x: int, runtime=None) -> int:
        """Documented."""
        return x

    assert documented.__name__ == "documented" and documented.__doc__ == "Documented."
    assert documented.__wrapped__(3) == 3
    assert (documented.expose, documented.render_range, documented.label, documented.as_tool) \
        == ("llm", {"callers": 0}, "Route", False)
    assert route.expose == "io" and route._is_agentic


@pytest.mark.parametrize("kwargs, exc, pattern", [
    ({"system": "You are terse."}, TypeError, r"agentic_function\(system=\.\.\.\).*remove it"),
    ({"cache": True, "timeout": 3}, TypeError, r"cache=\.\.\., timeout=\.\.\..*remove them"),
    ({"exposure": "io"}, TypeError, r"unexpected keyword argument\(s\) \['exposure'\].*takes"),
    ({"expose": "everything"}, ValueError, r"expose must be one of 'io', 'llm'"),
    ({"input": ["x"]}, TypeError, r"input= must be a dict"),
    ({"name": ""}, TypeError, r"name= must be a non-empty string"),
])
def test_bad_decorator_arguments_are_refused_with_the_fix(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        agentic_function(**kwargs)


def test_what_cannot_be_decorated_is_refused():
    with pytest.raises(TypeError, match=r"decorates a function.*keywords"):
        agentic_function("route")

    def gen():
        yield decision.make("Pick.", ["a"])

    async def agen():
        yield 1

    for fn in (gen, agen):
        with pytest.raises(TypeError, match=r"cannot bind a Runtime across the yields"):
            agentic_function(fn)


def test_the_decorator_is_importable_as_in_the_original():
    from openprogram import agentic_function as top
    from openprogram.agentic_programming import agentic_function as pkg
    assert top is pkg is agentic_function
