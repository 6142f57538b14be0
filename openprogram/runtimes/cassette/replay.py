"""Replay: answer a program's model calls from a cassette, matched by what is asked.

`ReplayRuntime(path)` answers each request with the reply recorded for the same request — the
same messages, tools and way of asking (`cassette_file.ask_key`) — with no network and no key:
on Binder, in CI, in a classroom. Matching by request, not by position, is what lets an
evaluation recorded with eight rows in flight replay with one or sixteen: concurrent rows reach
the model in a different order every run, but each row asks the same thing. A request recorded
several times (two identical rows, a re-ask that repeats itself) is answered with its recordings
in their recorded order. Each replayed reply streams through `on_text` in small chunks (a
notebook panel shows it growing, as it did live), usage and model are the recorded ones, and a
recorded failure is raised again as the same `ModelCallError`; `acomplete()` answers on the
caller's event loop. A request the cassette never recorded raises `CassetteMismatch`, which
names the nearest recorded request and where the two first differ (the program changed since
recording: a prompt, an option, a tool result); one asked more often than recorded raises
`CassetteExhausted`. `strict=False` plays the replies back in recorded order whatever is asked.
"""
from __future__ import annotations

import json
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

from ...base.errors import CassetteExhausted, CassetteMismatch
from ...base.text import cut
from ...decision.modes import MODES
from ...runtime.runtime import ModelCallError, ModelResponse, Runtime, ToolCall, timed_out
from ..scripted import stream_pieces, stream_text
from .cassette_file import ask_key, load_cassette, request_record
from .tool_results import ToolAnswers, recorded_result, tool_call


def _head(value: Any, n: int = 240) -> str:
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return cut(s, n, "... [{n} more chars]")


def first_difference(expected: dict, actual: dict) -> str:
    """Where two request records first differ, shown as the two heads from that point."""
    em, am = expected.get("messages") or [], actual.get("messages") or []
    for i in range(max(len(em), len(am))):
        e = em[i] if i < len(em) else None
        a = am[i] if i < len(am) else None
        if e == a:
            continue
        if e is None or a is None:
            return (f"message {i + 1}: recorded {_head(e) if e else 'no message'}; "
                    f"asked {_head(a) if a else 'no message'}")
        es, as_ = json.dumps(e, ensure_ascii=False), json.dumps(a, ensure_ascii=False)
        k = next((j for j, (x, y) in enumerate(zip(es, as_)) if x != y), min(len(es), len(as_)))
        start = max(0, k - 60)
        return (f"message {i + 1} ({e.get('role', '?')}), from character {start}:\n"
                f"  recorded: {_head(es[start:])}\n  asked:    {_head(as_[start:])}")
    for key in sorted((set(expected) | set(actual)) - {"messages"}):
        if expected.get(key) != actual.get(key):
            return (f"the {key} differ:\n  recorded: {_head(expected.get(key))}\n"
                    f"  asked:    {_head(actual.get(key))}")
    return "the requests differ"


def _shared_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def nearest(recorded: list[dict], actual: dict) -> int | None:
    """The position in `recorded` (call entries) of the request nearest `actual`: the one whose
    canonical JSON shares the longest beginning with it, then the closest in length. Only run
    to explain a mismatch, so it may read every recorded request."""
    target = json.dumps(actual, sort_keys=True, ensure_ascii=False)
    best, best_score = None, None
    seen: set[str] = set()
    for i, entry in enumerate(recorded):
        text = json.dumps(entry.get("request"), sort_keys=True, ensure_ascii=False)
        if text in seen:
            continue
        seen.add(text)
        score = (_shared_prefix(text, target), -abs(len(text) - len(target)))
        if best_score is None or score > best_score:
            best, best_score = i, score
    return best


def stream_entry(entry: dict, chunk: int, on_text, seconds: float = 0.0) -> None:
    stream_text(entry_text(entry), chunk, on_text, seconds)


async def astream_entry(entry: dict, chunk: int, on_text, seconds: float = 0.0) -> None:
    import asyncio
    for piece, wait in stream_pieces(entry_text(entry), chunk, on_text, seconds):
        if wait:
            await asyncio.sleep(wait)
        if piece is not None:
            on_text(piece)


def entry_text(entry: dict) -> Any:
    """What streams: the reply's text, or a failure's partial text."""
    if "error" in entry:
        return entry["error"].get("partial") or ""
    return (entry.get("response") or {}).get("text", "")


def answer(entry: dict, *, cached: bool = False) -> ModelResponse:
    """The recorded reply as a ModelResponse, or the recorded failure raised again."""
    if "error" in entry:
        err = entry["error"]
        raise ModelCallError(err.get("message", "recorded failure"),
                             partial=err.get("partial") or "",
                             kind=err.get("kind", "model_error"))
    r = entry.get("response") or {}
    resp = ModelResponse(
        text=r.get("text", ""),
        tool_calls=[ToolCall(t["name"], t.get("args", {}), t.get("id"))
                    for t in r.get("tool_calls") or []],
        usage=dict(r["usage"]) if r.get("usage") else None, model=r.get("model"),
        finish_reason=r.get("finish_reason"), refusal=r.get("refusal"), raw=r.get("raw"),
        cached=cached, confidence=r.get("confidence"), content_blocks=r.get("content_blocks"))
    return resp


async def _replayed(entry: dict) -> Any:
    return recorded_result(entry)


class ReplayRuntime(Runtime):
    """Answers each request with the reply recorded for it. `strict=True` (default) matches
    requests to recordings; `strict=False` only replays the replies in recorded order.
    `stream_chunk` is the size of the text pieces sent to `on_text`; `realtime=True` sleeps the
    recorded latency, never longer than the time budget left (`timeout_s`): a call recorded
    as slower ends as a timeout when the budget does."""

    streams = True
    #: A recording holds text, tool calls or JSON alike: every way of asking replays.
    modes = frozenset(MODES)
    #: What was recorded with shortlist="native" replays (a request that was not recorded is
    #: a CassetteMismatch as always).
    native_tool_search = True

    def __init__(self, path: str | os.PathLike, *, strict: bool = True, stream_chunk: int = 8,
                 realtime: bool = False, name: str | None = None):
        data = load_cassette(path)
        super().__init__(model=data.get("model"), name=name or data.get("runtime") or "replay")
        self.path = Path(path)
        self.strict = strict
        self.stream_chunk = max(1, int(stream_chunk))
        self.realtime = realtime
        self.recorded: list[dict] = data["calls"]
        self._lines = 1 if data.get("version", 0) >= 3 else None  # a call's line: its index + 2
        self._call_lines = data.get("call_lines")  # when tool lines sit between the calls
        # each request's recordings, in recorded order; answering one takes it off its queue
        self._queues: dict[str, deque] = {}
        for i, entry in enumerate(self.recorded):
            self._queues.setdefault(ask_key(entry["request"]), deque()).append(i)
        self._count = {k: len(q) for k, q in self._queues.items()}
        self._answered = 0
        self._lock = threading.Lock()
        self._tools = ToolAnswers(data.get("tools") or [], str(path))

    def __repr__(self) -> str:
        return (f"ReplayRuntime({str(self.path)!r}, {len(self.recorded)} calls, "
                f"{self._answered} replayed)")

    @property
    def confidence_source(self) -> str | None:
        """The distribution the recorded runtime gave ("exact", "logprobs"), read from the
        recording: a replay gives what was recorded, so confidence=True replays too."""
        for entry in self.recorded:
            conf = (entry.get("response") or {}).get("confidence")
            if isinstance(conf, dict) and conf.get("source") in ("exact", "logprobs"):
                return conf["source"]
        return None

    @property
    def remaining(self) -> int:
        """How many recorded calls have not been answered yet."""
        return len(self.recorded) - self._answered

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        entry = self._take(messages, tools, mode_args)
        wait = self._latency(entry)
        if timeout is not None and wait > timeout:   # the recorded call outlasts the budget
            import time
            time.sleep(max(timeout, 0))
            raise timed_out(timeout)
        stream_entry(entry, self.stream_chunk, on_text, wait)
        return answer(entry)

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        """The same replay on the caller's event loop (a recorded latency is `asyncio.sleep`)."""
        entry = self._take(messages, tools, mode_args)
        wait = self._latency(entry)
        if timeout is not None and wait > timeout:
            import asyncio
            await asyncio.sleep(max(timeout, 0))
            raise timed_out(timeout)
        await astream_entry(entry, self.stream_chunk, on_text, wait)
        return answer(entry)

    #: A server's tool listing is answered from the recording: no server is started.
    tool_listing = "replay"

    def tool_result(self, call: dict, run: Any) -> Any:
        """A live tool's call answered with the result recorded for the same call (server,
        tool, arguments): `run` is never called, so no server is needed. A call the cassette did
        not record raises `ToolNotRecorded` naming it (see tool_results.py)."""
        from ...base.secrets import scrub
        call = scrub(tool_call(call["server"], call["name"], call["arguments"]))
        with self._lock:
            entry = self._tools.take(call)
        return _replayed(entry)

    def _where(self, i: int) -> str:
        line = self._call_lines[i] if self._call_lines else i + 2
        return f"call #{i + 1}" + (f" (line {line})" if self._lines else "")

    def _take(self, messages, tools, mode_args) -> dict:
        """The recording that answers this request."""
        actual = request_record(messages, tools, {k: v for k, v in mode_args.items()
                                                  if v is not None})
        path = str(self.path)
        with self._lock:
            n = self._answered + 1
            if not self.strict:
                if self._answered >= len(self.recorded):
                    raise CassetteExhausted(
                        f"the cassette {path!r} holds {len(self.recorded)} model calls and the "
                        f"program asked for call #{n} (strict=False replays them in recorded "
                        f"order); its last message began: "
                        f"{_head((actual['messages'] or [{}])[-1], 160)}. Record the program "
                        f"again with RecordingRuntime.", call=n, actual=actual)
                self._answered += 1
                return self.recorded[n - 1]
            key = ask_key(actual)
            queue = self._queues.get(key)
            if queue:
                self._answered += 1
                return self.recorded[queue.popleft()]
        if queue is not None:
            times = self._count[key]
            raise CassetteExhausted(
                f"call #{n} asks a request the cassette {path!r} recorded {times} "
                f"time{'s' if times != 1 else ''}, and every recording of it has been replayed "
                f"(this replay runtime was used for more runs than were recorded, or the "
                f"program repeats a request it did not repeat when recording); its last "
                f"message began: {_head((actual['messages'] or [{}])[-1], 160)}. Use a fresh "
                f"ReplayRuntime for each run, or record again with RecordingRuntime.",
                call=n, actual=actual)
        near = nearest(self.recorded, actual)
        if near is None:
            raise CassetteMismatch(
                f"call #{n} asks a request that the cassette {path!r} did not record: it holds "
                f"no model calls. Record the program with RecordingRuntime(runtime, {path!r}).",
                call=n, actual=actual)
        expected = self.recorded[near]["request"]
        raise CassetteMismatch(
            f"call #{n} asks a request that the cassette {path!r} did not record. The nearest "
            f"recorded request is {self._where(near)}; where they first differ: "
            f"{first_difference(expected, actual)}\nThe program asks something it did not ask "
            f"when recording (a prompt, an option, a tool result or the way of asking "
            f"changed): record it again with RecordingRuntime, or wrap the model in "
            f"CachedRuntime to ask it only what is new (ReplayRuntime(..., strict=False) "
            f"replays the replies in recorded order regardless).",
            call=n, expected=expected, actual=actual)

    def _latency(self, entry: dict) -> float:
        return (entry.get("duration_s") or 0) if self.realtime else 0


__all__ = ["ReplayRuntime", "CassetteMismatch", "CassetteExhausted", "first_difference",
           "answer"]
