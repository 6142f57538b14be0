"""Live MCP servers as option sets, on the official `mcp` SDK (the `mcp` extra).

`await mcp.options(session)` turns an open `ClientSession`'s tools into options: the model picks a
tool and fills its arguments, the arguments are validated against the tool's `inputSchema`
before anything reaches the server, and the pick resolves to what the tool returned, losing
nothing the server sent: its `structuredContent` when it declares an output schema, else its
content blocks as plain Python values (a plain text block as `str`; any other block as a dict of
all its fields, annotations and `_meta` included, base64 decoded to `Blob`, bytes that a trace's
JSON keeps as base64). A result the server marks `isError` is a `ToolError`: the attempt fails
with kind `tool_error`, and the server's message goes back to the model in the re-ask
(`max_retries`); a result that breaks the protocol (data that is not base64, a block the SDK
refuses) is a `ServerError` naming the server and the tool. What the server says of a tool
besides its description (its title, its annotations' hints) is in the option's description, so
on the menu and in the trace; a tool that must run as an MCP task (`execution.taskSupport`
"required": the SDK's client cannot make such calls) is left out, with a warning saying why.

`mcp.connect(command_or_url, ...)` starts a stdio server (a command line) or reaches a
streamable-HTTP one (a URL), as `with` or `async with`. The connection's sessions live on an
event loop of their own, in a thread of their own, and every tool call is sent there
(`model_protocol.on_loop`): a sync `decision.make` works the same in a script, in a notebook cell
(inside the kernel's running loop) and in `evaluate`'s worker threads, with no deadlock, and
`timeout_s` bounds each call. Several servers at once: more commands, or `config=` in the form
MCP clients use (`{"mcpServers": {"git": {"command": ..., "args": [...]}}}`); a tool name two
servers share is prefixed with the server's key (`git__status`), and the call still uses the
server's own name. The servers' resources and prompts are there too, for building a
decision's prompt: `conn.resources`, `conn.read_resource(uri)`, `conn.prompts`,
`conn.get_prompt(name, arguments)`; and a connection is an option set itself
(`decision.make(prompt, conn)`).

A decision's runtime that records (`RecordingRuntime`, `CachedRuntime`) keeps each tool's result
in its cassette, and `ReplayRuntime` answers the same call from it without the server
(runtimes/cassette/tool_results.py); with `connect(..., runtime=)` the servers' tool listings are
recorded too (and what it reads of resources and prompts), and a replay starts no server
at all. The options follow the servers: a
`notifications/tools/list_changed` makes the next `.options` read the tools again, and a pick of
a tool removed meanwhile is re-asked, never sent.

This package imports the SDK when it is imported; `import openprogram` never imports it. Its
modules: `tools` (a session's tools as options, a call's result as values), `servers` (the
config form, one server's session and transport), `protocol` (listings read as the protocol
says, a server's failure named), `cache` (the result cache's file) and `connection`
(`connect`, `Connection`).
"""
from __future__ import annotations

from ..base.errors import ServerError, ToolError, UsageError, require

# before the modules, which import the SDK: its absence is named with the extra to install
require("mcp", "mcp", "openprogram.mcp")

from .connection import Connection, connect  # noqa: E402
from .servers import LISTING, START_TIMEOUT_S, read_config  # noqa: E402
from .tools import Blob, block_value, content_value, list_tools, options, tool_options  # noqa: E402

__all__ = ["options", "connect", "Connection", "ServerError", "ToolError", "content_value",
           "block_value", "Blob", "read_config", "tool_options", "list_tools", "LISTING",
           "START_TIMEOUT_S", "UsageError"]
