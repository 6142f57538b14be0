"""decision.revalidate: recorded replies re-checked against an edited option set, offline."""
from __future__ import annotations

import pytest

from openprogram import Pick, Retry, decision
from openprogram.runtimes import ScriptedRuntime

runs = []


def refund(amount: int) -> str:
    runs.append(amount)
    return f"refunded {amount}"


OPTIONS = {"refund": refund, "ignore": "IGNORED"}
REPLIES = {
    "refund 5": '{"call": "refund", "args": {"amount": 5}}',
    "refund 500": '{"call": "refund", "args": {"amount": 500}}',
    "spam": '{"call": "ignore"}',
    "half": '{"call": "refund", "args": {"amount": 2.5}}',
}


@pytest.fixture
def recorded():
    rt = ScriptedRuntime(rule=lambda prompt: REPLIES[prompt.split("\n")[0][len("Msg: "):]])
    res = decision.evaluate("Msg: {m}", OPTIONS, [{"m": m} for m in REPLIES], runtime=rt,
                            progress=False, max_retries=0, concurrency=1)
    runs.clear()
    return res, rt


def outcome(rv):
    return [(r.before, r.after, r.changed) for r in rv.rows]


def test_nothing_changed_nothing_runs(recorded):
    res, rt = recorded
    calls = len(rt.calls)
    rv = decision.revalidate(res, OPTIONS)
    assert outcome(rv) == [("refund", "refund", False), ("refund", "refund", False),
                           ("ignore", "ignore", False), ("type_mismatch", "type_mismatch", False)]
    assert runs == [] and len(rt.calls) == calls  # no function ran, no model was called
    assert rv.summary.to_dict() == {"decisions": 4, "better": 0, "worse": 0, "other_pick": 0,
                          "other_error": 0, "same": 4}


def test_a_renamed_option(recorded):
    res, _ = recorded
    rv = decision.revalidate(res, {"give_back": refund, "ignore": "IGNORED"})
    assert [r.after for r in rv.rows] == ["unknown_call", "unknown_call", "ignore",
                                          "unknown_call"]
    assert rv.rows[0].error_path == "call" and "'refund' is not an option" in \
        rv.rows[0].error_message
    assert rv.summary["worse"] == 2 and runs == []


def test_a_retyped_parameter(recorded):
    res, _ = recorded

    def refund_float(amount: float) -> str:
        runs.append(amount)
        return "x"
    rv = decision.revalidate(res, {"refund": refund_float, "ignore": "IGNORED"})
    assert outcome(rv)[3] == ("type_mismatch", "refund", True) and rv.summary["better"] == 1
    assert rv.rows[3].after_ok and runs == []


def test_a_new_required_parameter(recorded):
    res, _ = recorded

    def refund_reason(amount: int, reason: str) -> str:
        return "x"
    rv = decision.revalidate(res, {"refund": refund_reason, "ignore": "IGNORED"})
    assert [r.after for r in rv.rows] == ["missing_required", "missing_required", "ignore",
                                          "type_mismatch"]
    assert rv.rows[0].error_path == "args.reason"
    assert rv.rows[0].note.startswith("every recorded reply fails now")


def test_a_new_rule(recorded):
    res, _ = recorded

    def small(pick: Pick):
        if pick.call == "refund" and pick.args["amount"] > 100:
            raise Retry("too large")
    rv = decision.revalidate(res, OPTIONS, validate=small)
    assert outcome(rv)[1] == ("refund", "rejected", True)
    assert rv.rows[1].error_message == "too large" and rv.summary["worse"] == 1
    frame = rv.to_frame()
    assert list(frame["changed"]) == [False, True, False, False]


def test_a_later_attempt_that_now_passes_first_is_marked():
    rt = ScriptedRuntime(['{"call": "refund", "args": {"amount": "7"}}',
                          '{"call": "refund", "args": {"amount": 7}}'])
    decision.make("Go.", OPTIONS, runtime=rt)
    trace = decision.last_trace()

    def refund_str(amount: str) -> str:
        return amount
    rv = decision.revalidate(trace, {"refund": refund_str})
    assert rv.rows[0].passing_attempt == 1
    assert rv.rows[0].note == "answered a re-ask that would no longer be sent"
    assert rv.after[0].attempts[0].ok and len(rv.after[0].attempts) == 1
    assert decision.last_trace() is trace  # a re-check is not a decision of its own


def test_tools_mode_replies_are_rechecked_as_tool_calls():
    from openprogram import ToolCall
    rt = ScriptedRuntime([ToolCall("refund", {"amount": 3})])
    decision.make("Go.", OPTIONS, runtime=rt, mode="tools")
    runs.clear()
    rv = decision.revalidate(decision.last_trace(), {"refund": refund})
    assert rv.rows[0].after == "refund" and rv.after[0].mode == "tools" and runs == []


def test_revalidate_rejects_what_it_cannot_read():
    with pytest.raises(TypeError, match="evaluation result, a DecisionTrace or a list"):
        decision.revalidate({"not": "a trace"}, OPTIONS)


def test_revalidate_a_cassette_runs_no_function_and_no_model(tmp_path):
    from openprogram.runtimes import RecordingRuntime
    path = tmp_path / "run.json"
    inner = ScriptedRuntime(['{"call": "refund", "args": {"amount": "5"}}',
                             '{"call": "refund", "args": {"amount": 5}}', '{"call": "ignore"}'])
    rec = RecordingRuntime(inner, path)
    decision.make("Msg: refund 5", OPTIONS, runtime=rec)
    decision.make("Msg: spam", OPTIONS, runtime=rec)
    runs.clear()
    calls = len(inner.calls)

    def refund_str(amount: str) -> str:
        runs.append(amount)
        return amount
    rv = decision.revalidate(str(path), {"refund": refund_str, "ignore": "IGNORED"})
    assert [(r.before, r.after, r.passing_attempt) for r in rv.rows] == \
        [(None, "refund", 1), (None, "ignore", 1)]
    assert rv.rows[0].note == "answered a re-ask that would no longer be sent"
    assert rv.rows[0].input == "Msg: refund 5\n\n" + decision.render_options(OPTIONS)
    assert runs == [] and len(inner.calls) == calls


def test_a_cassette_from_before_decisions_were_recorded_is_a_clear_error(tmp_path):
    import json

    import openprogram.runtimes  # noqa: F401
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "openprogram-cassette", "version": 1, "calls": []}))
    with pytest.raises(ValueError, match="re-record it with RecordingRuntime"):
        decision.revalidate(str(path), OPTIONS)
