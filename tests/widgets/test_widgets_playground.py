"""The playground: one model call per click, re-asks that wait for the next typed reply, and a
decision that never blocks the kernel."""
import html

import pytest

from openprogram import OptionError
from openprogram.agentic_programming import trace as T
from openprogram.widgets.playground import Playground
from widgethelp import all_html


def book(city: str, nights: int = 1):
    """Book a hotel."""
    return f"{city} x{nights}"


def broken():
    """Always fails."""
    return 1 / 0


OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet"), "broken": broken}


def test_a_bad_reply_waits_for_the_next_one_then_resolves():
    pg = Playground(OPTIONS, prompt="Where to? Pick.")
    assert pg.state == "ready" and "attempt 1" in pg.status.value
    kept = len(T.history)

    pg.reply.value = "I think Rome."
    pg.run_button.click()
    assert pg.state == "waiting"
    trace = pg.panel.trace
    assert trace.status == "running" and len(trace.attempts) == 2
    first, pending = trace.attempts
    assert first.error_kind == "no_action"
    # the pending attempt carries the re-ask prompt, with the reply that was typed
    assert pending.reply is None and "I think Rome." in pending.prompt  # no reply yet
    assert "attempt 2" in pg.status.value and pg.reply.value == ""
    views = pg.panel.attempts_box.children
    assert "op-attempt-failed" in views[0]._dom_classes
    assert "op-attempt-running" in views[1]._dom_classes
    assert "waiting for the reply" in views[1].title.value
    assert len(T.history) == kept  # an unfinished decision is not in the history

    pg.reply.value = '{"call": "book", "args": {"city": "Rome", "nights": 3}}'
    pg.run_button.click()
    assert pg.state == "resolved" and pg.result == "Rome x3"
    assert pg.panel.trace.status == "resolved"
    assert "Result (option book)" in pg.panel.outcome.value
    assert pg.run_button.disabled
    assert pg.replies == ["I think Rome.", '{"call": "book", "args": {"city": "Rome", "nights": 3}}']


def test_two_bad_replies_fail_the_decision_and_reset_starts_over():
    pg = Playground(OPTIONS, prompt="Pick.")
    assert pg.run('{"call": "fly"}') == "waiting"
    assert pg.run('{"call": "book", "args": {}}') == "failed"
    assert [a.error_kind for a in pg.panel.trace.attempts] == ["unknown_call",
                                                               "missing_required"]
    assert "op-final-error" in pg.panel.outcome.value
    assert "every attempt failed" in pg.status.value
    assert pg.run('{"call": "wait"}') == "failed"  # over until reset
    assert "press Reset" in pg.status.value
    pg.reset()
    assert pg.state == "ready" and pg.panel.trace is None and not pg.run_button.disabled
    assert pg.run('{"call": "wait"}') == "resolved" and pg.result == "WAIT"


def test_max_retries_and_context_are_the_mechanism_s():
    def pay(amount: int, user_id: str = ""):
        """Pay."""
        return f"{user_id} paid {amount}"
    pay.input_meta = {"user_id": {"hidden": True}}
    pg = Playground({"pay": pay}, prompt="Pay.", max_retries=0, context={"user_id": "u7"})
    assert pg.run('{"call": "pay", "args": {"amount": 5, "user_id": "root"}}') == "resolved"
    assert pg.result == "u7 paid 5"
    assert pg.panel.trace.attempts[0].dropped == ["args.user_id"]
    pg.reset()
    assert pg.run("nothing") == "failed"  # no re-ask with max_retries=0


def test_an_empty_reply_is_not_sent():
    pg = Playground(OPTIONS)
    pg.reply.value = "   "
    pg.run_button.click()
    assert pg.state == "ready" and pg.replies == []
    assert "Write the model&#x27;s reply first" in pg.status.value


def test_an_option_that_raises_is_reported():
    pg = Playground(OPTIONS)
    assert pg.run('{"call": "broken"}') == "failed"
    assert isinstance(pg.error, ZeroDivisionError)
    assert "The chosen option raised ZeroDivisionError" in pg.status.value


def test_typed_markup_is_shown_as_text():
    pg = Playground(OPTIONS)
    payload = "<img src=x onerror=window.__pwned=1><script>window.__pwned=1</script>"
    pg.run(payload)
    text = all_html(pg)
    assert html.escape(payload) in text
    assert "<img" not in text.replace(pg.reply.value, "") and "<script" not in text


def test_a_bad_option_set_is_rejected_before_any_widget():
    with pytest.raises(OptionError, match="the option set is empty"):
        Playground({})


def test_between_clicks_only_the_worker_waits_and_reset_ends_its_decision():
    pg = Playground(OPTIONS, prompt="Pick.")
    assert pg.run("no idea") == "waiting"
    worker, trace = pg._worker, pg.panel.trace
    # the click returned; the decision is still running in its worker, waiting for a reply
    assert worker.is_alive() and trace.status == "running"
    assert pg.prompt.disabled  # the prompt was sent: it is fixed for this decision
    pg.reset()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert trace.status == "failed" and "the playground was reset" in str(trace.error)
    assert pg.state == "ready" and not pg.prompt.disabled and pg.panel.trace is None


def test_the_playground_output_carries_a_static_copy_of_where_it_stands():
    pg = Playground(OPTIONS, prompt="Where to? <b>Pick.</b>")
    bundle = pg._repr_mimebundle_()
    assert bundle["text/plain"] == "<Playground: ready, 0 reply(ies) typed>"
    static = bundle["text/html"]
    assert "op-table-options" in static and "<th>book</th>" in static
    assert html.escape("Where to? <b>Pick.</b>") in static and "attempt 1" in static
    pg.run('{"call": "wait"}')
    static = pg._repr_mimebundle_()["text/html"]
    assert "Result (option wait)" in static and "Resolved: the pick passed" in static
