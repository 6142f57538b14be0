"""`@agentic_function`: the original OpenProgram's decorator, binding a Runtime for one call.

Code written for the original project marks the functions that talk to a model with
`@agentic_function` (or `@agentic_function(...)`) and passes the Runtime once, at the outermost
call: `research("topic", runtime=rt)`. Every decorated function called inside — and
`decision.make` / `agent()` themselves — then finds it without being handed it, exactly as inside
an Agent method (rule E3): a call with `runtime=` binds that Runtime for the function's body, a
call without it keeps the caller's binding, and with none anywhere the entries raise E3's
`RuntimeError` (the original would create a Runtime from its provider registry; this project has
none). A parameter named `runtime`, `exec_runtime` or `review_runtime` that the function declares
receives the bound Runtime when the caller leaves it out. Unlike the original, the decorator
returns a plain function, so it can also be an Agent method, a decision option or a native tool.
"""
from __future__ import annotations

import contextlib
import functools
import inspect

from ..base.errors import ArgumentError, UsageError
from ..decision.options import RUNTIME_PARAM_NAMES
from .agent import current_agent
from .runtime import Runtime, current_runtime, resolve_runtime, using_runtime

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["agentic_function"]

_EXPOSE = ("io", "llm", "full", "hidden")

# Arguments of the original decorator that act on its tool registry, its context window, its
# cache or the model's system prompt. Ignoring them would silently change what runs or what the
# model is sent, so they are refused by name instead.
_NOT_HERE = frozenset({
    "no_tools", "system", "parameters", "toolset", "unsafe_in", "check_fn", "requires_env",
    "can_use", "max_result_chars", "persist_full", "head_ratio", "requires_approval", "cache",
    "cache_ttl", "timeout", "available_if", "defer", "register_globally"})
_TAKES = "expose, input, name, description, render_range, as_tool, label"


def agentic_function(fn: Callable | None = None, /, *, expose: str = "io",
                     input: dict | None = None, name: str | None = None,
                     description: str | None = None, render_range: dict | None = None,
                     as_tool: bool = True, label: str | None = None, **unsupported: Any):
    """Decorate a function so that a call with `runtime=` binds that Runtime for its body.

    `@agentic_function` and `@agentic_function(...)` both work. Of the original's arguments:
    `input` is the parameters' `input_meta` (rule A8: descriptions, allowed values, hidden);
    `name` and `description` are what menus and tool lists call and describe the function;
    `expose="hidden"` keeps the call out of the DAG (every other value records it, as the
    original does); `render_range`, `as_tool` and `label` are kept as attributes and change
    nothing here — there is no conversation history to slice, no global tool registry, no web UI.
    The original's other arguments raise `TypeError`.
    """
    if unsupported:
        names = sorted(unsupported)
        theirs = [n for n in names if n in _NOT_HERE]
        if theirs:
            raise UsageError(
                f"agentic_function({', '.join(f'{n}=...' for n in theirs)}): the original "
                f"OpenProgram's decorator takes {'this' if len(theirs) == 1 else 'these'}, "
                f"this project does not (it has no tool registry, result cache, system-prompt "
                f"stamping or call gating), and ignoring {'it' if len(theirs) == 1 else 'them'} "
                f"would change what runs; remove {'it' if len(theirs) == 1 else 'them'}. "
                f"It takes {_TAKES}.")
        raise UsageError(f"agentic_function() got unexpected keyword argument(s) {names}; it "
                        f"takes {_TAKES}")
    if expose not in _EXPOSE:
        raise ArgumentError(f"expose must be one of {', '.join(map(repr, _EXPOSE))}, got "
                         f"{expose!r}")
    if input is not None and not isinstance(input, dict):
        raise UsageError(f"input= must be a dict {{param: {{'description': ..., 'options': [...], "
                        f"'hidden': True}}}}, got {type(input).__name__}")
    for arg, value in (("name", name), ("description", description), ("label", label)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UsageError(f"{arg}= must be a non-empty string, got {value!r}")

    def decorate(f: Callable) -> Callable:
        return _decorate(f, expose=expose, input=input, name=name, description=description,
                         extras={"render_range": render_range, "as_tool": as_tool,
                                 "label": label})

    if fn is None:
        return decorate
    if not callable(fn):
        raise UsageError(f"@agentic_function decorates a function, got {fn!r}; to pass options, "
                        f"write them as keywords: @agentic_function(expose=...)")
    return decorate(fn)


def _decorate(fn: Callable, *, expose: str, input: dict | None, name: str | None,
              description: str | None, extras: dict) -> Callable:
    what = getattr(fn, "__name__", None) or repr(fn)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        # Its body runs after the call has returned, where the binding is gone.
        raise UsageError(f"@agentic_function cannot bind a Runtime across the yields of the "
                        f"generator {what}(); return a list, or pass runtime= to the calls "
                        f"inside it")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"@agentic_function needs a function with a readable signature; "
                        f"{fn!r} has none ({exc})") from None
    declared = [p for p in sig.parameters.values() if p.name in RUNTIME_PARAM_NAMES and
                p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    shown = name or what
    takes_runtime = any(p.name == "runtime" for p in declared)

    def prepare(args: tuple, kwargs: dict) -> tuple[tuple, dict, Runtime | None]:
        """The arguments to call `fn` with, and the Runtime to bind around the call."""
        given = None
        if not takes_runtime:
            kwargs = dict(kwargs)
            given = kwargs.pop("runtime", None)    # ours to bind; fn never asked for it
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError as exc:
            raise UsageError(f"{shown}(): {exc}") from None
        passed = {p.name: bound.arguments.get(p.name) for p in declared}
        if takes_runtime:
            given = passed["runtime"]
        for value in (given, *passed.values()):
            if value is not None:
                resolve_runtime(value, f"{shown}()")   # a TypeError naming the fix
        rt = given or current_runtime() or next(
            (v for v in passed.values() if v is not None), None)
        for p in declared:
            if passed[p.name] is not None:
                continue
            if rt is not None:
                bound.arguments[p.name] = rt
            elif p.default is p.empty:
                resolve_runtime(None, f"{shown}()")     # E3's RuntimeError, with the fix
        return bound.args, bound.kwargs, rt

    def scope(rt: Runtime | None, args: tuple) -> contextlib.AbstractContextManager:
        if rt is None:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(using_runtime(rt))
        ag, method = current_agent()
        # As an Agent method, the Agent's own wrapper has recorded this call already.
        is_method_itself = ag is not None and args and args[0] is ag and method == what
        if expose != "hidden" and not is_method_itself:
            stack.enter_context(rt.dag.span("agentic_function", shown))
        return stack

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def call_async(*args, **kwargs):
            # Inside the coroutine: the binding holds across every await of the body.
            call_args, call_kwargs, rt = prepare(args, kwargs)
            with scope(rt, call_args):
                return await fn(*call_args, **call_kwargs)
        wrapper = call_async
    else:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            call_args, call_kwargs, rt = prepare(args, kwargs)
            with scope(rt, call_args):
                return fn(*call_args, **call_kwargs)
        wrapper = call

    if input is not None:
        wrapper.input_meta = dict(input)
    if name is not None:
        wrapper.__name__ = name
    if description is not None:
        wrapper.__doc__ = description
    wrapper.expose = expose
    for key, value in extras.items():
        setattr(wrapper, key, value)
    wrapper._is_agentic = True
    return wrapper
