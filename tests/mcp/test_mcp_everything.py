"""The official MCP test server, `@modelcontextprotocol/server-everything` (npm; the version and
every dependency pinned by tests/mcp/everything/package-lock.json, installed into the venv by
./dev's test setup), over stdio against the official `mcp` SDK's client (issue 54).

Every tool it lists is accounted for: called through a decision (the connection itself as the
option set), its result recorded by a `RecordingRuntime` as the server sent it, and every content
field of that result found in the trace as a file holds it; or left out of the options with the
reason (`LEFT_OUT`). A tool the pinned server adds or drops fails the first test by name. Its
resources and prompts are read, and a token given to it in its environment, which its `get-env`
tool echoes back, is in nothing the library writes."""
from __future__ import annotations

import gzip
import json
import sys
import warnings
from pathlib import Path

import pytest
from test_mcp_content import saved, wire
from test_mcp_servers import children, finishes, no_piece_of, pick

from openprogram import OptionWarning, decision, mcp
from openprogram.runtimes import ScriptedRuntime
from openprogram.runtimes.cassette import RecordingRuntime, ReplayRuntime

EVERYTHING = Path(sys.prefix, "share", "mcp-server-everything", "node_modules", ".bin",
                  "mcp-server-everything")
TOKEN = "evr-" + "Kq4" * 10  # given to the server as EVERYTHING_API_KEY

#: What the scripted model picks for each tool the server lists (and so what is called).
CALLS = {
    "echo": {"message": "hello from openprogram"},
    "get-annotated-message": {"messageType": "error", "includeImage": True},
    "get-env": {},
    "get-resource-links": {"count": 2},
    "get-resource-reference": {"resourceType": "Blob", "resourceId": 2},
    "get-structured-content": {"location": "Chicago"},
    "get-sum": {"a": 2, "b": 3},
    "get-tiny-image": {},
    "gzip-file-as-resource": {"name": "hello.txt.gz", "outputType": "resource",
                              "data": "data:text/plain;base64,aGVsbG8gZXZlcnl0aGluZw=="},
    "toggle-simulated-logging": {},
    "toggle-subscriber-updates": {},
    "trigger-long-running-operation": {"duration": 0.2, "steps": 2},
}
#: The tools left out of the options, and what the reason must say.
LEFT_OUT = {"simulate-research-query": "taskSupport 'required'"}


def everything_command() -> list[str]:
    assert EVERYTHING.exists(), (
        f"{EVERYTHING} is missing: the MCP test server comes from npm, and ./dev's test setup "
        f"installs it (setup_mcp_everything, from tests/mcp/everything/package-lock.json); run "
        f"`./dev test --collect-only -q` once, or: npm ci --prefix "
        f"{EVERYTHING.parents[2]} after copying tests/mcp/everything/package*.json there")
    return [str(EVERYTHING)]


@pytest.fixture(scope="module")
def everything():
    """One connection for the module (starting node takes a second); yields it and the
    warnings its opening gave."""
    before = children()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conn = mcp.connect(everything_command(), name="everything",
                           env={"EVERYTHING_API_KEY": TOKEN}).open()
    try:
        yield conn, [w for w in caught if issubclass(w.category, OptionWarning)]
    finally:
        conn.close()
    assert children() == before  # the server is gone


def test_every_tool_it_lists_is_called_or_left_out_with_a_reason(everything):
    conn, warned = everything
    listed = [t.name for t in conn.tools]
    assert sorted(listed) == sorted([*CALLS, *LEFT_OUT]), \
        f"the server lists {listed}: give each new tool a call in CALLS or a reason in LEFT_OUT"
    assert [o.name for o in conn.options] == [n for n in listed if n in CALLS]
    for name, reason in LEFT_OUT.items():
        assert reason in conn.left_out[name]
        assert any(name in str(w.message) and reason in str(w.message) for w in warned)


@pytest.mark.parametrize("name", list(CALLS))
def test_each_tool_is_called_and_every_field_it_sends_is_in_the_saved_trace(everything, name,
                                                                           tmp_path):
    conn, _ = everything
    path = tmp_path / "run.jsonl"
    rec = RecordingRuntime(ScriptedRuntime([pick(name, CALLS[name])]), path)
    value = finishes(lambda: decision.make(f"Call {name}.", conn.options, runtime=rec))
    trace = decision.last_trace()
    assert trace.status == "resolved" and len(trace.attempts) == 1  # called, first time
    (line,) = [e for e in map(json.loads, path.read_text().splitlines()[1:]) if "tool" in e]
    sent = line["result"]  # the result as the server sent it (masked), the SDK's JSON
    assert line["tool"]["name"] == name and not sent.get("isError"), sent
    on_file = saved(trace, tmp_path)["result"]
    if "structuredContent" in sent:
        # the value is the structure; its text blocks are that structure written as JSON
        assert value == on_file == sent["structuredContent"]
        assert [json.loads(b["text"]) for b in sent["content"]] == [value]
    else:
        blocks = on_file if isinstance(on_file, list) else [on_file]
        assert wire(blocks) == sent["content"]  # every block, every field, data whole
    text = json.dumps(trace.to_dict()) + path.read_text()
    assert no_piece_of(TOKEN, text)


def test_what_its_blocks_carry_reaches_the_program(everything):
    conn, _ = everything

    def call(name):
        rt = ScriptedRuntime([pick(name, CALLS[name])])
        return decision.make("Go.", conn.options, runtime=rt)
    note, image = call("get-annotated-message")
    assert note["annotations"] == {"priority": 1.0, "audience": ["user", "assistant"]}
    assert image["mime_type"] == "image/png" and image["data"].startswith(b"\x89PNG")
    _, *links = call("get-resource-links")
    assert [(x["uri"], x["mime_type"]) for x in links] == [
        ("demo://resource/dynamic/blob/1", "text/plain"),
        ("demo://resource/dynamic/text/2", "text/plain")]
    assert all(x["description"] for x in links)
    _, embedded, _ = call("get-resource-reference")
    assert embedded["resource"]["uri"] == "demo://resource/dynamic/blob/2"
    assert embedded["resource"]["blob"].startswith(b"Resource 2:")
    packed = call("gzip-file-as-resource")
    assert packed["resource"]["mime_type"] == "application/gzip"
    assert gzip.decompress(packed["resource"]["blob"]) == b"hello everything"
    # the token it was given shows masked in what it echoes
    assert "[redacted]" in call("get-env") and TOKEN not in call("get-env")


def test_its_tools_titles_and_hints_are_on_the_menu(everything):
    conn, _ = everything
    echo = next(o for o in conn.options if o.name == "echo")
    assert echo.definition["title"] == "Echo Tool"
    assert echo.description == ("Echo Tool: Echoes back the input string (server hints: "
                                "read-only, not destructive, idempotent, closed world)")
    decision.make("Echo.", conn.options, runtime=ScriptedRuntime([pick("echo", CALLS["echo"])]))
    trace = decision.last_trace()
    assert echo.description in trace.menu
    assert echo.description in [o["description"] for o in trace.to_dict()["options"]]


def test_the_task_tool_is_left_out_and_a_pick_of_it_is_not_a_bad_arguments_hint(everything):
    conn, _ = everything
    assert "simulate-research-query" not in [o.name for o in conn.options]
    with pytest.raises(mcp.UsageError, match="left out.*taskSupport 'required'"):
        conn.call("simulate-research-query", {"topic": "bees"})
    before = list(conn.calls)
    rt = ScriptedRuntime([pick("simulate-research-query", {"topic": "bees"}),
                          pick("get-sum", {"a": 1, "b": 1})])
    assert decision.make("Research bees.", conn.options, runtime=rt) == "The sum of 1 and 1 is 2."
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "unknown_call" and "argument" not in first.error_message
    assert conn.calls[len(before):] == [("get-sum", {"a": 1, "b": 1})]  # never sent


def test_its_resources_and_prompts_are_read(everything):
    conn, _ = everything
    docs = {r.uri: r for r in conn.resources}
    features = "demo://resource/static/document/features.md"
    assert features in docs and docs[features].mime_type == "text/markdown"
    assert "Everything Server - Features" in conn.read_resource(features)
    assert [t.uri_template for t in conn.resource_templates] == [
        "demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"]
    assert conn.read_resource("demo://resource/dynamic/blob/3").startswith(b"Resource 3:")
    assert [p.name for p in conn.prompts] == ["simple-prompt", "args-prompt",
                                              "completable-prompt", "resource-prompt"]
    (asked,) = conn.get_prompt("args-prompt", {"city": "Lyon"})
    assert asked["role"] == "user" and "Lyon" in asked["content"]
    intro, resource = conn.get_prompt("resource-prompt", {"resourceType": "Text",
                                                          "resourceId": "4"})
    assert resource["content"]["resource"]["uri"] == "demo://resource/dynamic/text/4"
    with pytest.raises(mcp.ServerError, match="everything.*prompts/get.*server answered"):
        conn.get_prompt("args-prompt", {})  # its required argument is missing: the server's word


def test_a_recording_of_it_replays_with_no_server(tmp_path):
    path = tmp_path / "run.jsonl"
    rec = RecordingRuntime(ScriptedRuntime([pick("get-tiny-image", {})]), path)
    with mcp.connect(everything_command(), name="everything", runtime=rec) as live:
        picture = decision.make("A picture.", live, runtime=rec)
        features = live.read_resource("demo://resource/static/document/features.md")
    before = children()
    replay = ReplayRuntime(path)
    with mcp.connect("not-installed", name="everything", runtime=replay) as replayed:
        assert children() == before
        assert decision.make("A picture.", replayed, runtime=replay) == picture
        assert replayed.read_resource("demo://resource/static/document/features.md") == features
