"""Parsing and validation (CONTRACT P1-P8): extraction, validation, re-asks and the final error."""
import json

import pytest
from corehelp import pick

from openprogram import DecisionError, Runtime, agent, decision
from openprogram.decision.extract import find_action
from openprogram.runtimes import ScriptedRuntime


def go(city: str, days: int = 1) -> str:
    """Travel to a city."""
    return f"{city}:{days}"


OPTIONS = {"go": go, "stay": ("STAYED", "stay home"), "rate": ("rate it", {"score": int})}


def one_attempt(options, reply, **kw):
    """Make a decision with no re-ask; return the only attempt (raising or not)."""
    rt = ScriptedRuntime([reply])
    try:
        decision.make("Pick.", options, runtime=rt, max_retries=0, **kw)
    except DecisionError as err:
        return err.trace.attempts[0]
    return decision.last_trace().attempts[0]


# -- P1 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P1")
def test_P1_extracts_from_a_json_fence():
    reply = 'Thinking.\n```json\n{"call": "go", "args": {"city": "Rome"}}\n```\n'
    assert decision.extract_action(reply) == {"call": "go", "args": {"city": "Rome"}}
    att = one_attempt(OPTIONS, reply)
    assert (att.found_in, att.key_alias, att.chosen) == ("fence", "call", "go")


@pytest.mark.rule("P1")
def test_P1_extracts_from_bare_text():
    reply = 'I pick {"call": "stay"} because home is nice.'
    assert decision.extract_action(reply) == {"call": "stay"}
    att = one_attempt(OPTIONS, reply)
    assert (att.found_in, att.key_alias, att.chosen) == ("text", "call", "stay")


@pytest.mark.rule("P1")
@pytest.mark.parametrize("alias", ["action", "function", "tool"])
def test_P1_aliases_of_call_come_back_under_call(alias):
    # as the original project's extract_action does (its _normalize_action)
    reply = json.dumps({alias: "go", "args": {"city": "Oslo"}})
    assert decision.extract_action(reply) == {"call": "go", "args": {"city": "Oslo"}}
    ex = find_action(reply)
    assert ex.key == alias and ex.action == {"call": "go", "args": {"city": "Oslo"}}
    assert list(find_action(json.dumps({"x": 1, alias: "go"})).action) == ["call", "x"]


@pytest.mark.rule("P1")
@pytest.mark.parametrize("alias", ["action", "function", "tool"])
def test_P1_aliases_of_call_decide(alias):
    att = one_attempt(OPTIONS, json.dumps({alias: "go", "args": {"city": "Oslo"}}))
    assert att.key_alias == alias and att.chosen == "go" and att.args == {"city": "Oslo"}
    assert att.extracted == {"call": "go", "args": {"city": "Oslo"}} and att.dropped == []


@pytest.mark.rule("P1")
def test_P1_no_call_key_gives_none_and_no_action():
    assert decision.extract_action('{"city": "Rome"} and no pick') is None
    assert decision.extract_action("") is None
    att = one_attempt(OPTIONS, '{"city": "Rome"}')
    assert att.error_kind == "no_action" and att.extracted is None and att.candidates == 0


@pytest.mark.rule("P1")
def test_P1_flat_fields_are_accepted():
    att = one_attempt(OPTIONS, '{"call": "go", "city": "Bern", "days": 2}')
    assert att.chosen == "go" and att.args == {"city": "Bern", "days": 2}
    assert decision.last_trace().result == "Bern:2"


@pytest.mark.rule("P1")
def test_P1_extract_action_wants_text():
    with pytest.raises(TypeError, match="needs the reply text"):
        decision.extract_action(b'{"call": "go"}')


# -- P2 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P2")
def test_P2_unknown_call():
    att = one_attempt(OPTIONS, pick("fly", {"city": "Rome"}))
    assert att.error_kind == "unknown_call"
    assert "'fly' is not an option" in att.error_message
    assert "go, stay, rate" in att.error_message
    assert att.error_path == "call" and att.chosen is None


@pytest.mark.rule("P2")
def test_P2_call_must_name_an_option_with_a_string():
    att = one_attempt(OPTIONS, '{"call": 3}')
    assert att.error_kind == "bad_args" and att.error_path == "call"


# -- P3 ---------------------------------------------------------------------------------------

SCALARS = {"s": str, "i": int, "f": float, "b": bool, "l": list, "d": dict}
GOOD = {"s": "x", "i": 1, "f": 1.5, "b": True, "l": [1], "d": {"k": 1}}


@pytest.mark.rule("P3")
def test_P3_each_scalar_type_accepts_its_json_type():
    att = one_attempt({"x": ("d", SCALARS)}, pick("x", GOOD))
    assert att.error_kind is None and att.args == GOOD


@pytest.mark.rule("P3")
@pytest.mark.parametrize("field, bad", [
    ("s", 1), ("i", "1"), ("i", 1.5), ("i", True), ("i", False), ("f", "1.0"), ("f", True),
    ("b", 1), ("b", "true"), ("l", {}), ("l", "[]"), ("d", []), ("d", "x"), ("s", None),
])
def test_P3_type_mismatch(field, bad):
    att = one_attempt({"x": ("d", SCALARS)}, pick("x", {**GOOD, field: bad}))
    assert att.error_kind == "type_mismatch"
    assert att.error_path == f"args.{field}"


@pytest.mark.rule("P3")
def test_P3_bool_never_counts_as_int_but_float_accepts_int():
    att = one_attempt({"x": ("d", {"n": int})}, pick("x", {"n": True}))
    assert att.error_kind == "type_mismatch"
    assert "args.n must be int, got boolean true" in att.error_message
    att = one_attempt({"x": ("d", {"f": float})}, pick("x", {"f": 3}))
    assert att.error_kind is None and att.args == {"f": 3.0}
    assert isinstance(att.args["f"], float)


@pytest.mark.rule("P3")
def test_P3_enum_membership_respects_bool_versus_int():
    schema = {"x": ("d", {"level": {"type": int, "options": [1, 2]}})}
    assert one_attempt(schema, pick("x", {"level": 2})).error_kind is None
    att = one_attempt(schema, pick("x", {"level": 3}))
    assert att.error_kind == "enum_violation" and "one of 1, 2" in att.error_message
    # True == 1 in Python, but a JSON true is not the allowed value 1
    att = one_attempt({"x": ("d", {"v": {"options": [1, "a"]}})}, pick("x", {"v": True}))
    assert att.error_kind == "enum_violation"


@pytest.mark.rule("P3")
def test_P3_recursion_into_lists_and_objects():
    schema = {"x": ("d", {"plan": {"steps": [{"action": str, "n": int}]}})}
    reply = pick("x", {"plan": {"steps": [{"action": "a", "n": 1}, {"action": 5, "n": 2}]}})
    att = one_attempt(schema, reply)
    assert att.error_kind == "type_mismatch"
    assert att.error_path == "args.plan.steps[1].action"
    assert att.error_message.startswith("args.plan.steps[1].action must be str")


@pytest.mark.rule("P3")
def test_P3_function_annotations_are_validated():
    def f(n: int, tags: list[str], maybe: int | None = None):
        return (n, tags, maybe)

    assert one_attempt([f], pick("f", {"n": 1, "tags": ["a"], "maybe": None})).error_kind is None
    att = one_attempt([f], pick("f", {"n": 1, "tags": ["a", 2]}))
    assert att.error_kind == "type_mismatch" and att.error_path == "args.tags[1]"


# -- P4 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P4")
def test_P4_context_parameters_come_from_context():
    def send(text: str, user: str):
        return f"{user}<-{text}"

    send.input_meta = {"user": {"hidden": True}}
    rt = ScriptedRuntime([pick("send", {"text": "hi"})])
    assert decision.make("Pick.", [send], runtime=rt, context={"user": "ada"}) == "ada<-hi"
    att = decision.last_trace().attempts[0]
    assert att.injected == ["user"] and att.args == {"text": "hi"}


@pytest.mark.rule("P4")
def test_P4_runtime_parameters_are_injected():
    from openprogram.runtimes import ScriptedRuntime as SR

    got = {}

    def review(text: str, runtime, exec_runtime=None, review_runtime=None, model: SR = None):
        got.update(runtime=runtime, exec_runtime=exec_runtime, review_runtime=review_runtime,
                   model=model)
        return text

    rt = ScriptedRuntime([pick("review", {"text": "t"})])
    assert decision.make("Pick.", [review], runtime=rt) == "t"
    assert got == {"runtime": rt, "exec_runtime": rt, "review_runtime": rt, "model": rt}
    assert decision.last_trace().attempts[0].injected == [
        "runtime", "exec_runtime", "review_runtime", "model"]


@pytest.mark.rule("P4")
def test_P4_fields_outside_the_signature_are_dropped():
    def f(a: int, **extra):
        assert extra == {}  # never filled from the model's stray fields
        return a

    att = one_attempt([f], '{"call": "f", "args": {"a": 1, "b": 2, "c": {"d": 3}}, "note": "x"}')
    assert att.error_kind is None and att.args == {"a": 1}
    assert sorted(att.dropped) == ["args.b", "args.c", "note"]


@pytest.mark.rule("P4")
def test_P4_required_parameters_must_be_present():
    att = one_attempt(OPTIONS, pick("go", {"days": 3}))
    assert att.error_kind == "missing_required"
    assert att.error_path == "args.city"
    assert "args.city is required by option 'go' (str)" == att.error_message
    # a parameter with a default may be left out
    assert one_attempt(OPTIONS, pick("go", {"city": "A"})).args == {"city": "A"}


# -- P5 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P5")
def test_P5_every_schema_field_is_required():
    att = one_attempt({"x": ("d", {"a": int, "b": str})}, pick("x", {"a": 1}))
    assert att.error_kind == "missing_required" and att.error_path == "args.b"


@pytest.mark.rule("P5")
def test_P5_fields_outside_the_schema_are_dropped():
    att = one_attempt({"x": ("d", {"a": int, "o": {"k": int}})},
                      pick("x", {"a": 1, "zz": 2, "o": {"k": 1, "junk": 0}}))
    assert att.error_kind is None and att.args == {"a": 1, "o": {"k": 1}}
    assert att.dropped == ["args.o.junk", "args.zz"]  # nested drops as met, then stray fields
    assert decision.last_trace().result == {"decision": "x", "a": 1, "o": {"k": 1}}


@pytest.mark.rule("P5")
def test_P5_a_value_option_drops_any_args():
    att = one_attempt(OPTIONS, pick("stay", {"why": "tired"}))
    assert att.error_kind is None and att.args == {} and att.dropped == ["args.why"]
    assert decision.last_trace().result == "STAYED"


# -- P6 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P6")
def test_P6_parse_args_returns_chosen_and_kwargs():
    assert decision.parse_args(pick("go", {"city": "Rome", "x": 1}), OPTIONS) == \
        (go, {"city": "Rome"})
    assert decision.parse_args(pick("stay"), OPTIONS) == ("stay", {})
    assert decision.parse_args(pick("rate", {"score": 2}), OPTIONS) == ("rate", {"score": 2})


@pytest.mark.rule("P6")
def test_P6_parse_args_injects_context_and_runtime():
    def f(q: str, user: str, runtime=None):
        return q

    f.input_meta = {"user": {"hidden": True}}
    rt = ScriptedRuntime([])
    chosen, kwargs = decision.parse_args(pick("f", {"q": "a"}), [f], runtime=rt,
                                         context={"user": "u"})
    assert chosen is f and kwargs == {"q": "a", "user": "u", "runtime": rt}


@pytest.mark.rule("P6")
def test_P6_parse_args_without_runtime_fails_at_once():
    with pytest.raises(DecisionError) as info:
        decision.parse_args("no pick", OPTIONS)
    assert info.value.kind == "no_action" and len(info.value.trace.attempts) == 1


# -- P7 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P7")
def test_P7_reask_holds_previous_reply_problem_and_menu():
    bad = pick("go", {"city": 7})
    rt = ScriptedRuntime([bad, pick("go", {"city": "Rome"})])
    assert decision.make("Where next?", OPTIONS, runtime=rt) == "Rome:1"
    assert len(rt.calls) == 2
    reask = rt.calls[1].prompt
    assert "The request was:\nWhere next?" in reask
    assert f"Your previous reply was:\n<<<\n{bad}\n>>>" in reask
    assert "The problem (type_mismatch at args.city): args.city must be str, got integer 7" \
        in reask
    assert reask.endswith(decision.render_options(OPTIONS))
    att = decision.last_trace().attempts[1]
    assert att.prompt == reask and att.number == 2 and att.is_last


@pytest.mark.rule("P7")
def test_P7_reask_is_a_dag_node_under_the_decision():
    rt = ScriptedRuntime(["nothing", pick("stay")])
    decision.make("Pick.", OPTIONS, runtime=rt)
    calls = [n for n in rt.dag if n.kind == "model_call"]
    (root,) = [n for n in rt.dag if n.kind == "decision"]
    assert len(calls) == 2
    assert all(n.parent == root.id for n in calls)
    assert calls[1].prompt == rt.calls[1].prompt and calls[1].reply == pick("stay")
    trace = decision.last_trace()
    assert [a.model_call_id for a in trace.attempts] == [n.id for n in calls]


@pytest.mark.rule("P7")
def test_P7_max_retries_zero_turns_reasks_off_and_two_allows_two():
    rt = ScriptedRuntime(["nothing"])
    with pytest.raises(DecisionError):
        decision.make("Pick.", OPTIONS, runtime=rt, max_retries=0)
    assert len(rt.calls) == 1
    rt = ScriptedRuntime(["nothing", "still nothing", pick("stay")])
    assert decision.make("Pick.", OPTIONS, runtime=rt, max_retries=2) == "STAYED"
    assert [a.is_last for a in decision.last_trace().attempts] == [False, False, True]


@pytest.mark.rule("P7")
@pytest.mark.parametrize("bad", [-1, 1.5, "1", True, None])
def test_P7_max_retries_must_be_a_whole_number(bad):
    rt = ScriptedRuntime([pick("stay")])
    with pytest.raises(ValueError, match="max_retries must be a whole number"):
        decision.make("Pick.", OPTIONS, runtime=rt, max_retries=bad)
    assert rt.calls == []


@pytest.mark.rule("P7")
def test_P7_only_make_and_parse_args_take_max_retries():
    rt = ScriptedRuntime([pick("stay")])
    with pytest.raises(TypeError):
        agent("Pick.", options=OPTIONS, runtime=rt, max_retries=2)
    with pytest.raises(TypeError):
        rt.exec("Pick.", options=OPTIONS, max_retries=2)
    assert rt.calls == []


@pytest.mark.rule("P7")
def test_P7_parse_args_reasks_through_the_runtime():
    rt = ScriptedRuntime([pick("go", {"city": "Rome"})])
    chosen, kwargs = decision.parse_args("I cannot decide", OPTIONS, runtime=rt,
                                         prompt="Where?")
    assert (chosen, kwargs) == (go, {"city": "Rome"})
    assert len(rt.calls) == 1
    assert "Your previous reply was:\n<<<\nI cannot decide\n>>>" in rt.calls[0].prompt
    assert [n.kind for n in rt.dag] == ["model_call"]


@pytest.mark.rule("P7")
def test_P7_a_long_bad_reply_is_shortened_in_the_reask():
    long = "x" * 50_000
    rt = ScriptedRuntime([long, pick("stay")])
    decision.make("Pick.", OPTIONS, runtime=rt)
    reask = rt.calls[1].prompt
    assert "characters left out" in reask and len(reask) < 10_000


# -- P8 ---------------------------------------------------------------------------------------

@pytest.mark.rule("P8")
def test_P8_decision_error_carries_kind_message_reply_head_and_trace():
    last = "I choose " + "z" * 1000 + ' {"call": "fly"}'
    rt = ScriptedRuntime(["no pick at all", last])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.kind == "unknown_call"
    assert err.message.startswith("'fly' is not an option")
    assert err.reply_head.startswith("I choose zzz") and err.reply_head.endswith("...")
    assert len(err.reply_head) < 400
    assert [a.error_kind for a in err.trace.attempts] == ["no_action", "unknown_call"]
    assert err.trace.status == "failed" and err.trace.error is err
    assert "after 2 attempt(s): [unknown_call]" in str(err)
    assert "err.trace" in str(err)


@pytest.mark.rule("P8")
def test_P8_no_builtin_fallback():
    rt = ScriptedRuntime(["nothing", "nothing"])
    with pytest.raises(DecisionError):
        decision.make("Pick.", {"default": "DEFAULT", "other": "OTHER"}, runtime=rt)
    assert decision.last_trace().result is None


@pytest.mark.rule("P8")
def test_P8_a_failing_model_call_is_a_decision_error():
    def model(content):
        raise ConnectionError("network down")

    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=Runtime(call=model))
    err = info.value
    assert err.kind == "model_error" and "ConnectionError: network down" in err.message
    assert isinstance(err.__cause__, ConnectionError)


@pytest.mark.rule("P8")
def test_P8_running_out_of_script_is_a_model_error_with_counts():
    rt = ScriptedRuntime(["nothing"])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    assert info.value.kind == "model_error"
    assert "1 given, call #2 asked for one more" in info.value.message


@pytest.mark.rule("P8")
def test_P8_decision_error_pickles():
    import pickle

    rt = ScriptedRuntime(["nothing", "nothing"])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy, DecisionError)
    assert (copy.kind, copy.message, copy.reply_head) == ("no_action", info.value.message,
                                                          "nothing")


def test_an_attempt_records_where_the_json_and_the_bad_value_sit_in_the_reply():
    reply = 'Plan: ```json\n{"call": "go", "args": {"city": 42}}\n```'
    att = one_attempt(OPTIONS, reply)
    assert att.error_kind == "type_mismatch" and att.error_path == "args.city"
    s, e = att.span
    assert reply[s:e] == '{"call": "go", "args": {"city": 42}}'
    s, e = att.error_span
    assert reply[s:e] == "42"
