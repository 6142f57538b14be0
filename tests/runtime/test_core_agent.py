"""Agents: Runtime binding (A7) through nesting, threads and asyncio; parameter metadata (A8);
tool methods serving both as native tools and as decision options."""
import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Literal

import pytest
from corehelp import pick

from openprogram import (
    Agent,
    agent,
    bind_context,
    current_agent,
    current_runtime,
    decision,
    register_toolset,
)
from openprogram.runtimes import ScriptedRuntime, ToolCall


class Desk(Agent):
    method_options = {
        "lookup": {"tool": True, "input": {"q": {"description": "what to look up"},
                                           "user": {"hidden": True}}},
        "answer": {"tool": True, "description": "Give the final answer."},
        "scale": {"tool": True, "input": {"level": {"options": [1, 2, 3]}}},
    }

    def lookup(self, q: str, user: str = "anon") -> str:
        """Look something up."""
        return f"{user} found {q}"

    def answer(self, text: str) -> str:
        return f"ANSWER: {text}"

    def scale(self, level: int) -> int:
        """Pick a level."""
        return level * 10

    def not_a_tool(self) -> str:
        return "plain"

    def decide(self, prompt):
        return decision.make(prompt, [self.lookup, self.answer])

    def work(self, prompt, **kw):
        return agent(prompt, **kw)

    def whoami(self):
        return current_runtime(), current_agent()


# -- tool methods on both call paths ----------------------------------------------------------

@pytest.mark.rule("A8")
def test_A8_method_options_input_describes_a_method_option():
    desk = Desk()
    menu = decision.render_options([desk.lookup, desk.answer, desk.scale])
    assert "- lookup(q: str)" in menu and "- q (str, required): what to look up" in menu
    assert "user" not in menu
    assert "- answer(text: str)\n  Give the final answer." in menu
    assert "- level (int, required); one of: 1, 2, 3" in menu


@pytest.mark.rule("A8")
def test_A8_tool_method_as_decision_option_gets_context():
    rt = ScriptedRuntime([pick("lookup", {"q": "tea", "user": "mallory"})])
    desk = Desk(runtime=rt)
    assert decision.make("Pick.", [desk.lookup], runtime=rt, context={"user": "ada"}) == \
        "ada found tea"
    att = decision.last_trace().attempts[0]
    assert att.dropped == ["args.user"] and att.injected == ["user"]


@pytest.mark.rule("A8")
def test_A8_tool_method_as_native_tool():
    rt = ScriptedRuntime([ToolCall("lookup", {"q": "tea", "user": "mallory"}),
                          ToolCall("scale", {"level": 9}),
                          "done"])
    desk = Desk(runtime=rt)
    assert desk.work("Go.", tools=[desk.lookup, desk.scale]) == "done"
    specs = {t["name"]: t for t in rt.calls[0].tools}
    assert specs["lookup"]["parameters"] == {
        "type": "object", "properties": {"q": {"type": "string",
                                               "description": "what to look up"}},
        "required": ["q"]}
    assert specs["scale"]["parameters"]["properties"]["level"]["enum"] == [1, 2, 3]
    results = [m["content"] for m in rt.calls[2].messages if m["role"] == "tool"]
    assert results[0] == "anon found tea"   # the default: a model value for a hidden
                                            # param is unused
    assert results[1].startswith("Error: level must be one of 1, 2, 3")


@pytest.mark.rule("A8")
def test_A8_native_tool_hidden_parameter_is_filled_from_context():
    def lookup(order_id: str, user_id: str) -> str:
        """Look an order up."""
        return f"{order_id} of {user_id}"
    lookup.input_meta = {"user_id": {"hidden": True}}
    rt = ScriptedRuntime([ToolCall("lookup", {"order_id": "A1", "user_id": "mallory"}),
                          pick("done")] * 2)
    assert agent("Go.", tools=[lookup], runtime=rt, context={"user_id": "ada"}) == pick("done")
    assert rt.calls[1].messages[-1]["content"] == "A1 of ada"
    assert "user_id" not in rt.calls[0].tools[0]["parameters"]["properties"]
    # the same on the decision path, where the tool round lands in the trace
    assert agent("Go.", tools=[lookup], options=["done"], runtime=rt,
                 context={"user_id": "ada"}) == "done"
    assert decision.last_trace().tool_rounds[0].result == "A1 of ada"


@pytest.mark.rule("A8")
def test_A8_toolset_default_and_toolset_agent():
    rt = ScriptedRuntime(["x", "y"])
    desk = Desk(runtime=rt)
    desk.work("Go.", toolset="default")
    assert sorted(t["name"] for t in rt.calls[0].tools) == ["answer", "lookup", "scale"]
    other = ScriptedRuntime(["z"])
    agent("Go.", toolset=desk, runtime=other)
    assert sorted(t["name"] for t in other.calls[0].tools) == ["answer", "lookup", "scale"]
    # outside any Agent call, "default" has no tools
    plain = ScriptedRuntime(["w"])
    agent("Go.", toolset="default", runtime=plain)
    assert plain.calls[0].tools is None


@pytest.mark.rule("A8")
def test_A8_toolset_default_leaves_out_the_running_method():
    class Selfish(Agent):
        method_options = {"run": {"tool": True}, "helper": {"tool": True}}

        def run(self):
            return agent("Go.", toolset="default")

        def helper(self) -> str:
            """Help."""
            return "h"

    rt = ScriptedRuntime(["ok"])
    Selfish(runtime=rt).run()
    assert [t["name"] for t in rt.calls[0].tools] == ["helper"]


@pytest.mark.rule("A8")
def test_A8_registered_toolsets_and_bad_toolsets():
    def ping() -> str:
        """Ping."""
        return "pong"

    register_toolset("core-tests-net", [ping])
    rt = ScriptedRuntime([ToolCall("ping"), "ok"])
    assert agent("Go.", toolset="core-tests-net", runtime=rt) == "ok"
    with pytest.raises(ValueError, match="unknown toolset 'nope'.*register_toolset"):
        agent("Go.", toolset="nope", runtime=rt)
    with pytest.raises(ValueError, match="reserved"):
        register_toolset("default", [ping])
    with pytest.raises(TypeError, match="toolset= takes"):
        agent("Go.", toolset=42, runtime=rt)


@pytest.mark.rule("A8")
def test_A8_input_meta_on_a_plain_function():
    def send(msg: Annotated[str, "the message"], to: str, tone: Literal["calm", "loud"] = "calm",
             retries=2):
        return (msg, to, tone, retries)

    send.input_meta = {"to": {"hidden": True}, "retries": {"description": "how many tries"}}
    menu = decision.render_options([send])
    assert '- send(msg: str, tone: str = "calm", retries: int = 2)' in menu
    assert "- msg (str, required): the message" in menu
    assert '- tone (str, optional, default "calm"); one of: "calm", "loud"' in menu
    assert "- retries (int, optional, default 2): how many tries" in menu
    rt = ScriptedRuntime([pick("send", {"msg": "hi", "tone": "loud"})])
    assert decision.make("Pick.", [send], runtime=rt, context={"to": "bob"}) == \
        ("hi", "bob", "loud", 2)
    rt = ScriptedRuntime([pick("send", {"msg": "hi", "tone": "shout"})])
    with pytest.raises(decision.DecisionError) as info:
        decision.make("Pick.", [send], runtime=rt, context={"to": "bob"}, max_retries=0)
    assert info.value.kind == "enum_violation"


@pytest.mark.rule("A8")
def test_A8_bad_method_options_fail_at_class_definition():
    with pytest.raises(TypeError, match=r"names 'missing', which is not a method.*fix the name"):
        class Bad(Agent):
            method_options = {"missing": {"tool": True}}

    with pytest.raises(TypeError, match=r"unknown keys \['tools'\]"):
        class Bad2(Agent):
            method_options = {"m": {"tools": True}}

            def m(self):
                pass


# -- A7: binding --------------------------------------------------------------------------------

@pytest.mark.rule("A7")
def test_A7_configured_runtime_is_bound_during_the_call():
    rt = ScriptedRuntime([])
    desk = Desk(runtime=rt)
    bound, (ag, method) = desk.whoami()
    assert bound is rt and ag is desk and method == "whoami"
    assert current_runtime() is None and current_agent() == (None, None)


@pytest.mark.rule("A7")
def test_A7_nested_agent_without_runtime_uses_the_callers():
    class Inner(Agent):
        def ask(self):
            return agent("inner question")

    class Outer(Agent):
        def run(self):
            return Inner().ask() + " / " + Desk(runtime=own).work("desk question")

    rt, own = ScriptedRuntime(["inner answer"]), ScriptedRuntime(["desk answer"])
    assert Outer(runtime=rt).run() == "inner answer / desk answer"
    assert [c.prompt for c in rt.calls] == ["inner question"]
    assert [c.prompt for c in own.calls] == ["desk question"]
    names = [(n.kind, n.name) for n in rt.dag]
    assert names == [("agent_method", "Outer.run"), ("agent_method", "Inner.ask"),
                     ("model_call", "model_call")]


@pytest.mark.rule("A7")
def test_A7_a_method_with_no_runtime_raises_with_the_fix():
    with pytest.raises(RuntimeError) as info:
        Desk().decide("Pick.")
    msg = str(info.value)
    assert "Desk.decide()" in msg and "Desk(runtime=...)" in msg and "ScriptedRuntime" in msg
    # a method that never reaches a model call works without a Runtime
    assert Desk().not_a_tool() == "plain"


@pytest.mark.rule("A7")
def test_A7_bound_methods_copied_out_keep_their_runtime():
    rt = ScriptedRuntime([pick("answer", {"text": "42"}), "free text"])
    decide, work = Desk(runtime=rt).decide, Desk(runtime=rt).work
    assert decide("Pick.") == "ANSWER: 42"
    assert work("Say something.") == "free text"
    tools = Desk(runtime=rt).tool_methods()
    assert sorted(t.__name__ for t in tools) == ["answer", "lookup", "scale"]
    assert [t("x") for t in tools if t.__name__ == "answer"] == ["ANSWER: x"]


@pytest.mark.rule("A7")
def test_A7_agent_rejects_a_non_runtime():
    with pytest.raises(TypeError, match=r"Runtime\(call=fn\)"):
        Desk(runtime="gpt-4")


@pytest.mark.rule("A7")
def test_A7_threads_with_bind_context_and_to_thread_see_the_runtime():
    class Worker(Agent):
        def fan_out(self):
            out = []
            t = threading.Thread(target=bind_context(
                lambda: out.append(decision.make("Pick.", ["a", "b"]))))
            t.start()
            t.join()
            with ThreadPoolExecutor(2) as pool:
                out += list(pool.map(bind_context(lambda p: decision.make(p, ["a", "b"])),
                                     ["P1", "P2"]))
            return out

        def unbound_thread(self):
            errors = []

            def work():
                try:
                    decision.make("Pick.", ["a"])
                except RuntimeError as exc:
                    errors.append(exc)
            t = threading.Thread(target=work)
            t.start()
            t.join()
            return errors

    rt = ScriptedRuntime([], rule=lambda p: pick("b"))
    assert Worker(runtime=rt).fan_out() == ["b", "b", "b"]
    assert len(rt.calls) == 3
    # a plain thread does not inherit the context: it gets the fix-it error, not another runtime
    (err,) = Worker(runtime=rt).unbound_thread()
    assert "has no Runtime" in str(err)


@pytest.mark.rule("A7")
def test_A7_asyncio_tasks_and_to_thread_see_the_right_runtime():
    class Async(Agent):
        async def run(self, tag):
            async def in_task():
                await asyncio.sleep(0)
                return current_runtime()

            seen_task = await asyncio.create_task(in_task())
            picked = await asyncio.to_thread(decision.make, f"Pick {tag}.", ["a", "b"])
            return seen_task, picked

    rt1 = ScriptedRuntime([], rule=lambda p: pick("a"))
    rt2 = ScriptedRuntime([], rule=lambda p: pick("b"))

    async def main():
        return await asyncio.gather(Async(runtime=rt1).run("one"), Async(runtime=rt2).run("two"),
                                    Async(runtime=rt1).run("three"))

    results = asyncio.run(main())
    assert results == [(rt1, "a"), (rt2, "b"), (rt1, "a")]
    assert sorted(c.prompt.split("\n")[0] for c in rt1.calls) == ["Pick one.", "Pick three."]
    assert [c.prompt.split("\n")[0] for c in rt2.calls] == ["Pick two."]
    nodes = [n for n in rt1.dag if n.kind == "agent_method"]
    assert [n.name for n in nodes] == ["Async.run", "Async.run"]


@pytest.mark.rule("A7")
def test_A7_make_inside_a_running_event_loop():
    async def main():
        rt = ScriptedRuntime([pick("b")])
        picked = decision.make("Pick.", ["a", "b"], runtime=rt)  # sync call, loop running
        text = agent("Hi.", runtime=ScriptedRuntime(["hello"]))
        return picked, text

    assert asyncio.run(main()) == ("b", "hello")


def test_an_agent_turns_option_set_is_options_and_choices_still_works():
    """`options=` is the option set's one name (as in decision.make); `choices=`, its older
    name, gives the same decision; both at once is refused before any model call."""
    rt = ScriptedRuntime([pick("umbrella"), pick("umbrella")])
    opts = {"umbrella": "take it", "sunglasses": "take them"}
    assert agent("Rain?", options=opts, runtime=rt) == "take it"
    assert agent("Rain?", choices=opts, runtime=rt) == "take it"
    assert asyncio.run(_aagent_both(opts, rt)) == "refused"
    with pytest.raises(TypeError, match="options= and choices=.*pass only options="):
        rt.exec("Rain?", options=opts, choices=opts)
    assert len(rt.calls) == 2


async def _aagent_both(opts, rt):
    from openprogram import aagent
    try:
        await aagent("Rain?", options=opts, choices=opts, runtime=rt)
    except TypeError as exc:
        assert "choices= is the older name of options=" in str(exc)
        return "refused"
    return "ran"
