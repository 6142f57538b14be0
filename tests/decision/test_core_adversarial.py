"""Everything the model writes is untrusted (A5, A6): values for hidden parameters, hostile or
huge replies, replies that are not text, several candidates; and bad option sets that must fail
before any model call. Speed is measured in benchmarks/bench_extract.py, not asserted here."""
import json
import random
from typing import Any

import pytest
from corehelp import pick

from openprogram import DecisionError, OptionError, agent, decision
from openprogram.decision.extract import CALL_KEYS, find_action
from openprogram.runtimes import ScriptedRuntime


def transfer(amount: int, account: str, runtime=None, exec_runtime=None):
    """Move money."""
    return (amount, account, runtime)


transfer.input_meta = {"account": {"hidden": True}}


# -- A5: hidden, context and runtime parameters --------------------------------------------------

@pytest.mark.rule("A5")
def test_A5_model_values_for_hidden_context_and_runtime_params_are_dropped():
    reply = pick("transfer", {"amount": 5, "account": "attacker", "runtime": "evil",
                              "exec_runtime": {"x": 1}})
    rt = ScriptedRuntime([reply])
    assert decision.make("Pay.", [transfer], runtime=rt, context={"account": "acct-1"}) == \
        (5, "acct-1", rt)
    att = decision.last_trace().attempts[0]
    assert sorted(att.dropped) == ["args.account", "args.exec_runtime", "args.runtime"]
    assert att.args == {"amount": 5}
    assert sorted(att.injected) == ["account", "exec_runtime", "runtime"]


@pytest.mark.rule("A5")
def test_A5_flat_form_cannot_set_a_hidden_param_either():
    rt = ScriptedRuntime(['{"call": "transfer", "amount": 1, "account": "attacker"}'])
    assert decision.make("Pay.", [transfer], runtime=rt, context={"account": "mine"})[1] == "mine"
    assert decision.last_trace().attempts[0].dropped == ["args.account"]


@pytest.mark.rule("A5")
def test_A5_hidden_param_with_default_keeps_its_default_not_the_models_value():
    def f(q: str, role: str = "viewer"):
        return role

    f.input_meta = {"role": {"hidden": True}}
    rt = ScriptedRuntime([pick("f", {"q": "x", "role": "admin"})])
    assert decision.make("Pick.", [f], runtime=rt) == "viewer"
    assert decision.last_trace().attempts[0].dropped == ["args.role"]


@pytest.mark.rule("A5")
def test_A5_a_dropped_hidden_value_still_fails_a_missing_required_check():
    # the hidden value is recorded as dropped even when the attempt fails on another field
    rt = ScriptedRuntime([pick("transfer", {"account": "attacker"})])
    with pytest.raises(DecisionError) as info:
        decision.make("Pay.", [transfer], runtime=rt, context={"account": "a"}, max_retries=0)
    att = info.value.trace.attempts[0]
    assert att.error_kind == "missing_required" and att.dropped == ["args.account"]


# -- A5: hostile replies are answered (linear extraction; timing lives in the benchmark) -------

HOSTILE = {
    "braces": "{" * 1_000_000,
    "open_keys": '{"a":' * 100_000,
    "open_calls": '{"call":' * 100_000,
}


@pytest.mark.rule("A5")
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_A5_hostile_replies_give_no_action(name):
    text = HOSTILE[name]
    assert decision.extract_action(text) is None
    ex = find_action(text)
    assert ex.action is None and ex.candidates == 0
    rt = ScriptedRuntime([text])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ["a"], runtime=rt, max_retries=0)
    assert info.value.kind == "no_action"
    assert len(info.value.reply_head) < 400  # the error never carries the whole reply


@pytest.mark.rule("A5")
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_A5_a_valid_pick_after_hostile_text_is_found(name):
    text = HOSTILE[name] + ' "" ] } and then ' + pick("a", fence=False)
    assert decision.extract_action(text) == {"call": "a"}


@pytest.mark.rule("A5")
def test_A5_hostile_reply_is_shortened_in_the_reask():
    rt = ScriptedRuntime([HOSTILE["open_calls"], pick("a")])
    assert decision.make("Pick.", ["a"], runtime=rt) == "a"
    assert len(rt.calls[1].prompt) < 10_000


@pytest.mark.rule("A5")
def test_A5_extraction_agrees_with_a_brute_force_reference():
    """Random replies built from JSON fragments and prose: the search finds the same pick and the
    same candidate count as trying json's raw_decode at every `{`."""
    dec = json.JSONDecoder(strict=False)

    def reference(text):
        found = []
        for s, ch in enumerate(text):
            if ch == "{":
                try:
                    obj, end = dec.raw_decode(text, s)
                except ValueError:
                    continue
                if isinstance(obj, dict) and any(k in obj for k in CALL_KEYS):
                    found.append((s, end, obj))
        top = [c for c in found if not any(o[0] < c[0] and c[1] <= o[1] for o in found)]
        if not top:
            return None, 0
        obj = top[-1][2]  # the pick comes back with its name under "call", whichever alias
        key = next(k for k in CALL_KEYS if k in obj)
        return {"call": obj[key], **{k: v for k, v in obj.items() if k != key}}, len(top)

    frags = ['{', '}', '"', ':', ',', ' ', 'x', '\\"', '{"call": "a"}', '[', ']', '1', 'null',
             '{"call": "b", "args": {"n": 1}}', '{"a": ', '"call"', '{"tool": "t"}', '"s"',
             '```json\n', '\n```', '{"x": {"call": "c"}}', '{"action": "d", "call": "e"}']
    rnd = random.Random(20261202)
    for _ in range(4000):
        text = "".join(rnd.choice(frags) for _ in range(rnd.randint(1, 14)))
        ex = find_action(text)
        want, count = reference(text)
        assert ex.action == want, text
        if want is not None:
            assert ex.candidates == count, text


# -- A6: several candidates -----------------------------------------------------------------------

@pytest.mark.rule("A6")
def test_A6_the_last_candidate_is_the_pick_and_candidates_are_counted():
    reply = ('Options look like {"call": "a"}. An example from the menu: '
             '```json\n{"call": "b", "args": {}}\n```\n'
             'Final answer:\n```json\n{"call": "c"}\n```')
    rt = ScriptedRuntime([reply])
    assert decision.make("Pick.", ["a", "b", "c"], runtime=rt) == "c"
    att = decision.last_trace().attempts[0]
    assert (att.candidates, att.chosen, att.found_in) == (3, "c", "fence")


@pytest.mark.rule("A6")
def test_A6_a_candidate_nested_in_another_is_part_of_it():
    reply = '{"call": "wrap", "args": {"inner": {"call": "x"}}}'
    ex = find_action(reply)
    assert ex.candidates == 1 and ex.action["call"] == "wrap"


@pytest.mark.rule("A6")
def test_A6_a_broken_last_candidate_falls_back_to_the_one_before():
    reply = '{"call": "a"} then {"call": "b", "args": {"x": 1} oops'
    assert decision.extract_action(reply) == {"call": "a"}
    # but the trace still counts only objects that closed
    assert find_action(reply).candidates == 1


@pytest.mark.rule("A6")
def test_A6_a_last_candidate_with_a_bad_pick_is_not_replaced_by_an_earlier_good_one():
    rt = ScriptedRuntime(['{"call": "a"} ... {"call": "zzz"}'])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ["a"], runtime=rt, max_retries=0)
    assert info.value.kind == "unknown_call"
    assert info.value.trace.attempts[0].candidates == 2


@pytest.mark.rule("A6")
def test_A6_a_hundred_thousand_candidates_are_counted():
    text = '{"call": "a"} ' * 99_999 + '{"call": "b"}'
    ex = find_action(text)
    assert ex.action == {"call": "b"} and ex.candidates == 100_000


# -- replies that are not text ---------------------------------------------------------------------

@pytest.mark.rule("A5")
@pytest.mark.parametrize("reply", [None, b'{"call": "a"}', {"call": "a"}, 42])
def test_A5_a_reply_that_is_not_text_gives_not_text(reply):
    rt = ScriptedRuntime([reply])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ["a"], runtime=rt, max_retries=0)
    assert info.value.kind == "not_text"
    assert type(reply).__name__ in info.value.message
    json.dumps(info.value.trace.to_dict())  # the export survives a non-text reply


# -- bad option sets fail before any model call, naming the option and the fix ---------------------

def _bad_sets():
    def unsupported(x: set):
        return x

    def meta_unknown(a: int):
        return a
    meta_unknown.input_meta = {"b": {"description": "no such parameter"}}

    def needs_ctx(q: str, user_id: str):
        return q
    needs_ctx.input_meta = {"user_id": {"hidden": True}}

    def meta_not_dict(a: int):
        return a
    meta_not_dict.input_meta = ["a"]

    return [
        ({"unsupported": unsupported}, OptionError,
         r"parameter 'x' is annotated .*set.*mark it hidden"),
        ({"meta_unknown": meta_unknown}, OptionError,
         r"option 'meta_unknown'.*\['b'\].*fix the names"),
        ({"needs_ctx": needs_ctx}, OptionError,
         r"option 'needs_ctx'.*'user_id'.*pass context=\{'user_id': \.\.\.\}"),
        ({"meta_not_dict": meta_not_dict}, OptionError,
         r"option 'meta_not_dict'.*input_meta must be a dict"),
        ({"form": ("d", {"steps": [str, int]})}, TypeError,
         r"option 'form'.*exactly one item template"),
        ({"form": ("d", {})}, OptionError, r"option 'form'.*non-empty dict"),
        ({"form": ("d", {"x": set})}, TypeError, r"option 'form'.*not a schema"),
        ({"form": ("d", {"x": {"options": []}})}, TypeError, r"'options' must be a non-empty list"),
        ({"form": ("d", {"x": {}})}, TypeError, r"option 'form'.*empty dict is not a schema"),
        (["a", "a"], OptionError, r"'a' appears twice"),
        ([], OptionError, r"empty"),
        ([3.5], OptionError, r"option #0"),
        (3.5, OptionError, r"must be a dict"),
    ]


@pytest.mark.rule("O4")
@pytest.mark.rule("A8")
@pytest.mark.parametrize("i", range(len(_bad_sets())))
def test_O4_A8_bad_option_sets_never_reach_the_model(i):
    options, exc, pattern = _bad_sets()[i]
    rt = ScriptedRuntime([pick("a")])
    with pytest.raises(exc, match=pattern):
        decision.make("Pick.", options, runtime=rt)
    with pytest.raises(exc, match=pattern):
        agent("Pick.", options=options, runtime=rt)
    assert rt.calls == [] and len(rt.dag) == 0


@pytest.mark.rule("A8")
def test_A8_hidden_param_without_default_is_fine_when_context_has_it():
    def needs_ctx(q: str, user_id: str):
        return user_id

    needs_ctx.input_meta = {"user_id": {"hidden": True}}
    rt = ScriptedRuntime([pick("needs_ctx", {"q": "x"})])
    assert decision.make("Pick.", [needs_ctx], runtime=rt, context={"user_id": 7}) == 7
    with pytest.raises(TypeError, match="context= must be a dict"):
        decision.make("Pick.", [needs_ctx], runtime=rt, context=[("user_id", 7)])


@pytest.mark.rule("A8")
def test_A8_unsupported_annotation_is_fine_on_a_hidden_param():
    def f(q: str, conn: Any = None, pool: set = frozenset()):
        return q

    f.input_meta = {"pool": {"hidden": True}}
    assert "- f(q: str, conn: any = null)" in decision.render_options([f])
