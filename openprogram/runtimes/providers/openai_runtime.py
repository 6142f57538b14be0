"""`OpenAIRuntime`: OpenAI and every server that speaks the chat-completions protocol.

Built on the official `openai` SDK (`pip install 'openprogram-decisions[openai]'`), imported
when a runtime is created. The key comes from `api_key=` or the `OPENAI_API_KEY` environment
variable; when `base_url=` is given and no key is anywhere, a placeholder is sent (local servers
ignore it).

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

Each server accepts a different subset of the request forms the ways of asking use. Name it,
`OpenAIRuntime(..., server="vllm" | "ollama" | "llama.cpp" | "llama-cpp-python" | "lm-studio" |
"openai")`, and the runtime sends what that server takes from the first request; leave it out
and the runtime sends OpenAI's forms and, when the server refuses one (its error names the form,
or it crashes on it), sends the same attempt once more with the nearest form left (json_schema
-> json_object with the schema; tool_choice "required" -> the one tool named, or "auto" and the
re-ask; the optional fields left out), remembers it for every later request, and records on the
attempt's `raw["negotiated"]` what was asked, the server's words and what was sent
(`_servers`; the table is in docs/models.md). `rt.modes` drops a mode whose every form the server
refused. Native tool calls (`agent(tools=...)`) need a model and server with function calling
(vLLM needs `--enable-auto-tool-choice --tool-call-parser ...`, llama-server `--jinja`).
Decisions themselves need no tool support: the pick is JSON in the text.

Replies stream by default (`stream=True`): each text delta reaches `on_text`, so a decision's
trace and the notebook panel show the reply growing. Token usage is asked for with
`stream_options={"include_usage": True}` where the server takes it (`stream_usage=False` never
asks); a reply without usage says so in its raw record's notes. `max_retries` (default 2) is the
SDK's own retry policy for 408/409/429/5xx and connection errors, with its backoff; the
decision's `timeout_s` bounds the whole call, retries included. Keyword arguments that are
fields of the SDK's request (`temperature=`, `seed=`, `max_completion_tokens=`, ...) are sent
with every request, any other is a TypeError naming it: a field only your server knows goes in
`extra_body={...}`. `system=` adds a system message.
To record a session and replay it offline, wrap the runtime: see `openprogram.runtimes.cassette`.

All three ways of asking (`mode=`, see docs/modes.md): "menu" sends the menu as text and no
tools; "tools" sends one function tool per option with `tool_choice="required"` and
`parallel_tool_calls=false`, and a re-ask goes back as the tool call's `role: "tool"` result;
"json_schema" sends `response_format={"type": "json_schema", "json_schema": {"name", "schema",
"strict": true}}` with the schema made to follow strict mode's rules (every property required,
optional ones nullable, `additionalProperties: false`, only the keywords strict mode knows; see
`_strict`) and the nulls that forced removed from the reply, so the result is the one the other
modes give; a schema strict mode cannot express (a free-form dict, a value of any type, one over
the size limits) goes with `strict: false`, and the raw record says why. `finish_reason`
("length" is a reply cut at the token limit) and `message.refusal` reach the decision as
`truncated` and `refused`. `acomplete()` (`decision.amake`, `aagent`) runs on the
SDK's `AsyncOpenAI` client, streaming or not; each reply's `raw` holds the request body and the
response as JSON, keys redacted, each at most 64 KB.

`confidence=decision.Samples(n)` draws its n samples in one request (`n=`, unstreamed), sample
0's call sending it and each other sample's call taking its choice; a server that refuses `n` is
negotiated like the forms above (each sample then goes on its own), and one that answers fewer
choices leaves the missing samples to requests of their own; choices past the n asked for are
not read, and each one asked for is read once.
"""
from __future__ import annotations

import contextvars
import dataclasses
import json
from typing import Any

from ...runtime.runtime import ModelCallError, ModelResponse, to_blocks
from .batch import BatchRuntime
from .faults import Malformed
from .logprobs import MAX_TOKENS, distribution, tokens_of
from .replies import CUT_OFF, Ask, StreamedReply, as_json, tc_parts, tool_call
from .runtime import ProviderAPI, ProviderRuntime, unique_tools
from .server_forms import Negotiator, check_server
from .strict_schema import strip_forced_nulls


class _Draw:
    """The samples of `decision.Samples(n)` asked in one request with `n=`: the call of
    sample 0 sends it, and the choices it brings back wait here for the calls of the other
    samples (which await `settled` when they run concurrently)."""

    def __init__(self, n: int):
        self.n = n
        self.others: list[tuple[int, ModelResponse, Any]] = []  # (index, reply, its JSON)
        self.ask: Ask | None = None
        self.choices: dict[int, ModelResponse] = {}
        self.done = False
        try:
            import asyncio
            asyncio.get_running_loop()
            self.settled: Any = asyncio.Event()
        except RuntimeError:   # the sync path: the calls come one after another
            self.settled = None

    def settle(self) -> None:
        self.done = True
        if self.settled is not None:
            self.settled.set()


#: The draw the request being built belongs to (set only around sample 0's call).
_DRAW: contextvars.ContextVar = contextvars.ContextVar("openprogram_draw", default=None)
#: How many draws a runtime keeps choices of: a choice no call came for (its sample was
#: answered from a cache) is not kept for ever.
_KEPT_DRAWS = 32


class OpenAIRuntime(ProviderRuntime):
    """`OpenAIRuntime(model="gpt-4o-mini", base_url=None, api_key=None, server=None,
    stream=True, max_retries=2, timeout=None, system=None, stream_usage=True,
    extra_body=None, **request_options)`."""

    api = ProviderAPI(name="OpenAI-compatible", env_key="OPENAI_API_KEY", sdk="openai",
                      client_class="OpenAI", end_marker="finish_reason",
                      example_model="gpt-4o-mini")
    #: `confidence=True` reads the probability of each option from the reply's token
    #: log-probabilities (see `_logprobs`); not in mode="tools", where none come back.
    confidence_source = "logprobs"

    def __init__(self, model: str, *, server: str | None = None, stream_usage: bool = True,
                 **options: Any):
        self._negotiator = Negotiator(check_server(server))
        self.server = server
        self.stream_usage = stream_usage
        self._draws: dict[str, _Draw] = {}
        super().__init__(model, **options)

    @property
    def modes(self) -> frozenset:
        """The ways of asking this runtime's server can do, as far as is known: all three,
        less a mode whose every form the server refused."""
        return self._negotiator.modes

    @property
    def negotiated(self) -> list[dict]:
        """The refusals this runtime met, each `{"kind", "asked", "refused", "sent"}`: what was
        asked, the server's words, what was sent in its place (every later request sends that
        at once)."""
        return [dict(r) for r in self._negotiator.refusals]

    def batched(self, **options: Any) -> BatchRuntime:
        """This runtime's calls answered through its provider's batch API (see `batch`);
        what `evaluate(..., batch=True)` uses."""
        return BatchRuntime(self, **options)

    def _create(self, client: Any = None):
        return (client or self._client).chat.completions.create

    # -- the request --------------------------------------------------------------------------
    def _request(self, messages, tools, tool_choice, response_format) -> Ask:
        out: list[dict] = [{"role": "system", "content": self.system}] if self.system else []
        out += [to_openai_message(m) for m in messages]
        body: dict = {**self.request_options, "model": self.model, "messages": out}
        ask = Ask(body)
        self._negotiator.shape_messages(out, ask)
        specs = unique_tools(tools)
        if specs:
            body["tools"] = [to_openai_tool(t) for t in specs]
            self._negotiator.shape_tool_choice(body, ask, tool_choice, specs)
        if response_format is not None:
            self._negotiator.shape_structured(body, ask, response_format, out)
        draw = _DRAW.get()
        if draw is not None:
            self._negotiator.shape_n(body, ask, draw.n)
        # n choices come unstreamed: the stream would interleave them, and only sample 0's
        # reply has a panel to grow in
        if self.stream and ask.forms.get("n") != "n" and \
                self._negotiator.shape_streaming(body, ask):
            body["stream"] = True
            if self.stream_usage:
                self._negotiator.shape_stream(body, ask)
        return ask

    def _ask_confidence(self, ask, names):
        super()._ask_confidence(ask, names)
        self._negotiator.shape_logprobs(ask.body, ask)

    async def _exchange(self, messages, tools, on_text, timeout, mode_args, send):
        """A sample of `decision.Samples(n)` (`sample=i, samples=n`): sample 0's call asks the
        n in one request (`n=`) and keeps the other choices; sample i's call takes choice i.
        A sample with no choice for it (the server refused `n`, or answered fewer) is asked
        on its own. Each call still returns one reply, so a cache or a cassette keeps every
        sample as its own entry."""
        n, i = mode_args.get("samples"), mode_args.get("sample")
        mode_args = {k: v for k, v in mode_args.items() if k != "samples"}
        one = super()._exchange
        if not (type(n) is int and n > 1 and type(i) is int and 0 <= i < n) or \
                not self._negotiator.n:
            return await one(messages, tools, on_text, timeout, mode_args, send)
        key = json.dumps([messages, tools, {k: v for k, v in mode_args.items()
                                            if k != "sample"}], sort_keys=True, default=repr)
        if i == 0:
            self._draws.pop(key, None)   # a new draw of the same request: last, the oldest go first
            draw = self._draws[key] = _Draw(n)
            while len(self._draws) > _KEPT_DRAWS:
                self._draws.pop(next(iter(self._draws)))
            token = _DRAW.set(draw)
            try:
                resp = await one(messages, tools, on_text, timeout, mode_args, send)
                for index, other, raw in draw.others:
                    if 0 < index < n:
                        draw.choices[index] = self._finish(other, draw_ask(draw, index), raw)
                return resp
            finally:
                _DRAW.reset(token)
                draw.others = []
                draw.settle()
        draw = self._draws.get(key)
        if draw is not None:
            if not draw.done and draw.settled is not None:
                await draw.settled.wait()
            got = draw.choices.pop(i, None)
            if got is not None:
                return got
        return await one(messages, tools, on_text, timeout, mode_args, send)

    def _negotiate(self, status, words, ask):
        return self._negotiator.refused(status, words, ask, f"the server at {self.where}"
                                    + (f" ({self.server})" if self.server else ""))

    def _answered(self, ask):
        self._negotiator.confirm(ask)

    def _shape_advice(self) -> str:
        return ("; check the model name and the keyword arguments given to the runtime, or "
                "name the server (OpenAIRuntime(server=...), docs/models.md) so the runtime "
                "sends what it accepts")

    # -- the reply ----------------------------------------------------------------------------
    def _parse(self, r: Any) -> ModelResponse:
        choices = getattr(r, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise Malformed("the response has no choices[0].message")
        draw = _DRAW.get()
        if draw is not None and len(choices) > 1:
            # Only the choices asked for are read, each once: a server may send more (20,000
            # for n=5), and looking each one's JSON up among all the others' was quadratic.
            wanted = {}
            for c in choices[1:]:
                index = getattr(c, "index", None)
                if type(index) is int and 0 < index < draw.n and index not in wanted and \
                        getattr(c, "message", None) is not None:
                    wanted[index] = c
                    if len(wanted) == draw.n - 1:
                        break
            whole = as_json(r) if wanted else None
            by_index: dict = {}
            if isinstance(whole, dict) and isinstance(whole.get("choices"), list):
                for x in whole["choices"]:
                    i = x.get("index") if isinstance(x, dict) else None
                    if i in wanted:
                        by_index.setdefault(i, []).append(x)
            for index, c in wanted.items():
                raw = {**whole, "choices": by_index.get(index, []), "usage": None} \
                    if isinstance(whole, dict) else whole
                other = self._choice(c, r)
                other.usage = {"input_tokens": 0, "output_tokens": 0}
                draw.others.append((index, other, raw))
        return self._choice(choices[0], r)

    def _choice(self, choice: Any, r: Any) -> ModelResponse:
        """One choice of a whole response as a ModelResponse (with the response's usage)."""
        msg = choice.message
        calls = [tool_call(tc.function.name, tc.function.arguments, tc.id)
                 for tc in (msg.tool_calls or []) if getattr(tc, "function", None)]
        resp = ModelResponse(text=msg.content or "", tool_calls=calls,
                             usage=_usage(getattr(r, "usage", None)),
                             model=getattr(r, "model", None) or self.model,
                             finish_reason=choice.finish_reason,
                             refusal=getattr(msg, "refusal", None) or None)
        lp = getattr(choice, "logprobs", None)
        if lp is not None:
            resp._logprobs = tokens_of(getattr(lp, "content", None))  # read by _shape
        return resp

    def _read_event(self, chunk: Any, reply: StreamedReply) -> None:
        reply.model = getattr(chunk, "model", None) or reply.model
        if getattr(chunk, "usage", None) is not None:
            reply.usage = _usage(chunk.usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta is not None and delta.content:
                reply.add_text(delta.content)
            if delta is not None and getattr(delta, "refusal", None):
                reply.refusal.append(delta.refusal)
            lp = getattr(choice, "logprobs", None)
            if lp is not None and getattr(lp, "content", None):
                if reply.logprobs is None:
                    reply.logprobs = []
                if len(reply.logprobs) < MAX_TOKENS:  # bounded: a runaway reply is not kept whole
                    reply.logprobs.extend(tokens_of(lp.content) or [])
            for tc in (getattr(delta, "tool_calls", None) or []):
                slot = reply.tool(tc.index)
                slot["id"] = tc.id or slot["id"]
                if tc.function is not None:
                    # the name comes once (OpenAI), or again in every chunk (llama-cpp-python)
                    name = tc.function.name or ""
                    if name != slot["name"]:
                        slot["name"] += name
                    reply.tool_args(tc.index, tc.function.arguments or "")
            if choice.finish_reason:
                reply.finished = True
                reply.finish_reason = choice.finish_reason

    def _shape(self, resp: ModelResponse, ask: Ask) -> ModelResponse:
        """In strict mode, the nulls strict mode forced on optional fields are taken out of the
        reply (the option then sees them as not given, as in the other modes); the text as it
        came is kept in the raw record. A reply without token usage says so in the notes.
        With `confidence=`, the probability of each option is read from the reply as the
        server wrote it (before any null is removed)."""
        tokens = resp.__dict__.pop("_logprobs", None)
        draw = _DRAW.get()
        if draw is not None and draw.ask is None:
            draw.ask = ask   # what the other choices are shaped with
        if ask.confidence is not None and ask.forms.get("logprobs") == "logprobs":
            resp.confidence = distribution(resp.text, tokens, ask.confidence,
                                           cut=resp.finish_reason in CUT_OFF)
        if resp.usage is None:
            how = ("though stream_options.include_usage asked for it"
                   if ask.forms.get("stream_options") == "stream_options" else
                   "and this server has no way to ask for it in a stream"
                   if ask.body.get("stream") else "")
            ask.notes.append(f"the server sent no token usage with this reply{' ' if how else ''}"
                             f"{how}; its tokens are unknown")
        limit = ask.body.get("max_completion_tokens") or ask.body.get("max_tokens")
        if resp.finish_reason not in CUT_OFF and resp.tool_calls and \
                not isinstance(resp.tool_calls[-1].args, dict) and limit and \
                (resp.usage or {}).get("output_tokens") == limit:
            # llama-cpp-python says "tool_calls" for a call cut off at the token limit
            ask.notes.append(f"the server said finish_reason {resp.finish_reason!r}, but the "
                             f"reply used all {limit} tokens and its last tool call's arguments "
                             f"are cut off: read as cut off at the token limit")
            resp.finish_reason = "length"
        if ask.schema is None or not isinstance(resp.text, str):
            return resp
        try:
            doc = json.loads(resp.text)
        except (ValueError, RecursionError):
            return resp
        removed: list[str] = []
        clean = strip_forced_nulls(doc, ask.schema, removed=removed)
        if removed:
            ask.reply_as_sent = resp.text
            resp.text = json.dumps(clean, ensure_ascii=False)
            ask.notes.append("the nulls strict mode forced on optional fields were removed "
                             "from the reply: " + ", ".join(removed))
        return resp

    def _refused(self, resp: ModelResponse) -> str | None:
        """`message.refusal`, or the content filter's stop; a refusal with no text is also the
        reply's text (what a plain turn returns)."""
        refusal = resp.refusal
        if refusal is None and resp.finish_reason == "content_filter":
            refusal = "the provider's content filter stopped the reply (finish reason " \
                      "'content_filter')"
        if refusal and not resp.text and not resp.tool_calls:
            resp.text = refusal
        return refusal


def draw_ask(draw: _Draw, index: int) -> Ask:
    """The request of sample 0 as choice `index`'s own: its notes say where it came from."""
    ask = draw.ask or Ask({})
    return dataclasses.replace(ask, notes=[
        f"choice {index} of the one request sent for sample 0 with n={draw.n} (its tokens "
        f"are counted with sample 0)"], reply_as_sent=None, negotiated=list(ask.negotiated))


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
