"""A session's tools as options, and what a call of one returns: each tool's definition
(its title and hints in the description), the caller that sends a pick to the server,
and the result as plain Python values losing nothing the server sent (`content_value`,
`block_value`, `Blob`).
"""
from __future__ import annotations

import asyncio
import base64
import warnings

from ..base.errors import (
    OpenProgramError,
    OptionError,
    OptionWarning,
    ServerError,
    ToolError,
)
from ..base.model_protocol import on_loop, tool_runtime, wrapped
from ..base.run_hooks import current_run
from ..base.text import cut
from ..decision.options import normalize
from ..decision.options.tool_definitions import ToolDefinition
from .protocol import _reason, _server_failure, _validated

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

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


def _resource_value(contents: Any, where: str) -> Any:
    """One content of a read resource: its text, or its blob decoded."""
    if getattr(contents, "blob", None) is not None:
        return _decoded(contents.blob, f"the blob of {contents.uri}", where)
    return contents.text
