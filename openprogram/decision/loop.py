"""The decision loop: options → menu → reply → pick → result.

`make(prompt, options)` sends the prompt and the rendered menu in one model call, finds the pick in
the reply, validates its arguments, re-asks on a bad reply, and resolves the pick into the result
(rules E1, P1-P8, Z1). `parse_args` and `resolve_decision` are its two halves on their own. The
loop talks to the model only through the `ModelCaller` protocol and to option kinds only through
their methods; each step makes a new frozen `Attempt` record and emits it, and the trace is
assembled from those events. Entry points that run a whole turn first (`agent(options=)`,
`exec(response_format=)`) live one layer up, in runtime.py, and drive the same `Decider`.
"""
from __future__ import annotations

import contextlib
import json
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Callable, Iterator, NoReturn, Sequence

    from ..base.type_names import ModeName, Options
    from .extract import Extraction

from ..base.errors import (ArgumentError, DecisionError, ModelCallError, ParseError, Retry, UsageError,
                           WaitTimeout, explain, reply_head)
from .extract import extract_action, value_span
from .modes import MenuMode, Mode, get_mode
from ..base.model_protocol import (ModelCaller, ModelResponse, check_modes, current_runtime, deadline_after,
                                   resolve_runtime, run_sync, settle_value)
from .options import (Menu, Option, call_function, check_context, normalize, option_infos,
                      render_menu, safe_key)
from .options.shortlist import Shortlist, check_shortlist, narrow
from ..trace.records import Attempt, Pick, Reask, replace
from ..base.redaction import redact_decoded
from ..trace.decision_trace import DecisionTrace, emit, record

__all__ = ["make", "amake", "render_options", "extract_action", "parse_args", "resolve_decision",
           "DECISION_FINISH_INSTRUCTION", "DEFAULT_REASK", "Decider", "reask_prompt",
           "check_reask", "check_validate"]

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


def check_reask(reask: Any) -> Callable[[Reask], str] | None:
    """`reask=` as a function of a `Reask`: None (the default text), a format template naming
    only the fields of `Reask`, or a callable. Checked before any model call."""
    if reask is None or callable(reask):
        own: Callable[[Reask], str] | None = reask
        return own
    if not isinstance(reask, str):
        raise UsageError(f"reask= takes a format template (str) or a callable of the failure, got "
                        f"{type(reask).__name__}")
    import string
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


def reask_prompt(request: str, reply: Any, err: ParseError, menu_text: str,
                 reask: Callable[[Reask], str] | None = None, attempt: int = 1) -> str:
    """The re-ask (P7): by default the request, the previous reply, the problem, and the menu
    again; `reask` (from `check_reask`) writes the user's own text from the same facts."""
    shown = _bounded(reply if isinstance(reply, str) else repr(reply))
    facts = Reask(request=request, reply=shown, kind=err.kind, error=err.message,
                  path=err.path or "", menu=menu_text, attempt=attempt)
    if reask is not None:
        text = reask(facts)
        if not isinstance(text, str):
            raise UsageError(f"reask= callable returned {type(text).__name__}; it must return "
                            f"the text to send (a str)")
        return text
    return DEFAULT_REASK.format(request=request, reply=shown, kind=err.kind, error=err.message,
                               menu=menu_text, advice=explain(err.kind),
                               at_path=f" at {err.path}" if err.path else "")


class Decider:
    """One decision in progress. It holds the current attempt as a frozen record and moves it
    forward with `_step`, which makes the next record and emits it; nothing else changes a
    record or the trace."""

    def __init__(self, runtime: ModelCaller | None, menu: Sequence[Option], *, request: str,
                 context: dict[str, Any] | None, max_attempts: int, entry: str,
                 deadline: float | None = None, menu_text: str | None = None,
                 sync: bool = True, validate: Callable[..., Any] | None = None,
                 reask: Callable[[Reask], str] | None = None, mode: Mode | None = None,
                 quiet: bool = False, shortlist: dict[str, Any] | None = None) -> None:
        self.runtime, self.menu, self.request = runtime, menu, request
        self._emit = record if quiet else emit  # quiet: the trace only, no observers
        self.mode = mode or MenuMode(menu)
        self.resp: Any = None        # the last model response, as the mode reads it
        self.messages: list[dict[str, Any]] = []
        self.sync = sync  # how to call the model and finish the user's awaitables
        self.validate, self.reask = check_validate(validate), reask
        self.context = dict(context or {})
        self.deadline = deadline
        self.by_name = menu.by_name if isinstance(menu, Menu) else {o.name: o for o in menu}
        self.menu_text = menu_text if menu_text is not None else render_menu(menu)
        # What the mode adds to every model call (tools, schema), built once per decision: in
        # tools mode it is every option's JSON Schema.
        self._request = self.mode.request()
        self.sent = self._request or None
        self.trace = DecisionTrace(
            prompt=request, menu=self.menu_text, options=option_infos(menu), entry=entry,
            max_attempts=max_attempts, runtime=getattr(runtime, "name", None),
            context_keys=sorted(self.context), mode=self.mode.name,
            model=getattr(runtime, "model", None), provider=getattr(runtime, "provider", None),
            shortlist=shortlist)
        self.att: Attempt | None = None  # None until the first new_attempt()
        self._t0 = time.perf_counter()
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
        self.att = replace(self.cur, **changes)
        self._emit(kind, self.trace, self.att)
        return self.att

    # -- model calls --------------------------------------------------------------------------
    def new_attempt(self, prompt: str) -> Attempt:
        n = len(self.trace.attempts) + 1
        self.att = Attempt(number=n, is_last=n >= self.trace.max_attempts, prompt=prompt,
                           sent=self.sent)
        self._emit("attempt_sent", self.trace, self.att)
        return self.att

    async def call(self, messages: list[dict[str, Any]],
                   specs: list[dict[str, Any]] | None = None) -> Any:
        """One model call for the current attempt. Streamed text reaches observers as chunk
        events carrying only the new text; the record gets the whole reply when it is in (in a
        turn with tool rounds, the last round's)."""
        parts: list[str] = []
        t0 = time.perf_counter()
        trace, att = self.trace, self.cur
        self.messages = messages
        extra = dict(self._request)
        if specs is not None:  # a turn's work tools go with the mode's own (tools mode: choices)
            own = extra.get("tools", [])
            taken = {t["name"] for t in own}  # a function that is both goes once, as the choice
            extra["tools"] = [*(t for t in specs if t["name"] not in taken), *own]

        def on_text(chunk: str) -> None:
            parts.append(chunk)
            self._emit("reply_chunk", trace, att, text=chunk)

        try:
            if self.sync:
                resp, node = self.model.call_model(messages, on_text=on_text,
                                                     deadline=self.deadline, **extra)
            else:
                resp, node = await self.model.acall_model(messages, on_text=on_text,
                                                            deadline=self.deadline, **extra)
        except ModelCallError as exc:
            self.att = replace(self.cur, reply=exc.partial or "".join(parts),
                               duration_s=self._elapsed(t0))
            self.fail_with(ParseError(exc.kind, str(exc)), cause=exc)
        except Exception as exc:
            self.att = replace(self.cur, reply="".join(parts),
                               duration_s=self._elapsed(t0))
            self.fail_with(ParseError("model_error", f"{type(exc).__name__}: {exc}"), cause=exc)
        usage = dict(resp.usage) if resp.usage else self.cur.usage
        self.resp = resp
        self._step("reply_received", reply=resp.text, model_call_id=node.id, usage=usage,
                   duration_s=self._elapsed(t0), finish_reason=resp.finish_reason, raw=resp.raw,
                   cached=getattr(resp, "cached", False),
                   tool_calls=[tc.to_dict() for tc in resp.tool_calls] or None)
        return resp

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
            raise ParseError("refused", f"the provider reports that the model refused: "
                                        f"{resp.refusal}")
        if not resp.tool_calls and not isinstance(att.reply, str):
            raise ParseError("not_text", f"the model reply is {type(att.reply).__name__}, "
                                         f"not text")
        ex = self.mode.action(resp)
        # the pick as decoded, redacted before anything reads it: JSON can spell a key the
        # runtime's redaction of the reply text did not see
        ex.action, redacted = redact_decoded(ex.action, getattr(self.runtime, "redact", None))
        if ex.action is None:
            self._step("extracted", candidates=ex.candidates)
            if resp.finish_reason in TRUNCATED:
                raise ParseError("truncated", f"the reply was cut off at the token limit "
                                              f"(finish reason {resp.finish_reason!r}) before "
                                              f"a complete pick: {ex.problem}")
            raise ParseError("no_action", ex.problem or "no JSON object picks an option")
        self._step("extracted", candidates=ex.candidates, extracted=ex.action,
                   found_in=ex.found_in, key_alias=ex.key, span=ex.span, redacted=redacted)
        return ex

    def check(self) -> tuple[Option, dict[str, Any]]:
        """Find the pick in the reply and validate it (P1-P5)."""
        ex = self.extract()
        assert ex.action is not None  # extract() raised otherwise
        name = ex.action["call"]  # whichever alias the model wrote; ex.key keeps that alias
        if not isinstance(name, str):
            raise ParseError("bad_args", f'"{ex.key}" must be an option name (a string), got '
                                         f"{type(name).__name__}", "call")
        option = self.by_name.get(name)
        if option is None:
            raise ParseError("unknown_call", f"{name!r} is not an option; the options are "
                                             f"{', '.join(self.by_name)}", "call")
        dropped: list[str] = []
        if "args" in ex.action:
            args = ex.action["args"]
            if args is None:
                args = {}
            if not isinstance(args, dict):
                self.att = replace(self.cur, chosen=name)
                raise ParseError("bad_args", f'"args" must be a JSON object, got '
                                             f"{type(args).__name__}", "args")
            dropped += [safe_key(k) for k in ex.action if k not in ("call", "args")]
        else:  # the flat form {"call": "x", "field": ...}; its paths still read args.field
            args = {k: v for k, v in ex.action.items() if k != "call"}
        return option, self.bind(option, args, dropped)

    def bind(self, option: Option, args: dict[str, Any],
             dropped: list[str]) -> dict[str, Any]:
        """The option's validated arguments plus injected ones; what was kept, dropped and
        injected goes into the record, also when a field fails."""
        injected: list[str] = []
        try:
            kwargs, kept = option.bind(args, runtime=self.runtime, context=self.context,
                                       dropped=dropped, injected=injected)
        finally:
            self.att = replace(self.cur, chosen=option.name, dropped=list(dropped),
                               injected=list(injected))
        self.att = replace(self.cur, args=kept)
        out: dict[str, Any] = kwargs
        return out

    def record_failure(self, err: ParseError) -> None:
        # Where the offending value sits in the raw reply: looked for only now, off the path
        # of a decision that succeeds.
        att = self.cur
        where = None
        if err.path and att.span is not None and isinstance(att.reply, str):
            where = value_span(att.reply, att.span, err.path)
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
                if self.validate is not None:
                    await self._rule(option)
                self._step("validated")
                if not run:
                    return option, kwargs
                return await self.resolve(option, kwargs)
            except ParseError as err:
                self.record_failure(err)
                if self.cur.is_last:
                    self.fail()
                prompt = reask_prompt(self.request, _reply_shown(self.cur), err,
                                      self.mode.menu_for_reask(self.menu_text), self.reask,
                                      self.cur.number)
                self.new_attempt(prompt)
                await self.call(self.mode.reask_messages(self.messages, self.resp, prompt))

    async def _rule(self, option: Option) -> None:
        pick = Pick(option.name, dict(self.cur.args or {}), option)
        if self.validate is None:
            return
        try:
            verdict = await settle_value(self.validate(pick), self.sync, self.deadline)
        except Retry as r:
            raise ParseError(r.kind, r.message) from None
        except WaitTimeout as exc:
            self.fail_with(ParseError("timeout", str(exc)), cause=exc)
        if verdict is False:  # a predicate says no as plainly as a Retry does
            raise ParseError("rejected", f"the validate= rule returned False for the pick of "
                                         f"{option.name!r}; pick again")

    def fail_with(self, err: ParseError, cause: BaseException | None = None) -> NoReturn:
        self.record_failure(err)
        self.fail(cause)

    def fail(self, cause: BaseException | None = None) -> NoReturn:
        att = self.cur
        err = DecisionError(att.error_kind or "model_error", att.error_message or "",
                            reply_head(att.reply), self.trace, att.error_path)
        self.finish("decision_failed", error=err)
        raise err from cause

    async def resolve(self, option: Option, kwargs: dict[str, Any]) -> Any:
        try:
            result = await settle_value(option.resolve(kwargs), self.sync, self.deadline)
        except Retry as r:  # the option itself rejected the pick: re-ask (settle catches it)
            raise ParseError(r.kind, r.message) from None
        except WaitTimeout as exc:  # timeout_s covers the option's own wait too
            self.fail_with(ParseError("timeout", str(exc)), cause=exc)
        except BaseException as exc:
            self.finish("decision_failed", error=exc)
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised by option {option.name!r} of decision #{self.trace.id}; "
                             f"its trace: decision.last_trace()")
            raise
        return self.finish("resolved", result=result)

    @contextlib.contextmanager
    def running(self) -> Iterator[Decider]:
        """The decision's body. Whatever ends it early (Ctrl-C, a cancelled evaluate row, a bug)
        still finishes the trace as failed, so it never stays "running"."""
        try:
            yield self
        except BaseException as exc:
            if self.trace.status == "running":
                self.finish("decision_failed", error=exc)
            raise

    def finish(self, kind: str, result: Any = None, error: BaseException | None = None) -> Any:
        # The current attempt's last record goes with the outcome: a pick that a rule or the
        # option itself ended with an exception of the user's was never emitted otherwise.
        self._emit(kind, self.trace, self.att, result=result, error=error,
             duration_s=time.perf_counter() - self._t0)
        return result


def _reply_shown(att: Attempt) -> Any:
    """The previous reply as a re-ask repeats it: its text, or the tool calls it made."""
    if att.tool_calls and not (isinstance(att.reply, str) and att.reply.strip()):
        return "\n".join(f"{c['name']}({json.dumps(c.get('args'), ensure_ascii=False)})"
                         for c in att.tool_calls)
    return att.reply


def max_attempts(max_retries: Any) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ArgumentError(f"max_retries must be a whole number >= 0 (0 turns re-asks off), got "
                         f"{max_retries!r}")
    return max_retries + 1


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


async def _make(prompt: str, options: Options, *, runtime: ModelCaller | None,
                context: dict[str, Any] | None, max_retries: int, timeout_s: float | None,
                sync: bool, entry: str, validate: Callable[..., Any] | None, reask: Any,
                mode: Any, shortlist: Any = None) -> Any:
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
    reask = check_reask(reask)
    way = get_mode(mode)
    attempts = max_attempts(max_retries)
    deadline = deadline_after(timeout_s)
    shortlist = check_shortlist(shortlist)
    menu = normalize(options)
    check_context(menu, context)
    rt = resolve_runtime(runtime, entry)
    check_modes(rt, way.name)
    menu, listing = narrow(shortlist, prompt, menu)  # the model sees, and may pick, these only
    menu_text = render_menu(menu)
    with rt.dag.span("decision", entry):
        d = Decider(rt, menu, request=prompt, context=context, max_attempts=attempts,
                    entry="make", deadline=deadline, menu_text=menu_text, sync=sync,
                    validate=validate, reask=reask, mode=way(menu), shortlist=listing)
        with d.running():
            text = d.mode.prompt(prompt, menu_text)
            d.new_attempt(text)
            await d.call([{"role": "user", "content": text}])
            return await d.settle()


def make(prompt: str, options: Options, *, runtime: ModelCaller | None = None,
         context: dict[str, Any] | None = None, max_retries: int = 1,
         timeout_s: float | None = None, validate: Callable[..., Any] | None = None,
         reask: str | Callable[[Reask], str] | None = None, mode: ModeName = "menu",
         shortlist: int | Shortlist | None = None) -> Any:
    """Pure decision (rule E1 of docs/rules.md): send `prompt + "\\n\\n" + menu` in one model call and return the
    resolved result of the model's pick. Your prompt must ask the model to pick. Works with
    async models and async options too, also inside a running event loop (a notebook cell):
    they are finished before the result comes back.

    `validate=rule` is called with the `Pick` before anything runs; raising
    `openprogram.Retry("why")` rejects it (kind `rejected`, "why" goes to the model in the
    re-ask). `reask=` replaces the re-ask text: a format template with the fields of `Reask`
    ({request}, {reply}, {kind}, {error}, {path}, {menu}, {attempt}) or a callable of a `Reask`.
    `mode=` is the way of asking: "menu" (the text menu, the default), "tools" (one native
    tool per option) or "json_schema" (the provider's structured output); see modes.py.
    `shortlist=k` (or `Shortlist(k, by=...)`) shows the model only the k options that rank
    highest against the prompt (BM25 by default); the trace records the ranking
    (`trace.shortlist`, `trace.pick_rank`); see options/shortlist.py."""
    return run_sync(_make(prompt, options, runtime=runtime, context=context,
                          max_retries=max_retries, timeout_s=timeout_s, sync=True,
                          entry="decision.make", validate=validate, reask=reask, mode=mode,
                          shortlist=shortlist))


async def amake(prompt: str, options: Options, *, runtime: ModelCaller | None = None,
                context: dict[str, Any] | None = None, max_retries: int = 1,
                timeout_s: float | None = None, validate: Callable[..., Any] | None = None,
                reask: str | Callable[[Reask], str] | None = None,
                mode: ModeName = "menu", shortlist: int | Shortlist | None = None) -> Any:
    """`make`, awaitable: the model call goes through the runtime's async path
    (`acall_model`), async options are awaited, and many `amake`s run concurrently on one
    event loop. Cancelling the task finishes its trace as failed."""
    return await _make(prompt, options, runtime=runtime, context=context,
                       max_retries=max_retries, timeout_s=timeout_s, sync=False,
                       entry="decision.amake", validate=validate, reask=reask, mode=mode,
                       shortlist=shortlist)


def parse_args(reply: Any, options: Options, *, runtime: ModelCaller | None = None,
               context: dict[str, Any] | None = None, max_retries: int = 1, prompt: str = "",
               validate: Callable[..., Any] | None = None,
               reask: str | Callable[[Reask], str] | None = None) -> tuple[Any, dict[str, Any]]:
    """Parse and validate a reply (rules P1-P7 of docs/rules.md) into `(chosen, kwargs)`: the function for a function
    option, the name for a value or schema option. On a bad reply, re-asks through the runtime
    (`max_retries` times); with no runtime, a bad reply raises DecisionError at once."""
    attempts = max_attempts(max_retries)
    reask = check_reask(reask)
    menu = normalize(options)
    check_context(menu, context)
    if runtime is None:
        runtime = current_runtime()
    if runtime is None:
        attempts = 1
    d = Decider(runtime, menu, request=prompt, context=context, max_attempts=attempts,
                entry="parse", validate=validate, reask=reask)
    with d.running():
        d.new_attempt(prompt)
        d.received(reply)
        option, kwargs = run_sync(d.settle(run=False))
        d.finish("resolved", result=None)
    return option.chosen(), kwargs


def resolve_decision(chosen: Any, kwargs: dict[str, Any], options: Options | None = None) -> Any:
    """Turn a pick into the next step's result (rule Z1 of docs/rules.md): call a function with the kwargs; look a
    name up in the option set (a value, or `{"decision": name, **kwargs}` for a schema)."""
    if callable(chosen):
        return call_function(chosen, kwargs)
    if options is None:
        raise UsageError("resolve_decision needs the option set to look up the name "
                        f"{chosen!r}: resolve_decision(chosen, kwargs, options)")
    for o in normalize(options):
        if o.name == chosen:
            return o.resolve(kwargs)
    raise KeyError(f"{chosen!r} is not an option of this option set")
