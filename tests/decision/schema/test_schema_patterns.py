"""A schema's `pattern` / `patternProperties` run on a model's text with bounded work.

Both the pattern (from a schema written elsewhere) and the text (from a model) are untrusted:
`^(a+)+$` on `"aaa…ab"` takes Python's backtracking `re` time exponential in the length. The
validator runs patterns as automata (decision/schema/patterns.py): the work it counts grows
with the text's length, never past a limit, and the answers are `re.search`'s. What an
automaton cannot run is refused when the schema is read, by name.
"""
from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import openprogram
from openprogram import DecisionError, OptionError, decision
from openprogram.base.errors import AttemptError
from openprogram.decision.schema.patterns import WORK_LIMIT, compile_pattern
from openprogram.decision.schema.validator import compile_schema
from openprogram.runtimes import ScriptedRuntime

#: Patterns on which `re.search` backtracks exponentially (or as a high power) on a near miss.
CATASTROPHIC = [r"^(a+)+$", r"^(a|a)*$", r"^(a|aa)+$", r"(a*)*b", r"^\d*\d*\d*\d*\d*\d*x"]


def _near_miss(pattern: str, n: int) -> str:
    return ("1" if "\\d" in pattern else "a") * n + "!"


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_pattern_takes_work_linear_in_the_text(pattern):
    rx = compile_pattern(pattern)
    work = []
    for n in (1_000, 2_000, 4_000):
        before = rx.work
        assert rx.search(_near_miss(pattern, n)) is False
        work.append(rx.work - before)
    # each doubling of the text at most doubles the work (plus the automaton's few new states)
    assert work[1] <= 2 * work[0] + 200 and work[2] <= 2 * work[1] + 200, work
    assert work[2] <= 10 * 4_000, work
    # a short near miss, which `re` itself still answers, gets the same answer
    short = _near_miss(pattern, 12)
    assert rx.search(short) is (re.search(pattern, short) is not None)


def test_a_catastrophic_pattern_in_a_decision_fails_the_reply_and_the_reask_succeeds():
    schema = {"type": "object", "required": ["code"],
              "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
    bad = "a" * 5_000 + "!"
    rt = ScriptedRuntime([json.dumps({"call": "fill", "args": {"code": bad}}),
                          json.dumps({"call": "fill", "args": {"code": "aaa"}})])
    got = decision.make("Fill it.", {"fill": openprogram.JsonSchema(schema)}, runtime=rt)
    assert got == {"decision": "fill", "code": "aaa"}
    first = decision.last_trace().attempts[0]
    assert (first.error_kind, first.error_path) == ("invalid_value", "args.code")
    assert "must match the pattern ^(a+)+$" in rt.calls[1].prompt
    assert not jsonschema.Draft202012Validator(schema).is_valid({"code": "a" * 20 + "!"})


def test_pattern_properties_with_a_catastrophic_key_pattern_are_bounded():
    schema = {"type": "object", "patternProperties": {"^(x+)+$": {"type": "integer"}},
              "additionalProperties": False}
    key = "x" * 3_000 + "y"
    rt = ScriptedRuntime([json.dumps({"call": "fill", "args": {key: 1}})])
    with pytest.raises(DecisionError):
        decision.make("Fill it.", {"fill": openprogram.JsonSchema(schema)}, runtime=rt,
                      max_retries=0)
    attempt = decision.last_trace().attempts[0]
    assert attempt.error_kind == "invalid_value" and "is not allowed" in attempt.error_message


def test_the_spec_forms_validator_runs_the_pattern_as_an_automaton_too():
    check = compile_schema({"type": "string", "pattern": "^(a|a)*$"}, "the field")
    assert check("aaaa", "args.x", []) == "aaaa"
    with pytest.raises(AttemptError, match="must match the pattern"):
        check("a" * 10_000 + "b", "args.x", [])


def test_a_text_whose_check_would_pass_the_work_limit_is_refused_not_run_on():
    # `[ab]*a[ab]{300}$`: an automaton of 2^300 reachable sets, each new one costing ~300 steps
    rx = compile_pattern("[ab]*a[ab]{300}$")
    rng = random.Random(7)
    text = "".join(rng.choice("ab") for _ in range(40_000))
    with pytest.raises(AttemptError, match=r"args\.s: matching the pattern .* "
                                                     r"would take more than") as err:
        rx.search(text, "args.s")
    assert err.value.kind == "invalid_value" and err.value.path == "args.s"
    assert rx.work <= WORK_LIMIT + 2_000


def test_re_runs_a_pattern_only_on_texts_its_shape_bounds_and_the_automaton_keeps_little():
    # no repetition: `re` tries each start once, each try up to the pattern's length; past
    # `plain_max` characters that product passes the limit and the automaton counts instead
    rx = compile_pattern("x" + "[ab]" * 2_000)
    assert rx.plain is not None and rx.plain_max < 2_000
    assert rx.search("ab" * 400 + "x" + "a" * 2_000) is True     # 2,801 characters
    assert rx.closed    # (the automaton ran)
    before = rx.work
    assert rx.search("ab" * 5_000) is False
    assert 10_000 <= rx.work - before <= 4 * 10_000
    # the sets the automaton keeps start over past a bound, so memory stays bounded too
    rx = compile_pattern("[ab]*a[ab]{16}$")   # 2^17 sets of positions may be met
    rng = random.Random(3)
    for _ in range(2):   # (30,000 characters: about as many sets, so the bound is met)
        text = "".join(rng.choice("ab") for _ in range(30_000))
        # (`re` itself takes time quadratic in the text here, trying each start)
        assert rx.search(text) is (text[-17] == "a")
        assert len(rx.moves) <= 20_001 and len(rx.sets) <= 20_002


@pytest.mark.parametrize("pattern, named", [
    (r"(a)\1", "a backreference"), (r"^(?=.*\d)\w+$", "a lookahead"),
    (r"(?<!x)y", "a negative lookahead or lookbehind"), (r"(?>a+)b", "an atomic group"),
    (r"a++b", "a possessive repeat"), (r"(?m)^a$", "(?m)"),
    (r"(a{100}){100}", "too large once its counted repeats are written out"),
    (r"[", "is not a regular expression")])
def test_what_an_automaton_cannot_run_is_refused_when_the_schema_is_read(pattern, named):
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    with pytest.raises(OptionError) as err:
        decision.make("Fill it.", {"fill": openprogram.JsonSchema(schema)},
                      runtime=ScriptedRuntime([]))
    text = str(err.value)
    assert named in text and "#/properties/s" in text
    assert "rewrite" in text or "write" in text or "regular expression" in text


# What the automaton answers is what `re.search` answers, on patterns of every construct it runs.
PATTERNS = [r"^[a-z0-9_-]+$", r"a*b", r"\bfo+\b", r"^x-", r"^\d{3}-\d{4}$", r"(ab|a)(bc|c)?$",
            r"^$", r"$", r"a{2,4}?b", r"[^ab]+\B", r"\w+\s\W", r"^(?:x|y|)*z\Z", r".+\n?$",
            r"\Aab|cd\Z", r"^(?i:select)\b", r"(?s)a.+b", r"(?i)[^A-C]+x", r"[-\]]+a|[\\-]+b",
            r"^(a+)+$", r"(a|a)*$", r"[\d.]+e?", r"^[^\W\d]+$"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATTERNS), st.text("ab c\n_x-yz1.eABSelectKſ]\\ü", max_size=12))
def test_the_automaton_answers_as_re_search(pattern, text):
    assert compile_pattern(pattern).search(text) is (re.search(pattern, text) is not None)
