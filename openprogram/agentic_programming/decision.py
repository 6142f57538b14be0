"""The next-step decision: options → menu → reply → pick → result.

`make(prompt, options)` sends the prompt and the rendered menu in one model call, finds the pick in
the reply, validates its arguments, re-asks on a bad reply, and resolves the pick into the result:
the function's return value, the value, or the filled schema. `agent(..., choices=)` goes through
`Runtime.exec`, which runs a normal turn (with native tools) and resolves its last reply the same
way. Every decision leaves a `DecisionTrace` — after success, on the raised `DecisionError`, and
live through observers.
"""
from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Callable

from .extract import extract_action, find_action
from .options import (Field, Option, OptionError, Param, ParseError, call_function,
                      check_context, normalize, option_infos, param_lines, render_menu,
                      schema_field, validate)
from .runtime import ModelCallError, Runtime, blocks_text, deadline_after, resolve_runtime
from .trace import Attempt, DecisionTrace, ToolRound, emit, explain, last_trace
from . import tools as _tools

__all__ = ["make", "render_options", "extract_action", "parse_args", "resolve_decision",
           "DecisionError", "DECISION_FINISH_INSTRUCTION", "last_trace", "OptionError"]

DECISION_FINISH_INSTRUCTION = (
    "Do the work the request needs first (reason, call tools). Then finish: end your reply with "
    "your decision, one JSON object in a ```json fenced block that picks exactly one of the "
    "options below, written as in its \"Call:\" line. Write nothing after it.")

_REPLY_HEAD = 300
_REASK_REPLY_LIMIT = 4000


class DecisionError(ValueError):
    """The model never produced a usable pick. `kind`, `message` and `reply_head` describe the
    last failure; `trace` holds every attempt (so the last invalid reply is never lost)."""

    def __init__(self, kind: str, message: str, reply_head: str | None,
                 trace: DecisionTrace | None = None, path: str | None = None):
        self.kind, self.message, self.reply_head = kind, message, reply_head
        self.trace, self.path = trace, path
        n = len(trace.attempts) if trace else 1
        text = f"no usable decision after {n} attempt(s): [{kind}] {message.rstrip('.')}."
        hint = explain(kind)
        if hint:
            text += f" {hint}"
        if reply_head is not None:
            text += f" The last reply began: {reply_head!r}."
        text += " Every attempt is on err.trace."
        super().__init__(text)

    def __reduce__(self):  # picklable for process pools; the trace travels as a dict
        return (_rebuild_error, (self.kind, self.message, self.reply_head, self.path))


def _rebuild_error(kind, message, reply_head, path):
    return DecisionError(kind, message, reply_head, None, path)


def render_options(options: Any) -> str:
    """The menu text for an option set (rules R1-R3)."""
    return render_menu(normalize(options))


def _head(text: Any, n: int = _REPLY_HEAD) -> str | None:
    if text is None:
        return None
    s = text if isinstance(text, str) else repr(text)
    return s if len(s) <= n else s[:n] + "..."


def _bounded(text: str, n: int = _REASK_REPLY_LIMIT) -> str:
    if len(text) <= n:
        return text
    half = n // 2
    return f"{text[:half]}\n[... {len(text) - n} characters left out ...]\n{text[-half:]}"


def reask_prompt(request: str, reply: Any, err: ParseError, menu_text: str) -> str:
    """The re-ask (P7): the request, the previous reply, the problem, and the menu again."""
    where = f" at {err.path}" if err.path else ""
    shown = reply if isinstance(reply, str) else repr(reply)
    return (
        "Your previous reply could not be used as a decision.\n\n"
        f"The request was:\n{request}\n\n"
        f"Your previous reply was:\n<<<\n{_bounded(shown)}\n>>>\n\n"
        f"The problem ({err.kind}{where}): {err.message}\n{explain(err.kind)}\n\n"
        "Reply again, ending with exactly one JSON object that picks one option, written as in "
        "its \"Call:\" line.\n\n"
        f"{menu_text}")


class _Decider:
    """One decision in progress: the trace, the attempts, the checks."""

    def __init__(self, runtime: Runtime | None, menu: list[Option], *, request: str,
                 context: dict | None, max_attempts: int, entry: str,
                 deadline: float | None = None, menu_text: str | None = None):
        self.runtime, self.menu, self.request = runtime, menu, request
        self.context = dict(context or {})
        self.deadline = deadline
        self.by_name = {o.name: o for o in menu}
        self.menu_text = menu_text if menu_text is not None else render_menu(menu)
        self.trace = DecisionTrace(
            prompt=request, menu=self.menu_text, options=option_infos(menu), entry=entry,
            max_attempts=max_attempts, runtime=getattr(runtime, "name", None),
            context_keys=sorted(self.context))
        self._t0 = time.perf_counter()
        emit("decision_started", self.trace)

    # -- model calls --------------------------------------------------------------------------
    def new_attempt(self, prompt: str) -> Attempt:
        n = len(self.trace.attempts) + 1
        att = Attempt(number=n, is_last=n >= self.trace.max_attempts, prompt=prompt)
        self.trace.attempts.append(att)
        emit("attempt_sent", self.trace, att)
        return att

    def call(self, att: Attempt, messages: list[dict], specs: list[dict] | None = None):
        """One model call for `att`, streaming its text into `att.reply`."""
        att.reply = ""
        t0 = time.perf_counter()

        def on_text(chunk: str) -> None:
            att.reply = (att.reply or "") + chunk
            emit("reply_chunk", self.trace, att, text=chunk)

        try:
            resp, node = self.runtime.call_model(messages, tools=specs, on_text=on_text,
                                                 deadline=self.deadline)
        except ModelCallError as exc:
            att.reply = exc.partial or att.reply
            att.duration_s = time.perf_counter() - t0
            self._record(att, ParseError(exc.kind, str(exc)))
            self.fail(att, cause=exc)
        except Exception as exc:
            att.duration_s = time.perf_counter() - t0
            self._record(att, ParseError("model_error", f"{type(exc).__name__}: {exc}"))
            self.fail(att, cause=exc)
        att.reply = resp.text
        att.model_call_id = node.id
        if resp.usage:
            att.usage = dict(resp.usage)
        att.duration_s = (att.duration_s or 0) + time.perf_counter() - t0
        emit("reply_received", self.trace, att)
        return resp

    # -- checks -------------------------------------------------------------------------------
    def extract(self, att: Attempt, require_key: bool = True):
        """Find the JSON object in `att.reply` (P1, A6); fills the attempt's extraction fields."""
        if not isinstance(att.reply, str):
            raise ParseError("not_text", f"the model reply is {type(att.reply).__name__}, "
                                         f"not text")
        ex = find_action(att.reply, require_key=require_key)
        att.candidates = ex.candidates
        if ex.action is None:
            emit("extracted", self.trace, att)
            raise ParseError("no_action", ex.problem)
        att.extracted, att.found_in = ex.action, ex.found_in
        if require_key:
            att.key_alias = ex.key
        emit("extracted", self.trace, att)
        return ex

    def check(self, att: Attempt) -> tuple[Option, dict]:
        """Find the pick in `att.reply` and validate it (P1-P5). Fills the attempt."""
        ex = self.extract(att)
        name = ex.action[ex.key]
        if not isinstance(name, str):
            raise ParseError("bad_args", f'"{ex.key}" must be an option name (a string), got '
                                         f"{type(name).__name__}", ex.key)
        option = self.by_name.get(name)
        if option is None:
            raise ParseError("unknown_call", f"{name!r} is not an option; the options are "
                                             f"{', '.join(self.by_name)}", ex.key)
        att.chosen = name
        if "args" in ex.action:
            args = ex.action["args"]
            if args is None:
                args = {}
            if not isinstance(args, dict):
                raise ParseError("bad_args", f'"args" must be a JSON object, got '
                                             f"{type(args).__name__}", "args")
            att.dropped += [k for k in ex.action if k not in (ex.key, "args")]
        else:  # the flat form {"call": "x", "field": ...}; its paths still read args.field
            args = {k: v for k, v in ex.action.items() if k != ex.key}
        return option, self.bind(option, args, att)

    def bind(self, option: Option, args: dict, att: Attempt) -> dict:
        """Validated arguments plus injected ones; records what was kept, dropped and injected.
        Paths read `args.<field>` whichever form the reply used."""
        prefix = "args"
        kwargs: dict = {}
        kept: dict = {}
        names = {p.name for p in option.params}
        # A5: a model value for a hidden parameter is never used. It is recorded as dropped up
        # front, so the record holds even when a later field fails the attempt.
        dropped: list[str] = [f"{prefix}.{p.name}" for p in option.params
                              if p.source != "llm" and p.name in args]
        unknown = [f"{prefix}.{k}" for k in args if k not in names]
        try:
            for p in option.params:
                path = f"{prefix}.{p.name}"
                if p.source != "llm":
                    if p.source == "runtime":
                        kwargs[p.name] = self.runtime
                        att.injected.append(p.name)
                    elif p.name in self.context:
                        kwargs[p.name] = self.context[p.name]
                        att.injected.append(p.name)
                    continue
                if p.name not in args:
                    if option.kind != "function" or p.required:
                        raise ParseError("missing_required",
                                         f"{path} is required by option {option.name!r} "
                                         f"({p.field.type_name()})", path)
                    continue
                kept[p.name] = kwargs[p.name] = validate(args[p.name], p.field, path, dropped)
        finally:
            att.dropped += dropped + unknown
        att.args = kept
        return kwargs

    def turn(self, att: Attempt, content: list[dict], tools: list, max_iterations: int) -> None:
        """Attempt 1 of an exec() decision: a whole turn, tool rounds included."""
        def on_tool(n, tc, result, error, seconds):
            r = ToolRound(n, tc.name, tc.args, result, error, seconds)
            self.trace.tool_rounds.append(r)
            emit("tool_call", self.trace, att, round=r)

        try:
            _tools.tool_loop(self.runtime, [{"role": "user", "content": content}], tools,
                             max_iterations=max_iterations, deadline=self.deadline,
                             call=lambda msgs, specs: self.call(att, msgs, specs),
                             on_tool=on_tool, context=self.context)
        except ModelCallError as exc:
            self._record(att, ParseError(exc.kind, str(exc)))
            self.fail(att, cause=exc)

    def _record(self, att: Attempt, err: ParseError) -> None:
        att.error_kind, att.error_message, att.error_path = err.kind, err.message, err.path
        emit("attempt_failed", self.trace, att)

    # -- the loop -----------------------------------------------------------------------------
    def settle(self, att: Attempt, check: Callable | None = None):
        """Check attempts, re-asking until one passes or none are left (P7, P8)."""
        check = check or self.check
        while True:
            try:
                picked = check(att)
            except ParseError as err:
                self._record(att, err)
                if att.is_last:
                    self.fail(att)
                prompt = reask_prompt(self.request, att.reply, err, self.menu_text)
                att = self.new_attempt(prompt)
                self.call(att, [{"role": "user", "content": prompt}])
                continue
            emit("validated", self.trace, att)
            return picked

    def fail(self, att: Attempt, cause: BaseException | None = None):
        err = DecisionError(att.error_kind or "model_error", att.error_message or "",
                            _head(att.reply), self.trace, att.error_path)
        self._finish("failed", error=err)
        emit("decision_failed", self.trace)
        raise err from cause

    def resolve(self, option: Option, kwargs: dict) -> Any:
        try:
            result = _resolve(option, kwargs)
        except BaseException as exc:
            self._finish("failed", error=exc)
            emit("decision_failed", self.trace)
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised by option {option.name!r} of decision #{self.trace.id}; "
                             f"its trace: decision.last_trace()")
            raise
        self._finish("resolved", result=result)
        emit("resolved", self.trace)
        return result

    @contextlib.contextmanager
    def running(self):
        """The decision's body. Whatever ends it early (Ctrl-C, a cancelled evaluate row, a bug)
        still finishes the trace as failed, so it never stays "running"."""
        try:
            yield self
        except BaseException as exc:
            if self.trace.status == "running":
                self._finish("failed", error=exc)
                emit("decision_failed", self.trace)
            raise

    def _finish(self, status: str, result: Any = None, error: BaseException | None = None):
        self.trace.status, self.trace.result, self.trace.error = status, result, error
        self.trace.duration_s = time.perf_counter() - self._t0


def _resolve(option: Option, kwargs: dict) -> Any:
    if option.kind == "function":
        return call_function(option.handler, kwargs)
    if option.kind == "schema":
        return {"decision": option.name, **kwargs}
    return option.value


def _max_attempts(max_retries: Any) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be a whole number >= 0 (0 turns re-asks off), got "
                         f"{max_retries!r}")
    return max_retries + 1


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def make(prompt: str, options: Any, *, runtime: Runtime | None = None,
         context: dict | None = None, max_retries: int = 1, timeout_s: float | None = None):
    """Pure decision (E1): send `prompt + "\\n\\n" + menu` in one model call and return the
    resolved result of the model's pick. Your prompt must ask the model to pick."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    attempts = _max_attempts(max_retries)
    deadline = deadline_after(timeout_s)
    menu = normalize(options)
    check_context(menu, context)
    rt = resolve_runtime(runtime, "decision.make")
    menu_text = render_menu(menu)
    with rt.dag.span("decision", "decision.make"):
        d = _Decider(rt, menu, request=prompt, context=context, max_attempts=attempts,
                     entry="make", deadline=deadline, menu_text=menu_text)
        with d.running():
            text = prompt + "\n\n" + menu_text
            att = d.new_attempt(text)
            d.call(att, [{"role": "user", "content": text}])
            option, kwargs = d.settle(att)
            return d.resolve(option, kwargs)


def parse_args(reply: Any, options: Any, *, runtime: Runtime | None = None,
               context: dict | None = None, max_retries: int = 1, prompt: str = ""):
    """Parse and validate a reply (P1-P7) into `(chosen, kwargs)`: the function for a function
    option, the name for a value or schema option. On a bad reply, re-asks through the runtime
    (`max_retries` times); with no runtime, a bad reply raises DecisionError at once."""
    attempts = _max_attempts(max_retries)
    menu = normalize(options)
    check_context(menu, context)
    if runtime is None:
        from .runtime import current_runtime
        runtime = current_runtime()
    if runtime is None:
        attempts = 1
    d = _Decider(runtime, menu, request=prompt, context=context, max_attempts=attempts,
                 entry="parse")
    with d.running():
        att = d.new_attempt(prompt)
        att.reply = reply
        emit("reply_received", d.trace, att)
        option, kwargs = d.settle(att)
        d._finish("resolved", result=None)
        emit("resolved", d.trace)
    return (option.handler if option.kind == "function" else option.name), kwargs


def resolve_decision(chosen: Any, kwargs: dict, options: Any = None) -> Any:
    """Turn a pick into the next step's result (Z1): call a function with the kwargs; look a
    name up in the option set (a value, or `{"decision": name, **kwargs}` for a schema)."""
    if callable(chosen):
        return call_function(chosen, kwargs)
    if options is None:
        raise TypeError("resolve_decision needs the option set to look up the name "
                        f"{chosen!r}: resolve_decision(chosen, kwargs, options)")
    for o in normalize(options):
        if o.name == chosen:
            return _resolve(o, kwargs)
    raise KeyError(f"{chosen!r} is not an option of this option set")


def _append_text(blocks: list[dict], text: str) -> list[dict]:
    """The turn with `text` after its prompt: `prompt + "\\n\\n" + text` when the turn ends with
    a text block, else a text block of its own."""
    if blocks and blocks[-1].get("type") == "text":
        last = dict(blocks[-1], text=blocks[-1].get("text", "") + "\n\n" + text)
        return blocks[:-1] + [last]
    return blocks + [{"type": "text", "text": text}]


def run_agent_decision(rt: Runtime, blocks: list[dict], choices: Any, tools: list,
                       *, context: dict | None, max_iterations: int, deadline: float | None):
    """`exec(choices=)` (E2): one turn with tools, then the last reply is the decision; one
    re-pick, fixed."""
    menu = normalize(choices)
    check_context(menu, context)
    menu_text = render_menu(menu)
    request = blocks_text(blocks)
    turn = _append_text(blocks, DECISION_FINISH_INSTRUCTION + "\n\n" + menu_text)
    with rt.dag.span("decision", "agent(choices=)"):
        d = _Decider(rt, menu, request=request, context=context, max_attempts=2, entry="agent",
                     deadline=deadline, menu_text=menu_text)
        with d.running():
            att = d.new_attempt(blocks_text(turn))
            d.turn(att, turn, tools, max_iterations)
            option, kwargs = d.settle(att)
            return d.resolve(option, kwargs)


def _format_check(d: _Decider, schema: Field):
    def check(att: Attempt):
        ex = d.extract(att, require_key=False)
        dropped: list[str] = []
        value = validate(ex.action, schema, "response", dropped)
        att.dropped += dropped
        att.chosen, att.args = "response", value
        return d.by_name["response"], value
    return check


def run_format(rt: Runtime, blocks: list[dict], response_format: Any, tools: list, *,
               context: dict | None = None, max_iterations: int, deadline: float | None):
    """`exec(response_format=schema)`: the reply is one JSON object of the schema's form,
    validated like a schema option's fields; one re-ask, fixed."""
    schema = schema_field(response_format, "response_format")
    if schema.type != "object":
        raise TypeError("response_format must be a dict schema {field: type, ...}")
    option = Option("response", "schema", "the requested JSON object",
                    params=[Param(k, f) for k, f in (schema.fields or {}).items()])
    menu_text = "\n".join([
        "Reply with one JSON object of this form, in a ```json fenced block:",
        *param_lines(option),
        "  Example: " + json.dumps(schema.placeholder(), ensure_ascii=False)])
    request = blocks_text(blocks)
    turn = _append_text(blocks, menu_text)
    with rt.dag.span("decision", "exec(response_format=)"):
        d = _Decider(rt, [option], request=request, context=context, max_attempts=2,
                     entry="format", deadline=deadline, menu_text=menu_text)
        with d.running():
            att = d.new_attempt(blocks_text(turn))
            d.turn(att, turn, tools, max_iterations)
            _, value = d.settle(att, _format_check(d, schema))
            d._finish("resolved", result=value)
            emit("resolved", d.trace)
            return value

# Prototyping at scale (evaluate.py imports make from here, so this import comes last).
from .evaluate import compare, evaluate  # noqa: E402,F401
