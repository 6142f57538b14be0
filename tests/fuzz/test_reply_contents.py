"""What a reply may contain (issue 18, item 1; docs/rules.md, group P "decided here"): finite
numbers and valid Unicode, and a resolved value always fits its declared type. One test per
finding, each saying what the code did before.

A value that breaks the rule fails the attempt with kind `invalid_value` and the path of the
value, wherever it sits: a function parameter, a schema field, a list item or nested object, a
free-form list or dict (keys included), or a native tool's arguments.
"""
from __future__ import annotations

import json
import typing
from typing import Literal

import pytest

from openprogram import DecisionError, ToolCall, agent, decision
from openprogram.decision.options import Field, validate
from openprogram.runtimes import ScriptedRuntime

received: list = []


def scale(x: float):
    """Scale by x."""
    received.append(x)
    return x


def echo(x: str):
    """Echo x."""
    received.append(x)
    return x


@pytest.fixture(autouse=True)
def _clear():
    received.clear()


def refused(reply: str, options, **kw) -> DecisionError:
    """The decision on `reply` alone; it must fail, and nothing may have run."""
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", options, runtime=ScriptedRuntime([reply]), max_retries=0, **kw)
    assert received == [], f"the function ran with {received!r}"
    err = info.value
    str(err).encode("utf-8")  # the message itself can always be printed or logged
    return err


# -- the findings of issue 18 ---------------------------------------------------------------------

@pytest.mark.rule("P3")
def test_P3_an_overflowing_number_never_reaches_a_float_parameter():
    # Before: json.loads read 1e400 as inf, a float, and scale() ran with x = inf.
    err = refused('{"call": "scale", "args": {"x": 1e400}}', [scale])
    assert (err.kind, err.path) == ("invalid_value", "args.x")
    assert "finite" in err.message


@pytest.mark.rule("P3")
def test_P3_a_negative_overflow_in_the_flat_form_is_refused_too():
    # Before: -1e999 arrived as -inf.
    err = refused('{"call": "scale", "x": -1e999}', [scale])
    assert (err.kind, err.path) == ("invalid_value", "args.x")


@pytest.mark.rule("P3")
def test_P3_an_escaped_lone_surrogate_never_reaches_a_str_parameter():
    # Before: "\ud800" reached echo() as a str that no UTF-8 writer accepts, and broke the
    # first file or socket it was written to.
    err = refused(r'{"call": "echo", "args": {"x": "ok \ud800"}}', [echo])
    assert (err.kind, err.path) == ("invalid_value", "args.x")
    assert "lone surrogate at character 3" in err.message


@pytest.mark.rule("P3")
def test_P3_a_raw_lone_surrogate_is_refused_like_an_escaped_one():
    # Before: a reply holding the code point itself (a runtime that decoded with
    # surrogateescape) passed the same way.
    err = refused('{"call": "echo", "args": {"x": "\udcff"}}', [echo])
    assert (err.kind, err.path) == ("invalid_value", "args.x")


@pytest.mark.rule("P3")
@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_P3_NaN_and_Infinity_are_not_JSON_so_the_reply_holds_no_pick(token):
    # json.loads accepts these tokens; the reply is read as JSON, which has none.
    err = refused(f'{{"call": "scale", "args": {{"x": {token}}}}}', [scale])
    assert err.kind == "no_action"


@pytest.mark.rule("P3")
def test_P3_a_re_ask_after_a_bad_value_gets_a_good_one():
    rt = ScriptedRuntime(['{"call": "scale", "x": 1e400}', '{"call": "scale", "x": 2}'])
    assert decision.make("Pick.", [scale], runtime=rt) == 2.0
    assert "args.x must be a finite number" in rt.calls[1].prompt


# -- everywhere a value can sit -------------------------------------------------------------------

FORM = {"form": ("Fill it.", {"steps": [{"w": float, "label": str}], "meta": dict, "raw": list,
                              "any": typing.Any})}


@pytest.mark.rule("P3")
@pytest.mark.parametrize("args, path", [
    ('{"steps": [{"w": 1, "label": "a"}, {"w": 1e400, "label": "b"}], "meta": {}, "raw": [], '
     '"any": 0}', "args.steps[1].w"),
    ('{"steps": [{"w": 1, "label": "\\udc80"}], "meta": {}, "raw": [], "any": 0}',
     "args.steps[0].label"),
    ('{"steps": [], "meta": {"deep": [{"x": -1e999}]}, "raw": [], "any": 0}',
     "args.meta.deep[0].x"),
    ('{"steps": [], "meta": {}, "raw": [1, ["\\ud800"]], "any": 0}', "args.raw[1][0]"),
    ('{"steps": [], "meta": {}, "raw": [], "any": {"k": 1e400}}', "args.any.k"),
    ('{"steps": [], "meta": {"\\ud800": 1e400}, "raw": [], "any": 0}', "args.meta (a key)"),
])
def test_P3_schema_fields_are_checked_at_every_depth(args, path):
    err = refused(f'{{"call": "form", "args": {args}}}', FORM)
    assert (err.kind, err.path) == ("invalid_value", path)
    # a bad key is reported before anything under it, so no path holds the key itself
    err.path.encode("utf-8")


@pytest.mark.rule("P3")
def test_P3_native_tool_arguments_are_checked_and_the_error_goes_back_to_the_model():
    # Before: run_tool validated with the same function, which let inf and lone surrogates
    # through, so scale() ran with x = inf and echo() with an unencodable text.
    rt = ScriptedRuntime([ToolCall("scale", {"x": float("inf")}),
                          ToolCall("scale", {"x": float("nan")}),
                          ToolCall("echo", {"x": "\ud800"}), "Done."])
    assert agent("Go.", tools=[scale, echo], runtime=rt) == "Done."
    assert received == []
    sent = [m["content"] for m in rt.calls[-1].messages if m.get("role") == "tool"]
    assert len(sent) == 3 and all(s.startswith("Error: x ") for s in sent), sent
    assert "finite" in sent[0] and "finite" in sent[1] and "lone surrogate" in sent[2]


# -- found by the fuzzer (tests/fuzz) -------------------------------------------------------------

@pytest.mark.rule("P3")
def test_P3_a_tool_argument_with_more_digits_than_python_prints_is_refused():
    # Found by the long run of test_fuzz_tools.py. Before: a runtime that builds a tool call's
    # arguments itself could hand an `Any` parameter an int of 5000 digits, which no repr, log,
    # trace or export can print (ValueError: Exceeds the limit (4300 digits)).
    def count(n, items: list):
        received.append(n)

    rt = ScriptedRuntime([ToolCall("count", {"n": 10**5000, "items": []}),
                          ToolCall("count", {"n": 1, "items": [-(10**5000)]}), "Done."])
    assert agent("Go.", tools=[count], runtime=rt) == "Done."
    assert received == []
    sent = [m["content"] for m in rt.calls[-1].messages if m.get("role") == "tool"]
    assert sent == ["Error: n must be a number JSON can hold, got an integer of about 5001 digits",
                    "Error: items[0] must be a number JSON can hold, got an integer of about "
                    "5001 digits"]


@pytest.mark.rule("P3")
def test_P3_an_integer_too_large_for_a_float_is_invalid_value_not_an_OverflowError():
    # Before: float(10**400) raised OverflowError out of decision.make.
    err = refused('{"call": "scale", "x": 1' + "0" * 400 + "}", [scale])
    assert (err.kind, err.path) == ("invalid_value", "args.x")
    assert "about 401 digits" in err.message


@pytest.mark.rule("P3")
def test_P3_dict_str_X_checks_every_value_as_an_X():
    # Before: dict[str, float] was read as a plain dict: {"a": "x"} and {"a": 1e400} passed,
    # and an int arrived as an int.
    def weigh(w: dict[str, float]):
        received.append(w)
        return w

    err = refused('{"call": "weigh", "w": {"a": 1, "b": "heavy"}}', [weigh])
    assert (err.kind, err.path) == ("type_mismatch", "args.w.b")
    err = refused('{"call": "weigh", "w": {"a": 1e400}}', [weigh])
    assert (err.kind, err.path) == ("invalid_value", "args.w.a")
    rt = ScriptedRuntime(['{"call": "weigh", "w": {"a": 1, "b": 2.5}}'])
    out = decision.make("Pick.", [weigh], runtime=rt)
    assert out == {"a": 1.0, "b": 2.5} and type(out["a"]) is float
    assert "w: dict[str, float]" in decision.render_options([weigh])


@pytest.mark.rule("P3")
def test_P3_dict_keys_that_are_not_str_are_refused_when_the_option_is_built():
    def bad(w: dict[int, str]):
        return w

    with pytest.raises(Exception) as info:
        decision.render_options([bad])
    assert "keys of a JSON object are always strings" in str(info.value)


@pytest.mark.rule("P3")
def test_P3_a_union_takes_the_value_as_the_first_alternative_it_fits():
    # Before: int | str was read as "any": a list or an object passed.
    def route(to: int | str, w: float | list[int] | None = None):
        received.append((to, w))
        return to, w

    err = refused('{"call": "route", "to": [1]}', [route])
    assert (err.kind, err.path) == ("type_mismatch", "args.to")
    assert "must be int | str" in err.message
    err = refused('{"call": "route", "to": 1, "w": 1e400}', [route])
    assert (err.kind, err.path) == ("invalid_value", "args.w")
    rt = ScriptedRuntime(['{"call": "route", "to": "B", "w": 3}'])
    assert decision.make("Pick.", [route], runtime=rt) == ("B", 3.0)
    assert "to: int | str" in decision.render_options([route])


@pytest.mark.rule("P3")
def test_P3_a_mixed_enum_hands_over_its_own_value_not_an_equal_one_of_another_type():
    # Before: Literal[1, "a"] took the model's 1.0 (equal to 1) and passed it on as a float.
    def level(n: Literal[1, "a"]):
        return n

    out = decision.make("Pick.", [level], runtime=ScriptedRuntime(['{"call": "level", "n": 1.0}']))
    assert out == 1 and type(out) is int


@pytest.mark.rule("P3")
def test_P3_a_dropped_key_with_a_lone_surrogate_is_recorded_escaped():
    # Before: the record (and the panel, and any export of it) held the raw surrogate.
    rt = ScriptedRuntime(['{"call": "echo", "x": "ok", "\\ud800": 1}'])
    assert decision.make("Pick.", [echo], runtime=rt) == "ok"
    dropped = decision.last_trace().attempts[0].dropped
    assert dropped == ["args.\\ud800"]
    json.dumps(dropped, ensure_ascii=False).encode("utf-8")


@pytest.mark.rule("P3")
def test_P3_a_huge_text_is_checked_without_copying_it():
    import tracemalloc
    text = "ж" * 5_000_000 + "\ud800"
    tracemalloc.start()
    try:
        with pytest.raises(Exception) as info:
            validate(text, Field("str"), "args.x", [])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "lone surrogate at character 5000000" in str(info.value)
    assert peak < 1_000_000, f"checking a 10 MB text allocated {peak} bytes"
