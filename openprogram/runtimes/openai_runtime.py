"""`OpenAIRuntime`: OpenAI and every server that speaks the chat-completions protocol.

Built on the official `openai` SDK (`pip install 'openprogram-decisions[openai]'`), imported when
a runtime is created. The key comes from `api_key=` or the `OPENAI_API_KEY` environment variable;
when `base_url=` is given and no key is anywhere, a placeholder is sent (local servers ignore it).

    from openprogram.runtimes import OpenAIRuntime
    rt = OpenAIRuntime(model="gpt-4o-mini")                     # api.openai.com, OPENAI_API_KEY

Local and self-hosted servers speak the same protocol; point `base_url` at their `/v1` root
(no key needed):

    # Ollama: `ollama serve`, `ollama pull llama3.2`
    OpenAIRuntime(model="llama3.2", base_url="http://localhost:11434/v1")
    # vLLM: `vllm serve Qwen/Qwen2.5-7B-Instruct`
    OpenAIRuntime(model="Qwen/Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1")
    # llama.cpp: `llama-server -m model.gguf --port 8080` (it serves whichever model it loaded)
    OpenAIRuntime(model="local", base_url="http://localhost:8080/v1")
    # LM Studio: start its local server; the model id is the one LM Studio shows
    OpenAIRuntime(model="<model id>", base_url="http://localhost:1234/v1")
    # any hosted OpenAI-compatible API
    OpenAIRuntime(model="...", base_url="https://<service>/v1", api_key="...")

Native tool calls (`agent(tools=...)`) need a model and server with function calling (Ollama and
vLLM support it for models whose template declares tools; vLLM needs `--enable-auto-tool-choice
--tool-call-parser ...`). Decisions themselves need no tool support: the pick is JSON in the text.

Replies stream by default (`stream=True`): each text delta reaches `on_text`, so a decision's
trace and the notebook panel show the reply growing. Token usage is asked for with
`stream_options={"include_usage": True}`; a server that rejects that option can be used with
`stream_usage=False` (usage is then unknown). `max_retries` (default 2) is the SDK's own retry
policy for 408/409/429/5xx and connection errors, with its backoff; the decision's `timeout_s`
bounds the whole call, retries included. Extra keyword arguments (`temperature=`, `seed=`,
`max_completion_tokens=`, ...) are sent with every request; `system=` adds a system message.
To record a session and replay it offline, wrap the runtime: see `openprogram.runtimes.cassette`.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from ..agentic_programming.runtime import ModelCallError, ModelResponse, to_blocks
from ._provider import DeadlineExceeded, ProviderRuntime, _Malformed, tc_parts, tool_call


class OpenAIRuntime(ProviderRuntime):
    """`OpenAIRuntime(model="gpt-4o-mini", base_url=None, api_key=None, stream=True,
    max_retries=2, timeout=None, system=None, stream_usage=True, **request_options)`."""

    provider = "OpenAI-compatible"
    env_key = "OPENAI_API_KEY"
    sdk_name = "openai"
    extra = "openai"
    client_class = "OpenAI"
    end_marker = "finish_reason"
    example_model = "gpt-4o-mini"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, max_retries: int = 2, timeout: float | None = None,
                 system: str | None = None, stream_usage: bool = True, name: str | None = None,
                 **request_options: Any):
        self.stream_usage = stream_usage
        super().__init__(model, base_url=base_url, api_key=api_key, stream=stream,
                         max_retries=max_retries, timeout=timeout, system=system, name=name,
                         **request_options)

    def _create(self):
        return self._client.chat.completions.create

    # -- the request --------------------------------------------------------------------------
    def _request(self, messages: list[dict], tools: list[dict] | None) -> dict:
        out: list[dict] = [{"role": "system", "content": self.system}] if self.system else []
        out += [to_openai_message(m) for m in messages]
        kwargs: dict = {**self.request_options, "model": self.model, "messages": out}
        if tools:
            kwargs["tools"] = [to_openai_tool(t) for t in tools]
        if self.stream:
            kwargs["stream"] = True
            if self.stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    # -- the reply ----------------------------------------------------------------------------
    def _complete_once(self, kwargs: dict) -> ModelResponse:
        r = self._create()(**kwargs)
        choices = getattr(r, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise _Malformed("the response has no choices[0].message")
        msg = choices[0].message
        text = msg.content if msg.content is not None else (getattr(msg, "refusal", None) or "")
        calls = [tool_call(tc.function.name, tc.function.arguments, tc.id)
                 for tc in (msg.tool_calls or []) if getattr(tc, "function", None)]
        return ModelResponse(text=text, tool_calls=calls, usage=_usage(getattr(r, "usage", None)),
                             model=getattr(r, "model", None) or self.model)

    def _complete_stream(self, kwargs: dict, emit: Callable[[str], None],
                         deadline: float | None) -> ModelResponse:
        import time
        stream = self._create()(**kwargs)
        emit("")  # the server answered: a failure from here on is mid-reply
        text: list[str] = []
        calls: dict[int, dict] = {}
        usage = None
        model = None
        finished = False
        with stream:
            for chunk in stream:
                model = getattr(chunk, "model", None) or model
                if getattr(chunk, "usage", None) is not None:
                    usage = _usage(chunk.usage)
                for choice in getattr(chunk, "choices", None) or []:
                    if getattr(choice, "index", 0) != 0:
                        continue
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        emit(delta.content)
                    for tc in (getattr(delta, "tool_calls", None) or []):
                        slot = calls.setdefault(tc.index, {"id": None, "name": "", "args": ""})
                        slot["id"] = tc.id or slot["id"]
                        if tc.function is not None:
                            slot["name"] += tc.function.name or ""
                            slot["args"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finished = True
                if deadline is not None and time.monotonic() > deadline:
                    raise DeadlineExceeded()
        if not finished:
            raise self._incomplete(text)
        return ModelResponse(
            text="".join(text),
            tool_calls=[tool_call(c["name"], c["args"], c["id"]) for _, c in sorted(calls.items())],
            usage=usage, model=model or self.model)


def _usage(u: Any) -> dict | None:
    if u is None:
        return None
    return {"input_tokens": getattr(u, "prompt_tokens", None),
            "output_tokens": getattr(u, "completion_tokens", None)}


def to_openai_tool(spec: dict) -> dict:
    """A core tool spec ({name, description, parameters}) as a chat-completions tool."""
    fn = {"name": spec["name"], "parameters": spec.get("parameters") or
          {"type": "object", "properties": {}}}
    if spec.get("description"):
        fn["description"] = spec["description"]
    return {"type": "function", "function": fn}


def _content(content: Any) -> Any:
    """User content: one string when it is all text (every server accepts that), else parts."""
    blocks = to_blocks(content)
    if all(b.get("type") == "text" for b in blocks):
        return "\n".join(b.get("text", "") for b in blocks)
    parts = []
    for b in blocks:
        if b["type"] == "text":
            parts.append({"type": "text", "text": b.get("text", "")})
        elif b["type"] in ("image_url", "input_audio", "file"):
            parts.append({k: v for k, v in b.items() if k != "role"})
        else:
            raise ModelCallError(f"a content block of type {b['type']!r} cannot be sent to a "
                                 f"chat-completions model; use text, image_url, input_audio "
                                 f"or file blocks", kind="model_error")
    return parts


def to_openai_message(m: dict) -> dict:
    """One message of the core's conversation in the chat-completions protocol."""
    role = m.get("role")
    if role == "user":
        return {"role": "user", "content": _content(m.get("content", ""))}
    if role == "assistant":
        out: dict = {"role": "assistant", "content": m.get("content") or None}
        calls = m.get("tool_calls") or []
        if calls:
            out["tool_calls"] = [{
                "id": i, "type": "function",
                "function": {"name": n, "arguments": a if isinstance(a, str)
                             else json.dumps(a, ensure_ascii=False)}}
                for i, n, a in map(tc_parts, calls)]
        return out
    if role == "tool":
        return {"role": "tool", "tool_call_id": m.get("tool_call_id"),
                "content": str(m.get("content", ""))}
    if role == "system":
        return {"role": "system", "content": _content(m.get("content", ""))}
    raise ModelCallError(f"a message with role {role!r} cannot be sent; the roles are user, "
                         f"assistant, tool and system", kind="model_error")


__all__ = ["OpenAIRuntime", "to_openai_message", "to_openai_tool"]
