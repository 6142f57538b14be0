"""Rate limits across a whole run (issue 24): the real SDK clients against the loopback server,
which answers part of the requests with 429 and a retry-after. Every figure asserted is a count
or the server's own clock (`Request.at`), never a wall-time bound."""
from __future__ import annotations

import random
import re
import threading

import pytest
from fakeserver import status, text

from openprogram.evaluation.evaluate import evaluate
from openprogram.base.errors import ArgumentError
from openprogram.evaluation.ratelimit import RateLimit

OPTIONS = {"refund": ("REFUND", "give the money back"), "answer": ("ANSWER", "reply in writing")}
ROWS = [{"m": f"ticket {i}", "label": "refund" if i % 3 else "answer"} for i in range(300)]
# retry-after is whole seconds on the wire; retry-after-ms (which both SDKs read first, and so
# does the run) makes the test's pauses 60 ms so 300 rows stay affordable
WAIT_MS = 60
PER_MINUTE = 6000   # 100 requests a second


def _row(body) -> int:
    return int(re.search(r"ticket (\d+)", str(body)).group(1))


def _limited_responder(share: float, seed: int = 24):
    """30% of requests (seeded) answered 429, the rest with the row's own pick."""
    rng, lock = random.Random(seed), threading.Lock()

    def respond(body):
        with lock:
            limited = rng.random() < share
            respond.sent_429 += limited
        if limited:
            return status(429, "Rate limit reached for requests", err_type="rate_limit_error",
                          headers={"retry-after": "1", "retry-after-ms": str(WAIT_MS)})
        i = _row(body)
        return text('{"call": "%s"}' % ROWS[i]["label"])
    respond.sent_429 = 0
    return respond


def test_429s_pause_the_run_and_every_row_resolves(provider, server, make_runtime):
    server.responder = respond = _limited_responder(0.3)
    limit = RateLimit(requests_per_minute=PER_MINUTE)
    # the SDK may retry (max_retries=2) but must never see a 429: the run absorbs them
    rt = make_runtime(max_retries=2)
    res = evaluate("Message: {m}", OPTIONS, ROWS, runtime=rt, expected="label",
                   concurrency=64, progress=False, rate_limit=limit)

    frame = res.to_frame()
    assert list(frame["status"]) == ["resolved"] * 300
    assert res.summary["accuracy"] == 1.0
    reqs = server.requests
    n429 = respond.sent_429
    assert n429 > 40                                      # the server did rate-limit the run
    assert len(reqs) == 300 + n429                        # each 429 re-sent once, nothing more
    assert limit.stats["rate_limited"] == n429 and limit.stats["gave_up"] == 0
    # no SDK retry on top of the run's own: every request is the SDK's first attempt
    assert {r.headers.get("x-stainless-retry-count", "0") for r in reqs} == {"0"}

    # the server's clock: a re-sent row arrives no sooner than its retry-after after the 429
    wait = WAIT_MS / 1000
    by_row: dict[int, list] = {}
    for r in reqs:
        by_row.setdefault(_row(r.body), []).append(r)
    for i, seen in by_row.items():
        # every request of a row but its last was answered 429 (the last resolved it)
        for a, b in zip(seen, seen[1:]):
            assert b.at - a.at >= wait, (i, b.at - a.at)
    # the whole run paused: the paused seconds cover at least one wait per pause, and the
    # concurrency was halved from 64
    assert limit.stats["pauses"] >= 1
    assert limit.stats["paused_s"] >= wait * limit.stats["pauses"] * 0.999
    assert limit.stats["concurrency"] is not None and limit.stats["concurrency"] < 64

    # the server never saw more than the configured rate: over the whole run, and in every
    # one-second window of its clock (10% slack: the network can bunch requests sent apart)
    times = sorted(r.at for r in reqs)
    per_s = PER_MINUTE / 60
    assert (len(times) - 1) / (times[-1] - times[0]) <= per_s
    j = 0
    for k, t in enumerate(times):
        while times[j] < t - 1.0:
            j += 1
        assert k - j + 1 <= per_s * 1.1, (k - j + 1, t - times[0])


def test_patience_spent_fails_the_row_with_a_clear_error(provider, server, make_runtime):
    server.responder = lambda body: status(429, "slow down", err_type="rate_limit_error",
                                           headers={"retry-after-ms": "20"})
    limit = RateLimit(requests_per_minute=6000, patience_s=0.1)
    res = evaluate("Message: {m}", OPTIONS, ROWS[:2], runtime=make_runtime(max_retries=3),
                   concurrency=2, progress=False, rate_limit=limit)
    frame = res.to_frame()
    assert list(frame["status"]) == ["failed", "failed"]
    err = res.errors[0]
    assert err.kind == "model_error"
    assert "patience_s" in str(err) and "rate limited" in str(err)
    # waited (several 429s each), then gave up without an SDK retry on top
    assert limit.stats["gave_up"] == 2
    assert len(server.requests) == limit.stats["rate_limited"] > 2
    assert {r.headers.get("x-stainless-retry-count", "0") for r in server.requests} == {"0"}


@pytest.mark.parametrize("provider", ["anthropic"])   # 529 overloaded is Anthropic's status
def test_overloaded_529_pauses_too(server, make_runtime, provider):
    server.push(status(529, "Overloaded", err_type="overloaded_error",
                       headers={"retry-after-ms": "30"}), text('{"call": "refund"}'))
    limit = RateLimit()
    res = evaluate("Message: {m}", OPTIONS, ROWS[:1], runtime=make_runtime(max_retries=0),
                   concurrency=1, progress=False, rate_limit=limit)
    assert list(res.to_frame()["status"]) == ["resolved"]
    assert limit.stats["rate_limited"] == 1 and limit.stats["pauses"] == 1
    a, b = server.requests
    assert b.at - a.at >= 0.03


def test_rate_limit_needs_a_provider_runtime_and_sane_numbers():
    from openprogram.runtimes import ScriptedRuntime
    with pytest.raises(TypeError, match="paces the HTTP requests"):
        evaluate("Message: {m}", OPTIONS, ROWS[:1], runtime=ScriptedRuntime(['{"call": "refund"}']),
                 progress=False, rate_limit=60)
    with pytest.raises(ArgumentError, match="requests_per_minute must be a number > 0"):
        RateLimit(requests_per_minute=0)
    with pytest.raises(ArgumentError, match="its keys are"):
        from openprogram.evaluation.ratelimit import check_rate_limit
        check_rate_limit({"rpm": 5})


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_pacing_halving_and_growth_on_a_clock():
    clock = _Clock()
    limit = RateLimit(requests_per_minute=600, tokens_per_minute=6000, clock=clock)
    assert limit.reserve(10) == (0.0, 0)
    wait, epoch = limit.reserve(10)       # 0.1 s apart by requests, 0.1 s by 10 tokens
    assert epoch == -1 and wait == pytest.approx(0.1)
    clock.t += 0.1
    assert limit.reserve(50)[1] == 0      # 50 tokens: the next may start 0.5 s later
    clock.t += 0.2
    assert limit.reserve(1)[0] == pytest.approx(0.3)
    # two 429s of the same burst halve the concurrency once (2 in flight -> 1)
    assert limit.limited(0, 0.5, clock.t, "429") is True
    assert limit.stats["concurrency"] == 1
    assert limit.limited(0, 0.5, clock.t, "429") is True
    assert limit.stats["concurrency"] == 1 and limit.stats["pauses"] == 1
    assert limit.status().startswith("paused 0.5s: 429")
    clock.t += 0.6
    assert limit.reserve(0) == (0.0, 1)
    limit.done()                          # a success grows it back by 1/concurrency
    assert limit.stats["concurrency"] == 2


def test_the_progress_bar_says_why_the_run_waits():
    from openprogram.evaluation.runner import Board
    clock = _Clock()
    limit = RateLimit(clock=clock)
    limit.reserve()
    limit.limited(0, 2.0, clock.t, "429 from the server, retry after 2s")
    board = Board(lambda *a: None, 10, True, "evaluate", waiting=limit.status)
    board.show()
    assert board.bar.postfix == "waiting=paused 2.0s: 429 from the server, retry after 2s"
    clock.t += 2.5                         # the pause is over: the note goes away
    board.show()
    assert "waiting" not in (board.bar.postfix or "")
    board.bar.close()


def test_aevaluate_waits_on_the_async_client_too(provider, server, make_runtime):
    import asyncio

    from openprogram.evaluation.evaluate import aevaluate
    server.responder = respond = _limited_responder(0.3, seed=5)
    limit = RateLimit(requests_per_minute=PER_MINUTE)
    res = asyncio.run(aevaluate("Message: {m}", OPTIONS, ROWS[:40], runtime=make_runtime(),
                                expected="label", concurrency=16, progress=False,
                                rate_limit=limit))
    assert res.statuses == ["resolved"] * 40 and res.accuracy == 1.0
    assert respond.sent_429 > 0 and len(server.requests) == 40 + respond.sent_429
    assert limit.stats["rate_limited"] == respond.sent_429
