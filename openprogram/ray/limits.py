"""The rate limit of a whole Ray job: one actor (`_Limiter`) holds the `RateLimit`; each
worker's runtime asks it through `_SharedLimit`, and Ray's own HTTP stage through
`paced_session`, so a 429 seen by any worker pauses every worker.
"""
from __future__ import annotations

import time

from ..base.errors import require
from ..evaluation.ratelimit import RateLimit, check_rate_limit

ray = require("ray", "ray", "openprogram.ray")

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any


# ---------------------------------------------------------------------------------------------
# The rate limit shared by the cluster
# ---------------------------------------------------------------------------------------------


@ray.remote(num_cpus=0)
class _Limiter:
    """The one `RateLimit` of a job, in a Ray actor: `reserve` answers when the request may go
    (the wait happens here, on the actor's event loop, one remote call per request), and a 429
    seen by any worker pauses every worker's requests."""

    def __init__(self, rpm: Any, tpm: Any, patience_s: float):
        self.limit = RateLimit(rpm, tpm, patience_s=patience_s)

    async def reserve(self, tokens: int) -> int:
        import asyncio
        while True:
            wait, epoch = self.limit.reserve(tokens)
            if epoch >= 0:
                return epoch
            await asyncio.sleep(wait)

    def done(self, ok: bool) -> None:
        self.limit.done(ok)

    def limited(self, epoch: int, wait_s: float | None, since_first: float, cause: str) -> bool:
        # the worker's monotonic clock is not the actor's: the first try travels as an age
        return self.limit.limited(epoch, wait_s, time.monotonic() - since_first, cause)

    def stats(self) -> dict:
        return dict(self.limit.stats)


class _SharedLimit(RateLimit):
    """A worker's view of the job's `_Limiter`: what the provider transport asks of a
    `RateLimit`, answered by the actor (the transport's calls come from the rows' threads)."""

    def __init__(self, actor: Any, patience_s: float):
        super().__init__(patience_s=patience_s)
        self.actor = actor

    def reserve(self, tokens: int = 0) -> tuple[float, int]:
        return 0.0, ray.get(self.actor.reserve.remote(tokens))

    def done(self, ok: bool = True) -> None:
        self.actor.done.remote(ok)   # in order after this worker's reserve; nothing to wait for

    def limited(self, epoch: int, wait_s: float | None, first_try: float, cause: str) -> bool:
        return bool(ray.get(self.actor.limited.remote(epoch, wait_s,
                                                      time.monotonic() - first_try, cause)))

    def wait_sync(self, seconds: float) -> None:
        time.sleep(seconds)

    def status(self) -> str | None:
        return None


def shared_limit(rate_limit: Any) -> Any:
    """`rate_limit=` as the actor every worker of a job keeps to (None: none given)."""
    limit = check_rate_limit(rate_limit)
    if limit is None:
        return None
    return _Limiter.remote(limit.requests_per_minute, limit.tokens_per_minute,
                           limit.patience_s), limit.patience_s


def paced_session(actor: Any) -> Any:
    """An aiohttp session whose every request first waits for its turn at the job's
    `_Limiter` and reports how it went (a 429 / 529 pauses every worker): what
    `HttpRequestProcessorConfig(session_factory=)` opens, so Ray's HTTP stage keeps to the
    limit `decide` keeps to."""
    import aiohttp

    from ..runtimes.providers.transport import header_wait
    hooks = aiohttp.TraceConfig()

    async def start(session: Any, ctx: Any, params: Any) -> None:
        ctx.epoch = await actor.reserve.remote(0)
        ctx.first = time.monotonic()

    async def end(session: Any, ctx: Any, params: Any) -> None:
        code = params.response.status
        if code in (429, 529):
            await actor.limited.remote(ctx.epoch, header_wait(params.response.headers),
                                       time.monotonic() - ctx.first,
                                       f"{code} from the server")
        else:
            actor.done.remote(code < 400)

    async def failed(session: Any, ctx: Any, params: Any) -> None:
        actor.done.remote(False)

    hooks.on_request_start.append(start)
    hooks.on_request_end.append(end)
    hooks.on_request_exception.append(failed)
    return aiohttp.ClientSession(trace_configs=[hooks])
