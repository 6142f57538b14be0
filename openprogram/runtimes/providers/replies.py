"""A provider's request and reply as data: `Ask` (the body sent and what turns the reply into the
one the core expects), `StreamedReply` (what a stream has delivered so far), and tool calls and
their JSON arguments read from either protocol.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...runtime.runtime import ModelResponse, ToolCall
from .raw_record import LIMIT, redact_stream, size


def json_args(raw: Any) -> Any:
    """A tool call's arguments as a dict. Text that is not a JSON object is passed on as-is, so
    the tool loop answers the model with "arguments must be a JSON object" (the model can fix
    it), instead of the whole turn failing."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return raw
    return value


#: Finish reasons that say the reply was cut off at the token limit.
CUT_OFF = ("length", "max_tokens")


@dataclass
class Ask:
    """One request as a provider builds it: the body sent, notes on how a way of asking was
    carried out, and what turns the reply into the one the core expects (the schema whose
    forced nulls are removed, the tool whose input is the reply)."""
    body: dict
    notes: list[str] = field(default_factory=list)
    schema: dict | None = None       # OpenAI strict mode: the schema as the mode asked for it
    text_tool: str | None = None     # json_schema as a forced tool: that tool's name
    reply_as_sent: str | None = None  # the reply's text before it was made the core's
    forms: dict = field(default_factory=dict)       # kind of request form -> the form sent
    negotiated: list[dict] = field(default_factory=list)  # forms sent in place of others, why
    confidence: list | None = None   # the option names whose probabilities the reply is read for


def as_json(obj: Any) -> Any:
    """An SDK response object (a pydantic model) as JSON data. The SDKs build their objects
    from what the server sent without validating it, so a field may hold a value of another
    type than the SDK declares (a `logprobs` that is a string); the raw record wants it as
    sent, which pydantic writes as well, without a warning per value (`warnings=False`)."""
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        try:
            return to_dict(mode="json", warnings=False)
        except TypeError:
            return to_dict()
    return obj


class StreamedReply:
    """What a stream has delivered so far, filled in by a provider's `_read_event`: the text
    (each piece also goes to `emit`), the tool calls by their index in the reply (id, name and
    the arguments' JSON text, which arrive in pieces; the arguments of `text_tool` are the
    reply's text and stream as text), token usage, the model that answered, the finish reason
    and refusal, whether the closing event came, and the events as JSON (up to the raw
    record's bound, then only counted)."""

    def __init__(self, emit: Callable[[str], None], text_tool: str | None = None):
        self._emit = emit
        self.text_tool = text_tool
        self.text: list[str] = []
        self.calls: dict[int, dict] = {}
        self.usage: dict = {}
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.refusal: list[str] = []
        self.finished = False
        self.events: list = []
        self.logprobs: list | None = None  # the tokens' log-probabilities, when the server
                                           # sends them
        self._event_chars = 0
        self._events_cut = 0

    def add_text(self, piece: str) -> None:
        self.text.append(piece)
        self._emit(piece)

    def tool(self, index: int, id: str | None = None, name: str = "") -> dict:
        """The tool call at `index`, started with `id` and `name` if it is new."""
        return self.calls.setdefault(index, {"id": id, "name": name, "args": ""})

    def tool_args(self, index: int, piece: str) -> None:
        slot = self.tool(index)
        slot["args"] += piece
        if piece and self.text_tool is not None and slot["name"] == self.text_tool:
            self._emit(piece)

    def record(self, event: Any) -> None:
        if self._event_chars > LIMIT:
            self._events_cut += 1
            return
        data = as_json(event)
        self._event_chars += size(data)
        self.events.append(data)

    def raw(self, secrets: tuple[str, ...] = ()) -> dict:
        """The events as the raw record keeps them, their text redacted over the stream: a
        key cut into deltas of any length leaves no piece of it behind."""
        out: dict = {"stream": redact_stream(self.events, secrets)}
        if self._events_cut:
            out["stream"].append(f"[{self._events_cut} more events cut]")
        return out

    def response(self, default_model: str) -> ModelResponse:
        resp = ModelResponse(
            text="".join(self.text),
            tool_calls=[tool_call(c["name"], c["args"], c["id"])
                        for _, c in sorted(self.calls.items())],
            usage=self.usage or None, model=self.model or default_model,
            finish_reason=self.finish_reason, refusal="".join(self.refusal) or None)
        if self.logprobs is not None:
            resp._logprobs = self.logprobs  # read by the runtime's _shape, then dropped
        return resp




def tc_parts(tc: Any) -> tuple[str | None, str, Any]:
    """(id, name, args) of a tool call held as a ToolCall or as its dict form."""
    if isinstance(tc, dict):
        return tc.get("id"), tc.get("name", ""), tc.get("args", tc.get("input", {}))
    return tc.id, tc.name, tc.args


def tool_call(name: str, args: Any, id: str | None) -> ToolCall:
    return ToolCall(name=name, args=json_args(args), id=id)

