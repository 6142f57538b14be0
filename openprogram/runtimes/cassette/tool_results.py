"""Tool results in a cassette: what a live tool returned, kept beside the model calls.

A decision whose pick runs a live tool (an MCP server's `call_tool`) gets its result from outside
the program: a replay that answered the model's calls from the file would still call the
server. So the recorder and the cache keep each such call as a line of its own — `tool` (the
server's key, the tool's name, the arguments), the `result` the tool returned as JSON data (an
MCP `CallToolResult` as the SDK dumps it, an `isError` result included) or the `error` the call
raised, where it sits in the program (`decision`), and its `key`, the digest of `tool` — and
`ReplayRuntime` answers the same call from that line, without the server. Like every line, a
tool line is scrubbed of every key this process holds before it is written (`cassette_file.line`):
a server that echoes a key (its own token from its environment, a runtime's key) leaves it
masked in the file. The key is the digest of the call as written, so a call whose arguments
held a key matches its recording after masking too.

A server's tool listing is kept the same way, as a call named `tools/list` with no arguments
(`mcp.connect(..., runtime=RecordingRuntime(...))`): given the replay of that cassette, a
connection starts no server at all (`tool_listing` says what a runtime does with a listing).

The tool side asks through one coroutine method on the runtime of the decision whose pick runs
(`model_protocol.tool_runtime()`): `await runtime.tool_result(call, run)`, where `call` is
`{"server", "name", "arguments"}` and `run()` makes the live call and returns its result as JSON
data. A runtime that records runs it and appends the line; a replay answers from the file; one
that does neither (any plain `Runtime`) has no such method and the tool is called live.
"""
from __future__ import annotations

from collections import deque

from ...base.errors import ToolError, ToolNotRecorded
from .cassette_file import CassetteFileError, _plain, ask_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["tool_call", "tool_key", "is_tool_line", "tool_error_record", "recorded_result",
           "ToolAnswers", "ToolNotRecorded"]




def tool_call(server: str, name: str, arguments: dict) -> dict:
    """A live tool call as a cassette line holds it under `tool`."""
    return {"server": str(server), "name": str(name), "arguments": _plain(arguments)}


def tool_key(call: dict) -> str:
    """The digest a tool line is known by: of its `tool` object alone (a replay and the cache
    match on it; model settings never change what a tool returns)."""
    return ask_key({"tool": call})


def is_tool_line(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("tool"), dict) and \
        "request" not in entry


def tool_line_problem(entry: dict) -> str | None:
    """What is wrong with one recorded tool call, or None."""
    call = entry["tool"]
    if not isinstance(call.get("server"), str) or not isinstance(call.get("name"), str) or \
            not isinstance(call.get("arguments"), dict):
        return "is a tool call without a server, a name and an arguments object"
    if "error" in entry:
        return None if isinstance(entry["error"], dict) else "has an error that is not an object"
    if "result" not in entry:
        return "is a tool call with no result and no error"
    return None


def tool_error_record(exc: BaseException) -> dict:
    """A tool call's failure as a line keeps it (a `ToolError` is answered again on replay)."""
    return {"type": type(exc).__name__, "message": str(exc)}


def recorded_result(entry: dict) -> Any:
    """The result a tool line recorded, or its recorded failure raised again: a `ToolError` (the
    server refused the call) as a `ToolError`, so the decision re-asks as it did live."""
    if "error" in entry:
        err = entry["error"]
        message = str(err.get("message") or "the tool call failed")
        if err.get("type") == "ToolError":
            raise ToolError(message)
        raise ToolNotRecorded(f"the recorded call of tool {entry['tool']['name']!r} failed "
                              f"({err.get('type')}: {message}); a replay cannot make it again: "
                              f"record the program again with the server running")
    return entry.get("result")


class ToolAnswers:
    """The tool lines of a cassette, by key, each answered once in recorded order."""

    def __init__(self, entries: list[dict], where: str):
        self.where = where
        self.entries = entries
        self.queues: dict[str, deque] = {}
        for n, entry in enumerate(entries, 1):
            problem = tool_line_problem(entry)
            if problem:
                raise CassetteFileError(f"tool call #{n} of the cassette {where!r} {problem}: "
                                        f"the file was cut or edited by hand; re-record it "
                                        f"with RecordingRuntime(inner_runtime, {where!r})")
            self.queues.setdefault(tool_key(entry["tool"]), deque()).append(entry)

    def take(self, call: dict) -> dict:
        """The recording that answers `call` (taken off its queue)."""
        queue = self.queues.get(tool_key(call))
        if queue:
            return queue.popleft()
        same = [e["tool"] for e in self.entries if e["tool"]["server"] == call["server"]
                and e["tool"]["name"] == call["name"]]
        import json
        asked = json.dumps(call["arguments"], ensure_ascii=False, sort_keys=True)
        if queue is not None:
            why = "every recording of it has been replayed already (use a fresh ReplayRuntime " \
                  "for each run)"
        elif same:
            why = (f"it recorded {call['name']!r} with other arguments, e.g. "
                   f"{json.dumps(same[0]['arguments'], ensure_ascii=False, sort_keys=True)[:200]}")
        else:
            why = f"it recorded no call of {call['name']!r} on server {call['server']!r}"
        raise ToolNotRecorded(
            f"the cassette {self.where!r} cannot answer the call of tool {call['name']!r} on "
            f"MCP server {call['server']!r} with arguments {asked[:200]}: {why}. The program "
            f"calls a tool it did not call when recording: record it again with "
            f"RecordingRuntime (with the server running), or use CachedRuntime to call only "
            f"what is new")
