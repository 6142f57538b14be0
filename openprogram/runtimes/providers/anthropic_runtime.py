"""`AnthropicRuntime`: Claude models through the Anthropic messages API.

Built on the official `anthropic` SDK (`pip install 'openprogram-decisions[anthropic]'`),
imported when a runtime is created. The key comes from `api_key=` or the `ANTHROPIC_API_KEY`
environment variable.

    from openprogram.runtimes import AnthropicRuntime
    rt = AnthropicRuntime(model="claude-sonnet-4-5")              # api.anthropic.com
    rt = AnthropicRuntime(model="...", base_url="http://localhost:4000")   # a gateway or proxy
                                                                  # that speaks the messages API

Local servers (Ollama, vLLM, llama.cpp, LM Studio) are reached with `OpenAIRuntime(base_url=...)`,
the protocol they all speak; see `openprogram.runtimes.providers.openai_runtime`.

The core's conversation is translated to the messages protocol: user text blocks, assistant
`text` + `tool_use` blocks, and each round's tool results as `tool_result` blocks in one user
message; tools are offered as `{name, description, input_schema}`. Replies stream by default
(`stream=True`): `text_delta`s reach `on_text` as they arrive, `input_json_delta`s build the tool
calls, and token usage comes from `message_start` and `message_delta`. `max_tokens` (default 4096)
is required by the API; `system=` sets the system prompt; keyword arguments that are fields of
the request (`temperature=`, `top_p=`, `top_k=`, `stop_sequences=`, ...) are sent with every
request, any other is a TypeError naming it (a gateway's own field goes in `extra_body={...}`).
`max_retries` (default 2) is the SDK's retry policy (429, 5xx, overloaded, connection errors),
bounded by the decision's `timeout_s`.

All three ways of asking (`mode=`, see docs/modes.md): "menu" sends the menu as text and no
tools; "tools" sends one tool per option with `tool_choice={"type": "any",
"disable_parallel_tool_use": true}`, and a re-ask goes back as the `tool_result` of the call.
The messages API has no JSON-schema response format here, so "json_schema" is carried out as a
single forced tool whose `input_schema` is the schema (`tool_choice={"type": "tool", "name":
...}`; with work tools offered too, `{"type": "any", ...}` and calling it ends the turn); the
tool's input, as JSON text, is the reply, and the raw record's notes say so. `stop_reason`
"max_tokens" and "refusal" reach the decision as `truncated` and `refused`. `acomplete()` runs on
the SDK's `AsyncAnthropic` client, streaming or not; each reply's `raw` holds the request body
and the response as JSON, keys redacted, each at most 64 KB.
"""
from __future__ import annotations

import json
from typing import Any

from ...runtime.runtime import ModelCallError, ModelResponse, to_blocks
from .batch import BatchRuntime
from .faults import Malformed
from .key_redaction import redact_json
from .replies import Ask, StreamedReply, json_args, tc_parts, tool_call
from .runtime import ProviderAPI, ProviderRuntime, unique_tools
from .strict_schema import api_name


class AnthropicRuntime(ProviderRuntime):
    """`AnthropicRuntime(model="claude-sonnet-4-5", base_url=None, api_key=None, stream=True,
    max_retries=2, timeout=None, system=None, max_tokens=4096, **request_options)`."""

    #: `shortlist="native"` is Anthropic's tool search tool over deferred tools.
    native_tool_search = True

    api = ProviderAPI(name="Anthropic", env_key="ANTHROPIC_API_KEY", sdk="anthropic",
                      client_class="Anthropic", end_marker="message_stop",
                      example_model="claude-sonnet-4-5",
                      # sampling fields of the messages API that newer SDKs no longer list
                      known_fields=frozenset({"temperature", "top_p", "top_k"}))

    def __init__(self, model: str, *, max_tokens: int = 4096, **options: Any):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number >= 1, got {max_tokens!r}")
        self.max_tokens = max_tokens
        super().__init__(model, **options)

    def batched(self, **options: Any) -> BatchRuntime:
        """This runtime's calls answered through its provider's batch API (see `batch`);
        what `evaluate(..., batch=True)` uses."""
        return BatchRuntime(self, **options)

    def _create(self, client: Any = None):
        return (client or self._client).messages.create

    # -- the request --------------------------------------------------------------------------
    def _request(self, messages, tools, tool_choice, response_format) -> Ask:
        body: dict = {"max_tokens": self.max_tokens, **self.request_options,
                      "model": self.model, "messages": to_anthropic_messages(messages)}
        if self.system:
            body["system"] = self.system
        ask = Ask(body)
        specs = unique_tools(tools)
        choice = _TOOL_CHOICE.get(tool_choice) if specs else None
        if response_format is not None:
            specs, choice = self._output_tool(response_format, specs, ask)
        if specs:
            body["tools"] = [to_anthropic_tool(t) for t in specs]
            if any(t.get("defer_loading") for t in specs):
                # shortlist="native": the deferred tools are found by Anthropic's own tool
                # search tool (BM25 over names, descriptions and arguments), which is never
                # deferred itself; the model searches before it calls, so the choice is left to
                # it ("any" would have it call a loaded tool before any is loaded)
                body["tools"].append(dict(TOOL_SEARCH))
                ask.notes.append("shortlist='native': the options were sent with "
                                 "defer_loading beside Anthropic's tool search tool")
                if choice is not None and choice.get("type") == "any":
                    choice = {"type": "auto", "disable_parallel_tool_use": True}
        if choice is not None:
            body["tool_choice"] = choice
        if self.stream:
            body["stream"] = True
        return ask

    @staticmethod
    def _output_tool(fmt: dict, specs: list[dict], ask: Ask) -> tuple[list[dict], dict]:
        """json_schema as one forced tool whose input schema is the schema. With work tools
        offered too, any tool may be called (one at a time), and calling this one ends the
        turn."""
        taken = {t["name"] for t in specs}
        name = api_name(fmt.get("name"))
        while name in taken:
            name = api_name(name[:57] + "_output")
        ask.text_tool = name
        ask.notes.append(
            f"json_schema is carried out as the forced tool {name!r}: the Anthropic messages "
            f"API has no JSON-schema response format here, so the schema is the tool's input "
            f"schema and the tool's input is the reply")
        tool = {"name": name, "parameters": fmt["schema"],
                "description": "Give your answer by calling this tool: its input is the answer."}
        choice = {"type": "tool", "name": name} if not specs else \
            {"type": "any", "disable_parallel_tool_use": True}
        return [*specs, tool], choice

    # -- the reply ----------------------------------------------------------------------------
    def _parse(self, r: Any) -> ModelResponse:
        content = getattr(r, "content", None)
        if content is None:
            raise Malformed("the response has no content")
        text = "".join(b.text for b in content if getattr(b, "type", None) == "text")
        calls = [tool_call(b.name, b.input, b.id) for b in content
                 if getattr(b, "type", None) == "tool_use"]
        return ModelResponse(text=text, tool_calls=calls, usage=_usage(getattr(r, "usage", None)),
                             model=getattr(r, "model", None) or self.model,
                             finish_reason=getattr(r, "stop_reason", None))

    def _read_event(self, event: Any, reply: StreamedReply) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            reply.model = getattr(event.message, "model", None)
            reply.usage.update(_usage(event.message.usage) or {})
        elif kind == "content_block_start":
            b = event.content_block
            if b.type == "tool_use":
                reply.tool(event.index, b.id, b.name)
        elif kind == "content_block_delta":
            d = event.delta
            if d.type == "text_delta":
                reply.add_text(d.text)
            elif d.type == "input_json_delta" and event.index in reply.calls:
                reply.tool_args(event.index, d.partial_json)
        elif kind == "message_delta":
            reply.finish_reason = getattr(event.delta, "stop_reason", None) or \
                reply.finish_reason
            u = getattr(event, "usage", None)
            if u is not None:  # cumulative counts: the latest wins
                if getattr(u, "output_tokens", None) is not None:
                    reply.usage["output_tokens"] = u.output_tokens
                if getattr(u, "input_tokens", None) is not None:
                    reply.usage["input_tokens"] = _input_tokens(u)
        elif kind == "message_stop":
            reply.finished = True

    def _shape(self, resp: ModelResponse, ask: Ask) -> ModelResponse:
        """json_schema: the forced tool's input, as JSON text, is the reply."""
        if ask.text_tool is None:
            return resp
        for tc in resp.tool_calls:
            if tc.name == ask.text_tool:
                resp.tool_calls.remove(tc)
                resp.text = json.dumps(tc.args, ensure_ascii=False) \
                    if isinstance(tc.args, dict) else str(tc.args)
                break
        return resp

    def _finish(self, resp: ModelResponse, ask: Ask, response_json: Any) -> ModelResponse:
        """The core's reply, and the reply's own content blocks beside it when some have no
        core form: a tool search's `server_tool_use` and `tool_search_tool_result` must go back
        in the assistant turn of a re-ask or a tool round, before the `tool_use` of the tool
        the search loaded, or the API would see a call of a tool that was never loaded."""
        resp = super()._finish(resp, ask, response_json)
        blocks = _content_blocks(response_json)
        if blocks and any(b.get("type") not in ("text", "tool_use") for b in blocks):
            resp.content_blocks = redact_json(blocks, self.redact)
        return resp

    def _refused(self, resp: ModelResponse) -> str | None:
        if resp.finish_reason == "refusal":
            return resp.text or "the model declined to answer (stop_reason 'refusal')"
        return resp.refusal


#: The core's tool choice in the messages protocol; "required" is one call of some tool.
#: Anthropic's tool search tool, BM25 variant (natural-language queries), as the messages API
#: takes it beside tools marked `defer_loading`.
TOOL_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}

_TOOL_CHOICE = {"required": {"type": "any", "disable_parallel_tool_use": True},
                "auto": {"type": "auto"}, "none": {"type": "none"}}


def _content_blocks(response_json: Any) -> list[dict] | None:
    """The content blocks of a messages-API reply as the API takes them back: from the whole
    response, or rebuilt from its stream's events (None when the stream was cut short of
    them, or a block's input does not parse)."""
    if not isinstance(response_json, dict):
        return None
    if isinstance(response_json.get("content"), list):
        return [_param(b) for b in response_json["content"] if isinstance(b, dict)]
    events = response_json.get("stream")
    if not isinstance(events, list):
        return None
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for e in events:
        if not isinstance(e, dict):  # the raw record's "[n more events cut]"
            return None
        i, kind = e.get("index"), e.get("type")
        if kind == "content_block_start" and isinstance(e.get("content_block"), dict):
            blocks[i] = dict(e["content_block"])
        elif kind == "content_block_delta" and i in blocks:
            d = e.get("delta") or {}
            if d.get("type") == "text_delta":
                blocks[i]["text"] = (blocks[i].get("text") or "") + (d.get("text") or "")
            elif d.get("type") == "input_json_delta":
                partial[i] = partial.get(i, "") + (d.get("partial_json") or "")
    for i, text in partial.items():
        try:
            blocks[i]["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            return None
    return [_param(blocks[i]) for i in sorted(blocks)]


def _param(block: dict) -> dict:
    # a response block as a request block: the response's empty fields (citations: null...)
    # are not fields a request sends
    return {k: v for k, v in block.items() if v is not None}


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
    """A core tool spec ({name, description, parameters}) as a messages-API tool. An option's
    worked examples go in the tool's own `input_examples` field (the arguments objects: the
    API checks each against the input schema), and the description keeps only the examples
    that say which request leads to them, which the field cannot."""
    out = {"name": spec["name"],
           "input_schema": spec.get("parameters") or {"type": "object", "properties": {}}}
    description = spec.get("description")
    if spec.get("input_examples"):
        out["input_examples"] = list(spec["input_examples"])
        description = spec.get("description_beside_inputs", description)
    if description:
        out["description"] = description
    if spec.get("defer_loading"):
        out["defer_loading"] = True
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
        elif role == "assistant" and m.get("content_blocks"):
            # the reply's own blocks, as the API sent them (a tool search and what it loaded)
            blocks = [dict(b) for b in m["content_blocks"]]
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
