"""The journal: an evaluation's finished rows on disk, appended as they finish, to resume.

`evaluate(..., journal="runs/triage.jsonl")` appends one JSON line per finished row: its position
and key (a digest of its filled prompt), the input row, the expected pick, the pick, its
arguments, the result in its JSON form, the status, the error and its kind, the attempts, tokens,
latency, whether the model was answered from a cache, and the decision's whole trace as JSON.
A line is written whole (one write, flushed), so a process killed at any point leaves every
finished row; a last line cut off mid-write is dropped when the journal is opened again.
Calling the same evaluation with the same journal resumes: the rows it holds are not run again.
It is long because one file format is written, checked and read back here, and each of those
follows the same rules of the format (its kinds of lines, its sections, its untrusted input).

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

A journal may come from someone else (a colleague's run, a file from a bug report), so it is
read as untrusted input: a line too long or nested too deep, a field of the wrong type, a row
position or total larger than a file of its size can hold, is a `JournalFileError` naming the
file, the line and what to do, before anything is built from it; a journal of a newer format is
neither read nor appended to. Every line written goes through `secrets.scrub` (no API key of
the process reaches the file), and a write that fails (a full disk) is a `JournalWriteError`
saying how many rows are safe and that the same call resumes.

A finished row's line is written in one pass from the row and its records
(`journal_text.row_text`, `Journal.write_text`) while the section's shared menu stands for its
trace and no key is alive to mask; otherwise, and for what that way does not expect, it is
built as JSON data and encoded (`write_row`, `write_trace_row`). The text is the same.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path

from ..base.errors import JournalFileError, JournalMismatch, JournalWriteError
from ..base.json_form import json_ready
from ..base.jsonl import LineFormat, format_version, whole_lines, write_whole
from ..base.secrets import holding
from ..base.text import cut
from ..trace.confidence import saved_problem
from .journal_text import trace_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["Journal", "JournalMismatch", "JournalFileError", "JournalWriteError", "read_journal"]

FORMAT = "openprogram-journal"
VERSION = 1








#: A journaled row's position (and a section's total) may reach this far past what the file
#: holds: a journal is read as untrusted input, and a 3 KB file saying "row 30000000" must not
#: make a result of 30 million rows. Each row line holds at least one row; an interrupted run
#: of many inputs has journaled few of them, so positions up to ROWS_PER_LINE times the lines
#: of the file (and at least MIN_ROWS) are read.
ROWS_PER_LINE = 1_000
MIN_ROWS = 1_000_000
#: A line longer than this is not read (a journal row is a trace: kilobytes, rarely megabytes).
MAX_LINE = 256 * 1024 * 1024

_STATUSES = ("cancelled", "resolved", "failed")
_NUM = (int, float)
_OPT_STR = (str, type(None))
# The fields of each kind of line that code reads, and the types they may hold (a list of str
# written as [str]); any other field is kept as it is.
_FIELDS = {
    "row": {"row": int, "key": _OPT_STR, "status": str, "pick": _OPT_STR,
            "expected": _OPT_STR, "attempts": (int, type(None)), "error_kinds": ([str], None),
            "raised": _OPT_STR, "tokens_in": (int, type(None)), "tokens_out": (int, type(None)),
            "latency_s": (*_NUM, type(None)), "cached": (bool, type(None)),
            "input": (dict, type(None)), "error": (dict, type(None)),
            "error_kind": _OPT_STR, "trace": (dict, type(None)), "section": _OPT_STR},
    "section": {"section": str, "prompt": _OPT_STR, "options": ([str], None),
                "total": (int, type(None)), "fingerprint": _OPT_STR,
                "concurrency": (int, type(None))},
    "shared": {"section": _OPT_STR, "menu": _OPT_STR, "options": (list, type(None))},
    "batch": {"section": _OPT_STR, "batch_id": str, "round": (int, type(None)),
              "state": str, "custom_ids": ([str], None), "answered": (int, type(None))},
}
_TRACE_FIELDS = {"id": (int, type(None)), "entry": _OPT_STR, "mode": _OPT_STR,
                 "status": _OPT_STR, "prompt": _OPT_STR, "menu": _OPT_STR,
                 "options": (list, type(None)), "runtime": _OPT_STR,
                 "max_attempts": (int, type(None)), "context_keys": ([str], None),
                 "attempts": ([dict], None), "tool_rounds": ([dict], None),
                 "chosen": _OPT_STR, "error": (dict, type(None)),
                 "started_at": (*_NUM, type(None)), "duration_s": (*_NUM, type(None)),
                 "menu_appended": (bool, type(None))}
_ATTEMPT_FIELDS = {"attempt": (int, type(None)), "is_last": (bool, type(None)),
                   "prompt": _OPT_STR, "reply": _OPT_STR, "extracted": (dict, type(None)),
                   "found_in": _OPT_STR, "span": ([int], None), "error_span": ([int], None),
                   "key_alias": _OPT_STR, "candidates": (int, type(None)),
                   "error_kind": _OPT_STR, "error_message": _OPT_STR, "error_path": _OPT_STR,
                   "chosen": _OPT_STR, "args": (dict, type(None)), "dropped": ([str], None),
                   "injected": ([str], None), "started_at": (*_NUM, type(None)),
                   "duration_s": (*_NUM, type(None)), "model_call_id": (int, type(None)),
                   "usage": (dict, type(None)), "sent": (dict, type(None)),
                   "tool_calls": ([dict], None), "finish_reason": _OPT_STR,
                   "raw": (dict, type(None)), "cached": (bool, type(None)),
                   "redacted": ([str], None), "menu_appended": (bool, type(None))}
_TOOL_FIELDS = {"round": (int, type(None)), "tool": _OPT_STR, "args": (dict, type(None)),
                "error": _OPT_STR, "duration_s": (*_NUM, type(None))}


def _type_ok(value: Any, want: Any) -> bool:
    if isinstance(want, tuple) and want and isinstance(want[0], list):  # ([str], None)
        return value is None or _type_ok(value, want[0])
    if isinstance(want, list):
        return isinstance(value, list) and all(_type_ok(v, want[0]) for v in value)
    if isinstance(value, bool) and want is not bool and (
            want in (int, float) or (isinstance(want, tuple) and bool not in want)):
        return False  # JSON's true is not a count
    return isinstance(value, want)


def _type_name(want: Any) -> str:
    if isinstance(want, tuple) and want and isinstance(want[0], list):
        return f"a list of {_type_name(want[0][0])} or null"
    if isinstance(want, list):
        return f"a list of {_type_name(want[0])}"
    if isinstance(want, tuple):
        return " or ".join("null" if t is type(None) else _type_name(t) for t in want)
    return {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
            dict: "an object", list: "a list"}.get(want, want.__name__)


def _check_fields(item: dict, fields: dict, where: str) -> None:
    for name, want in fields.items():
        if name in item and not _type_ok(item[name], want):
            raise ValueError(f"its {where}{name!r} is {_show(item[name])}, not "
                             f"{_type_name(want)}")


def _check_confidence(data: Any, where: str) -> None:
    """A row's (or an attempt's) distribution is read back into a `Confidence` and counted in
    calibration figures and drawn as bars: one whose numbers are not probabilities is a
    damaged line, as a field of the wrong type is."""
    if data is None:
        return
    problem = saved_problem(data)
    if problem is not None:
        raise ValueError(f"its {where}\"confidence\" is not a distribution: {problem}")


def _show(value: Any) -> str:
    return cut(json.dumps(value, default=repr), 60)


def check_line(item: dict, path: Any, n: int, limit: int) -> None:
    """Raise a JournalFileError naming the file and line `n` when `item` (a line of the
    journal) holds a field code reads with a type or value it cannot have."""
    kind = item.get("kind")
    try:
        fields = _FIELDS.get(kind)
        if fields is None:
            return   # a kind a later release writes: skipped by readers
        _check_fields(item, fields, "")
        if kind == "row":
            if item["row"] < 0 or item["row"] >= limit:
                raise ValueError(f"its input position \"row\" is {item['row']}, which the "
                                 f"journal cannot hold (it holds positions below {limit:,})")
            if item["status"] not in _STATUSES:
                raise ValueError(f"its \"status\" is {_show(item['status'])}, not one of "
                                 f"{', '.join(_STATUSES)}")
            err = item.get("error")
            if err is not None:
                _check_fields(err, {"type": _OPT_STR, "message": _OPT_STR}, "error's ")
            _check_confidence(item.get("confidence"), "")
            trace = item.get("trace")
            if trace is not None:
                _check_fields(trace, _TRACE_FIELDS, "trace's ")
                for k, a in enumerate(trace.get("attempts") or []):
                    _check_fields(a, _ATTEMPT_FIELDS, f"trace's attempt {k + 1}'s ")
                    _check_confidence(a.get("confidence"), f"trace's attempt {k + 1}'s ")
                for k, t in enumerate(trace.get("tool_rounds") or []):
                    _check_fields(t, _TOOL_FIELDS, f"trace's tool round {k + 1}'s ")
        elif kind == "section":
            total = item.get("total")
            if total is not None and not 0 <= total <= limit:
                raise ValueError(f"its \"total\" is {total}, which the journal cannot hold "
                                 f"(at most {limit:,} inputs for a file of its size)")
    except ValueError as exc:
        raise JournalFileError(f"line {n} of the journal {str(path)!r} is not a line "
                               f"evaluate(..., journal=) writes: {exc}. The file was edited or "
                               f"damaged: restore it, delete that line (its row runs again), or "
                               f"pass a new journal= path") from None


#: A journal line: compact, and a value JSON has no form for written as its repr. Every key a
#: runtime of this process holds is masked (`LineFormat.line`): no writer is trusted to have
#: redacted what it journals (a batch's id, an error a server chose).
_FORMAT = LineFormat(separators=(",", ":"), default=repr)
_line = _FORMAT.line


#: What a section's fingerprint covers, each as a refused resume names it. The confidence
#: settings (`confidence=`, `min_confidence=`, `low_confidence=`) count only when a run asks
#: for them: rows journaled without distributions, or with another threshold, would make the
#: calibration of the whole mean nothing, and a journal of a run that asks for none keeps the
#: fingerprint it had before they were counted.
FINGERPRINTED = {"prompt": "the prompt template", "menu": "the option set",
                 "mode": "the way of asking (mode=)", "runtime": "the runtime",
                 "confidence": "confidence setting (confidence=, min_confidence=, "
                               "low_confidence=)"}


def fingerprint(section: dict) -> str:
    what = {k: section.get(k) for k in ("prompt", "menu", "mode", "runtime")}
    if section.get("confidence") is not None:
        what["confidence"] = section["confidence"]
    # The repair level decides which replies resolve without a re-ask, so rows of two levels
    # are not one evaluation. A section journaled before repair= existed has no level: its
    # fingerprint stays what it was, and it resumes at any level (nothing says which it ran).
    if section.get("repair") is not None:
        what["repair"] = section["repair"]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode("utf-8", "surrogatepass")
                          ).hexdigest()[:16]


def _scan(path: Path) -> tuple[list[tuple[dict, int]], int, int]:
    """Every whole line of the journal as (data, offset), where the whole lines end, and the
    file's size (bigger when its last line was cut off)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    spans, whole = whole_lines(data)
    for pos, end in spans:
        why = "it is not a JSON object"
        if end - pos > MAX_LINE:
            item, why = None, f"it is {end - pos:,} bytes long (at most {MAX_LINE:,} are read)"
        else:
            try:
                item = json.loads(data[pos:end])
            except UnicodeDecodeError as exc:
                item, why = None, f"it is not UTF-8 text ({exc.reason} at byte {exc.start})"
            except ValueError:
                item = None
            except RecursionError:
                item, why = None, "it is nested deeper than any journal line"
        if not isinstance(item, dict):
            raise JournalFileError(f"line {len(out) + 1} of the journal {str(path)!r} cannot be "
                                   f"read: {why}. The file was edited by hand or is not a "
                                   f"journal: restore it, delete that line, or pass another path")
        out.append((item, pos))
    if out and out[0][0].get("format") == FORMAT:   # a newer format says so, not its lines
        _check_version(out[0][0], path)
    limit = max(MIN_ROWS, ROWS_PER_LINE * len(out))
    for k, (item, _) in enumerate(out[1:], 2):
        check_line(item, path, k, limit)
    return out, whole, len(data)


def _check_version(head: dict, path: Path) -> None:
    """A journal of a newer format is neither read nor written to (appending this release's
    lines to it would make a file neither release reads whole)."""
    version = format_version(head)
    if version is None or version > VERSION:
        by = head.get("written_by")
        raise JournalFileError(
            f"{str(path)!r} is a journal of format version {_show(head.get('version'))}"
            + (f", written by openprogram {_show(by)}" if by else "")
            + f", which this release (journal version {VERSION}) can neither read nor append "
              f"to: upgrade openprogram (pip install -U openprogram-decisions), or pass a new "
              f"journal= path")


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
    _check_version(lines[0][0], p)
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
                          "written_by": _release(),
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
        _check_version(lines[0][0], self.path)
        old = None
        self.shared: dict | None = None
        self._read_shared = False   # self.shared is a line read from the file (text_menu)
        self.batches: list[dict] = []   # this section's batch lines (the batch path's rounds)
        self.shared_lines: list[tuple[int, dict]] = []  # (offset, line) of this section's
        for item, offset in lines[1:]:
            kind = item.get("kind")
            if kind == "shared" and item.get("section") == self.name:
                self.shared = item
                self._read_shared = True
                self.shared_lines.append((offset, item))
            elif kind == "section" and item.get("section") == self.name:
                old = item
            elif kind == "row" and item.get("section") == self.name:
                self.done[item["row"]] = (item.get("key"), item, offset)
            elif kind == "batch" and item.get("section") == self.name:
                self.batches.append(item)
        if old is not None and old.get("repair") is None:
            section["fingerprint"] = fingerprint({**section, "repair": None})  # see fingerprint
        if old is not None and old.get("repair") is not None \
                and old.get("repair") != section.get("repair") \
                and all(old.get(k) == section.get(k)
                        for k in ("prompt", "menu", "mode", "runtime")):
            was, now = _short(old.get("repair"), 40), _short(section.get("repair"), 40)
            raise JournalMismatch(
                f"the journal {where!r} holds {len(self.done)} rows of {self.name!r} run with "
                f"repair={was}, and this run asks for repair={now}: rows of two repair levels "
                f"are not one evaluation. Pass repair={was} to resume it, or a new journal= "
                f"path to run at repair={now} (or delete the file to start over)")
        if old is not None and old.get("fingerprint") != section["fingerprint"]:
            changed = [k for k in FINGERPRINTED
                       if old.get(k) != section.get(k)] or ["the evaluation"]
            words = FINGERPRINTED
            raise JournalMismatch(
                f"the journal {where!r} holds {len(self.done)} rows of {self.name!r} run with "
                f"another {', '.join(words.get(k, k) for k in changed)} (journaled: "
                f"{_short(old.get(changed[0]))}; now: {_short(section.get(changed[0]))}). A "
                f"journal resumes one evaluation: pass a new journal= path to run this one, "
                f"or delete the file to start over")
        self.rows = len(self.done)   # this section's rows in the file (a full disk says so)
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
        try:
            self.size = write_whole(self._file.fileno(), data, start)
        except OSError as exc:
            if isinstance(exc, JournalWriteError):
                raise
            raise JournalWriteError(
                exc.errno, f"the journal {str(self.path)!r} could not be written "
                f"({exc.strerror or exc}): the {self.rows} rows journaled before are safe "
                f"in it. Free space (or fix what stopped the write) and call the same "
                f"evaluation with the same journal= again: it resumes from those rows") \
                from None
        return start

    def write_row(self, i: int, key: str, data: dict) -> int:
        """Append one finished row's line (its trace packed against the section's shared menu);
        returns where the line starts. Called by one thread at a time."""
        trace = data.get("trace")
        if trace is not None:
            packed, new = pack_trace(trace, self.shared)
            if new is not None:
                self.shared = {"kind": "shared", "section": self.name, **new}
                self._read_shared = False
                self.shared_lines.append((self._write(_line(self.shared)), self.shared))
            data = {**data, "trace": packed}
        at = self._write(row_line(self.name, i, key, data))
        self.rows += 1
        return at

    def text_menu(self, trace: Any) -> str | None:
        """The menu a row line of `trace` is written against in one pass (`journal_text`): the
        section's shared menu when it stands for the trace's menu and option table and no key
        is alive to mask (the one-pass way builds no JSON data for `scrub` to walk); else None,
        and the row goes the general way (which writes a new shared line when needed)."""
        shared = self.shared
        if shared is not None and shared["menu"] == trace.menu \
                and shared["options"] == trace.options and not holding():
            if self._read_shared:
                # the shared line read from the file: equal to the trace's menu and option
                # table, not the same objects, so each row's compare would walk every option;
                # the run's own compare as the same items from now on
                self._read_shared = False
                self.shared = shared = {**shared, "menu": trace.menu, "options": trace.options}
            return shared["menu"] or ""
        return None

    def write_text(self, text: str) -> int:
        """Append a row line written as text, its newline included (`journal_text.row_text`,
        whose menu came from `text_menu` just before); returns where it starts. Called by one
        thread at a time."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:   # a lone surrogate: as encode_line writes it
            data = text.encode("utf-8", "backslashreplace")
        at = self._write(data)
        self.rows += 1
        return at

    def write_trace_row(self, i: int, key: str, data: dict, trace: Any) -> int:
        """`write_row` of `data` with `"trace"`: the `DecisionTrace` as its JSON (last), the
        trace written straight from its records (`trace_text`) when `text_menu` allows; else
        the general way. The line is the same text either way."""
        menu = self.text_menu(trace)
        text = None if menu is None else trace_text(trace, menu)
        if text is None:
            return self.write_row(i, key, {**data, "trace": trace.to_dict(json_ready)})
        head = _FORMAT.text({"kind": "row", "section": self.name, "row": i, "key": key,
                             **data, "trace": None})
        return self.write_text(head[:-len("null}")] + text + "}\n")

    def write_batch(self, data: dict) -> None:
        """Append a batch line (a batch sent, or how it ended), so a restarted run re-attaches
        to a batch in flight instead of sending it again."""
        item = {"kind": "batch", "section": self.name, **data}
        self._write(_line(item))
        self.batches.append(item)

    def close(self) -> None:
        self._file.close()


def _release() -> str | None:
    """This release's version, written in a new journal's header (a reader that cannot read
    the file names the release that wrote it)."""
    try:
        from importlib.metadata import version
        return version("openprogram-decisions")
    except Exception:   # not installed (run from a checkout)
        return None


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
    packed = dict(trace)
    packed.pop("menu", None)
    packed.pop("options", None)
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
    return repr(cut(s, n))
