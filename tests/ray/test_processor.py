"""`openprogram.ray.processor`: the decision on Ray Data's LLM batch path against the loopback
OpenAI-compatible server (`ray.data.llm.HttpRequestProcessorConfig`), re-asks as a second pass;
and the request bodies each way of asking sends."""
from __future__ import annotations

import json

import pytest
import rayhelp
from rayhelp import OPTIONS, TEMPLATE, rows

from openprogram import UsageError, decision


def test_the_processor_path_against_the_loopback_server_with_one_reask_pass(ray_local):
    """Every 7th ticket's first reply holds no pick: those rows go through the processor a
    second time with the re-ask, and resolve there; every other row resolves on the first
    pass. Each row's decision is the one `decision.make` makes with the same replies."""
    import ray
    from fakeserver import FakeServer, text
    from ray.data.llm import HttpRequestProcessorConfig

    from openprogram import ray as opray
    data = [r for r in rows(40) if r["id"] % 11]
    with FakeServer("openai", responder=lambda body: text(
            rayhelp.reply_for(rayhelp.last_user_text(body)))) as server:
        config = HttpRequestProcessorConfig(url=server.base_url + "/chat/completions",
                                            batch_size=16, concurrency=1)
        proc = opray.processor(TEMPLATE, OPTIONS, config, model="m", max_retries=1,
                               sampling={"temperature": 0})
        got = proc(ray.data.from_items(data)).materialize()
        bodies = server.bodies
    assert proc.passes == 2
    out = {r["id"]: r for r in got.take_all()}
    assert sorted(out) == [r["id"] for r in data]
    reasked = [k for k in out if k % 7 == 0]
    assert reasked and len(bodies) == len(data) + len(reasked)
    assert all(b["model"] == "m" and b["temperature"] == 0 for b in bodies)
    for k, r in out.items():
        assert r["status"] == "resolved", (k, r["error"])
        assert r["attempts"] == (2 if k % 7 == 0 else 1)
        assert r["chosen"] == ["refund", "escalate", "close"][k % 3]
        assert r["tokens_in"] == 11 * r["attempts"] and r["tokens_out"] == 7 * r["attempts"]
    # the re-asked row, step by step, is decision.make's with the same replies
    trace = json.loads(out[7]["trace"])
    replies = [a["reply"] for a in trace["attempts"]]
    from openprogram.runtimes import ScriptedRuntime
    made = decision.make(TEMPLATE.format(**data[[r["id"] for r in data].index(7)]), OPTIONS,
                         runtime=ScriptedRuntime(replies), max_retries=1)
    want = decision.last_trace()
    assert json.loads(out[7]["result"]) == made
    assert [a["prompt"] for a in trace["attempts"]] == [a.prompt for a in want.attempts]
    assert [a["error_kind"] for a in trace["attempts"]] == [a.error_kind for a in want.attempts]
    # the second pass sent the re-ask: the first reply and what was wrong with it
    second = [b for b in bodies if "could not be used" in rayhelp.last_user_text(b)]
    assert len(second) == len(reasked)
    assert "Let me think about it." in rayhelp.last_user_text(second[0])
    assert got.schema().names == ["id", "message", "expected", *opray.OUTPUT_COLUMNS]
    back = opray.result(got, OPTIONS, expected="expected")
    assert back.accuracy == 1.0 and back.retry_rate == len(reasked) / len(data)


@pytest.mark.slow
def test_a_processor_keeps_to_one_rate_limit_across_its_http_workers(ray_local):
    """Two workers of Ray's HTTP stage send through sessions that ask the job's one limit actor
    before each request: the server, which allows 20 requests a second, refuses almost none."""
    import ray
    from fakeserver import FakeServer
    from ray.data.llm import HttpRequestProcessorConfig

    from openprogram import ray as opray
    answer = rayhelp.PerSecond(20)
    data = [r for r in rows(110) if r["id"] % 11 and r["id"] % 7][:80]
    with FakeServer("openai", responder=answer) as server:
        config = HttpRequestProcessorConfig(url=server.base_url + "/chat/completions",
                                            batch_size=10, concurrency=2, max_retries=3,
                                            base_retry_wait_time_in_s=0.2)
        proc = opray.processor(TEMPLATE, OPTIONS, config, model="m", rate_limit=20 * 60)
        out = proc(ray.data.from_items(data, override_num_blocks=4)).take_all()
    assert len(out) == 80 and all(r["status"] == "resolved" for r in out)
    assert len(server.requests) == 80 + answer.refused
    assert answer.refused <= 5, f"{answer.refused} requests were refused with 429"


def test_each_way_of_asking_becomes_its_chat_completions_body():
    from openprogram import ray as opray
    plan = decision.plan(TEMPLATE, OPTIONS, mode="tools")
    req = plan.request(rows(2)[1])
    body = opray.openai_body(req, "m")
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert [t["function"]["name"] for t in body["tools"]] == list(OPTIONS)
    assert body["messages"] == [{"role": "user", "content": TEMPLATE.format(**rows(2)[1])}]
    reply = opray.openai_reply({"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "refund",
                                                       "arguments": '{"amount": 2}'}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
    out = plan.resolve(rows(2)[1], reply)
    assert out.status == "resolved" and out.result == "refunded 2.00"
    assert out.trace.attempts[0].usage == {"input_tokens": 5, "output_tokens": 3}
    schema = opray.openai_body(decision.plan(TEMPLATE, OPTIONS, mode="json_schema")
                               .request(rows(1)[0]), "m")["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["schema"]["properties"]
    # a server's error body is the attempt's model error, with its words
    failed = plan.resolve(rows(2)[1], opray.openai_reply({"error": {"message": "no such model"}}))
    assert failed.status == "failed" and failed.error_kind == "model_error"
    assert "no such model" in str(failed.error)


def test_a_processor_needs_a_model_name_for_an_http_endpoint_and_no_tools_on_vllm():
    from ray.data.llm import HttpRequestProcessorConfig

    from openprogram import ray as opray
    config = HttpRequestProcessorConfig(url="http://127.0.0.1:9/v1/chat/completions")
    with pytest.raises(UsageError, match="model="):
        opray.processor(TEMPLATE, OPTIONS, config)
    with pytest.raises(UsageError, match="HttpRequestProcessorConfig"):
        opray.processor(TEMPLATE, OPTIONS, {"url": "x"}, model="m")
    with pytest.raises(UsageError, match="timeout_s"):
        opray.processor(TEMPLATE, OPTIONS, config, model="m", timeout_s=5)


def test_the_vllm_engine_gets_messages_and_the_decisions_schema_as_structured_output():
    """vLLM cannot run here (no GPU): the config is built as Ray's docs give it, and what the
    processor hands its engine stage, and reads back from it, is checked without the engine."""
    from ray.data.llm import vLLMEngineProcessorConfig

    from openprogram import ray as opray
    from openprogram.ray.llm import _Post
    config = vLLMEngineProcessorConfig(model_source="Qwen/Qwen2.5-0.5B-Instruct",
                                       concurrency=1, batch_size=8)
    proc = opray.processor(TEMPLATE, OPTIONS, config, mode="json_schema",
                           sampling={"temperature": 0, "max_tokens": 128})
    row = rows(3)[1]
    sent = proc.ways.send(proc.plan.request(row))
    assert sent["messages"] == [{"role": "user", "content": TEMPLATE.format(**row)}]
    params = sent["sampling_params"]
    assert params["temperature"] == 0 and params["max_tokens"] == 128
    schema = params["structured_outputs"]["json"]
    assert schema == proc.plan.request(row)["response_format"]["schema"]
    post = _Post(proc.plan, proc.ways, ["id", "message", "expected"], False)
    out = post({**row, **sent, "generated_text": '{"decision": {"call": "escalate"}}',
                "num_generated_tokens": 9})
    assert out["status"] == "resolved" and json.loads(out["result"]) == "ESCALATE"
    assert out["tokens_out"] == 9 and out["id"] == 1 and "sampling_params" not in out
    # a row the engine failed on (should_continue_on_error=True) is its attempt's model error
    failed = post.errored({**row, **sent, "__inference_error__": "CUDA out of memory"})
    assert failed["status"] == "failed" and failed["error_kind"] == "model_error"
    assert "CUDA out of memory" in failed["error"] and json.loads(failed["trace"])["attempts"]
    assert post.errored({**out, "__inference_error__": ""}) == out
    with pytest.raises(UsageError, match="takes no tools"):
        opray.processor(TEMPLATE, OPTIONS, config, mode="tools").ways.send(
            decision.plan(TEMPLATE, OPTIONS, mode="tools").request(row))
    with pytest.raises(UsageError, match="rate_limit= paces HTTP"):
        opray.processor(TEMPLATE, OPTIONS, config, rate_limit=60)
