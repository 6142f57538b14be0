"""evaluate(): one row per input, the summaries, the inputs it accepts and the errors it raises
before any model call."""

import pandas as pd
import pytest
from evalhelp import OPTIONS, PROMPT, rule

from openprogram import DecisionTrace, compare, decision
from openprogram.evaluation.evaluate import EvaluationResult
from openprogram.runtimes import ScriptedRuntime


def run(inputs, **kw):
    # A random latency makes rows finish out of input order, so a row mix-up would show.
    rt = kw.pop("runtime", None) or ScriptedRuntime(rule=rule, latency=(0.0, 0.01), seed=7)
    kw.setdefault("progress", False)
    kw.setdefault("concurrency", 4)
    return decision.evaluate(PROMPT, OPTIONS, inputs, runtime=rt, **kw), rt


def test_one_row_per_input_in_input_order(frame):
    res, rt = run(frame)
    assert isinstance(res, EvaluationResult) and len(res) == 6 and not res.interrupted
    df = res.to_frame()
    assert list(df.index) == list(range(6)) and df.index.name == "input"
    assert list(df.columns) == ["message", "label", "chosen", "args", "result", "error",
                                "attempts", "error_kinds", "duration_s", "tokens_in",
                                "tokens_out", "status", "cached"]
    assert list(df["message"]) == list(frame["message"])
    assert list(df["status"]) == ["resolved"] * 4 + ["failed", "resolved"]
    assert df["chosen"].tolist()[:4] == ["refund", "escalate", "ignore", "refund"]
    assert pd.isna(df.loc[4, "chosen"]) and df.loc[5, "chosen"] == "ignore"
    assert df.loc[0, "args"] == {"amount": 5} and df.loc[1, "args"] == {"team": "tech"}
    assert df.loc[0, "result"] == "refunded 5"          # the objects, not their reprs
    assert df.loc[1, "result"] == {"decision": "escalate", "team": "tech"}
    assert res.results[:3] == ["refunded 5", {"decision": "escalate", "team": "tech"}, "IGNORED"]
    assert df["attempts"].tolist() == [1, 1, 1, 1, 2, 2]
    assert df.loc[4, "error_kinds"] == ["no_action", "no_action"]
    assert df.loc[5, "error_kinds"] == ["unknown_call"]
    assert df.loc[4, "error"].startswith("DecisionError: no usable decision after 2 attempt(s)")
    assert df["error"].drop(index=4).isna().all()
    assert (df["duration_s"] > 0).all()
    assert len(rt.calls) == 8  # six first calls, two re-asks


def test_each_row_keeps_its_own_trace_and_tokens(frame):
    res, _ = run(frame, concurrency=6)
    df = res.to_frame()
    for i, trace in enumerate(res.traces):
        assert isinstance(trace, DecisionTrace)
        assert trace.prompt == PROMPT.format(message=frame["message"][i])
        assert df.loc[i, "tokens_in"] == trace.usage()["input_tokens"] > 0
        assert df.loc[i, "tokens_out"] == trace.usage()["output_tokens"]
    assert res.traces[4].status == "failed" and res.traces[5].status == "resolved"
    assert len({t.id for t in res.traces}) == 6


def test_summaries(frame):
    res, _ = run(frame, expected="label")
    picks = res.pick_counts
    assert picks.index.tolist() == ["refund", "escalate", "ignore", "(no pick)"]
    assert picks["count"].tolist() == [2, 1, 2, 1]
    assert picks["share"].tolist() == pytest.approx([2 / 6, 1 / 6, 2 / 6, 1 / 6])
    assert res.retry_rate == pytest.approx(2 / 6)
    assert res.failure_rate == pytest.approx(1 / 6)
    assert res.error_counts.to_dict() == {"no_action": 2, "unknown_call": 1}
    assert res.accuracy == pytest.approx(4 / 6)
    conf = res.confusion
    assert conf.index.tolist() == ["refund", "escalate", "ignore"]
    assert conf.columns.tolist() == ["refund", "escalate", "ignore", "(no pick)"]
    assert conf.loc["refund"].tolist() == [1, 0, 0, 0]
    assert conf.loc["escalate"].tolist() == [1, 1, 0, 0]
    assert conf.loc["ignore"].tolist() == [0, 0, 2, 1]
    df = res.to_frame()
    assert df["expected"].tolist() == frame["label"].tolist()
    assert df["correct"].tolist() == [True, True, True, False, False, True]
    s = res.summary
    assert (s["inputs"], s["resolved"], s["failed"], s["cancelled"]) == (6, 5, 1, 0)
    assert s["accuracy"] == pytest.approx(4 / 6)
    assert s["tokens_in"] == df["tokens_in"].sum()


def test_options_never_picked_count_zero_and_no_expected_means_no_accuracy():
    res, _ = run([{"message": "refund"}, {"message": "refund please"}])
    assert res.pick_counts["count"].to_dict() == {"refund": 2, "escalate": 0, "ignore": 0}
    assert res.error_counts.empty
    assert res.retry_rate == 0 and res.failure_rate == 0
    assert res.accuracy is None and res.confusion is None
    assert "expected" not in res.to_frame().columns and "accuracy" not in res.summary


def test_expected_as_a_list_with_unknowns():
    res, _ = run([{"message": "refund"}, {"message": "hi"}, {"message": "escalate"}],
                 expected=["refund", None, "ignore"])
    assert res.to_frame()["correct"].tolist() == [True, None, False]
    assert res.accuracy == 0.5  # rows with no expected pick are not scored


def test_list_of_dicts_gives_the_same_rows_as_a_dataframe(frame):
    from_frame, _ = run(frame)
    from_list, _ = run(frame.to_dict("records"))
    cols = ["message", "label", "chosen", "args", "result", "attempts", "status"]
    pd.testing.assert_frame_equal(from_frame.to_frame()[cols], from_list.to_frame()[cols])


def test_list_rows_may_have_different_columns():
    res, _ = run([{"message": "refund", "x": 1}, {"message": "hi", "y": 2}])
    df = res.to_frame()
    assert df.loc[0, "x"] == 1 and pd.isna(df.loc[1, "x"]) and df.loc[1, "y"] == 2


def test_an_input_column_named_like_a_result_column_is_prefixed():
    res, _ = run([{"message": "refund", "status": "vip"}])
    df = res.to_frame()
    assert df.loc[0, "input_status"] == "vip" and df.loc[0, "status"] == "resolved"


def test_a_missing_column_names_the_column_and_the_row_before_any_call():
    rt = ScriptedRuntime(rule=rule)
    rows = [{"message": "refund"}, {"text": "hi"}]
    with pytest.raises(ValueError, match=r"\{message\}.*row 1 has no column 'message'.*'text'"):
        decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, progress=False)
    assert rt.calls == []


@pytest.mark.parametrize("template", ["Route {}", "Route {0}", "Route {message", "{message!z}"])
def test_a_malformed_template_is_a_clear_error(template):
    rt = ScriptedRuntime(rule=rule)
    with pytest.raises(ValueError, match="prompt template could not be filled from input row 0"):
        decision.evaluate(template, OPTIONS, [{"message": "x"}], runtime=rt, progress=False)
    assert rt.calls == []


def test_literal_braces_are_escaped_by_doubling():
    rt = ScriptedRuntime(rule=lambda p: '{"call": "ignore"}')
    res = decision.evaluate('Reply {{"call": ...}} about {m}', OPTIONS, [{"m": "x"}],
                            runtime=rt, progress=False)
    assert res.traces[0].prompt == 'Reply {"call": ...} about x'


@pytest.mark.parametrize("inputs, error, match", [
    ("refund me", TypeError, "DataFrame, a list of dicts, or an iterable of dicts"),
    ({"message": "x"}, TypeError, "DataFrame, a list of dicts, or an iterable of dicts"),
    (pd.Series(["x"]), TypeError, r"series.to_frame\(\)"),
    ([{"message": "x"}, "y"], TypeError, r"inputs\[1\] is a str"),
    ([], ValueError, "inputs is empty"),
    (pd.DataFrame([[1, 2]], columns=["message", "message"]), ValueError, "duplicate columns"),
])
def test_bad_inputs(inputs, error, match):
    rt = ScriptedRuntime(rule=rule)
    with pytest.raises(error, match=match):
        decision.evaluate(PROMPT, OPTIONS, inputs, runtime=rt, progress=False)
    assert rt.calls == []


@pytest.mark.parametrize("expected, match", [
    ("lable", r"expected='lable' is not a column.*'message', 'label'"),
    (["refund"], "expected has 1 items but there are 2 inputs"),
    (["refund", "refnud"], r"expected names 'refnud' are not options.*refund, escalate, ignore"),
])
def test_bad_expected(expected, match):
    rt = ScriptedRuntime(rule=rule)
    rows = [{"message": "a", "label": "refund"}, {"message": "b", "label": "ignore"}]
    with pytest.raises(ValueError, match=match):
        decision.evaluate(PROMPT, OPTIONS, rows, runtime=rt, expected=expected, progress=False)
    assert rt.calls == []


@pytest.mark.parametrize("kw, match", [
    ({"concurrency": 0}, "concurrency must be a whole number >= 1"),
    ({"concurrency": True}, "concurrency must be a whole number >= 1"),
    ({"max_retries": -1}, "max_retries must be a whole number >= 0"),
    ({"on_interrupt": "ignore"}, "on_interrupt must be 'return'"),
])
def test_bad_arguments(kw, match):
    rt = ScriptedRuntime(rule=rule)
    with pytest.raises(ValueError, match=match):
        decision.evaluate(PROMPT, OPTIONS, [{"message": "x"}], runtime=rt, progress=False, **kw)
    assert rt.calls == []


def test_without_a_runtime_it_says_how_to_fix_it():
    with pytest.raises(RuntimeError, match="evaluate has no Runtime.*runtime="):
        decision.evaluate(PROMPT, OPTIONS, [{"message": "x"}], progress=False)


def test_a_bad_option_set_fails_before_any_call():
    rt = ScriptedRuntime(rule=rule)
    with pytest.raises(ValueError, match="option set is empty"):
        decision.evaluate(PROMPT, {}, [{"message": "x"}], runtime=rt, progress=False)
    assert rt.calls == []


def test_max_retries_zero_turns_reasks_off(frame):
    res, rt = run(frame, max_retries=0)
    assert res.to_frame()["attempts"].tolist() == [1] * 6
    assert res.statuses == ["resolved"] * 4 + ["failed", "failed"]
    assert len(rt.calls) == 6


def test_context_reaches_hidden_parameters():
    def tag(label: str, user: str) -> str:
        return f"{label} for {user}"
    tag.input_meta = {"user": {"hidden": True}}
    rt = ScriptedRuntime(rule=lambda p: '{"call": "tag", "args": {"label": "x"}}')
    res = decision.evaluate("{m}", [tag], [{"m": "a"}, {"m": "b"}], runtime=rt,
                            context={"user": "ada"}, progress=False)
    assert res.results == ["x for ada", "x for ada"]


def test_progress_bar_counts_every_decision(capsys):
    run([{"message": "refund"}, {"message": "garbage"}, {"message": "hi"}], progress=True)
    err = capsys.readouterr().err
    assert "evaluate" in err and "3/3" in err and "failed=1" in err


def test_panel_uses_the_registered_trace_view(frame):
    import openprogram
    from openprogram.trace import decision_trace as trace_mod
    res, _ = run(frame)

    class DecisionPanel:
        def __init__(self, trace):
            self.trace = trace
    before = trace_mod._trace_view
    openprogram.register_trace_view(DecisionPanel)
    try:
        panel = res.panel(4)
        assert isinstance(panel, DecisionPanel) and panel.trace is res.traces[4]
        assert res.panel(-1).trace is res.traces[5]
    finally:
        openprogram.register_trace_view(before)


def test_panel_is_the_notebook_layers_decision_panel(frame):
    from openprogram.widgets.panel import DecisionPanel
    res, _ = run(frame)
    panel = res.panel(4)
    assert isinstance(panel, DecisionPanel) and panel.trace is res.traces[4]


def test_panel_falls_back_to_the_trace(frame, monkeypatch):
    from openprogram.trace import decision_trace as trace_mod
    res, _ = run(frame)
    monkeypatch.setattr(trace_mod, "_trace_view", None)  # no notebook layer loaded
    assert res.panel(1) is res.traces[1]
    with pytest.raises(IndexError, match="row 6 is out of range: there are 6 inputs"):
        res.panel(6)
    with pytest.raises(TypeError, match="input position"):
        res.panel("1")


def test_html_view_has_the_summary_tables_and_escapes_names():
    rt = ScriptedRuntime(rule=lambda p: '{"call": "<b>bold</b>"}', name="<i>rt</i>")
    res = decision.evaluate("{m}", {"<b>bold</b>": "B", "plain": "P"}, [{"m": "x"}],
                            runtime=rt, expected=["plain"], progress=False)
    page = res._repr_html_()
    assert "<b>bold</b>" not in page and "<i>rt</i>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "&lt;i&gt;rt&lt;/i&gt;" in page
    for caption in ("summary", "picks", "confusion"):
        assert f"<b>{caption}" in page
    assert "1 inputs: 1 resolved, 0 failed" in page and "accuracy 0.0%" in page
    assert "<td>0.0%</td>" in page  # rates read as percentages in the summary table
    assert repr(res).startswith("<EvaluationResult on '<i>rt</i>': 1 inputs")


def test_plot_draws_one_bar_per_option(frame):
    res, _ = run(frame)
    ax = res.plot()
    assert [t.get_text() for t in ax.get_xticklabels()] == res.pick_counts.index.tolist()
    assert [p.get_height() for p in ax.patches] == res.pick_counts["count"].tolist()
    second = res.plot()  # a new figure each time, not bars stacked on the first plot
    assert second is not ax and len(second.patches) == len(ax.patches)
    import matplotlib.pyplot as plt
    _, given = plt.subplots()
    assert res.plot(ax=given) is given


def test_evaluate_and_compare_are_public():
    import openprogram
    assert openprogram.compare is compare and decision.compare is compare
    assert "compare" in openprogram.__all__


def test_to_frame_holds_each_result_as_the_object_for_every_option_kind():
    """df["result"] holds what the decision returned — a function's return value, the value
    itself, the filled schema, the user's class instance — so it can be compared and used."""
    from dataclasses import dataclass

    from openprogram import decision
    from openprogram.runtimes import ScriptedRuntime

    @dataclass
    class Ticket:
        """Open a ticket."""
        title: str

    def refund(amount: int) -> dict:
        """Refund."""
        return {"refunded": amount}

    options = {"refund": refund, "keep": "KEEP",
               "escalate": ("Hand over.", {"team": str}), "Ticket": Ticket}
    replies = {"a": '{"call": "refund", "args": {"amount": 3}}', "b": '{"call": "keep"}',
               "c": '{"call": "escalate", "args": {"team": "ops"}}',
               "d": '{"call": "Ticket", "args": {"title": "broken"}}'}
    rt = ScriptedRuntime([lambda p: replies[p.split("row ")[1][0]]] * 4)
    res = decision.evaluate("row {k}", options, [{"k": k} for k in "abcd"], runtime=rt,
                            concurrency=1, progress=False)
    results = res.to_frame()["result"].tolist()
    assert results == [{"refunded": 3}, "KEEP", {"decision": "escalate", "team": "ops"},
                       Ticket(title="broken")]
    assert isinstance(results[3], Ticket) and (res.to_frame()["result"] == "KEEP").sum() == 1


def test_per_input_accessors_are_lists_and_counts_are_tables(frame):
    """One way: what has one item per input is a list in input order (`.picks`, `.results`,
    `.statuses`, `.errors`, `.traces`, `.expected`); what counts over inputs is pandas
    (`.pick_counts`, `.error_counts`, `.summary`). The older names say where things went."""
    import warnings
    res, _ = run(frame, expected="label")
    for name in ("picks", "results", "statuses", "errors", "traces", "expected"):
        got = getattr(res, name)
        assert isinstance(got, list) and len(got) == len(frame), name
    assert res.picks == ["refund", "escalate", "ignore", "refund", None, "ignore"]
    assert res.pick_counts["count"].sum() == len(frame)
    with pytest.raises(KeyError, match=r"use \.pick_counts\['count'\]"):
        res.picks["count"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert res.picks_list == res.picks
    assert caught and caught[0].category is DeprecationWarning
