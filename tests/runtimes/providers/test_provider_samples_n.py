"""`decision.Samples(n)` on OpenAIRuntime drawn in one request with `n=` (issue 35): the real
OpenAI SDK against the loopback server, sync and async. Sample 0's call asks the n, each other
sample's call takes its choice; a server that refuses `n` is negotiated and each sample goes on
its own; a server that answers fewer choices leaves the rest to their own requests; a cache keeps
every sample as its own entry."""
from __future__ import annotations

import asyncio
import json

import pytest
from fakeserver import FAKE_KEY, FakeServer, raw, text

from openprogram import decision
from openprogram.runtimes import CachedRuntime, OpenAIRuntime

MENU = {"refund": "REFUND", "refund_partial": "PARTIAL", "escalate": "ESCALATE"}
PICKS = ("refund", "escalate", "escalate", "refund_partial", "escalate")


def runtime(fake, **kw):
    return OpenAIRuntime(model="m", base_url=fake.base_url, api_key=FAKE_KEY, max_retries=0,
                         **kw)


def push(server, picks=PICKS):
    server.push(*[text('{"call": "%s"}' % p, usage=(10, 3)) for p in picks])


def decide(rt, sync, n=5):
    samples = decision.Samples(n, temperature=0.8)
    if sync:
        return decision.make("Route it.", MENU, runtime=rt, confidence=samples)
    return asyncio.run(decision.amake("Route it.", MENU, runtime=rt, confidence=samples))


def sampled(server):
    return [r for r in server.requests if r.path.endswith("/chat/completions")]


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("stream", [True, False])
def test_n_samples_are_one_request_and_give_the_distribution_n_requests_give(sync, stream):
    with FakeServer("openai") as one, FakeServer("openai") as each:
        push(one)
        push(each)
        each.refuse(lambda body: "n" in body, 400, "Unsupported parameter: 'n'")
        assert decide(runtime(one, stream=stream), sync) == "ESCALATE"
        together = decision.last_trace().confidence
        rt = runtime(each, stream=stream)
        assert decide(rt, sync) == "ESCALATE"
        apart = decision.last_trace().confidence
        assert len(sampled(one)) == 1
        body = one.bodies[0]
        assert (body["n"], body["temperature"]) == (5, 0.8) and "stream" not in body
        # the refused request, then one request per sample, none asking n again
        assert len(sampled(each)) == 1 + 5 and each.refused == 1
        assert not any("n" in b for b in each.bodies[1:])
        assert [r["kind"] for r in rt.negotiated] == ["n"]
        assert together.n == apart.n == 5
        assert together.probs == apart.probs == pytest.approx(
            {"refund": 0.2, "refund_partial": 0.2, "escalate": 0.6})


@pytest.mark.parametrize("sync", [True, False])
def test_the_refusal_of_n_is_remembered_and_recorded(sync):
    with FakeServer("openai") as server:
        push(server, PICKS + PICKS[:3])
        server.refuse(lambda body: "n" in body, 400, "'n' must be 1")
        rt = runtime(server)
        decide(rt, sync)
        first = len(server.requests)
        decide(rt, sync, n=3)   # n is known refused: three requests at once, none refused
        assert len(server.requests) - first == 3 and server.refused == 1
        assert not any("n" in b for b in server.bodies[1:])
        record, = rt.negotiated
        assert record["kind"] == "n" and "'n' must be 1" in record["refused"]


@pytest.mark.parametrize("sync", [True, False])
def test_a_server_that_answers_fewer_choices_leaves_the_rest_to_their_own_requests(sync):
    with FakeServer("openai") as server:
        # two message replies, then a reply given as its raw body (not a message the server
        # could make a choice of): the n=5 request gets 2 choices, as a server short of
        # choices answers; that body answers sample 2's own request
        push(server, PICKS[:2])
        server.push(raw(json.dumps({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": '{"call": "%s"}' % PICKS[2]}}]})))
        push(server, PICKS[3:])
        rt = runtime(server, stream=False)
        assert decide(rt, sync) == "ESCALATE"
        assert len(sampled(server)) == 1 + 3   # choices 0 and 1, then samples 2, 3, 4
        assert server.bodies[0]["n"] == 5 and not any("n" in b for b in server.bodies[1:])
        conf = decision.last_trace().confidence
        assert conf.probs == pytest.approx({"refund": 0.2, "refund_partial": 0.2,
                                            "escalate": 0.6})


@pytest.mark.parametrize("sync", [True, False])
def test_a_cached_rerun_makes_no_call_and_each_sample_is_its_own_entry(tmp_path, sync):
    with FakeServer("openai") as server:
        push(server)
        path = tmp_path / "cache.jsonl"
        rt = CachedRuntime(runtime(server), path)
        assert decide(rt, sync) == "ESCALATE"
        first = decision.last_trace().confidence
        assert len(server.requests) == 1 and rt.misses == 5
        again = CachedRuntime(runtime(server), path)
        assert decide(again, sync) == "ESCALATE"
        assert len(server.requests) == 1 and (again.hits, again.misses) == (5, 0)
        assert decision.last_trace().confidence.probs == first.probs
        # each sample its own entry, told apart by its index and never by samples=
        entries = [line for line in path.read_text().splitlines() if '"sample"' in line]
        assert len(entries) == 5 and not any('"samples"' in line for line in entries)


def _choices_body(n, pick="escalate"):
    return json.dumps({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": i, "finish_reason": "stop", "message": {
            "role": "assistant", "content": '{"call": "%s"}' % pick}} for i in range(n)],
        "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}})


class _Looked(list):
    """A response's `choices` as JSON, counting the items any reader walks over."""
    seen = 0

    def __iter__(self):
        for x in super().__iter__():
            _Looked.seen += 1
            yield x


def test_reading_n_choices_looks_at_each_choice_once(monkeypatch):
    """Issue 54, case 10: each choice's JSON was looked up among all the others' (8,000
    choices: 3.1 s of CPU; 20,000 ran past timeout_s): reading the reply is linear now."""
    from openprogram.runtimes.providers import openai_runtime
    real = openai_runtime.as_json

    def as_json(r):
        whole = real(r)
        if isinstance(whole, dict) and isinstance(whole.get("choices"), list):
            whole["choices"] = _Looked(whole["choices"])
        return whole
    monkeypatch.setattr(openai_runtime, "as_json", as_json)
    _Looked.seen = 0
    n = 300
    with FakeServer("openai") as server:
        server.push(raw(_choices_body(n)))
        rt = runtime(server, stream=False)
        got = decision.make("Route it.", MENU, runtime=rt,
                            confidence=decision.Samples(n, temperature=0.8))
        assert got == "ESCALATE" and len(sampled(server)) == 1
    assert decision.last_trace().confidence.n == n
    assert _Looked.seen <= 2 * n   # (n * (n - 1) before)


@pytest.mark.parametrize("sync", [True, False])
def test_choices_past_the_n_asked_are_not_read(monkeypatch, sync):
    """A server that sends 5,000 choices for n=5: the four asked for besides choice 0 are
    read, the rest left unread (each cost the SDK's parse and this runtime's reading)."""
    from openprogram.runtimes.providers.openai_runtime import OpenAIRuntime
    read = [0]
    real = OpenAIRuntime._choice

    def counted(self, choice, r):
        read[0] += 1
        return real(self, choice, r)
    monkeypatch.setattr(OpenAIRuntime, "_choice", counted)
    with FakeServer("openai") as server:
        server.push(raw(_choices_body(5000)))
        assert decide(runtime(server, stream=False), sync) == "ESCALATE"
        assert len(sampled(server)) == 1
    assert read[0] == 5
    conf = decision.last_trace().confidence
    assert conf.n == 5 and conf.probs["escalate"] == pytest.approx(1.0)
