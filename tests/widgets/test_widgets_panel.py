"""The decision panel's content from a trace, its live updates from observer events, the
escaping of everything a model (or an option set) wrote, and the "pytest test" button."""
import html
import subprocess
import sys

import ipywidgets as W
import pytest
from widgethelp import all_html, press

from openprogram import DecisionError, decision, observe
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.widgets.panel import DecisionPanel, trace_html

PAYLOADS = ["<script>window.__pwned=1</script>", "<img src=x onerror=window.__pwned=1>",
            "<b onmouseover=alert(1)>bold</b>", "\"'><svg/onload=alert(1)>"]


def book(city: str, nights: int = 1):
    """Book a hotel."""
    return {"city": city, "nights": nights}


OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet")}


def two_attempt_trace():
    rt = ScriptedRuntime(['{"call": "book", "args": {"city": "Rome", "nights": "two"}}',
                          '```json\n{"call": "book", "args": {"city": "Rome", "nights": 2}}\n```'])
    decision.make("Where to? Pick.", OPTIONS, runtime=rt)
    return decision.last_trace()


def test_a_panel_from_a_trace_shows_every_attempt_and_the_result():
    trace = two_attempt_trace()
    panel = DecisionPanel(trace)
    first, second = panel.attempts_box.children
    assert "op-attempt-failed" in first._dom_classes and "op-attempt-ok" in second._dom_classes
    assert first.layout.border_left != second.layout.border_left  # red vs green
    # attempt 1: raw reply, extracted JSON, the validation error with its kind, path, message
    body = first.body.value
    assert html.escape('"nights": "two"') in body
    assert "<b>type_mismatch</b> at args.nights" in body
    assert "args.nights must be int, got string" in body
    assert "Extracted JSON (found in the text" in body
    # the prompt of attempt 2 is the re-ask, with the previous reply and the menu
    assert "re-ask" in second.prompt.value and "Your previous reply could not be used" \
        in second.prompt.value
    # attempt 2: pretty-printed extraction and the chosen option with its arguments
    assert "Chosen option: book" in second.body.value
    assert html.escape('{\n  "city": "Rome",\n  "nights": 2\n}') in second.body.value
    assert "found in a fence" in second.body.value
    # the outcome box is the green result; the header says resolved
    assert "op-result" in panel.outcome.value and "&#x27;nights&#x27;" not in panel.outcome.value
    assert html.escape('"nights": 2') in panel.outcome.value
    assert "resolved" in panel.header.value and f"#{trace.id}" in panel.header.value
    # text front ends see the whole trace, not ipywidgets' 110-character cut
    bundle = panel._repr_mimebundle_()
    assert bundle["text/plain"] == trace.format_text()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_the_tables_are_the_trace_frames():
    trace = two_attempt_trace()
    panel = DecisionPanel(trace)
    attempts, options, tools, summary = (w.value for w in panel.tables.children)
    assert list(panel.tables.titles) == ["attempts", "options", "tools", "summary"]
    frame = trace.to_frame("attempts")
    for col in frame.columns:
        assert f"<th>{col}</th>" in attempts
    assert "<td>type_mismatch</td>" in attempts and "<td>args.nights</td>" in attempts
    assert "<th>book</th>" in options and "city: str" in options and "nights: int = 1" in options
    assert "no tools" in tools
    assert "<td>resolved</td>" in summary


def test_a_failed_decision_shows_the_final_error_distinctly():
    rt = ScriptedRuntime(["no json at all", '{"call": "fly"}'])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    panel = DecisionPanel(info.value.trace)
    assert all("op-attempt-failed" in v._dom_classes for v in panel.attempts_box.children)
    assert "op-final-error" in panel.outcome.value and "[unknown_call]" in panel.outcome.value
    assert "Extracted JSON: none (0 candidate(s))" in panel.attempts_box.children[0].body.value
    assert "failed" in panel.header.value


def test_hidden_params_dropped_and_injected_fields_are_shown():
    def pay(amount: int, user_id: str = ""):
        """Pay."""
        return amount
    pay.input_meta = {"user_id": {"hidden": True}}
    rt = ScriptedRuntime(['{"call": "pay", "args": {"amount": 3, "user_id": "root", "x": 1}}'])
    decision.make("Pick.", {"pay": pay}, runtime=rt, context={"user_id": "u1"})
    panel = DecisionPanel(decision.last_trace())
    body = panel.attempts_box.children[0].body.value
    assert "dropped (never used): args.user_id, args.x" in body
    assert "injected: user_id" in body
    assert html.escape('user_id: str = "" [hidden: from context]') in \
        panel.tables.children[1].value


@pytest.mark.parametrize("payload", PAYLOADS)
def test_replies_option_names_and_descriptions_are_escaped_everywhere(payload):
    options = {payload: (payload, payload), "ok": ("OK", payload)}
    rt = ScriptedRuntime([f'{payload} {{"call": "{payload}x"}}', '{"call": "ok"}'])
    decision.make(f"Pick. {payload}", options, runtime=rt)
    trace = decision.last_trace()
    panel = DecisionPanel(trace)
    views = [all_html(panel), trace_html(trace), trace._repr_mimebundle_()["text/html"]]
    for text in views:
        assert payload not in text
        assert html.escape(payload) in text
        for raw in ("<script", "<img", "<svg", "<b onmouse"):
            assert raw not in text


def test_the_panel_updates_live_and_throttles_reply_chunks():
    reply = '{"call": "book", "args": {"city": "Oslo"}}'

    def seen_bodies(min_interval):
        panel = DecisionPanel(min_interval=min_interval)
        bodies = []

        def watch(event):  # runs after the panel's observer: what the front end got so far
            if event.kind == "reply_chunk":
                bodies.append(panel.attempts_box.children[0].body.value)
        with observe(panel.observer), observe(watch):
            decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([reply], stream_chunk=5))
        return panel, bodies

    panel, bodies = seen_bodies(0.0)
    # each chunk redrew the reply: it grows one chunk at a time while the decision runs
    for n, body in enumerate(bodies, 1):
        assert html.escape(reply[:5 * n]) + "</pre>" in body
    assert len(bodies) == -(-len(reply) // 5)
    assert panel.trace.status == "resolved" and "op-result" in panel.outcome.value
    # with a long interval the chunks do not redraw; the whole reply is drawn once it is in
    panel, bodies = seen_bodies(3600.0)
    assert all(html.escape(reply) not in b for b in bodies)
    assert html.escape(reply) in panel.attempts_box.children[0].body.value


def test_a_panel_follows_only_the_first_decision_it_sees():
    panel = DecisionPanel()
    with observe(panel.observer):
        decision.make("one", {"a": 1}, runtime=ScriptedRuntime(['{"call": "a"}']))
        first = panel.trace
        decision.make("two", {"b": 2}, runtime=ScriptedRuntime(['{"call": "b"}']))
    assert panel.trace is first and first.prompt == "one"
    assert "Result (option a)" in panel.outcome.value


def test_a_live_panel_draws_only_its_own_decision_when_others_run_inside_it():
    inner = ScriptedRuntime(['{"call": "x"}'] * 6, latency=0.01)

    def survey():
        """Runs other decisions, some at the same time."""
        decision.evaluate("evaluated-{q}", {"x": "X", "y": "Y"}, [{"q": i} for i in range(6)],
                          runtime=inner, concurrency=3, progress=False)
        decision.make("nested-one", {"z": "Z"}, runtime=ScriptedRuntime(['{"call": "z"}']))
        return "done"

    shown, seen = [], []
    panel = DecisionPanel()
    with panel.live(show=shown.append), observe(lambda e: seen.append(all_html(panel))):
        assert decision.make("outer", {"survey": survey},
                             runtime=ScriptedRuntime(['{"call": "survey"}'])) == "done"
    assert shown == [panel] and panel.trace.prompt.startswith("outer")
    assert len(panel.attempts_box.children) == 1
    assert len(seen) > 30 and "Result (option survey)" in seen[-1]
    # at no point, not only at the end, did the panel show another decision's prompt or reply
    for text in seen:
        assert "evaluated-" not in text and "nested-one" not in text
        assert html.escape('{"call": "x"}') not in text


def test_views_are_updated_in_place_not_rebuilt():
    panel = DecisionPanel()
    ids = []

    def watch(event):
        if panel.attempts_box.children:
            ids.append(id(panel.attempts_box.children[0].body))
    with observe(panel.observer), observe(watch):
        decision.make("p", OPTIONS, runtime=ScriptedRuntime(["x", '{"call": "wait"}']))
    assert len(set(ids)) == 1
    assert len(panel.attempts_box.children) == 2


def test_the_test_button_writes_a_test_that_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trace = two_attempt_trace()
    panel = DecisionPanel(trace, options=OPTIONS, options_expr="OPTIONS")
    box = panel.test_box
    assert not box.button.disabled
    box.button.click()
    code = box.code.value
    assert code.startswith('"""Replays decision #') and "def book(city: str, nights: int = 1)" \
        in code
    assert box.details.layout.display == "flex"
    box.save.click()
    saved = tmp_path / f"test_decision_{trace.id}.py"
    assert saved.read_text() == code
    assert html.escape(str(saved)) in box.status.value
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(saved)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def pay(amount: int, user_id: str = ""):
    """Pay."""
    return {"amount": amount, "user": user_id}


pay.input_meta = {"user_id": {"hidden": True}}


def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q


PAY_OPTIONS = {"pay": pay, "form": ("Fill a form.", {"name": str, "tags": [str]}),
               "wait": ("WAIT", "do nothing yet")}


def test_the_test_button_writes_green_tests_for_hidden_params_schemas_tools_and_failures(
        tmp_path):
    ctx = {"user_id": "u1"}
    panels = {}
    decision.make("Pay. Pick.", PAY_OPTIONS, context=ctx, runtime=ScriptedRuntime(
        ['{"call": "pay", "args": {"amount": "3"}}',
         '{"call": "pay", "args": {"amount": 3, "user_id": "root"}}']))
    panels["hidden"] = DecisionPanel(decision.last_trace(), options=PAY_OPTIONS, context=ctx)
    decision.make("Fill. Pick.", PAY_OPTIONS, context=ctx, runtime=ScriptedRuntime(
        ['{"call": "form", "args": {"name": "Ada", "tags": ["x"], "extra": 1}}']))
    panels["schema"] = DecisionPanel(decision.last_trace(), options=PAY_OPTIONS, context=ctx)
    from openprogram import agent
    agent("Look, then pick.", tools=[lookup], choices=PAY_OPTIONS, context=ctx,
          runtime=ScriptedRuntime([ToolCall("lookup", {"q": "a"}), '{"call": "wait"}']))
    panels["tools"] = DecisionPanel(decision.last_trace(), options=PAY_OPTIONS, context=ctx,
                                    tools=[lookup])
    with pytest.raises(DecisionError):
        decision.make("Pick.", PAY_OPTIONS, context=ctx,
                      runtime=ScriptedRuntime(["no", '{"call": "fly"}']))
    panels["failed"] = DecisionPanel(decision.last_trace(), options=PAY_OPTIONS, context=ctx)
    for name, panel in panels.items():
        panel.test_box.button.click()
        code = panel.test_box.code.value
        assert code, (name, panel.test_box.status.value)
        assert "CONTEXT = {'user_id': 'u1'}" in code
        (tmp_path / f"test_{name}.py").write_text(code)
    assert "pay.input_meta = {'user_id': {'hidden': True}}" in panels["hidden"].test_box.code.value
    assert "TOOLS = [lookup]" in panels["tools"].test_box.code.value
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(panels)} passed" in run.stdout

    # a panel without the context (or tools) says what to do, and imports it from a module
    bare = DecisionPanel(panels["tools"].trace, options=PAY_OPTIONS)
    bare.test_box.button.click()
    assert "does not hold the context and the tools: name the module that defines them" \
        in bare.test_box.status.value
    bare.test_box.module.value = "my.options"
    bare.test_box.button.click()
    assert "from my.options import OPTIONS, CONTEXT, TOOLS" in bare.test_box.code.value
    panels["tools"].test_box.module.value = "my.options"
    panels["tools"].test_box.button.click()
    code = panels["tools"].test_box.code.value
    assert "from my.options import OPTIONS\n" in code and "TOOLS = [lookup]" in code


def test_the_test_button_explains_when_it_cannot_write_the_test():
    trace = two_attempt_trace()
    panel = DecisionPanel(trace)              # the panel was not given the option set
    panel.test_box.button.click()
    assert "name the module that defines it" in panel.test_box.status.value
    panel.test_box.module.value = "my.options"
    panel.test_box.button.click()
    assert "from my.options import OPTIONS" in panel.test_box.code.value


def test_a_running_panel_disables_the_test_button():
    panel = DecisionPanel()
    assert panel.test_box.button.disabled
    assert isinstance(panel.tables, W.Tab)
    assert repr(panel) == "<DecisionPanel: no decision yet>"


def test_a_live_panel_draws_immutable_records_and_chunks_that_carry_only_new_text():
    """The events as the refactored core sends them: every attempt a snapshot that never
    changes, a reply_chunk that carries only its new text (the attempt's reply still None),
    and each event a new trace record of the same decision. Replayed by hand from a real
    decision's records."""
    import copy
    import dataclasses

    from openprogram.trace.decision_trace import Attempt, TraceEvent
    reply = '{"call": "book", "args": {"city": "Oslo"}}'
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([reply]))
    done = decision.last_trace()
    (full,) = done.attempts
    running = dataclasses.replace(done, status="running", attempts=[], result=None,
                                  duration_s=None)
    sent = Attempt(number=1, is_last=full.is_last, prompt=full.prompt)
    received = dataclasses.replace(sent, reply=reply)
    other = dataclasses.replace(running, id=done.id + 1000, prompt="another decision")
    chunks = [reply[i:i + 7] for i in range(0, len(reply), 7)]
    events = [TraceEvent("decision_started", running),
              TraceEvent("attempt_sent", dataclasses.replace(running, attempts=[sent]), sent)]
    events += [TraceEvent("reply_chunk", events[-1].trace, sent if i % 2 else None,
                          {"text": c}) for i, c in enumerate(chunks)]
    events += [TraceEvent("decision_started", other),
               TraceEvent("reply_received", dataclasses.replace(running, attempts=[received]),
                          received),
               TraceEvent("validated", dataclasses.replace(running, attempts=[full]), full),
               TraceEvent("resolved", done)]
    before = copy.deepcopy([(e.trace, e.attempt) for e in events])

    panel = DecisionPanel(min_interval=0.0)
    seen = []
    for event in events:
        panel.observer(event)
        if event.kind == "reply_chunk":
            view = panel.attempts_box.children[0]
            seen.append((view.title.value, view.body.value))
    # while streaming, the reply shown is the chunks so far, added up by the panel itself
    assert len(seen) == len(chunks)
    for n, (title, body) in enumerate(seen, 1):
        assert html.escape("".join(chunks[:n])) + "</pre>" in body
        assert "reply arriving" in title
    # the other decision was ignored; the panel holds the last record of its own
    assert panel.trace is done and "another decision" not in all_html(panel)
    assert "Result (option book)" in panel.outcome.value and "resolved" in panel.header.value
    assert "Chosen option: book" in panel.attempts_box.children[0].body.value
    # no record was changed by the panel
    assert [(e.trace, e.attempt) for e in events] == before


# -- the trace is a trait: setting it redraws the panel -------------------------------------------
def wait_trace(prompt="Nothing to book yet? Pick."):
    decision.make(prompt, OPTIONS, runtime=ScriptedRuntime(['{"call": "wait"}']))
    return decision.last_trace()


def test_setting_the_trace_redraws_the_panel_with_the_new_decision():
    t1, t2 = two_attempt_trace(), wait_trace()
    panel = DecisionPanel(t1, options=OPTIONS)
    press(panel.test_box.button)            # what the panel made from t1: its test and steps
    press(panel.steps_button)
    assert "Rome" in panel.test_box.code.value and panel.steps_box.children
    changes = []
    panel.observe(changes.append, "trace")

    panel.trace = t2
    shown = all_html(panel)
    assert [(c.old, c.new) for c in changes] == [(t1, t2)]
    assert f"#{t2.id}" in panel.header.value and "Result (option wait)" in panel.outcome.value
    assert html.escape("Nothing to book yet? Pick.") in shown
    # nothing of t1 is left: its attempts, its result, the test and the steps made from it
    assert "Rome" not in shown and "Chosen option: book" not in shown
    assert len(panel.attempts_box.children) == 1 and panel.steps_box.children == ()
    assert panel.test_box.code.value == "" and panel.test_box.details.layout.display == "none"
    assert panel.test_box.path.value == f"test_decision_{t2.id}.py"
    assert panel.tables.children[0].value.count("<tr>") == 2     # a header and one attempt
    assert repr(panel) == t2.format_text()
    assert "Result (option wait)" in panel._repr_mimebundle_()["text/html"]

    panel.trace = None                      # an empty panel again
    assert "waiting for it to start" in panel.header.value
    assert panel.attempts_box.children == () and panel.outcome.value == ""
    assert all(w.value == "" for w in panel.tables.children)
    assert "wait" not in all_html(panel).replace("waiting for it", "")


def test_a_trace_that_is_not_a_decision_trace_is_refused():
    import traitlets
    t1 = two_attempt_trace()
    panel = DecisionPanel(t1)
    with pytest.raises(traitlets.TraitError, match=r"The 'trace' trait of a DecisionPanel "
                                                   r"instance expected a DecisionTrace or None, "
                                                   r"not the str 'decision #1'"):
        panel.trace = "decision #1"
    assert panel.trace is t1 and "Chosen option: book" in all_html(panel)
    with pytest.raises(traitlets.TraitError, match="expected a DecisionTrace or None"):
        DecisionPanel({"prompt": "a dict is not a trace"})


def test_set_trace_is_setting_the_trace_and_redraws_the_same_trace_too():
    t1 = two_attempt_trace()
    panel = DecisionPanel()
    panel.set_trace(t1)
    assert panel.trace is t1 and len(panel.attempts_box.children) == 2
    panel.outcome.value = "scribbled over"
    panel.set_trace(t1)                     # the same trace: traitlets sees no change
    assert "Result (option book)" in panel.outcome.value


def test_setting_the_trace_of_a_shown_panel_refreshes_its_output_copy(live_shell):
    t1, t2 = two_attempt_trace(), wait_trace()
    panel = DecisionPanel(t1)
    panel.show()
    (handle,) = live_shell.handles
    panel.trace = t2
    obj, bundle = handle.updates[-1]
    assert obj is panel and bundle["text/plain"] == t2.format_text()
    assert "Result (option wait)" in bundle["text/html"] and "Rome" not in bundle["text/html"]


def test_a_panel_set_to_another_trace_mid_decision_draws_none_of_the_rest_of_it():
    earlier = two_attempt_trace()
    panel = DecisionPanel()

    def switch():
        """Shows another decision in the panel while this one runs."""
        panel.trace = earlier
        return "SWITCHED"
    with observe(panel.observer):
        assert decision.make("Switch. Pick.", {"switch": switch},
                             runtime=ScriptedRuntime(['{"call": "switch"}'])) == "SWITCHED"
    assert panel.trace is earlier
    assert "Result (option book)" in panel.outcome.value and "Switch. Pick." not in all_html(panel)


def test_a_redraw_reaches_the_front_end_as_one_update_per_widget(monkeypatch):
    """Setting the trace changes dozens of widgets, some several times (the list of attempt
    views grows one view at a time): the front end gets each widget's final state once."""
    t1 = two_attempt_trace()
    rt = ScriptedRuntime(["no json", '{"call": "fly"}', '{"call": "wait"}'])
    decision.make("Three tries. Pick.", OPTIONS, runtime=rt, max_retries=2)
    t2 = decision.last_trace()
    panel = DecisionPanel(t1)
    sent = []
    monkeypatch.setattr(W.Widget, "_send",
                        lambda self, msg, buffers=None: sent.append((self.model_id, msg)))
    panel.trace = t2
    updates = [model for model, msg in sent if msg["method"] == "update"]
    assert len(updates) > 20                # the redraw did reach the front end
    assert sorted(updates) == sorted(set(updates))


def test_the_panel_and_its_static_copy_draw_one_bar_per_option_sorted_with_the_pick_marked():
    import re

    from openprogram import decision as d
    from openprogram.runtimes import ScriptedRuntime as S
    menu = {"a": "A", "b": "B", "c": "C"}
    d.make("Pick.", menu, runtime=S(['{"call": "b"}', '{"call": "a"}', '{"call": "b"}',
                                     'no pick here', '{"call": "b"}']),
           confidence=d.Samples(5))
    trace = d.last_trace()
    for text in (all_html(DecisionPanel(trace)), DecisionPanel(trace).static_html(),
                 trace._repr_mimebundle_()["text/html"]):
        rows = re.findall(r'class="op-conf-row (op-conf-\w+)".*?<span class="op-conf-name"[^>]*>'
                          r'([^<]*)</span>.*?width:([\d.]+)%', text)
        assert [(cls, name.split(" ")[0]) for cls, name, _ in rows] == [
            ("op-conf-pick", "b"), ("op-conf-option", "a"), ("op-conf-option", "c"),
            ("op-conf-other", "other")]
        assert [float(w) for *_, w in rows] == [60.0, 20.0, 0.0, 20.0]
        assert "picked" in rows[0][1]
        assert "samples, n=5" in text and "<script" not in text
    stage = [s for s in d.steps(trace) if s.kind == "resolution"][0]
    assert "same request was sent 5 times" in stage.explanation
    assert stage.data["confidence"]["probs"]["b"] == 0.6
