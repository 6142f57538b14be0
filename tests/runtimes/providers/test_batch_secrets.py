"""The batch path keeps the API key out of everything it writes or shows (issue 41, findings 1-3):
a Files / Batch endpoint whose 401 echoes the key, and batch ids that hold the key, through the
real SDK clients against the loopback server; then every file (journal, cassette, cache), trace,
view and error is searched for the key and for every 8-character piece of it. And a key passed in
extra_query / extra_body never reaches a cassette or a cache."""
from __future__ import annotations

import json

import pytest
from fakeserver import FAKE_KEY, status, text

from openprogram.decision.stepthrough import steps
from openprogram.evaluation.evaluate import evaluate
from openprogram.evaluation.results import EvaluationResult
from openprogram.trace.view import trace_html

OPTIONS = {"refund": ("REFUND", "give the money back"), "answer": ("ANSWER", "reply in writing")}
ROWS = [{"m": f"ticket {i}"} for i in range(6)]
FAST = {"poll_s": 0.0, "settle_s": 0.05}
SECRET = FAKE_KEY[len("sk-op-test-"):]
PIECES = [SECRET[i:i + 8] for i in range(len(SECRET) - 7)]


def leaks(blob: str) -> list[str]:
    return ([FAKE_KEY] if FAKE_KEY in blob else []) + [p for p in PIECES if p in blob]


def every_surface(res, journal, stderr: str) -> dict[str, str]:
    """Each place a batch run's outcome shows, as text."""
    out = {"journal file": journal.read_text(encoding="utf-8"), "progress": stderr,
           "result repr": repr(res), "result html": res._repr_html_(),
           "frame": res.to_frame().to_string()}
    for i in range(len(res)):
        err, trace = res.errors[i], res.traces[i]
        out[f"error {i}"] = f"{err}\n{err!r}" if err is not None else ""
        out[f"trace {i}"] = json.dumps(trace.to_dict(), default=repr)
        out[f"trace html {i}"] = trace_html(trace)
        out[f"trace text {i}"] = trace.format_text()
        out[f"steps {i}"] = steps(trace).to_html() + steps(trace).format_text()
        out[f"trace frame {i}"] = trace.to_frame().to_string()
    again = EvaluationResult.from_journal(journal)
    for i in range(len(again)):
        out[f"journaled trace {i}"] = json.dumps(again.traces[i].to_dict(), default=repr)
        out[f"journaled error {i}"] = str(again.errors[i])
    return out


def assert_no_key(surfaces: dict[str, str]) -> None:
    found = {where: leaks(blob) for where, blob in surfaces.items() if leaks(blob)}
    assert not found, f"the key is in: {found}"


def test_a_401_from_the_batch_endpoint_that_echoes_the_key(provider, server, make_runtime,
                                                          tmp_path, capsys):
    server.batch_refusal = status(401, f"Incorrect API key provided: {FAKE_KEY}. You can find "
                                       f"your API key at https://example.invalid",
                                  err_type="invalid_request_error")
    journal = tmp_path / "run.jsonl"
    res = evaluate("Message: {m}", OPTIONS, ROWS, runtime=make_runtime(), progress=True,
                   journal=journal, max_retries=0, batch=FAST)
    assert res.statuses == ["failed"] * len(ROWS)
    # the server did answer with the key: the test would pass for nothing otherwise
    assert server.requests and all(r.path.endswith(("/files", "/batches")) for r in
                                   server.requests)
    err = str(res.errors[0])
    assert "the batch round failed" in err and "401" in err and "[redacted]" in err
    assert_no_key(every_surface(res, journal, capsys.readouterr().err))


@pytest.mark.parametrize("end", [None, "expired"])
def test_batch_ids_that_hold_the_key(provider, server, make_runtime, tmp_path, capsys, end):
    server.responder = lambda body: text('{"call": "refund"}')
    server.batch_id_prefix = f"batch_{FAKE_KEY}_"
    server.batch_end, server.batch_answer = end, 3
    journal = tmp_path / "run.jsonl"
    rt = make_runtime()
    res = evaluate("Message: {m}", OPTIONS, ROWS, runtime=rt, progress=True, journal=journal,
                   max_retries=0, batch=FAST)
    assert res.statuses == (["resolved"] * 6 if end is None else
                            ["resolved"] * 3 + ["failed"] * 3)
    (bid,) = server.batches       # the server did choose an id holding the key
    assert FAKE_KEY in bid
    raw = res.traces[0].attempts[0].raw["batch"]
    assert raw["batch_id"].startswith("batch_sk-[redacted]") or \
        raw["batch_id"].startswith("batch_[redacted]")
    if end:
        assert "ended expired without answering" in str(res.errors[5])
    batch_lines = [json.loads(x) for x in journal.read_text().splitlines()
                   if '"kind":"batch"' in x]
    assert [x["state"] for x in batch_lines] == ["submitted", end or "completed"]
    assert_no_key(every_surface(res, journal, capsys.readouterr().err))


def test_the_progress_line_of_a_batch_whose_id_holds_the_key(provider, server, make_runtime):
    import asyncio

    from openprogram.runtimes import BatchRuntime
    server.responder = lambda body: text('{"call": "refund"}')
    server.batch_id_prefix = f"batch_{FAKE_KEY}_"
    rt = BatchRuntime(make_runtime(), poll_s=0.0, settle_s=0.01)
    shown = []

    async def run():
        task = asyncio.ensure_future(rt.acomplete([{"role": "user", "content": "hi"}]))
        while not task.done():
            if rt.status():
                shown.append(rt.status())
            await asyncio.sleep(0)
        return await task

    asyncio.run(run())
    assert shown and all("[redacted]" in s for s in shown)
    assert not leaks("\n".join(shown) + repr(rt.batches))


@pytest.mark.parametrize("where", ["extra_query", "extra_body"])
@pytest.mark.parametrize("same_key", [True, False])
def test_a_key_in_extra_settings_is_not_recorded(provider, server, make_runtime, tmp_path,
                                                 where, same_key):
    from openprogram.runtimes import CachedRuntime, RecordingRuntime, ReplayRuntime
    other = "proxy-" + "Zq8Lm3Np7Rt2Vw6Xy9Ab"      # a secret the runtime does not hold
    value = FAKE_KEY if same_key else other
    settings = {where: {"api_key": value, "nested": {"auth": {"signature": value}},
                        "note": f"the key is {FAKE_KEY}"}}
    server.responder = lambda body: text('{"call": "refund"}')
    msgs = [{"role": "user", "content": "hi"}]
    for cls, path in ((RecordingRuntime, tmp_path / "rec.jsonl"),
                      (CachedRuntime, tmp_path / "cache.jsonl")):
        rt = cls(make_runtime(**settings), path)
        assert rt.complete(msgs).text == '{"call": "refund"}'
        blob = path.read_text(encoding="utf-8")
        assert value not in blob and "Zq8Lm3Np" not in blob and not leaks(blob), cls
        assert ReplayRuntime(path).complete(msgs).text == '{"call": "refund"}'
    # the cache still answers its own request from the masked line
    cached = CachedRuntime(make_runtime(**settings), tmp_path / "cache.jsonl")
    cached.complete(msgs)
    assert (cached.hits, cached.misses) == (1, 0)
    # the key went to the server all the same: masking is for the files only
    assert any(value in json.dumps(r.body) + r.path for r in server.requests)


def test_key_shaped_text_of_the_programs_own_is_recorded_as_asked(make_runtime, tmp_path):
    """The file writers mask the keys the process holds, not what only looks like one: a prompt
    about "Bearer tokens" replays from its cassette (and answers from its cache)."""
    from openprogram.runtimes import CachedRuntime, RecordingRuntime, ReplayRuntime, ScriptedRuntime
    holder = make_runtime()          # a key is live in this process
    msgs = [{"role": "user", "content": "explain Bearer tokens, sk-abcdefghijkl keys and "
                                        "Authorization: Basic 12345678abcd headers"}]
    path = tmp_path / "rec.jsonl"
    RecordingRuntime(ScriptedRuntime(["fine"]), path).complete(msgs)
    assert msgs[0]["content"] in path.read_text()
    assert ReplayRuntime(path).complete(msgs).text == "fine"
    cache = tmp_path / "cache.jsonl"
    CachedRuntime(ScriptedRuntime(["fine"]), cache).complete(msgs)
    again = CachedRuntime(ScriptedRuntime(["other"]), cache)
    assert again.complete(msgs).text == "fine" and again.hits == 1
    assert holder.redact(FAKE_KEY) != FAKE_KEY
