"""What is checked before a Ray job starts, so a mistake is named in the driver, not
inside a worker: the runtime factory, the template's columns, that every setting pickles, the
settings a dataset job does not take (`_NOT_HERE`, each with what to do instead).
"""
from __future__ import annotations

from ..base.errors import ArgumentError, UsageError
from ..base.model_protocol import ModelCaller
from ..decision.rows import RowPlan

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any


#: What `evaluate` takes that a job over a dataset does not: each with what to do instead.
_NOT_HERE = {
    "journal": "a Ray job keeps its finished rows in its output (ds.write_parquet); to pay only "
               "for new rows, have the factory return a CachedRuntime, whose keys are "
               "evaluate's",
    "batch": "use processor() with Ray Data's own LLM batch path",
    "expected": "pass expected= to openprogram.ray.result() when reading the output back",
    "total": "Ray counts a dataset's rows itself",
    "progress": "Ray Data shows its own progress (DataContext.enable_progress_bars)",
    "on_interrupt": "stopping a Ray job is Ray's (ray.cancel, Ctrl-C in the driver)",
}


# ---------------------------------------------------------------------------------------------
# Checks made before a job starts
# ---------------------------------------------------------------------------------------------


def _factory(runtime: Any) -> Callable[[], Any]:
    if runtime is None:
        raise UsageError("decide() needs runtime=factory: a function of no arguments that "
                         "builds the runtime in each worker, e.g. runtime=lambda: "
                         "OpenAIRuntime(model='gpt-4o-mini')")
    if isinstance(runtime, ModelCaller):
        raise UsageError(f"runtime= takes a factory, not a runtime: {type(runtime).__name__} "
                         f"holds clients or a model that cannot be pickled to Ray's workers. "
                         f"Pass a function that builds it in each worker: "
                         f"runtime=lambda: {type(runtime).__name__}(...)")
    if not callable(runtime):
        raise UsageError(f"runtime= takes a factory (a function of no arguments that returns a "
                         f"runtime), got {type(runtime).__name__}")
    return runtime


def _columns(ds: Any) -> list[str] | None:
    try:
        names = ds.columns()
    except Exception:  # a dataset whose schema Ray cannot know without running it
        return None
    return list(names) if names is not None else None


def _check_columns(ds: Any, plan: RowPlan, what: str) -> list[str] | None:
    if not hasattr(ds, "map_batches"):
        raise UsageError(f"{what} takes a ray.data.Dataset (ray.data.from_pandas(df), "
                         f"ray.data.read_parquet(...)), got {type(ds).__name__}")
    have = _columns(ds)
    if have is not None:
        missing = [f for f in plan.fields if f not in have]
        if missing:
            fields = ", ".join("{" + m + "}" for m in missing)
            raise ArgumentError(f"the prompt template uses {fields} but the dataset has no column "
                                f"{', '.join(map(repr, missing))} "
                                f"(its columns are {', '.join(map(repr, have)) or 'none'}); "
                                f"add the column (ds.add_column / ds.rename_columns) or fix the "
                                f"template")
    return have


def _check_carried(**things: Any) -> None:
    """Everything a worker gets is pickled (cloudpickle): what cannot be is named now, before
    the job starts, instead of failing inside Ray."""
    from ray import cloudpickle
    for name, value in things.items():
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            raise UsageError(f"{name}= cannot be carried to Ray's workers: it does not pickle "
                             f"({type(exc).__name__}: {str(exc)[:200]}). Build what it holds "
                             f"inside the worker instead (in the runtime factory, or a "
                             f"function that opens its own client)") from None


def _split(settings: dict[str, Any], what: str) -> dict[str, Any]:
    for k in settings:
        if k in _NOT_HERE:
            raise UsageError(f"{what} takes no {k}=: {_NOT_HERE[k]}")
    return settings


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{what} must be a whole number >= 1, got {value!r}")
    return value
