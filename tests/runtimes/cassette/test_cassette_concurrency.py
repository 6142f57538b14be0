"""Replay matched by request: an evaluation recorded with eight rows in flight, through the real
SDK against the loopback server, replays offline with one row or sixteen in flight and gives the
same results. Concurrent rows reach the model in a different order every run, so a replay that
answered by position would hand row 3 the reply recorded for row 5."""
import json
import re

import fakeserver
import pytest

from openprogram import decision
from openprogram.runtimes import CassetteMismatch, RecordingRuntime, ReplayRuntime, load_cassette

OPTIONS = {"refund": "Refund the order", "escalate": "Hand to a person",
           "ignore": "Nothing to do"}
PROMPT = "Route ticket {n}: {message}"
WORDS = ["refund", "escalate", "ignore"]
ROWS = [{"n": i, "message": f"please {WORDS[i % 3]} this" + (" (garbled)" if i % 7 == 0 else "")}
        for i in range(40)]


def last_user_text(body: dict) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content)
    return content


def answer_by_request(body: dict) -> fakeserver.Reply:
    """The reply depends only on what is asked: the ticket's word, and a garbled row gets an
    unusable first reply and a good pick on the re-ask."""
    text = last_user_text(body)
    reask = text.startswith("Your previous reply could not be used")
    ticket = re.search(r"Route ticket (\d+): please (\w+) this( \(garbled\))?", text)
    n, word, garbled = int(ticket.group(1)), ticket.group(2), ticket.group(3)
    # The first two tickets are answered only once two requests are in flight together, so
    # the recording is concurrent by construction, not by the machine's timing
    gate = 2 if n < 2 and not reask else None
    if garbled and not reask:
        return fakeserver.text(f"ticket {n} looks like {word}, I think", usage=(20 + n, 5),
                               gate=gate)
    return fakeserver.text(json.dumps({"call": word}), usage=(20 + n, 3), gate=gate)


def outcome(result) -> list:
    frame = result.to_frame()
    return frame[["chosen", "status", "attempts", "tokens_in", "tokens_out"]].to_dict("records")


@pytest.fixture
def recorded(tmp_path, server, make_runtime):
    server.responder = answer_by_request
    path = tmp_path / "eval.jsonl"
    live = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=RecordingRuntime(make_runtime(), path),
                             concurrency=8, progress=False)
    assert server.max_in_flight > 1  # the rows really were in flight together
    assert len(server.requests) == 40 + len(range(0, 40, 7))  # one re-ask per garbled row
    server.stop()  # a replay needs no server
    return path, live


@pytest.mark.parametrize("concurrency", [1, 16])
def test_an_evaluation_recorded_at_concurrency_8_replays_at_any_concurrency(recorded,
                                                                          concurrency):
    path, live = recorded
    assert live.failure_rate == 0 and live.retry_rate == pytest.approx(6 / 40)
    replay = ReplayRuntime(path)
    again = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=replay, concurrency=concurrency,
                              progress=False)
    assert outcome(again) == outcome(live)
    assert again.picks == [WORDS[i % 3] for i in range(40)]
    assert len(again.error_counts) == len(live.error_counts) and \
        "not_recorded" not in again.error_counts.index  # 0 mismatches
    assert replay.remaining == 0  # every recorded call answered exactly once


def test_identical_requests_are_answered_in_their_recorded_order(tmp_path):
    from openprogram.runtimes import ScriptedRuntime
    path = tmp_path / "same.jsonl"
    rec = RecordingRuntime(ScriptedRuntime(["first", "second"]), path)
    ask = [{"role": "user", "content": "the same question"}]
    assert [rec.complete(ask).text, rec.complete(ask).text] == ["first", "second"]
    replay = ReplayRuntime(path)
    assert [replay.complete(ask).text, replay.complete(ask).text] == ["first", "second"]


def test_the_key_covers_what_changes_a_reply_and_never_a_secret(tmp_path, make_runtime, server):
    server.responder = lambda body: fakeserver.text('{"call": "refund"}')
    path = tmp_path / "k.jsonl"
    cold = RecordingRuntime(make_runtime(temperature=0), path)
    decision.make("Route ticket 1: please refund this", OPTIONS, runtime=cold)
    warm = RecordingRuntime(make_runtime(temperature=0.9, timeout=30), tmp_path / "w.jsonl")
    decision.make("Route ticket 1: please refund this", OPTIONS, runtime=warm)
    a, b = load_cassette(path)["calls"][0], load_cassette(tmp_path / "w.jsonl")["calls"][0]
    assert a["request"] == b["request"]  # the same ask: a replay of either answers it
    assert a["settings"]["sampling"]["temperature"] == 0
    assert b["settings"]["sampling"]["temperature"] == 0.9
    assert "timeout" not in b["settings"]["sampling"]  # it changes no reply
    assert a["settings"]["model"] == "test-model"
    assert a["key"] != b["key"]  # the cache tells the two models apart
    assert fakeserver.FAKE_KEY not in path.read_text()
    first_line = path.read_text().splitlines()[1]
    assert first_line.startswith('{"key": "' + a["key"] + '"')  # indexable without parsing


def test_a_mismatch_in_an_evaluation_names_the_row_change(recorded):
    path, live = recorded
    rows = [dict(r) for r in ROWS]
    rows[5]["message"] = "please refund that"  # one row's input changed since recording
    again = decision.evaluate(PROMPT, OPTIONS, rows, runtime=ReplayRuntime(path),
                              concurrency=16, progress=False)
    assert again.statuses.count("failed") == 1 and again.statuses[5] == "failed"
    err = again.errors[5]
    assert isinstance(err.__cause__, CassetteMismatch)
    msg = str(err.__cause__)
    assert "Route ticket 5: please ignore this" in msg.split("recorded:")[1] and \
        "please refund that" in msg.split("asked:")[1]
    assert "network" not in str(err)
