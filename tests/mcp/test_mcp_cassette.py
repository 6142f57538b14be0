"""Live tools' results in cassettes (issue 38): a decision whose pick calls an MCP tool records
the tool's result beside the model calls, `ReplayRuntime` answers the same call from the file
with the server gone, `CachedRuntime` calls the server only for what is new, and no recording
holds a key, even one the server echoes back.

Against the reference `mcp-server-time` over stdio and a small server written with the SDK's
own MCPServer (started by the test, over stdio). Work is counted: `Connection.calls` is every
call that reached a server, `children()` every server process left."""
from __future__ import annotations

import json
import sys
import textwrap

import pytest
from test_mcp_servers import TIME, children, finishes, pick

from openprogram import DecisionError, UsageError, decision, mcp
from openprogram.runtimes import ScriptedRuntime
from openprogram.runtimes.cassette import CachedRuntime, RecordingRuntime, ReplayRuntime
from openprogram.runtimes.cassette.tool_results import ToolNotRecorded

BAD = {"source_timezone": "Nowhere/Special", "time": "10:00", "target_timezone": "Etc/UTC"}
GOOD = {**BAD, "source_timezone": "Asia/Tokyo"}


def lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:]]


def convert(conn, rt):
    return decision.make("10:00 in Tokyo is what in UTC?", conn.options, runtime=rt)


def test_a_recorded_tool_result_replays_with_the_server_gone(tmp_path):
    path = tmp_path / "tour.jsonl"
    before = children()
    with mcp.connect(TIME) as conn:
        rec = RecordingRuntime(ScriptedRuntime([pick("convert_time", BAD),
                                                pick("convert_time", GOOD)]), path)
        live = convert(conn, rec)
        assert len(conn.calls) == 2  # the error result and the good one reached the server
        opts = conn.options
    assert children() == before  # the server is gone: a replay cannot reach it
    tools = [e for e in lines(path) if "tool" in e]
    assert [t["tool"] for t in tools] == [{"server": "mcp-server-time", "name": "convert_time",
                                           "arguments": a} for a in (BAD, GOOD)]
    assert tools[0]["result"]["isError"] is True and "structuredContent" in tools[1]["result"]
    assert [t["decision"]["attempt"] for t in tools] == [1, 2]  # where each sits
    assert len(rec.tool_calls) == 2 and len(rec.calls) == 2  # model calls kept apart

    replayed = decision.make("10:00 in Tokyo is what in UTC?", opts, runtime=ReplayRuntime(path))
    assert replayed == live and replayed["target"]["datetime"].endswith("T01:00:00+00:00")
    trace = decision.last_trace()
    assert trace.attempts[0].error_kind == "tool_error"  # the recorded isError, re-asked again
    assert "Nowhere/Special" in trace.attempts[1].prompt


def test_a_tool_call_the_cassette_did_not_record_is_named(tmp_path):
    path = tmp_path / "tour.jsonl"
    with mcp.connect(TIME) as conn:
        convert(conn, RecordingRuntime(ScriptedRuntime([pick("convert_time", GOOD)]), path))
        other = {**GOOD, "time": "11:00"}
        replay = ReplayRuntime(path)
        # the model's reply is the same request's, so the replay answers it; the tool's
        # arguments are not what was recorded
        replay.recorded[0]["response"]["text"] = pick("convert_time", other)
        with pytest.raises(ToolNotRecorded, match=r"convert_time.*11:00.*other arguments.*"
                                                   r"record it again"):
            convert(conn, replay)
        assert len(conn.calls) == 1  # the replay never called the server
        assert decision.last_trace().status == "failed"


def test_a_second_run_through_the_cache_makes_no_server_calls(tmp_path):
    path = tmp_path / "cache.jsonl"

    def run(conn):
        rt = CachedRuntime(ScriptedRuntime([pick("convert_time", BAD),
                                            pick("convert_time", GOOD)]), path)
        return convert(conn, rt), rt
    with mcp.connect(TIME) as conn:
        first, rt = run(conn)
        assert len(conn.calls) == 2 and rt.misses == 4  # two model calls, two tool calls
    with mcp.connect(TIME) as conn:
        again, rt = run(conn)
        assert conn.calls == [] and rt.hits == 4 and rt.misses == 0
    assert again == first
    # the cache file is a cassette: it replays offline, tool results included
    assert convert(conn, ReplayRuntime(path)) == first


ECHO_SERVER = textwrap.dedent('''
    import os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("echo")

    @server.tool()
    def whoami() -> str:
        """The account this server runs as."""
        return f"signed in with {os.environ['SHOP_API_KEY']}"

    @server.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    server.run()
''')


def test_a_recording_never_holds_a_key_a_server_echoes(tmp_path):
    from openprogram.runtimes import OpenAIRuntime
    server_key = "shop-" + "k3y" * 8
    model_key = "sk-proj-" + "Zq9" * 12
    provider = OpenAIRuntime(model="gpt-4o-mini", api_key=model_key)  # a key this process holds
    script = tmp_path / "echo_server.py"
    script.write_text(ECHO_SERVER)
    path = tmp_path / "run.jsonl"
    with mcp.connect([sys.executable, str(script)], name="echo",
                     env={"SHOP_API_KEY": server_key}) as conn:
        rec = RecordingRuntime(ScriptedRuntime([pick("whoami", {}),
                                                pick("echo", {"text": f"key={model_key}"})]),
                               path)
        said = finishes(lambda: decision.make("Who am I?", conn.options, runtime=rec))
        # the connection's own token is masked in what its server answers, so the program
        # and its trace never hold it either (the SDK wraps a str in {"result": ...})
        assert said == {"result": "signed in with [redacted]"}
        echoed = decision.make("Echo it.", conn.options, runtime=rec)
        assert echoed == {"result": f"key={model_key}"}
    text = path.read_text(encoding="utf-8")
    assert server_key not in text and model_key not in text
    assert server_key[:8] not in text and model_key[8:16] not in text  # no piece of either
    assert "signed in with [redacted]" in text
    assert repr(conn._secrets) == "[<secret>]"
    # and the masked recording replays: the arguments are keyed as written
    assert decision.make("Echo it.", conn.options, runtime=ReplayRuntime(path)) == \
        {"result": "key=[redacted]"}
    del provider



def test_the_result_cache_file_never_holds_a_key_a_server_echoes(tmp_path):
    # A key this process holds (a provider runtime's), sent to a tool in its arguments and
    # echoed back: the connection masks only its own tokens in what its server answers, so the
    # cache file is where nothing else stood between the key and the disk. It goes through the
    # shared writer, which masks every key of the process, in the result and in the key alike.
    from openprogram.base.secrets import Secret
    model_key = "sk-proj-" + "Wv4" * 12
    held = Secret(model_key)
    script = tmp_path / "echo_server.py"
    script.write_text(ECHO_SERVER)
    cache = tmp_path / "tools.json"
    with mcp.connect([sys.executable, str(script)], name="echo", cache=cache,
                     env={"SHOP_API_KEY": "shop-" + "k3y" * 8}) as conn:
        said = finishes(lambda: conn.call("echo", {"text": f"key={model_key}"}))
        assert said == {"result": f"key={model_key}"}   # the program gets what it asked for
        assert conn.calls == [("echo", {"text": f"key={model_key}"})]
    text = cache.read_text(encoding="utf-8")
    assert all(model_key[i:i + 8] not in text for i in range(len(model_key) - 7)), text
    assert "key=[redacted]" in text and json.loads(text)   # still the cache's JSON object
    del held

ROTATING_SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("rotating")
    state = {"rotated": False}

    @server.tool()
    def old(x: int) -> int:
        """The old way to double a number."""
        return x + x

    def new(x: int) -> int:
        """The new way to double a number."""
        return 2 * x

    @server.tool()
    async def rotate(ctx: Context) -> str:
        """Replace the old tool with the new one."""
        if not state["rotated"]:
            state["rotated"] = True
            server.remove_tool("old")
            server.add_tool(new)
            await ctx.request_context.session.send_tool_list_changed()
        return "rotated"

    server.run()
''')


@pytest.fixture
def rotating(tmp_path):
    script = tmp_path / "rotating_server.py"
    script.write_text(ROTATING_SERVER)
    with mcp.connect([sys.executable, str(script)], name="rot") as conn:
        yield conn


def test_options_follow_a_server_whose_tools_change_mid_run(rotating):
    conn = rotating
    menu = conn.options
    assert [o.name for o in menu] == ["old", "rotate"]
    assert decision.make("Rotate.", menu, runtime=ScriptedRuntime([pick("rotate", {})])) == \
        {"result": "rotated"}
    # the server said its tools changed: the next read of the options follows it
    assert [o.name for o in conn.options] == ["rotate", "new"]
    assert [t.name for t in conn.tools] == ["rotate", "new"]
    assert decision.make("Double 2.", conn.options,
                         runtime=ScriptedRuntime([pick("new", {"x": 2})])) == {"result": 4}


def test_a_pick_of_a_tool_the_server_removed_is_re_asked_without_calling_it(rotating):
    conn = rotating
    stale = conn.options  # a menu made before the change, as a running decision holds it
    decision.make("Rotate.", stale, runtime=ScriptedRuntime([pick("rotate", {})]))
    before = list(conn.calls)
    rt = ScriptedRuntime([pick("old", {"x": 1}), pick("rotate", {})])
    assert decision.make("Double 1.", stale, runtime=rt) == {"result": "rotated"}
    assert conn.calls[len(before):] == [("rotate", {})]  # the removed tool was never called
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "tool_error"
    assert "'old' was removed from MCP server 'rot'" in first.error_message
    assert "rotate, new" in first.error_message  # what it has now
    with pytest.raises(DecisionError, match="removed") as info:
        decision.make("Double 1.", stale, max_retries=0,
                      runtime=ScriptedRuntime([pick("old", {"x": 1})]))
    assert info.value.kind == "tool_error" and info.value.trace.status == "failed"


def test_refresh_reads_the_tools_again_and_a_closed_connection_says_so(rotating):
    conn = rotating
    assert conn.refresh() is conn and [o.name for o in conn.options] == ["old", "rotate"]
    conn.close()
    with pytest.raises(UsageError, match="closed: open it again"):
        conn.refresh()


def test_with_runtime_the_listing_is_recorded_and_a_replay_starts_no_server(tmp_path):
    path = tmp_path / "tour.jsonl"
    rec = RecordingRuntime(ScriptedRuntime([pick("convert_time", BAD),
                                            pick("convert_time", GOOD)]), path)
    with mcp.connect(TIME, runtime=rec) as conn:
        live = convert(conn, rec)
        assert len(conn.calls) == 2
    listing, *calls = [e for e in lines(path) if "tool" in e]
    assert listing["tool"] == {"server": "mcp-server-time", "name": "tools/list", "arguments": {}}
    assert [t["name"] for t in listing["result"]["tools"]] == ["get_current_time", "convert_time"]
    assert [c["tool"]["name"] for c in calls] == ["convert_time", "convert_time"]

    before = children()
    replay = ReplayRuntime(path)
    # the server's command need not even exist: nothing is started
    with mcp.connect("no-such-mcp-server", name="mcp-server-time", runtime=replay) as conn:
        assert children() == before
        assert [o.name for o in conn.options] == ["get_current_time", "convert_time"]
        assert convert(conn, replay) == live
        assert conn.calls == [] and conn.refresh() is conn
        with pytest.raises(mcp.ServerError, match="was not started.*recording"):
            conn.call("convert_time", GOOD)
    # a replay asked for a server it did not record names it; nothing is left open
    with pytest.raises(ToolNotRecorded, match="tools/list.*'other'"):
        mcp.connect("no-such-mcp-server", name="other", runtime=ReplayRuntime(path)).open()
    assert children() == before


def test_a_cache_starts_its_servers_live_so_new_calls_reach_them(tmp_path):
    path = tmp_path / "cache.jsonl"
    for tz in ("Asia/Tokyo", "Europe/Paris"):  # the second run asks a call the cache lacks
        rt = CachedRuntime(ScriptedRuntime([pick("get_current_time", {"timezone": tz})]), path)
        with mcp.connect(TIME, runtime=rt) as conn:
            assert decision.make(f"Time in {tz}?", conn.options, runtime=rt)["timezone"] == tz
            assert conn.calls == [("get_current_time", {"timezone": tz})]


def test_an_evaluation_on_threads_records_and_replays_every_rows_tool_call(tmp_path):
    path = tmp_path / "eval.jsonl"
    rows = [{"city": c} for c in ("Tokyo", "Paris", "Lima", "Oslo")]
    zones = {"Tokyo": "Asia/Tokyo", "Paris": "Europe/Paris", "Lima": "America/Lima",
             "Oslo": "Europe/Oslo"}

    def rule(messages, tools=None, **kw):  # the scripted model reads the row's city
        city = json.dumps(messages).split("It is 12:00 in ", 1)[1].split(".", 1)[0]
        return pick("convert_time", {"source_timezone": zones[city], "time": "12:00",
                                     "target_timezone": "Etc/UTC"})
    with mcp.connect(TIME) as conn:
        rec = RecordingRuntime(ScriptedRuntime(rule=rule), path)
        live = decision.evaluate("It is 12:00 in {city}. What time is it in UTC?", conn.options,
                                 rows, runtime=rec, concurrency=4, progress=False)
        assert len(conn.calls) == 4
        opts = conn.options
    assert len([e for e in lines(path) if "tool" in e]) == 4
    again = decision.evaluate("It is 12:00 in {city}. What time is it in UTC?", opts, rows,
                              runtime=ReplayRuntime(path), concurrency=4, progress=False)
    assert [t.result for t in again.traces] == [t.result for t in live.traces]
    assert {t.result["source"]["timezone"] for t in again.traces} == set(zones.values())



def test_a_mismatch_names_the_recorded_calls_line_past_the_tool_lines(tmp_path):
    path = tmp_path / "tour.jsonl"
    with mcp.connect(TIME) as conn:
        rec = RecordingRuntime(ScriptedRuntime([pick("convert_time", BAD),
                                                pick("convert_time", GOOD)]), path)
        convert(conn, rec)
        # lines: header, model call, tool call, model call (the re-ask), tool call
        assert [("tool" in e) for e in lines(path)] == [False, True, False, True]
        rows = path.read_text(encoding="utf-8").splitlines()
        reask = json.loads(rows[3])
        reask["request"]["messages"][-1]["content"] += " (edited)"
        rows[3] = json.dumps(reask)
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        with pytest.raises(DecisionError, match=r"nearest recorded request is call #2 "
                                                r"\(line 4\)"):
            convert(conn, ReplayRuntime(path))


def test_an_mcp_tool_as_an_agents_work_tool_is_recorded_and_replayed(tmp_path):
    from openprogram import agent
    from openprogram.base.model_protocol import ToolCall
    path = tmp_path / "agent.jsonl"
    script = [ToolCall("convert_time", {**BAD}, "call_1"),      # the server's error result
              ToolCall("convert_time", {**GOOD, "time": 10}, "call_2"),  # refused, not sent
              ToolCall("convert_time", {**GOOD}, "call_3"),
              "10:00 in Tokyo is 01:00 UTC."]
    before = children()
    with mcp.connect(TIME) as conn:
        rec = RecordingRuntime(ScriptedRuntime(list(script)), path)
        said = agent("10:00 in Tokyo is what in UTC?", tools=conn.options, runtime=rec)
        # the wrong-type call never reached the server; the other two did
        assert conn.calls == [("convert_time", BAD), ("convert_time", GOOD)]
        opts = conn.options
    assert said == "10:00 in Tokyo is 01:00 UTC."
    model = rec.inner.calls  # what the model was sent, round by round
    spec = {t["name"]: t for t in model[0].tools}["convert_time"]
    assert spec["parameters"]["required"] == ["source_timezone", "time", "target_timezone"]
    results = [m["content"] for m in model[-1].messages if m["role"] == "tool"]
    assert results[0].startswith("Error: ToolError: the tool reported an error")
    assert results[1] == "Error: arguments.time must be str, got integer 10" \
        and "01:00:00+00:00" in results[2]
    tools = [e for e in lines(path) if "tool" in e]
    assert [t["tool"]["arguments"] for t in tools] == [BAD, GOOD]
    assert children() == before  # the server is gone

    # replayed with the server gone: the same rounds, the tools' results from the file
    # (a live call now would be a ServerError: the connection is closed). Each round's request
    # holds the previous rounds' tool results and a replay answers only a request it recorded,
    # so the last reply coming back means every tool result was the recorded one.
    replay = ReplayRuntime(path)
    assert agent("10:00 in Tokyo is what in UTC?", tools=opts, runtime=replay) == said
