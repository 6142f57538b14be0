"""The notebook layer of openprogram, installed as `openprogram.widgets`.

`%load_ext openprogram` registers the magics (`magics.py`); `DecisionPanel` (`panel.py`) is the
live view of a decision's trace; `Playground` (`playground.py`) lets a person play the model;
`StepThrough` (`steps.py`) shows a recorded decision stage by stage; `RunView` (`runview.py`) is
the live view of a whole run (`openprogram.run`), what `run.view()` and `%%run_program` show.
This package imports IPython and ipywidgets; the core (`openprogram`) never imports it.
"""
from openprogram import register_trace_view as _register_trace_view
from openprogram.runs import register_run_view as _register_run_view

from .magics import DecisionMagics, load_ipython_extension, unload_ipython_extension
from .panel import DecisionPanel, trace_html
from .playground import Playground
from .runview import RunDiffView, RunView, view_of
from .steps import StepThrough

# The core shows a finished trace through whatever view is registered (EvaluationResult.panel):
# loading the notebook layer makes that the panel.
_register_trace_view(DecisionPanel)
# and `run.view()` / `diff.view()` the run view
_register_run_view(view_of)

__all__ = ["DecisionPanel", "Playground", "StepThrough", "RunView", "RunDiffView",
           "DecisionMagics", "trace_html",
           "load_ipython_extension", "unload_ipython_extension"]
