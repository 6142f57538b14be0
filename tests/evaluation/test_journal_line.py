"""A journaled row's trace is written straight from its records (`journal.trace_text`): the line
must be the text the general path writes — `DecisionTrace.to_dict(json_ready)`, packed
against the section's menu, through the journal's encoder — byte for byte, for traces of every
shape, and a trace it does not expect goes the general way."""
import dataclasses
import json
import math

import pytest
from evalhelp import OPTIONS, PROMPT

from openprogram import decision
from openprogram.base.json_form import json_ready
from openprogram.evaluation import journal
from openprogram.evaluation.journal import Journal
from openprogram.runtimes import ScriptedRuntime
from openprogram.trace.confidence import Confidence
from openprogram.trace.decision_trace import DecisionTrace, observe
from openprogram.trace.records import Repair, ToolRound


def traces_of(replies, **kw):
    """The traces of decisions answered by `replies` in turn (failures included)."""
    got = []
    rt = ScriptedRuntime(replies=list(replies))
    with observe(lambda e: got.append(e.trace), kinds=("decision_started",)):
        for _ in range(len(replies)):
            try:
                decision.make(PROMPT.format(message="hé \ud800 \"q\"\n"), OPTIONS, runtime=rt,
                              **kw)
            except Exception:
                pass
            if len(rt.calls) >= len(replies):
                break
    return got


class Odd:
    def __repr__(self):
        return "<odd ü>"


def shapes():
    """Real traces (resolved, re-asked, failed, repaired) and records with every field set to
    something the common case never holds."""
    base = traces_of(['{"call": "refund", "args": {"amount": 3}}',
                      'no pick here', '{"call": "ignore"}',
                      '{"call": "nope"}', '{"call": "nope"}',
                      '```json\n{"call": "escalate", "args": {"team": "tech"}}\n```'])
    base += traces_of(["{'call': 'ignore',}"], repair="menu")
    out = list(base)
    t = base[0]
    a = t.attempts[-1]
    odd = dataclasses.replace(
        a, reply=b"bytes \xff", extracted={"call": "refund", "n": math.nan, "t": (1, 2)},
        span=(1, 2), error_span=(3, 4), key_alias="action", candidates=2,
        error_kind="bad_args", error_message="bad \ud800 ü", error_path="args.x",
        dropped=["extra"], injected=["ctx"], started_at=1.5, duration_s=None,
        model_call_id=None, usage={"input_tokens": 3, "weird": Odd(), "f": math.inf},
        sent={"tools": [{"name": "x"}]}, tool_calls=[{"name": "x", "args": {"a": 1}}],
        finish_reason="length", raw={"response": {"id": "r", "v": [1.25, None, True]}},
        cached=True, redacted=["args.key"],
        confidence=Confidence(probs={"refund": 0.75, "ignore": 0.25}, other=0.0,
                              source="samples", n=4, pick="refund", note=None),
        low_pick="ignore", cascade=[{"runtime": "a", "pick": "x", "p_pick": 0.5}],
        repairs=[Repair("trailing_comma", "call", ",}", "}", (1, 3))], is_last=True,
        prompt="no menu at the end")
    for changes in (
            {"attempts": [a, odd]},
            {"attempts": [odd], "status": "failed", "error": ValueError("boom ü \ud800"),
             "result": None},
            {"result": Odd(), "tool_rounds": [ToolRound(1, "lookup", {"q": "x"}, {"r": 1})],
             "shortlist": {"by": "bm25", "k": 2, "ranking": [["refund", 1.5]]},
             "context_keys": ["user"], "duration_s": None, "prompt": "ünï \ud800"},
            {"result": {"nested": [[[{"deep": math.nan}]]]}, "id": 10**30},
            {"attempts": [dataclasses.replace(a, started_at=math.nan, number=True)]},
    ):
        twin = DecisionTrace(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)})
        for k, v in changes.items():
            setattr(twin, k, v)
        out.append(twin)
    return out


def written(tmp_path, name, traces, fast):
    j = Journal(tmp_path / name, {"section": "evaluate", "prompt": PROMPT, "menu": "m",
                                  "mode": "menu", "runtime": "r", "repair": "safe",
                                  "options": [], "total": None, "expected": False,
                                  "concurrency": 1, "confidence": None})
    for i, t in enumerate(traces):
        data = {"input": {"message": "x"}, "pick": t.chosen, "status": t.status}
        if fast:
            j.write_trace_row(i, f"k{i}", data, t)
        else:
            j.write_row(i, f"k{i}", {**data, "trace": t.to_dict(json_ready)})
    j.close()
    return [line for line in (tmp_path / name).read_bytes().splitlines()
            if b'"kind":"journal"' not in line]


def test_a_trace_written_from_its_records_is_the_general_paths_line(tmp_path):
    traces = shapes()
    assert len(traces) >= 10
    fast, general = (written(tmp_path, "fast.jsonl", traces, True),
                     written(tmp_path, "general.jsonl", traces, False))
    assert len(fast) == len(general) == len(traces) + 2   # section, shared, a row each
    for f, g in zip(fast, general):
        assert f == g
    # the rows after the first went the written-out way, not the general one
    assert sum(journal.trace_text(t, t.menu) is not None for t in traces) >= len(traces) - 1


def test_what_the_written_out_way_does_not_expect_goes_the_general_way(tmp_path):
    t = shapes()[0]

    class Mine(DecisionTrace):
        pass

    sub = Mine(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)})
    assert journal.trace_text(sub, t.menu) is None
    cyclic = {"a": []}
    cyclic["a"].append(cyclic)
    t2 = DecisionTrace(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)})
    t2.attempts = [dataclasses.replace(t.attempts[-1], usage=cyclic)]
    assert journal.trace_text(t2, t.menu) is None
    with pytest.raises(ValueError):   # as the general path has always refused it
        json.dumps(t2.to_dict(json_ready))
    # after a refusal, the next trace is written out again
    assert journal.trace_text(t, t.menu) is not None


def test_while_a_key_is_held_rows_go_the_general_way_and_are_masked(tmp_path):
    """The written-out way builds no JSON data for secrets.scrub to walk: while any key is
    alive the journal writes the general way, and the key is masked as in every line."""
    from openprogram.base.secrets import Secret
    key = "sk-Zq7Xw3Vt9Kp2Rm5Yb8Hc4Nf6"
    t = shapes()[0]
    t.attempts = [dataclasses.replace(t.attempts[-1], reply=f"my key is {key}")]
    held = Secret(key)
    lines = written(tmp_path, "held.jsonl", [t, t], True)
    assert all(key not in line.decode() for line in lines)
    assert lines == written(tmp_path, "general.jsonl", [t, t], False)
    del held
