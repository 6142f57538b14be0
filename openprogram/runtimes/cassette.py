"""Record a runtime's model calls to a JSON cassette, and replay them offline.

`RecordingRuntime(inner, path)` passes every call through to `inner` (an `OpenAIRuntime`, an
`AnthropicRuntime`, any Runtime) and writes it to `path` as it happens: the request (messages and
tool specs), the reply (text, tool calls), token usage, the model that answered, the latency, and
a failed call's error and partial text. The file is plain JSON with an indent, meant to be read,
diffed and committed next to a notebook; it holds no key or header (only what the runtime's
`complete()` sees, and error texts that the provider runtimes have already redacted).

`ReplayRuntime(path)` answers the same calls in the same order with no network and no key — on
Binder, in CI, in a classroom. Each replayed reply streams through `on_text` in small chunks (so a
notebook panel shows it growing, as it did live), usage and model are the recorded ones, and a
recorded failure is raised again as the same `ModelCallError`. When the program now sends a
different request than the one recorded (a prompt, an option, a tool result changed), the
replay stops with `CassetteMismatch`, naming the call number and showing the expected and actual
requests where they first differ; re-record with `RecordingRuntime` to refresh the cassette.

    rt = RecordingRuntime(OpenAIRuntime(model="gpt-4o-mini"), "cassettes/tour.json")
    ... run the notebook ...
    rt = ReplayRuntime("cassettes/tour.json")      # same results, offline
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..agentic_programming.runtime import (DEFAULT_WINDOW, ModelCallError, ModelResponse,
                                           Runtime, ToolCall, Window)
from .scripted import stream_text

FORMAT = "openprogram-cassette"
VERSION = 1


class CassetteMismatch(ModelCallError):
    """The program sent a request the cassette did not record at this point."""

    def __init__(self, message: str, *, call: int, expected: Any = None, actual: Any = None):
        super().__init__(message, kind="model_error")
        self.call, self.expected, self.actual = call, expected, actual


class CassetteExhausted(CassetteMismatch):
    """The program made more model calls than the cassette holds."""


def _plain(value: Any) -> Any:
    """A request or reply as JSON data: ToolCall objects become their dict form."""
    if isinstance(value, ToolCall):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def request_record(messages: list[dict], tools: list[dict] | None) -> dict:
    return {"messages": _plain(messages), "tools": _plain(tools)}


class RecordingRuntime(Runtime):
    """Passes every call to `inner` and writes it to the cassette at `path` (created or
    overwritten; each call is added to the file as it ends, so a crash keeps what was
    recorded). The file holds every call; `calls` holds the most recent `window` of them
    (`runtime.window`, None keeps every one)."""

    def __init__(self, inner: Runtime, path: str | os.PathLike, *, name: str | None = None,
                 window: int | None = DEFAULT_WINDOW):
        if not isinstance(inner, Runtime):
            raise TypeError(f"RecordingRuntime(inner, path) records an openprogram Runtime, got "
                            f"{type(inner).__name__}")
        super().__init__(model=inner.model, name=name or inner.name, window=window)
        self.inner = inner
        self.path = Path(path)
        self.streams = inner.streams
        self.calls: Window = Window(window)
        self._lock = threading.Lock()
        self._write()

    def __repr__(self) -> str:
        return f"RecordingRuntime({self.inner!r}, {str(self.path)!r}, {len(self.calls)} calls)"

    def complete(self, messages, *, tools=None, on_text=None, timeout=None) -> ModelResponse:
        entry: dict = {"call": None, "request": request_record(messages, tools)}
        t0 = time.perf_counter()
        try:
            resp = self.inner.complete(messages, tools=tools, on_text=on_text, timeout=timeout)
        except ModelCallError as exc:
            entry["error"] = {"type": type(exc).__name__, "kind": exc.kind,
                              "message": str(exc), "partial": exc.partial}
            self._add(entry, t0)
            raise
        if not isinstance(resp, ModelResponse):
            from ..agentic_programming.runtime import as_response
            resp = as_response(resp)
        entry["response"] = {"text": _plain(resp.text),
                             "tool_calls": [_plain(t) for t in resp.tool_calls],
                             "usage": _plain(resp.usage), "model": resp.model}
        self._add(entry, t0)
        return resp

    def _add(self, entry: dict, t0: float) -> None:
        entry["duration_s"] = round(time.perf_counter() - t0, 4)
        with self._lock:
            entry["call"] = len(self.calls) + self.calls.dropped + 1
            self.calls.append(entry)
            self._append(entry)

    def _write(self) -> None:
        """The cassette with no calls yet, written whole."""
        data = {"format": FORMAT, "version": VERSION, "runtime": self.name,
                "model": self.model, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
                "calls": []}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, self.path)

    def _append(self, entry: dict) -> None:
        """Add one call at the end of the file's "calls" list, laid out as `json.dump(...,
        indent=2)` lays out the whole cassette. Memory holds only a window of the calls, so
        the file is extended in place rather than rewritten from them."""
        item = "\n".join("    " + line for line in
                         json.dumps(entry, indent=2, ensure_ascii=False).split("\n"))
        first = entry["call"] == 1
        tail = _EMPTY_TAIL if first else _TAIL
        with open(self.path, "r+b") as f:
            f.seek(-len(tail), os.SEEK_END)
            f.write(((" [\n" if first else ",\n") + item + "\n  ]\n}\n").encode("utf-8"))


_TAIL = b"\n  ]\n}\n"      # how the file ends once it holds a call
_EMPTY_TAIL = b" []\n}\n"   # and before


def load_cassette(path: str | os.PathLike) -> dict:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no cassette at {str(p)!r}: record one with "
                                f"RecordingRuntime(inner_runtime, {str(p)!r})")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{str(p)!r} is not a JSON cassette ({exc}); re-record it with "
                         f"RecordingRuntime") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("calls"), list):
        raise ValueError(f"{str(p)!r} is not an openprogram cassette (it needs "
                         f'"format": "{FORMAT}" and a "calls" list); re-record it with '
                         f"RecordingRuntime")
    if data.get("version", VERSION) > VERSION:
        raise ValueError(f"{str(p)!r} is a cassette of format version {data['version']}; this "
                         f"openprogram reads version {VERSION}. Upgrade openprogram.")
    return data


def _head(value: Any, n: int = 240) -> str:
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + f"... [{len(s) - n} more chars]"


def first_difference(expected: dict, actual: dict) -> str:
    """Where two request records first differ, shown as the two heads from that point."""
    em, am = expected.get("messages") or [], actual.get("messages") or []
    for i in range(max(len(em), len(am))):
        e = em[i] if i < len(em) else None
        a = am[i] if i < len(am) else None
        if e == a:
            continue
        if e is None or a is None:
            return (f"message {i + 1}: expected {_head(e) if e else 'no message'}; "
                    f"got {_head(a) if a else 'no message'}")
        es, as_ = json.dumps(e, ensure_ascii=False), json.dumps(a, ensure_ascii=False)
        k = next((j for j, (x, y) in enumerate(zip(es, as_)) if x != y), min(len(es), len(as_)))
        start = max(0, k - 60)
        return (f"message {i + 1} ({e.get('role', '?')}), from character {start}:\n"
                f"  expected: {_head(es[start:])}\n  actual:   {_head(as_[start:])}")
    return (f"the tools differ:\n  expected: {_head(expected.get('tools'))}\n"
            f"  actual:   {_head(actual.get('tools'))}")


class ReplayRuntime(Runtime):
    """Plays a cassette back in order. `strict=True` (default) checks that each request equals
    the recorded one; `strict=False` only replays the replies in order. `stream_chunk` is the
    size of the text pieces sent to `on_text`; `realtime=True` sleeps the recorded latency."""

    streams = True

    def __init__(self, path: str | os.PathLike, *, strict: bool = True, stream_chunk: int = 8,
                 realtime: bool = False, name: str | None = None):
        data = load_cassette(path)
        super().__init__(model=data.get("model"), name=name or data.get("runtime") or "replay")
        self.path = Path(path)
        self.strict = strict
        self.stream_chunk = max(1, int(stream_chunk))
        self.realtime = realtime
        self.recorded: list[dict] = data["calls"]
        self._next = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"ReplayRuntime({str(self.path)!r}, {len(self.recorded)} calls, "
                f"{self._next} replayed)")

    @property
    def remaining(self) -> int:
        return len(self.recorded) - self._next

    def complete(self, messages, *, tools=None, on_text=None, timeout=None) -> ModelResponse:
        actual = request_record(messages, tools)
        with self._lock:
            n = self._next + 1
            if self._next >= len(self.recorded):
                raise CassetteExhausted(
                    f"the cassette {str(self.path)!r} holds {len(self.recorded)} model calls and "
                    f"the program asked for call #{n}; its last message began: "
                    f"{_head((actual['messages'] or [{}])[-1], 160)}. Re-record the cassette "
                    f"with RecordingRuntime.", call=n, actual=actual)
            entry = self.recorded[self._next]
            if self.strict and entry.get("request") != actual:
                raise CassetteMismatch(
                    f"call #{n} does not match the cassette {str(self.path)!r}: "
                    f"{first_difference(entry.get('request') or {}, actual)}\n"
                    f"The program changed since recording; re-record with RecordingRuntime "
                    f"(or ReplayRuntime(..., strict=False) to replay the replies regardless).",
                    call=n, expected=entry.get("request"), actual=actual)
            self._next += 1
        if "error" in entry:
            err = entry["error"]
            partial = err.get("partial") or ""
            self._play(partial, on_text, entry)
            raise ModelCallError(err.get("message", "recorded failure"), partial=partial,
                                 kind=err.get("kind", "model_error"))
        r = entry.get("response") or {}
        text = r.get("text", "")
        self._play(text, on_text, entry)
        return ModelResponse(
            text=text,
            tool_calls=[ToolCall(t["name"], t.get("args", {}), t.get("id"))
                        for t in r.get("tool_calls") or []],
            usage=dict(r["usage"]) if r.get("usage") else None, model=r.get("model"))

    def _play(self, text: Any, on_text, entry: dict) -> None:
        stream_text(text, self.stream_chunk, on_text,
                    (entry.get("duration_s") or 0) if self.realtime else 0)

__all__ = ["RecordingRuntime", "ReplayRuntime", "CassetteMismatch", "CassetteExhausted",
           "load_cassette"]
