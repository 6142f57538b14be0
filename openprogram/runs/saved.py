"""A run on disk: `Run.save(path)` and `Run.load(path)`.

The file is a cassette (`runtimes/cassette/cassette_file.py`, version 4): its first line is a
cassette's header plus a `run` record — the program's import path and its arguments as JSON, the
outcome, every node of the tree and every decision's trace — and then one line per model call and
per live tool call, in the order they were made, each keyed by the digest of its request and
placed in its decision, as a `RecordingRuntime` writes them (plus where it sat in the run). So
`ReplayRuntime(path)` replays a saved run as it replays any cassette, and every line passes
through the one redaction step every file the library writes goes through (`scrub`): no key
reaches the file. Reading one back applies the cassette's own checks (a cut or hand-edited line
is named) and one more: each line's key must still be the digest of its request, so an edited
request never answers a fork.

A program is re-executable after a load when it has an import path (`module:qualified.name`; a
bound method of an object a module holds as `module:name.method`) and its arguments are JSON;
a notebook's function has none, and is given again with `Run.load(path, program=fn)`.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from pathlib import Path

from ..base.errors import CassetteFileError, ModelCallError, RunFileError
from ..base.json_form import to_jsonable
from ..decision.modes import MODES
from ..runtime.runtime import Runtime
from ..runtimes.cassette.cassette_file import (
    header,
    line,
    load_cassette,
    request_key,
    write_atomically,
)
from ..runtimes.cassette.tool_results import tool_key
from .fork import with_descriptions

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

__all__ = ["RUN_FORMAT", "RUN_VERSION", "save_run", "read_run", "import_path",
           "resolve", "json_arguments", "LoadedRuntime", "edit_data", "edit_value", "line_of"]

RUN_FORMAT = "openprogram-run"
#: The run record's own version (the lines are a cassette's, versioned by it).
RUN_VERSION = 1


# ---------------------------------------------------------------------------------------------
# The program and its arguments
# ---------------------------------------------------------------------------------------------


def resolve(path: str) -> Any:
    """The object an import path (`module:qualified.name`) names."""
    module, _, qual = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def import_path(fn: Any) -> str | None:
    """Where `fn` can be imported from again, or None (a notebook's function, a lambda, a
    function defined inside another, a bound method of an object no module holds)."""
    path = None
    owner = getattr(fn, "__self__", None)
    if inspect.ismethod(fn) and owner is not None and not isinstance(owner, type):
        for modname in {type(owner).__module__, getattr(fn, "__module__", None)}:
            module = sys.modules.get(modname or "")
            if module is None or modname == "__main__":
                continue
            name = next((k for k, v in list(vars(module).items()) if v is owner), None)
            if name is not None:
                path = f"{modname}:{name}.{fn.__name__}"
                break
    else:
        modname = getattr(fn, "__module__", None)
        qual = getattr(fn, "__qualname__", None)
        if modname and qual and modname != "__main__" and "<" not in qual:
            path = f"{modname}:{qual}"
    if path is None:
        return None
    try:
        found = resolve(path)
    except Exception:
        return None
    return path if found is fn or found == fn else None


def json_arguments(args: tuple, kwargs: dict) -> tuple[list, dict] | None:
    """The arguments as JSON data when JSON gives back exactly them (tuples, sets, objects and
    non-string keys do not come back as they were), else None."""
    data = [list(args), dict(kwargs)]
    try:
        back = json.loads(json.dumps(data, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return None
    return (back[0], back[1]) if back == data else None


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def edit_data(kind: str, value: Any) -> Any:
    """An edited option set as JSON: a pick's option name, `with_descriptions`' texts, or None
    (an option set of the user's own: functions no file holds)."""
    if kind == "pick":
        return value
    descriptions = getattr(value, "descriptions", None)
    return {"descriptions": descriptions} if isinstance(descriptions, dict) else None


def edit_value(kind: str, data: Any) -> Any:
    """`edit_data` read back."""
    if kind == "pick" or data is None:
        return data
    return with_descriptions(data["descriptions"])


def run_record(run: Any) -> dict:
    program = run.program
    arguments = None if run.block else json_arguments(run.args, run.kwargs)
    err = run.error
    fork = None
    if run.forked_from is not None:
        fork = {"from": run.forked_from.name, "at": run.fork_point,
                "edit": to_jsonable(run.edit)}
    return {
        "format": RUN_FORMAT, "version": RUN_VERSION, "name": run.name, "block": run.block,
        "program": None if program is None else (run.program_path or import_path(program)),
        "args": None if arguments is None else arguments[0],
        "kwargs": None if arguments is None else arguments[1],
        "arguments_json": arguments is not None,
        "status": run.status, "result": to_jsonable(run.result),
        "error": None if err is None else {"type": type(err).__name__,
                                           "message": to_jsonable(str(err))},
        "started_at": run.started_at, "duration_s": run.duration_s, "fork": fork,
        "menu_edits": [[i, kind, edit_data(kind, value)] for i, kind, value in run.menu_edits],
        "nodes": [n.to_dict() for n in run.nodes],
        "traces": [None if d.trace is None else d.trace.to_dict() for d in run.decisions],
    }


def save_run(run: Any, path: str | os.PathLike) -> Path:
    """Write `run` to `path` (replaced whole, atomically). Returns the path."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"run.save(path) needs a file path (str or pathlib.Path), got "
                        f"{type(path).__name__}")
    p = Path(path)
    first = run.calls[0] if run.calls else None
    rt = run.runtime if run.runtime is not None else getattr(first, "runtime", None)
    name, model = (None, None) if rt is None else (rt.name, rt.model)  # (a ModelCaller's)
    head = {**header(name or getattr(first, "runtime_name", None), model),
            "run": run_record(run)}
    entries = []
    for call in run.calls:
        d = None if call.decision is None else run.decisions[call.decision]
        trace = None if d is None else d.trace
        entries.append((call.seq, call.line(None if trace is None else trace.entry,
                                            None if trace is None else trace.mode)))
    for tool in run.tool_calls:
        d = None if tool.decision is None else run.decisions[tool.decision]
        entries.append((tool.seq, tool.line(None if d is None or d.trace is None
                                            else d.trace.entry)))
    entries.sort(key=lambda e: e[0])   # in the order the calls started
    for n, (_, entry) in enumerate(entries, 1):
        entry["call"] = n                 # numbered as a recorder numbers its lines
    data = b"".join([line(head), *(line(e) for _, e in entries)])
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(p, data)
    except OSError as exc:
        raise OSError(f"run.save cannot write {str(p)!r} ({exc.strerror or exc}); pass a path "
                      f"in a writable folder") from None
    return p


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def read_run(path: str | os.PathLike) -> dict:
    """The saved run at `path`, checked: `{"run": record, "calls": [...], "tools": [...],
    "head": the cassette header}`. A file that is not one, or whose lines were edited, raises
    a `RunFileError` naming the line and the fix."""
    where = str(path)
    try:
        data = load_cassette(path)
    except CassetteFileError as exc:
        raise RunFileError(f"Run.load: {exc}") from None
    rec = data.get("run")
    if not isinstance(rec, dict) or rec.get("format") != RUN_FORMAT:
        raise RunFileError(f"{where!r} is a cassette but not a saved run (its first line holds "
                           f"no run record): replay it with ReplayRuntime({where!r}), or save a "
                           f"run with run.save(path)")
    version = rec.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunFileError(f"{where!r} has a run record of no known version "
                           f"({version!r}): it was edited; save the run again")
    if version > RUN_VERSION:
        raise RunFileError(f"{where!r} was saved by a newer release (run record version "
                           f"{version}; this one reads {RUN_VERSION}). Upgrade: pip install -U "
                           f"openprogram-decisions")
    if not isinstance(rec.get("nodes"), list) or not rec["nodes"] or \
            not isinstance(rec.get("traces"), list):
        raise RunFileError(f"{where!r} has a run record without its nodes and traces: it was "
                           f"edited; save the run again")
    redo = "restore the file, or save the run again with run.save(path)"
    for entry in data["calls"]:
        n = line_of(entry)
        if entry.get("key") != request_key(entry["request"], entry.get("settings")):
            raise RunFileError(
                f"line {n} of the saved run {where!r} was edited: its key is not the digest of "
                f"its request (the request, or the key, was changed after the run was saved), "
                f"so it cannot answer a fork; {redo}")
        if not isinstance(entry.get("run"), dict):
            raise RunFileError(f"line {n} of the saved run {where!r} does not say where it sat "
                               f"in the run (its \"run\" object): it was edited; {redo}")
    for entry in data["tools"]:
        n = line_of(entry)
        call = entry.get("tool")
        ok = isinstance(call, dict) and all(isinstance(call.get(k), str)
                                            for k in ("server", "name")) and \
            isinstance(call.get("arguments"), dict)
        if not ok or entry.get("key") != tool_key(call):
            raise RunFileError(
                f"line {n} of the saved run {where!r} was edited: it is a tool call whose key "
                f"is not the digest of the call (server, tool, arguments); {redo}")
    head = {k: v for k, v in data.items() if k not in ("calls", "tools", "run", "call_lines")}
    return {"run": rec, "calls": data["calls"], "tools": data["tools"], "head": head}


def line_of(entry: dict) -> Any:
    """The line of a saved run a call's entry was read from (its `call` number + the header)."""
    seq = entry.get("call")
    return seq + 1 if isinstance(seq, int) and not isinstance(seq, bool) else "?"


def program_of(rec: dict, program: Any, where: str) -> tuple[Callable[..., Any] | None, str]:
    """The program a loaded run re-executes: `program=` when given, else the one its import
    path names; and why there is none (for the error a fork raises)."""
    if program is not None:
        if not callable(program):
            raise TypeError(f"Run.load(program=) takes the program (a callable), got "
                            f"{type(program).__name__}")
        return program, ""
    if rec.get("block"):
        return None, "it was recorded from a block of code (run_block), which is not " \
                     "re-executable: put the block's code in a function and run it with " \
                     "openprogram.run(fn)"
    path = rec.get("program")
    if not isinstance(path, str):
        return None, (f"its program has no import path (a notebook's function, a lambda or a "
                      f"function defined inside another): load it with "
                      f"Run.load({where!r}, program=fn)")
    try:
        return resolve(path), ""
    except Exception as exc:
        return None, (f"its program {path!r} cannot be imported here ({type(exc).__name__}: "
                      f"{exc}): load it with Run.load({where!r}, program=fn)")


class LoadedRuntime(Runtime):
    """The runtime a loaded run's program is bound to in a fork: the recording answers every
    call before the fork point, so none reaches it; a call after the fork point that nothing
    else answers is refused, naming the fix."""

    modes = frozenset(MODES)

    def __init__(self, where: str, name: str | None, model: str | None,
                 confidence_source: str | None):
        super().__init__(name=name or "recorded", model=model)
        self.where, self.confidence_source = where, confidence_source

    def complete(self, messages, *, tools=None, on_text=None, timeout=None, **mode_args):
        raise ModelCallError(
            f"this run was loaded from {self.where!r}, which holds the recorded calls but no "
            f"model for the ones after the fork point: fork it with runtime=... (the model to "
            f"ask from the fork point on), or with after='recorded' to answer from the "
            f"recording wherever it holds the same request", kind="model_error")


def confidence_of(calls: list[dict]) -> str | None:
    """The distribution the recorded runtime gave ("exact", "logprobs"), read from the calls."""
    for entry in calls:
        conf = (entry.get("response") or {}).get("confidence")
        if isinstance(conf, dict) and conf.get("source") in ("exact", "logprobs"):
            return str(conf["source"])
    return None
