"""Record against the loopback server, replay offline: in a fresh process with the server
stopped the program gives the same results, traces and DAG; a changed program fails clearly."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import cassette_program
from fakeserver import FAKE_KEY
from fakeserver import text, tools

import openprogram
from openprogram import DecisionError, agent, decision
from openprogram.runtimes import (CassetteExhausted, CassetteMismatch, ModelCallError,
                                  RecordingRuntime, ReplayRuntime, ScriptedRuntime, load_cassette)

HERE = Path(__file__).resolve().parent


def script_replies(provider):
    tid = "call_1" if provider == "openai" else "toolu_1"
    return [
        text("Hello!", chunk=2),
        text("hmm, not sure"),                               # decision: no JSON -> re-ask
        text('```json\n{"call": "refund"}\n```', usage=(30, 8)),
        tools((tid, "lookup", {"order_id": "42"}), text="Checking."),
        text('It shipped.\n```json\n{"call": "tell"}\n```'),
        text("I was about to say", chunk=3, drop_after=2),   # a failure, recorded too
    ]


def test_recorded_cassette_replays_in_a_fresh_process(provider, server, make_runtime,
                                                      tmp_path):
    path = tmp_path / "cassettes" / "session.json"
    server.push(*script_replies(provider))
    rec = RecordingRuntime(make_runtime(), path)
    live = cassette_program.run(rec)
    assert live["results"][:3] == ["Hello!", "refund", "told"]
    assert "dropped in the middle of the reply" in live["results"][3]["error"]
    assert live["chunks"] > 6
    server.stop()  # replay needs no server (and no key)

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HERE)}
    proc = subprocess.run([sys.executable, str(HERE / "cassette_program.py"), str(path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads(proc.stdout)
    assert replayed["traces"] == live["traces"]
    assert replayed["dag"] == live["dag"]
    assert replayed["results"] == live["results"]
    assert replayed["chunks"] > 0

    # the cassette is readable JSON, one entry per model call, with the wire-level facts
    raw = path.read_text()
    assert raw.startswith('{\n  "format": "openprogram-cassette"')
    data = load_cassette(path)
    assert [c["call"] for c in data["calls"]] == [1, 2, 3, 4, 5, 6]
    third = data["calls"][2]
    assert third["response"]["usage"] == {"input_tokens": 30, "output_tokens": 8}
    assert third["request"]["messages"][0]["content"].startswith(
        "Your previous reply could not be used")
    assert data["calls"][3]["request"]["tools"][0]["name"] == "lookup"
    assert data["calls"][3]["response"]["tool_calls"][0]["args"] == {"order_id": "42"}
    assert data["calls"][5]["error"]["partial"] == "I was "  # two 3-character deltas
    assert FAKE_KEY not in raw and FAKE_KEY[-12:] not in raw


def _record_one(tmp_path, reply='{"call": "a"}'):
    path = tmp_path / "one.json"
    rec = RecordingRuntime(ScriptedRuntime([reply]), path)
    decision.make("Pick a or b.", ["a", "b"], runtime=rec)
    return path


def test_changed_request_fails_naming_the_call_and_the_difference(tmp_path):
    path = _record_one(tmp_path)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick a or c.", ["a", "c"], runtime=ReplayRuntime(path))
    att = info.value.trace.attempts[0]
    assert att.error_kind == "model_error"
    msg = att.error_message
    assert "call #1 does not match the cassette" in msg
    assert 'expected: ' in msg and 'actual: ' in msg
    assert "Pick a or b." in msg.split("expected:")[1].split("actual:")[0]
    assert "Pick a or c." in msg.split("actual:")[1]
    assert "re-record" in msg
    cause = info.value.__cause__
    assert isinstance(cause, CassetteMismatch) and cause.call == 1


def test_more_calls_than_recorded(tmp_path):
    path = _record_one(tmp_path)
    rt = ReplayRuntime(path)
    assert decision.make("Pick a or b.", ["a", "b"], runtime=rt) == "a"
    with pytest.raises(CassetteExhausted, match=r"holds 1 model calls and the program asked "
                                                r"for call #2"):
        rt.complete([{"role": "user", "content": "one more"}])


def test_strict_false_replays_replies_regardless(tmp_path):
    path = _record_one(tmp_path)
    assert decision.make("Something else entirely", ["a", "b"],
                         runtime=ReplayRuntime(path, strict=False)) == "a"


def test_replay_streams_through_on_text_and_keeps_usage(tmp_path):
    path = _record_one(tmp_path, reply='I choose: {"call": "b", "args": {}}')
    chunks = []
    with openprogram.observe(lambda e: e.kind == "reply_chunk" and chunks.append(e.data["text"])):
        assert decision.make("Pick a or b.", ["a", "b"],
                             runtime=ReplayRuntime(path, stream_chunk=5)) == "b"
    assert chunks[0] == "I cho" and "".join(chunks) == 'I choose: {"call": "b", "args": {}}'
    att = decision.last_trace().attempts[0]
    assert att.usage == load_cassette(path)["calls"][0]["response"]["usage"]


def test_replayed_failure_is_the_recorded_error(tmp_path):
    def boom(content):
        raise ModelCallError("the server went away", partial="half a rep", kind="model_error")

    from openprogram import Runtime
    path = tmp_path / "fail.json"
    with pytest.raises(ModelCallError):
        RecordingRuntime(Runtime(call=boom), path).complete([{"role": "user",
                                                              "content": "q"}])
    with pytest.raises(ModelCallError) as info:
        ReplayRuntime(path).complete([{"role": "user", "content": "q"}])
    assert str(info.value) == "the server went away" and info.value.partial == "half a rep"


def test_recording_wraps_only_runtimes(tmp_path):
    with pytest.raises(TypeError, match="records an openprogram Runtime"):
        RecordingRuntime(lambda c: "x", tmp_path / "x.json")


def test_cassette_load_errors_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="RecordingRuntime"):
        ReplayRuntime(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"calls": []}')
    with pytest.raises(ValueError, match="not an openprogram cassette"):
        ReplayRuntime(bad)
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="not a JSON cassette"):
        ReplayRuntime(bad)


def test_replay_runtime_takes_the_recorded_name_and_model(tmp_path):
    path = tmp_path / "n.json"
    rec = RecordingRuntime(ScriptedRuntime(["hi"], name="my-model", model="gpt-x"), path)
    agent("hello", runtime=rec)
    rt = ReplayRuntime(path)
    assert (rt.name, rt.model) == ("my-model", "gpt-x")
    assert repr(rt) == f"ReplayRuntime({str(path)!r}, 1 calls, 0 replayed)"
