"""Cassettes of the json_schema and tools ways of asking: what the mode sends is part of the
recorded request (a changed schema is a mismatch), and the finish reason and raw request come
back on replay, so a replayed trace is the recorded one."""
from __future__ import annotations

import pytest

from openprogram import DecisionError, decision
from openprogram.runtimes import (
    CassetteMismatch,
    ModelResponse,
    RecordingRuntime,
    ReplayRuntime,
    ScriptedRuntime,
    ToolCall,
    load_cassette,
)

OPTIONS = {"done": ("DONE", "nothing left"), "note": ("Write a note.", {"text": str})}


def test_a_json_schema_decision_replays_with_its_schema_finish_reason_and_raw(tmp_path):
    path = tmp_path / "modes.json"
    raw = {"request": {"grammar": "root ::= ..."}, "response": {"id": "r1"}}
    inner = ScriptedRuntime([
        ModelResponse(text='{"decision": {"call": "note", "args": {"text": "hi"}}}',
                      finish_reason="stop", raw=raw)])
    rec = RecordingRuntime(inner, path)
    assert rec.modes == inner.modes
    assert decision.make("Pick.", OPTIONS, runtime=rec, mode="json_schema") == \
        {"decision": "note", "text": "hi"}
    recorded = decision.last_trace().to_dict()
    call = load_cassette(path)["calls"][0]
    schema = call["request"]["response_format"]["schema"]
    assert [a["properties"]["call"]["const"] for a in schema["properties"]["decision"]["anyOf"]] \
        == ["done", "note"]
    assert call["response"]["finish_reason"] == "stop" and call["response"]["raw"] == raw

    replay = ReplayRuntime(path)
    assert "json_schema" in replay.modes
    assert decision.make("Pick.", OPTIONS, runtime=replay, mode="json_schema") == \
        {"decision": "note", "text": "hi"}
    replayed = decision.last_trace().to_dict()
    for key in ("reply", "finish_reason", "raw", "sent", "found_in"):
        assert replayed["attempts"][0][key] == recorded["attempts"][0][key], key


def test_a_changed_option_set_is_a_mismatch_that_names_the_modes_arguments(tmp_path):
    path = tmp_path / "modes.json"
    rec = RecordingRuntime(ScriptedRuntime(['{"decision": {"call": "done", "args": {}}}']), path)
    decision.make("Pick.", OPTIONS, runtime=rec, mode="json_schema")
    changed = {**OPTIONS, "later": ("LATER", "wait")}
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", changed, runtime=ReplayRuntime(path), mode="json_schema")
    assert isinstance(info.value.__cause__, CassetteMismatch)
    assert "the response_format differ" in str(info.value.__cause__)


def test_menu_cassettes_keep_their_request_shape_and_tools_mode_replays(tmp_path):
    path = tmp_path / "menu.json"
    rec = RecordingRuntime(ScriptedRuntime(['{"call": "done"}', ToolCall("done")]), path)
    decision.make("Pick.", OPTIONS, runtime=rec)
    decision.make("Pick.", OPTIONS, runtime=rec, mode="tools")
    calls = load_cassette(path)["calls"]
    assert set(calls[0]["request"]) == {"messages", "tools"}  # as before modes existed
    assert calls[1]["request"]["tool_choice"] == "required"
    replay = ReplayRuntime(path)
    assert decision.make("Pick.", OPTIONS, runtime=replay) == "DONE"
    assert decision.make("Pick.", OPTIONS, runtime=replay, mode="tools") == "DONE"
