"""The HTML of a run: its tree of method calls, decisions and tool calls, folded by call site.

`RunOutline` folds a run's nodes (read by attribute only: `id`, `parent`, `kind`, `name`, `site`,
`index`, `status`, `duration_s`, tokens, `source`, a decision's `trace`) into rows as they start
and finish: the nodes of one kind made at one call site under the same row are one row (a loop's
thousand decisions are one row counting them), and a model call inside a decision is folded into
the decision's row (its attempt, tokens and whether the recording answered it). Each event costs
the same whatever came before it: a dictionary lookup, a few sums on the row and its ancestors
(tokens count up the tree), and the changed rows come back for a live view to redraw — never the
whole tree. `row_html(row)` draws one row's line; `run_html(run)` the whole run (a header with its
totals, the tree, a table of its decisions) as the static copy a saved notebook and an export
keep; `diff_html(diff)` two runs side by side from their first divergence, the common prefix
collapsed. Plain HTML with inline styles, every text a program, a model, a tool or an option set
wrote escaped and cut, inside the wrapper MathJax skips, each text passed through
`secrets.scrub` first so no API key this process holds reaches a page. Standard library only;
`Run._repr_html_` and `RunDiff._repr_html_` are `run_html` and `diff_html`, and the notebook's
live view (openprogram.widgets.runview) draws its rows with `row_html`. It is one module because
the live view and the static copy must draw the same rows the same way.
"""
from __future__ import annotations

from ..base.secrets import scrub
from ..base.text import cut, safe_repr, safe_str
from ..trace.safe_html import LABEL_STYLE, TABLE_STYLE, esc, html_table, wrap
from ..trace.view import diff_html as text_diff_html

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Iterable
    from typing import Any

__all__ = ["RunOutline", "Row", "row_html", "row_text", "line_text", "header_html", "run_html",
           "decision_line", "diff_html", "diff_text", "STATE_COLOURS", "TABLE_ROWS"]

#: A row's colour by its state: something failed in it (red), all done (green), running (grey).
STATE_COLOURS = {"ok": "#2e7d32", "error": "#c62828", "running": "#757575"}
#: The static copy's table of decisions lists at most this many (the tree counts them all).
TABLE_ROWS = 200
#: How many picks a row of many decisions names, most frequent first.
PICKS_SHOWN = 3
# Texts a row shows (a pick, a result, an error) are cut to this many characters: a row is a
# line, the decision's panel holds the whole text.
LINE_CHARS = 120
_SHOWN = frozenset({"run", "agent_method", "agentic_function", "decision", "tool", "mcp_call",
                    "model_call"})
_KIND_LABELS = {"run": "run", "agent_method": "method", "agentic_function": "function",
                "decision": "decision", "tool": "tool", "mcp_call": "MCP", "model_call": "model"}


def line_text(value: Any, limit: int = LINE_CHARS) -> str:
    """A value a program, model or tool wrote, as one cut line (not yet escaped), any key this
    process holds masked (scrub is a no-op while no runtime holds one)."""
    text = value if isinstance(value, str) else safe_str(value)
    return cut(" ".join(scrub(text).split()), limit, "…")


def _seconds(s: float | None) -> str:
    # two decimals and an "s": notebooks/sanitize.cfg replaces exactly this form for nbval
    return f"{s:.2f}s" if s is not None else ""


class Row:
    """One row of the outline: every node of one kind made at one call site under one parent
    row. Counts and sums cover its members; tokens and model calls cover its whole subtree."""

    __slots__ = ("id", "parent", "depth", "kind", "name", "site", "key", "children", "members",
                 "count", "running", "errors", "duration_s", "input_tokens", "output_tokens",
                 "calls", "recorded", "attempts", "failed_attempts", "picks", "first_index",
                 "last_index", "version")

    def __init__(self, rid: int, parent: Row | None, kind: str, name: str, site: str | None,
                 key: tuple):
        self.id, self.parent, self.kind, self.name, self.site, self.key = \
            rid, parent, kind, name, site, key
        self.depth = 0 if parent is None else parent.depth + 1
        self.children: list[Row] = []
        self.members: list = []           # the nodes, in the order they started
        self.count = self.running = self.errors = 0
        self.duration_s = 0.0
        self.input_tokens = self.output_tokens = self.calls = self.recorded = 0
        self.attempts = self.failed_attempts = 0
        self.picks: dict[str, int] = {}
        self.first_index = self.last_index = None     # a decision row's first and last k
        self.version = 0                  # bumped on every change: what a live view compares

    @property
    def last(self) -> Any:
        return self.members[-1] if self.members else None

    @property
    def state(self) -> str:
        if self.errors:
            return "error"
        return "running" if self.running else "ok"

    def __repr__(self) -> str:
        return f"<Row r{self.id} {self.kind} {self.name!r} x{self.count}>"


class RunOutline:
    """A run's nodes folded into rows, fed one event at a time (`start`, `finish`) or a run at
    once (`feed`). Both return the rows that changed, the new ones first; an event seen before
    changes nothing (a live view may replay what a run already holds while its events arrive)."""

    def __init__(self, nodes: Iterable[Any] = ()):
        self.rows: list[Row] = []
        self.root: Row | None = None
        self._row_of: dict[Any, Row] = {}         # node id -> the row it is in or folded into
        self._by_key: dict[tuple, Row] = {}
        self._finished: set = set()
        self._members: set = set()                # ids of the nodes that are a row's members
        # the run's totals, kept as events arrive (a header redrawn per event must not add up
        # every row)
        self.decisions = self.tools = self.attempts = self.failed_attempts = 0
        self.feed(nodes)

    def feed(self, nodes: Iterable[Any]) -> list[Row]:
        """Take in nodes as they stand (started, and finished where they have)."""
        changed: dict[int, Row] = {}
        for node in list(nodes):
            for row in self.start(node):
                changed[row.id] = row
            if getattr(node, "status", "running") != "running":
                for row in self.finish(node):
                    changed[row.id] = row
        return list(changed.values())

    def _new_row(self, parent: Row | None, kind: str, name: str, site: str | None,
                 key: tuple) -> Row:
        row = Row(len(self.rows), parent, kind, name, site, key)
        self.rows.append(row)
        self._by_key[key] = row
        if parent is not None:
            parent.children.append(row)
        return row

    def _root(self) -> Row:
        if self.root is None:
            self.root = self._new_row(None, "run", "run", None, ("root",))
        return self.root

    def start(self, node: Any) -> list[Row]:
        nid = getattr(node, "id", None)
        if nid in self._row_of:
            return []
        kind = getattr(node, "kind", None) or "node"
        parent_id = getattr(node, "parent", None)
        parent = self._row_of.get(parent_id)
        if parent is None:
            if kind == "run" and self.root is None:
                row = self._root()
                row.name = safe_str(getattr(node, "name", "run"))
                return self._join(row, node)
            parent = self._root()
        if kind == "model_call" and parent.kind == "decision" or kind not in _SHOWN:
            # an attempt's call is part of its decision's row; counted when it finishes
            self._row_of[nid] = parent
            return []
        site = getattr(node, "site", None)
        where = getattr(site, "key", None) if site is not None else None
        name = safe_str(getattr(node, "name", kind))
        key = (parent.id, kind, where if where is not None else name)
        row = self._by_key.get(key)
        fresh = row is None
        if fresh:
            row = self._new_row(parent, kind, name, None if site is None else safe_str(site),
                                key)
        changed = self._join(row, node)
        return [row, parent] if fresh else changed

    def _join(self, row: Row, node: Any) -> list[Row]:
        nid = getattr(node, "id", None)
        self._row_of[nid] = row
        self._members.add(nid)
        row.members.append(node)
        index = getattr(node, "index", None)
        if row.kind == "decision":
            self.decisions += 1
            if index is not None:
                row.last_index = index
                row.first_index = index if row.first_index is None else row.first_index
        elif row.kind in ("tool", "mcp_call"):
            self.tools += 1
        row.count += 1
        row.running += 1
        row.version += 1
        return [row]

    def finish(self, node: Any) -> list[Row]:
        nid = getattr(node, "id", None)
        if nid in self._finished:
            return []
        new = self.start(node) if nid not in self._row_of else []
        self._finished.add(nid)
        row = self._row_of[nid]
        changed = {r.id: r for r in new}
        kind = getattr(node, "kind", None)
        failed = getattr(node, "status", None) == "error"
        if nid in self._members:      # one of the row's own (not a call folded into it)
            row.running = max(0, row.running - 1)
            row.duration_s += getattr(node, "duration_s", None) or 0.0
            row.errors += failed
            if kind == "decision":
                self._decision_done(row, node)
            row.version += 1
            changed[row.id] = row
        if kind == "model_call":
            self._call_done(row, node, failed, changed)
        return list(changed.values())

    def _decision_done(self, row: Row, node: Any) -> None:
        trace = getattr(node, "trace", None)
        attempts = list(getattr(trace, "attempts", None) or [])
        failed = sum(1 for a in attempts if getattr(a, "error_kind", None))
        row.attempts += len(attempts)
        row.failed_attempts += failed
        self.attempts += len(attempts)
        self.failed_attempts += failed
        chosen = getattr(trace, "chosen", None)
        if chosen is not None:
            name = safe_str(chosen)
            row.picks[name] = row.picks.get(name, 0) + 1

    def _call_done(self, row: Row, node: Any, failed: bool, changed: dict) -> None:
        tin = getattr(node, "input_tokens", None) or 0
        tout = getattr(node, "output_tokens", None) or 0
        recorded = getattr(node, "source", None) == "recording"
        r: Row | None = row
        while r is not None:   # the row's subtree grows by one call: so do its ancestors'
            r.calls += 1
            r.recorded += recorded
            r.input_tokens += tin
            r.output_tokens += tout
            r.version += 1
            changed[r.id] = r
            r = r.parent

    def row_of(self, node: Any) -> Row | None:
        return self._row_of.get(getattr(node, "id", node))

    def walk(self) -> Iterable[Row]:
        """Every row, depth first, in the order rows first appeared."""
        todo = [self.root] if self.root is not None else []
        while todo:
            row = todo.pop()
            yield row
            todo.extend(reversed(row.children))


# ---------------------------------------------------------------------------------------------
# One decision, one row
# ---------------------------------------------------------------------------------------------

def _confidence(trace: Any) -> tuple:
    conf = getattr(trace, "confidence", None)
    if conf is None:
        return None, None, None
    try:
        return conf.p_pick, conf.runner_up, conf.p_runner_up
    except Exception:       # a record that is not a Confidence: no figures, never an error
        return None, None, None


def _attempt_marks(trace: Any) -> list[tuple[str, str]]:
    """(state, error kind) per attempt: "ok", "failed" or "running"."""
    marks = []
    for a in list(getattr(trace, "attempts", None) or []):
        kind = getattr(a, "error_kind", None)
        marks.append(("failed", safe_str(kind)) if kind else
                     ("ok" if getattr(a, "ok", False) else "running", ""))
    return marks


def decision_facts(node: Any) -> dict:
    """What a row and a diff show of one decision node: index, status, pick, p, runner-up,
    attempts, result or error (texts cut and scrubbed)."""
    trace = getattr(node, "trace", None)
    p, runner, p_runner = _confidence(trace)
    status = getattr(trace, "status", None) or getattr(node, "status", "running")
    result = error = None
    if status == "resolved":
        result = line_text(safe_repr(getattr(trace, "result", None)))
    elif status == "failed":
        err = getattr(trace, "error", None)
        error = line_text(f"{getattr(err, 'kind', None) or type(err).__name__}: {safe_str(err)}")
    elif getattr(node, "status", None) == "error":
        error = line_text(getattr(node, "error", None) or "failed")
    chosen = getattr(trace, "chosen", None)
    return {"index": getattr(node, "index", None), "status": status,
            "pick": None if chosen is None else line_text(chosen), "p": p,
            "runner_up": None if runner is None else line_text(runner), "p_runner_up": p_runner,
            "marks": _attempt_marks(trace), "result": result, "error": error,
            "duration_s": getattr(node, "duration_s", None)}


def _marks_html(marks: list[tuple[str, str]]) -> str:
    colour = {"ok": STATE_COLOURS["ok"], "failed": STATE_COLOURS["error"],
              "running": STATE_COLOURS["running"]}
    sign = {"ok": "✓", "failed": "✗", "running": "…"}
    return "".join(f'<span class="op-att op-att-{s}" title="{esc(k or s)}" '
                   f'style="color:{colour[s]};font-weight:600">{sign[s]}</span>'
                   for s, k in marks)


def _span(cls: str, text: str, style: str = "") -> str:
    return f'<span class="{cls}" style="{style}">{esc(text)}</span>' if text else ""


def _pick_html(f: dict) -> str:
    parts = []
    if f["pick"] is not None:
        parts.append(_span("op-row-pick", f"→ {f['pick']}", "font-weight:600"))
    if f["p"] is not None:
        parts.append(_span("op-row-p", f"p {f['p']:.2f}"))
    if f["runner_up"] is not None:
        p = f" {f['p_runner_up']:.2f}" if f["p_runner_up"] is not None else ""
        parts.append(_span("op-row-runner-up", f"runner-up {f['runner_up']}{p}", "color:#555"))
    if f["result"] is not None:
        parts.append(_span("op-row-result", f"= {f['result']}", "color:#555"))
    if f["error"] is not None:
        parts.append(_span("op-row-error", f["error"], f"color:{STATE_COLOURS['error']}"))
    return " ".join(parts)


def decision_line(node: Any) -> str:
    """One decision on one line (HTML): its index, name, site, pick, p, runner-up, attempts,
    result or error, time."""
    if node is None:
        return '<span class="op-diff-none" style="color:#757575">(none)</span>'
    f = decision_facts(node)
    site = getattr(node, "site", None)
    return ('<span class="op-decision-line" style="font-size:12px">'
            + _span("op-row-index", f"#{f['index']}", "font-weight:600") + " "
            + _span("op-row-name", safe_str(getattr(node, "name", ""))) + " "
            + _span("op-row-site", "" if site is None else safe_str(site),
                    "color:#757575;font-size:11px") + " "
            + _pick_html(f) + " " + _marks_html(f["marks"]) + " "
            + _span("op-row-cost", _seconds(f["duration_s"]), "color:#555") + "</span>")


def _picks_text(row: Row) -> str:
    ranked = sorted(row.picks.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"{line_text(name, 40)} ×{n}" for name, n in ranked[:PICKS_SHOWN])
    more = len(ranked) - PICKS_SHOWN
    return shown + (f", {more} more" if more > 0 else "")


def _cost_text(row: Row) -> str:
    bits = []
    if row.count and (row.running < row.count or row.duration_s):
        bits.append(_seconds(row.duration_s))
    if row.input_tokens or row.output_tokens:
        bits.append(f"{row.input_tokens} in / {row.output_tokens} out tokens")
    if row.calls and row.kind != "run":
        recorded = f", {row.recorded} recorded" if row.recorded else ""
        bits.append(f"{row.calls} model call{'s' * (row.calls != 1)}{recorded}")
    return " · ".join(bits)


def row_html(row: Row) -> str:
    """The line a row shows: kind, name, call site, how many; for one decision its pick, p,
    runner-up, attempts and result; for many, their picks counted; time and tokens."""
    colour = STATE_COLOURS[row.state]
    kind = _KIND_LABELS.get(row.kind, row.kind)
    head = (f'<span class="op-row-kind" style="display:inline-block;min-width:58px;'
            f'font-size:11px;color:#fff;background:{colour};border-radius:3px;'
            f'padding:0 4px;text-align:center">{esc(kind)}</span> '
            + _span("op-row-name", line_text(row.name), "font-weight:600") + " "
            + _span("op-row-site", line_text(row.site or "", 60), "color:#757575;font-size:11px"))
    body = ""
    if row.kind == "decision":
        if row.count == 1:
            f = decision_facts(row.last)
            head += " " + _span("op-row-index", f"#{f['index']}" if f["index"] is not None
                                else "")
            body = _pick_html(f) + " " + _marks_html(f["marks"])
        else:
            span = f"#{row.first_index}…#{row.last_index}" if row.last_index is not None else ""
            head += " " + _span("op-row-count", f"×{row.count} {span}".strip(),
                                "font-weight:600")
            picks = _picks_text(row)
            failed = (f", {row.failed_attempts} failed" if row.failed_attempts else "")
            body = (_span("op-row-picks", f"picks: {picks}" if picks else "") + " "
                    + _span("op-row-attempts", f"({row.attempts} attempts{failed})",
                            "color:#555"))
    elif row.count > 1:
        head += " " + _span("op-row-count", f"×{row.count}", "font-weight:600")
    if row.kind != "decision" and row.errors:
        last_error = next((getattr(n, "error", None) for n in reversed(row.members[-8:])
                           if getattr(n, "status", None) == "error"), None)
        body += _span("op-row-error", f"{row.errors} failed" + (
            f": {line_text(last_error)}" if last_error else ""), f"color:{colour}")
    if row.running and row.kind != "run":
        body += " " + _span("op-row-running", "running…", "color:#757575;font-style:italic")
    cost = _span("op-row-cost", _cost_text(row), "color:#555;font-size:11px")
    return (f'<div class="op-run-row op-row-{esc(row.kind)} op-row-{row.state}" '
            f'style="font-size:12px;line-height:20px;white-space:nowrap;overflow:hidden;'
            f'text-overflow:ellipsis">{head} {body} {cost}</div>')


def row_text(row: Row) -> str:
    """A row as one line of plain text (the view's repr)."""
    bits = [_KIND_LABELS.get(row.kind, row.kind), line_text(row.name)]
    if row.site:
        bits.append(f"({line_text(row.site, 60)})")
    if row.kind == "decision" and row.count == 1:
        f = decision_facts(row.last)
        bits.append(f"#{f['index']}")
        if f["pick"] is not None:
            bits.append(f"-> {f['pick']}")
        if f["p"] is not None:
            bits.append(f"p={f['p']:.2f}")
        if f["runner_up"] is not None:
            bits.append(f"runner-up {f['runner_up']}")
        marks = "".join({"ok": "✓", "failed": "✗"}.get(s, "…") for s, _ in f["marks"])
        if marks:
            bits.append(f"[{marks}]")
        if f["error"]:
            bits.append(f["error"])
    elif row.count > 1:
        bits.append(f"x{row.count}")
        if row.picks:
            bits.append(f"picks: {_picks_text(row)}")
    if row.errors and row.kind != "decision":
        bits.append(f"{row.errors} failed")
    if row.running and row.kind != "run":
        bits.append("running")
    cost = _cost_text(row)
    return "  " * row.depth + " ".join(bits) + (f"  [{cost}]" if cost else "")


# ---------------------------------------------------------------------------------------------
# The whole run
# ---------------------------------------------------------------------------------------------

def _edit_text(run: Any) -> str:
    edit = getattr(run, "edit", None) or {}
    kind = edit.get("kind") if isinstance(edit, dict) else None
    if kind is None:
        return "no edit, asked again"
    value = edit.get("value")
    if kind in ("options", "runtime") and not isinstance(value, str):
        value = type(value).__name__ if kind == "options" else getattr(value, "model", None) \
            or type(value).__name__
    return f"{kind}: {line_text(value, 120)}"


def header_text(run: Any, outline: RunOutline) -> str:
    root, o = outline.root, outline
    status = safe_str(getattr(run, "status", "running"))
    bits = [f"{o.decisions} decision{'s' * (o.decisions != 1)}"]
    if root is not None:
        if root.calls:
            recorded = f" ({root.recorded} from the recording)" if root.recorded else ""
            bits.append(f"{root.calls} model call{'s' * (root.calls != 1)}{recorded}")
        if o.tools:
            bits.append(f"{o.tools} tool call{'s' * (o.tools != 1)}")
        if o.attempts:
            failed = f" ({o.failed_attempts} failed)" if o.failed_attempts else ""
            bits.append(f"{o.attempts} attempt{'s' * (o.attempts != 1)}{failed}")
        if root.input_tokens or root.output_tokens:
            bits.append(f"{root.input_tokens} in / {root.output_tokens} out tokens")
    duration = getattr(run, "duration_s", None)
    if duration is not None:
        bits.append(_seconds(duration))
    return f"Run {line_text(getattr(run, 'name', 'run'), 80)} · {status} · " + ", ".join(bits)


def header_html(run: Any, outline: RunOutline) -> str:
    """The run's name, status and totals; a fork's origin and edit; a failed run's error."""
    status = safe_str(getattr(run, "status", "running"))
    colour = {"ok": STATE_COLOURS["ok"], "error": STATE_COLOURS["error"]}.get(
        status, STATE_COLOURS["running"])
    name, rest = header_text(run, outline).split(" · ", 1)
    rest = rest.split(" · ", 1)[1] if " · " in rest else ""
    lines = [f'<div class="op-run-header" style="font-weight:600">{esc(name)} · '
             f'<span class="op-run-status" style="color:{colour}">{esc(status)}</span> '
             f'<span style="font-weight:400;color:#555">({esc(rest)})</span></div>']
    origin = getattr(run, "forked_from", None)
    if origin is not None:
        k = getattr(run, "fork_point", None)
        what = (f"fork of {line_text(getattr(origin, 'name', 'run'), 60)} at decision #{k} "
                f"({_edit_text(run)}); the calls before it answered from the recording")
        lines.append(f'<div class="op-run-fork" style="font-size:12px;color:#555">'
                     f"{esc(what)}</div>")
    error = getattr(run, "error", None)
    if error is not None:
        lines.append(f'<div class="op-run-error" style="font-size:12px;color:'
                     f'{STATE_COLOURS["error"]}">'
                     f"{esc(line_text(f'{type(error).__name__}: {safe_str(error)}', 2000))}</div>")
    return "".join(lines)


def tree_html(outline: RunOutline) -> str:
    """Every row below the root (whose line is the header), each indented under its parent (no
    script, no stylesheet of the page)."""
    return "".join(f'<div class="op-run-node" style="margin-left:{16 * (row.depth - 1)}px">'
                   f"{row_html(row)}</div>" for row in outline.walk() if row is not outline.root)


def decisions_table(run: Any, limit: int = TABLE_ROWS) -> str:
    decisions = list(getattr(run, "decisions", None) or [])
    rows = []
    for node in decisions[:limit]:
        f = decision_facts(node)
        site = getattr(node, "site", None)
        rows.append([f"#{f['index']}", line_text(getattr(node, "name", "")),
                     "" if site is None else line_text(site), f["status"], f["pick"], f["p"],
                     f["runner_up"], f["p_runner_up"], len(f["marks"]),
                     sum(s == "failed" for s, _ in f["marks"]), f["duration_s"],
                     f["result"] or f["error"]])
    table = html_table(["decision", "name", "call site", "status", "pick", "p_pick",
                        "runner_up", "p_runner_up", "attempts", "failed", "duration_s",
                        "result / error"], rows, "op-table-decisions")
    more = len(decisions) - limit
    what = f"{more:,} more decisions not listed (run.to_frame('decisions') has them all)"
    note = f'<div style="font-size:12px;color:#555">{esc(what)}</div>' if more > 0 else ""
    return TABLE_STYLE + table + note


def run_html(run: Any, outline: RunOutline | None = None, cls: str = "") -> str:
    """The whole run as static HTML: header, tree, table of decisions."""
    outline = outline if outline is not None else RunOutline(getattr(run, "nodes", ()))
    return wrap(header_html(run, outline)
                + f'<div class="op-run-tree" style="margin:4px 0">{tree_html(outline)}</div>'
                + f'<div style="{LABEL_STYLE}">Decisions</div>' + decisions_table(run),
                f"op-run op-static {cls}".strip())


def run_text(run: Any, outline: RunOutline) -> str:
    return "\n".join([header_text(run, outline), *(row_text(r) for r in outline.walk()
                                                  if r is not outline.root)])


# ---------------------------------------------------------------------------------------------
# Two runs
# ---------------------------------------------------------------------------------------------

#: How much of each side's text the divergence shows, marked word by word (a menu can be long).
DIFF_CHARS = 4000


def _value_text(value: Any) -> str:
    return line_text(value if isinstance(value, str) else safe_repr(value), 400)


def _values_html(a: Any, b: Any) -> tuple[str, str]:
    """The two values of the part that differs, escaped: texts (a reply, a request, a menu: the
    text of a `(text, ...)` pair) marked where they differ, other values as their repr."""
    def text_of(v: Any) -> str | None:
        if isinstance(v, (tuple, list)) and v and isinstance(v[0], str):
            v = v[0]
        return v if isinstance(v, str) else None
    ta, tb = text_of(a), text_of(b)
    if ta is None or tb is None or ta == tb:
        return esc(_value_text(a)), esc(_value_text(b))
    return text_diff_html(cut(scrub(ta), DIFF_CHARS, "…"), cut(scrub(tb), DIFF_CHARS, "…"))


def _pair_row(a: Any, b: Any, cls: str, style: str = "") -> str:
    return (f'<tr class="{cls}" style="{style}"><td style="vertical-align:top;padding:2px 6px;'
            f'border-bottom:1px solid #eee">{decision_line(a)}</td>'
            f'<td style="vertical-align:top;padding:2px 6px;border-bottom:1px solid #eee">'
            f"{decision_line(b)}</td></tr>")


def diff_html(diff: Any, cls: str = "") -> str:
    """Both runs' decisions side by side: the common prefix collapsed into one line that opens,
    the first divergence marked with the part that differs and both values, then what follows
    on each side."""
    a_run, b_run = getattr(diff, "a", None), getattr(diff, "b", None)
    names = [line_text(getattr(r, "name", "run"), 60) if r is not None else "run"
             for r in (a_run, b_run)]
    if a_run is not None and getattr(b_run, "forked_from", None) is a_run:
        names[1] = f"fork at #{getattr(b_run, 'fork_point', '?')} ({_edit_text(b_run)})"
    first = getattr(diff, "first", None)
    common = getattr(diff, "common", 0) or 0
    shared = list(getattr(a_run, "decisions", None) or [])[:min(common, TABLE_ROWS)]
    head = (f'<tr><th style="text-align:left;padding:2px 6px;width:50%">A: {esc(names[0])}</th>'
            f'<th style="text-align:left;padding:2px 6px;width:50%">B: {esc(names[1])}</th></tr>')
    prefix = ""
    if common:
        inner = "".join(f'<div style="margin-left:8px">{decision_line(d)}</div>'
                        for d in shared)
        prefix = (f'<tr class="op-diff-common"><td colspan="2" style="padding:2px 6px">'
                  f'<details class="op-diff-prefix"><summary style="color:#555">'
                  f"{esc(f'{common} decision(s) the same in both runs (#0–#{common - 1})')}"
                  f"</summary>{inner}</details></td></tr>")
    if first is None:
        body = (f'<tr class="op-diff-same"><td colspan="2" style="padding:4px 6px;color:'
                f'{STATE_COLOURS["ok"]}">{esc("The two runs made the same decisions.")}'
                "</td></tr>")
        return wrap(f'<table class="op-diff" style="border-collapse:collapse;width:100%">'
                    f"{head}{prefix}{body}</table>", f"op-run-diff {cls}".strip())
    part = safe_str(getattr(first, "part", ""))
    index = getattr(first, "index", None)
    where = (f'<tr class="op-diff-first-head"><td colspan="2" style="padding:4px 6px;'
             f'background:#fff3e0;font-weight:600">'
             f"{esc(f'First divergence: decision #{index}, in its {part}')}</td></tr>")
    va, vb = _values_html(getattr(first, "a_value", None), getattr(first, "b_value", None))
    pre = ("white-space:pre-wrap;word-break:break-word;margin:0;padding:4px;max-height:260px;"
           "overflow:auto;font-size:12px;border:1px solid #ddd;background:#fff")
    values = (f'<tr class="op-diff-values"><td style="vertical-align:top;padding:2px 6px">'
              f'<pre class="op-diff-a" style="{pre}">{va}</pre></td>'
              f'<td style="vertical-align:top;padding:2px 6px"><pre class="op-diff-b" '
              f'style="{pre}">{vb}</pre></td></tr>')
    at = _pair_row(getattr(first, "a", None), getattr(first, "b", None), "op-diff-first",
                   "background:#fff8e1")
    after_a = list(getattr(diff, "after_a", None) or [])
    after_b = list(getattr(diff, "after_b", None) or [])
    rows = []
    for i in range(min(max(len(after_a), len(after_b)), TABLE_ROWS)):
        rows.append(_pair_row(after_a[i] if i < len(after_a) else None,
                              after_b[i] if i < len(after_b) else None, "op-diff-after"))
    after = ""
    if rows:
        after = (f'<tr><td colspan="2" style="{LABEL_STYLE};padding:4px 6px">'
                 f"{esc('Then, on each side')}</td></tr>" + "".join(rows))
    return wrap(f'<table class="op-diff" style="border-collapse:collapse;width:100%">'
                f"{head}{prefix}{where}{at}{values}{after}</table>",
                f"op-run-diff {cls}".strip())


def diff_text(diff: Any) -> str:
    first = getattr(diff, "first", None)
    common = getattr(diff, "common", 0) or 0
    if first is None:
        return f"RunDiff: the same {common} decision(s) in both runs"
    return (f"RunDiff: {common} decision(s) the same, then decision #{first.index} differs in "
            f"its {first.part}: {_value_text(first.a_value)} | {_value_text(first.b_value)}")
