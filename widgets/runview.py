"""The live run view: one widget per run that grows as the run goes, forks it, and diffs the forks.

`RunView(run)` draws a `Run` (openprogram.run) as the tree of its method calls, decisions and tool
calls, folded by call site (`openprogram.trace.run_view.RunOutline`: a loop's thousand decisions
are one row counting them), each row drawn by the core's escaped HTML (`row_html`). It watches a
running run (`run.watch`) and redraws only the rows an event changed — a new row is appended to
its parent's children, a changed row gets its line set again — so a node costs the same at the
thousandth decision as at the tenth. `selected` (a trait: a decision's index, or None) opens that
decision's `DecisionPanel` beneath the tree, with the fork actions: a reply box, the menu of its
options to pick from, the runner-up in one click. A fork (`fork(at, **edit)`, what the buttons
call) runs `run.fork`, shows the forked run's own view as it grows, then `RunDiffView` of the two
runs: both paths side by side from their first divergence, the common prefix collapsed. The
output also carries the run's static HTML (`run_view.run_html`), refreshed when the run ends, for
saved notebooks and exports. `run_cell` runs a notebook cell's code as a run, for the magic.
Buttons never raise into the kernel's log; a view never breaks the run it shows.
"""
from __future__ import annotations

import ast
import contextlib
import threading
from typing import Any

import ipywidgets as W
import traitlets
from IPython.display import display

from openprogram.runs import html as run_view
from openprogram.runs.html import RunOutline
from openprogram.trace.safe_html import esc, wrap

from .panel import DecisionPanel
from .parts import SAVED_VIEW_STYLE, StaticCopy, error_html, held

__all__ = ["RunView", "RunDiffView", "run_cell", "view_of"]

_FOLD = {True: "caret-right", False: "caret-down"}


class _RowView(W.VBox):
    """One row of the tree: its line, an open button on a decision row, a fold button once it
    has children, and the box its children are appended to."""

    def __init__(self, view: RunView, row: run_view.Row):
        self.row = row
        self.line = W.HTML(layout=W.Layout(overflow="hidden", width="100%"))
        self.kids = W.VBox(layout=W.Layout(margin="0 0 0 18px"))
        self.fold: W.Button | None = None
        parts: list[W.Widget] = [self.line]
        if row.kind == "decision":
            self.open_button = W.Button(icon="search", tooltip="open this decision below the tree",
                                 layout=W.Layout(width="28px", height="20px", padding="0",
                                                 flex="0 0 auto"))
            self.open_button.add_class("op-run-open")
            self.open_button.on_click(lambda _b: view._click(view.select_row, row))
            parts.insert(0, self.open_button)
        self.head = W.HBox(parts, layout=W.Layout(align_items="center", width="100%"))
        super().__init__([self.head, self.kids], _dom_classes=("op-run-row-view",))
        self.drawn = -1

    def draw(self) -> None:
        if self.row.version != self.drawn:
            self.drawn = self.row.version
            self.line.value = run_view.row_html(self.row)

    def add_child(self, child: _RowView) -> None:
        if self.fold is None:       # the first child: the row can fold now
            self.fold = W.Button(icon=_FOLD[False], tooltip="fold / unfold",
                                 layout=W.Layout(width="24px", height="20px", padding="0",
                                                 flex="0 0 auto"))
            self.fold.add_class("op-run-fold")
            self.fold.on_click(lambda _b: self.toggle())
            self.head.children = (self.fold, *self.head.children)
        self.kids.children = (*self.kids.children, child)

    def toggle(self, folded: bool | None = None) -> None:
        folded = self.kids.layout.display != "none" if folded is None else folded
        self.kids.layout.display = "none" if folded else None
        if self.fold is not None:
            self.fold.icon = _FOLD[folded]


class RunView(StaticCopy, W.VBox):
    """The view of one run, live while it runs: `RunView(run)`, or `run.view()`.

    `selected` is the index of the decision opened beneath the tree (None: none); setting it
    opens that decision's panel and fork actions, as the decision row's button does. `fork(at,
    **edit)` forks the run as `run.fork` does and shows the fork and the diff below; `forks`
    holds the forked runs. `show()` displays it with an output that is refreshed when the run
    ends."""

    selected = traitlets.Int(None, allow_none=True,
                             help="the index of the decision opened beneath the tree")

    def __init__(self, run: Any):
        self.run = run
        self.outline = RunOutline()
        self.forks: list[Any] = []
        self._lock = threading.RLock()
        self._views: dict[int, _RowView] = {}
        self._displays: list = []
        self._watching = False
        self.header = W.HTML()
        self.header.add_class("op-run-head")
        self.tree = W.VBox(layout=W.Layout(margin="4px 0"))
        self.tree.add_class("op-run-tree-box")
        self.detail = _Detail(self)
        self.fork_box = W.VBox()
        self.fork_box.add_class("op-run-forks")
        saved_look = W.HTML(SAVED_VIEW_STYLE, layout=W.Layout(display="none"))
        super().__init__([saved_look, self.header, self.tree, self.detail, self.fork_box],
                         layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"))
        self._root_classes("op-run-view")
        with self._lock:
            if getattr(run, "status", None) == "running" and hasattr(run, "watch"):
                run.watch(self.on_event)     # first, so that no node slips between the two
                self._watching = True
            self._draw(self.outline.feed(list(getattr(run, "nodes", ()))))

    def __repr__(self) -> str:
        return run_view.run_text(self.run, self.outline)

    def static_html(self) -> str:
        """The run as it stands, as static HTML (what the output carries beside the widget),
        followed by each fork made from the view: its diff with this run, then the fork."""
        with self._lock:
            parts = [run_view.run_html(self.run, self.outline, "op-widget-copy")]
            for section in self.fork_box.children:
                parts.append(section.static_html())
            return "".join(parts)

    def show(self) -> None:
        """Display the view here; when the run ends, the output's text and HTML copies are
        refreshed to the final state (what a saved or exported notebook keeps)."""
        handle = display(self, display_id=True)
        if handle is not None:
            self._displays.append(handle)

    # -- following the run ----------------------------------------------------------------------
    def on_event(self, event: Any) -> None:
        """The run's watcher: draw the rows the event changed, and the header."""
        try:
            with self._lock:
                kind, node = event.kind, event.node
                if kind == "node_started":
                    self._draw(self.outline.start(node))
                elif kind == "node_finished":
                    self._draw(self.outline.finish(node))
                    if self.selected is not None and getattr(node, "index", None) == \
                            self.selected and node.kind == "decision":
                        self.detail.follow(node)
                elif kind == "run_finished":
                    self._finished()
        except Exception as exc:   # a view never breaks the run it shows
            self.header.value = error_html("The run view could not draw this event", exc)

    def _draw(self, changed: list) -> None:
        """Draw the rows that changed, new ones appended to their parent's box; a box that
        gains several rows at once (a run drawn whole when the view is made) sends its
        children once, at the end (hold_sync)."""
        with contextlib.ExitStack() as batch:
            batch.enter_context(self.header.hold_sync())
            held_boxes: set[int] = set()
            for row in changed:
                if row.parent is None:     # the root's line is the header
                    continue
                rv = self._views.get(row.id)
                if rv is None:
                    rv = self._views[row.id] = _RowView(self, row)
                    parent = None if row.parent.parent is None else self._views[row.parent.id]
                    boxes = (self.tree,) if parent is None else (parent.kids, parent.head)
                    for box in boxes:
                        if id(box) not in held_boxes:
                            held_boxes.add(id(box))
                            batch.enter_context(box.hold_sync())
                    if parent is None:
                        self.tree.children = (*self.tree.children, rv)
                    else:
                        parent.add_child(rv)
                rv.draw()
            self.header.value = run_view.header_html(self.run, self.outline)

    def _finished(self) -> None:
        if self._watching:
            self.run.unwatch(self.on_event)
            self._watching = False
        # nodes a watcher could not see (none, unless the run was made elsewhere) are drawn too
        self._draw(self.outline.feed(list(getattr(self.run, "nodes", ()))))
        self._refresh_displays()

    # -- selecting ------------------------------------------------------------------------------
    def select_row(self, row: run_view.Row) -> None:
        """Open the row's latest decision (the others of a folded row are in its list)."""
        index = row.last.index
        self.selected = None if self.selected == index else index

    @traitlets.observe("selected")
    def _selected(self, _change) -> None:
        with self._lock:
            if self.selected is None:
                self.detail.clear()
                return
            decisions = list(getattr(self.run, "decisions", ()))
            if not 0 <= self.selected < len(decisions):
                self.detail.say(error_html(
                    "No such decision", f"this run has {len(decisions)} decision(s) "
                    f"(#0–#{len(decisions) - 1}); #{self.selected} is not one of them"))
                return
            node = decisions[self.selected]
            row = self.outline.row_of(node)
            self.detail.show(node, row)

    # -- forking --------------------------------------------------------------------------------
    def fork(self, at: Any, **edit: Any) -> Any:
        """`run.fork(at=at, **edit)`, shown below: the fork's own view while it runs, then the
        diff of the two runs. Returns the forked run (None when the fork failed: the section
        says why, and holds the partial run of a RunDiverged)."""
        section = _ForkSection(self, at, edit)
        self.fork_box.children = (*self.fork_box.children, section)
        fork = section.run_fork()
        if fork is not None:
            self.forks.append(fork)
        self._refresh_displays()     # a saved notebook keeps the forks made here too
        return fork

    def _refresh_displays(self) -> None:
        for handle in self._displays:
            handle.update(self)

    def _click(self, action, *args) -> None:
        """A button's handler: what goes wrong is said in the view, never raised."""
        try:
            action(*args)
        except Exception as exc:
            self.detail.say(error_html("Could not do that", exc))


class _Detail(W.VBox):
    """The opened decision: which one (a list when its row holds many), its panel, the fork
    actions."""

    def __init__(self, view: RunView):
        self.view = view
        self.row: run_view.Row | None = None
        self.node: Any = None
        self.title = W.HTML()
        self.title.add_class("op-run-detail-title")
        self.members = W.Dropdown(description="decision", layout=W.Layout(width="auto",
                                                                         display="none"))
        self.members.observe(self._member, "value")
        self.status = W.HTML()
        self.status.add_class("op-run-status-line")
        # the panel and the fork actions are made when a decision is first opened: most views
        # are never opened, and a notebook saves every widget a view made
        self.panel: DecisionPanel | None = None
        self.panel_box = W.VBox()
        self.actions: _ForkActions | None = None
        self.actions_box = W.VBox()
        self._updating = False
        super().__init__([self.title, self.members, self.status, self.panel_box, self.actions_box],
                         layout=W.Layout(display="none", margin="6px 0 0 0",
                                         border_top="1px solid #ddd", padding="6px 0 0 0"))
        self.add_class("op-run-detail")

    def clear(self) -> None:
        self.node = None
        self.layout.display = "none"

    def say(self, html: str) -> None:
        self.status.value = html
        self.layout.display = None

    def show(self, node: Any, row: run_view.Row | None) -> None:
        self.node = node
        with held(self):
            self.layout.display = None
            self.status.value = ""
            site = getattr(node, "site", None)
            self.title.value = (f'<div style="font-weight:600">'
                                f'{esc(f"Decision #{node.index} of the run · {node.name}")}'
                                f'<span style="font-weight:400;color:#757575"> '
                                f'{esc("" if site is None else str(site))}</span></div>')
            self._list(row, node)
            if self.panel is None:
                self.panel = DecisionPanel(node.trace)
                self.panel_box.children = (self.panel,)
                self.actions = _ForkActions(self.view)
                self.actions_box.children = (self.actions,)
            else:
                self.panel.set_trace(node.trace)
            self.actions.show(node)

    def follow(self, node: Any) -> None:
        """The opened decision finished (it was opened while it ran): draw its end."""
        if node is self.node and self.panel is not None and self.actions is not None:
            self.panel.set_trace(node.trace)
            self.actions.show(node)

    def _list(self, row: run_view.Row | None, node: Any) -> None:
        """A row of many decisions: a list of them to open another (made when it opens, not
        per node)."""
        self._updating = True
        try:
            if row is None or row.count <= 1:
                self.members.layout.display = "none"
                return
            self.members.options = [(f"#{n.index}: {run_view.decision_facts(n)['pick']}",
                                     n.index) for n in row.members]
            self.members.value = node.index
            self.members.layout.display = None
        finally:
            self._updating = False

    def _member(self, change) -> None:
        if not self._updating and change["new"] is not None:
            self.view.selected = change["new"]


class _ForkActions(W.VBox):
    """Fork the run at the opened decision: with a reply, with a pick from its options, with the
    runner-up in one click; later calls asked again or answered from the recording."""

    def __init__(self, view: RunView):
        self.view = view
        self.node: Any = None
        self.reply = W.Textarea(placeholder="the reply the model is taken to have written "
                                            "at this decision",
                                layout=W.Layout(width="100%", height="70px"))
        self.reply.add_class("op-fork-reply")
        self.reply_button = W.Button(description="Fork with this reply", icon="code-fork",
                                     layout=W.Layout(width="auto"))
        self.reply_button.add_class("op-fork-reply-button")
        self.pick = W.Dropdown(description="pick", layout=W.Layout(width="auto"))
        self.pick.add_class("op-fork-pick")
        self.pick_button = W.Button(description="Fork with this pick", icon="code-fork",
                                    layout=W.Layout(width="auto"))
        self.pick_button.add_class("op-fork-pick-button")
        self.runner_up = W.Button(description="Fork to the runner-up", icon="code-fork",
                                  layout=W.Layout(width="auto"))
        self.runner_up.add_class("op-fork-runner-up")
        self.recorded = W.Checkbox(value=False, indent=False,
                                   description="after it, answer from the recording where the "
                                               "request is the same",
                                   layout=W.Layout(width="auto"))
        self.recorded.add_class("op-fork-after-recorded")
        self.note = W.HTML()
        self.note.add_class("op-fork-note")
        self.reply_button.on_click(lambda _b: view._click(self._fork, "reply"))
        self.pick_button.on_click(lambda _b: view._click(self._fork, "pick"))
        self.runner_up.on_click(lambda _b: view._click(self._fork, "runner_up"))
        super().__init__([W.HTML('<div style="font-weight:600;font-size:12px;margin-top:6px">'
                                 "Fork the run here</div>"),
                          self.reply, self.reply_button, W.HBox([self.pick, self.pick_button]),
                          self.runner_up, self.recorded, self.note])
        self.add_class("op-fork-actions")

    def show(self, node: Any) -> None:
        self.node = node
        trace = node.trace
        names = [o.get("name") for o in getattr(trace, "options", None) or []
                 if isinstance(o, dict) and o.get("name") is not None]
        with held(self):
            self.pick.options = [str(n) for n in names]
            chosen = getattr(trace, "chosen", None)
            if chosen in names:
                self.pick.value = str(chosen)
            conf = getattr(trace, "confidence", None)
            runner = getattr(conf, "runner_up", None) if conf is not None else None
            self.runner_up.disabled = runner is None
            self.runner_up.description = ("Fork to the runner-up (no confidence was recorded)"
                                          if runner is None else
                                          f"Fork to the runner-up: {runner} "
                                          f"({conf.p_runner_up:.2f})")
            running = getattr(trace, "status", None) == "running"
            # a block of notebook code (run_block) or a loaded run without its program cannot
            # be run again: the actions say so instead of failing when clicked
            fixed = not getattr(self.view.run, "re_executable", True)
            for b in (self.reply_button, self.pick_button):
                b.disabled = running or fixed
            self.runner_up.disabled = self.runner_up.disabled or running or fixed
            self.note.value = "" if not fixed else (
                '<span style="color:#757575;font-size:12px">This run cannot be forked: it was '
                "recorded from a block of code (run_block), or loaded without its program "
                "(Run.load(path, program=fn) gives it one).</span>")

    def _fork(self, how: str) -> None:
        edit: dict[str, Any] = {}
        if how == "reply":
            edit["reply"] = self.reply.value
        elif how == "pick":
            edit["pick"] = self.pick.value
        else:
            edit["pick"] = "runner_up"
        if self.recorded.value:
            edit["after"] = "recorded"
        self.view.fork(self.node.index, **edit)


class _ForkSection(W.VBox):
    """One fork below the run: what was edited where, the fork's own view (live while it runs),
    then the diff of the two runs."""

    def __init__(self, view: RunView, at: Any, edit: dict):
        self.view, self.at, self.edit = view, at, edit
        self.fork_view: RunView | None = None
        self.diff: Any = None
        self.title = W.HTML()
        self.title.add_class("op-fork-title")
        what = ", ".join(f"{k}={v!r}" for k, v in edit.items()) or "no edit"
        self.title.value = (f'<div style="font-weight:600;margin-top:8px">'
                            f'{esc(f"Fork at decision {at}: {run_view.line_text(what, 200)}")}'
                            "</div>")
        self.status = W.HTML()
        self.status.add_class("op-fork-status")
        self.body = W.VBox()
        super().__init__([self.title, self.status, self.body],
                         layout=W.Layout(border_left="3px solid #5c7cfa", padding="0 0 0 6px",
                                         margin="6px 0"))
        self.add_class("op-fork-section")

    def _attach(self, run: Any) -> None:
        """A run started inside the fork call: the first is the fork; show it as it grows."""
        if self.fork_view is None:
            self.fork_view = RunView(run)
            self.body.children = (*self.body.children, self.fork_view)

    def run_fork(self) -> Any:
        from openprogram.runs import RunDiverged, on_run
        self.status.value = '<span style="color:#757575">running the fork…</span>'
        try:
            with on_run(self._attach):
                fork = self.view.run.fork(at=self.at, **self.edit)
        except RunDiverged as exc:
            self.status.value = error_html("The fork stopped", exc)
            partial = getattr(exc, "run", None)
            if partial is not None and self.fork_view is None:
                self._attach(partial)
            return None
        except Exception as exc:
            self.status.value = error_html("Could not fork", exc)
            return None
        self._attach(fork)
        self.status.value = ""
        try:
            self.diff = self.view.run.diff(fork)
            self.body.children = (RunDiffView(self.diff), *self.body.children)
        except Exception as exc:
            self.status.value = error_html("Could not diff the two runs", exc)
        return fork

    def static_html(self) -> str:
        """The fork as static HTML: what was edited, why it stopped if it did, the diff, the
        forked run."""
        parts = [self.title.value, self.status.value]
        if self.diff is not None:
            parts.append(run_view.diff_html(self.diff))
        if self.fork_view is not None:
            parts.append(self.fork_view.static_html())
        return wrap("".join(parts), "op-fork-copy")


class RunDiffView(StaticCopy, W.VBox):
    """Two runs side by side from their first divergence (`run_a.diff(run_b).view()`): the
    common prefix collapsed, the divergence marked with the part that differs; the two
    decisions where they part open in their panels, side by side, on request."""

    def __init__(self, diff: Any):
        self.diff = diff
        self.html = W.HTML(run_view.diff_html(diff))
        self.html.add_class("op-diff-html")
        first = getattr(diff, "first", None)
        self.pair = W.HBox()
        children: list[W.Widget] = [W.HTML(SAVED_VIEW_STYLE, layout=W.Layout(display="none")),
                                    self.html]
        if first is not None and (first.a is not None or first.b is not None):
            self.open_button = W.Button(description="Open both decisions", icon="columns",
                                 layout=W.Layout(width="auto"))
            self.open_button.add_class("op-diff-open")
            self.open_button.on_click(lambda _b: self.open_pair())
            children += [self.open_button, self.pair]
        super().__init__(children, layout=W.Layout(width="100%"))
        self._root_classes("op-run-diff-view")

    def open_pair(self) -> None:
        """The two decisions where the runs part, each in its panel, side by side."""
        first = self.diff.first
        panes = []
        for node in (first.a, first.b):
            if node is None or getattr(node, "trace", None) is None:
                panes.append(W.HTML(esc("(no decision on this side)")))
            else:
                panes.append(DecisionPanel(node.trace))
        for p in panes:
            p.layout.width = "50%"
        self.pair.children = tuple(panes)

    def __repr__(self) -> str:
        return run_view.diff_text(self.diff)

    def static_html(self) -> str:
        return run_view.diff_html(self.diff, "op-widget-copy")


def view_of(obj: Any) -> Any:
    """The view `Run.view()` and `RunDiff.view()` return (registered with the core)."""
    if hasattr(obj, "pairs") and hasattr(obj, "first"):
        return RunDiffView(obj)
    return RunView(obj)


# ---------------------------------------------------------------------------------------------
# A cell as a program
# ---------------------------------------------------------------------------------------------

def cell_program(shell: Any, cell: str, name: str):
    """The cell's code as a function of no arguments that runs it in the notebook's namespace
    and returns the value of its last expression, as the cell would show it. A fork calls it
    again: the cell's code runs again, its model and tool calls answered from the recording."""
    code = shell.transform_cell(cell)
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    # registered with IPython's compiler cache, so a traceback (and a call site) shows its lines
    filename = shell.compile.cache(code, getattr(shell, "execution_count", 0) or 0)
    try:
        body = compile(tree, filename, "exec")
        expr = None if last is None else compile(ast.Expression(last.value), filename, "eval")
    except SyntaxError as exc:
        if "await" not in str(exc.msg):
            raise
        from IPython.core.error import UsageError
        raise UsageError("%%run_program runs the cell as a plain function, and this cell awaits "
                         "at its top level: run an async program with "
                         "`run = await openprogram.arun(program)`, then `run.view()`") from None
    ns = shell.user_ns

    def program():
        exec(body, ns)
        return None if expr is None else eval(expr, ns)
    program.__name__ = program.__qualname__ = name
    return program


def run_cell(shell: Any, cell: str, runtime: Any = None, name: str | None = None,
             live: bool = True) -> Any:
    """Run the cell's code as one run (`openprogram.run`) with its view shown as it starts (in
    a kernel) and growing as it goes; a terminal gets the run's text when it ends. Returns
    the Run."""
    import openprogram
    from openprogram.runs import on_run
    first = next((line.strip() for line in cell.splitlines() if line.strip()), "cell")
    program = cell_program(shell, cell, name or run_view.line_text(first, 60))
    views: list[RunView] = []

    def started(run: Any) -> None:
        if not views and live:
            views.append(RunView(run))
            views[0].show()
    with on_run(started):
        run = openprogram.run(program, runtime=runtime)
    if not live:
        print(run_view.run_text(run, RunOutline(run.nodes)))
    return run
