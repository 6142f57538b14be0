"""A schema of the user's means what JSON Schema says: nothing it allows is dropped or changed.

For `JsonSchema(...)` and tool definitions: keys the schema allows are delivered, `anyOf` judges
without filtering, `1.0` is an integer (delivered as `1`), `allOf` keeps each part's
`additionalProperties` to its own properties; the menu and the re-ask show text as written.
The spec's own forms (Python signatures) still drop and record keys outside their parameters.
Each expectation is checked against the `jsonschema` package too.
"""
from __future__ import annotations

import json

import jsonschema
import pytest
from test_schema_corpus import Oracle

import openprogram
from openprogram import DecisionError, decision
from openprogram.decision.options import normalize, render_menu
from openprogram.runtimes import ScriptedRuntime


def reply(name, args):
    return json.dumps({"call": name, "args": args})


def fill(schema, *args_list, **kw):
    rt = ScriptedRuntime([reply("fill", a) for a in args_list])
    got = decision.make("Fill it.", {"fill": openprogram.JsonSchema(schema)}, runtime=rt, **kw)
    return got, decision.last_trace(), rt


# The Berkeley Function Calling Leaderboard's live-set tool whose request body went missing.
SEND_HTTP_REQUEST = {"type": "function", "function": {
    "name": "sendHttpRequest", "description": "Send an HTTP request.",
    "parameters": {"type": "object", "required": ["url", "method"], "properties": {
        "url": {"type": "string"}, "method": {"type": "string", "enum": ["GET", "POST"]},
        "data": {"type": "object", "description": "The request body.",
                 "properties": {"key1": {"type": "string"}, "key2": {"type": "string"}}}}}}}


def test_keys_a_tool_schema_allows_are_delivered():
    args = {"url": "https://example.org/users", "method": "POST",
            "data": {"name": "Ann", "email": "ann@example.org"}}
    assert jsonschema.Draft202012Validator(
        SEND_HTTP_REQUEST["function"]["parameters"]).is_valid(args)
    rt = ScriptedRuntime([reply("sendHttpRequest", args)])
    got = decision.make("Send it.", [SEND_HTTP_REQUEST], runtime=rt)
    assert got == {"decision": "sendHttpRequest", **args}
    assert decision.last_trace().attempts[0].dropped == []


def test_additional_properties_false_refuses_other_keys_instead_of_dropping():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": False}
    got, trace, rt = fill(schema, {"a": 1, "b": 2}, {"a": 1})
    assert got == {"decision": "fill", "a": 1}
    first = trace.attempts[0]
    assert (first.error_kind, first.error_path) == ("invalid_value", "args.b")
    assert "args.b is not allowed" in rt.calls[1].prompt


def test_any_of_judges_without_filtering_the_value():
    # The issue's case: valid under both branches, it came back filtered through the first.
    schema = {"type": "object", "properties": {"v": {"anyOf": [
        {"properties": {"bar": {"type": "integer"}}, "required": ["bar"]},
        {"properties": {"foo": {"type": "string"}}, "required": ["foo"]}]}}}
    value = {"foo": "baz", "bar": 2}
    assert jsonschema.Draft202012Validator(schema).is_valid({"v": value})
    got, trace, _ = fill(schema, {"v": value})
    assert got == {"decision": "fill", "v": value} and trace.attempts[0].dropped == []


def test_an_integer_valued_float_is_an_integer_delivered_as_one():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minLength": 1.0}}}
    got, _, _ = fill(schema, {"n": 2.0})
    assert got == {"decision": "fill", "n": 2} and type(got["n"]) is int
    with pytest.raises(DecisionError):
        fill(schema, {"n": 2.5}, max_retries=0)
    # the same where schemaeval.py judges (here for `not` and allOf): 2.0 arrives as 2
    schema = {"type": "object", "properties": {
        "n": {"type": "integer", "not": {"const": 3}},
        "m": {"type": "array", "items": {"allOf": [{"type": "integer"}]}},
        "x": {"type": "number", "not": {"const": 3}}}}
    got, _, _ = fill(schema, {"n": 2.0, "m": [1.0, 2], "x": 2.0})
    assert got == {"decision": "fill", "n": 2, "m": [1, 2], "x": 2.0}
    assert [type(got["n"]), *map(type, got["m"]), type(got["x"])] == [int, int, int, float]


def test_an_integer_valued_float_in_a_branch_that_says_integer_is_delivered_as_one():
    # anyOf / oneOf: the first alternative the value fits; if: then or else, as the value goes;
    # pattern-keyed and other properties and dependentSchemas too (`not` sends the document
    # to schemaeval.py, which judges all of these)
    schema = {"type": "object", "not": {"required": ["never"]}, "properties": {
        "a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "o": {"oneOf": [{"type": "object", "properties": {"n": {"type": "integer"}},
                         "required": ["n"]},
                        {"type": "object", "properties": {"s": {"type": "string"}},
                         "required": ["s"]}]},
        "i": {"if": {"type": "number", "minimum": 10}, "then": {"type": "integer"},
              "else": {"type": "number"}},
        "j": {"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "integer"}},
        "p": {"patternProperties": {"^n_": {"type": "integer"}},
              "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        "d": {"dependentSchemas": {"k": {"properties": {"k": {"type": "integer"}}}}}}}
    value = {"a": 1.0, "o": {"n": 2.0}, "i": 12.0, "j": 3.0, "p": {"n_x": 4.0, "y": 5.0},
             "d": {"k": 6.0}}
    assert jsonschema.Draft202012Validator(schema).is_valid(value)
    got, _, _ = fill(schema, value)
    assert got == {"decision": "fill", "a": 1, "o": {"n": 2}, "i": 12, "j": 3,
                   "p": {"n_x": 4, "y": 5}, "d": {"k": 6}}
    ints = [got["a"], got["o"]["n"], got["i"], got["j"], got["p"]["n_x"], got["p"]["y"],
            got["d"]["k"]]
    assert [type(x) for x in ints] == [int] * 7
    # a branch that says number (or no type) keeps the float as the model wrote it
    got, _, _ = fill(schema, {"i": 2.0, "a": "x"})
    assert got == {"decision": "fill", "i": 2.0, "a": "x"} and type(got["i"]) is float
    # the same through validator.py (no keyword of schemaeval.py's): anyOf's first fit
    plain = {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"},
                                                             {"type": "integer"}]}}}
    got, _, _ = fill(plain, {"a": 1.0})
    assert got == {"decision": "fill", "a": 1} and type(got["a"]) is int


#: References to every kind of place, as draft 2020-12 resolves them (schema/refs.py).
REFERENCES = {"type": "object", "properties": {
    "a": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 1}}},
    "b": {"$ref": "#/properties/a"},                       # a pointer to a property
    "c": {"$ref": "#/$defs/per%25cent"},                   # percent-encoded
    "d": {"$ref": "#/$defs/a~1b"},                         # ~1 for a slash in the name
    "e": {"$ref": "#room"},                                # an $anchor
    "f": {"$ref": "https://example.com/inner#/$defs/n"}},  # through an $id
    "$defs": {"per%cent": {"type": "string", "maxLength": 3},
              "a/b": {"type": "array", "items": {"type": "boolean"}},
              "R": {"$anchor": "room", "enum": ["거실", "hall"]},
              "inner": {"$id": "https://example.com/inner",
                        "$defs": {"n": {"type": "number", "maximum": 9}}}}}


def test_a_reference_to_any_place_in_the_document_shows_resolved_in_the_menu():
    menu = render_menu(normalize({"fill": openprogram.JsonSchema(REFERENCES)}))
    assert "- b (object, optional)\n      - b.x (int, optional); >= 1" in menu
    assert "- c (str, optional); at most 3 characters" in menu
    assert "- d (list[bool], optional)" in menu
    assert '- e (room, optional); one of: "거실", "hall"' in menu
    assert "- f (float, optional); <= 9" in menu
    assert '"b": {"x": 1}, "c": "<str>", "d": [false], "e": "거실", "f": 0.0' in menu
    # and the validator follows each the same way, as the jsonschema package does
    v = jsonschema.Draft202012Validator(REFERENCES)
    good = {"b": {"x": 2}, "c": "abc", "d": [True], "e": "hall", "f": 9}
    assert v.is_valid(good)
    assert fill(REFERENCES, good)[0] == {"decision": "fill", **good}
    for bad in ({"b": {"x": 0}}, {"c": "abcd"}, {"d": [1]}, {"e": "attic"}, {"f": 10}):
        assert not v.is_valid(bad)
        with pytest.raises(DecisionError):
            fill(REFERENCES, bad, max_retries=0)


def test_type_names_are_the_menus_in_the_validators_messages():
    # one naming (reader.type_name) for the menu and the error: list[str], not "list"
    schema = {"type": "object", "properties": {"tags": {"type": "array",
                                                        "items": {"type": "string"}}}}
    menu = render_menu(normalize({"fill": openprogram.JsonSchema(schema)}))
    assert "- tags (list[str], optional)" in menu
    got, trace, rt = fill(schema, {"tags": "x"}, {"tags": ["x"]})
    assert got == {"decision": "fill", "tags": ["x"]}
    assert "args.tags must be list[str], got" in trace.attempts[0].error_message


def test_all_of_keeps_each_parts_additional_properties_to_its_own_properties():
    # Flattened, `bar` looked evaluated by the sibling; as the specification reads it, `foo`
    # is not among the root's own properties, so additionalProperties judges it (and 1 fails).
    schema = {"type": "object", "properties": {"v": {
        "allOf": [{"properties": {"foo": {}}}], "additionalProperties": {"type": "boolean"}}}}
    v = jsonschema.Draft202012Validator(schema)
    assert not v.is_valid({"v": {"foo": 1, "bar": True}}) and v.is_valid({"v": {"foo": True}})
    with pytest.raises(DecisionError):
        fill(schema, {"v": {"foo": 1, "bar": True}}, max_retries=0)
    assert fill(schema, {"v": {"foo": True}})[0] == {"decision": "fill", "v": {"foo": True}}


def test_boolean_subschemas_anywhere_build_and_judge():
    schema = {"type": "object", "$defs": {"any": True, "none": False}, "properties": {
        "meta": {"type": "object", "properties": {"a": True, "b": False}},
        "r": {"$ref": "#/$defs/any"}, "both": {"allOf": [True, {"type": "string"}]}}}
    menu = render_menu(normalize({"fill": openprogram.JsonSchema(schema)}))
    assert "- meta.b (any, optional); must not be given (the schema allows no value)" in menu
    assert "- both (str, optional)" in menu     # allOf [true, X] is X
    assert '"args": {"meta": {"a": "<any>"}, "r": "<any>", "both": "<str>"}' in menu
    got, _, _ = fill(schema, {"meta": {"a": [1]}, "r": None, "both": "x"})
    assert got == {"decision": "fill", "meta": {"a": [1]}, "r": None, "both": "x"}
    with pytest.raises(DecisionError):
        fill(schema, {"meta": {"b": 1}}, max_retries=0)


def test_the_menu_and_the_reask_show_non_ascii_text_as_written():
    schema = {"type": "object", "properties": {"room": {"enum": ["거실", "주방"]}},
              "required": ["room"]}
    menu = render_menu(normalize({"fill": openprogram.JsonSchema(schema)}))
    assert 'one of: "거실", "주방"' in menu and "\\uac70" not in menu
    got, _, rt = fill(schema, {"room": "방"}, {"room": "주방"})
    assert got == {"decision": "fill", "room": "주방"}
    assert '"거실", "주방"' in rt.calls[1].prompt and "\\uac70" not in rt.calls[1].prompt


def test_the_menu_says_what_each_new_keyword_asks():
    schema = {"type": "object", "properties": {
        "x": {"type": "object", "patternProperties": {"^x-": {"type": "string"}},
              "propertyNames": {"maxLength": 8}, "unevaluatedProperties": False},
        "n": {"not": {"type": "null"}},
        "c": {"type": "array", "contains": {"type": "integer"}, "maxContains": 2},
        "k": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
        "d": {"type": "object", "dependentRequired": {"card": ["billing"]}}}}
    menu = render_menu(normalize({"fill": openprogram.JsonSchema(schema)}))
    for words in ('keys matching the pattern "^x-" hold str', "every key is at most 8 characters",
                  "no keys other than those described", "must not be null",
                  "holds 1 to 2 item(s) that are int",
                  "if it is str, then it must be at least 2 characters; otherwise it must be int",
                  "when card is given, billing must be too"):
        assert words in menu, (words, menu)

    # rules over the arguments as a whole get a line of their own
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]},
                                               "card": {"type": "string"}},
              "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["card"]},
              "else": {"properties": {"card": False}}, "dependentRequired": {"card": ["kind"]}}
    menu = render_menu(normalize({"pay": openprogram.JsonSchema(schema)}))
    assert ('- the arguments together: if kind = "a", then card must be given; otherwise card '
            'must not be given; when card is given, kind must be too') in menu, menu


def test_openapi_numeric_formats_are_bounds_not_warnings():
    import warnings
    schema = {"type": "object", "properties": {"n": {"type": "integer", "format": "int32"},
                                               "f": {"type": "number", "format": "double"}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        normalize({"fill": openprogram.JsonSchema(schema)})
    assert fill(schema, {"n": 5, "f": 1.5})[0] == {"decision": "fill", "n": 5, "f": 1.5}
    with pytest.raises(DecisionError):
        fill(schema, {"n": 2 ** 31}, max_retries=0)


def test_the_spec_forms_still_drop_and_record_keys_outside_the_parameters():
    def order(item: str) -> str:
        return item
    rt = ScriptedRuntime([reply("order", {"item": "tea", "size": "large"})])
    assert decision.make("Order.", [order], runtime=rt) == "tea"
    assert decision.last_trace().attempts[0].dropped == ["args.size"]


@pytest.mark.parametrize("schema, words", [
    ({"type": "strnig"}, "type must be"),
    ({"minimum": "3"}, "minimum takes a number"),
    ({"$ref": "#/$defs/nowhere"}, "points at nothing"),
    ({"$id": "urn:v", "$ref": "#/$defs/percent%25field",
      "$defs": {"percent%field": {"type": "string"}}, "minimum": "x"}, "minimum takes a number"),
    ({"not": {"$ref": "#/$defs/nowhere"}}, "points at nothing"),
    ({"patternProperties": {"(": {}}}, "is not a regular expression"),
    ({"$id": "urn:v", "$ref": "#/$defs/a",
      "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},
     "cycle with no properties or items"),
    ({"$id": "urn:v", "$defs": {"a": {"not": {"allOf": [{"$ref": "#/$defs/a"}]}}}},
     "cycle with no properties or items"),
    ({"$ref": "https://example.org/address.json"}, "inline that schema under $defs"),
    ({"$id": "urn:v", "$ref": "#/$defs/a", "$defs": {"a": {"$dynamicRef": "#x"}}},
     "$dynamicRef"),
    (json.loads('{"items": ' * 300 + '{}' + '}' * 300), "deeper than 64 levels"),
])
def test_a_schema_that_is_not_json_schema_is_refused_at_build_naming_where(schema, words):
    with pytest.raises(openprogram.OptionError, match="at #/properties/v") as err:
        normalize({"fill": openprogram.JsonSchema({"type": "object", "properties": {"v": schema}})})
    assert words in str(err.value)


def test_the_tools_and_json_schema_modes_send_allof_as_given():
    from openprogram.decision.modes import JsonSchemaMode, ToolsMode
    schema = {"type": "object", "properties": {"v": {
        "allOf": [{"properties": {"foo": {}}}], "additionalProperties": {"type": "boolean"}}}}
    menu = normalize({"fill": openprogram.JsonSchema(schema)})
    assert menu[0].json_schema()["properties"] == schema["properties"]
    tool = ToolsMode(menu).request()["tools"][0]
    assert json.dumps(schema["properties"]) in json.dumps(tool)
    sent = JsonSchemaMode(menu).request()
    assert json.dumps(schema["properties"]) in json.dumps(sent)


@pytest.mark.parametrize("fmt, text, valid", [
    ("time", "12:00:00", False),               # RFC 3339: the offset is required
    ("time", "12:00:00+24:00", False), ("time", "12:00:00+00:60", False),
    ("time", "12:00:60Z", False), ("time", "23:59:60Z", True),   # a leap second at 23:59 UTC
    ("time", "15:59:60-08:00", True), ("date-time", "1998-12-31T23:59:60Z", True),
    ("date-time", "1998-12-31T12:59:60Z", False), ("date-time", "2024-02-30T10:00:00Z", False),
    ("uri", "https://example.org/foobar<>.txt", False), ("uri", "http://example.com/%", False),
    ("uri", "http://example.com:abc/path", False), ("uri", "urn:isbn:0451450523", True),
    ("email", ".test@example.com", False), ("email", "te..st@example.com", False),
    ("email", "joe.bloggs@[127.0.0.300]", False), ("email", '"joe bloggs"@example.com', True),
    ("email", "joe@[IPv6:::1]", True), ("duration", "P1DT2H", True), ("duration", "PT", False),
    ("hostname", "-a.example", False), ("ipv4", "127.0.0.01", False), ("ipv6", "::1%eth0", False),
    ("json-pointer", "/a~2", False), ("regex", "^(a", False),
    ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380", True),
])
def test_formats_are_checked_as_their_rfcs_write_them(fmt, text, valid):
    """The issue's false acceptances and rejections, and a case of each other format, through
    a decision; the `jsonschema` package's checker agrees wherever it has one installed."""
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    # (its email and uri checks are looser than the RFCs, and it refuses leap seconds, which the
    # official suite counts valid: there the suite is the oracle)
    if fmt in checker.checkers and fmt not in ("email", "uri") and ":60" not in text:
        assert checker.conforms(text, fmt) == valid, "the oracle disagrees"
    if valid:
        assert fill(schema, {"v": text})[0] == {"decision": "fill", "v": text}
    else:
        with pytest.raises(DecisionError) as err:
            fill(schema, {"v": text}, max_retries=0)
        assert f"must be in the format {fmt}" in str(err.value.trace.attempts[0].error_message)


def test_every_format_placeholder_in_the_call_example_is_valid_as_written():
    from openprogram.decision.schema.reply_values import FORMAT_CHECKS
    schema = {"type": "object", "properties": {
        f.replace("-", "_"): {"type": "string", "format": f} for f in FORMAT_CHECKS}}
    menu = render_menu(normalize({"fill": openprogram.JsonSchema(schema)}))
    call = json.loads(menu.rsplit("Call: ", 1)[1].splitlines()[0])
    assert set(call["args"]) == {f.replace("-", "_") for f in FORMAT_CHECKS}
    for f in FORMAT_CHECKS:
        assert FORMAT_CHECKS[f](call["args"][f.replace("-", "_")]), f
    assert fill(schema, call["args"])[0] == {"decision": "fill", **call["args"]}


@pytest.mark.parametrize("multiple,value", [(0.5, 1e308), (0.123456789, 1e308), (0.5, 1.25),
                                            (3, 9.0), (0.1, 0.3)])
def test_multiple_of_is_judged_as_jsonschema_judges_it_where_the_quotient_overflows(multiple,
                                                                                   value):
    """`1e308 / 0.5` is past a float's range: the check is still exact, in the option's
    validator as in schemaeval (both use value_keywords.not_multiple). The oracle judges
    `multipleOf` in decimal, as the project does (test_schema_corpus.Oracle): `0.3` is a
    multiple of `0.1`, which `jsonschema`'s own binary division denies."""
    schema = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": multiple}}}
    valid = Oracle(schema).is_valid({"x": value})
    if valid:
        assert fill(schema, {"x": value}, max_retries=0)[0] == {"decision": "fill", "x": value}
    else:
        with pytest.raises(DecisionError, match="must be a multiple of"):
            fill(schema, {"x": value}, max_retries=0)
    wrapped = {**schema, "properties": {"x": {"not": {"not": schema["properties"]["x"]}}}}
    assert Oracle(wrapped).is_valid({"x": value}) is valid
    if valid:   # (through `not`, schemaeval judges it)
        assert fill(wrapped, {"x": value}, max_retries=0)[0] == {"decision": "fill", "x": value}
    else:
        with pytest.raises(DecisionError):
            fill(wrapped, {"x": value}, max_retries=0)
