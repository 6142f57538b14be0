"""The provider runtimes speak each provider's protocol, through the real SDK, to a loopback
server: plain turns, decisions, re-asks, native tool rounds, streaming, token accounting."""
import pytest
from fakeserver import FAKE_KEY, status, text, tools

import openprogram
from openprogram import agent, decision
from openprogram.runtimes import ModelCallError


def user_texts(provider, body):
    """The text of each user message of a recorded request body."""
    out = []
    for m in body["messages"]:
        if m["role"] != "user":
            continue
        c = m["content"]
        out.append(c if isinstance(c, str) else
                   "\n".join(b.get("text", "") for b in c if b.get("type") == "text"))
    return out


def test_plain_text_turn_streams_by_default(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text("Hello there, friend."))
    assert agent("Say hello", runtime=rt) == "Hello there, friend."
    (req,) = server.requests
    body = req.body
    assert req.path == ("/v1/chat/completions" if provider == "openai" else "/v1/messages")
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "Say hello"}]
    assert "tools" not in body
    if provider == "openai":
        assert body["stream_options"] == {"include_usage": True}
    else:
        assert body["max_tokens"] == 4096
    node = [n for n in rt.dag.nodes if n.kind == "model_call"][-1]
    assert (node.input_tokens, node.output_tokens, node.status) == (11, 7, "ok")
    assert node.reply == "Hello there, friend."


def test_non_streaming_mode(provider, server, make_runtime):
    rt = make_runtime(stream=False)
    assert rt.streams is False
    server.push(text("Plain answer", usage=(5, 2)))
    chunks = []
    resp = rt.complete([{"role": "user", "content": "q"}], on_text=chunks.append)
    assert resp.text == "Plain answer" and chunks == ["Plain answer"]
    assert resp.usage == {"input_tokens": 5, "output_tokens": 2}
    assert resp.model == "test-model"
    assert not server.requests[0].body.get("stream")


def test_system_prompt_and_request_options(provider, server, make_runtime):
    rt = make_runtime(system="Answer briefly.", temperature=0)
    server.push(text("ok"))
    rt.complete([{"role": "user", "content": "q"}])
    body = server.requests[0].body
    assert body["temperature"] == 0
    if provider == "openai":
        assert body["messages"][0] == {"role": "system", "content": "Answer briefly."}
    else:
        assert body["system"] == "Answer briefly."


def test_decision_make_records_reply_tokens_and_prompt(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text('I will take the refund.\n```json\n{"call": "refund", "args": '
                     '{"amount": 12.5}}\n```', usage=(40, 9)))

    def refund(amount: float) -> str:
        return f"refunded {amount}"

    def escalate(reason: str) -> str:
        return "escalated"

    result = decision.make("The customer wants their money back. Pick one.",
                           [refund, escalate], runtime=rt)
    assert result == "refunded 12.5"
    trace = decision.last_trace()
    (att,) = trace.attempts
    assert att.chosen == "refund" and att.args == {"amount": 12.5}
    assert att.usage == {"input_tokens": 40, "output_tokens": 9}
    # what the trace says was sent is what went over the wire
    assert user_texts(provider, server.requests[0].body) == [att.prompt]
    assert "refund(amount: float)" in att.prompt
    node = rt.dag.nodes[att.model_call_id - 1]
    assert node.id == att.model_call_id
    assert (node.input_tokens, node.output_tokens) == (40, 9)
    frame = trace.to_frame("attempts")
    assert frame.loc[1, "tokens_in"] == 40 and frame.loc[1, "tokens_out"] == 9
    dag = rt.dag.to_frame()
    assert dag.loc[att.model_call_id, "input_tokens"] == 40
    assert trace.to_frame("summary").iloc[0]["input_tokens"] == 40


def test_reask_sends_the_problem_back(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text('{"call": "delete_everything"}'), text('{"call": "archive"}'))
    assert decision.make("Pick an action.", ["archive", "keep"], runtime=rt) == "archive"
    assert len(server.requests) == 2
    (second,) = user_texts(provider, server.requests[1].body)
    assert second.startswith("Your previous reply could not be used")
    assert "delete_everything" in second and "archive" in second
    trace = decision.last_trace()
    assert [a.error_kind for a in trace.attempts] == ["unknown_call", None]
    assert [n.kind for n in rt.dag.nodes].count("model_call") == 2


def test_agent_native_tool_round_then_choice(provider, server, make_runtime):
    rt = make_runtime()
    seen = []

    def weather(city: str) -> str:
        """The current weather in a city."""
        seen.append(city)
        return f"rain in {city}"

    call_id = "call_w1" if provider == "openai" else "toolu_w1"
    server.push(tools((call_id, "weather", {"city": "Paris"}), text="Let me check."),
                text('It rains.\n```json\n{"call": "umbrella"}\n```'))
    result = agent("Should I take an umbrella in Paris?", tools=[weather],
                   options={"umbrella": "take it", "sunglasses": "take them"}, runtime=rt)
    assert result == "take it" and seen == ["Paris"]

    first, second = (r.body for r in server.requests)
    spec_params = {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}
    if provider == "openai":
        assert first["tools"] == [{"type": "function", "function": {
            "name": "weather", "parameters": spec_params,
            "description": "The current weather in a city."}}]
        assistant, tool_msg = second["messages"][1:3]
        assert assistant == {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]}
        assert tool_msg == {"role": "tool", "tool_call_id": call_id, "content": "rain in Paris"}
    else:
        assert first["tools"] == [{"name": "weather", "input_schema": spec_params,
                                   "description": "The current weather in a city."}]
        assistant, results = second["messages"][1:3]
        assert assistant == {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": call_id, "name": "weather", "input": {"city": "Paris"}}]}
        assert results == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": "rain in Paris"}]}
    assert second["tools"] == first["tools"]
    trace = decision.last_trace()
    assert [(r.name, r.args, r.result) for r in trace.tool_rounds] == \
        [("weather", {"city": "Paris"}, "rain in Paris")]
    assert [n.kind for n in rt.dag.nodes].count("model_call") == 2
    assert [n.name for n in rt.dag.nodes if n.kind == "tool"] == ["weather"]


def test_two_tool_calls_in_one_round(provider, server, make_runtime):
    rt = make_runtime()

    def add(a: int, b: int) -> int:
        return a + b

    server.push(tools(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4})),
                text("3 and 7"))
    assert agent("Add both pairs", tools=[add], runtime=rt) == "3 and 7"
    msgs = server.requests[1].body["messages"]
    if provider == "openai":
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool"]
        assert [m["content"] for m in msgs[2:]] == ["3", "7"]
    else:  # both results in the one user message that follows the tool_use blocks
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
        assert [(b["tool_use_id"], b["content"]) for b in msgs[2]["content"]] == \
            [("c1", "3"), ("c2", "7")]


def test_tool_arguments_that_are_not_json_go_back_to_the_model():
    # only chat completions carries tool arguments as a JSON string the model can get wrong
    from fakeserver import FakeServer

    from openprogram.runtimes import OpenAIRuntime
    with FakeServer("openai") as server:
        rt = OpenAIRuntime(model="m", base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)
        _bad_args_round(server, rt)


def _bad_args_round(server, rt):

    def add(a: int, b: int) -> int:
        return a + b

    server.push(tools(("c1", "add", "{a: 1"), text="oops"), text("sorry"))
    assert agent("Add", tools=[add], runtime=rt) == "sorry"
    tool_msg = server.requests[1].body["messages"][2]
    assert tool_msg["role"] == "tool" and "arguments must be a JSON object" in tool_msg["content"]
    # the malformed arguments are sent back exactly as the model wrote them
    assert server.requests[1].body["messages"][1]["tool_calls"][0]["function"]["arguments"] \
        == "{a: 1"


def test_stream_chunks_reach_observers_as_reply_chunks(provider, server, make_runtime):
    rt = make_runtime()
    reply = 'Thinking it over... ```json\n{"call": "yes"}\n```'
    server.push(text(reply, chunk=5))
    events = []
    with openprogram.observe(lambda e: events.append(
            (e.kind, e.data.get("text"), e.attempt.reply if e.attempt else None))):
        assert decision.make("Yes or no?", ["yes", "no"], runtime=rt) == "yes"
    chunks = [(t, r) for k, t, r in events if k == "reply_chunk"]
    assert len(chunks) == len(range(0, len(reply), 5))
    assert "".join(t for t, _ in chunks) == reply
    # A chunk event carries only its new text; the attempt record it holds is the one sent
    # (frozen, never grown), and the whole reply arrives with reply_received.
    assert all(r is None for _, r in chunks)
    assert [r for k, _, r in events if k == "reply_received"] == [reply]
    kinds = [k for k, _, _ in events]
    assert kinds.index("attempt_sent") < kinds.index("reply_chunk") < \
        kinds.index("reply_received")


def test_key_from_environment_reaches_only_the_server(provider, server, monkeypatch):
    from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime
    cls = OpenAIRuntime if provider == "openai" else AnthropicRuntime
    monkeypatch.setenv(cls.api.env_key, FAKE_KEY)
    rt = cls(model="m", base_url=server.base_url, max_retries=0)
    server.push(text("hi"))
    rt.complete([{"role": "user", "content": "q"}])
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert FAKE_KEY in (headers.get("authorization", "") + headers.get("x-api-key", ""))


def test_missing_key_says_where_to_put_it(provider, monkeypatch):
    from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime
    cls = OpenAIRuntime if provider == "openai" else AnthropicRuntime
    monkeypatch.delenv(cls.api.env_key, raising=False)
    with pytest.raises(ModelCallError) as info:
        cls(model="m")
    assert cls.api.env_key in str(info.value) and "api_key=" in str(info.value)


def test_local_server_needs_no_key(monkeypatch):
    from fakeserver import FakeServer

    from openprogram.runtimes import OpenAIRuntime
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeServer("openai") as s:
        rt = OpenAIRuntime(model="llama3.2", base_url=s.base_url, max_retries=0)
        s.push(text("local reply"))
        assert agent("hi", runtime=rt) == "local reply"


def test_bad_constructor_arguments_are_named():
    from openprogram.runtimes import OpenAIRuntime
    with pytest.raises(TypeError, match="model="):
        OpenAIRuntime(model="", api_key="k")
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIRuntime(model="m", api_key="k", max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        OpenAIRuntime(model="m", api_key="k", timeout=0)


def test_unsupported_content_block_is_a_clear_error(provider, server, make_runtime):
    rt = make_runtime()
    with pytest.raises(ModelCallError, match="'audio_clip'"):
        rt.complete([{"role": "user", "content": [{"type": "audio_clip", "data": "x"}]}])
    assert server.requests == []


def test_status_error_with_unknown_code_is_reported(provider, server, make_runtime):
    rt = make_runtime()
    server.push(status(418, "I am a teapot"))
    with pytest.raises(ModelCallError, match="418.*teapot"):
        rt.complete([{"role": "user", "content": "q"}])


def test_import_stays_standard_library_only():
    import subprocess
    import sys
    code = ("import sys, openprogram, openprogram.runtimes as r; "
            "assert r.ReplayRuntime and r.OpenAIRuntime and r.AnthropicRuntime; "
            "bad = [m for m in ('openai', 'anthropic', 'httpx2', 'httpx', 'pandas') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("cls_name, sdk", [("OpenAIRuntime", "openai"),
                                           ("AnthropicRuntime", "anthropic")])
def test_missing_sdk_names_the_distribution_and_its_extra(cls_name, sdk):
    """`openprogram` on the package index is another project: the hint names this one's
    distribution. (A None entry in sys.modules is how Python itself marks a module that
    cannot be imported.)"""
    import subprocess
    import sys
    code = (f"import sys; sys.modules[{sdk!r}] = None\n"
            f"from openprogram.runtimes import {cls_name}\n"
            f"try:\n    {cls_name}(model='m', api_key='k')\n"
            f"except ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"pip install 'openprogram-decisions[{sdk}]'" in out.stdout
    assert f"needs the {sdk!r} package" in out.stdout
