"""Rate limits across a whole run (issue 24): the real SDK clients against the loopback server,
which answers part of the requests with 429 and a retry-after. Every figure asserted is a count
or the server's own clock (`Request.at`), never a wall-time bound."""
from __future__ import annotations

import random
import re
import threading

import pytest
from fakeserver import status, text

from openprogram.base.errors import ArgumentError
from openprogram.evaluation.evaluate import evaluate
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
    # 150 rows are enough: the seeded 30% still gives over 40 429s to check, in half the pacing
    res = evaluate("Message: {m}", OPTIONS, ROWS[:150], runtime=rt, expected="label",
                   concurrency=64, progress=False, rate_limit=limit)

    frame = res.to_frame()
    assert list(frame["status"]) == ["resolved"] * 150
    assert res.summary["accuracy"] == 1.0
    reqs = server.requests
    n429 = respond.sent_429
    assert n429 > 40                                      # the server did rate-limit the run
    assert len(reqs) == 150 + n429                        # each 429 re-sent once, nothing more
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
    # patience for several 20 ms pauses even on a loaded machine (at 0.1 s, a slow first
    # request left no time for a second, and the count below failed)
    limit = RateLimit(requests_per_minute=6000, patience_s=0.5)
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
@pytest.mark.parametrize("given", [True, False], ids=["rate_limit=", "by-default"])
def test_overloaded_529_pauses_too(server, make_runtime, provider, given):
    server.push(status(529, "Overloaded", err_type="overloaded_error",
                       headers={"retry-after-ms": "30"}), text('{"call": "refund"}'))
    res = evaluate("Message: {m}", OPTIONS, ROWS[:1], runtime=make_runtime(max_retries=0),
                   concurrency=1, progress=False, **({"rate_limit": RateLimit()} if given else {}))
    limit = res.rate_limit
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


# -- on by default (issue 40) ---------------------------------------------------------------------
LIMIT_PER_S = 25
LIMIT_WAIT_MS = 400


def _server_limit(per_s: int = LIMIT_PER_S):
    """The server's own limit: at most `per_s` requests answered in any second of its clock;
    past it, 429 with retry-after-ms, as a provider's key limit answers."""
    lock, answered = threading.Lock(), []

    def respond(body):
        import time
        with lock:
            now = time.monotonic()
            while answered and answered[0] <= now - 1.0:
                answered.pop(0)
            limited = len(answered) >= per_s
            if limited:
                respond.sent_429 += 1
            else:
                answered.append(now)
        if limited:
            return status(429, "Rate limit reached for requests", err_type="rate_limit_error",
                          headers={"retry-after": "1", "retry-after-ms": str(LIMIT_WAIT_MS)})
        return text('{"call": "%s"}' % ROWS[_row(body)]["label"])
    respond.sent_429 = 0
    return respond


def test_a_rate_limit_loses_no_row_without_any_setting(provider, server, make_runtime):
    server.responder = respond = _server_limit()
    rt = make_runtime(max_retries=2)   # the SDK's default retries: they must never see a 429
    res = evaluate("Message: {m}", OPTIONS, ROWS[:150], runtime=rt, expected="label",
                   concurrency=64, progress=False)    # no rate_limit=

    assert res.statuses == ["resolved"] * 150 and res.accuracy == 1.0
    stats = res.rate_limit.stats
    n429 = respond.sent_429
    assert n429 > 0                                   # 64 at once against 25 a second: limited
    # the server's count and the run's agree: every 429 absorbed by the run, re-sent once
    assert stats["rate_limited"] == n429 and stats["gave_up"] == 0
    assert len(server.requests) == 150 + n429 and stats["sent"] == 150 + n429
    assert {r.headers.get("x-stainless-retry-count", "0") for r in server.requests} == {"0"}
    # each 429 fell in a pause of the run (several in one burst share it), the concurrency was
    # halved from the 64 in flight, and no pacing was invented (none was known)
    assert 1 <= stats["pauses"] <= n429
    assert stats["concurrency"] is not None and stats["concurrency"] < 64
    assert res.rate_limit.requests_per_minute is None and res.rate_limit.implicit
    # the server's clock: a row sent again came no sooner than the retry-after it was given
    by_row: dict[int, list] = {}
    for r in server.requests:
        by_row.setdefault(_row(r.body), []).append(r.at)
    resent = [seen for seen in by_row.values() if len(seen) > 1]
    assert sum(len(seen) - 1 for seen in resent) == n429
    assert all(b - a >= LIMIT_WAIT_MS / 1000 for seen in resent for a, b in zip(seen, seen[1:]))


@pytest.mark.parametrize("provider", ["openai"])
def test_rate_limit_false_leaves_the_429s_to_the_sdk(server, make_runtime, provider):
    server.responder = respond = _server_limit()
    res = evaluate("Message: {m}", OPTIONS, ROWS[:40], runtime=make_runtime(max_retries=0),
                   concurrency=40, progress=False, rate_limit=False)
    assert res.rate_limit is None
    failed = [e for e in res.errors if e is not None]
    # 40 at once against 25 a second, no retry: the rows answered 429 fail as a model error
    assert respond.sent_429 > 0 and len(failed) == respond.sent_429
    assert len(server.requests) == 40
    assert {e.kind for e in failed} == {"model_error"}
    assert all("rate limited" in str(e) for e in failed)


@pytest.mark.parametrize("provider", ["openai"])
def test_a_runtimes_own_rate_limit_is_kept_when_the_run_is_given_none(server, make_runtime,
                                                                      provider):
    server.responder = _limited_responder(0.3, seed=40)
    own = RateLimit(requests_per_minute=PER_MINUTE)
    res = evaluate("Message: {m}", OPTIONS, ROWS[:20], runtime=make_runtime(rate_limit=own),
                   concurrency=8, progress=False)
    assert res.statuses == ["resolved"] * 20
    # every request went through the runtime's own limit (paced, 429s absorbed), none through
    # the run's default
    assert own.stats["sent"] == len(server.requests) and own.stats["rate_limited"] > 0
    assert res.rate_limit.stats["sent"] == 0


def test_rate_limit_defaults_on_only_where_requests_go_over_http():
    from openprogram.runtimes import ScriptedRuntime
    rt = ScriptedRuntime(rule=lambda prompt: '{"call": "refund"}')
    res = evaluate("Message: {m}", OPTIONS, ROWS[:2], runtime=rt, progress=False)
    assert res.statuses == ["resolved"] * 2 and res.rate_limit is None
    with pytest.raises(ArgumentError, match="or False"):
        evaluate("Message: {m}", OPTIONS, ROWS[:1], runtime=rt, progress=False, rate_limit="on")


@pytest.mark.parametrize("provider", ["openai"])
def test_compare_and_acompare_handle_a_rate_limit_by_default_too(server, make_runtime, provider):
    import asyncio

    from openprogram.evaluation.variants import acompare, compare
    server.responder = respond = _server_limit(per_s=10)
    variants = {"a": OPTIONS, "b": OPTIONS}
    res = compare("Message: {m}", variants, ROWS[:20], runtime=make_runtime(max_retries=0),
                  concurrency=20, progress=False)
    assert res["a"].statuses == res["b"].statuses == ["resolved"] * 20
    # one run, one limit shared by its variants, which absorbed every 429 the server sent
    assert res["a"].rate_limit is res["b"].rate_limit
    assert respond.sent_429 > 0 and res["a"].rate_limit.stats["rate_limited"] == respond.sent_429
    before = respond.sent_429
    res = asyncio.run(acompare("Message: {m}", variants, ROWS[:20],
                               runtime=make_runtime(max_retries=0), concurrency=20,
                               progress=False))
    assert res["a"].statuses == res["b"].statuses == ["resolved"] * 20
    assert res["b"].rate_limit.stats["rate_limited"] == respond.sent_429 - before
