"""`shortlist="native"` (issue 38): where the provider searches deferred tools itself
(Anthropic's tool search tool), every option goes to it marked `defer_loading` beside the
search tool, and the provider's search results reach the trace; elsewhere the call is refused
with the fix. Against the loopback server through the official SDKs; the request is checked
against the SDK's own TypedDicts for the tool search tool and for a deferred tool."""
import json
import typing

import pytest
from fakeserver import FAKE_KEY, FakeServer, raw, tools

from openprogram import decision
from openprogram.base.errors import ArgumentError
from openprogram.decision.options.shortlist import loaded_tools
from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime, ScriptedRuntime


def make_menu(n=60):
    """A menu of `n` tools in the style of public tool sets, as a callable per tool."""
    def tool_fn(name):
        def fn(city: str) -> str:
            return f"{name}:{city}"
        fn.__name__ = name
        fn.__doc__ = f"The {name.replace('_', ' ')} of a city."
        return fn
    names = ["get_weather"] + [f"get_metric_{i}" for i in range(n - 1)]
    return {name: tool_fn(name) for name in names}


def searched_reply(pick_name, args):
    """A messages-API response as Claude sends it with tool search: the search it ran, the tool
    references it loaded, then the call."""
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 90, "output_tokens": 30},
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25",
                 "input": {"query": "weather"}},
                {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
                 "content": {"type": "tool_search_tool_search_result",
                             "tool_references": [{"type": "tool_reference",
                                                  "tool_name": "get_weather"}]}},
                {"type": "tool_use", "id": "toolu_1", "name": pick_name, "input": args}]}


def anthropic(server, **kw):
    return AnthropicRuntime(model="test-model", base_url=server.base_url, api_key=FAKE_KEY,
                            max_retries=0, **kw)


def test_native_sends_every_option_deferred_beside_the_tool_search_tool():
    from anthropic.types import ToolParam, ToolSearchToolBm25_20251119Param
    menu = make_menu()
    with FakeServer("anthropic") as server:
        server.push(raw(json.dumps(searched_reply("get_weather", {"city": "Oslo"}))))
        got = decision.make("What's the weather in Oslo?", menu, mode="tools",
                            shortlist="native", runtime=anthropic(server, stream=False))
        (body,) = server.bodies
    assert got == "get_weather:Oslo"
    *deferred, search = body["tools"]
    assert [t["name"] for t in deferred] == list(menu)  # all of them: the provider searches
    assert all(t["defer_loading"] is True for t in deferred)
    assert search == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    # the request's shapes are the SDK's own: every key a field of its TypedDict
    assert set(search) <= set(typing.get_type_hints(ToolSearchToolBm25_20251119Param))
    assert all(set(t) <= set(typing.get_type_hints(ToolParam)) for t in deferred)
    assert body["tool_choice"]["type"] == "auto"  # the model searches before it calls
    trace = decision.last_trace()
    assert trace.shortlist["by"] == "native" and trace.shortlist["of"] == len(menu)
    assert loaded_tools(trace.attempts[-1].raw) == ["get_weather"]  # what the provider loaded


def test_native_streams_too_and_without_a_search_nothing_was_loaded():
    with FakeServer("anthropic") as server:
        server.push(tools(("toolu_1", "get_weather", {"city": "Rome"})))
        got = decision.make("Weather in Rome?", make_menu(8), mode="tools", shortlist="native",
                            runtime=anthropic(server))
        (body,) = server.bodies
    assert got == "get_weather:Rome" and body["stream"] is True
    assert body["tools"][-1]["name"] == "tool_search_tool_bm25"
    assert loaded_tools(decision.last_trace().attempts[-1].raw) is None


def test_native_on_a_runtime_without_tool_search_names_the_fix():
    with FakeServer("openai") as server:
        rt = OpenAIRuntime(model="test-model", base_url=server.base_url, api_key=FAKE_KEY)
        with pytest.raises(ArgumentError, match=r"OpenAIRuntime has none.*shortlist=k"):
            decision.make("Weather?", make_menu(8), mode="tools", shortlist="native",
                          runtime=rt)
        assert server.bodies == []  # refused before any request
    with pytest.raises(ArgumentError, match="ScriptedRuntime has none"):
        decision.make("Weather?", make_menu(8), mode="tools", shortlist="native",
                      runtime=ScriptedRuntime([]))


def test_native_needs_tools_mode():
    with FakeServer("anthropic") as server:
        with pytest.raises(ArgumentError, match=r"needs mode='tools'.*mode='menu'"):
            decision.make("Weather?", make_menu(8), shortlist="native",
                          runtime=anthropic(server))
        assert server.bodies == []


def test_native_through_agent_and_a_recording(tmp_path):
    from openprogram import agent
    from openprogram.runtimes.cassette import RecordingRuntime, ReplayRuntime
    menu = make_menu(12)
    with FakeServer("anthropic") as server:
        server.push(raw(json.dumps(searched_reply("get_weather", {"city": "Lima"}))))
        rec = RecordingRuntime(anthropic(server, stream=False), tmp_path / "native.jsonl")
        assert agent("Weather in Lima?", options=menu, mode="tools", shortlist="native",
                     runtime=rec) == "get_weather:Lima"
        (body,) = server.bodies
    assert [t.get("defer_loading") for t in body["tools"]] == [True] * 12 + [None]
    # the recording replays, deferred tools and all, with no server
    assert agent("Weather in Lima?", options=menu, mode="tools", shortlist="native",
                 runtime=ReplayRuntime(tmp_path / "native.jsonl")) == "get_weather:Lima"


def test_evaluate_reports_the_native_searchs_recall_from_what_it_loaded():
    menu = make_menu(12)
    found_other = searched_reply("get_weather", {"city": "Bern"})
    found_other["content"][1]["content"]["tool_references"] = [
        {"type": "tool_reference", "tool_name": "get_metric_3"},
        {"type": "tool_reference", "tool_name": "get_weather"}]
    missed = searched_reply("get_metric_3", {"city": "Kyiv"})
    missed["content"][1]["content"]["tool_references"] = [
        {"type": "tool_reference", "tool_name": "get_metric_3"}]
    rows = [{"city": "Oslo", "want": "get_weather"}, {"city": "Bern", "want": "get_weather"},
            {"city": "Kyiv", "want": "get_weather"},   # the search missed the right tool
            {"city": "Rome", "want": "get_weather"}]   # no search at all: not counted
    with FakeServer("anthropic") as server:
        server.push(raw(json.dumps(searched_reply("get_weather", {"city": "Oslo"}))),
                    raw(json.dumps(found_other)), raw(json.dumps(missed)),
                    raw(json.dumps({**searched_reply("get_weather", {"city": "Rome"}),
                                    "content": [searched_reply("get_weather", {"city": "Rome"})
                                                ["content"][2]]})))
        run = decision.evaluate("Weather in {city}?", menu, rows, expected="want",
                                mode="tools", shortlist="native", concurrency=1,
                                progress=False, runtime=anthropic(server, stream=False))
    assert run.picks == ["get_weather", "get_weather", "get_metric_3", "get_weather"]
    assert run.shortlist_recall == 2 / 3 and run.accuracy == 3 / 4


def searched_events(pick_name, args):
    """The same reply as a stream of server-sent events, as the messages API streams it: the
    search's input arrives as input_json_delta pieces, its result whole."""
    reply = searched_reply(pick_name, args)
    events = [("message_start", {"type": "message_start", "message": {
        **{k: v for k, v in reply.items() if k != "content"}, "content": [],
        "stop_reason": None}})]
    for i, block in enumerate(reply["content"]):
        start = {**block, "input": {}} if "input" in block else block
        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": start}))
        if "input" in block:
            text = json.dumps(block["input"])
            for piece in (text[:5], text[5:]):
                events.append(("content_block_delta", {
                    "type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [("message_delta", {"type": "message_delta", "delta": {
                   "stop_reason": "tool_use", "stop_sequence": None},
                   "usage": {"output_tokens": 30}}),
               ("message_stop", {"type": "message_stop"})]
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events)


def assert_reask_keeps_the_search(body, pick_id="toolu_1"):
    """The re-ask's request holds the search's blocks before the call, as the reply had them,
    and the call's result answers that call."""
    assistant, user = body["messages"][1], body["messages"][2]
    assert [b["type"] for b in assistant["content"]] == \
        ["server_tool_use", "tool_search_tool_result", "tool_use"]
    assert assistant["content"][0] == {"type": "server_tool_use", "id": "srvtoolu_1",
                                       "name": "tool_search_tool_bm25",
                                       "input": {"query": "weather"}}
    assert assistant["content"][1]["content"]["tool_references"] == \
        [{"type": "tool_reference", "tool_name": "get_weather"}]
    assert [(b["type"], b["tool_use_id"]) for b in user["content"]] == [("tool_result", pick_id)]


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_ask_after_a_native_search_keeps_the_search_blocks(stream):
    from anthropic.types import ServerToolUseBlockParam, ToolSearchToolResultBlockParam
    first = raw(searched_events("get_weather", {"city": 5}), content_type="text/event-stream") \
        if stream else raw(json.dumps(searched_reply("get_weather", {"city": 5})))
    with FakeServer("anthropic") as server:
        server.push(first, tools(("toolu_2", "get_weather", {"city": "Oslo"})))
        got = decision.make("What's the weather in Oslo?", make_menu(), mode="tools",
                            shortlist="native", runtime=anthropic(server, stream=stream))
        assert server.refused == 0  # the server's check of the loaded tools passed
        first_body, reask = server.bodies
    assert got == "get_weather:Oslo"
    assert decision.last_trace().attempts[0].error_kind == "type_mismatch"  # city: 5, re-asked
    assert_reask_keeps_the_search(reask)
    # the blocks sent back are the SDK's own request shapes
    search, result, _ = reask["messages"][1]["content"]
    assert set(search) <= set(typing.get_type_hints(ServerToolUseBlockParam))
    assert set(result) <= set(typing.get_type_hints(ToolSearchToolResultBlockParam))


def test_the_loopback_server_refuses_a_call_of_a_deferred_tool_no_search_loaded():
    """The check the test above relies on: the re-ask as it was rebuilt before (the text and
    tool_use blocks alone) is refused, as the API refuses it."""
    import anthropic as sdk
    body = {"model": "test-model", "max_tokens": 64,
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"},
                       "defer_loading": True},
                      {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}],
            "messages": [{"role": "user", "content": "Weather in Oslo?"},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                              "input": {"city": 5}}]},
                         {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "toolu_1",
                              "content": "city must be a string"}]}]}
    with FakeServer("anthropic") as server:
        client = sdk.Anthropic(base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)
        with pytest.raises(sdk.BadRequestError, match="no tool search in this conversation "
                                                      "loaded"):
            client.messages.create(**body)
        assert server.refused == 1


def test_a_recorded_re_ask_after_a_native_search_replays(tmp_path):
    from openprogram.runtimes.cassette import RecordingRuntime, ReplayRuntime
    path = tmp_path / "native.jsonl"
    with FakeServer("anthropic") as server:
        server.push(raw(json.dumps(searched_reply("get_weather", {"city": 5}))),
                    tools(("toolu_2", "get_weather", {"city": "Oslo"})))
        rec = RecordingRuntime(anthropic(server, stream=False), path)
        live = decision.make("Weather in Oslo?", make_menu(12), mode="tools",
                             shortlist="native", runtime=rec)
        assert server.refused == 0
    replayed = decision.make("Weather in Oslo?", make_menu(12), mode="tools",
                             shortlist="native", runtime=ReplayRuntime(path))
    assert replayed == live == "get_weather:Oslo"
    assert [a.error_kind for a in decision.last_trace().attempts] == ["type_mismatch", None]
