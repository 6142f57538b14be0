"""Every way of asking through OpenAIRuntime against a real OpenAI-compatible server:
llama-cpp-python's own, serving SmolLM2-135M, in its default chat format and in
`chatml-function-calling` (see conftest.py). Replies depend on the CPU, so the tests assert what
must hold for any reply: no attempt ends in a server error; a json_schema reply parses (the
server's grammar enforces the schema); a tools-mode reply is a tool call where the chat format
forces one; the trace records what was sent in place of what, and why. Work is bounded by
tokens (`max_tokens`), one attempt per decision where a second adds nothing."""
from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest

from openprogram import DecisionError, Retry, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import OpenAIRuntime

pytestmark = pytest.mark.slow


def greet(name: Literal["Ada", "Bo"]) -> str:
    """Greet someone by name."""
    return f"hello {name}"


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left to do")}
ONE = {"greet": greet}
PROMPT = "Greet Ada."
#: Enough for a pick of these options; the menu gets fewer (SmolLM2 rambles in free text).
TOKENS = {"menu": 32, "tools": 48, "json_schema": 64}


def runtime(server, stream: bool, named: bool = True, **kw) -> OpenAIRuntime:
    return OpenAIRuntime(model="smollm2", base_url=server.base_url, stream=stream,
                         server="llama-cpp-python" if named else None, temperature=0, seed=0,
                         max_retries=0, **kw)


def ask(rt, options, mode: str, how: str, prompt: str = PROMPT, **kw):
    """One decision, sync or async; its trace, whether it resolved or not."""
    call = dict(runtime=rt, mode=mode, max_retries=kw.pop("max_retries", 0), **kw)
    try:
        if how == "async":
            asyncio.run(decision.amake(prompt, options, **call))
        else:
            decision.make(prompt, options, **call)
        return decision.last_trace()
    except DecisionError as err:
        return err.trace


def no_server_error(trace) -> None:
    for att in trace.attempts:
        assert att.error_kind != "model_error", att.error_message


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", ["menu", "tools", "json_schema"])
def test_every_way_of_asking_gets_an_answer_not_a_server_error(local_server, mode, stream, how):
    rt = runtime(local_server, stream, max_tokens=TOKENS[mode])
    for options in (OPTIONS, ONE):
        trace = ask(rt, options, mode, how)
        no_server_error(trace)
        (att,) = trace.attempts
        assert att.raw["request"]["max_tokens"] == TOKENS[mode]
        assert "stream_options" not in att.raw["request"]       # it has no usage in streams
        # the profile: a tool call chosen by "auto" cannot stream (chatml-function-calling)
        auto = att.raw["request"].get("tool_choice") == "auto"
        assert att.raw["request"].get("stream", False) is (stream and not auto)
        if stream and not auto:
            assert att.usage is None and any("no token usage" in n for n in att.raw["notes"])
        else:
            assert att.usage["output_tokens"] <= TOKENS[mode]
        if mode == "json_schema":
            # the server's grammar enforces the schema: the reply is the JSON document itself
            assert att.raw["request"]["response_format"] == {
                "type": "json_object", "schema": decision_schema(normalize(options))}
            doc = json.loads(att.reply)
            assert doc["decision"]["call"] in options and att.found_in == "schema"
            assert att.error_kind is None and att.chosen in options
        if mode == "tools":
            sent = att.raw["request"]["tool_choice"]
            if len(options) == 1:   # one option: named, which every chat format forces
                assert sent == {"type": "function", "function": {"name": "greet"}}
                assert [c["name"] for c in att.tool_calls] == ["greet"]
                assert att.chosen == "greet" and att.args["name"] in ("Ada", "Bo")
            else:                   # several: "auto", a tool call only where the format has them
                assert sent == "auto"
                in_words = ("no_action", "truncated")   # a reply in words, maybe cut off
                if local_server.chat_format == "chatml-function-calling":
                    assert att.tool_calls or att.error_kind in in_words
                else:
                    assert not att.tool_calls and att.error_kind in in_words


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_tools_reask_goes_back_as_the_tool_result(local_server, stream):
    """A re-ask after a tool call carries the call back with its result; this server takes an
    assistant message's content only as a string (OpenAI's null is a 500), so the named runtime
    sends "". Every pick is rejected, so every attempt after the first is such a re-ask."""
    rt = runtime(local_server, stream, max_tokens=64)

    def never(pick):
        raise Retry("greet the person in the message by their name")

    trace = ask(rt, ONE, "tools", "sync", max_retries=2, validate=never)
    no_server_error(trace)
    atts = trace.attempts
    assert [a.error_kind for a in atts] == ["rejected"] * 3
    for att in atts[1:]:
        sent = att.raw["request"]["messages"]
        assert [m["role"] for m in sent[-2:]] == ["assistant", "tool"]
        assert sent[-2]["content"] == "" and sent[-2]["tool_calls"][0]["function"]["name"] == \
            "greet"
        assert sent[-1]["tool_call_id"] == sent[-2]["tool_calls"][0]["id"]
        assert "greet the person" in sent[-1]["content"]


def test_json_schema_on_an_unnamed_server_is_negotiated_once(local_server):
    """Not told which server it is, the runtime asks OpenAI's way; the server refuses
    json_schema (500, "Input should be 'text' or 'json_object'"), the attempt is sent again as
    json_object with the schema, and the next decision sends that at once."""
    rt = runtime(local_server, stream=False, named=False, max_tokens=TOKENS["json_schema"])
    first = ask(rt, OPTIONS, "json_schema", "sync")
    no_server_error(first)
    (att,) = first.attempts
    (record,) = att.raw["negotiated"]
    assert record["kind"] == "structured" and record["refused"].startswith("500: ")
    assert "'text' or 'json_object'" in record["refused"]
    assert att.raw["request"]["response_format"]["type"] == "json_object"
    assert json.loads(att.reply)["decision"]["call"] in OPTIONS
    second = ask(rt, OPTIONS, "json_schema", "sync")
    no_server_error(second)
    assert "refused" not in second.attempts[0].raw["negotiated"][0]
    assert len(rt.negotiated) == 1


def test_tools_on_an_unnamed_server_are_negotiated(local_server):
    """chatml-function-calling crashes on tool_choice "required" (a 500 with no message): the
    forms not yet known to be accepted step down, and the one option is named. The default
    format ignores "required" (no refusal to learn from): its reply is text, never an error."""
    rt = runtime(local_server, stream=True, named=False, max_tokens=TOKENS["tools"])
    trace = ask(rt, ONE, "tools", "sync")
    no_server_error(trace)
    (att,) = trace.attempts
    if local_server.chat_format == "chatml-function-calling":
        record = att.raw["negotiated"][0]
        # streamed, the crash comes after the 200 (a stream that ends before any reply) or,
        # depending on timing, before its headers (a connection closed without a word)
        assert record["refused"] in ("a stream that ended before any reply (no finish_reason)",
                                     "a connection the server closed before any reply"), record
        assert "tool_choice" in record["kind"]
        assert att.raw["request"]["tool_choice"] == {"type": "function",
                                                     "function": {"name": "greet"}}
        assert att.chosen == "greet"
        again = ask(rt, ONE, "tools", "sync")
        no_server_error(again)
        assert not any("refused" in n for n in again.attempts[0].raw.get("negotiated", []))
        assert again.attempts[0].chosen == "greet"
        assert len(rt.negotiated) == 1
    else:
        assert att.raw["request"]["tool_choice"] == "required"
        assert att.error_kind in ("no_action", "truncated") and rt.negotiated == []


THREE = {**OPTIONS, "wait": ("WAIT", "wait for the customer to write again")}
CALL_IT = "Call the greet function for Ada."


def test_tools_over_three_options_unnamed_and_streamed_are_negotiated_down_to_no_stream(
        local_server):
    """Three options: "required" crashes chatml-function-calling and the one tool cannot be
    named, so "auto" goes, which that format cannot stream when the model calls a tool
    ("Automatic streaming tool choice is not supported", after the 200). The request goes once
    more unstreamed and is answered; the default format streams it (it ignores tools)."""
    rt = runtime(local_server, stream=True, named=False, max_tokens=TOKENS["tools"])
    # asked plainly for the tool, SmolLM2 calls it (to "Greet Ada." it answers in words, which
    # streams: nothing to negotiate)
    trace = ask(rt, THREE, "tools", "sync", prompt=CALL_IT)
    no_server_error(trace)
    (att,) = trace.attempts
    sent = att.raw["request"]
    if local_server.chat_format == "chatml-function-calling":
        kinds = [n["kind"] for n in att.raw["negotiated"] if "refused" in n]
        assert kinds[-1] == "stream" and "tool_choice" in kinds[0], att.raw["negotiated"]
        assert sent["tool_choice"] == "auto" and "stream" not in sent
        assert att.tool_calls and att.chosen in THREE
        # remembered: the next tools request goes unstreamed at once, refused nothing
        again = ask(rt, THREE, "tools", "sync", prompt=CALL_IT)
        no_server_error(again)
        assert not any("refused" in n for n in again.attempts[0].raw["negotiated"])
        assert any(n["kind"] == "stream" for n in again.attempts[0].raw["negotiated"])
    else:
        assert sent["stream"] is True and rt.negotiated == []
