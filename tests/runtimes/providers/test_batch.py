"""The batch path (issue 24): evaluate(..., batch=True) through the real SDK clients against the
loopback server speaking OpenAI's files + batches and Anthropic's message batches. Counts and
the server's records only."""
from __future__ import annotations

import json
import re

import pytest
from fakeserver import status, text, tools

from openprogram.evaluation.evaluate import evaluate

OPTIONS = {"refund": ("REFUND", "give the money back"), "answer": ("ANSWER", "reply in writing")}
ROWS = [{"m": f"ticket {i}", "label": "refund" if i % 3 else "answer"} for i in range(200)]
FAST = {"poll_s": 0.0, "settle_s": 0.05}


def _row(body) -> int:
    return int(re.search(r"ticket (\d+)", str(body)).group(1))


def _responder(provider: str, mode: str, bad_first: set | None = None):
    """The row's own pick, in the way the mode asks for it; `bad_first` rows answer nonsense
    the first time they are asked."""
    asked: set = set()

    def respond(body):
        i = _row(body)
        pick = ROWS[i]["label"]
        if bad_first is not None and i in bad_first and i not in asked:
            asked.add(i)
            return text("I am not sure which one")
        if mode == "menu":
            return text('{"call": "%s"}' % pick)
        if mode == "tools":
            return tools((f"c{i}", pick, {}))
        if provider == "openai":
            return text('{"decision": {"call": "%s", "args": {}}}' % pick)
        return tools((f"d{i}", "decision", {"decision": {"call": pick, "args": {}}}))
    return respond


@pytest.mark.parametrize("mode", ["menu", "tools", "json_schema"])
def test_batch_matches_the_online_path(provider, server, make_runtime, mode):
    server.responder = _responder(provider, mode)
    online = evaluate("Message: {m}", OPTIONS, ROWS, runtime=make_runtime(), mode=mode,
                      expected="label", concurrency=8, progress=False)
    online_requests = len(server.requests)
    server.requests.clear()
    rt = make_runtime()
    batched = evaluate("Message: {m}", OPTIONS, ROWS, runtime=rt, mode=mode,
                       expected="label", progress=False, batch=FAST)
    assert online_requests == 200
    assert batched.picks == online.picks == [r["label"] for r in ROWS]
    assert batched.statuses == ["resolved"] * 200
    # one batch of 200 requests, no online call
    assert server.batches_created == 1
    (b,) = server.batches.values()
    assert len(b["order"]) == 200
    assert not any(r.path.endswith(("/chat/completions", "/v1/messages")) for r in
                   server.requests)
    # the trace says which batch, request and round answered, and the usage is kept
    trace = batched.traces[0]
    raw = trace.attempts[0].raw
    assert raw["batch"]["batch_id"] == b["id"] and raw["batch"]["round"] == 1
    assert raw["batch"]["custom_id"] in b["order"]
    assert batched.to_frame()["tokens_in"].sum() == 200 * 11


def test_a_row_invalid_at_first_is_answered_in_round_2(provider, server, make_runtime):
    server.responder = _responder(provider, "menu", bad_first={5, 17})
    res = evaluate("Message: {m}", OPTIONS, ROWS[:30], runtime=make_runtime(),
                   max_retries=1, progress=False, batch=FAST)
    assert res.statuses == ["resolved"] * 30
    assert server.batches_created == 2
    second = list(server.batches.values())[1]
    assert len(second["order"]) == 2          # only the two re-asks
    for i in (5, 17):
        attempts = res.traces[i].attempts
        assert len(attempts) == 2
        assert [a.raw["batch"]["round"] for a in attempts] == [1, 2]


@pytest.mark.parametrize("end", ["expired", "cancelled"])
def test_an_ended_batch_keeps_its_answers_and_names_the_rest(provider, server, make_runtime,
                                                            end):
    server.responder = _responder(provider, "menu")
    server.batch_end, server.batch_answer = end, 12
    res = evaluate("Message: {m}", OPTIONS, ROWS[:20], runtime=make_runtime(),
                   progress=False, batch=FAST)
    statuses = res.statuses
    assert statuses == ["resolved"] * 12 + ["failed"] * 8
    err = res.errors[15]
    assert err.kind == "model_error"
    assert f"ended {end} without answering request" in str(err)
    assert "batch batch_0001 ended" in str(err)
    # the whole message is on the trace: which request, and what to do
    message = res.traces[15].attempts[-1].error_message
    assert "op-" in message and "to send them in a new batch" in message


def test_a_per_request_error_fails_only_its_row(provider, server, make_runtime):
    good = _responder(provider, "menu")
    server.responder = lambda body: (status(400, "bad request in line", err_type=
                                            "invalid_request_error")
                                     if _row(body) == 3 else good(body))
    res = evaluate("Message: {m}", OPTIONS, ROWS[:6], runtime=make_runtime(), max_retries=0,
                   progress=False, batch=FAST)
    assert res.statuses == ["resolved"] * 3 + ["failed"] + ["resolved"] * 2
    assert "bad request in line" in str(res.errors[3])


def test_too_many_requests_are_split(provider, server, make_runtime):
    server.responder = _responder(provider, "menu")
    res = evaluate("Message: {m}", OPTIONS, ROWS[:25], runtime=make_runtime(), progress=False,
                   batch={**FAST, "max_requests": 10})
    assert res.statuses == ["resolved"] * 25
    assert sorted(len(b["order"]) for b in server.batches.values()) == [5, 10, 10]


def test_batch_needs_a_provider_runtime():
    from openprogram.runtimes import ScriptedRuntime
    with pytest.raises(TypeError, match="needs an OpenAIRuntime or an AnthropicRuntime"):
        evaluate("Message: {m}", OPTIONS, ROWS[:1], progress=False, batch=True,
                 runtime=ScriptedRuntime(['{"call": "refund"}']))


def test_a_killed_run_reattaches_to_its_batch_and_sends_nothing_new(provider, server,
                                                                     make_runtime, tmp_path):
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path
    server.responder = _responder(provider, "menu")
    server.batch_statuses = ["validating", "in_progress"]    # never ends while the child lives
    journal = tmp_path / "run.jsonl"
    here = Path(__file__).resolve().parent
    child = subprocess.Popen([sys.executable, str(here / "batch_program.py"), provider,
                              server.base_url, str(journal), "40"], cwd=here,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                 [str(here), str(here.parents[1] / "support")])})
    try:
        for _ in range(600):   # until the child journaled its batch (a count, not a time bound)
            if journal.exists() and '"submitted"' in journal.read_text():
                break
            assert child.poll() is None, "the child ended before sending its batch"
            time.sleep(0.05)
        else:
            pytest.fail("the child never journaled a batch")
    finally:
        child.kill()
        child.wait()
    assert server.batches_created == 1
    server.batch_statuses = ["validating", "in_progress", "finalizing", "completed"]
    res = evaluate("Message: {m}", OPTIONS, ROWS[:40], runtime=make_runtime(), progress=False,
                   journal=journal, batch=FAST)
    assert res.statuses == ["resolved"] * 40
    assert server.batches_created == 1                        # re-attached, nothing sent again
    creates = [r for r in server.requests if r.method == "POST" and
               r.path.rstrip("/").endswith(("/batches", "/files"))]
    assert len(creates) == (2 if provider == "openai" else 1)   # the child's upload + create
    assert [r["label"] for r in ROWS[:40]] == res.picks
    # the journal tells the batch's story: sent by the killed run, ended in the one after
    import json
    lines = [json.loads(x) for x in journal.read_text().splitlines()]
    story = [(x["batch_id"], x["state"], len(x.get("custom_ids") or ()), x.get("answered"))
             for x in lines if x["kind"] == "batch"]
    assert story == [("batch_0001", "submitted", 40, None),
                     ("batch_0001", "completed", 0, 40)]


def test_compare_and_aevaluate_take_the_batch_path(provider, server, make_runtime):
    import asyncio

    from openprogram.evaluation.evaluate import aevaluate
    from openprogram.evaluation.variants import Variant, compare
    server.responder = _responder(provider, "menu")
    res = compare("Message: {m}", {"a": Variant(mode="menu"), "b": Variant(mode="menu")},
                  ROWS[:10], options=OPTIONS, runtime=make_runtime(), progress=False,
                  batch=FAST)
    assert list(res.to_frame()["a"]) == list(res.to_frame()["b"]) == \
        [r["label"] for r in ROWS[:10]]
    assert server.batches_created == 2                        # one round per variant
    got = asyncio.run(aevaluate("Message: {m}", OPTIONS, ROWS[:10], runtime=make_runtime(),
                                progress=False, batch=FAST))
    assert got.picks == [r["label"] for r in ROWS[:10]]
    assert server.batches_created == 3


def test_the_progress_bar_shows_the_batchs_own_counts(provider, server, make_runtime, capsys):
    import threading
    import time
    server.responder = _responder(provider, "menu")
    server.batch_statuses = ["validating", "in_progress"]     # held until the test says
    box = {}
    run = threading.Thread(target=lambda: box.update(res=evaluate(
        "Message: {m}", OPTIONS, ROWS[:10], runtime=make_runtime(), progress=True,
        batch={"poll_s": 0.01, "settle_s": 0.05})))
    run.start()
    polls = 0
    for _ in range(2000):   # until the run has polled its batch 40 times (a count)
        polls = sum(r.method == "GET" and "/batches/" in r.path for r in server.requests)
        if polls >= 40:
            break
        time.sleep(0.01)
    server.batch_statuses = ["validating", "in_progress", "finalizing", "completed"]
    run.join()
    assert polls >= 40
    assert box["res"].statuses == ["resolved"] * 10
    shown = capsys.readouterr().err
    assert "waiting=batch batch_0001 (round 1) in_progress: 0/10" in shown


@pytest.mark.usefixtures("python_sigint")   # interrupt_main() needs Python's SIGINT handler
@pytest.mark.parametrize("journaled", [False, True])
def test_ctrl_c_cancels_the_batch_unless_a_journal_can_reattach(provider, server, make_runtime,
                                                               tmp_path, journaled):
    import _thread
    import threading
    import time
    server.responder = _responder(provider, "menu")
    server.batch_statuses = ["validating", "in_progress"]     # never ends by itself

    def press_ctrl_c():
        for _ in range(2000):   # once the run has polled its batch a few times (a count)
            if sum(r.method == "GET" and "/batches/" in r.path for r in server.requests) >= 5:
                break
            time.sleep(0.01)
        _thread.interrupt_main()
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = evaluate("Message: {m}", OPTIONS, ROWS[:10], runtime=make_runtime(),
                       progress=False, batch={"poll_s": 0.01, "settle_s": 0.05},
                       journal=tmp_path / "j.jsonl" if journaled else None)
    assert res.interrupted and res.statuses == ["cancelled"] * 10
    (batch,) = server.batches.values()
    cancels = [r for r in server.requests if r.path.endswith("/cancel")]
    if journaled:   # left running: the next call re-attaches to it
        assert cancels == [] and not batch["cancelled"]
    else:           # nobody could re-attach: cancelled at the provider
        assert len(cancels) == 1 and batch["cancelled"]


def test_the_batch_path_keeps_to_a_rate_limit_too(provider, server, make_runtime):
    from openprogram.evaluation.ratelimit import RateLimit
    server.responder = _responder(provider, "menu")
    limit = RateLimit(requests_per_minute=60_000)
    res = evaluate("Message: {m}", OPTIONS, ROWS[:5], runtime=make_runtime(), progress=False,
                   batch=FAST, rate_limit=limit)
    assert res.statuses == ["resolved"] * 5
    # every HTTP request of the batch protocol (upload, create, polls, results) was paced
    assert limit.stats["sent"] == len(server.requests) and limit.stats["ok"] == limit.stats["sent"]


def test_a_round_over_the_size_limit_is_split_too(provider, server, make_runtime):
    server.responder = _responder(provider, "menu")
    one = len(json.dumps(make_runtime()._request(
        [{"role": "user", "content": "Message: ticket 0"}], None, None, None).body))
    # room for about two requests a batch (each is counted with 100 bytes of envelope)
    res = evaluate("Message: {m}", OPTIONS, ROWS[:6], runtime=make_runtime(), progress=False,
                   batch={**FAST, "max_bytes": 2 * (one + 100) + 50})
    assert res.statuses == ["resolved"] * 6
    sizes = sorted(len(b["order"]) for b in server.batches.values())
    assert sum(sizes) == 6 and max(sizes) <= 2 and len(sizes) >= 3
