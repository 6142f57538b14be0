"""`openprogram.decision`: the public face of the next-step decision (rule E4).

Rule ids in the docstrings (E1, P7, ...) are those of docs/rules.md; docs/api.md lists the
public names.

`from openprogram import decision` gives this module: `decision.make` (and `amake`),
`render_options`, `extract_action`, `parse_args`, `resolve_decision`, `DecisionError`,
`DECISION_FINISH_INSTRUCTION`, `last_trace`, the prototyping tools `evaluate` / `compare` (and
their awaitable twins `aevaluate` / `acompare`), `Samples` and `Confidence` (how sure the model
was: `confidence=`), `Repair` (one repair a `repair=` level made to a reply),
`clear_option_cache` (forget the function options kept between calls), and `plan` (the
decision split in two for a batch engine: a row's request as data, a reply read back into its
`Outcome`; rows.py). The prototyping tools, `revalidate` and `steps` (the step-through of
a recorded decision) are imported the first time they are used.
It only re-exports: the loop lives in loop.py, evaluation in evaluate.py. Being a facade at the
top of the layers is what lets `decision.evaluate` exist without evaluate.py and the loop
importing each other.
"""
from __future__ import annotations

from ..base.errors import DecisionError, OptionError, Retry
from ..base.lazy import lazy_names
from ..trace.confidence import Confidence, Samples
from ..trace.decision_trace import last_trace
from ..trace.records import Repair
from .entry import amake, make, parse_args, resolve_decision
from .extract import extract_action
from .options import clear_option_cache
from .options.lint import lint
from .reask import DECISION_FINISH_INSTRUCTION, reask_prompt, render_options
from .rows import Outcome, RowPlan, plan

__all__ = ["make", "amake", "render_options", "extract_action", "parse_args", "resolve_decision",
           "DecisionError", "DECISION_FINISH_INSTRUCTION", "last_trace", "OptionError",
           "evaluate", "aevaluate", "compare", "acompare", "reask_prompt", "revalidate",
           "clear_option_cache", "steps", "Retry", "Variant", "Confidence", "Samples", "Repair",
           "improve", "aimprove", "Improvement", "plan", "RowPlan", "Outcome", "lint"]

# Evaluation and re-checking load on first use: a decision needs neither.
__getattr__, __dir__ = lazy_names(__name__, {
    "evaluate": "openprogram.evaluation.evaluate", "aevaluate": "openprogram.evaluation.evaluate",
    "compare": "openprogram.evaluation.variants", "acompare": "openprogram.evaluation.variants",
    "Variant": "openprogram.evaluation.variants",
    "improve": "openprogram.evaluation.improve", "aimprove": "openprogram.evaluation.improve",
    "Improvement": "openprogram.evaluation.improve",
    "revalidate": ".recheck", "steps": ".stepthrough"})
