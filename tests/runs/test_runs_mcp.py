"""A run's live tool calls (issue 51): a decision whose pick calls a tool of a real MCP server
(the reference `mcp-server-time`, over stdio) records the tool's result in the run; a fork
answers that call from the recording before its fork point — the server gets no call, and need
not be running — and a saved run keeps it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import openprogram
from openprogram import decision, mcp
from openprogram.runs import Run, RunDiverged
from openprogram.runtimes import ScriptedRuntime

TIME = f"{Path(sys.executable).parent / 'mcp-server-time'} --local-timezone Etc/UTC"
GOOD = {"source_timezone": "Asia/Tokyo", "time": "10:00", "target_timezone": "Etc/UTC"}


def pick(name: str, args: dict) -> str:
    return json.dumps({"call": name, "args": args})


def choose(name: str) -> str:
    return "```json\n" + json.dumps({"call": name}) + "\n```"


def test_a_fork_answers_the_servers_result_from_the_recording(tmp_path):
    with mcp.connect(TIME) as conn:
        options = conn.options

        def program():
            converted = decision.make("10:00 in Tokyo is what in UTC?", options)
            return converted["target"]["datetime"], decision.make("Good?", ["yes", "no"])
        rt = ScriptedRuntime([pick("convert_time", GOOD), choose("yes")])
        r = openprogram.run(program, runtime=rt)
        assert r.status == "ok", r.error
        assert r.result[0].endswith("T01:00:00+00:00") and len(conn.calls) == 1
        [tool] = r.tool_calls
        assert tool.call == {"server": "mcp-server-time", "name": "convert_time",
                             "arguments": GOOD} and tool.decision == 0
        node = tool.node
        assert node.kind == "mcp_call" and node.up is r.decisions[0] and node.status == "ok"
        assert node.source == "live" and r.totals["tool_calls"] == 1
        f = r.fork(at=1, reply=choose("no"))
        assert len(conn.calls) == 1  # no call reached the server
        assert f.result == (r.result[0], "no") and f.tool_calls[0].source == "recording"
        r.save(tmp_path / "time.jsonl")
    f = r.fork(at=1, reply=choose("no"))   # the connection is closed: none is needed
    assert f.result == (r.result[0], "no")
    loaded = Run.load(tmp_path / "time.jsonl", program=program)
    assert loaded.tool_calls[0].result == r.tool_calls[0].result
    assert loaded.fork(at=1, reply=choose("no")).result == (r.result[0], "no")
    # a tool call the recording does not hold, before the fork point, is a divergence: here
    # the recorded reply was edited (its request, which the key covers, was not) to pick the
    # tool with other arguments
    path = tmp_path / "time.jsonl"
    rows = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(rows[1])
    first["response"]["text"] = pick("convert_time", {**GOOD, "time": "11:00"})
    rows[1] = json.dumps(first)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(RunDiverged, match=r"live tool call 'convert_time' on server "
                                          r"'mcp-server-time'.*11:00.*not in the recording"):
        Run.load(path, program=program).fork(at=1, reply=choose("no"))
