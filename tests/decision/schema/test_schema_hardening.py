"""What a schema or a value from outside may cost and mean (issue 54, cases 3, 7, 8, 9, 10, 14).

Numbers the model wrote in decimal are checked in decimal; a bound that is no number is refused
when the schema is read; `uniqueItems` is judged in work linear in the list; a schema whose
reading would unfold past the budget (`SCHEMA_BUDGET` subschemas: an `anyOf` / `$ref` chain that
doubles at each level, 50,000 properties) is refused when the option is built, naming the place
and the budget; a recursive schema is read and a deep value checked without a bare
`RecursionError`. Work is bounded here by counting (calls, steps), never by a clock: the timings
are benchmarks/bench_hardening.py's.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import openprogram
from openprogram import DecisionError, OptionError, decision
from openprogram.base.errors import AttemptError
from openprogram.decision.schema import value_keywords
from openprogram.decision.schema.reply_values import equal
from openprogram.decision.schema.validator import compile_schema
from openprogram.runtimes import ScriptedRuntime


def fill(schema, *replies, **kw):
    rt = ScriptedRuntime([r if isinstance(r, str) else json.dumps({"call": "fill", "args": r})
                          for r in replies])
    return decision.make("Fill it.", {"fill": openprogram.JsonSchema(schema)}, runtime=rt, **kw)


# -- case 3: multipleOf in decimal ------------------------------------------------------------

CENTS = {"type": "object", "properties": {"amount": {"type": "number", "multipleOf": 0.01}},
         "required": ["amount"]}


@pytest.mark.parametrize("as_written", [False, True])
def test_every_two_decimal_price_is_a_multiple_of_a_cent(as_written):
    """Case 3: 1,363 of these 10,000 prices were refused, checked in binary floating point
    (`0.07 / 0.01` is 7.000000000000001 there); each is read from the text the model writes."""
    check = compile_schema({"type": "number", "multipleOf": 0.01}, "t", as_written=as_written)
    refused = []
    for cents in range(10_000):
        value = json.loads(f"{cents // 100}.{cents % 100:02d}")
        try:
            check(value, "args.amount", [])
        except AttemptError:
            refused.append(value)
    assert refused == []
    tenths = compile_schema({"type": "number", "multipleOf": 0.1}, "t", as_written=as_written)
    for k in range(1000):
        tenths(json.loads(f"{k // 10}.{k % 10}"), "args.x", [])
    for bad in (0.075, 0.001, 19.995, 1e-9):
        with pytest.raises(AttemptError, match="must be a multiple of 0.01"):
            check(bad, "args.amount", [])


def test_a_price_the_model_writes_is_taken_as_written():
    assert fill(CENTS, '{"call": "fill", "args": {"amount": 0.07}}', max_retries=0) == \
        {"decision": "fill", "amount": 0.07}
    with pytest.raises(DecisionError, match=r"args\.amount must be a multiple of 0\.01"):
        fill(CENTS, '{"call": "fill", "args": {"amount": 0.075}}', max_retries=0)


@given(st.integers(-10**6, 10**6), st.sampled_from([0.5, 0.25, 0.1, 0.01, 0.05, 2.5, 1e-3]),
       st.integers(-10**6, 10**6))
@settings(max_examples=300, derandomize=True, database=None, deadline=None)
def test_a_decimal_multiple_is_exactly_k_steps(k, step, off):
    """`k * step` written as decimal text is a multiple; a value off it by less than a step
    is not (read from its text, as a reply's number is)."""
    from decimal import Decimal
    text = str(Decimal(k) * Decimal(repr(step)))
    assert not value_keywords.not_multiple(json.loads(text), step)
    frac = Decimal(repr(step)) / 7
    odd = json.loads(str((Decimal(text) + frac).normalize()))
    if Decimal(repr(odd)) % Decimal(repr(step)) != 0:
        assert value_keywords.not_multiple(odd, step)


# -- case 14 (part): a bound that is no number ------------------------------------------------

@pytest.mark.parametrize("key, bad", [("minimum", float("nan")), ("maximum", float("inf")),
                                      ("exclusiveMinimum", float("-inf")),
                                      ("exclusiveMaximum", float("nan")),
                                      ("multipleOf", float("nan")), ("multipleOf", float("inf"))])
@pytest.mark.parametrize("as_written", [False, True])
def test_a_bound_of_nan_or_infinity_is_refused_when_the_schema_is_read(key, bad, as_written):
    """Case 14: `minimum: NaN` was accepted, and then refused every value."""
    schema = {"type": "object", "properties": {"x": {"type": "number", key: bad}}}
    with pytest.raises(OptionError, match=rf"t: {key} takes a finite number, got {bad!r}.*"
                                          rf"at #/properties/x of the schema"):
        compile_schema(schema, "t", as_written=as_written)
    with pytest.raises(OptionError, match=rf"{key} takes a finite number"):
        decision.make("Fill it.", [openprogram.tool({"name": "t", "inputSchema": schema})],
                      runtime=ScriptedRuntime([]))


# -- case 7: uniqueItems in linear work -------------------------------------------------------

def _counting_equal(monkeypatch):
    calls = [0]

    def counted(a, b):
        calls[0] += 1
        return equal(a, b)
    monkeypatch.setattr(value_keywords, "equal", counted)
    return calls


@pytest.mark.parametrize("as_written", [False, True])
def test_unique_items_of_arrays_and_objects_take_no_pairwise_comparison(monkeypatch, as_written):
    """Case 7: 8,000 arrays took 32 million comparisons (65 s); each item is now keyed once."""
    calls = _counting_equal(monkeypatch)
    check = compile_schema({"type": "array", "uniqueItems": True}, "t", as_written=as_written)
    items = [[i, {"a": i, "b": [str(i)]}] for i in range(8000)]
    assert check(items, "args.x", []) == items
    with pytest.raises(AttemptError, match=r"args\.x\[8000\] repeats args\.x\[7\]"):
        check(items + [[7.0, {"b": ["7"], "a": 7}]], "args.x", [])
    assert calls[0] == 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, -0.0, 2.5])
    | st.sampled_from(["", "a", "1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner,
                                                                max_size=3), max_leaves=8)


@given(st.lists(json_values, max_size=6))
@settings(max_examples=400, derandomize=True, database=None, deadline=None)
def test_the_first_repeat_is_the_one_pairwise_comparison_finds(items):
    """JSON equality, as `equal` has it: 1 and 1.0 alike, a boolean never a number, keys in
    any order."""
    pairwise = next(((i, j) for i in range(len(items)) for j in range(i)
                     if equal(items[i], items[j])), None)
    assert value_keywords.first_repeat(items) == pairwise
