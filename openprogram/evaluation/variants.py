"""`compare` / `acompare`: one option set's variants (other descriptions, prompts, runtimes or
ways of asking, each a `Variant` or a name with its options) run over the same inputs, one
after another, each as `evaluate` runs its rows, and lined up in a `ComparisonResult`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..base.model_protocol import ModelCaller as Runtime
from ..base.model_protocol import check_modes, resolve_runtime
from ..decision.loop import check_reask, check_validate
from ..decision.loop import max_attempts as _max_attempts
from ..decision.modes import get_mode
from ..decision.options import check_context, normalize
from ..decision.options.shortlist import check_shortlist
from ..decision.repair import check_repair
from ..trace.decision_trace import batch as _trace_batch
from .comparison import ComparisonResult
from .evaluate import (
    CONFIDENCE_KEYS,
    Run,
    arun_one,
    check_run_confidence,
    check_settings,
    new_run,
    rate_limit_of,
)
from .inputs import Table
from .results import EvaluationResult
from .runner import interrupted as _interrupted

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Iterator
    from typing import Any

    from ..base.type_names import ModeName, Options
    from ..decision.options.menu import Menu
    from ..trace.records import Reask
    Reasker = str | Callable[[Reask], str] | None

__all__ = ["compare", "acompare", "Variant"]


@dataclass(frozen=True)
class Variant:
    """One column of `compare`: what differs from compare's own arguments. Whatever is left
    None comes from them — so `{"menu": Variant(mode="menu"), "tools": Variant(mode="tools")}`
    compares ways of asking on the same options, runtime and inputs."""
    options: Any = None
    runtime: Any = None
    mode: str | None = None
    prompt: str | None = None
    max_retries: int | None = None
    validate: Any = None
    reask: Any = None
    confidence: Any = None
    min_confidence: float | None = None
    low_confidence: str | None = None
    repair: str | None = None
    shortlist: Any = None   # k or Shortlist(...): this variant's menus narrowed (None: all shown)

    def __post_init__(self) -> None:
        # A misspelt way of asking is refused here, where it was written, not when compare runs
        if self.mode is not None:
            get_mode(self.mode)
        if self.repair is not None:
            check_repair(self.repair)
        check_shortlist(self.shortlist)


def _variants(variants: Any, options: Options | None,
              runtime: Runtime | None) -> list[tuple[str, Menu, Runtime, dict[str, Any]]]:
    if not isinstance(variants, Mapping):
        raise TypeError(f"variants must be a dict {{name: option set}}, {{name: Runtime}} or "
                        f"{{name: (option set, Runtime)}}, got {type(variants).__name__}")
    if len(variants) < 2:
        raise ValueError(f"compare needs two or more variants, got {len(variants)}; for one "
                         f"option set use evaluate()")
    out = []
    for name, v in variants.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"variant names must be non-empty strings, got {name!r}")
        overrides: dict[str, Any] = {}
        if isinstance(v, Variant):
            overrides = {k: getattr(v, k) for k in ("mode", "prompt", "max_retries", "validate",
                                                    "reask", *CONFIDENCE_KEYS, "repair")
                         if getattr(v, k) is not None}
            if "mode" in overrides:
                overrides["mode"] = get_mode(overrides["mode"]).name
            if "max_retries" in overrides:
                _max_attempts(overrides["max_retries"])
            if "validate" in overrides:
                overrides["validate"] = check_validate(overrides["validate"])
            if "reask" in overrides:
                overrides["reask"] = check_reask(overrides["reask"])
            if v.shortlist is not None:
                overrides["shortlist"] = check_shortlist(v.shortlist)
            opts = v.options if v.options is not None else options
            rt = v.runtime if v.runtime is not None else runtime
            if opts is None:
                raise ValueError(f"variant {name!r} sets no options, so compare needs options=")
        elif isinstance(v, Runtime):
            if options is None:
                raise ValueError(f"variant {name!r} is a Runtime, so compare needs options= "
                                 f"(the option set the runtime variants run)")
            opts, rt = options, v
        elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], Runtime):
            opts, rt = v
        else:
            opts, rt = v, runtime
        try:
            menu = normalize(opts)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"variant {name!r}: {exc}") from None
        out.append((name, menu, resolve_runtime(rt, f"compare variant {name!r}"), overrides))
    return out




def compare(prompt: str, variants: Any, inputs: Any, *, options: Options | None = None,
            runtime: Runtime | None = None, concurrency: int = 8, max_retries: int = 1,
            expected: Any = None, context: dict[str, Any] | None = None,
            timeout_s: float | None = None,
            progress: bool = True, on_interrupt: str = "return",
            validate: Callable[..., Any] | None = None, reask: Reasker = None,
            mode: ModeName = "menu", journal: Any = None, total: int | None = None,
            rate_limit: Any = None, batch: Any = False, confidence: Any = False,
            min_confidence: float | None = None,
            low_confidence: str | None = None, repair: str | None = None) -> ComparisonResult:
    """Run two or more variants over the same inputs and line their picks up side by side.

    `variants` maps a name to an option set (run on `runtime`, else the bound Runtime), to a
    Runtime (running `options=`), to an `(option set, Runtime)` pair, or to a `Variant` whose
    unset fields come from compare's own arguments (ways of asking: `Variant(mode="tools")`). The
    variants run one after another, each with `concurrency` workers, exactly as `evaluate` runs
    them (`validate=`, `reask=` and `journal=` included: each variant is a section of the
    journal, named after it, and resumes on its own). An iterable of inputs is read once and
    kept, since every variant runs over it. Returns a `ComparisonResult`: `.to_frame()` (one
    pick column per variant), `.differences`, `.summary` (retry and failure rates, accuracy, per
    variant), `.picks` (each variant's picks), `.pick_counts`, `.plot()`. `batch=` and `rate_limit=`
    apply to every variant, as in `evaluate` (on the batch path each variant is its own rounds).
    Ctrl-C behaves as in `evaluate`; variants not yet started are all "cancelled".
    """
    prep = _Comparison(prompt, variants, inputs, options, runtime, concurrency, max_retries,
                       expected, context, timeout_s, progress, on_interrupt, validate, reask,
                       mode, journal, total, rate_limit, batch,
                       (confidence, min_confidence, low_confidence), repair)
    with _trace_batch("compare", None, variants=len(prep.plan), inputs=prep.table.total):
        for one in prep.runs():
            wall, interrupted = (0.0, True) if prep.interrupted else one.go()
            prep.done(one, wall, interrupted)
    return prep.result()


async def acompare(prompt: str, variants: Any, inputs: Any, *, options: Options | None = None,
                   runtime: Runtime | None = None, concurrency: int = 8, max_retries: int = 1,
                   expected: Any = None, context: dict[str, Any] | None = None,
                   timeout_s: float | None = None, progress: bool = True,
                   on_interrupt: str = "return", validate: Callable[..., Any] | None = None,
                   reask: Reasker = None, mode: ModeName = "menu", journal: Any = None,
                   total: int | None = None, rate_limit: Any = None,
                   batch: Any = False, confidence: Any = False,
                   min_confidence: float | None = None,
                   low_confidence: str | None = None,
                   repair: str | None = None) -> ComparisonResult:
    """`compare`, awaitable: each variant's rows run as `aevaluate` runs them (tasks on the
    running event loop, at most `concurrency` in flight), one variant after another. Same
    arguments and the same `ComparisonResult`. Cancelling the awaiting task cancels the rows
    in flight and re-raises the CancelledError, carrying the partial comparison as `.result`
    (unstarted variants "cancelled")."""
    import asyncio
    prep = _Comparison(prompt, variants, inputs, options, runtime, concurrency, max_retries,
                       expected, context, timeout_s, progress, on_interrupt, validate, reask,
                       mode, journal, total, rate_limit, batch,
                       (confidence, min_confidence, low_confidence), repair)
    with _trace_batch("compare", None, variants=len(prep.plan), inputs=prep.table.total):
        for one in prep.runs():
            if prep.interrupted:
                prep.done(one, 0.0, True)
                continue
            try:
                wall, interrupted = await arun_one(one)
            except asyncio.CancelledError as exc:
                prep.done(one, 0.0, True, getattr(exc, "result"))
                for rest in prep.runs():
                    prep.done(rest, 0.0, True)
                setattr(exc, "result", prep.comparison())
                raise
            prep.done(one, wall, interrupted)
    return prep.result()


class _Comparison:
    """What compare and acompare share: the variants checked, the inputs read once, one run
    per variant (made as the previous one ends) and the results gathered."""

    def __init__(self, prompt: str, variants: Any, inputs: Any, options: Options | None,
                 runtime: Runtime | None, concurrency: int, max_retries: int, expected: Any,
                 context: dict[str, Any] | None, timeout_s: float | None, progress: bool,
                 on_interrupt: str, validate: Callable[..., Any] | None, reask: Reasker,
                 mode: str, journal: Any, total: int | None, rate_limit: Any,
                 batch: Any, confidence: tuple[Any, ...] = (False, None, None),
                 repair: Any = None) -> None:
        self.concurrency, self.settings = check_settings(on_interrupt, concurrency, max_retries,
                                                    timeout_s, context, validate, reask, mode,
                                                    confidence, repair)
        self.plan = _variants(variants, options, runtime)
        for name, menu, rt, overrides in self.plan:
            check_context(menu, context)
            check_modes(rt, overrides.get("mode", self.settings["mode"]))
            own = {**self.settings, **overrides}
            if own.get("confidence") is False:  # Variant(confidence=False) turns it off
                for key in CONFIDENCE_KEYS:
                    own.pop(key, None)
                    overrides[key] = None
            check_run_confidence(own, menu, rt, f"compare variant {name!r}")
        self.limit = rate_limit_of(rate_limit, [rt for _, _, rt, _ in self.plan])
        names = list(dict.fromkeys(o.name for _, menu, _, _ in self.plan for o in menu))
        table = Table(prompt, inputs, expected, names, "compare on", total=total)
        if table.streamed:  # every variant runs over the rows: read them once, keep them
            for _ in table.rows():
                pass
            exp = table.expected
            table = Table(prompt, table.records, exp, names, "compare on")
        self.table, self.prompt, self.progress = table, prompt, progress
        self.journal, self.batch, self.on_interrupt = journal, batch, on_interrupt
        self.results: dict[str, EvaluationResult] = {}
        self.interrupted = False
        self._next = 0

    def runs(self) -> Iterator[Run]:
        """The next variants' runs, each made only when the one before has finished."""
        while self._next < len(self.plan):
            name, menu, rt, overrides = self.plan[self._next]
            self._next += 1
            own = {k: v for k, v in overrides.items() if k != "prompt"}
            own_prompt = overrides.get("prompt", self.prompt)
            table = self.table if own_prompt == self.prompt else self.table.refill(own_prompt)
            yield new_run(table, menu, rt, self.batch, {**self.settings, **own},
                           self.concurrency, self.progress and not self.interrupted, name,
                           self.journal, name, self.limit)

    def done(self, one: Run, wall: float, interrupted: bool,
             result: EvaluationResult | None = None) -> None:
        if self.interrupted or result is not None:
            one.board.close()
        self.results[one.name] = (result if result is not None
                                  else one.result(wall, interrupted, label=one.name))
        self.interrupted = self.interrupted or interrupted

    def comparison(self) -> ComparisonResult:
        return ComparisonResult(self.results, columns=self.table.columns,
                                records=self.table.records or [], expected=self.table.expected,
                                interrupted=self.interrupted)

    def result(self) -> ComparisonResult:
        result = self.comparison()
        if self.interrupted:
            return _interrupted(result, self.on_interrupt, "compare was interrupted")
        return result

