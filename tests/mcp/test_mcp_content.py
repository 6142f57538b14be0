"""What an MCP server sends, as the library hands it on (issue 54): every field of a tool's result
reaches the program and the saved trace, what the server says of a tool (its title, its hints)
reaches the menu and the trace, data that breaks the protocol is a `ServerError` naming the server
and never a bare Python exception, the servers' resources and prompts can be read, and a
connection is an option set.

The server is `raw_mcp_server.py` beside this file: JSON-RPC over stdio written by hand, answering
whatever its script says, well-formed or not (the SDK's own servers cannot send malformed data),
with the official `mcp` SDK on the client side. Work is counted: `Connection.calls` is every call
that reached a server."""
from __future__ import annotations

import base64
import json
import sys
import warnings
from pathlib import Path

import pytest
from test_mcp_servers import children, finishes, no_piece_of, pick

from openprogram import DecisionError, OptionError, OptionWarning, decision, mcp
from openprogram.runtimes import ScriptedRuntime
from openprogram.runtimes.cassette import RecordingRuntime, ReplayRuntime
from openprogram.runtimes.cassette.tool_results import ToolNotRecorded

RAW = Path(__file__).with_name("raw_mcp_server.py")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()
WAV = base64.b64encode(b"RIFF" + bytes(64)).decode()
NO_ARGS = {"type": "object", "properties": {}}


def tool(name, **more):
    return {"name": name, "description": f"The {name} tool.", "inputSchema": NO_ARGS, **more}


def raw_command(tmp_path, **script):
    """The command line of the raw server answering with `script` (see raw_mcp_server.py)."""
    path = tmp_path / f"script{len(list(tmp_path.glob('script*.json')))}.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return [sys.executable, str(RAW), str(path)]


def raw_server(tmp_path, **script):
    """A connection to the raw server answering with `script`."""
    return mcp.connect(raw_command(tmp_path, **script), name="raw")


def saved(trace, tmp_path):
    """The trace as a file holds it: written as JSON, read back."""
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace.to_dict(), allow_nan=False), encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


# -- case 12: data that breaks the protocol ------------------------------------------------------

BROKEN = {
    "image": {"content": [{"type": "image", "data": "not*base64!", "mimeType": "image/png"}]},
    "audio": {"content": [{"type": "audio", "data": "QUJD=x", "mimeType": "audio/wav"}]},
    "blob": {"content": [{"type": "resource", "resource": {
        "uri": "file:///b.bin", "mimeType": "application/octet-stream", "blob": "@@@@"}}]},
    "shape": {"content": [{"type": "hologram", "data": 1}]},  # no such block
    "missing": {"isError": False},                             # no content at all
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_result_that_breaks_the_protocol_is_a_server_error_naming_server_and_tool(tmp_path,
                                                                                    name):
    with raw_server(tmp_path, tools=[tool(name)], calls=BROKEN) as conn:
        rt = ScriptedRuntime([pick(name, {})])
        with pytest.raises(mcp.ServerError) as info:
            finishes(lambda: decision.make("Go.", conn.options, runtime=rt))
        message = str(info.value)
        assert f"MCP server 'raw' (tool {name!r})" in message, message
        if name in ("image", "audio", "blob"):
            assert "not valid base64" in message and "report it to its authors" in message
        trace = decision.last_trace()  # the failed decision keeps its whole trace
        assert trace.status == "failed" and trace.attempts[0].chosen == name
        assert conn.calls == [(name, {})] and len(trace.attempts) == 1  # not re-asked


def test_a_replayed_result_with_malformed_base64_is_a_server_error_too(tmp_path):
    path = tmp_path / "rec.jsonl"
    with raw_server(tmp_path, tools=[tool("image")], calls=BROKEN) as conn:
        rec = RecordingRuntime(ScriptedRuntime([pick("image", {})]), path)
        with pytest.raises(mcp.ServerError, match="not valid base64"):
            decision.make("Go.", conn.options, runtime=rec)
        opts = conn.options
    with pytest.raises(mcp.ServerError, match=r"'raw' \(tool 'image'\).*not valid base64"):
        decision.make("Go.", opts, runtime=ReplayRuntime(path))


# -- case 17: every field of a result, in the program and in the saved trace -----------------------

FULL = {
    "_meta": {"trace_id": "t-1", "cost": {"units": 3}},
    "content": [
        {"type": "text", "text": "a note", "annotations": {"audience": ["user"], "priority": 0.3,
                                                           "lastModified": "2026-01-02T03:04:05Z"},
         "_meta": {"source": "notes"}},
        {"type": "text", "text": "plain"},
        {"type": "image", "data": PNG, "mimeType": "image/png",
         "annotations": {"audience": ["assistant"]}},
        {"type": "audio", "data": WAV, "mimeType": "audio/wav", "_meta": {"seconds": 0}},
        {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "title": "The A file",
         "mimeType": "text/plain", "description": "what a holds", "size": 12},
        {"type": "resource", "resource": {"uri": "file:///b.md", "mimeType": "text/markdown",
                                          "text": "# b", "_meta": {"rev": 2}},
         "annotations": {"priority": 1}},
        {"type": "resource", "resource": {"uri": "file:///c.bin", "mimeType": "application/x-c",
                                          "blob": PNG}},
    ],
}


def wire(value):
    """A result value back in MCP's wire form (the test's own inverse of the library's
    reading): a str is a plain text block, a dict's keys go back to MCP's spelling, bytes are
    written as base64. Equal to what the server sent exactly when nothing was lost."""
    if isinstance(value, str):
        return {"type": "text", "text": value}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [wire(v) if isinstance(v, (str, bytes)) else _keys(v) for v in value]
    return _keys(value)


def _keys(value):
    if isinstance(value, dict):
        names = {"meta": "_meta", "mime_type": "mimeType", "last_modified": "lastModified",
                 "structured_content": "structuredContent"}
        return {names.get(k, k): _keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return value


def test_every_field_a_result_sends_reaches_the_program_and_the_saved_trace(tmp_path):
    with raw_server(tmp_path, tools=[tool("full")], calls={"full": FULL}) as conn:
        result = decision.make("Go.", conn.options, runtime=ScriptedRuntime([pick("full", {})]))
        trace = decision.last_trace()
    # a result with a _meta of its own is the whole result: nothing dropped
    assert set(result) == {"content", "meta"} and result["meta"] == FULL["_meta"]
    blocks = result["content"]
    assert blocks[0] == {"type": "text", "text": "a note", "meta": {"source": "notes"},
                         "annotations": {"audience": ["user"], "priority": 0.3,
                                         "last_modified": "2026-01-02T03:04:05Z"}}
    assert blocks[1] == "plain"  # a text block that is only its text stays a str
    image = blocks[2]["data"]
    assert isinstance(image, bytes) and image == base64.b64decode(PNG)  # bytes, used as bytes
    assert blocks[4]["mime_type"] == "text/plain" and blocks[4]["description"] == "what a holds"
    assert blocks[5]["resource"] == {"uri": "file:///b.md", "mime_type": "text/markdown",
                                     "text": "# b", "meta": {"rev": 2}}
    assert blocks[6]["resource"]["blob"] == base64.b64decode(PNG)
    # the program's value, and the trace as a file holds it, are what the server sent, whole
    assert {"content": wire(blocks), "_meta": result["meta"]} == FULL
    on_file = saved(trace, tmp_path)["result"]
    # (the image's base64 whole, not a cut repr of its bytes)
    assert {"content": wire(on_file["content"]), "_meta": on_file["meta"]} == FULL


def test_a_single_plain_block_is_still_its_value_and_a_structured_tool_its_structure(tmp_path):
    calls = {"one": {"content": [{"type": "text", "text": "only this"}]},
             "none": {"content": []},
             "weather": {"content": [{"type": "text", "text": '{"t": 21, "sky": "clear"}'}],
                         "structuredContent": {"t": 21, "sky": "clear"}},
             "more": {"content": [{"type": "text", "text": "21 degrees, and clear"}],
                      "structuredContent": {"t": 21, "sky": "clear"}},
             "undeclared": {"content": [{"type": "text", "text": "21"}],
                            "structuredContent": {"t": 21}}}
    out = {"type": "object", "properties": {"t": {"type": "integer"}, "sky": {"type": "string"}}}
    tools = [tool("one"), tool("none"), tool("weather", outputSchema=out),
             tool("more", outputSchema=out), tool("undeclared")]
    with raw_server(tmp_path, tools=tools, calls=calls) as conn:
        def run(name):
            return decision.make("Go.", conn.options, runtime=ScriptedRuntime([pick(name, {})]))
        assert run("one") == "only this" and run("none") is None
        # the text only repeats the structure as JSON (as the specification asks): the structure
        assert run("weather") == {"t": 21, "sky": "clear"}
        # text that says more than the structure is kept beside it
        assert run("more") == {"content": ["21 degrees, and clear"],
                               "structured_content": {"t": 21, "sky": "clear"}}
        # a structure the tool did not declare (no outputSchema) is kept as well
        assert run("undeclared") == {"content": ["21"], "structured_content": {"t": 21}}


def test_a_tools_title_and_hints_reach_the_option_the_menu_and_the_trace(tmp_path):
    hinted = tool("wipe", title="Wipe Disk", annotations={
        "readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
        "openWorldHint": False}, _meta={"vendor": "x"})
    hostile = tool("odd", title="<script>alert('t')</script>",
                   annotations={"readOnlyHint": True})
    with raw_server(tmp_path, tools=[hinted, hostile, tool("plain")],
                    calls={"wipe": {"content": [{"type": "text", "text": "wiped"}]}}) as conn:
        wipe, odd, plain = conn.options
        assert wipe.definition["title"] == "Wipe Disk"  # the definition as the server gave it
        assert wipe.definition["annotations"]["destructiveHint"] is True
        assert wipe.definition["_meta"] == {"vendor": "x"}
        said = ("Wipe Disk: The wipe tool. (server hints: not read-only, destructive, "
                "idempotent, closed world)")
        assert wipe.description == said and plain.description == "The plain tool."
        decision.make("Go.", conn.options, runtime=ScriptedRuntime([pick("wipe", {})]))
        trace = decision.last_trace()
    assert said in trace.menu
    assert [o["description"] for o in saved(trace, tmp_path)["options"]][0] == said
    html = trace._repr_mimebundle_()["text/html"]  # a server's words, escaped
    assert "<script>alert" not in html and "&lt;script&gt;" in html


# -- case 18: resources and prompts -------------------------------------------------------------

RESOURCES = {
    "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
    "tools": [tool("noop")],
    "calls": {"noop": {"content": [{"type": "text", "text": "done"}]}},
    "resources": [{"uri": "file:///guide.md", "name": "guide", "mimeType": "text/markdown",
                   "description": "How to use the shop."},
                  {"uri": "file:///logo.png", "name": "logo", "mimeType": "image/png"}],
    "templates": [{"uriTemplate": "file:///orders/{id}", "name": "order"}],
    "reads": {"file:///guide.md": {"contents": [{"uri": "file:///guide.md",
                                                 "mimeType": "text/markdown",
                                                 "text": "Refunds within 30 days."}]},
              "file:///logo.png": {"contents": [{"uri": "file:///logo.png", "blob": PNG}]},
              "file:///orders/7": {"contents": [{"uri": "file:///orders/7", "text": "order 7"},
                                                {"uri": "file:///orders/7#items", "text": "2"}]},
              "file:///bad.bin": {"contents": [{"uri": "file:///bad.bin", "blob": "%%"}]}},
    "prompts": [{"name": "triage", "description": "Triage a ticket.",
                 "arguments": [{"name": "ticket", "required": True}]}],
    "prompt_results": {"triage": {"description": "Triage", "messages": [
        {"role": "user", "content": {"type": "text", "text": "Ticket: my order is late."}},
        {"role": "assistant", "content": {"type": "resource", "resource": {
            "uri": "file:///guide.md", "mimeType": "text/markdown",
            "text": "Refunds within 30 days."}}}]}},
}


def test_resources_and_prompts_are_read_and_build_a_decisions_prompt(tmp_path):
    with raw_server(tmp_path, **RESOURCES) as conn:
        assert [(r.uri, r.mime_type) for r in conn.resources] == [
            ("file:///guide.md", "text/markdown"), ("file:///logo.png", "image/png")]
        assert [t.uri_template for t in conn.resource_templates] == ["file:///orders/{id}"]
        assert conn.read_resource("file:///guide.md") == "Refunds within 30 days."
        assert conn.read_resource("file:///logo.png") == base64.b64decode(PNG)
        assert conn.read_resource("file:///orders/7") == ["order 7", "2"]  # from the template
        assert [(p.name, [a.name for a in p.arguments]) for p in conn.prompts] == \
            [("triage", ["ticket"])]
        messages = conn.get_prompt("triage", {"ticket": "late order"})
        assert messages[0] == {"role": "user", "content": "Ticket: my order is late."}
        assert messages[1]["content"]["resource"]["uri"] == "file:///guide.md"
        # what a notebook does with them: the decision's prompt
        prompt = (f"{messages[0]['content']}\nPolicy: {conn.read_resource('file:///guide.md')}"
                  f"\nPick the next step.")
        rt = ScriptedRuntime([pick("noop", {})])
        decision.make(prompt, conn.options, runtime=rt)
        assert "Refunds within 30 days." in rt.calls[0].prompt
        with pytest.raises(mcp.ServerError, match=r"file:///bad.bin.*not valid base64"):
            conn.read_resource("file:///bad.bin")
        with pytest.raises(mcp.ServerError, match=r"'raw'.*resources/read.*no answer"):
            conn.read_resource("file:///nothing")  # the server's own error, named
        with pytest.raises(mcp.UsageError, match="arguments are strings"):
            conn.get_prompt("triage", {"ticket": 7})
        with pytest.raises(mcp.UsageError, match="no server 'other'"):
            conn.read_resource("file:///guide.md", server="other")


def test_a_token_a_server_echoes_in_a_resource_or_a_prompt_is_masked(tmp_path):
    token = "raw-" + "Tz5" * 10
    path = tmp_path / "rec.jsonl"
    script = {"capabilities": {"resources": {}, "prompts": {}}, "tools": [],
              "resources": [{"uri": "file:///env", "name": "env ${RAW_API_KEY}"}],
              "reads": {"file:///env": {"contents": [{"uri": "file:///env",
                                                      "text": "key=${RAW_API_KEY}"}]}},
              "prompts": [{"name": "p"}],
              "prompt_results": {"p": {"messages": [{"role": "user", "content": {
                  "type": "text", "text": "use ${RAW_API_KEY}"}}]}}}
    rec = RecordingRuntime(ScriptedRuntime([]), path)
    with mcp.connect(raw_command(tmp_path, **script), name="raw", env={"RAW_API_KEY": token},
                     runtime=rec) as conn:
        shown = [conn.resources[0].name, conn.read_resource("file:///env"),
                 conn.get_prompt("p")[0]["content"]]
    assert shown == ["env [redacted]", "key=[redacted]", "use [redacted]"]
    assert no_piece_of(token, path.read_text(encoding="utf-8"))


def test_a_server_without_resources_or_prompts_lists_none(tmp_path):
    with raw_server(tmp_path, tools=[tool("noop")]) as conn:
        assert conn.resources == [] and conn.prompts == [] and conn.resource_templates == []


def test_resources_and_prompts_are_recorded_and_replayed_with_no_server(tmp_path):
    path = tmp_path / "rec.jsonl"
    rec = RecordingRuntime(ScriptedRuntime([]), path)
    with mcp.connect(raw_command(tmp_path, **RESOURCES), name="raw", runtime=rec) as conn:
        names = [r.name for r in conn.resources]
        text = conn.read_resource("file:///guide.md")
        messages = conn.get_prompt("triage", {"ticket": "late order"})
    before = children()
    with mcp.connect("no-such-server", name="raw", runtime=ReplayRuntime(path)) as replayed:
        assert children() == before  # nothing started
        assert [r.name for r in replayed.resources] == names
        assert replayed.read_resource("file:///guide.md") == text
        assert replayed.get_prompt("triage", {"ticket": "late order"}) == messages
        with pytest.raises(ToolNotRecorded, match="resources/read.*file:///logo.png"):
            replayed.read_resource("file:///logo.png")  # not recorded: named


# -- case 19: a connection where options go ----------------------------------------------------


def test_a_connection_is_accepted_where_options_go(tmp_path):
    calls = {"noop": {"content": [{"type": "text", "text": "done"}]}}
    with raw_server(tmp_path, tools=[tool("noop"), tool("other")], calls=calls) as conn:
        assert decision.make("Go.", conn, runtime=ScriptedRuntime([pick("noop", {})])) == "done"
        assert decision.last_trace().options[0]["name"] == "noop"
        results = decision.evaluate("Go {n}.", conn, [{"n": 1}, {"n": 2}], progress=False,
                                    runtime=ScriptedRuntime(rule=lambda *a, **k: pick("noop", {})))
        assert [t.result for t in results.traces] == ["done", "done"]
        assert len(conn.calls) == 3

    class Loop:
        def __option_set__(self):
            return self
    with pytest.raises(OptionError, match=r"Loop.__option_set__\(\) must give an option set"):
        decision.make("Go.", Loop(), runtime=ScriptedRuntime([pick("noop", {})]))


# -- case 16 without a server: a tool that must run as a task ------------------------------------


def test_a_tool_whose_schema_is_past_the_budget_is_left_out_and_the_others_connect(tmp_path):
    """A server listing one tool of 50,000 properties (past the schema work budget) beside a
    usable one: the connection opens with the usable tool, and the other is left out with the
    budget's own words, not a failed connect."""
    wide = {"name": "wide", "description": "Too many fields.",
            "inputSchema": {"type": "object",
                            "properties": {f"f{k}": {"type": "string"} for k in range(50_000)}}}
    calls = {"fine": {"content": [{"type": "text", "text": "ran"}]}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conn = raw_server(tmp_path, tools=[wide, tool("fine")], calls=calls).open()
    try:
        assert [o.name for o in conn.options] == ["fine"]
        why = conn.left_out["wide"]
        assert "inputSchema cannot be used" in why and "budget" in why, why
        warned = [str(w.message) for w in caught if issubclass(w.category, OptionWarning)]
        assert any("'wide'" in w and "budget" in w for w in warned), warned
        rt = ScriptedRuntime([pick("fine", {})])
        assert decision.make("Go.", conn.options, runtime=rt) == "ran"
    finally:
        conn.close()


def test_a_tool_that_must_run_as_a_task_is_left_out_with_the_reason(tmp_path):
    task_tool = tool("research", execution={"taskSupport": "required"})
    maybe = tool("maybe", execution={"taskSupport": "optional"})
    calls = {"maybe": {"content": [{"type": "text", "text": "ran"}]}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conn = raw_server(tmp_path, tools=[task_tool, maybe], calls=calls).open()
    try:
        assert [o.name for o in conn.options] == ["maybe"]  # optional: called plainly
        why = conn.left_out["research"]
        assert "taskSupport 'required'" in why and "cannot make task-augmented calls" in why
        warned = [str(w.message) for w in caught if issubclass(w.category, OptionWarning)]
        assert any("'research'" in w and "taskSupport 'required'" in w for w in warned), warned
        assert "1 left out" in repr(conn)
        with pytest.raises(mcp.UsageError, match="'research' is left out.*taskSupport"):
            conn.call("research")
        # a pick of it is an unknown option (re-asked), never a call the server refuses
        rt = ScriptedRuntime([pick("research", {}), pick("maybe", {})])
        assert decision.make("Go.", conn.options, runtime=rt) == "ran"
        assert decision.last_trace().attempts[0].error_kind == "unknown_call"
        assert conn.calls == [("maybe", {})]
        with pytest.raises(DecisionError):
            decision.make("Go.", conn.options, max_retries=0,
                          runtime=ScriptedRuntime([pick("research", {})]))
    finally:
        conn.close()
