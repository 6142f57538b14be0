"""The playground: a person plays the model, and watches the mechanism at work.

`Playground(options, prompt="...")` shows the prompt (editable), the menu the model would see, a
box for "the model's reply", a Run button and a decision panel. Each click on Run answers one model
call with the typed reply: the real `decision.make` runs again from the start on a runtime whose
replies are the ones typed so far, so the panel shows how the mechanism extracted, validated and
(when the reply was bad) re-asked. When `decision.make` asks for a reply that has not been typed
yet, the runtime stops it (see `_AwaitReply`), and the panel shows the pending attempt with the
re-ask prompt it would send; the next typed reply answers it. Nothing ever waits for input inside
the kernel: the work runs in the button's callback and returns.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as W

from openprogram.agentic_programming.options import render_menu, normalize
from openprogram.agentic_programming.runtime import ModelResponse, Runtime

from .panel import DecisionPanel, esc

__all__ = ["Playground"]


class _AwaitReply(BaseException):
    """Raised by the typed-reply runtime when the mechanism asks for a reply not typed yet.

    A BaseException on purpose: the core turns every Exception from a model call into a failed
    attempt and a finished decision; this one must pass through untouched, leaving the trace
    as it is at that moment: running, with the new attempt sent and its reply pending. Nothing
    is recorded in the process's history of finished decisions."""


class _TypedReplies(Runtime):
    """A model whose replies are the ones the person typed, in order."""

    def __init__(self, replies: list[str]):
        super().__init__(name="you (playground)", model="you")
        self.replies = list(replies)
        self.used = 0

    def complete(self, messages, *, tools=None, on_text=None, timeout=None) -> ModelResponse:
        if self.used >= len(self.replies):
            raise _AwaitReply()
        text = self.replies[self.used]
        self.used += 1
        return ModelResponse(text=text, usage=None, model="you")


class Playground(W.VBox):
    """Type the model's replies yourself and see the decision unfold, one model call per click.

    `state` is "ready" (no reply typed yet), "waiting" (the mechanism re-asked and waits for
    the next reply), "resolved" or "failed". `run(reply)` does what a click on Run does."""

    def __init__(self, options: Any, prompt: str = "Pick the next step.", *,
                 max_retries: int = 1, context: dict | None = None):
        self.options = options
        self.menu = normalize(options)          # a bad option set fails here, before any widget
        self.context = context
        self.max_retries = max_retries
        self.replies: list[str] = []
        self.state = "ready"
        self.result: Any = None
        self.error: BaseException | None = None
        self.prompt = W.Textarea(value=prompt, description="Prompt",
                                 layout=W.Layout(width="100%", height="70px"))
        self.menu_view = W.HTML(
            '<details><summary style="cursor:pointer;font-weight:600">The menu the model sees'
            f'</summary><pre style="white-space:pre-wrap;font-size:12px">'
            f"{esc(render_menu(self.menu))}</pre></details>")
        self.reply = W.Textarea(placeholder='You are the model: write the reply, e.g. '
                                            '{"call": "<option>", "args": {...}}',
                                layout=W.Layout(width="100%", height="90px"))
        self.reply.add_class("op-playground-reply")
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.run_button.add_class("op-playground-run")
        self.reset_button = W.Button(description="Reset", icon="undo")
        self.status = W.HTML()
        self.status.add_class("op-playground-status")
        self.panel = DecisionPanel(options=options)
        super().__init__([self.prompt, self.menu_view, W.HTML("<b>The model's reply</b>"),
                          self.reply, W.HBox([self.run_button, self.reset_button]),
                          self.status, self.panel],
                         layout=W.Layout(border="1px solid #bbb", padding="6px"))
        self.add_class("op-playground")
        self.run_button.on_click(lambda _b: self.run())
        self.reset_button.on_click(lambda _b: self.reset())
        self._show_status()

    # -- steps ----------------------------------------------------------------------------------
    def run(self, reply: str | None = None) -> str:
        """Answer the pending model call with `reply` (default: the text box) and replay the
        decision up to the next model call it needs. Returns the new state."""
        if self.state in ("resolved", "failed"):
            self._show_status("This decision is over; press Reset to play it again.")
            return self.state
        text = self.reply.value if reply is None else reply
        if not text.strip():
            self._show_status("Write the model's reply first, then press Run.")
            return self.state
        self.replies.append(text)
        self._replay()
        if self.state == "waiting":
            self.reply.value = ""
        return self.state

    def reset(self) -> None:
        """Forget the typed replies and start again (the prompt and the options stay)."""
        self.replies, self.state, self.result, self.error = [], "ready", None, None
        self.reply.value = ""
        self.panel = self._fresh_panel()
        self._show_status()

    def _fresh_panel(self) -> DecisionPanel:
        panel = DecisionPanel(options=self.options)
        self.children = tuple(self.children[:-1]) + (panel,)
        return panel

    def _replay(self) -> None:
        from openprogram import decision
        from openprogram.agentic_programming.trace import observe
        rt = _TypedReplies(self.replies)
        started = []
        try:
            with observe(lambda e: started.append(e.trace) if e.kind == "decision_started"
                         else None):
                self.result = decision.make(self.prompt.value, self.options, runtime=rt,
                                            context=self.context,
                                            max_retries=self.max_retries)
            self.state, self.error = "resolved", None
        except _AwaitReply:
            self.state = "waiting"
        except Exception as exc:  # a DecisionError, or an option's function that raised
            self.state, self.error = "failed", exc
        if started:
            self.panel.set_trace(started[0])
        self._show_status()

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
                      else f"The chosen option raised {type(self.error).__name__}: {self.error}",
        }[self.state]
        colour = {"resolved": "#2e7d32", "failed": "#c62828"}.get(self.state, "#333")
        html = f'<div style="color:{colour}">{esc(text)}</div>'
        if note:
            html += f'<div style="color:#555">{esc(note)}</div>'
        self.status.value = html
        self.run_button.disabled = self.state in ("resolved", "failed")
