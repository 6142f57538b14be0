"""A reference in an option's schema means the same schema in menu, tools and json_schema mode.

json_schema mode places each option's argument schema below the decision schema's root, where
`#/properties/a`, `#`, an `$anchor` or a reference relative to an `$id` would otherwise point at
the wrong place (`decision_schema` rewrites them with `refs.embed`). The oracle is the
`jsonschema` package on the option's schema as written: the schema each mode sends, read by
`jsonschema`, and the library's own check of the reply, must accept exactly the arguments the
oracle accepts.
"""
from __future__ import annotations

import json

import jsonschema
import pytest

import openprogram
from openprogram import DecisionError, ToolCall, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import ScriptedRuntime

ORDER = {
    "$id": "https://example.com/order",
    "type": "object",
    "properties": {
        "item": {"type": "object", "properties": {"sku": {"type": "string",
                                                          "pattern": "^[A-Z]+$"}},
                 "required": ["sku"]},
        "again": {"$ref": "#/properties/item"},    # a pointer to a property
        "tree": {"$ref": "#/$defs/node"},          # a recursive definition
        "size": {"$ref": "#size"},                 # an anchor
        "pct": {"$ref": "#/$defs/per%25cent"},     # a percent-encoded token
        "flag": {"$ref": "#/$defs/a~1b"},          # a `~1`-escaped token
        "count": {"$ref": "parts/#/$defs/n"},      # relative to an embedded resource's $id
        "self": {"$ref": "#"},                     # the root: recursion through the document
        "abs": {"$ref": "https://example.com/order#/properties/item"},   # the root's own URI
    },
    "$defs": {
        "node": {"type": "object", "additionalProperties": False,
                 "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
        "sz": {"$anchor": "size", "enum": ["S", "M"]},
        "per%cent": {"type": "integer", "maximum": 100},
        "a/b": {"type": "boolean"},
        "parts": {"$id": "parts/", "$defs": {"n": {"type": "number", "minimum": 0}}},
    },
    "additionalProperties": False,
}
#: A second option whose definition has the same name as the first's, and another meaning.
LABEL = {"type": "object", "properties": {"n": {"$ref": "#/$defs/node"}, "m": {"$ref": "#"}},
         "$defs": {"node": {"type": "string", "maxLength": 3}}}

GOOD = [{"item": {"sku": "AB"}, "again": {"sku": "CD"}, "tree": {"kids": [{"kids": []}]},
         "size": "S", "pct": 5, "flag": True, "count": 1.5, "self": {"size": "M", "self": {}}},
        {"again": {"sku": "Q"}, "abs": {"sku": "R"}}, {}]
BAD = [{"again": {"sku": "ab"}}, {"again": {}}, {"tree": {"kids": [{"kids": [], "x": 1}]}},
       {"size": "L"}, {"pct": 101}, {"flag": 1}, {"count": -1}, {"self": {"size": "XL"}},
       {"self": {"self": {"again": {"sku": "x"}}}}, {"abs": {"sku": "lower"}}]
LABEL_GOOD = [{"n": "abc", "m": {"n": "x"}}]
LABEL_BAD = [{"n": "abcd"}, {"n": {"kids": []}}, {"m": {"n": 1}}]

CASES = ([("order", a, True) for a in GOOD] + [("order", a, False) for a in BAD] +
         [("label", a, True) for a in LABEL_GOOD] + [("label", a, False) for a in LABEL_BAD])
WRITTEN = {"order": ORDER, "label": LABEL}


def options():
    return {"order": openprogram.JsonSchema(ORDER), "label": openprogram.JsonSchema(LABEL)}


def test_the_cases_are_what_the_oracle_says():
    for name, args, valid in CASES:
        assert jsonschema.Draft202012Validator(WRITTEN[name]).is_valid(args) is valid, args


def test_the_decision_schema_accepts_exactly_what_each_options_schema_accepts():
    """The json_schema mode's one document, read by `jsonschema`: each pick's arguments are
    judged as the option's own schema judges them (none of its references points elsewhere)."""
    sent = decision_schema(normalize(options()))
    jsonschema.Draft202012Validator.check_schema(sent)
    check = jsonschema.Draft202012Validator(sent)
    for name, args, valid in CASES:
        assert check.is_valid({"decision": {"call": name, "args": args}}) is valid, (name, args)
    # every reference is now one a provider follows: a plain name under the root's $defs
    refs = {m for m in json.dumps(sent).split('"$ref": ')[1:]}
    assert all(r.startswith('"#/$defs/') for r in refs)
    # the two options' `node` definitions stay two definitions
    assert sent["$defs"]["node"] != sent["$defs"]["node-2"]


@pytest.mark.parametrize("mode", ["menu", "tools", "json_schema"])
@pytest.mark.parametrize("name,args,valid", CASES)
def test_each_mode_delivers_or_re_asks_as_the_oracle_judges(mode, name, args, valid):
    reply = {"menu": json.dumps({"call": name, "args": args}),
             "tools": ToolCall(name, args),
             "json_schema": json.dumps({"decision": {"call": name, "args": args}})}[mode]
    rt = ScriptedRuntime([reply])
    if valid:
        assert decision.make("Pick.", options(), runtime=rt, mode=mode,
                             max_retries=0) == {"decision": name, **args}
    else:
        with pytest.raises(DecisionError):
            decision.make("Pick.", options(), runtime=rt, mode=mode, max_retries=0)
    sent = rt.calls[0]
    if mode == "tools":   # the tool's parameters are the option's schema at its own root
        params = {t["name"]: t["parameters"] for t in sent.tools}[name]
        assert jsonschema.Draft202012Validator(params).is_valid(args) is valid
    if mode == "json_schema":
        schema = sent.mode_args["response_format"]["schema"]
        assert jsonschema.Draft202012Validator(schema).is_valid(
            {"decision": {"call": name, "args": args}}) is valid


def test_the_strict_rewrite_sends_a_recursive_reference_through_the_roots_defs():
    """`#` and `#/properties/...` inside a pick, rewritten to `#/$defs/Name`, are what strict
    mode follows, recursion included: the strict schema judges the picks as the option does."""
    from openprogram.runtimes.providers.strict_schema import to_strict
    tree = {"type": "object", "additionalProperties": False, "required": ["label", "kids"],
            "properties": {"label": {"type": "string"},
                           "kids": {"type": "array", "items": {"$ref": "#"}},
                           "twin": {"$ref": "#/properties/label"}}}
    sent = decision_schema(normalize({"tree": openprogram.JsonSchema(tree)}))
    strict = to_strict(sent)
    args = strict["properties"]["decision"]["properties"]["args"]
    assert args["properties"]["kids"]["items"] == {"$ref": "#/$defs/root"}
    assert strict["$defs"]["root"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/root"}
    check = jsonschema.Draft202012Validator(strict)
    good = {"label": "a", "kids": [{"label": "b", "kids": [], "twin": None}], "twin": "c"}
    assert jsonschema.Draft202012Validator(tree).is_valid(
        {**good, "kids": [{"label": "b", "kids": []}]})
    assert check.is_valid({"decision": {"call": "tree", "args": good}})
    assert not check.is_valid({"decision": {"call": "tree", "args": {
        **good, "kids": [{"label": 1, "kids": [], "twin": None}]}}})


def test_the_llama_cpp_grammar_of_a_decision_with_references_is_built_and_parsed():
    """The grammar reads the decision schema's root `$defs` (where the picks' references now
    point) and keeps its decision shape: the option's name first, then its arguments."""
    from llama_cpp.llama_grammar import LlamaGrammar

    from openprogram.runtimes.llamacpp import decision_grammar
    from openprogram.runtimes.llamacpp.grammar import _picks
    from openprogram.runtimes.llamacpp.loose_schema import for_grammar
    readable, _ = for_grammar(decision_schema(normalize(options())))
    assert [name for name, _ in _picks(readable)] == ["order", "label"]
    grammar = decision_grammar(readable)
    LlamaGrammar.from_string(grammar, verbose=False)
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    assert rules["pick0"].startswith('"\\"order\\""')
    assert any(k.startswith("node-2") for k in rules) and "maxLength" not in grammar
