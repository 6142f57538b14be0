"""compare(): two option sets, or two runtimes, over the same inputs, side by side."""
import json

import pytest
from evalhelp import OPTIONS, PROMPT, message_of, rule

from openprogram import compare
from openprogram.evaluation.evaluate import ComparisonResult
from openprogram.runtimes import ScriptedRuntime

# Version 2 adds a "money" option; the model uses it for refunds, and its reply to the "typo"
# message is right first time.
V2 = {**OPTIONS, "money": ("MONEY", "Anything about money")}


def rule_v2(prompt):
    msg = message_of(prompt)
    if "money(" in prompt and "refund" in msg:
        return json.dumps({"call": "money"})
    if "money(" in prompt and "typo" in msg:
        return json.dumps({"call": "ignore"})
    return rule(prompt)


def test_two_option_sets_side_by_side(frame):
    rt = ScriptedRuntime(rule=rule_v2, latency=(0.0, 0.005), seed=1)
    res = compare(PROMPT, {"v1": OPTIONS, "v2": V2}, frame, runtime=rt, expected="label",
                  concurrency=3, progress=False)
    assert isinstance(res, ComparisonResult) and res.variants == ["v1", "v2"]
    df = res.to_frame()
    assert list(df.columns) == ["message", "label", "v1", "v2", "expected", "agree"]
    assert df["v1"].tolist()[:4] == ["refund", "escalate", "ignore", "refund"]
    assert df["v2"].tolist()[:4] == ["money", "escalate", "ignore", "money"]
    assert df["agree"].tolist() == [False, True, True, False, True, True]
    diff = res.differences
    assert diff.index.tolist() == [0, 3]
    assert diff["message"].tolist() == ["please refund me", "refund again"]

    summary = res.summary
    assert summary.index.tolist() == ["v1", "v2"]
    assert summary.loc["v1", "retry_rate"] == pytest.approx(2 / 6)
    assert summary.loc["v2", "retry_rate"] == pytest.approx(1 / 6)
    assert summary.loc["v1", "failure_rate"] == summary.loc["v2", "failure_rate"] == \
        pytest.approx(1 / 6)
    assert summary.loc["v1", "accuracy"] == pytest.approx(4 / 6)
    assert summary.loc["v2", "accuracy"] == pytest.approx(3 / 6)

    assert res.picks == {"v1": ["refund", "escalate", "ignore", "refund", None, "ignore"],
                         "v2": ["money", "escalate", "ignore", "money", None, "ignore"]}
    picks = res.pick_counts
    assert picks.index.tolist() == ["refund", "escalate", "ignore", "money", "(no pick)"]
    assert picks["v1"].tolist() == [2, 1, 2, 0, 1]
    assert picks["v2"].tolist() == [0, 1, 2, 2, 1]
    # each variant is a full EvaluationResult
    assert res["v2"].to_frame()["chosen"].tolist()[0] == "money"
    assert res["v1"].name == "v1" and len(rt.calls) == 8 + 7


def test_two_runtimes_on_one_option_set():
    rows = [{"message": m} for m in ["refund a", "refund b", "hello"]]
    careful = ScriptedRuntime(rule=rule, name="careful")
    sloppy = ScriptedRuntime(rule=lambda p: "hmm, not sure", name="sloppy")
    res = compare(PROMPT, {"careful": careful, "sloppy": sloppy}, rows, options=OPTIONS,
                  progress=False)
    assert res["careful"].runtime == "careful" and res["sloppy"].runtime == "sloppy"
    assert len(careful.calls) == 3 and len(sloppy.calls) == 6
    s = res.summary
    assert s.loc["careful", "failure_rate"] == 0 and s.loc["sloppy", "failure_rate"] == 1
    assert s.loc["sloppy", "retry_rate"] == 1
    df = res.to_frame()
    assert df["careful"].tolist() == ["refund", "refund", "ignore"]
    assert df["sloppy"].isna().all()
    assert res.differences.index.tolist() == [0, 1, 2]


def test_option_set_and_runtime_pairs():
    rows = [{"message": "refund me"}]
    a, b = ScriptedRuntime(rule=rule), ScriptedRuntime(rule=rule_v2)
    res = compare(PROMPT, {"old": (OPTIONS, a), "new": (V2, b)}, rows, progress=False)
    assert res.to_frame().loc[0, ["old", "new"]].tolist() == ["refund", "money"]
    assert len(a.calls) == len(b.calls) == 1


def test_the_bound_runtime_serves_option_set_variants():
    from openprogram import using_runtime
    rt = ScriptedRuntime(rule=rule)
    with using_runtime(rt):
        res = compare(PROMPT, {"a": OPTIONS, "b": V2}, [{"message": "hi"}], progress=False)
    assert len(rt.calls) == 2 and res.differences.empty


@pytest.mark.parametrize("variants, kw, error, match", [
    ({"only": OPTIONS}, {}, ValueError, "two or more variants"),
    ([OPTIONS, V2], {}, TypeError, r"variants must be a dict"),
    ({"a": OPTIONS, "b": ScriptedRuntime(rule=rule)}, {}, ValueError,
     "variant 'b' is a Runtime, so compare needs options="),
    ({"a": OPTIONS, "b": {}}, {}, ValueError, "variant 'b': the option set is empty"),
    ({"a": OPTIONS, 2: V2}, {}, TypeError, "variant names must be non-empty strings"),
    ({"a": OPTIONS, "b": V2}, {"expected": ["nope"]}, ValueError,
     r"expected names 'nope' are not options.*money"),
])
def test_bad_variants_fail_before_any_call(variants, kw, error, match):
    rt = ScriptedRuntime(rule=rule)
    with pytest.raises(error, match=match):
        compare(PROMPT, variants, [{"message": "x"}], runtime=rt, progress=False, **kw)
    assert rt.calls == []


def test_compare_without_any_runtime_names_the_variant():
    with pytest.raises(RuntimeError, match="compare variant 'a' has no Runtime"):
        compare(PROMPT, {"a": OPTIONS, "b": V2}, [{"message": "x"}], progress=False)


def test_a_variant_named_like_an_input_column_keeps_both():
    rt = ScriptedRuntime(rule=rule)
    res = compare(PROMPT, {"message": OPTIONS, "b": V2}, [{"message": "refund"}], runtime=rt,
                  progress=False)
    df = res.to_frame()
    assert df.loc[0, "input_message"] == "refund" and df.loc[0, "message"] == "refund"


def test_views(frame):
    rt = ScriptedRuntime(rule=rule_v2)
    res = compare(PROMPT, {"v1": OPTIONS, "<v2>": V2}, frame, runtime=rt, progress=False)
    page = res._repr_html_()
    assert "<v2>" not in page and "&lt;v2&gt;" in page
    assert "pick differently on 2 inputs" in page and "where they differ" in page
    assert repr(res) == ("<ComparisonResult 'v1', '<v2>': 2 variants over 6 inputs; they pick "
                         "differently on 2 inputs>")
    ax = res.plot()
    assert [t.get_text() for t in ax.get_xticklabels()] == res.pick_counts.index.tolist()
    heights = [p.get_height() for p in ax.patches]
    assert heights == res.pick_counts["v1"].tolist() + res.pick_counts["<v2>"].tolist()


def test_compare_ways_of_asking_with_variants():
    from openprogram import ToolCall, Variant, compare

    def model(prompt, tools=None, tool_choice=None, response_format=None):
        if tools:
            return ToolCall("escalate")
        if response_format:
            return '{"decision": {"call": "escalate"}}'
        return '{"call": "ignore"}'
    from openprogram import Runtime
    rt = Runtime(call=model, model="three-way")
    opts = {"escalate": "ESC", "ignore": "IGN"}
    res = compare("Msg: {m}", {"menu": Variant(mode="menu"), "tools": Variant(mode="tools"),
                               "schema": Variant(mode="json_schema")},
                  [{"m": "a", "label": "escalate"}, {"m": "b", "label": "escalate"}],
                  options=opts, runtime=rt, expected="label", progress=False)
    frame = res.to_frame()
    assert list(frame["menu"]) == ["ignore", "ignore"]
    assert list(frame["tools"]) == ["escalate", "escalate"]
    assert list(frame["schema"]) == ["escalate", "escalate"]
    modes = {name: {t.mode for t in r.traces} for name, r in res.results.items()}
    assert modes == {"menu": {"menu"}, "tools": {"tools"}, "schema": {"json_schema"}}
    summary = res.summary
    assert summary.loc["tools", "accuracy"] == 1.0 and summary.loc["menu", "accuracy"] == 0.0


def test_a_variant_in_a_mode_its_runtime_cannot_do_fails_before_any_call():
    from openprogram import Runtime, Variant, compare
    calls = []
    rt = Runtime(call=lambda content: calls.append(content) or '{"call": "a"}')
    with pytest.raises(ValueError, match="cannot ask in mode 'tools'"):
        compare("{m}", {"menu": Variant(), "tools": Variant(mode="tools")}, [{"m": "x"}],
                options=["a", "b"], runtime=rt, progress=False)
    assert calls == []
