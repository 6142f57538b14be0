"""The nodes of a run's tree, and the events a run's watchers get as the tree grows.

A `RunNode` wraps the runtime's own DAG node (`runtime.dag.Node`: kind, name, timing, status,
prompt, reply, tokens — which its span keeps up to date) and adds what only the run knows: its
id and parent in the run (ids are the run's own, "n0" for the root, because a program may use
several runtimes, each counting its DAG nodes from 1), its depth, the user's call site, the
decision it belongs to, and for a decision the live `DecisionTrace`. A node read back from a
saved run wraps a DAG node rebuilt from the file. `to_dict()` is the node as JSON data, what a
view draws and what `Run.save` writes.
"""
from __future__ import annotations

from ..base.json_form import to_jsonable
from ..base.text import repr_head
from ..runtime.dag import Node
from .sites import CallSite

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["RunNode", "RunEvent", "KINDS"]

#: The kinds of node a run's tree holds: the root, the DAG's own, and a live tool's call.
KINDS = ("run", "agent_method", "agentic_function", "decision", "model_call", "tool",
         "mcp_call")
#: The kinds that record the user's call site.
SITED = frozenset({"agent_method", "agentic_function", "decision"})


#: Fields a node leaves unset until they apply, read as None (see `RunNode.__getattr__`): what
#: only some nodes have (a call site, an attempt, who answered), and a model call's recording
#: (`calls.RecordedCall` reads it): its request, its response or error, the runtime asked, how
#: many decisions had started, and what was read back or worked out later (`rec`).
LAZY = frozenset({"site", "attempt", "src", "rt_name", "req", "resp", "err", "rt",
                  "before", "rec", "index", "trace", "run_ref", "number"})


class RunNode:
    """One node of a run's tree (see the module's text). The timing and outcome fields are read
    from the DAG node, so they are current while the node runs. A node is made on every DAG node
    of a recorded program, so it sets only what every node has; a model call keeps its own
    recording in its slots, as plain values the garbage collector need not visit (a run keeps
    every call, and each object it keeps would cost every collection a visit)."""

    __slots__ = ("up", "dag_node", *LAZY, "__weakref__")

    def __init__(self, run: Any, seq: int | None, up: RunNode | None, dag_node: Node):
        if up is None:
            # the root holds the run, weakly: a run holds its nodes, and a node that held its
            # run would make every run a reference cycle, which only the garbage collector
            # frees (visiting all of it, traces and all) where dropping the run frees it at
            # once; every other node finds the run through the root
            self.run_ref = run.ref
        self.up, self.dag_node = up, dag_node
        if seq is not None:
            self.number = seq
        self.index: int | None = None          # decision nodes: k in run.decisions
        self.trace: Any = None                 # decision nodes: the DecisionTrace

    def __getattr__(self, name: str) -> Any:
        # reached only for a slot not set (LAZY), or a name that is no field
        if name in LAZY:
            return None
        raise AttributeError(f"'RunNode' object has no attribute {name!r}")

    @property
    def children(self) -> list[RunNode]:
        """The nodes started under this one, in order. Found when asked for (a recorded
        program does no work for it): from an index of the run's nodes by parent, made once
        per size of the run."""
        return self.run.children_of(self)

    @property
    def depth(self) -> int:
        """0 for the root."""
        n, node = 0, self.up
        while node is not None:
            n, node = n + 1, node.up
        return n

    @property
    def in_decision(self) -> int | None:
        """The index of the innermost decision at or above this node (None outside any)."""
        node = self
        while node is not None:
            i = node.index
            if i is not None:
                return i
            node = node.up
        return None

    @property
    def run(self) -> Any:
        """The run this node is part of (None once nothing else holds the run)."""
        node = self
        while node.up is not None:
            node = node.up
        return node.run_ref()

    @property
    def seq(self) -> int:
        """The node's place in `run.nodes` (the number in its id): given when first asked for,
        to every node started so far (a recorded program numbers nothing)."""
        n = self.number
        if n is None:
            self.run.number_nodes()
            n = self.number
        return n

    @property
    def source(self) -> str | None:
        """A model or live tool call: who answered it, "live" (asked), "recording" (the run a
        fork was made of) or "edit" (the fork's edit); None for other nodes."""
        src = self.src
        if src is None and self.dag_node.kind in ("model_call", "mcp_call"):
            return "live"
        return src

    @source.setter
    def source(self, source: str | None) -> None:
        self.src = source

    @property
    def runtime(self) -> str | None:
        """A model call: the name of the runtime that answered (None for other nodes)."""
        name = self.rt_name
        if name is not None:
            return name
        rt = self.rt   # (a ModelCaller, or None)
        return None if rt is None else rt.name

    @runtime.setter
    def runtime(self, name: str | None) -> None:
        self.rt_name = name

    # -- identity and place ---------------------------------------------------------------
    @property
    def id(self) -> str:
        return f"n{self.seq}"

    @property
    def parent(self) -> str | None:
        return None if self.up is None else self.up.id

    @property
    def kind(self) -> str:
        return self.dag_node.kind

    @property
    def name(self) -> str:
        return self.dag_node.name

    @property
    def path(self) -> list[RunNode]:
        """The nodes from the root down to this one."""
        out, node = [], self
        while node is not None:
            out.append(node)
            node = node.up
        return out[::-1]

    @property
    def decision(self) -> RunNode | None:
        """The innermost decision node at or above this node (itself, for a decision)."""
        i = self.in_decision
        return None if i is None else self.run.decisions[i]

    # -- what the DAG node holds ----------------------------------------------------------
    started_at = property(lambda self: self.dag_node.started_at)
    duration_s = property(lambda self: self.dag_node.duration_s)
    status = property(lambda self: self.dag_node.status)
    error = property(lambda self: self.dag_node.error)
    prompt = property(lambda self: self.dag_node.prompt)
    reply = property(lambda self: self.dag_node.reply)
    input_tokens = property(lambda self: self.dag_node.input_tokens)
    output_tokens = property(lambda self: self.dag_node.output_tokens)

    # -- a decision's outcome, for a view -------------------------------------------------
    def summary(self) -> dict | None:
        """A decision node's outcome as JSON data (None for other nodes): entry, way of
        asking, status, the pick with its probability and the runner-up when confidence was
        asked, each attempt's outcome, the result's head and the error."""
        t = self.trace
        if t is None:
            return None
        conf = t.confidence
        err = t.error
        return {
            "entry": t.entry, "mode": t.mode, "status": t.status, "chosen": t.chosen,
            "p_pick": None if conf is None else conf.p_pick,
            "runner_up": None if conf is None else conf.runner_up,
            "p_runner_up": None if conf is None else conf.p_runner_up,
            "attempts": [{"number": a.number, "ok": a.error_kind is None and a.chosen is not None,
                          "error_kind": a.error_kind, "chosen": a.chosen}
                         for a in t.attempts],
            "result": repr_head(t.result, 300) if t.status == "resolved" else None,
            "error": None if err is None else repr_head(f"{type(err).__name__}: {err}", 300),
        }

    def to_dict(self) -> dict:
        """The node as JSON data (what a view draws and a saved run keeps): the fields of the
        run's API (docs/runs-API, `RunNode`) and, for a decision, its `summary()`."""
        d = self.dag_node
        out = {"id": self.id, "seq": self.seq, "parent": self.parent, "kind": d.kind,
               "name": d.name, "depth": self.depth,
               "site": None if self.site is None else self.site.to_dict(),
               "index": self.index, "in_decision": self.in_decision, "attempt": self.attempt,
               "source": self.source, "runtime": self.runtime, "started_at": d.started_at,
               "duration_s": d.duration_s, "status": d.status, "error": d.error,
               "prompt": to_jsonable(d.prompt), "reply": to_jsonable(d.reply),
               "input_tokens": d.input_tokens, "output_tokens": d.output_tokens}
        if self.trace is not None:
            out["decision"] = self.summary()
        return out

    def __repr__(self) -> str:
        where = f" at {self.site}" if self.site is not None else ""
        which = f" #{self.index}" if self.index is not None else ""
        return f"<RunNode {self.id} {self.kind}{which} {self.name!r}{where} {self.status}>"


def rebuilt(run: Any, data: dict, up: RunNode | None) -> RunNode:
    """A node of a saved run, from its `to_dict()`."""
    dag = Node(int(data.get("seq") or 0), None, str(data.get("kind")), str(data.get("name")),
               started_at=data.get("started_at") or 0.0, duration_s=data.get("duration_s"),
               status=data.get("status") or "ok", error=data.get("error"),
               prompt=data.get("prompt"), reply=data.get("reply"),
               input_tokens=data.get("input_tokens"), output_tokens=data.get("output_tokens"))
    node = RunNode(run, int(data.get("seq") or 0), up, dag)
    node.site = CallSite.from_dict(data.get("site"))
    node.index = data.get("index")
    node.attempt, node.source = data.get("attempt"), data.get("source")
    node.runtime = data.get("runtime")
    return node


class RunEvent:
    """What a run's watcher (`run.watch(fn)`) is handed: `kind` is "node_started",
    "node_finished" or "run_finished"; `node` is the RunNode (None for run_finished)."""

    __slots__ = ("kind", "run", "node")

    def __init__(self, kind: str, run: Any, node: RunNode | None):
        self.kind, self.run, self.node = kind, run, node

    def __repr__(self) -> str:
        return f"<RunEvent {self.kind} {self.node!r}>"
