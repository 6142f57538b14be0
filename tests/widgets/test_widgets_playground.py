"""The playground: one model call per click, re-asks that wait for the next typed reply, and a
decision that never blocks the kernel."""
import html

import pytest
from widgethelp import all_html

from openprogram import OptionError, UsageError
from openprogram.trace import decision_trace as T
from openprogram.widgets.playground import Playground


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
    assert pg.replies == ["I think Rome.",
                          '{"call": "book", "args": {"city": "Rome", "nights": 3}}']


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


# -- the settings are traits: setting the option set or the way of asking starts over -------------
def test_setting_the_options_redraws_what_the_model_sees_and_starts_over():
    pg = Playground(OPTIONS, prompt="Where to? Pick.")
    assert pg.run("no idea") == "waiting"
    worker, trace = pg._worker, pg.panel.trace
    changes = []
    pg.observe(changes.append, "options")
    new = {"fly": ("FLY", "fly away"), "stay": ("STAY", "stay home")}

    pg.options = new
    assert [(c.old, c.new) for c in changes] == [(OPTIONS, new)]
    # the menu the model is shown is the new one; nothing of the old option set is left
    menu = pg.menu_view.value
    assert "fly away" in menu and "stay home" in menu and "book" not in menu
    assert [o.name for o in pg.menu] == ["fly", "stay"]
    static = pg._repr_mimebundle_()["text/html"]
    assert "<th>fly</th>" in static and "<th>book</th>" not in static
    # as Reset does: the decision made with the old options ended, the panel is empty
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert trace.status == "failed" and "the playground was reset" in str(trace.error)
    assert pg.state == "ready" and pg.replies == [] and pg.panel.trace is None
    assert pg.panel.options is new and not pg.prompt.disabled
    assert pg.prompt.value == "Where to? Pick."          # the prompt stays
    # the next decision is made with the new option set
    assert pg.run('{"call": "book", "args": {"city": "Rome"}}') == "waiting"
    assert pg.panel.trace.attempts[0].error_kind == "unknown_call"
    assert pg.run('{"call": "fly"}') == "resolved" and pg.result == "FLY"


def test_setting_the_mode_redraws_the_tools_the_model_is_offered_and_starts_over():
    pg = Playground(OPTIONS)
    assert pg.run('{"call": "wait"}') == "resolved"
    assert "The menu the model sees" in pg.menu_view.value

    pg.mode = "tools"
    assert "The tools the model is offered" in pg.menu_view.value
    assert '&quot;name&quot;: &quot;book&quot;' in pg.menu_view.value
    assert 'option_name {"arg": 1}' in pg.reply.placeholder
    assert pg.state == "ready" and pg.panel.trace is None and pg.result is None
    # a reply written as a native tool call is one now
    assert pg.run('book {"city": "Oslo", "nights": 2}') == "resolved" and pg.result == "Oslo x2"

    pg.mode = "json_schema"
    assert "The JSON Schema the model" in pg.menu_view.value and pg.state == "ready"
    assert pg.run("book Oslo") == "ready"                # not JSON: structured output refuses it
    assert "Under structured output" in pg.status.value and pg.replies == []


def test_a_bad_mode_or_option_set_is_refused_and_the_old_one_stays():
    pg = Playground(OPTIONS)
    assert pg.run("no idea") == "waiting"
    menu = pg.menu_view.value
    with pytest.raises(UsageError, match=r"mode='tool' is not a way of asking; use one of "
                                         r"'menu', 'tools', 'json_schema'"):
        pg.mode = "tool"
    with pytest.raises(OptionError, match="the option set is empty"):
        pg.options = {}
    with pytest.raises(OptionError):
        pg.options = 42
    # nothing changed: the settings, what is shown, and the decision under way
    assert pg.mode == "menu" and pg.options is OPTIONS and pg.menu_view.value == menu
    assert pg.state == "waiting" and pg._worker.is_alive()
    assert pg.run('{"call": "wait"}') == "resolved" and pg.result == "WAIT"
    with pytest.raises(UsageError, match="mode='bogus' is not a way of asking"):
        Playground(OPTIONS, mode="bogus")


def test_max_retries_and_context_are_checked_and_hold_from_the_next_decision():
    import traitlets

    def pay(amount: int, user_id: str = ""):
        """Pay."""
        return f"{user_id} paid {amount}"
    pay.input_meta = {"user_id": {"hidden": True}}
    pg = Playground({"pay": pay}, prompt="Pay.")
    with pytest.raises(traitlets.TraitError):
        pg.max_retries = -1
    with pytest.raises(traitlets.TraitError):
        pg.context = ["u7"]
    assert pg.max_retries == 1 and pg.context is None
    assert pg.run("nothing") == "waiting"          # one re-ask allowed
    pg.max_retries, pg.context = 0, {"user_id": "u7"}
    assert pg.state == "waiting"                   # the decision under way is not reset
    assert pg.run('{"call": "pay", "args": {"amount": 5}}') == "resolved"
    assert pg.result == " paid 5"                  # it was started without the context
    pg.reset()
    assert pg.run('{"call": "pay", "args": {"amount": 5}}') == "resolved"
    assert pg.result == "u7 paid 5" and pg.panel.context == {"user_id": "u7"}
    pg.reset()
    assert pg.run("nothing") == "failed"           # no re-ask with max_retries=0


def test_state_is_read_only_and_observed_as_it_changes():
    import traitlets
    pg = Playground(OPTIONS)
    with pytest.raises(traitlets.TraitError, match='The "state" trait is read-only'):
        pg.state = "resolved"
    assert pg.state == "ready"
    seen = []
    pg.observe(lambda c: seen.append((c.old, c.new)), "state")
    pg.run("no idea")
    pg.run('{"call": "wait"}')
    pg.reset()
    assert seen == [("ready", "waiting"), ("waiting", "resolved"), ("resolved", "ready")]
    seen.clear()
    pg.run('{"call": "fly"}')
    pg.run('{"call": "book", "args": {}}')
    pg.options = {"go": ("GO", "go")}               # starting over is seen too
    assert seen == [("ready", "waiting"), ("waiting", "failed"), ("failed", "ready")]
