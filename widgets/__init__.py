"""The notebook layer of openprogram, installed as `openprogram.widgets`.

`%load_ext openprogram` registers the magics (`magics.py`); `DecisionPanel` (`panel.py`) is the
live view of a decision's trace; `Playground` (`playground.py`) lets a person play the model.
This package imports IPython and ipywidgets; the core (`openprogram`) never imports it.
"""
from .magics import DecisionMagics, load_ipython_extension, unload_ipython_extension
from .panel import DecisionPanel, trace_html
from .playground import Playground

__all__ = ["DecisionPanel", "Playground", "DecisionMagics", "trace_html",
           "load_ipython_extension", "unload_ipython_extension"]
