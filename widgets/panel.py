"""The decision panel: a view of a `DecisionTrace`, live while the decision runs.

`DecisionPanel(trace)` draws one decision with ipywidgets' standard widgets only (no front-end
build): per attempt the prompt with its menu, the raw reply, the extracted JSON, the validation
error, the chosen option and its arguments; then the tool rounds, the resolved result or the final
error, and the trace's tables (the DataFrames of `trace.to_frame()`), plus a button that turns the
decision into a pytest test. `DecisionPanel()` without a trace attaches to the next decision whose
events its `observer` sees, and redraws as they arrive (reply chunks at most every `min_interval`
seconds). `trace_html(trace)` is the same content as static HTML, for `display(trace)`.
Everything a model wrote and every option name or description is passed through `html.escape`
before it reaches any HTML: a reply can never run script or add markup.
"""
from __future__ import annotations

import contextlib
import html
import json
import threading
import time
from typing import Any

import ipywidgets as W

from openprogram.agentic_programming.trace import Attempt, DecisionTrace, TraceEvent, explain

__all__ = ["DecisionPanel", "trace_html", "attempt_html"]

# Colours: a failed attempt is red, a passed one green, one in progress grey; the outcome box
# repeats the colour so the end of a decision reads at a glance.
_OK, _OK_BG = "#2e7d32", "#eef7ee"
_BAD, _BAD_BG = "#c62828", "#fdeeee"
_RUN, _RUN_BG = "#757575", "#f6f6f6"
_PRE = ("white-space:pre-wrap;word-break:break-word;margin:2px 0 6px 0;padding:6px;"
        "background:#fff;border:1px solid #ddd;border-radius:3px;font-size:12px;"
        "font-family:var(--jp-code-font-family,monospace);max-height:{h}px;overflow:auto")
_LABEL = "font-weight:600;font-size:12px;color:#333;margin-top:4px"
# Headers never break inside a word; cells wrap between words only (overflow-wrap:break-word
# keeps the columns' minimum widths), and the table scrolls sideways when it is too wide.
_TABLE_STYLE = ("<style>.op-table table{border-collapse:collapse;font-size:12px;width:max-content}"
                ".op-table th,.op-table td{border:1px solid #ddd;padding:2px 6px;"
                "text-align:left;vertical-align:top;max-width:420px;white-space:pre-wrap;"
                "word-break:normal;overflow-wrap:break-word}"
                ".op-table th{white-space:nowrap}.op-table thead th{background:#f3f3f3}</style>")


def esc(value: Any) -> str:
    """Escaped text of any value (quotes included, so it is safe in attributes too)."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def _pre(text: Any, height: int = 260, cls: str = "") -> str:
    return (f'<pre class="{cls}" style="{_PRE.format(h=height)}">{esc(text)}</pre>')


def _label(text: str) -> str:
    return f'<div style="{_LABEL}">{esc(text)}</div>'


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=repr)


def _state(att: Attempt, trace: DecisionTrace) -> str:
    if att.error_kind:
        return "failed"
    return "ok" if att.ok else "running"


def attempt_title(att: Attempt, trace: DecisionTrace) -> str:
    state = _state(att, trace)
    colour = {"ok": _OK, "failed": _BAD}.get(state, _RUN)
    what = {"ok": f"picked {att.chosen}", "failed": f"failed: {att.error_kind}"}.get(
        state, "waiting for the reply" if not att.reply else "reply arriving")
    bits = [f"attempt {att.number} of {trace.max_attempts}"]
    if att.is_last and trace.max_attempts > 1:
        bits.append("last")
    if att.duration_s is not None:
        bits.append(f"{att.duration_s:.2f}s")
    if att.usage:
        bits.append(f"{att.usage.get('input_tokens') or 0} in / "
                    f"{att.usage.get('output_tokens') or 0} out tokens")
    return (f'<div class="op-attempt-title" style="font-weight:600;color:{colour}">'
            f"{esc(' · '.join(bits))} — {esc(what)}</div>")


def attempt_prompt_html(att: Attempt) -> str:
    first = "prompt and menu" if att.number == 1 else "re-ask: the previous reply, the problem, the menu"
    return (f'<details class="op-prompt"><summary style="{_LABEL};cursor:pointer">'
            f"Sent to the model ({esc(first)}; {len(att.prompt)} characters)</summary>"
            f"{_pre(att.prompt, 320)}</details>")


def attempt_body_html(att: Attempt) -> str:
    """The reply and what the mechanism made of it."""
    parts = [_label("Raw reply" + ("" if att.reply is not None else " (none yet)"))]
    reply = att.reply if isinstance(att.reply, str) else ("" if att.reply is None
                                                          else repr(att.reply))
    parts.append(_pre(reply, 240, "op-reply"))
    if att.extracted is not None:
        how = f"found in a {att.found_in}" if att.found_in == "fence" else f"found in the {att.found_in}"
        parts.append(_label(f"Extracted JSON ({how}, key \"{att.key_alias}\", "
                            f"{att.candidates} candidate(s); the last one is the pick)"))
        parts.append(_pre(_json(att.extracted), 200, "op-extracted"))
    elif att.error_kind == "no_action":
        parts.append(_label(f"Extracted JSON: none ({att.candidates} candidate(s))"))
    if att.error_kind:
        where = f" at {att.error_path}" if att.error_path else ""
        parts.append(
            f'<div class="op-error" style="margin:4px 0;padding:6px;border-radius:3px;'
            f'background:#fff;border:1px solid {_BAD};color:{_BAD}">'
            f"<b>{esc(att.error_kind)}</b>{esc(where)}: {esc(att.error_message or '')}"
            f'<div style="color:#555;font-size:12px">{esc(explain(att.error_kind))}</div></div>')
    if att.chosen and not att.error_kind:
        parts.append(_label(f"Chosen option: {att.chosen}"))
        parts.append(_pre(_json(att.args if att.args is not None else {}), 160, "op-args"))
        extras = []
        if att.dropped:
            extras.append(f"dropped (never used): {', '.join(att.dropped)}")
        if att.injected:
            extras.append(f"injected: {', '.join(att.injected)}")
        if extras:
            parts.append(f'<div style="font-size:12px;color:#555">{esc("; ".join(extras))}</div>')
    return "".join(parts)


def attempt_html(att: Attempt, trace: DecisionTrace) -> str:
    """One attempt as a box: red when it failed, green when its pick passed."""
    state = _state(att, trace)
    colour, bg = {"ok": (_OK, _OK_BG), "failed": (_BAD, _BAD_BG)}.get(state, (_RUN, _RUN_BG))
    return (f'<div class="op-attempt op-attempt-{state}" style="border-left:4px solid {colour};'
            f'background:{bg};padding:4px 8px;margin:4px 0">'
            + attempt_title(att, trace) + attempt_prompt_html(att) + attempt_body_html(att)
            + "</div>")


def header_html(trace: DecisionTrace | None) -> str:
    if trace is None:
        return ('<div class="op-header" style="font-weight:600">Decision: waiting for it to '
                "start…</div>")
    colour = {"resolved": _OK, "failed": _BAD}.get(trace.status, _RUN)
    entry = {"make": "decision.make", "agent": "agent(choices=)", "format": "response_format",
             "parse": "parse_args"}.get(trace.entry, trace.entry)
    bits = [f"{len(trace.options)} option(s)", f"{len(trace.attempts)} attempt(s)"]
    if trace.runtime:
        bits.append(f"runtime {trace.runtime}")
    if trace.duration_s is not None:
        bits.append(f"{trace.duration_s:.2f}s")
    u = trace.usage()
    if u["input_tokens"] or u["output_tokens"]:
        bits.append(f"{u['input_tokens']} in / {u['output_tokens']} out tokens")
    return (f'<div class="op-header" style="font-weight:600">Decision #{trace.id} · '
            f"{esc(entry)} · "
            f'<span class="op-status" style="color:{colour}">{esc(trace.status)}</span>'
            f' <span style="font-weight:400;color:#555">({esc(", ".join(bits))})</span></div>')


def outcome_html(trace: DecisionTrace | None) -> str:
    if trace is None or trace.status == "running":
        return ""
    if trace.status == "resolved":
        return (f'<div class="op-outcome op-result" style="border:2px solid {_OK};background:'
                f'{_OK_BG};padding:6px 8px;margin:6px 0;border-radius:4px">'
                f'<div style="font-weight:700;color:{_OK}">Result (option '
                f"{esc(trace.chosen)})</div>{_pre(_result_text(trace.result), 200, 'op-result-value')}"
                "</div>")
    err = trace.error
    kind = getattr(err, "kind", None)
    title = f"{type(err).__name__}" + (f" [{kind}]" if kind else "")
    return (f'<div class="op-outcome op-final-error" style="border:2px solid {_BAD};background:'
            f'{_BAD_BG};padding:6px 8px;margin:6px 0;border-radius:4px">'
            f'<div style="font-weight:700;color:{_BAD}">Failed: {esc(title)}</div>'
            f"{_pre(str(err), 200)}</div>")


def _result_text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
    try:
        return repr(value)
    except Exception as exc:  # a user object whose repr fails must not break the panel
        return f"<unrepresentable {type(value).__name__}: {exc}>"


def tools_html(trace: DecisionTrace | None) -> str:
    if trace is None or not trace.tool_rounds:
        return ""
    return (_label(f"Tool rounds ({len(trace.tool_rounds)})")
            + frame_html(trace.to_frame("tools"), "op-tools"))


def frame_html(df, cls: str = "") -> str:
    """A DataFrame as an escaped HTML table (pandas escapes cells, headers and the index)."""
    import pandas as pd
    with pd.option_context("display.max_colwidth", 160):
        table = df.to_html(escape=True, border=0, na_rep="", classes="op-frame",
                           float_format="{:.3f}".format)
    return f'<div class="op-table {cls}" style="overflow:auto">{table}</div>'


_TABLES = ("attempts", "options", "tools", "summary")


def table_html(trace: DecisionTrace, table: str) -> str:
    df = trace.to_frame(table)
    if table == "options":
        df = _options_view(df)
    if df.empty:
        return f'<div style="color:#777">no {esc(table)}</div>'
    return _TABLE_STYLE + frame_html(df, f"op-table-{table}")


def _options_view(df):
    """The options table with parameters written out (type, default, allowed values, hidden)."""
    df = df.copy()
    df["params"] = [param_summary(ps) for ps in df["params"]]
    return df


def param_summary(params: list[dict]) -> str:
    out = []
    for p in params:
        s = f"{p['name']}: {p['type']}"
        if p.get("default") is not None:
            s += f" = {p['default']}"
        if p.get("options"):
            s += f" (one of {', '.join(map(repr, p['options']))})"
        if p.get("hidden") or p.get("source") != "llm":
            s += f" [hidden: from {p.get('source')}]"
        out.append(s)
    return "\n".join(out)


def trace_html(trace: DecisionTrace) -> str:
    """The whole trace as static, escaped HTML (what `display(trace)` shows)."""
    parts = [f'<div class="op-panel op-static" style="font-family:var(--jp-ui-font-family,'
             f'sans-serif);font-size:13px;max-width:1000px">', header_html(trace)]
    parts += [attempt_html(a, trace) for a in trace.attempts]
    parts.append(tools_html(trace))
    parts.append(outcome_html(trace))
    for table in ("attempts", "options"):
        parts.append(f'<details><summary style="{_LABEL};cursor:pointer">Table: {table}</summary>'
                     f"{table_html(trace, table)}</details>")
    parts.append("</div>")
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# The widget
# ---------------------------------------------------------------------------------------------


class _AttemptView(W.VBox):
    """One attempt: the prompt is drawn once (so an opened <details> stays open), the body
    redraws as the reply streams in."""

    def __init__(self):
        self.title = W.HTML()
        self.prompt = W.HTML()
        self.body = W.HTML()
        super().__init__([self.title, self.prompt, self.body],
                         layout=W.Layout(padding="2px 8px", margin="4px 0"))
        self.add_class("op-attempt")
        self._state = None
        self._prompt_len = -1

    def draw(self, att: Attempt, trace: DecisionTrace, body: bool = True) -> None:
        state = _state(att, trace)
        if state != self._state:
            if self._state:
                self.remove_class(f"op-attempt-{self._state}")
            self.add_class(f"op-attempt-{state}")
            colour = {"ok": _OK, "failed": _BAD}.get(state, _RUN)
            self.layout.border_left = f"4px solid {colour}"
            self._state = state
        self.title.value = attempt_title(att, trace)
        if len(att.prompt) != self._prompt_len:
            self.prompt.value = attempt_prompt_html(att)
            self._prompt_len = len(att.prompt)
        if body:
            self.body.value = attempt_body_html(att)


class DecisionPanel(W.VBox):
    """A live view of one decision. `DecisionPanel(trace)` draws a finished (or running) trace;
    `DecisionPanel()` attaches to the first decision its `observer` sees:

        panel = DecisionPanel(); display(panel)
        with openprogram.observe(panel.observer):
            decision.make(...)

    `options` (the option set object) and `options_expr` (how a test should name it) prefill
    the "pytest test" box; `context` and `tools` (what the decision was given) let it write
    the test of a decision with hidden parameters or tool rounds."""

    def __init__(self, trace: DecisionTrace | None = None, *, options: Any = None,
                 options_expr: str = "OPTIONS", context: dict | None = None, tools: Any = None,
                 min_interval: float = 0.1):
        self.trace: DecisionTrace | None = None
        self.options = options
        self.context = context
        self.tool_functions = tools
        self.min_interval = min_interval
        self._lock = threading.RLock()
        self._last_draw: dict[int, float] = {}
        self._attempt_views: list[_AttemptView] = []
        self.header = W.HTML(header_html(None))
        self.attempts_box = W.VBox()
        self.tools = W.HTML()
        self.outcome = W.HTML()
        self.tables = W.Tab(children=[W.HTML() for _ in _TABLES], titles=list(_TABLES))
        self.test_box = _TestBox(self, options_expr)
        super().__init__([self.header, self.attempts_box, self.tools, self.outcome,
                          W.Accordion(children=[self.tables], titles=["Tables"]),
                          self.test_box],
                         layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"))
        self.add_class("op-panel")
        if trace is not None:
            self.set_trace(trace)

    def __repr__(self) -> str:
        return self.trace.format_text() if self.trace else "<DecisionPanel: no decision yet>"

    def _repr_mimebundle_(self, **kwargs):
        # ipywidgets cuts text/plain to 110 characters; plain-text front ends (terminal IPython,
        # nbconvert, a notebook viewer without widget state) should see the whole trace.
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict) and "text/plain" in bundle:
            bundle["text/plain"] = repr(self)
        return bundle

    # -- drawing ------------------------------------------------------------------------------
    def set_trace(self, trace: DecisionTrace) -> None:
        """Show `trace` (replacing what was shown) and redraw everything."""
        with self._lock:
            self.trace = trace
            self._attempt_views = []
            self._last_draw.clear()
            with self.hold_sync():
                self.attempts_box.children = ()
                self.redraw()

    def redraw(self) -> None:
        """Redraw every part from the trace."""
        with self._lock, self.hold_sync():
            self._draw_attempts(body=True)
            self._draw_end()

    def _view(self, att: Attempt) -> _AttemptView:
        while len(self._attempt_views) < att.number:
            self._attempt_views.append(_AttemptView())
            self.attempts_box.children = tuple(self._attempt_views)
        return self._attempt_views[att.number - 1]

    def _draw_attempts(self, body: bool) -> None:
        for att in list(self.trace.attempts if self.trace else []):
            self._view(att).draw(att, self.trace, body)
            self._last_draw[att.number] = time.monotonic()

    def _draw_end(self) -> None:
        t = self.trace
        self.header.value = header_html(t)
        self.tools.value = tools_html(t)
        self.outcome.value = outcome_html(t)
        if t is not None:
            for w, table in zip(self.tables.children, _TABLES):
                w.value = table_html(t, table)
        self.test_box.update_state()

    # -- live updates ---------------------------------------------------------------------------
    def observer(self, event: TraceEvent) -> None:
        """Give this to `openprogram.observe` / `add_observer`: the panel follows the first
        decision it sees (or the trace it was made with) and ignores the others."""
        with self._lock:
            if self.trace is None:
                if event.kind != "decision_started":
                    return
                self.trace = event.trace
            if event.trace is not self.trace:
                return
            att = event.attempt
            kind = event.kind
            if kind == "reply_chunk":
                # Throttled: a fast stream must not flood the front end with redraws; the
                # reply_received that follows draws the complete text.
                if att is None or time.monotonic() - self._last_draw.get(att.number, 0.0) \
                        < self.min_interval:
                    return
            with self.hold_sync():
                if att is not None:
                    self._view(att).draw(att, self.trace)
                    self._last_draw[att.number] = time.monotonic()
                    if kind == "tool_call":
                        self.tools.value = tools_html(self.trace)
                if kind in ("decision_started", "attempt_sent"):
                    self.header.value = header_html(self.trace)
                if kind in ("attempt_failed", "validated", "resolved", "decision_failed"):
                    self._draw_attempts(body=True)
                    self._draw_end()

    @contextlib.contextmanager
    def live(self, show=None):
        """Observe the decisions made inside the block; `show()` is called once, when the
        first decision starts (so a bad option set leaves no empty panel behind)."""
        shown = [False]

        def observer(event: TraceEvent) -> None:
            if show is not None and not shown[0] and event.kind == "decision_started" \
                    and self.trace is None:
                shown[0] = True
                self.observer(event)
                show(self)
                return
            self.observer(event)

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
        self.status = W.HTML()
        self.details = W.VBox([W.HBox([self.options_expr, self.module]), self.code,
                               W.HBox([self.path, self.save]), self.status],
                              layout=W.Layout(display="none"))
        super().__init__([self.button, self.details])
        self.button.on_click(self._generate)
        self.save.on_click(self._save)
        self.update_state()

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

    def _generate(self, _button=None) -> None:
        try:
            code = self.generate()
        except Exception as exc:
            self.status.value = (f'<span style="color:{_BAD}">Cannot write the test: '
                                 f"{esc(exc)}</span>")
            self.details.layout.display = "flex"
            return
        with self.hold_sync():
            self.code.value = code
            self.status.value = ('<span style="color:#555">Run it with pytest; it replays the '
                                 "recorded replies on ScriptedRuntime.</span>")
            self.details.layout.display = "flex"

    def _save(self, _button=None) -> None:
        import pathlib
        path = pathlib.Path(self.path.value.strip() or "test_decision.py")
        try:
            if not self.code.value:
                self._generate()
            path.write_text(self.code.value, encoding="utf-8")
        except OSError as exc:
            self.status.value = f'<span style="color:{_BAD}">Not saved: {esc(exc)}</span>'
            return
        self.status.value = f"Saved to <code>{esc(path.resolve())}</code>"
