"""The recorder: pass a runtime's model calls through and append each one to a cassette.

`RecordingRuntime(inner, path)` passes every call to `inner` (an `OpenAIRuntime`, an
`AnthropicRuntime`, any Runtime) and appends it to the cassette at `path` (created or
overwritten; see `cassette_file` for what a line holds) as the call ends: one write of that line,
flushed to disk, so recording costs the size of the call whatever the file already holds, and a
crash keeps what was recorded. Each call is placed in the program — the decision it belongs to
(its id in the runtime's DAG and its entry point), the attempt of that decision and the way of
asking — so `cassette_decisions` can group the calls back into decisions and attempts, to
re-check them offline. Memory holds only the most recent `window` calls (the DAG's window). A
write that fails (a full disk, Ctrl-C) is cut back off the file and warned about, without
failing the model call; the calls not yet written stay in memory and are written, in order,
with the next call. Both `complete()` and `acomplete()` record; the cache (`cache.CachedRuntime`)
is built on the same pieces.
"""
from __future__ import annotations

import os
import threading
import time
import warnings
from collections import OrderedDict
from pathlib import Path

from ...base.errors import ToolError
from ...base.model_protocol import on_loop, run_sync
from ...base.secrets import scrub
from ...runtime.runtime import (
    DEFAULT_WINDOW,
    ModelCallError,
    ModelResponse,
    Runtime,
    Window,
    as_response,
    current_node_var,
)
from .cassette_file import (
    _plain,
    append_whole,
    header,
    keyed_line,
    line,
    request_key,
    request_record,
    response_record,
    settings_of,
    write_atomically,
)
from .tool_results import tool_call, tool_error_record, tool_key

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any


def _mode_of(mode_args: dict) -> str:
    if mode_args.get("response_format") is not None:
        return "json_schema"
    return "tools" if mode_args.get("tool_choice") is not None else "menu"


class _Places:
    """Which decision and which attempt each model call belongs to, read from the runtime's
    DAG: the decision is the nearest `decision` node above the call's node. The attempt is
    inferred from how the call follows the decision's previous one: a fresh conversation (the
    re-ask of the menu and json_schema modes), a previous reply that failed or called no tool,
    or one that called an offered tool that did not run (a choice, in tools mode: the turn
    ended), starts the next attempt; a previous reply whose calls ran as tools, or named no
    offered tool, is a tool round of the same attempt."""

    def __init__(self, dag: Any):
        self.dag = dag
        # the last call of each decision still in the DAG's window, oldest decision first: a
        # decision whose node fell out of the window gets no more calls placed in it (its calls
        # no longer find it), so its entry is dropped and this holds at most a window's worth
        self._last: OrderedDict[int, dict] = OrderedDict()
        self._lock = threading.Lock()

    def _node(self, node_id: int | None) -> Any:
        return None if node_id is None else self.dag.node(node_id)

    def _forget_dropped(self) -> None:
        nodes = self.dag.nodes
        oldest = nodes[0].id if nodes else float("inf")
        while self._last and next(iter(self._last)) < oldest:
            self._last.popitem(last=False)

    def place(self, messages: list[dict], tools: list[dict] | None,
              mode_args: dict) -> tuple[dict | None, int | None]:
        """`({"id", "entry", "attempt", "mode"} or None outside a decision, the call's node)`."""
        call = self._node(current_node_var.get())
        node = call
        while node is not None and node.kind != "decision":
            node = self._node(node.parent)
        if node is None:
            return None, getattr(call, "id", None)
        with self._lock:
            last = self._last.get(node.id)
            attempt = 1 if last is None else last["attempt"] + \
                (0 if self._same_turn(last, node.id, len(messages)) else 1)
            self._last[node.id] = {"attempt": attempt, "after": getattr(call, "id", 0) or 0,
                                   "offered": {t.get("name") for t in tools or []},
                                   "calls": None}
            self._forget_dropped()
        return ({"id": node.id, "entry": node.name, "attempt": attempt,
                 "mode": _mode_of(mode_args)}, node.id)

    def now(self) -> dict | None:
        """`{"id", "entry", "attempt"}` of the decision the running code belongs to (a picked
        tool's call), or None outside a decision."""
        node = self._node(current_node_var.get())
        while node is not None and node.kind != "decision":
            node = self._node(node.parent)
        if node is None:
            return None
        with self._lock:
            last = self._last.get(node.id)
        return {"id": node.id, "entry": node.name,
                "attempt": last["attempt"] if last is not None else None}

    def _same_turn(self, last: dict, decision: int, n_messages: int) -> bool:
        calls = last["calls"]
        if n_messages <= 1 or not calls:
            return False
        ran = set()
        for n in reversed(self.dag.nodes):  # the nodes added since that call: the newest ones
            if n.id <= last["after"]:
                break
            if n.kind == "tool" and n.parent == decision:
                ran.add(n.name)
        return not any(name in last["offered"] and name not in ran for name in calls)

    def settle(self, decision: int | None, resp: ModelResponse | None) -> None:
        """Note what the call of `decision` replied (None: it failed)."""
        if decision is None:
            return
        with self._lock:
            if decision in self._last:
                self._last[decision]["calls"] = None if resp is None else \
                    [tc.name for tc in resp.tool_calls]



def on_own_loop(coro: Any, live: Any) -> Any:
    """`coro`, which awaits the live call `live`, marked as belonging to the loop `live`
    belongs to (an MCP session's): the sync API then finishes it there, never on a loop of its
    own where the live call could not complete."""
    loop = getattr(live, "loop", None)
    return coro if loop is None else on_loop(coro, loop)


def failure_record(exc: ModelCallError) -> dict:
    return _plain({"type": type(exc).__name__, "kind": exc.kind, "message": str(exc),
                   "partial": exc.partial})


class RecordingRuntime(Runtime):
    """Passes every call to `inner` and appends it to the cassette at `path` (created or
    overwritten), so a crash keeps what was recorded. `calls` holds the most recent `window`
    calls (`DEFAULT_WINDOW`, as the DAG; None keeps every one; `rec.window = n` changes both);
    the file holds all of them."""

    def __init__(self, inner: Runtime, path: str | os.PathLike, *,
                 window: int | None = DEFAULT_WINDOW, name: str | None = None):
        self._wrap(inner, path, window, name)
        first = line(header(self.name, self.model))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, first)
        except OSError as exc:
            raise OSError(f"{type(self).__name__} cannot write the cassette {str(self.path)!r} "
                          f"({exc.strerror or exc}); pass a path in a writable folder") from None
        self._size = len(first)

    def _wrap(self, inner: Runtime, path, window, name) -> None:
        if not isinstance(inner, Runtime):
            raise TypeError(f"{type(self).__name__}(inner, path) wraps an openprogram Runtime, "
                            f"got {type(inner).__name__}")
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"{type(self).__name__}(inner, path) needs a file path (str or "
                            f"pathlib.Path), got {type(path).__name__}")
        super().__init__(model=inner.model, name=name or inner.name, window=window)
        self.inner = inner
        self.path = Path(path)
        self.streams = inner.streams
        self.calls: Window = Window(window)
        self.tool_calls: Window = Window(window)  # live tools' results (tool_results.py)
        self._count = 0                   # calls recorded, numbered 1.. in the file
        self._unwritten: list[bytes] = []  # lines a failed write left for the next one
        self._lock = threading.Lock()
        self._places = _Places(self.dag)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, {str(self.path)!r}, {self._count} calls)"

    @property
    def modes(self) -> frozenset:
        return self.inner.modes

    def redact(self, text):
        """The recorded runtime's redaction (of its API key), for what the mechanism decodes."""
        inner = self.inner.redact
        return text if inner is None else inner(text)

    @property
    def async_native(self) -> bool:
        return self.inner.async_native

    @property
    def takes_menu(self) -> bool:  # the menu as data passes through to the model recorded
        return self.inner.takes_menu

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        async def send():  # never suspends: complete() drives it without an event loop
            return self.inner.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                       **mode_args)
        return run_sync(self._record(messages, tools, mode_args, send))

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        async def send():
            return await self.inner.acomplete(messages, tools=tools, on_text=on_text,
                                              timeout=timeout, **mode_args)
        return await self._record(messages, tools, mode_args, send)

    def _entry(self, messages, tools, mode_args) -> tuple[dict, int | None]:
        """A new call's entry (request, key, settings, place) and its decision's node id."""
        where, decision = self._places.place(messages, tools, mode_args)
        # keyed as written: a request holding a key is written masked, and its key says so
        request = scrub(request_record(messages, tools, mode_args))
        settings = settings_of(self.inner)
        return ({"key": request_key(request, settings), "call": None, "decision": where,
                 "request": request, "settings": settings}, decision)

    async def _record(self, messages, tools, mode_args, send) -> ModelResponse:
        mode_args = {k: v for k, v in mode_args.items() if v is not None}
        entry, decision = self._entry(messages, tools, mode_args)
        t0 = time.perf_counter()
        try:
            resp = await send()
        except ModelCallError as exc:
            self._places.settle(decision, None)
            entry["error"] = failure_record(exc)
            self._add(entry, t0)
            raise
        if not isinstance(resp, ModelResponse):
            resp = as_response(resp)
        self._places.settle(decision, resp)
        entry["response"] = response_record(resp)
        self._add(entry, t0)
        return resp

    #: A server's tool listing (`mcp.connect(..., runtime=)`) is recorded like a tool's result.
    tool_listing = "record"

    def tool_result(self, call: dict, run: Any) -> Any:
        """A live tool's call (`{"server", "name", "arguments"}`), made by `run()` (an awaitable
        of its result as JSON data) and recorded as a line of its own, so a replay answers it
        without the server (see tool_results.py). Its place in the program is read now, in the
        decision that picked the tool; the awaitable runs on the loop the live call belongs to."""
        call = scrub(tool_call(call["server"], call["name"], call["arguments"]))
        entry = {"key": tool_key(call), "call": None, "decision": self._places.now(),
                 "tool": call}
        live = run()
        return on_own_loop(self._record_tool(entry, live), live)

    async def _record_tool(self, entry: dict, live: Any) -> Any:
        t0 = time.perf_counter()
        try:
            result = await live
        except ToolError as exc:  # the server refused the arguments: a replay refuses them too
            entry["error"] = tool_error_record(exc)
            self._add(entry, t0, self.tool_calls)
            raise
        entry["result"] = _plain(result)
        self._add(entry, t0, self.tool_calls)
        return result

    def _add(self, entry: dict, t0: float, into: Window | None = None) -> None:
        entry["duration_s"] = round(time.perf_counter() - t0, 4)
        with self._lock:
            self._count += 1
            entry["call"] = self._count
            (self.calls if into is None else into).append(entry)
            self._unwritten.append(keyed_line(entry))
            try:
                self._size = append_whole(self.path, b"".join(self._unwritten), self._size)
            except OSError as exc:
                # The reply is good and the call is kept: failing the model call for a full
                # disk would lose the reply too. The next call writes the ones left, in order.
                left = len(self._unwritten)
                first = self._count - left + 1
                which = f"call #{first} is" if left == 1 else \
                    f"calls #{first} to #{self._count} are"
                warnings.warn(f"RecordingRuntime could not write the cassette "
                              f"{str(self.path)!r} ({exc.strerror or exc}); the file keeps the "
                              f"{first - 1} calls written before, whole. The unwritten {which} "
                              f"kept in memory and written with the next call.",
                              RuntimeWarning, stacklevel=3)
            else:
                self._unwritten.clear()


__all__ = ["RecordingRuntime"]
