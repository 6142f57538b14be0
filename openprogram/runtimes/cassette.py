"""Record a runtime's model calls to a JSON cassette, and replay them offline.

`RecordingRuntime(inner, path)` passes every call through to `inner` (an `OpenAIRuntime`, an
`AnthropicRuntime`, any Runtime) and writes it to `path` as it happens: the request (messages,
tool specs, and the way of asking's `tool_choice` / `response_format` when given), the reply
(text, tool calls, finish reason, refusal, the raw request and response the provider runtime
kept), token usage, the model that answered, the latency, a failed call's error and partial
text, and where the call sits: the decision it belongs to (its id in the runtime's DAG and its
entry point), the attempt of that decision, and the way of asking (`cassette_decisions` groups
the calls back into decisions and attempts, to re-check them offline). The file is plain JSON
text, meant to be read, diffed and committed next to a notebook; it holds no API key or HTTP
header (only what the runtime's `complete()` sees, and error texts and raw records that the
provider runtimes have already redacted). Nothing a reply holds can spoil it: text that UTF-8
cannot encode (a lone surrogate) is stored as its JSON escape and reads back the same, any other
value as its repr.

The file (format version 3) is JSON Lines: a first line holding the cassette's header (format,
version, runtime, model, when the recording started), then one line per call, appended as it ends
(one write of that line, flushed to disk), so recording a call costs the size of that call
whatever the file already holds. Memory holds only the most recent `window` calls (the DAG's
window, `DEFAULT_WINDOW`; None keeps every one). A write that fails part-way (a full disk, Ctrl-C)
is cut back off the file, so the file on disk is always a whole cassette; it warns and does not
fail the model call, and the calls not yet written stay in memory and are written, in order,
with the next call. A file whose last line was cut off all the same (power lost mid-write) gives
an error naming the line to delete. Version 1 and 2 cassettes (one indented JSON document) are
still read.

`ReplayRuntime(path)` answers the same calls in the same order with no network and no key — on
Binder, in CI, in a classroom. Each replayed reply streams through `on_text` in small chunks (so a
notebook panel shows it growing, as it did live), usage and model are the recorded ones, and a
recorded failure is raised again as the same `ModelCallError`. Both runtimes work the same way
through `acomplete()` (`decision.amake`, async agents): the recorder awaits the inner runtime's
async path, the replay answers on the caller's event loop. When the program now sends a
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
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..agentic_programming.model import run_sync
from ..agentic_programming.modes import MODES
from ..agentic_programming.runtime import (DEFAULT_WINDOW, ModelCallError, ModelResponse, Runtime,
                                           ToolCall, Window)
from ._unicode import escape_surrogates
from .scripted import _pieces, stream_text

FORMAT = "openprogram-cassette"
#: Version 3 is JSON Lines (a header line, then one line per call, appended); version 2 (one
#: indented JSON document) recorded where each call sits (decision, attempt, way of asking), the
#: mode arguments, finish reason, refusal and raw record; version 1 cassettes still replay.
VERSION = 3
OLDEST = 1


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
    """A request as a cassette holds it; the mode arguments only when given, so a menu-mode
    call reads as it did in version 1."""
    out = {"messages": _plain(messages), "tools": _plain(tools)}
    out.update({k: _plain(v) for k, v in (mode_args or {}).items() if v is not None})
    return out


def response_record(resp: ModelResponse) -> dict:
    out = {"text": _plain(resp.text), "tool_calls": [_plain(t) for t in resp.tool_calls],
           "usage": _plain(resp.usage), "model": _plain(resp.model)}
    for key in ("finish_reason", "refusal", "raw"):
        if getattr(resp, key) is not None:
            out[key] = _plain(getattr(resp, key))
    return out


def _mode_of(mode_args: dict) -> str:
    if mode_args.get("response_format") is not None:
        return "json_schema"
    return "tools" if mode_args.get("tool_choice") is not None else "menu"


class _Places:
    """Which decision and which attempt each model call belongs to, read from the runtime's
    DAG: the decision is the nearest `decision` node above the call's node. The attempt is
    inferred from how the call follows the decision's previous one: a fresh conversation (the
    re-ask of the menu and json_schema modes), a previous reply that failed or called no tool,
    or one that called an offered tool that did not run (a choice, in tools mode: the turn
    ended), starts the next attempt; a previous reply whose calls ran as tools, or named no
    offered tool, is a tool round of the same attempt."""

    def __init__(self, dag: Any):
        self.dag = dag
        # the last call of each decision still in the DAG's window, oldest decision first: a
        # decision whose node fell out of the window gets no more calls placed in it (its calls
        # no longer find it), so its entry is dropped and this holds at most a window's worth
        self._last: OrderedDict[int, dict] = OrderedDict()
        self._lock = threading.Lock()

    def _node(self, node_id: int | None) -> Any:
        return None if node_id is None else self.dag.node(node_id)

    def _forget_dropped(self) -> None:
        nodes = self.dag.nodes
        oldest = nodes[0].id if nodes else float("inf")
        while self._last and next(iter(self._last)) < oldest:
            self._last.popitem(last=False)

    def place(self, messages: list[dict], tools: list[dict] | None,
              mode_args: dict) -> tuple[dict | None, int | None]:
        """`({"id", "entry", "attempt", "mode"} or None outside a decision, the call's node)`."""
        from ..agentic_programming.runtime import _current_node
        call = self._node(_current_node.get())
        node = call
        while node is not None and node.kind != "decision":
            node = self._node(node.parent)
        if node is None:
            return None, getattr(call, "id", None)
        with self._lock:
            last = self._last.get(node.id)
            attempt = 1 if last is None else last["attempt"] + \
                (0 if self._same_turn(last, node.id, len(messages)) else 1)
            self._last[node.id] = {"attempt": attempt, "after": getattr(call, "id", 0) or 0,
                                   "offered": {t.get("name") for t in tools or []},
                                   "calls": None}
            self._forget_dropped()
        return ({"id": node.id, "entry": node.name, "attempt": attempt,
                 "mode": _mode_of(mode_args)}, node.id)

    def _same_turn(self, last: dict, decision: int, n_messages: int) -> bool:
        calls = last["calls"]
        if n_messages <= 1 or not calls:
            return False
        ran = set()
        for n in reversed(self.dag.nodes):  # the nodes added since that call: the newest ones
            if n.id <= last["after"]:
                break
            if n.kind == "tool" and n.parent == decision:
                ran.add(n.name)
        return not any(name in last["offered"] and name not in ran for name in calls)

    def settle(self, decision: int | None, resp: ModelResponse | None) -> None:
        """Note what the call of `decision` replied (None: it failed)."""
        if decision is None:
            return
        with self._lock:
            if decision in self._last:
                self._last[decision]["calls"] = None if resp is None else \
                    [tc.name for tc in resp.tool_calls]


def line(data: Any) -> bytes:
    """`data` as one line of a version-3 cassette, in UTF-8: JSON on one line (it escapes every
    newline inside a string), non-ASCII text readable, and the one kind of text UTF-8 cannot
    encode (surrogates, see _unicode) written as its escape."""
    return (escape_surrogates(json.dumps(data, ensure_ascii=False)) + "\n").encode("utf-8")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: written to a temporary file beside it, which replaces `path`
    only once it is whole and flushed to disk, and which is removed whatever stops the write
    (an error, a full disk, Ctrl-C)."""
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


def append_whole(path: Path, data: bytes, size: int) -> int:
    """Append `data` to the file at `path`, which is `size` bytes long, and return its new size:
    one write (continued if the system takes only part of it) flushed to disk. A write that fails
    or is interrupted part-way is cut back off, so the file never ends in half a line."""
    # unbuffered: nothing is left to flush on a cut; "r+", not "a": a cassette deleted
    # meanwhile is an error, not a new file without its header
    with open(path, "r+b", buffering=0) as f:
        start = f.seek(0, os.SEEK_END)
        if start > size:  # the tail of an earlier failed write whose cut-back failed too
            os.ftruncate(f.fileno(), size)
            start = f.seek(size)
        elif start < size:  # appending would leave a file that is no cassette, or a wrong one
            raise OSError(f"something else truncated or replaced the file while recording: "
                          f"it holds {start} bytes where {size} were written")
        done = False
        try:
            view = memoryview(data)
            while view:
                view = view[f.write(view):]
            os.fsync(f.fileno())
            done = True
        finally:
            if not done:
                os.ftruncate(f.fileno(), start)
    return start + len(data)


class RecordingRuntime(Runtime):
    """Passes every call to `inner` and appends it to the cassette at `path` (created or
    overwritten), so a crash keeps what was recorded. `calls` holds the most recent `window`
    calls (`DEFAULT_WINDOW`, as the DAG; None keeps every one; `rec.window = n` changes both);
    the file holds all of them."""

    def __init__(self, inner: Runtime, path: str | os.PathLike, *,
                 window: int | None = DEFAULT_WINDOW, name: str | None = None):
        if not isinstance(inner, Runtime):
            raise TypeError(f"RecordingRuntime(inner, path) records an openprogram Runtime, got "
                            f"{type(inner).__name__}")
        super().__init__(model=inner.model, name=name or inner.name, window=window)
        self.inner = inner
        self.path = Path(path)
        self.streams = inner.streams
        self.calls: Window = Window(window)
        self._count = 0                   # calls recorded, numbered 1.. in the file
        self._unwritten: list[bytes] = []  # lines a failed write left for the next one
        self._lock = threading.Lock()
        self._places = _Places(self.dag)
        header = {"format": FORMAT, "version": VERSION, "runtime": _plain(self.name),
                  "model": _plain(self.model),
                  "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        first = line(header)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, first)
        except OSError as exc:
            raise OSError(f"RecordingRuntime cannot write the cassette {str(self.path)!r} "
                          f"({exc.strerror or exc}); pass a path in a writable folder") from None
        self._size = len(first)

    def __repr__(self) -> str:
        return f"RecordingRuntime({self.inner!r}, {str(self.path)!r}, {self._count} calls)"

    @property
    def modes(self) -> frozenset:
        return self.inner.modes

    def redact(self, text):
        """The recorded runtime's redaction (of its API key), for what the mechanism decodes."""
        inner = getattr(self.inner, "redact", None)
        return text if inner is None else inner(text)

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        async def send():  # never suspends: complete() drives it without an event loop
            return self.inner.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                       **mode_args)
        return run_sync(self._record(messages, tools, mode_args, send))

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        async def send():
            return await self.inner.acomplete(messages, tools=tools, on_text=on_text,
                                              timeout=timeout, **mode_args)
        return await self._record(messages, tools, mode_args, send)

    async def _record(self, messages, tools, mode_args, send) -> ModelResponse:
        mode_args = {k: v for k, v in mode_args.items() if v is not None}
        where, decision = self._places.place(messages, tools, mode_args)
        entry: dict = {"call": None, "decision": where,
                       "request": request_record(messages, tools, mode_args)}
        t0 = time.perf_counter()
        try:
            resp = await send()
        except ModelCallError as exc:
            self._places.settle(decision, None)
            entry["error"] = _plain({"type": type(exc).__name__, "kind": exc.kind,
                                     "message": str(exc), "partial": exc.partial})
            self._add(entry, t0)
            raise
        if not isinstance(resp, ModelResponse):
            from ..agentic_programming.runtime import as_response
            resp = as_response(resp)
        self._places.settle(decision, resp)
        entry["response"] = response_record(resp)
        self._add(entry, t0)
        return resp

    def _add(self, entry: dict, t0: float) -> None:
        entry["duration_s"] = round(time.perf_counter() - t0, 4)
        with self._lock:
            self._count += 1
            entry["call"] = self._count
            self.calls.append(entry)
            self._unwritten.append(line(entry))
            try:
                self._size = append_whole(self.path, b"".join(self._unwritten), self._size)
            except OSError as exc:
                # The reply is good and the call is kept: failing the model call for a full
                # disk would lose the reply too. The next call writes the ones left, in order.
                left = len(self._unwritten)
                first = self._count - left + 1
                which = f"call #{first} is" if left == 1 else \
                    f"calls #{first} to #{self._count} are"
                warnings.warn(f"RecordingRuntime could not write the cassette "
                              f"{str(self.path)!r} ({exc.strerror or exc}); the file keeps the "
                              f"{first - 1} calls written before, whole. The unwritten {which} "
                              f"kept in memory and written with the next call.",
                              RuntimeWarning, stacklevel=3)
            else:
                self._unwritten.clear()


def load_cassette(path: str | os.PathLike) -> dict:
    """The cassette at `path` as data (`{"format", "version", ..., "calls": [...]}`, whichever
    version wrote it), checked: a file that is not one, half of one, one of another format
    version, or one with a damaged call raises a ValueError that says which and what to do (a
    FileNotFoundError when there is no file)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no cassette at {str(p)!r}: record one with "
                                f"RecordingRuntime(inner_runtime, {str(p)!r})")
    where = str(p)
    redo = f"re-record it with RecordingRuntime(inner_runtime, {where!r})"
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where!r} is not a cassette: it is not UTF-8 text ({exc.reason} at "
                         f"byte {exc.start}); {redo}") from None
    first = text.partition("\n")[0]
    try:  # a version-3 header line; the first line of a version-2 file is a lone "{"
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None
    if isinstance(head, dict) and head.get("format") == FORMAT and "calls" not in head:
        data, lines = _read_lines(head, text, where, redo), True
    else:
        data, lines = _read_document(text, where, redo), False
    for n, entry in enumerate(data["calls"], 1):
        problem = _entry_problem(entry)
        if problem:
            at = f" (line {n + 1})" if lines else ""
            raise ValueError(f"call #{n}{at} of the cassette {where!r} {problem}: the file was "
                             f"cut or edited by hand; {redo}")
    return data


def _read_document(text: str, where: str, redo: str) -> dict:
    """A cassette of versions 1 and 2: one JSON document holding a "calls" list."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            # the text ends before the JSON does (an unterminated string runs to the end)
            raise ValueError(f"{where!r} was cut short: its JSON ends at character "
                             f"{len(text)} before it is complete (it was half-written or "
                             f"half-copied; RecordingRuntime itself never leaves one). Restore "
                             f"it from version control or {redo}.") from None
        raise ValueError(f"{where!r} is not a JSON cassette ({exc}); {redo}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("calls"), list):
        raise ValueError(f"{where!r} is not an openprogram cassette (it needs "
                         f'"format": "{FORMAT}" and a "calls" list); {redo}')
    _check_version(data, where, redo)
    return data


def _read_lines(head: dict, text: str, where: str, redo: str) -> dict:
    """A cassette of version 3: its header line, then one call per line, each ended by a
    newline. Only the last line can be half-written (the recorder appends, and cuts back a write
    that fails); it is named, with what to do."""
    _check_version(head, where, redo)
    if head["version"] < 3:
        raise ValueError(f"{where!r} is written as JSON Lines, as version 3 cassettes are, but "
                         f"its first line says version {head['version']}: it was edited by "
                         f"hand; {redo}")
    rows = text.split("\n")
    tail = rows.pop()  # "" after the newline that ends a whole file
    calls = []
    for n, row in enumerate(rows[1:], 2):
        try:
            calls.append(json.loads(row))
        except json.JSONDecodeError as exc:
            if n == len(rows) and not tail:
                raise _cut_off(where, n, len(calls), f"it is not whole JSON ({exc.msg})",
                               redo) from None
            raise ValueError(f"line {n} of the cassette {where!r} is not JSON ({exc.msg} at "
                             f"column {exc.colno}): the file was edited by hand; {redo}") from None
    if tail and rows:  # (a header alone without its newline is a whole empty cassette)
        raise _cut_off(where, len(rows) + 1, len(calls), "it has no newline at its end", redo)
    return {**head, "calls": calls}


def _cut_off(where: str, n: int, whole: int, why: str, redo: str) -> ValueError:
    return ValueError(f"the last line of the cassette {where!r}, line {n}, was cut off: {why}. "
                     f"A recording stopped in the middle of a write (the process was killed or "
                     f"the power went). The {whole} calls before it are whole: delete line {n} "
                     f"to replay them, or {redo}.")


def _check_version(data: dict, where: str, redo: str) -> None:
    if "version" not in data:
        raise ValueError(f'{where!r} has no "version" field, which every cassette '
                         f"RecordingRuntime writes (this release writes version {VERSION}); "
                         f"{redo}")
    v = data["version"]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f'{where!r} has "version": {json.dumps(v)}, which is not a format '
                         f"version (a whole number; this release reads versions {OLDEST} to "
                         f"{VERSION}); {redo}")
    if v < OLDEST:
        raise ValueError(f"{where!r} is a cassette of format version {v}, older than this "
                         f"release reads (versions {OLDEST} to {VERSION}); {redo}")
    if v > VERSION:
        raise ValueError(f"{where!r} is a cassette of format version {v}, written by a newer "
                         f"release (this one reads versions {OLDEST} to {VERSION}). Upgrade: "
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


def cassette_decisions(cassette: Any) -> list[dict]:
    """The calls of a cassette (a path, or the data `load_cassette` returns) grouped into the
    decisions they belong to, in the order the decisions started:
    `[{"decision": id, "entry": "decision.make", "mode": "menu", "attempts": [{"attempt": 1,
    "calls": [<call entry>, ...]}, ...]}, ...]`; an attempt's last call holds the reply that
    was checked (the ones before it are its tool rounds). Calls made outside a decision (a
    plain turn) are left out. A cassette of format version 1 does not record where its calls
    sit: it replays, but grouping it is a ValueError that says to re-record it."""
    if isinstance(cassette, dict):
        data, where = cassette, "the cassette"
    else:
        data, where = load_cassette(cassette), repr(str(cassette))
    version = data.get("version")
    if not isinstance(version, int) or version < 2:
        raise ValueError(
            f"{where} is a cassette of format version {version}, which does not record which "
            f"decision and attempt each model call belongs to; it still replays, but to group "
            f"its calls (to re-check them offline) re-record it with RecordingRuntime(inner_"
            f"runtime, path) (this release writes version {VERSION})")
    out: dict[int, dict] = {}
    for n, entry in enumerate(data.get("calls") or [], 1):
        place = entry.get("decision")
        if place is None:
            continue
        if not isinstance(place, dict) or not isinstance(place.get("id"), int) or \
                not isinstance(place.get("attempt"), int):
            raise ValueError(f"call #{n} of {where} has a \"decision\" that is not an object "
                             f"with an id and an attempt number: the file was edited by hand; "
                             f"re-record it with RecordingRuntime")
        group = out.setdefault(place["id"], {"decision": place["id"],
                                             "entry": place.get("entry"),
                                             "mode": place.get("mode"), "attempts": []})
        attempts = group["attempts"]
        if not attempts or attempts[-1]["attempt"] != place["attempt"]:
            attempts.append({"attempt": place["attempt"], "calls": []})
        attempts[-1]["calls"].append(entry)
    return list(out.values())


def cassette_traces(cassette: Any) -> list:
    """The decisions of a cassette as `DecisionTrace`s of their recorded attempts (what
    `decision.revalidate` re-checks): each attempt's prompt, and the reply its last call got —
    text, tool calls, finish reason. What each decision resolved to is not in a cassette, so
    these traces end with status "recorded"."""
    from ..agentic_programming.model import blocks_text, to_blocks
    from ..agentic_programming.records import Attempt
    from ..agentic_programming.trace import DecisionTrace
    traces = []
    for group in cassette_decisions(cassette):
        attempts = []
        for a in group["attempts"]:
            last = a["calls"][-1]
            users = [m for m in (last["request"].get("messages") or []) if m.get("role") == "user"]
            prompt = blocks_text(to_blocks(users[-1]["content"])) if users else ""
            resp = last.get("response") or {}
            attempts.append(Attempt(
                number=a["attempt"], is_last=False, prompt=prompt, reply=resp.get("text"),
                tool_calls=[dict(c) for c in resp.get("tool_calls") or []] or None,
                finish_reason=resp.get("finish_reason")))
        first = attempts[0].prompt if attempts else ""
        trace = DecisionTrace(prompt=first, menu="", options=[], entry=group.get("entry") or "",
                              max_attempts=len(attempts), mode=group.get("mode") or "menu",
                              status="recorded")
        trace.attempts = attempts
        traces.append(trace)
    return traces


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
    for key in sorted((set(expected) | set(actual)) - {"messages"}):
        if expected.get(key) != actual.get(key):
            return (f"the {key} differ:\n  expected: {_head(expected.get(key))}\n"
                    f"  actual:   {_head(actual.get(key))}")
    return "the requests differ"


class ReplayRuntime(Runtime):
    """Plays a cassette back in order. `strict=True` (default) checks that each request equals
    the recorded one; `strict=False` only replays the replies in order. `stream_chunk` is the
    size of the text pieces sent to `on_text`; `realtime=True` sleeps the recorded latency."""

    streams = True
    #: A recording holds text, tool calls or JSON alike: every way of asking replays.
    modes = frozenset(MODES)

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
        entry = self._take(messages, tools, mode_args)
        text = self._text(entry)
        stream_text(text, self.stream_chunk, on_text, self._latency(entry))
        return self._answer(entry)

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        """The same replay on the caller's event loop (a recorded latency is `asyncio.sleep`)."""
        import asyncio
        entry = self._take(messages, tools, mode_args)
        for piece, wait in _pieces(self._text(entry), self.stream_chunk, on_text,
                                   self._latency(entry)):
            if wait:
                await asyncio.sleep(wait)
            if piece is not None:
                on_text(piece)
        return self._answer(entry)

    def _take(self, messages, tools, mode_args) -> dict:
        """The next recorded call, checked against this request when strict."""
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
        return entry

    @staticmethod
    def _text(entry: dict) -> Any:
        """What streams: the reply's text, or a failure's partial text."""
        if "error" in entry:
            return entry["error"].get("partial") or ""
        return (entry.get("response") or {}).get("text", "")

    def _latency(self, entry: dict) -> float:
        return (entry.get("duration_s") or 0) if self.realtime else 0

    @staticmethod
    def _answer(entry: dict) -> ModelResponse:
        if "error" in entry:
            err = entry["error"]
            raise ModelCallError(err.get("message", "recorded failure"),
                                 partial=err.get("partial") or "",
                                 kind=err.get("kind", "model_error"))
        r = entry.get("response") or {}
        return ModelResponse(
            text=r.get("text", ""),
            tool_calls=[ToolCall(t["name"], t.get("args", {}), t.get("id"))
                        for t in r.get("tool_calls") or []],
            usage=dict(r["usage"]) if r.get("usage") else None, model=r.get("model"),
            finish_reason=r.get("finish_reason"), refusal=r.get("refusal"), raw=r.get("raw"))


__all__ = ["RecordingRuntime", "ReplayRuntime", "CassetteMismatch", "CassetteExhausted",
           "load_cassette", "cassette_decisions", "cassette_traces"]
