"""The step-through widget in the kernel (issue 27): its `stage` trait, Back / Next / the stage
list, `%decision_steps [N]` and the panel's "Step through" button, driven through the widgets'
own click handlers and traits on a recorded two-attempt decision (ScriptedRuntime)."""
from __future__ import annotations

from html.parser import HTMLParser

from IPython.core.error import UsageError
from widgethelp import error_of, press

from openprogram import decision
from openprogram.runtimes import ScriptedRuntime
from openprogram.widgets import DecisionPanel, StepThrough


def analyze(text: str, depth: int = 1, user: str = "x") -> str:
    """Analyze the <b>sentiment</b>."""
    return f"{text}:{depth}:{user}"


analyze.input_meta = {"user": {"hidden": True}}
OPTIONS = {"analyze": analyze, "done": ("OVER", "nothing left")}
FIRST = ('<script>x()</script> {"call": "done"} then '
         '{"action": "analyze", "args": {"text": "hi", "depth": "two"}}')
SECOND = '{"call": "analyze", "args": {"text": "hi", "depth": 2, "user": "root"}}'


def two_attempts():
    rt = ScriptedRuntime([FIRST, SECOND])
    decision.make("Pick one.", OPTIONS, runtime=rt, context={"user": "ann"})
    return decision.last_trace()


def test_next_back_and_the_stage_list_move_through_every_stage():
    w = StepThrough(two_attempts(), options=OPTIONS)
    n = len(w)
    assert n == 11 and w.stage == 0 and w.back_button.disabled
    seen = []
    for i in range(n):
        assert w.stage == i and w.jump.value == i
        assert w.position.value == f"stage {i + 1} of {n}"
        # the stage's own section is what is shown, with its heading and rule
        assert f'data-stage="{i}"' in w.content.value
        assert f'data-rule="{w.current.rule}"' in w.content.value
        seen.append(w.current.kind)
        press(w.next_button)
    assert w.stage == n - 1 and w.next_button.disabled  # Next on the last stage stays there
    assert seen == ["options", "sent", "reply", "validation", "hidden", "reask",
                    "sent", "reply", "validation", "hidden", "resolution"]
    press(w.back_button)
    assert w.stage == n - 2 and not w.next_button.disabled
    w.jump.value = 5  # the stage list
    assert w.stage == 5 and w.current.kind == "reask" and "op-reask" in w.content.value
    w.stage = 99  # code moves it as the buttons do, and cannot leave the stages
    assert w.stage == n - 1
    w.go(-3)
    assert w.stage == 0 and w.back_button.disabled


def test_the_widget_shows_model_text_escaped_and_carries_every_stage_as_static_html():
    w = StepThrough(two_attempts(), options=OPTIONS)
    w.go(2)
    tags = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag)

    P().feed(w.content.value)
    assert "script" not in tags and "&lt;script&gt;x()&lt;/script&gt;" in w.content.value
    bundle = w._repr_mimebundle_()
    assert bundle["text/html"].count('<section class="op-stage') == len(w)
    assert bundle["text/plain"] == w.steps.format_text()


def test_the_panel_s_step_through_button_shows_the_step_through_of_its_decision():
    trace = two_attempts()
    panel = DecisionPanel(trace, options=OPTIONS)
    assert panel.steps_box.children == ()
    press(panel.steps_button)
    (w,) = panel.steps_box.children
    assert isinstance(w, StepThrough) and w.trace is trace and len(w) == 11
    assert w.steps[0].data["sources"][0]["source"]["kind"] == "file"
    empty = DecisionPanel()
    press(empty.steps_button)  # no decision yet: said in the panel, never raised
    assert "Cannot step through: ValueError: the decision has not finished yet" in \
        empty.steps_box.children[0].value


def test_decision_steps_magic_shows_the_last_or_decision_n(shell):
    shell.user_ns.update(OPTIONS=OPTIONS)
    first = two_attempts()
    rt = ScriptedRuntime(['{"call": "done"}'])
    decision.make("Pick.", OPTIONS, runtime=rt)
    r = shell.run_cell("%decision_steps")
    assert r.success, error_of(r)
    assert isinstance(r.result, StepThrough) and len(r.result) == 6
    r = shell.run_cell(f"%decision_steps {first.id} --options OPTIONS")
    assert r.success, error_of(r)
    assert r.result.trace is first and r.result.steps[0].data["sources"] is not None
    r = shell.run_cell("%decision_steps -1000")
    assert isinstance(error_of(r), UsageError) and "goes back too far" in str(error_of(r))
