"""The playground's goals (issue 27): the built-in set an option set makes reachable, a teacher's
own goals, ticking as typed replies meet them, hints on request, and `progress()` as plain JSON
that matches what the goal list shows."""
import json
import re

import pytest
from widgethelp import press

from openprogram.base.errors import UsageError
from openprogram.widgets.goals import Goal
from openprogram.widgets.playground import Playground


def book(city: str, nights: int = 1, user: str = "anon"):
    """Book a hotel."""
    return f"{city} x{nights} for {user}"


book.input_meta = {"user": {"hidden": True}, "city": {"options": ["Rome", "Oslo"]}}
OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet"),
           "note": ("Write a note.", {"text": str})}
CONTEXT = {"user": "ann"}


def shown(pg):
    """(goal id, met) as the goal list shows them."""
    return [(g, m == "true") for g, m in
            re.findall(r'data-goal="([^"]+)" data-met="(true|false)"', pg.goals_view.value)]


def test_the_built_in_goals_are_those_the_option_set_makes_reachable():
    ids = [g.id for g in Playground(OPTIONS, context=CONTEXT).goals]
    assert ids == ["error:no_action", "error:bad_args", "error:unknown_call",
                   "error:type_mismatch", "error:invalid_value", "error:missing_required",
                   "error:enum_violation", "one_attempt", "value_option", "fill_structure",
                   "hidden_dropped", "last_of_two", "recover"]
    only_values = [g.id for g in Playground({"a": "A", "b": "B"}).goals]
    assert only_values == ["error:no_action", "error:bad_args", "error:unknown_call",
                           "one_attempt", "value_option", "last_of_two", "recover"]


def test_goals_tick_as_replies_meet_them_and_progress_matches_the_page():
    pg = Playground(OPTIONS, context=CONTEXT,
                    goals=[("Book Oslo", lambda t: t.result == "Oslo x1 for ann",
                            "book Oslo for one night")])
    assert not any(met for _, met in shown(pg))
    pg.run("I would book Rome.")                                   # no_action
    pg.run('{"call": "book", "args": {"city": "Paris"}}')          # enum_violation, failed
    assert pg.state == "failed"
    met = {g for g, m in shown(pg) if m}
    assert met == {"error:no_action", "error:enum_violation"}
    press(pg.reset_button)
    pg.run('{"call": "wait"} then {"call": "book", "args": {"city": "Oslo", "user": "root"}}')
    met = {g for g, m in shown(pg) if m}
    assert met == {"error:no_action", "error:enum_violation", "one_attempt", "hidden_dropped",
                   "last_of_two", "user:book_oslo"}
    progress = json.loads(json.dumps(pg.progress()))
    assert [(g["id"], g["met"]) for g in progress["goals"]] == shown(pg)
    assert progress["met"] == 6 and progress["total"] == 14
    assert progress["decisions"] == 2 and progress["replies_typed"] == 3
    when = {g["id"]: g["when"] for g in progress["goals"]}
    assert when["error:enum_violation"] == {"decision": 1, "attempt": 2, "replies_typed": 2}
    assert when["user:book_oslo"] == {"decision": 2, "attempt": 1, "replies_typed": 3}
    assert "Goals: 6 of 14 met" in pg.goals_view.value
    assert "Goals: 6 of 14 met" in pg._repr_mimebundle_()["text/html"]


def test_hints_show_on_request_for_goals_not_met_and_escaped():
    pg = Playground(OPTIONS, context=CONTEXT, goals=[("<b>bold</b>", lambda t: False,
                                                      "<script>x()</script>")])
    assert "op-goal-hint" not in pg.goals_view.value
    pg.hints_button.value = True
    assert pg.goals_view.value.count("op-goal-hint") == len(pg.goals)
    assert "&lt;script&gt;x()&lt;/script&gt;" in pg.goals_view.value
    assert "<script>" not in pg.goals_view.value
    assert "&lt;b&gt;bold&lt;/b&gt;" in pg.goals_view.value
    pg.run('{"call": "wait"}')
    assert {g for g, m in shown(pg) if m} == {"one_attempt", "value_option"}
    assert pg.goals_view.value.count("op-goal-hint") == len(pg.goals) - 2


def test_a_check_that_raises_is_said_next_to_its_goal_and_never_raised():
    pg = Playground(OPTIONS, context=CONTEXT, builtin_goals=False,
                    goals=[Goal("boom", "Boom", lambda t: 1 / 0),
                           ("Waited", lambda t: t.chosen == "wait")])
    pg.run('{"call": "wait"}')
    assert shown(pg) == [("boom", False), ("user:waited", True)]
    assert "its check raised ZeroDivisionError: division by zero" in pg.goals_view.value
    assert pg.progress()["goals"][0]["error"] == "ZeroDivisionError: division by zero"


@pytest.mark.parametrize("goals, says", [
    ("Pick wait", r"goals= takes a list of goals, got str"),
    ([("Pick wait", "wait")], r"goal #0 \(tuple\) is not a goal: write a \(title, check\)"),
    ([("A b", lambda t: 1), ("a-b", lambda t: 1)], r"two goals share the id 'user:a_b'"),
])
def test_goals_that_are_not_goals_are_refused_with_the_form_to_write(goals, says):
    with pytest.raises(UsageError, match=says):
        Playground(OPTIONS, context=CONTEXT, goals=goals)


def test_in_the_tools_way_a_reply_is_a_tool_call_and_the_goals_are_those_it_can_reach():
    pg = Playground(OPTIONS, context=CONTEXT, mode="tools")
    ids = [g.id for g in pg.goals]
    assert "last_of_two" not in ids and {"error:no_action", "hidden_dropped", "recover"} <= set(ids)
    assert '&quot;name&quot;: &quot;book&quot;' in pg.menu_view.value  # the tools, not the menu
    assert pg.run("I would book Oslo.") == "waiting"        # text, not a call: no_action
    assert pg.run('book {"city": "Oslo", "user": "root"}') == "resolved"
    trace = pg.panel.trace
    assert trace.mode == "tools" and trace.attempts[1].found_in == "tool_call"
    assert trace.attempts[1].tool_calls[0]["args"] == {"city": "Oslo", "user": "root"}
    assert pg.result == "Oslo x1 for ann"
    assert {g for g, m in shown(pg) if m} == {"error:no_action", "hidden_dropped", "recover"}
    pg.reset()
    assert pg.run("book [1]") == "waiting" and pg.panel.trace.error_kinds == ["bad_args"]


def test_in_the_json_schema_way_a_reply_the_schema_forbids_is_never_sent():
    pg = Playground(OPTIONS, context=CONTEXT, mode="json_schema")
    assert [g.id for g in pg.goals] == ["one_attempt", "value_option", "fill_structure"]
    assert pg.run('{"call": "wait"}') == "ready"            # not of the schema: not sent
    assert pg.panel.trace is None and pg.replies == []
    assert "could not have written this: response.decision is required" in pg.status.value
    assert pg.run("no JSON") == "ready" and "this is not JSON" in pg.status.value
    assert pg.run('{"decision": {"call": "note", "args": {"text": "hi"}}}') == "resolved"
    assert pg.result == {"decision": "note", "text": "hi"} and pg.panel.trace.mode == "json_schema"
    assert {g for g, m in shown(pg) if m} == {"one_attempt", "fill_structure"}
    with pytest.raises(UsageError, match=r"mode='tool' is not a way of asking; use one of "
                                         r"'menu', 'tools', 'json_schema'"):
        Playground(OPTIONS, mode="tool")
