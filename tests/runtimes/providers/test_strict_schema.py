"""OpenAI strict mode's schema rules, checked by a checker written here from the documented rules
(platform.openai.com, Structured Outputs, "Supported schemas") and independent of the transform:
what `to_strict` makes follows them, what cannot follow them is refused with the reason, and a
reply to the strict schema, its forced nulls removed, is the value the original schema meant."""
import copy
from typing import Literal, Optional

import jsonschema
import pytest

from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes.providers.strict_schema import (
    NotStrict,
    api_name,
    strip_forced_nulls,
    to_strict,
)

# -- the documented rules, as a checker ---------------------------------------------------------

TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
COMMON = {"type", "description", "title", "enum", "const", "anyOf", "$ref"}
PER_TYPE = {"string": {"pattern", "format"},
            "number": {"multipleOf", "maximum", "exclusiveMaximum", "minimum",
                       "exclusiveMinimum"},
            "integer": {"multipleOf", "maximum", "exclusiveMaximum", "minimum",
                        "exclusiveMinimum"},
            "array": {"items", "minItems", "maxItems"},
            "object": {"properties", "required", "additionalProperties"}}
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def violations(schema: dict) -> list[str]:
    """Every way `schema` breaks a documented strict-mode rule."""
    out: list[str] = []
    stats = {"props": 0, "enum": 0, "chars": 0, "depth": 0}
    if schema.get("type") != "object" and "object" not in (schema.get("type") or []):
        out.append("root: not an object")
    if "anyOf" in schema:
        out.append("root: anyOf")

    def visit(s, path, depth, root=False):
        if not isinstance(s, dict):
            out.append(f"{path}: not a schema")
            return
        types = s.get("type")
        types = [types] if isinstance(types, str) else list(types or [])
        if not types and not {"anyOf", "$ref"} & set(s):
            out.append(f"{path}: no type")
        for t in types:
            if t not in TYPES:
                out.append(f"{path}: unknown type {t}")
        allowed = COMMON.union(*(PER_TYPE.get(t, set()) for t in types))
        if root:
            allowed |= {"$defs", "definitions"}
        for k in s:
            if k not in allowed:
                out.append(f"{path}: keyword {k!r} not supported")
        if s.get("format") is not None and s["format"] not in FORMATS:
            out.append(f"{path}: format {s['format']!r}")
        if "object" in types:
            depth += 1
            stats["depth"] = max(stats["depth"], depth)
            props = s.get("properties")
            if not isinstance(props, dict):
                out.append(f"{path}: object without properties")
                props = {}
            if s.get("additionalProperties") is not False:
                out.append(f"{path}: additionalProperties is not false")
            if sorted(s.get("required") or []) != sorted(props):
                out.append(f"{path}: not every property is required")
            stats["props"] += len(props)
            stats["chars"] += sum(map(len, props))
            for k, v in props.items():
                visit(v, f"{path}.{k}", depth)
        if "array" in types:
            visit(s.get("items"), f"{path}[]", depth)
        for i, v in enumerate(s.get("anyOf") or []):
            visit(v, f"{path}|{i}", depth)
        if "enum" in s:
            stats["enum"] += len(s["enum"])
            strs = [v for v in s["enum"] if isinstance(v, str)]
            stats["chars"] += sum(map(len, strs))
            if len(s["enum"]) > 250 and sum(map(len, strs)) > 15000:
                out.append(f"{path}: big enum too long")
        if isinstance(s.get("const"), str):
            stats["chars"] += len(s["const"])
        for key in ("$defs", "definitions"):
            for name, d in (s.get(key) or {}).items():
                stats["chars"] += len(name)
                visit(d, f"{key}.{name}", 0)

    visit(schema, "$", 0, root=True)
    if stats["props"] > 5000:
        out.append("more than 5000 properties")
    if stats["depth"] > 10:
        out.append("more than 10 levels of nesting")
    if stats["enum"] > 1000:
        out.append("more than 1000 enum values")
    if stats["chars"] > 120_000:
        out.append("more than 120000 characters")
    return out


# -- the option sets and schemas used ------------------------------------------------------------

def greet(name: str, loud: bool = False, times: Optional[int] = None,  # noqa: UP045 (typing's)
          mood: Literal["calm", "glad"] = "calm", tags: list[str] = ()) -> str:
    """Greet someone."""
    return f"{name} loud={loud} times={times} mood={mood} tags={list(tags)}"


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left"),
           "note": ("Write a note.", {"text": str, "where": {"room": str, "floor": int}})}


def test_the_checker_catches_what_strict_mode_rejects():
    """The checker is not one that passes anything: the raw decision schema breaks the rules
    (optional parameters not required, a nested object not closed, a const without a type)."""
    problems = violations(decision_schema(normalize(OPTIONS)))
    assert any("not every property is required" in p for p in problems)
    assert any("additionalProperties is not false" in p for p in problems)
    assert any("no type" in p for p in problems)


def test_a_decision_schema_made_strict_follows_every_rule():
    original = decision_schema(normalize(OPTIONS))
    before = copy.deepcopy(original)
    strict = to_strict(original)
    assert violations(strict) == []
    assert original == before  # the mode's schema is not changed in place
    greet_args = strict["properties"]["decision"]["anyOf"][0]["properties"]["args"]
    props = greet_args["properties"]
    assert greet_args["required"] == ["name", "loud", "times", "mood", "tags"]
    assert props["name"] == {"type": "string"}                   # required: as it was
    assert props["loud"] == {"type": ["boolean", "null"]}        # optional: nullable
    assert props["times"] == {"type": ["integer", "null"]}       # nullable already: as it was
    assert props["mood"] == {"anyOf": [{"type": "string", "enum": ["calm", "glad"]},
                                       {"type": "null"}]}
    assert props["tags"] == {"anyOf": [{"type": "array", "items": {"type": "string"}},
                                       {"type": "null"}]}
    note = strict["properties"]["decision"]["anyOf"][2]["properties"]["args"]
    assert note["properties"]["where"]["additionalProperties"] is False
    assert strict["properties"]["decision"]["anyOf"][1]["properties"]["call"] == \
        {"const": "done", "type": "string"}


def test_unsupported_keywords_are_dropped_and_references_with_siblings_inlined():
    schema = {
        "type": "object", "title": "Order",
        "$defs": {"Item": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 8},
            "qty": {"type": "integer", "minimum": 1, "default": 1}},
            "required": ["sku"]}},
        "properties": {
            "item": {"$ref": "#/$defs/Item", "description": "the item"},
            "others": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "uniqueItems": True,
                       "maxItems": 3},
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "uri"},
            "kind": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "size": {"allOf": [{"type": "number", "maximum": 9}]},
            "odd": {"type": "string", "not": {"const": "x"}, "examples": ["y"]}},
        "required": ["item", "others", "when", "site", "kind", "size", "odd"]}
    strict = to_strict(schema)
    assert violations(strict) == []
    p = strict["properties"]
    assert p["item"]["description"] == "the item" and "$ref" not in p["item"]
    assert p["item"]["properties"]["sku"] == {"type": "string", "pattern": "^[A-Z]+$"}
    assert p["item"]["properties"]["qty"] == {"type": ["integer", "null"], "minimum": 1}
    assert p["others"] == {"type": "array", "items": {"$ref": "#/$defs/Item"}, "maxItems": 3}
    assert strict["$defs"]["Item"]["additionalProperties"] is False
    assert p["when"]["format"] == "date-time" and "format" not in p["site"]
    assert p["kind"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert p["size"] == {"type": "number", "maximum": 9}
    assert p["odd"] == {"type": "string"}
    assert strict["title"] == "Order"


def test_references_strict_mode_does_not_follow_are_resolved_by_the_one_rule_and_written_out():
    # strict mode follows #/$defs/Name and #; a pointer to a property, an escaped name, an
    # anchor or a reference through an $id is resolved as the validator and the menu resolve
    # it (decision/schema/refs.py) and written out in place
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
              "additionalProperties": False},
        "b": {"$ref": "#/properties/a"}, "c": {"$ref": "#/$defs/per%25cent"},
        "e": {"$ref": "#room"}, "f": {"$ref": "https://example.com/inner"},
        "g": {"$ref": "#/$defs/Plain"}},
        "required": ["a", "b", "c", "e", "f", "g"],
        "$defs": {"per%cent": {"type": "string"}, "R": {"$anchor": "room", "enum": ["x", "y"]},
                  "Plain": {"type": "boolean"},
                  "inner": {"$id": "https://example.com/inner", "type": "number"}}}
    strict = to_strict(schema)
    assert violations(strict) == []
    p = strict["properties"]
    assert p["b"] == p["a"] == {"type": "object", "properties": {"x": {"type": "integer"}},
                                "required": ["x"], "additionalProperties": False}
    assert p["c"] == {"type": "string"} and p["e"] == {"enum": ["x", "y"], "type": "string"}
    assert p["f"] == {"type": "number"} and p["g"] == {"$ref": "#/$defs/Plain"}
    recursive = {"type": "object", "properties": {"n": {"$ref": "#node"}}, "$defs": {"N": {
        "$anchor": "node", "type": "object", "properties": {"next": {"$ref": "#node"}},
        "required": ["next"], "additionalProperties": False}}}
    with pytest.raises(NotStrict, match="refers to '#node' from inside it"):
        to_strict(recursive)


def _nested(levels: int) -> dict:
    s: dict = {"type": "string"}
    for _ in range(levels):
        s = {"type": "object", "properties": {"x": s}, "required": ["x"]}
    return s


@pytest.mark.parametrize("schema, reason", [
    ({"type": "object", "properties": {"d": {"type": "object"}}, "required": ["d"]},
     "d is an object with free-form keys"),
    ({"type": "object", "properties": {"d": {"type": "object", "properties": {"a": {
        "type": "string"}}, "additionalProperties": {"type": "string"}}}},
     "d is an object with free-form keys"),
    ({"type": "object", "properties": {"v": {}}}, "v accepts any value"),
    ({"type": "object", "properties": {"v": {"description": "anything"}}}, "v accepts any"),
    ({"type": "object", "properties": {"v": {"type": "array"}}}, "v is an array of any"),
    ({"type": "array", "items": {"type": "string"}}, "root of a strict schema must be an obj"),
    ({"anyOf": [{"type": "object", "properties": {}}]}, "root of a strict schema"),
    ({"type": "object", "properties": {"v": {"allOf": [{"type": "string"}, {"minLength": 1}]}}},
     "combines 2 schemas with allOf"),
    ({"type": "object", "properties": {"v": {"$ref": "#/$defs/Nope", "description": "x"}}},
     "points at nothing"),
    (_nested(11), "11 levels of nested objects; strict mode allows at most 10"),
    ({"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5001)}},
     "5001 object properties"),
    ({"type": "object", "properties": {"e": {"type": "string",
                                             "enum": [f"v{i}" for i in range(1001)]}}},
     "1001 enum values"),
    ({"type": "object", "properties": {"e": {
        "type": "string", "enum": [f"{i:03d}" + "x" * 60 for i in range(251)]}}},
     "characters in one enum of more than 250 values"),
    ({"type": "object", "properties": {f"{i}" + "k" * 200: {"type": "string"}
                                       for i in range(700)}},
     "characters of names and values"),
])
def test_what_strict_mode_cannot_express_is_refused_with_the_reason(schema, reason):
    with pytest.raises(NotStrict, match=reason):
        to_strict(schema)


def test_the_limits_themselves_pass():
    assert violations(to_strict(_nested(10))) == []
    at_limit = {"type": "object", "properties": {"e": {
        "type": "string", "enum": [f"v{i}" for i in range(1000)]}}}
    assert violations(to_strict(at_limit)) == []


# -- the reply ------------------------------------------------------------------------------------

PICKS = [
    {"call": "greet", "args": {"name": "Ada"}},
    {"call": "greet", "args": {"name": "Ada", "loud": True, "tags": ["x"]}},
    {"call": "greet", "args": {"name": "Ada", "times": None}},   # a null the schema allows
    {"call": "done", "args": {}},
    {"call": "note", "args": {"text": "hi", "where": {"room": "b", "floor": 2}}},
]


def _with_forced_nulls(pick: dict) -> dict:
    """The pick as strict mode makes a model write it: every optional field present."""
    if pick["call"] != "greet":
        return pick
    full = {"loud": None, "times": None, "mood": None, "tags": None}
    return {"call": "greet", "args": {**full, **pick["args"]}}


def _kwargs(menu, pick: dict) -> dict:
    """The option's validated keyword arguments for `pick`."""
    option = {o.name: o for o in menu}[pick["call"]]
    kwargs, _ = option.bind(pick["args"], runtime=None, context={}, dropped=[], injected=[])
    return kwargs


def _result(menu, pick: dict):
    """What the pick resolves to: the function's return value, the value, the fields."""
    return {o.name: o for o in menu}[pick["call"]].resolve(_kwargs(menu, pick))


@pytest.mark.parametrize("pick", PICKS)
def test_a_strict_reply_without_its_forced_nulls_gives_the_result_of_the_pick(pick):
    menu = normalize(OPTIONS)
    original = decision_schema(menu)
    strict = to_strict(original)
    reply = {"decision": _with_forced_nulls(pick)}
    jsonschema.Draft202012Validator(strict).validate(reply)        # the server's view
    jsonschema.Draft202012Validator(original).validate({"decision": pick})
    removed: list = []
    stripped = strip_forced_nulls(reply, original, removed=removed)["decision"]
    # the nulls forced on fields that do not take null are gone; a null a field takes (times:
    # Optional[int] = None) stays, as the model's own value
    forced = {"loud", "mood", "tags"} - set(pick["args"]) if pick["call"] == "greet" else set()
    assert sorted(removed) == sorted(f"decision.args.{k}" for k in forced)
    assert stripped["args"] == {k: v for k, v in reply["decision"]["args"].items()
                                if k not in forced}
    # and the pick resolves to what the pick itself does
    assert _result(menu, stripped) == _result(menu, pick)


def test_without_the_strip_a_forced_null_would_fail_validation():
    from openprogram.base.errors import AttemptError
    menu = normalize(OPTIONS)
    with pytest.raises(AttemptError, match="args.loud"):
        _kwargs(menu, _with_forced_nulls(PICKS[0]))


def test_nulls_inside_arrays_and_references_are_found():
    schema = {"type": "object", "$defs": {"Item": {"type": "object", "properties": {
        "sku": {"type": "string"}, "note": {"type": "string"}}, "required": ["sku"]}},
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["items"]}
    strict = to_strict(schema)
    reply = {"items": [{"sku": "A", "note": None}, {"sku": "B", "note": "fragile"}]}
    jsonschema.Draft202012Validator(strict).validate(reply)
    removed: list = []
    assert strip_forced_nulls(reply, schema, removed=removed) == \
        {"items": [{"sku": "A"}, {"sku": "B", "note": "fragile"}]}
    assert removed == ["items[0].note"]


def test_names_are_made_acceptable_to_the_apis():
    assert api_name("decision") == "decision"
    assert api_name("my schema.v2") == "my_schema_v2"
    assert api_name("") == "response" and len(api_name("x" * 100)) == 64
    assert to_strict({"type": "object", "properties": {}, "additionalProperties": False}) == \
        {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_keys_a_schema_allows_beyond_its_properties_turn_strict_mode_off_not_away():
    """Strict mode closes every object; where a schema lets other keys in (by pattern, through
    unevaluatedProperties), closing it would keep the model from writing them: the schema is
    sent with strict off instead, the reason named. A false subschema is named as such."""
    from openprogram.runtimes.providers.strict_schema import NotStrict, to_strict
    for key, value in (("patternProperties", {"^x-": {"type": "string"}}),
                       ("unevaluatedProperties", {"type": "integer"})):
        schema = {"type": "object", "properties": {"a": {"type": "string"}}, key: value,
                  "required": ["a"], "additionalProperties": False}
        with pytest.raises(NotStrict, match=f"allows keys beyond its properties \\({key}\\)"):
            to_strict(schema)
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
              "unevaluatedProperties": False, "additionalProperties": False}
    assert to_strict(closed)["properties"] == {"a": {"type": "string"}}
    with pytest.raises(NotStrict, match="allows no value"):
        to_strict({"type": "object", "properties": {"a": False}})
