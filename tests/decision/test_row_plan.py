"""`decision.plan`: the decision split in two — a row's request as data, a reply read back — is
the decision `decision.make` makes with the same replies, in every way of asking, re-asks and
failures included; and the mistakes a caller can make are named."""
from __future__ import annotations

import json
import pickle

import pytest

from openprogram import ArgumentError, ToolCall, UsageError, decision
from openprogram.runtimes import ScriptedRuntime

TEMPLATE = "Ticket: {message}\nPick the next step."


def refund(amount: float) -> str:
    """Refund an amount."""
    if amount > 100:
        raise RuntimeError("refunds over 100 need a person")
    return f"refunded {amount}"


OPTIONS = {"refund": refund, "escalate": ("ESCALATE", "hand to a person"),
           "note": ("Write a note.", {"text": str})}
ROW = {"message": "I was charged twice", "id": 4}
GOOD = '```json\n{"call": "refund", "args": {"amount": 12}}\n```'
BIG = '{"call": "refund", "args": {"amount": 500}}'
#: Fields of a trace and of its attempts that differ between two runs of the same decision.
TIMING = {"id", "started_at", "duration_s", "model_call_id", "runtime"}


def same(a, b):
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        for k in TIMING:
            d.pop(k, None)
        for att in d["attempts"]:
            for k in TIMING:
                att.pop(k, None)
    assert da == db


def made(replies, **settings):
    """decision.make on the same replies: (outcome, result or error, trace)."""
    rt = ScriptedRuntime(list(replies), usage=False)
    try:
        return "resolved", decision.make(TEMPLATE.format(**ROW), OPTIONS, runtime=rt,
                                         **settings), decision.last_trace()
    except Exception as exc:   # the decision's error, or the picked function's
        return "failed", exc, decision.last_trace()


def resolved(plan, replies):
    """The plan driven reply by reply, as a batch engine drives it."""
    request, earlier = plan.request(ROW), []
    sent = [request]
    for k, reply in enumerate(replies):
        out = plan.resolve(ROW, reply, earlier=earlier)
        if out.status != "pending":
            assert k == len(replies) - 1
            return out, sent
        json.dumps(out.request)   # JSON-ready, whatever the way of asking put in it
        request, earlier = out.request, out.replies
        sent.append(request)
    raise AssertionError("the replies ran out before the decision ended")


SCRIPTS = [
    ("menu", [GOOD]),
    ("menu", ["no pick here", GOOD]),
    ("menu", ["no pick", "still none", "nope"]),
    ("menu", ['{"call": "refund", "args": {"amount": "x"}}', '{"call": "escalate"}']),
    ("menu", [BIG]),
    ("tools", [{"tool_calls": [{"name": "refund", "args": {"amount": "lots"}, "id": "c1"}]},
               {"tool_calls": [{"name": "note", "args": {"text": "hi"}, "id": "c2"}]}]),
    ("json_schema", ['{"decision": {"call": "escalate"}}']),
    ("json_schema", ['{"decision": {"call": "nope"}}', '{"decision": {"call": "escalate"}}']),
]


@pytest.mark.parametrize("mode,replies", SCRIPTS)
def test_a_row_resolved_in_two_halves_is_the_decision_make_makes(mode, replies):
    plan = decision.plan(TEMPLATE, OPTIONS, mode=mode, max_retries=2, runtime_name="scripted",
                         model="scripted")
    out, sent = resolved(plan, replies)
    status, value, trace = made([ToolCall(r["tool_calls"][0]["name"], r["tool_calls"][0]["args"],
                                          r["tool_calls"][0]["id"]) if isinstance(r, dict) else r
                                 for r in replies], mode=mode, max_retries=2)
    assert out.status == status
    if status == "resolved":
        assert out.result == value and out.error is None
        assert out.pick == trace.attempts[-1].chosen and out.args == trace.attempts[-1].args
    else:
        assert type(out.error) is type(value) and str(out.error) == str(value)
        assert out.error_kind == getattr(value, "kind", None)
    same(out.trace, trace)
    # each request is what decision.make sent the model for that attempt
    assert [r["messages"][-1]["content"] for r in sent] == [a.prompt for a in trace.attempts]
    assert len(sent) == len(trace.attempts) == out.attempts


def test_the_first_request_carries_what_the_way_of_asking_adds():
    menu = decision.plan(TEMPLATE, OPTIONS).request(ROW)
    assert set(menu) == {"messages"}
    assert menu["messages"][0]["content"].startswith(TEMPLATE.format(**ROW))
    assert "refund(amount: float)" in menu["messages"][0]["content"]
    tools = decision.plan(TEMPLATE, OPTIONS, mode="tools").request(ROW)
    assert tools["tool_choice"] == "required"
    assert [t["name"] for t in tools["tools"]] == ["refund", "escalate", "note"]
    assert tools["messages"] == [{"role": "user", "content": TEMPLATE.format(**ROW)}]
    schema = decision.plan(TEMPLATE, OPTIONS, mode="json_schema").request(ROW)
    assert schema["response_format"]["schema"]["properties"]["decision"]
    for req in (menu, tools, schema):
        assert json.loads(json.dumps(req)) == req and pickle.loads(pickle.dumps(req)) == req


def test_a_pending_row_says_what_to_ask_next_and_keeps_its_trace_so_far():
    plan = decision.plan(TEMPLATE, OPTIONS, mode="tools", max_retries=1)
    out = plan.resolve(ROW, {"text": "", "tool_calls": [{"name": "refund", "args": {},
                                                         "id": "t1"}]})
    assert out.status == "pending" and out.pick is None and out.result is None
    assert out.trace.attempts[0].error_kind == "missing_required"
    assert len(out.trace.attempts) == 2 and out.trace.attempts[1].reply is None
    # the re-ask goes back as the tool call's result, in data
    msgs = out.request["messages"]
    assert msgs[1]["tool_calls"] == [{"name": "refund", "args": {}, "id": "t1"}]
    assert msgs[2]["role"] == "tool" and msgs[2]["tool_call_id"] == "t1"
    assert out.replies == [{"text": "", "tool_calls": [{"name": "refund", "args": {},
                                                        "id": "t1"}]}]
    done = plan.resolve(ROW, {"tool_calls": [{"name": "escalate", "args": {}}]},
                        earlier=out.replies)
    assert done.status == "resolved" and done.result == "ESCALATE" and done.attempts == 2


def test_a_failed_call_is_the_attempts_model_error_with_its_words():
    out = decision.plan(TEMPLATE, OPTIONS).resolve(ROW, {"error": "503 from the server"})
    assert out.status == "failed" and out.error_kind == "model_error"
    assert "503 from the server" in str(out.error) and out.trace.status == "failed"
    assert out.replies == [{"error": "503 from the server"}]


def test_a_plan_pickles_and_resolves_the_same_on_the_other_side():
    plan = decision.plan(TEMPLATE, OPTIONS, max_retries=1, repair="menu")
    back = pickle.loads(pickle.dumps(plan))
    a, b = plan.resolve(ROW, "no pick"), back.resolve(ROW, "no pick")
    assert a.request == b.request and a.status == b.status == "pending"
    assert back.resolve(ROW, GOOD).result == "refunded 12.0"


def test_what_a_caller_can_get_wrong_is_named():
    plan = decision.plan(TEMPLATE, OPTIONS)
    with pytest.raises(ArgumentError, match=r"\{message\}.*'id'"):
        plan.request({"id": 1})
    with pytest.raises(UsageError, match="a reply is its text"):
        plan.resolve(ROW, 42)
    with pytest.raises(UsageError, match="unknown field.*'texts'"):
        plan.resolve(ROW, {"texts": GOOD})
    with pytest.raises(UsageError, match="2 replies but the decision ended after 1"):
        plan.resolve(ROW, GOOD, earlier=[GOOD])
    with pytest.raises(UsageError, match="earlier= is the list"):
        plan.resolve(ROW, GOOD, earlier="no pick")
    with pytest.raises(UsageError, match="runtime="):
        decision.plan(TEMPLATE, OPTIONS, runtime=ScriptedRuntime([GOOD]))
    with pytest.raises(UsageError, match="timeout_s="):
        decision.plan(TEMPLATE, OPTIONS, timeout_s=3)
    with pytest.raises(ArgumentError, match="max_retries"):
        decision.plan(TEMPLATE, OPTIONS, max_retries=-1)
    with pytest.raises(ArgumentError, match="positional field"):
        decision.plan("Ticket {0}", OPTIONS)
    with pytest.raises(UsageError, match="template must be a str"):
        decision.plan(None, OPTIONS)
