"""The time budget on the wire: an HTTP transport for the SDKs' httpx client that clamps each
attempt's timeout to the time the decision has left (read from a context variable on every
attempt, the SDK's own retries included), vetoes a retry that would start after it, and honours
a server's Retry-After within it; and the base URL shown without its credentials.
"""
from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...base.errors import OpenProgramError
from ...base.model_protocol import run_sync
from ...evaluation import ratelimit

#: The deadline (time.monotonic()) of the model call running in this context, read by the HTTP
#: transport on every attempt the SDK makes, retries included.
current_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "openprogram_provider_deadline", default=None)

RETRY_STATUSES = {408, 409, 429}
DEADLINE_HEADER = "x-openprogram-deadline"
PATIENCE_HEADER = "x-openprogram-patience"   # a rate limit the run waited out its patience on
SDK_FIRST_BACKOFF = 0.375   # the SDKs sleep 0.5 s * 2**n, minus up to 25% jitter, between retries


class DeadlineExceeded(OpenProgramError):
    """Raised between streamed events when the time budget is spent."""


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


def deadline_transport(httpx2: Any, asynchronous: bool = False,
                       own_limit: Callable[[], Any] | None = None) -> Any:
    """An httpx2 transport (the async kind with `asynchronous=True`) that enforces the
    contextual deadline on every attempt the SDK makes.

    Each attempt's timeouts are clamped to the time left. An attempt that would start with no
    time left, or that timed out with too little time left for a retry, is answered with a
    synthetic 408 marked `x-should-retry: false` (the SDKs' own switch) and
    `x-openprogram-deadline`, so the SDK gives up at once and the runtime reports a timeout; a
    retryable status (429, 5xx, ...) whose retry could not start before the deadline is marked
    `x-should-retry: false` too, so the error comes back now instead of after a sleep past the
    budget. (Raising from here would not work: one SDK wraps any transport exception into a
    retryable connection error.)"""

    async def attempt(request, send, sleep, discard):
        """One attempt through `send`, kept to the run's rate limit (`ratelimit`): paced
        before it goes, and sent again after the run's pause while the server answers 429 /
        529 — the SDK sees a rate limit only once the run's patience is spent (then marked
        not to be retried: the run already waited)."""
        limit = ratelimit.choose(ratelimit.current(),
                                 own_limit() if own_limit is not None else None)
        if limit is None:
            return await once(request, send)
        try:   # ~4 bytes a token; a streamed body (a batch file upload) is not counted
            tokens = len(request.content) // 4
        except Exception:
            tokens = 0
        first = time.monotonic()
        deadline = current_deadline.get()
        while True:
            while True:
                wait, epoch = limit.reserve(tokens)
                if epoch >= 0:
                    break
                if deadline is not None and time.monotonic() + wait >= deadline:
                    return _spent(request)
                await sleep(limit, wait)
            try:
                response = await once(request, send)
            except BaseException:
                limit.done(ok=False)
                raise
            code = response.status_code
            if code not in ratelimit.LIMIT_STATUSES or response.headers.get(DEADLINE_HEADER):
                limit.done(ok=code < 400)
                return response
            wait = header_wait(response.headers)
            cause = f"{code} from the server" + (f", retry after {wait:g}s" if wait else "")
            if not limit.limited(epoch, wait, first, cause) or (
                    deadline is not None and time.monotonic() + (wait or 0) >= deadline):
                response.headers["x-should-retry"] = "false"
                response.headers[PATIENCE_HEADER] = f"{limit.patience_s:g}"
                return response
            await discard(response)

    async def once(request, send):
        """One attempt through `send` (the inner transport), within the deadline."""
        deadline = current_deadline.get()
        if deadline is None:
            return await send(request)
        left = deadline - time.monotonic()
        if left <= 0:
            return _spent(request)
        t = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {
            k: left if t.get(k) is None else min(t[k], left)
            for k in ("connect", "read", "write", "pool")}
        try:
            response = await send(request)
        except httpx2.TimeoutException:
            if deadline - time.monotonic() < SDK_FIRST_BACKOFF:
                return _spent(request)
            raise
        if response.status_code in RETRY_STATUSES or response.status_code >= 500:
            wait = retry_wait(response.headers, request.headers)
            if time.monotonic() + wait >= deadline:
                response.headers["x-should-retry"] = "false"
        return response

    class DeadlineTransport(httpx2.BaseTransport):
        def __init__(self):
            self._inner = httpx2.HTTPTransport()

        def handle_request(self, request):
            async def send(r):  # never suspends: run_sync drives it without a loop
                return self._inner.handle_request(r)

            async def sleep(limit, seconds):  # a thread waits (never suspending the coroutine)
                limit.wait_sync(seconds)

            async def discard(response):
                response.read()
                response.close()
            return run_sync(attempt(request, send, sleep, discard))

        def close(self):
            self._inner.close()

    class AsyncDeadlineTransport(httpx2.AsyncBaseTransport):
        def __init__(self):
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request):
            return await attempt(request, self._inner.handle_async_request, _asleep, _adiscard)

        async def aclose(self):
            await self._inner.aclose()

    def _spent(request):
        return httpx2.Response(
            408, request=request,
            headers={"x-should-retry": "false", DEADLINE_HEADER: "1"},
            json={"type": "error", "error": {"type": "timeout", "message":
                                             "the time budget of the call is spent"}})

    async def _asleep(limit, seconds):
        import asyncio
        await asyncio.sleep(seconds)

    async def _adiscard(response):
        await response.aread()
        await response.aclose()

    return AsyncDeadlineTransport() if asynchronous else DeadlineTransport()


def header_wait(headers: Any) -> float | None:
    """The wait a rate-limited answer asks for: `retry-after-ms`, else `retry-after` in
    seconds (an HTTP date is not read: the default wait applies), bounded to an hour."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            v = float(headers.get(name))
        except (TypeError, ValueError):
            continue
        if v >= 0 and v == v:
            return min(v / scale, 3600.0)
    return None


def retry_wait(headers: Any, request_headers: Any) -> float:
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
    return SDK_FIRST_BACKOFF * 2 ** n


