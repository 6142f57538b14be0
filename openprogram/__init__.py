"""openprogram: next-step decisions.

An LLM is handed a menu of options (functions, values, schemas to fill), picks one with a small
JSON object, and the pick resolves straight into the next step's result. Only the standard
library is imported here; the notebook layer (`openprogram.widgets`) loads when IPython asks.
"""
from __future__ import annotations

import sys as _sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

from .agentic_programming import decision

# `import openprogram.decision` (and `from openprogram.decision import make`) gives the same
# module as `from openprogram import decision`: the facade registered under its public name.
_sys.modules.setdefault(__name__ + ".decision", decision)
from .agentic_programming.agent import Agent, aagent, agent, bind_context, current_agent
from .agentic_programming.errors import (ERROR_KINDS, ArgumentError, DecisionError,
                                         MissingExtraError, ModelCallError, NoRuntimeError,
                                         OpenProgramError, OptionError, OptionWarning, Retry,
                                         SchemaError, UsageError)
from .agentic_programming.records import Pick, Reask
from .agentic_programming.function import agentic_function
from .agentic_programming.loop import amake, make
from .agentic_programming.lazy import lazy_names
from .agentic_programming.options import Option, register_option_kind
from .agentic_programming.tooldefs import JsonSchema, tool
from .agentic_programming.runtime import (DAG, ModelResponse, Runtime, ToolCall, current_runtime,
                                          using_runtime)
from . import runtimes  # noqa: F401  (registers the cassette reader of decision.revalidate)
from .agentic_programming.trace import (Attempt, DecisionTrace, TraceEvent, add_observer,
                                        last_trace, observe, register_trace_view,
                                        remove_observer)

__version__ = "0.1.0"

__all__ = ["Agent", "agent", "aagent", "Retry", "Pick", "Reask", "decision", "DecisionError",
           "OptionError", "OptionWarning", "OpenProgramError", "MissingExtraError",
           "ArgumentError", "UsageError", "SchemaError", "NoRuntimeError",
           "JsonSchema", "tool",
           "Option", "register_option_kind", "register_trace_view", "Runtime", "ToolCall",
           "ModelResponse", "ModelCallError", "DAG", "DecisionTrace", "Attempt", "TraceEvent",
           "ERROR_KINDS", "observe", "add_observer", "remove_observer", "last_trace",
           "current_runtime", "using_runtime", "current_agent", "bind_context",
           "register_toolset", "make", "amake", "evaluate", "aevaluate", "compare", "acompare", "Variant",
           "revalidate", "EvaluationResult", "ComparisonResult", "Revalidation",
           "agentic_function", "Options", "ModeName", "RateLimit", "JournalMismatch", "load_ipython_extension",
           "unload_ipython_extension"]

# Evaluation and toolsets load on first use (`openprogram.compare`, `openprogram.Variant`,
# `openprogram.register_toolset`).
__getattr__, __dir__ = lazy_names(__name__, {
    "compare": ".agentic_programming.evaluate",
    "acompare": ".agentic_programming.evaluate", "Variant": ".agentic_programming.evaluate",
    "evaluate": ".agentic_programming.evaluate", "aevaluate": ".agentic_programming.evaluate",
    "EvaluationResult": ".agentic_programming.evaluate_results",
    "ComparisonResult": ".agentic_programming.evaluate_results",
    "revalidate": ".agentic_programming.revalidate",
    "Revalidation": ".agentic_programming.revalidate",
    "register_toolset": ".agentic_programming.tools",
    "Options": ".agentic_programming.aliases", "ModeName": ".agentic_programming.aliases",
    "RateLimit": ".agentic_programming.ratelimit", "JournalMismatch": ".agentic_programming.journal"})


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext openprogram`: registers the magics (imports the notebook layer only now)."""
    from .widgets.magics import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .widgets.magics import unload_ipython_extension as unload
    unload(ipython)
