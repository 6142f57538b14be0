"""The step-through widget: one recorded decision, one stage at a time, for teaching.

`StepThrough(trace, options=...)` shows the stages `openprogram.decision.stepthrough`
reads from a trace (the menu with each line's source, what was sent, the reply's candidates,
validation argument by argument, hidden parameters, the re-ask's parts, the resolution) with
Back / Next buttons and a list to jump to any stage. Where it stands is one traitlets trait,
`stage` (an `Int`): the buttons and the list only set it, and drawing follows it, so code (a
lesson's cell, a test) moves the view the same way a learner does. Every stage is drawn from the
core's escaped HTML; the output also carries every stage as its own section (`static_html()`),
for notebook viewers without widgets. `%decision_steps [N]` and the panel's "Step through"
button make one.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as W
import traitlets

from openprogram.decision.stepthrough import Steps, steps
from openprogram.trace import view
from openprogram.trace.decision_trace import DecisionTrace

from .parts import SAVED_VIEW_STYLE, StaticCopy

__all__ = ["StepThrough"]


class StepThrough(StaticCopy, W.VBox):
    """A recorded decision, stage by stage. `stage` is the index of the stage shown (0 is the
    option set and its menu); `next()`, `back()` and `go(i)` move it, as the buttons and the
    stage list do."""

    stage = traitlets.Int(0)

    def __init__(self, trace: DecisionTrace, *, options: Any = None):
        self.steps: Steps = steps(trace, options)
        self.trace = trace
        self.back_button = W.Button(description="Back", icon="arrow-left",
                                    tooltip="the previous stage")
        self.next_button = W.Button(description="Next", icon="arrow-right",
                                    tooltip="the next stage")
        self.jump = W.Dropdown(options=[(s.heading(), s.index) for s in self.steps], value=0,
                               description="Stage", layout=W.Layout(width="auto"))
        self.position = W.HTML()
        self.content = W.HTML()
        self.back_button.on_click(lambda _b: self.back())
        self.next_button.on_click(lambda _b: self.next())
        self.jump.observe(self._jumped, "value")
        saved_look = W.HTML(SAVED_VIEW_STYLE, layout=W.Layout(display="none"))
        super().__init__([saved_look, W.HBox([self.back_button, self.next_button, self.jump,
                                              self.position]), self.content],
                         layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"))
        self._root_classes("op-panel")
        self.add_class("op-steps")
        self.observe(self._draw, "stage")
        self._draw(None)  # a trace has one stage at least: its option set

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return self.steps.format_text()

    @traitlets.validate("stage")
    def _bounded(self, proposal) -> int:
        # Next past the last stage (or Back before the first) stays where it is.
        return max(0, min(int(proposal["value"]), len(self.steps) - 1))

    def next(self) -> None:
        self.stage += 1

    def back(self) -> None:
        self.stage -= 1

    def go(self, index: int) -> None:
        self.stage = index

    @property
    def current(self):
        """The `Stage` shown."""
        return self.steps[self.stage]

    def _jumped(self, change) -> None:
        if change["new"] is not None:
            self.stage = change["new"]

    def _draw(self, change) -> None:
        i = self.stage
        stage = self.steps[i]
        with self.hold_sync():
            self.content.value = view.wrap(stage.html(), "op-stage-view")
            self.position.value = view.esc(f"stage {i + 1} of {len(self.steps)}")
            self.back_button.disabled = i == 0
            self.next_button.disabled = i == len(self.steps) - 1
            if self.jump.value != i:
                self.jump.value = i

    def static_html(self) -> str:
        """Every stage, each its own section: what notebook viewers without widgets show."""
        return self.steps.to_html()
