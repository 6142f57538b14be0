"""Two runs side by side: where they part, and what differs first there.

`RunDiff(a, b)` (what `run_a.diff(run_b)` returns) walks the two runs' decisions in the order
they happened: each decision's start (its request, its menu, the model's replies — a tool
round's call counts as the model's reply, its result as "tools" — the pick and its arguments),
then the decisions made while it resolves (a function option that decides itself), then its end
(its result or error). While both made a decision at the same place — the same call sites from
the root down to it — the two are compared part by part at each step. The first step where a
part differs, where the two runs decide at different places ("call_site"), or where one run has
no decision left ("missing"), is the first divergence; what follows it on each side is kept as
it is. Every decision is also paired with the other run's decision at the same place and
occurrence (the third call at that site pairs with the third), which `to_frame()` lists.
"""
from __future__ import annotations

from ..base.errors import UsageError, require
from ..base.json_form import to_jsonable
from ..base.text import repr_head
from ..trace.safe_html import quiet_frame
from .views import shown

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from .nodes import RunNode

__all__ = ["RunDiff", "DecisionDiff", "PARTS"]

#: The parts of a decision, in the order a decision flows (and the two extra verdicts).
PARTS = ("request", "menu", "reply", "tools", "pick", "arguments", "result", "error",
         "call_site", "missing")


def _error_of(err: Any) -> Any:
    if err is None:
        return None
    return {"type": getattr(err, "type_name", None) or type(err).__name__,
            "kind": getattr(err, "kind", None), "message": str(err)}


#: The parts compared when a decision ends (after the decisions made while it resolved).
END_PARTS = ("result", "error")


def parts(node: RunNode) -> list[tuple[str, Any]]:
    """A decision as `(part, value)` pairs in the order the decision flowed: what two equal
    decisions have equal, position by position. The parts of its start (request to arguments)
    come first, its end (result, error) last."""
    t = node.trace
    if t is None:
        return [("error", node.error)]
    out: list[tuple[str, Any]] = [
        ("request", to_jsonable(t.prompt)),
        ("menu", (t.menu, to_jsonable([{k: v for k, v in o.items()} for o in t.options])))]
    for r in t.tool_rounds:
        out.append(("reply", (r.name, to_jsonable(r.args))))
        out.append(("tools", (to_jsonable(r.result), r.error)))
    for a in t.attempts:
        out.append(("reply", (to_jsonable(a.reply), to_jsonable(a.tool_calls))))
    last = t.attempts[-1] if t.attempts else None
    out.append(("pick", t.chosen if t.status == "resolved" else
                (last.chosen if last is not None else None)))
    out.append(("arguments", None if last is None else to_jsonable(last.args)))
    out.append(("result", to_jsonable(t.result)))
    out.append(("error", _error_of(t.error)))
    return out


#: The parts a decision held to one option (`fork(pick=)`) differs in only because it was:
#: its menu was that option alone, and the model's reply was asked under it (or not at all).
HELD_PARTS = ("menu", "reply", "tools")


def held(node: RunNode) -> bool:
    """Whether the decision was made held to one option by a fork (`fork(pick=...)`)."""
    run = node.run
    return run is not None and any(i == node.index and kind == "pick"
                                   for i, kind, _ in run.menu_edits)


def _first_part(a: RunNode, b: RunNode, step: str) -> tuple[str | None, Any, Any]:
    """The first part of `step` ("start": request to arguments; "end": result and error)
    where the two decisions differ, with its two values. For a decision a fork held to one
    option, the comparison starts at the pick: that is what the fork changed."""
    skip = HELD_PARTS if held(a) or held(b) else ()

    def of(node: RunNode) -> list:
        return [p for p in parts(node) if (p[0] in END_PARTS) == (step == "end")
                and p[0] not in skip]
    pa, pb = of(a), of(b)
    for i in range(max(len(pa), len(pb))):
        x = pa[i] if i < len(pa) else None
        y = pb[i] if i < len(pb) else None
        if x == y:
            continue
        part = (x or y)[0]
        if x is not None and y is not None and x[0] != y[0]:
            # one side has a step the other has not (more tool rounds, another attempt)
            part = "reply" if "reply" in (x[0], y[0]) else x[0]
        return part, None if x is None else x[1], None if y is None else y[1]
    return None, None, None


def steps(decisions: list) -> list[tuple[Any, str]]:
    """`(decision, "start" | "end")` in the order the run went through them: a decision starts,
    the decisions made while it resolves (a function option that decides itself) start and end
    inside it, then it ends. So a result that differs only because a decision nested in it
    did is found after that decision."""
    out: list[tuple[Any, str]] = []
    open_: list = []
    for d in decisions:
        while open_ and open_[-1] not in d.path:
            out.append((open_.pop(), "end"))
        out.append((d, "start"))
        open_.append(d)
    while open_:
        out.append((open_.pop(), "end"))
    return out


def place(node: RunNode) -> tuple:
    """Where a decision was made: the call sites (or names) of the sited nodes from the root
    down to it."""
    return tuple((n.kind, n.site.key if n.site is not None else n.name)
                 for n in node.path[1:] if n.site is not None or n.index is not None)


class DecisionDiff:
    """One aligned pair: `a` and `b` (RunNodes, one of them None when only one run made it),
    `index` (its position in the walk), `part` (the first part that differs, None when the two
    agree) and the two values of that part (`a_value`, `b_value`)."""

    __slots__ = ("index", "a", "b", "part", "a_value", "b_value")

    def __init__(self, index: int, a: RunNode | None, b: RunNode | None, part: str | None,
                 a_value: Any = None, b_value: Any = None):
        self.index, self.a, self.b, self.part = index, a, b, part
        self.a_value, self.b_value = a_value, b_value

    @property
    def site(self) -> Any:
        node = self.a if self.a is not None else self.b
        return None if node is None else node.site

    def __repr__(self) -> str:
        where = f" at {self.site}" if self.site is not None else ""
        if self.part is None:
            return f"<DecisionDiff {self.index}{where}: the same>"
        return (f"<DecisionDiff {self.index}{where}: {self.part} differs: "
                f"{repr_head(self.a_value, 80)} vs {repr_head(self.b_value, 80)}>")


def _compare(index: int, a: RunNode | None, b: RunNode | None,
             step: str | None = None) -> DecisionDiff:
    """The two decisions compared: at one step of the walk (`step`), or whole (None)."""
    if a is None or b is None:
        return DecisionDiff(index, a, b, "missing")
    if place(a) != place(b):
        return DecisionDiff(index, a, b, "call_site", a.site, b.site)
    for s in ((step,) if step is not None else ("start", "end")):
        part, x, y = _first_part(a, b, s)
        if part is not None:
            return DecisionDiff(index, a, b, part, x, y)
    return DecisionDiff(index, a, b, None)


class RunDiff:
    """The comparison of two runs (see the module's text): `first` is the first divergence (a
    `DecisionDiff`, None when every decision agrees), `common` how many decisions agree before
    it, `after_a` / `after_b` the decisions each run made after it, `pairs` every decision
    aligned with its counterpart."""

    def __init__(self, a: Any, b: Any):
        if not hasattr(b, "decisions") or not hasattr(b, "root"):
            raise UsageError(f"run.diff() takes another Run, got {type(b).__name__}")
        self.a, self.b = a, b
        da, db = list(a.decisions), list(b.decisions)
        sa, sb = steps(da), steps(db)
        self.first: DecisionDiff | None = None
        self.common = 0
        at = len(sa)
        for i in range(max(len(sa), len(sb))):
            x = sa[i] if i < len(sa) else None
            y = sb[i] if i < len(sb) else None
            if x is not None and y is not None and x[1] != y[1]:
                # one run ends a decision where the other starts one nested in it
                d = DecisionDiff(x[0].index, x[0], y[0], "call_site", x[0].site, y[0].site)
            else:
                node = (x or y)[0]
                d = _compare(node.index, None if x is None else x[0],
                             None if y is None else y[0], (x or y)[1])
            if d.part is not None:
                self.first, at = d, i
                break
            if x[1] == "start":
                self.common += 1
        self.after_a = [d for d, s in sa[at + 1:] if s == "start"]
        self.after_b = [d for d, s in sb[at + 1:] if s == "start"]
        self.pairs = self._pairs(da, db)

    @staticmethod
    def _pairs(da: list, db: list) -> list[DecisionDiff]:
        def keyed(ds: list) -> dict:
            seen: dict = {}
            out = {}
            for d in ds:
                p = place(d)
                seen[p] = seen.get(p, 0) + 1
                out[(p, seen[p])] = d
            return out
        ka, kb = keyed(da), keyed(db)
        out, used = [], set()
        for key, a in ka.items():
            b = kb.get(key)
            used.add(key)
            out.append(_compare(len(out), a, b))
        for key, b in kb.items():
            if key not in used:
                out.append(_compare(len(out), None, b))
        return out

    @property
    def same(self) -> bool:
        """Whether every decision agrees (the results may still differ: see `results`)."""
        return self.first is None

    @property
    def results(self) -> tuple[Any, Any]:
        return self.a.result, self.b.result

    def format_text(self) -> str:
        a, b = self.a, self.b
        head = f"RunDiff of {a.name!r} ({len(a.decisions)} decisions) and {b.name!r} " \
               f"({len(b.decisions)} decisions)"
        f = self.first
        if f is None:
            return f"{head}: every decision agrees; results {repr_head(a.result, 80)} and " \
                   f"{repr_head(b.result, 80)}"
        where = f" ({f.site})" if f.site is not None else ""
        if f.part == "missing":
            which = "the first run" if f.a is None else "the second run"
            what = f"{which} made no decision {f.index}"
        else:
            what = (f"its {f.part} differs first: {repr_head(f.a_value, 160)} vs "
                    f"{repr_head(f.b_value, 160)}")
        return (f"{head}: {self.common} decision(s) in common, then decision {f.index}{where}: "
                f"{what}. After it the first run made {len(self.after_a)} more decision(s), "
                f"the second {len(self.after_b)}; results {repr_head(a.result, 80)} and "
                f"{repr_head(b.result, 80)}")

    def __repr__(self) -> str:
        return f"<{self.format_text()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.format_text())

    def to_frame(self):
        """One row per aligned pair of decisions: where it was made, each run's node, pick
        and result, and the first part that differs (None when they agree)."""
        pd = require("pandas", "pandas", "RunDiff.to_frame()")

        def side(d: Any, name: str) -> dict:
            t = None if d is None else d.trace
            return {f"{name}_node": None if d is None else d.id,
                    f"{name}_index": None if d is None else d.index,
                    f"{name}_chosen": None if t is None else t.chosen,
                    f"{name}_result": None if t is None else repr_head(t.result, 200),
                    f"{name}_status": None if t is None else t.status}
        rows = []
        for p in self.pairs:
            node = p.a if p.a is not None else p.b
            rows.append({"pair": p.index, "site": None if p.site is None else str(p.site),
                         "name": None if node is None else node.name,
                         "same": p.part is None, "part": p.part,
                         **side(p.a, "a"), **side(p.b, "b")})
        columns = ["pair", "site", "name", "same", "part",
                   *(f"{s}_{c}" for s in "ab"
                     for c in ("node", "index", "chosen", "result", "status"))]
        return quiet_frame(pd.DataFrame(rows, columns=columns).set_index("pair"))

    def view(self) -> Any:
        """The registered view of the two runs side by side (`register_run_view`)."""
        return shown(self)

    def _repr_html_(self) -> str:
        """Both runs side by side from their first divergence, as static HTML
        (`runs.html.diff_html`)."""
        from .html import diff_html
        return diff_html(self)
