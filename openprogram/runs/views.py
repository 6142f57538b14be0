"""The view a run or a run diff shows as: the notebook layer registers one when it loads
(`register_run_view`), so the core never imports it (as `trace.register_trace_view` does for a
decision's panel)."""
from __future__ import annotations

from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["register_run_view", "shown"]

_factory: Callable[[Any], Any] | None = None


def register_run_view(factory: Callable[[Any], Any] | None) -> None:
    """Plug in what `Run.view()` and `RunDiff.view()` return: `factory(run_or_diff)`. The
    notebook layer registers its live run view when it loads; None unregisters."""
    global _factory
    _factory = factory


def shown(thing: Any) -> Any:
    if _factory is None:
        raise UsageError(f"{type(thing).__name__}.view() needs the notebook layer: run "
                         f"%load_ext openprogram (or import openprogram.widgets) in the "
                         f"notebook first")
    return _factory(thing)
