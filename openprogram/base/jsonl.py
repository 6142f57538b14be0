"""Files of JSON lines appended whole: how the journal, the cassette and the cache write a line,
append it, cut back a failed write and read the whole lines back.

Three files of the library are JSON Lines that only ever grow at their end — an evaluation's
journal, a cassette, a cache — and each must survive a process killed mid-write, a full disk and
text no encoder takes. They share one implementation of those rules, here: `LineFormat.line` is a
value as one line (every key of this process masked by `secrets.scrub`, newlines inside
strings escaped by JSON, non-ASCII written as itself, a lone surrogate — which UTF-8 cannot
encode — as its `\\uXXXX` escape, so it reads back as the same code point); `write_whole` writes
a line (or several) whole or not at all, cutting a failed write back off; `whole_lines` finds the
whole lines of what was read, so a last line a killed writer left without its newline is
recognised (each file decides whether to drop it or name it); `format_version` reads a header's
version. Each file keeps its own format name, version rules and messages: they say different
things to do. Standard library only.
"""
from __future__ import annotations

import json
import json.encoder
import os

from .secrets import scrub

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["LineFormat", "encoder", "loads", "write_whole", "whole_lines", "format_version"]


class LineFormat:
    """How one kind of file writes a value as a line: its separators (the journal's are compact;
    a cassette's are json.dumps' defaults, which a cache reader finds its key by) and what it
    writes for a value JSON has no form for (`default`; None raises TypeError). The encoder is
    made once: `json.dumps` with options builds a new one per call."""

    def __init__(self, separators: tuple[str, str] | None = None,
                 default: Callable[[Any], Any] | None = None):
        self._encode = encoder(ensure_ascii=False, separators=separators, default=default)

    def text(self, data: Any) -> str:
        """`data` as JSON text on one line, unmasked and with surrogates as they are (for a
        writer that masks what it adds around it itself)."""
        return self._encode(data)

    def line(self, data: Any) -> bytes:
        """`data` (JSON data), masked of every key this process holds, as one UTF-8 line."""
        return encode_line(self._encode(scrub(data)))


def encoder(**options: Any) -> Callable[[Any], str]:
    """`json.JSONEncoder(**options).encode`, with the C encoder that `encode` makes anew for
    every call made once (a line per journaled row, a digest per cache hit), and without the
    markers of the containers being written, which every thread would share. A reference cycle
    fails it (RecursionError), as a default that raises does: the general encoder then raises
    what it always has. The text is the general encoder's."""
    general = json.JSONEncoder(**options)
    make = json.encoder.c_make_encoder
    if make is None or general.indent is not None:
        return general.encode
    fast = make(None, general.default,
                json.encoder.encode_basestring_ascii if general.ensure_ascii
                else json.encoder.encode_basestring,
                None, general.key_separator, general.item_separator, general.sort_keys,
                general.skipkeys, general.allow_nan)

    def encode(data: Any) -> str:
        try:
            return "".join(fast(data, 0))
        except Exception:   # a cycle, or a default that raised: as it always was
            return general.encode(data)
    return encode


_decoder = json.JSONDecoder()
_scan = _decoder.scan_once


def loads(text: str) -> Any:
    """`json.loads(text)` of a line's text, read with the decoder's scanner at once (a cache
    hit reads one line): anything but one whole JSON value, optionally followed by
    whitespace, goes through json.loads, which raises what it always has."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text) and text[end:].strip(" \t\n\r"):
        return json.loads(text)
    return value


def encode_line(text: str) -> bytes:
    """JSON text as a UTF-8 line: the only text UTF-8 refuses is a surrogate, which JSON holds
    only inside strings, where its escape reads back as the same code point."""
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:   # rare: trying first costs nothing on every other line
        return text.encode("utf-8", "backslashreplace") + b"\n"


def write_whole(fd: int, data: bytes, start: int, *, sync: bool = False) -> int:
    """Write `data` at the end of the file open as `fd`, which ends at `start`: one write,
    continued if the system takes only part of it, flushed to disk with `sync`. A write that
    fails or is interrupted part-way (a full disk, Ctrl-C) is cut back to `start`, so the file
    never ends in half a line, and the error is raised. Returns the file's new end."""
    try:
        done = os.write(fd, data)
        if done < len(data):   # the system took part of it: write the rest
            view = memoryview(data)[done:]
            while view:
                view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    except BaseException:
        try:
            os.ftruncate(fd, start)
        except OSError:  # the cut-back failed too: the next append finds the tail and cuts it
            pass
        raise
    return start + len(data)


def whole_lines(data: bytes | str, start: int = 0) -> tuple[list[tuple[int, int]], int]:
    """The (start, end) of every whole line of `data` (bytes, or text) from `start` (end at
    its newline, which is not included), and where the whole lines end: less than `len(data)`
    when the last line has no newline (a writer killed mid-write)."""
    out = []
    find, newline = data.find, b"\n" if isinstance(data, bytes) else "\n"
    pos, n = start, len(data)
    while pos < n:
        end = find(newline, pos)
        if end < 0:
            break
        out.append((pos, end))
        pos = end + 1
    return out, pos


def format_version(head: Any) -> int | None:
    """A header's "version" when it is a whole number (JSON's true is not one), else None."""
    version = head.get("version") if isinstance(head, dict) else None
    return None if isinstance(version, bool) or not isinstance(version, int) else version
