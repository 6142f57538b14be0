"""Names and values JSON must escape, in json_schema mode on the real model (issue 54, case 6).

An option named `say "hi"` made a grammar llama.cpp could not parse: it printed an error and
wrote with no grammar at all, and nothing said so; a backslash in a name made a grammar that
forced invalid JSON. The grammar's literals now escape what GBNF escapes, so the constrained
reply parses and names the option; a grammar llama.cpp still cannot read fails the attempt with
a message instead of running unconstrained.
"""
from __future__ import annotations

import json
from typing import Literal

import pytest

from openprogram import DecisionError, decision
from openprogram.runtimes import LlamaCppRuntime

NAMES = ['say "hi"', "back\\slash", 'both \\" and "\\', "line\nbreak"]


def _trace(options, **kw):
    rt = LlamaCppRuntime(seed=3, temperature=0.8)
    try:
        decision.make("Pick the one that fits.", options, runtime=rt, mode="json_schema",
                      max_retries=0, **kw)
    except DecisionError as exc:
        return exc.trace
    return decision.last_trace()


@pytest.mark.parametrize("name", NAMES)
def test_a_name_json_escapes_is_written_as_valid_json_under_the_grammar(name):
    """One option: the grammar allows only its pick, so the reply is that name as JSON."""
    trace = _trace({name: "PICKED"})
    att, = trace.attempts
    assert att.error_kind is None, (att.error_kind, att.error_message, att.reply)
    assert json.loads(att.reply)["decision"]["call"] == name
    assert trace.result == "PICKED"


def test_every_pick_of_a_menu_of_such_names_parses():
    options = {n: n.upper() for n in NAMES}
    for seed in range(4):
        rt = LlamaCppRuntime(seed=seed, temperature=1.0)
        got = decision.make("Pick one.", options, runtime=rt, mode="json_schema", max_retries=0)
        att, = decision.last_trace().attempts
        assert json.loads(att.reply)["decision"]["call"] in options and got in options.values()


def test_enum_values_and_keys_json_escapes_are_written_as_valid_json():
    def mark(tone: Literal['say "hi"', "c:\\temp", "plain"]) -> str:
        """Mark it."""
        return tone
    trace = _trace({"mark": mark})
    att, = trace.attempts
    assert att.error_kind is None, (att.error_kind, att.error_message, att.reply)
    assert trace.result in ('say "hi"', "c:\\temp", "plain")


def test_a_grammar_llama_cpp_cannot_read_fails_the_attempt_instead_of_running_without_one(
        monkeypatch):
    from openprogram.runtimes.llamacpp import runtime
    monkeypatch.setattr(runtime, "decision_grammar", lambda schema, compact=False:
                        'root ::= "{\\"decision\\": \\"unclosed')
    trace = _trace({"a": "A", "b": "B"})
    att, = trace.attempts
    assert att.error_kind == "model_error"
    assert "could not read the grammar" in att.error_message
    assert "use mode='menu'" in att.error_message
