"""`compare` / `acompare`: one option set's variants (other descriptions, prompts, runtimes or
ways of asking, each a `Variant` or a name with its options) run over the same inputs, one
after another, each as `evaluate` runs its rows, and lined up in a `ComparisonResult`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..base.model_protocol import ModelCaller as Runtime
from ..base.model_protocol import check_modes, resolve_runtime
from ..decision.options import check_context, normalize
from ..decision.settings import COMPARE, SETTINGS, VARIANT, Settings, checked, takes_settings
from ..trace.decision_trace import batch as _trace_batch
from .comparison import ComparisonResult
from .evaluate import Run, arun_one, check_run, check_run_confidence, new_run, rate_limit_of
from .inputs import Table
from .results import EvaluationResult
from .runner import interrupted as _interrupted

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Iterator
    from typing import Any

    from typing_extensions import Unpack

    from ..base.type_names import Options
    from ..decision.options.menu import Menu
    from ..decision.settings import Keywords

__all__ = ["compare", "acompare", "Variant"]


def _check_variant(self: Any) -> None:
    """Each setting a Variant overrides is checked where the Variant is written (a misspelt way
    of asking is refused there, not when compare runs)."""
    for name, value in self.overrides().items():
        if name != "prompt":
            checked(name, value, "Variant")


def _overrides(self: Any) -> dict[str, Any]:
    """The settings this variant sets (and its prompt), as written: what differs from
    compare's own arguments."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
            if f.name not in ("options", "runtime") and getattr(self, f.name) is not None}


def _settings(self: Any, base: Settings, where: str) -> Settings:
    """compare's settings `base` with this variant's put in. `confidence=False` turns the
    run's confidence off, and with it the thresholds that need it."""
    own = {k: v for k, v in self.overrides().items() if k != "prompt"}
    if own.get("confidence") is False:
        own.setdefault("min_confidence", None)
        own.setdefault("low_confidence", None)
    return base.replace(where, **own) if own else base


#: One column of `compare`. A frozen dataclass whose fields are the option set, the prompt and
#: the decision's settings a variant may set (`settings.VARIANT`), each None unless set.
Variant = dataclasses.make_dataclass(
    "Variant",
    [("options", "Any", dataclasses.field(default=None)),
     ("runtime", "ModelCaller | None", dataclasses.field(default=None)),
     ("prompt", "str | None", dataclasses.field(default=None, kw_only=True)),
     *((s.name, s.annotation if s.annotation.endswith("None") else f"{s.annotation} | None",
        dataclasses.field(default=None, kw_only=True))
       for s in SETTINGS if s.name in VARIANT and s.name != "runtime")],
    frozen=True,
    namespace={"__module__": __name__, "__post_init__": _check_variant, "overrides": _overrides,
               "settings": _settings,
               "__doc__": """One column of `compare`: what differs from compare's own arguments.
    Whatever is left None comes from them — so `{"menu": Variant(mode="menu"), "tools":
    Variant(mode="tools")}` compares ways of asking on the same options, runtime and inputs.
    Its fields: `options`, `runtime`, `prompt` and the decision's settings a variant may set
    (`mode`, `max_retries`, `validate`, `reask`, `confidence`, `min_confidence`,
    `low_confidence`, `repair`, `shortlist`), each checked where the Variant is written."""})


def _variants(variants: Any, options: Options | None, runtime: Runtime | None,
              base: Settings) -> list[tuple[str, Menu, Runtime, Settings, str | None]]:
    """Each variant as (name, its menu, its runtime, its settings, its own prompt or None)."""
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
        own, prompt = base, None
        if isinstance(v, Variant):
            own = v.settings(base, f"compare variant {name!r}")
            prompt = v.prompt
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
        out.append((name, menu, resolve_runtime(rt, f"compare variant {name!r}"), own, prompt))
    return out


@takes_settings(COMPARE)
def compare(prompt: str, variants: Any, inputs: Any, *, options: Options | None = None,
            concurrency: int = 8, expected: Any = None, progress: bool = True,
            on_interrupt: str = "return", journal: Any = None, total: int | None = None,
            rate_limit: Any = None, batch: Any = False,
            **settings: Unpack[Keywords]) -> ComparisonResult:
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
    prep = _Comparison(prompt, variants, inputs, options,
                       Settings.of(settings, "compare", COMPARE), concurrency=concurrency,
                       expected=expected, progress=progress, on_interrupt=on_interrupt,
                       journal=journal, total=total, rate_limit=rate_limit, batch=batch)
    with _trace_batch("compare", None, variants=len(prep.plan), inputs=prep.table.total):
        for one in prep.runs():
            wall, interrupted = (0.0, True) if prep.interrupted else one.go()
            prep.done(one, wall, interrupted)
    return prep.result()


@takes_settings(COMPARE)
async def acompare(prompt: str, variants: Any, inputs: Any, *, options: Options | None = None,
                   concurrency: int = 8, expected: Any = None, progress: bool = True,
                   on_interrupt: str = "return", journal: Any = None, total: int | None = None,
                   rate_limit: Any = None, batch: Any = False,
                   **settings: Unpack[Keywords]) -> ComparisonResult:
    """`compare`, awaitable: each variant's rows run as `aevaluate` runs them (tasks on the
    running event loop, at most `concurrency` in flight), one variant after another. Same
    arguments and the same `ComparisonResult`. Cancelling the awaiting task cancels the rows
    in flight and re-raises the CancelledError, carrying the partial comparison as `.result`
    (unstarted variants "cancelled")."""
    import asyncio
    prep = _Comparison(prompt, variants, inputs, options,
                       Settings.of(settings, "acompare", COMPARE), concurrency=concurrency,
                       expected=expected, progress=progress, on_interrupt=on_interrupt,
                       journal=journal, total=total, rate_limit=rate_limit, batch=batch)
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
                 settings: Settings, *, concurrency: Any, expected: Any, progress: bool,
                 on_interrupt: str, journal: Any, total: int | None, rate_limit: Any,
                 batch: Any) -> None:
        self.concurrency = check_run(on_interrupt, concurrency)
        self.settings = settings
        self.plan = _variants(variants, options, settings.runtime, settings)
        for name, menu, rt, own, _ in self.plan:
            check_context(menu, own.context)
            check_modes(rt, own.mode.name)
            check_run_confidence(own, menu, rt, f"compare variant {name!r}")
        self.limit = rate_limit_of(rate_limit, [rt for _, _, rt, _, _ in self.plan])
        names = list(dict.fromkeys(o.name for _, menu, _, _, _ in self.plan for o in menu))
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
            name, menu, rt, own, own_prompt = self.plan[self._next]
            self._next += 1
            if own_prompt is None:
                own_prompt = self.prompt
            table = self.table if own_prompt == self.prompt else self.table.refill(own_prompt)
            yield new_run(table, menu, rt, self.batch, own, self.concurrency,
                          self.progress and not self.interrupted, name, self.journal, name,
                          self.limit)

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

