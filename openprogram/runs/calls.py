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

import bisect

from ..base.errors import ModelCallError
from ..base.model_protocol import ModelResponse, ToolCall
from ..base.secrets import scrub
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


class RecordedCall:
    """One model call of a run, read from its node (`node`, a RunNode of kind "model_call",
    which keeps the recording: see `nodes.LAZY`): its place (the decision it served and that
    decision's attempt, `before` = how many decisions had started when it was made), the
    runtime that answered (`runtime`, its name in `runtime_name`), the request, and the
    response or the failure; `source` says who answered: "live" (the runtime), "recording"
    (the run being forked), "edit" (the fork's edit). `run.calls` lists them."""

    __slots__ = ("node",)

    def __init__(self, node: RunNode):
        self.node = node

    @property
    def seq(self) -> int:
        return self.node.seq

    @property
    def decision(self) -> int | None:
        """The index of the decision the call served (None outside any)."""
        return self.node.in_decision

    @property
    def attempt(self) -> int | None:
        return self.node.attempt

    @property
    def before(self) -> int:
        """How many decisions had started when the call was made (worked out from the order
        the run's nodes started in, unless a fork or a saved run set it)."""
        node = self.node
        if node.before is None:
            seqs = [d.seq for d in node.run.decisions]
            node.before = bisect.bisect_left(seqs, node.seq)
        return node.before

    @property
    def runtime(self) -> Any:
        return self.node.rt

    @runtime.setter
    def runtime(self, runtime: Any) -> None:
        self.node.rt = runtime

    @property
    def runtime_name(self) -> str | None:
        return self.node.runtime

    @runtime_name.setter
    def runtime_name(self, name: str | None) -> None:
        self.node.runtime = name

    @property
    def source(self) -> str:
        return self.node.source or "live"

    @source.setter
    def source(self, source: str) -> None:
        self.node.source = source

    @property
    def mode_args(self) -> dict:
        req = self.node.req
        return {} if req is None else (req[3] or {})

    def _rec(self) -> dict:
        node = self.node
        rec = node.rec
        if rec is None:
            rec = node.rec = {}
        return rec

    # -- the request ------------------------------------------------------------------------
    @property
    def request(self) -> dict:
        """The request as a cassette line holds it (keys masked)."""
        rec = self._rec()
        request = rec.get("request")
        if request is None:
            messages, n, tools, mode_args = self.node.req or ((), 0, None, None)
            request = rec["request"] = scrub(request_record(list(messages[:n]), tools,
                                                            mode_args))
        return request

    @property
    def key(self) -> str:
        """The digest of the request (`ask_key`): equal for byte-for-byte equal requests."""
        rec = self._rec()
        key = rec.get("key")
        if key is None:
            key = rec["key"] = ask_key(self.request)
        return key

    @property
    def settings(self) -> dict | None:
        """The model settings that answered (`settings_of`), made when first asked for."""
        rec = self._rec()
        if "settings" not in rec and self.node.rt is not None:
            rec["settings"] = settings_of(self.node.rt)
        return rec.get("settings")

    @settings.setter
    def settings(self, settings: dict | None) -> None:
        self._rec()["settings"] = settings

    # -- the answer -------------------------------------------------------------------------
    @property
    def error(self) -> dict | None:
        return self.node.err

    @property
    def response(self) -> ModelResponse | None:
        """The recorded response (a fresh object), or None (failed, or not finished)."""
        resp = self.node.resp
        if resp is not None:
            return copied(resp)
        record = (self.node.rec or {}).get("response")
        return None if record is None else answer_entry({"response": record})

    @property
    def response_record(self) -> dict | None:
        rec = self._rec()
        record = rec.get("response")
        if record is None and self.node.resp is not None:
            record = rec["response"] = response_record(self.node.resp)
        return record

    @property
    def finished(self) -> bool:
        node = self.node
        return node.resp is not None or node.err is not None or \
            (node.rec or {}).get("response") is not None

    @property
    def duration_s(self) -> float | None:
        saved = (self.node.rec or {}).get("duration_s")
        return saved if saved is not None else self.node.duration_s

    def answer(self) -> ModelResponse:
        """The recorded reply, as a fresh `ModelResponse`, or the recorded failure raised."""
        err = self.node.err
        if err is not None:
            raise ModelCallError(err.get("message") or "recorded failure",
                                 partial=err.get("partial") or "",
                                 kind=err.get("kind") or "model_error")
        resp = self.response
        if resp is None:
            raise ModelCallError("this recorded model call never finished (the run was "
                                 "stopped during it), so it cannot be answered again",
                                 kind="model_error")
        return resp

    def copy_from(self, other: RecordedCall) -> None:
        """Take `other`'s answer, runtime and settings as this call's (a fork answered from a
        recording): what it was asked stays this call's own."""
        node, src = self.node, other.node
        node.resp, node.err, node.rt = src.resp, src.err, src.rt
        node.runtime = other.runtime_name
        rec = self._rec()
        if (src.rec or {}).get("response") is not None:
            rec["response"] = src.rec["response"]
        if "settings" in (src.rec or {}):
            rec["settings"] = src.rec["settings"]

    # -- a cassette line --------------------------------------------------------------------
    def line(self, entry: str | None = None, mode: str | None = None) -> dict:
        """The call as a line of a saved run (the cassette format: `key` first; `decision`
        places it as a recorder does, by the decision's index, entry point and attempt)."""
        request, settings = self.request, self.settings
        place = None
        if self.decision is not None:
            place = {"id": self.decision, "entry": entry, "attempt": self.attempt or 1,
                     "mode": mode or "menu"}
        out: dict = {"key": request_key(request, settings), "call": self.seq,
                     "decision": place, "request": request, "settings": settings}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["response"] = self.response_record
        out["duration_s"] = None if self.duration_s is None else round(self.duration_s, 4)
        out["run"] = {"node": self.node.id, "before": self.before, "source": self.source,
                      "runtime": self.runtime_name}
        return out

    @classmethod
    def from_line(cls, entry: dict, node: RunNode) -> RecordedCall:
        """A call read back from a saved run's line, kept on its node."""
        place = entry.get("run") or {}
        decision = entry.get("decision")
        node.attempt = decision.get("attempt") if isinstance(decision, dict) else None
        node.before = int(place.get("before") or 0)
        node.runtime, node.source = place.get("runtime"), place.get("source") or "live"
        node.rec = {"request": entry["request"], "settings": entry.get("settings"),
                    "duration_s": entry.get("duration_s")}
        if "error" in entry:
            node.err = dict(entry["error"])
        else:
            node.rec["response"] = entry.get("response") or {}
        return cls(node)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RecordedCall) and other.node is self.node

    def __hash__(self) -> int:
        return id(self.node)

    def __repr__(self) -> str:
        state = "failed" if self.error is not None else "answered" if self.finished else \
            "running"
        return f"<RecordedCall {self.node.id} {state} ({self.source}), decision {self.decision}>"


class RecordedTool:
    """One live (MCP) tool call of a run: `call` is `{"server", "name", "arguments"}` (keys
    masked), then its `result` (JSON data) or `error`; `source` as for a model call."""

    __slots__ = ("node", "decision", "before", "call", "result", "error", "done",
                 "duration_s", "source")

    def __init__(self, node: RunNode, before: int, call: dict):
        self.node, self.before, self.call = node, before, call
        self.decision: int | None = None if node is None else node.in_decision
        self.result: Any = None
        self.error: dict | None = None
        self.done = False
        self.duration_s: float | None = None
        self.source = "live"

    @property
    def seq(self) -> int:
        return self.node.seq

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
        out = cls(node, int(place.get("before") or 0), entry["tool"])
        decision = entry.get("decision")
        out.decision = decision.get("id") if isinstance(decision, dict) else None
        out.result, out.error = entry.get("result"), entry.get("error")
        out.done, out.duration_s = True, entry.get("duration_s")
        out.source = place.get("source") or "live"
        return out

    def __repr__(self) -> str:
        return f"<RecordedTool #{self.seq} {self.call.get('name')!r} ({self.source})>"
