"""Edited copies of an option (issue 36, what `decision.improve` proposes): a parameter's
description rewritten (`Option.with_param_description`) and the name the model sees changed
(`Option.renamed`), for every kind; and the tool spec that carries an option's examples as
Anthropic's `input_examples` beside the description form."""
import json

import jsonschema
import pydantic
import pytest
from corehelp import pick

import openprogram as op
from openprogram import OptionError, decision
from openprogram.decision.modes import JsonSchemaMode, ToolsMode, option_tool
from openprogram.decision.options import normalize
from openprogram.runtimes import ScriptedRuntime


def book(city: str, nights: int = 1, *, account: str) -> str:
    """Book a room."""
    return f"{nights} in {city} for {account}"


book.input_meta = {"account": {"hidden": True}}   # the caller's, through context=


class Order(pydantic.BaseModel):
    """An order."""
    qty: int = pydantic.Field(description="how many")


SHIP = {"name": "ship", "description": "Ship boxes", "input_schema": {
    "type": "object", "properties": {"n": {"type": "integer", "description": "boxes"}},
    "required": ["n"]}}


def menu():
    return normalize({"book": book, "note": ("Write a note.", {"text": "the note"}),
                      "order": Order, "ship": op.tool(SHIP), "done": ("DONE", "finished")})


@pytest.mark.parametrize("name, param, before", [
    ("book", "city", ""), ("note", "text", "the note"), ("order", "qty", "how many"),
    ("ship", "n", "boxes")])
def test_a_parameter_description_shows_in_every_way_of_asking(name, param, before):
    original = menu().by_name[name]
    new = original.with_param_description(param, "THE NEW TEXT")
    assert "THE NEW TEXT" in "\n".join(new.menu_lines())
    tool = option_tool(new)
    assert "THE NEW TEXT" in json.dumps(tool["parameters"])
    schema = JsonSchemaMode([new]).request()["response_format"]["schema"]
    assert "THE NEW TEXT" in json.dumps(schema)
    # the option the cache shares is untouched, in its text and its schemas
    assert "THE NEW TEXT" not in "\n".join(original.menu_lines())
    assert "THE NEW TEXT" not in json.dumps(original.json_schema())
    assert "THE NEW TEXT" not in json.dumps(menu().by_name[name].json_schema())
    if before:
        assert before in json.dumps(original.json_schema())


def test_the_edited_option_still_validates_and_runs():
    new = menu().by_name["book"].with_param_description("city", "where to sleep")
    rt = ScriptedRuntime([pick("book", {"city": "Oslo", "nights": 2})])
    assert decision.make("Book.", [new], runtime=rt, context={"account": "a1"}) == \
        "2 in Oslo for a1"
    assert "where to sleep" in rt.calls[0].prompt


def test_a_parameter_the_model_does_not_set_cannot_be_redescribed():
    book_option = menu().by_name["book"]
    with pytest.raises(OptionError, match=r"no parameter 'account' the model sets.*"
                                          r"\['city', 'nights'\]"):
        book_option.with_param_description("account", "x")
    with pytest.raises(OptionError, match="no parameter 'nope'"):
        menu().by_name["done"].with_param_description("nope", "x")


def test_a_renamed_option_is_shown_by_its_new_name_and_resolves_as_the_original():
    renamed = [o.renamed(f"{o.name}_v2") for o in menu()]
    assert [o.code_name for o in renamed] == ["book", "note", "order", "ship", "done"]
    assert "- done_v2()" in decision.render_options(renamed)
    assert [t["name"] for t in ToolsMode(renamed).request()["tools"]] == \
        [f"{n}_v2" for n in ("book", "note", "order", "ship", "done")]

    def make(call, args=None):
        return decision.make("x", renamed, context={"account": "a1"}, runtime=ScriptedRuntime(
            [json.dumps({"call": call, "args": args or {}})]))
    assert make("done_v2") == "DONE"
    assert make("note_v2", {"text": "hi"}) == {"decision": "note", "text": "hi"}
    assert make("ship_v2", {"n": 2}) == {"decision": "ship", "n": 2}
    assert make("book_v2", {"city": "Rome"}) == "1 in Rome for a1"
    assert make("order_v2", {"qty": 3}) == Order(qty=3)
    assert decision.parse_args(json.dumps({"call": "done_v2"}), renamed,
                               context={"account": "a1"})[0] == "done"
    # the old name is not on the menu any more
    with pytest.raises(decision.DecisionError):
        make("done")
    # renaming twice keeps the code's name
    assert renamed[4].renamed("finished").code_name == "done"


def test_examples_travel_as_input_examples_beside_the_description_form():
    option = menu().by_name["ship"].with_examples([("send 3 boxes", {"n": 3}), {"n": 5}])
    tool = option_tool(option)
    assert tool["input_examples"] == [{"n": 3}, {"n": 5}]
    # the description form (every provider) holds both; the one beside the native field
    # holds the example led by a request, which input_examples has no place for
    assert '"send 3 boxes"' in tool["description"] and '{"n": 5}' in tool["description"]
    assert '"send 3 boxes"' in tool["description_beside_inputs"]
    assert '{"n": 5}' not in tool["description_beside_inputs"]
    for example in tool["input_examples"]:
        jsonschema.validate(example, tool["parameters"])
    # an option without arguments: its examples are requests only, never an empty input
    done = menu().by_name["done"].with_examples([("all set", {})])
    assert "input_examples" not in option_tool(done)
    assert '"all set"' in option_tool(done)["description"]


def test_the_step_through_cites_the_edit_for_the_lines_it_wrote():
    from openprogram.decision.stepthrough import menu_sources
    source = {"kind": "improve", "label": "an edit"}
    book_option = menu().by_name["book"]
    edited = book_option.with_param_description("city", "where", source).renamed("stay", source)
    rows = {(r["part"], r["line"].strip()[:12]): r["source"] for r in menu_sources([edited])}
    assert rows[("signature", "- stay(city:")] == source
    city = [s for (part, line), s in rows.items() if part == "param" and "city" in line]
    nights = [s for (part, line), s in rows.items() if part == "param" and "nights" in line]
    assert city == [source] and nights and nights[0] != source
    assert [s for (part, _), s in rows.items() if part == "description"] != [source]
    # the unedited option cites its code, as before
    assert all(r["source"] != source for r in menu_sources([book_option]))
