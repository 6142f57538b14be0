"""The three ways of asking on the provider runtimes, through the official SDKs (sync and async
clients, streaming and not) to the loopback server: what each request body carries, how each
reply becomes the pick, re-asks in the provider's own message shapes, refusals and cut-off
replies, the raw request and response, and many async decisions in flight at once."""
import asyncio
import json
import re

import jsonschema
import pytest
from fakeserver import FAKE_KEY, text, tools
from test_strict_schema import violations

from openprogram import DecisionError, agent, decision
from openprogram.runtimes.providers.raw_record import LIMIT, size


def greet(name: str, loud: bool = False) -> str:
    """Greet someone."""
    return f"hello {name}" + ("!" if loud else "")


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left to do"),
           "note": ("Write a note.", {"text": str})}
NAMES = ["greet", "done", "note"]


@pytest.fixture(params=[True, False], ids=["stream", "whole"])
def stream(request):
    return request.param


def tool_names(provider, body):
    return [t["function"]["name"] if provider == "openai" else t["name"]
            for t in body.get("tools", [])]


def tool_params(provider, body, name):
    (spec,) = [t for t in body["tools"]
               if (t["function"]["name"] if provider == "openai" else t["name"]) == name]
    return spec["function"]["parameters"] if provider == "openai" else spec["input_schema"]


def schema_reply(provider, pick: dict, call_id="toolu_s1"):
    """A json_schema reply: the JSON text (OpenAI), the forced tool's input (Anthropic)."""
    if provider == "openai":
        return text(json.dumps({"decision": pick}))
    return tools((call_id, "decision", {"decision": pick}))


# -- menu mode ------------------------------------------------------------------------------------

def test_menu_mode_sends_no_tools_and_no_format(provider, server, make_runtime, stream):
    rt = make_runtime(stream=stream)
    server.push(text('```json\n{"call": "done"}\n```'))
    assert decision.make("Pick.", OPTIONS, runtime=rt) == "DONE"
    (body,) = server.bodies
    assert not {"tools", "tool_choice", "response_format", "parallel_tool_calls"} & set(body)
    assert body["messages"][0]["content"] == "Pick.\n\n" + decision.render_options(OPTIONS)
    assert decision.last_trace().mode == "menu"


# -- tools mode -----------------------------------------------------------------------------------

def test_tools_mode_sends_one_forced_tool_per_option_and_the_call_is_the_pick(
        provider, server, make_runtime, stream):
    rt = make_runtime(stream=stream)
    server.push(tools(("c1", "greet", {"name": "Ada", "loud": True})))
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == "hello Ada!"
    (body,) = server.bodies
    assert body["messages"] == [{"role": "user", "content": "Pick."}]  # no menu text
    assert tool_names(provider, body) == NAMES
    assert tool_params(provider, body, "greet") == {
        "type": "object", "properties": {"name": {"type": "string"},
                                         "loud": {"type": "boolean"}},
        "required": ["name"], "additionalProperties": False}
    if provider == "openai":
        assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
        assert body["tools"][0]["function"]["description"] == "Greet someone."
    else:
        assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
        assert body["tools"][0]["description"] == "Greet someone."
    assert "response_format" not in body
    att = decision.last_trace().attempts[0]
    assert att.found_in == "tool_call" and att.chosen == "greet"
    assert att.tool_calls == [{"name": "greet", "args": {"name": "Ada", "loud": True},
                               "id": "c1"}]


def test_tools_mode_re_asks_bad_arguments_as_the_tool_result(provider, server, make_runtime,
                                                             stream):
    rt = make_runtime(stream=stream)
    server.push(tools(("c1", "greet", {"name": 3})), tools(("c2", "note", {"text": "hi"})))
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == \
        {"decision": "note", "text": "hi"}
    first, second = server.bodies
    assert second["tools"] == first["tools"] and second["tool_choice"] == first["tool_choice"]
    msgs = second["messages"]
    if provider == "openai":
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool"]
        assert msgs[1]["tool_calls"] == [{"id": "c1", "type": "function", "function": {
            "name": "greet", "arguments": '{"name": 3}'}}]
        assert msgs[2]["tool_call_id"] == "c1"
        reask = msgs[2]["content"]
    else:
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
        assert msgs[1]["content"] == [{"type": "tool_use", "id": "c1", "name": "greet",
                                       "input": {"name": 3}}]
        (result,) = msgs[2]["content"]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "c1"
        reask = result["content"]
    assert "args.name must be str" in reask
    trace = decision.last_trace()
    assert [a.error_kind for a in trace.attempts] == ["type_mismatch", None]
    assert trace.attempts[1].prompt == reask  # the trace says what went back


def test_tools_mode_text_reply_is_no_action_and_the_re_ask_follows_it(provider, server,
                                                                     make_runtime):
    rt = make_runtime()
    server.push(text("I would greet Ada."), tools(("c2", "done", {})))
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == "DONE"
    msgs = server.bodies[1]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"] == "I would greet Ada."  # plain text turns go as strings
    assert [a.error_kind for a in decision.last_trace().attempts] == ["no_action", None]


def test_agent_in_tools_mode_runs_work_tools_until_a_choice_is_called(provider, server,
                                                                      make_runtime, stream):
    rt = make_runtime(stream=stream)

    def lookup(order: int) -> str:
        """Look an order up."""
        return f"order {order}: delayed"

    server.push(tools(("c1", "lookup", {"order": 5})), tools(("c2", "done", {})))
    assert agent("Handle order 5.", tools=[lookup], options=OPTIONS, runtime=rt,
                 mode="tools") == "DONE"
    first, second = server.bodies
    assert tool_names(provider, first) == ["lookup", *NAMES]
    assert first["messages"] == [{"role": "user", "content": "Handle order 5."}]
    last = second["messages"][-1]
    assert ("order 5: delayed" in json.dumps(last)) and last["role"] in ("tool", "user")
    trace = decision.last_trace()
    assert [r.name for r in trace.tool_rounds] == ["lookup"] and trace.chosen == "done"
    assert len(trace.attempts) == 1


def test_a_function_that_is_both_a_tool_and_a_choice_is_sent_once_and_calling_it_is_the_pick(
        provider, server, make_runtime):
    rt = make_runtime()
    ran = []

    def lookup(order: int) -> str:
        """Look an order up."""
        ran.append(order)
        return f"order {order}: delayed"

    server.push(tools(("c1", "lookup", {"order": 7})))
    assert agent("Handle order 7.", tools=[lookup], options={"lookup": lookup, "done": "DONE"},
                 runtime=rt, mode="tools") == "order 7: delayed"
    (body,) = server.bodies
    assert tool_names(provider, body) == ["lookup", "done"]   # one spec per name
    trace = decision.last_trace()
    assert trace.tool_rounds == [] and trace.chosen == "lookup" and ran == [7]


# -- json_schema mode -----------------------------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai"])
def test_json_schema_mode_on_openai_is_strict_structured_output(server, make_runtime, stream,
                                                                provider):
    rt = make_runtime(stream=stream)
    sent = '{"decision": {"call": "greet", "args": {"name": "Bo", "loud": null}}}'
    server.push(text(sent))
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema") == "hello Bo"
    (body,) = server.bodies
    assert "tools" not in body and body["messages"] == [{"role": "user", "content": "Pick."}]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "decision"
    schema = fmt["json_schema"]["schema"]
    assert violations(schema) == []  # the documented rules, not only this server
    jsonschema.Draft202012Validator(schema).validate(json.loads(sent))
    greet_args = schema["properties"]["decision"]["anyOf"][0]["properties"]["args"]
    assert greet_args["required"] == ["name", "loud"]
    assert greet_args["properties"]["loud"] == {"type": ["boolean", "null"]}
    att = decision.last_trace().attempts[0]
    # the forced null is gone from the reply the decision read; the raw record has it as sent
    assert json.loads(att.reply) == {"decision": {"call": "greet", "args": {"name": "Bo"}}}
    assert att.raw["reply"] == sent
    assert any("decision.args.loud" in n for n in att.raw["notes"])
    assert att.found_in == "schema" and att.error_kind is None


@pytest.mark.parametrize("provider", ["openai"])
def test_a_schema_strict_mode_cannot_express_goes_with_strict_off(server, make_runtime,
                                                                  provider):
    rt = make_runtime()

    def tag(labels: dict) -> str:
        """Tag with free-form labels."""
        return ",".join(sorted(labels))

    server.push(text('{"decision": {"call": "tag", "args": {"labels": {"a": 1}}}}'))
    assert decision.make("Pick.", {"tag": tag, "done": "DONE"}, runtime=rt,
                         mode="json_schema") == "a"
    fmt = server.bodies[0]["response_format"]["json_schema"]
    assert fmt["strict"] is False
    note = decision.last_trace().attempts[0].raw["notes"][0]
    assert "strict mode is off" in note and "free-form keys" in note


@pytest.mark.parametrize("provider", ["openai"])
def test_keywords_strict_mode_drops_are_named_and_judged_after_the_reply(server, make_runtime,
                                                                         provider):
    """A JsonSchema whose `not` and `minLength` strict mode cannot carry: sent strict, the
    trace names what the server did not enforce, and the option's validation re-asks a reply
    that breaks them."""
    import openprogram
    rt = make_runtime()
    schema = {"type": "object", "required": ["code", "level"], "properties": {
        "code": {"type": "string", "minLength": 3},
        "level": {"type": "integer", "not": {"const": 5}}}, "additionalProperties": False}
    server.push(text('{"decision": {"call": "set", "args": {"code": "abc", "level": 5}}}'))
    server.push(text('{"decision": {"call": "set", "args": {"code": "abc", "level": 4}}}'))
    got = decision.make("Pick.", {"set": openprogram.JsonSchema(schema), "done": "DONE"},
                        runtime=rt, mode="json_schema")
    assert got == {"decision": "set", "code": "abc", "level": 4}
    assert server.bodies[0]["response_format"]["json_schema"]["strict"] is True
    first = decision.last_trace().attempts[0]
    note = next(n for n in first.raw["notes"] if "strict mode cannot express" in n)
    assert "minLength at #/" in note and "not at #/" in note and "/properties/level" in note
    assert (first.error_kind, first.error_path) == ("invalid_value", "args.level")


@pytest.mark.parametrize("provider", ["anthropic"])
def test_json_schema_mode_on_anthropic_is_one_forced_tool(server, make_runtime, stream,
                                                          provider):
    rt = make_runtime(stream=stream)
    pick = {"call": "note", "args": {"text": "hi"}}
    server.push(schema_reply(provider, pick))
    chunks = []
    import openprogram
    with openprogram.observe(lambda e: e.kind == "reply_chunk" and chunks.append(e.data["text"])):
        assert decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema") == \
            {"decision": "note", "text": "hi"}
    (body,) = server.bodies
    (tool,) = body["tools"]
    assert tool["name"] == "decision"
    assert tool["input_schema"]["properties"]["decision"]["anyOf"][2]["properties"]["call"] \
        == {"const": "note"}
    assert body["tool_choice"] == {"type": "tool", "name": "decision"}
    att = decision.last_trace().attempts[0]
    assert json.loads(att.reply) == {"decision": pick} and att.tool_calls is None
    assert "forced tool 'decision'" in att.raw["notes"][0]
    assert att.raw["request"]["tool_choice"] == {"type": "tool", "name": "decision"}
    if stream:  # the tool's input streams as the reply's text
        assert json.loads("".join(chunks)) == {"decision": pick}


def test_exec_response_format_in_json_schema_mode(provider, server, make_runtime):
    rt = make_runtime()
    plan = {"city": "Oslo", "days": 2}
    server.push(text(json.dumps(plan)) if provider == "openai"
                else tools(("t1", "response", plan)))
    assert rt.exec("Plan a trip.", response_format={"city": str, "days": int},
                   mode="json_schema") == plan
    body = server.bodies[0]
    if provider == "openai":
        assert body["response_format"]["json_schema"]["name"] == "response"
        assert violations(body["response_format"]["json_schema"]["schema"]) == []
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "response"}


@pytest.mark.parametrize("provider", ["anthropic"])
def test_json_schema_with_work_tools_on_anthropic_lets_any_tool_be_called(server, make_runtime,
                                                                          provider):
    rt = make_runtime()

    def lookup(order: int) -> str:
        """Look an order up."""
        return f"order {order}: delayed"

    server.push(tools(("c1", "lookup", {"order": 5})),
                schema_reply(provider, {"call": "done", "args": {}}))
    assert agent("Handle order 5.", tools=[lookup], options=OPTIONS, runtime=rt,
                 mode="json_schema") == "DONE"
    first = server.bodies[0]
    assert [t["name"] for t in first["tools"]] == ["lookup", "decision"]
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert [r.name for r in decision.last_trace().tool_rounds] == ["lookup"]


# -- refusals and replies cut off -----------------------------------------------------------------

def test_refusal_and_token_limit_are_refused_and_truncated(provider, server, make_runtime,
                                                           stream):
    rt = make_runtime(stream=stream)
    if provider == "openai":
        server.push(text("", refusal="I can't help with that."),
                    text('{"call": "gre', finish="length"))
    else:
        server.push(text("I can't help with that.", finish="refusal"),
                    text('{"call": "gre', finish="max_tokens"))
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    first, second = info.value.trace.attempts
    assert (first.error_kind, second.error_kind) == ("refused", "truncated")
    assert "I can't help with that." in first.error_message
    assert second.finish_reason == ("length" if provider == "openai" else "max_tokens")


def test_a_tool_call_cut_off_at_the_token_limit_is_truncated(provider, server, make_runtime):
    rt = make_runtime()  # streamed: the arguments arrive in pieces and stop mid-way
    cut = "length" if provider == "openai" else "max_tokens"
    server.push(tools(("c1", "greet", '{"name": "A'), finish=cut),
                tools(("c2", "greet", '{"name": "Ad'), finish=cut))
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt, mode="tools")
    atts = info.value.trace.attempts
    assert [a.error_kind for a in atts] == ["truncated", "truncated"]
    assert "cut off at the token limit" in atts[0].raw["notes"][0]


# A whole Anthropic message carries a tool's input as an object, never cut: only its stream can
# stop in the middle of the JSON.
@pytest.mark.parametrize("provider, stream", [("openai", True), ("openai", False),
                                              ("anthropic", True)])
def test_json_schema_reply_cut_off_is_truncated(provider, server, make_runtime, stream):
    rt = make_runtime(stream=stream)
    cut = "length" if provider == "openai" else "max_tokens"
    partial = '{"decision": {"call": "gr'
    reply = text(partial, finish=cut) if provider == "openai" else \
        tools(("t1", "decision", partial), finish=cut)
    server.push(reply, reply)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema")
    atts = info.value.trace.attempts
    assert [a.error_kind for a in atts] == ["truncated", "truncated"]
    assert atts[0].reply == partial


# -- the raw request and response -----------------------------------------------------------------

def test_raw_record_is_the_body_sent_and_the_response_received(provider, server, make_runtime,
                                                               stream):
    rt = make_runtime(stream=stream, extra_body={"top_k": 3})  # sent at the top level
    server.push(tools(("c1", "greet", {"name": "Ada"})))
    decision.make("Pick.", OPTIONS, runtime=rt, mode="tools")
    raw = decision.last_trace().attempts[0].raw
    assert raw["request"] == server.bodies[0] and raw["request"]["top_k"] == 3
    response = raw["response"]
    if stream:
        events = response["stream"]
        kinds = {e.get("object") if provider == "openai" else e.get("type") for e in events}
        assert kinds == ({"chat.completion.chunk"} if provider == "openai" else
                         {"message_start", "content_block_start",
                          "content_block_delta", "content_block_stop", "message_delta",
                          "message_stop"})
    elif provider == "openai":
        assert response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == \
            "greet"
    else:
        assert response["content"] == [{"type": "tool_use", "id": "c1", "name": "greet",
                                         "input": {"name": "Ada"}}]
    json.dumps(decision.last_trace().to_dict()["attempts"][0]["raw"])


def test_raw_record_holds_no_key_and_is_bounded(provider, server, make_runtime, stream):
    rt = make_runtime(stream=stream)
    big = ("x" * 100 + " ") * 1500 + f" the key is {FAKE_KEY} " + '{"call": "done"}'
    server.push(text(big, chunk=2000))
    assert decision.make("Pick.", OPTIONS, runtime=rt) == "DONE"
    raw = decision.last_trace().attempts[0].raw
    whole = json.dumps(raw)
    assert FAKE_KEY not in whole and FAKE_KEY[-12:] not in whole
    assert size(raw["response"]) <= LIMIT and size(raw["request"]) <= LIMIT
    assert re.search(r"\[\d+ more (characters|items|keys|events) cut\]", whole)


# -- async clients --------------------------------------------------------------------------------

def _picks_done(provider, mode, n):
    """`n` replies that pick "done" in `mode`."""
    if mode == "menu":
        return [text('{"call": "done"}') for _ in range(n)]
    if mode == "tools":
        return [tools((f"c{i}", "done", {})) for i in range(n)]
    return [schema_reply(provider, {"call": "done", "args": {}}) for _ in range(n)]


@pytest.mark.parametrize("mode", ["menu", "tools", "json_schema"])
def test_amake_runs_on_the_async_client_concurrently(provider, server, make_runtime, stream,
                                                     mode):
    """Four `amake`s on one loop are at the server at the same time: each reply waits until
    four requests are in flight, and the server counts them."""
    n = 4
    rt = make_runtime(stream=stream)
    replies = _picks_done(provider, mode, n)
    for r in replies:
        r.gate = n
    server.push(*replies)

    async def main():
        return await asyncio.gather(*(decision.amake(f"Pick {i}.", OPTIONS, runtime=rt,
                                                     mode=mode) for i in range(n)))
    assert asyncio.run(main()) == ["DONE"] * n
    assert server.max_in_flight == n
    bodies = server.bodies
    assert sorted(b["messages"][0]["content"].split("\n")[0] for b in bodies) == \
        [f"Pick {i}." for i in range(n)]
    if mode == "tools":
        assert all(tool_names(provider, b) == NAMES for b in bodies)


def test_async_re_ask_and_second_event_loop(provider, server, make_runtime, stream):
    """An async tools-mode re-ask, then a second `asyncio.run` (a new loop, a new client)."""
    rt = make_runtime(stream=stream)
    server.push(tools(("c1", "greet", {"name": 3})), tools(("c2", "greet", {"name": "Ada"})),
                text('{"call": "done"}'))

    async def pick(mode):
        return await decision.amake("Pick.", OPTIONS, runtime=rt, mode=mode)
    assert asyncio.run(pick("tools")) == "hello Ada"
    assert "args.name must be str" in json.dumps(server.bodies[1]["messages"][-1])
    assert asyncio.run(pick("menu")) == "DONE"


def test_async_call_keeps_the_time_budget(provider, server, make_runtime):
    from openprogram.runtimes import ModelCallError
    rt = make_runtime()
    server.push(text("late", delay=5))

    async def main():
        return await rt.acomplete([{"role": "user", "content": "q"}], timeout=0.3)
    with pytest.raises(ModelCallError) as info:
        asyncio.run(main())
    assert info.value.kind == "timeout"


def test_one_async_client_per_event_loop_even_one_without_weak_references(
        provider, make_runtime, monkeypatch):
    """The async client's connections belong to the loop that made them: each loop gets its
    own client, cached while the loop lives (by weak reference, or kept with its client when
    the loop takes none)."""
    rt = make_runtime()

    async def client():
        return rt._async_client()
    first = asyncio.run(client())
    assert first is not rt._client and type(first).__name__.startswith("Async")
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(client()) is loop.run_until_complete(client())
        assert loop.run_until_complete(client()) is not first
    finally:
        loop.close()

    class NoWeakLoop:
        __slots__ = ()
    odd, other = NoWeakLoop(), NoWeakLoop()
    monkeypatch.setattr(asyncio, "get_running_loop", lambda: odd)
    a = rt._async_client()
    assert rt._async_client() is a
    monkeypatch.setattr(asyncio, "get_running_loop", lambda: other)
    assert rt._async_client() is not a


@pytest.mark.parametrize("provider", ["openai"])
def test_an_options_references_go_strict_through_the_roots_defs(server, make_runtime,
                                                                   provider):
    """A tree whose children refer to the whole schema (`#`) and a field that refers to another
    (`#/properties/label`): in the decision schema they point at the root's `$defs`, which strict
    mode follows, recursion included, so the schema goes strict and judges as the option does."""
    import openprogram
    tree = {"type": "object", "additionalProperties": False, "required": ["label", "kids"],
            "properties": {"label": {"type": "string"},
                           "kids": {"type": "array", "items": {"$ref": "#"}},
                           "twin": {"$ref": "#/properties/label"}}}
    args = {"label": "a", "kids": [{"label": "b", "kids": []}], "twin": "c"}
    server.push(text(json.dumps({"decision": {"call": "tree", "args": args}})))
    got = decision.make("Pick.", {"tree": openprogram.JsonSchema(tree), "done": "DONE"},
                        runtime=make_runtime(), mode="json_schema")
    assert got == {"decision": "tree", **args}
    fmt = server.bodies[0]["response_format"]["json_schema"]
    assert fmt["strict"] is True
    schema = fmt["schema"]
    assert violations(schema) == []
    assert schema["$defs"]["root"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/root"}
    check = jsonschema.Draft202012Validator(schema)
    strict_args = {**args, "kids": [{"label": "b", "kids": [], "twin": None}]}
    assert check.is_valid({"decision": {"call": "tree", "args": strict_args}})
    assert not check.is_valid({"decision": {"call": "tree", "args": {**strict_args,
                                                                     "twin": 3}}})
