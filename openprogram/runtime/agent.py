"""`Agent` and `agent()`: binding a Runtime to every method call.

A subclass of `Agent` declares `method_options = {"name": {"tool": True, "input": {...}}}`. Every
public method call binds a Runtime — the instance's own (`SomeAgent(runtime=rt)`), else the
caller's — in a context variable, so `decision.make` and `agent()` inside it need no `runtime=`.
Context variables follow nested calls and asyncio tasks; `bind_context(fn)` (or
`asyncio.to_thread`) carries them into a worker thread. A `tool: True` method is both a native tool
and a decision option: the same function, two call paths.
"""
from __future__ import annotations

import contextvars
import functools
import inspect

from ..base.errors import UsageError
from ..base.model_protocol import (
    ModelCaller,
    current_agent,
    current_agent_var,
    current_runtime_var,
    resolve_runtime,
    run_sync,
)
from ..decision.settings import AGENT, Settings, takes_settings
from .runtime import Runtime, option_set

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import Unpack

    from ..base.type_names import Options
    from ..decision.settings import Keywords
    T = TypeVar("T")

__all__ = ["Agent", "agent", "aagent", "bind_context", "current_agent"]


def bind_context(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` wrapped to run in a copy of the caller's context (its Runtime, Agent and observers),
    for handing to a thread: `threading.Thread(target=bind_context(work))`."""
    ctx = contextvars.copy_context()

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        return ctx.copy().run(fn, *args, **kwargs)
    return run


def _bind(name: str, fn: Callable[..., Any], meta: dict[str, Any]) -> Callable[..., Any]:
    """Wrap an Agent method so that each call binds the Runtime and is a DAG node."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_method(self: Agent, *args: Any, **kwargs: Any) -> Any:
            rt, tokens = self._enter(name)
            try:
                if rt is None:
                    return await fn(self, *args, **kwargs)
                with rt.dag.span("agent_method", f"{type(self).__name__}.{name}"):
                    return await fn(self, *args, **kwargs)
            finally:
                self._leave(tokens)
        wrapper: Any = async_method
    else:
        @functools.wraps(fn)
        def method(self: Agent, *args: Any, **kwargs: Any) -> Any:
            rt, tokens = self._enter(name)
            try:
                if rt is None:
                    return fn(self, *args, **kwargs)
                with rt.dag.span("agent_method", f"{type(self).__name__}.{name}"):
                    return fn(self, *args, **kwargs)
            finally:
                self._leave(tokens)
        wrapper = method
    wrapper.input_meta = dict(meta.get("input") or {})
    wrapper.is_tool = bool(meta.get("tool"))
    wrapper._openprogram_bound = True
    bound: Callable[..., Any] = wrapper  # Any only to carry the marks above
    return bound


class Agent:
    """Base class of agents. `SomeAgent(runtime=rt)` configures the Runtime its methods use; with
    none, a method uses the Runtime of the Agent method that called it."""

    method_options: dict[str, dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        opts = cls.__dict__.get("method_options", {})
        for name in opts:
            if not callable(cls.__dict__.get(name)) and not any(
                    callable(getattr(b, name, None)) for b in cls.__mro__[1:]):
                raise UsageError(f"{cls.__name__}.method_options names {name!r}, which is not a "
                                f"method of {cls.__name__}; fix the name")
            bad = set(opts[name]) - {"tool", "input", "description"}
            if bad:
                raise UsageError(f"{cls.__name__}.method_options[{name!r}] has unknown keys "
                                f"{sorted(bad)}; use 'tool', 'input' and 'description'")
        for name, fn in list(cls.__dict__.items()):
            if name.startswith("_") or not inspect.isfunction(fn) or \
                    getattr(fn, "_openprogram_bound", False):
                continue
            meta = cls._options_for(name)
            wrapped = _bind(name, fn, meta)
            if meta.get("description"):
                wrapped.__doc__ = meta["description"]
            setattr(cls, name, wrapped)

    @classmethod
    def _options_for(cls, name: str) -> dict[str, Any]:
        for klass in cls.__mro__:
            opts = klass.__dict__.get("method_options", {})
            if name in opts:
                found: dict[str, Any] = opts[name]
                return found
        return {}

    def __init__(self, runtime: Runtime | None = None) -> None:
        if runtime is not None and not isinstance(runtime, Runtime):
            raise UsageError(f"runtime= must be an openprogram Runtime, got "
                            f"{type(runtime).__name__}; wrap a model with Runtime(call=fn)")
        self.runtime = runtime

    def _enter(self, name: str) -> tuple[Any, tuple[Any, Any]]:
        rt = getattr(self, "runtime", None) or current_runtime_var.get()
        return rt, (current_runtime_var.set(rt), current_agent_var.set((self, name)))

    @staticmethod
    def _leave(tokens: tuple[Any, Any]) -> None:
        rt_token, agent_token = tokens
        current_agent_var.reset(agent_token)
        current_runtime_var.reset(rt_token)

    def tool_methods(self) -> list[Callable[..., Any]]:
        """The bound methods declared `tool: True` in method_options."""
        return [getattr(self, name) for name in dir(type(self))
                if not name.startswith("_") and getattr(getattr(type(self), name, None),
                                                        "is_tool", False)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(runtime={self.runtime!r})"


@takes_settings(AGENT)
def agent(prompt: Any, *, tools: Any = None, toolset: Any = None, options: Options | None = None,
          response_format: Any = None, max_iterations: int = 20,
          choices: Options | None = None, **settings: Unpack[Keywords]) -> Any:
    """A full turn (rule E2 of docs/rules.md) on the bound Runtime: reasoning and native tool
    calls from `tools` / `toolset`. Returns the reply text; with `options=` (an option set, as
    in `decision.make`; `choices=` is its older name and still works), the resolved decision,
    its settings as in `decision.make` (one re-pick, fixed)."""
    options = option_set(options, choices, "agent")
    checked = Settings.of(settings, "agent", AGENT)
    rt = _turn_runtime(checked.runtime, "agent()")
    return run_sync(rt._exec(prompt, tools, toolset, options, response_format, max_iterations,
                             checked, sync=True))


@takes_settings(AGENT)
async def aagent(prompt: Any, *, tools: Any = None, toolset: Any = None,
                 options: Options | None = None, response_format: Any = None,
                 max_iterations: int = 20, choices: Options | None = None,
                 **settings: Unpack[Keywords]) -> Any:
    """`agent()`, awaitable (`Runtime.aexec`): async models, tools and options are awaited."""
    options = option_set(options, choices, "aagent")
    checked = Settings.of(settings, "aagent", AGENT)
    rt = _turn_runtime(checked.runtime, "aagent()")
    return await rt._exec(prompt, tools, toolset, options, response_format, max_iterations,
                          checked, sync=False)


def _turn_runtime(runtime: ModelCaller | None, where: str) -> Runtime:
    """The Runtime a turn runs on. `resolve_runtime` promises only a model caller (what a
    decision needs); a turn needs `exec`, which only a Runtime has."""
    rt = resolve_runtime(runtime, where)
    if not isinstance(rt, Runtime):
        raise UsageError(f"{where} runs a whole turn, which needs an openprogram Runtime, got "
                         f"{type(rt).__name__}; wrap the model with Runtime(call=fn)")
    return rt
