"""Record a runtime's model calls to a JSON cassette, and replay them offline.

`RecordingRuntime(inner, path)` passes every call through to `inner` (an `OpenAIRuntime`, an
`AnthropicRuntime`, any Runtime) and writes it to `path` as it happens: the request (messages and
tool specs), the reply (text, tool calls), token usage, the model that answered, the latency, and
a failed call's error and partial text. The file is plain JSON with an indent, meant to be read,
diffed and committed next to a notebook; it holds no key or header (only what the runtime's
`complete()` sees, and error texts that the provider runtimes have already redacted). Nothing a
reply holds can spoil it: text that UTF-8 cannot encode (a lone surrogate) is stored as its JSON
escape and reads back the same, any other value as its repr; each write goes to a temporary file
that replaces the cassette only once it is whole, and is removed if the write fails or is
interrupted, so the file on disk is always a whole cassette. A write that fails (a full disk)
warns and does not fail the model call; the next call writes every call again.

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
import secrets
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from ..agentic_programming.runtime import ModelCallError, ModelResponse, Runtime, ToolCall
from ._unicode import escape_surrogates
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


def request_record(messages: list[dict], tools: list[dict] | None,
                   mode_args: dict | None = None) -> dict:
    """A request as the cassette holds it; what a way of asking adds (`response_format=`,
    `tool_choice=`) is kept only when sent, so menu-mode cassettes read as before."""
    record = {"messages": _plain(messages), "tools": _plain(tools)}
    if mode_args:
        record["mode_args"] = _plain(mode_args)
    return record


def dumps(data: Any) -> str:
    """`data` as indented JSON that UTF-8 can encode: non-ASCII text stays readable, and the one
    kind of text UTF-8 cannot encode (surrogates, see _unicode) is written as its escape."""
    return escape_surrogates(json.dumps(data, indent=2, ensure_ascii=False))


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text`: written to a temporary file beside it, which replaces `path`
    only once it is whole and flushed to disk, and which is removed whatever stops the write
    (an error, a full disk, Ctrl-C)."""
    data = text.encode("utf-8")
    # the name is chosen before the file exists, so the cleanup knows it however early the
    # write is stopped
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    replaced = False
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        replaced = True
    finally:
        if not replaced:
            try:
                os.unlink(tmp)
            except FileNotFoundError:  # never created, or stopped just after the replace
                pass


class RecordingRuntime(Runtime):
    """Passes every call to `inner` and writes it to the cassette at `path` (created or
    overwritten; the file is rewritten after each call, so a crash keeps what was recorded)."""

    def __init__(self, inner: Runtime, path: str | os.PathLike, *, name: str | None = None):
        if not isinstance(inner, Runtime):
            raise TypeError(f"RecordingRuntime(inner, path) records an openprogram Runtime, got "
                            f"{type(inner).__name__}")
        super().__init__(model=inner.model, name=name or inner.name)
        self.inner = inner
        self.path = Path(path)
        self.streams = inner.streams
        self.calls: list[dict] = []
        self._lock = threading.Lock()
        try:
            self._write()
        except OSError as exc:
            raise OSError(f"RecordingRuntime cannot write the cassette {str(self.path)!r} "
                          f"({exc.strerror or exc}); pass a path in a writable folder") from None

    def __repr__(self) -> str:
        return f"RecordingRuntime({self.inner!r}, {str(self.path)!r}, {len(self.calls)} calls)"

    @property
    def modes(self) -> frozenset:
        """The ways of asking of the runtime recorded."""
        return self.inner.modes

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        entry: dict = {"call": None, "request": request_record(messages, tools, mode_args)}
        t0 = time.perf_counter()
        try:
            resp = self.inner.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                       **mode_args)
        except ModelCallError as exc:
            entry["error"] = _plain({"type": type(exc).__name__, "kind": exc.kind,
                                     "message": str(exc), "partial": exc.partial})
            self._add(entry, t0)
            raise
        if not isinstance(resp, ModelResponse):
            from ..agentic_programming.runtime import as_response
            resp = as_response(resp)
        entry["response"] = {"text": _plain(resp.text),
                             "tool_calls": [_plain(t) for t in resp.tool_calls],
                             "usage": _plain(resp.usage), "model": _plain(resp.model)}
        for key in ("finish_reason", "raw"):  # kept when the runtime reports them
            if getattr(resp, key) is not None:
                entry["response"][key] = _plain(getattr(resp, key))
        self._add(entry, t0)
        return resp

    def _add(self, entry: dict, t0: float) -> None:
        entry["duration_s"] = round(time.perf_counter() - t0, 4)
        with self._lock:
            entry["call"] = len(self.calls) + 1
            self.calls.append(entry)
            try:
                self._write()
            except OSError as exc:
                # The reply is good and the calls are kept: failing the model call for a full
                # disk would lose the reply too. The next call writes them all again.
                warnings.warn(f"RecordingRuntime could not write the cassette "
                              f"{str(self.path)!r} ({exc.strerror or exc}); the file keeps the "
                              f"calls of its last whole write. The {len(self.calls)} calls "
                              f"recorded so far are kept and are written with the next call.",
                              RuntimeWarning, stacklevel=3)

    def _write(self) -> None:
        data = {"format": FORMAT, "version": VERSION, "runtime": _plain(self.name),
                "model": _plain(self.model), "recorded_at": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "calls": self.calls}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, dumps(data) + "\n")


def load_cassette(path: str | os.PathLike) -> dict:
    """The cassette at `path` as data, checked: a file that is not one, half of one, one of
    another format version, or one with a damaged call raises a ValueError that says which and
    what to do (a FileNotFoundError when there is no file)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no cassette at {str(p)!r}: record one with "
                                f"RecordingRuntime(inner_runtime, {str(p)!r})")
    redo = f"re-record it with RecordingRuntime(inner_runtime, {str(p)!r})"
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{str(p)!r} is not a cassette: it is not UTF-8 text ({exc.reason} at "
                         f"byte {exc.start}); {redo}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            # the text ends before the JSON does (an unterminated string runs to the end)
            raise ValueError(f"{str(p)!r} was cut short: its JSON ends at character "
                             f"{len(text)} before it is complete (it was half-written or "
                             f"half-copied; RecordingRuntime itself never leaves one). Restore "
                             f"it from version control or {redo}.") from None
        raise ValueError(f"{str(p)!r} is not a JSON cassette ({exc}); {redo}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("calls"), list):
        raise ValueError(f"{str(p)!r} is not an openprogram cassette (it needs "
                         f'"format": "{FORMAT}" and a "calls" list); {redo}')
    _check_version(data, str(p), redo)
    for n, entry in enumerate(data["calls"], 1):
        problem = _entry_problem(entry)
        if problem:
            raise ValueError(f"call #{n} of the cassette {str(p)!r} {problem}: the file was cut "
                             f"or edited by hand; {redo}")
    return data


def _check_version(data: dict, where: str, redo: str) -> None:
    if "version" not in data:
        raise ValueError(f'{where!r} has no "version" field, which every cassette '
                         f"RecordingRuntime writes (this release writes version {VERSION}); "
                         f"{redo}")
    v = data["version"]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f'{where!r} has "version": {json.dumps(v)}, which is not a format '
                         f"version (a whole number; this release reads {VERSION}); {redo}")
    if v < VERSION:
        raise ValueError(f"{where!r} is a cassette of format version {v}, older than this "
                         f"release reads (version {VERSION}); {redo}")
    if v > VERSION:
        raise ValueError(f"{where!r} is a cassette of format version {v}, written by a newer "
                         f"release (this one reads version {VERSION}). Upgrade: "
                         f"pip install -U openprogram-decisions")


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one recorded call, or None."""
    if not isinstance(entry, dict):
        return "is not an object"
    request = entry.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return "has no request (an object with a \"messages\" list)"
    if "error" in entry:
        if not isinstance(entry["error"], dict):
            return "has an error that is not an object"
        return None
    if "response" not in entry:
        return "has no response and no error"
    response = entry["response"]
    if not isinstance(response, dict):
        return "has a response that is not an object"
    calls = response.get("tool_calls") or []
    if not isinstance(calls, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in calls):
        return "has a tool call without a name (each is an object with a \"name\")"
    return None


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
    key = "tools" if expected.get("tools") != actual.get("tools") else "mode_args"
    what = "tools" if key == "tools" else "way of asking's arguments (mode=)"
    return (f"the {what} differ:\n  expected: {_head(expected.get(key))}\n"
            f"  actual:   {_head(actual.get(key))}")


class ReplayRuntime(Runtime):
    """Plays a cassette back in order. `strict=True` (default) checks that each request equals
    the recorded one; `strict=False` only replays the replies in order. `stream_chunk` is the
    size of the text pieces sent to `on_text`; `realtime=True` sleeps the recorded latency."""

    streams = True
    #: A cassette can hold replies of every way of asking; in strict replay the mode's
    #: arguments (the schema, the tool choice) must be the recorded ones too.
    modes = frozenset({"menu", "tools", "json_schema"})

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

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        actual = request_record(messages, tools, mode_args)
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
            usage=dict(r["usage"]) if r.get("usage") else None, model=r.get("model"),
            finish_reason=r.get("finish_reason"), raw=r.get("raw"))

    def _play(self, text: Any, on_text, entry: dict) -> None:
        stream_text(text, self.stream_chunk, on_text,
                    (entry.get("duration_s") or 0) if self.realtime else 0)

__all__ = ["RecordingRuntime", "ReplayRuntime", "CassetteMismatch", "CassetteExhausted",
           "load_cassette"]
