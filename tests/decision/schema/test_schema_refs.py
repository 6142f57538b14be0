"""The one rule every reader of a schema follows a `$ref` by (decision/schema/refs.py).

Each reference is also resolved by the `referencing` library (the `jsonschema` package's, draft
2020-12) as the oracle: both must land on the same subschema.
"""
from __future__ import annotations

import pytest
import referencing
import referencing.jsonschema

from openprogram import OptionError
from openprogram.decision.schema.refs import Document

DOC = {
    "$id": "https://example.com/root",
    "properties": {"a": {"type": "integer"}, "": {"type": "null"}},
    "$defs": {
        "per%cent": {"type": "string"}, "a/b": {"type": "boolean"}, "t~x": {"minimum": 1},
        "": {"": {"const": "empty tokens"}},
        "R": {"$anchor": "room", "enum": ["hall"]},
        "inner": {"$id": "inner/", "$defs": {"n": {"type": "number"}},
                  "properties": {"m": {"$ref": "#/$defs/n"}}},
        "yes": True, "no": False},
    "prefixItems": [{"const": 0}, {"const": 1}]}

REFS = ["#/properties/a", "#/$defs/per%25cent", "#/$defs/a~1b", "#/$defs/t~0x", "#/$defs//",
        "#/properties/", "#room", "#/prefixItems/1", "inner/#/$defs/n", "#/$defs/yes", "#"]


@pytest.mark.parametrize("ref", REFS)
def test_each_kind_of_reference_lands_where_the_referencing_library_says(ref):
    node, _, _ = Document(DOC).resolve(ref, "https://example.com/root")
    resource = referencing.jsonschema.DRAFT202012.create_resource(DOC)
    registry = referencing.Registry().with_resource(DOC["$id"], resource)
    expected = registry.resolver(base_uri=DOC["$id"]).lookup(ref).contents
    assert node is expected


def test_a_reference_inside_an_id_resolves_against_that_resource():
    doc = Document(DOC).scan()
    inner = DOC["$defs"]["inner"]
    base = doc.base_of(inner["properties"]["m"])
    assert base == "https://example.com/inner/"
    assert doc.resolve("#/$defs/n", base)[0] is inner["$defs"]["n"]


def test_follow_merges_the_referring_nodes_own_keywords_and_names_the_target():
    doc = Document(DOC)
    node, _, name = doc.follow({"$ref": "#/$defs/per%25cent", "maxLength": 3})
    assert node == {"type": "string", "maxLength": 3} and name == "per%cent"
    assert doc.follow({"$ref": "#room"})[2] == "room"
    assert doc.follow({"$ref": "#/$defs/yes", "type": "string"})[0] == {"type": "string"}
    assert doc.follow({"$ref": "#/$defs/no", "type": "string"})[0] is False


@pytest.mark.parametrize("ref, words", [
    ("https://other.example/s.json", "another document, which is not fetched; inline"),
    ("#/$defs/missing", "points at nothing; define it under $defs"),
    ("#nowhere", "names the anchor 'nowhere', which no $anchor of the schema defines"),
    (3, "$ref takes a URI reference, got 3")])
def test_what_cannot_be_followed_is_an_option_error_naming_the_reference(ref, words):
    with pytest.raises(OptionError) as err:
        Document(DOC, "tool 'x'").resolve(ref, "https://example.com/root", "#/properties/q")
    assert words in str(err.value) and str(err.value).startswith("tool 'x': ")
    assert "(at #/properties/q of the schema)" in str(err.value)
