"""Calling a user's model function: what it accepts (`tools=`, `messages=`, `timeout=`), the time
budget of one call (`within`, `timed_out`), and what it returned turned into a `ModelResponse`
(`as_response`) and written on the call's DAG node.
"""
from __future__ import annotations

import inspect
import time

from ..base.errors import ModelCallError, UsageError
from ..base.model_protocol import ModelResponse, ToolCall, blocks_text, to_blocks

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

    from .dag import Node

def timed_out(timeout: float | None, returned: bool = False) -> ModelCallError:
    """The error of a model call that the time budget (timeout_s) ended."""
    left = "" if timeout is None else f" ({timeout:.3g}s were left for this call)"
    how = "answered after" if returned else "did not answer before"
    return ModelCallError(f"the model {how} the time budget (timeout_s) ran out{left}; raise "
                          f"timeout_s, or make the model answer sooner", kind="timeout")


def grace_after(timeout: float | None) -> float:
    return 0.1 + 0.05 * max(timeout or 0, 0)


async def within(awaitable: Any, timeout: float | None, grace: bool = False) -> Any:
    """`await awaitable`, cancelled after `timeout` seconds (None: no bound) with the
    time budget's `ModelCallError`. With `grace`, a little later (a tenth of a second and 5%):
    a runtime that was given the timeout and stops itself (keeping the partial reply, saying
    how many tokens it wrote) does so first, and one that does not is stopped all the same."""
    if timeout is None:
        return await awaitable
    import asyncio
    wait = max(timeout, 0) + (grace_after(timeout) if grace else 0)
    try:
        return await asyncio.wait_for(awaitable, wait)
    except asyncio.TimeoutError:
        raise timed_out(timeout) from None


def call_budget(messages: list[dict], deadline: float | None) -> tuple[float | None, str | None]:
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


def record_reply(node: Node, resp: Any) -> ModelResponse:
    if not isinstance(resp, ModelResponse):
        resp = as_response(resp)
    node.reply = resp.text if isinstance(resp.text, str) else repr(resp.text)
    if resp.usage:
        node.input_tokens = resp.usage.get("input_tokens")
        node.output_tokens = resp.usage.get("output_tokens")
    return resp


def is_async_callable(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or \
        inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 (the method)


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


def flatten_messages(messages: list[dict]) -> list[dict]:
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


def check_takes_content(fn: Callable) -> None:
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


def accepted_kwargs(fn: Callable) -> set[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return {"tools", "messages", "timeout"}
    return {p.name for p in params}

