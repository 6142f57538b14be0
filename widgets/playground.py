"""The playground: a person plays the model, and watches the mechanism at work.

`Playground(options, prompt="...")` shows the prompt (editable until the first Run), the menu the
model would see, a box for "the model's reply", a Run button and a decision panel. Each click on
Run answers one model call with the typed reply. The decision is one real `decision.make`, run in
a worker thread on a runtime whose `complete()` hands control back to the button's callback and
waits for the next typed reply; the callback waits only until the mechanism has dealt with the
reply (it asks for another one — a re-ask — or it resolved or failed), so every click advances
exactly one attempt. Nothing ever waits for *input* in the kernel's main thread: between clicks,
only the worker waits. The panel shows the live trace, status "running" while a reply is awaited.
Like the panel, the playground's output also carries a static HTML copy (the prompt, the option
table, the status, the goals and the decision so far), and its buttons never raise into the
kernel's log: what goes wrong is said in its status line.

It knows its exercises: goals (goals.py: the built-in set the option set makes reachable, plus
a teacher's own `goals=[(title, check), ...]`) are checked after every reply, tick when met and
stay met, show their hints on request ("Hints"), and `progress()` returns where the learner
stands as a JSON-able record a teacher can collect.
"""
from __future__ import annotations

import json
import queue
import threading
from typing import Any

import ipywidgets as W
import traitlets

from openprogram.base.errors import AttemptError, UsageError
from openprogram.decision.modes import MODES, get_mode
from openprogram.decision.options import normalize, render_menu
from openprogram.runtime.runtime import ModelCallError, ModelResponse, Runtime
from openprogram.trace import view
from openprogram.trace.safe_html import esc

from .goals import builtin_goals as _builtin_goals
from .goals import read_goals
from .panel import DecisionPanel
from .parts import StaticCopy, error_html, held

__all__ = ["Playground"]

_RESET = object()


class _TypedReplies(Runtime):
    """A model whose replies are typed by a person: `complete()` reports "waiting" to the
    playground and blocks (in the worker thread) until the next reply arrives. In the tools
    way of asking a reply written `name {"arg": ...}` is a native tool call, as a provider
    would return it; anything else is a text reply."""

    modes = frozenset({"menu", "tools", "json_schema"})

    def __init__(self, to_worker: queue.Queue, from_worker: queue.Queue, mode: str = "menu"):
        super().__init__(name="you (playground)", model="you")
        self.to_worker, self.from_worker, self.mode = to_worker, from_worker, mode

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        self.from_worker.put(("waiting", None))
        text = self.to_worker.get()
        if text is _RESET:
            raise ModelCallError("the playground was reset before this reply was typed")
        text, calls = get_mode(self.mode).typed_reply(text)
        if calls:
            return ModelResponse(text=text, tool_calls=calls, model="you",
                                 finish_reason="tool_calls")
        return ModelResponse(text=text, model="you", finish_reason="stop")


class Playground(StaticCopy, W.VBox):
    """Type the model's replies yourself and see the decision unfold, one model call per click.

    `state` is "ready" (no reply typed yet), "waiting" (the mechanism re-asked and waits for
    the next reply), "resolved" or "failed". `run(reply)` does what a click on Run does.

    Its settings are traitlets traits, as a widget's state is, checked when they are set:
    setting `options` or `mode` redraws what the model is shown (the menu, the tools or the
    schema), the goals and the static copy, and starts over, as Reset does (a decision made
    with the others would no longer match what is shown); `max_retries` and `context` hold from
    the next decision on. `state` is read-only: `observe(fn, "state")` sees it change. The
    prompt is its text box, `prompt.value`."""

    options = traitlets.Any(help="the option set; setting it starts over")
    mode = traitlets.Unicode("menu", help="the way of asking; setting it starts over")
    max_retries = traitlets.Int(1, min=0, help="re-asks after a bad reply, from the next "
                                               "decision on")
    context = traitlets.Dict(allow_none=True, default_value=None,
                             help="the values of hidden parameters, from the next decision on")
    state = traitlets.Enum(("ready", "waiting", "resolved", "failed"), "ready", read_only=True,
                           help="where the decision stands")

    def __init__(self, options: Any, prompt: str = "Pick the next step.", *,
                 max_retries: int = 1, context: dict | None = None, goals: Any = None,
                 builtin_goals: bool = True, mode: str = "menu"):
        self._drawn = False                     # the traits' observers draw once widgets exist
        self._own_goals = read_goals(goals)
        self._builtin_goals = builtin_goals
        self.met: dict[str, dict] = {}          # goal id -> when it was met
        self.goal_errors: dict[str, str] = {}   # goal id -> why its check failed
        # checked here, so a bad option set or way of asking fails before any widget exists
        self.mode = mode
        self.options = options
        self.max_retries = max_retries
        self.context = context
        self._read_options()
        self.decisions = 0                      # decisions started (one per Reset)
        self.attempts_played = 0
        self.replies: list[str] = []
        self._worker: threading.Thread | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.prompt = W.Textarea(value=prompt, description="Prompt",
                                 layout=W.Layout(width="100%", height="70px"))
        self.menu_view = W.HTML()
        self.reply = W.Textarea(layout=W.Layout(width="100%", height="90px"))
        self.reply.add_class("op-playground-reply")
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.run_button.add_class("op-playground-run")
        self.reset_button = W.Button(description="Reset", icon="undo")
        self.status = W.HTML()
        self.status.add_class("op-playground-status")
        self.hints_button = W.ToggleButton(description="Hints", icon="question",
                                           tooltip="show a hint for each goal not met yet")
        self.hints_button.add_class("op-playground-hints")
        self.hints_button.observe(lambda _c: self._show_goals(), "value")
        self.goals_view = W.HTML()
        self.goals_view.add_class("op-playground-goals")
        self.panel = DecisionPanel(options=options, context=context)
        super().__init__([self.prompt, self.menu_view, W.HTML("<b>The model's reply</b>"),
                          self.reply, W.HBox([self.run_button, self.reset_button,
                                              self.hints_button]),
                          self.status, self.goals_view, self.panel],
                         layout=W.Layout(border="1px solid #bbb", padding="6px"))
        self._root_classes("op-playground")
        self.run_button.on_click(lambda _b: self._click(self.run))
        self.reset_button.on_click(lambda _b: self._click(self.reset))
        self._drawn = True
        self._draw_options()
        self._show_status()
        self._show_goals()

    @traitlets.validate("mode")
    def _valid_mode(self, proposal) -> str:
        mode = proposal["value"]
        if mode not in MODES:
            raise UsageError(f"mode={mode!r} is not a way of asking; use one of "
                             f"{', '.join(map(repr, MODES))}")
        return mode

    @traitlets.validate("options")
    def _valid_options(self, proposal) -> Any:
        normalize(proposal["value"])   # a bad option set is refused before it is stored
        return proposal["value"]

    @traitlets.observe("options", "mode")
    def _asking_changed(self, _change) -> None:
        if not self._drawn:
            return
        with held(self):
            self._read_options()
            self._draw_options()
            self.reset()
            self._show_goals()

    def _read_options(self) -> None:
        """What follows from the option set and the way of asking: the menu, the schema a
        structured reply must fit, and the goals (those met before stay met if still set)."""
        self.menu = normalize(self.options)
        self._structured = None
        schema = get_mode(self.mode)(self.menu).reply_schema()
        if schema is not None:  # what a provider's structured output lets the model write
            from openprogram.decision.schema.validator import compile_schema
            self._structured = compile_schema(schema, "the decision schema")
        builtin = _builtin_goals(self.menu, self.mode) if self._builtin_goals else []
        self.goals = read_goals([*builtin, *self._own_goals])
        ids = {g.id for g in self.goals}
        self.met = {k: v for k, v in self.met.items() if k in ids}
        self.goal_errors = {k: v for k, v in self.goal_errors.items() if k in ids}

    def _draw_options(self) -> None:
        title, seen, example = self._what_the_model_sees()
        self.menu_view.value = (
            f'<details><summary style="cursor:pointer;font-weight:600">{esc(title)}'
            f'</summary><pre style="white-space:pre-wrap;font-size:12px">'
            f"{esc(seen)}</pre></details>")
        self.reply.placeholder = f"You are the model: write the reply, e.g. {example}"

    def __repr__(self) -> str:
        return f"<Playground: {self.state}, {len(self.replies)} reply(ies) typed>"

    def _what_the_model_sees(self) -> tuple[str, str, str]:
        """(title, text, an example reply) of what the way of asking shows the model."""
        return get_mode(self.mode)(self.menu).shown(render_menu(self.menu))

    def static_html(self) -> str:
        """The playground as it stands, as static HTML: the prompt, the options the model can
        pick, the status line and the decision so far."""
        trace = self.panel.trace
        return view.wrap(
            view.label("Prompt") + view.pre(self.prompt.value, 160)
            + view.label("The options the model can pick")
            + view.options_table_html([o.info() for o in self.menu])
            + self.status.value + self.goals_view.value
            + (view.trace_html(trace) if trace is not None else ""),
            "op-playground op-static op-widget-copy")

    def _click(self, action) -> None:
        """A button's handler: whatever goes wrong shows in the status line, never in the
        kernel's log."""
        try:
            action()
        except Exception as exc:
            self._show_status()
            self.status.value += f"<div>{error_html('That did not work', exc)}</div>"

    # -- steps ----------------------------------------------------------------------------------
    def run(self, reply: str | None = None) -> str:
        """Answer the pending model call with `reply` (default: the text box) and return once
        the mechanism has dealt with it. Returns the new state."""
        if self.state in ("resolved", "failed"):
            self._show_status("This decision is over; press Reset to play it again.")
            return self.state
        text = self.reply.value if reply is None else reply
        if not text.strip():
            self._show_status("Write the model's reply first, then press Run.")
            return self.state
        problem = self._not_structured(text)
        if problem:
            self._show_status(problem)
            return self.state
        if self._worker is None:
            self.decisions += 1
            self._start()
        self.replies.append(text)
        self.attempts_played += 1
        self._to_worker.put(text)
        self._settle(self._from_worker.get())
        if self.state == "waiting":
            self.reply.value = ""
        return self.state

    def _not_structured(self, text: str) -> str | None:
        """In the json_schema way of asking, why a provider's structured output could never
        have produced `text` (the model samples under the schema), else None."""
        if self._structured is None:
            return None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            return (f"Under structured output the model can only write one JSON document of "
                    f"the schema, and this is not JSON ({exc}). Write it again.")
        try:
            self._structured(doc, "response", [])
        except AttemptError as exc:
            return (f"Under structured output the model could not have written this: "
                    f"{exc.message}. Write a document of the schema: "
                    f'{{"decision": {{"call": ..., "args": {{...}}}}}}.')
        return None

    def reset(self) -> None:
        """Forget the typed replies and start again (the prompt and the options stay). A
        decision still waiting for a reply ends as failed ("the playground was reset")."""
        if self._worker is not None and self.state == "waiting":
            self._to_worker.put(_RESET)
            self._from_worker.get()
        self._worker = None
        self.replies, self.result, self.error = [], None, None
        self.set_trait("state", "ready")
        self.reply.value = ""
        self.prompt.disabled = False
        # the decision reset has ended (its last event is drawn): the panel can be emptied
        self.panel.options = self.options
        self.panel.trace = None
        self._show_status()

    def _start(self) -> None:
        """Start the decision in a worker thread and wait until it asks for reply 1."""
        from openprogram import decision, observe
        self._to_worker, self._from_worker = queue.Queue(), queue.Queue()
        rt = _TypedReplies(self._to_worker, self._from_worker, self.mode)
        prompt, panel, out = self.prompt.value, self.panel, self._from_worker
        panel.context = self.context   # what this decision is given, for the panel's test
        self.prompt.disabled = True   # a decision's prompt is fixed once it is sent

        def work():
            with observe(panel.observer):
                try:
                    result = decision.make(prompt, self.options, runtime=rt,
                                           context=self.context, max_retries=self.max_retries,
                                           mode=self.mode)
                except BaseException as exc:  # reported to the callback, never lost
                    out.put(("failed", exc))
                else:
                    out.put(("resolved", result))

        self._worker = threading.Thread(target=work, name="openprogram-playground",
                                        daemon=True)
        self._worker.start()
        self._settle(self._from_worker.get())

    def _settle(self, message) -> None:
        state, value = message
        self.set_trait("state", state)
        if state == "resolved":
            self.result, self.error = value, None
        elif state == "failed":
            self.error = value
        self._show_status()
        self._check_goals()

    # -- goals ----------------------------------------------------------------------------------
    def _check_goals(self) -> None:
        """Ask every goal not met yet about the decision as it stands; a check that raises is
        reported next to its goal, never in the kernel's log."""
        trace = self.panel.trace
        if trace is None:
            return
        for goal in self.goals:
            if goal.id in self.met:
                continue
            try:
                ok = bool(goal.check(trace))
            except Exception as exc:
                self.goal_errors[goal.id] = f"{type(exc).__name__}: {view.safe_str(exc)}"
                continue
            self.goal_errors.pop(goal.id, None)
            if ok:
                answered = sum(1 for a in trace.attempts if a.reply is not None)
                self.met[goal.id] = {"decision": self.decisions, "attempt": answered,
                                     "replies_typed": self.attempts_played}
        self._show_goals()

    def _show_goals(self) -> None:
        if not self.goals:
            self.goals_view.value = ""
            return
        rows = []
        for g in self.goals:
            met = g.id in self.met
            extra = ""
            if g.id in self.goal_errors:
                extra = (f' <span class="op-goal-error" style="color:{view.COLOURS["failed"][0]}">'
                         f"(its check raised {esc(self.goal_errors[g.id])})</span>")
            elif self.hints_button.value and not met and g.hint:
                extra = f' <span class="op-goal-hint" style="color:#555">— {esc(g.hint)}</span>'
            rows.append(f'<li class="op-goal" data-goal="{esc(g.id)}" data-met="{str(met).lower()}"'
                        f' style="list-style:none">{"☑" if met else "☐"} {esc(g.title)}{extra}'
                        "</li>")
        self.goals_view.value = (f'<div style="font-weight:600">Goals: {len(self.met)} of '
                                 f"{len(self.goals)} met</div>"
                                 f'<ul style="margin:2px 0;padding-left:4px">{"".join(rows)}</ul>')

    def progress(self) -> dict:
        """Where the learner stands, as plain JSON a teacher can collect: every goal with
        whether (and when) it was met, and how much was played."""
        return {"goals": [{"id": g.id, "title": g.title, "met": g.id in self.met,
                           "when": self.met.get(g.id), "error": self.goal_errors.get(g.id)}
                          for g in self.goals],
                "met": len(self.met), "total": len(self.goals),
                "decisions": self.decisions, "replies_typed": self.attempts_played,
                "state": self.state}

    def _show_status(self, note: str | None = None) -> None:
        n = len(self.replies) + 1
        text = {
            "ready": "Write the reply of attempt 1 and press Run.",
            "waiting": f"The reply did not pass, so the mechanism re-asked (the prompt of "
                       f"attempt {n} is in the panel). Write the reply of attempt {n} and "
                       f"press Run.",
            "resolved": "Resolved: the pick passed and became the result (see the panel).",
            "failed": "No usable decision: every attempt failed (see the panel)."
                      if self.error is None or type(self.error).__name__ == "DecisionError"
                      else f"The chosen option raised {type(self.error).__name__}: "
                           f"{view.safe_str(self.error)}",
        }[self.state]
        colour = {"resolved": view.COLOURS["ok"][0],
                  "failed": view.COLOURS["failed"][0]}.get(self.state, "#333")
        html = f'<div style="color:{colour}">{esc(text)}</div>'
        if note:
            html += f'<div style="color:#555">{esc(note)}</div>'
        self.status.value = html
        self.run_button.disabled = self.state in ("resolved", "failed")
