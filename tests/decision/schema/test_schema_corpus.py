"""Tool definitions and JSON Schemas as options, over the corpus (corpus.py).

For every definition: it is accepted; its menu names every constraint it declares; a
conforming reply resolves to exactly the arguments given; and a reply that breaks each
constraint in turn (made here from the conforming one, and confirmed invalid by the `jsonschema`
package) is re-asked with the right error kind and path. The mutations are written from the
JSON Schema specification's meaning of each keyword, apart from the library.
"""
from __future__ import annotations

import copy
import datetime
import decimal
import json
import re
import warnings

import jsonschema
import pytest
from corpus import CORPUS, all_entries

import openprogram
from openprogram import OptionError, OptionWarning, decision
from openprogram.decision.options import normalize, render_menu
from openprogram.decision.schema.validator import FORMATS, REFUSED, SUPPORTED
from openprogram.runtimes import ScriptedRuntime

ENTRIES = all_entries()
KIND = {"type": "type_mismatch", "enum": "enum_violation", "const": "enum_violation",
        "required": "missing_required"}


#: A value breaking each checked format whose "not-a-<format>" text would not.
BROKEN_FORMAT = {"hostname": "not_a_hostname", "uri-reference": "not a uri",
                 "json-pointer": "not-a-pointer", "regex": "(", "duration": "not-a-duration"}


def pick(name, args):
    return "```json\n" + json.dumps({"call": name, "args": args}) + "\n```"


def as_option(definition, eid):
    """The list-form item for a corpus entry: a provider's tool as it is, a bare schema
    marked."""
    if schema_of(definition) is definition:
        return openprogram.JsonSchema(definition, name=eid)
    return definition


def schema_of(definition):
    if "function" in definition:
        return definition["function"]["parameters"]
    for key in ("parameters", "input_schema", "inputSchema"):
        if key in definition:
            return definition[key]
    return definition


def built(definition, eid):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptionWarning)  # the loose entries' annotations
        return normalize([as_option(definition, eid)])


# -- walking a schema, independently of the library ------------------------------------------

def deref(root, node):
    seen = set()
    while isinstance(node, dict) and "$ref" in node and node["$ref"] not in seen:
        seen.add(node["$ref"])
        target = root
        for part in node["$ref"].lstrip("#").split("/")[1:]:
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if isinstance(node, dict) and "allOf" in node:
        merged = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            part = deref(root, part)
            merged.setdefault("properties", {}).update(part.get("properties", {}))
            merged["required"] = [*merged.get("required", []), *part.get("required", [])]
            merged.update({k: v for k, v in part.items() if k not in ("properties", "required")})
        node = merged
    return node


def types_of(node):
    t = node.get("type")
    out = [t] if isinstance(t, str) else list(t or [])
    if node.get("nullable") is True and out:
        out.append("null")
    return out


def json_type(v):
    if isinstance(v, bool):
        return "boolean"
    return {str: "string", int: "integer", float: "number", type(None): "null", list: "array",
            dict: "object"}[type(v)]


def set_at(root, tokens, value):
    out = copy.deepcopy(root)
    target = out
    for t in tokens[:-1]:
        target = target[t]
    if value is _DELETE:
        del target[tokens[-1]]
    else:
        target[tokens[-1]] = value
    return out


_DELETE = object()


def path_text(tokens):
    out = "args"
    for t in tokens:
        out += f"[{t}]" if isinstance(t, int) else f".{t}"
    return out


def mutations(root, node, value, tokens):
    """(tokens, new value, keyword, expected path) for each constraint `node` puts on
    `value`, each new value breaking that one constraint."""
    node = deref(root, node)
    if not isinstance(node, dict):
        return
    types = types_of(node)
    if value is None:
        return
    # type (the arguments themselves being an object is the reply's shape: `bad_args`)
    if types and tokens:
        for other in (12345, "12", ["x"], {"k": "v"}, True):
            t = json_type(other)
            if t not in types and not (t == "integer" and "number" in types):
                yield tokens, other, "type", path_text(tokens)
                break
    # enum / const
    if "const" in node:
        c = node["const"]
        yield tokens, (c + "x" if isinstance(c, str) else "not-the-const"), "const", \
            path_text(tokens)
    elif "enum" in node:
        same = {"string": "zz-not-allowed", "integer": 9999, "number": 9999.5}
        t = types[0] if types else "string"
        if t in same and not any(v == same[t] for v in node["enum"]):
            yield tokens, same[t], "enum", path_text(tokens)
    for key in ("anyOf", "oneOf"):
        alts = [deref(root, a) for a in node.get(key, [])]
        if alts and all(a.get("type") and "array" not in types_of(a) for a in alts):
            yield tokens, [["x"]], "type", path_text(tokens)
    p = path_text(tokens)
    if isinstance(value, str):
        if node.get("minLength", 0) > 0:
            yield tokens, value[:node["minLength"] - 1], "minLength", p
        if "maxLength" in node:
            yield tokens, value + "x" * (node["maxLength"] - len(value) + 1), "maxLength", p
        if "pattern" in node:
            bad = next(c for c in ("", "!", "zz zz", "0", "ab")
                       if not re.search(node["pattern"], c))
            yield tokens, bad, "pattern", p
        if node.get("format") in FORMATS:
            # (each breaks its format's RFC; "not-a-hostname" would be a valid host name)
            yield tokens, BROKEN_FORMAT.get(node["format"], "not-a-" + node["format"]), \
                "format", p
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        step = 1 if "integer" in types else 0.5
        if "minimum" in node:
            yield tokens, node["minimum"] - step, "minimum", p
        if "exclusiveMinimum" in node:
            yield tokens, node["exclusiveMinimum"], "exclusiveMinimum", p
        if "maximum" in node:
            yield tokens, node["maximum"] + step, "maximum", p
        if "exclusiveMaximum" in node:
            yield tokens, node["exclusiveMaximum"], "exclusiveMaximum", p
        m = node.get("multipleOf")
        if m and not (isinstance(m, int) and m == 1):
            yield tokens, value + (1 if isinstance(m, int) and m > 1 else m / 2), "multipleOf", p
    if isinstance(value, list):
        if node.get("minItems", 0) > 0:
            yield tokens, value[:node["minItems"] - 1], "minItems", p
        if "maxItems" in node and value:
            yield tokens, value + [value[-1]] * (node["maxItems"] - len(value) + 1), "maxItems", p
        if node.get("uniqueItems") and value and len(value) < node.get("maxItems", 1e9):
            yield tokens, value + [value[0]], "uniqueItems", f"{p}[{len(value)}]"
        prefix = node.get("prefixItems") or []
        for i, x in enumerate(value[:3]):
            sub = prefix[i] if i < len(prefix) else node.get("items")
            if sub is not None:
                yield from mutations(root, sub, x, [*tokens, i])
    if isinstance(value, dict):
        props = node.get("properties") or {}
        for k in node.get("required", []):
            if k in value:
                yield [*tokens, k], _DELETE, "required", path_text([*tokens, k])
        if "minProperties" in node and len(value) <= node["minProperties"]:
            yield tokens, {}, "minProperties", p
        if "maxProperties" in node:
            extra = {f"k{i}": "v" for i in range(node["maxProperties"] + 1)}
            yield tokens, {**value, **extra}, "maxProperties", p
        for k, x in value.items():
            sub = props.get(k, node.get("additionalProperties") if k not in props else None)
            if isinstance(sub, dict):
                yield from mutations(root, sub, x, [*tokens, k])


def _decimal_multiple_of(validator, step, instance, schema):
    """`multipleOf` as this project judges it: a number the model wrote in decimal is checked in
    decimal (`0.07` is a multiple of `0.01`). `jsonschema` divides the binary floats nearest the
    two texts, and `0.07 / 0.01` is 7.000000000000001 there, so it refuses 1,363 of the 10,000
    two-decimal prices from 0.00 to 99.99; the differential tests would then fail on the
    project's fix, and could never have seen the bug, since the oracle shared it. Written
    apart from the library (Decimal of each number's shortest text, at a precision that holds
    the quotient of any two JSON numbers), as the oracle's own reading of the keyword."""
    if not validator.is_type(instance, "number") or isinstance(instance, bool):
        return
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = 20_000, 999_999, -999_999
        if decimal.Decimal(repr(instance)) % decimal.Decimal(repr(step)) != 0:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {step!r}")


#: The oracle: `jsonschema`'s draft 2020-12 validator, `multipleOf` judged in decimal.
Oracle = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                      {"multipleOf": _decimal_multiple_of})


def oracle(schema):
    """`schema` as the `jsonschema` package must see it to judge by this library's rules where
    they deliberately differ from the specification: fields outside the schema are dropped,
    not refused (`additionalProperties: false` is not a refusal here); OpenAPI's `nullable`
    lets null through."""
    if isinstance(schema, list):
        return [oracle(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v if k in ("enum", "const", "default", "examples") else oracle(v)
           for k, v in schema.items() if not (k == "additionalProperties" and v is False)}
    if out.pop("nullable", False) is True:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def expected_notes(root, node, stack=()):
    """What the menu must say about each constraint under `node`."""
    node_ref = node.get("$ref") if isinstance(node, dict) else None
    if node_ref in stack:
        return
    node = deref(root, node)
    if not isinstance(node, dict):
        return
    stack = (*stack, node_ref) if node_ref else stack
    texts = {"minimum": ">= {}", "exclusiveMinimum": "> {}", "maximum": "<= {}",
             "exclusiveMaximum": "< {}", "multipleOf": "a multiple of {}",
             "minLength": "at least {} characters", "maxLength": "at most {} characters",
             "pattern": "matching the pattern {}", "format": "format {}",
             "minItems": "at least {} items", "maxItems": "at most {} items",
             "minProperties": "at least {} keys", "maxProperties": "at most {} keys"}
    for key, text in texts.items():
        if key in node:
            yield text.format(json.dumps(node[key]))
    if node.get("uniqueItems"):
        yield "no repeated items"
    if "const" in node:
        yield f"always {json.dumps(node['const'])}"
    elif "enum" in node:
        yield "one of: " + ", ".join(json.dumps(v) for v in node["enum"] if v is not None)
    if "default" in node:
        yield f"default {json.dumps(node['default'])}"
    for key in ("anyOf", "oneOf"):
        for alt in node.get(key, []):
            yield from expected_notes(root, alt, stack)
    for sub in (node.get("properties") or {}).values():
        yield from expected_notes(root, sub, stack)
    for sub in node.get("prefixItems") or []:
        yield from expected_notes(root, sub, stack)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from expected_notes(root, node[key], stack)


# -- the tests ---------------------------------------------------------------------------------

def test_the_corpus_has_at_least_60_definitions_of_our_own_in_every_shape():
    assert len(CORPUS) >= 60
    assert len({eid for eid, *_ in ENTRIES}) == len(ENTRIES)
    shapes = {"openai": 0, "responses": 0, "anthropic": 0, "mcp": 0, "schema": 0}
    for _, d, _ in CORPUS:
        shapes["openai" if "function" in d else "responses" if "parameters" in d else
               "anthropic" if "input_schema" in d else "mcp" if "inputSchema" in d else
               "schema"] += 1
    assert all(n >= 5 for n in shapes.values()), shapes


def test_the_corpus_uses_every_supported_keyword():
    used = set()

    def walk(x):
        if isinstance(x, dict):
            used.update(k for k in x if isinstance(k, str))
            for k, v in x.items():
                if k not in ("enum", "const", "default", "examples", "properties"):
                    walk(v)
                elif k == "properties":
                    for sub in v.values():
                        walk(sub)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    for _, d, _ in ENTRIES:
        walk(schema_of(d))
    wanted = SUPPORTED | {"default", "description", "title", "examples"}
    assert wanted <= used, sorted(wanted - used)


@pytest.mark.parametrize("eid, definition, good", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_each_definition_is_accepted_and_its_menu_names_every_constraint(eid, definition, good):
    menu = built(definition, eid)
    (option,) = menu
    text = render_menu(menu)
    name = option.name
    assert f"- {name}(" in text
    schema = schema_of(definition)
    for note in expected_notes(schema, schema):
        assert note in text, f"{eid}: the menu does not say {note!r}:\n{text}"
    required = set(schema.get("required") or ())
    for key in (schema.get("properties") or {}):
        state = "required" if key in required else "optional"
        assert re.search(rf"- {re.escape(key)} \([^)]*{state}", text), (key, text)
    # The Call: example is a pick of this option with every required argument.
    call = json.loads(re.search(r"^  Call: (.*)$", text, flags=re.M).group(1))
    assert call["call"] == name and required <= set(call.get("args", {}))


@pytest.mark.parametrize("eid, definition, good", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_a_conforming_reply_resolves_to_exactly_its_arguments(eid, definition, good):
    menu = built(definition, eid)
    name = menu[0].name
    Oracle(oracle(schema_of(definition))).validate(good)
    rt = ScriptedRuntime([pick(name, good)])
    result = decision.make("Pick one.", menu, runtime=rt)
    assert result == {"decision": name, **good}
    assert json.loads(json.dumps(result)) == {"decision": name, **good}
    assert decision.last_trace().attempts[0].dropped == []


def _cases():
    for eid, definition, good in ENTRIES:
        schema = schema_of(definition)
        for tokens, new, keyword, path in mutations(schema, schema, good, []):
            yield pytest.param(eid, definition, good, tokens, new, keyword, path,
                               id=f"{eid}-{keyword}-{path}")


CASES = list(_cases())
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def test_the_mutations_reach_every_kind_of_constraint():
    keywords = {c.values[5] for c in CASES}
    assert {"type", "enum", "const", "required", "minLength", "maxLength", "pattern", "format",
            "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
            "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties"} <= keywords
    assert len(CASES) > 200


@pytest.mark.parametrize("eid, definition, good, tokens, new, keyword, path", CASES)
def test_a_reply_breaking_a_constraint_is_reasked_with_its_kind_and_path(
        eid, definition, good, tokens, new, keyword, path):
    schema = schema_of(definition)
    bad = set_at(good, tokens, new)
    if keyword != "format" or schema_format_checked(keyword, new):
        assert not Oracle(oracle(schema), format_checker=CHECKER
                                                   ).is_valid(bad), (eid, bad)
    menu = built(definition, eid)
    name = menu[0].name
    rt = ScriptedRuntime([pick(name, bad), pick(name, good)])
    result = decision.make("Pick one.", menu, runtime=rt)
    assert result == {"decision": name, **good}
    first = decision.last_trace().attempts[0]
    assert (first.error_kind, first.error_path) == (KIND.get(keyword, "invalid_value"), path), \
        first.error_message
    assert path in first.error_message
    assert len(rt.calls) == 2 and first.error_message in rt.calls[1].prompt


def schema_format_checked(keyword, value):
    """Whether `jsonschema` itself checks the format being broken (some need extra packages)."""
    fmt = value[len("not-a-"):] if isinstance(value, str) else None
    return fmt in CHECKER.checkers


@pytest.mark.parametrize("keyword, schema, good, bad", [
    ("if", {"if": {"type": "string"}, "then": {"minLength": 2}}, "ab", "a"),
    ("not", {"not": {"type": "null"}}, 1, None),
    ("patternProperties", {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
     {"xa": "s", "other": 1}, {"xa": 1}),
    ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}},
     {"a": 1, "b": 2}, {"a": 1}),
    ("contains", {"type": "array", "contains": {"type": "integer"}}, ["s", 1], ["s"]),
    ("propertyNames", {"type": "object", "propertyNames": {"maxLength": 3}}, {"abc": 1},
     {"abcd": 1}),
    ("unevaluatedProperties", {"type": "object", "properties": {"a": {}},
                               "unevaluatedProperties": False}, {"a": 1}, {"a": 1, "b": 2}),
    ("dependentSchemas", {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
     {"a": 1, "b": 1}, {"a": 1}),
])
def test_every_validation_keyword_of_2020_12_is_checked(keyword, schema, good, bad):
    """Once refused, each keyword goes in and means what the specification says: a value
    breaking it is re-asked (the oracle agreeing it is invalid), one fitting it resolves as
    written."""
    assert keyword in REFUSED  # (what the spec's own forms still refuse)
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert jsonschema.Draft202012Validator(schema).is_valid(good)
    definition = {"name": "t", "input_schema": {"type": "object", "properties": {
        "x": {"type": "object", "properties": {"deep": schema}}}}}
    rt = ScriptedRuntime([pick("t", {"x": {"deep": bad}}), pick("t", {"x": {"deep": good}})])
    assert decision.make("Pick one.", [definition], runtime=rt) == \
        {"decision": "t", "x": {"deep": good}}
    first = decision.last_trace().attempts[0]
    assert first.error_path.startswith("args.x.deep") and "args.x.deep" in first.error_message


def test_dynamic_ref_is_refused_by_name_when_the_option_set_is_built():
    definition = {"name": "t", "input_schema": {"type": "object", "properties": {
        "x": {"type": "object", "properties": {"deep": {"$dynamicRef": "#meta"}}}}}}
    rt = ScriptedRuntime([])
    with pytest.raises(OptionError) as err:
        decision.make("Pick one.", [definition], runtime=rt)
    message = str(err.value)
    assert "$dynamicRef is not supported" in message
    assert "#/properties/x/properties/deep" in message and "option #0" in message
    assert rt.calls == []  # before any model call


def test_annotations_are_kept_and_named_once_in_a_warning():
    eid, definition, good = next(e for e in CORPUS if e[0] == "loose_ipv4")
    with pytest.warns(OptionWarning) as caught:
        menu = normalize([definition])
    (w,) = [x for x in caught if issubclass(x.category, OptionWarning)]
    text = str(w.message)
    assert "'x-deprecated-alias' at #/properties/ip" in text
    assert "format 'ipv4'" not in text   # ipv4 is checked (RFC 2673's dotted quad)
    # The unknown word is kept in what is sent and checks nothing.
    rt = ScriptedRuntime([pick("block_ip", {"ip": "10.0.0.1"})])
    assert decision.make("Pick.", menu, runtime=rt) == {"decision": "block_ip",
                                                        "ip": "10.0.0.1"}
    assert menu[0].json_schema()["properties"]["ip"]["x-deprecated-alias"] == "address"


def test_a_definition_with_a_function_runs_it_with_the_validated_arguments():
    eid, definition, good = next(e for e in CORPUS if e[0] == "create_event")
    seen = []

    def create_event(title: str, date: datetime.date, start: str = "", duration_minutes=15):
        seen.append((title, date, start, duration_minutes))
        return "ok"
    rt = ScriptedRuntime([pick("create_event", good)])
    assert decision.make("Pick.", [openprogram.tool(definition, create_event)],
                         runtime=rt) == "ok"
    # the annotation asks for a date: it gets one; the unannotated format stays the JSON text
    assert seen == [("Standup", datetime.date(2024, 3, 1), "09:00:00Z", 30)]
    assert decision.last_trace().attempts[0].chosen == "create_event"


def test_a_dotted_name_is_sent_in_an_accepted_form_and_mapped_back():
    from openprogram.decision.modes import ToolsMode
    eid, definition, good = next(e for e in CORPUS if e[0] == "math.factorial")
    menu = normalize([definition, "stop"])
    mode = ToolsMode(menu)
    sent = [t["name"] for t in mode.request()["tools"]]
    assert sent == ["math_factorial", "stop"]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in sent)
    from openprogram.base.model_protocol import ModelResponse, ToolCall
    action = mode.action(ModelResponse("", tool_calls=[ToolCall("math_factorial", {"n": 3})]))
    assert action.action == {"call": "math.factorial", "args": {"n": 3}}


def test_a_dotted_name_round_trips_through_a_runtime_in_tools_mode():
    from openprogram import ModelResponse, Runtime, ToolCall
    eid, definition, good = next(e for e in CORPUS if e[0] == "math.factorial")
    sent = []

    def model(content, tools=None, tool_choice=None):
        sent.append([t["name"] for t in tools])
        return ModelResponse("", tool_calls=[ToolCall("math_factorial", {"n": 4})])
    rt = Runtime(call=model)
    result = decision.make("Pick.", [openprogram.tool(definition, lambda n: n * 2)], runtime=rt,
                           mode="tools")
    assert result == 8 and sent == [["math_factorial"]]
    assert decision.last_trace().attempts[0].chosen is not None
