"""The cache: a cassette you leave on, so a request the model already answered is never paid twice.

`CachedRuntime(inner, path)` answers a request from the file at `path` when the file holds a
reply to the same request asked of the same model with the same sampling settings
(`cassette_file.request_key`); it streams that reply through `on_text` as a replay does and
marks it `cached` (on the `ModelResponse`, so on the trace's attempt, the panel and
`to_frame()`). A new request goes to `inner` and its reply is appended to the file. So re-running
a cell, or a whole notebook, calls the model only for what changed. A wrapper of its own, not a
mode of `RecordingRuntime`: a recorder owns its file and starts it afresh, while a cache
opens a file that outlives it and that several runtimes (and runs) share. It is long because
that sharing — the index, the one writer per file in a process, the lock between processes, and
the checks of what others wrote — is one mechanism every lookup and append goes through.

Sampling with temperature > 0 is cached too: the first reply to a request is the one every later
run gets, which is what makes a notebook reproducible; `refresh=True` (or `cache.refresh = True`)
asks `inner` again for every request and appends the new reply, which answers from then on.
Failed calls are not cached (the next run asks again). Every `CachedRuntime` on the same file in
one process shares one index and one writer, and a request asked by several rows at once is
sent once (the others wait for its reply), so concurrent writers leave no torn line and no
duplicate. Processes share the file too: each append is one write of a whole line at its end
(O_APPEND) under an advisory lock on the file (`fcntl.flock`), after the lines others appended
are read and indexed, so no line overwrites or cuts another; a line a killed writer left without
its end is removed under the lock, with a warning naming it; and a line read back answers only
if its key is the digest of its own request (an edited key would answer another request), else
it is skipped with a warning naming the file and the line. A file written by a newer release is
refused rather than appended to. The file is a
cassette: `ReplayRuntime(path)` replays it offline, and a cassette recorded by `RecordingRuntime`
(version 4) serves as a cache (its failed calls excepted); calls recorded by older releases do not
say which model settings answered them, so they are replayed but never answer the cache. The
index holds each request's key and where its line starts, not the line: a hit reads one line back.
"""
from __future__ import annotations

import concurrent.futures
import json
import os

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
import threading
import warnings
from pathlib import Path

from ...base.errors import CacheFileError
from ...base.jsonl import format_version, loads, write_whole
from ...base.model_protocol import run_sync
from ...runtime.runtime import DEFAULT_WINDOW, ModelCallError, ModelResponse, Runtime, as_response
from .cassette_file import (
    FORMAT,
    VERSION,
    header,
    keyed_line,
    line,
    live_key,
    live_request,
    load_cassette,
    request_key,
    response_record,
    same_request,
    scan_keys,
    settings_of,
    write_atomically,
)
from .recorder import RecordingRuntime, on_own_loop
from .replay import answer, astream_entry, stream_entry
from .tool_results import is_tool_line, recorded_result, tool_call, tool_error_record, tool_key


class _FileLock:
    """An advisory lock on the whole cache file (every CachedRuntime of every process takes
    it around its read-and-append); without `fcntl` (Windows), appends rely on O_APPEND alone."""

    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self):
        if fcntl is not None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if fcntl is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)


def _create(path: Path, data: bytes) -> None:
    """A new cache file holding `data` (its header), whole from the moment it has its name;
    when another process created it first, theirs is kept."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    write_atomically(tmp, data)
    try:
        os.link(tmp, path)   # fails when the name exists: never replaces another's cache
    except FileExistsError:
        pass
    except OSError:          # a file system without hard links
        if not path.exists():
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class _Store:
    """One cache file in this process: the index of its keys, its writer, the requests in flight.
    Shared by every CachedRuntime on the same path (`_Store.of`)."""

    _open: dict[str, _Store] = {}
    _open_lock = threading.Lock()

    @classmethod
    def of(cls, path: Path, runtime: str | None, model: str | None) -> _Store:
        real = os.path.realpath(path)
        with cls._open_lock:
            store = cls._open.get(real)
            if store is None or not store._same_file():
                store = cls._open[real] = cls(Path(real), runtime, model)
            return store

    def __init__(self, path: Path, runtime: str | None, model: str | None):
        self.path = path
        self.lock = threading.Lock()
        self.index: dict[str, tuple[int, int]] = {}  # key -> (offset, length) of its newest line
        # the keys whose line was read back and is the digest of its own request: a line never
        # changes once written, so it is checked when it first answers, not on every hit (the
        # replies are not kept: a retained dict per hit made the collector scan them all)
        self.checked: set[str] = set()
        self.memory: dict[str, dict] = {}  # replies a failed write could not put in the file
        self.flying: dict[str, concurrent.futures.Future] = {}
        where = str(path)
        if not path.exists():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                _create(path, line(header(runtime, model)))
            except OSError as exc:
                raise OSError(f"CachedRuntime cannot create the cache {where!r} "
                              f"({exc.strerror or exc}); pass a path in a writable folder") \
                    from None
        with open(path, "rb") as f:
            head = f.readline(1 << 20).rstrip(b"\n")
        try:
            first = json.loads(head)
        except (ValueError, RecursionError):
            first = None
        if not isinstance(first, dict) or first.get("format") != FORMAT or "calls" in first:
            # not a JSON Lines cassette: the reader says exactly what it is
            try:
                version = load_cassette(path).get("version")
            except ValueError as exc:
                raise ValueError(f"CachedRuntime cannot use {where!r} as its cache: {exc}") \
                    from None
            raise ValueError(f"CachedRuntime cannot append to {where!r}: it is a cassette of "
                             f"format version {version} (one JSON document), and a cache is "
                             f"JSON Lines. Replay it with ReplayRuntime, and give CachedRuntime "
                             f"a new path.")
        version = format_version(first)
        if version is not None and version > VERSION:
            raise CacheFileError(
                f"CachedRuntime cannot append to {where!r}: it is a cassette of format version "
                f"{version}, written by a newer release of openprogram (this one writes version "
                f"{VERSION}); lines appended to it would be of an older format. Upgrade (pip "
                f"install -U openprogram-decisions), or give CachedRuntime a new path.")
        self.size = len(head) + 1
        # kept open: a hit reads its line with one pread, no open and close per call; the
        # appends go through a descriptor of their own, opened with O_APPEND
        self._fd = os.open(path, os.O_RDONLY)
        self._stat = os.stat(path)
        with _FileLock(self._fd):
            self._catch_up(repair=True)

    def __del__(self):
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def _same_file(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_ino, st.st_dev) == (self._stat.st_ino, self._stat.st_dev) and \
            st.st_size >= self.size

    def _line_number(self, offset: int) -> int:
        """The line of the file that starts at `offset` (counted on an error's path only)."""
        n, at = 1, 0
        while at < offset:
            chunk = os.pread(self._fd, min(1 << 20, offset - at), at)
            if not chunk:
                break
            n += chunk.count(b"\n")
            at += len(chunk)
        return n

    def _skip(self, key: str, offset: int, why: str) -> None:
        """Drop a line that cannot answer (it is left in the file) and say which."""
        self.index.pop(key, None)
        self.checked.discard(key)
        warnings.warn(f"line {self._line_number(offset)} of the cache {str(self.path)!r} {why}; "
                      f"it is skipped (its request is asked again and answered by a new line). "
                      f"Delete the line, or the file, if it was edited by hand", RuntimeWarning,
                      stacklevel=5)

    def get(self, key: str, asked: tuple[dict, dict] | None = None) -> dict | None:
        """The newest recorded call for `key`, read back from the file and checked: a line
        that is not whole JSON (a writer killed mid-line, an edit) or whose key is not the
        digest of its own request (an edit that would answer one request with another's
        reply) is skipped with a warning naming its line. The digest is checked the first time
        the line answers (`checked`); a hit after that reads and decodes the line only. With
        `asked`, the live `(request, settings)` the key was digested from: a line holding the
        same values, of the same types, has its key checked already."""
        where = self.index.get(key)
        if where is None:
            return self.memory.get(key)
        data = os.pread(self._fd, where[1], where[0])
        try:
            entry = loads(data.decode("utf-8"))  # (bytes would be sniffed for UTF-16)
        except (ValueError, RecursionError) as exc:
            why = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else \
                "is not whole JSON (a writer was stopped mid-line, or it was edited)"
            self._skip(key, where[0], why)
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict) or \
                not isinstance(entry.get("settings"), dict):
            self._skip(key, where[0], "is not a recorded call with a request and its settings")
            return None
        if key not in self.checked:
            if not (asked is not None and same_request(entry["request"], entry["settings"],
                                                       *asked)) \
                    and request_key(entry["request"], entry["settings"]) != key:
                self._skip(key, where[0], "has a key that is not the digest of its own request "
                                          "(it would answer another request)")
                return None
            self.checked.add(key)
        if "error" in entry:
            return None  # a recorded failure is asked again
        if not isinstance(entry.get("response"), dict):
            self._skip(key, where[0], "has no response object")
            return None
        return entry

    def get_tool(self, key: str) -> dict | None:
        """The newest recorded result of the live tool call keyed `key`, read back and checked
        as `get` checks a model call's line; a recorded failure is asked again."""
        where = self.index.get(key)
        if where is None:
            return self.memory.get(key)
        try:
            entry = json.loads(os.pread(self._fd, where[1], where[0]))
        except (ValueError, RecursionError):
            self._skip(key, where[0], "is not whole JSON (a writer was stopped mid-line, or "
                                      "it was edited)")
            return None
        if not is_tool_line(entry) or tool_key(entry["tool"]) != key:
            self._skip(key, where[0], "has a key that is not the digest of its own tool call "
                                      "(it would answer another call)")
            return None
        return entry if "result" in entry else None

    def _catch_up(self, repair: bool = False) -> None:
        """Index the whole lines the file holds past what was read (other processes append to
        it too). Called with the file locked: a line without its newline at the end is then a
        writer's that was killed mid-write (a live writer writes its line whole while it holds
        the lock), and with `repair` it is cut off, with a warning naming it."""
        now = os.fstat(self._fd).st_size
        if now <= self.size:
            return
        tail = os.pread(self._fd, now - self.size, self.size)
        found, end = scan_keys(tail, 0)
        checked = self.checked
        for key, offset, length in found:
            self.index[key] = (self.size + offset, length)
            checked.discard(key)   # a newer line for the key: checked when it first answers
        if end < len(tail) and repair:
            line_no = self._line_number(self.size + end)
            with open(self.path, "r+b") as f:
                f.truncate(self.size + end)
            warnings.warn(f"the last line of the cache {str(self.path)!r}, line {line_no}, was "
                          f"cut off (the process writing it was stopped mid-write); it was "
                          f"removed, and the {len(self.index)} whole calls before it are used",
                          RuntimeWarning, stacklevel=5)
        self.size += end

    def add(self, entry: dict, keep_theirs: bool = True) -> None:
        """Append the call's line: under the file's lock (other processes append too), at the
        end whatever they wrote (O_APPEND), in one write; their lines are read and indexed
        first, and none of them is ever cut. With `keep_theirs`, a request another process
        answered meanwhile (both asked before either wrote) is not written twice."""
        data = keyed_line(entry)
        with self.lock:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
                try:
                    with _FileLock(fd):
                        self._catch_up(repair=True)
                        if keep_theirs and entry["key"] in self.index:
                            self.memory.pop(entry["key"], None)
                            return
                        start = os.fstat(fd).st_size
                        # cut back to `start` on a failure: only this line's bytes, every
                        # other writer waits on the lock
                        write_whole(fd, data, start, sync=True)
                finally:
                    os.close(fd)
            except OSError as exc:
                self.memory[entry["key"]] = entry
                warnings.warn(f"CachedRuntime could not write to the cache {str(self.path)!r} "
                              f"({exc.strerror or exc}); the reply is kept in memory for this "
                              f"session only", RuntimeWarning, stacklevel=4)
                return
            self.index[entry["key"]] = (start, len(data))
            self.checked.add(entry["key"])   # its key was computed from its own request here
            self.size = start + len(data)
            self.memory.pop(entry["key"], None)

    def __len__(self) -> int:
        return len(self.index.keys() | self.memory.keys())


async def _cached_tool(entry: dict):
    return recorded_result(entry)


class CachedRuntime(RecordingRuntime):
    """Answers from the cache file at `path` (created when missing) what it already holds and
    asks `inner` the rest, appending each new reply. `refresh=True` asks `inner` again for
    every request. `hits` and `misses` count this runtime's calls; `stream_chunk` is the size of
    the pieces a cached reply streams in."""

    def __init__(self, inner: Runtime, path: str | os.PathLike, *, refresh: bool = False,
                 stream_chunk: int = 8, window: int | None = DEFAULT_WINDOW,
                 name: str | None = None):
        if not isinstance(refresh, bool):
            raise TypeError(f"refresh must be True (ask the model again and keep the new reply) "
                            f"or False, got {refresh!r}")
        self._wrap(inner, path, window, name)
        self.refresh = refresh
        self.stream_chunk = max(1, int(stream_chunk))
        self.hits = self.misses = 0
        self._store = _Store.of(self.path, self.name, self.model)

    def __repr__(self) -> str:
        return (f"CachedRuntime({self.inner!r}, {str(self.path)!r}, {len(self._store)} "
                f"cached, {self.hits} hits, {self.misses} misses)")

    @property
    def streams(self) -> bool:  # a hit always streams
        return True

    @streams.setter
    def streams(self, value: bool) -> None:
        pass

    def complete(self, messages, *, tools=None, on_text=None, timeout=None,
                 **mode_args) -> ModelResponse:
        while True:
            entry, decision, own = self._look(messages, tools, mode_args)
            if own is None:
                if on_text is not None:  # nothing streams to no one
                    stream_entry(entry, self.stream_chunk, on_text)
                return self._hit(entry, decision)
            if own:
                async def send():  # never suspends: complete() drives it without a loop
                    return self.inner.complete(messages, tools=tools, on_text=on_text,
                                               timeout=timeout, **mode_args)
                return run_sync(self._ask(entry, decision, send))
            if own is False:  # another call asks the same: wait for its reply
                got = entry.result()
                if got is not None:
                    stream_entry(got, self.stream_chunk, on_text)
                    return self._hit(got, decision)

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None,
                        **mode_args) -> ModelResponse:
        import asyncio

        async def send():
            return await self.inner.acomplete(messages, tools=tools, on_text=on_text,
                                              timeout=timeout, **mode_args)

        while True:
            entry, decision, own = self._look(messages, tools, mode_args)
            if own is None:
                if on_text is not None:
                    await astream_entry(entry, self.stream_chunk, on_text)
                return self._hit(entry, decision)
            if own:
                return await self._ask(entry, decision, send)
            got = await asyncio.wrap_future(entry)
            if got is not None:
                await astream_entry(got, self.stream_chunk, on_text)
                return self._hit(got, decision)

    #: The servers are started live (see mcp.Connection): a kept listing would leave no server
    #: for the calls the cache does not hold.
    tool_listing = None

    def tool_result(self, call: dict, run):
        """A live tool's call answered from the cache file when it holds the same call (server,
        tool, arguments; `refresh` asks again), else made by `run()` and appended: a notebook
        run again calls its servers only for what is new (see tool_results.py)."""
        from ...base.secrets import scrub
        call = scrub(tool_call(call["server"], call["name"], call["arguments"]))
        key = tool_key(call)
        if not self.refresh:
            with self._store.lock:
                found = self._store.get_tool(key)
            if found is not None:
                with self._lock:
                    self.hits += 1
                return _cached_tool(found)
        entry = {"key": key, "call": None, "decision": self._places.now(), "tool": call}
        live = run()
        return on_own_loop(self._ask_tool(entry, live), live)

    async def _ask_tool(self, entry: dict, live):
        import time

        from ...base.errors import ToolError
        with self._lock:
            self.misses += 1
        t0 = time.perf_counter()
        try:
            result = await live
        except ToolError as exc:
            entry["error"] = tool_error_record(exc)
            result, failed = None, exc
        else:
            entry["result"], failed = result, None
        entry["duration_s"] = round(time.perf_counter() - t0, 4)
        with self._lock:
            self._count += 1
            entry["call"] = self._count
            self.tool_calls.append(entry)
        self._store.add(entry, keep_theirs=not self.refresh)
        if failed is not None:
            raise failed
        return result

    def _look(self, messages, tools, mode_args):
        """`(recorded entry, decision, None)` on a hit; `(new entry, decision, True)` when this
        call is to ask `inner`; `(future, decision, False)` when another call is asking the
        same request now (the future gives its entry, or None if it failed)."""
        if mode_args:
            mode_args = {k: v for k, v in mode_args.items() if v is not None}
        store = self._store
        settings = settings_of(self.inner)
        asked = live_request(messages, tools, mode_args)
        key = live_key(messages, tools, mode_args, settings, asked)
        with store.lock:
            if not self.refresh:
                found = store.get(key, (asked, settings))
                if found is not None:
                    return found, self._places.place(messages, tools, mode_args)[1], None
                flying = store.flying.get(key)
                if flying is not None:
                    return flying, self._places.place(messages, tools, mode_args)[1], False
            mine = store.flying[key] = concurrent.futures.Future()
        entry, decision = self._entry(messages, tools, mode_args)
        entry["_future"] = mine
        return entry, decision, True

    def _hit(self, entry: dict, decision) -> ModelResponse:
        with self._lock:  # rows on many threads hit at once
            self.hits += 1
        resp = answer(entry, cached=True)
        self._places.settle(decision, resp)
        return resp

    async def _ask(self, entry: dict, decision, send) -> ModelResponse:
        import time
        store, key = self._store, entry["key"]
        mine = entry.pop("_future")
        with self._lock:
            self.misses += 1
        t0 = time.perf_counter()
        done = None
        try:
            try:
                resp = await send()
            except ModelCallError:
                self._places.settle(decision, None)
                raise
            if not isinstance(resp, ModelResponse):
                resp = as_response(resp)
            self._places.settle(decision, resp)
            entry["response"] = response_record(resp)
            entry["duration_s"] = round(time.perf_counter() - t0, 4)
            with self._lock:
                self._count += 1
                entry["call"] = self._count
                self.calls.append(entry)
            store.add(entry, keep_theirs=not self.refresh)
            done = entry
            return resp
        finally:
            with store.lock:
                if store.flying.get(key) is mine:
                    del store.flying[key]
            mine.set_result(done)


__all__ = ["CachedRuntime"]
