"""The library's validator judges values as the `jsonschema` package does (draft 2020-12).

Over every schema of the corpus, Hypothesis draws values made to fit (the conforming arguments)
and to break them (a value anywhere in them replaced by arbitrary JSON, a key removed, arbitrary
JSON outright), and the two validators must agree on valid / invalid — except where this
project's rules deliberately differ from the specification, each named here and applied to what
`jsonschema` is given or to the values drawn:

- fields outside the schema are dropped, not refused: `additionalProperties: false` is left out
  of the schema `jsonschema` sees (P5);
- a boolean is never an integer or a number — `jsonschema` agrees, so nothing is changed for it;
- an integer-valued float (`2.0`) is not an `integer` here (a JSON `2.0` is a number a model
  wrote as one): no such float is drawn;
- `format` is asserted here (date, date-time, time, email, uri, uuid) where `jsonschema` asserts
  only the formats whose optional packages are installed, and more loosely (`"@" in s` is an
  email): `format` is left out of both sides, and is tested in test_schema_corpus.py;
- OpenAPI's `nullable: true` lets null through: `jsonschema` sees it as `anyOf [..., null]`;
- only what JSON means is drawn (finite numbers, valid Unicode; the rest is P3's own test);
- `multipleOf` is judged in decimal, as the model wrote the number (`0.07` is a multiple of
  `0.01`), where `jsonschema` divides binary floats: the oracle (`Oracle`, in
  test_schema_corpus.py) is `jsonschema`'s validator with that one keyword judged in decimal.

Those differences are the spec's forms'. A schema as written (`JsonSchema`, a tool definition:
`compile_schema(..., as_written=True)`) has none but `nullable`: the second test judges the
corpus and a schema for each keyword once refused (NEW_KEYWORDS) as `jsonschema` does, draws
integer-valued floats too, and checks that a valid value comes back as it was given.
"""
from __future__ import annotations

import copy

import jsonschema
import pytest
from corpus import all_entries
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_schema_corpus import Oracle, oracle, schema_of

from openprogram.base.errors import AttemptError
from openprogram.decision.schema.validator import compile_schema

ENTRIES = all_entries()


def without_format(schema):
    if isinstance(schema, list):
        return [without_format(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: v if k in ("enum", "const", "default", "examples") else without_format(v)
            for k, v in schema.items() if k != "format"}


def ours_valid(check, value):
    try:
        check(copy.deepcopy(value), "args", [])
    except AttemptError:
        return False
    return True


scalars = (st.none() | st.booleans() | st.integers(-2000, 2000)
           | st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).filter(
               lambda x: not x.is_integer())
           | st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
           | st.sampled_from(["", "a", "ORD-123456", "CH", "2024-03-01", "celsius", "dog",
                              "circle", "archive", "x@y.z", "https://a.b"]))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=10)


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def replaced(value, path, new):
    if not path:
        return new
    out = copy.deepcopy(value)
    target = out
    for t in path[:-1]:
        target = target[t]
    if new is _DELETE:
        if isinstance(target, dict):
            del target[path[-1]]
        else:
            target.pop(path[-1])
    else:
        target[path[-1]] = new
    return out


_DELETE = object()


@st.composite
def values_for(draw, good):
    how = draw(st.sampled_from(["good", "replace", "delete", "any"]))
    if how == "good":
        return good
    if how == "any":
        return draw(json_values)
    path = draw(st.sampled_from(list(paths(good))))
    if how == "delete" and path:
        return replaced(good, path, _DELETE)
    return replaced(good, path, draw(json_values))


@pytest.mark.parametrize("eid, definition, good", ENTRIES, ids=[e[0] for e in ENTRIES])
@settings(max_examples=60, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_validator_agrees_with_jsonschema(eid, definition, good, data):
    schema = without_format(schema_of(definition))
    check = compile_schema(schema, eid)
    theirs = Oracle(oracle(schema))
    value = data.draw(values_for(good))
    assert ours_valid(check, value) == theirs.is_valid(value), (eid, value)


def test_the_named_differences_are_real():
    """Each difference named above exists: without the adjustment, the two disagree."""
    strict = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": False}
    check = compile_schema(strict, "t")
    dropped = []
    assert check({"a": 1, "b": 2}, "args", dropped) == {"a": 1} and dropped == ["args.b"]
    assert not jsonschema.Draft202012Validator(strict).is_valid({"a": 1, "b": 2})
    assert jsonschema.Draft202012Validator(oracle(strict)).is_valid({"a": 1, "b": 2})
    assert not ours_valid(check, {"a": 2.0})
    assert jsonschema.Draft202012Validator(strict).is_valid({"a": 2.0})
    for bad in (True, False):
        assert not ours_valid(check, {"a": bad})
        assert not jsonschema.Draft202012Validator(strict).is_valid({"a": bad})
    email = {"type": "string", "format": "email"}
    assert not ours_valid(compile_schema(email, "t"), "a@")
    assert jsonschema.Draft202012Validator(
        email, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).is_valid("a@")
    nullable = {"type": "string", "nullable": True}
    assert ours_valid(compile_schema(nullable, "t"), None)
    assert not jsonschema.Draft202012Validator(nullable).is_valid(None)
    cents = {"type": "number", "multipleOf": 0.01}
    for as_written in (False, True):
        assert ours_valid(compile_schema(cents, "t", as_written=as_written), 0.07)
    assert not jsonschema.Draft202012Validator(cents).is_valid(0.07)
    assert Oracle(cents).is_valid(0.07) and not Oracle(cents).is_valid(0.075)


# -- a schema as written (JsonSchema, tool definitions): no difference but `nullable` ---------

def as_the_specification(schema):
    """What `jsonschema` sees for a schema as written: the same, OpenAPI's `nullable` spelled
    as an anyOf with null (the only word of this library's that is not the specification's)."""
    if isinstance(schema, list):
        return [as_the_specification(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v if k in ("enum", "const", "default", "examples") else as_the_specification(v)
           for k, v in schema.items()}
    if out.pop("nullable", False) is True:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


#: Schemas with the keywords once refused, each with a value that fits it.
NEW_KEYWORDS = [
    ("patternProperties", {"type": "object", "patternProperties": {
        "^x-": {"type": "string"}, "n$": {"type": "integer"}}, "additionalProperties": False},
     {"x-a": "s", "bn": 2}),
    ("propertyNames", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$",
                                                           "maxLength": 4}}, {"ab": [1]}),
    ("not", {"type": "object", "properties": {"v": {"not": {"type": ["string", "null"]}}}},
     {"v": 3}),
    ("if/then/else", {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}},
                      "if": {"properties": {"kind": {"const": "a"}}},
                      "then": {"required": ["a"]}, "else": {"required": ["b"]}},
     {"kind": "a", "a": 1}),
    ("dependentRequired", {"type": "object", "dependentRequired": {"card": ["billing"]}},
     {"card": 1, "billing": "x"}),
    ("dependentSchemas", {"type": "object", "dependentSchemas": {
        "card": {"properties": {"billing": {"type": "string"}}, "required": ["billing"]}}},
     {"card": 1, "billing": "x"}),
    ("contains", {"type": "array", "contains": {"type": "integer", "minimum": 3},
                  "minContains": 1, "maxContains": 2}, [1, 5, "a"]),
    ("unevaluatedProperties", {"type": "object", "properties": {"a": {"type": "integer"}},
                               "allOf": [{"properties": {"b": {"type": "string"}}}],
                               "unevaluatedProperties": False}, {"a": 1, "b": "s"}),
    ("unevaluatedItems", {"type": "array", "prefixItems": [{"type": "string"}],
                          "anyOf": [{"prefixItems": [True, {"type": "integer"}]}, True],
                          "unevaluatedItems": {"type": "boolean"}}, ["s", 1, True]),
    ("allOf", {"allOf": [{"properties": {"foo": {"type": "integer"}}}],
               "additionalProperties": {"type": "boolean"}}, {"bar": True}),
    ("anyOf", {"type": "object", "anyOf": [{"required": ["foo"]}, {"required": ["bar"]}],
               "properties": {"foo": {"type": "string"}, "bar": {"type": "integer"}}},
     {"foo": "baz", "bar": 2}),
    ("$anchor", {"$defs": {"n": {"$anchor": "num", "type": "number", "minimum": 0}},
                 "type": "object", "properties": {"a": {"$ref": "#num"}}}, {"a": 1.5}),
    ("boolean", {"type": "object", "properties": {"a": True, "b": False},
                 "additionalProperties": {"type": "integer"}}, {"a": None, "c": 1}),
    ("integer", {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}},
     {"n": 2.0}),
]
all_scalars = (st.none() | st.booleans() | st.integers(-20, 20)
               | st.sampled_from([0.0, 1.0, 2.0, 1.5, -3.0, 5.5])
               | st.sampled_from(["", "a", "s", "x-", "x-a", "abcde", "bn", "card", "billing"]))
all_values = st.recursive(
    all_scalars, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "b", "c", "v", "kind", "card", "billing", "foo",
                                       "bar", "x-a", "x-b", "bn", "n", "AB", "abcde"]),
                      inner, max_size=4), max_leaves=10)


@pytest.mark.parametrize("eid, definition, good",
                         [*ENTRIES, *NEW_KEYWORDS],
                         ids=[e[0] for e in [*ENTRIES, *NEW_KEYWORDS]])
@settings(max_examples=60, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_schema_as_written_is_judged_as_jsonschema_does(eid, definition, good, data):
    schema = without_format(schema_of(definition))
    check = compile_schema(schema, eid, as_written=True)
    theirs = Oracle(as_the_specification(schema))
    assert theirs.is_valid(good), eid
    how = data.draw(st.sampled_from(["near", "any"]))
    value = data.draw(values_for(good)) if how == "near" else data.draw(all_values)
    dropped = []
    try:
        got = check(copy.deepcopy(value), "args", dropped)
        ours = True
    except AttemptError:
        ours = False
    assert ours == theirs.is_valid(value), (eid, value)
    if ours:   # nothing allowed is dropped, nothing changed but 1.0 -> 1 and 1 -> 1.0
        assert dropped == [] and got == value, (eid, value, got)
