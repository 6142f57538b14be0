"""`AnthropicRuntime`: Claude models through the Anthropic messages API.

Built on the official `anthropic` SDK (`pip install 'openprogram-decisions[anthropic]'`),
imported when a runtime is created. The key comes from `api_key=` or the `ANTHROPIC_API_KEY` environment variable.

    from openprogram.runtimes import AnthropicRuntime
    rt = AnthropicRuntime(model="claude-sonnet-4-5")              # api.anthropic.com
    rt = AnthropicRuntime(model="...", base_url="http://localhost:4000")   # a gateway or proxy
                                                                  # that speaks the messages API

Local servers (Ollama, vLLM, llama.cpp, LM Studio) are reached with `OpenAIRuntime(base_url=...)`,
the protocol they all speak; see `openprogram.runtimes.openai_runtime`.

The core's conversation is translated to the messages protocol: user text blocks, assistant
`text` + `tool_use` blocks, and each round's tool results as `tool_result` blocks in one user
message; tools are offered as `{name, description, input_schema}`. Replies stream by default
(`stream=True`): `text_delta`s reach `on_text` as they arrive, `input_json_delta`s build the tool
calls, and token usage comes from `message_start` and `message_delta`. `max_tokens` (default 4096)
is required by the API; `system=` sets the system prompt; other keyword arguments
(`temperature=`, `top_p=`, ...) are sent with every request. `max_retries` (default 2) is the
SDK's retry policy (429, 5xx, overloaded, connection errors), bounded by the decision's
`timeout_s`.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ..agentic_programming.runtime import ModelCallError, ModelResponse, to_blocks
from ._provider import DeadlineExceeded, ProviderRuntime, _Malformed, json_args, tc_parts, tool_call


class AnthropicRuntime(ProviderRuntime):
    """`AnthropicRuntime(model="claude-sonnet-4-5", base_url=None, api_key=None, stream=True,
    max_retries=2, timeout=None, system=None, max_tokens=4096, **request_options)`."""

    provider = "Anthropic"
    env_key = "ANTHROPIC_API_KEY"
    sdk_name = "anthropic"
    extra = "anthropic"
    client_class = "Anthropic"
    end_marker = "message_stop"
    example_model = "claude-sonnet-4-5"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, max_retries: int = 2, timeout: float | None = None,
                 system: str | None = None, max_tokens: int = 4096, name: str | None = None,
                 **request_options: Any):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number >= 1, got {max_tokens!r}")
        self.max_tokens = max_tokens
        super().__init__(model, base_url=base_url, api_key=api_key, stream=stream,
                         max_retries=max_retries, timeout=timeout, system=system, name=name,
                         **request_options)

    def _create(self):
        return self._client.messages.create

    # -- the request --------------------------------------------------------------------------
    def _request(self, messages: list[dict], tools: list[dict] | None) -> dict:
        kwargs: dict = {"max_tokens": self.max_tokens, **self.request_options,
                        "model": self.model, "messages": to_anthropic_messages(messages)}
        if self.system:
            kwargs["system"] = self.system
        if tools:
            kwargs["tools"] = [to_anthropic_tool(t) for t in tools]
        if self.stream:
            kwargs["stream"] = True
        return kwargs

    # -- the reply ----------------------------------------------------------------------------
    def _complete_once(self, kwargs: dict) -> ModelResponse:
        r = self._create()(**kwargs)
        content = getattr(r, "content", None)
        if content is None:
            raise _Malformed("the response has no content")
        text = "".join(b.text for b in content if getattr(b, "type", None) == "text")
        calls = [tool_call(b.name, b.input, b.id) for b in content
                 if getattr(b, "type", None) == "tool_use"]
        return ModelResponse(text=text, tool_calls=calls, usage=_usage(getattr(r, "usage", None)),
                             model=getattr(r, "model", None) or self.model)

    def _complete_stream(self, kwargs: dict, emit: Callable[[str], None],
                         deadline: float | None) -> ModelResponse:
        stream = self._create()(**kwargs)
        emit("")  # the server answered: a failure from here on is mid-reply
        text: list[str] = []
        blocks: dict[int, dict] = {}
        usage: dict = {}
        model = None
        finished = False
        with stream:
            for event in stream:
                kind = getattr(event, "type", None)
                if kind == "message_start":
                    model = getattr(event.message, "model", None)
                    usage.update(_usage(event.message.usage) or {})
                elif kind == "content_block_start":
                    b = event.content_block
                    if b.type == "tool_use":
                        blocks[event.index] = {"id": b.id, "name": b.name, "json": ""}
                elif kind == "content_block_delta":
                    d = event.delta
                    if d.type == "text_delta":
                        text.append(d.text)
                        emit(d.text)
                    elif d.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index]["json"] += d.partial_json
                elif kind == "message_delta":
                    u = getattr(event, "usage", None)
                    if u is not None:  # cumulative counts: the latest wins
                        if getattr(u, "output_tokens", None) is not None:
                            usage["output_tokens"] = u.output_tokens
                        if getattr(u, "input_tokens", None) is not None:
                            usage["input_tokens"] = _input_tokens(u)
                elif kind == "message_stop":
                    finished = True
                if deadline is not None and time.monotonic() > deadline:
                    raise DeadlineExceeded()
        if not finished:
            raise self._incomplete(text)
        return ModelResponse(
            text="".join(text),
            tool_calls=[tool_call(b["name"], b["json"] or {}, b["id"])
                        for _, b in sorted(blocks.items())],
            usage=usage or None, model=model or self.model)


def _input_tokens(u: Any) -> int | None:
    """Input tokens including the cached ones (the API counts those apart)."""
    n = getattr(u, "input_tokens", None)
    if n is None:
        return None
    return n + (getattr(u, "cache_creation_input_tokens", None) or 0) + \
        (getattr(u, "cache_read_input_tokens", None) or 0)


def _usage(u: Any) -> dict | None:
    if u is None:
        return None
    return {"input_tokens": _input_tokens(u), "output_tokens": getattr(u, "output_tokens", None)}


def to_anthropic_tool(spec: dict) -> dict:
    """A core tool spec ({name, description, parameters}) as a messages-API tool."""
    out = {"name": spec["name"],
           "input_schema": spec.get("parameters") or {"type": "object", "properties": {}}}
    if spec.get("description"):
        out["description"] = spec["description"]
    return out


def _user_blocks(content: Any) -> list[dict]:
    out = []
    for b in to_blocks(content):
        if b["type"] == "text":
            out.append({"type": "text", "text": b.get("text", "")})
        elif b["type"] in ("image", "document", "tool_result"):
            out.append({k: v for k, v in b.items() if k not in ("role", "name")})
        else:
            raise ModelCallError(f"a content block of type {b['type']!r} cannot be sent to an "
                                 f"Anthropic model; use text, image or document blocks",
                                 kind="model_error")
    return out


def to_anthropic_messages(messages: list[dict]) -> list[dict]:
    """The core's conversation in the messages protocol. Tool results become `tool_result`
    blocks of a user message, and consecutive messages of one role are merged: the API wants
    all results of a round in the user message right after the `tool_use`s."""
    out: list[dict] = []
    for m in messages:
        role = m.get("role")
        if role == "user":
            role, blocks = "user", _user_blocks(m.get("content", ""))
        elif role == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for i, n, a in map(tc_parts, m.get("tool_calls") or []):
                args = json_args(a)
                blocks.append({"type": "tool_use", "id": i, "name": n,
                               "input": args if isinstance(args, dict) else {"_raw": a}})
        elif role == "tool":
            role, blocks = "user", [{"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                                     "content": str(m.get("content", ""))}]
        else:
            raise ModelCallError(f"a message with role {role!r} cannot be sent to an Anthropic "
                                 f"model; the roles are user, assistant and tool (the system "
                                 f"prompt is AnthropicRuntime(system=...))", kind="model_error")
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for m in out:  # plain text turns as strings: shorter requests, readable cassettes
        if all(b["type"] == "text" for b in m["content"]):
            m["content"] = "\n".join(b["text"] for b in m["content"])
    return out


__all__ = ["AnthropicRuntime", "to_anthropic_messages", "to_anthropic_tool"]
