"""The servers a connection starts or reaches: the MCP clients' config form, a command
line or a URL, headers, and `_Server`, one server's session on the connection's loop
(its transport, its tool listing and its changes, the tail of its stderr).
"""
from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile

from ..base.errors import (
    ServerError,
    UsageError,
)
from ..base.secrets import Secret, env_holds_secret
from ..base.text import cut
from .protocol import _credential
from .tools import list_tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------------------------------------
# Connections: servers on a loop of their own
# ---------------------------------------------------------------------------------------------

#: The name a server's tool listing is recorded under (`connect(..., runtime=...)`).
LISTING = "tools/list"
#: Seconds a server gets to start and answer `initialize` and `tools/list`.
START_TIMEOUT_S = 30.0
_STDERR_TAIL = 2000


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
