"""The decision panel: a view of a `DecisionTrace`, live while the decision runs.

`DecisionPanel(trace)` draws one decision with ipywidgets' standard widgets only (no front-end
build): per attempt the prompt with its menu (or the tools or JSON schema sent in its place), the
raw reply with the value that broke it marked, the extracted JSON, the validation error, the
chosen option and its arguments, the raw request and response; then the tool rounds, the resolved
result or the final error, two attempts side by side ("Compare attempts"), and the trace's tables,
plus a button that turns the decision into a pytest test. Every
part is drawn by `openprogram.trace.view`, the same escaped HTML that
`display(trace)` and static exports show; the panel only places the parts into widgets and keeps
them current. `DecisionPanel()` without a trace attaches to the next decision whose events its
`observer` sees, and redraws as they arrive: it adds up the streamed reply from the `reply_chunk`
events itself (at most one redraw every `min_interval` seconds) and draws every other event from
the attempt and trace records that event carries. Its output also carries a `text/html` copy of
the decision — refreshed with the final state when the decision ends, for a panel shown with
`show()` — so notebook viewers without widgets (GitHub, nbconvert) show the decision too.
Buttons never raise into the kernel's log: what goes wrong is said in the panel.
A panel saved in a notebook is drawn from its stored widget state before any kernel holds it; its
own stylesheet (`SAVED_VIEW_STYLE`) makes that saved view look whole, with one quiet note that it
is saved, instead of ipywidgets' broken-chain mark on each of its elements.
"""
from __future__ import annotations

import contextlib
import pathlib
import threading
import time
from typing import Any

import ipywidgets as W
import traitlets
from IPython.display import display

from openprogram.trace import view
from openprogram.trace.decision_trace import Attempt, DecisionTrace, TraceEvent
from openprogram.trace.view import esc, trace_html

from .parts import SAVED_VIEW_NOTE, SAVED_VIEW_STYLE, StaticCopy, error_html, held  # noqa: F401

__all__ = ["DecisionPanel", "StaticCopy", "trace_html", "error_html", "SAVED_VIEW_STYLE"]

# The events after which the whole panel is redrawn from the trace (the others touch one part).
_SETTLING = ("attempt_failed", "validated", "resolved", "decision_failed")


class _AttemptView(W.VBox):
    """One attempt: the prompt (with the tools or schema sent) and the raw request and
    response are drawn once each (so an opened <details> stays open), the body redraws as the
    reply streams in."""

    def __init__(self):
        self.title = W.HTML()
        self.prompt = W.HTML()
        self.body = W.HTML()
        self.raw = W.HTML()
        # the class in the state the view is created with: add_class() would send an update
        super().__init__([self.title, self.prompt, self.body, self.raw],
                         layout=W.Layout(padding="2px 8px", margin="4px 0"),
                         _dom_classes=("op-attempt",))
        self._state = None
        self._prompt_len = -1
        self._raw = None

    def draw(self, att: Attempt, trace: DecisionTrace, reply: str | None = None) -> None:
        with held(self):   # a view made during the panel's redraw is not held by it
            self._draw(att, trace, reply)

    def _draw(self, att: Attempt, trace: DecisionTrace, reply: str | None) -> None:
        state = view.attempt_state(att)
        if state != self._state:
            if self._state:
                self.remove_class(f"op-attempt-{self._state}")
            self.add_class(f"op-attempt-{state}")
            self.layout.border_left = f"4px solid {view.COLOURS[state][0]}"
            self._state = state
        self.title.value = view.attempt_title(att, trace, reply)
        if len(att.prompt) != self._prompt_len:
            self.prompt.value = view.attempt_prompt_html(att, trace.mode)
            self._prompt_len = len(att.prompt)
        self.body.value = view.attempt_body_html(att, reply)
        if att.raw is not self._raw:
            self.raw.value = view.attempt_raw_html(att)
            self._raw = att.raw


class _CompareView(W.VBox):
    """Two attempts side by side (`view.compare_attempts_html`), picked with two drop-downs;
    the last two until the user picks others. Drawn only while its section is open: a diff
    costs more than the rest of a redraw."""

    def __init__(self, lock):
        self.first = W.Dropdown(description="attempt", layout=W.Layout(width="160px"))
        self.second = W.Dropdown(description="with", layout=W.Layout(width="160px"))
        self.html = W.HTML()
        self.html.add_class("op-compare-html")
        super().__init__([W.HBox([self.first, self.second]), self.html])
        self.add_class("op-compare-box")
        self.trace: DecisionTrace | None = None
        self.visible = False
        self._lock = lock
        self._numbers: tuple = ()
        self._trace_id = None
        self._drawn = None      # what was drawn last: trace, its attempt records, the picks
        self._updating = False
        for dd in (self.first, self.second):
            dd.observe(self._picked, "value")

    def _picked(self, _change) -> None:
        if not self._updating:
            with self._lock:
                self.draw()

    def update(self, trace: DecisionTrace | None) -> None:
        """Follow the trace: its attempts are the choices; a new trace, or a new attempt while
        the last two were shown, shows the last two."""
        self.trace = trace
        numbers = tuple(a.number for a in trace.attempts) if trace is not None else ()
        tid = trace.id if trace is not None else None
        if numbers != self._numbers or tid != self._trace_id:
            picks = (self.first.value, self.second.value)
            if tid != self._trace_id or len(self._numbers) < 2 or picks == self._numbers[-2:]:
                picks = numbers[-2:]
            self._numbers, self._trace_id = numbers, tid
            self._updating = True
            try:
                # new options select the first one: the picks are set again after
                self.first.options = self.second.options = numbers
                if len(numbers) >= 2:
                    self.first.value, self.second.value = picks
            finally:
                self._updating = False
        self.draw()

    def draw(self) -> None:
        t = self.trace
        if not self.visible or t is None:
            return
        picks = (self.first.value, self.second.value) if len(self._numbers) >= 2 else (None, None)
        key = (t.id, tuple(t.attempts), picks)
        if key == self._drawn:
            return
        self._drawn = key
        try:
            self.html.value = view.compare_attempts_html(t, *picks)
        except ValueError as exc:   # the same attempt twice: said here, never raised
            self.html.value = error_html("Cannot compare", exc)


class DecisionPanel(StaticCopy, W.VBox):
    """A live view of one decision. `DecisionPanel(trace)` draws a finished (or running) trace;
    `DecisionPanel()` attaches to the first decision its `observer` sees:

        panel = DecisionPanel(); panel.show()
        with openprogram.observe(panel.observer):
            decision.make(...)

    `options` (the option set object) and `options_expr` (how a test should name it) prefill
    the "pytest test" box; `context` and `tools` (what the decision was given) let it write
    the test of a decision with hidden parameters or tool rounds.

    `trace`, the decision shown, is a traitlets trait, as a widget's state is: setting it
    (`panel.trace = other`, or None for an empty panel) redraws the whole panel, and
    `panel.observe(fn, "trace")` sees when it changes. It lives in the kernel only: the front
    end gets what the panel draws from it."""

    trace = traitlets.Instance(DecisionTrace, allow_none=True,
                               help="the decision shown; setting it redraws the panel")

    def __init__(self, trace: DecisionTrace | None = None, *, options: Any = None,
                 options_expr: str = "OPTIONS", context: dict | None = None, tools: Any = None,
                 min_interval: float = 0.1):
        self.options = options
        self.context = context
        self.tool_functions = tools
        self.min_interval = min_interval
        self._lock = threading.RLock()
        self._following = False    # set while the observer stores a newer record of its trace
        self._last_draw: dict[int, float] = {}
        self._streamed: dict[int, str] = {}     # attempt number -> reply text streamed so far
        self._attempt_views: list[_AttemptView] = []
        self._displays: list = []               # handles of the outputs show() made
        self.header = W.HTML(view.header_html(None))
        self.attempts_box = W.VBox()
        self.tools = W.HTML()
        self.outcome = W.HTML()
        self.tables = W.Tab(children=[W.HTML() for _ in view.TABLES], titles=list(view.TABLES))
        self.compare = _CompareView(self._lock)
        self.compare_section = W.Accordion(children=[self.compare], titles=["Compare attempts"])
        self.compare_section.observe(self._compare_toggled, "selected_index")
        self.test_box = _TestBox(self, options_expr)
        # The step-through of this decision, made on request: a running decision has no
        # stages to step through yet, and most panels are never stepped through.
        self.steps_button = W.Button(description="Step through", icon="step-forward",
                                     tooltip="this decision stage by stage, each stage with "
                                             "the rule it shows")
        self.steps_button.add_class("op-steps-button")
        self.steps_button.on_click(self._step_through)
        self.steps_box = W.VBox()
        # first, so the stylesheet is in the page before the other parts are drawn
        self.saved_look = W.HTML(SAVED_VIEW_STYLE, layout=W.Layout(display="none"))
        super().__init__([self.saved_look, self.header, self.attempts_box, self.tools, self.outcome,
                          self.compare_section,
                          W.Accordion(children=[self.tables], titles=["Tables"]),
                          self.steps_button, self.steps_box, self.test_box],
                         layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"))
        self._root_classes("op-panel")
        self.trace = trace

    def __repr__(self) -> str:
        return self.trace.format_text() if self.trace else "<DecisionPanel: no decision yet>"

    def static_html(self) -> str:
        """The decision as it stands, as static HTML (what the panel's output carries). Its
        class `op-widget-copy` tells a notebook test (nbval) that this copy was refreshed after
        it was first shown, so a re-run sees an earlier state of it."""
        if self.trace is None:
            return view.wrap(view.header_html(None), "op-panel op-static op-widget-copy")
        return trace_html(self.trace, "op-widget-copy")

    def show(self) -> None:
        """Display the panel here; when its decision ends, the output's text and HTML copies
        are refreshed to the final state (what a saved or exported notebook keeps)."""
        handle = display(self, display_id=True)
        if handle is not None:
            self._displays.append(handle)

    def _refresh_displays(self) -> None:
        for handle in self._displays:
            handle.update(self)

    # -- drawing ------------------------------------------------------------------------------
    def set_trace(self, trace: DecisionTrace | None) -> None:
        """Show `trace` (replacing what was shown) and redraw everything: `panel.trace = trace`,
        which also redraws when `trace` is the one shown (traitlets sees no change then)."""
        with self._lock:
            if trace is self.trace:
                self._trace_changed()
            else:
                self.trace = trace

    @traitlets.observe("trace")
    def _trace_changed(self, _change=None) -> None:
        # The assignment itself is not under the lock (traitlets stores the value first), so
        # an event of the decision shown before may still be drawing: this waits for it, and
        # draws whatever `trace` holds by then, the last value set.
        with self._lock:
            if self._following:
                return
            try:
                self._draw_new_trace()
            except Exception as exc:  # a view never breaks the code (or decision) that set it
                self.header.value = error_html("The panel could not draw this decision", exc)
            finished = self.trace is not None and self.trace.status != "running"
        if finished:
            self._refresh_displays()

    def _draw_new_trace(self) -> None:
        """Forget everything drawn from the decision shown before, then draw the new one."""
        self._last_draw.clear()
        self._streamed.clear()
        with held(self):
            self._attempt_views = []
            self.attempts_box.children = ()
            # what was made from the decision shown before would still name it
            self.steps_box.children = ()
            self.test_box.forget()
            self.redraw()

    def redraw(self) -> None:
        """Redraw every part from the trace."""
        with self._lock, held(self):
            for att in list(self.trace.attempts if self.trace else []):
                self._draw_attempt(att)
            self._draw_end()

    def _view(self, number: int) -> _AttemptView:
        while len(self._attempt_views) < number:
            self._attempt_views.append(_AttemptView())
            self.attempts_box.children = tuple(self._attempt_views)
        return self._attempt_views[number - 1]

    def _draw_attempt(self, att: Attempt) -> None:
        self._view(att.number).draw(att, self.trace, self._streamed.get(att.number))
        self._last_draw[att.number] = time.monotonic()

    def _draw_end(self) -> None:
        t = self.trace
        self.header.value = view.header_html(t)
        self.tools.value = view.tools_html(t)
        self.outcome.value = view.outcome_html(t)
        for w, table in zip(self.tables.children, view.TABLES):
            w.value = view.table_html(t, table) if t is not None else ""
        self.compare.update(t)
        self.test_box.update_state()

    def _step_through(self, _button=None) -> None:
        """Show the step-through of the decision below the button (a new one per click, so it
        follows a decision that has ended since)."""
        try:
            if self.trace is None or self.trace.status == "running":
                raise ValueError("the decision has not finished yet; step through it when it "
                                 "has")
            from .steps import StepThrough  # loaded with the first click
            self.steps_box.children = (StepThrough(self.trace, options=self.options),)
        except Exception as exc:  # a button never raises into the kernel's log
            self.steps_box.children = (W.HTML(error_html("Cannot step through", exc)),)

    def _compare_toggled(self, change) -> None:
        with self._lock:
            self.compare.visible = change["new"] is not None
            self.compare.draw()

    # -- live updates ---------------------------------------------------------------------------
    def observer(self, event: TraceEvent) -> None:
        """Give this to `openprogram.observe` / `add_observer`: the panel follows the first
        decision it sees (or the trace it was made with) and ignores the others. Each event's
        records are what it draws; it never reads an attempt that is still being written."""
        with self._lock:
            if self.trace is None:
                if event.kind != "decision_started":
                    return
            elif event.trace.id != self.trace.id:
                return
            try:
                if self.trace is None:
                    self.trace = event.trace   # drawn whole by _trace_changed, in this thread
                else:
                    # each event carries a newer record of the same decision: observers of
                    # `trace` see it, but only what the event changed is drawn (_follow)
                    self._following = True
                    try:
                        self.trace = event.trace
                    finally:
                        self._following = False
                self._follow(event)
            except Exception as exc:  # a view must never break the decision it shows
                self.header.value = error_html("The panel could not draw this decision", exc)

    def _follow(self, event: TraceEvent) -> None:
        kind, att = event.kind, event.attempt
        if kind == "reply_chunk":
            self._add_chunk(event)
            return
        if kind == "reply_received" and att is not None:
            self._streamed.pop(att.number, None)   # the record holds the whole reply now
        with held(self):
            if att is not None:
                self._draw_attempt(att)
            if kind == "tool_call":
                self.tools.value = view.tools_html(self.trace)
            if kind in ("decision_started", "attempt_sent"):
                self.header.value = view.header_html(self.trace)
            if kind in _SETTLING:
                self.redraw()
        if kind in ("resolved", "decision_failed"):
            self._streamed.clear()
            self._refresh_displays()

    def _add_chunk(self, event: TraceEvent) -> None:
        """Add a streamed piece of the reply (the event carries only the new text) to what its
        attempt — the decision's latest — has received so far; redraw that attempt at most
        every min_interval (the reply_received that follows draws the whole reply)."""
        att = event.attempt or (self.trace.attempts[-1] if self.trace.attempts else None)
        if att is None:
            return
        n = att.number
        self._streamed[n] = self._streamed.get(n, "") + event.data.get("text", "")
        if time.monotonic() - self._last_draw.get(n, 0.0) >= self.min_interval:
            self._draw_attempt(att)

    @contextlib.contextmanager
    def live(self, show=None):
        """Observe the decisions made inside the block; `show(panel)` is called once, when the
        first decision starts (so a bad option set leaves no empty panel behind)."""
        shown = [False]

        def observer(event: TraceEvent) -> None:
            first = not shown[0] and event.kind == "decision_started" and self.trace is None
            self.observer(event)
            if first and show is not None:
                shown[0] = True
                show(self)

        from openprogram import observe
        with observe(observer):
            yield self


class _TestBox(W.VBox):
    """The "pytest test" box: generates the test of the shown decision, shows it, saves it."""

    def __init__(self, panel: DecisionPanel, options_expr: str):
        self.panel = panel
        self.button = W.Button(description="Turn into a pytest test", icon="flask",
                               layout=W.Layout(width="220px"),
                               tooltip="Write a pytest test that replays this decision's replies")
        self.button.add_class("op-test-button")
        self.options_expr = W.Text(value=options_expr, description="option set",
                                   placeholder="OPTIONS or an expression")
        self.module = W.Text(description="from module", placeholder="pkg.mod (optional)")
        self.code = W.Textarea(layout=W.Layout(width="100%", height="260px"))
        self.code.add_class("op-test-code")
        self.path = W.Text(description="save as", layout=W.Layout(width="60%"))
        self.save = W.Button(description="Save", icon="save")
        self.save.add_class("op-test-save")
        self.status = W.HTML()
        self.status.add_class("op-test-status")
        self.details = W.VBox([W.HBox([self.options_expr, self.module]), self.code,
                               W.HBox([self.path, self.save]), self.status],
                              layout=W.Layout(display="none"))
        super().__init__([self.button, self.details])
        self.button.on_click(self._generate)
        self.save.on_click(self._save)
        self.update_state()

    def forget(self) -> None:
        """Clear the test written for the decision shown before, and its file name."""
        self.code.value = self.status.value = self.path.value = ""
        self.details.layout.display = "none"

    def update_state(self) -> None:
        t = self.panel.trace
        self.button.disabled = t is None or t.status == "running"
        if t is not None and not self.path.value:
            self.path.value = f"test_decision_{t.id}.py"

    def generate(self) -> str:
        from openprogram.testgen import definitions_source, trace_to_pytest
        panel, trace = self.panel, self.panel.trace
        expr = self.options_expr.value.strip() or "OPTIONS"
        module = self.module.value.strip() or None
        context_expr = "CONTEXT" if trace.context_keys else None
        tools_expr = "TOOLS" if trace.tool_rounds else None
        # What the test needs, by the name it uses; what the panel holds is pasted as source,
        # the rest is imported from the module.
        needed = {context_expr: ("context", panel.context),
                  tools_expr: ("tools", panel.tool_functions)}
        if module is None:
            needed[expr] = ("option set", panel.options)
        needed.pop(None, None)
        missing = [what for what, value in needed.values() if value is None]
        if module is None:
            if missing:
                them = "it" if len(missing) == 1 else "them"
                raise ValueError(f"this panel does not hold the {' and the '.join(missing)}: "
                                 f"name the module that defines {them} in 'from module'")
            if not expr.isidentifier():
                raise ValueError(f"{expr!r} is an expression: name a module in 'from module', "
                                 f"or use a plain name so the option set's source can be copied")
        held = {name: value for name, (_, value) in needed.items() if value is not None}
        setup = definitions_source(held) if held else None
        return trace_to_pytest(trace, expr, module, setup=setup, context_expr=context_expr,
                               tools_expr=tools_expr)

    def _generate(self, _button=None) -> bool:
        """The button's handler: write the test into the box, or say why it cannot."""
        try:
            code = self.generate()
        except Exception as exc:  # whatever was typed, the reason shows here, not in a log
            self.code.value = ""      # a test of the earlier settings must not be saved now
            self.status.value = error_html("Cannot write the test", exc)
            self.details.layout.display = "flex"
            return False
        with self.hold_sync():
            self.code.value = code
            self.status.value = ('<span style="color:#555">Run it with pytest; it replays the '
                                 "recorded replies on ScriptedRuntime.</span>")
            self.details.layout.display = "flex"
        return True

    def _save(self, _button=None) -> None:
        """The Save button's handler: write the box's code to the typed path."""
        name = self.path.value.strip() or "test_decision.py"
        if "\x00" in name:
            self.status.value = error_html(
                "Not saved", f"the file name {name!r} holds a NUL byte (\\x00), which no file "
                             f"system accepts; retype the name")
            return
        try:
            if not self.code.value and not self._generate():
                return              # the reason is already in the status line
            path = pathlib.Path(name)
            path.write_text(self.code.value, encoding="utf-8")
            where = path.resolve()
        except OSError as exc:
            self.status.value = error_html(
                "Not saved", f"{name!r}: {exc.strerror or exc}; give a path in a folder you "
                             f"can write to")
            return
        except Exception as exc:    # e.g. a name the platform rejects: say so, never raise
            self.status.value = error_html(f"Not saved to {name!r}", exc)
            return
        self.status.value = f"Saved to <code>{esc(where)}</code>"
