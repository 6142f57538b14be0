"""The recorder: what a run does at each hook while its program runs (`base.run_hooks`).

It grows the run's tree — a `RunNode` for every DAG node started under the run, in the order
they start, each under the node that was running when it started (a context variable of the
run's own, since a program's runtimes each number their DAG nodes from 1) — links each decision
node to its trace, and records every model call and live tool call. In a fork it hands each call
to the `ForkPlan` first, which answers it from the recording (before the fork point), from the
edit (at it), or leaves it to the runtime (after it). Everything here runs on every node and
every call of a recorded program, so it is written for the common path: no event is built when
the run has no watcher, and a call's request is copied, not encoded (see `calls`).
"""
from __future__ import annotations

import contextvars
import itertools
import time
from _thread import allocate_lock as Lock  # threading.Lock itself, without importing threading

from ..base.model_protocol import ModelResponse, run_sync
from ..base.run_hooks import RunHooks
from ..base.secrets import scrub
from ..runtime.calls import as_response
from ..runtime.dag import Node, current_node_var
from ..runtimes.cassette.recorder import on_own_loop
from ..runtimes.cassette.tool_results import tool_call, tool_error_record
from .calls import RecordedCall, RecordedTool, copied, failure_of
from .nodes import SITED, RunNode
from .sites import call_site

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["Recorder", "current_node"]

#: The run node running now (the parent of the next node started), in this context.
current_node: contextvars.ContextVar[RunNode | None] = contextvars.ContextVar(
    "openprogram_run_node", default=None)

_perf = time.perf_counter
_new = object.__new__


class Recorder(RunHooks):
    """The hooks of one run (`run`), and of its fork plan when it is a fork (`fork`)."""

    def __init__(self, run: Any, fork: Any = None):
        self.run, self.fork = run, fork
        self.edits_options = fork is not None and (fork.kind in ("pick", "options")
                                                   or bool(fork.inherited))
        self._lock = Lock()
        # node and call numbers: next() of a count is one step under the GIL, so a node or a
        # call takes no lock (a program's threads may add them at once)
        self._append = run.nodes.append
        self._decisions = itertools.count(len(run.decisions))

    # -- the tree ---------------------------------------------------------------------------
    # Written for the common path, as plainly as Python allows: these run on every node of a
    # recorded program (a node's fields set here rather than in RunNode.__init__, one call less)
    def node_started(self, dag_node: Node) -> Any:
        node = _new(RunNode)
        node.up = current_node.get()
        node.dag_node = dag_node
        run = self.run
        kind = dag_node.kind
        if kind == "model_call":
            # a leaf: nothing starts under it, so it is not made the current node; its token
            # is the node itself, which its model call records on
            self._append(node)
            if run.watchers:
                run.notify("node_started", node)
            return node
        if kind in SITED:
            # above this hook and the span: the frame that opened it
            node.site = call_site(3, dag_node.name)
            if kind == "decision":
                # the index and the place in run.decisions: each one step under the GIL; a
                # program's threads may start decisions at once, and then the list is put
                # back in order (see _reorder)
                node.index = i = next(self._decisions)
                node.trace = None
                decisions = run.decisions
                decisions.append(node)
                if decisions[i] is not node or self.fork is not None:
                    self._reorder(node)
        self._append(node)
        if run.watchers:
            run.notify("node_started", node)
        return current_node.set(node)

    def _reorder(self, node: RunNode) -> None:
        decisions = self.run.decisions
        if decisions[node.index] is not node:
            with self._lock:
                decisions.sort(key=lambda d: d.index)
        if self.fork is not None:
            self.fork.decision_started(self, node)

    def node_finished(self, dag_node: Node, token: Any) -> None:
        if self.run.watchers:
            # a model call's token is its node (see node_started); any other node is current
            self.run.notify("node_finished", token if type(token) is RunNode
                            else current_node.get())
        if type(token) is not RunNode:
            try:
                current_node.reset(token)
            except ValueError:  # ended in another context than it started in: nothing to do
                pass

    def decision_started(self, trace: Any) -> None:
        node = current_node.get()
        if node.index is not None and node.trace is None:
            node.trace = trace

    def options(self, options: Any) -> Any:
        return options if self.fork is None else self.fork.options(self, options)

    # -- model calls ------------------------------------------------------------------------
    @staticmethod
    def _call(node: RunNode, runtime: Any, messages: list, tools: list | None,
              mode_args: dict) -> RunNode:
        """The node of the model call starting now, with what it asks (see `nodes.LAZY`)."""
        # a turn appends to its message list (and changes nothing in it): its first n are
        # what was asked now
        node.req = (messages, len(messages), tools, mode_args)
        node.rt = runtime
        trace = node.up.trace
        if trace is not None:  # a decision's call: the attempt it serves
            node.attempt = len(trace.attempts)
        return node

    def model_call(self, runtime: Any, node: RunNode, messages: list, tools: list | None,
                   on_text: Callable[[str], None] | None, timeout: float | None,
                   mode_args: dict) -> Any:
        if self.fork is not None:
            return run_sync(self._forked(runtime, node, messages, tools, on_text, timeout,
                                         mode_args, True))
        # what _call does, written out: this runs on every model call of a program
        node.req = (messages, len(messages), tools, mode_args)  # (see _call)
        node.rt = runtime
        trace = node.up.trace
        if trace is not None:  # a decision's call: the attempt it serves
            node.attempt = len(trace.attempts)
        try:
            resp = runtime.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                    **mode_args)
        except Exception as exc:
            node.err = failure_of(exc)
            raise
        if type(resp) is not ModelResponse:
            resp = as_response(resp)
        # nothing changes a response after its call but the ids the tool loop gives its tool
        # calls: one without any is kept as it is
        node.resp = copied(resp) if resp.tool_calls else resp
        return resp

    async def amodel_call(self, runtime: Any, node: RunNode, messages: list,
                          tools: list | None, on_text: Callable[[str], None] | None,
                          timeout: float | None, mode_args: dict) -> Any:
        if self.fork is not None:
            return await self._forked(runtime, node, messages, tools, on_text, timeout,
                                      mode_args, False)
        self._call(node, runtime, messages, tools, mode_args)
        try:
            resp = await runtime.acomplete(messages, tools=tools, on_text=on_text,
                                           timeout=timeout, **mode_args)
        except Exception as exc:
            node.err = failure_of(exc)
            raise
        resp = as_response(resp)
        node.resp = copied(resp) if resp.tool_calls else resp
        return resp

    async def _forked(self, runtime: Any, node: RunNode, messages: list,
                      tools: list | None, on_text: Callable[[str], None] | None,
                      timeout: float | None, mode_args: dict, sync: bool) -> Any:
        """A fork's model call: answered from the recording or the edit when the plan says
        so, else asked of the runtime (or of the fork's `runtime=`)."""
        fork = self.fork
        if fork.diverged is not None:
            raise fork.diverged
        self._call(node, runtime, messages, tools, mode_args)
        node.before = len(self.run.decisions)  # (what RecordedCall.before works out, at once)
        call = RecordedCall(node)
        try:
            reply = fork.answer(self, call)
            if reply is not None:
                resp = as_response(reply())
                if on_text is not None and isinstance(resp.text, str) and resp.text:
                    on_text(resp.text)  # answered here: it streams once, as a panel expects
            else:
                target = fork.runtime_for(call) or runtime
                node.rt = target
                if sync:
                    resp = target.complete(messages, tools=tools, on_text=on_text,
                                           timeout=timeout, **mode_args)
                else:
                    resp = await target.acomplete(messages, tools=tools, on_text=on_text,
                                                  timeout=timeout, **mode_args)
                resp = as_response(resp)
        except Exception as exc:
            node.err = failure_of(exc)
            raise
        node.resp = copied(resp) if resp.tool_calls else resp
        return resp

    # -- live tools (MCP) -------------------------------------------------------------------
    def tool_keeper(self, keeper: Callable[..., Any] | None) -> Callable[..., Any]:
        def keep(call: dict, run: Callable[[], Any]) -> Any:
            return self._tool(call, run, keeper)
        return keep

    def _tool(self, call: dict, live_call: Callable[[], Any],
              keeper: Callable[..., Any] | None) -> Any:
        call = scrub(tool_call(call["server"], call["name"], call["arguments"]))
        fork = self.fork
        if fork is not None and fork.diverged is not None:
            raise fork.diverged
        run = self.run
        up = current_node.get() or run.root
        dag_node = Node(0, current_node_var.get(), "mcp_call", f"{call['server']}.{call['name']}")
        with self._lock:
            node = RunNode(run, None, up, dag_node)
            entry = RecordedTool(node, len(run.decisions), call)
            run.nodes.append(node)
            run.tool_calls.append(entry)
        if run.watchers:
            run.notify("node_started", node)
        t0 = _perf()
        recorded = None if fork is None else fork.tool_answer(self, entry)
        node.source = entry.source
        if recorded is not None:
            return self._replayed(entry, recorded, t0)
        live = keeper(call, live_call) if keeper is not None else live_call()
        return on_own_loop(self._kept(entry, live, t0), live)

    def _tool_done(self, entry: RecordedTool, t0: float, error: BaseException | None) -> None:
        node = entry.node
        entry.done, entry.duration_s = True, _perf() - t0
        if node is not None:
            d = node.dag_node
            d.duration_s = entry.duration_s
            d.status = "ok" if error is None else "error"
            if error is not None:
                d.error = f"{type(error).__name__}: {error}"
            if self.run.watchers:
                self.run.notify("node_finished", node)

    async def _kept(self, entry: RecordedTool, live: Any, t0: float) -> Any:
        try:
            result = await live
        except Exception as exc:
            entry.error = tool_error_record(exc)
            self._tool_done(entry, t0, exc)
            raise
        entry.result = scrub(result)
        self._tool_done(entry, t0, None)
        return result

    async def _replayed(self, entry: RecordedTool, recorded: RecordedTool, t0: float) -> Any:
        entry.result, entry.error = recorded.result, recorded.error
        try:
            result = recorded.answer()
        except Exception as exc:
            self._tool_done(entry, t0, exc)
            raise
        self._tool_done(entry, t0, None)
        return result
