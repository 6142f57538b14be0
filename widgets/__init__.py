"""The notebook layer of openprogram, installed as `openprogram.widgets`.

`%load_ext openprogram` registers the magics (`magics.py`); `DecisionPanel` (`panel.py`) is the
live view of a decision's trace; `Playground` (`playground.py`) lets a person play the model;
`StepThrough` (`steps.py`) shows a recorded decision stage by stage.
This package imports IPython and ipywidgets; the core (`openprogram`) never imports it.
"""
from openprogram import register_trace_view as _register_trace_view

from .magics import DecisionMagics, load_ipython_extension, unload_ipython_extension
from .panel import DecisionPanel, trace_html
from .playground import Playground
from .steps import StepThrough

# The core shows a finished trace through whatever view is registered (EvaluationResult.panel):
# loading the notebook layer makes that the panel.
_register_trace_view(DecisionPanel)

__all__ = ["DecisionPanel", "Playground", "StepThrough", "DecisionMagics", "trace_html",
           "load_ipython_extension", "unload_ipython_extension"]
