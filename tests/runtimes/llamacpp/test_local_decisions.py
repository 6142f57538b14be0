"""Decisions on the real SmolLM2-135M model: the two ways of asking, streaming, the deadline,
cancellation and a kernel interrupt, and many decisions on one loaded model."""
from __future__ import annotations

import asyncio
import os
import signal

import pytest
from localhelp import OPTIONS, REQUESTS, Tokens, prompt

from openprogram import ERROR_KINDS, DecisionError, decision
from openprogram.runtimes import LlamaCppRuntime
from openprogram.runtimes.llamacpp import STRING_MAX_LENGTH

#: The kinds that would mean a constrained reply did not parse as a pick.
UNPARSED = {"no_action", "bad_args", "truncated", "not_text", "model_error"}


def _decide(rt, request, events=None, **kw):
    """The decision and its trace; a failed decision is a result here, not an error."""
    try:
        decision.make(prompt(request), OPTIONS, runtime=rt, **kw)
    except DecisionError as exc:
        return exc.trace
    return decision.last_trace()


def _chunks(events, trace, attempt):
    return [e.data["text"] for e in events if e.kind == "reply_chunk" and e.trace is trace
            and e.attempt.number == attempt]


def test_a_constrained_decision_parses_on_every_attempt_over_20_seeded_runs():
    """json_schema mode: the grammar lets the model write only a pick of the schema's form, so
    every reply parses; the pick may still be wrong (a wrong pick is allowed here)."""
    picks = []
    for seed in range(20):
        rt = LlamaCppRuntime(seed=seed, temperature=0.8)
        trace = _decide(rt, REQUESTS[seed % len(REQUESTS)], mode="json_schema")
        for att in trace.attempts:
            assert att.error_kind not in UNPARSED, (seed, att.error_kind, att.reply)
            assert att.found_in == "schema" and att.finish_reason == "stop", (seed, att.reply)
            assert att.extracted["call"] in OPTIONS
            # the trace says which grammar wrote the reply: the bounded schema it was made from
            sent = att.raw["request"]
            schema = sent["response_format"]["schema"]
            picks_schema = schema["properties"]["decision"]["anyOf"]
            args = {p["properties"]["call"]["const"]: p["properties"]["args"]
                    for p in picks_schema}
            assert args["book_hotel"]["properties"]["city"]["maxLength"] == STRING_MAX_LENGTH
            assert args["escalate"]["properties"]["reason"]["maxLength"] == STRING_MAX_LENGTH
            assert "maxLength" not in args["escalate"]["properties"]["urgency"]  # an enum
            assert sent["seed"] == seed and att.usage["output_tokens"] > 0
        picks.append(trace.attempts[-1].extracted["call"])
        assert trace.mode == "json_schema"
    assert len(picks) == 20


def test_a_menu_decision_trace_records_what_the_model_wrote_and_its_error_kinds(events):
    """menu mode: the small model mostly writes prose; whatever it wrote is in the trace, chunk
    by chunk, with the error kind of every failed attempt and the tokens it took."""
    rt = LlamaCppRuntime(seed=3, max_tokens=64)
    trace = _decide(rt, REQUESTS[0])
    assert trace.mode == "menu" and trace.attempts
    for att in trace.attempts:
        chunks = _chunks(events, trace, att.number)
        assert len(chunks) > 1, "the reply was not streamed"
        assert "".join(chunks) == att.reply != ""
        # the runtime's layout: the menu in a system message first, the request last
        sent = att.raw["request"]
        assert sent["layout"] == "menu_first"
        assert sent["messages"][0] == {"role": "system", "content": trace.menu}
        assert sent["messages"][-1]["content"] + "\n\n" + trace.menu == att.prompt
        assert att.raw["response"]["choices"][0]["message"]["content"] == att.reply
        assert att.finish_reason in ("stop", "length")
        assert 0 < att.usage["output_tokens"] <= 64 and att.usage["input_tokens"] > 100
        if att.finish_reason == "length":
            assert att.usage["output_tokens"] == 64
        if att.error_kind is not None:
            assert att.error_kind in ERROR_KINDS and att.error_message
        else:
            assert att.chosen in OPTIONS
    assert trace.status in ("resolved", "failed")
    assert [a.error_kind for a in trace.attempts] == \
        [r["error_kind"] for r in trace.to_dict()["attempts"]]


def test_a_reply_cut_at_max_tokens_is_recorded_as_truncated():
    rt = LlamaCppRuntime(seed=1, max_tokens=3)  # too few for any pick: {"call": "done"}
    trace = _decide(rt, REQUESTS[1])
    assert [a.error_kind for a in trace.attempts] == ["truncated", "truncated"]
    assert all(a.finish_reason == "length" and a.usage["output_tokens"] == 3
               for a in trace.attempts)


def test_the_deadline_stops_a_long_generation(end_token, events):
    """With the end token banned the model would write until the context is full (some 3800
    tokens, half a minute at this model's speed here); the decision's deadline stops it
    between two tokens and keeps what it wrote. Reading the prompt is not interrupted, so the
    budget leaves room for it on a busy machine."""
    tokens = Tokens()
    rt = LlamaCppRuntime(n_ctx=4096, max_tokens=100_000, seed=0, logit_bias=end_token,
                         logits_processor=[tokens])
    with pytest.raises(DecisionError) as info:
        decision.make(prompt("Customer: tell me a very long story."), OPTIONS, runtime=rt,
                      timeout_s=6.0)
    (att,) = info.value.trace.attempts
    assert info.value.kind == "timeout" and att.error_kind == "timeout"
    assert f"stopped after {tokens.sampled} tokens" in att.error_message
    assert "kept as the partial reply" in att.error_message
    assert att.reply and att.reply == "".join(_chunks(events, info.value.trace, 1))
    assert 0 < tokens.sampled < 2000


def test_cancelling_an_amake_task_stops_the_generation(end_token):
    """Cancelling the task makes the worker thread stop at the next token and free the model:
    a second runtime on the same loaded model gets it at once, not after ~4000 tokens."""
    tokens = Tokens()
    long = LlamaCppRuntime(n_ctx=4096, max_tokens=100_000, seed=0, logit_bias=end_token,
                           logits_processor=[tokens])
    short = LlamaCppRuntime(n_ctx=4096, max_tokens=8, seed=0)
    assert short.llama is long.llama

    async def main():
        from openprogram import observe
        loop = asyncio.get_running_loop()
        seen = []

        def cancel_after_five(event):
            if event.kind == "reply_chunk":
                seen.append(event)
                if len(seen) == 5:
                    loop.call_soon_threadsafe(task.cancel)
        with observe(cancel_after_five):
            task = asyncio.create_task(decision.amake(prompt("Customer: a long story."),
                                                      OPTIONS, runtime=long))
            with pytest.raises(asyncio.CancelledError):
                await task
        assert task.cancelled() and len(seen) >= 5
        # the model is free as soon as the worker has stopped (a minute would be an error)
        return await short.acomplete([{"role": "user", "content": "Say hello."}], timeout=60)

    reply = asyncio.run(main())
    assert reply.text and reply.usage["output_tokens"] <= 8
    assert 5 <= tokens.sampled < 100  # without the cancellation: ~3800


@pytest.mark.usefixtures("python_sigint")   # SIGINT raises KeyboardInterrupt only with its handler
def test_a_kernel_interrupt_stops_the_generation(end_token):
    """Interrupting the kernel sends SIGINT: the KeyboardInterrupt lands between two tokens,
    the generation stops and the model is freed for the next call."""
    tokens = Tokens()
    rt = LlamaCppRuntime(n_ctx=4096, max_tokens=100_000, seed=0, logit_bias=end_token,
                         logits_processor=[tokens])
    from openprogram import observe
    sent = []

    def interrupt_after_five(event):
        if event.kind == "reply_chunk" and len(sent) < 1 and tokens.sampled >= 5:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
    with observe(interrupt_after_five), pytest.raises(KeyboardInterrupt):
        decision.make(prompt("Customer: a long story."), OPTIONS, runtime=rt)
    assert decision.last_trace().status == "failed"
    assert 5 <= tokens.sampled < 100
    short = LlamaCppRuntime(n_ctx=4096, max_tokens=8, seed=0)
    reply = short.complete([{"role": "user", "content": "Say hello."}], timeout=60)
    assert reply.text and reply.usage["output_tokens"] <= 8


def test_many_decisions_share_one_load_and_concurrent_calls_take_turns():
    before = LlamaCppRuntime.loads
    first = LlamaCppRuntime(n_ctx=1536, max_tokens=32, seed=0)
    second = LlamaCppRuntime(n_ctx=1536, max_tokens=32, seed=1, temperature=0.9)
    assert LlamaCppRuntime.loads == before + 1 and first.llama is second.llama
    _decide(first, REQUESTS[0], mode="json_schema")
    _decide(second, REQUESTS[1], mode="json_schema")
    # four decisions at once on one model: they queue for it, none fails for it
    result = decision.evaluate("{request}\nPick the one next step that helps this customer.",
                               OPTIONS, [{"request": r} for r in REQUESTS], runtime=first,
                               concurrency=4, max_retries=0, progress=False)
    frame = result.to_frame()
    assert len(frame) == 4 and set(frame["status"]) <= {"resolved", "failed"}
    kinds = [k for ks in frame["error_kinds"] for k in ks]
    assert "model_error" not in kinds and "timeout" not in kinds
    assert LlamaCppRuntime.loads == before + 1
