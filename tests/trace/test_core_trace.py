"""The decision trace (A4): fields per attempt, last_trace / err.trace, observers and their event
order, to_dict / to_frame / format_text."""
import json
import warnings

import pytest
from corehelp import pick

import openprogram
from openprogram import (
    DecisionError,
    DecisionTrace,
    add_observer,
    agent,
    decision,
    observe,
    remove_observer,
)
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.trace import decision_trace as trace_mod


def plan(steps: list[dict], user: str, runtime=None):
    """Run a plan."""
    return len(steps)


plan.input_meta = {"user": {"hidden": True}}
PLAN_SCHEMA = {"steps": [{"action": {"type": str, "options": ["walk", "run"]}, "n": int}]}
OPTIONS = {"plan": ("Make a plan.", PLAN_SCHEMA), "run": plan, "stop": ("STOP", "stop now")}


def failing_then_ok():
    bad = ('thinking... {"call": "stop"} no wait: '
           + json.dumps({"call": "plan", "args": {"steps": [{"action": "fly", "n": 1}]}}))
    good = ("```json\n" + json.dumps({"call": "run", "args": {"steps": [{"a": 1}],
                                                              "user": "mallory", "x": 0}})
            + "\n```")
    return ScriptedRuntime([bad, good])


@pytest.mark.rule("A4")
def test_A4_attempt_fields_for_a_failed_then_resolved_decision():
    rt = failing_then_ok()
    assert decision.make("Plan.", OPTIONS, runtime=rt, context={"user": "ada"}) == 1
    t = decision.last_trace()
    assert isinstance(t, DecisionTrace) and openprogram.last_trace() is t
    assert t.status == "resolved" and t.result == 1 and t.error is None and t.chosen == "run"
    a1, a2 = t.attempts
    assert (a1.number, a1.is_last, a2.number, a2.is_last) == (1, False, 2, True)
    assert a1.prompt == rt.calls[0].prompt and a2.prompt == rt.calls[1].prompt
    assert a1.reply == rt.calls[0].reply
    assert a1.extracted == {"call": "plan", "args": {"steps": [{"action": "fly", "n": 1}]}}
    assert (a1.found_in, a1.key_alias, a1.candidates) == ("text", "call", 2)
    assert (a1.error_kind, a1.error_path) == ("enum_violation", "args.steps[0].action")
    assert a1.chosen == "plan" and a1.args is None
    assert (a2.found_in, a2.candidates, a2.error_kind, a2.chosen) == ("fence", 1, None, "run")
    assert a2.args == {"steps": [{"a": 1}]}
    assert sorted(a2.dropped) == ["args.user", "args.x"]
    assert a2.injected == ["user", "runtime"]
    assert all(a.duration_s is not None and a.duration_s >= 0 for a in t.attempts)
    assert all(a.usage["input_tokens"] > 0 for a in t.attempts)
    assert t.menu == decision.render_options(OPTIONS)
    assert [o["name"] for o in t.options] == ["plan", "run", "stop"]
    run_params = {p["name"]: p for p in t.options[1]["params"]}
    assert run_params["user"]["hidden"] and run_params["user"]["source"] == "context"
    assert run_params["runtime"]["source"] == "runtime"
    assert t.context_keys == ["user"] and t.runtime == "scripted"


@pytest.mark.rule("A4")
def test_A4_error_trace_keeps_every_attempt():
    rt = ScriptedRuntime(["no pick", pick("plan", {"steps": [{"action": "walk"}]})])
    with pytest.raises(DecisionError) as info:
        decision.make("Plan.", OPTIONS, runtime=rt, context={"user": "u"})
    t = info.value.trace
    assert t is decision.last_trace()
    assert t.status == "failed" and t.error is info.value and t.result is None
    assert [a.error_kind for a in t.attempts] == ["no_action", "missing_required"]
    assert t.attempts[1].error_path == "args.steps[0].n"
    assert t.attempts[1].reply == pick("plan", {"steps": [{"action": "walk"}]})
    assert t.error_kinds == ["no_action", "missing_required"]


@pytest.mark.rule("A4")
def test_A4_observer_events_in_order_with_attempt_numbers(events):
    rt = ScriptedRuntime(["no pick", pick("stop")], stream_chunk=50)
    decision.make("Pick.", OPTIONS, runtime=rt, context={"user": "u"})
    seq = [(e.kind, e.attempt_number, e.is_last_attempt) for e in events
           if e.kind != "reply_chunk"]
    assert seq == [
        ("decision_started", None, False),
        ("attempt_sent", 1, False),
        ("reply_received", 1, False),
        ("extracted", 1, False),
        ("attempt_failed", 1, False),
        ("attempt_sent", 2, True),
        ("reply_received", 2, True),
        ("extracted", 2, True),
        ("validated", 2, True),
        ("resolved", 2, True),  # the outcome carries the last attempt record
    ]
    chunks = [e for e in events if e.kind == "reply_chunk"]
    assert [c.attempt_number for c in chunks] == [1, 2]
    assert all(e.trace is events[0].trace for e in events)
    assert set(e.kind for e in events) <= set(trace_mod.EVENT_KINDS)


@pytest.mark.rule("A4")
def test_A4_an_observer_of_some_kinds_sees_only_those_and_the_trace_takes_every_step():
    """observe(kinds=): an evaluation row's observer wants two kinds; the events of the others
    are never built, yet the trace holds every attempt as it does with every observer."""
    few, every = [], []
    with observe(every.append):
        with observe(few.append, kinds=("attempt_sent", "resolved")):
            decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(["no pick", pick("stop")]),
                          context={"user": "u"})
    assert [(e.kind, e.attempt_number) for e in few] == [
        ("attempt_sent", 1), ("attempt_sent", 2), ("resolved", 2)]
    assert len(every) == 10 and few[-1] is every[-1]   # one event object for both observers
    t = few[0].trace
    assert [a.error_kind for a in t.attempts] == ["no_action", None] and t.status == "resolved"
    assert t.attempts[-1] is every[-1].attempt
    with observe(few.append, kinds=()):   # no kind at all: nothing reaches it
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([pick("stop")]),
                      context={"user": "u"})
    assert len(few) == 3
    with pytest.raises(openprogram.ArgumentError, match="unknown event kind"):
        observe(print, kinds=("resolved", "done"))


@pytest.mark.rule("A4")
def test_A4_a_record_an_observer_was_handed_never_changes_after_its_event():
    """The loop completes an attempt's record in place only while no observer holds it: each
    record an observer was handed stays as it stood at its event, and a decision nobody
    watches step by step ends with the same trace."""
    def run(observer=None, kinds=None):
        script = ScriptedRuntime(["no pick", pick("stop")])
        if observer is None:
            decision.make("Pick.", OPTIONS, runtime=script, context={"user": "u"})
        else:
            with observe(observer, kinds=kinds):
                decision.make("Pick.", OPTIONS, runtime=script, context={"user": "u"})
        return decision.last_trace()

    handed = []
    seen = []   # (the record, what it held when handed)
    for kinds in (("attempt_sent",), ("extracted", "attempt_failed"), None):
        def keep(e):
            handed.append(e)
            seen.append((e.attempt, dict(vars(e.attempt)) if e.attempt is not None else None))
        run(keep, kinds)
    assert len(handed) == 2 + 3 + 10
    for att, then in seen:
        if att is not None:
            assert dict(vars(att)) == then   # never completed after it was handed out
    sent = [e.attempt for e in handed if e.kind == "attempt_sent"]
    assert sent[0].reply is None and sent[0].chosen is None   # as it stood when sent
    quiet = run().to_dict()
    watched = run(lambda e: None).to_dict()
    for t in (quiet, watched):
        for a in t["attempts"]:
            a.pop("started_at"), a.pop("duration_s"), a.pop("model_call_id")
        for k in ("id", "started_at", "duration_s"):
            t.pop(k)
    assert quiet == watched and [a["error_kind"] for a in quiet["attempts"]] == ["no_action", None]


@pytest.mark.rule("A4")
def test_A4_observer_sees_live_state_and_failure(events):
    seen_replies = []
    with observe(lambda e: e.kind == "attempt_failed"
                 and seen_replies.append((e.attempt.reply, e.attempt.error_kind))):
        with pytest.raises(DecisionError):
            decision.make("Pick.", ["a"], runtime=ScriptedRuntime(["x", "y"]))
    assert seen_replies == [("x", "no_action"), ("y", "no_action")]
    assert events[-1].kind == "decision_failed"
    assert events[-1].trace.status == "failed"


@pytest.mark.rule("A4")
def test_A4_tool_call_events_and_tool_rounds(events):
    def look(q: str) -> str:
        """Look."""
        return q * 2

    rt = ScriptedRuntime([ToolCall("look", {"q": "ab"}), pick("stop")])
    agent("Go.", tools=[look], options=OPTIONS, runtime=rt, context={"user": "u"})
    tool_events = [e for e in events if e.kind == "tool_call"]
    assert len(tool_events) == 1
    r = tool_events[0].data["round"]
    assert (r.round, r.name, r.args, r.result, r.error) == (1, "look", {"q": "ab"}, "abab", None)
    kinds = [e.kind for e in events if e.kind != "reply_chunk"]
    assert kinds.index("tool_call") < kinds.index("extracted")


@pytest.mark.rule("A4")
def test_A4_the_record_a_tool_call_event_carries_stays_as_it_was():
    """A turn's tool_call event hands out the attempt's record too: the loop copies it for the
    steps after (the reply, the pick), rather than completing it in place."""
    def look(q: str) -> str:
        """Look."""
        return q * 2

    seen = []
    rt = ScriptedRuntime([ToolCall("look", {"q": "ab"}), pick("stop")])
    with observe(lambda e: seen.append((e.attempt, dict(vars(e.attempt)))), kinds=("tool_call",)):
        agent("Go.", tools=[look], options=OPTIONS, runtime=rt, context={"user": "u"})
    (att, then), = seen
    assert dict(vars(att)) == then and att.chosen is None
    assert decision.last_trace().attempts[-1].chosen == "stop"


@pytest.mark.rule("A4")
@pytest.mark.parametrize("entry", ["make", "agent", "format"])
def test_A4_an_interrupted_decision_is_finished_as_failed(events, entry):
    """Ctrl-C in the middle of a model call (or a cancelled evaluate row) ends the decision:
    the trace says failed with the interrupt as its error, observers hear decision_failed, and
    what the model had streamed stays on the attempt."""
    def model(prompt):
        raise KeyboardInterrupt()
    rt = ScriptedRuntime([pick("a") + " and then", model], stream_chunk=4)
    with pytest.raises(KeyboardInterrupt):
        if entry == "make":
            decision.make("Pick.", ["b"], runtime=rt)
        elif entry == "agent":
            agent("Pick.", options=["b"], runtime=rt)
        else:
            agent("Fill.", response_format={"n": int}, runtime=rt)
    t = events[-1].trace
    assert events[-1].kind == "decision_failed"
    assert t.status == "failed" and isinstance(t.error, KeyboardInterrupt)
    assert t.duration_s is not None and decision.last_trace() is t
    assert [a.number for a in t.attempts] == [1, 2]
    assert t.attempts[0].reply.endswith(" and then") and t.attempts[0].error_kind
    assert t.to_dict()["error"]["type"] == "KeyboardInterrupt"


@pytest.mark.rule("A4")
def test_A4_global_observer_and_a_raising_observer():
    seen = []
    fn = add_observer(seen.append)
    try:
        decision.make("Pick.", ["a"], runtime=ScriptedRuntime([pick("a")]))
    finally:
        remove_observer(fn)
    assert [e.kind for e in seen][0] == "decision_started" and seen[-1].kind == "resolved"
    count = len(seen)
    decision.make("Pick.", ["a"], runtime=ScriptedRuntime([pick("a")]))
    assert len(seen) == count  # removed: it sees nothing more

    def broken(event):
        raise RuntimeError("observer bug")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with observe(broken):
            assert decision.make("Pick.", ["a"], runtime=ScriptedRuntime([pick("a")])) == "a"
    assert any("observer bug" in str(w.message) for w in caught)


@pytest.mark.rule("A4")
def test_A4_to_dict_round_trips_through_json():
    rt = ScriptedRuntime([b"bytes reply", None, pick("run", {"steps": [{}]})])
    decision.make("Plan.", OPTIONS, runtime=rt, context={"user": object()}, max_retries=2)
    t = decision.last_trace()
    d = t.to_dict()
    again = json.loads(json.dumps(d))
    assert again == d
    assert [a["error_kind"] for a in again["attempts"]] == ["not_text", "not_text", None]
    assert again["attempts"][0]["reply"] == "b'bytes reply'"
    assert again["status"] == "resolved" and again["chosen"] == "run" and again["result"] == 1
    assert again["context_keys"] == ["user"]
    # a failed trace too
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", ["a"], runtime=ScriptedRuntime([{"call": "a"}]), max_retries=0)
    d = json.loads(json.dumps(info.value.trace.to_dict()))
    assert d["error"]["kind"] == "not_text" and d["error"]["type"] == "DecisionError"


@pytest.mark.rule("A4")
def test_A4_to_frame_tables():
    import pandas as pd

    def look(q: str) -> str:
        """Look."""
        return q

    rt = ScriptedRuntime([ToolCall("look", {"q": "z"}), "no pick", pick("stop")])
    agent("Go.", tools=[look], options=OPTIONS, runtime=rt, context={"user": "u"})
    t = decision.last_trace()
    attempts = t.to_frame()
    assert isinstance(attempts, pd.DataFrame) and list(attempts.index) == [1, 2]
    assert list(attempts["error_kind"].fillna("")) == ["no_action", ""]
    assert attempts.loc[2, "chosen"] == "stop"
    assert {"dropped", "injected", "found_in", "candidates", "tokens_in"} <= set(attempts)
    options = t.to_frame("options")
    assert list(options.index) == ["plan", "run", "stop"]
    tools = t.to_frame("tools")
    assert list(tools["tool"]) == ["look"] and list(tools["result"]) == ["z"]
    summary = t.to_frame("summary")
    assert summary.iloc[0]["status"] == "resolved" and summary.iloc[0]["attempts"] == 2
    with pytest.raises(ValueError, match="unknown table 'steps'"):
        t.to_frame("steps")


@pytest.mark.rule("A4")
def test_A4_format_text_and_repr():
    rt = failing_then_ok()
    decision.make("Plan.", OPTIONS, runtime=rt, context={"user": "ada"})
    t = decision.last_trace()
    text = t.format_text()
    assert text.splitlines()[0] == repr(t)
    assert "resolved: 2 attempt(s), result=1" in repr(t)
    assert "error enum_violation at args.steps[0].action" in text
    assert "extracted (text, key 'call', 2 candidate(s))" in text
    assert "chosen: run" in text and "result: 1" in text
    bundle = t._repr_mimebundle_()
    assert bundle["text/plain"] == text


@pytest.mark.rule("A4")
def test_A4_history_keeps_recent_traces():
    for name in ("a", "b"):
        decision.make("Pick.", [name], runtime=ScriptedRuntime([pick(name)]))
    assert [t.chosen for t in list(trace_mod.history)[-2:]] == ["a", "b"]


@pytest.mark.rule("A4")
def test_A4_scoped_observers_follow_bind_context_into_threads():
    import threading

    from openprogram import bind_context

    seen = []

    def decide():
        decision.make("Pick.", ["a"], runtime=ScriptedRuntime([pick("a")]))

    with observe(seen.append):
        t = threading.Thread(target=bind_context(decide))
        t.start()
        t.join()
        bare = threading.Thread(target=decide)  # no context copy: the scope does not follow
        bare.start()
        bare.join()
    kinds = [e.kind for e in seen]
    assert kinds[0] == "decision_started" and kinds[-1] == "resolved"
    assert kinds.count("decision_started") == 1  # the bare thread's decision was not seen


def test_to_dict_keeps_json_values_and_tags_the_rest():
    import dataclasses
    import datetime
    import enum

    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Box:
        size: int
        when: datetime.date

    def make_box(size: int = 1) -> Box:
        return Box(size, datetime.date(2026, 12, 3))

    rt = ScriptedRuntime(['{"call": "box", "args": {"size": 2}}', '{"call": "color"}',
                          '{"call": "boom"}', '{"call": "plain"}'])
    decision.make("Pick.", {"box": make_box}, runtime=rt)
    box = decision.last_trace().to_dict()
    assert box["result"] == {"size": 2, "when": "2026-12-03"}
    assert box["options"][0]["params"][0]["default"] == 1  # a default is its JSON value
    decision.make("Pick.", {"color": Color.RED}, runtime=rt)
    assert decision.last_trace().to_dict()["result"] == "red"

    def boom():
        raise LookupError("nope")
    with pytest.raises(LookupError):
        decision.make("Pick.", [boom], runtime=rt)
    failed = decision.last_trace().to_dict()
    assert failed["error"]["type"] == "LookupError"
    decision.make("Pick.", {"plain": {"t": "a", "d": 1}}, runtime=rt)
    plain = decision.last_trace().to_dict()
    assert plain["result"] == {"t": "a", "d": 1}
    for d in (box, failed, plain):
        assert json.loads(json.dumps(d, allow_nan=False)) == d
