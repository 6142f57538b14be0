"""The caller's own rules (validate=, Retry) and re-ask text (reask=)."""
from __future__ import annotations

import asyncio

import pytest

import openprogram
from openprogram import DecisionError, Pick, Reask, Retry, agent, decision
from openprogram.runtimes import ScriptedRuntime

ran = []


def refund(amount: int) -> str:
    """Refund the customer."""
    ran.append(amount)
    return f"refunded {amount}"


OPTIONS = {"refund": refund, "ignore": "IGNORED"}


def at_most_100(pick: Pick) -> None:
    if pick.call == "refund" and pick.args["amount"] > 100:
        raise Retry("refunds above 100 need a person: pick ignore or a smaller amount")


def test_a_rule_rejects_a_pick_before_it_runs_and_the_model_is_told_why():
    ran.clear()
    rt = ScriptedRuntime(['{"call": "refund", "args": {"amount": 500}}',
                          '{"call": "refund", "args": {"amount": 80}}'])
    assert decision.make("Handle it.", OPTIONS, runtime=rt, validate=at_most_100) == "refunded 80"
    assert ran == [80]  # the rejected pick never ran
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "rejected" and first.chosen == "refund"
    assert "refunds above 100 need a person" in first.error_message
    assert "refunds above 100 need a person" in rt.calls[1].prompt
    assert "rejected" in openprogram.ERROR_KINDS


def test_a_rule_is_handed_the_pick_with_validated_args_and_the_option():
    seen = []
    rt = ScriptedRuntime(['{"call": "refund", "args": {"amount": 3, "extra": 1}}'])
    decision.make("Go.", OPTIONS, runtime=rt, validate=seen.append)
    (pick,) = seen
    assert pick.call == "refund" and pick.args == {"amount": 3}
    assert pick.option.kind == "function" and pick.option.handler is refund


def test_an_option_raising_retry_is_re_asked_and_its_result_dropped():
    calls = []

    def book(nights: int) -> str:
        calls.append(nights)
        if nights > 7:
            raise Retry("at most 7 nights")
        return f"booked {nights}"

    rt = ScriptedRuntime(['{"call": "book", "args": {"nights": 9}}',
                          '{"call": "book", "args": {"nights": 2}}'])
    assert decision.make("Book.", [book], runtime=rt) == "booked 2"
    assert calls == [9, 2]
    t = decision.last_trace()
    assert [a.error_kind for a in t.attempts] == ["rejected", None]
    assert "at most 7 nights" in rt.calls[1].prompt


def test_rejected_on_the_last_attempt_is_a_decision_error_with_the_trace():
    rt = ScriptedRuntime(['{"call": "refund", "args": {"amount": 500}}'])
    with pytest.raises(DecisionError) as info:
        decision.make("Go.", OPTIONS, runtime=rt, validate=at_most_100, max_retries=0)
    assert info.value.kind == "rejected" and len(info.value.trace.attempts) == 1


def test_any_other_exception_from_a_rule_is_the_users_and_keeps_the_trace():
    def broken(pick):
        raise KeyError("no such customer")

    rt = ScriptedRuntime(['{"call": "ignore"}'])
    with pytest.raises(KeyError):
        decision.make("Go.", OPTIONS, runtime=rt, validate=broken)
    t = decision.last_trace()
    assert t.status == "failed" and isinstance(t.error, KeyError) \
        and t.attempts[0].chosen == "ignore"


def test_an_async_rule_is_awaited_in_amake_and_finished_in_make():
    async def rule(pick):
        await asyncio.sleep(0)
        if pick.call == "ignore":
            raise Retry("do not ignore")

    replies = ['{"call": "ignore"}', '{"call": "refund", "args": {"amount": 1}}']
    assert decision.make("Go.", OPTIONS, runtime=ScriptedRuntime(replies), validate=rule) \
        == "refunded 1"
    assert asyncio.run(decision.amake("Go.", OPTIONS, runtime=ScriptedRuntime(replies),
                                      validate=rule)) == "refunded 1"


def test_agent_choices_takes_validate_and_reask():
    rt = ScriptedRuntime(['```json\n{"call": "refund", "args": {"amount": 500}}\n```',
                          '```json\n{"call": "ignore"}\n```'])
    out = agent("Handle it.", options=OPTIONS, runtime=rt, validate=at_most_100,
                reask="NO ({kind}): {error}")
    assert out == "IGNORED"
    assert rt.calls[1].prompt.startswith("NO (rejected): refunds above 100")


def test_a_reask_template_gets_every_field():
    template = "|{attempt}|{kind}|{path}|{error}|{reply}|{request}|{menu}"
    rt = ScriptedRuntime(['{"call": "refund", "args": {"amount": "x"}}', '{"call": "ignore"}'])
    decision.make("Do it.", OPTIONS, runtime=rt, reask=template)
    parts = rt.calls[1].prompt.split("|")
    assert parts[1:5] == ["1", "type_mismatch", "args.amount",
                          'args.amount must be int, got string "x"']
    assert parts[5] == '{"call": "refund", "args": {"amount": "x"}}' and parts[6] == "Do it."
    assert parts[7] == decision.render_options(OPTIONS)


def test_a_reask_callable_gets_a_reask_record():
    seen = []

    def write(r: Reask) -> str:
        seen.append(r)
        return f"try again: {r.error}"

    rt = ScriptedRuntime(["no json here", '{"call": "ignore"}'])
    decision.make("Do it.", OPTIONS, runtime=rt, reask=write)
    assert seen[0].kind == "no_action" and seen[0].attempt == 1 and seen[0].reply == "no json here"
    assert rt.calls[1].prompt.startswith("try again: ")


def test_parse_args_takes_reask():
    rt = ScriptedRuntime(['{"call": "ignore"}'])
    chosen, kwargs = decision.parse_args("nothing", OPTIONS, runtime=rt, reask="again: {kind}")
    assert chosen == "ignore" and rt.calls[0].prompt == "again: no_action"


def test_a_template_with_an_unknown_field_fails_before_any_model_call():
    rt = ScriptedRuntime([])
    with pytest.raises(ValueError, match=r"unknown field\(s\) 'problem'.*\{request\}.*\{attempt\}"):
        decision.make("Go.", OPTIONS, runtime=rt, reask="fix {problem}")
    assert rt.calls == []
    with pytest.raises(TypeError, match="reask= takes a format template"):
        decision.make("Go.", OPTIONS, runtime=rt, reask=42)
