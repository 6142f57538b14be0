"""Where a run (`openprogram.run`, the `openprogram.runs` package) plugs into the layers below it.

A run records a program's whole tree — every DAG node, model call, live tool call and decision
trace under one root — and a fork of it answers the calls before its fork point from that
recording. The layers that make those things sit below the run package, so they reach it through
one context variable, `current_run`, holding the run being recorded in this context (None
outside a run), and call it at five places: a DAG span starting and ending
(`runtime/dag.py`), a model call (`Runtime.call_model` / `acall_model`), a decision's trace
being made (`decision/loop.py`'s `Decider`), a decision's option set being read (`Plan` and
the agent turn, through `edited_options`), and a live MCP tool's call (`mcp/`). `RunHooks`
lists what the run implements; outside a run each place costs one `ContextVar.get`.
"""
from __future__ import annotations

import contextvars

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["current_run", "RunHooks", "edited_options"]


class RunHooks:
    """What the layers below tell the run being recorded (`openprogram.runs` implements it).
    Every method is called in the context of the code it reports on, so it may read (and set)
    context variables of its own."""

    def node_started(self, node: Any) -> Any:
        """A DAG node (`runtime.dag.Node`) started; what this returns (the node's token) is
        handed back to `node_finished` for the same node, and for a model call's node to
        `model_call` too (its span keeps it: `span.run`, `span.run_token`)."""

    def node_finished(self, node: Any, token: Any) -> None:
        """The node's span ended: its status, duration and tokens are final."""

    def model_call(self, runtime: Any, token: Any, messages: list, tools: list | None,
                   on_text: Callable[[str], None] | None, timeout: float | None,
                   mode_args: dict) -> Any:
        """Make (or answer) one model call of `runtime` inside its DAG node (`token`, what
        `node_started` returned for it): return the `ModelResponse` `runtime.complete(...)`
        would, recorded."""
        raise NotImplementedError

    async def amodel_call(self, runtime: Any, token: Any, messages: list,
                          tools: list | None, on_text: Callable[[str], None] | None,
                          timeout: float | None, mode_args: dict) -> Any:
        """`model_call` for the async path (`runtime.acomplete`)."""
        raise NotImplementedError

    def decision_started(self, trace: Any) -> None:
        """A decision's trace was made, inside its DAG node."""

    #: Whether `options()` may give a decision another option set (a fork that edits one):
    #: every other run is not asked.
    edits_options = False

    def options(self, options: Any) -> Any:
        """The option set of the decision about to start: `options`, or another one."""
        return options

    def tool_keeper(self, keeper: Callable[..., Any] | None) -> Callable[..., Any]:
        """The keeper of a live tool's call (`keeper(call, run)`, see
        `runtimes/cassette/tool_results.py`) to use instead of `keeper` (the decision's
        runtime's own, or None)."""
        raise NotImplementedError


current_run: contextvars.ContextVar[RunHooks | None] = contextvars.ContextVar(
    "openprogram_run", default=None)


def edited_options(options: Any) -> Any:
    """The option set of a decision about to start: `options` itself, or the one a fork swaps
    in at its fork point (`run.fork(at=k, options=...)` or `pick=`)."""
    run = current_run.get()
    return options if run is None or not run.edits_options else run.options(options)
