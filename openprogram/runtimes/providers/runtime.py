"""What the OpenAI and Anthropic runtimes share: the key, the call on either client, the stream
loop, the mode arguments, and the guards around every byte exchanged.

A provider runtime is a `Runtime` whose `complete()` (the SDK's sync client) and `acomplete()`
(its async client, one per event loop) send the conversation through an official SDK; both run
the same coroutine (`_exchange`), which on the sync path never suspends. This module holds
everything that is not protocol: finding the API key (argument, then the provider's environment
variable) and redacting it (with `key_redaction`) from every string the server sends back before
anything else sees it — each streamed chunk, the reply, tool calls, errors, the raw record —
and from every repr; the stream-reading loop both protocols use (each supplies `_read_event`);
the mode arguments (`tool_choice=`, `response_format=`), which each protocol renders in its own
request (`_request`) and reply (`_shape`); and the raw request and response (`raw_record`)
attached to every reply. The time budget on the wire is `transport`'s, the words for a failure
`faults`', the request and reply as data `replies`'; every path through `_exchange` goes through
all three, so no protocol can skip a guard. The SDKs and httpx2 are imported only when a runtime
is created, so importing `openprogram.runtimes` stays standard-library-only. It is long because
`_exchange`, the one coroutine both protocols and both clients run, holds the order of the guards
every byte goes through; the guards themselves are in `transport`, `faults`, `key_redaction` and
`raw_record`.
"""
from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...base.json_form import sendable
from ...base.model_protocol import run_sync
from ...base.secrets import Secret
from ...evaluation import ratelimit
from ...runtime.runtime import ModelCallError, ModelResponse, Runtime
from .faults import (
    Malformed,
    cause_text,
    caused_by_timeout,
    is_transport_error,
    server_message,
    unreachable,
)
from .key_redaction import MASK, StreamRedactor, redact, redact_json, without_secrets
from .raw_record import bounded, raw_record
from .replies import CUT_OFF, Ask, StreamedReply, as_json
from .server_forms import FORMS
from .transport import (
    DEADLINE_HEADER,
    PATIENCE_HEADER,
    RETRY_STATUSES,
    DeadlineExceeded,
    current_deadline,
    deadline_transport,
    safe_url,
)


@dataclass(frozen=True)
class ProviderAPI:
    """The facts that tell one provider's runtime from another's."""
    name: str            # how messages name the provider, e.g. "Anthropic"
    env_key: str         # the environment variable that holds the key
    sdk: str             # the SDK's import name, which is also the extra that installs it
    client_class: str    # the SDK's client class, e.g. "OpenAI" for openai.OpenAI (the async
                         # one is "Async" + this)
    end_marker: str      # the stream event that says the reply is complete
    example_model: str   # shown when model= is missing
    known_fields: frozenset = frozenset()  # request fields the API defines that the SDK's
                                           # method may lack (sent through extra_body)


def unique_tools(tools: list[dict] | None) -> list[dict]:
    """Tool specs, one per name (both APIs reject a repeated name): a later spec takes the
    place of an earlier one of the same name. In tools mode the choices come after the work
    tools, so a function that is both is offered once, as the choice."""
    by_name: dict[str, dict] = {}
    for spec in tools or []:
        by_name[spec["name"]] = spec
    return list(by_name.values())


#: What a decision asking for confidence adds to a call: the option names to give the
#: probability of (`confidence=`), a sample's index (part of the request's key only), the
#: sampling temperature of `decision.Samples` and how many samples the request has (`samples=`,
#: which lets a runtime draw them all in one request; never part of a record or a key).
CONFIDENCE_ARGS = frozenset({"confidence", "sample", "temperature", "samples"})


def mode_arguments(mode_args: dict) -> tuple[str | None, dict | None]:
    """`(tool_choice, response_format)` from a call's mode arguments, checked."""
    unknown = sorted(set(mode_args) - {"tool_choice", "response_format"} - CONFIDENCE_ARGS)
    if unknown:
        raise TypeError(f"complete() got unexpected arguments {unknown}; a provider runtime "
                        f"takes tool_choice=, response_format=, confidence=, sample=, "
                        f"samples= and temperature= (see modes.py)")
    choice, fmt = mode_args.get("tool_choice"), mode_args.get("response_format")
    if choice is not None and choice not in ("required", "auto", "none"):
        raise ValueError(f"tool_choice must be 'required', 'auto' or 'none', got {choice!r}")
    if fmt is not None and not (isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict)):
        raise ValueError(f"response_format must be {{'name': ..., 'schema': {{...}}}} with a "
                         f"JSON Schema object, got {fmt!r}")
    return choice, fmt


class _Call:
    """One model call in progress: its time budget, the text received so far (a failure's
    partial reply), and that text passed on to `on_text` redacted."""

    def __init__(self, rt: ProviderRuntime, on_text: Callable[[str], None] | None,
                 per_call: float | None):
        self.rt = rt
        self.per_call = per_call
        self.deadline = time.monotonic() + per_call if per_call is not None else None
        self.received: list[str] = []
        self.started = False
        self.streams = rt.stream   # this request's: negotiation may send one unstreamed
        # observers (the live panel) get each chunk only once it is redacted
        self._shown = StreamRedactor((rt._key.reveal(),), on_text) \
            if on_text is not None else None

    def emit(self, chunk: str) -> None:
        self.started = True
        if chunk:
            self.received.append(chunk)
            if self._shown is not None:
                self._shown.feed(chunk)

    def kwargs(self, ask: Ask) -> dict:
        return ask.body if self.per_call is None else {**ask.body, "timeout": self.per_call}

    def streaming(self, ask: Ask) -> StreamedReply:
        self.emit("")  # the server answered: a failure from here on is mid-reply
        return StreamedReply(self.emit, ask.text_tool)

    def event(self, event: Any, reply: StreamedReply) -> None:
        self.rt._read_event(event, reply)
        reply.record(event)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineExceeded()

    def streamed(self, reply: StreamedReply) -> tuple[ModelResponse, Any]:
        if not reply.finished:
            failure = self.rt._incomplete(reply.text)
            # a server that gave up before answering anything (a crash after the 200)
            failure.nothing = not reply.text and not reply.calls
            raise failure
        return reply.response(self.rt.model), reply.raw((self.rt._key.reveal(),))

    def once(self, r: Any) -> tuple[ModelResponse, Any]:
        return self.rt._parse(r), as_json(r)

    def done(self, resp: ModelResponse) -> ModelResponse:
        if not self.streams and isinstance(resp.text, str):
            self.emit(resp.text)   # an unstreamed reply reaches the panel whole, at once
        if self._shown is not None:
            self._shown.close()
        return resp

    def failed(self, failure: ModelCallError) -> ModelCallError:
        failure.partial = self.rt.redact(failure.partial or "".join(self.received))
        failure.args = (self.rt.redact(str(failure)),)
        return failure


class ProviderRuntime(Runtime):
    """Base of the SDK-backed runtimes. Subclasses set `api` and implement `_create`,
    `_request`, `_parse`, `_read_event` and, where a way of asking needs it, `_shape` and
    `_refused`."""

    api = ProviderAPI("provider", "API_KEY", "sdk", "Client", "end", "model-name")

    @property
    def provider(self) -> str:
        """OpenTelemetry's gen_ai.provider.name for this runtime: the SDK's name ("openai",
        "anthropic"), which is what the conventions use."""
        return self.api.sdk
    #: The key used for a local server (base_url given, no key anywhere): local OpenAI-compatible
    #: servers ignore it but the SDK needs a non-empty one.
    local_key = "not-needed"
    #: Every way of asking: the text menu, native tools, a JSON schema.
    modes = frozenset({"menu", "tools", "json_schema"})

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, max_retries: int = 2, timeout: float | None = None,
                 system: str | None = None, name: str | None = None,
                 default_headers: dict | None = None, rate_limit: Any = None,
                 **request_options: Any):
        if not isinstance(model, str) or not model.strip():
            raise TypeError(f"{type(self).__name__} needs model='<model name>', e.g. "
                            f"{self.api.example_model!r}; got {model!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number >= 0 (the SDK's retries of "
                             f"429 and 5xx replies), got {max_retries!r}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        super().__init__(model=model, name=name or model)
        sdk = self._import_sdk()
        key = api_key or os.environ.get(self.api.env_key) or \
            (self.local_key if base_url else None)
        if not key:
            raise ModelCallError(
                f"{type(self).__name__} has no API key: set the {self.api.env_key} environment "
                f"variable or pass api_key=...; for a local server pass base_url=... (no key "
                f"needed). To run without a model, use ScriptedRuntime or ReplayRuntime.",
                kind="model_error")
        self._key = Secret(key)
        self.base_url = self.redact(safe_url(base_url))  # some gateways take the key in the path
        self.stream = bool(stream)
        self.streams = self.stream
        self.max_retries = max_retries
        self.timeout = timeout
        self.system = system
        self.request_options = request_options
        # every request of this runtime keeps to it (a run's own, evaluate(rate_limit=), wins)
        self.rate_limit = ratelimit.check_rate_limit(rate_limit)
        import httpx2

        def new_client(asynchronous: bool) -> Any:
            # a closure, so the key and the raw base_url are in no attribute and no repr
            cls = ("Async" if asynchronous else "") + self.api.client_class
            http = sdk.DefaultAsyncHttpxClient if asynchronous else sdk.DefaultHttpxClient
            return getattr(sdk, cls)(
                api_key=key, base_url=base_url, max_retries=max_retries,
                default_headers=default_headers,
                http_client=http(transport=deadline_transport(
                    httpx2, asynchronous, lambda: self.rate_limit)))
        self._new_client = new_client
        self._client = new_client(False)
        # an async client's connections belong to one event loop: one client per loop
        self._async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._loop_clients: dict[int, tuple] = {}
        self._sdk = sdk
        self._check_options(request_options)

    #: Request fields the runtime sets itself: the way of asking, the stream, the conversation.
    #: It sends HTTP requests through the transport that keeps to a RateLimit.
    honours_rate_limit = True

    _OWN_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "tools",
                             "tool_choice", "response_format", "parallel_tool_calls"})

    def _check_options(self, options: dict) -> None:
        """An unknown keyword is a mistake to name now, not a field to send the server (a typo
        would otherwise go out in every request); a field only some server knows goes in
        `extra_body=` on purpose."""
        own = sorted(set(options) & self._OWN_FIELDS)
        if own:
            raise TypeError(f"{type(self).__name__}() got {', '.join(map(repr, own))}, which the "
                            f"runtime sets itself (the way of asking is mode= on the decision; "
                            f"streaming is stream=)")
        accepted = self._sdk_fields()
        unknown = sorted(k for k in options if accepted is not None and k not in accepted)
        if unknown:
            name = unknown[0]
            raise TypeError(
                f"{type(self).__name__}() got an unexpected keyword argument {name!r}"
                + (f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else "")
                + f": the {self.api.sdk} SDK's request has no such field. To send a field of "
                f"your server's own, pass it in extra_body=, e.g. "
                f"{type(self).__name__}(..., extra_body={{{name!r}: ...}}).")

    def _sdk_fields(self) -> set | None:
        """The fields the SDK's request method takes (None: it takes any)."""
        import inspect
        try:
            params = inspect.signature(self._create()).parameters
        except (TypeError, ValueError):
            return None
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return None
        return set(params) | set(self.api.known_fields)

    # -- what subclasses provide ----------------------------------------------------------------
    def _request(self, messages: list[dict], tools: list[dict] | None,
                 tool_choice: str | None, response_format: dict | None) -> Ask:
        raise NotImplementedError

    def _parse(self, r: Any) -> ModelResponse:
        """A whole (not streamed) response as a ModelResponse."""
        raise NotImplementedError

    def _read_event(self, event: Any, reply: StreamedReply) -> None:
        """Add one streamed event of the provider's protocol to `reply`."""
        raise NotImplementedError

    def _create(self, client: Any = None) -> Callable:
        """The SDK method that sends one request, on `client` (default: the sync client)."""
        raise NotImplementedError

    def _shape(self, resp: ModelResponse, ask: Ask) -> ModelResponse:
        """The reply as the way of asking expects it (by default as it came)."""
        return resp

    def _refused(self, resp: ModelResponse) -> str | None:
        """The refusal the provider reports for `resp`, in words."""
        return resp.refusal

    def _negotiate(self, status: int | str | None, words: str, ask: Ask) -> Any:
        """A server's refusal of a request form: the record of it (the request is shaped
        again and sent once more), an error when no nearer form is left, or None when this is
        no refusal of a form (by default: never; see `server_forms`)."""
        return None

    def _dropped(self, exc: BaseException) -> bool:
        """A connection that failed, not a server's answer or the time budget."""
        return (isinstance(exc, self._sdk.APIConnectionError) or is_transport_error(exc)) \
            and not isinstance(exc, self._sdk.APITimeoutError) and not caused_by_timeout(exc)

    def _answered(self, ask: Ask) -> None:
        """The server answered `ask` (its forms are accepted)."""

    def _renegotiate(self, exc: BaseException, ask: Ask, call: _Call) -> Any:
        sdk = self._sdk
        # a server that crashes on a form after its 200 ends the stream, or drops the
        # connection, before any reply
        if (isinstance(exc, ModelCallError) and getattr(exc, "nothing", False)) or (
                call.started and not call.received and self._dropped(exc)):
            return self._negotiate("stream", "", ask)
        if not call.started and self._dropped(exc) and not unreachable(exc):
            # ... or before its headers: the server was reached and hung up without a word
            return self._negotiate("dropped", "", ask)
        if call.started or not isinstance(exc, sdk.APIStatusError) or \
                exc.response.headers.get(DEADLINE_HEADER) is not None:
            return None
        return self._negotiate(getattr(exc, "status_code", None),
                               server_message(exc, self.redact), ask)

    @staticmethod
    def _again(refused: Ask, record: dict, ask: Ask) -> Ask:
        """The request shaped anew after a refusal, carrying what was refused: the refusal's
        record takes the place of the new request's own entry for the same form, with what
        is sent now."""
        kinds = set(record["kind"].split("+")) | ({"structured"} if "strict" in
                                                   record["kind"] else set())
        now = [n for n in ask.negotiated if n["kind"] in kinds]
        record["sent"] = "; ".join(n["sent"] for n in now) or FORMS["omitted"]
        earlier = [n for n in refused.negotiated if "refused" in n]
        ask.negotiated = [*earlier, record, *(n for n in ask.negotiated if n["kind"] not in kinds)]
        return ask

    def _fit(self, kwargs: dict) -> dict:
        """Request fields the SDK's method has no parameter for (a sampling field of the API an
        SDK version no longer lists, a form a server was negotiated down to, such as vLLM's
        `guided_json`) go in `extra_body`, which the SDK sends at the top level."""
        accepted = getattr(self, "_accepted", None)
        if accepted is None:
            import inspect
            try:
                accepted = set(inspect.signature(self._create()).parameters)
            except (TypeError, ValueError):
                accepted = set(kwargs)
            self._accepted = accepted
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in accepted}
        if extra:
            kwargs["extra_body"] = {**extra, **(kwargs.get("extra_body") or {})}
        return kwargs

    # -- shared -------------------------------------------------------------------------------
    def _async_client(self) -> Any:
        import asyncio
        loop = asyncio.get_running_loop()
        try:
            client = self._async_clients.get(loop)
        except TypeError:  # a loop that takes no weak reference (some third-party loops):
            # kept with its client, so its id is not reused while the client is cached
            kept = self._loop_clients.get(id(loop))
            if kept is None:
                kept = self._loop_clients[id(loop)] = (loop, self._new_client(True))
            return kept[1]
        if client is None:
            client = self._async_clients[loop] = self._new_client(True)
        return client

    def _import_sdk(self):
        import importlib
        try:
            return importlib.import_module(self.api.sdk)
        except ImportError:
            raise ImportError(f"{type(self).__name__} needs the {self.api.sdk!r} package: "
                              f"pip install 'openprogram-decisions[{self.api.sdk}]'") from None

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return self.redact(f"{type(self).__name__}(model={self.model!r}{where}, "
                           f"stream={self.stream}, max_retries={self.max_retries})")

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} holds an API key and a network client and "
                        f"cannot be pickled; create it again in the other process")

    def _incomplete(self, text: list[str]) -> ModelCallError:
        """The error for a stream that ended without its closing event."""
        received = "".join(text)
        return ModelCallError(
            f"the stream from {self.api.name} model {self.model!r} at {self.where} ended "
            f"before the reply was complete (no {self.api.end_marker})."
            + (f" The {len(received)} characters received are kept as the partial reply."
               if received else ""), partial=received, kind="model_error")

    def redact(self, text: Any) -> Any:
        return redact(text, (self._key.reveal(),))

    @property
    def where(self) -> str:
        return self.base_url or f"the {self.api.name} API"

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        """One call on the SDK's client. `tool_choice="required"` forces a tool call (one:
        parallel calls are turned off); `response_format={"name", "schema"}` asks for a JSON
        document of that schema (see each runtime for how). The reply's `raw` holds the
        request body and the provider's response as JSON, redacted and bounded."""
        return run_sync(self._exchange(messages, tools, on_text, timeout, mode_args, self._send))

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        """`complete()` on the SDK's async client, on the caller's event loop: many calls
        overlap without a thread each."""
        return await self._exchange(messages, tools, on_text, timeout, mode_args, self._asend)

    async def _exchange(self, messages, tools, on_text, timeout, mode_args, send) -> ModelResponse:
        # Written once for both clients: on the sync path `send` never suspends, so
        # `complete()` drives this coroutine to its end without an event loop.
        if timeout is not None and timeout <= 0:
            raise ModelCallError("the time budget (timeout_s) ran out before this model call",
                                 kind="timeout")
        tool_choice, response_format = mode_arguments(mode_args)
        names, temperature = mode_args.get("confidence"), mode_args.get("temperature")

        def request() -> Ask:
            ask = self._request(messages, tools, tool_choice, response_format)
            if temperature is not None:  # a sample of decision.Samples: its own temperature
                ask.body["temperature"] = temperature
            if names is not None:
                self._ask_confidence(ask, list(names))
            return ask
        per_call = timeout if self.timeout is None else (
            self.timeout if timeout is None else min(self.timeout, timeout))
        call = _Call(self, on_text, per_call)
        token = current_deadline.set(call.deadline)
        try:
            ask = request()
            resend = False
            while True:
                # a reply can hold text UTF-8 cannot encode; the request that carries it back
                # must still go out (and the SDK encodes the body as UTF-8)
                ask.body = sendable(self._fit(ask.body))
                try:
                    resp, response_json = await send(ask, call)
                    self._answered(ask)
                    break
                except Exception as exc:
                    if resend and not call.started and self._dropped(exc):
                        # a server that crashed on the refused form may leave the pooled
                        # connection dead: the request goes once more, on a new one
                        resend = False
                        continue
                    refusal = self._renegotiate(exc, ask, call)
                    if refusal is None:
                        raise
                # outside the except block, so the SDK's exception is chained to nothing
                if isinstance(refusal, ModelCallError):
                    raise refusal
                ask = self._again(ask, refusal, request())
                call.started, resend = False, True
            return call.done(self._finish(resp, ask, response_json))
        except ModelCallError as exc:
            failure = exc
        except Exception as exc:  # every SDK / network failure becomes a ModelCallError
            failure = self._failure(exc, "".join(call.received), per_call, call.started)
        finally:
            current_deadline.reset(token)
        # Raised outside the except block: the SDK's exception (whose text may hold the key or
        # an auth header) is not chained onto the error a notebook will print.
        raise call.failed(failure)

    async def _send(self, ask: Ask, call: _Call) -> tuple[ModelResponse, Any]:
        """One request on the sync client (never suspends)."""
        call.streams = bool(ask.body.get("stream"))
        if not call.streams:
            return call.once(self._create()(**call.kwargs(ask)))
        stream = self._create()(**call.kwargs(ask))
        reply = call.streaming(ask)
        with stream:
            for event in stream:
                call.event(event, reply)
        return call.streamed(reply)

    async def _asend(self, ask: Ask, call: _Call) -> tuple[ModelResponse, Any]:
        """One request on the async client of the running event loop."""
        create = self._create(self._async_client())
        call.streams = bool(ask.body.get("stream"))
        if not call.streams:
            return call.once(await create(**call.kwargs(ask)))
        stream = await create(**call.kwargs(ask))
        reply = call.streaming(ask)
        async with stream:
            async for event in stream:
                call.event(event, reply)
        return call.streamed(reply)

    def _ask_confidence(self, ask: Ask, names: list[str]) -> None:
        """Ask for what gives the probability of each of `names` (a runtime with a
        `confidence_source` overrides this); the names are kept on the ask for the reply."""
        ask.confidence = names

    def _finish(self, resp: ModelResponse, ask: Ask, response_json: Any) -> ModelResponse:
        """The reply as the core gets it: shaped for the way of asking, a tool call cut off at
        the token limit left out, the refusal in words, every string the server chose
        redacted, and the raw record attached."""
        resp = self._shape(resp, ask)
        if resp.finish_reason in CUT_OFF and resp.tool_calls and \
                not isinstance(resp.tool_calls[-1].args, dict):
            cut = resp.tool_calls.pop()
            ask.notes.append(f"the call of tool {cut.name!r} was cut off at the token limit "
                             f"before its arguments were complete; it is left out of the reply")
        resp.refusal = self._refused(resp)
        masks = _masks(resp)
        resp = self._redacted(resp)
        if _masks(resp) > masks:  # the redaction is recorded in the trace, not only done
            ask.notes.append(f"the reply held the API key, or {_PIECE_NOTE}, in "
                             f"{_masks(resp) - masks} place(s) (as written, spelled with JSON "
                             f"escapes, or cut across streamed pieces); each is replaced with "
                             f"{MASK}")
        # the body as it goes on the wire: the SDK sends extra_body's fields at the top level
        sent = {k: v for k, v in ask.body.items() if k != "extra_body"}
        sent.update(ask.body.get("extra_body") or {})
        sent = without_secrets(sent)   # a key in extra_query / extra_body is not the server's
        raw = raw_record(sent, response_json, self.redact, ask.notes)
        if ask.negotiated:
            raw["negotiated"] = redact_json(ask.negotiated, self.redact)
        if ask.reply_as_sent is not None:
            raw["reply"] = bounded(self.redact(ask.reply_as_sent))
        resp.raw = raw
        return resp

    def _redacted(self, resp: ModelResponse) -> ModelResponse:
        """`resp` with every string the server chose redacted: text, tool calls (their names
        and ids too, not only the arguments), the model's name, the usage figures, the finish
        reason and the refusal."""
        resp.text = self.redact(resp.text)
        for tc in resp.tool_calls:
            tc.name, tc.id = self.redact(tc.name), self.redact(tc.id)
            tc.args = redact_json(tc.args, self.redact)
        resp.model = self.redact(resp.model)
        resp.usage = redact_json(resp.usage, self.redact)
        resp.finish_reason = self.redact(resp.finish_reason)
        resp.refusal = self.redact(resp.refusal)
        return resp

    def _failure(self, exc: BaseException, partial: str, timeout: float | None,
                 started: bool) -> ModelCallError:
        sdk = self._sdk
        kept = (f" The {len(partial)} characters received before it are kept as the partial "
                f"reply." if partial else "")
        what = f"{self.api.name} model {self.model!r} at {self.where}"
        spent = isinstance(exc, sdk.APIStatusError) and \
            exc.response.headers.get(DEADLINE_HEADER) is not None
        if spent or isinstance(exc, (DeadlineExceeded, sdk.APITimeoutError)) or \
                caused_by_timeout(exc):
            budget = f"{timeout:.3g}s" if timeout is not None else "the SDK's timeout"
            return ModelCallError(f"{what} did not finish its reply within {budget} (the time "
                                  f"left of the decision's timeout_s, or the runtime's timeout)."
                                  + kept, partial=partial, kind="timeout")
        if isinstance(exc, sdk.APIError) and started and \
                not isinstance(exc, sdk.APIConnectionError):
            # an error event inside a stream that had begun (e.g. overloaded mid-reply)
            return ModelCallError(f"{what} reported an error in the middle of the reply "
                                  f"({server_message(exc, self.redact)}); run again." + kept,
                                  partial=partial, kind="model_error")
        if isinstance(exc, sdk.APIStatusError):
            return ModelCallError(self._status_message(exc, what) + kept, partial=partial,
                                  kind="model_error")
        if isinstance(exc, sdk.APIConnectionError) or is_transport_error(exc):
            cause = cause_text(exc, self.redact)
            if started:
                return ModelCallError(f"the connection to {what} dropped in the middle of the "
                                      f"reply ({cause})." + kept, partial=partial,
                                      kind="model_error")
            return ModelCallError(
                f"could not reach {what} ({cause}) after {self.max_retries} "
                f"retries. Is the server running and is base_url right? (a local OpenAI-"
                f"compatible server usually listens on http://localhost:<port>/v1)",
                partial=partial, kind="model_error")
        if isinstance(exc, (ValueError, getattr(sdk, "APIResponseValidationError", ValueError),
                            Malformed)):
            return ModelCallError(f"{what} sent a malformed reply that could not be read "
                                  f"({type(exc).__name__}: {exc}). Check that base_url points "
                                  f"at an endpoint of the {self.api.name} API." + kept,
                                  partial=partial, kind="model_error")
        return ModelCallError(f"the call to {what} failed: {type(exc).__name__}: {exc}" + kept,
                              partial=partial, kind="model_error")

    def _status_message(self, exc: Any, what: str) -> str:
        code = getattr(exc, "status_code", None)
        detail = server_message(exc, self.redact)
        retried = f" (after {self.max_retries} retries)" if self.max_retries else ""
        if code == 401:
            return (f"{what} rejected the API key (401: {detail}). Check the {self.api.env_key} "
                    f"environment variable or the api_key= argument.")
        if code == 403:
            return (f"{what} refused the request (403: {detail}); the key lacks permission "
                    f"for this model or endpoint.")
        if code == 404:
            return (f"{what} was not found (404: {detail}). Check the model name (for a local "
                    f"server, the names it lists, e.g. `ollama list`) and that base_url is the "
                    f"API root (OpenAI-compatible servers usually end in /v1).")
        patience = exc.response.headers.get(PATIENCE_HEADER) if code in (429, 529) else None
        if patience is not None:
            return (f"{what} is still rate limited ({code}: {detail}) after the run waited "
                    f"{patience}s without a single successful reply (the RateLimit's "
                    f"patience_s). Lower requests_per_minute / tokens_per_minute, raise "
                    f"patience_s, or run again later.")
        if code == 429:
            return (f"{what} is rate limited (429: {detail}){retried}. Wait and run again, "
                    f"raise max_retries=, or lower the request rate.")
        if code is not None and code >= 500:
            return (f"{what} had a server error ({code}: {detail}){retried}. It is on the "
                    f"provider's side; run again later. If it fails the same way every time, "
                    f"the server may not take something the request carries"
                    f"{self._shape_advice()}.")
        if code in RETRY_STATUSES:   # 408, 409: the SDK retried them; they may yet pass
            return f"{what} answered HTTP {code} ({detail}){retried}; run again."
        # Any other 4xx is about the request itself: the same request gets the same answer.
        return (f"{what} rejected the request ({code}: {detail}). Running it again will not "
                f"help: the server does not accept something in the request"
                f"{self._shape_advice()}.")

    def _shape_advice(self) -> str:
        """What to do about a request the server does not accept (after a comma)."""
        return ("; check the model name, the keyword arguments given to the runtime and the "
                "way of asking (mode=)")


_PIECE_NOTE = "8 or more of its characters"


def _masks(resp: ModelResponse) -> int:
    """How many masks the strings of `resp` the server chose hold."""
    texts = [resp.text, resp.refusal, resp.model, resp.finish_reason]
    for tc in resp.tool_calls:
        texts += [tc.name, tc.id, json.dumps(tc.args, ensure_ascii=False, default=repr)]
    return sum(t.count(MASK) for t in texts if isinstance(t, str))


