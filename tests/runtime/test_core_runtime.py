"""The Runtime (A1), ScriptedRuntime (A2) and the DAG (A3): model functions, content blocks, the
native tool loop, response_format, and what lands in `runtime.dag`."""
import pytest
from corehelp import pick

from openprogram import (
    Agent,
    DecisionError,
    ModelCallError,
    ModelResponse,
    OpenProgramError,
    Runtime,
    agent,
    decision,
)
from openprogram.runtimes import ScriptedRuntime, ScriptExhausted, ToolCall


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# -- A1 ---------------------------------------------------------------------------------------

@pytest.mark.rule("A1")
def test_A1_call_fn_gets_content_blocks_for_a_plain_string():
    seen = []

    def model(content):
        seen.append(content)
        return "hello back"

    rt = Runtime(call=model, model="echo-1")
    assert rt.exec("hello") == "hello back"
    assert seen == [[{"type": "text", "text": "hello"}]]
    assert rt.name == "echo-1" and rt.model == "echo-1"


@pytest.mark.rule("A1")
def test_A1_call_fn_gets_content_blocks_as_given():
    seen = []
    rt = Runtime(call=lambda content: seen.append(content) or "ok")
    image = {"type": "image", "source": {"type": "base64", "data": "AAAA"}}
    assert rt.exec([{"type": "text", "text": "look"}, image, "and this"]) == "ok"
    assert seen == [[{"type": "text", "text": "look"}, image,
                     {"type": "text", "text": "and this"}]]
    with pytest.raises(TypeError, match="content block"):
        rt.exec([42])
    with pytest.raises(TypeError, match="content must be a str or a list"):
        rt.exec(3.5)


@pytest.mark.rule("A1")
def test_A1_tools_and_messages_only_reach_a_fn_that_accepts_them():
    plain_kwargs, full_kwargs = [], []

    def plain(content):
        plain_kwargs.append(content)
        return "p"

    def full(content, *, tools=None, messages=None):
        full_kwargs.append((tools, messages))
        return "f"

    assert Runtime(call=plain).exec("q", tools=[add]) == "p"
    assert Runtime(call=full).exec("q", tools=[add]) == "f"
    tools, messages = full_kwargs[0]
    assert [t["name"] for t in tools] == ["add"]
    assert tools[0]["parameters"] == {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "q"}]}]


@pytest.mark.rule("A1")
def test_A1_native_tool_loop_with_a_call_fn():
    turns = []

    def model(content, tools=None):
        turns.append(content)
        if len(turns) == 1:
            return [ToolCall("add", {"a": 2, "b": 3}), ToolCall("add", {"a": 1, "b": "x"})]
        return "the sum is 5"

    rt = Runtime(call=model)
    assert rt.exec("add 2 and 3", tools=[add]) == "the sum is 5"
    second = turns[1]
    assert second[0] == {"type": "text", "text": "add 2 and 3"}
    uses = [b for b in second if b["type"] == "tool_use"]
    results = [b for b in second if b["type"] == "tool_result"]
    assert [u["input"] for u in uses] == [{"a": 2, "b": 3}, {"a": 1, "b": "x"}]
    assert results[0]["content"] == "5"
    assert results[1]["content"].startswith("Error: b must be int")  # bad args go back as text


@pytest.mark.rule("A1")
def test_A1_max_iterations_stops_a_model_that_keeps_calling_tools():
    rt = ScriptedRuntime([ToolCall("add", {"a": 1, "b": 1})] * 10)
    with pytest.raises(ModelCallError, match="max_iterations=3"):
        rt.exec("loop", tools=[add], max_iterations=3)
    assert len(rt.calls) == 3
    rt = ScriptedRuntime([ToolCall("add", {"a": 1, "b": 1})] * 2 + [pick("stay")])
    with pytest.raises(DecisionError) as info:
        agent("loop", tools=[add], options=["stay"], runtime=rt, max_iterations=2)
    assert "max_iterations=2" in info.value.message


@pytest.mark.rule("A1")
def test_A1_an_unknown_tool_name_goes_back_to_the_model():
    rt = ScriptedRuntime([ToolCall("mul", {"a": 1}), "fine"])
    assert rt.exec("x", tools=[add]) == "fine"
    tool_msg = [m for m in rt.calls[1].messages if m["role"] == "tool"][0]
    assert "there is no tool named 'mul'" in tool_msg["content"]


@pytest.mark.rule("A1")
def test_A1_response_format_validates_and_reasks_once():
    rt = ScriptedRuntime(['{"name": "Ann", "age": "old"}',
                          'Here:\n```json\n{"name": "Ann", "age": 40, "x": 1}\n```'])
    out = rt.exec("Who?", response_format={"name": str, "age": int})
    assert out == {"name": "Ann", "age": 40}
    assert rt.calls[0].prompt.startswith("Who?")
    assert '"name": "<str>", "age": 0' in rt.calls[0].prompt
    assert "The problem (type_mismatch at response.age)" in rt.calls[1].prompt
    trace = decision.last_trace()
    assert trace.entry == "format"
    assert [a.error_kind for a in trace.attempts] == ["type_mismatch", None]
    assert trace.attempts[1].dropped == ["response.x"]
    rt = ScriptedRuntime(["none", "none"])
    with pytest.raises(DecisionError) as info:
        rt.exec("Who?", response_format={"name": str})
    assert len(info.value.trace.attempts) == 2


@pytest.mark.rule("A1")
def test_A1_exec_argument_errors():
    rt = ScriptedRuntime([pick("a")])
    with pytest.raises(ValueError, match="options= or response_format=, not both"):
        rt.exec("x", options=["a"], response_format={"a": int})
    with pytest.raises(TypeError, match="response_format must be a dict schema"):
        rt.exec("x", response_format=[int])
    with pytest.raises(TypeError, match="needs a callable"):
        Runtime(call="gpt")
    assert rt.calls == []


@pytest.mark.rule("A1")
def test_A1_a_runtime_without_a_usable_model_fails_at_construction():
    # No call and no complete() of its own: refused when made, not at the first model call.
    with pytest.raises(TypeError,
                       match=r"Runtime\(\) has no model: pass Runtime\(call=fn\)") as err:
        Runtime()
    assert isinstance(err.value, OpenProgramError)

    def no_content(*, model):
        return "x"
    with pytest.raises(TypeError, match="cannot take the content"):
        Runtime(call=no_content)

    class Model:
        def __init__(self):
            pass
    with pytest.raises(TypeError, match="got the class Model; pass a function"):
        Runtime(call=Model)
    # A function of the content (with extras) and a subclass overriding complete() are fine.
    Runtime(call=lambda content, **kw: "x")

    class Own(Runtime):
        def complete(self, messages, **kw):
            return ModelResponse("x")
    Own()


@pytest.mark.rule("A1")
def test_A1_a_subclass_overrides_complete_and_streams():
    class Streaming(Runtime):
        streams = True

        def complete(self, messages, *, tools=None, on_text=None, timeout=None):
            text = pick("stay")
            for i in range(0, len(text), 4):
                if on_text:
                    on_text(text[i:i + 4])
            return ModelResponse(text, usage={"input_tokens": 5, "output_tokens": 2})

    chunks = []
    from openprogram import observe
    with observe(lambda e: e.kind == "reply_chunk" and chunks.append(e.data["text"])):
        assert decision.make("Pick.", ["stay"], runtime=Streaming()) == "stay"
    assert "".join(chunks) == pick("stay")
    trace = decision.last_trace()
    assert trace.attempts[0].usage == {"input_tokens": 5, "output_tokens": 2}


# -- A2 ---------------------------------------------------------------------------------------

@pytest.mark.rule("A2")
def test_A2_scripted_replies_play_in_order_with_callables_and_tool_calls():
    rt = ScriptedRuntime(["first", lambda prompt: f"echo: {prompt}",
                          ToolCall("add", {"a": 1, "b": 2}), "after tool"])
    assert rt.exec("one") == "first"
    assert rt.exec("two") == "echo: two"
    assert rt.exec("three", tools=[add]) == "after tool"
    assert [c.prompt for c in rt.calls] == ["one", "two", "three", "three"]
    assert rt.calls[2].tool_names == ["add"] and rt.calls[3].reply == "after tool"
    assert rt.remaining == 0


@pytest.mark.rule("A2")
def test_A2_running_out_says_how_many_were_given_and_asked():
    rt = ScriptedRuntime(["only one"])
    rt.exec("a")
    with pytest.raises(ScriptExhausted, match=r"1 given, call #2 asked for one more") as info:
        rt.exec("second prompt")
    assert "second prompt" in str(info.value)


@pytest.mark.rule("A2")
def test_A2_rule_answers_every_call_after_the_replies():
    rt = ScriptedRuntime(["scripted"], rule=lambda p: p.upper())
    assert [rt.exec("a"), rt.exec("b"), rt.exec("c")] == ["scripted", "B", "C"]
    with pytest.raises(TypeError, match="needs replies"):
        ScriptedRuntime()
    with pytest.raises(TypeError, match="for one reply write"):
        ScriptedRuntime("just a string")


@pytest.mark.rule("A2")
def test_A2_stream_chunk_and_latency_time_out():
    rt = ScriptedRuntime([pick("stay")], stream_chunk=3)
    chunks = []
    from openprogram import observe
    with observe(lambda e: e.kind == "reply_chunk" and chunks.append(e.data["text"])):
        decision.make("Pick.", ["stay"], runtime=rt)
    assert len(chunks) == -(-len(pick("stay")) // 3) and "".join(chunks) == pick("stay")
    slow = ScriptedRuntime([pick("stay")], latency=5.0)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ["stay"], runtime=slow, timeout_s=0.01)
    assert info.value.kind == "timeout"


@pytest.mark.rule("A1")
@pytest.mark.parametrize("kw, pattern", [
    ({"timeout_s": "5"}, r"timeout_s must be a number of seconds > 0 .*; got '5'"),
    ({"timeout_s": 0}, r"timeout_s must be a number of seconds > 0 .*; got 0"),
    ({"timeout_s": -1.5}, r"timeout_s must be a number of seconds > 0"),
    ({"timeout_s": True}, r"timeout_s must be a number of seconds > 0"),
    ({"max_iterations": 0}, r"max_iterations must be a whole number >= 1 .*, got 0"),
    ({"max_iterations": "3"}, r"max_iterations must be a whole number >= 1"),
])
def test_A1_bad_budgets_fail_before_any_model_call(kw, pattern):
    rt = ScriptedRuntime([pick("a")])
    calls = [lambda: agent("Go.", runtime=rt, **kw),
             lambda: agent("Go.", options=["a"], runtime=rt, **kw),
             lambda: agent("Go.", response_format={"n": int}, runtime=rt, **kw)]
    if "timeout_s" in kw:
        calls += [lambda: decision.make("Go.", ["a"], runtime=rt, **kw),
                  lambda: decision.evaluate("Go {x}.", ["a"], [{"x": 1}], runtime=rt,
                                            progress=False, **kw)]
    for call in calls:
        with pytest.raises(ValueError, match=pattern):
            call()
    assert rt.calls == [] and len(rt.dag) == 0


# -- A3 ---------------------------------------------------------------------------------------

@pytest.mark.rule("A3")
def test_A3_every_model_call_tool_round_and_method_is_a_node_with_a_parent():
    class Planner(Agent):
        method_options = {"add": {"tool": True}}

        def add(self, a: int, b: int) -> int:
            """Add."""
            return a + b

        def run(self):
            return agent("Sum, then pick.", toolset="default", options=["done"])

    rt = ScriptedRuntime([ToolCall("add", {"a": 1, "b": 2}), "no pick", pick("done")])
    assert Planner(runtime=rt).run() == "done"
    nodes = {n.id: n for n in rt.dag}
    shape = [(n.kind, n.name, nodes[n.parent].name if n.parent else None) for n in rt.dag]
    assert shape == [
        ("agent_method", "Planner.run", None),
        ("decision", "agent(options=)", "Planner.run"),
        ("model_call", "model_call", "agent(options=)"),      # tool round 1
        ("tool", "add", "agent(options=)"),
        ("agent_method", "Planner.add", "add"),
        ("model_call", "model_call", "agent(options=)"),      # the turn's last reply
        ("model_call", "model_call", "agent(options=)"),      # the re-ask
    ]
    assert all(n.status == "ok" and n.duration_s is not None for n in rt.dag)
    calls = [n for n in rt.dag if n.kind == "model_call"]
    assert all(n.input_tokens and n.input_tokens > 0 for n in calls)
    assert [n.reply for n in calls] == ["", "no pick", pick("done")]
    assert rt.dag.children(nodes[2].id) == [nodes[3], nodes[4], nodes[6], nodes[7]]


@pytest.mark.rule("A3")
def test_A3_a_failed_decision_marks_its_node():
    rt = ScriptedRuntime(["a", "b"])
    with pytest.raises(DecisionError):
        decision.make("Pick.", ["x"], runtime=rt)
    (node,) = [n for n in rt.dag if n.kind == "decision"]
    assert node.status == "error" and node.error.startswith("DecisionError")


@pytest.mark.rule("A3")
def test_A3_dag_as_dataframe():
    import pandas as pd
    rt = ScriptedRuntime(["nothing", pick("x")])
    decision.make("Pick.", ["x"], runtime=rt)
    frame = rt.dag.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["kind"]) == ["decision", "model_call", "model_call"]
    assert frame.index.name == "id"
    assert list(frame["parent"].iloc[1:]) == [frame.index[0]] * 2
    assert {"prompt", "reply", "input_tokens", "output_tokens", "duration_s"} <= set(frame)
