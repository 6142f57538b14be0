"""A journaled row's whole line is written in one pass from the finished row (`journal_text.
row_text`): it must be the line the general path writes — `evaluate._journal_row`'s columns and
the trace's `to_dict(json_ready)` packed against the section's menu, through the journal's
encoder — byte for byte, for rows of every shape (resolved, re-asked, failed, a picked function
that raised, values JSON has no form for, text UTF-8 refuses), and a row it does not expect goes
the general way."""
import dataclasses
import math
import weakref
from decimal import Decimal

import pytest
from evalhelp import OPTIONS, PROMPT, rule

from openprogram import decision
from openprogram.base import secrets
from openprogram.evaluation import evaluate as ev
from openprogram.evaluation import journal_text
from openprogram.evaluation.runner import Row
from openprogram.runtimes import ScriptedRuntime
from openprogram.trace.confidence import Confidence
from openprogram.trace.decision_trace import DecisionTrace
from openprogram.trace.records import Repair

MESSAGES = ["please refund me", "escalate this", "just saying hi", "garbage in", "typo here",
            "crash it", "outage now", "hé ünï \ud800 \"q\"\n"]


class Odd:
    def __repr__(self):
        return "<odd ü>"


def finished_rows(monkeypatch, tmp_path, rows, **kw):
    """(i, extra, row) of every row an evaluate run finished, in input order."""
    got = []
    take = ev._Sink.__call__

    def keep(self, i, extra, row):
        got.append((i, extra, row))
        take(self, i, extra, row)
    with monkeypatch.context() as m:
        m.setattr(ev._Sink, "__call__", keep)
        decision.evaluate(PROMPT, OPTIONS, rows, runtime=ScriptedRuntime(rule=rule),
                          journal=tmp_path / "capture.jsonl", progress=False, concurrency=1,
                          **kw)
    return sorted(got, key=lambda g: g[0])


def twin(trace, **changes):
    copy = DecisionTrace(**{f.name: getattr(trace, f.name) for f in dataclasses.fields(trace)})
    for k, v in changes.items():
        setattr(copy, k, v)
    return copy


def row_of(status, trace, result=None, error=None, duration_s=0.25):
    row = Row()
    row.status, row.trace, row.result, row.error, row.duration_s = (status, trace, result, error,
                                                                   duration_s)
    return row


def shapes(monkeypatch, tmp_path):
    """Real finished rows of every status, and rows whose values the common case never holds."""
    rows = [{"message": m, "label": lab, "n": k} for k, (m, lab) in enumerate(zip(
        MESSAGES, ["refund", "escalate", "ignore", None, "ignore", "refund", None, "ignore"]))]
    got = finished_rows(monkeypatch, tmp_path, rows, expected="label")
    assert {g[2].status for g in got} == {"resolved", "failed"}
    assert any(len(g[2].trace.attempts) > 1 for g in got)       # re-asked
    # the picked function raised: a failed row that keeps its pick
    assert any(g[2].error is not None and ev.summarize(g[2])[1] == "refund" for g in got)
    out = list(got)
    i, (key, record, expected), row = got[0]
    t = row.trace
    a = t.attempts[-1]
    odd = dataclasses.replace(
        a, reply=b"bytes \xff", extracted={"call": "refund", "n": math.nan, "t": (1, 2)},
        span=(1, 2), error_span=(3, 4), key_alias="action", candidates=2,
        dropped=["extra"], injected=["ctx"], started_at=1.5, duration_s=None,
        model_call_id=None, usage={"input_tokens": 3, "w": Odd(), "f": math.inf},
        sent={"tools": [{"name": "x"}]}, tool_calls=[{"name": "x", "args": {"a": 1}}],
        finish_reason="length", raw={"response": {"id": "r", "v": [1.25, None, True]}},
        cached=True, redacted=["args.key"],
        confidence=Confidence(probs={"refund": 0.75, "ignore": 0.25}, other=0.0,
                              source="samples", n=4, pick="refund", note=None),
        low_pick="ignore", cascade=[{"runtime": "small", "answered": True,
                                     "usage": {"input_tokens": 7, "output_tokens": 1}},
                                    {"runtime": "big", "answered": False}],
        repairs=[Repair("trailing_comma", "call", ",}", "}", (1, 3))], is_last=True,
        prompt="no menu at the end", args={"amount": Decimal("1.5"), "k": (1, [2.5, {}])})
    plain = dataclasses.replace(a, args={"n": -3, "f": 2.0, "b": False, "z": None, "s": "ü",
                                         "l": [1, "x", [True]], "e": {}, "big": 10 ** 30},
                                extracted={"call": "refund", "args": {}}, cached=True)
    cyclic = {"a": []}
    cyclic["a"].append(cyclic)   # json_ready writes the cycle as a tagged repr
    odd_record = {"message": "m", "nan": math.nan, "t": (1, 2), 3: "int key",
                  "d": Decimal("2"), "s": "\ud800"}
    for record2, status, trace, result, error in (
            (record, "resolved", twin(t, attempts=[a, odd]), {"x": [1, Odd()]}, None),
            (odd_record, "resolved", twin(t, attempts=[plain]), "ü \ud800" * 300, None),
            (record, "resolved", twin(t, attempts=[plain], result=(1, 2)), (1, 2), None),
            (record, "resolved", twin(t, attempts=[plain]), 10 ** 5000, None),
            (record, "resolved", twin(t, attempts=[plain]), [[[[math.inf]]]], None),
            (record, "resolved", twin(t, attempts=[plain]), cyclic, None),
            (record, "resolved", twin(t, attempts=[plain]), {"ключ": [1.5, None]}, None),
            (record, "resolved", twin(t, attempts=[plain]), {"ключ": 1, "\ud800k": 2}, None),
            *[(record, "resolved", twin(t, attempts=[plain]), "x" * n, None)
              for n in (100, 250, 497, 498, 499, 900)],   # reprs about result_repr's limit
            (record, "failed", twin(t, attempts=[odd], status="failed",
                                    error=ValueError("boom ü \ud800")), None,
             ValueError("boom ü \ud800")),
            (record, "cancelled", twin(t, attempts=[], status="running"), None,
             KeyboardInterrupt()),
            (record, "resolved", twin(t, id=10 ** 30, duration_s=math.nan,
                                      attempts=[dataclasses.replace(a, started_at=math.nan,
                                                                    number=True)]),
             Odd(), None)):
        out.append((len(out) + 100, (key, record2, "refund"),
                    row_of(status, trace, result, error)))
    return out


def journaled(tmp_path, name, finished, fast):
    """The row lines a journal holds after `finished` went through an evaluation's sink, the
    one-pass way (`fast`) or only the general way."""
    journal = ev.Journal(tmp_path / name, {
        "section": "evaluate", "prompt": PROMPT, "menu": finished[0][2].trace.menu,
        "mode": "menu", "runtime": "r", "repair": "safe", "options": [], "total": None,
        "expected": True, "concurrency": 1, "confidence": None})
    sink = ev._Sink(["refund", "escalate", "ignore"], None, journal)
    with pytest.MonkeyPatch.context() as m:
        if not fast:
            m.setattr(ev, "row_text", lambda *a: None)
        for i, extra, row in finished:
            sink(i, extra, row)
    journal.close()
    return [line for line in (tmp_path / name).read_bytes().splitlines()
            if b'"kind":"row"' in line]


def test_a_row_written_in_one_pass_is_the_general_paths_line(monkeypatch, tmp_path):
    finished = shapes(monkeypatch, tmp_path)
    assert len(finished) >= 25
    fast = journaled(tmp_path, "fast.jsonl", finished, True)
    general = journaled(tmp_path, "general.jsonl", finished, False)
    assert len(fast) == len(general) == len(finished)
    for f, g in zip(fast, general):
        assert f == g
    # the one-pass way writes odd values too (through json_ready and the encoder inside it);
    # only a result whose repr raises (an int too long to write) goes the general way
    menu = finished[0][2].trace.menu
    general = [r.result for i, e, r in finished
               if journal_text.row_text("evaluate", i, e[0], r, ev.summarize(r), e[1], e[2],
                                        ev.cascade_of(r.trace), menu) is None]
    assert general == [10 ** 5000]


def test_what_the_one_pass_way_does_not_expect_goes_the_general_way(monkeypatch, tmp_path):
    finished = shapes(monkeypatch, tmp_path)
    i, extra, row = finished[0]
    menu = row.trace.menu

    def text(r):
        return journal_text.row_text("evaluate", i, extra[0], r, ev.summarize(r), extra[1],
                                     extra[2], ev.cascade_of(r.trace), menu)

    class Mine(DecisionTrace):
        pass

    sub = Mine(**{f.name: getattr(row.trace, f.name) for f in dataclasses.fields(row.trace)})
    assert text(row_of("resolved", sub, row.result)) is None
    cyclic = {"a": []}
    cyclic["a"].append(cyclic)
    usage = twin(row.trace, attempts=[dataclasses.replace(row.trace.attempts[-1], usage=cyclic)])
    assert text(row_of("resolved", usage, row.result)) is None   # the encoder refuses a cycle
    assert text(row) is not None   # and the next row is written in one pass again


def test_while_a_key_is_held_the_sink_writes_the_general_way_masked(monkeypatch, tmp_path):
    """The one-pass way builds no JSON data for secrets.scrub to walk: while any key is
    alive, a row goes the general way and the key is masked as in every line."""
    from openprogram.base.secrets import Secret
    key = "sk-Zq7Xw3Vt9Kp2Rm5Yb8Hc4Nf6"
    finished = shapes(monkeypatch, tmp_path)[:3]
    i, (k, record, expected), row = finished[1]
    finished[1] = (i, (k, {**record, "message": f"my key is {key}"}, expected), row)
    calls = []
    real = ev.row_text
    monkeypatch.setattr(ev, "row_text", lambda *a: calls.append(a) or real(*a))
    held = Secret(key)
    lines = journaled(tmp_path, "held.jsonl", finished, True)
    assert calls == []
    assert all(key.encode() not in line for line in lines)
    assert b"my key is " in lines[1]
    del held


def test_a_resumed_journal_writes_its_new_rows_in_one_pass(monkeypatch, tmp_path):
    """After a resume the shared line is the one read from the file (equal to the rows'
    menu and option table, not the same objects): the new rows are written in one pass all
    the same, against that line, and the journal reads back whole."""
    # No secret alive here: one another test of this process left alive (the trace history
    # keeps a failed decision's error, its traceback's frames and the runtime with its key)
    # sends every row the general way, which the test above covers.
    monkeypatch.setattr(secrets, "_live", weakref.WeakSet())
    rows = [{"message": m} for m in MESSAGES[:6]]
    path = tmp_path / "resumed.jsonl"
    decision.evaluate(PROMPT, OPTIONS, rows[:3], runtime=ScriptedRuntime(rule=rule),
                      journal=path, progress=False, concurrency=1)
    calls = []
    real = ev.row_text
    monkeypatch.setattr(ev, "row_text", lambda *a: calls.append(a) or real(*a))
    rt = ScriptedRuntime(rule=rule)
    again = decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, journal=path, progress=False,
                              concurrency=1)
    assert len(calls) == 3 and all(c[1] >= 3 for c in calls)
    assert path.read_text().count('"kind":"shared"') == 1
    back = ev.EvaluationResult.from_journal(path)
    assert back.picks == again.picks and back.statuses == again.statuses
    def read(result):   # a trace read back gets an id of its own
        return [{**t.to_dict(), "id": None} for t in result.traces[3:]]
    assert read(back) == read(again) \
        and [t["status"] for t in read(back)] == ["failed", "resolved", "failed"]
