"""The decision loop: options → menu → reply → pick → result.

`make(prompt, options)` (entry.py) sends the prompt and the rendered menu in one model call, finds
the pick in the reply, validates its arguments, re-asks on a bad reply (the words: reask.py), and
resolves the pick into the result (rules E1, P1-P8, Z1); its settings (a `Settings`, settings.py)
are checked once against the options and the runtime into a `Plan`, which an evaluation's rows
share. This module is the `Decider` all of them drive. The loop talks to the model only through
the `ModelCaller` protocol, to option kinds only through their methods, and to the strategies its
settings name (the way of asking, the repair level, the confidence source) only through theirs;
each step moves the attempt's frozen `Attempt` record forward (a copy once an observer holds it)
and emits it, and the trace is assembled from those events. Entry points that run a whole turn
first (`agent(options=)`, `exec(response_format=)`) live one layer up, in runtime/turns.py, and
drive the same `Decider`. It is long because the `Decider` is one state machine — an attempt
sent, its reply read, the pick checked, then resolved, repaired or re-asked — whose steps share
the attempt being built and the trace it changes; splitting them would pass that state between
modules.
"""
from __future__ import annotations

import contextvars
import json
import time
from inspect import isawaitable

from ..base.errors import (
    AttemptError,
    DecisionError,
    ModelCallError,
    Retry,
    WaitTimeout,
    reply_head,
)
from ..base.model_protocol import (
    ModelCaller,
    ModelResponse,
    StageAnswer,
    running_tool,
    settle_value,
)
from ..base.run_hooks import current_run
from ..base.secrets import redact_decoded
from ..trace.decision_trace import DecisionTrace, emit, record
from ..trace.records import Attempt, Pick, new_attempt, replace
from . import repair as _repair
from .confidence import NO_CONFIDENCE
from .conformal import PickSetPolicy
from .modes import MenuMode, Mode
from .options import (
    Menu,
    Option,
    option_infos,
    render_menu,
    safe_key,
)
from .options.shortlist import defer_tools
from .reask import DECISION_FINISH_INSTRUCTION, DEFAULT_REASK, reask_prompt, render_options
from .schema.budget import checking_until
from .settings import Settings

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from .extract import Extraction

__all__ = ["Decider", "attempt_gate", "DECISION_FINISH_INSTRUCTION", "DEFAULT_REASK",
           "reask_prompt", "render_options"]

#: Finish reasons that mean the reply hit the token limit (OpenAI's, Anthropic's).
TRUNCATED = ("length", "max_tokens")


#: Called before each attempt's model call, in every decision made in this context: an
#: evaluation row's stop check (a row of a stopped run makes no further model call). Whatever it
#: raises ends that decision, whose trace finishes as failed.
attempt_gate: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "openprogram_attempt_gate", default=None)


class Decider:
    """One decision in progress. It holds the current attempt as a frozen record and moves it
    forward with `_step`, which makes the next record and emits it; nothing else changes a
    record or the trace. A record that no observer has been handed yet is completed in place
    (`_change`): observers still get every record as it stood at its event and never see it
    change afterwards, and a decision nobody watches step by step (an evaluation's rows) makes
    one record per attempt instead of five.

    Its settings (a checked `Settings`, whose confidence source the entry point has checked
    against the runtime) say how to decide: the rule and the re-ask text, the repair level and
    the confidence source it asks at each step (strategies: the Decider never tests their
    names). `max_attempts` overrides theirs where an entry point fixes it (a turn's one
    re-pick); `mode` is the way of asking made for this menu (menu mode by default)."""

    def __init__(self, runtime: ModelCaller | None, menu: Sequence[Option], settings: Settings,
                 *, request: str, entry: str, max_attempts: int | None = None,
                 deadline: float | None = None, menu_text: str | None = None,
                 sync: bool = True, mode: Mode | None = None, quiet: bool = False,
                 shortlist: dict[str, Any] | None = None) -> None:
        self.runtime, self.menu, self.request = runtime, menu, request
        self.settings = settings
        self.confidence = settings.confidence  # where the probabilities come from
        self.min_confidence, self.low_confidence = settings.min_confidence, \
            settings.low_confidence
        self.pick_set = settings.pick_set
        self._emit = record if quiet else emit  # quiet: the trace only, no observers
        self.mode = mode or MenuMode(menu)
        self.resp: Any = None        # the last model response, as the mode reads it
        self.messages: list[dict[str, Any]] = []
        self.sync = sync  # how to call the model and finish the user's awaitables
        self.validate, self.reask, self.level = settings.validate, settings.reask, \
            settings.repair
        self._redact = runtime.redact if runtime is not None else None
        self._enclosing: tuple[int, int] | None = None  # see check()
        self.context = dict(settings.context or {})
        self.deadline = deadline
        self.by_name = menu.by_name if isinstance(menu, Menu) else {o.name: o for o in menu}
        self.menu_text = menu_text if menu_text is not None else render_menu(menu)
        # What the mode adds to every model call (tools, schema), built once per decision: in
        # tools mode it is every option's JSON Schema.
        self._request = self.mode.request()
        if shortlist is not None and shortlist.get("deferred"):  # shortlist="native"
            self._request = defer_tools(self._request)
        self.sent = self._request or None
        self.trace = DecisionTrace(
            prompt=request, menu=self.menu_text, options=option_infos(menu), entry=entry,
            max_attempts=settings.attempts if max_attempts is None else max_attempts,
            runtime=None if runtime is None else runtime.name, context_keys=sorted(self.context),
            mode=self.mode.name, model=None if runtime is None else runtime.model,
            provider=None if runtime is None else runtime.provider, shortlist=shortlist)
        self.att: Attempt | None = None  # None until the first new_attempt()
        self.shown: Attempt | None = None  # the last record an observer was handed
        self._t0 = time.perf_counter()
        run = current_run.get()  # the run whose tree holds this decision (openprogram.runs)
        if run is not None:
            run.decision_started(self.trace)
        self._emit("decision_started", self.trace)

    @property
    def names(self) -> list[str]:
        """The option names, in menu order (made when asked: most decisions never ask)."""
        return list(self.by_name)

    @property
    def cur(self) -> Attempt:
        """The current attempt: every step after `new_attempt` has one."""
        if self.att is None:
            raise RuntimeError("internal error: a decision step ran before its first attempt")
        return self.att

    @property
    def model(self) -> ModelCaller:
        """The runtime, for a step that calls the model (parse_args and revalidate have none
        and never get there)."""
        if self.runtime is None:
            raise RuntimeError("internal error: a model call in a decision without a runtime")
        return self.runtime

    def _step(self, kind: str, **changes: Any) -> Attempt:
        """The next record of the current attempt, emitted as event `kind`."""
        att = self._change(**changes)
        if self._emit(kind, self.trace, att):
            self.shown = att
        return att

    def _change(self, **changes: Any) -> Attempt:
        """The current record with `changes`: a copy when an observer holds it, else the same
        record completed in place (nobody outside this decision has it yet)."""
        att = self.att
        if att is None:
            raise RuntimeError("internal error: a decision step ran before its first attempt")
        if att is self.shown:
            self.att = att = replace(att, **changes)
        else:
            att.__dict__.update(changes)
        return att

    # -- model calls --------------------------------------------------------------------------
    def new_attempt(self, prompt: str) -> Attempt:
        n = len(self.trace.attempts) + 1
        self.att = att = new_attempt(n, n >= self.trace.max_attempts, prompt, self.sent)
        if self._emit("attempt_sent", self.trace, att):
            self.shown = att
        gate = attempt_gate.get()
        if gate is not None:
            gate()
        return att

    async def call(self, messages: list[dict[str, Any]],
                   specs: list[dict[str, Any]] | None = None) -> Any:
        """One model call for the current attempt. Streamed text reaches observers as chunk
        events carrying only the new text; the record gets the whole reply when it is in (in a
        turn with tool rounds, the last round's)."""
        parts: list[str] = []
        t0 = time.perf_counter()
        trace, att = self.trace, self.cur
        self.messages = messages
        extra = self._request  # (not changed below: a turn's tools go into a copy)
        if specs is not None:  # a turn's work tools go with the mode's own (tools mode: choices)
            extra = dict(extra)
            own = extra.get("tools", [])
            taken = {t["name"] for t in own}  # a function that is both goes once, as the choice
            extra["tools"] = [*(t for t in specs if t["name"] not in taken), *own]

        def on_text(chunk: str) -> None:
            parts.append(chunk)
            if self._emit("reply_chunk", trace, att, text=chunk):
                self.shown = att

        source, cascade, rt = self.confidence, None, self.model
        try:
            if rt.staged:
                async def stage(on: ModelCaller, asks: Any, first: bool) -> StageAnswer:
                    return await self._stage(on, asks, messages, extra,
                                             on_text if first else None, specs)
                resp, node, conf, cascade = await rt.answer_in_stages(stage)
                missing = None
            elif source is NO_CONFIDENCE and not (self.mode.menu_in_prompt and rt.takes_menu):
                # what _ask and call_once do in this case, without their two frames (every
                # decision without confidence= comes here)
                conf = missing = None
                if self.sync:
                    resp, node = rt.call_model(messages, on_text=on_text,
                                               deadline=self.deadline, **extra)
                else:
                    resp, node = await rt.acall_model(messages, on_text=on_text,
                                                      deadline=self.deadline, **extra)
            else:
                resp, node, conf, missing = await self._ask(rt, source, messages, extra,
                                                            on_text, specs)
        except ModelCallError as exc:
            self._change(reply=exc.partial or "".join(parts), duration_s=self._elapsed(t0))
            self.fail_with(AttemptError(exc.kind, str(exc)), cause=exc)
        except Exception as exc:
            self._change(reply="".join(parts), duration_s=self._elapsed(t0))
            self.fail_with(AttemptError("model_error", f"{type(exc).__name__}: {exc}"), cause=exc)
        usage = dict(resp.usage) if resp.usage else self.cur.usage
        self.resp = resp
        self._step("reply_received", reply=resp.text, model_call_id=node.id, usage=usage,
                   duration_s=self._elapsed(t0), finish_reason=resp.finish_reason, raw=resp.raw,
                   cached=resp.cached,
                   tool_calls=[tc.to_dict() for tc in resp.tool_calls] if resp.tool_calls
                   else None,
                   **({"confidence": conf} if source.asks or rt.staged else {}),
                   **({"cascade": cascade} if rt.staged else {}))
        if missing is not None:
            self.fail_with(AttemptError("no_confidence", missing))
        return resp

    async def _ask(self, rt: ModelCaller, source: Any, messages: list[dict[str, Any]],
                   extra: dict[str, Any], on_text: Callable[[str], None] | None,
                   specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any, str | None]:
        """One attempt's model call on `rt`, as the confidence `source` makes it: `(response,
        node, Confidence or None, why there is none when one was asked for)`."""
        if self.mode.menu_in_prompt and rt.takes_menu:
            extra = {**extra, "menu": self.menu_text}  # where the prompt's menu is, as data
        got: tuple[Any, Any, Any, str | None] = await source.ask(self, rt, messages, extra,
                                                                  on_text, specs)
        return got

    async def _stage(self, rt: ModelCaller, source: Any, messages: list[dict[str, Any]],
                     extra: dict[str, Any], on_text: Callable[[str], None] | None,
                     specs: list[dict[str, Any]] | None) -> StageAnswer:
        """One stage of a staged runtime (a cascade's), asked as `source` says: its reply,
        the option it picked and that option's probability, for the runtime to judge."""
        resp, node, conf, _ = await self._ask(rt, source, messages, extra, on_text, specs)
        name = self.named(resp)
        picked = conf is not None and name in self.by_name
        if picked:
            conf = replace(conf, pick=name)
        return StageAnswer(resp, node, conf, name, conf.p_pick if picked else None)

    async def call_once(self, rt: ModelCaller, messages: list[dict[str, Any]],
                        extra: dict[str, Any],
                        on_text: Callable[[str], None] | None) -> tuple[Any, Any]:
        """One model call on `rt` within the decision's time, sync or async as it runs."""
        if self.sync:
            return rt.call_model(messages, on_text=on_text, deadline=self.deadline, **extra)
        return await rt.acall_model(messages, on_text=on_text, deadline=self.deadline, **extra)

    def named(self, resp: Any) -> str | None:
        """The option a reply names, or None (unreadable, refused, no pick)."""
        if resp.refusal:
            return None
        try:
            action = self.mode.action(resp).action
        except Exception:  # a reply the mode cannot read counts as `other`
            return None
        name = action.get("call") if isinstance(action, dict) else None
        return name if isinstance(name, str) else None

    def _elapsed(self, t0: float) -> float:
        return (self.cur.duration_s or 0) + time.perf_counter() - t0

    def received(self, reply: Any) -> Attempt:
        """A reply that came from elsewhere (parse_args): record it as received."""
        self.resp = ModelResponse(text=reply)
        return self._step("reply_received", reply=reply)

    # -- checks -------------------------------------------------------------------------------
    def extract(self) -> Extraction:
        """Find the action in the response, as the mode reads it (P1, A6); records the
        extraction. A refusal, and a reply cut off before any action, are their own kinds."""
        att, resp = self.cur, self.resp
        if resp.refusal:
            raise AttemptError("refused", f"the provider reports that the model refused: "
                                        f"{resp.refusal}")
        if not resp.tool_calls and not isinstance(att.reply, str):
            raise AttemptError("not_text", f"the model reply is {type(att.reply).__name__}, "
                                         f"not text")
        ex = self.mode.action(resp)
        repairs: list[Any] = []
        inner = self._enclosing
        if inner is not None:
            ex, repairs = _SYNTAX.read(att.reply, replace(ex, action=None), [],
                                       resp.finish_reason in TRUNCATED)
            if not repairs or ex.span is None or not (ex.span[0] <= inner[0]
                                                      and inner[1] <= ex.span[1]):
                raise _NotEnclosing
        elif ex.action is None and self.mode.require_key:
            # the strict reading found nothing: a reply it can read as written is never repaired
            ex, repairs = self.level.read(att.reply, ex, list(self.menu),
                                          resp.finish_reason in TRUNCATED)
        # the pick as decoded, redacted before anything reads it: JSON can spell a key the
        # runtime's redaction of the reply text did not see
        ex.action, redacted = redact_decoded(ex.action, self._redact)
        if ex.action is None:
            self._step("extracted", candidates=ex.candidates)
            if resp.finish_reason in TRUNCATED:
                raise AttemptError("truncated", f"the reply was cut off at the token limit "
                                              f"(finish reason {resp.finish_reason!r}) before "
                                              f"a complete pick: {ex.problem}")
            raise AttemptError("no_action", ex.problem or "no JSON object picks an option")
        self._step("extracted", candidates=ex.candidates, extracted=ex.action,
                   found_in=ex.found_in, key_alias=ex.key, span=ex.span, redacted=redacted)
        if repairs:
            self._add_repairs(repairs)
        return ex

    def check(self) -> tuple[Option, dict[str, Any]]:
        """Find the pick in the reply and validate it (P1-P5); a pick closed after a reply cut
        off at the token limit that still fails stays `truncated`."""
        try:
            try:
                return self._check()
            except AttemptError as err:
                # The strict reading may have found a pick inside a broken one (an argument
                # object keyed "action"): the repaired outer pick, if there is one, is meant.
                if not self.level.encloses or self.cur.repairs or self.cur.span is None \
                        or err.kind == "truncated" \
                        or not _repair.may_enclose(self.cur.reply, self.cur.span):
                    raise
                self._enclosing = self.cur.span
                try:
                    return self._check()
                except _NotEnclosing:
                    raise err from None
                finally:
                    self._enclosing = None
        except AttemptError as err:
            if (err.kind != "truncated" and self.cur.finish_reason in TRUNCATED
                    and any(r.kind == "closed_truncation" for r in self.cur.repairs)):
                raise AttemptError("truncated", f"the reply was cut off at the token limit "
                                              f"(finish reason {self.cur.finish_reason!r}); "
                                              f"closed, its pick fails: {err.message}",
                                 err.path) from None
            raise

    def _check(self) -> tuple[Option, dict[str, Any]]:
        ex = self.extract()
        assert ex.action is not None  # extract() raised otherwise
        if "call" not in ex.action:  # a structured-output reply's object that names no option
            ex.action = self._unwrapped(ex.action)
        name = ex.action["call"]  # whichever alias the model wrote; ex.key keeps that alias
        if not isinstance(name, str):
            raise AttemptError("bad_args", f'"{ex.key}" must be an option name (a string), got '
                                         f"{type(name).__name__}", "call")
        option = self.by_name.get(name)
        if option is None:
            near = self.level.option_name(name, self.names)
            if near is not None:
                option = self.by_name[near[0]]
                self._add_repairs([near[1]])
        if self.cur.confidence is not None and option is not None:
            self._change(confidence=replace(self.cur.confidence, pick=name))
        if option is None:
            err = AttemptError("unknown_call", f"{name!r} is not an option; the options are "
                                             f"{', '.join(self.by_name)}", "call")
            err.hint = _repair.name_hint(name, self.names)  # for the re-ask
            raise err
        dropped: list[str] = []
        if "args" in ex.action:
            args = ex.action["args"]
            if args is None:
                args = {}
            if not isinstance(args, dict):
                self._change(chosen=name)
                raise AttemptError("bad_args", f'"args" must be a JSON object, got '
                                             f"{type(args).__name__}", "args")
            dropped += [safe_key(k) for k in ex.action if k not in ("call", "args")]
        else:  # the flat form {"call": "x", "field": ...}; its paths still read args.field
            args = {k: v for k, v in ex.action.items() if k != "call"}
        return option, self.level.bind(self.bind, option, args, dropped, self._add_repairs)

    def _unwrapped(self, action: dict[str, Any]) -> dict[str, Any]:
        """The pick of an object without "call": the one the repair level reads it as (with
        repair="menu", the one option whose parameters its keys match); else the error that
        says what is missing."""
        got = self.level.unwrap(action, list(self.menu))
        if got is not None:
            pick, fixed = got
            self._step("extracted", extracted=pick, key_alias="call")
            self._add_repairs([fixed])
            return pick
        raise AttemptError("bad_args", 'the pick has no "call" naming the option; write it as '
                                     'in the option\'s "Call:" line', "call")

    def _add_repairs(self, repairs: list[Any]) -> None:
        repairs = _repair.redact_repairs(repairs, self._redact)
        self._step("repaired", repairs=[*self.cur.repairs, *repairs])

    def bind(self, option: Option, args: dict[str, Any],
             dropped: list[str]) -> dict[str, Any]:
        """The option's validated arguments plus injected ones; what was kept, dropped and
        injected goes into the record, also when a field fails."""
        injected: list[str] = []
        try:
            with checking_until(self.deadline):   # timeout_s covers the check of the value
                kwargs, kept = option.bind(args, runtime=self.runtime, context=self.context,
                                           dropped=dropped, injected=injected)
        except BaseException:
            self._change(chosen=option.name, dropped=list(dropped), injected=list(injected))
            raise
        # one record for both (no event comes between them)
        self._change(chosen=option.name, dropped=list(dropped), injected=list(injected),
                     args=kept)
        out: dict[str, Any] = kwargs
        return out

    def record_failure(self, err: AttemptError) -> None:
        # Where the offending value sits in the raw reply: looked for only now, off the path
        # of a decision that succeeds.
        att = self.cur
        where = None
        if err.path and att.span is not None and isinstance(att.reply, str):
            where = _repair.value_span(att.reply, att.span, err.path, att.repairs)
        self._step("attempt_failed", error_kind=err.kind, error_message=err.message,
                   error_path=err.path, error_span=where)

    # -- the loop -----------------------------------------------------------------------------
    async def settle(self, check: Callable[[], Any] | None = None, run: bool = True) -> Any:
        """Check attempts, re-asking until one passes or none are left (P7, P8); then the
        caller's rule (`validate=`) and, with `run`, the option itself. A `Retry` from either
        fails the attempt as `rejected` and re-asks like any other failure. Returns the result,
        or `(option, kwargs)` when not `run`."""
        check = check or self.check
        while True:
            try:
                option, kwargs = check()
                if self.min_confidence is not None:
                    option, kwargs = self._threshold(option, kwargs)
                elif self.pick_set is not None:
                    option, kwargs = self._in_set(option, kwargs, self.pick_set)
                if self.validate is not None:
                    await self._rule(option)
                self._step("validated")
                if not run:
                    return option, kwargs
                return await self.resolve(option, kwargs)
            except AttemptError as err:
                self.record_failure(err)
                if self.cur.is_last or err.kind == "timeout":   # no time is left to re-ask
                    self.fail()
                prompt = reask_prompt(self.request, _reply_shown(self.cur), err,
                                      self.mode.menu_for_reask(self.menu_text), self.reask,
                                      self.cur.number)
                self.new_attempt(prompt)
                await self.call(self.mode.reask_messages(self.messages, self.resp, prompt))

    def _threshold(self, option: Option, kwargs: dict[str, Any]) -> tuple[Option, dict[str, Any]]:
        """`min_confidence=`: a pick below it resolves the `low_confidence=` option instead, or
        fails the decision as `low_confidence` (no re-ask: asking again asks the same model the
        same thing). A reply without a readable probability counts as below."""
        conf, m = self.cur.confidence, self.min_confidence
        p = conf.p_pick if conf is not None else None
        if p is not None and p >= m:
            return option, kwargs
        shown = "unknown" if p is None else f"{p:.3f}"
        return self._unsure(option, f"the model picked {option.name!r} with probability "
                                    f"{shown}, below min_confidence={m}")

    def _in_set(self, option: Option, kwargs: dict[str, Any],
                policy: PickSetPolicy) -> tuple[Option, dict[str, Any]]:
        """`pick_set=`: the options whose probability clears the policy's threshold are the
        pick set, recorded on the attempt's confidence. The pick resolves when the set is the
        pick alone; otherwise the `low_confidence=` option resolves in its place, or the
        decision fails as `low_confidence` with the set (no re-ask: the same model asked again
        has the same distribution). A reply without a distribution has an empty set."""
        conf = self.cur.confidence
        got = policy.pick_set(conf.probs) if conf is not None else ()
        if conf is not None:
            self._change(confidence=replace(conf, pick_set=got))
        if got == (option.name,):
            return option, kwargs
        what = (f"the pick set (options at p >= {policy.threshold:.4g}, calibrated at "
                f"alpha={policy.alpha:g}) is {list(got)}" if conf is not None else
                "the reply came without a distribution, so its pick set is empty")
        return self._unsure(option, f"the model picked {option.name!r}, and {what}: not the "
                                    f"pick alone")

    def _unsure(self, option: Option, why: str) -> tuple[Option, dict[str, Any]]:
        """A pick not sure enough (`min_confidence=`, `pick_set=`): the `low_confidence=`
        option resolves in its place, or the decision fails as `low_confidence`, saying `why`."""
        if self.low_confidence is None:
            self.record_failure(AttemptError("low_confidence", why))
            self.fail()
        low = self.by_name[self.low_confidence]
        self._change(low_pick=option.name, args=None)
        return low, self.bind(low, {}, [])

    async def _rule(self, option: Option) -> None:
        pick = Pick(option.name, dict(self.cur.args or {}), option)
        if self.validate is None:
            return
        try:
            verdict = await settle_value(self.validate(pick), self.sync, self.deadline)
        except Retry as r:
            raise AttemptError(r.kind, r.message) from None
        except WaitTimeout as exc:
            self.fail_with(AttemptError("timeout", str(exc)), cause=exc)
        if verdict is False:  # a predicate says no as plainly as a Retry does
            raise AttemptError("rejected", f"the validate= rule returned False for the pick of "
                                         f"{option.name!r}; pick again")

    def fail_with(self, err: AttemptError, cause: BaseException | None = None) -> NoReturn:
        self.record_failure(err)
        self.fail(cause)

    def fail(self, cause: BaseException | None = None) -> NoReturn:
        att = self.cur
        err = DecisionError(att.error_kind or "model_error", att.error_message or "",
                            reply_head(att.reply), self.trace, att.error_path)
        err.confidence = att.confidence  # the distribution the last attempt had, if asked
        if att.confidence is not None:
            err.pick_set = att.confidence.pick_set
        self.finish("decision_failed", error=err)
        raise err from cause

    async def resolve(self, option: Option, kwargs: dict[str, Any]) -> Any:
        try:
            with running_tool(self.runtime):  # a live tool records (or replays) its result
                value = option.resolve(kwargs)
            # a plain value (most picks) is the result: no coroutine made to hand it back (and
            # a str, a number, a dict... is known not to be awaitable without asking the ABC)
            result = (value if type(value) in _PLAIN or not isawaitable(value)
                      else await settle_value(value, self.sync, self.deadline))
        except Retry as r:  # the option itself rejected the pick: re-ask (settle catches it)
            raise AttemptError(r.kind, r.message) from None
        except WaitTimeout as exc:  # timeout_s covers the option's own wait too
            self.fail_with(AttemptError("timeout", str(exc)), cause=exc)
        except BaseException as exc:
            self.finish("decision_failed", error=exc)
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised by option {option.name!r} of decision #{self.trace.id}; "
                             f"its trace: decision.last_trace()")
            raise
        return self.finish("resolved", result=result)

    def running(self) -> _Running:
        """The decision's body. Whatever ends it early (Ctrl-C, a cancelled evaluate row, a bug)
        still finishes the trace as failed, so it never stays "running"."""
        return _Running(self)

    def finish(self, kind: str, result: Any = None, error: BaseException | None = None) -> Any:
        # The current attempt's last record goes with the outcome: a pick that a rule or the
        # option itself ended with an exception of the user's was never emitted otherwise.
        if self._emit(kind, self.trace, self.att, result=result, error=error,
                      duration_s=time.perf_counter() - self._t0):
            self.shown = self.att
        return result


class _Running:
    """`Decider.running()`: a class rather than a generator-based context manager, since every
    decision opens one."""

    __slots__ = ("d",)

    def __init__(self, d: Decider):
        self.d = d

    def __enter__(self) -> Decider:
        return self.d

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc_type is not None and self.d.trace.status == "running":
            self.d.finish("decision_failed", error=exc)


_PLAIN = frozenset((str, int, float, bool, type(None), dict, list, tuple, bytes))


_SYNTAX = _repair.SyntaxRepair()  # a broken pick around the strict one: its syntax alone


class _NotEnclosing(Exception):
    """No repaired pick encloses the strict one: the strict reading's error stands."""


def _reply_shown(att: Attempt) -> Any:
    """The previous reply as a re-ask repeats it: its text, or the tool calls it made."""
    if att.tool_calls and not (isinstance(att.reply, str) and att.reply.strip()):
        return "\n".join(f"{c['name']}({json.dumps(c.get('args'), ensure_ascii=False)})"
                         for c in att.tool_calls)
    return att.reply
