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


# -- case 8: an anyOf / $ref chain that doubles at each level ---------------------------------

def chain(depth, leaf=None):
    """`anyOf` of two references to the next level, `depth` levels."""
    defs = {f"L{i}": {"anyOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]}
            for i in range(depth)}
    defs[f"L{depth}"] = leaf or {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}},
            "required": ["x"], "$defs": defs}


def _counting(monkeypatch, cls, name):
    calls = [0]
    original = getattr(cls, name)

    def counted(*a, **kw):
        calls[0] += 1
        return original(*a, **kw)
    monkeypatch.setattr(cls, name, counted)
    return calls


def test_a_ref_chain_that_unfolds_past_the_budget_is_refused_when_built(monkeypatch):
    """Case 8: depth 20 took 60 s to build (each reader unfolded 2 ** 20 paths). The schema is
    read once, each part's unfolded size worked out once, and refused naming where it passes
    the budget; no reader or compiler has started on it."""
    from openprogram.decision.schema import reader, refs, validator
    resolved = _counting(monkeypatch, refs.Document, "resolve")
    named = _counting(monkeypatch, reader.SchemaDoc, "type_name")
    compiled = _counting(monkeypatch, validator._Compiler, "node")
    schema = chain(20)
    assert len(json.dumps(schema, separators=(',', ':'))) < 1400   # (1.3 KB)
    for options in ({"fill": openprogram.JsonSchema(schema)},
                    [openprogram.tool({"name": "fill", "inputSchema": schema})],
                    [{"type": "function", "function": {"name": "fill", "parameters": schema}}]):
        with pytest.raises(OptionError, match=r"unfolds to more than 10,000 subschemas.*"
                                              r"SCHEMA_BUDGET.*\(at #/\$defs/L\d+ of the "
                                              r"schema\)"):
            decision.make("Fill it.", options, runtime=ScriptedRuntime([]))
    assert resolved[0] <= 3 * 21 * 2 and named[0] == 0 and compiled[0] == 0


def test_a_chain_under_the_budget_is_read_in_linear_work(monkeypatch):
    """Below the budget the readers name each level once (2 ** depth before)."""
    from openprogram.decision.schema import reader
    named = _counting(monkeypatch, reader.SchemaDoc, "_name")
    got = fill(chain(10), {"x": "ok"}, max_retries=0)
    assert got == {"decision": "fill", "x": "ok"}
    assert named[0] < 200


def test_checking_a_value_is_counted_and_stops_at_the_check_budget(monkeypatch):
    """Each alternative tried is a step; past CHECK_BUDGET the check fails naming it (and the
    model is asked again, as for any other value it can fix)."""
    from openprogram.decision.schema import budget
    monkeypatch.setattr(budget, "CHECK_BUDGET", 300)
    monkeypatch.setattr(budget, "_CLOCK_EVERY", 1)
    with pytest.raises(DecisionError, match=r"args\.x: checking the value against the "
                                            r"option's schema took more than 300 steps") as err:
        fill(chain(10), {"x": 5}, {"x": 6}, max_retries=1)
    assert [a.error_kind for a in err.value.trace.attempts] == ["invalid_value"] * 2
    # a wrong value on a chain of 8 takes 2 ** 9 tries: under the real budget it is just wrong
    monkeypatch.setattr(budget, "CHECK_BUDGET", 1_000_000)
    with pytest.raises(DecisionError, match=r"args\.x must be str"):
        fill(chain(8), {"x": 5}, max_retries=0)


def test_checking_a_value_stops_at_the_decisions_deadline(monkeypatch):
    """`timeout_s` covers the check: past the deadline it stops as a timeout, with no re-ask
    (nothing is left to answer one); the clock is looked at every few thousand steps, here
    made every step and run forward."""
    from openprogram.decision.schema import budget
    monkeypatch.setattr(budget, "_CLOCK_EVERY", 1)
    monkeypatch.setattr(budget, "_clock", lambda: float("inf"))
    with pytest.raises(DecisionError, match=r"checking args\.x against the option's schema "
                                            r"ran past the decision's timeout_s") as err:
        fill(chain(6), {"x": 5}, {"x": "ok"}, max_retries=1, timeout_s=60)
    assert err.value.kind == "timeout" and len(err.value.trace.attempts) == 1
    # without timeout_s there is no deadline to pass
    assert fill(chain(6), {"x": "ok"}) == {"decision": "fill", "x": "ok"}


# -- case 9: recursion in the schema and in the value -----------------------------------------

TREE = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Tree"}},
        "$defs": {"Tree": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}
NODE = {"type": "object", "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"},
                                                            "v": {"type": "integer"}}}}}


def nested(depth, key="next"):
    v: dict = {"v": 0}
    for _ in range(depth):
        v = {key: v}
    return v


def test_a_recursive_array_schema_is_built_and_named_once():
    """Case 9: `items` referring to itself was a bare RecursionError when the option was
    built (the type name unfolded for ever); it is named by what it refers to."""
    assert fill(TREE, {"tree": [[], [[]]]}) == {"decision": "fill", "tree": [[], [[]]]}
    from openprogram.decision.options import normalize, render_menu
    text = render_menu(normalize({"fill": openprogram.JsonSchema(TREE)}))
    assert "tree: list[Tree]" in text


@pytest.mark.parametrize("schema", [NODE, {**NODE, "not": {"required": ["x"]}}],
                         ids=["compiled", "evaluated"])
def test_a_value_nested_past_the_check_depth_is_refused_by_name(schema):
    """Case 9: a recursive object schema and a value 600 deep was a bare RecursionError at
    validation; a recursive schema checks values up to MAX_VALUE_DEPTH deep, and refuses a
    deeper one naming the bound (in both validators: the compiled one and schemaeval.py's)."""
    from openprogram.decision.schema.budget import MAX_VALUE_DEPTH
    ok = nested(MAX_VALUE_DEPTH - 2)
    assert fill(schema, {"node": ok}, max_retries=0) == {"decision": "fill", "node": ok}
    with pytest.raises(DecisionError, match=r"args nests deeper than 100 levels.*"
                                            r"MAX_VALUE_DEPTH") as err:
        fill(schema, {"node": nested(600)}, max_retries=0)
    assert err.value.kind == "invalid_value"


def test_a_schema_nested_past_max_depth_through_references_is_refused_by_name():
    """Every reader walks a schema recursively: nesting is bounded (references followed), so
    no reader runs out of Python's stack."""
    from openprogram.decision.schema.refs import MAX_DEPTH
    defs = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"}}}
            for i in range(MAX_DEPTH + 5)}
    defs[f"L{MAX_DEPTH + 5}"] = {"type": "string"}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "$defs": defs}
    with pytest.raises(OptionError, match=rf"nests deeper than {MAX_DEPTH} levels \(its "
                                          rf"references followed\).*\(at #/\$defs/L\d+ of"):
        decision.make("Fill it.", {"fill": openprogram.JsonSchema(schema)},
                      runtime=ScriptedRuntime([]))


# -- case 10 (schema part): 50,000 properties --------------------------------------------------

def wide(n):
    return {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "a field"}
                                             for i in range(n)}}


def test_a_schema_of_more_subschemas_than_the_budget_is_refused_before_it_is_read(monkeypatch):
    """Case 10: 50,000 properties took ~10 s to build, and an MCP tool of 100,000 made an
    8.8 MB menu; past SCHEMA_BUDGET subschemas a schema is refused, counted without reading
    further, before any reader or compiler starts."""
    from openprogram.decision.schema import reader, validator
    named = _counting(monkeypatch, reader.SchemaDoc, "type_name")
    compiled = _counting(monkeypatch, validator._Compiler, "node")
    with pytest.raises(OptionError, match=r"the schema has more than 10,000 subschemas, the "
                                          r"budget of one option's schema.*\(at # of the"):
        decision.make("Fill it.", [openprogram.tool({"name": "wide", "inputSchema": wide(50_000)})],
                      runtime=ScriptedRuntime([]))
    assert named[0] == compiled[0] == 0


def test_the_schema_budget_is_a_bound_not_a_guess(monkeypatch):
    from openprogram.decision.schema import budget
    monkeypatch.setattr(budget, "SCHEMA_BUDGET", 300)
    assert fill(wide(299), {"p0": "a"}) == {"decision": "fill", "p0": "a"}
    with pytest.raises(OptionError, match="more than 300 subschemas"):
        fill(wide(300), {"p0": "a"})


def test_a_compiled_check_leaves_no_reference_cycle_for_the_garbage_collector():
    """The generated fast paths (a scalar's, an object's fields inline) are functions defined in
    a namespace of their own; left in it, each was a cycle only the collector frees, and a check
    is built per option, so a run of decisions on fresh menus kept the collector busy."""
    import gc

    from openprogram.decision.schema.validator import compile_schema
    schema = {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "nights": {"type": "integer"}, "price": {"type": "number"},
        "kind": {"enum": ["hotel", "flat"]}, "late": {"type": "boolean"},
        "room": {"type": "object", "properties": {"beds": {"type": "integer"}}}}}
    value = {"city": "Rome", "nights": 2, "price": 80.0, "kind": "flat", "late": True,
             "room": {"beds": 1}}
    gc.collect()
    gc.disable()
    try:
        for as_written in (False, True):
            for _ in range(20):
                check = compile_schema(schema, "option #0", as_written=as_written)
                assert check(value, "arguments", []) == value
                del check
        assert gc.collect() == 0
    finally:
        gc.enable()
