"""The cache: a cassette you leave on, so a request the model already answered is never paid twice.

`CachedRuntime(inner, path)` answers a request from the file at `path` when the file holds a
reply to the same request asked of the same model with the same sampling settings
(`cassette_file.request_key`); it streams that reply through `on_text` as a replay does and
marks it `cached` (on the `ModelResponse`, so on the trace's attempt, the panel and
`to_frame()`). A new request goes to `inner` and its reply is appended to the file. So re-running
a cell, or a whole notebook, calls the model only for what changed. A wrapper of its own, not a
mode of `RecordingRuntime`: a recorder owns its file and starts it afresh, while a cache
opens a file that outlives it and that several runtimes (and runs) share.

Sampling with temperature > 0 is cached too: the first reply to a request is the one every later
run gets, which is what makes a notebook reproducible; `refresh=True` (or `cache.refresh = True`)
asks `inner` again for every request and appends the new reply, which answers from then on.
Failed calls are not cached (the next run asks again). Every `CachedRuntime` on the same file in
one process shares one index and one writer, and a request asked by several rows at once is
sent once (the others wait for its reply), so concurrent writers leave no torn line and no
duplicate; lines another process appended meanwhile are read before each write. The file is a
cassette: `ReplayRuntime(path)` replays it offline, and a cassette recorded by `RecordingRuntime`
(version 4) serves as a cache (its failed calls excepted); calls recorded by older releases do not
say which model settings answered them, so they are replayed but never answer the cache. The
index holds each request's key and where its line starts, not the line: a hit reads one line back.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import threading
import warnings
from pathlib import Path

from ...base.model_protocol import run_sync
from ...runtime.runtime import DEFAULT_WINDOW, ModelCallError, ModelResponse, Runtime
from ...runtime.runtime import as_response
from .cassette_file import (FORMAT, append_whole, header, keyed_line, line, live_key,
                            load_cassette, scan_keys, settings_of, write_atomically)
from .cassette_file import response_record
from .recorder import RecordingRuntime
from .replay import answer, astream_entry, stream_entry


class _Store:
    """One cache file in this process: the index of its keys, its writer, the requests in flight.
    Shared by every CachedRuntime on the same path (`_Store.of`)."""

    _open: dict[str, "_Store"] = {}
    _open_lock = threading.Lock()

    @classmethod
    def of(cls, path: Path, runtime: str | None, model: str | None) -> "_Store":
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
        self.memory: dict[str, dict] = {}  # replies a failed write could not put in the file
        self.flying: dict[str, concurrent.futures.Future] = {}
        where = str(path)
        if not path.exists():
            first = line(header(runtime, model))
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(path, first)
            except OSError as exc:
                raise OSError(f"CachedRuntime cannot create the cache {where!r} "
                              f"({exc.strerror or exc}); pass a path in a writable folder") \
                    from None
        data = path.read_bytes()
        head = data.partition(b"\n")[0]
        try:
            first = json.loads(head)
        except ValueError:
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
        found, end = scan_keys(data, len(head) + 1)
        if end < len(data):
            # a line cut off by a kill or a power cut: the calls before it are whole
            with open(path, "r+b") as f:
                f.truncate(end)
            warnings.warn(f"the last line of the cache {where!r} was cut off (the process "
                          f"writing it was stopped mid-write); it was removed, and the "
                          f"{len(found)} whole calls before it are used", RuntimeWarning,
                          stacklevel=4)
        for key, offset, length in found:
            self.index[key] = (offset, length)
        self.size = end
        self._stat = os.stat(path)
        # kept open: a hit reads its line with one pread, no open and close per call
        self._fd = os.open(path, os.O_RDONLY)

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

    def get(self, key: str) -> dict | None:
        """The newest recorded call for `key`, read back from the file."""
        where = self.index.get(key)
        if where is None:
            return self.memory.get(key)
        entry = json.loads(os.pread(self._fd, where[1], where[0]))
        return None if "error" in entry else entry  # a recorded failure is asked again

    def _catch_up(self) -> None:
        """Index the lines another process appended since this one last wrote."""
        now = os.path.getsize(self.path)
        if now > self.size:
            with open(self.path, "rb") as f:
                f.seek(self.size)
                tail = f.read(now - self.size)
            found, end = scan_keys(tail, 0)
            for key, offset, length in found:
                self.index[key] = (self.size + offset, length)
            self.size += end

    def add(self, entry: dict) -> None:
        data = keyed_line(entry)
        with self.lock:
            try:
                self._catch_up()
                start = self.size
                self.size = append_whole(self.path, data, start)
            except OSError as exc:
                self.memory[entry["key"]] = entry
                warnings.warn(f"CachedRuntime could not write to the cache {str(self.path)!r} "
                              f"({exc.strerror or exc}); the reply is kept in memory for this "
                              f"session only", RuntimeWarning, stacklevel=4)
                return
            self.index[entry["key"]] = (start, len(data))
            self.memory.pop(entry["key"], None)

    def __len__(self) -> int:
        return len(self.index.keys() | self.memory.keys())


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
        async def send():  # never suspends: complete() drives it without an event loop
            return self.inner.complete(messages, tools=tools, on_text=on_text, timeout=timeout,
                                       **mode_args)

        while True:
            entry, decision, own = self._look(messages, tools, mode_args)
            if own is None:
                stream_entry(entry, self.stream_chunk, on_text)
                return self._hit(entry, decision)
            if own:
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
                await astream_entry(entry, self.stream_chunk, on_text)
                return self._hit(entry, decision)
            if own:
                return await self._ask(entry, decision, send)
            got = await asyncio.wrap_future(entry)
            if got is not None:
                await astream_entry(got, self.stream_chunk, on_text)
                return self._hit(got, decision)

    def _look(self, messages, tools, mode_args):
        """`(recorded entry, decision, None)` on a hit; `(new entry, decision, True)` when this
        call is to ask `inner`; `(future, decision, False)` when another call is asking the
        same request now (the future gives its entry, or None if it failed)."""
        mode_args = {k: v for k, v in mode_args.items() if v is not None}
        store = self._store
        key = live_key(messages, tools, mode_args, settings_of(self.inner))
        with store.lock:
            if not self.refresh:
                found = store.get(key)
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
            store.add(entry)
            done = entry
            return resp
        finally:
            with store.lock:
                if store.flying.get(key) is mine:
                    del store.flying[key]
            mine.set_result(done)


__all__ = ["CachedRuntime"]
