"""The decision loop: options → menu → reply → pick → result.

`make(prompt, options)` sends the prompt and the rendered menu in one model call, finds the pick in
the reply, validates its arguments, re-asks on a bad reply, and resolves the pick into the result
(rules E1, P1-P8, Z1); its settings are checked once into a `Plan`, which an evaluation's rows
share. `parse_args` and `resolve_decision` are its two halves on their own. The
loop talks to the model only through the `ModelCaller` protocol and to option kinds only through
their methods; each step moves the attempt's frozen `Attempt` record forward (a copy once an
observer holds it) and emits it, and the trace is assembled from those events. Entry points that run
a whole turn first (`agent(options=)`, `exec(response_format=)`) live one layer up, in
runtime/turns.py, and drive the same `Decider`. It is long because the `Decider` is one state
machine — an attempt sent, its reply read, the pick checked, then resolved, repaired or re-asked —
whose steps share the attempt being built and the trace it changes; splitting them would pass that
state between modules.
"""
from __future__ import annotations

import contextvars
import dataclasses
import json
import time
from inspect import isawaitable

from ..base.errors import (
    ArgumentError,
    AttemptError,
    DecisionError,
    ModelCallError,
    Retry,
    UsageError,
    WaitTimeout,
    explain,
    reply_head,
)
from ..base.model_protocol import (
    ModelCaller,
    ModelResponse,
    check_modes,
    current_runtime,
    deadline_after,
    resolve_runtime,
    run_sync,
    running_tool,
    settle_value,
)
from ..base.redaction import redact_decoded
from ..base.run_hooks import current_run, edited_options
from ..trace.confidence import (
    ConfidenceAsk,
    check_confidence,
    check_threshold,
    from_counts,
    from_response,
)
from ..trace.decision_trace import DecisionTrace, emit, record
from ..trace.records import Attempt, Pick, Reask, new_attempt, replace
from . import repair as _repair
from .extract import extract_action, value_span
from .modes import MenuMode, Mode, get_mode
from .options import (
    Menu,
    Option,
    call_function,
    check_context,
    normalize,
    option_infos,
    render_menu,
    safe_key,
)
from .options.shortlist import Shortlist, check_shortlist, defer_tools, narrow
from .repair import DEFAULT_REPAIR, check_repair

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from ..base.type_names import ModeName, Options
    from .extract import Extraction

__all__ = ["make", "amake", "render_options", "extract_action", "parse_args", "resolve_decision",
           "DECISION_FINISH_INSTRUCTION", "DEFAULT_REASK", "Decider", "reask_prompt",
           "check_reask", "check_validate", "Plan", "attempt_gate"]

DECISION_FINISH_INSTRUCTION = (
    "Do the work the request needs first (reason, call tools). Then finish: end your reply with "
    "your decision, one JSON object in a ```json fenced block that picks exactly one of the "
    "options below, written as in its \"Call:\" line. Write nothing after it.")

_REASK_REPLY_LIMIT = 4000
#: Finish reasons that mean the reply hit the token limit (OpenAI's, Anthropic's).
TRUNCATED = ("length", "max_tokens")


def render_options(options: Options) -> str:
    """The menu text for an option set (rules R1-R3 of docs/rules.md)."""
    return render_menu(normalize(options))


def _bounded(text: str, n: int = _REASK_REPLY_LIMIT) -> str:
    if len(text) <= n:
        return text
    half = n // 2
    return f"{text[:half]}\n[... {len(text) - n} characters left out ...]\n{text[-half:]}"


DEFAULT_REASK = (
    "Your previous reply could not be used as a decision.\n\n"
    "The request was:\n{request}\n\n"
    "Your previous reply was:\n<<<\n{reply}\n>>>\n\n"
    "The problem ({kind}{at_path}): {error}\n{advice}\n\n"
    "Reply again, ending with exactly one JSON object that picks one option, written as in "
    "its \"Call:\" line.\n\n"
    "{menu}")

REASK_FIELDS = tuple(Reask.__dataclass_fields__)

#: Called before each attempt's model call, in every decision made in this context: an
#: evaluation row's stop check (a row of a stopped run makes no further model call). Whatever it
#: raises ends that decision, whose trace finishes as failed.
attempt_gate: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "openprogram_attempt_gate", default=None)


def check_reask(reask: Any) -> Callable[[Reask], str] | None:
    """`reask=` as a function of a `Reask`: None (the default text), a format template naming
    only the fields of `Reask`, or a callable. Checked before any model call."""
    if reask is None or callable(reask):
        own: Callable[[Reask], str] | None = reask
        return own
    if not isinstance(reask, str):
        raise UsageError(f"reask= takes a format template (str) or a callable of the failure, got "
                        f"{type(reask).__name__}")
    import string  # at first use: most decisions never write their own re-ask
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(reask) if f is not None}
    except ValueError as exc:
        raise ArgumentError(f"reask= template is not a valid format string ({exc}); write fields "
                         f"as {{error}} and a literal brace as {{{{") from None
    bad = sorted(n for n in names if n.split(".")[0].split("[")[0] not in REASK_FIELDS or not n)
    if bad:
        raise ArgumentError(f"reask= template names unknown field(s) {', '.join(map(repr, bad))}; "
                         f"the fields are {', '.join('{' + f + '}' for f in REASK_FIELDS)}")
    return lambda r: reask.format(**{f: getattr(r, f) for f in REASK_FIELDS})


def check_validate(validate: Any) -> Callable[..., Any] | None:
    """`validate=`: None or a callable of the `Pick`. Checked before any model call."""
    if validate is not None and not callable(validate):
        raise UsageError(f"validate= takes a callable of the pick (raise openprogram.Retry "
                        f"to reject it), got {type(validate).__name__}")
    rule: Callable[..., Any] | None = validate
    return rule


def reask_prompt(request: str, reply: Any, err: AttemptError, menu_text: str,
                 reask: Callable[[Reask], str] | None = None, attempt: int = 1) -> str:
    """The re-ask (P7): by default the request, the previous reply, the problem, and the menu
    again; `reask` (from `check_reask`) writes the user's own text from the same facts."""
    shown = _bounded(reply if isinstance(reply, str) else repr(reply))
    hint = getattr(err, "hint", "")  # the fix a repair level above would have made (repair.py)
    facts = Reask(request=request, reply=shown, kind=err.kind, error=err.message,
                  path=err.path or "", menu=menu_text, attempt=attempt, hint=hint)
    if reask is not None:
        text = reask(facts)
        if not isinstance(text, str):
            raise UsageError(f"reask= callable returned {type(text).__name__}; it must return "
                            f"the text to send (a str)")
        return text
    return DEFAULT_REASK.format(request=request, reply=shown, kind=err.kind, error=err.message,
                               menu=menu_text, advice=explain(err.kind) + (
                                   f"\n{hint}" if hint else ""),
                               at_path=f" at {err.path}" if err.path else "")


class Decider:
    """One decision in progress. It holds the current attempt as a frozen record and moves it
    forward with `_step`, which makes the next record and emits it; nothing else changes a
    record or the trace. A record that no observer has been handed yet is completed in place
    (`_change`): observers still get every record as it stood at its event and never see it
    change afterwards, and a decision nobody watches step by step (an evaluation's rows) makes
    one record per attempt instead of five."""

    def __init__(self, runtime: ModelCaller | None, menu: Sequence[Option], *, request: str,
                 context: dict[str, Any] | None, max_attempts: int, entry: str,
                 deadline: float | None = None, menu_text: str | None = None,
                 sync: bool = True, validate: Callable[..., Any] | None = None,
                 reask: Callable[[Reask], str] | None = None, mode: Mode | None = None,
                 quiet: bool = False, confidence: ConfidenceAsk | None = None,
                 min_confidence: float | None = None, low_confidence: str | None = None,
                 repair: str = DEFAULT_REPAIR, shortlist: dict[str, Any] | None = None) -> None:
        self.runtime, self.menu, self.request = runtime, menu, request
        # what the decision asks of the model's probabilities (checked by the entry point)
        self.confidence = confidence
        self.min_confidence, self.low_confidence = min_confidence, low_confidence
        self._emit = record if quiet else emit  # quiet: the trace only, no observers
        self.mode = mode or MenuMode(menu)
        self.resp: Any = None        # the last model response, as the mode reads it
        self.messages: list[dict[str, Any]] = []
        self.sync = sync  # how to call the model and finish the user's awaitables
        self.validate, self.reask = check_validate(validate), reask
        self.repair = check_repair(repair)
        self._enclosing: tuple[int, int] | None = None  # see check()
        self.context = dict(context or {})
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
            max_attempts=max_attempts, runtime=getattr(runtime, "name", None),
            context_keys=sorted(self.context), mode=self.mode.name,
            model=getattr(runtime, "model", None), provider=getattr(runtime, "provider", None),
            shortlist=shortlist)
        self.att: Attempt | None = None  # None until the first new_attempt()
        self.shown: Attempt | None = None  # the last record an observer was handed
        self._t0 = time.perf_counter()
        run = current_run.get()  # the run whose tree holds this decision (openprogram.runs)
        if run is not None:
            run.decision_started(self.trace)
        self._emit("decision_started", self.trace)

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

        ask, cascade = self.confidence, None
        stages = getattr(self.runtime, "cascade_stages", None)
        try:
            if stages:
                resp, node, conf, missing, cascade = await self._cascade(
                    stages, messages, extra, on_text, specs)
            elif ask is None and not (self.mode.menu_in_prompt
                                      and getattr(self.runtime, "takes_menu", False)):
                # what _ask and _once do in this case, without their two frames (every
                # decision without confidence= comes here)
                conf = missing = None
                if self.sync:
                    resp, node = self.model.call_model(messages, on_text=on_text,
                                                       deadline=self.deadline, **extra)
                else:
                    resp, node = await self.model.acall_model(messages, on_text=on_text,
                                                              deadline=self.deadline, **extra)
            else:
                resp, node, conf, missing = await self._ask(self.model, ask, messages, extra,
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
                   cached=getattr(resp, "cached", False),
                   tool_calls=[tc.to_dict() for tc in resp.tool_calls] if resp.tool_calls
                   else None,
                   **({"confidence": conf} if ask is not None or stages else {}),
                   **({"cascade": cascade} if stages else {}))
        if missing is not None:
            self.fail_with(AttemptError("no_confidence", missing))
        return resp

    async def _ask(self, rt: ModelCaller, ask: ConfidenceAsk | None,
                   messages: list[dict[str, Any]], extra: dict[str, Any],
                   on_text: Callable[[str], None] | None,
                   specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any, str | None]:
        """One attempt's model call on `rt`, with what `ask` wants of its probabilities:
        `(response, node, Confidence or None, why there is none when one was asked for)`."""
        if self.mode.menu_in_prompt and getattr(rt, "takes_menu", False):
            extra = {**extra, "menu": self.menu_text}  # where the prompt's menu is, as data
        if ask is None:
            resp, node = await self._once(rt, messages, extra, on_text)
            return resp, node, None, None
        if not ask.native:
            return (*await self._sample(rt, ask.samples, messages, extra, on_text, specs), None)
        resp, node = await self._once(rt, messages, {**extra, "confidence": list(self.by_name)},
                                      on_text)
        if resp.confidence is not None:
            return resp, node, from_response(resp.confidence, list(self.by_name)), None
        if ask.samples is not None:  # the user allowed samples in its place
            spent = resp.usage
            resp, node, conf = await self._sample(rt, ask.samples, messages, extra, on_text,
                                                  specs)
            return dataclasses.replace(resp, usage=_add_usage([spent, resp.usage])), node, \
                conf, None
        return resp, node, None, self._no_distribution(resp, rt)

    async def _cascade(self, stages: list[Any], messages: list[dict[str, Any]],
                       extra: dict[str, Any], on_text: Callable[[str], None] | None,
                       specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any, Any, list[Any]]:
        """A `CascadeRuntime`: each stage asked in turn until one is sure enough of its pick
        (`min_confidence`), the last one's reply standing whatever its probability. Every stage
        asked is recorded, with its tokens; the attempt's tokens are all of theirs."""
        threshold = getattr(self.runtime, "min_confidence", 1.0)
        asked: list[dict[str, Any]] = []
        spent = []
        for k, (rt, ask) in enumerate(stages):
            last = k == len(stages) - 1
            resp, node, conf, _ = await self._ask(rt, ask, messages, extra,
                                                  on_text if k == 0 else None, specs)
            name = self._named(resp)
            if conf is not None and name in self.by_name:
                conf = replace(conf, pick=name)
            p = conf.p_pick if conf is not None and name in self.by_name else None
            spent.append(resp.usage)
            asked.append({"runtime": getattr(rt, "name", None), "pick": name, "p_pick": p,
                          "answered": False, "usage": dict(resp.usage) if resp.usage else None,
                          "confidence": conf.to_dict() if conf is not None else None})
            if last or (p is not None and p >= threshold):
                asked[-1]["answered"] = True
                resp = dataclasses.replace(resp, usage=_add_usage(spent))
                return resp, node, conf, None, asked
        raise RuntimeError("internal error: a cascade with no stage")

    async def _once(self, rt: ModelCaller, messages: list[dict[str, Any]],
                    extra: dict[str, Any],
                    on_text: Callable[[str], None] | None) -> tuple[Any, Any]:
        if self.sync:
            return rt.call_model(messages, on_text=on_text, deadline=self.deadline, **extra)
        return await rt.acall_model(messages, on_text=on_text, deadline=self.deadline, **extra)

    async def _sample(self, rt: ModelCaller, s: Any, messages: list[dict[str, Any]],
                      extra: dict[str, Any], on_text: Callable[[str], None] | None,
                      specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any]:
        """`confidence=Samples(n)`: n replies to the same request, each its own call (its
        index goes with the request as `sample=`, so a cache or a cassette keeps each apart),
        concurrently on the async path. The reply that resolves is the first drawn of the most
        frequent pick; the tokens are those of all n."""
        if specs:
            raise UsageError("confidence=decision.Samples(n) cannot be drawn in a turn that "
                             "calls tools (each sample would run the tools again); ask without "
                             "tools=, or with confidence=True on a runtime that gives a "
                             "distribution (LlamaCppRuntime, OpenAIRuntime)")
        base = {k: v for k, v in extra.items() if k != "confidence"}
        # `samples=` lets a runtime that can draw the n in one request (OpenAI's n=) do so
        calls = [(on_text if i == 0 else None, {**base, "sample": i, "samples": s.n,
                                                 "temperature": s.temperature})
                 for i in range(s.n)]
        if self.sync:
            got = [rt.call_model(messages, on_text=show, deadline=self.deadline, **kw)
                   for show, kw in calls]
        else:
            import asyncio
            tasks = [asyncio.ensure_future(rt.acall_model(messages, on_text=show,
                                                          deadline=self.deadline, **kw))
                     for show, kw in calls]
            try:
                got = await asyncio.gather(*tasks)
            except BaseException:  # one sample failed (or the decision was cancelled): the
                for t in tasks:     # others are not left running on their own
                    t.cancel()
                raise
        conf, i = from_counts([self._named(r) for r, _ in got], list(self.by_name))
        resp, node = got[i]
        # a copy: a scripted runtime may hand out the same response object again
        resp = dataclasses.replace(resp, usage=_add_usage([r.usage for r, _ in got]),
                                   cached=all(getattr(r, "cached", False) for r, _ in got))
        return resp, node, conf

    def _named(self, resp: Any) -> str | None:
        """The option a sample's reply names, or None (unreadable, refused, no pick)."""
        if getattr(resp, "refusal", None):
            return None
        try:
            action = self.mode.action(resp).action
        except Exception:  # a reply the mode cannot read counts as `other`
            return None
        name = action.get("call") if isinstance(action, dict) else None
        return name if isinstance(name, str) else None

    def _no_distribution(self, resp: Any, rt: Any) -> str:
        name = getattr(rt, "name", None) or type(rt).__name__
        negotiated = (resp.raw or {}).get("negotiated") if isinstance(resp.raw, dict) else None
        why = f" (the server's answer: {negotiated})" if negotiated else ""
        return (f"runtime {name!r} returned no probabilities for this reply{why}; ask with "
                f"confidence=decision.Samples(5, fallback=True) to draw samples when it gives "
                f"none")

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
        if getattr(resp, "refusal", None):
            raise AttemptError("refused", f"the provider reports that the model refused: "
                                        f"{resp.refusal}")
        if not resp.tool_calls and not isinstance(att.reply, str):
            raise AttemptError("not_text", f"the model reply is {type(att.reply).__name__}, "
                                         f"not text")
        ex = self.mode.action(resp)
        repairs: list[Any] = []
        inner = self._enclosing
        if inner is not None:
            ex, repairs = _repair.repair_extraction(att.reply, replace(ex, action=None),
                                                     "safe", [], resp.finish_reason in TRUNCATED)
            if not repairs or ex.span is None or not (ex.span[0] <= inner[0]
                                                      and inner[1] <= ex.span[1]):
                raise _NotEnclosing
        elif ex.action is None and self.repair != "off" and getattr(self.mode, "require_key",
                                                                    True):
            # the strict reading found nothing: a reply it can read as written is never repaired
            ex, repairs = _repair.repair_extraction(att.reply, ex, self.repair,
                                                     list(self.menu),
                                                     resp.finish_reason in TRUNCATED)
        # the pick as decoded, redacted before anything reads it: JSON can spell a key the
        # runtime's redaction of the reply text did not see
        ex.action, redacted = redact_decoded(ex.action, getattr(self.runtime, "redact", None))
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
                if self.repair == "off" or self.cur.repairs or self.cur.span is None \
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
        if option is None and self.repair == "menu":
            near = _repair.repair_name(name, list(self.by_name))
            if near is not None:
                option = self.by_name[near]
                self._add_repairs([_repair.Repair("option_name", "call", json.dumps(
                    name, ensure_ascii=False), json.dumps(near, ensure_ascii=False))])
        if self.cur.confidence is not None and option is not None:
            self._change(confidence=replace(self.cur.confidence, pick=name))
        if option is None:
            err = AttemptError("unknown_call", f"{name!r} is not an option; the options are "
                                             f"{', '.join(self.by_name)}", "call")
            setattr(err, "hint", _repair.name_hint(name, list(self.by_name)))  # for the re-ask
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
        if self.repair == "menu":
            return option, self._bind_repairing(option, args, dropped)
        try:
            return option, self.bind(option, args, dropped)
        except AttemptError as err:  # the re-ask names the fix repair="menu" would have made
            setattr(err, "hint", _repair.value_hint(err, option, args))
            raise

    def _unwrapped(self, action: dict[str, Any]) -> dict[str, Any]:
        """The pick of an object without "call": with repair="menu", the one option whose
        parameters its keys match (call_wrapper); else the error that says what is missing."""
        if self.repair == "menu":
            got = _repair.repair_wrapper(action, list(self.menu))
            if got is not None:
                pick = {"call": got[0], "args": got[1]}
                self._step("extracted", extracted=pick, key_alias="call")
                self._add_repairs([_repair.Repair("call_wrapper", "call", _repair._json(action),
                                                  _repair._json(pick))])
                return pick
        raise AttemptError("bad_args", 'the pick has no "call" naming the option; write it as '
                                     'in the option\'s "Call:" line', "call")

    def _add_repairs(self, repairs: list[Any]) -> None:
        repairs = _repair.redact_repairs(repairs, getattr(self.runtime, "redact", None))
        self._step("repaired", repairs=[*self.cur.repairs, *repairs])

    def _bind_repairing(self, option: Option, args: dict[str, Any],
                        dropped: list[str]) -> dict[str, Any]:
        """`bind`, and where a value fails that the option's schema makes unambiguous (an
        enum value in other case, "3" for an integer), the value repaired and bound again: a
        bounded number of times, each fix recorded."""
        fixes: list[Any] = []
        for _ in range(_repair.MAX_VALUE_FIXES):
            try:
                out = self.bind(option, args, list(dropped))
                break
            except AttemptError as err:
                fix = (_repair.value_fix(option, args, err.path)
                       if err.kind in ("type_mismatch", "enum_violation") and err.path else None)
                if fix is None:
                    if fixes:
                        self._add_repairs(fixes)
                    raise
                args, done = fix
                fixes.append(done)
        else:
            out = self.bind(option, args, list(dropped))
        if fixes:
            self._add_repairs(fixes)
        return out

    def bind(self, option: Option, args: dict[str, Any],
             dropped: list[str]) -> dict[str, Any]:
        """The option's validated arguments plus injected ones; what was kept, dropped and
        injected goes into the record, also when a field fails."""
        injected: list[str] = []
        try:
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
            where = value_span(att.reply, att.span, err.path, att.repairs)
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
                if self.validate is not None:
                    await self._rule(option)
                self._step("validated")
                if not run:
                    return option, kwargs
                return await self.resolve(option, kwargs)
            except AttemptError as err:
                self.record_failure(err)
                if self.cur.is_last:
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
        if self.low_confidence is None:
            self.record_failure(AttemptError(
                "low_confidence", f"the model picked {option.name!r} with probability {shown}, "
                                  f"below min_confidence={m}"))
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


class _NotEnclosing(Exception):
    """No repaired pick encloses the strict one: the strict reading's error stands."""


def _reply_shown(att: Attempt) -> Any:
    """The previous reply as a re-ask repeats it: its text, or the tool calls it made."""
    if att.tool_calls and not (isinstance(att.reply, str) and att.reply.strip()):
        return "\n".join(f"{c['name']}({json.dumps(c.get('args'), ensure_ascii=False)})"
                         for c in att.tool_calls)
    return att.reply


def _add_usage(usages: list[Any]) -> dict[str, Any] | None:
    """The token counts of several calls added up (None when none of them reported any)."""
    known = [u for u in usages if u]
    if not known:
        return None
    total: dict[str, Any] = {}
    for u in known:
        for k, v in u.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                total[k] = total.get(k, 0) + v
    return total


def max_attempts(max_retries: Any) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ArgumentError(f"max_retries must be a whole number >= 0 (0 turns re-asks off), got "
                         f"{max_retries!r}")
    return max_retries + 1


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


class Plan:
    """A decision's settings checked once — `make`'s checks, the menu normalized and rendered —
    then run for one prompt at a time (`run`). `make` builds one per call; an evaluation builds
    one for all its rows, so a row does only what depends on its prompt."""

    __slots__ = ("runtime", "menu", "menu_text", "context", "attempts", "timeout_s", "entry",
                 "validate", "reask", "way", "ask", "min_confidence", "low_confidence",
                 "repair", "shortlist")

    def __init__(self, options: Options, *, runtime: ModelCaller | None,
                 context: dict[str, Any] | None, max_retries: int, timeout_s: float | None,
                 entry: str, validate: Callable[..., Any] | None, reask: Any, mode: Any,
                 confidence: Any = None, min_confidence: Any = None, low_confidence: Any = None,
                 repair: Any = None, shortlist: Any = None) -> None:
        self.reask = check_reask(reask)
        self.repair = check_repair(repair)
        self.way = way = get_mode(mode)
        self.attempts = max_attempts(max_retries)
        deadline_after(timeout_s)  # checked now; each run's deadline counts from its start
        self.timeout_s, self.entry, self.validate = timeout_s, entry, validate
        self.shortlist = check_shortlist(shortlist)
        self.menu = menu = normalize(edited_options(options))  # a fork may edit them
        check_context(menu, context)
        self.context = context
        self.runtime = rt = resolve_runtime(runtime, entry)
        check_modes(rt, way.name)
        self.ask = ask = check_confidence(confidence, rt, where=entry, mode=way.name)
        # the names are read only to check a low_confidence= option, which needs min_confidence=
        check_threshold(min_confidence, low_confidence,
                        [o.name for o in menu] if min_confidence is not None else (), ask, entry)
        self.min_confidence, self.low_confidence = min_confidence, low_confidence
        # without a shortlist the model sees the whole menu, the same text for every prompt
        self.menu_text = render_menu(menu) if self.shortlist is None else None

    async def run(self, prompt: str, *, sync: bool,
                  keep: list[DecisionTrace] | None = None) -> Any:
        """The decision for `prompt`: its result, or its DecisionError. `keep` gets the
        decision's trace as soon as it starts (a row keeps it whatever ends the decision)."""
        if not isinstance(prompt, str):
            raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
        rt, way, menu, menu_text = self.runtime, self.way, self.menu, self.menu_text
        deadline = deadline_after(self.timeout_s)
        listing = None
        if menu_text is None:  # the model sees, and may pick, these only
            menu, listing = narrow(self.shortlist, prompt, menu, runtime=rt, mode=way.name)
            menu_text = render_menu(menu)
        with rt.dag.span("decision", self.entry):
            d = Decider(rt, menu, request=prompt, context=self.context,
                        max_attempts=self.attempts, entry="make", deadline=deadline,
                        menu_text=menu_text, sync=sync, validate=self.validate,
                        reask=self.reask, mode=way(menu), confidence=self.ask,
                        min_confidence=self.min_confidence, low_confidence=self.low_confidence,
                        repair=self.repair, shortlist=listing)
            if keep is not None:
                keep.append(d.trace)
            with d.running():
                text = d.mode.prompt(prompt, menu_text)
                d.new_attempt(text)
                await d.call([{"role": "user", "content": text}])
                return await d.settle()


async def _make(prompt: str, options: Options, *, sync: bool, **settings: Any) -> Any:
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
    return await Plan(options, **settings).run(prompt, sync=sync)


def make(prompt: str, options: Options, *, runtime: ModelCaller | None = None,
         context: dict[str, Any] | None = None, max_retries: int = 1,
         timeout_s: float | None = None, validate: Callable[..., Any] | None = None,
         reask: str | Callable[[Reask], str] | None = None, mode: ModeName = "menu",
         confidence: Any = False, min_confidence: float | None = None,
         low_confidence: str | None = None, repair: str | None = None,
         shortlist: int | Shortlist | None = None) -> Any:
    """Pure decision (rule E1 of docs/rules.md): send `prompt + "\\n\\n" + menu` in one model call
    and return the resolved result of the model's pick. Your prompt must ask the model to pick.
    Works with async models and async options too, also inside a running event loop (a notebook
    cell): they are finished before the result comes back.

    `validate=rule` is called with the `Pick` before anything runs; raising
    `openprogram.Retry("why")` rejects it (kind `rejected`, "why" goes to the model in the
    re-ask). `reask=` replaces the re-ask text: a format template with the fields of `Reask`
    ({request}, {reply}, {kind}, {error}, {path}, {menu}, {attempt}, {hint}) or a callable of a
    `Reask`.
    `mode=` is the way of asking: "menu" (the text menu, the default), "tools" (one native
    tool per option) or "json_schema" (the provider's structured output); see modes.py.

    `confidence=True` puts the model's probability of every option on each attempt
    (`trace.confidence`, a `Confidence`), from the runtime's own numbers;
    `confidence=decision.Samples(n)` counts the picks of n replies instead (any runtime).
    `min_confidence=p` fails a pick below p as `low_confidence`, or resolves the option named
    by `low_confidence=` in its place.
    `repair=` is how sloppy a reply may be and still be read without a re-ask: "off" (every
    deviation is re-asked), "safe" (the default: JSON syntax where one value is meant) or
    "menu" (also what the options make unambiguous); each repair is on `attempt.repairs`.
    `shortlist=k` (or `Shortlist(k, by=...)`) shows the model only the k options that rank
    highest against the prompt (BM25 by default); the trace records the ranking
    (`trace.shortlist`, `trace.pick_rank`); see options/shortlist.py."""
    return run_sync(_make(prompt, options, runtime=runtime, context=context,
                          max_retries=max_retries, timeout_s=timeout_s, sync=True,
                          entry="decision.make", validate=validate, reask=reask, mode=mode,
                          confidence=confidence, min_confidence=min_confidence,
                          low_confidence=low_confidence, repair=repair, shortlist=shortlist))


async def amake(prompt: str, options: Options, *, runtime: ModelCaller | None = None,
                context: dict[str, Any] | None = None, max_retries: int = 1,
                timeout_s: float | None = None, validate: Callable[..., Any] | None = None,
                reask: str | Callable[[Reask], str] | None = None,
                mode: ModeName = "menu", confidence: Any = False,
                min_confidence: float | None = None, low_confidence: str | None = None,
                repair: str | None = None, shortlist: int | Shortlist | None = None) -> Any:
    """`make`, awaitable: the model call goes through the runtime's async path
    (`acall_model`), async options are awaited, and many `amake`s run concurrently on one
    event loop. Cancelling the task finishes its trace as failed."""
    return await _make(prompt, options, runtime=runtime, context=context,
                       max_retries=max_retries, timeout_s=timeout_s, sync=False,
                       entry="decision.amake", validate=validate, reask=reask, mode=mode,
                       confidence=confidence, min_confidence=min_confidence,
                       low_confidence=low_confidence, repair=repair, shortlist=shortlist)


def parse_args(reply: Any, options: Options, *, runtime: ModelCaller | None = None,
               context: dict[str, Any] | None = None, max_retries: int = 1, prompt: str = "",
               validate: Callable[..., Any] | None = None,
               reask: str | Callable[[Reask], str] | None = None,
               repair: str | None = None) -> tuple[Any, dict[str, Any]]:
    """Parse and validate a reply (rules P1-P7 of docs/rules.md) into `(chosen, kwargs)`: the
    function for a function option, the name for a value or schema option. On a bad reply, re-asks
    through the runtime (`max_retries` times); with no runtime, a bad reply raises DecisionError at
    once."""
    attempts = max_attempts(max_retries)
    reask = check_reask(reask)
    repair = check_repair(repair)
    menu = normalize(options)
    check_context(menu, context)
    if runtime is None:
        runtime = current_runtime()
    if runtime is None:
        attempts = 1
    d = Decider(runtime, menu, request=prompt, context=context, max_attempts=attempts,
                entry="parse", validate=validate, reask=reask, repair=repair)
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
