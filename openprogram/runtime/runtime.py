"""The Runtime: the one place that talks to a model.

`Runtime(call=fn)` wraps any text model. `exec()` runs one turn: a plain reply, a native tool-call
loop (`tools=` / `toolset=`), a decision at the end of the turn (`options=`), or a reply parsed
against a schema (`response_format=`). Every model call and every Agent method call is a node of
the runtime's DAG. Concrete runtimes (scripted, OpenAI, Anthropic, cassettes) override `complete()`.
A new runtime plugs in by subclassing `Runtime` and overriding `complete()` (see
docs/architecture.md). It is long for one concept: the Runtime with what only it uses —
the DAG of its calls and their window, its sync and async entry points, and the turns that end
in a decision or a format.
"""
from __future__ import annotations

import contextvars
import inspect
import itertools
import json
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Callable, Iterator

from ..base.errors import ModelCallError, ParseError, UsageError, WaitTimeout, require
from ..trace.confidence import check_confidence, check_threshold
from ..decision.loop import DECISION_FINISH_INSTRUCTION, Decider, check_reask
from ..decision.modes import MenuMode, format_mode, get_mode
from ..base.model_protocol import (ModelCaller, ModelResponse, OnLoop, ToolCall, blocks_text,
                                   check_iterations, check_modes, check_timeout, current_runtime,
                                   deadline_after, resolve_runtime, run_blocking, run_sync,
                                   to_blocks, using_runtime)
from ..decision.repair import check_repair
from ..decision.options import Param, SchemaOption, check_context, normalize, param_lines, render_menu
from ..decision.options import schema_field, validate
from ..decision.options.shortlist import check_shortlist, narrow
from ..trace.records import ToolRound, replace
from ..trace.decision_trace import emit

__all__ = ["Runtime", "DAG", "Node", "Window", "DEFAULT_WINDOW", "ToolCall", "ModelResponse", "ModelCallError",
           "as_response", "to_blocks", "blocks_text", "current_runtime", "using_runtime",
           "resolve_runtime", "check_timeout", "deadline_after", "check_iterations"]

# ---------------------------------------------------------------------------------------------
# The DAG
# ---------------------------------------------------------------------------------------------
# A runtime lives as long as a notebook kernel or a service, and a record of every call it ever
# made would grow without bound (about a kilobyte per decision, more with long prompts). So the
# DAG, and a ScriptedRuntime's list of calls, keep a window of the most recent entries.

#: How many of the most recent DAG nodes (and ScriptedRuntime calls) a runtime keeps unless
#: told otherwise (`Runtime(window=...)`, `runtime.window = n`; None keeps every one).
DEFAULT_WINDOW = 1000


def check_window(window: Any) -> int | None:
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise ValueError(f"window must be a whole number >= 1 (how many of the most recent "
                         f"entries to keep) or None (keep every one), got {window!r}")
    return window


class Window(Sequence):
    """The most recent `maxlen` entries of a growing record (`maxlen` None keeps all of them),
    read like a list: `len`, indexing, slices (a list), iteration (over a snapshot, so entries
    added meanwhile do no harm) and `==` against a list. `dropped` counts the entries that fell
    out; `maxlen` can be changed at any time."""

    __slots__ = ("_items", "dropped", "_lock")

    def __init__(self, maxlen: int | None = DEFAULT_WINDOW):
        self._items: deque = deque(maxlen=check_window(maxlen))
        self.dropped = 0
        self._lock = Lock()

    @property
    def maxlen(self) -> int | None:
        return self._items.maxlen

    @maxlen.setter
    def maxlen(self, maxlen: int | None) -> None:
        maxlen = check_window(maxlen)
        with self._lock:
            kept = deque(self._items, maxlen)
            self.dropped += len(self._items) - len(kept)
            self._items = kept

    def append(self, item: Any) -> None:
        with self._lock:
            items = self._items
            if len(items) == items.maxlen:
                self.dropped += 1
            items.append(item)

    def clear(self) -> None:
        with self._lock:
            self.dropped += len(self._items)
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self._items)[i]
        return self._items[i]

    def __iter__(self) -> Iterator:
        return iter(list(self._items))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (Window, list, tuple)):
            return list(self._items) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kept = "every entry" if self.maxlen is None else f"the most recent {self.maxlen}"
        return (f"<Window of {len(self)} ({kept}; {self.dropped} dropped): "
                f"{list(self._items)!r:.300}>")


@dataclass
class Node:
    id: int
    parent: int | None
    kind: str                      # "model_call", "agent_method", "decision", "tool"
    name: str
    started_at: float = field(default_factory=time.time)
    duration_s: float | None = None
    status: str = "running"        # "running", "ok", "error"
    error: str | None = None
    prompt: str | None = None
    reply: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in _NODE_FIELDS}


_NODE_FIELDS = tuple(Node.__dataclass_fields__)

current_node_var: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "openprogram_dag_node", default=None)


class DAG:
    """The model calls and Agent method calls of a Runtime, each with its parent: the most
    recent `window` of them (`DEFAULT_WINDOW`; None keeps every one). Node ids keep counting
    from 1 across the whole life of the runtime, so a node whose parent fell out of the window
    still names it; `parent_dropped(node)` tells, and `to_frame()` shows it in a column."""

    def __init__(self, window: int | None = DEFAULT_WINDOW):
        self.nodes: Window = Window(window)
        self._ids = itertools.count(1)
        self._lock = Lock()

    # The window is the node list's own: one place checks and applies it.
    window = property(lambda self: self.nodes.maxlen,
                      lambda self, n: setattr(self.nodes, "maxlen", n),
                      doc="How many of the most recent nodes are kept (None: all). Settable.")

    @property
    def dropped(self) -> int:
        """How many nodes fell out of the window."""
        return self.nodes.dropped

    def add(self, kind: str, name: str, **fields) -> Node:
        with self._lock:
            node = Node(next(self._ids), current_node_var.get(), kind, name, **fields)
            self.nodes.append(node)
        return node

    def span(self, kind: str, name: str, **fields) -> "_Span":
        """A node that is the parent of everything recorded inside the block."""
        return _Span(self, kind, name, fields)

    def node(self, node_id: int) -> Node | None:
        """The node with this id, or None when it fell out of the window (or never was)."""
        nodes = self.nodes
        if not nodes:
            return None
        i = node_id - nodes[0].id  # ids are consecutive inside the window
        if 0 <= i < len(nodes):
            return nodes[i]
        return None

    def parent_dropped(self, node: Node) -> bool:
        """Whether `node` has a parent that fell out of the window."""
        return node.parent is not None and (not self.nodes or node.parent < self.nodes[0].id)

    def children(self, node_id: int | None) -> list[Node]:
        return [n for n in self.nodes if n.parent == node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __repr__(self) -> str:
        kept = "every node" if self.window is None else f"the most recent {self.window}"
        return f"<DAG: {len(self)} nodes ({kept}; {self.dropped} earlier dropped)>"

    def to_frame(self):
        """One row per node kept, indexed by id; `parent_dropped` marks a node whose parent
        fell out of the window (its `parent` id is still shown)."""
        pd = require("pandas", "pandas", "DAG.to_frame()")
        nodes = list(self.nodes)
        first = nodes[0].id if nodes else 0
        rows = [{**n.to_dict(), "parent_dropped": n.parent is not None and n.parent < first}
                for n in nodes]
        from ..trace.view import quiet_frame  # prompts and replies: shown in the library's wrapper
        return quiet_frame(pd.DataFrame(rows, columns=[*_NODE_FIELDS, "parent_dropped"])
                           .set_index("id"))


class _Span:
    """`DAG.span`: a class rather than a generator-based context manager, since every decision
    opens two of these."""

    __slots__ = ("dag", "node", "token", "t0", "args")

    def __init__(self, dag: DAG, kind: str, name: str, fields: dict):
        self.dag, self.args = dag, (kind, name, fields)

    def __enter__(self) -> Node:
        kind, name, fields = self.args
        self.node = self.dag.add(kind, name, **fields)
        self.token = current_node_var.set(self.node.id)
        self.t0 = time.perf_counter()
        return self.node

    def __exit__(self, exc_type, exc, tb) -> None:
        node = self.node
        if exc is None:
            node.status = "ok"
        else:
            node.status, node.error = "error", _describe_error(exc)
        node.duration_s = time.perf_counter() - self.t0
        current_node_var.reset(self.token)


# ---------------------------------------------------------------------------------------------
# Runtime
# ---------------------------------------------------------------------------------------------



def option_set(options: Any, choices: Any, where: str) -> Any:
    """`options=`, or `choices=` (the name an agent turn's option set had before `make` and the
    turn shared one): both name the same thing, so giving both is refused, not merged."""
    if choices is None:
        return options
    if options is not None:
        raise TypeError(f"{where}() got options= and choices=, which are one argument (choices= "
                        f"is the older name of options=); pass only options=")
    return choices


class Runtime(ModelCaller):
    """Wraps a model. `Runtime(call=fn, model="name")` where `fn(content, **kwargs)` gets the
    turn's content blocks and returns the reply text (or `ToolCall`s when `tools=` were offered;
    it receives `tools=` and `messages=` only if its signature accepts them).

    `window` is how many of the most recent DAG nodes the runtime keeps in memory
    (`DEFAULT_WINDOW`, 1,000; None keeps every one); change it later with `runtime.window = n`.

    Subclasses override `complete(messages, *, tools, on_text, timeout)`.
    """

    #: Whether `complete()` streams text through `on_text` as it arrives.
    streams = False

    def __init__(self, call: Callable | None = None, *, model: str | None = None,
                 name: str | None = None, window: int | None = DEFAULT_WINDOW):
        self._call = call
        self.model = model
        self.name = name or model or (getattr(call, "__name__", None) if call else None) \
            or type(self).__name__
        self.dag = DAG(window)
        if call is not None and not callable(call):
            raise UsageError(f"Runtime(call=...) needs a callable, got {type(call).__name__}")
        if call is None and type(self).complete is Runtime.complete and \
                type(self).acomplete is Runtime.acomplete:
            raise UsageError(f"{type(self).__name__}() has no model: pass Runtime(call=fn), "
                             f"where fn(content) returns the reply text, or subclass Runtime "
                             f"and override complete()")
        if call is not None:
            _check_takes_content(call)
        self._accepts = _accepted_kwargs(call) if call is not None else set()
        self._async_call = call is not None and _is_async_callable(call)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"

    @property
    def window(self) -> int | None:
        """How many of the most recent DAG nodes this runtime keeps (None: every one); a
        runtime that keeps its `calls` (ScriptedRuntime, RecordingRuntime) keeps as many of
        them. Settable."""
        return self.dag.window

    @window.setter
    def window(self, window: int | None) -> None:
        self.dag.window = window
        calls = getattr(self, "calls", None)
        if isinstance(calls, Window):  # a runtime that keeps its calls keeps as many
            calls.maxlen = window

    @property
    def async_native(self) -> bool:
        """Whether the model is called natively asynchronously: a `Runtime` built from an async
        function (or a subclass that awaits an async client in `acomplete` and says so by
        setting this to True). `evaluate` then runs its rows as tasks on one event loop rather
        than a thread each."""
        return self._async_call

    # -- the one method a concrete runtime implements -----------------------------------------
    def complete(self, messages: list[dict], *, tools: list[dict] | None = None,
                 on_text: Callable[[str], None] | None = None,
                 timeout: float | None = None, **mode_args) -> ModelResponse:
        """One model call. `messages` is a list of {"role": "user"|"assistant"|"tool", ...}:
        user messages carry "content" (blocks), assistant messages "content" (text) and
        "tool_calls", tool messages "tool_call_id", "name" and "content". An async model
        function is run to completion here (see `model.run_blocking`)."""
        out = self._invoke(messages, tools, timeout, mode_args)
        if inspect.isawaitable(out):
            # a plain coroutine is cancelled at the budget on whatever loop runs it; one that
            # belongs to another loop (on_loop) is bounded by run_blocking's wait
            if not isinstance(out, OnLoop):
                out = within(out, timeout, "timeout" in self._accepts)
            try:
                out = run_blocking(out, None if timeout is None
                                   else time.monotonic() + timeout + _grace(timeout))
            except WaitTimeout as exc:
                raise ModelCallError(str(exc), kind="timeout") from None
        return as_response(out)

    async def acomplete(self, messages: list[dict], *, tools: list[dict] | None = None,
                        on_text: Callable[[str], None] | None = None,
                        timeout: float | None = None, **mode_args) -> ModelResponse:
        """`complete()` for async callers. An async model function is awaited on the caller's
        loop; a synchronous one (or a subclass that only overrides `complete`) runs in a worker
        thread so the loop keeps going. Runtimes with a native async client override this."""
        if self._async_call:
            out = self._invoke(messages, tools, timeout, mode_args)
            return as_response(await within(out, timeout, "timeout" in self._accepts)
                               if inspect.isawaitable(out) else out)
        import asyncio
        return await asyncio.to_thread(self.complete, messages, tools=tools, on_text=on_text,
                                       timeout=timeout, **mode_args)

    @property
    def modes(self) -> frozenset:
        """The ways of asking this runtime can do: a model function can do "tools" when it
        accepts `tools=` and "json_schema" when it accepts `response_format=`."""
        if self._call is None:
            return frozenset({"menu"})
        return frozenset({"menu"} | ({"tools"} if "tools" in self._accepts else set())
                         | ({"json_schema"} if "response_format" in self._accepts else set()))

    def _invoke(self, messages: list[dict], tools: list[dict] | None, timeout: float | None,
                mode_args: dict):
        if self._call is None:
            raise NotImplementedError(f"{type(self).__name__} has no model: pass "
                                      f"Runtime(call=fn) or override complete()")
        kwargs = {}
        if "tools" in self._accepts and tools is not None:
            kwargs["tools"] = tools
        if "messages" in self._accepts:
            kwargs["messages"] = messages
        if "timeout" in self._accepts and timeout is not None:
            kwargs["timeout"] = timeout
        for k, v in mode_args.items():  # tool_choice=, response_format=, when the fn takes them
            if k in self._accepts:
                kwargs[k] = v
        return self._call(_flatten(messages), **kwargs)

    # -- calls made by the mechanism ------------------------------------------------------------
    def call_model(self, messages: list[dict], *, tools: list[dict] | None = None,
                   on_text: Callable[[str], None] | None = None,
                   deadline: float | None = None, label: str = "model_call",
                   **mode_args) -> tuple[ModelResponse, Node]:
        """`complete()` as a DAG node, with the time left before `deadline`. `mode_args` are
        what a way of asking adds (`tools=` come with `tool_choice=`, or `response_format=`);
        they reach `complete()` only when given, so a runtime that does only the menu mode
        needs no parameter for them."""
        timeout, prompt = _call_budget(messages, deadline)
        with self.dag.span("model_call", label, prompt=prompt) as node:
            resp = self.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                 **_given(mode_args))
            # a synchronous model cannot be stopped part-way: a reply that came after the
            # budget ran out is not used, whatever the model did with the timeout it was given
            # (past the same moment of grace `within` leaves)
            if deadline is not None and time.monotonic() > deadline + _grace(timeout):
                raise timed_out(timeout, returned=True)
            return _record_reply(node, resp), node

    async def acall_model(self, messages: list[dict], *, tools: list[dict] | None = None,
                          on_text: Callable[[str], None] | None = None,
                          deadline: float | None = None, label: str = "model_call",
                          **mode_args) -> tuple[ModelResponse, Node]:
        """`acomplete()` as a DAG node, with the time left before `deadline`."""
        timeout, prompt = _call_budget(messages, deadline)
        with self.dag.span("model_call", label, prompt=prompt) as node:
            # every model, whether or not it takes a timeout: cancelled when the budget is out
            resp = await within(self.acomplete(messages, tools=tools, on_text=on_text,
                                               timeout=timeout, **_given(mode_args)), timeout,
                                grace=True)
            return _record_reply(node, resp), node

    def exec(self, content, *, tools=None, toolset=None, options=None, response_format=None,
             max_iterations: int = 20, timeout_s: float | None = None, context: dict | None = None,
             validate: Callable | None = None, reask: Any = None, mode: str = "menu",
             choices=None, confidence: Any = False, min_confidence: float | None = None,
             low_confidence: str | None = None, repair: str | None = None, shortlist: Any = None):
        """Run one turn. Returns the reply text; with `options=` (an option set, as in
        `decision.make`; `choices=` is its older name), the resolved decision (a `validate=`
        rule and a `reask=` text apply as in `decision.make`); with `response_format=`, the
        validated object. `repair=` as in `decision.make`."""
        return run_sync(self._exec(content, tools, toolset, option_set(options, choices, "exec"),
                                   response_format, max_iterations, timeout_s, context,
                                   validate, reask, mode, sync=True,
                                   confidence=(confidence, min_confidence, low_confidence), repair=repair, shortlist=shortlist))

    async def aexec(self, content, *, tools=None, toolset=None, options=None,
                    response_format=None, max_iterations: int = 20,
                    timeout_s: float | None = None, context: dict | None = None,
                    validate: Callable | None = None, reask: Any = None, mode: str = "menu",
                    choices=None, confidence: Any = False, min_confidence: float | None = None,
                    low_confidence: str | None = None, repair: str | None = None, shortlist: Any = None):
        """`exec()` for async callers: model calls through `acall_model`, async tools and
        options awaited."""
        return await self._exec(content, tools, toolset, option_set(options, choices, "aexec"),
                                response_format, max_iterations, timeout_s, context, validate,
                                reask, mode, sync=False,
                                confidence=(confidence, min_confidence, low_confidence), repair=repair,
                                shortlist=shortlist)

    async def _exec(self, content, tools, toolset, options, response_format, max_iterations,
                    timeout_s, context, validate, reask, mode, *, sync: bool,
                    confidence: tuple[Any, ...] = (False, None, None),
                    repair: str | None = None, shortlist: Any = None):
        check_iterations(max_iterations)
        reask = check_reask(reask)
        repair = check_repair(repair)
        deadline = deadline_after(timeout_s)
        blocks = to_blocks(content)
        from . import tools as _tools  # loaded with the first exec(), not with openprogram
        tool_list = _tools.collect(tools, toolset, context)
        if options is not None and response_format is not None:
            raise ValueError("exec() takes options= or response_format=, not both: options= "
                             "ends the turn with a pick, response_format= with a filled "
                             "object; drop one")
        if options is not None:
            return await run_agent_decision(self, blocks, options, tool_list, context=context,
                                            max_iterations=max_iterations, deadline=deadline,
                                            sync=sync, validate=validate, reask=reask,
                                            mode=mode, confidence=confidence, repair=repair,
                                            shortlist=shortlist)
        if confidence[0] not in (False, None) or confidence[1] is not None:
            raise UsageError("exec(confidence=..., min_confidence=...) applies to a decision: "
                             "pass options= as well")
        if response_format is not None:
            return await run_format(self, blocks, response_format, tool_list, context=context,
                                    max_iterations=max_iterations, deadline=deadline, sync=sync,
                                    reask=reask, mode=mode)
        resp, _ = await _tools.tool_loop(self, [{"role": "user", "content": blocks}], tool_list,
                                         max_iterations=max_iterations, deadline=deadline,
                                         context=context, sync=sync)
        return resp.text


def _describe_error(exc: BaseException) -> str:
    """`Type: message`, even for an exception whose __str__ itself raises (a user's)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__}: <str() of it failed>"


def _given(mode_args: dict) -> dict:
    return {k: v for k, v in mode_args.items() if v is not None}


def timed_out(timeout: float | None, returned: bool = False) -> ModelCallError:
    """The error of a model call that the time budget (timeout_s) ended."""
    left = "" if timeout is None else f" ({timeout:.3g}s were left for this call)"
    how = "answered after" if returned else "did not answer before"
    return ModelCallError(f"the model {how} the time budget (timeout_s) ran out{left}; raise "
                          f"timeout_s, or make the model answer sooner", kind="timeout")


def _grace(timeout: float | None) -> float:
    return 0.1 + 0.05 * max(timeout or 0, 0)


async def within(awaitable: Any, timeout: float | None, grace: bool = False) -> Any:
    """`await awaitable`, cancelled after `timeout` seconds (None: no bound) with the
    time budget's `ModelCallError`. With `grace`, a little later (a tenth of a second and 5%):
    a runtime that was given the timeout and stops itself (keeping the partial reply, saying
    how many tokens it wrote) does so first, and one that does not is stopped all the same."""
    if timeout is None:
        return await awaitable
    import asyncio
    wait = max(timeout, 0) + (_grace(timeout) if grace else 0)
    try:
        return await asyncio.wait_for(awaitable, wait)
    except asyncio.TimeoutError:
        raise timed_out(timeout) from None


def _call_budget(messages: list[dict], deadline: float | None) -> tuple[float | None, str | None]:
    """The seconds left before `deadline` (an error when none are), and the prompt text."""
    timeout = None
    if deadline is not None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ModelCallError("the time budget (timeout_s) ran out before this model call",
                                 kind="timeout")
    prompt = None
    if messages and messages[-1].get("role") == "user":
        content = messages[-1]["content"]
        prompt = content if isinstance(content, str) else blocks_text(to_blocks(content))
    return timeout, prompt


def _record_reply(node: Node, resp: Any) -> ModelResponse:
    if not isinstance(resp, ModelResponse):
        resp = as_response(resp)
    node.reply = resp.text if isinstance(resp.text, str) else repr(resp.text)
    if resp.usage:
        node.input_tokens = resp.usage.get("input_tokens")
        node.output_tokens = resp.usage.get("output_tokens")
    return resp


def _is_async_callable(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or \
        inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def as_response(out: Any) -> ModelResponse:
    """Normalise what a model function returned: text, a ToolCall, a list of ToolCalls, or a
    ModelResponse. Anything else is kept as-is in `.text` so the mechanism can report it."""
    if isinstance(out, ModelResponse):
        return out
    if isinstance(out, ToolCall):
        return ModelResponse(text="", tool_calls=[out])
    if isinstance(out, (list, tuple)) and out and all(isinstance(t, ToolCall) for t in out):
        return ModelResponse(text="", tool_calls=list(out))
    return ModelResponse(text=out)


def _flatten(messages: list[dict]) -> list[dict]:
    """A conversation as one list of content blocks, for model functions that take a turn."""
    if len(messages) == 1:
        return to_blocks(messages[0]["content"])
    blocks: list[dict] = []
    for m in messages:
        if m["role"] == "user":
            blocks.extend(to_blocks(m["content"]))
        elif m["role"] == "assistant":
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"], "role": "assistant"})
            for tc in m.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": tc.id, "name": tc.name,
                               "input": tc.args})
        elif m["role"] == "tool":
            blocks.append({"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                           "name": m.get("name"), "content": m.get("content")})
    return blocks


def _check_takes_content(fn: Callable) -> None:
    """Fail at construction when `fn` cannot be called with the turn's content (one positional
    argument), rather than at the first model call."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C callable without a signature: it is tried when called
    try:
        sig.bind(object())
    except TypeError as exc:
        if isinstance(fn, type):
            raise UsageError(f"Runtime(call=...) got the class {fn.__name__}; pass a function "
                             f"(or an instance) that takes the content") from None
        raise UsageError(f"Runtime(call={getattr(fn, '__name__', fn)!r}) cannot take the "
                         f"content: the model function is called as fn(content, **options) "
                         f"({exc}); give it one positional parameter for the content") from None


def _accepted_kwargs(fn: Callable) -> set[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return {"tools", "messages", "timeout"}
    return {p.name for p in params}


# ---------------------------------------------------------------------------------------------
# Turns that end in a decision (E2): a whole turn with tools, then its last reply is checked
# ---------------------------------------------------------------------------------------------


def _append_text(blocks: list[dict], text: str) -> list[dict]:
    """The turn with `text` after its prompt: `prompt + "\\n\\n" + text` when the turn ends with
    a text block, else a text block of its own."""
    if blocks and blocks[-1].get("type") == "text":
        last = dict(blocks[-1], text=blocks[-1].get("text", "") + "\n\n" + text)
        return blocks[:-1] + [last]
    return blocks + [{"type": "text", "text": text}]


async def _turn(d: Decider, content: list[dict], tools: list, max_iterations: int) -> None:
    """Attempt 1 of an exec() decision: a whole turn, tool rounds included. In tools mode the
    choices are tools too: a reply that calls one ends the turn, and the mode reads the pick
    from it (a choice that is also a work tool counts as the choice)."""
    def on_tool(n, tc, result, error, seconds):
        emit("tool_call", d.trace, d.att,
             round=ToolRound(n, tc.name, dict(tc.args) if isinstance(tc.args, dict)
                             else tc.args, result, error, seconds))

    from . import tools as _tools
    try:
        await _tools.tool_loop(d.runtime, [{"role": "user", "content": content}], tools,
                               max_iterations=max_iterations, deadline=d.deadline, call=d.call,
                               on_tool=on_tool, context=d.context, sync=d.sync,
                               stop_on=d.mode.ends_turn())
    except ModelCallError as exc:
        d.fail_with(ParseError(exc.kind, str(exc)), cause=exc)


async def run_agent_decision(rt: Runtime, blocks: list[dict], options: Any, tools: list,
                             *, context: dict | None, max_iterations: int,
                             deadline: float | None, sync: bool = True,
                             validate: Callable | None = None, reask: Callable | None = None,
                             mode: Any = None, confidence: tuple = (False, None, None), repair: str | None = None, shortlist: Any = None):
    """`exec(options=)` (E2): one turn with tools, then the last reply is the decision; one
    re-pick, fixed. In menu mode the finish instruction and the menu end the prompt; in the
    other modes the choices travel as tools or as the schema. `shortlist=` narrows the
    options against the request first, as in `decision.make`."""
    shortlist = check_shortlist(shortlist)
    menu = normalize(options)
    check_context(menu, context)
    request = blocks_text(blocks)
    menu, listing = narrow(shortlist, request, menu, runtime=rt, mode=get_mode(mode).name)
    way = get_mode(mode)(menu)
    check_modes(rt, way.name)
    ask = check_confidence(confidence[0], rt, where="agent", mode=way.name)
    check_threshold(confidence[1], confidence[2], [o.name for o in menu], ask, "agent")
    if ask is not None and not ask.native and tools:
        raise UsageError("agent(options=..., confidence=decision.Samples(n)) cannot draw samples "
                         "of a turn that calls tools (each sample would run the tools again); "
                         "drop tools=, or use confidence=True on a runtime that gives a "
                         "distribution (LlamaCppRuntime, OpenAIRuntime)")
    menu_text = render_menu(menu)
    turn = _append_text(blocks, DECISION_FINISH_INSTRUCTION + "\n\n" + menu_text) \
        if way.menu_in_prompt else blocks
    with rt.dag.span("decision", "agent(options=)"):
        d = Decider(rt, menu, request=request, context=context, max_attempts=2, entry="agent",
                    deadline=deadline, menu_text=menu_text, sync=sync, validate=validate,
                    reask=reask, mode=way, confidence=ask, min_confidence=confidence[1],
                    low_confidence=confidence[2], repair=check_repair(repair), shortlist=listing)
        with d.running():
            d.new_attempt(blocks_text(turn))
            await _turn(d, turn, tools, max_iterations)
            return await d.settle()


async def run_format(rt: Runtime, blocks: list[dict], response_format: Any, tools: list, *,
                     context: dict | None = None, max_iterations: int,
                     deadline: float | None, sync: bool = True,
                     reask: Callable | None = None, mode: Any = None):
    """`exec(response_format=schema)`: the reply is one JSON object of the schema's form,
    validated like a schema option's fields; one re-ask, fixed. `mode` asks for it as text
    (menu), as one forced tool (tools) or as the provider's structured output (json_schema)."""
    schema = schema_field(response_format, "response_format")
    if schema.type != "object":
        raise TypeError("response_format must be a dict schema {field: type, ...}")
    option = SchemaOption("response", "the requested JSON object",
                          [Param(k, f) for k, f in (schema.fields or {}).items()])
    menu_text = "\n".join([
        "Reply with one JSON object of this form, in a ```json fenced block:",
        *param_lines(option),
        "  Example: " + json.dumps(schema.placeholder(), ensure_ascii=False)])
    way = format_mode(mode, option)
    check_modes(rt, way.name)
    request = blocks_text(blocks)
    turn = _append_text(blocks, menu_text) if way.menu_in_prompt else blocks

    def check():
        ex = d.extract()
        dropped: list[str] = []
        try:
            value = validate(way.payload(ex.action), schema, "response", dropped)
        finally:
            d.att = replace(d.att, dropped=list(dropped))
        d.att = replace(d.att, chosen="response", args=value)
        return option, value

    with rt.dag.span("decision", "exec(response_format=)"):
        d = Decider(rt, [option], request=request, context=context, max_attempts=2,
                    entry="format", deadline=deadline, menu_text=menu_text, sync=sync,
                    reask=reask, mode=way)
        with d.running():
            d.new_attempt(blocks_text(turn))
            await _turn(d, turn, tools, max_iterations)
            _, value = await d.settle(check, run=False)
            return d.finish("resolved", result=value)
