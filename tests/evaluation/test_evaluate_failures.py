"""Failure isolation: one bad input (its picked function raises, its replies are never usable,
its model call fails) is recorded on its own row and never stops the others."""
import pandas as pd
import pytest
from evalhelp import OPTIONS, PROMPT, rule

from openprogram import DecisionError, decision
from openprogram.runtimes import ScriptedRuntime

ROWS = [{"message": m} for m in
        ["refund one", "crash the refund", "escalate two", "garbage reply", "outage now", "hi"]]


@pytest.fixture
def res():
    rt = ScriptedRuntime(rule=rule, latency=(0.0, 0.005), seed=3)
    return decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, concurrency=3, progress=False)


def test_the_healthy_rows_all_resolve(res):
    assert res.statuses == ["resolved", "failed", "resolved", "failed", "failed", "resolved"]
    assert res.results[0] == "refunded 5" and res.results[5] == "IGNORED"
    assert res.results[2] == {"decision": "escalate", "team": "tech"}


def test_a_picked_function_that_raises(res):
    df = res.to_frame()
    err = res.errors[1]
    assert isinstance(err, ZeroDivisionError) and str(err) == "negative refund"
    # The model's pick was valid: it is kept, so pick statistics stay honest.
    assert df.loc[1, "chosen"] == "refund" and df.loc[1, "args"] == {"amount": -1}
    assert df.loc[1, "error"] == "ZeroDivisionError: negative refund"
    assert df.loc[1, "attempts"] == 1 and df.loc[1, "error_kinds"] == []
    assert pd.isna(df.loc[1, "result"])
    assert res.traces[1].status == "failed" and res.traces[1].error is err


def test_replies_that_are_never_usable(res):
    df = res.to_frame()
    err = res.errors[3]
    assert isinstance(err, DecisionError) and err.kind == "no_action"
    assert err.trace is res.traces[3]
    assert pd.isna(df.loc[3, "chosen"]) and df.loc[3, "args"] is None
    assert df.loc[3, "error_kinds"] == ["no_action", "no_action"]


def test_a_model_error(res):
    df = res.to_frame()
    err = res.errors[4]
    assert isinstance(err, DecisionError) and err.kind == "model_error"
    assert "the model service is down" in df.loc[4, "error"]
    assert df.loc[4, "attempts"] == 1 and df.loc[4, "error_kinds"] == ["model_error"]


def test_failures_show_in_the_summaries(res):
    assert res.failure_rate == pytest.approx(3 / 6)
    assert res.retry_rate == pytest.approx(1 / 6)  # only the garbage row was re-asked
    assert res.error_counts.to_dict() == {"no_action": 2, "model_error": 1,
                                          "raised ZeroDivisionError": 1}
    assert res.pick_counts["count"].to_dict() == {"refund": 2, "escalate": 1, "ignore": 1,
                                            "(no pick)": 2}


def test_a_runtime_that_raises_anything_is_isolated_too():
    def flaky(prompt):
        if "boom" in prompt:
            raise OSError("connection reset")
        return '{"call": "ignore"}'
    rt = ScriptedRuntime(rule=flaky)
    res = decision.evaluate("{m}", OPTIONS, [{"m": "boom"}, {"m": "fine"}], runtime=rt,
                            progress=False)
    assert res.statuses == ["failed", "resolved"]
    assert res.errors[0].kind == "model_error" and "OSError: connection reset" in str(res.errors[0])


def test_every_row_failing_still_returns_a_result():
    rt = ScriptedRuntime(rule=lambda p: "no json at all")
    res = decision.evaluate("{m}", OPTIONS, [{"m": 1}, {"m": 2}], runtime=rt, progress=False)
    assert res.failure_rate == 1 and res.retry_rate == 1
    assert res.pick_counts["count"].to_dict() == {"refund": 0, "escalate": 0, "ignore": 0,
                                            "(no pick)": 2}
