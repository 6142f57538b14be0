"""Native tools: what `tools=` / `toolset=` name, their specs, and the tool-call loop.

A tool is any named callable; its spec (name, description, JSON Schema of its parameters) comes
from the same signature reading as a decision's function options, so one Agent method serves both
call paths. `toolset=` names a set of tools:
- `"default"`: the `tool: True` methods of the Agent whose method is running (minus that method
  itself); outside any Agent call it is empty;
- an Agent instance: its `tool: True` methods;
- a name given to `register_toolset(name, tools)`;
- a list of callables.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from ..base.errors import ArgumentError, AttemptError, ModelCallError, OptionError, UsageError
from ..base.model_protocol import current_agent, running_tool, settle_value
from ..decision.options import (
    Param,
    call_function,
    check_hidden,
    function_params,
    normalize,
    validate,
)
from ..decision.options.tool_definitions import ToolDefinition

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any


@dataclass
class Tool:
    name: str
    fn: Callable
    description: str
    # a tool definition's option (its JSON Schema checks the arguments, as on a menu); else the
    # parameters are read from fn's signature
    option: Any = None
    params: list[Param] = field(init=False)

    def __post_init__(self):
        self.params = list(self.option.params) if self.option is not None else \
            function_params(self.fn, f"tool {self.name!r}")

    def spec(self) -> dict:
        if self.option is not None:
            schema = self.option.json_schema()
            schema.pop("description", None)  # the tool's own, beside the parameters
            return {"name": self.name, "description": self.description, "parameters": schema}
        llm = [p for p in self.params if p.source == "llm"]
        return {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object",
                           "properties": {p.name: p.field.json_schema() for p in llm},
                           "required": [p.name for p in llm if p.required]},
        }


_toolsets: dict[str, list[Callable]] = {}


def register_toolset(name: str, tools: list[Callable]) -> None:
    """Give a list of tools a name usable as `toolset=name`."""
    if name == "default":
        raise ArgumentError("'default' is reserved: it means the running Agent's tool methods")
    _toolsets[name] = list(tools)


def _as_tool(fn: Any) -> Tool:
    if isinstance(fn, Tool):
        return fn
    if isinstance(fn, ToolDefinition):
        # a tool definition with its function (an MCP server's tool, `tool(definition, fn)`):
        # its parameters are its schema's, its function takes them as keywords
        if fn.fn is None:
            raise UsageError(f"tool {fn.name!r} is a definition without a function, so it "
                             f"cannot run as a work tool: give one, tool(definition, fn)")
        (option,) = list(normalize([fn]))
        return Tool(fn.name, fn.fn, fn.description or "", option=option)
    if not callable(fn):
        raise UsageError(f"a tool must be callable, got {fn!r}")
    name = getattr(fn, "__name__", None)
    if not name or name == "<lambda>":
        raise UsageError(f"tool {fn!r} has no name; use a def")
    doc = (getattr(fn, "__doc__", None) or "").strip().split("\n\n")[0].replace("\n", " ")
    return Tool(name, fn, doc)


def _toolset(toolset: Any) -> list[Callable]:
    if toolset is None:
        return []
    if isinstance(toolset, str):
        if toolset == "default":
            ag, running = current_agent()
            return [] if ag is None else [t for t in ag.tool_methods() if t.__name__ != running]
        if toolset not in _toolsets:
            raise ArgumentError(f"unknown toolset {toolset!r}; known: {sorted(_toolsets) or 'none'}"
                             f" (register one with register_toolset(name, tools), or pass "
                             f"'default', an Agent or a list of functions)")
        return _toolsets[toolset]
    if callable(getattr(toolset, "tool_methods", None)):  # an Agent (a layer above this one)
        return toolset.tool_methods()
    if isinstance(toolset, (list, tuple)):
        return list(toolset)
    raise UsageError(f"toolset= takes 'default', a registered name, an Agent or a list of "
                    f"functions; got {type(toolset).__name__}")


def collect(tools: Any, toolset: Any, context: dict | None = None) -> list[Tool]:
    """The tools of one turn, by name; a name may appear once. A hidden parameter without a
    default must have its value in `context` (checked here, before any model call)."""
    if tools is not None and not isinstance(tools, (list, tuple)):
        tools = [tools]
    out: dict[str, Tool] = {}
    for fn in list(tools or []) + _toolset(toolset):
        t = _as_tool(fn)
        if t.name in out and out[t.name].fn != t.fn:
            raise ArgumentError(f"two different tools are named {t.name!r}; rename one")
        out[t.name] = t
    for t in out.values():
        check_hidden(f"tool {t.name!r}", t.params, context)
    return list(out.values())


async def run_tool(tool: Tool, args: Any, runtime: Any, context: dict | None = None,
                   sync: bool = True) -> tuple[Any, str | None]:
    """Run a tool the model asked for: its hidden parameters come from `context` (never from
    the model), its runtime parameters are the Runtime. Bad arguments and exceptions become an
    error text that goes back to the model (as providers do), never a crash of the turn."""
    if not isinstance(args, dict):
        return None, f"arguments must be a JSON object, got {type(args).__name__}"
    if tool.option is not None:  # a tool definition: its schema checks the whole object
        try:
            kwargs, _ = tool.option.bind(args, runtime=runtime, context=context or {},
                                         dropped=[], injected=[], prefix="arguments")
            with running_tool(runtime):  # a live tool records (or replays) its result
                value = tool.option.resolve(kwargs)
            return await settle_value(value, sync), None
        except (AttemptError, OptionError) as exc:
            return None, str(exc)
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"
    try:
        kwargs, dropped = {}, []
        for p in tool.params:
            if p.source == "runtime":
                kwargs[p.name] = runtime
            elif p.source == "context":
                if p.name in (context or {}):
                    kwargs[p.name] = context[p.name]
            elif p.source == "llm" and p.name in args:
                kwargs[p.name] = validate(args[p.name], p.field, p.name, dropped)
            elif p.source == "llm" and p.required:
                return None, f"missing required argument {p.name!r}"
        with running_tool(runtime):  # a live tool records (or replays) its result
            value = call_function(tool.fn, kwargs)
        return await settle_value(value, sync), None
    except (AttemptError, OptionError) as exc:
        return None, str(exc)
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def result_text(result: Any, error: str | None) -> str:
    if error is not None:
        return f"Error: {error}"
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(result)


async def tool_loop(runtime, messages: list[dict], tools: list[Tool], *, max_iterations: int,
                    deadline: float | None, call: Callable | None = None,
                    on_tool: Callable | None = None, context: dict | None = None,
                    sync: bool = True, stop_on: frozenset = frozenset()):
    """Call the model; while it asks for tools, run them and send their results back.
    Returns (final ModelResponse, number of model calls). `call(messages, specs)` is a
    coroutine function making one model call (the runtime's, by default); `sync` says how.
    A reply that calls any tool named in `stop_on` ends the loop (the caller reads it)."""
    specs = [t.spec() for t in tools] or None
    by_name = {t.name: t for t in tools}

    async def default_call(msgs, specs):
        if sync:
            return runtime.call_model(msgs, tools=specs, deadline=deadline)[0]
        return (await runtime.acall_model(msgs, tools=specs, deadline=deadline))[0]
    call = call or default_call
    rounds = 0
    for n in range(1, max_iterations + 1):
        resp = await call(messages, specs)
        if not resp.tool_calls or any(tc.name in stop_on for tc in resp.tool_calls):
            return resp, n
        messages.append({"role": "assistant", "content": resp.text if isinstance(resp.text, str)
                         else "", "tool_calls": resp.tool_calls,
                         # a provider's own blocks (a native tool search) go back as they came
                         **({"content_blocks": resp.content_blocks}
                            if getattr(resp, "content_blocks", None) else {})})
        for i, tc in enumerate(resp.tool_calls):
            tc.id = tc.id or f"call_{n}_{i}"
            tool = by_name.get(tc.name)
            t0 = time.perf_counter()
            if tool is None:
                result, error = None, (f"there is no tool named {tc.name!r}; the tools are "
                                       f"{sorted(by_name) or 'none'}")
            else:
                with runtime.dag.span("tool", tc.name):
                    result, error = await run_tool(tool, tc.args, runtime, context, sync)
            rounds += 1
            if on_tool is not None:
                on_tool(rounds, tc, result, error, time.perf_counter() - t0)
            messages.append({"role": "tool", "tool_call_id": tc.id, "name": tc.name,
                             "content": result_text(result, error)})
    raise ModelCallError(f"the model was still calling tools after max_iterations="
                         f"{max_iterations} model calls; raise max_iterations or offer fewer "
                         f"tools", kind="model_error")
