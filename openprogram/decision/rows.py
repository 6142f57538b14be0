"""A decision split in two for engines that send the requests themselves: a row's request as data,
and a reply read back into the row's outcome.

`decision.plan(template, options, **settings)` checks the settings once (as `make` does) and
returns a `RowPlan`. `plan.request(row)` is the model request of the row's first attempt as
JSON-ready, picklable data — the messages and what the way of asking adds (the tools and the
tool choice, or the response format's schema) — for a batch engine (Ray Data's LLM processors,
Spark, Daft) to send however it sends requests. `plan.resolve(row, reply, earlier=...)` reads the
reply and returns the row's `Outcome`: resolved (the pick and its result), failed (the error, the
whole trace), or pending with the next request when the reply must be asked again; the engine
sends that request and calls `resolve` again with the new reply and the earlier ones
(`outcome.replies`). Both halves run the decision loop itself (`Plan.run`) on a runtime that
answers from the replies given and stops at the first request it has no reply for, so a row
resolved this way is the row `decision.make` gives with the same replies — the same re-asks,
repairs, validation and trace — and no second implementation of the loop exists to drift. A
re-ask replays the earlier replies (a few microseconds each); a `validate=` rule runs again on
the earlier attempts' picks, so it must not count calls.
"""
from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..base.errors import ArgumentError, ModelCallError, UsageError
from ..base.json_form import json_ready
from ..base.model_protocol import ModelCaller, ModelResponse, ToolCall, run_sync
from .entry import Plan
from .settings import PLAN, Settings, takes_settings

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Sequence
    from typing import Any

    from ..base.type_names import Options
    from ..trace.decision_trace import DecisionTrace

__all__ = ["plan", "RowPlan", "Outcome", "reply_data"]

#: The fields a reply given as a dict may have: those of `ModelResponse`, and "error" (the call
#: failed: its message; "kind" says how, "model_error" by default).
REPLY_FIELDS = frozenset({"text", "tool_calls", "usage", "model", "finish_reason", "refusal",
                          "raw", "cached", "confidence", "error", "kind"})


class _Asked(BaseException):
    """The decision asked for a reply the caller has not given yet: carries the request. A
    BaseException, so the loop's `except Exception` around a model call does not record it as
    the model's failure."""

    def __init__(self, request: dict[str, Any]):
        self.request = request


@dataclass
class Outcome:
    """What a row came to after the replies given. `status` is "resolved", "failed" or
    "pending" (the decision needs `request` answered: pass its reply to `resolve` with
    `earlier=outcome.replies`). `trace` is the decision's trace so far (for a pending row, with
    the attempt that waits for its reply last); `replies` are the replies read, as data."""
    status: str
    pick: str | None = None
    args: dict[str, Any] | None = None
    result: Any = None
    error: BaseException | None = None
    error_kind: str | None = None
    trace: DecisionTrace | None = None
    request: dict[str, Any] | None = None
    replies: list[Any] = field(default_factory=list)

    @property
    def attempts(self) -> int:
        return len(self.trace.attempts) if self.trace is not None else 0


class _Spans:
    """The DAG a decision records its calls in, for a runtime that makes none: spans are no-ops
    and each answered call is a node numbered in order."""

    class _Span:
        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: Any) -> None:
            return None

    def span(self, kind: str, name: str) -> Any:
        return self._Span()


class _Node:
    __slots__ = ("id",)

    def __init__(self, i: int):
        self.id = i


#: The replies the current decision is answered from, and how many it has used: one per
#: context, so one plan serves many rows at once (threads, tasks).
class _Replies:
    __slots__ = ("given", "used")

    def __init__(self, given: list[Any]):
        self.given, self.used = given, 0


_TAPE: contextvars.ContextVar[_Replies] = contextvars.ContextVar("openprogram_row_replies")


class _Tape(ModelCaller):
    """The runtime of a `RowPlan`: answers each model call with the next reply given, and asks
    (`_Asked`) for the first one it has none for. It plays every way of asking; `name` and
    `model` are what the trace records."""

    modes = frozenset({"menu", "tools", "json_schema"})

    def __init__(self, name: str, model: str | None, takes_menu: bool = False):
        self.name, self.model, self.takes_menu = name, model, takes_menu
        self.dag = _Spans()

    def call_model(self, messages: list[dict[str, Any]], *,
                   tools: list[dict[str, Any]] | None = None, on_text: Any = None,
                   deadline: float | None = None, label: str = "model_call",
                   **extra: Any) -> tuple[Any, Any]:
        tape = _TAPE.get()
        k = tape.used
        if k >= len(tape.given):
            ask = {"messages": messages, **({"tools": tools} if tools is not None else {}),
                   **extra}
            raise _Asked(json_ready(_plain(ask)))
        tape.used = k + 1
        return reply_of(tape.given[k]), _Node(k)

    async def acall_model(self, messages: list[dict[str, Any]], *,
                          tools: list[dict[str, Any]] | None = None, on_text: Any = None,
                          deadline: float | None = None, label: str = "model_call",
                          **extra: Any) -> tuple[Any, Any]:
        return self.call_model(messages, tools=tools, on_text=on_text, deadline=deadline,
                               label=label, **extra)


def _plain(value: Any) -> Any:
    """A request's messages as data: a tool call the model made (a re-ask in tools mode sends it
    back) as its dict."""
    if isinstance(value, ToolCall):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def reply_of(data: Any) -> ModelResponse:
    """A reply given as data — its text (a str), a `ModelResponse`, or a dict of
    `ModelResponse`'s fields (tool calls as dicts of name, args, id) — as the loop reads it; a
    dict with "error" is a failed call (`ModelCallError` of its "kind", "model_error" by
    default)."""
    if isinstance(data, ModelResponse):
        return ModelResponse(**{k: getattr(data, k) for k in ModelResponse.__dataclass_fields__})
    if isinstance(data, str):
        return ModelResponse(text=data)
    if not isinstance(data, Mapping):
        raise UsageError(f"a reply is its text (a str), a ModelResponse or a dict of its fields "
                         f"({', '.join(sorted(REPLY_FIELDS))}); got {type(data).__name__}")
    unknown = sorted(set(data) - REPLY_FIELDS)
    if unknown:
        shown = ", ".join(map(repr, unknown))
        raise UsageError(f"a reply given as a dict has unknown field(s) {shown}; its fields "
                         f"are {', '.join(sorted(REPLY_FIELDS))}")
    if data.get("error") is not None:
        raise ModelCallError(str(data["error"]), kind=str(data.get("kind") or "model_error"))
    calls = []
    for c in data.get("tool_calls") or ():
        if isinstance(c, ToolCall):
            calls.append(ToolCall(c.name, c.args, c.id))
        elif isinstance(c, Mapping) and isinstance(c.get("name"), str):
            args = c.get("args")
            calls.append(ToolCall(c["name"], {} if args is None else args, c.get("id")))
        else:
            raise UsageError(f"a reply's tool call is a dict of name, args and id (or a "
                             f"ToolCall); got {c!r:.80}")
    return ModelResponse(text=data.get("text", ""), tool_calls=calls, usage=data.get("usage"),
                         model=data.get("model"), finish_reason=data.get("finish_reason"),
                         refusal=data.get("refusal"), raw=data.get("raw"),
                         cached=bool(data.get("cached")), confidence=data.get("confidence"))


def reply_data(reply: Any) -> Any:
    """A reply as JSON-ready data (the form `reply_of` reads back): its text alone when that is
    all it has."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, Mapping) and reply.get("error") is not None:
        return json_ready({k: reply[k] for k in ("error", "kind") if k in reply})
    resp = reply_of(reply)
    out: dict[str, Any] = {"text": resp.text}
    if resp.tool_calls:
        out["tool_calls"] = [tc.to_dict() for tc in resp.tool_calls]
    for k in ("usage", "model", "finish_reason", "refusal", "raw", "confidence"):
        if getattr(resp, k) is not None:
            out[k] = getattr(resp, k)
    if resp.cached:
        out["cached"] = True
    if set(out) == {"text"} and isinstance(resp.text, str):
        return resp.text
    return json_ready(out)


def template_fields(template: str) -> list[str]:
    """The row columns a prompt template names (`{message}`, `{user.name}` -> "user")."""
    try:
        import string  # at first use: `import openprogram` stays without it
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ArgumentError(f"the prompt template is not a valid format string ({exc}); fields "
                            f"are named after columns, e.g. {{message}}; write a literal brace "
                            f"as {{{{ or }}}}") from None
    out: list[str] = []
    for _, name, _, _ in parsed:
        if name is None:
            continue
        root = name.split(".")[0].split("[")[0]
        if not root or root.isdigit():
            raise ArgumentError(f"the prompt template has a positional field {{{name}}}; name "
                                f"each field after a column, e.g. {{message}}")
        if root not in out:
            out.append(root)
    return out


class RowPlan:
    """A decision's settings checked once for many rows, split in two: `request(row)` and
    `resolve(row, reply, earlier=())`. Build it with `decision.plan(template, options,
    **settings)`; it pickles when its options and settings do (a batch engine ships it to its
    workers)."""

    def __init__(self, template: str, options: Options, *, runtime_name: str = "batch",
                 model: str | None = None, takes_menu: bool = False,
                 **settings: Any) -> None:
        if not isinstance(template, str):
            raise UsageError(f"the prompt template must be a str such as 'Route this: "
                             f"{{message}}', got {type(template).__name__}")
        if settings.get("timeout_s") is not None:
            raise UsageError("timeout_s= bounds a decision's model calls as this process makes "
                             "them; the requests of a plan are sent by the batch engine, whose "
                             "own timeouts apply: drop timeout_s=")
        settings.pop("timeout_s", None)
        if "runtime" in settings:
            raise UsageError("a plan makes no model call, so it takes no runtime=: the batch "
                             "engine sends plan.request(row) and hands the reply to "
                             "plan.resolve(row, reply)")
        self.template = template
        self.fields = template_fields(template)
        self.options, self.settings = options, dict(settings)
        self.runtime_name, self.model, self.takes_menu = runtime_name, model, takes_menu
        self._plan = self._build()

    def _build(self) -> Plan:
        # the settings are kept as the caller wrote them (a checked re-ask template is a
        # function, which does not pickle) and checked again where the plan is unpickled
        return Plan(self.options, Settings.of(self.settings, "decision.plan", PLAN),
                    where="decision.plan",
                    runtime=_Tape(self.runtime_name, self.model, self.takes_menu))

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_plan"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plan = self._build()

    @property
    def attempts(self) -> int:
        """How many attempts a row may take (max_retries + 1)."""
        return self._plan.settings.attempts

    def prompt(self, row: Mapping[str, Any]) -> str:
        """The row's filled prompt template."""
        try:
            return self.template.format_map(row)
        except KeyError as exc:
            raise ArgumentError(f"the prompt template uses {{{exc.args[0]}}} but the row has no "
                                f"column {exc.args[0]!r} (its columns are "
                                f"{', '.join(map(repr, row)) or 'none'})") from None
        except (IndexError, ValueError, AttributeError, TypeError) as exc:
            raise ArgumentError(f"the prompt template could not be filled from the row: "
                                f"{exc}") from None

    def request(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The model request of the row's first attempt, as JSON-ready data: "messages" and
        what the way of asking adds ("tools" and "tool_choice", or "response_format")."""
        out = self._run(self.prompt(row), [])
        if out.request is None:
            raise RuntimeError("internal error: a decision made no model call")
        return out.request

    def resolve(self, row: Mapping[str, Any], reply: Any, earlier: Sequence[Any] = ()) -> Outcome:
        """The row's outcome once `reply` answers its latest request, `earlier` the replies to
        the requests before it (a pending outcome's `replies`), in order."""
        if isinstance(earlier, (str, bytes, Mapping)) or not hasattr(earlier, "__iter__"):
            raise UsageError(f"earlier= is the list of the replies before this one (a pending "
                             f"outcome's .replies), got {type(earlier).__name__}")
        replies = [*earlier, reply]
        out = self._run(self.prompt(row), replies)
        return out

    def _run(self, prompt: str, replies: list[Any]) -> Outcome:
        tape = _Replies(replies)
        box: list[DecisionTrace] = []
        token = _TAPE.set(tape)
        try:
            try:
                result = run_sync(self._plan.run(prompt, sync=True, keep=box))
            except _Asked as asked:
                trace = box[0] if box else None
                return Outcome("pending", trace=trace, request=asked.request,
                               replies=[reply_data(r) for r in replies])
            except Exception as exc:  # the decision failed, or the picked option raised
                trace = box[0] if box else getattr(exc, "trace", None)
                return self._done("failed", trace, None, exc, replies, tape.used)
            return self._done("resolved", box[0] if box else None, result, None, replies,
                              tape.used)
        finally:
            _TAPE.reset(token)

    @staticmethod
    def _done(status: str, trace: Any, result: Any, error: BaseException | None,
              replies: list[Any], used: int) -> Outcome:
        if used < len(replies):
            raise UsageError(f"resolve was given {len(replies)} replies but the decision ended "
                             f"after {used}: pass earlier= only the replies of a pending "
                             f"outcome (its .replies)")
        last = trace.attempts[-1] if trace is not None and trace.attempts else None
        valid = last is not None and last.error_kind is None
        kind = None
        if error is not None:
            kind = getattr(error, "kind", None) or (last.error_kind if last else None)
        picked = last if last is not None and valid else None
        return Outcome(status, pick=picked.chosen if picked is not None else None,
                       args=picked.args if picked is not None else None, result=result,
                       error=error, error_kind=kind, trace=trace,
                       replies=[reply_data(r) for r in replies])


@takes_settings(PLAN)
def plan(template: str, options: Options, *, runtime_name: str = "batch",
         model: str | None = None, takes_menu: bool = False, **settings: Any) -> RowPlan:
    """A decision for many rows, split in two (see `RowPlan`): `plan.request(row)` is the model
    request of a row's first attempt as data, `plan.resolve(row, reply)` its outcome. `settings`
    are `decision.make`'s (mode=, max_retries=, validate=, reask=, repair=, context=,
    confidence=, ...), checked now; `runtime_name=` / `model=` name the model in the traces."""
    return RowPlan(template, options, runtime_name=runtime_name, model=model,
                   takes_menu=takes_menu, **settings)
