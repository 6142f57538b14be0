"""Faults, through the real SDK against the loopback server: the time budget, retried 429s,
persistent 5xx, dropped and truncated streams, malformed bodies, a bad key, an unknown model,
nothing listening. Each gives a clear ModelCallError; inside a decision it is recorded in the
trace and the DAG, with whatever text arrived before it."""
import pytest
from fakeserver import Reply, free_port, raw, status, text

from openprogram import DecisionError, agent, decision
from openprogram.runtimes import ModelCallError

Q = [{"role": "user", "content": "q"}]


def fail(rt, **kw):
    with pytest.raises(DecisionError) as info:
        decision.make("Pick one.", ["a", "b"], runtime=rt, **kw)
    return info.value


def test_slow_server_times_out_within_the_decision_budget(provider, server, make_runtime):
    rt = make_runtime(max_retries=2)
    server.push(text('{"call": "a"}', delay=5))
    err = fail(rt, timeout_s=0.4)
    att = err.trace.attempts[0]
    assert att.error_kind == "timeout" and err.kind == "timeout"
    assert "did not finish its reply within" in att.error_message
    # the SDK's retries do not stretch the budget: one request, no retry after the deadline
    assert len(server.requests) == 1
    node = [n for n in rt.dag.nodes if n.kind == "model_call"][0]
    assert node.status == "error" and "ModelCallError" in node.error


def test_stall_mid_stream_times_out_and_keeps_the_partial_reply(provider, server,
                                                                 make_runtime):
    rt = make_runtime()
    server.push(text("I am thinking about a long answer", chunk=4, stall_after=3))
    err = fail(rt, timeout_s=0.5)
    att = err.trace.attempts[0]
    assert att.error_kind == "timeout"
    assert att.reply == "I am thinkin"  # three 4-character deltas arrived
    assert err.trace.to_dict()["attempts"][0]["reply"] == "I am thinkin"


def test_budget_covers_reasks(provider, server, make_runtime):
    """The second attempt gets only what the first left of timeout_s."""
    rt = make_runtime()
    server.push(text("no json here", delay=0.4), text('{"call": "a"}', delay=0.8))
    err = fail(rt, timeout_s=1.0)  # the re-ask alone would fit in 1.0 s; what is left does not
    assert [a.error_kind for a in err.trace.attempts] == ["no_action", "timeout"]


def test_runtime_timeout_bounds_each_call(provider, server, make_runtime):
    rt = make_runtime(timeout=0.3)
    server.push(text("late", delay=3))
    with pytest.raises(ModelCallError) as info:
        rt.complete(Q)
    assert info.value.kind == "timeout"


def test_rate_limit_is_retried_then_succeeds(provider, server, make_runtime):
    rt = make_runtime(max_retries=2)
    server.push(status(429, "slow down", headers={"retry-after-ms": "20"},
                       err_type="rate_limit_error"),
                status(429, "slow down", headers={"retry-after-ms": "20"},
                       err_type="rate_limit_error"),
                text('{"call": "b"}'))
    assert decision.make("Pick one.", ["a", "b"], runtime=rt) == "b"
    assert len(server.requests) == 3
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == \
        ["0", "1", "2"]
    # one model call in the trace and the DAG: the retries are inside it
    assert len(decision.last_trace().attempts) == 1
    assert [n.kind for n in rt.dag.nodes].count("model_call") == 1


def test_rate_limit_past_the_budget_is_not_slept_through(provider, server, make_runtime):
    rt = make_runtime(max_retries=2)
    server.push(status(429, "slow down", headers={"retry-after": "30"}), text("never"))
    err = fail(rt, timeout_s=2)
    assert len(server.requests) == 1
    assert "rate limited (429" in err.trace.attempts[0].error_message


def test_persistent_server_error_gives_up_after_retries(provider, server, make_runtime):
    rt = make_runtime(max_retries=1)
    server.push(*[status(500, "the model crashed", headers={"retry-after-ms": "10"})
                  for _ in range(3)])
    with pytest.raises(ModelCallError) as info:
        rt.complete(Q)
    msg = str(info.value)
    assert "server error (500: the model crashed) (after 1 retries)" in msg
    assert info.value.kind == "model_error"
    assert len(server.requests) == 2


def test_overloaded_529_is_a_server_error(provider, server, make_runtime):
    rt = make_runtime()
    server.push(status(529, "Overloaded", err_type="overloaded_error"))
    with pytest.raises(ModelCallError, match="server error \\(529: Overloaded\\)"):
        rt.complete(Q)


def test_dropped_connection_mid_stream_keeps_the_partial_text(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text("The answer is clearly option a because", chunk=5, drop_after=3))
    err = fail(rt)
    att = err.trace.attempts[0]
    assert att.error_kind == "model_error"
    assert "dropped in the middle of the reply" in att.error_message
    assert "15 characters received" in att.error_message
    assert att.reply == "The answer is c"
    node = [n for n in rt.dag.nodes if n.kind == "model_call"][0]
    assert node.status == "error" and "dropped" in node.error


def test_error_event_mid_stream(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text("Let me think about", chunk=4, error_after=2))
    err = fail(rt)
    att = err.trace.attempts[0]
    assert "reported an error in the middle of the reply (Overloaded)" in att.error_message
    assert att.reply == "Let me t"


def test_truncated_stream_is_an_error_not_a_short_reply(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text('{"call": "a"}', truncate=True))
    with pytest.raises(ModelCallError) as info:
        rt.complete(Q)
    assert "ended before the reply was complete" in str(info.value)
    assert info.value.partial == '{"call": "a"}'


@pytest.mark.parametrize("stream", [True, False])
def test_malformed_body(provider, server, make_runtime, stream):
    rt = make_runtime(stream=stream)
    if stream:
        server.push(Reply(text="abcdefgh", bad_event=True))
    else:
        server.push(raw("{this is not json"))
    with pytest.raises(ModelCallError) as info:
        rt.complete(Q)
    assert "malformed reply" in str(info.value)
    assert info.value.partial == ("abcd" if stream else "")


def test_body_of_the_wrong_shape(provider, server, make_runtime):
    rt = make_runtime(stream=False)
    server.push(raw('{"unexpected": true}'))
    with pytest.raises(ModelCallError, match="malformed reply"):
        rt.complete(Q)


def test_bad_key_401(provider, server, make_runtime):
    rt = make_runtime(max_retries=2)
    server.push(status(401, "invalid x-api-key", err_type="authentication_error"))
    err = fail(rt)
    msg = err.trace.attempts[0].error_message
    assert "rejected the API key (401: invalid x-api-key)" in msg
    assert ("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY") in msg
    assert len(server.requests) == 1  # a bad key is not retried


def test_unknown_model_404(provider, server, make_runtime):
    rt = make_runtime(model="gpt-17-ultra")
    server.push(status(404, "model 'gpt-17-ultra' not found", err_type="not_found_error"))
    with pytest.raises(ModelCallError) as info:
        agent("hi", runtime=rt)
    msg = str(info.value)
    assert "'gpt-17-ultra'" in msg and "was not found (404" in msg and "model name" in msg


def test_nothing_listening(provider, make_runtime):
    url = f"http://127.0.0.1:{free_port()}" + ("/v1" if provider == "openai" else "")
    rt = make_runtime(base_url=url, max_retries=0)
    err = fail(rt)
    msg = err.trace.attempts[0].error_message
    assert msg.startswith("could not reach") and url in msg and "Is the server running" in msg
    assert err.trace.attempts[0].reply == ""


def test_connection_closed_without_answer(provider, server, make_runtime):
    rt = make_runtime(max_retries=1)
    server.push(Reply(kind="close"), text("second try works"))
    assert agent("hi", runtime=rt) == "second try works"
    assert len(server.requests) == 2
