"""A run's recording: each model call and each live tool call, as it was asked and answered.

Recording must cost little per call (a run's overhead per decision is measured against the same
program without a run), so a `RecordedCall` keeps what the runtime was handed — the message list
copied (a turn appends to the same list), the tools and mode arguments as they were — and the
response it returned (its tool calls copied: the tool loop gives them ids afterwards). The
request's record and its digest (`runtimes.cassette.cassette_file`: what a cassette writes and a
replay matches on) are made only when asked for: by a fork comparing requests, by `Run.save`. A
call read back from a saved run holds the file's records instead. `answer()` gives the recorded
reply again (a fresh copy each time: a fork's loop may change what it is handed) or raises the
recorded failure again.
"""
from __future__ import annotations

from ..base.errors import ModelCallError
from ..base.filesecrets import scrub
from ..base.model_protocol import ModelResponse, ToolCall
from ..runtimes.cassette.cassette_file import (
    ask_key,
    request_key,
    request_record,
    response_record,
    settings_of,
)
from ..runtimes.cassette.replay import answer as answer_entry
from ..runtimes.cassette.tool_results import recorded_result, tool_key

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from .nodes import RunNode

__all__ = ["RecordedCall", "RecordedTool", "failure_of", "copied"]


def failure_of(exc: BaseException) -> dict:
    """A failed model call as a cassette line keeps it. A failure that is not a
    `ModelCallError` (a bug in a model function) is kept in the words the decision loop
    recorded it in (`Type: message`, kind model_error), so its replay fails the same way."""
    if isinstance(exc, ModelCallError):
        return {"type": type(exc).__name__, "kind": exc.kind, "message": str(exc),
                "partial": exc.partial}
    try:
        message = f"{type(exc).__name__}: {exc}"
    except Exception:
        message = f"{type(exc).__name__}: <str() of it failed>"
    return {"type": type(exc).__name__, "kind": "model_error", "message": message,
            "partial": ""}


def copied(resp: ModelResponse) -> ModelResponse:
    """A response the caller may change (the tool loop gives tool calls their ids) without
    changing the recording's: a new object, its tool calls new ones (its fields copied whole:
    `dataclasses.replace` costs four times as much)."""
    out = ModelResponse.__new__(ModelResponse)
    out.__dict__.update(resp.__dict__)
    out.tool_calls = [ToolCall(t.name, t.args, t.id) for t in resp.tool_calls]
    return out


#: What a model call's record holds until it is set (see `RecordedCall.__getattr__`).
_CALL_DEFAULTS = {"attempt": None, "response": None, "error": None, "source": "live",
                  "_request": None, "_key": None, "_settings": None, "_response_record": None,
                  "_runtime_name": None, "_duration": None}


class RecordedCall:
    """One model call of a run: its place (`node`, the decision it served and that decision's
    attempt, `before` = how many decisions had started when it was made), the runtime that
    answered (`runtime`, its name in `runtime_name`), the request, and the response or the
    failure; `source` says who answered: "live" (the runtime), "recording" (the run being
    forked), "edit" (the fork's edit). Made on every model call of a recorded program, so it
    sets only what it is made with; the rest reads as its default until set."""

    __slots__ = ("seq", "node", "before", "runtime", "messages", "tools", "mode_args",
                 *_CALL_DEFAULTS)

    def __init__(self, seq: int, node: RunNode | None, before: int, runtime: Any,
                 messages: list | None, tools: list | None, mode_args: dict | None):
        self.seq, self.node, self.before, self.runtime = seq, node, before, runtime
        self.messages, self.tools, self.mode_args = messages, tools, mode_args

    def __getattr__(self, name: str) -> Any:
        # only reached for a slot never set
        try:
            return _CALL_DEFAULTS[name]
        except KeyError:
            raise AttributeError(f"'RecordedCall' object has no attribute {name!r}") from None

    @property
    def decision(self) -> int | None:
        """The index of the decision the call served (None outside any)."""
        node = self.node
        return None if node is None else node.in_decision

    @property
    def runtime_name(self) -> str | None:
        name = self._runtime_name
        return getattr(self.runtime, "name", None) if name is None else name

    @runtime_name.setter
    def runtime_name(self, name: str | None) -> None:
        self._runtime_name = name

    @property
    def duration_s(self) -> float | None:
        if self._duration is not None:
            return self._duration
        return None if self.node is None else self.node.duration_s

    # -- the request ------------------------------------------------------------------------
    @property
    def request(self) -> dict:
        """The request as a cassette line holds it (keys masked)."""
        if self._request is None:
            self._request = scrub(request_record(self.messages or [], self.tools,
                                                 self.mode_args))
        return self._request

    @property
    def key(self) -> str:
        """The digest of the request (`ask_key`): equal for byte-for-byte equal requests."""
        if self._key is None:
            self._key = ask_key(self.request)
        return self._key

    @property
    def settings(self) -> dict | None:
        """The model settings that answered (`settings_of`), made when first asked for."""
        if self._settings is None and self.runtime is not None:
            self._settings = settings_of(self.runtime)
        return self._settings

    # -- the answer -------------------------------------------------------------------------
    @property
    def response_record(self) -> dict | None:
        if self._response_record is None and self.response is not None:
            self._response_record = response_record(self.response)
        return self._response_record

    @property
    def finished(self) -> bool:
        return self.response is not None or self._response_record is not None or \
            self.error is not None

    def answer(self) -> ModelResponse:
        """The recorded reply, as a fresh `ModelResponse`, or the recorded failure raised."""
        if self.error is not None:
            err = self.error
            raise ModelCallError(err.get("message") or "recorded failure",
                                 partial=err.get("partial") or "",
                                 kind=err.get("kind") or "model_error")
        if self.response is not None:
            return copied(self.response)
        if self._response_record is None:
            raise ModelCallError("this recorded model call never finished (the run was "
                                 "stopped during it), so it cannot be answered again",
                                 kind="model_error")
        return answer_entry({"response": self._response_record})

    # -- a cassette line --------------------------------------------------------------------
    def line(self, entry: str | None = None, mode: str | None = None) -> dict:
        """The call as a line of a saved run (the cassette format: `key` first; `decision`
        places it as a recorder does, by the decision's index, entry point and attempt)."""
        request, settings = self.request, self.settings
        place = None
        if self.decision is not None:
            place = {"id": self.decision, "entry": entry, "attempt": self.attempt or 1,
                     "mode": mode or "menu"}
        out: dict = {"key": request_key(request, settings), "call": self.seq, "decision": place,
                     "request": request, "settings": settings}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["response"] = self.response_record
        out["duration_s"] = None if self.duration_s is None else round(self.duration_s, 4)
        out["run"] = {"node": None if self.node is None else self.node.id,
                      "before": self.before, "source": self.source,
                      "runtime": self.runtime_name}
        return out

    @classmethod
    def from_line(cls, entry: dict, node: RunNode | None) -> RecordedCall:
        place = entry.get("run") or {}
        out = cls(int(entry.get("call") or 0), node, int(place.get("before") or 0), None,
                  None, None, None)
        out._request, out._settings = entry["request"], entry.get("settings")
        decision = entry.get("decision")
        out.attempt = decision.get("attempt") if isinstance(decision, dict) else None
        out.runtime_name = place.get("runtime")
        out.source = place.get("source") or "live"
        out._duration = entry.get("duration_s")
        if "error" in entry:
            out.error = dict(entry["error"])
        else:
            out._response_record = entry.get("response") or {}
        return out

    def __repr__(self) -> str:
        state = "failed" if self.error is not None else "answered" if self.finished else \
            "running"
        return f"<RecordedCall #{self.seq} {state} ({self.source}), decision {self.decision}>"


class RecordedTool:
    """One live (MCP) tool call of a run: `call` is `{"server", "name", "arguments"}` (keys
    masked), then its `result` (JSON data) or `error`; `source` as for a model call."""

    __slots__ = ("seq", "node", "decision", "before", "call", "result", "error", "done",
                 "duration_s", "source")

    def __init__(self, seq: int, node: RunNode | None, before: int, call: dict):
        self.seq, self.node, self.before, self.call = seq, node, before, call
        self.decision: int | None = None if node is None else node.in_decision
        self.result: Any = None
        self.error: dict | None = None
        self.done = False
        self.duration_s: float | None = None
        self.source = "live"

    @property
    def key(self) -> str:
        return tool_key(self.call)

    def answer(self) -> Any:
        """The recorded result (JSON data), or the recorded failure raised again."""
        entry = {"tool": self.call, "result": self.result}
        if self.error is not None:
            entry["error"] = self.error
        return recorded_result(entry)

    def line(self, entry: str | None = None) -> dict:
        out: dict = {"key": self.key, "call": self.seq,
                     "decision": None if self.decision is None else
                     {"id": self.decision, "entry": entry, "attempt": None},
                     "tool": self.call}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["result"] = self.result
        out["duration_s"] = None if self.duration_s is None else round(self.duration_s, 4)
        out["run"] = {"node": None if self.node is None else self.node.id,
                      "before": self.before, "source": self.source}
        return out

    @classmethod
    def from_line(cls, entry: dict, node: RunNode | None) -> RecordedTool:
        place = entry.get("run") or {}
        out = cls(int(entry.get("call") or 0), node, int(place.get("before") or 0),
                  entry["tool"])
        decision = entry.get("decision")
        out.decision = decision.get("id") if isinstance(decision, dict) else None
        out.result, out.error = entry.get("result"), entry.get("error")
        out.done, out.duration_s = True, entry.get("duration_s")
        out.source = place.get("source") or "live"
        return out

    def __repr__(self) -> str:
        return f"<RecordedTool #{self.seq} {self.call.get('name')!r} ({self.source})>"
