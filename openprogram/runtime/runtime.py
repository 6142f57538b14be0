"""The Runtime: the one place that talks to a model.

`Runtime(call=fn)` wraps any text model. `exec()` runs one turn: a plain reply, a native tool-call
loop (`tools=` / `toolset=`), a decision at the end of the turn (`options=`), or a reply parsed
against a schema (`response_format=`). Every model call and every Agent method call is a node of
the runtime's DAG (`dag`). Concrete runtimes (scripted, OpenAI, Anthropic, cassettes) override
`complete()`; a new runtime plugs in by subclassing `Runtime` and overriding `complete()` (see
docs/architecture.md). Calling the user's function lives in `calls`, the turns that end in a
decision or a format in `turns`; this module re-exports the names the concrete runtimes import.
"""
from __future__ import annotations

import inspect
import time

from ..base.errors import ModelCallError, UsageError, WaitTimeout
from ..base.model_protocol import (
    ModelCaller,
    ModelResponse,
    OnLoop,
    ToolCall,
    blocks_text,
    check_iterations,
    check_timeout,
    current_runtime,
    deadline_after,
    resolve_runtime,
    run_blocking,
    run_sync,
    to_blocks,
    using_runtime,
)
from ..decision.settings import TURN, Settings, takes_settings
from .calls import (
    accepted_kwargs,
    as_response,
    call_budget,
    check_takes_content,
    flatten_messages,
    grace_after,
    is_async_callable,
    record_reply,
    timed_out,
    within,
)
from .dag import DAG, DEFAULT_WINDOW, Node, Window, current_node_var
from .turns import run_agent_decision, run_format

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["Runtime", "DAG", "Node", "Window", "DEFAULT_WINDOW", "ToolCall", "ModelResponse",
           "ModelCallError", "as_response", "to_blocks", "blocks_text", "current_runtime",
           "using_runtime", "resolve_runtime", "check_timeout", "deadline_after",
           "check_iterations", "current_node_var", "timed_out"]


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
            check_takes_content(call)
        self._accepts = accepted_kwargs(call) if call is not None else set()
        self._async_call = call is not None and is_async_callable(call)

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
                                   else time.monotonic() + timeout + grace_after(timeout))
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
            if not inspect.isawaitable(out):
                return as_response(out)
            # no budget: the model awaited as it is (within() would only add a frame)
            return as_response(await out if timeout is None else
                               await within(out, timeout, "timeout" in self._accepts))
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
        return self._call(flatten_messages(messages), **kwargs)

    # -- calls made by the mechanism ------------------------------------------------------------
    def call_model(self, messages: list[dict], *, tools: list[dict] | None = None,
                   on_text: Callable[[str], None] | None = None,
                   deadline: float | None = None, label: str = "model_call",
                   **mode_args) -> tuple[ModelResponse, Node]:
        """`complete()` as a DAG node, with the time left before `deadline`. `mode_args` are
        what a way of asking adds (`tools=` come with `tool_choice=`, or `response_format=`);
        they reach `complete()` only when given, so a runtime that does only the menu mode
        needs no parameter for them."""
        timeout, prompt = call_budget(messages, deadline)
        span = self.dag.span("model_call", label, prompt=prompt)
        with span as node:
            if span.run is None:
                resp = self.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                     **_given(mode_args))
            else:  # a run records the call (a fork may answer it) on the node it made
                resp = span.run.model_call(self, span.run_token, messages, tools, on_text,
                                           timeout, _given(mode_args))
            # a synchronous model cannot be stopped part-way: a reply that came after the
            # budget ran out is not used, whatever the model did with the timeout it was given
            # (past the same moment of grace `within` leaves)
            if deadline is not None and time.monotonic() > deadline + grace_after(timeout):
                raise timed_out(timeout, returned=True)
            return record_reply(node, resp), node

    async def acall_model(self, messages: list[dict], *, tools: list[dict] | None = None,
                          on_text: Callable[[str], None] | None = None,
                          deadline: float | None = None, label: str = "model_call",
                          **mode_args) -> tuple[ModelResponse, Node]:
        """`acomplete()` as a DAG node, with the time left before `deadline`."""
        timeout, prompt = call_budget(messages, deadline)
        span = self.dag.span("model_call", label, prompt=prompt)
        with span as node:
            run = span.run  # a run records the call (a fork may answer it)
            if run is None and timeout is None and self._async_call and \
                    type(self).acomplete is _ACOMPLETE and "acomplete" not in self.__dict__:
                # what acomplete() does for an async model with no budget, without its frame
                out = self._invoke(messages, tools, None, _given(mode_args))
                resp = as_response(await out if inspect.isawaitable(out) else out)
                return record_reply(node, resp), node
            # every model, whether or not it takes a timeout: cancelled when the budget is out
            asked = self.acomplete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                   **_given(mode_args)) if run is None else \
                run.amodel_call(self, span.run_token, messages, tools, on_text, timeout,
                                _given(mode_args))
            resp = await (asked if timeout is None else within(asked, timeout, grace=True))
            return record_reply(node, resp), node

    @takes_settings(TURN)
    def exec(self, content, *, tools=None, toolset=None, options=None, response_format=None,
             max_iterations: int = 20, choices=None, **settings):
        """Run one turn. Returns the reply text; with `options=` (an option set, as in
        `decision.make`; `choices=` is its older name), the resolved decision, its settings as
        in `decision.make` (one re-pick, fixed); with `response_format=`, the validated
        object."""
        return run_sync(self._exec(content, tools, toolset, option_set(options, choices, "exec"),
                                   response_format, max_iterations,
                                   Settings.of(settings, "exec", TURN), sync=True))

    @takes_settings(TURN)
    async def aexec(self, content, *, tools=None, toolset=None, options=None,
                    response_format=None, max_iterations: int = 20, choices=None, **settings):
        """`exec()` for async callers: model calls through `acall_model`, async tools and
        options awaited."""
        return await self._exec(content, tools, toolset, option_set(options, choices, "aexec"),
                                response_format, max_iterations,
                                Settings.of(settings, "aexec", TURN), sync=False)

    async def _exec(self, content, tools, toolset, options, response_format, max_iterations,
                    settings: Settings, *, sync: bool, where: str = "agent"):
        """One turn with `settings` (checked by the entry point that was called)."""
        check_iterations(max_iterations)
        deadline = deadline_after(settings.timeout_s)
        blocks = to_blocks(content)
        from . import tools as _tools  # loaded with the first exec(), not with openprogram
        tool_list = _tools.collect(tools, toolset, settings.context)
        if options is not None and response_format is not None:
            raise ValueError("exec() takes options= or response_format=, not both: options= "
                             "ends the turn with a pick, response_format= with a filled "
                             "object; drop one")
        if options is not None:
            return await run_agent_decision(self, blocks, options, tool_list, settings,
                                            max_iterations=max_iterations, deadline=deadline,
                                            sync=sync, where=where)
        if settings.confidence.asks or settings.min_confidence is not None:
            raise UsageError("exec(confidence=..., min_confidence=...) applies to a decision: "
                             "pass options= as well")
        if response_format is not None:
            return await run_format(self, blocks, response_format, tool_list, settings,
                                    max_iterations=max_iterations, deadline=deadline, sync=sync)
        resp, _ = await _tools.tool_loop(self, [{"role": "user", "content": blocks}], tool_list,
                                         max_iterations=max_iterations, deadline=deadline,
                                         context=settings.context, sync=sync)
        return resp.text


_ACOMPLETE = Runtime.acomplete


def _given(mode_args: dict) -> dict:
    return {k: v for k, v in mode_args.items() if v is not None}

