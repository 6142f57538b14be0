"""`%mcp_connect NAME COMMAND...` and `%%decide NAME.options` in IPython's InteractiveShell, also
with the cell run inside a running event loop (the kernel's case, where a sync decision used to
wait on itself). The server is mcp-server-time from the package index."""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    InteractiveShell.clear_instance()
    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=cfg)
    assert sh.run_cell("%load_ext openprogram").success
    sh.run_cell("from openprogram.runtimes import ScriptedRuntime")
    yield sh
    sh.run_cell("%unload_ext openprogram")
    InteractiveShell.clear_instance()


RUNTIME = ('rt = ScriptedRuntime([\'{"call": "get_current_time", '
           '"args": {"timezone": "Asia/Tokyo"}}\'])')
CELL = "%%decide clock.options --runtime rt --as answer\nWhat time is it in Tokyo?"


def test_mcp_connect_then_decide_over_its_tools(shell, capsys):
    r = shell.run_cell(f"%mcp_connect clock {BIN / 'mcp-server-time'} --local-timezone Etc/UTC")
    assert r.success, r.error_in_exec
    assert "clock: 2 tools (get_current_time, convert_time)" in capsys.readouterr().out
    conn = shell.user_ns["clock"]
    shell.run_cell(RUNTIME)
    r = shell.run_cell(CELL)
    assert r.success, r.error_in_exec
    assert shell.user_ns["answer"]["timezone"] == "Asia/Tokyo"
    assert conn.calls == [("get_current_time", {"timezone": "Asia/Tokyo"})]

    async def in_the_kernels_loop():  # the cell runs while an event loop runs in this thread
        return shell.run_cell(CELL)
    shell.run_cell(RUNTIME)
    r = asyncio.run(in_the_kernels_loop())
    assert r.success, r.error_in_exec
    assert len(conn.calls) == 2
    shell.run_cell("%unload_ext openprogram")
    with pytest.raises(Exception, match="not running|closed"):
        conn.call("get_current_time", {"timezone": "Etc/UTC"})


def test_mcp_connect_usage_and_a_missing_server(shell):
    r = shell.run_cell("%mcp_connect clock")
    assert not r.success \
        and "usage: %mcp_connect [--runtime RT] [options] NAME COMMAND" in str(r.error_in_exec)
    r = shell.run_cell("%mcp_connect clock no-such-mcp-server")
    assert not r.success and "'no-such-mcp-server' not found" in str(r.error_in_exec)
    assert "clock" not in shell.user_ns


def test_mcp_connect_records_through_a_runtime_and_replays_with_no_server(shell, tmp_path):
    path = tmp_path / "clock.jsonl"
    shell.user_ns["path"] = str(path)
    shell.run_cell("from openprogram.runtimes.cassette import RecordingRuntime, ReplayRuntime")
    shell.run_cell(RUNTIME.replace("rt = ", "model = "))
    shell.run_cell("rt = RecordingRuntime(model, path)")
    r = shell.run_cell(f"%mcp_connect --runtime rt clock {BIN / 'mcp-server-time'} "
                       f"--local-timezone Etc/UTC")  # the server's own flag stays the server's
    assert r.success, r.error_in_exec
    r = shell.run_cell(CELL)
    assert r.success, r.error_in_exec
    live = shell.user_ns["answer"]
    assert shell.user_ns["clock"].calls == [("get_current_time", {"timezone": "Asia/Tokyo"})]
    shell.run_cell("clock.close()")
    kinds = [("request" in e, e.get("tool", {}).get("name"))
             for e in map(json.loads, path.read_text(encoding="utf-8").splitlines()[1:])]
    assert (False, "tools/list") in kinds and (False, "get_current_time") in kinds

    # replayed: the command need not exist, no server starts, no call reaches one
    shell.run_cell("rt = ReplayRuntime(path)")
    r = shell.run_cell("%mcp_connect --runtime rt clock no-such-mcp-server")
    assert r.success, r.error_in_exec
    r = shell.run_cell(CELL)
    assert r.success, r.error_in_exec
    assert shell.user_ns["answer"] == live and shell.user_ns["clock"].calls == []


def test_mcp_connect_options_are_checked_and_named(shell, tmp_path):
    r = shell.run_cell("%mcp_connect clock --runtime rt mcp-server-time")
    assert not r.success and "put the options before NAME" in str(r.error_in_exec)
    r = shell.run_cell("%mcp_connect --runtime nothing_here clock mcp-server-time")
    assert not r.success and "nothing_here" in str(r.error_in_exec)
    shell.run_cell("auth = ['Bearer abcdefgh123']")
    r = shell.run_cell("%mcp_connect --headers auth shop http://127.0.0.1:9/mcp")
    assert not r.success and "--headers 'auth' is a list; give a dict" in str(r.error_in_exec)
    shell.run_cell("auth = {'Authorization': 'Bearer abcdefgh123'}")
    r = shell.run_cell(f"%mcp_connect --headers auth clock {BIN / 'mcp-server-time'}")
    assert not r.success and "headers=" in str(r.error_in_exec) and \
        "env= instead" in str(r.error_in_exec)
    assert "clock" not in shell.user_ns and "shop" not in shell.user_ns


def test_mcp_connect_takes_a_config_file_and_an_env(shell, tmp_path, capsys):
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"clock": {
        "command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "Etc/UTC"]}}}))
    shell.user_ns["server_env"] = {"TZ": "Etc/UTC"}
    r = shell.run_cell(f"%mcp_connect --config {config} --timeout 60 servers")
    assert r.success, r.error_in_exec
    assert "servers: 2 tools" in capsys.readouterr().out
    assert [s.key for s in shell.user_ns["servers"].servers] == ["clock"]
    r = shell.run_cell(f"%mcp_connect --env server_env clock {BIN / 'mcp-server-time'}")
    assert r.success, r.error_in_exec
    assert shell.user_ns["clock"].servers[0].spec["env"] == {"TZ": "Etc/UTC"}


def test_mcp_connect_help_lists_its_options(shell, capsys):
    assert shell.run_cell("%mcp_connect --help").success
    out = capsys.readouterr().out
    for flag in ("--runtime", "--cache", "--config", "--env", "--headers", "--timeout"):
        assert flag in out
