"""Evaluations that survive: `journal=` appends each finished row, a second call resumes, a killed
process loses nothing finished, and `EvaluationResult.from_journal` reads a run back without a
model. Every claim is counted: model calls, server requests, rows, lines."""
import csv
import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from evalhelp import OPTIONS, PROMPT, rule

from openprogram import decision
from openprogram.evaluation.evaluate import EvaluationResult, JournalMismatch
from openprogram.runtimes import ScriptedRuntime

HERE = Path(__file__).resolve().parent
import fakeserver  # noqa: E402  (tests/support, on pytest's pythonpath)
import journal_program as prog  # noqa: E402

MESSAGES = ["please refund me", "escalate this", "just saying hi", "refund again",
            "garbage in", "typo here", "crash it", "escalate now"]
ROWS = [{"message": m, "label": lab} for m, lab in zip(
    MESSAGES, ["refund", "escalate", "ignore", "refund", "ignore", "ignore", "refund",
               "escalate"])]


def counted():
    rt = ScriptedRuntime(rule=rule)
    return rt, lambda: len(rt.calls)


def test_a_second_call_with_the_same_journal_runs_nothing(tmp_path):
    path = tmp_path / "runs" / "triage.jsonl"
    rt, calls = counted()
    first = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, expected="label",
                              journal=path, progress=False)
    made = calls()
    assert made == len(ROWS) + 2  # "garbage" and "typo" were re-asked once each
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    # the menu and option table all rows share are written once, not in every row
    assert [x["kind"] for x in lines] == ["journal", "section", "shared"] + ["row"] * len(ROWS)
    lines = [lines[0], lines[1]] + lines[3:]
    assert sorted(x["row"] for x in lines[2:]) == list(range(len(ROWS)))
    row = next(x for x in lines[2:] if x["row"] == 0)
    assert row["pick"] == "refund" and row["args"] == {"amount": 5}
    assert row["result"] == "refunded 5" and row["status"] == "resolved"
    assert row["trace"]["attempts"][0]["chosen"] == "refund"
    assert row["input"] == ROWS[0] and row["expected"] == "refund"
    crashed = next(x for x in lines[2:] if x["row"] == 6)
    assert crashed["status"] == "failed" and crashed["error"]["type"] == "ZeroDivisionError"

    again = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, expected="label",
                              journal=path, progress=False)
    assert calls() == made  # resumed: every row was journaled, no model call
    assert again.statuses == first.statuses and again.picks == first.picks
    assert again.accuracy == first.accuracy and again.retry_rate == first.retry_rate
    assert (again.confusion == first.confusion).all().all()
    assert len(path.read_text().splitlines()) == 3 + len(ROWS)  # nothing written twice
    # what a journaled result holds in memory is the summary: traces come from the file
    assert again._rows is None and first._rows is None
    assert again.traces[3].attempts[-1].chosen == first.traces[3].attempts[-1].chosen
    # a trace read back is the trace that ran, its shared menu put back in place
    assert again.traces[5].to_dict() | {"id": 0} == first.traces[5].to_dict() | {"id": 0}
    assert again.results[0] == "refunded 5"
    assert str(again.errors[6]) == "negative refund"


def test_from_journal_loads_a_run_for_analysis_without_a_model(tmp_path):
    path = tmp_path / "t.jsonl"
    live = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=ScriptedRuntime(rule=rule),
                             expected="label", journal=path, progress=False)
    back = EvaluationResult.from_journal(path)
    assert back.picks == live.picks and back.statuses == live.statuses
    assert back.accuracy == live.accuracy and back.failure_rate == live.failure_rate
    assert back.error_counts.to_dict() == live.error_counts.to_dict()
    assert back.summary["tokens_in"] == live.summary["tokens_in"]
    frame, live_frame = back.to_frame(), live.to_frame()
    cols = ["message", "label", "chosen", "args", "result", "error", "attempts", "error_kinds",
            "status", "cached", "expected", "correct"]
    assert frame[cols].astype(str).equals(live_frame[cols].astype(str))
    trace = back.traces[5]  # "typo here": an unknown option, then a good re-ask
    assert [a.error_kind for a in trace.attempts] == ["unknown_call", None]
    panel = back.panel(5)  # the trace itself, or the notebook layer's panel once it is loaded
    shown = panel if isinstance(panel, type(trace)) else panel.trace
    assert shown.attempts[0].error_kind == "unknown_call"
    assert "typo here" in back._repr_html_() or "<table" in back._repr_html_()


def test_a_changed_evaluation_is_refused_and_names_what_changed(tmp_path):
    path = tmp_path / "t.jsonl"
    decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=ScriptedRuntime(rule=rule),
                      journal=path, progress=False)
    rt, calls = counted()
    with pytest.raises(JournalMismatch, match=r"another the prompt template .* pass a new "
                                              r"journal= path"):
        decision.evaluate(PROMPT + " Be brief.", OPTIONS, ROWS[:3], runtime=rt, journal=path,
                          progress=False)
    fewer = {k: v for k, v in OPTIONS.items() if k != "ignore"}
    with pytest.raises(JournalMismatch, match="the option set"):
        decision.evaluate(PROMPT, fewer, ROWS[:3], runtime=rt, journal=path, progress=False)
    with pytest.raises(JournalMismatch, match="input row 1 is not the row the journal"):
        decision.evaluate(PROMPT, OPTIONS, [ROWS[0], ROWS[5], ROWS[2]], runtime=rt,
                          journal=path, progress=False)
    assert calls() == 0  # refused before any model call
    assert isinstance(JournalMismatch("x"), ValueError)


def test_a_resume_at_another_repair_level_is_refused_naming_both_levels(tmp_path):
    path = tmp_path / "t.jsonl"
    decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=ScriptedRuntime(rule=rule),
                      journal=path, progress=False, repair="menu")
    section = json.loads(path.read_text().splitlines()[1])
    assert section["kind"] == "section" and section["repair"] == "menu"
    rt, calls = counted()
    for other in ("safe", "off", None):  # None: the default level, "safe"
        with pytest.raises(JournalMismatch) as info:
            decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=rt, journal=path,
                              progress=False, repair=other)
        message = str(info.value)
        assert f"run with repair='menu', and this run asks for repair='{other or 'safe'}'" \
            in message
        assert "Pass repair='menu' to resume it, or a new journal= path" in message
    assert calls() == 0  # refused before any model call
    again = decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=rt, journal=path,
                              progress=False, repair="menu")
    assert calls() == 0 and again.picks == ["refund", "escalate", "ignore"]
    # compare journals each variant as its own section, each at its own level
    both = tmp_path / "c.jsonl"
    result = decision.compare(PROMPT, {"menu": decision.Variant(repair="menu"),
                                       "off": decision.Variant(repair="off")},
                              ROWS[:2], options=OPTIONS, runtime=ScriptedRuntime(rule=rule),
                              journal=both, progress=False)
    sections = [json.loads(x) for x in both.read_text().splitlines()
                if json.loads(x)["kind"] == "section"]
    assert {x["section"]: x["repair"] for x in sections} == {"menu": "menu", "off": "off"}
    assert list(result.results) == ["menu", "off"]


def test_a_journal_from_before_repair_levels_resumes_at_any_level(tmp_path):
    from openprogram.evaluation.journal import fingerprint
    path = tmp_path / "t.jsonl"
    first = decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=ScriptedRuntime(rule=rule),
                              journal=path, progress=False)
    lines = path.read_text().splitlines()
    section = json.loads(lines[1])
    del section["repair"]  # as a release without repair= wrote it
    section["fingerprint"] = fingerprint(section)
    lines[1] = json.dumps(section)
    path.write_text("\n".join(lines) + "\n")
    rt, calls = counted()
    for level in ("menu", "off"):
        again = decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=rt, journal=path,
                                  progress=False, repair=level)
        assert again.picks == first.picks
    assert calls() == 0
    with pytest.raises(JournalMismatch, match="the prompt template"):
        decision.evaluate(PROMPT + " Be brief.", OPTIONS, ROWS[:3], runtime=rt, journal=path,
                          progress=False)


def test_a_torn_last_line_is_dropped_and_only_its_row_runs_again(tmp_path):
    path = tmp_path / "t.jsonl"
    decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=ScriptedRuntime(rule=rule),
                      journal=path, progress=False, concurrency=1)
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # killed while writing the last row
    rt, calls = counted()
    with pytest.warns(RuntimeWarning, match="last line of the journal .* was cut off"):
        again = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, journal=path,
                                  progress=False)
    assert calls() == 1 and again.statuses.count("cancelled") == 0
    assert len(path.read_text().splitlines()) == 3 + len(ROWS)
    # reading a journal cut the same way gives the whole rows
    path.write_bytes(path.read_bytes()[:-40])
    assert EvaluationResult.from_journal(path).finished == len(ROWS) - 1


def test_compare_journals_each_variant_as_its_own_section(tmp_path):
    path = tmp_path / "c.jsonl"
    rt, calls = counted()
    variants = {"all": OPTIONS, "two": {k: v for k, v in OPTIONS.items() if k != "escalate"}}
    first = decision.compare(PROMPT, variants, ROWS, runtime=rt, journal=path, progress=False)
    made = calls()
    again = decision.compare(PROMPT, variants, ROWS, runtime=rt, journal=path, progress=False)
    assert calls() == made
    assert again.to_frame()[["all", "two"]].equals(first.to_frame()[["all", "two"]])
    with pytest.raises(ValueError, match="holds 2 evaluations .* pass section="):
        EvaluationResult.from_journal(path)
    assert EvaluationResult.from_journal(path, section="two").picks == \
        first["two"].picks


@pytest.mark.parametrize("source", ["generator", "csv", "chunks"])
def test_any_iterable_of_rows_streams_with_total(tmp_path, source):
    import pandas as pd
    n = 30
    rows = [{"message": MESSAGES[i % len(MESSAGES)], "n": str(i)} for i in range(n)]
    if source == "generator":
        inputs = (r for r in rows)
    elif source == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, ["message", "n"])
        w.writeheader()
        w.writerows(rows)
        buf.seek(0)
        inputs = csv.DictReader(buf)
    else:
        inputs = pd.DataFrame(rows).pipe(lambda f: (f.iloc[i:i + 7] for i in range(0, n, 7)))
    res = decision.evaluate(PROMPT, OPTIONS, inputs, runtime=ScriptedRuntime(rule=rule),
                            total=n, journal=tmp_path / "s.jsonl", progress=False,
                            concurrency=4)
    assert len(res) == n and res.finished == n
    assert res.records is None  # the rows stay in the journal, not in memory
    assert res.to_frame()["message"].tolist() == [r["message"] for r in rows]
    assert res.picks[:3] == ["refund", "escalate", "ignore"]


def test_a_streamed_input_is_read_as_workers_free_up(tmp_path):
    """The generator is never drained up front: when row 5 is read, at most `concurrency`
    rows have been started and not finished."""
    rt = ScriptedRuntime(rule=rule)
    read = []
    gap = []

    def rows():
        for i in range(40):
            read.append(i)
            gap.append(len(read) - len(rt.calls))
            yield {"message": "please refund me"}
    decision.evaluate(PROMPT, OPTIONS, rows(), runtime=rt, concurrency=2, progress=False)
    assert len(read) == 40 and max(gap) <= 3


def test_the_progress_bar_starts_at_the_rows_already_journaled(tmp_path, monkeypatch):
    import tqdm.auto
    made = []
    real = tqdm.auto.tqdm

    def spy(*args, **kw):
        bar = real(*args, **kw, file=io.StringIO())
        made.append((kw, bar))
        return bar
    monkeypatch.setattr(tqdm.auto, "tqdm", spy)
    path = tmp_path / "p.jsonl"
    decision.evaluate(PROMPT, OPTIONS, ROWS[:5], runtime=ScriptedRuntime(rule=rule),
                      journal=path, progress=False)
    decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=ScriptedRuntime(rule=rule), journal=path)
    kw, bar = made[-1]
    assert kw["initial"] == 5 and kw["total"] == len(ROWS) and bar.n == len(ROWS)
    # failures so far and the retry rate (tqdm shows rows/s itself): "garbage" and "crash"
    # failed, "garbage" and "typo" were re-asked
    assert bar.postfix == "failed=2, retried=25%"


# -- a run killed with SIGKILL resumes where it stopped -------------------------------------------

def _answer(body):
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    reask = text.startswith("Your previous reply could not be used")
    import re
    t = re.search(r"Route ticket (\d+): please (\w+) this( \(garbled\))?", text)
    if t.group(3) and not reask:
        return fakeserver.text("hmm, not sure")
    return fakeserver.text(json.dumps({"call": t.group(2)}))


def test_a_run_killed_with_sigkill_resumes_making_only_the_calls_not_yet_made(tmp_path):
    path = tmp_path / "killed.jsonl"
    retries = len(range(0, prog.N, 7))  # each garbled row is re-asked once
    answered = []
    child = {}
    killed = threading.Event()

    def respond(body):
        text = json.dumps(body)
        first_ask = "Your previous reply could not be used" not in text
        # kill the process when the server has answered about half the calls and a new row
        # asks: every row before it has been journaled (the run goes one row at a time)
        if not killed.is_set() and len(answered) >= prog.N // 2 and first_ask:
            os.kill(child["proc"].pid, signal.SIGKILL)
            killed.set()
            return fakeserver.Reply(kind="close")  # never answered: not a call that was made
        answered.append(body)
        return _answer(body)

    env = {**os.environ, "PYTHONPATH": str(HERE)}
    with fakeserver.FakeServer("openai", responder=respond) as server:
        cmd = [sys.executable, str(HERE / "journal_program.py"), server.base_url, str(path)]
        child["proc"] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, text=True, cwd=tmp_path)
        out, err = child["proc"].communicate(timeout=120)
        assert child["proc"].returncode == -signal.SIGKILL, err
        before = len(answered)
        journaled = [json.loads(x) for x in path.read_text().splitlines()
                     if '"kind":"row"' in x]
        assert 0 < len(journaled) < prog.N

        child["proc"] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, text=True, cwd=tmp_path)
        out, err = child["proc"].communicate(timeout=120)
        assert child["proc"].returncode == 0, err
    result = json.loads(out)
    assert result["statuses"] == ["resolved"] * prog.N
    assert result["picks"] == [prog.WORDS[i % 3] for i in range(prog.N)]
    assert before >= prog.N // 2
    assert len(answered) == prog.N + retries  # every call made once, never more
    back = EvaluationResult.from_journal(path)
    assert back.picks == result["picks"] and back.retry_rate == retries / prog.N
    assert "sk-local" not in path.read_text()  # the key reaches no journal


def test_aevaluate_journals_and_resumes_on_the_callers_loop(tmp_path):
    import asyncio
    path = tmp_path / "a.jsonl"
    rt, calls = counted()
    first = asyncio.run(decision.aevaluate(PROMPT, OPTIONS, ROWS[:4], runtime=rt, journal=path,
                                           progress=False))
    made = calls()
    again = asyncio.run(decision.aevaluate(PROMPT, OPTIONS, ROWS, runtime=rt, journal=path,
                                           progress=False))
    assert calls() - made == len(ROWS) - 4 + 2  # only the new rows ("garbage", "typo" re-asked)
    assert again.picks[:4] == first.picks
    assert EvaluationResult.from_journal(path).finished == len(ROWS)


def test_an_interrupted_stream_of_unknown_length_keeps_the_rows_it_read(tmp_path):
    rt = ScriptedRuntime(rule=rule)

    def rows():
        for i in range(10):
            if i == 6:
                raise KeyboardInterrupt  # Ctrl-C while the inputs are being read
            yield {"message": MESSAGES[i % len(MESSAGES)]}
    with pytest.warns(RuntimeWarning, match="evaluate was interrupted"):
        res = decision.evaluate(PROMPT, OPTIONS, rows(), runtime=rt, concurrency=1,
                                journal=tmp_path / "i.jsonl", progress=False)
    assert res.interrupted and len(res) == 6 and res.finished <= 6
    assert res.finished == EvaluationResult.from_journal(tmp_path / "i.jsonl").finished


def test_lines_of_kinds_a_later_release_adds_are_skipped(tmp_path):
    """Batch submission (issue 24) will record batch ids and round states as lines of their own
    kinds in the same journal; this release resumes and reads such a journal."""
    path = tmp_path / "b.jsonl"
    decision.evaluate(PROMPT, OPTIONS, ROWS[:3], runtime=ScriptedRuntime(rule=rule),
                      journal=path, progress=False)
    with open(path, "a") as f:
        f.write(json.dumps({"kind": "batch", "section": "evaluate", "batch_id": "b-1",
                            "round": 1, "state": "submitted", "rows": [3, 4]}) + "\n")
    rt, calls = counted()
    res = decision.evaluate(PROMPT, OPTIONS, ROWS[:5], runtime=rt, journal=path,
                            progress=False)
    assert calls() == 2 + 1 and res.finished == 5  # rows 3 and 4 ("garbage" re-asked once)
    assert EvaluationResult.from_journal(path).finished == 5
