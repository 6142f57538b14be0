"""openprogram: next-step decisions.

An LLM is handed a menu of options (functions, values, schemas to fill), picks one with a small
JSON object, and the pick resolves straight into the next step's result. Only the standard
library is imported here; the notebook layer (`openprogram.widgets`) loads when IPython asks.
"""
from __future__ import annotations

from . import (
    decision,
    runtimes,  # noqa: F401  (registers the cassette reader of decision.revalidate)
)
from .base.errors import (
    ERROR_KINDS,
    ArgumentError,
    DecisionError,
    JournalFileError,
    JournalMismatch,
    JournalWriteError,
    MissingExtraError,
    ModelCallError,
    NoRuntimeError,
    OpenProgramError,
    OptionError,
    OptionWarning,
    RecordedError,
    Retry,
    RunDiverged,
    RunFileError,
    SchemaError,
    ServerError,
    ToolError,
    UsageError,
    WaitTimeout,
)
from .base.lazy import lazy_names
from .decision.entry import amake, make
from .decision.options import Option, register_option_kind
from .decision.options.examples import with_examples
from .decision.options.shortlist import Shortlist
from .decision.options.tool_definitions import JsonSchema, tool
from .runtime.agent import Agent, aagent, agent, bind_context, current_agent
from .runtime.function import agentic_function
from .runtime.runtime import DAG, ModelResponse, Runtime, ToolCall, current_runtime, using_runtime
from .trace.decision_trace import (
    Attempt,
    DecisionTrace,
    TraceEvent,
    add_observer,
    last_trace,
    observe,
    register_trace_view,
    remove_observer,
)
from .trace.records import Pick, Reask, Repair

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__version__ = "0.1.0"

__all__ = ["Agent", "agent", "aagent", "Retry", "ToolError", "WaitTimeout", "Pick", "Reask",
           "Repair", "decision", "DecisionError",
           "OptionError", "OptionWarning", "OpenProgramError", "MissingExtraError",
           "ArgumentError", "UsageError", "SchemaError", "NoRuntimeError",
           "JsonSchema", "tool", "Shortlist", "with_examples", "improve", "aimprove", "Improvement",
           "Option", "register_option_kind", "register_trace_view", "Runtime", "ToolCall",
           "ModelResponse", "ModelCallError", "DAG", "DecisionTrace", "Attempt", "TraceEvent",
           "ERROR_KINDS", "observe", "add_observer", "remove_observer", "last_trace",
           "current_runtime", "using_runtime", "current_agent", "bind_context",
           "register_toolset", "make", "amake", "evaluate", "aevaluate", "compare", "acompare",
           "Variant",
           "revalidate", "EvaluationResult", "ComparisonResult", "Revalidation",
           "agentic_function", "Options", "ModeName", "RateLimit", "JournalMismatch",
           "JournalFileError", "JournalWriteError", "RecordedError", "ServerError",
           "run", "arun", "run_block", "Run", "RunDiff", "RunDiverged", "RunFileError",
           "load_ipython_extension",
           "unload_ipython_extension"]

# Evaluation and toolsets load on first use (`openprogram.compare`, `openprogram.Variant`,
# `openprogram.register_toolset`).
__getattr__, __dir__ = lazy_names(__name__, {
    "compare": ".evaluation.variants",
    "acompare": ".evaluation.variants", "Variant": ".evaluation.variants",
    "evaluate": ".evaluation.evaluate", "aevaluate": ".evaluation.evaluate",
    "EvaluationResult": ".evaluation.results",
    "ComparisonResult": ".evaluation.comparison",
    "revalidate": ".decision.recheck",
    "Revalidation": ".decision.recheck",
    "register_toolset": ".runtime.tools",
    "Options": ".base.type_names", "ModeName": ".base.type_names",
    "RateLimit": ".evaluation.ratelimit",
    "improve": ".evaluation.improve", "aimprove": ".evaluation.improve",
    "Improvement": ".evaluation.improve",
    "run": ".runs", "arun": ".runs", "run_block": ".runs", "Run": ".runs", "RunDiff": ".runs"})


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext openprogram`: registers the magics (imports the notebook layer only now)."""
    from .widgets.magics import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .widgets.magics import unload_ipython_extension as unload
    unload(ipython)
