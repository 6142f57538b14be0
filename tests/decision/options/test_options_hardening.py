"""Option sets from outside, as they come (issue 54, cases 5 and 11).

A tool definition is never refused for the name of one of its parameters: one called `decision`
is kept apart from the option's name in the pick's result. The same plain list of tool
definitions handed to `make` again is not read again: its menu is found by the list's content.
"""
from __future__ import annotations

import json
import pickle
import warnings

import pytest

import openprogram
from openprogram import OptionWarning, decision
from openprogram.runtimes import ScriptedRuntime

# The shape of BFCL's `analysis_api_AnalysisApi_update_analysis`, which was refused: "a schema
# option cannot have a field 'decision'".
UPDATE_ANALYSIS = {
    "name": "analysis_api_AnalysisApi_update_analysis",
    "description": "Record an analysis decision for a vulnerability of a component.",
    "parameters": {"type": "object", "required": ["project", "component", "decision"],
                   "properties": {
                       "project": {"type": "string", "description": "The project's UUID."},
                       "component": {"type": "string", "description": "The component's UUID."},
                       "decision": {"type": "string", "enum": ["NOT_AFFECTED", "EXPLOITABLE"],
                                    "description": "The analysis decision."},
                       "comment": {"type": "string"}}}}
ARGS = {"project": "p-1", "component": "c-2", "decision": "NOT_AFFECTED"}


def shapes():
    fn, params = dict(UPDATE_ANALYSIS), UPDATE_ANALYSIS["parameters"]
    return {"openai": {"type": "function", "function": fn},
            "responses": {"type": "function", **fn},
            "anthropic": {"name": fn["name"], "input_schema": params},
            "mcp": {"name": fn["name"], "inputSchema": params}}


def pick(args, name=UPDATE_ANALYSIS["name"]):
    return json.dumps({"call": name, "args": args})


@pytest.mark.parametrize("shape", ["openai", "responses", "anthropic", "mcp", "marked",
                                   "json_schema"])
def test_a_tool_with_a_parameter_named_decision_is_an_option_and_keeps_it(shape):
    """Case 5: the definition was refused. Its pick resolves as every schema pick does, the
    option's name under "decision", and holds every argument apart in `.arguments`."""
    name = UPDATE_ANALYSIS["name"]
    if shape == "marked":
        options = [openprogram.tool(shapes()["mcp"])]
    elif shape == "json_schema":
        options = {name: openprogram.JsonSchema(UPDATE_ANALYSIS["parameters"])}
    else:
        options = [shapes()[shape]]
    with pytest.warns(OptionWarning, match=r"parameter named 'decision'.*"
                                           r"result\.arguments\['decision'\]"):
        got = decision.make("Mark it not affected.", options,
                            runtime=ScriptedRuntime([pick(ARGS)]), max_retries=0)
    assert got["decision"] == got.decision == name
    assert got.arguments == ARGS
    assert got == {"decision": name, "project": "p-1", "component": "c-2"}
    trace = decision.last_trace()
    assert trace.attempts[-1].args == ARGS and trace.attempts[-1].dropped == []
    # the value the model gave is checked like any other (its enum here)
    with pytest.raises(openprogram.DecisionError, match=r"args\.decision must be one of"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (said once above)
        decision.make("Mark it.", options, max_retries=0,
                      runtime=ScriptedRuntime([pick({**ARGS, "decision": "MAYBE"})]))


def test_with_a_function_the_parameter_is_an_argument_like_any_other():
    def update(project: str, component: str, decision: str, comment: str = "") -> str:
        return f"{project}/{component}: {decision}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # nothing to say: the function receives it
        got = decision.make("Mark it.", [openprogram.tool(shapes()["mcp"], update)],
                            runtime=ScriptedRuntime([pick(ARGS)]))
    assert got == "p-1/c-2: NOT_AFFECTED"


def test_a_schema_pick_is_a_dict_that_survives_a_copy_a_pickle_and_json():
    tool = {"name": "fill", "inputSchema": {"type": "object", "additionalProperties": True,
                                            "properties": {"n": {"type": "integer"}}}}
    # a key the schema allows, named "decision" by the model: the name stays the option's
    got = decision.make("Fill it.", [tool], runtime=ScriptedRuntime(
        [pick({"n": 1, "decision": "other"}, "fill")]))
    assert got == {"decision": "fill", "n": 1} and got.arguments == {"n": 1, "decision": "other"}
    for again in (pickle.loads(pickle.dumps(got)), __import__("copy").deepcopy(got)):
        assert again == got and again.arguments == got.arguments and again.decision == "fill"
    assert json.loads(json.dumps(got)) == {"decision": "fill", "n": 1}
    assert decision.last_trace().to_dict()["result"] == {"decision": "fill", "n": 1}


def test_a_pick_with_no_argument_named_decision_stays_a_plain_dict():
    """Only a pick that has an argument `decision` needs it kept apart: every other schema pick
    is the exact dict it was (the journal's and the JSON forms' fast paths take exact dicts)."""
    tool = {"name": "fill", "inputSchema": {"type": "object",
                                            "properties": {"n": {"type": "integer"}}}}
    got = decision.make("Fill it.", [tool], runtime=ScriptedRuntime([pick({"n": 1}, "fill")]))
    assert type(got) is dict and got == {"decision": "fill", "n": 1}


def test_the_spec_form_still_refuses_a_field_named_decision():
    """The spec form's schema is the caller's own code (rule O1, docs/rules.md): renaming the
    field is theirs to do, and the message says so."""
    with pytest.raises(openprogram.OptionError, match="cannot have a field 'decision'"):
        decision.make("Fill it.", {"form": ("Fill.", {"decision": str})},
                      runtime=ScriptedRuntime([]))


# -- case 11: the same plain list of tool definitions, again ----------------------------------

def tools_list(n=300):
    """Tool definitions of a realistic shape (BFCL's are not available here): a few described
    parameters each, of every JSON type, some with enums, nested objects and arrays."""
    kinds = ["string", "integer", "number", "boolean", "array", "object"]
    out = []
    for i in range(n):
        props = {}
        for j in range(1 + i % 5):
            t = kinds[(i + j) % len(kinds)]
            p = {"type": t, "description": f"Parameter {j} of tool {i}."}
            if t == "array":
                p["items"] = {"type": "string"}
            if t == "object":
                p["properties"] = {"k": {"type": "string"}, "v": {"type": "integer"}}
                p["required"] = ["k"]
            if t == "string" and j % 2:
                p["enum"] = ["a", "b", "c"]
            props[f"p{j}"] = p
        out.append({"type": "function", "function": {
            "name": f"tool_{i}", "description": f"Does thing {i}.",
            "parameters": {"type": "object", "properties": props, "required": list(props)[:1]}}})
    return out


@pytest.fixture
def builds(monkeypatch):
    from openprogram.decision.options.tool_definitions import JsonSchemaOption
    count = [0]
    real = JsonSchemaOption.__init__

    def counted(self, *a, **kw):
        count[0] += 1
        real(self, *a, **kw)
    monkeypatch.setattr(JsonSchemaOption, "__init__", counted)
    openprogram.decision.options.clear_option_cache()
    return count


def _pick(tools, i=7):
    from openprogram.decision.options import normalize
    return normalize(tools)[i].example()


def test_the_same_plain_list_of_tool_dicts_is_read_once(builds):
    """Case 11: 1,841 tool dicts handed to `make` again were read again every time (1.9 s a
    decision). A list of plain data is kept by its content; given again (the same list, or an
    equal one, as a fresh json.load gives), no option is built."""
    tools = tools_list()
    reply = _pick(tools)
    assert builds[0] == 300
    rt = ScriptedRuntime(rule=lambda prompt: reply)
    decision.make("Pick.", tools, runtime=rt)
    for _ in range(3):
        decision.make("Pick.", tools, runtime=rt)
    decision.make("Pick.", json.loads(json.dumps(tools)), runtime=rt)
    assert builds[0] == 300


@pytest.mark.parametrize("change", ["description", "type_of_a_value", "key_order", "item"])
def test_a_change_made_in_place_is_seen(builds, change):
    """The content is compared exactly: `1`, `1.0` and `True` differ (as they do in an enum),
    and so does the order of keys (the order of the menu's lines)."""
    from openprogram.decision.options import normalize
    tools = tools_list(50)
    first = normalize(tools)
    assert normalize(tools) is first and builds[0] == 50
    params = tools[3]["function"]["parameters"]
    if change == "description":
        tools[3]["function"]["description"] = "Does something else."
    elif change == "type_of_a_value":
        params["properties"]["p0"] = {"enum": [1]}
        normalize(tools)
        params["properties"]["p0"] = {"enum": [True]}
    elif change == "key_order":
        params["properties"] = dict(reversed(params["properties"].items()))
    else:
        tools.append({"name": "extra", "inputSchema": {"type": "object"}})
    again = normalize(tools)
    assert again is not first
    if change == "description":
        assert "Does something else." in again.text and "Does something else." not in first.text
    if change == "type_of_a_value":
        assert again[3].params[0].field.user.node == {"enum": [True]}


def test_a_cached_menu_is_built_from_its_own_copy(builds):
    """Nothing the caller changes in its dicts afterwards reaches a menu already built."""
    from openprogram.decision.options import normalize
    tools = tools_list(20)
    menu = normalize(tools)
    text = menu.text
    tools[0]["function"]["parameters"]["properties"]["p0"]["description"] = "changed"
    assert menu.text == text and "changed" not in menu[0].json_schema()["properties"]["p0"].get(
        "description", "")
    tools[0]["function"]["parameters"]["properties"]["p0"]["description"] = "Parameter 0 of tool 0."
    assert normalize(tools) is menu and builds[0] == 20


@pytest.mark.parametrize("again", ["same_list", "equal_list"])
def test_a_list_served_from_the_cache_warns_as_a_list_read_afresh(builds, again):
    """A cache hit gives again the OptionWarnings the options gave when built (annotations kept
    unchecked, a parameter named decision): whether a warning is seen must not depend on an
    earlier call with the same tools (it did: a test of the warning failed when another test
    had normalized the same definition first)."""
    from openprogram.decision.options import normalize
    tools = [{"name": "block_ip", "input_schema": {"type": "object", "properties": {
        "ip": {"type": "string", "x-deprecated-alias": "address"},
        "decision": {"type": "string"}}}}]
    seen = []
    for i in range(3):
        given = tools if again == "same_list" or i == 0 else json.loads(json.dumps(tools))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            normalize(given)
        seen.append(sorted(str(w.message)[:60] for w in caught
                           if issubclass(w.category, OptionWarning)))
        assert all(w.filename == __file__ for w in caught)   # (pointing at the caller)
    assert builds[0] == 1
    assert len(seen[0]) == 2 and seen == [seen[0]] * 3


def test_a_built_menu_of_tools_keeps_few_objects_for_the_garbage_collector():
    """Case 11: a menu of 1,841 tools held ~270,000 objects the garbage collector tracks, and a
    full collection walking them took 250 ms of a decision. An option now keeps its schema, its
    parameters and what the menu shows; its compiled check is made at its first pick."""
    import gc

    from openprogram.decision.options import normalize
    openprogram.decision.options.clear_option_cache()
    tools = tools_list(200)
    gc.collect()
    before = len(gc.get_objects())
    menu = normalize(tools)
    assert menu.text and menu.infos   # (what every decision reads: made now, kept)
    gc.collect()
    per_tool = (len(gc.get_objects()) - before) / 200
    assert per_tool < 40, per_tool   # (147 before)
    assert all(o._check is None for o in menu)
    decision.make("Pick.", menu, runtime=ScriptedRuntime([menu[7].example()]))
    assert menu[7]._check is not None and sum(o._check is not None for o in menu) == 1
