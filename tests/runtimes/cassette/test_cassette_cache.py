"""The cache: `CachedRuntime(inner, path)` answers from the file what the model already answered,
through the real SDKs against the loopback server. The server counts every request, so "the
second run calls the model 0 times" is a count, never a timing."""
import asyncio
import json
import threading

import cassette_program
import pytest
from test_cassette import modes_replies
from test_cassette_concurrency import OPTIONS, PROMPT, ROWS, WORDS, answer_by_request

from openprogram import Runtime, decision
from openprogram.runtimes import CachedRuntime, ReplayRuntime, ScriptedRuntime, load_cassette


def test_every_way_of_asking_agent_tool_loops_and_async_calls_are_free_the_second_time(
        provider, server, make_runtime, tmp_path):
    path = tmp_path / "cache.jsonl"
    server.push(*modes_replies(provider))
    first = cassette_program.run_modes(CachedRuntime(make_runtime(), path))
    asked = len(server.requests)
    assert asked == len(modes_replies(provider))
    # a new runtime on the same file (a re-run cell, a restarted kernel): nothing is asked,
    # and an asked request would get the server's 599 "nothing queued" and fail the run
    again = CachedRuntime(make_runtime(), path)
    second = cassette_program.run_modes(again)
    assert len(server.requests) == asked
    assert (again.hits, again.misses) == (asked, 0)
    assert second["results"] == first["results"]
    assert second["dag"] == first["dag"]
    for t in second["traces"]:
        assert all(a["cached"] for a in t["attempts"])
    for t in first["traces"]:
        assert not any(a["cached"] for a in t["attempts"])
    # the cache is a cassette: it replays offline, every way of asking included
    server.stop()
    assert cassette_program.run_modes(ReplayRuntime(path))["results"] == first["results"]


def test_an_evaluation_is_free_the_second_time_and_marks_its_rows_cached(
        server, make_runtime, tmp_path):
    server.responder = answer_by_request
    path = tmp_path / "cache.jsonl"
    live = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=CachedRuntime(make_runtime(), path),
                             concurrency=8, progress=False)
    asked = len(server.requests)
    assert asked == 46  # 40 rows + 6 re-asks
    cached = CachedRuntime(make_runtime(), path)
    again = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=cached, concurrency=16,
                              progress=False)
    assert len(server.requests) == asked and cached.misses == 0 and cached.hits == 46
    assert again.picks == live.picks == [WORDS[i % 3] for i in range(40)]
    frame, first = again.to_frame(), live.to_frame()
    assert frame["cached"].all() and not first["cached"].any()
    trace = again.traces[0]
    assert trace.to_frame("attempts")["cached"].all()
    assert "cached" not in live.traces[0].to_frame("attempts")  # only once a cache answered
    # the panel's view marks the cached reply (a badge in the reply's title, and a column)
    from openprogram.trace.view import trace_html
    assert "[cached: answered from the cache file" in trace_html(trace)
    assert "[cached:" not in trace_html(live.traces[0])
    # aevaluate and compare on the same file ask nothing either
    assert asyncio.run(decision.aevaluate(PROMPT, OPTIONS, ROWS, runtime=cached,
                                          progress=False)).picks == live.picks
    both = decision.compare(PROMPT, {"a": cached, "b": CachedRuntime(make_runtime(), path)},
                            ROWS, options=OPTIONS, progress=False)
    assert both.differences.empty and len(server.requests) == asked


def test_a_changed_row_asks_only_that_row(server, make_runtime, tmp_path):
    server.responder = answer_by_request
    path = tmp_path / "cache.jsonl"
    decision.evaluate(PROMPT, OPTIONS, ROWS[:10], runtime=CachedRuntime(make_runtime(), path),
                      progress=False)
    before = len(server.requests)
    rows = [dict(r) for r in ROWS[:10]]
    rows[4]["message"] = "please refund this"
    rt = CachedRuntime(make_runtime(), path)
    result = decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, progress=False)
    assert len(server.requests) == before + 1 and rt.misses == 1
    assert result.picks[4] == "refund"
    assert result.to_frame()["cached"].tolist() == [i != 4 for i in range(10)]


def counting(reply=lambda text: json.dumps({"call": "refund"}), **kw):
    calls = []
    lock = threading.Lock()

    def model(content):
        text = "".join(b.get("text", "") for b in content) if isinstance(content, list) \
            else content
        with lock:
            calls.append(text)
        return reply(text)
    return Runtime(call=model, model="counted", **kw), calls


def test_concurrent_writers_in_one_process_leave_no_torn_or_duplicate_line(tmp_path):
    """Two runtimes on one file, 16 rows in flight, every request asked four times over: each
    distinct request reaches the model once, and the file holds one whole line per request."""
    path = tmp_path / "shared.jsonl"
    inner, calls = counting()
    gate = threading.Barrier(2)

    def run(rt):
        gate.wait()
        decision.evaluate("Route ticket {n}", OPTIONS, [{"n": i % 25} for i in range(100)],
                          runtime=rt, concurrency=16, progress=False)
    threads = [threading.Thread(target=run, args=(CachedRuntime(inner, path),))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 25
    lines = path.read_text().splitlines()[1:]
    keys = [json.loads(line)["key"] for line in lines]  # every line is whole JSON
    assert len(keys) == len(set(keys)) == 25


def test_temperature_is_cached_and_refresh_asks_again(tmp_path):
    path = tmp_path / "warm.jsonl"
    n = iter(range(100))
    inner = ScriptedRuntime(rule=lambda text: f"draw {next(n)}")
    inner.temperature = 0.9  # a sampling model: each call draws anew
    first = CachedRuntime(inner, path).complete([{"role": "user", "content": "a poem"}]).text
    assert CachedRuntime(inner, path).complete(
        [{"role": "user", "content": "a poem"}]).text == first  # cached despite temperature
    fresh = CachedRuntime(inner, path, refresh=True)
    renewed = fresh.complete([{"role": "user", "content": "a poem"}]).text
    assert renewed != first and fresh.misses == 1
    assert CachedRuntime(inner, path).complete(
        [{"role": "user", "content": "a poem"}]).text == renewed  # the newest reply answers
    inner.temperature = 0.2  # other sampling settings are another request
    assert CachedRuntime(inner, path).complete(
        [{"role": "user", "content": "a poem"}]).text not in (first, renewed)
    assert len(load_cassette(path)["calls"]) == 3


def test_failures_are_not_cached(tmp_path):
    from openprogram import ModelCallError
    fail = [True]

    def flaky(content):
        if fail.pop() if fail else False:
            raise ModelCallError("the server went away", kind="model_error")
        return '{"call": "refund"}'
    rt = CachedRuntime(Runtime(call=flaky), tmp_path / "c.jsonl")
    with pytest.raises(ModelCallError):
        rt.complete([{"role": "user", "content": "q"}])
    assert rt.complete([{"role": "user", "content": "q"}]).text == '{"call": "refund"}'
    assert (rt.hits, rt.misses) == (0, 2)


def test_a_cache_cut_in_its_last_line_keeps_the_whole_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    inner, calls = counting(reply=lambda text: text.upper())
    rt = CachedRuntime(inner, path)
    for q in ("one", "two", "three"):
        rt.complete([{"role": "user", "content": q}])
    data = path.read_bytes()
    path.write_bytes(data[:-20])  # killed in the middle of writing "three"
    from openprogram.runtimes.cassette import cache
    cache._Store._open.clear()  # as a new process would open it
    with pytest.warns(RuntimeWarning, match="last line of the cache .* was cut off"):
        rt2 = CachedRuntime(inner, path)
    assert [rt2.complete([{"role": "user", "content": q}]).text
            for q in ("one", "two", "three")] == ["ONE", "TWO", "THREE"]
    assert (rt2.hits, rt2.misses) == (2, 1) and len(calls) == 4
    assert len(load_cassette(path)["calls"]) == 3  # the file is whole again


def test_bad_arguments_say_what_to_pass(tmp_path):
    with pytest.raises(TypeError, match="wraps an openprogram Runtime"):
        CachedRuntime(lambda c: "x", tmp_path / "c.jsonl")
    with pytest.raises(TypeError, match="refresh must be True"):
        CachedRuntime(ScriptedRuntime(["x"]), tmp_path / "c.jsonl", refresh="yes")
    doc = tmp_path / "v2.json"
    doc.write_text(json.dumps({"format": "openprogram-cassette", "version": 2, "calls": []}))
    with pytest.raises(ValueError, match="a cache is JSON Lines"):
        CachedRuntime(ScriptedRuntime(["x"]), doc)
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    with pytest.raises(ValueError, match="cannot use .* as its cache"):
        CachedRuntime(ScriptedRuntime(["x"]), junk)


def test_re_running_a_notebook_cell_calls_the_model_zero_times(tmp_path):
    """The same `%%decide` cell run twice in an IPython shell, as a user re-runs it: the second
    run is answered from the cache, and so is a run in a new shell (a restarted kernel)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    inner, calls = counting(reply=lambda text: json.dumps({"call": "refund"}))
    cell = "%%decide OPTIONS --runtime rt --as step\nRoute ticket 7: please refund this\n"
    for restart in range(2):
        InteractiveShell.clear_instance()
        cfg = Config()
        cfg.HistoryManager.hist_file = ":memory:"
        shell = InteractiveShell.instance(config=cfg)
        try:
            assert shell.run_cell("%load_ext openprogram").success
            shell.user_ns.update(OPTIONS=OPTIONS, rt=CachedRuntime(inner, tmp_path / "nb.jsonl"))
            for _ in range(2):
                r = shell.run_cell(cell)
                assert r.success, r.error_in_exec
                assert shell.user_ns["step"] == "Refund the order"
        finally:
            InteractiveShell.clear_instance()
        assert len(calls) == 1  # only the very first run asked the model
        assert shell.user_ns["rt"].misses == (1 if restart == 0 else 0)


def test_a_recorded_cassette_serves_as_a_cache_but_its_failures_are_asked_again(tmp_path):
    from openprogram import ModelCallError
    from openprogram.runtimes import RecordingRuntime
    path = tmp_path / "rec.jsonl"
    answers = iter([ModelCallError("rate limited", kind="model_error"), "A1", "B1", "A2"])

    def model(content):
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a
    inner = Runtime(call=model, model="m")
    rec = RecordingRuntime(inner, path)
    with pytest.raises(ModelCallError):
        rec.complete([{"role": "user", "content": "a"}])
    assert rec.complete([{"role": "user", "content": "b"}]).text == "A1"
    cached = CachedRuntime(inner, path)
    assert cached.complete([{"role": "user", "content": "b"}]).text == "A1"  # recorded: free
    assert cached.complete([{"role": "user", "content": "a"}]).text == "B1"  # failed: asked
    assert (cached.hits, cached.misses) == (1, 1)
