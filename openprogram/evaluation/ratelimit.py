"""Rate limits honoured across a whole run: pacing before sending, one pause for everyone on a 429.

A provider limits requests and tokens per minute for the whole key, not per call. A `RateLimit`
is shared by every request of a run (`evaluate(..., rate_limit=)`) or of a runtime
(`OpenAIRuntime(..., rate_limit=)`): before a request is sent it waits for its turn, so requests
start no closer together than `60 / requests_per_minute` seconds and the request's estimated
tokens (its body's bytes / 4) spend `tokens_per_minute` no faster than allowed. When the server
answers 429 (or Anthropic's 529, overloaded), the whole run pauses until the server's
`retry-after-ms` / `retry-after` says (1 s when it says nothing), the request is sent again
after the pause, and the run's concurrency halves (once per pause: the other requests answered
429 in the same burst do not halve it again); each successful reply then grows it back by
1/concurrency, so by one after as many successes as requests in flight (a request counts as
in flight until its answer starts: a streamed reply frees its slot at its headers, since the
provider's limits count requests, not open streams). A request fails (as
the runtime's `model_error`) only when the run has had no successful reply for `patience_s`
(default 600 s), counted from the later of the request's first attempt and the run's last
success. The provider transport (`runtimes.providers.transport`) applies it to every HTTP request it
sends; it absorbs the 429s, so the SDK's own retries (`max_retries=`) never see them and there
is no second, independent retry of a rate limit. Waiting is plain arithmetic on a clock:
`reserve()` says how long to wait, the caller sleeps (a thread or an event loop, each its own
way).

The handling is on by default for a run: `evaluate`, `aevaluate`, `compare` and `acompare`
without `rate_limit=` keep to a `RateLimit()` of their own (no pacing, since no limit is known,
but the pause, the halving and the patience), because a user's first run is the one written
without it and a rate limit must not lose its rows. That default yields to a runtime's own
`rate_limit=`; `rate_limit=False` turns the handling off (the SDK's own retries then see the
429s). A lone call outside a run keeps the SDK's retries: one call has no run to pause.
"""
from __future__ import annotations

import contextvars
import threading
import time

from ..base.errors import ArgumentError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["RateLimit", "current", "using", "check_rate_limit", "run_default"]

#: Statuses that mean "too many requests, wait": 429, and Anthropic's 529 (overloaded).
LIMIT_STATUSES = frozenset({429, 529})
DEFAULT_WAIT_S = 1.0
DEFAULT_PATIENCE_S = 600.0

_current: contextvars.ContextVar[RateLimit | None] = contextvars.ContextVar(
    "openprogram_rate_limit", default=None)


def _rate(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ArgumentError(f"{what} must be a number > 0 (or None for no limit), got "
                            f"{value!r}")
    return float(value)


class RateLimit:
    """`RateLimit(requests_per_minute=500, tokens_per_minute=200_000, patience_s=600)`: the
    limits a run keeps to (either may be None), and how long it keeps waiting on a rate-limited
    server without a single success before a request fails. Thread-safe; one object may be
    shared by several runs that use the same key. `.stats` counts what happened: requests
    sent, rate-limit answers, pauses, the seconds paused and the current concurrency."""

    def __init__(self, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None, *,
                 patience_s: float = DEFAULT_PATIENCE_S,
                 clock: Callable[[], float] = time.monotonic):
        self.requests_per_minute = _rate(requests_per_minute, "requests_per_minute")
        self.tokens_per_minute = _rate(tokens_per_minute, "tokens_per_minute")
        if isinstance(patience_s, bool) or not isinstance(patience_s, (int, float)) or \
                patience_s < 0:
            raise ArgumentError(f"patience_s must be a number of seconds >= 0 (how long a run "
                                f"keeps waiting on a rate limit without any success), got "
                                f"{patience_s!r}")
        self.patience_s = float(patience_s)
        self._clock = clock
        self._lock = threading.Condition()
        self._next_request = self._next_token = 0.0
        self._paused_until = 0.0
        self._pause_cause = ""
        self._cap: float | None = None   # None: as many as the run's own concurrency
        self._in_flight = 0
        self._epoch = 0
        self._last_ok = clock()
        self.stats = {"sent": 0, "ok": 0, "rate_limited": 0, "pauses": 0, "paused_s": 0.0,
                      "gave_up": 0, "concurrency": None}
        #: True for the RateLimit a run makes when given no rate_limit= (`run_default`): it yields
        #: to a runtime's own rate_limit=, which a user set on purpose
        self.implicit = False

    def __repr__(self) -> str:
        return (f"RateLimit(requests_per_minute={self.requests_per_minute}, "
                f"tokens_per_minute={self.tokens_per_minute}, patience_s={self.patience_s})")

    # -- before a request -----------------------------------------------------------------------
    def reserve(self, tokens: int = 0) -> tuple[float, int]:
        """`(0, epoch)`: send now (the request counts as in flight until `done`); `(s, -1)`:
        wait `s` seconds and ask again (a slot of the concurrency frees sooner: `s` is short)."""
        with self._lock:
            now = self._clock()
            start = max(now, self._paused_until, self._next_request, self._next_token)
            if start > now:
                return start - now, -1
            if self._cap is not None and self._in_flight >= int(self._cap):
                return 0.02, -1
            if self.requests_per_minute:
                self._next_request = now + 60.0 / self.requests_per_minute
            if self.tokens_per_minute:
                self._next_token = now + 60.0 * tokens / self.tokens_per_minute
            self._in_flight += 1
            self.stats["sent"] += 1
            return 0.0, self._epoch

    # -- after it ----------------------------------------------------------------------------------
    def done(self, ok: bool = True) -> None:
        """The request was answered (not rate limited): its slot is free; a success grows the
        concurrency back."""
        with self._lock:
            self._in_flight -= 1
            if ok:
                self.stats["ok"] += 1
                self._last_ok = self._clock()
                if self._cap is not None:
                    self._cap += 1.0 / self._cap
                    self.stats["concurrency"] = int(self._cap)
            self._lock.notify_all()

    def limited(self, epoch: int, wait_s: float | None, first_try: float,
                cause: str) -> bool:
        """The request sent in `epoch` was answered with a rate limit saying `wait_s`. Pauses
        the run and returns True (send it again after the pause), or False when the run's
        patience is spent (the rate limit goes back to the caller as an error)."""
        wait = DEFAULT_WAIT_S if wait_s is None or wait_s <= 0 else wait_s
        with self._lock:
            now = self._clock()
            self._in_flight -= 1
            self.stats["rate_limited"] += 1
            if now - max(first_try, self._last_ok) >= self.patience_s:
                self.stats["gave_up"] += 1
                self._lock.notify_all()
                return False
            until = now + wait
            if until > self._paused_until:
                self.stats["paused_s"] += until - max(now, self._paused_until)
                if now >= self._paused_until:
                    self.stats["pauses"] += 1
                self._paused_until = until
                self._pause_cause = cause
            if epoch == self._epoch:  # once per burst: later 429s of the same epoch don't halve
                self._epoch += 1
                cap = self._cap if self._cap is not None else self._in_flight + 1
                self._cap = max(1.0, cap / 2)
                self.stats["concurrency"] = int(self._cap)
            self._lock.notify_all()
            return True

    def wait_sync(self, seconds: float) -> None:
        """Sleep a thread for `seconds`, or until a slot frees."""
        with self._lock:
            self._lock.wait(seconds)

    # -- what a progress bar says ------------------------------------------------------------------
    def status(self) -> str | None:
        """Why the run is waiting right now, in words (None when it is not)."""
        with self._lock:
            left = self._paused_until - self._clock()
            if left > 0:
                return f"paused {left:.1f}s: {self._pause_cause}"
            if self._cap is not None and self._in_flight >= int(self._cap):
                return f"concurrency {int(self._cap)} after a rate limit"
            return None


def current() -> RateLimit | None:
    """The run's RateLimit in this context (set by `evaluate(..., rate_limit=)`)."""
    return _current.get()


def run_default() -> RateLimit:
    """The RateLimit of a run given no `rate_limit=`: no pacing, but 429 / 529 handled."""
    limit = RateLimit()
    limit.implicit = True
    return limit


def choose(run: RateLimit | None, own: RateLimit | None) -> RateLimit | None:
    """The limit a request keeps to: the run's, unless the run's is only the default and the
    runtime has one of its own."""
    if own is not None and (run is None or run.implicit):
        return own
    return run


class using:
    """`with using(limit):` every provider request in this context (and in the rows' copies of
    it) keeps to `limit`."""

    def __init__(self, limit: RateLimit | None):
        self.limit = limit

    def __enter__(self):
        self._token = _current.set(self.limit) if self.limit is not None else None
        return self.limit

    def __exit__(self, *exc):
        if self._token is not None:
            _current.reset(self._token)


def check_rate_limit(value: Any) -> RateLimit | None:
    """`rate_limit=` as given to evaluate or a runtime: a RateLimit, a number (requests per
    minute), a dict of RateLimit's arguments, or None / False (none given; the caller decides
    what that means)."""
    if value is None or value is False:
        return None
    if isinstance(value, RateLimit):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return RateLimit(requests_per_minute=value)
    if isinstance(value, dict):
        try:
            return RateLimit(**value)
        except TypeError as exc:
            raise ArgumentError(f"rate_limit={value!r}: {exc}; its keys are "
                                f"requests_per_minute, tokens_per_minute, patience_s") from None
    raise ArgumentError(f"rate_limit must be a RateLimit(requests_per_minute=..., "
                        f"tokens_per_minute=...), a number of requests per minute, a dict of "
                        f"those arguments, or False (no handling of 429s by the run); got "
                        f"{type(value).__name__}")
