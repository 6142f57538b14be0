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

This module imports the SDK when it is imported; `import openprogram` never imports it. It is long
because it is the whole bridge to a live server — connecting (stdio or HTTP, several servers, a
config file), its tools as options and their changes, a call's result and errors, resources and
prompts, the secrets a server is given, recording and replay — and each part is used only here.
"""
from __future__ import annotations

import asyncio
import base64
import os
import shlex
import shutil
import tempfile
import threading
import warnings

from .base.errors import (
    OpenProgramError,
    OptionError,
    OptionWarning,
    ServerError,
    ToolError,
    UsageError,
    require,
)
from .base.jsonl import LineFormat
from .base.model_protocol import on_loop, tool_runtime, wrapped
from .base.run_hooks import current_run
from .base.secrets import Secret, env_holds_secret, redacted
from .base.text import cut
from .decision.options import normalize
from .decision.options.tool_definitions import ToolDefinition
from .runtimes.providers.key_redaction import mask_secrets

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

require("mcp", "mcp", "openprogram.mcp")

__all__ = ["options", "connect", "Connection", "ServerError", "ToolError", "content_value",
           "block_value", "Blob", "read_config"]

#: The name a server's tool listing is recorded under (`connect(..., runtime=...)`).
LISTING = "tools/list"
#: Seconds a server gets to start and answer `initialize` and `tools/list`.
START_TIMEOUT_S = 30.0
_STDERR_TAIL = 2000




# ---------------------------------------------------------------------------------------------
# A session's tools as options
# ---------------------------------------------------------------------------------------------


async def list_tools(session: Any) -> list:
    """Every tool of the session, following the listing's pages."""
    tools, cursor = [], None
    for _ in range(1000):  # a server that pages forever is not followed forever
        if cursor is None:
            page = await session.list_tools()
        else:
            import mcp.types as types
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise ServerError("the server's tool listing did not end after 1000 pages")


async def options(session: Any, *, server: str = "server",
                  names: dict[str, str] | None = None) -> list[ToolDefinition]:
    """The tools of an open `mcp.ClientSession` as options (a list, to pass as `options=`).
    Each pick calls `session.call_tool` on the loop the session was opened on (the one running
    now), whichever thread or loop the decision runs in. `server` names the server in errors;
    `names` maps a tool's name to the option name it gets (to tell clashing tools apart)."""
    loop = asyncio.get_running_loop()
    tools = await list_tools(session)
    return tool_options(tools, lambda name, args: _call(session, name, args), loop,
                        server=server, names=names)


def tool_options(tools: Iterable[Any], call: Any, loop: Any, *, server: str,
                 names: dict[str, str] | None = None, mask: Any = None,
                 left_out: dict[str, str] | None = None) -> list[ToolDefinition]:
    """Options for SDK `Tool` objects whose picks run `call(tool_name, arguments)` (a coroutine)
    on `loop`. Each tool's schema is read now, so a tool the library cannot use is named at
    once, with its server. `mask` (JSON data -> JSON data) is applied to everything the server
    answers, before anything else sees it (a connection's tokens). A tool that cannot be called
    from here (one that must run as a task) or whose schema cannot be used (one past the schema
    work budget, say) is left out, with an `OptionWarning` saying why, so one such tool does not
    cost a connection every other tool; `left_out`, when given, receives {option name: why}."""
    out, skipped = [], {}
    for t in tools:
        name = (names or {}).get(t.name, t.name)
        why = unusable(t)
        if why is not None:
            skipped[name] = why
            continue
        definition = tool_definition(t)
        definition["name"] = name
        structured = getattr(t, "output_schema", None) is not None
        option = ToolDefinition(definition, _caller(call, t.name, loop, structured, server,
                                                    mask))
        # what the server says of the tool besides its description (its title, its hints)
        # is part of what the model and the trace are shown
        option.description = described(definition)
        try:
            normalize([option])  # its schema read now, alone: one bad tool leaves the rest
        except OpenProgramError as exc:
            skipped[name] = (f"its inputSchema cannot be used: {exc} (ask the server's authors "
                             f"to fix its schema)")
            continue
        out.append(option)
    if skipped:
        warnings.warn(f"MCP server {server!r}: left out of the options: "
                      f"{'; '.join(f'{n!r} ({why})' for n, why in skipped.items())}",
                      OptionWarning, stacklevel=2)
    if left_out is not None:
        left_out.update(skipped)
    try:
        if out:  # (a server of resources and prompts only lists no tools: not an error here)
            normalize(out)
    except OpenProgramError as exc:
        raise OptionError(f"MCP server {server!r}: {exc} (a tool whose inputSchema this library "
                          f"cannot read: leave it out, or ask the server's authors to fix its "
                          f"schema)") from exc
    return out


def unusable(tool: Any) -> str | None:
    """Why a tool cannot be offered as an option, or None. A tool whose `execution.taskSupport`
    is "required" answers a plain `tools/call` only with an error: it must be called as a task
    (`tools/call` with `task`, then `tasks/get` and `tasks/result`), and the mcp SDK's client
    session has no such call (it has the tasks' wire types only, and refuses the `CreateTaskResult`
    a task-augmented call answers with). Offered, every correct pick of it would fail."""
    execution = getattr(tool, "execution", None)
    if getattr(execution, "task_support", None) == "required":
        return (f"it must be called as a task (execution.taskSupport 'required'), and the mcp "
                f"SDK's client ({_sdk_version()}) cannot make task-augmented calls; call it "
                f"with a client that supports MCP tasks")
    return None


def _sdk_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"mcp {version('mcp')}"
    except PackageNotFoundError:
        return "mcp"


def tool_definition(tool: Any) -> dict:
    """An SDK `Tool` as the MCP tool definition it stands for: name, description, inputSchema,
    and whatever else the server said of it (title, annotations, outputSchema, execution,
    icons, _meta), as MCP spells them."""
    d = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    d["description"] = d.get("description") or ""
    d["inputSchema"] = d.get("inputSchema") or {"type": "object", "properties": {}}
    return d


#: The words for a tool's annotations (MCP's hints about what a call does), as the menu says them.
_HINTS = (("readOnlyHint", "read-only", "not read-only"),
          ("destructiveHint", "destructive", "not destructive"),
          ("idempotentHint", "idempotent", "not idempotent"),
          ("openWorldHint", "open world", "closed world"))


def described(definition: dict) -> str:
    """A tool's description as the menu shows it: its title (when it says more than the name),
    the description, and the hints of its annotations, e.g. "Echo Tool: Echoes back the input
    (server hints: read-only, not destructive, idempotent, closed world)"."""
    annotations = definition.get("annotations") if isinstance(definition.get("annotations"),
                                                              dict) else {}
    title = definition.get("title") or annotations.get("title")
    text = definition.get("description") or ""
    if isinstance(title, str) and title.strip() and title != definition.get("name") and \
            title not in text:
        text = f"{title}: {text}" if text else title
    hints = [yes if annotations[key] else no for key, yes, no in _HINTS
             if isinstance(annotations.get(key), bool)]
    if hints:
        text = f"{text} (server hints: {', '.join(hints)})" if text else \
            f"(server hints: {', '.join(hints)})"
    return text


def _caller(call: Any, tool_name: str, loop: Any, structured: bool,
            server: str = "server", mask: Any = None) -> Any:
    where = f"MCP server {server!r} (tool {tool_name!r})"

    def call_tool(**arguments: Any) -> Any:
        keeper = _result_keeper(tool_runtime())
        run = current_run.get()  # a run records the result too, and a fork may answer it
        if run is not None:
            keeper = run.tool_keeper(keeper)
        if keeper is None:
            return on_loop(_settled(call, tool_name, arguments, structured, mask, where), loop)
        # the decision's runtime records the result (RecordingRuntime, CachedRuntime) or
        # answers it from its recording (ReplayRuntime, without calling the server)
        kept = keeper({"server": server, "name": tool_name, "arguments": dict(arguments)},
                      lambda: on_loop(_settled(call, tool_name, arguments, None, mask, where),
                                        loop))
        return _from_kept(kept, structured, where)
    call_tool.__name__ = tool_name
    return call_tool


def _result_keeper(runtime: Any) -> Any:
    """The `tool_result` method of the runtime (or of the runtime it wraps) that records or
    replays live tools' results, or None."""
    for rt in wrapped(runtime):  # wrappers of wrappers, never a cycle followed forever
        keeper = getattr(rt, "tool_result", None)
        if callable(keeper):
            return keeper
    return None


def _from_kept(kept: Any, structured: bool, where: str) -> Any:
    """The recorded (or replayed) result, JSON data, as the tool's content; still bound to the
    loop the live call needs when it is one."""
    async def value() -> Any:
        from mcp.types import CallToolResult
        return content_value(_validated(CallToolResult, await kept, where), structured,
                             where=where)
    loop = getattr(kept, "loop", None)
    return value() if loop is None else on_loop(value(), loop)


async def _call(session: Any, name: str, arguments: dict) -> Any:
    return await session.call_tool(name, arguments)


async def _settled(call: Any, name: str, arguments: dict, structured: bool | None,
                   mask: Any = None, where: str = "the MCP server") -> Any:
    # the call starts only here, on the session's loop: an awaitable refused before it runs
    # leaves no request half made
    import anyio
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED, CallToolResult
    mask = mask or (lambda value: value)
    try:
        result = await call(name, arguments)
    except MCPError as exc:
        if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:
            raise ServerError(f"the MCP server's connection closed (the server ended?), so "
                              f"{name!r} could not be called: connect again") from exc
        # a JSON-RPC error for this call (invalid params...): the model may correct it
        message = getattr(getattr(exc, 'error', None), 'message', None) or str(exc)
        said = mask(message)
        # a message that held a token is not chained either: a traceback would show it
        raise ToolError(f"the server refused the call of {name!r}: {cut(said, 2000, '')}") \
            from (exc if said == message else None)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
        raise ServerError(f"the MCP server's connection is closed (the server ended?), so "
                          f"{name!r} could not be called: connect again") from exc
    except OpenProgramError:
        raise
    except Exception as exc:
        # the SDK refused the server's answer (a result that breaks the protocol, a request
        # for input this client cannot give): the server's doing, named, never bare
        failure = _server_failure(exc, f"{where}: the call could not be completed", mask)
        raise failure from (exc if _reason(exc) in str(failure) else None)
    data = mask(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    if structured is None:  # to be recorded: the whole result, as JSON data
        return data
    return content_value(CallToolResult.model_validate(data), structured, where=where)


def content_value(result: Any, structured: bool = True, *, where: str = "the MCP tool") -> Any:
    """A `CallToolResult` as plain Python, losing nothing the server sent: `structuredContent`
    when the tool declares an output schema (`structured`) and its text blocks only repeat it
    as JSON (as the specification asks), else the content blocks (one block: its value;
    several: a list; none: None). A text block that is only its text is that `str`; any other
    block is a dict of every field it has, named as the SDK's models name them (`mime_type`,
    `meta` for `_meta`, `annotations`), its base64 data (`data`, a resource's `blob`) decoded
    to `Blob` (bytes, written as its base64 text in a trace's JSON). A result with a `_meta`
    of its own, or a structured one whose blocks say more than its JSON, is the whole result
    as such a dict: `{"content": [...], "structured_content": ..., "meta": {...}}`.
    `isError` raises `ToolError` with the server's text; data that is not base64 is a
    `ServerError` naming `where` (the server and the tool)."""
    if getattr(result, "is_error", False):
        text = " ".join(b.text for b in result.content or () if getattr(b, "type", None) == "text")
        raise ToolError(f"the tool reported an error: {cut(text or '(no message)', 2000, '')}")
    blocks = [block_value(b, where) for b in result.content or ()]
    kept = getattr(result, "structured_content", None)
    meta = getattr(result, "meta", None)
    if structured and kept is not None and meta is None and \
            all(isinstance(b, str) for b in blocks) and _repeats(blocks, kept):
        return kept
    if meta is not None or kept is not None:  # (structure a tool did not declare: kept too)
        whole = {"content": blocks}
        if kept is not None:
            whole["structured_content"] = kept
        if meta is not None:
            whole["meta"] = meta
        return whole
    if not blocks:
        return None
    return blocks[0] if len(blocks) == 1 else blocks


def _repeats(texts: list, structured: Any) -> bool:
    """Whether plain text blocks say nothing but the structured content: it written as JSON
    (what the specification asks of a structured tool), or, for the `{"result": value}` the
    SDK's servers wrap a value that is not an object in, the value (a list item by item)."""
    if not texts or len(texts) == 1 and _says(texts[0], structured):
        return True
    if isinstance(structured, dict) and set(structured) == {"result"}:
        value = structured["result"]
        if len(texts) == 1 and _says(texts[0], value):
            return True
        return isinstance(value, list) and len(value) == len(texts) and \
            all(map(_says, texts, value))
    return False


def _says(text: Any, value: Any) -> bool:
    """Whether a text block's text is `value` (a string as itself, anything else as JSON)."""
    if not isinstance(text, str):
        return False
    if isinstance(value, str):
        return text == value
    import json
    try:
        return json.loads(text) == value
    except (ValueError, RecursionError):  # not JSON, or nested past what json reads
        return False


class Blob(bytes):
    """Bytes an MCP server sent as base64 (an image, audio, a resource's blob): equal to those
    bytes and used as them; in JSON (a trace's `to_dict()`, a journal) it is its base64 text,
    so a saved trace keeps it whole instead of a cut repr."""

    def model_dump(self, mode: str = "python", **_: Any) -> Any:
        # the JSON form `base.json_form` asks objects for (as it asks pydantic models)
        return base64.b64encode(self).decode("ascii") if mode == "json" else bytes(self)


def _decoded(data: Any, what: str, where: str) -> Blob:
    """The bytes of base64 text a server sent; text that is not base64 is the server's fault,
    named, never a bare `binascii.Error`."""
    try:
        if not isinstance(data, str):
            raise ValueError(f"got {type(data).__name__}, not text")
        # whitespace is allowed (base64 wrapped in lines); any other character is an error
        return Blob(base64.b64decode("".join(data.split()), validate=True))
    except ValueError as exc:  # binascii.Error is one
        raise ServerError(f"{where}: {what} is not valid base64 ({exc}; it begins "
                          f"{cut(repr(data), 60, '...')}), so the result cannot be read. The "
                          f"server is at fault: report it to its authors") from None


def block_value(block: Any, where: str = "the MCP server") -> Any:
    """One content block (a tool's result, a prompt's message) as plain Python: a text block
    with nothing but its text is that `str`; any other block a dict of all its fields (the
    SDK's names), base64 decoded to `Blob`."""
    kind = getattr(block, "type", None)
    if not callable(getattr(block, "model_dump", None)):
        return block
    d = block.model_dump(mode="json", exclude_none=True)
    if kind == "text" and set(d) <= {"type", "text"}:
        return d["text"]
    if kind in ("image", "audio") and "data" in d:
        d["data"] = _decoded(d["data"], f"the data of its {kind} block", where)
    if kind == "resource" and isinstance(d.get("resource"), dict) and "blob" in d["resource"]:
        d["resource"]["blob"] = _decoded(d["resource"]["blob"], "the blob of its embedded resource",
                                         where)
    return d


# ---------------------------------------------------------------------------------------------
# Connections: servers on a loop of their own
# ---------------------------------------------------------------------------------------------


def read_config(config: Any) -> dict[str, dict]:
    """`{"mcpServers": {key: {"command", "args", "env", "cwd"} | {"url", "headers"}}}` (a dict,
    or the path of a JSON file holding one) as {key: server spec}."""
    import json
    where = "the MCP config"
    if isinstance(config, (str, os.PathLike)):
        where = f"MCP config file {os.fspath(config)!r}"
        try:
            with open(config, encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{where} cannot be read: {exc}") from None
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise UsageError(f"{where} must hold {{'mcpServers': {{name: {{'command': ..., "
                         f"'args': [...]}}}}}} with at least one server")
    out = {}
    for key, spec in servers.items():
        if not isinstance(spec, dict) or not (isinstance(spec.get("command"), str)
                                              or isinstance(spec.get("url"), str)):
            raise UsageError(f"{where}: server {key!r} needs a 'command' (with 'args') or a "
                             f"'url', got {cut(repr(spec), 80, '')}")
        if "headers" in spec:
            _check_headers(spec["headers"], f"{where}: server {key!r}")
        out[key] = spec
    return out


def _spec(command_or_url: Any) -> tuple[str, dict]:
    """(key, spec) for a command line (a string or a list) or a URL."""
    if isinstance(command_or_url, str) and command_or_url.startswith(("http://", "https://")):
        from urllib.parse import urlsplit
        return urlsplit(command_or_url).hostname or "server", {"url": command_or_url}
    if isinstance(command_or_url, str):
        argv = shlex.split(command_or_url)
    elif isinstance(command_or_url, (list, tuple)) and all(isinstance(a, str)
                                                           for a in command_or_url):
        argv = list(command_or_url)
    else:
        raise UsageError(f"connect() takes a command line (a string or a list of strings) or an "
                         f"http(s) URL, got {type(command_or_url).__name__}")
    if not argv:
        raise UsageError("connect(): the command line is empty")
    return os.path.basename(argv[0]), {"command": argv[0], "args": argv[1:]}


def _check_headers(headers: Any, where: str) -> None:
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in headers.items()):
        # the values are not shown: they are likely tokens
        raise UsageError(f"{where}: headers must be a dict of header names to strings, e.g. "
                         f"{{'Authorization': 'Bearer ...'}}, got "
                         f"{type(headers).__name__}")


class _Server:
    """One server: its session lives in one task of the connection's loop, from start to close
    (the SDK's transports are anyio task groups, which must be left by the task that entered
    them)."""

    def __init__(self, key: str, spec: dict, mask: Any = None):
        spec = dict(spec)
        # HTTP headers sent to a URL server; a value whose name says it is a credential
        # (Authorization, X-API-Key, Cookie...) is held as a secret that never shows itself
        self.headers = {k: (Secret(v, _credential(v)) if env_holds_secret(k, v) else v)
                        for k, v in (spec.pop("headers", None) or {}).items()}
        self.key, self.spec = key, spec
        self.mask = mask or (lambda value: value)
        self.session: Any = None
        self.tools: list = []
        self.task: Any = None
        self.stop: Any = None
        self.stderr: Any = None
        # notifications/tools/list_changed received, and how many of them `tools` has seen
        self.changed = self.listed = 0
        self.replayed = False  # its tools came from a recording: it was never started

    async def on_message(self, message: Any) -> None:
        import mcp.types as types
        if isinstance(message, types.ToolListChangedNotification):
            self.changed += 1

    async def relist(self) -> None:
        """Read the server's tools again (after a tools/list_changed, or when asked); a
        server whose tools came from a recording keeps them."""
        if self.replayed:
            return
        if self.session is None:
            raise ServerError(f"{self.describe()} is closed (or ended): open the connection "
                              f"again")
        seen = self.changed
        self.tools = self.masked_tools(await list_tools(self.session))
        self.listed = seen

    def masked_tools(self, tools: list) -> list:
        """The tools as listed, with the connection's tokens masked in their descriptions."""
        from mcp.types import Tool
        out = []
        for t in tools:
            data = t.model_dump(mode="json", by_alias=True, exclude_none=True)
            masked = self.mask(data)
            out.append(t if masked == data else Tool.model_validate(masked))
        return out

    def describe(self) -> str:
        if "url" in self.spec:
            return f"MCP server {self.key!r} at {self.spec['url']}"
        line = shlex.join([self.spec["command"], *map(str, self.spec.get("args") or ())])
        return f"MCP server {self.key!r} ({line})"

    async def run(self, ready: asyncio.Future) -> None:
        from mcp import ClientSession
        self.stop = asyncio.Event()
        try:
            async with self._transport() as streams:
                async with ClientSession(streams[0], streams[1],
                                         message_handler=self.on_message) as session:
                    await session.initialize()
                    self.session = session
                    self.tools = self.masked_tools(await list_tools(session))
                    ready.set_result(None)
                    await self.stop.wait()
        except BaseException as exc:
            if not ready.done():
                # cancelled (a start that timed out) or failed: starting ends here. A cancelled
                # future is never logged as an exception nobody retrieved.
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
                return
            raise
        finally:
            self.session = None

    def _transport(self) -> Any:
        if "url" in self.spec:
            from mcp.client.streamable_http import streamable_http_client
            if not self.headers:
                return streamable_http_client(self.spec["url"])
            return _http_with_headers(self.spec["url"], {
                k: v.reveal() if isinstance(v, Secret) else v for k, v in self.headers.items()})
        from mcp.client.stdio import StdioServerParameters, stdio_client
        command = self.spec["command"]
        if shutil.which(command, path=(self.spec.get("env") or {}).get("PATH")) is None \
                and not os.path.isfile(command):
            # a server installed in this Python's environment, whose bin/ is not on PATH (a
            # notebook kernel started without activating its venv)
            import sys
            beside = shutil.which(command, path=os.path.dirname(sys.executable))
            if beside is not None and os.sep not in command:
                command = beside
        if shutil.which(command, path=(self.spec.get("env") or {}).get("PATH")) is None \
                and not os.path.isfile(command):
            raise ServerError(f"{self.describe()}: command {command!r} not found on PATH: "
                              f"install the server (e.g. pip install mcp-server-time) or give "
                              f"its full path")
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        params = StdioServerParameters(command=command,
                                       args=[str(a) for a in self.spec.get("args") or ()],
                                       env=self.spec.get("env"), cwd=self.spec.get("cwd"))
        return stdio_client(params, errlog=self.stderr)

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.seek(0)
            text = self.stderr.read()[-_STDERR_TAIL:].strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {self.mask(text)!r}" if text else ""


def _http_with_headers(url: str, headers: dict[str, str]) -> Any:
    """The SDK's streamable-HTTP transport on a client that sends `headers` with every request
    (the SDK's own way: its client factory, with the MCP timeouts, given to the transport)."""
    import contextlib

    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    @contextlib.asynccontextmanager
    async def transport() -> Any:
        # a client given to the transport is the caller's to close
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams
    return transport()


class Connection:
    """Live MCP servers and their tools as an option set: `.options` (pass it as `options=`),
    `.tools` (the SDK's `Tool` objects), `.call(name, arguments)`, and `.calls`, every tool call
    made through it as (option name, arguments). Open with `with` / `async with`, or
    `open()` / `close()`.

    The options follow the servers: after a server says its tools changed
    (`notifications/tools/list_changed`), the next `.options` reads them again (`refresh()`
    does so when asked). A decision already running keeps the menu it showed; a pick of a tool
    the server has removed since is refused before any call, as a `ToolError` naming the tools
    the server has now, and re-asked like any rejected pick."""

    def __init__(self, servers: dict[str, dict], *, timeout_s: float = START_TIMEOUT_S,
                 cache: Any = None, runtime: Any = None):
        if not servers:
            raise UsageError("connect() needs a server: a command line, a URL or config=")
        self.servers = [_Server(k, s, self._mask) for k, s in servers.items()]
        # a token given to a server in its environment or in a header is masked in every file
        # written from now on (a cassette, a cache, a journal), and in everything its server
        # answers (results, errors, listings), so neither the program, its traces nor its
        # errors hold it even when the server echoes it back
        self._secrets = [Secret(v) for spec in servers.values()
                         for k, v in (spec.get("env") or {}).items() if env_holds_secret(k, v)]
        self._secrets += [v for s in self.servers for v in s.headers.values()
                          if isinstance(v, Secret)]
        self.timeout_s = timeout_s
        self.runtime = runtime
        self.cache = _ResultCache(cache) if cache is not None else None
        self._options: list[ToolDefinition] = []
        self._left_out: dict[str, str] = {}
        self._tools: list = []
        self.calls: list[tuple[str, dict]] = []
        self._by_option: dict[str, tuple[_Server, str]] = {}
        self._loop: Any = None
        self._thread: Any = None

    def _mask(self, value: Any) -> Any:
        """`value` (JSON data) with every piece of this connection's tokens masked."""
        secrets = tuple(s.masked for s in self._secrets)
        if not secrets:
            return value
        return redacted(value, lambda text: mask_secrets(text, secrets))

    # -- opening and closing --------------------------------------------------------------------
    def open(self) -> Connection:
        if self._loop is not None:
            raise UsageError("this MCP connection is open already")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="openprogram-mcp")
        self._thread.start()
        try:
            for server in self.servers:
                self._listed(server)
            self._build_options()
        except BaseException:
            self.close()
            raise
        return self

    def _listed(self, server: _Server) -> None:
        """Start `server` and read its tools; with `runtime=` a runtime that records or replays
        tool calls, through it: a recording keeps the listing, and a replay gives it back
        without starting the server at all."""
        keeper = _result_keeper(self.runtime)
        # a cache starts its servers live: a listing it kept would leave no server for the
        # calls it has not kept
        if keeper is None or getattr(keeper.__self__, "tool_listing", None) is None:
            self._start(server)
            return

        async def started() -> dict:
            await asyncio.to_thread(self._start, server)
            return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                              for t in server.tools]}
        from mcp.types import Tool

        from .base.model_protocol import run_blocking
        listing = run_blocking(keeper({"server": server.key, "name": LISTING, "arguments": {}},
                                      started))
        if server.task is None:  # answered from a recording: no server runs
            server.replayed = True
        server.tools = [Tool.model_validate(t) for t in (listing or {}).get("tools") or []]

    def _start(self, server: _Server) -> None:
        import concurrent.futures

        async def start() -> None:
            ready = asyncio.get_running_loop().create_future()
            server.task = asyncio.ensure_future(server.run(ready))
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.timeout_s)
            except asyncio.TimeoutError:
                server.task.cancel()
                await asyncio.gather(server.task, return_exceptions=True)
                raise
        try:
            asyncio.run_coroutine_threadsafe(start(), self._loop).result()
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError):
            raise ServerError(f"{server.describe()} did not answer initialize and tools/list "
                              f"within {self.timeout_s:g} s; it was ended. Check that the "
                              f"command starts an MCP server on stdio (or raise timeout_s)"
                              f"{server.stderr_tail()}") from None
        except ServerError:
            raise
        except BaseException as exc:
            reason = self._mask(_reason(exc))
            raise ServerError(f"{server.describe()} could not be started: "
                              f"{reason}. Run the command in a terminal to see why"
                              f"{server.stderr_tail()}") \
                from (exc if reason == _reason(exc) else None)

    @property
    def options(self) -> list[ToolDefinition]:
        """The servers' tools as options, read again when a server said they changed."""
        if self._loop is not None and any(s.changed != s.listed for s in self.servers):
            self.refresh()
        return self._options

    @property
    def tools(self) -> list:
        """The servers' tools as the SDK's `Tool` objects (read again as `options` is)."""
        self.options  # noqa: B018 - read for its refresh
        return self._tools

    @property
    def left_out(self) -> dict[str, str]:
        """The tools the servers list that are not options, {option name: why} (a tool that
        must run as an MCP task, which this client cannot call)."""
        self.options  # noqa: B018 - read for its refresh
        return dict(self._left_out)

    def __option_set__(self) -> list[ToolDefinition]:
        # `decision.make(prompt, conn)`: the connection stands for its options
        return self.options

    # -- resources and prompts ------------------------------------------------------------------
    @property
    def resources(self) -> list:
        """Every server's resources (the SDK's `Resource` objects: `uri`, `name`, `mime_type`,
        `description`...), read now; a server without resources adds none."""
        return [r for s in self.servers for r in self._listing(s, "resources")]

    @property
    def resource_templates(self) -> list:
        """Every server's resource templates (the SDK's `ResourceTemplate`: `uri_template`...);
        `read_resource` takes a URI made from one."""
        return [r for s in self.servers for r in self._listing(s, "resource_templates")]

    @property
    def prompts(self) -> list:
        """Every server's prompts (the SDK's `Prompt` objects: `name`, `description`,
        `arguments`), read now; a server without prompts adds none."""
        return [p for s in self.servers for p in self._listing(s, "prompts")]

    def read_resource(self, uri: str, *, server: str | None = None) -> Any:
        """The content of the resource at `uri`: its text as a `str`, its binary content as
        `Blob` (bytes), several contents as a list of those. `server` (a server's key) says
        which server to ask when several are connected and more than one, or none, lists
        `uri` (a URI made from a template)."""
        if not isinstance(uri, str) or not uri:
            raise UsageError(f"read_resource() takes a resource's URI (a string), got "
                             f"{cut(repr(uri), 80, '')}")
        s = self._server_for(server, "resources", lambda r: r.uri == uri, f"resource {uri!r}")
        data = self._ask(s, "resources/read", {"uri": uri},
                         lambda: s.session.read_resource(uri))
        from mcp.types import ReadResourceResult
        where = f"{s.describe()} (resource {uri!r})"
        values = [_resource_value(c, where) for c in _validated(ReadResourceResult, data,
                                                                where).contents]
        return values[0] if len(values) == 1 else values

    def get_prompt(self, name: str, arguments: dict[str, str] | None = None, *,
                   server: str | None = None) -> list[dict]:
        """The messages of the server's prompt `name` filled with `arguments` (strings), as
        `[{"role": "user" | "assistant", "content": ...}]`, each content as a tool result's
        block is (a `str` for plain text): what a decision's prompt may be built from."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"get_prompt() takes a prompt's name (a string), got "
                             f"{cut(repr(name), 80, '')}")
        if arguments is not None and not (isinstance(arguments, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in arguments.items())):
            raise UsageError(f"get_prompt({name!r}, arguments): MCP prompt arguments are "
                             f"strings, a dict of argument names to strings, got "
                             f"{cut(repr(arguments), 80, '')}")
        s = self._server_for(server, "prompts", lambda p: p.name == name, f"prompt {name!r}")
        data = self._ask(s, "prompts/get", {"name": name, "arguments": dict(arguments or {})},
                         lambda: s.session.get_prompt(name, arguments))
        from mcp.types import GetPromptResult
        where = f"{s.describe()} (prompt {name!r})"
        return [{"role": m.role, "content": block_value(m.content, where)}
                for m in _validated(GetPromptResult, data, where).messages]

    def _server_for(self, key: str | None, kind: str, has: Any, what: str) -> _Server:
        """The server to ask for `what`: the one named `key`, the only one, or the only one
        that lists it."""
        if key is not None:
            for s in self.servers:
                if s.key == key:
                    return s
            raise UsageError(f"no server {key!r} on this connection; its servers are "
                             f"{', '.join(s.key for s in self.servers)}")
        if len(self.servers) == 1:
            return self.servers[0]
        listing = [s for s in self.servers if any(has(x) for x in self._listing(s, kind))]
        if len(listing) == 1:
            return listing[0]
        keys = ", ".join(s.key for s in (listing or self.servers))
        raise UsageError(f"{'several' if listing else 'none'} of this connection's servers "
                         f"list the {what}: say which server to ask with server= (one of "
                         f"{keys})")

    def _listing(self, server: _Server, kind: str) -> list:
        """One server's resources, resource templates or prompts (the SDK's objects), every
        page, masked; none when the server does not offer them."""
        import mcp.types as types
        method, lister, field, model, capability = _LISTINGS[kind]

        async def every_page() -> dict:
            if getattr(server.session.server_capabilities, capability, None) is None:
                return {"items": []}  # the server says it has none: not asked
            items, cursor = [], None
            for _ in range(1000):  # a server that pages forever is not followed forever
                page = await getattr(server.session, lister)(
                    params=None if cursor is None else types.PaginatedRequestParams(cursor=cursor))
                items += [x.model_dump(mode="json", by_alias=True, exclude_none=True)
                          for x in getattr(page, field)]
                cursor = page.next_cursor
                if cursor is None:
                    return {"items": items}
            raise ServerError(f"{server.describe()}: its {method} did not end after 1000 pages")
        data = self._ask(server, method, {}, every_page, whole=True)
        items = data.get("items") if isinstance(data, dict) else None
        where = f"{server.describe()} ({method})"
        return [_validated(getattr(types, model), x, where) for x in items or ()]

    def _ask(self, server: _Server, method: str, arguments: dict, request: Any,
             whole: bool = False) -> Any:
        """One request to `server` that is not a tool call, as masked JSON data: through the
        connection's `runtime=` when it records or replays (a replayed connection answers from
        its recording, with no server), else live, within `timeout_s`. `request()` makes the
        SDK's request (or, `whole`, returns the JSON data itself) on the connection's loop."""
        if self._loop is None:
            raise UsageError("this MCP connection is closed: open it again to read its "
                             "resources and prompts")
        import json
        import time

        from .base.model_protocol import run_blocking
        asked = self._mask(cut(json.dumps(arguments, ensure_ascii=False), 200, "...")) \
            if arguments else ""

        async def live() -> Any:
            if server.replayed:
                raise ServerError(f"{server.describe()} was not started: its tools were read "
                                  f"from a recording, which did not record this {method}; "
                                  f"connect without runtime= to ask the live server")
            if server.session is None:
                raise ServerError(f"{server.describe()} is closed (or ended): open the "
                                  f"connection again")
            try:
                answer = await request()
            except OpenProgramError:
                raise
            except Exception as exc:
                raise _server_failure(exc, f"{server.describe()}, {method} {asked}".rstrip(),
                                      self._mask) from None
            data = answer if whole else answer.model_dump(mode="json", by_alias=True,
                                                          exclude_none=True)
            return self._mask(data)
        keeper = _result_keeper(self.runtime)
        deadline = time.monotonic() + self.timeout_s
        if keeper is None or getattr(keeper.__self__, "tool_listing", None) is None:
            return run_blocking(on_loop(live(), self._loop), deadline)
        return run_blocking(keeper({"server": server.key, "name": method,
                                    "arguments": arguments},
                                   lambda: on_loop(live(), self._loop)), deadline)

    def refresh(self) -> Connection:
        """Read every server's tools again and rebuild the options (a server that added,
        removed or changed a tool). Nothing changes if a tool can no longer be read."""
        if self._loop is None:
            raise UsageError("this MCP connection is closed: open it again to read its tools")

        async def relist() -> None:
            for s in self.servers:
                try:
                    await s.relist()
                except OpenProgramError:
                    raise
                except Exception as exc:  # a listing that breaks the protocol: named
                    raise _server_failure(exc, f"{s.describe()}, tools/list", self._mask) \
                        from None
        asyncio.run_coroutine_threadsafe(relist(), self._loop).result(self.timeout_s)
        self._build_options()
        return self

    def _build_options(self) -> None:
        options, tools, by_option, left_out = [], [], {}, {}
        seen: dict[str, int] = {}
        for s in self.servers:
            for t in s.tools:
                seen[t.name] = seen.get(t.name, 0) + 1
        for s in self.servers:
            names = {t.name: (f"{s.key}__{t.name}" if seen[t.name] > 1 else t.name)
                     for t in s.tools}
            for t in s.tools:
                by_option[names[t.name]] = (s, t.name)
            options += tool_options(s.tools, self._caller_for(s), self._loop,
                                    server=s.key, names=names, mask=self._mask,
                                    left_out=left_out)
            tools += s.tools
        # replaced whole, only once every server's tools were read: never half a listing
        self._options, self._tools, self._by_option = options, tools, by_option
        self._left_out = left_out

    def _caller_for(self, server: _Server) -> Any:
        async def call(name: str, arguments: dict) -> Any:
            if server.replayed:
                raise ServerError(f"{server.describe()} was not started: its tools were read "
                                  f"from a recording (connect(..., runtime=ReplayRuntime(...))), "
                                  f"so only that replay can answer its calls; connect without "
                                  f"runtime= to call the live server")
            if server.session is None:
                raise ServerError(f"{server.describe()} is closed (or ended): open the "
                                  f"connection again")
            if server.changed != server.listed:  # the server's tools changed since the menu
                await server.relist()
            if all(t.name != name for t in server.tools):
                raise ToolError(f"the tool {name!r} was removed from {server.describe()} "
                                f"while this run was in progress (it said its tools changed); "
                                f"pick one of the tools it has now: "
                                f"{', '.join(t.name for t in server.tools) or '(none)'}")
            key = None
            if self.cache is not None:
                key = self.cache.key(server.key, name, arguments)
                kept = self.cache.get(key)
                if kept is not None:  # answered from the cache: the server is not called
                    return kept
            self.calls.append((next((o for o, (s, n) in self._by_option.items()
                                     if s is server and n == name), name), dict(arguments)))
            result = await server.session.call_tool(name, arguments)
            if self._secrets:  # masked before the cache file keeps it, too
                from mcp.types import CallToolResult
                result = CallToolResult.model_validate(self._mask(result.model_dump(
                    mode="json", by_alias=True, exclude_none=True)))
            if key is not None and self.cache is not None:
                self.cache.put(key, result)
            return result
        return call

    def close(self) -> None:
        """End every server (its child process too) and the connection's loop."""
        loop, self._loop = self._loop, None
        if loop is None:
            return

        async def stop() -> None:
            for s in self.servers:
                if s.stop is not None:
                    s.stop.set()
            tasks = [s.task for s in self.servers if s.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(stop(), loop).result(self.timeout_s)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join()
            loop.close()
            for s in self.servers:
                if s.stderr is not None:
                    s.stderr.close()

    def __enter__(self) -> Connection:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> Connection:
        # started from a thread, so the caller's loop keeps running while the servers start
        return await asyncio.to_thread(self.open)

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.close)

    # -- use ------------------------------------------------------------------------------------
    def call(self, name: str, arguments: dict | None = None) -> Any:
        """Call a tool by its option name, outside a decision (sync)."""
        for o in self.options:
            if o.name == name:
                from .base.model_protocol import run_blocking
                return run_blocking(o.fn(**(arguments or {})))
        if name in self._left_out:
            raise UsageError(f"the tool {name!r} is left out of this connection's options: "
                             f"{self._left_out[name]}")
        raise UsageError(f"no tool {name!r} on this connection; its tools are "
                         f"{', '.join(o.name for o in self.options)}")

    def __iter__(self):
        return iter(self.options)

    def __len__(self) -> int:
        return len(self.options)

    def __repr__(self) -> str:
        state = "open" if self._loop is not None else "closed"
        left = f" ({len(self._left_out)} left out: see .left_out)" if self._left_out else ""
        return (f"<mcp.Connection {', '.join(s.key for s in self.servers)}: "
                f"{len(self._options)} tools{left}, {state}>")


#: What `Connection` lists beside tools: kind -> (method, the session's method, the result's
#: field, the SDK's model of one item, the server capability that says it has them).
_LISTINGS = {
    "resources": ("resources/list", "list_resources", "resources", "Resource", "resources"),
    "resource_templates": ("resources/templates/list", "list_resource_templates",
                           "resource_templates", "ResourceTemplate", "resources"),
    "prompts": ("prompts/list", "list_prompts", "prompts", "Prompt", "prompts"),
}


def _validated(model: Any, data: Any, where: str) -> Any:
    """`data` (JSON data a server sent, or its recording) as the SDK's `model`; data that does
    not fit is the server's fault, named, never a bare pydantic error."""
    import pydantic
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ServerError(f"{where}: {_off_protocol(exc)}") from None


def _off_protocol(exc: Any) -> str:
    """A pydantic error about what a server sent, in a line: how many problems, the first."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    at = ".".join(map(str, first.get("loc") or ())) or "(the whole of it)"
    return (f"what the server sent does not follow the MCP protocol ({len(errors)} problem(s) "
            f"for the SDK's {exc.title}; the first at {at}: "
            f"{cut(str(first.get('msg') or exc), 200, '')}). The server is at fault: report it "
            f"to its authors")


def _resource_value(contents: Any, where: str) -> Any:
    """One content of a read resource: its text, or its blob decoded."""
    if getattr(contents, "blob", None) is not None:
        return _decoded(contents.blob, f"the blob of {contents.uri}", where)
    return contents.text


def _server_failure(exc: BaseException, what: str, mask: Any) -> ServerError:
    """A failed request to a server as a `ServerError` saying `what` and why (the server's own
    message for a JSON-RPC error), with the connection's tokens masked."""
    import anyio
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED
    if isinstance(exc, MCPError):
        if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:
            return ServerError(f"{what}: the connection closed (the server ended?): connect "
                               f"again")
        said = getattr(getattr(exc, "error", None), "message", None) or str(exc)
        return ServerError(f"{what}: the server answered with an error: "
                           f"{cut(mask(said), 2000, '')}")
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError,
                        anyio.EndOfStream)):
        return ServerError(f"{what}: the connection is closed (the server ended?): connect "
                           f"again")
    import pydantic
    if isinstance(exc, pydantic.ValidationError):
        return ServerError(f"{what}: {mask(_off_protocol(exc))}")
    return ServerError(f"{what}: {mask(_reason(exc))}")


class _ResultCache:
    """Tool results kept in a JSON file by (server, tool, arguments), so a notebook run again
    does not call its servers again: `connect(..., cache="tools.json")`. The SDK's
    CallToolResult is kept whole (an error result too) and read back as one. The file is one
    JSON object, written whole on one line by the shared writer (base/jsonl.py), so every secret
    of this process is masked in it — a result, or the arguments of its key, that holds a key a
    server echoed is kept in memory only — and replaced at once, never half written. Delete the
    file (or a key of it) to call the server again."""

    _FORMAT = LineFormat()

    def __init__(self, path: Any):
        import json
        self.path = os.fspath(path)
        self.lock = threading.Lock()
        try:
            with open(self.path, encoding="utf-8") as f:
                self.entries = json.load(f)
        except FileNotFoundError:
            self.entries = {}
        except (OSError, ValueError) as exc:
            raise UsageError(f"the MCP result cache {self.path!r} cannot be read ({exc}): "
                             f"delete it, or give another path") from None
        if not isinstance(self.entries, dict):
            raise UsageError(f"the MCP result cache {self.path!r} is not a JSON object: "
                             f"delete it, or give another path")

    @staticmethod
    def key(server: str, tool: str, arguments: dict) -> str:
        import json
        return json.dumps([server, tool, arguments], sort_keys=True, ensure_ascii=False)

    def get(self, key: str) -> Any:
        kept = self.entries.get(key)
        if kept is None:
            return None
        from mcp.types import CallToolResult
        return CallToolResult.model_validate(kept)

    def put(self, key: str, result: Any) -> None:
        with self.lock:
            self.entries[key] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            tmp = f"{self.path}.tmp"
            with open(tmp, "wb") as f:
                f.write(self._FORMAT.line(self.entries))
            os.replace(tmp, self.path)  # never a half-written cache


def _credential(header: str) -> str:
    """What is masked of a credential header's value (`Bearer <token>`): the credential after
    its scheme; masking the whole value would also mask any eight characters of it, "Bearer t"
    among them, in text that only talks about bearer tokens."""
    scheme, _, rest = header.partition(" ")
    rest = rest.strip()
    plain = scheme.isascii() and scheme.replace("-", "").isalnum() and len(rest) >= 8
    return rest if plain else header


def _reason(exc: BaseException) -> str:
    """The first real error inside an exception group (anyio's task groups wrap them)."""
    groups = getattr(__import__("builtins"), "BaseExceptionGroup", ())  # Python 3.11+
    while groups and isinstance(exc, groups) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {cut(str(exc) or '(no message)', 500, '')}"


def connect(*commands_or_urls: Any, config: Any = None, name: str | None = None,
            env: dict[str, str] | None = None, cwd: str | None = None,
            headers: dict[str, str] | None = None,
            timeout_s: float = START_TIMEOUT_S, cache: Any = None,
            runtime: Any = None) -> Connection:
    """Live MCP servers as an option set, for `with` or `async with`:

        with mcp.connect("mcp-server-time --local-timezone Etc/UTC") as time_tools:
            decision.make("What time is it in Tokyo?", time_tools.options, runtime=rt)

    Each argument is a command line (a string, split like a shell's, or a list) that starts a
    stdio server, or an http(s) URL of a streamable-HTTP server; `config=` adds the servers of
    an MCP client config (a dict or a JSON file). `name` is the key of a single server (by
    default the command's file name or the URL's host); `env` and `cwd` go to every command,
    `headers` (`{"Authorization": "Bearer ..."}`) with every request to every URL (a config's
    server takes its own `"headers"`). A token given in `env` or `headers` (a name holding KEY,
    TOKEN, SECRET, AUTH, COOKIE...) is masked in every file written while the connection lives,
    and in all its servers answer: a result, an error or a listing that echoes it shows
    `[redacted]`, to the program, its traces and its errors alike.
    A server that does not start, or does not answer within `timeout_s`, is a ServerError
    naming it; nothing is left running. `cache="tools.json"` keeps every tool result in that
    file and answers the same call (server, tool, arguments) from it later: a notebook run
    again makes no server calls for what it asked before.

    `runtime=` a RecordingRuntime (or CachedRuntime) keeps each server's tool listing in its
    cassette, beside the tool results its decisions record; given the ReplayRuntime of that
    cassette, no server is started: the tools come from the recording and every call is
    answered from it, so a recorded notebook runs where the server is not installed."""
    servers: dict[str, dict] = {}
    if headers is not None:
        _check_headers(headers, "connect()")
        if not any(isinstance(c, str) and c.startswith(("http://", "https://"))
                   for c in commands_or_urls):
            raise UsageError("connect(headers=...) is sent to streamable-HTTP servers, and "
                             "none is given: pass the server's http(s) URL (a stdio server "
                             "takes env= instead; a config's server its own \"headers\")")
    for c in commands_or_urls:
        key, spec = _spec(c)
        if name is not None and len(commands_or_urls) == 1:
            key = name
        if env is not None and "command" in spec:
            spec["env"] = dict(env)
        if cwd is not None and "command" in spec:
            spec["cwd"] = cwd
        if headers is not None and "url" in spec:
            spec["headers"] = dict(headers)
        base, n = key, 2
        while key in servers:
            key, n = f"{base}{n}", n + 1
        servers[key] = spec
    if config is not None:
        for key, spec in read_config(config).items():
            if key in servers:
                raise UsageError(f"server key {key!r} is given twice (a command and config=)")
            servers[key] = spec
    return Connection(servers, timeout_s=timeout_s, cache=cache, runtime=runtime)
