"""The ways into a decision: `make` and `amake`, the `Plan` they build (a decision's settings
checked against its options and runtime once, then run for one prompt at a time; an evaluation's
rows share one), and the loop's two halves on their own, `parse_args` and `resolve_decision`.
Each drives the `Decider` of loop.py.
"""
from __future__ import annotations

from ..base.errors import UsageError
from ..base.model_protocol import (
    ModelCaller,
    check_modes,
    current_runtime,
    deadline_after,
    resolve_runtime,
    run_sync,
)
from ..base.run_hooks import current_run
from ..trace.decision_trace import DecisionTrace
from .confidence import check_threshold
from .conformal import check_on
from .loop import Decider
from .options import call_function, check_context, normalize, render_menu
from .options.shortlist import narrow
from .settings import ALL, PARSE, Settings, takes_settings

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from typing_extensions import Unpack

    from ..base.type_names import Options
    from .settings import Keywords

__all__ = ["make", "amake", "Plan", "parse_args", "resolve_decision"]


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


class Plan:
    """A decision's settings checked against its options and runtime once — the menu normalized
    and rendered, the way of asking and the confidence source checked against the runtime —
    then run for one prompt at a time (`run`). `make` builds one per call; an evaluation builds
    one for all its rows, so a row does only what depends on its prompt. `where` is the public
    function the plan serves (its errors and its DAG span name it); the trace records the way
    in as `entry` ("make")."""

    __slots__ = ("runtime", "menu", "menu_text", "settings", "where")
    entry = "make"

    def __init__(self, options: Options, settings: Settings, *, where: str = "decision.make",
                 runtime: ModelCaller | None = None) -> None:
        self.where = where
        run = current_run.get()  # a fork may give this decision another option set
        self.menu = menu = normalize(options if run is None or not run.edits_options
                                     else run.options(options))
        check_context(menu, settings.context)
        self.runtime = rt = resolve_runtime(runtime if runtime is not None else settings.runtime,
                                            where)
        way = settings.mode
        check_modes(rt, way.name)
        if menu.held and (settings.min_confidence is not None or settings.pick_set is not None):
            # a fork held this decision to the option it picks (openprogram.runs): the pick
            # is the user's, so no threshold judges it
            settings = settings.bound(min_confidence=None, pick_set=None)
        source = settings.confidence.on(rt, way, where)
        if settings.min_confidence is not None or settings.pick_set is not None:
            # a low_confidence= option is on the menu; a pick set was fitted on this one
            check_threshold(settings.min_confidence, settings.low_confidence, source,
                            [o.name for o in menu], where, settings.pick_set)
        self.settings = settings.bound(confidence=source)
        # without a shortlist the model sees the whole menu, the same text for every prompt
        self.menu_text = render_menu(menu) if settings.shortlist is None else None
        if settings.pick_set is not None:
            check_on(settings.pick_set, [o.name for o in menu],
                     self.menu_text or render_menu(menu), way, source, settings.shortlist, where)

    async def run(self, prompt: str, *, sync: bool,
                  keep: list[DecisionTrace] | None = None) -> Any:
        """The decision for `prompt`: its result, or its DecisionError. `keep` gets the
        decision's trace as soon as it starts (a row keeps it whatever ends the decision)."""
        if not isinstance(prompt, str):
            raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
        rt, settings, menu, menu_text = self.runtime, self.settings, self.menu, self.menu_text
        deadline = deadline_after(settings.timeout_s)
        listing = None
        if menu_text is None:  # the model sees, and may pick, these only
            menu, listing = narrow(settings.shortlist, prompt, menu, runtime=rt,
                                   way=settings.mode)
            menu_text = render_menu(menu)
        with rt.dag.span("decision", self.where):
            d = Decider(rt, menu, settings, request=prompt, entry=self.entry, deadline=deadline,
                        menu_text=menu_text, sync=sync, mode=settings.mode(menu),
                        shortlist=listing)
            if keep is not None:
                keep.append(d.trace)
            with d.running():
                text = d.mode.prompt(prompt, menu_text)
                d.new_attempt(text)
                await d.call([{"role": "user", "content": text}])
                return await d.settle()


async def _make(prompt: str, options: Options, keywords: Keywords, where: str,
                sync: bool) -> Any:
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
    return await Plan(options, Settings.of(keywords, where), where=where).run(prompt, sync=sync)


@takes_settings(ALL)
def make(prompt: str, options: Options, **settings: Unpack[Keywords]) -> Any:
    """Pure decision (rule E1 of docs/rules.md): send `prompt + "\\n\\n" + menu` in one model
    call and return the resolved result of the model's pick. Your prompt must ask the model to
    pick. Works with async models and async options too, also inside a running event loop (a
    notebook cell): they are finished before the result comes back."""
    return run_sync(_make(prompt, options, settings, "decision.make", sync=True))


@takes_settings(ALL)
async def amake(prompt: str, options: Options, **settings: Unpack[Keywords]) -> Any:
    """`make`, awaitable: the model call goes through the runtime's async path
    (`acall_model`), async options are awaited, and many `amake`s run concurrently on one
    event loop. Cancelling the task finishes its trace as failed."""
    return await _make(prompt, options, settings, "decision.amake", sync=False)


@takes_settings(PARSE)
def parse_args(reply: Any, options: Options, *, prompt: str = "",
               **settings: Unpack[Keywords]) -> tuple[Any, dict[str, Any]]:
    """Parse and validate a reply (rules P1-P7 of docs/rules.md) into `(chosen, kwargs)`: the
    function for a function option, the name for a value or schema option. On a bad reply,
    re-asks through the runtime (`max_retries` times); with no runtime, a bad reply raises
    DecisionError at once."""
    checked = Settings.of(settings, "parse_args", PARSE)
    menu = normalize(options)
    check_context(menu, checked.context)
    runtime = checked.runtime if checked.runtime is not None else current_runtime()
    d = Decider(runtime, menu, checked, request=prompt, entry="parse",
                max_attempts=None if runtime is not None else 1)
    with d.running():
        d.new_attempt(prompt)
        d.received(reply)
        option, kwargs = run_sync(d.settle(run=False))
        d.finish("resolved", result=None)
    return option.chosen(), kwargs


def resolve_decision(chosen: Any, kwargs: dict[str, Any], options: Options | None = None) -> Any:
    """Turn a pick into the next step's result (rule Z1 of docs/rules.md): call a function with the
    kwargs; look a name up in the option set (a value, or `{"decision": name, **kwargs}` for a
    schema)."""
    if callable(chosen):
        return call_function(chosen, kwargs)
    if options is None:
        raise UsageError("resolve_decision needs the option set to look up the name "
                        f"{chosen!r}: resolve_decision(chosen, kwargs, options)")
    for o in normalize(options):
        if o.name == chosen:
            return o.resolve(kwargs)
    raise KeyError(f"{chosen!r} is not an option of this option set")
