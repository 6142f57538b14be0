"""What the mechanism needs of a model, below every layer that calls one.

The decision loop, the tool loop and the Agent layer all hand work to "the runtime": this module
holds what they share without importing the `Runtime` class itself — the values a model call
returns (`ToolCall`, `ModelResponse`), the `ModelCaller` protocol that `Runtime` implements, the
content-block helpers, time budgets, and which runtime and Agent are bound to the running call
(context variables, so threads and asyncio tasks that copy the context keep them). Keeping these
here is what lets the loop sit below the Runtime without an import cycle. It is long because it
is the whole of that contract — the protocol with everything a runtime may declare, and the one
way a decision's awaitables are finished from sync and async callers alike — and each part is
what the same layers below the Runtime call together.
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import time
from dataclasses import dataclass, field

from .errors import ArgumentError, ModelCallError, NoRuntimeError, UsageError, WaitTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Awaitable, Callable, Coroutine, Iterator
    from typing import Any, TypeVar
    T = TypeVar("T")
    AskStage = Callable[["ModelCaller", Any, bool], Awaitable["StageAnswer"]]

__all__ = ["ToolCall", "ModelResponse", "ModelCaller", "ModelCallError", "current_runtime",
           "using_runtime", "current_agent", "resolve_runtime", "check_timeout",
           "deadline_after", "check_iterations", "check_modes", "to_blocks", "blocks_text",
           "run_sync",
           "run_blocking", "settle_value", "OnLoop", "on_loop", "tool_runtime", "running_tool",
           "StageAnswer", "add_usage", "wrapped"]


# ---------------------------------------------------------------------------------------------
# What a model call returns
# ---------------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """A native tool call the model asked for."""
    name: str
    args: dict = field(default_factory=dict)
    id: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "args": self.args, "id": self.id}


@dataclass
class ModelResponse:
    """One model call's answer: its text, the native tool calls it asked for, token usage."""
    text: Any = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict | None = None     # {"input_tokens": n, "output_tokens": m}
    model: str | None = None
    finish_reason: str | None = None  # "stop", "length" / "max_tokens", "tool_calls", ...
    refusal: str | None = None        # the provider's refusal message, when it reports one
    raw: dict | None = None           # {"request": ..., "response": ...} as sent and received,
                                      # keys redacted, bounded (provider runtimes fill it)
    cached: bool = False              # answered from a cache file, not by the model (CachedRuntime)
    confidence: dict | None = None    # {"probs": {name: p}, "other": p, "source":
                                      # "exact"|"logprobs", "note": str|None}
    # the reply's content as the provider's own blocks, when some have no core form (Anthropic's
    # server_tool_use / tool_search_tool_result): the next turn sends them back as they came
    content_blocks: list | None = None


class StageAnswer:
    """One stage of a staged runtime asked (see `ModelCaller.answer_in_stages`): the response,
    its DAG node, the distribution over the options (or None), the option the reply picked (None
    when it named none) and that option's probability (None when unknown)."""
    __slots__ = ("response", "node", "confidence", "pick", "p_pick")

    def __init__(self, response: ModelResponse, node: Any, confidence: Any, pick: str | None,
                 p_pick: float | None) -> None:
        self.response, self.node, self.confidence = response, node, confidence
        self.pick, self.p_pick = pick, p_pick


def add_usage(usages: list[Any]) -> dict[str, Any] | None:
    """The token counts of several calls added up (None when none of them reported any)."""
    known = [u for u in usages if u]
    if not known:
        return None
    total: dict[str, Any] = {}
    for u in known:
        for k, v in u.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                total[k] = total.get(k, 0) + v
    return total


#: Mode arguments that say how a request is laid out, not what it asks (the menu is in the prompt
#: already; `samples=`, how many samples of `decision.Samples` the request has, only lets a
#: runtime draw them together, and each sample stays its own entry by its `sample=` index):
#: never part of a request's record or its cache key.
LAYOUT_ARGS = frozenset({"menu", "samples"})


class ModelCaller:
    """The protocol the layers below the Runtime call through: `call_model` makes one model
    call (a DAG node) and returns `(ModelResponse, node)`; `dag.span(kind, name)` makes a node
    that parents everything inside it. `Runtime` is the implementation; a class deriving from
    this one is accepted wherever a runtime is."""

    name: str | None = None
    model: str | None = None
    #: Who serves the model, as OpenTelemetry's gen_ai.provider.name says it ("openai", ...).
    provider: str | None = None
    #: The ways of asking this runtime can carry out (see modes.py).
    modes: frozenset[str] = frozenset({"menu"})
    #: The calls made, as a DAG (`Runtime`'s is `runtime.DAG`); `dag.span(kind, name)`.
    dag: Any
    #: A runtime that lays out the menu itself (LlamaCppRuntime puts it first, where every
    #: decision on the option set shares it) sets this: a menu-mode decision then passes the
    #: menu text it put into the prompt as `menu=`, so the runtime is told where the menu is
    #: instead of looking for it. Every other runtime gets the prompt alone.
    takes_menu: bool = False
    #: The runtime this one wraps (a recorder, a cache, a batch path), whose capabilities it
    #: passes on; None for a runtime that calls a model itself.
    inner: ModelCaller | None = None
    #: The distribution over the options this runtime can give with a reply ("exact" from an
    #: in-process model, "logprobs" from a server's token log-probabilities), filled into
    #: `ModelResponse.confidence` when a call passes `confidence=[names]`; None: it has none.
    confidence_source: str | None = None
    #: A runtime that holds a secret masks it in a text its server sent back (`redact(text)`);
    #: the loop passes every decoded pick through it. None: it holds no secret.
    redact: Callable[[Any], Any] | None = None
    #: Whether the model is called natively asynchronously (`evaluate` then runs its rows as
    #: tasks on one event loop instead of a thread each).
    async_native: bool = False
    #: Whether the provider searches deferred tools itself (`shortlist="native"`).
    native_tool_search: bool = False
    #: Whether its HTTP requests go through the provider transport, which keeps to a RateLimit.
    honours_rate_limit: bool = False
    #: A runtime that answers a decision's model call in stages, each stage a runtime asked in
    #: turn (`CascadeRuntime`), sets this and implements `answer_in_stages`.
    staged: bool = False

    async def answer_in_stages(self, ask: AskStage) -> tuple[ModelResponse, Any, Any,
                                                              list[dict[str, Any]]]:
        """A staged runtime's answer to one model call of a decision: `ask(stage runtime, its
        confidence source, first)` makes the call on one stage and reads the pick and its
        probability from the reply (a `StageAnswer`: only the decision knows how its way of
        asking reads a pick); the runtime decides which stages to ask. Returns `(response,
        node, confidence, the stages asked as records)`."""
        raise NotImplementedError

    def call_model(self, messages: list[dict[str, Any]], *,
                   tools: list[dict[str, Any]] | None = None,
                   on_text: Callable[[str], None] | None = None,
                   deadline: float | None = None, label: str = "model_call",
                   **extra: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    async def acall_model(self, messages: list[dict[str, Any]], *,
                          tools: list[dict[str, Any]] | None = None,
                          on_text: Callable[[str], None] | None = None,
                          deadline: float | None = None, label: str = "model_call",
                          **extra: Any) -> tuple[Any, Any]:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# One loop for sync and async callers
# ---------------------------------------------------------------------------------------------
# The decision loop is written once, as coroutines. An async caller awaits them; a sync caller
# drives them with run_sync(), which is possible because on the sync path nothing inside ever
# suspends: model calls and options are called directly, and anything async the user handed in
# (an async model function, an async option or tool) is finished with run_blocking().


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the sync path of the loop) and return its value."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("internal error: a synchronous decision tried to suspend")


class OnLoop:
    """An awaitable that only one event loop can finish: a call on an MCP session, a connection,
    anything whose answer a task of `loop` delivers. Awaited on that loop it is awaited as is;
    awaited on another loop, or finished by the sync API from another thread, it is sent to
    `loop` (which must be running, in its own thread) and waited for there. Made with
    `on_loop(awaitable, loop)`."""
    __slots__ = ("awaitable", "loop")

    def __init__(self, awaitable: Any, loop: Any):
        if not inspect.isawaitable(awaitable):
            raise UsageError(f"on_loop(awaitable, loop) takes an awaitable (a coroutine), got "
                             f"{type(awaitable).__name__}")
        self.awaitable, self.loop = awaitable, loop

    def __await__(self):
        import asyncio
        if _running_loop() is self.loop:
            return self.awaitable.__await__()
        return asyncio.wrap_future(self.submit()).__await__()

    def submit(self) -> Any:
        """Start the awaitable on its loop from another thread: a concurrent.futures.Future
        whose cancel() cancels it there."""
        import asyncio
        if self.loop.is_closed() or not self.loop.is_running():
            self.close()
            raise UsageError(f"the event loop this awaitable belongs to is "
                             f"{'closed' if self.loop.is_closed() else 'not running'}, so "
                             f"nothing can finish it (a session opened on a loop that has "
                             f"ended): open the session again, on a loop that keeps running")
        return asyncio.run_coroutine_threadsafe(_awaited(self.awaitable), self.loop)

    def close(self) -> None:
        """Never to be awaited: close a coroutine so it is not reported as never awaited."""
        close = getattr(self.awaitable, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"on_loop({self.awaitable!r})"


def on_loop(awaitable: Any, loop: Any = None) -> OnLoop:
    """Mark `awaitable` as belonging to `loop` (by default the loop running now): the sync API
    and other loops then finish it on that loop instead of a loop of their own, where it could
    never complete (see `run_blocking`)."""
    if loop is None:
        import asyncio
        loop = asyncio.get_running_loop()
    return OnLoop(awaitable, loop)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _running_loop() -> Any:
    import asyncio
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


async def _bounded(awaitable: Any, deadline: float | None, where: str) -> Any:
    """`await awaitable`, cancelled when `deadline` passes (a WaitTimeout then)."""
    if deadline is None:
        return await awaitable
    import asyncio
    try:
        return await asyncio.wait_for(_awaited(awaitable), _left(deadline))
    except asyncio.TimeoutError:
        if time.monotonic() < deadline:  # the awaitable's own timeout, not the budget's
            raise
        raise WaitTimeout(f"an awaitable of this decision (an async option, tool or model "
                          f"function) did not finish within timeout_s and was cancelled{where}"
                          ) from None


_SAME_LOOP = (
    ". It ran on a worker thread's event loop of its own: this sync call was made inside a "
    "running event loop (a notebook cell), which cannot be re-entered while it waits. If it "
    "awaits something opened on that running loop (an MCP session opened with `await`), only "
    "that loop can finish it: use `await decision.amake(...)` there, or open the resource on a "
    "loop of its own (openprogram.mcp.connect does) and mark its awaitables with "
    "on_loop(awaitable, loop)")


def run_blocking(awaitable: Any, deadline: float | None = None) -> Any:
    """Finish an awaitable from synchronous code, within `deadline` (a time.monotonic(); past
    it the awaitable is cancelled and WaitTimeout raised).

    - an `OnLoop` (an awaitable that belongs to one loop) runs on its loop: sent there when that
      loop runs in another thread; refused at once when it is the loop this very call blocks,
      which could only deadlock;
    - anything else, with no event loop running in this thread: asyncio.run;
    - inside a running loop (every notebook cell): a worker thread runs it on a loop of its own
      while this thread waits, since the running loop cannot be re-entered.
    Context variables (the bound runtime, observers) travel with it."""
    import asyncio
    running = _running_loop()
    if isinstance(awaitable, OnLoop):
        home = awaitable.loop
        if home is running:
            awaitable.close()
            raise UsageError(
                "a sync call (decision.make, agent, evaluate, a magic) was made inside the "
                "running event loop that an option's awaitable belongs to (an MCP session "
                "opened with `await` on it): waiting for it here would stop the only loop "
                "that can finish it, in this thread, forever. Use `await decision.amake(...)` "
                "(`await aagent(...)`, `await aevaluate(...)`) in this loop, or open the session "
                "with openprogram.mcp.connect(...), which keeps it on a loop of its own")
        if home.is_running() or running is not None or home.is_closed():
            import concurrent.futures
            fut = awaitable.submit()
            try:
                return fut.result(_left(deadline))
            except concurrent.futures.TimeoutError:
                fut.cancel()
                raise WaitTimeout("an awaitable of this decision did not finish on its own "
                                  "event loop within timeout_s, and was cancelled there") from None
        # its loop exists but is not running, and none runs here: run it here
        return home.run_until_complete(_bounded(awaitable.awaitable, deadline, ""))
    if running is None:
        return asyncio.run(_bounded(awaitable, deadline, ""))
    ctx = contextvars.copy_context()
    box: dict = {}

    def work():
        try:
            box["value"] = ctx.run(asyncio.run, _bounded(awaitable, deadline, _SAME_LOOP))
        except BaseException as exc:  # handed to the waiting thread as is
            box["error"] = exc
    import threading  # only a sync call made inside a running event loop needs a thread
    t = threading.Thread(target=work, name="openprogram-sync-await", daemon=True)
    t.start()
    # The worker's own wait_for ends it at the deadline; the join's bound is for an awaitable
    # that blocks its loop's thread outright (a sync sleep inside a coroutine), which nothing
    # can cancel: the thread is left to end on its own.
    left = _left(deadline)
    t.join(None if left is None else left + 1.0)
    if t.is_alive():
        raise WaitTimeout("an awaitable of this decision blocked its event loop's thread past "
                          "timeout_s (a blocking call inside a coroutine?)" + _SAME_LOOP)
    if "error" in box:
        raise box["error"]
    return box["value"]


async def settle_value(value: Any, sync: bool, deadline: float | None = None) -> Any:
    """A user callable's return value, finished: an awaitable (an async option, tool or model
    function) is awaited on the async path and run to completion on the sync path, so a
    coroutine is never taken for a result. Past `deadline` it is cancelled (WaitTimeout)."""
    if inspect.isawaitable(value):
        if sync:
            return run_blocking(value, deadline)
        return await _bounded(value, deadline, "")
    return value


# ---------------------------------------------------------------------------------------------
# The Runtime and Agent bound to the running call
# ---------------------------------------------------------------------------------------------

current_runtime_var: contextvars.ContextVar[ModelCaller | None] = contextvars.ContextVar(
    "openprogram_runtime", default=None)
current_agent_var: contextvars.ContextVar[tuple[Any, str | None]] = contextvars.ContextVar(
    "openprogram_agent", default=(None, None))


def current_runtime() -> ModelCaller | None:
    """The Runtime bound by the enclosing Agent method call, if any."""
    return current_runtime_var.get()


def current_agent() -> tuple[Any, str | None]:
    """The Agent whose method is running, and that method's name."""
    return current_agent_var.get()


#: The runtime of the decision (or tool round) whose picked function runs now: what a live
#: tool (an MCP server's) asks to record its result, or to answer it from a recording. Kept apart
#: from `current_runtime_var` so a pick's function does not bind a runtime for the decisions it
#: makes itself.
tool_runtime_var: contextvars.ContextVar[ModelCaller | None] = contextvars.ContextVar(
    "openprogram_tool_runtime", default=None)


def tool_runtime() -> ModelCaller | None:
    """The runtime of the decision whose picked function (or tool) is running, if any."""
    return tool_runtime_var.get()


class running_tool:
    """Mark `runtime` as the one whose pick runs inside the block (see `tool_runtime`). A
    class rather than a generator-based context manager: every decision's pick runs in one."""

    __slots__ = ("runtime", "token")

    def __init__(self, runtime: Any):
        self.runtime = runtime

    def __enter__(self) -> Any:
        self.token = tool_runtime_var.set(self.runtime)
        return self.runtime

    def __exit__(self, *exc: Any) -> None:
        tool_runtime_var.reset(self.token)


@contextlib.contextmanager
def using_runtime(runtime: ModelCaller) -> Iterator[ModelCaller]:
    """Bind `runtime` for `decision.make` / `agent()` calls inside the block (as an Agent method
    call does)."""
    token = current_runtime_var.set(runtime)
    try:
        yield runtime
    finally:
        current_runtime_var.reset(token)


def resolve_runtime(runtime: ModelCaller | None, what: str) -> ModelCaller:
    """The runtime a call uses: the one passed, else the bound one; a clear error otherwise."""
    rt = runtime if runtime is not None else current_runtime_var.get()
    if rt is None:
        ag, method = current_agent()
        if ag is not None:
            # Inside an Agent method, "call it inside an Agent method" would be no help.
            cls = type(ag).__name__
            raise NoRuntimeError(
                f"{what} in {cls}.{method}() has no Runtime: this {cls} has none of its own and "
                f"no Agent method that called it has one. Create it with "
                f"{cls}(runtime=...), e.g. runtime=ScriptedRuntime([...]) from "
                f"openprogram.runtimes or Runtime(call=your_model_function); call it from a "
                f"method of an Agent that has a Runtime; or pass runtime=... to {what}.")
        raise NoRuntimeError(
            f"{what} has no Runtime: call it inside an Agent method (whose Runtime is bound), "
            f"or pass runtime=..., e.g. runtime=ScriptedRuntime([...]) from openprogram.runtimes "
            f"or Runtime(call=your_model_function).")
    if isinstance(rt, type) and issubclass(rt, ModelCaller):
        raise UsageError(f"runtime= got the class {rt.__name__}, not a Runtime; pass an "
                         f"instance: runtime={rt.__name__}(...)")
    if not isinstance(rt, ModelCaller):
        raise UsageError(f"runtime= must be an openprogram Runtime, got {type(rt).__name__}; "
                        f"wrap a model function with Runtime(call=fn).")
    return rt


def wrapped(runtime: ModelCaller | None) -> Iterator[ModelCaller]:
    """`runtime` and the runtimes it wraps (`inner`: a recorder's, a cache's), outermost
    first; a chain longer than 16 is cut (a wrapper that wraps itself)."""
    for _ in range(16):
        if runtime is None:
            return
        yield runtime
        runtime = runtime.inner


def check_modes(runtime: ModelCaller, mode: str) -> None:
    """Fail before any model call when `runtime` cannot ask in `mode`."""
    modes = runtime.modes
    if mode not in modes:
        raise ArgumentError(
            f"{runtime.name!r} cannot ask in mode {mode!r}; it can do "
            f"{', '.join(repr(m) for m in sorted(modes))}. A Runtime(call=fn) can do 'tools' when "
            f"fn accepts tools= (and returns ToolCalls), and 'json_schema' when fn accepts "
            f"response_format=.")


# ---------------------------------------------------------------------------------------------
# Time budgets
# ---------------------------------------------------------------------------------------------


def check_timeout(timeout_s: Any) -> None:
    """Reject a time budget that is not a positive number of seconds (None means no budget)."""
    if timeout_s is not None and (isinstance(timeout_s, bool) or
                                  not isinstance(timeout_s, (int, float)) or not timeout_s > 0):
        raise ArgumentError(f"timeout_s must be a number of seconds > 0 (it covers the whole call, "
                         f"re-asks and tool rounds included), or None for no limit; got "
                         f"{timeout_s!r}")


def deadline_after(timeout_s: float | None) -> float | None:
    """The time.monotonic() at which a budget of `timeout_s` seconds, starting now, runs out."""
    check_timeout(timeout_s)
    return None if timeout_s is None else time.monotonic() + timeout_s


def check_iterations(max_iterations: Any) -> None:
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or \
            max_iterations < 1:
        raise ArgumentError(f"max_iterations must be a whole number >= 1 (the model calls of one "
                         f"turn, tool rounds included), got {max_iterations!r}")


# ---------------------------------------------------------------------------------------------
# Content helpers
# ---------------------------------------------------------------------------------------------


def to_blocks(content: Any) -> list[dict]:
    """A turn's content as a list of content blocks; a plain string becomes one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, (list, tuple)):
        blocks = []
        for b in content:
            if isinstance(b, str):
                blocks.append({"type": "text", "text": b})
            elif isinstance(b, dict) and "type" in b:
                blocks.append(b)
            else:
                raise UsageError(f"content block {b!r} is not a str or a dict with a 'type' key; "
                                f"use {{'type': 'text', 'text': ...}}")
        return blocks
    raise UsageError(f"content must be a str or a list of content blocks, got "
                    f"{type(content).__name__}")


def blocks_text(blocks: list[dict]) -> str:
    """The text of a list of content blocks (other block types are shown by their type)."""
    parts = []
    for b in blocks:
        if b.get("type") == "text":
            parts.append(b.get("text", ""))
        elif b.get("type") == "tool_result":
            parts.append(f"[tool result {b.get('name', '')}: {b.get('content', '')}]")
        elif b.get("type") == "tool_use":
            parts.append(f"[tool call {b.get('name', '')}({b.get('input', {})})]")
        else:
            parts.append(f"[{b.get('type')}]")
    return "\n".join(parts)
