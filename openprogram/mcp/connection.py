"""`connect` and `Connection`: live MCP servers on an event loop of their own, their
tools as an option set that follows the servers' changes, their resources and
prompts, each call bounded by `timeout_s`, recorded and replayed through a
decision's runtime.
"""
from __future__ import annotations

import asyncio
import threading

from ..base.errors import (
    OpenProgramError,
    ServerError,
    ToolError,
    UsageError,
)
from ..base.model_protocol import on_loop
from ..base.secrets import Secret, env_holds_secret, redacted
from ..base.text import cut
from ..decision.options.tool_definitions import ToolDefinition
from ..runtimes.providers.key_redaction import mask_secrets
from .cache import _ResultCache
from .protocol import _LISTINGS, _reason, _server_failure, _validated
from .servers import LISTING, START_TIMEOUT_S, _check_headers, _Server, _spec, read_config
from .tools import _resource_value, _result_keeper, block_value, tool_options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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

        from ..base.model_protocol import run_blocking
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

        from ..base.model_protocol import run_blocking
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
                from ..base.model_protocol import run_blocking
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
