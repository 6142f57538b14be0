"""Live MCP servers as option sets (issue 38), against the reference servers from the package
index (`mcp-server-time`, `mcp-server-git`, installed into the venv by requirements-dev.txt) over
stdio, the official `mcp` SDK on the client side, and a scripted model choosing.

Work is counted, never timed: `Connection.calls` is every call that reached a server. A scenario
that could deadlock runs under a bound of the test's own (`finishes`)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from deadlock import finishes as _finishes  # tests/support

from openprogram import DecisionError, OptionError, OptionWarning, UsageError, decision, mcp, tool
from openprogram.base import secrets
from openprogram.runtimes import ScriptedRuntime

BIN = Path(sys.executable).parent
TIME = f"{BIN / 'mcp-server-time'} --local-timezone Etc/UTC"
HARNESS_BOUND_S = 120  # a deadlock only: starting a server takes a second or two here


def finishes(scenario):
    return _finishes(scenario, HARNESS_BOUND_S)


def children() -> set[int]:
    """The live child processes of this test process (a server left running shows here)."""
    me, out = os.getpid(), set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                out.add(int(d.name))
    return out


def pick(name, args):
    import json
    return json.dumps({"call": name, "args": args})


@pytest.fixture(scope="module")
def time_server():
    with mcp.connect(TIME) as conn:
        yield conn


def test_the_time_servers_tools_are_options_and_a_pick_calls_the_tool(time_server):
    assert [o.name for o in time_server.options] == ["get_current_time", "convert_time"]
    before = len(time_server.calls)
    rt = ScriptedRuntime([pick("get_current_time", {"timezone": "Asia/Tokyo"})])
    result = decision.make("What time is it in Tokyo?", time_server.options, runtime=rt)
    # the tool declares an output schema: its structured content, not the SDK's CallToolResult
    assert result["timezone"] == "Asia/Tokyo" and result["datetime"].endswith("+09:00")
    assert time_server.calls[before:] == [("get_current_time", {"timezone": "Asia/Tokyo"})]
    trace = decision.last_trace()
    assert trace.status == "resolved" and trace.result == result
    assert "IANA timezone name" in trace.menu  # the tool's own descriptions are on the menu


def test_a_wrong_type_pick_never_reaches_the_server(time_server):
    before = len(time_server.calls)
    rt = ScriptedRuntime([pick("get_current_time", {"timezone": 9}),
                          pick("get_current_time", {"timezone": "Etc/UTC"})])
    result = decision.make("Time in UTC?", time_server.options, runtime=rt)
    assert result["timezone"] == "Etc/UTC"
    assert time_server.calls[before:] == [("get_current_time", {"timezone": "Etc/UTC"})]
    assert decision.last_trace().attempts[0].error_kind == "type_mismatch"


def test_a_tool_error_is_re_asked_with_the_servers_message(time_server):
    before = len(time_server.calls)
    bad = {"source_timezone": "Nowhere/Special", "time": "10:00", "target_timezone": "Etc/UTC"}
    good = {**bad, "source_timezone": "Asia/Tokyo"}
    rt = ScriptedRuntime([pick("convert_time", bad), pick("convert_time", good)])
    result = decision.make("10:00 in Tokyo is what in UTC?", time_server.options, runtime=rt)
    assert result["target"]["datetime"].endswith("T01:00:00+00:00")
    assert len(time_server.calls) - before == 2  # both reached the server
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "tool_error" and "Nowhere/Special" in first.error_message
    assert "Nowhere/Special" in decision.last_trace().attempts[1].prompt  # told to the model


def test_a_tool_error_with_no_retries_left_is_a_decision_error_of_kind_tool_error(time_server):
    bad = {"source_timezone": "Nowhere/Special", "time": "10:00", "target_timezone": "Etc/UTC"}
    with pytest.raises(DecisionError) as info:
        decision.make("Convert.", time_server.options, max_retries=0,
                      runtime=ScriptedRuntime([pick("convert_time", bad)]))
    assert info.value.kind == "tool_error" and "Nowhere/Special" in info.value.message


def test_sync_make_inside_a_running_loop_completes(time_server):
    # a notebook cell: the kernel's loop runs in this thread while the cell calls sync make
    async def cell():
        rt = ScriptedRuntime([pick("get_current_time", {"timezone": "Europe/Paris"})])
        return decision.make("Time in Paris?", time_server.options, runtime=rt, timeout_s=60)
    assert finishes(lambda: asyncio.run(cell()))["timezone"] == "Europe/Paris"


def test_async_with_connect_inside_a_running_loop_then_sync_make_and_amake_complete():
    async def cell():
        async with mcp.connect(TIME) as conn:
            one = decision.make("Time?", conn.options, runtime=ScriptedRuntime(
                [pick("get_current_time", {"timezone": "Etc/UTC"})]))
            two = await decision.amake("Time?", conn.options, runtime=ScriptedRuntime(
                [pick("get_current_time", {"timezone": "Asia/Tokyo"})]))
            return one["timezone"], two["timezone"], len(conn.calls)
    assert finishes(lambda: asyncio.run(cell())) == ("Etc/UTC", "Asia/Tokyo", 2)


def test_options_of_a_session_opened_on_the_running_loop():
    # The notebook case with the SDK's own session, opened with `await` on the loop:
    # amake completes there; a sync make there is refused at once, naming what to do, where it
    # used to hang for ever.
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def cell():
        params = StdioServerParameters(command=str(BIN / "mcp-server-time"),
                                       args=["--local-timezone", "Etc/UTC"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                opts = await mcp.options(session)
                result = await decision.amake("Time?", opts, runtime=ScriptedRuntime(
                    [pick("get_current_time", {"timezone": "Asia/Tokyo"})]))
                with pytest.raises(UsageError) as info:
                    decision.make("Time?", opts, runtime=ScriptedRuntime(
                        [pick("get_current_time", {"timezone": "Asia/Tokyo"})]))
                return result, str(info.value)
    result, message = finishes(lambda: asyncio.run(cell()))
    assert result["timezone"] == "Asia/Tokyo"
    assert "amake" in message and "mcp.connect" in message


def test_the_sdks_tool_objects_are_options_as_they_are(time_server):
    tools = time_server.tools
    rt = ScriptedRuntime([pick("get_current_time", {"timezone": "Etc/UTC"})])
    # no function: a schema option, the filled arguments come back
    assert decision.make("Which?", tools, runtime=rt) == {"decision": "get_current_time",
                                                          "timezone": "Etc/UTC"}
    assert tool(tools[1]).name == "convert_time"
    with pytest.raises(OptionError, match="tool definition.*mcp SDK's Tool"):
        decision.make("Which?", [object()], runtime=rt)


def test_the_git_server_on_a_repository_the_test_makes(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("hello\n")
    with mcp.connect([str(BIN / "mcp-server-git"), "--repository", str(repo)]) as conn:
        names = [o.name for o in conn.options]
        assert len(names) >= 12 and "git_status" in names and "git_add" in names
        rt = ScriptedRuntime([pick("git_status", {"repo_path": str(repo)})])
        status = decision.make("Is anything uncommitted?", conn.options, runtime=rt)
        assert "notes.txt" in status and conn.calls == [("git_status", {"repo_path": str(repo)})]
    subprocess.run([*git, "status"], check=True, capture_output=True)


def test_two_servers_with_the_same_tools_get_prefixed_names_and_call_their_own(tmp_path):
    config = {"mcpServers": {
        "utc": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "Etc/UTC"]},
        "tokyo": {"command": str(BIN / "mcp-server-time"),
                  "args": ["--local-timezone", "Asia/Tokyo"]}}}
    path = tmp_path / "mcp.json"
    import json
    path.write_text(json.dumps(config))
    with mcp.connect(config=path) as conn:
        assert [o.name for o in conn.options] == [
            "utc__get_current_time", "utc__convert_time",
            "tokyo__get_current_time", "tokyo__convert_time"]
        rt = ScriptedRuntime([pick("tokyo__get_current_time", {"timezone": "Etc/UTC"})])
        assert decision.make("Time?", conn.options, runtime=rt)["timezone"] == "Etc/UTC"
        assert conn.calls == [("tokyo__get_current_time", {"timezone": "Etc/UTC"})]


def test_a_command_that_is_not_found_is_named_and_nothing_is_left_running():
    before = children()
    with pytest.raises(mcp.ServerError, match="'no-such-mcp-server' not found.*install"):
        mcp.connect("no-such-mcp-server --flag").open()
    assert children() == before


def test_a_server_that_exits_at_start_is_named_with_its_stderr():
    before = children()
    line = [sys.executable, "-c", "import sys; print('bad flag --x', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(mcp.ServerError) as info:
        with mcp.connect(line, name="broken"):
            pass
    message = str(info.value)
    assert "'broken'" in message and "could not be started" in message and "bad flag --x" in message
    assert children() == before


def test_a_server_that_hangs_in_initialize_is_ended_after_timeout_s():
    before = children()
    line = [sys.executable, "-c", "import time; time.sleep(3600)"]
    with pytest.raises(mcp.ServerError, match="did not answer initialize.*ended"):
        finishes(lambda: mcp.connect(line, name="sleepy", timeout_s=1).open())
    assert children() == before


def test_a_closed_connection_leaves_no_server_and_refuses_calls():
    before = children()
    conn = mcp.connect(TIME).open()
    assert len(children() - before) == 1  # the server's process
    opts = conn.options
    conn.close()
    assert children() == before
    with pytest.raises(UsageError, match="not running|closed"):
        decision.make("Time?", opts, runtime=ScriptedRuntime(
            [pick("get_current_time", {"timezone": "Etc/UTC"})]))


@pytest.fixture
def http_server():
    """A server written with the SDK's own MCPServer (FastMCP in mcp 1.x), served over
    streamable HTTP on loopback by uvicorn in a thread; yields its URL and its stock."""
    import socket

    import uvicorn
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError as SDKToolError

    server = MCPServer("shop")
    stock = {"apple": 3, "pear": 0}

    @server.tool()
    def check_stock(item: str) -> int:
        """How many of an item are in stock."""
        if item not in stock:  # the SDK's error for a tool's own message to the client
            raise SDKToolError(f"no item {item!r} in this shop")
        return stock[item]

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning"))
    t = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    finishes(lambda: [None for _ in iter(lambda: uv.started, True)])  # until it listens
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    uv.should_exit = True
    t.join(HARNESS_BOUND_S)


def test_a_streamable_http_server_on_loopback(http_server):
    with mcp.connect(http_server, name="shop") as conn:
        assert [o.name for o in conn.options] == ["check_stock"]
        rt = ScriptedRuntime([pick("check_stock", {"item": "plum"}),
                              pick("check_stock", {"item": "apple"})])
        assert decision.make("How many apples?", conn.options, runtime=rt) == {"result": 3}
        assert conn.calls == [("check_stock", {"item": "plum"}), ("check_stock", {"item": "apple"})]
        first = decision.last_trace().attempts[0]
        assert first.error_kind == "tool_error" and "no item 'plum'" in first.error_message


def test_a_url_that_refuses_is_a_server_error_naming_it():
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(mcp.ServerError, match=f"127.0.0.1:{port}.*could not be started"):
        finishes(lambda: mcp.connect(f"http://127.0.0.1:{port}/mcp", timeout_s=20).open())


def test_a_tool_whose_input_schema_cannot_be_read_is_named_with_its_server():
    from mcp.types import Tool
    bad = Tool(name="odd", description="An odd tool.",
               input_schema={"type": "object", "properties": {"n": {"type": "integer",
                                                                   "minimum": "zero"}}})

    async def never_called(name, arguments):
        raise AssertionError("no call is made for a tool that cannot be read")
    loop = asyncio.new_event_loop()
    left_out = {}
    try:
        # left out with the reason (its server and the schema's own error), not a failed
        # listing: the server's other tools stay usable
        with pytest.warns(OptionWarning, match="MCP server 'weird'.*'odd'.*minimum"):
            assert mcp.tool_options([bad], never_called, loop, server="weird",
                                    left_out=left_out) == []
        assert "inputSchema cannot be used" in left_out["odd"]
        assert "minimum" in left_out["odd"] and "fix its schema" in left_out["odd"]
    finally:
        loop.close()


def test_a_server_that_ends_mid_run_is_a_server_error_not_a_re_ask():
    import signal
    before = children()
    with mcp.connect(TIME) as conn:
        (pid,) = children() - before
        os.kill(pid, signal.SIGKILL)
        rt = ScriptedRuntime([pick("get_current_time", {"timezone": "Etc/UTC"})])
        with pytest.raises(mcp.ServerError, match="connection closed.*connect again"):
            finishes(lambda: decision.make("Time?", conn.options, runtime=rt, timeout_s=60))
        trace = decision.last_trace()
        assert trace.status == "failed" and len(trace.attempts) == 1  # not re-asked
    assert children() == before


def test_a_result_cache_answers_a_run_again_with_no_server_calls(tmp_path):
    cache = tmp_path / "tools.json"
    bad = {"source_timezone": "Nowhere/Special", "time": "10:00", "target_timezone": "Etc/UTC"}
    good = {**bad, "source_timezone": "Asia/Tokyo"}

    def run(conn):
        rt = ScriptedRuntime([pick("convert_time", bad), pick("convert_time", good)])
        return decision.make("10:00 in Tokyo is what in UTC?", conn.options, runtime=rt)
    with mcp.connect(TIME, cache=cache) as conn:
        first = run(conn)
        assert len(conn.calls) == 2
    with mcp.connect(TIME, cache=cache) as conn:
        again = run(conn)
        assert conn.calls == []  # both answers, the error one too, came from the cache
        assert decision.last_trace().attempts[0].error_kind == "tool_error"
    assert again == first
    with pytest.raises(UsageError, match="cannot be read"):
        cache.write_text("{not json")
        mcp.connect(TIME, cache=cache)


def test_a_server_installed_beside_this_python_is_found_without_path(monkeypatch):
    # a notebook kernel started without activating its venv: the venv's bin/ is not on PATH
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    import shutil
    assert shutil.which("mcp-server-time") is None
    with mcp.connect("mcp-server-time --local-timezone Etc/UTC") as conn:
        assert [o.name for o in conn.options] == ["get_current_time", "convert_time"]
    with pytest.raises(mcp.ServerError, match="not found on PATH"):
        mcp.connect("no-such-mcp-server").open()


TOKEN = "tok-" + "Hq7" * 10  # what the shop's HTTP server wants in its Authorization header


@pytest.fixture
def guarded_server():
    """A streamable-HTTP SDK server on loopback that refuses a request without
    `Authorization: Bearer TOKEN` or `X-Api-Key: TOKEN` (401) and whose tools echo the header back,
    in a result and in a tool error: the worst a server can do with a token. Yields its URL and the
    headers it saw."""
    import socket

    import uvicorn
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError as SDKToolError

    seen: list[str] = []
    server = MCPServer("vault")

    @server.tool()
    def whoami() -> str:
        """The account the request came from."""
        return f"you sent {seen[-1]}"

    @server.tool()
    def rotate(new_secret: str) -> str:
        """Rotate the account's secret."""
        raise SDKToolError(f"rotation refused for {seen[-1]}")

    app = server.streamable_http_app()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = (headers.get(b"authorization") or headers.get(b"x-api-key") or b"").decode()
            seen.append(auth)
            if auth not in (f"Bearer {TOKEN}", TOKEN):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": f"bad token {auth}".encode()})
                return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # the lifespan scope goes through to the SDK's app, which starts its session manager there
    uv = uvicorn.Server(uvicorn.Config(guarded, log_level="warning"))
    t = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    finishes(lambda: [None for _ in iter(lambda: uv.started, True)])
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", seen
    uv.should_exit = True
    t.join(HARNESS_BOUND_S)


def no_piece_of(token, text):
    """Neither the token nor any 8-character stretch of it is in `text`."""
    return all(token[i:i + 8] not in text for i in range(len(token) - 7))


def test_a_token_in_a_header_reaches_the_server_and_nothing_else_holds_it(guarded_server,
                                                                          tmp_path):
    from openprogram.runtimes.cassette import RecordingRuntime, ReplayRuntime
    url, seen = guarded_server
    path = tmp_path / "vault.jsonl"
    rec = RecordingRuntime(ScriptedRuntime([pick("whoami", {}),
                                            pick("rotate", {"new_secret": "hunter22"})]), path)
    with mcp.connect(url, name="vault", headers={"Authorization": f"Bearer {TOKEN}"},
                     runtime=rec) as conn:
        assert sorted(o.name for o in conn.options) == ["rotate", "whoami"]
        said = decision.make("Who am I?", conn.options, runtime=rec)
        # the server echoed the header: the credential after its scheme is the secret (the
        # whole value would mask "Bearer t" in any text about bearer tokens)
        assert said == {"result": "you sent Bearer [redacted]"}
        about = "explain Bearer tokens and Authorization headers"
        assert secrets.scrub(about) == about
        trace_text = json.dumps(decision.last_trace().to_dict(), default=repr)
        with pytest.raises(DecisionError) as err:
            decision.make("Rotate it.", conn.options, runtime=rec, max_retries=0)
        assert err.value.kind == "tool_error" and "rotation refused for Bearer [redacted]" in \
            str(err.value)
        failed = json.dumps(err.value.trace.to_dict(), default=repr)
        shown = repr(conn) + repr(vars(conn)) + "".join(repr(vars(s)) for s in conn.servers)
        assert conn.calls == [("whoami", {}), ("rotate", {"new_secret": "hunter22"})]
    assert seen and all(h == f"Bearer {TOKEN}" for h in seen)  # every request carried it
    text = path.read_text(encoding="utf-8")
    for where in (text, trace_text, failed, str(err.value), repr(err.value), shown):
        assert no_piece_of(TOKEN, where), where
    assert "you sent Bearer [redacted]" in text
    # the masked recording replays, with no server
    assert decision.make("Who am I?", conn.options, runtime=ReplayRuntime(path)) == said


def test_the_result_cache_never_holds_a_header_token_a_server_echoes(guarded_server, tmp_path):
    url, seen = guarded_server
    cache = tmp_path / "tools.json"
    with mcp.connect(url, name="vault", cache=cache,
                     headers={"X-Api-Key": TOKEN}) as conn:  # not a bearer: any secret name
        assert conn.call("whoami") == {"result": "you sent [redacted]"}
    assert no_piece_of(TOKEN, cache.read_text(encoding="utf-8"))
    with mcp.connect(url, name="vault", cache=cache,
                     headers={"X-Api-Key": TOKEN}) as conn:
        assert conn.call("whoami") == {"result": "you sent [redacted]"}  # from the cache
        assert conn.calls == []


def test_a_configs_url_server_takes_its_own_headers(guarded_server):
    url, seen = guarded_server
    config = {"mcpServers": {"vault": {"url": url,
                                       "headers": {"Authorization": f"Bearer {TOKEN}"}}}}
    with mcp.connect(config=config) as conn:
        assert conn.call("whoami") == {"result": "you sent Bearer [redacted]"}
        assert repr(conn.servers[0].headers) == "{'Authorization': <secret>}"
    assert seen[-1] == f"Bearer {TOKEN}"


def test_a_server_that_refuses_the_token_is_named_without_it(guarded_server):
    url, seen = guarded_server
    wrong = "tok-" + "Zz8" * 10
    with pytest.raises(mcp.ServerError, match="vault.*could not be started") as err:
        finishes(lambda: mcp.connect(url, name="vault", timeout_s=20,
                                     headers={"Authorization": f"Bearer {wrong}"}).open())
    assert seen and seen[-1] == f"Bearer {wrong}"
    assert no_piece_of(wrong, str(err.value) + repr(err.value))
    assert err.value.__cause__ is None or no_piece_of(wrong, repr(err.value.__cause__))


def test_headers_need_a_url_and_must_be_strings():
    with pytest.raises(UsageError, match=r"headers=.*streamable-HTTP.*env= instead"):
        mcp.connect(TIME, headers={"Authorization": "Bearer abcdefgh123"})
    with pytest.raises(UsageError, match="headers must be a dict") as err:
        mcp.connect("http://127.0.0.1:9/mcp", headers={"Authorization": 12345678901})
    assert "12345678901" not in str(err.value)
    with pytest.raises(UsageError, match="server 'x': headers must be a dict"):
        mcp.read_config({"mcpServers": {"x": {"url": "http://127.0.0.1:9/mcp",
                                               "headers": ["Bearer abc"]}}})
