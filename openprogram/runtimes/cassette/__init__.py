"""Cassettes: record a program's model calls once, replay them anywhere, and leave a cache on.

The pieces live one concept per module; this module gathers their public names (the import path
`openprogram.runtimes.cassette` is kept for existing code):

- `cassette_file` — the file: one JSON line per call, keyed by a digest of its request, written
  whole, read back (every format version since 1) and grouped into decisions and attempts.
- `recorder` — `RecordingRuntime(inner, path)`: passes calls through and appends each one.
- `replay` — `ReplayRuntime(path)`: answers each request with the reply recorded for the same
  request, at any concurrency; `CassetteMismatch` names the nearest recorded request.
- `cache` — `CachedRuntime(inner, path)`: answers what the file already holds, asks `inner` only
  what is new and appends it.

    rt = RecordingRuntime(OpenAIRuntime(model="gpt-4o-mini"), "cassettes/tour.jsonl")
    ... run the notebook ...
    rt = ReplayRuntime("cassettes/tour.jsonl")          # same results, offline
    rt = CachedRuntime(OpenAIRuntime(model="gpt-4o-mini"), "cache.jsonl")  # never pay twice
"""
from __future__ import annotations

from .cache import CachedRuntime
from .cassette_file import (
    FORMAT,
    OLDEST,
    VERSION,
    append_whole,
    ask_key,
    cassette_decisions,
    cassette_traces,
    line,
    load_cassette,
    request_key,
    request_record,
    response_record,
    settings_of,
    write_atomically,
)
from .recorder import RecordingRuntime
from .replay import CassetteExhausted, CassetteMismatch, ReplayRuntime, first_difference

__all__ = ["RecordingRuntime", "ReplayRuntime", "CachedRuntime", "CassetteMismatch",
           "CassetteExhausted", "load_cassette", "cassette_decisions", "cassette_traces"]
