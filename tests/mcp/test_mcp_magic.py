"""`%mcp_connect NAME COMMAND...` and `%%decide NAME.options` in IPython's InteractiveShell, also
with the cell run inside a running event loop (the kernel's case, where a sync decision used to
wait on itself). The server is mcp-server-time from the package index."""
from __future__ import annotations

import asyncio
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
    assert not r.success and "usage: %mcp_connect NAME COMMAND" in str(r.error_in_exec)
    r = shell.run_cell("%mcp_connect clock no-such-mcp-server")
    assert not r.success and "'no-such-mcp-server' not found" in str(r.error_in_exec)
    assert "clock" not in shell.user_ns
