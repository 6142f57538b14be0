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

from ..base.filesecrets import scrub
from ..base.model_protocol import ModelResponse, run_sync
from ..base.run_hooks import RunHooks
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


class Recorder(RunHooks):
    """The hooks of one run (`run`), and of its fork plan when it is a fork (`fork`)."""

    def __init__(self, run: Any, fork: Any = None):
        self.run, self.fork = run, fork
        self._lock = Lock()        # a decision's index and place in run.decisions go together
        # node and call numbers: next() of a count is one step under the GIL, so a node or a
        # call takes no lock (a program's threads may add them at once)
        self._seqs = itertools.count(len(run.nodes))   # the root is n0
        self._calls = itertools.count(1)               # model and tool calls, together

    # -- the tree ---------------------------------------------------------------------------
    def node_started(self, dag_node: Node) -> Any:
        run = self.run
        up = current_node.get()
        node = RunNode(run, next(self._seqs), up, dag_node)
        kind = dag_node.kind
        if kind in SITED:
            node.site = call_site(3)  # above this hook and the span: the frame that opened it
            if kind == "decision":
                lock = self._lock
                lock.acquire()
                node.index = node.in_decision = len(run.decisions)
                run.decisions.append(node)
                lock.release()
                if self.fork is not None:
                    self.fork.decision_started(self, node)
        kids = up._children
        if kids is None:
            up._children = [node]
        else:
            kids.append(node)
        run.nodes.append(node)
        if run.watchers:
            run.notify("node_started", node)
        return node, current_node.set(node)

    def node_finished(self, dag_node: Node, token: Any) -> None:
        node, tok = token
        try:
            current_node.reset(tok)
        except ValueError:  # ended in another context than it started in: nothing to undo
            pass
        if self.run.watchers:
            self.run.notify("node_finished", node)

    def decision_started(self, trace: Any) -> None:
        node = current_node.get()
        if node is not None and node.trace is None and node.index is not None:
            node.trace = trace

    def options(self, options: Any) -> Any:
        return options if self.fork is None else self.fork.options(self, options)

    # -- model calls ------------------------------------------------------------------------
    def _call(self, runtime: Any, messages: list, tools: list | None,
              mode_args: dict) -> RecordedCall:
        """The record of a model call starting now, inside its node."""
        node = current_node.get()
        run = self.run
        call = RecordedCall(next(self._calls), node, len(run.decisions), runtime,
                            list(messages), tools, mode_args)  # (a turn appends to its list)
        run.calls.append(call)
        up = node.up
        if up.index is not None and up.trace is not None:  # a decision's call: its attempt
            call.attempt = node.attempt = len(up.trace.attempts) or None
        return call

    def model_call(self, runtime: Any, messages: list, tools: list | None,
                   on_text: Callable[[str], None] | None, timeout: float | None,
                   mode_args: dict) -> Any:
        if self.fork is not None:
            return run_sync(self._forked(runtime, messages, tools, on_text, timeout,
                                         mode_args, True))
        call = self._call(runtime, messages, tools, mode_args)
        try:
            resp = runtime.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                    **mode_args)
        except Exception as exc:
            call.error = failure_of(exc)
            raise
        if type(resp) is not ModelResponse:
            resp = as_response(resp)
        # nothing changes a response after the call but the ids the tool loop gives its tool
        # calls: one without tool calls is kept as it is
        call.response = resp if not resp.tool_calls else copied(resp)
        return resp

    async def amodel_call(self, runtime: Any, messages: list, tools: list | None,
                          on_text: Callable[[str], None] | None, timeout: float | None,
                          mode_args: dict) -> Any:
        if self.fork is not None:
            return await self._forked(runtime, messages, tools, on_text, timeout, mode_args,
                                      False)
        call = self._call(runtime, messages, tools, mode_args)
        try:
            resp = await runtime.acomplete(messages, tools=tools, on_text=on_text,
                                           timeout=timeout, **mode_args)
        except Exception as exc:
            call.error = failure_of(exc)
            raise
        resp = as_response(resp)
        call.response = resp if not resp.tool_calls else copied(resp)
        return resp

    async def _forked(self, runtime: Any, messages: list, tools: list | None,
                      on_text: Callable[[str], None] | None, timeout: float | None,
                      mode_args: dict, sync: bool) -> Any:
        """A fork's model call: answered from the recording or the edit when the plan says
        so, else asked of the runtime (or of the fork's `runtime=`)."""
        fork = self.fork
        if fork.diverged is not None:
            raise fork.diverged
        call = self._call(runtime, messages, tools, mode_args)
        node = call.node
        try:
            reply = fork.answer(self, call)
            node.source, node.runtime = call.source, call.runtime_name
            if reply is not None:
                resp = as_response(reply())
                if on_text is not None and isinstance(resp.text, str) and resp.text:
                    on_text(resp.text)  # answered here: it streams once, as a panel expects
            else:
                target = fork.runtime_for(call)
                if target is not None:
                    call.runtime = target
                    node.runtime = call.runtime_name
                else:
                    target = runtime
                if sync:
                    resp = target.complete(messages, tools=tools, on_text=on_text,
                                           timeout=timeout, **mode_args)
                else:
                    resp = await target.acomplete(messages, tools=tools, on_text=on_text,
                                                  timeout=timeout, **mode_args)
                resp = as_response(resp)
        except Exception as exc:
            call.error = failure_of(exc)
            raise
        call.response = copied(resp) if resp.tool_calls else resp
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
            seq = next(self._seqs)
            node = RunNode(run, seq, up, dag_node)
            dag_node.id = seq
            entry = RecordedTool(next(self._calls), node, len(run.decisions), call)
            up._add_child(node)
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
