"""The journal: an evaluation's finished rows on disk, appended as they finish, to resume.

`evaluate(..., journal="runs/triage.jsonl")` appends one JSON line per finished row: its position
and key (a digest of its filled prompt), the input row, the expected pick, the pick, its
arguments, the result in its JSON form, the status, the error and its kind, the attempts, tokens,
latency, whether the model was answered from a cache, and the decision's whole trace as JSON.
A line is written whole (one write, flushed), so a process killed at any point leaves every
finished row; a last line cut off mid-write is dropped when the journal is opened again.
Calling the same evaluation with the same journal resumes: the rows it holds are not run again.

The file is JSON Lines of kinds, so later features add kinds without a new format: a header
(`{"kind": "journal", "format": "openprogram-journal", "version": 1}`), then a `section` line
per evaluation run into it (`compare` writes one per variant, named after it; `evaluate` one
named "evaluate"), holding what makes its rows comparable — the prompt template, the menu the
option set renders to, the way of asking, the runtime — and its fingerprint; then `row` lines
naming their section. Readers skip kinds they do not know: batch submission (issue 24) can record
`{"kind": "batch", "section": ..., "batch_id": ..., "round": ..., "state": ...}` lines in the
same file. A section whose prompt, options, way of asking or runtime changed is refused with a
message saying what changed: a journal holds the rows of one evaluation, and mixing two would
make its accuracy mean nothing; start a new journal (or delete the old one) to run the new one.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, Iterator

from .errors import OpenProgramError
from .filesecrets import scrub

__all__ = ["Journal", "JournalMismatch", "read_journal"]

FORMAT = "openprogram-journal"
VERSION = 1


class JournalMismatch(OpenProgramError, ValueError):
    """The journal holds another evaluation's rows (its prompt, options, way of asking, runtime
    or inputs differ)."""


def _line(data: dict) -> bytes:
    # every key a runtime of this process holds is masked: no writer is trusted to have
    # redacted what it journals (a batch's id, an error a server chose)
    return (json.dumps(scrub(data), ensure_ascii=False, separators=(",", ":"), default=repr)
            .encode("utf-8", "backslashreplace") + b"\n")


def fingerprint(section: dict) -> str:
    what = {k: section.get(k) for k in ("prompt", "menu", "mode", "runtime")}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode("utf-8", "surrogatepass")
                          ).hexdigest()[:16]


def _scan(path: Path) -> tuple[list[tuple[dict, int]], int, int]:
    """Every whole line of the journal as (data, offset), where the whole lines end, and the
    file's size (bigger when its last line was cut off)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos, n = 0, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        if end < 0:
            break
        try:
            item = json.loads(data[pos:end])
        except ValueError:
            item = None
        if not isinstance(item, dict):
            raise ValueError(f"line {len(out) + 1} of the journal {str(path)!r} is not a JSON "
                             f"object: the file was edited by hand or is not a journal; pass "
                             f"another path")
        out.append((item, pos))
        pos = end + 1
    return out, pos, n


def read_journal(path: str | os.PathLike, shared: dict | None = None
                 ) -> tuple[list[dict], dict[str, list[tuple[dict, int]]]]:
    """The sections of a journal and, per section name, its rows as (row, offset): the newest
    row for each position (a row run again after its first run was cut short wins). `shared`,
    a dict, is filled with each section's shared lines as (offset, line)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no journal at {str(p)!r}: evaluate(..., journal={str(p)!r}) "
                                f"writes one")
    lines, _, _ = _scan(p)
    if not lines or lines[0][0].get("format") != FORMAT:
        raise ValueError(f"{str(p)!r} is not an openprogram journal (its first line has no "
                         f'"format": "{FORMAT}"); pass the path evaluate(..., journal=) wrote')
    version = lines[0][0].get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ValueError(f"{str(p)!r} is a journal of format version {version!r}, which this "
                         f"release (version {VERSION}) cannot read: upgrade openprogram")
    sections: list[dict] = []
    rows: dict[str, dict[int, tuple[dict, int]]] = {}
    for item, offset in lines[1:]:
        kind = item.get("kind")
        if kind == "section":
            sections.append(item)
            rows.setdefault(item["section"], {})
        elif kind == "row":
            rows.setdefault(item.get("section"), {})[item["row"]] = (item, offset)
        elif kind == "shared" and shared is not None:
            shared.setdefault(item.get("section"), []).append((offset, item))
    return sections, {name: [r[i] for i in sorted(r)] for name, r in rows.items()}


class Journal:
    """The journal at `path`, opened to append the rows of one section. Opening it creates the
    file (and its folder), drops a last line cut off by a kill, checks that the section matches
    the one journaled before, and reads which rows are done (`done`: position -> (key, row,
    offset))."""

    def __init__(self, path: str | os.PathLike, section: dict):
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"journal must be a file path (str or pathlib.Path), got "
                            f"{type(path).__name__}")
        self.path = Path(path)
        self.name = section["section"]
        section = {"kind": "section", **section}
        section["fingerprint"] = fingerprint(section)
        self.done: dict[int, tuple[str, dict, int]] = {}
        where = str(self.path)
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            head = _line({"kind": "journal", "format": FORMAT, "version": VERSION,
                          "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            with open(self.path, "wb") as f:
                f.write(head)
        lines, whole, size = _scan(self.path)
        if whole < size:
            with open(self.path, "r+b") as f:
                f.truncate(whole)
            warnings.warn(f"the last line of the journal {where!r} was cut off (the run writing "
                          f"it was killed mid-write); it was removed, and its row runs again",
                          RuntimeWarning, stacklevel=4)
        if not lines or lines[0][0].get("format") != FORMAT:
            raise ValueError(f"{where!r} is not an openprogram journal (its first line has no "
                             f'"format": "{FORMAT}"); pass a new path, or the one '
                             f"evaluate(..., journal=) wrote")
        old = None
        self.shared: dict | None = None
        self.batches: list[dict] = []   # this section's batch lines (the batch path's rounds)
        self.shared_lines: list[tuple[int, dict]] = []  # (offset, line) of this section's
        for item, offset in lines[1:]:
            kind = item.get("kind")
            if kind == "shared" and item.get("section") == self.name:
                self.shared = item
                self.shared_lines.append((offset, item))
            elif kind == "section" and item.get("section") == self.name:
                old = item
            elif kind == "row" and item.get("section") == self.name:
                self.done[item["row"]] = (item.get("key"), item, offset)
            elif kind == "batch" and item.get("section") == self.name:
                self.batches.append(item)
        if old is not None and old.get("fingerprint") != section["fingerprint"]:
            changed = [k for k in ("prompt", "menu", "mode", "runtime")
                       if old.get(k) != section.get(k)] or ["the evaluation"]
            words = {"prompt": "the prompt template", "menu": "the option set",
                     "mode": "the way of asking (mode=)", "runtime": "the runtime"}
            raise JournalMismatch(
                f"the journal {where!r} holds {len(self.done)} rows of {self.name!r} run with "
                f"another {', '.join(words.get(k, k) for k in changed)} (journaled: "
                f"{_short(old.get(changed[0]))}; now: {_short(section.get(changed[0]))}). A "
                f"journal resumes one evaluation: pass a new journal= path to run this one, "
                f"or delete the file to start over")
        self._file = open(self.path, "ab", buffering=0)
        self.size = self._file.seek(0, os.SEEK_END)
        if old is None:
            self._write(_line(section))

    def check_key(self, i: int, key: str) -> bool:
        """Whether row `i` is done; a done row whose prompt differs is refused."""
        done = self.done.get(i)
        if done is None:
            return False
        if done[0] != key:
            raise JournalMismatch(
                f"input row {i} is not the row the journal {str(self.path)!r} holds as row {i} "
                f"(its filled prompt differs): the inputs changed since the journaled run. "
                f"Pass a new journal= path to run these inputs, or the inputs it was run on to "
                f"resume it")
        return True

    def _write(self, data: bytes) -> int:
        start = self.size
        view = memoryview(data)
        try:
            while view:
                view = view[self._file.write(view):]
        except BaseException:
            os.ftruncate(self._file.fileno(), start)  # never half a line
            raise
        self.size = start + len(data)
        return start

    def write_row(self, i: int, key: str, data: dict) -> int:
        """Append one finished row's line (its trace packed against the section's shared menu);
        returns where the line starts. Called by one thread at a time."""
        trace = data.get("trace")
        if trace is not None:
            packed, new = pack_trace(trace, self.shared)
            if new is not None:
                self.shared = {"kind": "shared", "section": self.name, **new}
                self.shared_lines.append((self._write(_line(self.shared)), self.shared))
            data = {**data, "trace": packed}
        return self._write(row_line(self.name, i, key, data))

    def write_batch(self, data: dict) -> None:
        """Append a batch line (a batch sent, or how it ended), so a restarted run re-attaches
        to a batch in flight instead of sending it again."""
        item = {"kind": "batch", "section": self.name, **data}
        self._write(_line(item))
        self.batches.append(item)

    def close(self) -> None:
        self._file.close()


def pack_trace(trace: dict, shared: dict | None) -> tuple[dict, dict | None]:
    """A trace's JSON as a row line holds it: the menu and option table every row of a section
    shares (two thirds of a trace, and the end of each attempt's prompt) are written once, in a
    `shared` line, and left out of the rows. Returns the packed trace and the shared line to
    write first, if this trace is the first to need it."""
    new = None
    if shared is None or shared["menu"] != trace.get("menu") or \
            shared["options"] != trace.get("options"):
        new = {"menu": trace.get("menu"), "options": trace.get("options")}
        shared = new
    menu = shared["menu"] or ""
    packed = {k: v for k, v in trace.items() if k not in ("menu", "options")}
    attempts = []
    for a in trace.get("attempts") or []:
        prompt = a.get("prompt")
        if menu and isinstance(prompt, str) and prompt.endswith(menu):
            a = {**a, "prompt": prompt[:len(prompt) - len(menu)], "menu_appended": True}
        attempts.append(a)
    packed["attempts"] = attempts
    return packed, new


def unpack_trace(packed: dict, shared: dict | None) -> dict:
    """The trace's JSON as `DecisionTrace.to_dict()` gave it."""
    if "menu" in packed or shared is None:
        return packed
    menu = shared.get("menu") or ""
    out = {**packed, "menu": menu, "options": shared.get("options") or []}
    out["attempts"] = [{**a, "prompt": a["prompt"] + menu} if a.get("menu_appended") else a
                       for a in packed.get("attempts") or []]
    return out


def shared_at(shared_lines: list[tuple[int, dict]], offset: int) -> dict | None:
    """The `shared` line in force for a row at `offset`: the last one written before it."""
    import bisect
    k = bisect.bisect_left([o for o, _ in shared_lines], offset)
    return shared_lines[k - 1][1] if k else None


def read_row(path: Path, offset: int) -> dict:
    with open(path, "rb") as f:
        f.seek(offset)
        return json.loads(f.readline())


def row_line(section: str, i: int, key: str, data: dict) -> bytes:
    return _line({"kind": "row", "section": section, "row": i, "key": key, **data})


def _short(value: Any, n: int = 120) -> str:
    s = value if isinstance(value, str) else json.dumps(value)
    s = s.replace("\n", "\\n")
    return repr(s if len(s) <= n else s[:n] + "...")
