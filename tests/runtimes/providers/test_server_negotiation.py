"""What OpenAIRuntime sends to each OpenAI-compatible server, and what it does when a server refuses
a request form: the loopback server answers as each server documents (its refusal rules give the
server's own status and words), and the real SDK client talks to it.

One case per documented refusal: the refused request, the one retry with the nearest form the
server accepts, the record on the trace (what was asked, the server's words, what was sent), and
the second decision on the same runtime sending the accepted form at once (counted requests).
Then the servers named up front (`server=`), refusals no nearer form satisfies, the advice on
request-shape errors, and unknown keywords to the runtimes."""
import asyncio
import json

import pytest
from fakeserver import FAKE_KEY, FakeServer, raw, status, text, tools

from openprogram import DecisionError, Retry, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime
from openprogram.runtimes.providers.server_forms import FORMS
from openprogram.trace.view import trace_html


def greet(name: str, loud: bool = False) -> str:
    """Greet someone."""
    return f"hello {name}" + ("!" if loud else "")


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left to do")}
ONE = {"greet": greet}
SCHEMA = decision_schema(normalize(OPTIONS))


def picked(pick: dict):
    """A json_schema reply holding `pick`."""
    return text(json.dumps({"decision": pick}))


# What each server answers to a form it does not take: (status, words), as documented or seen.
#: llama.cpp's llama-server before it took json_schema (ikawrakow/ik_llama.cpp#778, llama.cpp#9527)
LLAMA_CPP_JSON_SCHEMA = (500, 'response_format type must be one of "text" or "json_object", '
                              'but got: json_schema')
#: vLLM before 0.6: pydantic's literal error on response_format.type, in vLLM's error body
VLLM_JSON_SCHEMA = (400, "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                         "'msg': \"Input should be 'text' or 'json_object'\"}]")
#: vLLM before 0.8.3 ("required" came in 0.8.3), and vLLM without --enable-auto-tool-choice
VLLM_REQUIRED = (400, '`tool_choice` must either be a named tool, "auto", or "none".')
VLLM_AUTO = (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                  'to be set')
#: Azure OpenAI's answer to a field its API version does not have
AZURE_STREAM_OPTIONS = (400, "Unrecognized request argument supplied: stream_options")
AZURE_PARALLEL = (400, "Unrecognized request argument supplied: parallel_tool_calls")
#: a server that takes json_schema but not strict mode
NO_STRICT = (400, "Invalid response_format: 'strict' is not supported")
#: llama.cpp's llama-server started without --jinja
LLAMA_CPP_NO_JINJA = (500, "tools param requires --jinja flag")
#: llama-cpp-python 0.3.36's server, as seen in tests/servers: its request model validates
#: response_format.type, and an assistant message's content, with pydantic (and answers 500)
LLAMA_CPP_PYTHON_JSON_SCHEMA = (
    500, "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
         "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")
LLAMA_CPP_PYTHON_NULL_CONTENT = (
    500, "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
         "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
         "string', 'input': None}")
#: its chatml-function-calling format raises on tool_choice "required": a 500 with no words
#: (not streamed), or a 200 whose stream ends at once (streamed)
CRASH_BODY = {"error": {"message": "", "type": "internal_server_error", "param": None,
                        "code": None}}


def vllm_body(words: str) -> dict:
    return {"object": "error", "message": words, "type": "BadRequestError", "param": None,
            "code": 400}


def is_json_schema(body):
    return (body.get("response_format") or {}).get("type") == "json_schema"


def is_strict(body):
    return ((body.get("response_format") or {}).get("json_schema") or {}).get("strict") is True


@pytest.fixture
def server():
    with FakeServer("openai") as s:
        yield s


@pytest.fixture(params=["sync-stream", "sync-whole", "async-stream", "async-whole"])
def how(request):
    return request.param


@pytest.fixture
def runtime(server, how):
    def make(**kw):
        kw.setdefault("stream", how.endswith("stream"))
        return OpenAIRuntime(model="local", base_url=server.base_url, api_key=FAKE_KEY,
                             max_retries=0, **kw)
    return make


def decide(how, prompt, options, rt, **kw):
    if how.startswith("async"):
        return asyncio.run(decision.amake(prompt, options, runtime=rt, **kw))
    return decision.make(prompt, options, runtime=rt, **kw)


def user_text(body) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


# -- structured output ----------------------------------------------------------------------------

def test_llama_cpp_refusing_json_schema_gets_json_object_with_the_schema(server, runtime, how):
    code, words = LLAMA_CPP_JSON_SCHEMA
    server.refuse(is_json_schema, code, words)
    server.push(picked({"call": "done"}), picked({"call": "greet", "args": {"name": "Ada"}}))
    rt = runtime()
    assert decide(how, "Pick.", OPTIONS, rt, mode="json_schema") == "DONE"
    refused, sent = server.bodies
    assert refused["response_format"]["type"] == "json_schema" and is_strict(refused)
    # the nearest form an unnamed server may take: the schema in the request (llama.cpp's
    # grammar) and in the prompt (for a server that reads no schema)
    assert sent["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert user_text(sent).startswith("Pick.\n\nAnswer with one JSON document")
    assert json.loads(user_text(sent).split("\n", 3)[3]) == SCHEMA
    (att,) = decision.last_trace().attempts
    assert att.raw["negotiated"] == [{
        "kind": "structured", "asked": FORMS["json_schema strict"],
        "refused": f"{code}: {words}", "sent": FORMS["json_object+schema+prompt"]}]
    assert att.raw["request"]["response_format"]["type"] == "json_object"
    assert rt.negotiated == [{"kind": "structured", "asked": FORMS["json_schema strict"],
                              "refused": f"{code}: {words}",
                              "sent": FORMS["json_object+schema+prompt"]}]
    # the second decision on the same runtime sends the accepted form at once
    assert decide(how, "Again.", OPTIONS, rt, mode="json_schema") == "hello Ada"
    assert len(server.requests) == 3 and server.refused == 1
    assert server.bodies[2]["response_format"]["type"] == "json_object"
    (att2,) = decision.last_trace().attempts
    assert "refused" not in att2.raw["negotiated"][0]
    assert att2.raw["negotiated"][0]["why"].startswith("the server refused it on an earlier "
                                                       "call: 500: response_format type")


def test_vllm_refusing_json_schema_gets_guided_json(server, runtime, how):
    code, words = VLLM_JSON_SCHEMA
    server.refuse(is_json_schema, code, body=vllm_body(words))
    server.push(picked({"call": "done"}), picked({"call": "done"}))
    rt = runtime(server="vllm")
    assert decide(how, "Pick.", OPTIONS, rt, mode="json_schema") == "DONE"
    refused, sent = server.bodies
    # vLLM is sent the schema as it is (no strict rewrite) ...
    assert refused["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "decision", "schema": SCHEMA}}
    # ... and, refused, its own parameter
    assert sent["guided_json"] == SCHEMA and "response_format" not in sent
    assert user_text(sent) == "Pick."
    (att,) = decision.last_trace().attempts
    assert att.raw["negotiated"][0] == {
        "kind": "structured", "asked": FORMS["json_schema"],
        "refused": f"{code}: {words}", "sent": FORMS["guided_json"]}
    assert att.raw["request"]["guided_json"] == SCHEMA   # the body as it went on the wire
    decide(how, "Again.", OPTIONS, rt, mode="json_schema")
    assert len(server.requests) == 3 and "guided_json" in server.bodies[2]


def test_a_server_refusing_strict_gets_the_schema_as_it_is(server, runtime, how):
    code, words = NO_STRICT
    server.refuse(is_strict, code, words)
    server.push(picked({"call": "greet", "args": {"name": "Ada"}}),
                picked({"call": "done"}))
    rt = runtime()
    assert decide(how, "Pick.", OPTIONS, rt, mode="json_schema") == "hello Ada"
    refused, sent = server.bodies
    # strict mode's rewrite made `loud` required and nullable; without strict, the schema as is
    assert refused["response_format"]["json_schema"]["schema"] != SCHEMA
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "decision", "schema": SCHEMA}}
    assert decision.last_trace().attempts[0].raw["negotiated"][0]["sent"] == FORMS["json_schema"]
    decide(how, "Again.", OPTIONS, rt, mode="json_schema")
    assert len(server.requests) == 3 and not is_strict(server.bodies[2])


def test_json_object_refused_too_is_an_error_naming_the_form_and_the_words(server, runtime, how):
    server.refuse(is_json_schema, *LLAMA_CPP_JSON_SCHEMA)
    # LM Studio's words for json_object (lmstudio-ai/lmstudio-bug-tracker#189), here after a
    # refusal of json_schema: a server that takes neither
    server.refuse(lambda b: (b.get("response_format") or {}).get("type") == "json_object", 400,
                  "'response_format.type' must be 'json_schema'")
    rt = runtime()
    with pytest.raises(DecisionError) as info:
        decide(how, "Pick.", OPTIONS, rt, mode="json_schema")
    msg = info.value.trace.attempts[-1].error_message
    assert FORMS["json_object+schema+prompt"] in msg
    assert "'response_format.type' must be 'json_schema'" in msg
    assert "Running again will not help" in msg and "run again later" not in msg
    assert info.value.trace.attempts[-1].error_kind == "model_error"
    # the server can do no json_schema: the runtime says so, and the mode fails before a request
    assert rt.modes == {"menu", "tools"}
    n = len(server.requests)
    with pytest.raises(ValueError, match="cannot ask in mode 'json_schema'"):
        decide(how, "Pick.", OPTIONS, rt, mode="json_schema")
    assert len(server.requests) == n


def test_llama_cpp_python_refusing_json_schema_gets_json_object_with_the_schema(
        server, runtime, how):
    code, words = LLAMA_CPP_PYTHON_JSON_SCHEMA
    server.refuse(is_json_schema, code, words)
    server.push(picked({"call": "done"}), picked({"call": "done"}))
    rt = runtime()
    assert decide(how, "Pick.", OPTIONS, rt, mode="json_schema") == "DONE"
    assert server.bodies[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    record = decision.last_trace().attempts[0].raw["negotiated"][0]
    assert record["refused"].startswith("500: 1 validation error")
    decide(how, "Again.", OPTIONS, rt, mode="json_schema")
    assert len(server.requests) == 3 and server.refused == 1


def test_an_evaluation_pays_the_refusal_once(server):
    server.refuse(is_json_schema, *LLAMA_CPP_JSON_SCHEMA)
    server.push(*[picked({"call": "done"}) for _ in range(6)])
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0)
    result = decision.evaluate("Row {i}: pick.", OPTIONS, [{"i": i} for i in range(6)],
                               runtime=rt, concurrency=1, progress=False, mode="json_schema")
    assert [r for r in result.results] == ["DONE"] * 6
    assert len(server.requests) == 7 and server.refused == 1


# -- forced tool calls ----------------------------------------------------------------------------

def test_a_crash_on_required_is_a_refusal_without_words(server, runtime, how):
    """llama-cpp-python's chatml-function-calling raises on tool_choice "required": whole, a
    500 with an empty message; streamed, a 200 whose stream ends before any event (and whose
    connection is then closed: the retry goes once more on a new one). Such a refusal is about
    the forms not yet known to be accepted."""
    server.refuse(lambda b: b.get("tool_choice") == "required", 500, body=CRASH_BODY, crash=True)
    server.push(text('{"call": "done"}'), tools(("c1", "greet", {"name": "Ada"})),
                tools(("c2", "greet", {"name": "Bo"})))
    rt = runtime()
    stream = how.endswith("stream")
    assert decide(how, "Pick.", OPTIONS, rt) == "DONE"   # stream_options: accepted
    assert decide(how, "Pick.", ONE, rt, mode="tools") == "hello Ada"
    (att,) = decision.last_trace().attempts
    record = att.raw["negotiated"][0]
    assert record["refused"] == ("a stream that ended before any reply (no finish_reason)"
                                 if stream else "500, with no message")
    # stream_options was answered before: known to be accepted, so it stays
    assert record["kind"] == "tool_choice+parallel_tool_calls"
    assert server.bodies[-1]["tool_choice"] == {"type": "function", "function": {"name": "greet"}}
    assert "parallel_tool_calls" not in server.bodies[-1]
    assert ("stream_options" in server.bodies[-1]) is stream
    n = len(server.requests)
    assert decide(how, "Pick.", ONE, rt, mode="tools") == "hello Bo"
    assert len(server.requests) == n + 1 and server.refused == 1


THREE = {**OPTIONS, "wait": ("WAIT", "wait for the customer")}


@pytest.mark.parametrize("how", ["sync-stream", "async-stream"])
def test_a_request_the_server_cannot_stream_goes_again_unstreamed(server, runtime, how):
    """llama-cpp-python's chatml-function-calling, unnamed, streamed, tools over three options:
    "required" crashes it, the one tool cannot be named, and "auto" crashes it too when the model
    calls a tool ("Automatic streaming tool choice is not supported", raised after the 200: a
    stream that ends before any reply). Nothing but the stream is left to give up: the same
    request goes once more unstreamed, and later tool requests go unstreamed at once."""
    server.refuse(lambda b: b.get("tool_choice") == "required", 500, body=CRASH_BODY, crash=True)
    server.refuse(lambda b: b.get("tool_choice") == "auto" and b.get("stream"), 500,
                  body=CRASH_BODY, crash=True)
    server.push(tools(("c1", "wait", {})), text('{"call": "done"}'), tools(("c2", "done", {})))
    rt = runtime()
    assert decide(how, "Pick.", THREE, rt, mode="tools") == "WAIT"
    (att,) = decision.last_trace().attempts
    first, second = att.raw["negotiated"][:2]
    assert "tool_choice" in first["kind"] and first["sent"].startswith(FORMS["auto"])
    assert second == {"kind": "stream", "asked": FORMS["stream"],
                      "refused": "a stream that ended before any reply (no finish_reason)",
                      "sent": FORMS["unstreamed"]}
    assert [b.get("stream", False) for b in server.bodies] == [True, True, False]
    assert att.usage is not None              # unstreamed, the server's usage came back
    assert rt.negotiated[-1]["kind"] == "stream"
    # remembered for requests with tools only: the menu still streams into the panel
    assert decide(how, "Pick.", THREE, rt) == "DONE"
    assert server.bodies[-1]["stream"] is True
    assert decide(how, "Pick.", THREE, rt, mode="tools") == "DONE"
    assert "stream" not in server.bodies[-1] and len(server.requests) == 5
    (now,) = [n for n in decision.last_trace().attempts[0].raw["negotiated"]
              if n["kind"] == "stream"]
    assert now["why"].startswith("the server refused it on an earlier call") and \
        "refused" not in now


@pytest.mark.parametrize("how", ["sync-stream"])
def test_a_refusal_that_names_streaming_gives_up_only_the_stream(server, runtime, how):
    server.refuse(lambda b: b.get("stream") and "tools" in b, 400,
                  "Automatic streaming tool choice is not supported")
    server.push(tools(("c1", "done", {})))
    rt = runtime()
    assert decide(how, "Pick.", THREE, rt, mode="tools") == "DONE"
    (record,) = [n for n in decision.last_trace().attempts[0].raw["negotiated"] if "refused" in n]
    # its words say "tool choice" too, but the stream is the culprit: "required" stays
    assert record["kind"] == "stream" and "Automatic streaming" in record["refused"]
    assert server.bodies[-1]["tool_choice"] == "required" and "stream" not in server.bodies[-1]


def test_a_named_server_never_gives_up_the_stream_by_negotiation(server):
    server.refuse(lambda b: b.get("stream"), 400, "streaming is not supported")
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0, server="vllm")
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt, max_retries=0)
    assert info.value.trace.attempts[0].error_kind == "model_error"
    assert len(server.requests) == 1 and rt.negotiated == []


def test_a_wordless_500_is_about_the_forms_not_yet_accepted_only(server):
    """uvicorn's own answer to a crash is a text/plain "Internal Server Error". Once a form was
    answered it is known to be accepted: a later 500 without words is a server error, not a
    refusal of it (nothing is stepped down, no retry)."""
    server.push(raw("Internal Server Error", content_type="text/plain", code=500),
                tools(("c1", "greet", {"name": "Ada"})),
                raw("Internal Server Error", content_type="text/plain", code=500))
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0, stream=False)
    assert decision.make("Pick.", ONE, runtime=rt, mode="tools") == "hello Ada"
    assert decision.last_trace().attempts[0].raw["negotiated"][0]["refused"] == \
        "500, with no message"
    assert len(server.requests) == 2
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ONE, runtime=rt, mode="tools", max_retries=0)
    assert "server error (500" in info.value.trace.attempts[0].error_message
    assert len(server.requests) == 3 and len(rt.negotiated) == 1


def test_a_reask_whose_null_content_is_refused_sends_an_empty_string(server, how, runtime):
    code, words = LLAMA_CPP_PYTHON_NULL_CONTENT
    server.refuse(lambda b: any(m["role"] == "assistant" and m.get("content") is None
                                for m in b["messages"]), code, words)
    server.push(tools(("c1", "greet", {"name": "Ada"})), tools(("c2", "greet", {"name": "Bo"})),
                tools(("c3", "greet", {"name": "Cy"})), tools(("c4", "greet", {"name": "Di"})))
    rt = runtime()
    seen = []

    def not_the_first(pick):
        seen.append(pick.args["name"])
        if len(seen) % 2:
            raise Retry("not that one")

    assert decide(how, "Pick.", ONE, rt, mode="tools", validate=not_the_first) == "hello Bo"
    first, refused, sent = server.bodies
    assert refused["messages"][1]["content"] is None and sent["messages"][1]["content"] == ""
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "c1",
                                   "content": sent["messages"][2]["content"]}
    att = decision.last_trace().attempts[1]
    assert att.raw["negotiated"][0]["kind"] == "assistant_content"
    assert att.raw["negotiated"][0]["sent"] == FORMS["empty"]
    assert decide(how, "Again.", ONE, rt, mode="tools", validate=not_the_first) == "hello Di"
    assert len(server.requests) == 5 and server.bodies[4]["messages"][1]["content"] == ""


def test_refused_required_names_the_one_tool_when_there_is_one_option(server, runtime, how):
    code, words = VLLM_REQUIRED
    server.refuse(lambda b: b.get("tool_choice") == "required", code, body=vllm_body(words))
    server.push(tools(("c1", "greet", {"name": "Ada"})), tools(("c2", "greet", {"name": "Bo"})))
    rt = runtime()
    assert decide(how, "Pick.", ONE, rt, mode="tools") == "hello Ada"
    refused, sent = server.bodies
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "greet"}}
    assert sent["parallel_tool_calls"] is False
    assert decision.last_trace().attempts[0].raw["negotiated"][0] == {
        "kind": "tool_choice", "asked": FORMS["required"], "refused": f"{code}: {words}",
        "sent": FORMS["named"]}
    assert decide(how, "Again.", ONE, rt, mode="tools") == "hello Bo"
    assert len(server.requests) == 3
    assert server.bodies[2]["tool_choice"]["function"]["name"] == "greet"


def test_refused_required_is_auto_and_the_reask_with_several_options(server, runtime, how):
    code, words = VLLM_REQUIRED
    server.refuse(lambda b: b.get("tool_choice") == "required", code, body=vllm_body(words))
    # with "auto" the model may answer in words: that is re-asked, as any reply without a pick
    server.push(text("I would greet Ada."), tools(("c1", "greet", {"name": "Ada"})),
                tools(("c2", "done", {})))
    rt = runtime()
    assert decide(how, "Pick.", OPTIONS, rt, mode="tools") == "hello Ada"
    bodies = server.bodies
    assert [b["tool_choice"] for b in bodies] == ["required", "auto", "auto"]
    atts = decision.last_trace().attempts
    assert [a.error_kind for a in atts] == ["no_action", None]
    assert atts[0].raw["negotiated"][0]["sent"] == FORMS["auto"]
    assert "refused" not in atts[1].raw["negotiated"][0]
    assert decide(how, "Again.", OPTIONS, rt, mode="tools") == "DONE"
    assert len(server.requests) == 4 and server.refused == 1


def test_refused_auto_as_well_leaves_no_form_for_several_options(server, runtime, how):
    server.refuse(lambda b: b.get("tool_choice") == "required", body=vllm_body(VLLM_REQUIRED[1]))
    server.refuse(lambda b: b.get("tool_choice") == "auto", body=vllm_body(VLLM_AUTO[1]))
    rt = runtime(server="vllm")
    with pytest.raises(DecisionError) as info:
        decide(how, "Pick.", OPTIONS, rt, mode="tools", max_retries=0)
    msg = info.value.trace.attempts[0].error_message
    assert FORMS["auto"] in msg and "--enable-auto-tool-choice" in msg
    assert len(server.requests) == 2
    # one option can still be asked for, by name: the mode stays
    assert "tools" in rt.modes
    server.push(tools(("c1", "greet", {"name": "Ada"})))
    assert decide(how, "Pick.", ONE, rt, mode="tools") == "hello Ada"
    assert server.bodies[-1]["tool_choice"] == {"type": "function",
                                                "function": {"name": "greet"}}
    assert len(server.requests) == 3


def test_refused_parallel_tool_calls_is_left_out(server, runtime, how):
    code, words = AZURE_PARALLEL
    server.refuse(lambda b: "parallel_tool_calls" in b, code, words)
    server.push(tools(("c1", "done", {})), tools(("c2", "done", {})))
    rt = runtime()
    assert decide(how, "Pick.", OPTIONS, rt, mode="tools") == "DONE"
    refused, sent = server.bodies
    assert refused["parallel_tool_calls"] is False and "parallel_tool_calls" not in sent
    assert sent["tool_choice"] == "required"
    assert decision.last_trace().attempts[0].raw["negotiated"][0] == {
        "kind": "parallel_tool_calls", "asked": FORMS["parallel_tool_calls"],
        "refused": f"{code}: {words}", "sent": FORMS["omitted"]}
    decide(how, "Again.", OPTIONS, rt, mode="tools")
    assert len(server.requests) == 3 and "parallel_tool_calls" not in server.bodies[2]


def test_tools_refused_altogether_is_an_error_and_the_mode_goes(server, runtime, how):
    code, words = LLAMA_CPP_NO_JINJA
    server.refuse(lambda b: "tools" in b, code, words)
    rt = runtime(server="llama.cpp")
    with pytest.raises(DecisionError) as info:
        decide(how, "Pick.", OPTIONS, rt, mode="tools")
    att = info.value.trace.attempts[-1]
    assert "does not accept native tools" in att.error_message and words in att.error_message
    assert "run again later" not in att.error_message
    assert len(server.requests) == 1      # nothing nearer to send: no retry
    assert rt.modes == {"menu", "json_schema"}


# -- usage on streams -----------------------------------------------------------------------------

def test_refused_stream_options_is_left_out_and_the_trace_says_usage_is_unknown(server):
    code, words = AZURE_STREAM_OPTIONS
    server.refuse(lambda b: "stream_options" in b, code, words)
    server.push(text('{"call": "done"}'), text('{"call": "done"}'))
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0)
    assert decision.make("Pick.", OPTIONS, runtime=rt) == "DONE"
    refused, sent = server.bodies
    assert refused["stream_options"] == {"include_usage": True} and "stream_options" not in sent
    att = decision.last_trace().attempts[0]
    assert att.usage is None
    assert att.raw["negotiated"][0]["refused"] == f"{code}: {words}"
    assert any("no token usage" in n and "no way to ask" in n for n in att.raw["notes"])
    decision.make("Pick.", OPTIONS, runtime=rt)
    assert len(server.requests) == 3 and "stream_options" not in server.bodies[2]


def test_a_stream_without_usage_though_asked_says_so(server):
    server.push(text('{"call": "done"}', no_usage=True), text('{"call": "done"}'))
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0)
    decision.make("Pick.", OPTIONS, runtime=rt)
    att = decision.last_trace().attempts[0]
    assert server.bodies[0]["stream_options"] == {"include_usage": True}
    assert att.usage is None
    assert any("no token usage" in n and "though stream_options.include_usage asked for it" in n
               for n in att.raw["notes"])
    decision.make("Pick.", OPTIONS, runtime=rt)   # a server that sends it: no such note
    att = decision.last_trace().attempts[0]
    assert att.usage == {"input_tokens": 11, "output_tokens": 7}
    assert not any("no token usage" in n for n in att.raw.get("notes", []))


# -- servers named up front -----------------------------------------------------------------------

def test_llama_cpp_python_named_up_front_pays_no_refusal(server, how):
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0,
                       server="llama-cpp-python", stream=how.endswith("stream"))
    server.push(picked({"call": "done"}), tools(("c1", "greet", {"name": "Ada"})),
                text("I pick done"), tools(("c2", "done", {})))
    assert decide(how, "Pick.", OPTIONS, rt, mode="json_schema") == "DONE"
    assert decide(how, "Pick.", ONE, rt, mode="tools") == "hello Ada"
    assert decide(how, "Pick.", OPTIONS, rt, mode="tools") == "DONE"
    b = server.bodies
    assert b[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert user_text(b[0]) == "Pick."           # its grammar enforces the schema
    assert b[1]["tool_choice"] == {"type": "function", "function": {"name": "greet"}}
    assert b[2]["tool_choice"] == "auto" and b[3]["tool_choice"] == "auto"
    for body in b:
        assert "stream_options" not in body and "parallel_tool_calls" not in body
    assert server.refused == 0 and rt.negotiated == []
    note = decision.last_trace().attempts[0].raw["negotiated"][0]
    assert note["why"].startswith("server='llama-cpp-python'")
    if how.endswith("stream"):
        # its profile: a tool call chosen by "auto" cannot stream, so those go unstreamed up
        # front; the rest stream, with no way to ask for usage
        assert [body.get("stream", False) for body in b] == [True, True, False, False]
        (unstreamed,) = [n for n in decision.last_trace().attempts[0].raw["negotiated"]
                         if n["kind"] == "stream"]
        assert unstreamed["asked"] == FORMS["stream"] and unstreamed["sent"] == FORMS["unstreamed"]
        assert "Automatic streaming tool choice" in unstreamed["why"]
        server.push(picked({"call": "done"}))
        assert decide(how, "Pick.", OPTIONS, rt, mode="json_schema") == "DONE"
        assert any("no way to ask for it in a stream" in n
                   for n in decision.last_trace().attempts[0].raw["notes"])


def test_ollama_named_up_front_gets_its_documented_forms(server):
    """Ollama's /v1 takes response_format json_schema (its compatibility layer turns it into
    Ollama's own `format`), tool_choice, and stream_options.include_usage."""
    rt = OpenAIRuntime(model="llama3.2", base_url=server.base_url, server="ollama",
                       max_retries=0)
    server.push(picked({"call": "done"}), tools(("c1", "done", {})))
    decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema")
    decision.make("Pick.", OPTIONS, runtime=rt, mode="tools")
    fmt, tl = server.bodies
    assert fmt["response_format"] == {"type": "json_schema",
                                      "json_schema": {"name": "decision", "schema": SCHEMA}}
    assert fmt["stream_options"] == {"include_usage": True}
    assert tl["tool_choice"] == "required" and tl["parallel_tool_calls"] is False
    assert decision.last_trace().attempts[0].usage == {"input_tokens": 11, "output_tokens": 7}


def test_an_ollama_refusing_json_schema_gets_json_mode_and_the_schema_in_the_prompt(server):
    """An Ollama whose /v1 knows only JSON mode (`format: "json"`, before schemas came to its
    `format`): the schema goes in the prompt."""
    server.refuse(is_json_schema, 400, "invalid response_format type: json_schema")
    server.push(picked({"call": "done"}))
    rt = OpenAIRuntime(model="llama3.2", base_url=server.base_url, server="ollama",
                       max_retries=0)
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema") == "DONE"
    sent = server.bodies[1]
    assert sent["response_format"] == {"type": "json_object"}
    assert json.loads(user_text(sent).split("\n", 3)[3]) == SCHEMA
    assert decision.last_trace().attempts[0].raw["negotiated"][0]["sent"] == \
        FORMS["json_object+prompt"]


def test_openai_named_or_not_sends_the_openai_forms(server):
    for name in ("openai", None):
        rt = OpenAIRuntime(model="m", base_url=server.base_url, server=name, max_retries=0)
        server.push(picked({"call": "done"}))
        decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema")
        assert is_strict(server.bodies[-1])
        assert "negotiated" not in decision.last_trace().attempts[0].raw


def test_an_unknown_server_name_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="'llama-cpp-python'.*got 'llamacpp'"):
        OpenAIRuntime(model="m", base_url="http://127.0.0.1:9/v1", server="llamacpp")


# -- errors that are not negotiations -------------------------------------------------------------

def test_a_request_shape_error_naming_no_form_is_not_retried_and_not_run_again_advice(server):
    server.push(status(400, "model 'nope' does not support chat"))
    rt = OpenAIRuntime(model="nope", base_url=server.base_url, max_retries=0)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema", max_retries=0)
    msg = info.value.trace.attempts[0].error_message
    assert "Running it again will not help" in msg and "server=" in msg
    assert "run again later" not in msg
    assert len(server.requests) == 1


def test_a_refusal_in_the_panel_and_the_static_view_is_escaped(server):
    server.refuse(is_json_schema, 500, "<script>alert(1)</script> json_schema unsupported")
    server.push(picked({"call": "done"}))
    rt = OpenAIRuntime(model="m", base_url=server.base_url, max_retries=0)
    decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema")
    from openprogram.widgets.panel import DecisionPanel
    panel = DecisionPanel(decision.last_trace())
    for html in (trace_html(decision.last_trace()), panel_html(panel)):
        assert 'class="op-negotiated"' in html and "<script>" not in html
        assert "the server refused it: 500: &lt;script&gt;" in html
        assert "Asked for response_format {&quot;type&quot;: &quot;json_schema&quot;" in html


def panel_html(widget) -> str:
    """Every HTML value in a widget tree (what the front end renders)."""
    return "".join([getattr(widget, "value", "") if isinstance(getattr(widget, "value", ""), str)
                    else "", *(panel_html(c) for c in getattr(widget, "children", ()) or ())])


# -- unknown keywords (issue 23) ------------------------------------------------------------------

@pytest.mark.parametrize("cls", [OpenAIRuntime, AnthropicRuntime])
def test_an_unknown_keyword_is_a_type_error_naming_it(cls):
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'temprature'.*"
                                        r"extra_body=\{'temprature': \.\.\.\}"):
        cls(model="m", api_key=FAKE_KEY, temprature=0.2)
    with pytest.raises(TypeError, match="'tool_choice', which the runtime sets itself"):
        cls(model="m", api_key=FAKE_KEY, tool_choice="auto")


def test_a_field_of_the_servers_own_goes_in_extra_body(server):
    rt = OpenAIRuntime(model="m", base_url=server.base_url, max_retries=0,
                       extra_body={"top_k": 20, "repeat_penalty": 1.1}, temperature=0)
    server.push(text("ok"))
    rt.complete([{"role": "user", "content": "q"}])
    body = server.bodies[0]
    assert body["top_k"] == 20 and body["repeat_penalty"] == 1.1 and body["temperature"] == 0


def test_a_key_in_the_refusal_words_is_redacted_everywhere_they_go(server):
    server.refuse(is_json_schema, 400, f"json_schema unsupported for key {FAKE_KEY}")
    server.push(picked({"call": "done"}))
    rt = OpenAIRuntime(model="m", base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)
    decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema")
    trace = decision.last_trace()
    blob = json.dumps(trace.to_dict()) + json.dumps(rt.negotiated) + trace_html(trace)
    assert "json_schema unsupported for key" in blob and FAKE_KEY not in blob
    assert FAKE_KEY[:12] not in blob


def test_a_connection_closed_before_any_reply_is_a_refusal_without_words(server):
    """A server that crashes before its headers closes the connection without a word (the SDK
    retries that first, by its own policy; here max_retries=0)."""
    from fakeserver import Reply
    server.push(Reply(kind="close"), tools(("c1", "greet", {"name": "Ada"})))
    rt = OpenAIRuntime(model="local", base_url=server.base_url, max_retries=0, stream=False)
    assert decision.make("Pick.", ONE, runtime=rt, mode="tools") == "hello Ada"
    record = decision.last_trace().attempts[0].raw["negotiated"][0]
    assert record["refused"] == "a connection the server closed before any reply"
    assert server.bodies[1]["tool_choice"] == {"type": "function", "function": {"name": "greet"}}


def test_no_server_at_all_is_not_a_refusal():
    from fakeserver import free_port
    rt = OpenAIRuntime(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ONE, runtime=rt, mode="tools", max_retries=0)
    assert "could not reach" in info.value.trace.attempts[0].error_message
    assert rt.negotiated == []
