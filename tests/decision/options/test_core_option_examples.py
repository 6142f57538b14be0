"""Examples as part of an option (issue 36): a function's docstring `Examples:` section, the
`with_examples` marker on any entry, Anthropic's `input_examples` on a tool definition; shown in
the menu, the tool's description (tools mode) and the pick schema's `examples` (json_schema
mode); each cited on the trace's option table and the step-through."""

import jsonschema
import pytest
from corehelp import pick

import openprogram as op
from openprogram import OptionError, decision
from openprogram.decision.modes import JsonSchemaMode, ToolsMode
from openprogram.decision.options import normalize
from openprogram.decision.stepthrough import menu_sources
from openprogram.runtimes import ScriptedRuntime


def refund(order_id: int, reason: str = "") -> str:
    """Refund an order.

    Examples:
        my parcel 12 never came -> {"order_id": 12, "reason": "lost"}
        >>> refund(1)  # a doctest is not a pick, and is left alone
    Returns:
        a note
    """
    return f"refunded {order_id}"


SHIP = {"name": "ship", "description": "Ship boxes",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                         "required": ["n"]},
        "input_examples": [{"n": 3}]}


def options():
    return {"refund": refund,
            "greet": op.with_examples(("HELLO", "Say hello"), [("hi there", {})]),
            "ship": op.tool(SHIP)}


def test_each_form_gives_the_option_its_examples():
    menu = normalize(options())
    assert [(e["request"], e["args"]) for e in menu[0].examples] == [
        ("my parcel 12 never came", {"order_id": 12, "reason": "lost"})]
    assert [(e["request"], e["args"]) for e in menu[1].examples] == [("hi there", {})]
    assert [(e["request"], e["args"]) for e in menu[2].examples] == [(None, {"n": 3})]
    # the description is the docstring's first paragraph: the section is not in it
    assert menu[0].description == "Refund an order."


def test_the_menu_shows_each_example_after_the_call_line():
    text = decision.render_options(options())
    assert ('  Call: {"call": "refund", "args": {"order_id": 0, "reason": "<str>"}}\n'
            '  Example: "my parcel 12 never came" → {"call": "refund", "args": '
            '{"order_id": 12, "reason": "lost"}}') in text
    assert '  Example: "hi there" → {"call": "greet"}' in text
    assert '  Example: {"call": "ship", "args": {"n": 3}}' in text


def test_tools_mode_puts_them_in_the_description_and_json_schema_mode_in_examples():
    menu = normalize(options())
    tools = ToolsMode(menu).request()["tools"]
    assert tools[0]["description"].startswith("Refund an order.\nExamples:\n- ")
    assert '"my parcel 12 never came"' in tools[0]["description"]
    assert "Examples:" not in ToolsMode(normalize({"x": "X"})).request()[
        "tools"][0]["description"]
    schema = JsonSchemaMode(menu).request()["response_format"]["schema"]
    picks = schema["properties"]["decision"]["anyOf"]
    assert picks[0]["examples"] == [{"call": "refund",
                                     "args": {"order_id": 12, "reason": "lost"}}]
    # the request leading to each pick is only in text: the description carries it too
    assert picks[0]["description"] == tools[0]["description"]
    from openprogram.runtimes.llamacpp import schema_brief
    assert '"hi there" → {"call": "greet"}' in schema_brief(schema)
    # every example is itself a valid reply under the schema sent (the oracle: jsonschema)
    for p in picks:
        for ex in p["examples"]:
            jsonschema.validate({"decision": ex}, schema)


def test_the_model_is_shown_them_and_the_trace_cites_where_each_came_from():
    rt = ScriptedRuntime([pick("refund", {"order_id": 12})])
    assert decision.make("Help.", options(), runtime=rt) == "refunded 12"
    assert "Example: \"my parcel 12 never came\"" in rt.calls[0].prompt
    table = {o["name"]: o for o in decision.last_trace().options}
    src = table["refund"]["examples"][0]["source"]
    assert src["kind"] == "file" and src["file"].endswith("test_core_option_examples.py")
    lines = open(src["file"]).read().splitlines()
    assert "my parcel 12 never came" in lines[src["line"] - 1]
    assert table["ship"]["examples"][0]["source"]["pointer"] == "#/input_examples/0"
    assert table["greet"]["examples"][0]["source"]["kind"] == "option_set"


def test_the_step_through_marks_example_lines_with_their_source():
    rows = [r for r in menu_sources(options()) if r["part"] == "example"]
    assert [r["option"] for r in rows] == ["refund", "greet", "ship"]
    assert rows[2]["source"]["label"] == "the tool definition's input_examples[0]"
    assert all(r["line"].startswith("  Example: ") for r in rows)


def test_a_bad_example_is_an_option_error_naming_it():
    with pytest.raises(OptionError, match=r"example #0 of option 'refund' is not a valid pick"):
        decision.render_options({"refund": op.with_examples(refund, [("x", {"order_id": "a"})])})
    with pytest.raises(OptionError, match=r"arguments the model cannot set \(args.size\)"):
        decision.render_options({"refund": op.with_examples(refund, [{"order_id": 1, "size": 1}])})
    with pytest.raises(OptionError, match="non-empty list"):
        op.with_examples(refund, [])
    with pytest.raises(OptionError, match="input_examples is a list"):
        decision.render_options([{**SHIP, "input_examples": {"n": 1}}])
    with pytest.raises(OptionError, match="example #0 of option 'ship'"):
        decision.render_options([{**SHIP, "input_examples": [{"n": "three"}]}])


def test_attaching_examples_never_changes_the_shared_option():
    plain = normalize({"refund": refund})[0]
    marked = normalize({"refund": op.with_examples(refund, [("again", {"order_id": 1})])})[0]
    assert len(plain.examples) == 1 and len(marked.examples) == 2
    assert len(normalize({"refund": refund})[0].examples) == 1


def test_the_step_through_of_a_decision_shows_each_example_beside_its_source():
    rt = ScriptedRuntime([pick("greet")])
    opts = options()
    decision.make("Help.", opts, runtime=rt)
    text = decision.steps(decision.last_trace(), opts).format_text()
    assert ('Example: "hi there" → {"call": "greet"}    <- with_examples() on option '
            "'greet' in the option set") in text
    assert "<- the tool definition's input_examples[0]" in text
