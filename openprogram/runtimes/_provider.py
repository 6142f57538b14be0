"""What the OpenAI and Anthropic runtimes share: keys, the time budget, faults, and secrets.

A provider runtime is a `Runtime` whose `complete()` sends the conversation through an official
SDK. This module holds everything that is not protocol: finding the API key (argument, then the
provider's environment variable) and keeping it out of every repr, error and trace; enforcing the
decision's time budget across the SDK's own retries (an HTTP transport that clamps each attempt's
timeout to the time left and vetoes a retry that would start after it); and turning every SDK or
network failure into a `ModelCallError` whose message says what happened and what to do, with
the text received before the failure kept in `partial`. The SDKs and httpx2 are imported only
when a runtime is created, so importing `openprogram.runtimes` stays standard-library-only.
"""
from __future__ import annotations

import contextvars
import json
import os
import re
import time
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from ..agentic_programming.runtime import ModelCallError, ModelResponse, Runtime, ToolCall

#: The deadline (time.monotonic()) of the model call running in this context, read by the HTTP
#: transport on every attempt the SDK makes, retries included.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "openprogram_provider_deadline", default=None)

_RETRY_STATUSES = {408, 409, 429}
DEADLINE_HEADER = "x-openprogram-deadline"
_SDK_FIRST_BACKOFF = 0.375   # the SDKs sleep 0.5 s * 2**n, minus up to 25% jitter, between retries


class DeadlineExceeded(Exception):
    """Raised between streamed events when the time budget is spent."""


class _Secret:
    """An API key that does not show itself: its repr, str and pickled form are masked."""
    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("an API key cannot be pickled; create the runtime again in the other "
                        "process (it reads the key from the environment)")


_KEYLIKE = re.compile(r"(?i)\b(sk-(?:ant-|proj-)?[A-Za-z0-9_\-\*]{6,}|bearer\s+[^\s'\",}]+|"
                      r"(x-api-key|api[_-]?key|authorization)(['\"]?\s*[:=]\s*['\"]?)"
                      r"(?=[^\s'\",}]*\d)[^\s'\",}]{8,})")


def _mask_pieces(text: str, secret: str, n: int = 8) -> str:
    """Mask every stretch of `text` made of n-character pieces of `secret`."""
    hit = bytearray(len(text))
    for i in range(len(secret) - n + 1):
        piece = secret[i:i + n]
        at = text.find(piece)
        while at != -1:
            hit[at:at + n] = b"\1" * n
            at = text.find(piece, at + 1)
    if not any(hit):
        return text
    out, i = [], 0
    while i < len(text):
        if hit[i]:
            while i < len(text) and hit[i]:
                i += 1
            out.append("[redacted]")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def redact(text: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`text` with every secret, every run of 8+ characters taken from a secret (servers often
    echo part of a bad key), and anything shaped like a key or an auth header masked."""
    if not isinstance(text, str) or not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= 8:
            text = _mask_pieces(text, secret)
        elif secret:
            text = text.replace(secret, "[redacted]")

    def mask(m: re.Match) -> str:
        if m.group(2):
            return m.group(2) + m.group(3) + "[redacted]"
        return m.group(0).split()[0] + " [redacted]" if m.group(0).lower().startswith(
            "bearer") else "sk-[redacted]"
    return _KEYLIKE.sub(mask, text)


def _redact_json(value: Any, redact_text: Callable[[Any], Any]) -> Any:
    """`value` (decoded JSON) with every string in it, keys included, redacted."""
    if isinstance(value, dict):
        return {redact_text(k): _redact_json(v, redact_text) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, redact_text) for v in value]
    return redact_text(value)


def safe_url(url: str | None) -> str | None:
    """A base_url as it may be shown: without user:password and without a query string."""
    if not url:
        return url
    try:
        p = urlsplit(url)
    except ValueError:
        return "<unparsable base_url>"
    host = p.hostname or ""
    if p.port:
        host += f":{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


def deadline_transport(httpx2: Any) -> Any:
    """An httpx2 transport that enforces the contextual deadline on every attempt the SDK makes.

    Each attempt's timeouts are clamped to the time left. An attempt that would start with no
    time left, or that timed out with too little time left for a retry, is answered with a
    synthetic 408 marked `x-should-retry: false` (the SDKs' own switch) and
    `x-openprogram-deadline`, so the SDK gives up at once and the runtime reports a timeout; a
    retryable status (429, 5xx, ...) whose retry could not start before the deadline is marked
    `x-should-retry: false` too, so the error comes back now instead of after a sleep past the
    budget. (Raising from here would not work: one SDK wraps any transport exception into a
    retryable connection error.)"""

    class DeadlineTransport(httpx2.BaseTransport):
        def __init__(self):
            self._inner = httpx2.HTTPTransport()

        def handle_request(self, request):
            deadline = _deadline.get()
            if deadline is None:
                return self._inner.handle_request(request)
            left = deadline - time.monotonic()
            if left <= 0:
                return _spent(request)
            t = dict(request.extensions.get("timeout") or {})
            request.extensions["timeout"] = {
                k: left if t.get(k) is None else min(t[k], left)
                for k in ("connect", "read", "write", "pool")}
            try:
                response = self._inner.handle_request(request)
            except httpx2.TimeoutException:
                if deadline - time.monotonic() < _SDK_FIRST_BACKOFF:
                    return _spent(request)
                raise
            if response.status_code in _RETRY_STATUSES or response.status_code >= 500:
                wait = _retry_wait(response.headers, request.headers)
                if time.monotonic() + wait >= deadline:
                    response.headers["x-should-retry"] = "false"
            return response

        def close(self):
            self._inner.close()

    def _spent(request):
        return httpx2.Response(
            408, request=request,
            headers={"x-should-retry": "false", DEADLINE_HEADER: "1"},
            json={"type": "error", "error": {"type": "timeout", "message":
                                             "the time budget of the call is spent"}})

    return DeadlineTransport()


def _retry_wait(headers: Any, request_headers: Any) -> float:
    """The shortest sleep the SDK would take before retrying this response."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            v = float(headers.get(name))
        except (TypeError, ValueError):
            continue
        if v > 0:
            return v / scale
    try:
        n = int(request_headers.get("x-stainless-retry-count") or 0)
    except ValueError:
        n = 0
    return _SDK_FIRST_BACKOFF * 2 ** n


def json_args(raw: Any) -> Any:
    """A tool call's arguments as a dict. Text that is not a JSON object is passed on as-is, so
    the tool loop answers the model with "arguments must be a JSON object" (the model can fix
    it), instead of the whole turn failing."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return raw
    return value


class ProviderRuntime(Runtime):
    """Base of the SDK-backed runtimes. Subclasses set `provider`, `env_key`, `sdk_name`,
    `client_class`, `end_marker` and implement `_create`, `_request`, `_complete_once` and
    `_complete_stream`."""

    provider = "provider"
    env_key = "API_KEY"
    sdk_name = "sdk"
    extra = "sdk"
    client_class = "Client"      # the SDK's client class, e.g. openai.OpenAI
    end_marker = "end"           # the stream event that says the reply is complete
    example_model = "model-name"  # shown when model= is missing
    #: The key used for a local server (base_url given, no key anywhere): local OpenAI-compatible
    #: servers ignore it but the SDK needs a non-empty one.
    local_key = "not-needed"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, max_retries: int = 2, timeout: float | None = None,
                 system: str | None = None, name: str | None = None,
                 default_headers: dict | None = None, **request_options: Any):
        if not isinstance(model, str) or not model.strip():
            raise TypeError(f"{type(self).__name__} needs model='<model name>', e.g. "
                            f"{self.example_model!r}; got {model!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number >= 0 (the SDK's retries of "
                             f"429 and 5xx replies), got {max_retries!r}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        super().__init__(model=model, name=name or model)
        sdk = self._import_sdk()
        key = api_key or os.environ.get(self.env_key) or (self.local_key if base_url else None)
        if not key:
            raise ModelCallError(
                f"{type(self).__name__} has no API key: set the {self.env_key} environment "
                f"variable or pass api_key=...; for a local server pass base_url=... (no key "
                f"needed). To run without a model, use ScriptedRuntime or ReplayRuntime.",
                kind="model_error")
        self._key = _Secret(key)
        self.base_url = safe_url(base_url)
        self.stream = bool(stream)
        self.streams = self.stream
        self.max_retries = max_retries
        self.timeout = timeout
        self.system = system
        self.request_options = request_options
        import httpx2
        self._client = getattr(sdk, self.client_class)(
            api_key=key, base_url=base_url, max_retries=max_retries,
            default_headers=default_headers,
            http_client=sdk.DefaultHttpxClient(transport=deadline_transport(httpx2)))
        self._sdk = sdk

    # -- what subclasses provide ----------------------------------------------------------------
    def _request(self, messages: list[dict], tools: list[dict] | None) -> dict:
        raise NotImplementedError

    def _complete_once(self, kwargs: dict) -> ModelResponse:
        raise NotImplementedError

    def _complete_stream(self, kwargs: dict, emit: Callable[[str], None],
                         deadline: float | None) -> ModelResponse:
        raise NotImplementedError

    def _create(self) -> Callable:
        """The SDK method that sends one request."""
        raise NotImplementedError

    def _fit(self, kwargs: dict) -> dict:
        """Request fields the SDK's method has no parameter for (an option of a newer API, or
        of a compatible server, such as `top_k=` or `temperature=`) go in `extra_body`, which
        the SDK sends as-is."""
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
    def _import_sdk(self):
        import importlib
        try:
            return importlib.import_module(self.sdk_name)
        except ImportError:
            raise ImportError(f"{type(self).__name__} needs the {self.sdk_name!r} package: "
                              f"pip install 'openprogram-decisions[{self.extra}]'") from None

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return (f"{type(self).__name__}(model={self.model!r}{where}, stream={self.stream}, "
                f"max_retries={self.max_retries})")

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} holds an API key and a network client and "
                        f"cannot be pickled; create it again in the other process")

    def _incomplete(self, text: list[str]) -> ModelCallError:
        """The error for a stream that ended without its closing event."""
        received = "".join(text)
        return ModelCallError(
            f"the stream from {self.provider} model {self.model!r} at {self.where} ended "
            f"before the reply was complete (no {self.end_marker})."
            + (f" The {len(received)} characters received are kept as the partial reply."
               if received else ""), partial=received, kind="model_error")

    def redact(self, text: Any) -> Any:
        return redact(text, (self._key.reveal(),))

    @property
    def where(self) -> str:
        return self.base_url or f"the {self.provider} API"

    def complete(self, messages, *, tools=None, on_text=None, timeout=None) -> ModelResponse:
        if timeout is not None and timeout <= 0:
            raise ModelCallError("the time budget (timeout_s) ran out before this model call",
                                 kind="timeout")
        per_call = timeout if self.timeout is None else (
            self.timeout if timeout is None else min(self.timeout, timeout))
        deadline = time.monotonic() + per_call if per_call is not None else None
        received: list[str] = []
        state = {"started": False}

        def emit(chunk: str) -> None:
            state["started"] = True
            if chunk:
                received.append(chunk)
                if on_text is not None:
                    on_text(chunk)

        token = _deadline.set(deadline)
        failure: ModelCallError | None = None
        try:
            kwargs = self._fit(self._request(messages, tools))
            if per_call is not None:
                kwargs["timeout"] = per_call
            if self.stream:
                resp = self._complete_stream(kwargs, emit, deadline)
            else:
                resp = self._complete_once(kwargs)
                if on_text is not None and isinstance(resp.text, str) and resp.text:
                    on_text(resp.text)
            resp.text = self.redact(resp.text)
            for tc in resp.tool_calls:  # arguments are model text too
                tc.args = _redact_json(tc.args, self.redact)
            return resp
        except ModelCallError as exc:
            failure = exc
        except Exception as exc:  # every SDK / network failure becomes a ModelCallError
            failure = self._failure(exc, "".join(received), per_call, state["started"])
        finally:
            _deadline.reset(token)
        # Raised outside the except block: the SDK's exception (whose text may hold the key or
        # an auth header) is not chained onto the error a notebook will print.
        failure.partial = self.redact(failure.partial or "".join(received))
        failure.args = (self.redact(str(failure)),)
        raise failure

    def _failure(self, exc: BaseException, partial: str, timeout: float | None,
                 started: bool) -> ModelCallError:
        sdk = self._sdk
        kept = (f" The {len(partial)} characters received before it are kept as the partial "
                f"reply." if partial else "")
        what = f"{self.provider} model {self.model!r} at {self.where}"
        spent = isinstance(exc, sdk.APIStatusError) and \
            exc.response.headers.get(DEADLINE_HEADER) is not None
        if spent or isinstance(exc, (DeadlineExceeded, sdk.APITimeoutError)) or \
                _caused_by_timeout(exc):
            budget = f"{timeout:.3g}s" if timeout is not None else "the SDK's timeout"
            return ModelCallError(f"{what} did not finish its reply within {budget} (the time "
                                  f"left of the decision's timeout_s, or the runtime's timeout)."
                                  + kept, partial=partial, kind="timeout")
        if isinstance(exc, sdk.APIError) and started and \
                not isinstance(exc, sdk.APIConnectionError):
            # an error event inside a stream that had begun (e.g. overloaded mid-reply)
            return ModelCallError(f"{what} reported an error in the middle of the reply "
                                  f"({_server_message(exc)}); run again." + kept,
                                  partial=partial, kind="model_error")
        if isinstance(exc, sdk.APIStatusError):
            return ModelCallError(self._status_message(exc, what) + kept, partial=partial,
                                  kind="model_error")
        if isinstance(exc, sdk.APIConnectionError) or _is_transport_error(exc):
            if started:
                return ModelCallError(f"the connection to {what} dropped in the middle of the "
                                      f"reply ({_cause_text(exc)})." + kept, partial=partial,
                                      kind="model_error")
            return ModelCallError(
                f"could not reach {what} ({_cause_text(exc)}) after {self.max_retries} "
                f"retries. Is the server running and is base_url right? (a local OpenAI-"
                f"compatible server usually listens on http://localhost:<port>/v1)",
                partial=partial, kind="model_error")
        if isinstance(exc, (ValueError, getattr(sdk, "APIResponseValidationError", ValueError),
                            _Malformed)):
            return ModelCallError(f"{what} sent a malformed reply that could not be read "
                                  f"({type(exc).__name__}: {exc}). Check that base_url points "
                                  f"at a {self.provider}-compatible endpoint." + kept,
                                  partial=partial, kind="model_error")
        return ModelCallError(f"the call to {what} failed: {type(exc).__name__}: {exc}" + kept,
                              partial=partial, kind="model_error")

    def _status_message(self, exc: Any, what: str) -> str:
        code = getattr(exc, "status_code", None)
        detail = _server_message(exc)
        retried = f" (after {self.max_retries} retries)" if self.max_retries else ""
        if code == 401:
            return (f"{what} rejected the API key (401: {detail}). Check the {self.env_key} "
                    f"environment variable or the api_key= argument.")
        if code == 403:
            return (f"{what} refused the request (403: {detail}); the key lacks permission "
                    f"for this model or endpoint.")
        if code == 404:
            return (f"{what} was not found (404: {detail}). Check the model name (for a local "
                    f"server, the names it lists, e.g. `ollama list`) and that base_url is the "
                    f"API root (OpenAI-compatible servers usually end in /v1).")
        if code == 429:
            return (f"{what} is rate limited (429: {detail}){retried}. Wait and run again, "
                    f"raise max_retries=, or lower the request rate.")
        if code is not None and code >= 500:
            return (f"{what} had a server error ({code}: {detail}){retried}. It is on the "
                    f"provider's side; run again later.")
        if code == 400:
            return f"{what} rejected the request (400: {detail})."
        return f"{what} answered HTTP {code}: {detail}"


class _Malformed(ValueError):
    """A reply that parsed as JSON but is not the provider's shape."""


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"][:300]
    msg = getattr(exc, "message", None) or str(exc)
    return str(msg)[:300]


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _caused_by_timeout(exc: BaseException) -> bool:
    try:
        import httpx2
    except ImportError:
        return False
    return any(isinstance(e, (httpx2.TimeoutException, DeadlineExceeded, TimeoutError))
               for e in _chain(exc))


def _is_transport_error(exc: BaseException) -> bool:
    try:
        import httpx2
    except ImportError:
        return False
    return any(isinstance(e, (httpx2.TransportError, ConnectionError)) for e in _chain(exc))


def _cause_text(exc: BaseException) -> str:
    """The innermost readable cause, e.g. "ConnectError: [Errno 111] Connection refused"."""
    last = exc
    for e in _chain(exc):
        last = e
    text = str(last) or type(last).__name__
    return f"{type(last).__name__}: {text}"[:200]


def tc_parts(tc: Any) -> tuple[str | None, str, Any]:
    """(id, name, args) of a tool call held as a ToolCall or as its dict form."""
    if isinstance(tc, dict):
        return tc.get("id"), tc.get("name", ""), tc.get("args", tc.get("input", {}))
    return tc.id, tc.name, tc.args


def tool_call(name: str, args: Any, id: str | None) -> ToolCall:
    return ToolCall(name=name, args=json_args(args), id=id)
