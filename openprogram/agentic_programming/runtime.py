"""The Runtime: the one place that talks to a model.

`Runtime(call=fn)` wraps any text model. `exec()` runs one turn: a plain reply, a native tool-call
loop (`tools=` / `toolset=`), a decision at the end of the turn (`choices=`), or a reply parsed
against a schema (`response_format=`). Every model call and every Agent method call is a node of
the runtime's DAG. Concrete runtimes (scripted, OpenAI, Anthropic, cassettes) override `complete()`.
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

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


class ModelCallError(RuntimeError):
    """A model call failed (network, key, rate limit, server error, timeout). `partial` holds the
    text received before the failure, so nothing that arrived is lost."""

    def __init__(self, message: str, *, partial: str = "", kind: str = "model_error"):
        super().__init__(message)
        self.partial = partial
        self.kind = kind


# ---------------------------------------------------------------------------------------------
# The DAG
# ---------------------------------------------------------------------------------------------


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
        return dict(self.__dict__)


_current_node: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "openprogram_dag_node", default=None)


class DAG:
    """Every model call and Agent method call of a Runtime, each with its parent."""

    def __init__(self):
        self.nodes: list[Node] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, kind: str, name: str, **fields) -> Node:
        with self._lock:
            node = Node(next(self._ids), _current_node.get(), kind, name, **fields)
            self.nodes.append(node)
        return node

    @contextlib.contextmanager
    def span(self, kind: str, name: str, **fields) -> Iterator[Node]:
        """A node that is the parent of everything recorded inside the block."""
        node = self.add(kind, name, **fields)
        token = _current_node.set(node.id)
        t0 = time.perf_counter()
        try:
            yield node
        except BaseException as exc:
            node.status, node.error = "error", f"{type(exc).__name__}: {exc}"
            raise
        else:
            node.status = "ok"
        finally:
            node.duration_s = time.perf_counter() - t0
            _current_node.reset(token)

    def children(self, node_id: int | None) -> list[Node]:
        return [n for n in self.nodes if n.parent == node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(list(self.nodes))

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame([n.to_dict() for n in self.nodes],
                            columns=list(Node.__dataclass_fields__)).set_index("id")


# ---------------------------------------------------------------------------------------------
# The Runtime bound to the current Agent call
# ---------------------------------------------------------------------------------------------

_current_runtime: contextvars.ContextVar["Runtime | None"] = contextvars.ContextVar(
    "openprogram_runtime", default=None)


def current_runtime() -> "Runtime | None":
    """The Runtime bound by the enclosing Agent method call, if any."""
    return _current_runtime.get()


@contextlib.contextmanager
def using_runtime(runtime: "Runtime") -> Iterator["Runtime"]:
    """Bind `runtime` for `decision.make` / `agent()` calls inside the block (as an Agent method
    call does)."""
    token = _current_runtime.set(runtime)
    try:
        yield runtime
    finally:
        _current_runtime.reset(token)


def check_timeout(timeout_s: Any) -> None:
    """Reject a time budget that is not a positive number of seconds (None means no budget)."""
    if timeout_s is not None and (isinstance(timeout_s, bool) or
                                  not isinstance(timeout_s, (int, float)) or not timeout_s > 0):
        raise ValueError(f"timeout_s must be a number of seconds > 0 (it covers the whole call, "
                         f"re-asks and tool rounds included), or None for no limit; got "
                         f"{timeout_s!r}")


def deadline_after(timeout_s: float | None) -> float | None:
    """The time.monotonic() at which a budget of `timeout_s` seconds, starting now, runs out."""
    check_timeout(timeout_s)
    return None if timeout_s is None else time.monotonic() + timeout_s


def check_iterations(max_iterations: Any) -> None:
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or \
            max_iterations < 1:
        raise ValueError(f"max_iterations must be a whole number >= 1 (the model calls of one "
                         f"turn, tool rounds included), got {max_iterations!r}")


def resolve_runtime(runtime: "Runtime | None", what: str) -> "Runtime":
    rt = runtime if runtime is not None else _current_runtime.get()
    if rt is None:
        from .agent import current_agent  # late: agent.py imports this module
        ag, method = current_agent()
        if ag is not None:
            # Inside an Agent method, "call it inside an Agent method" would be no help.
            cls = type(ag).__name__
            raise RuntimeError(
                f"{what} in {cls}.{method}() has no Runtime: this {cls} has none of its own and "
                f"no Agent method that called it has one. Create it with "
                f"{cls}(runtime=...), e.g. runtime=ScriptedRuntime([...]) from "
                f"openprogram.runtimes or Runtime(call=your_model_function); call it from a "
                f"method of an Agent that has a Runtime; or pass runtime=... to {what}.")
        raise RuntimeError(
            f"{what} has no Runtime: call it inside an Agent method (whose Runtime is bound), "
            f"or pass runtime=..., e.g. runtime=ScriptedRuntime([...]) from openprogram.runtimes "
            f"or Runtime(call=your_model_function).")
    if not isinstance(rt, Runtime):
        raise TypeError(f"runtime= must be an openprogram Runtime, got {type(rt).__name__}; "
                        f"wrap a model function with Runtime(call=fn).")
    return rt


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
                raise TypeError(f"content block {b!r} is not a str or a dict with a 'type' key; "
                                f"use {{'type': 'text', 'text': ...}}")
        return blocks
    raise TypeError(f"content must be a str or a list of content blocks, got "
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


# ---------------------------------------------------------------------------------------------
# Runtime
# ---------------------------------------------------------------------------------------------


class Runtime:
    """Wraps a model. `Runtime(call=fn, model="name")` where `fn(content, **kwargs)` gets the
    turn's content blocks and returns the reply text (or `ToolCall`s when `tools=` were offered;
    it receives `tools=` and `messages=` only if its signature accepts them).

    Subclasses override `complete(messages, *, tools, on_text, timeout)`.
    """

    #: Whether `complete()` streams text through `on_text` as it arrives.
    streams = False

    def __init__(self, call: Callable | None = None, *, model: str | None = None,
                 name: str | None = None):
        self._call = call
        self.model = model
        self.name = name or model or (getattr(call, "__name__", None) if call else None) \
            or type(self).__name__
        self.dag = DAG()
        if call is not None and not callable(call):
            raise TypeError(f"Runtime(call=...) needs a callable, got {type(call).__name__}")
        self._accepts = _accepted_kwargs(call) if call is not None else set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"

    # -- the one method a concrete runtime implements -----------------------------------------
    def complete(self, messages: list[dict], *, tools: list[dict] | None = None,
                 on_text: Callable[[str], None] | None = None,
                 timeout: float | None = None) -> ModelResponse:
        """One model call. `messages` is a list of {"role": "user"|"assistant"|"tool", ...}:
        user messages carry "content" (blocks), assistant messages "content" (text) and
        "tool_calls", tool messages "tool_call_id", "name" and "content"."""
        if self._call is None:
            raise NotImplementedError(f"{type(self).__name__} has no model: pass "
                                      f"Runtime(call=fn) or override complete()")
        content = _flatten(messages)
        kwargs = {}
        if "tools" in self._accepts and tools is not None:
            kwargs["tools"] = tools
        if "messages" in self._accepts:
            kwargs["messages"] = messages
        if "timeout" in self._accepts and timeout is not None:
            kwargs["timeout"] = timeout
        out = self._call(content, **kwargs)
        return as_response(out)

    # -- calls made by the mechanism ------------------------------------------------------------
    def call_model(self, messages: list[dict], *, tools: list[dict] | None = None,
                   on_text: Callable[[str], None] | None = None,
                   deadline: float | None = None, label: str = "model_call"
                   ) -> tuple[ModelResponse, Node]:
        """`complete()` as a DAG node, with the time left before `deadline`."""
        timeout = None
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise ModelCallError("the time budget (timeout_s) ran out before this model call",
                                     kind="timeout")
        prompt = blocks_text(to_blocks(messages[-1]["content"])) if messages and \
            messages[-1].get("role") == "user" else None
        with self.dag.span("model_call", label, prompt=prompt) as node:
            resp = self.complete(messages, tools=tools, on_text=on_text, timeout=timeout)
            if not isinstance(resp, ModelResponse):
                resp = as_response(resp)
            node.reply = resp.text if isinstance(resp.text, str) else repr(resp.text)
            if resp.usage:
                node.input_tokens = resp.usage.get("input_tokens")
                node.output_tokens = resp.usage.get("output_tokens")
        return resp, node

    def exec(self, content, *, tools=None, toolset=None, choices=None, response_format=None,
             max_iterations: int = 20, timeout_s: float | None = None, context: dict | None = None):
        """Run one turn. Returns the reply text; with `choices=`, the resolved decision; with
        `response_format=`, the validated object."""
        from . import decision, tools as _tools
        check_iterations(max_iterations)
        deadline = deadline_after(timeout_s)
        blocks = to_blocks(content)
        tool_list = _tools.collect(tools, toolset, context)
        if choices is not None and response_format is not None:
            raise ValueError("exec() takes choices= or response_format=, not both")
        if choices is not None:
            return decision.run_agent_decision(self, blocks, choices, tool_list, context=context,
                                               max_iterations=max_iterations, deadline=deadline)
        if response_format is not None:
            return decision.run_format(self, blocks, response_format, tool_list, context=context,
                                       max_iterations=max_iterations, deadline=deadline)
        resp, _ = _tools.tool_loop(self, [{"role": "user", "content": blocks}], tool_list,
                                   max_iterations=max_iterations, deadline=deadline,
                                   context=context)
        return resp.text


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


def _accepted_kwargs(fn: Callable) -> set[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return {"tools", "messages", "timeout"}
    return {p.name for p in params}
