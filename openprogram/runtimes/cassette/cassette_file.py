"""The cassette file: what one recorded model call looks like on disk, how a request is keyed,
and how the file is written and read back.

A cassette (format version 4) is JSON Lines: a header line (format, version, runtime, model,
when the recording started), then one line per model call, appended as the call ends. A call's
line holds its `key` (first, so a reader can index a large file without parsing every line),
the request (messages, tools, and the way of asking's `tool_choice` / `response_format` when
given), the model settings that answered it (`settings`: the model name and the sampling
settings that change a reply — temperature, top_p, seed, max_tokens, a system prompt; never a
key, a header or a timeout), the reply (text, tool calls, finish reason, refusal, the raw record
the provider runtime kept) or the failure, token usage, latency, and where the call sits in the
program (its decision, attempt and way of asking). A request is known by two digests of its
canonical JSON (sorted keys, no spaces): `ask_key` covers what the program asked (messages,
tools, tool_choice, response_format) and is what a replay matches on; `request_key` adds the
model settings and is what the cache matches on, so one file can serve several models. Files of
versions 1 and 2 (one indented JSON document) and 3 (lines without keys) are still read; their
keys are computed when they are loaded. The file holds no API key or HTTP header: only what a
runtime's `complete()` sees, and error texts and raw records the provider runtimes redacted.
Writes are whole lines: a write that fails part-way is cut back off the file, and a file whose
last line was cut off all the same (power lost mid-write) names the line to delete.
"""
from __future__ import annotations

import hashlib
import json
import marshal
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from ...base.errors import CassetteFileError
from ...base.jsonl import LineFormat, encoder, format_version, whole_lines, write_whole
from ...base.model_protocol import LAYOUT_ARGS, wrapped
from ...base.secrets import scrub
from ...runtime.runtime import ModelResponse, ToolCall
from ..providers.key_redaction import without_secrets

FORMAT = "openprogram-cassette"
#: Version 4 keys each call by its request and records the model settings that answered it;
#: version 3 is JSON Lines (a header line, then one line per call, appended); version 2 (one
#: indented JSON document) recorded where each call sits (decision, attempt, way of asking), the
#: mode arguments, finish reason, refusal and raw record; version 1 cassettes still replay.
VERSION = 4
OLDEST = 1

#: The runtime attributes that change what a model replies, read into a call's `settings`.
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "stop",
            "presence_penalty", "frequency_penalty", "repeat_penalty", "system",
            "schema_in_prompt", "n_ctx")
#: `request_options` that never change a reply, or hold a secret: never part of a key.
_NOT_SAMPLING = ("header", "key", "auth", "secret", "token_", "password", "timeout", "retries",
                 "user", "metadata", "base_url", "stream")

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
    out.update({k: _plain(v) for k, v in (mode_args or {}).items()
                if v is not None and k not in LAYOUT_ARGS})
    return out


def response_record(resp: ModelResponse) -> dict:
    out = {"text": _plain(resp.text), "tool_calls": [_plain(t) for t in resp.tool_calls],
           "usage": _plain(resp.usage), "model": _plain(resp.model)}
    for key in ("finish_reason", "refusal", "raw", "confidence", "content_blocks"):
        if getattr(resp, key, None) is not None:
            out[key] = _plain(getattr(resp, key))
    return out



def settings_of(runtime: Any) -> dict:
    """The model name and sampling settings of `runtime` (through any wrapper's `inner`): what,
    besides the request, decides the reply. Keys, headers, timeouts and retry counts are left
    out: they never change a reply, and a key must never reach a file."""
    runtime = [*wrapped(runtime)][-1]   # the innermost: the one that calls the model
    sampling: dict = {}
    for name in SAMPLING:
        value = getattr(runtime, name, None)
        if value is not None:
            sampling[name] = _plain(value)
    for name, value in (getattr(runtime, "request_options", None) or {}).items():
        low = str(name).lower()
        if value is not None and not any(word in low for word in _NOT_SAMPLING):
            sampling[str(name)] = without_secrets(_plain(value))
    # a key passed in extra_query / extra_body (or any setting) is masked before it is part
    # of a line or of the digest that keys it
    return scrub({"model": _plain(runtime.model), "sampling": sampling})


# canonical: sorted keys, no spaces, ASCII (a lone surrogate is written as its escape); made
# once, as json.dumps with options makes a new encoder per call (a cache hit digests twice)
_canonical = encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest(data: Any) -> str:
    return hashlib.sha256(_canonical(data).encode("ascii")).hexdigest()


def _json_default(value: Any) -> Any:
    return value.to_dict() if isinstance(value, ToolCall) else repr(value)


_canonical_live = encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          default=_json_default)


def live_request(messages: list, tools: list | None, mode_args: dict) -> dict:
    """A request as a runtime's `complete()` receives it, in the shape of its record, without
    `_plain`'s copy: what `live_key` digests."""
    request = {"messages": messages, "tools": tools}
    if mode_args:
        request.update((k, v) for k, v in mode_args.items()
                       if v is not None and k not in LAYOUT_ARGS)
    return request


def live_key(messages: list, tools: list | None, mode_args: dict, settings: dict,
             request: dict | None = None) -> str:
    """`request_key` of a request as a runtime's `complete()` receives it (or of its
    `live_request`, when made already), without building its record first (what a cache hit
    costs): JSON encodes it as `_plain` would make it."""
    if request is None:
        request = live_request(messages, tools, mode_args)
    text = _canonical_live({"request": request, "settings": settings})
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def same_request(line_request: Any, line_settings: Any, request: dict, settings: dict) -> bool:
    """Whether a line's request and settings are the live ones value for value and type for
    type (marshal's bytes tell `1` from `1.0` and `true`, a list from a tuple): then the line's
    key, which is the live request's, is the digest of its own request too, and the first hit
    need not digest the line again. False when unsure (another order of keys, an object
    marshal cannot write): the digest decides."""
    try:
        return marshal.dumps((line_request, line_settings), 2) == \
            marshal.dumps((request, settings), 2)
    except ValueError:
        return False


def ask_key(request: dict) -> str:
    """The digest of what the program asked (a request record): what a replay matches on."""
    return _digest(request)


def request_key(request: dict, settings: dict | None) -> str:
    """The digest of the request and the model settings that answer it: what the cache
    matches on."""
    return _digest({"request": request, "settings": settings})


def keyed_line(entry: dict) -> bytes:
    """A call's line with its `key` first, so `scan_keys` reads it without parsing the line."""
    return line({"key": entry["key"], **{k: v for k, v in entry.items() if k != "key"}})


_KEY_HEAD = b'{"key": "'
_HEX_KEY = re.compile(rb'[0-9a-f]{64}"')


def scan_keys(data: bytes, start: int) -> tuple[list[tuple[str, int, int]], int]:
    """The (key, offset, length) of every whole keyed call line in `data` from `start`; a line
    written without a key (by an older release) is parsed to compute it. Returns the lines and
    where the whole lines end (a torn last line is not taken)."""
    out = []
    spans, whole = whole_lines(data, start)
    for pos, end in spans:
        if data.startswith(_KEY_HEAD, pos) and _HEX_KEY.fullmatch(data, pos + 9, pos + 74):
            out.append((data[pos + 9:pos + 73].decode("ascii"), pos, end + 1 - pos))
        else:  # an older line, or a key that is not a digest (an edited file): parsed
            try:
                entry = json.loads(data[pos:end])
            except (ValueError, RecursionError):   # not JSON, or nested past any request
                entry = None
            if isinstance(entry, dict) and isinstance(entry.get("request"), dict) and \
                    "response" in entry and entry.get("settings") is not None:
                out.append((request_key(entry["request"], entry["settings"]), pos,
                            end + 1 - pos))
    return out, whole


def header(runtime: str | None, model: str | None) -> dict:
    return {"format": FORMAT, "version": VERSION, "runtime": _plain(runtime),
            "model": _plain(model),
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


#: A cassette line: json.dumps' separators (a cache reader finds the key by `_KEY_HEAD`).
_FORMAT = LineFormat()


def line(data: Any) -> bytes:
    """`data` as one line of a cassette (any version since 3), in UTF-8: JSON on one line (it
    escapes every newline inside a string), non-ASCII text readable, and the one kind of text
    UTF-8 cannot encode (surrogates, see base/json_form.py) written as its escape. Every key a
    runtime of this process holds is masked first (`scrub`): no writer is trusted to have
    redacted what it records. The rules are the journal's too (`base.jsonl`)."""
    return _FORMAT.line(data)


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
        return write_whole(f.fileno(), data, start, sync=True)




_FileError = CassetteFileError


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
        raise _FileError(f"{where!r} is not a cassette: it is not UTF-8 text ({exc.reason} at "
                         f"byte {exc.start}); {redo}") from None
    first = text.partition("\n")[0]
    try:  # a version-3 header line; the first line of a version-2 file is a lone "{"
        head = json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        head = None
    if isinstance(head, dict) and head.get("format") == FORMAT and "calls" not in head:
        data, lines = _read_lines(head, text, where, redo), True
    else:
        data, lines = _read_document(text, where, redo), False
    calls, tools, at_line = [], [], []
    for n, entry in enumerate(data["calls"], 1):
        if isinstance(entry, dict) and isinstance(entry.get("tool"), dict) and \
                "request" not in entry:
            tools.append(entry)  # a live tool's result (tool_results.py), not a model call
            continue
        at_line.append(n + 1)
        problem = _entry_problem(entry)
        if problem:
            at = f" (line {n + 1})" if lines else ""
            raise _FileError(f"call #{n}{at} of the cassette {where!r} {problem}: the file was "
                             f"cut or edited by hand; {redo}")
        calls.append(entry)
    data["calls"], data["tools"] = calls, tools
    if lines and tools:  # where each model call sits, for messages that name its line
        data["call_lines"] = at_line
    return data


def _read_document(text: str, where: str, redo: str) -> dict:
    """A cassette of versions 1 and 2: one JSON document holding a "calls" list."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise _FileError(f"{where!r} is nested deeper than any cassette: the file was "
                         f"edited; {redo}") from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            # the text ends before the JSON does (an unterminated string runs to the end)
            raise _FileError(f"{where!r} was cut short: its JSON ends at character "
                             f"{len(text)} before it is complete (it was half-written or "
                             f"half-copied; RecordingRuntime itself never leaves one). Restore "
                             f"it from version control or {redo}.") from None
        raise _FileError(f"{where!r} is not a JSON cassette ({exc}); {redo}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("calls"), list):
        raise _FileError(f"{where!r} is not an openprogram cassette (it needs "
                         f'"format": "{FORMAT}" and a "calls" list); {redo}')
    _check_version(data, where, redo)
    return data


def _read_lines(head: dict, text: str, where: str, redo: str) -> dict:
    """A cassette of version 3: its header line, then one call per line, each ended by a
    newline. Only the last line can be half-written (the recorder appends, and cuts back a write
    that fails); it is named, with what to do."""
    _check_version(head, where, redo)
    if head["version"] < 3:
        raise _FileError(f"{where!r} is written as JSON Lines, as version 3 cassettes are, but "
                         f"its first line says version {head['version']}: it was edited by "
                         f"hand; {redo}")
    spans, whole = whole_lines(text)
    rows = [text[start:end] for start, end in spans]
    tail = text[whole:]  # "" after the newline that ends a whole file
    calls = []
    for n, row in enumerate(rows[1:], 2):
        try:
            calls.append(json.loads(row))
        except RecursionError:
            raise _FileError(f"line {n} of the cassette {where!r} is nested deeper than "
                             f"any recorded call: the file was edited; {redo}") from None
        except json.JSONDecodeError as exc:
            if n == len(rows) and not tail:
                raise _cut_off(where, n, len(calls), f"it is not whole JSON ({exc.msg})",
                               redo) from None
            raise _FileError(f"line {n} of the cassette {where!r} is not JSON ({exc.msg} at "
                             f"column {exc.colno}): the file was edited by hand; {redo}") from None
    if tail and rows:  # (a header alone without its newline is a whole empty cassette)
        raise _cut_off(where, len(rows) + 1, len(calls), "it has no newline at its end", redo)
    return {**head, "calls": calls}


def _cut_off(where: str, n: int, whole: int, why: str, redo: str) -> ValueError:
    return _FileError(f"the last line of the cassette {where!r}, line {n}, was cut off: {why}. "
                     f"A recording stopped in the middle of a write (the process was killed or "
                     f"the power went). The {whole} calls before it are whole: delete line {n} "
                     f"to replay them, or {redo}.")


def _check_version(data: dict, where: str, redo: str) -> None:
    if "version" not in data:
        raise _FileError(f'{where!r} has no "version" field, which every cassette '
                         f"RecordingRuntime writes (this release writes version {VERSION}); "
                         f"{redo}")
    v = format_version(data)
    if v is None:
        raise _FileError(f'{where!r} has "version": {json.dumps(data["version"])}, which is not a '
                         f"format version (a whole number; this release reads versions {OLDEST} to "
                         f"{VERSION}); {redo}")
    if v < OLDEST:
        raise _FileError(f"{where!r} is a cassette of format version {v}, older than this "
                         f"release reads (versions {OLDEST} to {VERSION}); {redo}")
    if v > VERSION:
        raise _FileError(f"{where!r} is a cassette of format version {v}, written by a newer "
                         f"release (this one reads versions {OLDEST} to {VERSION}). Upgrade: "
                         f"pip install -U openprogram-decisions")


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one recorded call, or None."""
    if not isinstance(entry, dict):
        return "is not an object"
    request = entry.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return "has no request (an object with a \"messages\" list)"
    duration = entry.get("duration_s")
    if duration is not None and (isinstance(duration, bool) or
                                 not isinstance(duration, (int, float)) or duration < 0):
        return "has a \"duration_s\" that is not a number of seconds"
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
    from ...base.model_protocol import blocks_text, to_blocks
    from ...trace.decision_trace import recorded_trace
    from ...trace.records import Attempt
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
        traces.append(recorded_trace(attempts, entry=group.get("entry") or "",
                                     mode=group.get("mode") or "menu"))
    return traces


