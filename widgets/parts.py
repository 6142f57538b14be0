"""What every view of the notebook layer shares: the saved-view stylesheet, the static copy a
widget's output carries, the red line for what could not be done, and holding a widget tree's sync
while it is redrawn. The panel, the step-through and the playground import these from here, so no
view imports another to reach them.
"""
from __future__ import annotations

import contextlib

import ipywidgets as W

from openprogram.trace import view
from openprogram.trace.safe_html import NO_MATH, esc

__all__ = ["SAVED_VIEW_NOTE", "SAVED_VIEW_STYLE", "StaticCopy", "error_html", "held"]

_BAD = view.COLOURS["failed"][0]
# ipywidgets marks every view whose model no kernel holds `jupyter-widgets-disconnected` and draws
# a red broken-chain icon before each: a saved notebook opened before its cells run shows dozens
# of them on every panel, and reads as broken. The views are right (they are the stored state),
# so the panel keeps drawing them and restyles the mark: no icon inside a panel (or a playground),
# and on the panel's own root one quiet line saying what the view is. The mark goes when the cell
# runs (ipywidgets removes the class from a live view), and so does the note. It travels as a
# <style> in a hidden HTML child, i.e. in the saved widget state itself, so it needs no front-end
# build and works wherever the stored panel is drawn. Chosen over drawing the static HTML copy
# until the widget is live: a front end picks the widget view whenever it can draw widgets, so
# swapping needs front-end code, and the stored views keep their tabs and sections openable.
SAVED_VIEW_NOTE = "Saved view: run the cell to make it live."
SAVED_VIEW_STYLE = (
    "<style>"
    ".op-panel .jupyter-widgets-disconnected::before,"
    ".op-playground .jupyter-widgets-disconnected::before,"
    ".op-run-view .jupyter-widgets-disconnected::before{content:none;display:none}"
    '.op-panel.jupyter-widgets-disconnected::before,'
    f'.op-run-view.jupyter-widgets-disconnected::before{{content:"{SAVED_VIEW_NOTE}";'
    "display:block;font:italic 11px/1.5 var(--jp-ui-font-family,sans-serif);"
    "color:var(--jp-ui-font-color2,#757575);padding:0 0 4px 2px;align-self:flex-start}"
    # a button that needs the kernel does nothing in a saved view: it should not invite a click
    ".op-panel.jupyter-widgets-disconnected .op-test-button,"
    ".op-panel.jupyter-widgets-disconnected .op-steps-button,"
    ".op-run-view.jupyter-widgets-disconnected button{opacity:.5;pointer-events:none}"
    "</style>")


def error_html(what: str, exc: BaseException | str) -> str:
    """A red line saying what could not be done and why (escaped)."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {view.safe_str(exc)}"
    return f'<span style="color:{_BAD}">{esc(what)}: {esc(view.clip(why, 2000))}</span>'


@contextlib.contextmanager
def held(root: W.Widget):
    """Hold the sync of `root` and of every widget below it (their layouts too) until the block
    ends: what a redraw changes then reaches the front end as one update per widget, all at the
    end, so a view is never seen half redrawn (one decision's header over another's attempts).
    ipywidgets' `hold_sync()` holds the one widget it is called on, and a panel is dozens."""
    with contextlib.ExitStack() as stack:
        todo = [root]
        while todo:
            w = todo.pop()
            stack.enter_context(w.hold_sync())
            todo.extend(c for c in (*getattr(w, "children", ()), getattr(w, "layout", None))
                        if isinstance(c, W.Widget))
        yield


class StaticCopy:
    """Mixed into a widget whose output should read well without it: beside the widget view,
    the output carries the whole `repr` as text (ipywidgets would cut it to 110 characters) and
    `static_html()`, for front ends that cannot draw widgets (nbconvert, GitHub). The root
    element opts out of math typesetting, as every view does."""

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            bundle["text/plain"] = repr(self)
            bundle["text/html"] = self.static_html()
        return bundle

    def _root_classes(self, cls: str) -> None:
        for name in (cls, *NO_MATH.split()):
            self.add_class(name)
