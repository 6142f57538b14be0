"""`decide`: an option set over a Ray Dataset, a runtime built once per worker from a
factory, each batch's rows through `evaluate`.
"""
from __future__ import annotations

from ..base.errors import ArgumentError, UsageError, require
from ..base.model_protocol import ModelCaller
from ..decision.rows import RowPlan
from ..evaluation.evaluate import evaluate
from .checks import _check_carried, _check_columns, _factory, _positive, _split
from .columns import _table, output_schema, row_columns
from .limits import _SharedLimit, shared_limit

ray = require("ray", "ray", "openprogram.ray")

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

    from ..base.type_names import Options

# ---------------------------------------------------------------------------------------------
# decide: a runtime per worker, rows through evaluate
# ---------------------------------------------------------------------------------------------


class _Decide:
    """The callable class Ray Data makes one instance of per worker: the runtime built once
    from the factory, then each batch's rows through `evaluate` (`concurrency` at a time)."""

    def __init__(self, factory: Callable[[], Any], template: str, options: Options,
                 settings: dict[str, Any], concurrency: int, limit: Any, confidence: bool):
        rt = factory()
        if not isinstance(rt, ModelCaller):
            raise UsageError(f"the runtime factory returned {type(rt).__name__}, not a runtime; "
                             f"it must return one (ScriptedRuntime, OpenAIRuntime, "
                             f"LlamaCppRuntime, ...)")
        self.rt, self.template, self.options = rt, template, options
        self.settings, self.concurrency = settings, concurrency
        self.limit = _SharedLimit(*limit) if limit is not None else None
        self.schema = output_schema(confidence)
        self.confidence = confidence

    def __call__(self, batch: Any) -> Any:
        records = batch.to_pylist()
        if not records:
            return _table(batch, [], self.schema)
        res = evaluate(self.template, self.options, records, runtime=self.rt,
                       concurrency=max(1, min(self.concurrency, len(records))),
                       progress=False, rate_limit=self.limit, **self.settings)
        statuses, traces, results, errors = res.statuses, res.traces, res.results, res.errors
        rows = [row_columns(statuses[i], traces[i], results[i], errors[i],
                            confidence=self.confidence) for i in range(len(records))]
        return _table(batch, rows, self.schema)


def decide(ds: Any, template: str, options: Options, *, runtime: Callable[[], Any],
           workers: int = 1, concurrency: int = 8, batch_size: int = 64,
           rate_limit: Any = None, num_cpus: float = 0.5, **settings: Any) -> Any:
    """`template.format_map(row)` decided over `options` for every row of the Ray Dataset `ds`:
    a dataset of the same rows with the output columns added (`OUTPUT_COLUMNS`; lazy, as every
    Ray Data transform).

    `runtime=` is a factory (a function of no arguments) that builds the runtime in each of
    `workers` Ray actors, once; each actor runs `concurrency` rows of its batch at a time
    (`batch_size` rows a batch) and reserves `num_cpus` CPUs (keep it below 1 on a small
    machine: the actors would otherwise leave no CPU for reading the dataset). `settings` are
    `decision.make`'s (mode=, max_retries=, validate=, reask=, repair=, context=, timeout_s=,
    confidence=, ...), checked here before the job starts, as are the template's columns and
    that every setting pickles. `rate_limit=` (a RateLimit, a number of requests per minute, or
    a dict of RateLimit's arguments) holds for the whole cluster: one actor paces every
    worker's requests and pauses them all on a 429. A row whose decision fails is a row with
    status "failed" and its error columns set; the job goes on."""
    factory = _factory(runtime)
    _split(settings, "decide()")
    for k in ("runtime_name", "model", "takes_menu"):
        if k in settings:
            raise UsageError(f"decide() takes no {k}=: the runtime the factory builds names "
                             f"its model (the traces record its name)")
    check = RowPlan(template, options, **{k: v for k, v in settings.items() if k != "timeout_s"})
    _check_columns(ds, check, "decide()")
    _positive(workers, "workers")
    _positive(concurrency, "concurrency")
    _positive(batch_size, "batch_size")
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus < 0:
        raise ArgumentError(f"num_cpus must be a number >= 0 (the CPUs each worker reserves), "
                            f"got {num_cpus!r}")
    _check_carried(runtime=factory, options=options, **settings)
    limit = shared_limit(rate_limit)
    confidence = bool(settings.get("confidence"))
    return ds.map_batches(
        _Decide, fn_constructor_args=(factory, template, options, settings, concurrency, limit,
                                      confidence),
        batch_format="pyarrow", batch_size=batch_size,
        # two batches at once per worker: one's last rows overlap the next one's first
        compute=ray.data.ActorPoolStrategy(size=workers, max_concurrent_calls_per_actor=2,
                                           enable_true_multi_threading=True),
        num_cpus=num_cpus)
