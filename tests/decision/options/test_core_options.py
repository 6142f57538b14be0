"""Option containers (O1-O4), schemas (S1-S3) and the rendered menu (R1-R3)."""
import json
import re
from typing import Literal

import pytest
from corehelp import pick

from openprogram import OptionError, agent, decision
from openprogram.runtimes import ScriptedRuntime


def make(options, reply, **kw):
    rt = ScriptedRuntime([reply])
    return decision.make("Pick one.", options, runtime=rt, **kw), rt


def call_lines(menu):
    """The JSON examples of the menu's `Call:` lines."""
    return [json.loads(m) for m in re.findall(r"^  Call: (.*)$", menu, flags=re.M)]


# -- O1 ---------------------------------------------------------------------------------------

@pytest.mark.rule("O1")
def test_O1_function_option_runs_with_parsed_and_injected_args():
    seen = {}

    def book(city: str, nights: int, runtime=None, user: str = "?"):
        seen.update(city=city, nights=nights, runtime=runtime, user=user)
        return "booked"

    book.input_meta = {"user": {"hidden": True}}
    result, rt = make({"book": book}, pick("book", {"city": "Rome", "nights": 2}),
                      context={"user": "ada"})
    assert result == "booked"
    assert seen == {"city": "Rome", "nights": 2, "runtime": rt, "user": "ada"}


@pytest.mark.rule("O1")
def test_O1_value_option_returns_the_value_itself():
    sentinel = object()
    result, _ = make({"keep": sentinel, "drop": None}, pick("keep"))
    assert result is sentinel
    result, _ = make({"keep": sentinel, "drop": None}, pick("drop"))
    assert result is None


@pytest.mark.rule("O1")
def test_O1_schema_option_returns_decision_and_filled_fields():
    result, _ = make({"rate": ("rate it", {"score": int, "why": str})},
                     pick("rate", {"score": 4, "why": "good"}))
    assert result == {"decision": "rate", "score": 4, "why": "good"}


# -- O2 ---------------------------------------------------------------------------------------

def shout(text: str) -> str:
    return text.upper()


@pytest.mark.rule("O2")
def test_O2_dict_form_handler_shapes():
    options = {
        "shout": shout,                                   # callable
        "described": (shout, "Shout the text."),         # (callable, desc)
        "form": ("Fill the form.", {"name": str}),       # (desc, schema)
        "answer": (42, "The answer."),                   # (value, desc)
        "plain": [1, 2],                                  # any other non-callable
    }
    menu = decision.render_options(options)
    assert "  Shout the text." in menu and "  Fill the form." in menu and "  The answer." in menu
    assert make(options, pick("shout", {"text": "a"}))[0] == "A"
    assert make(options, pick("described", {"text": "b"}))[0] == "B"
    assert make(options, pick("form", {"name": "x"}))[0] == {"decision": "form", "name": "x"}
    assert make(options, pick("answer"))[0] == 42
    assert make(options, pick("plain"))[0] == [1, 2]


@pytest.mark.rule("O2")
def test_O2_a_tuple_handler_is_reserved_syntax():
    # a literal tuple value is written (value, "description")
    assert make({"pair": ((1, 2), "a pair")}, pick("pair"))[0] == (1, 2)
    rt = ScriptedRuntime([pick("pair")])
    with pytest.raises(OptionError, match=r"option 'pair'.*description string"):
        decision.make("Pick.", {"pair": (1, 2)}, runtime=rt)
    with pytest.raises(OptionError, match=r"option 'triple'.*wrap it"):
        decision.make("Pick.", {"triple": (1, 2, 3)}, runtime=rt)
    assert rt.calls == []


@pytest.mark.rule("O2")
def test_O2_the_key_is_the_option_name():
    menu = decision.render_options({"loud": shout})
    assert "- loud(text: str)" in menu and "shout(" not in menu
    assert make({"loud": shout}, pick("loud", {"text": "q"}))[0] == "Q"


# -- O3 ---------------------------------------------------------------------------------------

@pytest.mark.rule("O3")
def test_O3_list_form_items():
    options = [shout, (str.title, "Title-case the text."), "skip", ("wait", "Wait a bit."),
               ("survey", "Answer the survey.", {"stars": int})]
    menu = decision.render_options(options)
    for sig in ("- shout(text: str)", "- title(", "- skip()", "- wait()", "- survey(stars: int)"):
        assert sig in menu
    assert "  Wait a bit." in menu and "  Title-case the text." in menu
    assert make(options, pick("shout", {"text": "x"}))[0] == "X"
    assert make(options, pick("skip"))[0] == "skip"      # a bare string resolves to its name
    assert make(options, pick("wait"))[0] == "wait"
    assert make(options, pick("survey", {"stars": 5}))[0] == {"decision": "survey", "stars": 5}


@pytest.mark.rule("O3")
def test_O3_functions_with_positional_only_parameters_can_be_picked():
    def scale(x: int, /, factor: int = 2) -> int:
        return x * factor
    options = [(str.title, "Title-case the text."), scale]
    assert make(options, pick("title", {"self": "ada lovelace"}))[0] == "Ada Lovelace"
    assert make(options, pick("scale", {"x": 3}))[0] == 6
    assert make(options, pick("scale", {"x": 3, "factor": 5}))[0] == 15
    chosen, kwargs = decision.parse_args(pick("scale", {"x": 4}), options)
    assert decision.resolve_decision(chosen, kwargs) == 8


@pytest.mark.rule("O3")
def test_O3_a_nameless_callable_in_the_list_form_is_rejected():
    rt = ScriptedRuntime([pick("x")])
    with pytest.raises(OptionError, match=r"needs a name.*dict form"):
        decision.make("Pick.", [lambda: 1], runtime=rt)
    assert rt.calls == []


# -- O4 ---------------------------------------------------------------------------------------

@pytest.mark.rule("O4")
@pytest.mark.parametrize("options, pattern", [
    (["a", "a"], r"'a' appears twice.*unique"),
    ([shout, ("shout", "again")], r"'shout' appears twice"),
    ({}, r"empty.*at least one option"),
    ([], r"empty.*at least one option"),
    ([42], r"option #0.*list item is a callable"),
    ([("a",)], r"option #0.*list item is a callable"),
    ([("a", "b", "c", "d")], r"option #0"),
    ([(1, "desc")], r"option #0.*dict form for value options"),
    ("a b c", r"options must be a dict .* or a list, got str"),
    (None, r"got NoneType"),
    ({1: "x"}, r"option names must be non-empty strings"),
    ({"": "x"}, r"option names must be non-empty strings"),
    # the result is {"decision": name, **fields}: a field named "decision" would let the model's
    # text replace the option name
    ({"form": ("Fill.", {"decision": str})}, r"'form'.*field 'decision'.*rename"),
    ([("form", "Fill.", {"n": int, "decision": str})], r"'form'.*field 'decision'"),
])
def test_O4_bad_option_sets_fail_before_any_model_call(options, pattern):
    rt = ScriptedRuntime([pick("a")])
    with pytest.raises(OptionError, match=pattern):
        decision.make("Pick.", options, runtime=rt)
    if options is not None:  # options=None means "no decision": a plain turn
        with pytest.raises(OptionError, match=pattern):
            agent("Pick.", options=options, runtime=rt)
    assert rt.calls == []
    assert len(rt.dag) == 0


# -- S1 ---------------------------------------------------------------------------------------

TRIP = {
    "city": str,
    "mood": "how the traveller feels",
    "nights": int,
    "budget": float,
    "refundable": bool,
    "stops": [{"name": str, "hours": int}],
    "tags": [str],
    "hotel": {"name": str, "stars": {"type": int, "options": [3, 4, 5]}},
    "kind": {"type": str, "description": "trip kind", "options": ["work", "leisure"]},
}
GOOD_TRIP = {"city": "Rome", "mood": "happy", "nights": 2, "budget": 100, "refundable": False,
             "stops": [{"name": "Pisa", "hours": 3}], "tags": ["art"],
             "hotel": {"name": "H", "stars": 4}, "kind": "work"}


@pytest.mark.rule("S1")
def test_S1_nested_schema_renders_and_validates():
    options = {"trip": ("Plan a trip.", TRIP)}
    menu = decision.render_options(options)
    assert ("- trip(city: str, mood: str, nights: int, budget: float, refundable: bool, "
            "stops: list[object], tags: list[str], hotel: object, kind: str)") in menu
    assert "- mood (str, required): how the traveller feels" in menu
    assert "- stops[].hours (int, required)" in menu
    assert "- hotel.stars (int, required); one of: 3, 4, 5" in menu
    assert '- kind (str, required): trip kind; one of: "work", "leisure"' in menu
    result, _ = make(options, pick("trip", GOOD_TRIP))
    assert result == {"decision": "trip", **GOOD_TRIP, "budget": 100.0}


@pytest.mark.rule("S1")
@pytest.mark.parametrize("change, kind, path", [
    ({"stops": [{"name": "Pisa", "hours": "3"}]}, "type_mismatch", "args.stops[0].hours"),
    ({"hotel": {"name": "H", "stars": 2}}, "enum_violation", "args.hotel.stars"),
    ({"hotel": {"name": "H"}}, "missing_required", "args.hotel.stars"),
    ({"tags": "art"}, "type_mismatch", "args.tags"),
    ({"kind": "holiday"}, "enum_violation", "args.kind"),
    ({"mood": 3}, "type_mismatch", "args.mood"),
])
def test_S1_nested_schema_errors_name_the_path(change, kind, path):
    with pytest.raises(decision.DecisionError) as info:
        make({"trip": ("Plan a trip.", TRIP)}, pick("trip", {**GOOD_TRIP, **change}),
             max_retries=0)
    assert info.value.kind == kind
    assert info.value.path == path
    assert info.value.trace.attempts[0].error_path == path


# -- S2 ---------------------------------------------------------------------------------------

@pytest.mark.rule("S2")
@pytest.mark.parametrize("schema", [{"steps": [str, int]}, {"steps": []},
                                    {"a": {"b": [{"c": [int, int]}]}}])
def test_S2_a_list_schema_holds_exactly_one_template(schema):
    rt = ScriptedRuntime([pick("x")])
    with pytest.raises(TypeError, match=r"exactly one item template") as info:
        decision.make("Pick.", {"x": ("desc", schema)}, runtime=rt)
    assert "option 'x'" in str(info.value)
    assert rt.calls == []
    with pytest.raises(TypeError, match="exactly one item template"):
        decision.render_options([("x", "desc", schema)])


# -- S3 ---------------------------------------------------------------------------------------

@pytest.mark.rule("S3")
def test_S3_meta_keys_only_make_a_meta_spec():
    meta = {"level": {"type": int, "description": "how loud"}}
    nested = {"level": {"type": int, "label": str}}  # "label" is outside the meta keys
    menu_meta = decision.render_options({"x": ("d", meta)})
    menu_nested = decision.render_options({"x": ("d", nested)})
    assert "- x(level: int)" in menu_meta and "- level (int, required): how loud" in menu_meta
    assert "- x(level: object)" in menu_nested
    assert "- level.type (int, required)" in menu_nested
    assert make({"x": ("d", meta)}, pick("x", {"level": 3}))[0] == {"decision": "x", "level": 3}
    assert make({"x": ("d", nested)}, pick("x", {"level": {"type": 1, "label": "L"}}))[0] == \
        {"decision": "x", "level": {"type": 1, "label": "L"}}


@pytest.mark.rule("S3")
def test_S3_meta_spec_with_fields_and_items():
    schema = {"who": {"fields": {"name": str}, "description": "a person"},
              "nums": {"items": int, "description": "numbers"}}
    menu = decision.render_options({"x": ("d", schema)})
    assert "- who (object, required): a person" in menu
    assert "- nums (list[int], required): numbers" in menu
    result, _ = make({"x": ("d", schema)}, pick("x", {"who": {"name": "A"}, "nums": [1, 2]}))
    assert result == {"decision": "x", "who": {"name": "A"}, "nums": [1, 2]}


# -- R1 ---------------------------------------------------------------------------------------

def travel(city: str, mode: Literal["train", "plane"] = "train", nights: int = 1) -> str:
    """Travel somewhere.

    Longer text that stays out of the menu."""
    return city


travel.input_meta = {"city": {"description": "where to go"}}


@pytest.mark.rule("R1")
def test_R1_each_option_has_signature_description_details_and_call_line():
    menu = decision.render_options([travel, ("wait", "Do nothing.")])
    assert menu == (
        'Options (reply with one JSON object that picks exactly one, as in its "Call:" line):\n'
        "\n"
        '- travel(city: str, mode: str = "train", nights: int = 1)\n'
        "  Travel somewhere.\n"
        "    - city (str, required): where to go\n"
        '    - mode (str, optional, default "train"); one of: "train", "plane"\n'
        "    - nights (int, optional, default 1)\n"
        '  Call: {"call": "travel", "args": {"city": "<str>", "mode": "train", "nights": 0}}\n'
        "\n"
        "- wait()\n"
        "  Do nothing.\n"
        '  Call: {"call": "wait"}')


@pytest.mark.rule("R1")
def test_R1_every_call_line_is_a_valid_pick():
    options = [travel, ("wait", "Do nothing."), ("trip", "Plan.", TRIP)]
    menu = decision.render_options(options)
    examples = call_lines(menu)
    assert [e["call"] for e in examples] == ["travel", "wait", "trip"]
    for example in examples:
        # the example itself validates (placeholders are of the right types and enum values)
        chosen, _ = decision.parse_args(json.dumps(example), options)
        assert chosen in (travel, "wait", "trip")


# -- R2 ---------------------------------------------------------------------------------------

@pytest.mark.rule("R2")
def test_R2_only_llm_parameters_are_shown():
    def act(task: str, user_id: str, runtime=None, exec_runtime=None, review_runtime=None):
        return task

    act.input_meta = {"user_id": {"hidden": True, "description": "SECRET-DESCRIPTION"}}
    menu = decision.render_options([act])
    assert "- act(task: str)" in menu
    for hidden in ("user_id", "SECRET-DESCRIPTION", "runtime"):
        assert hidden not in menu
    assert call_lines(menu) == [{"call": "act", "args": {"task": "<str>"}}]


# -- R3 ---------------------------------------------------------------------------------------

@pytest.mark.rule("R3")
def test_R3_placeholders_are_native_json_literals():
    schema = {"n": int, "on": bool, "xs": list, "d": dict, "s": str, "f": float,
              "rows": [{"k": int, "tags": [str]}], "obj": {"inner": {"flag": bool}}}
    menu = decision.render_options({"x": ("d", schema)})
    line = re.search(r"^  Call: (.*)$", menu, flags=re.M).group(1)
    assert line == ('{"call": "x", "args": {"n": 0, "on": false, "xs": [], "d": {}, "s": "<str>", '
                    '"f": 0.0, "rows": [{"k": 0, "tags": ["<str>"]}], '
                    '"obj": {"inner": {"flag": false}}}}')
    assert '"0"' not in line and '"false"' not in line and '"[]"' not in line


@pytest.mark.rule("R3")
def test_R3_enum_placeholder_is_the_first_allowed_value():
    menu = decision.render_options({"x": ("d", {"level": {"type": int, "options": [7, 8]}})})
    assert call_lines(menu) == [{"call": "x", "args": {"level": 7}}]


@pytest.mark.rule("R1")
def test_R1_a_normalized_menu_is_reused_as_is_and_renders_the_same():
    from openprogram.decision.options import Menu, normalize
    options = {"shout": shout, "form": ("Fill.", {"n": int}), "skip": ("SKIP", "Skip it.")}
    menu = normalize(options)
    assert isinstance(menu, Menu) and normalize(menu) is menu
    assert normalize(list(menu)) == menu          # a list of Options becomes a Menu of them
    assert decision.render_options(menu) == decision.render_options(options)
    rt = ScriptedRuntime([pick("skip"), pick("form", {"n": 1})])
    traces = []
    for _ in range(2):
        decision.make("Pick.", menu, runtime=rt)
        traces.append(decision.last_trace())
    assert traces[0].menu == traces[1].menu == decision.render_options(options)
    assert traces[0].options == traces[1].options == [o.info() for o in menu]
    assert traces[0].options is not traces[1].options   # each trace owns its table
