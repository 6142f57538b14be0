"""The DAG of a runtime's calls: one node per model call, Agent method call, decision and tool,
with the parent each was made under (a context variable), kept in a window of the most recent
entries. `Runtime` owns one; the panel and `runtime.dag.to_frame()` read it.
"""
from __future__ import annotations

import contextvars
import itertools
import time
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..base.errors import require
from ..base.run_hooks import current_run

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Iterator
    from typing import Any

# A runtime lives as long as a notebook kernel or a service, and a record of every call it ever
# made would grow without bound (about a kilobyte per decision, more with long prompts). So the
# DAG, and a ScriptedRuntime's list of calls, keep a window of the most recent entries.

#: How many of the most recent DAG nodes (and ScriptedRuntime calls) a runtime keeps unless
#: told otherwise (`Runtime(window=...)`, `runtime.window = n`; None keeps every one).
DEFAULT_WINDOW = 1000


def check_window(window: Any) -> int | None:
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise ValueError(f"window must be a whole number >= 1 (how many of the most recent "
                         f"entries to keep) or None (keep every one), got {window!r}")
    return window


class Window(Sequence):
    """The most recent `maxlen` entries of a growing record (`maxlen` None keeps all of them),
    read like a list: `len`, indexing, slices (a list), iteration (over a snapshot, so entries
    added meanwhile do no harm) and `==` against a list. `dropped` counts the entries that fell
    out; `maxlen` can be changed at any time."""

    __slots__ = ("_items", "dropped", "_lock")

    def __init__(self, maxlen: int | None = DEFAULT_WINDOW):
        self._items: deque = deque(maxlen=check_window(maxlen))
        self.dropped = 0
        self._lock = Lock()

    @property
    def maxlen(self) -> int | None:
        return self._items.maxlen

    @maxlen.setter
    def maxlen(self, maxlen: int | None) -> None:
        maxlen = check_window(maxlen)
        with self._lock:
            kept = deque(self._items, maxlen)
            self.dropped += len(self._items) - len(kept)
            self._items = kept

    def append(self, item: Any) -> None:
        with self._lock:
            self._put(item)

    def _put(self, item: Any) -> None:
        """`append` with the window's lock already held (a DAG takes it for the node's id too)."""
        items = self._items
        if len(items) == items.maxlen:
            self.dropped += 1
        items.append(item)

    def clear(self) -> None:
        with self._lock:
            self.dropped += len(self._items)
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self._items)[i]
        return self._items[i]

    def __iter__(self) -> Iterator:
        return iter(list(self._items))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (Window, list, tuple)):
            return list(self._items) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kept = "every entry" if self.maxlen is None else f"the most recent {self.maxlen}"
        return (f"<Window of {len(self)} ({kept}; {self.dropped} dropped): "
                f"{list(self._items)!r:.300}>")


@dataclass
class Node:
    id: int
    parent: int | None
    kind: str                      # "model_call", "agent_method", "decision", "tool"
    name: str
    started_at: float = field(default_factory=time.time)
    duration_s: float | None = None
    status: str = "running"        # "running", "ok", "error"
    error: str | None = None
    prompt: str | None = None
    reply: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in _NODE_FIELDS}


_NODE_FIELDS = tuple(Node.__dataclass_fields__)

current_node_var: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "openprogram_dag_node", default=None)


class DAG:
    """The model calls and Agent method calls of a Runtime, each with its parent: the most
    recent `window` of them (`DEFAULT_WINDOW`; None keeps every one). Node ids keep counting
    from 1 across the whole life of the runtime, so a node whose parent fell out of the window
    still names it; `parent_dropped(node)` tells, and `to_frame()` shows it in a column."""

    def __init__(self, window: int | None = DEFAULT_WINDOW):
        self.nodes: Window = Window(window)
        self._ids = itertools.count(1)

    # The window is the node list's own: one place checks and applies it.
    window = property(lambda self: self.nodes.maxlen,
                      lambda self, n: setattr(self.nodes, "maxlen", n),
                      doc="How many of the most recent nodes are kept (None: all). Settable.")

    @property
    def dropped(self) -> int:
        """How many nodes fell out of the window."""
        return self.nodes.dropped

    def add(self, kind: str, name: str, **fields) -> Node:
        # Every decision adds two nodes: the id and the place in the window under the window's
        # own lock, one lock rather than two nested (its other changes take the same lock)
        nodes = self.nodes
        with nodes._lock:
            node = Node(next(self._ids), current_node_var.get(), kind, name, **fields)
            nodes._put(node)
        return node

    def span(self, kind: str, name: str, **fields) -> _Span:
        """A node that is the parent of everything recorded inside the block."""
        return _Span(self, kind, name, fields)

    def node(self, node_id: int) -> Node | None:
        """The node with this id, or None when it fell out of the window (or never was)."""
        nodes = self.nodes
        if not nodes:
            return None
        i = node_id - nodes[0].id  # ids are consecutive inside the window
        if 0 <= i < len(nodes):
            return nodes[i]
        return None

    def parent_dropped(self, node: Node) -> bool:
        """Whether `node` has a parent that fell out of the window."""
        return node.parent is not None and (not self.nodes or node.parent < self.nodes[0].id)

    def children(self, node_id: int | None) -> list[Node]:
        return [n for n in self.nodes if n.parent == node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __repr__(self) -> str:
        kept = "every node" if self.window is None else f"the most recent {self.window}"
        return f"<DAG: {len(self)} nodes ({kept}; {self.dropped} earlier dropped)>"

    def to_frame(self):
        """One row per node kept, indexed by id; `parent_dropped` marks a node whose parent
        fell out of the window (its `parent` id is still shown)."""
        pd = require("pandas", "pandas", "DAG.to_frame()")
        nodes = list(self.nodes)
        first = nodes[0].id if nodes else 0
        rows = [{**n.to_dict(), "parent_dropped": n.parent is not None and n.parent < first}
                for n in nodes]
        from ..trace.safe_html import (
            quiet_frame,  # prompts and replies: shown in the library's wrapper
        )
        return quiet_frame(pd.DataFrame(rows, columns=[*_NODE_FIELDS, "parent_dropped"])
                           .set_index("id"))


class _Span:
    """`DAG.span`: a class rather than a generator-based context manager, since every decision
    opens two of these."""

    __slots__ = ("dag", "node", "token", "t0", "args", "run", "run_token")

    def __init__(self, dag: DAG, kind: str, name: str, fields: dict):
        self.dag, self.args = dag, (kind, name, fields)

    def __enter__(self) -> Node:
        kind, name, fields = self.args
        self.node = node = self.dag.add(kind, name, **fields)
        # the run recording this program's tree (openprogram.runs), told of the node
        self.run = run = current_run.get()
        if run is not None:
            self.run_token = run.node_started(node)
        self.token = current_node_var.set(node.id)
        self.t0 = time.perf_counter()
        return node

    def __exit__(self, exc_type, exc, tb) -> None:
        node = self.node
        if exc is None:
            node.status = "ok"
        else:
            node.status, node.error = "error", _describe_error(exc)
        node.duration_s = time.perf_counter() - self.t0
        current_node_var.reset(self.token)
        if self.run is not None:
            self.run.node_finished(node, self.run_token)



def _describe_error(exc: BaseException) -> str:
    """`Type: message`, even for an exception whose __str__ itself raises (a user's)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__}: <str() of it failed>"

