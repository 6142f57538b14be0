"""Runs: a program's whole tree of decisions as one unit — recorded, forked, compared, saved.

`openprogram.run(fn, *args, runtime=rt)` executes a program (an Agent method, any function that
makes decisions) under one root and returns a `Run`: its result or error, its decisions in
order (each with its trace, its place in the tree and the user's call site), every node of the
tree (method calls, decisions, model calls, tool calls, with timings and tokens), and the
recording of every model and tool call by request. `run.fork(at=k, ...)` runs the program again,
every call before decision k answered from that recording, with one edit at k (a reply, a pick,
an option set, a runtime); `run_a.diff(run_b)` names the first decision where two runs part and
what differs first there; `run.save(path)` / `Run.load(path)` keep a run as a cassette. The
layers below reach a run through `base.run_hooks`. Modules: `sites` (call sites), `nodes` (the
tree), `calls` (the recording), `recorder` (the hooks), `fork`, `diff`, `saved`, `views`, `html`
(a run's static HTML, and the rows the notebook's live view draws) and `unit` (the `Run` and its
entry points).
"""
from __future__ import annotations

from ..base.errors import RunDiverged, RunFileError
from .diff import DecisionDiff, RunDiff
from .fork import with_descriptions
from .nodes import RunEvent, RunNode
from .sites import CallSite
from .unit import Run, arun, on_run, run, run_block
from .views import register_run_view

__all__ = ["run", "arun", "run_block", "Run", "RunNode", "RunEvent", "RunDiff", "DecisionDiff",
           "RunDiverged", "RunFileError", "CallSite", "on_run", "register_run_view",
           "with_descriptions"]
