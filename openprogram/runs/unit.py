"""`Run`: one execution of a program as a whole — its tree of calls and decisions, its recording,
its outcome — and the entry points that make one (`run`, `arun`, `run_block`).

`run(fn, *args, runtime=rt, **kwargs)` calls the program under a root node with a `Recorder`
in the context (`base.run_hooks.current_run`): every DAG node the program's runtimes make
becomes a node of the run's tree, every decision keeps its trace, and every model call and live
tool call is recorded by request. The program's exception is the run's `error`, not raised. A
fork (`Run.fork`, planned and checked in `fork.py`) runs the same program again with a
`ForkPlan` beside the recorder; a diff is `diff.py`'s, saving and loading `saved.py`'s. It is
one module because the Run's methods are its public face: each does its checks and hands the
work to the module that owns it.
"""
from __future__ import annotations

import contextvars
import inspect
import threading
import time
import warnings
import weakref

from ..base.errors import RecordedError, UsageError, require
from ..base.json_form import to_jsonable
from ..base.model_protocol import ModelCaller, current_runtime_var, run_blocking
from ..base.run_hooks import current_run
from ..base.secrets import scrub
from ..base.text import repr_head
from ..runtime.dag import Node
from ..trace.decision_trace import trace_from_dict
from ..trace.safe_html import quiet_frame
from .calls import RecordedCall, RecordedTool
from .diff import RunDiff
from .fork import _UNSET, ForkPlan, plan_fork
from .nodes import RunEvent, RunNode, rebuilt
from .recorder import Recorder, current_node
from .saved import (
    LoadedRuntime,
    RunFileError,
    confidence_of,
    edit_value,
    line_of,
    program_of,
    read_run,
    save_run,
)
from .sites import program_entry
from .views import shown

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["Run", "run", "arun", "run_block", "on_run"]

_on_run: contextvars.ContextVar[tuple] = contextvars.ContextVar("openprogram_on_run",
                                                               default=())


class on_run:
    """`with on_run(fn):` — `fn(run)` is called with every Run started in this block (this
    context), before its program runs: how a view attaches to a run it did not start."""

    __slots__ = ("fn", "token")

    def __init__(self, fn: Callable[[Run], Any]):
        if not callable(fn):
            raise UsageError(f"on_run(fn) takes a callable of the Run, got {type(fn).__name__}")
        self.fn = fn

    def __enter__(self) -> Callable[[Run], Any]:
        self.token = _on_run.set(_on_run.get() + (self.fn,))
        return self.fn

    def __exit__(self, *exc: Any) -> None:
        _on_run.reset(self.token)


def _name_of(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _check_runtime(runtime: Any, where: str) -> None:
    if runtime is not None and not isinstance(runtime, ModelCaller):
        raise UsageError(f"{where}(runtime=) takes an openprogram Runtime, got "
                         f"{type(runtime).__name__}; wrap a model with Runtime(call=fn)")


class _Recording:
    """The context a run's program runs in: the recorder, the root as the current node, the
    run's runtime bound. Whatever ends the block finishes the run."""

    def __init__(self, run: Run, plan: ForkPlan | None):
        self.run, self.plan = run, plan

    def __enter__(self) -> Recorder:
        if current_run.get() is not None:
            raise UsageError("a run was started inside another run's program; the outer run "
                             "records everything its program does already: call the program "
                             "directly (a run is the unit, a program runs inside one)")
        rec = Recorder(self.run, self.plan)
        for fn in _on_run.get():
            try:
                fn(self.run)
            except Exception as exc:  # a view that fails must not stop the program
                warnings.warn(f"on_run callback {fn!r} raised {exc!r}; it is ignored",
                              RuntimeWarning, stacklevel=3)
        rt = self.run.runtime
        self.tokens = (current_run.set(rec), current_node.set(self.run.root),
                       None if rt is None else current_runtime_var.set(rt))
        if self.run.watchers:
            self.run.notify("node_started", self.run.root)
        return rec

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        run_token, node_token, rt_token = self.tokens
        if rt_token is not None:
            current_runtime_var.reset(rt_token)
        current_node.reset(node_token)
        current_run.reset(run_token)
        self.run._finish(self.run.error if exc is None else exc)


class Run:
    """One execution of a program (see the module's text and docs/runs.md). Made by
    `openprogram.run`, `arun`, `run_block`, `Run.fork` and `Run.load`."""

    def __init__(self, name: str, program: Callable[..., Any] | None = None, args: tuple = (),
                 kwargs: dict | None = None, runtime: Any = None, *, block: bool = False):
        self.name = name
        self.program, self.args, self.kwargs = program, tuple(args), dict(kwargs or {})
        self.runtime = runtime
        self.block = block
        self.status = "running"
        self.result: Any = None
        self.error: BaseException | None = None
        self.ref = weakref.ref(self)   # what its nodes hold (see RunNode)
        root = Node(0, None, "run", name)
        self.root = RunNode(self, 0, None, root)
        self.nodes: list[RunNode] = [self.root]
        self.decisions: list[RunNode] = []
        self.tool_calls: list[RecordedTool] = []
        self.forked_from: Run | None = None
        self.fork_point: int | None = None
        self.edit: dict | None = None
        #: (decision index, "pick" | "options", the option's name | the options= edit): the
        #: edited option sets a fork was made with, its parents' included (a fork of it makes
        #: those decisions again with them)
        self.menu_edits: list[tuple] = []
        self.watchers: tuple = ()
        self.program_path: str | None = None   # a loaded run's import path, kept on save
        self.path: str | None = None           # the file a loaded run came from
        self._why_not: str = ""                # why a loaded run cannot be forked
        self._t0 = time.perf_counter()
        self._children: tuple | None = None    # (size of the run, its nodes by parent's id)
        self._calls: tuple | None = None       # (size of the run, its model calls)
        self._numbered = 0                     # nodes[:_numbered] know their number
        self._lock = threading.Lock()

    # -- outcome ----------------------------------------------------------------------------
    @property
    def started_at(self) -> float:
        return self.root.dag_node.started_at

    @property
    def duration_s(self) -> float | None:
        return self.root.dag_node.duration_s

    @property
    def re_executable(self) -> bool:
        """Whether the run can be forked: it has a program (a block has none, nor a loaded run
        whose program could not be found)."""
        return self.program is not None and not self.block

    def _finish(self, error: BaseException | None) -> None:
        root = self.root.dag_node
        root.duration_s = time.perf_counter() - self._t0
        self.error = error
        self.status = root.status = "ok" if error is None else "error"
        if error is not None:
            root.error = f"{type(error).__name__}: {error}"
        if self.watchers:  # the root ends like every node, then the run
            self.notify("node_finished", self.root)
            self.notify("run_finished", None)

    @program_entry
    def _execute(self, plan: ForkPlan | None = None) -> Run:
        with _Recording(self, plan):
            try:
                out = self.program(*self.args, **self.kwargs)  # type: ignore[misc]
                if inspect.isawaitable(out):
                    out = run_blocking(out)
                self.result = out
            except Exception as exc:
                self.error = exc
        return self

    @program_entry
    async def _aexecute(self, plan: ForkPlan | None = None) -> Run:
        with _Recording(self, plan):
            try:
                out = self.program(*self.args, **self.kwargs)  # type: ignore[misc]
                if inspect.isawaitable(out):
                    out = await out
                self.result = out
            except Exception as exc:
                self.error = exc
        return self

    # -- the live hook ----------------------------------------------------------------------
    def watch(self, fn: Callable[[RunEvent], Any]) -> Callable[[RunEvent], Any]:
        """Call `fn(event)` as the run grows: a `RunEvent` with `kind` "node_started",
        "node_finished" or "run_finished" and the `node`, in the thread that made the node.
        Returns `fn`. A watcher that raises is reported once and removed."""
        if not callable(fn):
            raise UsageError(f"run.watch(fn) takes a callable of a RunEvent, got "
                             f"{type(fn).__name__}")
        self.watchers = (*self.watchers, fn)
        return fn

    def unwatch(self, fn: Callable[[RunEvent], Any]) -> None:
        self.watchers = tuple(w for w in self.watchers if w is not fn)

    def notify(self, kind: str, node: RunNode | None) -> None:
        event = RunEvent(kind, self, node)
        for fn in self.watchers:
            try:
                fn(event)
            except Exception as exc:
                self.unwatch(fn)
                warnings.warn(f"run watcher {fn!r} raised {exc!r}; it is removed",
                              RuntimeWarning, stacklevel=2)

    # -- the tree ---------------------------------------------------------------------------
    def children_of(self, node: RunNode) -> list[RunNode]:
        """The nodes started under `node`, in order (`node.children`)."""
        nodes = self.nodes
        index = self._children
        if index is None or index[0] != len(nodes):
            by: dict[str, list[RunNode]] = {}
            for n in list(nodes):
                if n.up is not None:
                    by.setdefault(n.up.id, []).append(n)
            self._children = index = (len(nodes), by)
        return list(index[1].get(node.id, ()))

    @property
    def calls(self) -> list[RecordedCall]:
        """The recording: every model call of the run, in the order they started (each kept on
        its node; read as a `RecordedCall`)."""
        nodes = self.nodes
        known = self._calls
        if known is None or known[0] != len(nodes):
            self._calls = known = (len(nodes), [RecordedCall(n) for n in list(nodes)
                                                if n.dag_node.kind == "model_call"])
        return known[1]

    def number_nodes(self) -> None:
        """Give every node started so far its number (`RunNode.seq`): its place in `nodes`."""
        nodes = self.nodes
        with self._lock:
            i = self._numbered
            while i < len(nodes):
                nodes[i].number = i
                i += 1
            self._numbered = i

    def node(self, node_id: str) -> RunNode:
        """The node with this id ("n7")."""
        seq = None
        if isinstance(node_id, str) and node_id[:1] == "n" and node_id[1:].isdigit():
            seq = int(node_id[1:])
        if seq is None or seq >= len(self.nodes) or self.nodes[seq].seq != seq:
            raise KeyError(f"run {self.name!r} has no node {node_id!r}; its ids run from n0 "
                           f"to n{len(self.nodes) - 1}")
        return self.nodes[seq]

    @property
    def totals(self) -> dict:
        """Counts over the whole run: decisions, model and tool calls, attempts (failed ones
        too), tokens, how many calls the recording or an edit answered, and the duration."""
        attempts = [a for d in self.decisions if d.trace is not None for a in d.trace.attempts]
        calls = [n for n in self.nodes if n.kind == "model_call"]
        sources = [c.source for c in self.calls] + [t.source for t in self.tool_calls]
        return {
            "decisions": len(self.decisions), "model_calls": len(calls),
            "tool_calls": sum(n.kind in ("tool", "mcp_call") for n in self.nodes),
            "attempts": len(attempts),
            "failed_attempts": sum(a.error_kind is not None for a in attempts),
            "input_tokens": sum(n.input_tokens or 0 for n in calls),
            "output_tokens": sum(n.output_tokens or 0 for n in calls),
            "recorded": sources.count("recording"), "edited": sources.count("edit"),
            "live": sources.count("live"), "duration_s": self.duration_s,
        }

    def to_dict(self) -> dict:
        """The run as JSON data (keys masked): its outcome, totals and every node, in the
        order they started (each with its parent's id); `tree()` nests them."""
        err = self.error
        return scrub({
            "name": self.name, "status": self.status, "block": self.block,
            "result": to_jsonable(self.result),
            "error": None if err is None else {"type": type(err).__name__,
                                               "message": to_jsonable(str(err))},
            "started_at": self.started_at, "duration_s": self.duration_s,
            "totals": self.totals,
            "fork": None if self.forked_from is None else {
                "from": self.forked_from.name, "at": self.fork_point,
                "edit": to_jsonable(self.edit)},
            "nodes": [n.to_dict() for n in list(self.nodes)]})

    def tree(self) -> dict:
        """The tree as nested JSON data: each node's `to_dict()` with its `children`."""
        def nest(node: RunNode) -> dict:
            return {**node.to_dict(), "children": [nest(c) for c in list(node.children)]}
        return scrub(nest(self.root))

    def to_frame(self, table: str = "nodes"):
        """A pandas DataFrame: "nodes" (one row per node, indexed by id) or "decisions" (one
        row per decision: where, the pick and its probability, attempts, result, tokens)."""
        pd = require("pandas", "pandas", "Run.to_frame()")
        if table == "nodes":
            rows = []
            for n in list(self.nodes):
                d = n.to_dict()
                summary = d.pop("decision", None) or {}
                d["site"] = None if n.site is None else str(n.site)
                d["chosen"], d["p_pick"] = summary.get("chosen"), summary.get("p_pick")
                rows.append(d)
            return quiet_frame(pd.DataFrame(rows).set_index("id"))
        if table == "decisions":
            rows = []
            for n in list(self.decisions):
                s = n.summary() or {}
                calls = [c for c in n.children if c.kind == "model_call"]
                rows.append({"index": n.index, "node": n.id, "name": n.name,
                             "site": None if n.site is None else str(n.site),
                             "status": s.get("status"), "chosen": s.get("chosen"),
                             "p_pick": s.get("p_pick"), "runner_up": s.get("runner_up"),
                             "attempts": len(s.get("attempts") or []),
                             "result": s.get("result"), "error": s.get("error"),
                             "duration_s": n.duration_s,
                             "input_tokens": sum(c.input_tokens or 0 for c in calls),
                             "output_tokens": sum(c.output_tokens or 0 for c in calls)})
            return quiet_frame(pd.DataFrame(rows, columns=[
                "index", "node", "name", "site", "status", "chosen", "p_pick", "runner_up",
                "attempts", "result", "error", "duration_s", "input_tokens",
                "output_tokens"]).set_index("index"))
        raise UsageError(f"Run.to_frame(table={table!r}): the tables are 'nodes' and "
                         f"'decisions'")

    # -- fork, diff, save -------------------------------------------------------------------
    def _forkable(self) -> Callable[..., Any]:
        if self.block:
            raise UsageError(f"run {self.name!r} was recorded from a block of code "
                             f"(run_block), which cannot be run again, so it cannot be forked: "
                             f"put the block's code in a function and run it with "
                             f"openprogram.run(fn)")
        if self.program is None:
            raise UsageError(f"run {self.name!r} cannot be forked: {self._why_not}")
        return self.program

    def _forked(self, plan: ForkPlan) -> Run:
        f = Run(self.name, self._forkable(), self.args, self.kwargs, self.runtime)
        f.forked_from, f.fork_point, f.edit = self, plan.k, plan.edit_record()
        f.program_path = self.program_path
        # the option sets this fork is made with: its parent's before k, and its own edit
        f.menu_edits = [e for e in self.menu_edits if e[0] < plan.k] + (
            [(plan.k, plan.kind, plan.value)] if plan.kind in ("pick", "options") else [])
        return f

    def fork(self, at: Any, *, reply: Any = _UNSET, pick: str | None = None,
             options: Any = None, runtime: Any = None, after: str = "runtime") -> Run:
        """Run the program again, every model and tool call before decision `at` answered from
        this run's recording (no request reaches a model or a server), with one edit at it:

        - `reply="..."`: the text the model is taken to have written (checked, repaired and
          re-asked as usual; a re-ask goes to the runtime);
        - `pick="name"` or `pick="runner_up"` (needs confidence recorded): the decision made
          again held to that option; an option with nothing to fill resolves without a model
          call;
        - `options=`: another option set at `at` (or a function of the recorded menu);
        - `runtime=`: another model from `at` on;
        - none: the runtime asked again from `at`.

        `at` is an index into `run.decisions`, one of them, or a node id ("n7"). After the
        fork point calls go to the runtime, or with `after="recorded"` to the recording
        wherever it holds the same request. Function options and tools are the user's code:
        they run again. Returns the fork, a new Run (this one is never changed); raises
        `RunDiverged` when the program asks something before `at` that the recording does not
        hold."""
        self._forkable()
        plan = plan_fork(self, at, reply=reply, pick=pick, options=options, runtime=runtime,
                         after=after)
        f = self._forked(plan)
        f._execute(plan)
        plan.finish(f)
        return f

    async def afork(self, at: Any, *, reply: Any = _UNSET, pick: str | None = None,
                    options: Any = None, runtime: Any = None, after: str = "runtime") -> Run:
        """`fork`, awaitable: the program's coroutine is awaited on the caller's loop."""
        self._forkable()
        plan = plan_fork(self, at, reply=reply, pick=pick, options=options, runtime=runtime,
                         after=after)
        f = self._forked(plan)
        await f._aexecute(plan)
        plan.finish(f)
        return f

    def diff(self, other: Run) -> RunDiff:
        """Where this run and `other` part: the first decision (aligned by call site and
        order) that differs, which part of it differs first, and what follows on each side."""
        return RunDiff(self, other)

    def save(self, path: Any) -> Any:
        """Write the run — every model and tool call, the tree, the traces, the program's
        import path and arguments — to `path`, a cassette (keys masked). Returns the path."""
        if self.status == "running":
            raise UsageError(f"run {self.name!r} is still running; save it once it has ended")
        return save_run(self, path)

    @classmethod
    def load(cls, path: Any, program: Callable[..., Any] | None = None) -> Run:
        """A run saved with `run.save(path)`. It forks again when its program has an import
        path and its arguments were JSON, or when `program=` gives the callable (a notebook's
        function after a restart; with arguments that were not JSON, a callable that takes
        none)."""
        where = str(path)
        data = read_run(path)
        rec = data["run"]
        run = cls(str(rec.get("name") or "run"), block=bool(rec.get("block")))
        fn, why = program_of(rec, program, where)
        run.program_path = rec.get("program") if isinstance(rec.get("program"), str) else None
        json_args = bool(rec.get("arguments_json"))
        if json_args:
            run.args, run.kwargs = tuple(rec.get("args") or ()), dict(rec.get("kwargs") or {})
        elif fn is not None and program is None:
            fn, why = None, (f"its arguments were not JSON, so they were not saved: load it "
                             f"with Run.load({where!r}, program=fn), fn a callable that takes "
                             f"no arguments (the arguments bound in it)")
        run.program, run._why_not, run.path = fn, why, where
        run.status, run.result = str(rec.get("status") or "ok"), rec.get("result")
        err = rec.get("error")
        if isinstance(err, dict):
            run.error = RecordedError(None, str(err.get("type") or "Exception"),
                                      str(err.get("message") or ""))
        _rebuild(run, rec, data, where)
        try:
            run.menu_edits = [(int(i), str(kind), edit_value(kind, value))
                              for i, kind, value in rec.get("menu_edits") or []]
        except (TypeError, ValueError, KeyError):
            raise RunFileError(f"{where!r} has a run record whose menu_edits are not what "
                               f"run.save writes: it was edited; save the run again") from None
        head = data["head"]
        run.runtime = LoadedRuntime(where, head.get("runtime"), head.get("model"),
                                    confidence_of(data["calls"]))
        return run

    def view(self) -> Any:
        """The live run view (the notebook layer registers it: `%load_ext openprogram`)."""
        return shown(self)

    def _repr_html_(self) -> str:
        """The run as static HTML (`runs.html.run_html`: header, tree, decisions), what
        `display(run)` shows without the notebook layer."""
        from .html import run_html
        return run_html(self)

    # -- shown ------------------------------------------------------------------------------
    def format_text(self) -> str:
        t = self.totals
        fork = "" if self.forked_from is None else \
            f", a fork of {self.forked_from.name!r} at decision {self.fork_point} " \
            f"({(self.edit or {}).get('kind') or 'no edit'})"
        outcome = (f"result={repr_head(self.result, 120)}" if self.status == "ok" else
                   f"error={repr_head(self.error, 160)}" if self.status == "error" else
                   "running")
        lines = [f"<Run {self.name!r} {self.status}{fork}: {t['decisions']} decision(s), "
                 f"{t['model_calls']} model call(s) ({t['recorded']} from the recording), "
                 f"{t['tool_calls']} tool call(s), {outcome}>"]
        for d in self.decisions:
            s = d.summary() or {}
            where = f" at {d.site}" if d.site is not None else ""
            lines.append(f"  decision {d.index} {d.name}{where}: {s.get('status')} "
                         f"{s.get('chosen')!r}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return scrub(self.format_text().splitlines()[0])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(scrub(self.format_text()))


def _rebuild(run: Run, rec: dict, data: dict, where: str) -> None:
    """A loaded run's tree, traces and recording from the file's data."""
    by_id: dict[str, RunNode] = {}
    nodes = []
    for i, d in enumerate(rec["nodes"]):
        if not isinstance(d, dict) or d.get("seq") != i:
            raise RunFileError(f"node #{i} of the saved run {where!r} is out of order: the "
                               f"file was edited; save the run again")
        up = by_id.get(d.get("parent")) if d.get("parent") is not None else None
        if i and up is None:
            raise RunFileError(f"node {d.get('id')!r} of the saved run {where!r} names a parent "
                               f"that comes after it or does not exist: the file was edited; "
                               f"save the run again")
        node = rebuilt(run, d, up)
        by_id[node.id] = node
        nodes.append(node)
    nodes[0].dag_node.kind = "run"
    run.root, run.nodes = nodes[0], nodes
    run.decisions = sorted((n for n in nodes if n.index is not None), key=lambda n: n.index)
    for d, t in zip(run.decisions, rec["traces"]):
        d.trace = None if t is None else trace_from_dict(t)
    for e in data["calls"]:
        node = by_id.get((e.get("run") or {}).get("node"))
        if node is None or node.kind != "model_call":
            raise RunFileError(f"line {line_of(e)} of the saved run {where!r} names no model call "
                               f"of the run's tree: the file was edited; save the run again")
        RecordedCall.from_line(e, node)
    run.tool_calls = []
    for e in data["tools"]:
        node = by_id.get((e.get("run") or {}).get("node"))
        if node is None or node.kind != "mcp_call":
            raise RunFileError(f"line {line_of(e)} of the saved run {where!r} names no tool call "
                               f"of the run's tree: the file was edited; save the run again")
        run.tool_calls.append(RecordedTool.from_line(e, node))


def run(fn: Callable[..., Any], *args: Any, runtime: Any = None, **kwargs: Any) -> Run:
    """Run `fn(*args, **kwargs)` (any callable: an Agent method, a function making
    decisions, an async function) as one run: its whole tree of method calls, decisions, model
    calls and tool calls recorded under one root. `runtime=` is bound for the program as an
    Agent method binds its runtime. Returns the `Run` (`run.result`, or `run.error` when the
    program raised)."""
    if not callable(fn):
        raise UsageError(f"openprogram.run(fn, ...) takes the program to run (a callable), got "
                         f"{type(fn).__name__}")
    _check_runtime(runtime, "openprogram.run")
    return Run(_name_of(fn), fn, args, kwargs, runtime)._execute()


async def arun(fn: Callable[..., Any], *args: Any, runtime: Any = None, **kwargs: Any) -> Run:
    """`run`, awaitable: an async program is awaited on the caller's event loop."""
    if not callable(fn):
        raise UsageError(f"openprogram.arun(fn, ...) takes the program to run (a callable), "
                         f"got {type(fn).__name__}")
    _check_runtime(runtime, "openprogram.arun")
    return await Run(_name_of(fn), fn, args, kwargs, runtime)._aexecute()


class run_block:
    """`with openprogram.run_block("name") as run:` records a block of code as a run (its
    tree, decisions and calls), for code that is not a function: a notebook cell. A block is
    not re-executable, so it cannot be forked. An exception in the block is the run's error,
    and is raised on."""

    def __init__(self, name: str = "block", *, runtime: Any = None):
        if not isinstance(name, str) or not name:
            raise UsageError(f"run_block(name) takes a non-empty name, got {name!r}")
        _check_runtime(runtime, "run_block")
        self.run = Run(name, None, runtime=runtime, block=True)

    def __enter__(self) -> Run:
        self._rec = _Recording(self.run, None)
        self._rec.__enter__()
        return self.run

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._rec.__exit__(exc_type, exc, tb)
