"""The Runtime: the one place that talks to a model.

`Runtime(call=fn)` wraps any text model. `exec()` runs one turn: a plain reply, a native tool-call
loop (`tools=` / `toolset=`), a decision at the end of the turn (`choices=`), or a reply parsed
against a schema (`response_format=`). Every model call and every Agent method call is a node of
the runtime's DAG. Concrete runtimes (scripted, OpenAI, Anthropic, cassettes) override `complete()`.
A new runtime plugs in by subclassing `Runtime` and overriding `complete()` (see
docs/architecture.md).
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from . import tools as _tools
from .errors import ModelCallError, ParseError
from .loop import DECISION_FINISH_INSTRUCTION, Decider, check_reask
from .modes import MenuMode, format_mode, get_mode
from .model import (ModelCaller, ModelResponse, ToolCall, blocks_text, check_iterations,
                    check_modes, check_timeout, current_runtime, deadline_after, resolve_runtime,
                    run_blocking,
                    run_sync, to_blocks, using_runtime)
from .options import Param, SchemaOption, check_context, normalize, param_lines, render_menu
from .options import schema_field, validate
from .records import ToolRound, replace
from .trace import emit

__all__ = ["Runtime", "DAG", "Node", "ToolCall", "ModelResponse", "ModelCallError",
           "as_response", "to_blocks", "blocks_text", "current_runtime", "using_runtime",
           "resolve_runtime", "check_timeout", "deadline_after", "check_iterations"]

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
            node.status, node.error = "error", _describe_error(exc)
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
# Runtime
# ---------------------------------------------------------------------------------------------


class Runtime(ModelCaller):
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
                 timeout: float | None = None, **mode_args) -> ModelResponse:
        """One model call. `messages` is a list of {"role": "user"|"assistant"|"tool", ...}:
        user messages carry "content" (blocks), assistant messages "content" (text) and
        "tool_calls", tool messages "tool_call_id", "name" and "content". An async model
        function is run to completion here (see `model.run_blocking`)."""
        out = self._invoke(messages, tools, timeout, mode_args)
        return as_response(run_blocking(out) if inspect.isawaitable(out) else out)

    async def acomplete(self, messages: list[dict], *, tools: list[dict] | None = None,
                        on_text: Callable[[str], None] | None = None,
                        timeout: float | None = None, **mode_args) -> ModelResponse:
        """`complete()` for async callers. An async model function is awaited on the caller's
        loop; a synchronous one (or a subclass that only overrides `complete`) runs in a worker
        thread so the loop keeps going. Runtimes with a native async client override this."""
        if self._call is not None and _is_async_callable(self._call):
            out = self._invoke(messages, tools, timeout, mode_args)
            return as_response(await out if inspect.isawaitable(out) else out)
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
            return _record_reply(node, resp), node

    async def acall_model(self, messages: list[dict], *, tools: list[dict] | None = None,
                          on_text: Callable[[str], None] | None = None,
                          deadline: float | None = None, label: str = "model_call",
                          **mode_args) -> tuple[ModelResponse, Node]:
        """`acomplete()` as a DAG node, with the time left before `deadline`."""
        timeout, prompt = _call_budget(messages, deadline)
        with self.dag.span("model_call", label, prompt=prompt) as node:
            resp = await self.acomplete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                        **_given(mode_args))
            return _record_reply(node, resp), node

    def exec(self, content, *, tools=None, toolset=None, choices=None, response_format=None,
             max_iterations: int = 20, timeout_s: float | None = None, context: dict | None = None,
             validate: Callable | None = None, reask: Any = None, mode: str = "menu"):
        """Run one turn. Returns the reply text; with `choices=`, the resolved decision (a
        `validate=` rule and a `reask=` text apply as in `decision.make`); with
        `response_format=`, the validated object."""
        return run_sync(self._exec(content, tools, toolset, choices, response_format,
                                   max_iterations, timeout_s, context, validate, reask, mode,
                                   sync=True))

    async def aexec(self, content, *, tools=None, toolset=None, choices=None,
                    response_format=None, max_iterations: int = 20,
                    timeout_s: float | None = None, context: dict | None = None,
                    validate: Callable | None = None, reask: Any = None, mode: str = "menu"):
        """`exec()` for async callers: model calls through `acall_model`, async tools and
        options awaited."""
        return await self._exec(content, tools, toolset, choices, response_format,
                                max_iterations, timeout_s, context, validate, reask, mode,
                                sync=False)

    async def _exec(self, content, tools, toolset, choices, response_format, max_iterations,
                    timeout_s, context, validate, reask, mode, *, sync: bool):
        check_iterations(max_iterations)
        reask = check_reask(reask)
        deadline = deadline_after(timeout_s)
        blocks = to_blocks(content)
        tool_list = _tools.collect(tools, toolset, context)
        if choices is not None and response_format is not None:
            raise ValueError("exec() takes choices= or response_format=, not both")
        if choices is not None:
            return await run_agent_decision(self, blocks, choices, tool_list, context=context,
                                            max_iterations=max_iterations, deadline=deadline,
                                            sync=sync, validate=validate, reask=reask,
                                            mode=mode)
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


def _call_budget(messages: list[dict], deadline: float | None) -> tuple[float | None, str | None]:
    """The seconds left before `deadline` (an error when none are), and the prompt text."""
    timeout = None
    if deadline is not None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ModelCallError("the time budget (timeout_s) ran out before this model call",
                                 kind="timeout")
    prompt = blocks_text(to_blocks(messages[-1]["content"])) if messages and \
        messages[-1].get("role") == "user" else None
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

    try:
        await _tools.tool_loop(d.runtime, [{"role": "user", "content": content}], tools,
                               max_iterations=max_iterations, deadline=d.deadline, call=d.call,
                               on_tool=on_tool, context=d.context, sync=d.sync,
                               stop_on=d.mode.ends_turn())
    except ModelCallError as exc:
        d.fail_with(ParseError(exc.kind, str(exc)), cause=exc)


async def run_agent_decision(rt: Runtime, blocks: list[dict], choices: Any, tools: list,
                             *, context: dict | None, max_iterations: int,
                             deadline: float | None, sync: bool = True,
                             validate: Callable | None = None, reask: Callable | None = None,
                             mode: Any = None):
    """`exec(choices=)` (E2): one turn with tools, then the last reply is the decision; one
    re-pick, fixed. In menu mode the finish instruction and the menu end the prompt; in the
    other modes the choices travel as tools or as the schema."""
    menu = normalize(choices)
    check_context(menu, context)
    way = get_mode(mode)(menu)
    check_modes(rt, way.name)
    menu_text = render_menu(menu)
    request = blocks_text(blocks)
    turn = _append_text(blocks, DECISION_FINISH_INSTRUCTION + "\n\n" + menu_text) \
        if isinstance(way, MenuMode) else blocks
    with rt.dag.span("decision", "agent(choices=)"):
        d = Decider(rt, menu, request=request, context=context, max_attempts=2, entry="agent",
                    deadline=deadline, menu_text=menu_text, sync=sync, validate=validate,
                    reask=reask, mode=way)
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
    turn = _append_text(blocks, menu_text) if isinstance(way, MenuMode) else blocks

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
