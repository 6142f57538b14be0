"""Three ways to ask (modes.py) through the decision loop, on runtimes that need no network:
what each mode sends, how a reply becomes the pick, and the mode's own failures."""
from __future__ import annotations

import json

import pytest

import openprogram
from openprogram import DecisionError, Runtime, ToolCall, decision
from openprogram.base.model_protocol import ModelResponse
from openprogram.runtimes import ScriptedRuntime


def greet(name: str, loud: bool = False) -> str:
    """Greet someone."""
    return f"hello {name}" + ("!" if loud else "")


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left to do"),
           "note": ("Write a note.", {"text": str})}


def test_menu_mode_is_the_default_and_sends_the_menu_and_no_tools():
    rt = ScriptedRuntime(['{"call": "done"}'])
    assert decision.make("Pick.", OPTIONS, runtime=rt) == "DONE"
    call = rt.calls[0]
    assert call.prompt == "Pick.\n\n" + decision.render_options(OPTIONS)
    assert call.tools is None and call.mode_args == {}
    t = decision.last_trace()
    assert t.mode == "menu" and t.to_dict()["mode"] == "menu" and t.attempts[0].sent is None


def test_tools_mode_sends_one_tool_per_option_and_the_tool_call_is_the_pick():
    rt = ScriptedRuntime([ToolCall("greet", {"name": "Ada", "loud": True})])
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == "hello Ada!"
    call = rt.calls[0]
    assert call.prompt == "Pick."  # no menu text in the prompt
    assert [t["name"] for t in call.tools] == ["greet", "done", "note"]
    greet_tool = call.tools[0]
    assert greet_tool["description"] == "Greet someone."
    assert greet_tool["parameters"]["properties"]["name"] == {"type": "string"}
    assert greet_tool["parameters"]["required"] == ["name"]
    assert call.tools[1]["parameters"]["properties"] == {}
    assert call.mode_args == {"tool_choice": "required"}
    t = decision.last_trace()
    att = t.attempts[0]
    assert t.mode == "tools" and att.found_in == "tool_call"
    assert att.extracted == {"call": "greet", "args": {"name": "Ada", "loud": True}}
    assert att.tool_calls == [{"name": "greet", "args": {"name": "Ada", "loud": True}, "id": None}]
    assert [s["name"] for s in att.sent["tools"]] == ["greet", "done", "note"]
    json.dumps(t.to_dict())


def test_tools_mode_re_asks_bad_arguments_as_the_tool_result():
    rt = ScriptedRuntime([ToolCall("greet", {"name": 3}, id="c1"),
                          ToolCall("note", {"text": "hi"})])
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == \
        {"decision": "note", "text": "hi"}
    second = rt.calls[1].messages
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[1]["tool_calls"][0].name == "greet"
    assert second[2]["tool_call_id"] == "c1" and "args.name must be str" in second[2]["content"]
    assert decision.last_trace().attempts[0].error_kind == "type_mismatch"


def test_tools_mode_text_reply_is_no_action_and_two_calls_are_multiple_calls():
    rt = ScriptedRuntime(["I would greet Ada.",
                          [ToolCall("done"), ToolCall("greet", {"name": "x"})]])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt, mode="tools")
    kinds = [a.error_kind for a in info.value.trace.attempts]
    assert kinds == ["no_action", "multiple_calls"]
    assert "called 2 tools ('done', 'greet')" in info.value.trace.attempts[1].error_message
    assert rt.calls[1].messages[-1] == {"role": "user", "content": rt.calls[1].prompt}


def test_json_schema_mode_sends_one_schema_of_every_pick_and_parses_the_reply():
    rt = ScriptedRuntime(['{"decision": {"call": "greet", "args": {"name": "Bo"}}}'])
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema") == "hello Bo"
    call = rt.calls[0]
    assert call.prompt == "Pick." and call.tools is None
    fmt = call.mode_args["response_format"]
    alternatives = fmt["schema"]["properties"]["decision"]["anyOf"]
    assert [a["properties"]["call"] for a in alternatives] == \
        [{"const": "greet"}, {"const": "done"}, {"const": "note"}]
    assert alternatives[2]["properties"]["args"]["required"] == ["text"]
    assert decision.last_trace().attempts[0].found_in == "schema"


def test_json_schema_mode_tells_the_model_what_each_option_does_beside_its_name():
    """No menu text is sent in json_schema mode, so what the menu says of each option (a
    function's docstring, a value's or a schema's description, a model's docstring, a tool
    definition's description) is on its pick in the schema; an option without one has none."""
    from pydantic import BaseModel

    class Refund(BaseModel):
        """Give the customer their money back."""
        amount: float

    tool = {"type": "function", "function": {
        "name": "lookup", "description": "Find an order by its id.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                       "required": ["id"]}}}
    options = {**OPTIONS, "refund": Refund, "lookup": openprogram.tool(tool), "wait": "WAIT"}
    rt = ScriptedRuntime(['{"decision": {"call": "done", "args": {}}}'])
    assert decision.make("Pick.", options, runtime=rt, mode="json_schema") == "DONE"
    picks = rt.calls[0].mode_args["response_format"]["schema"]["properties"]["decision"]["anyOf"]
    described = {p["properties"]["call"]["const"]: p.get("description") for p in picks}
    assert described == {"greet": "Greet someone.", "done": "nothing left to do",
                         "note": "Write a note.", "refund": "Give the customer their money back.",
                         "lookup": "Find an order by its id.", "wait": None}
    # said once, on the pick: not again on its arguments
    assert all("description" not in p["properties"]["args"] for p in picks)


def test_refused_and_truncated_are_their_own_kinds():
    replies = [ModelResponse(text="", refusal="I can't help with that."),
               ModelResponse(text='{"call": "gre', finish_reason="length")]
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(replies))
    assert [a.error_kind for a in info.value.trace.attempts] == ["refused", "truncated"]
    assert info.value.trace.attempts[1].finish_reason == "length"


def test_a_runtime_that_cannot_do_a_mode_fails_before_any_call():
    calls = []

    def text_only(content):
        calls.append(content)
        return '{"call": "done"}'
    with pytest.raises(ValueError, match=r"cannot ask in mode 'tools'; it can do 'menu'"):
        decision.make("Pick.", OPTIONS, runtime=Runtime(call=text_only), mode="tools")
    with pytest.raises(ValueError, match=r"unknown mode 'xml'.*'menu', 'tools', 'json_schema'"):
        decision.make("Pick.", OPTIONS, runtime=Runtime(call=text_only), mode="xml")
    assert calls == []


def test_a_model_function_that_takes_tools_can_do_tools_mode():
    seen = {}

    def model(content, tools=None, tool_choice=None):
        seen.update(tools=[t["name"] for t in tools], tool_choice=tool_choice)
        return ToolCall("done")
    rt = Runtime(call=model)
    assert rt.modes == {"menu", "tools"}
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == "DONE"
    assert seen == {"tools": ["greet", "done", "note"], "tool_choice": "required"}


def test_agent_in_tools_mode_sends_work_tools_and_choices_and_a_choice_call_ends_the_turn():
    from openprogram import agent

    def lookup(order: int) -> str:
        """Look an order up."""
        return f"order {order}: delayed"

    rt = ScriptedRuntime([ToolCall("lookup", {"order": 5}), ToolCall("done")])
    assert agent("Handle order 5.", tools=[lookup], options=OPTIONS, runtime=rt,
                 mode="tools") == "DONE"
    first = rt.calls[0]
    assert first.prompt == "Handle order 5."  # no finish instruction, no menu
    assert [t["name"] for t in first.tools] == ["lookup", "greet", "done", "note"]
    t = decision.last_trace()
    assert [r.name for r in t.tool_rounds] == ["lookup"] and t.chosen == "done"
    assert rt.calls[1].messages[-1]["content"] == "order 5: delayed"


def test_exec_response_format_in_each_mode():
    schema = {"city": str, "days": int}
    rt = ScriptedRuntime([ToolCall("response", {"city": "Oslo", "days": 2})])
    assert rt.exec("Plan.", response_format=schema, mode="tools") == {"city": "Oslo", "days": 2}
    assert [t["name"] for t in rt.calls[0].tools] == ["response"]

    rt = ScriptedRuntime(['{"city": "Rome", "days": 3}'])
    assert rt.exec("Plan.", response_format=schema, mode="json_schema") == \
        {"city": "Rome", "days": 3}
    fmt = rt.calls[0].mode_args["response_format"]
    assert fmt["name"] == "response" and fmt["schema"]["required"] == ["city", "days"]

    rt = ScriptedRuntime(['Here: ```json\n{"city": "Nice", "days": 1}\n```'])
    assert rt.exec("Plan.", response_format=schema) == {"city": "Nice", "days": 1}
    assert "Reply with one JSON object of this form" in rt.calls[0].prompt


def test_a_tools_mode_re_ask_repeats_the_call_the_model_made():
    rt = ScriptedRuntime([ToolCall("greet", {"name": 3}), ToolCall("done")])
    decision.make("Pick.", OPTIONS, runtime=rt, mode="tools", reask="{reply} | {error}")
    tool_result = rt.calls[1].messages[-1]
    assert tool_result["role"] == "tool"
    assert tool_result["content"] == 'greet({"name": 3}) | args.name must be str, got integer 3'


def test_a_function_that_is_both_a_work_tool_and_a_choice_is_sent_once_as_the_choice():
    from openprogram import agent
    rt = ScriptedRuntime([ToolCall("greet", {"name": "Al"})])
    assert agent("Hi.", tools=[greet], options={"greet": greet, "done": "DONE"}, runtime=rt,
                 mode="tools") == "hello Al"
    assert [t["name"] for t in rt.calls[0].tools] == ["greet", "done"]


def test_json_schema_mode_marks_where_the_bad_value_sits():
    reply = '{"decision": {"call": "greet", "args": {"name": 7}}}'
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([reply]), mode="json_schema",
                      max_retries=0)
    att = info.value.trace.attempts[0]
    assert reply[slice(*att.span)] == '{"call": "greet", "args": {"name": 7}}'
    assert reply[slice(*att.error_span)] == "7"
