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


def test_the_spec_form_still_refuses_a_field_named_decision():
    """The spec form's schema is the caller's own code (rule O1, docs/rules.md): renaming the
    field is theirs to do, and the message says so."""
    with pytest.raises(openprogram.OptionError, match="cannot have a field 'decision'"):
        decision.make("Fill it.", {"form": ("Fill.", {"decision": str})},
                      runtime=ScriptedRuntime([]))
