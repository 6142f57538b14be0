"""Call sites: the line of the user's code that made a decision or called an Agent method.

A run's decisions are told apart, collapsed in a view and aligned between two runs by where the
program made them, so each decision node (and each Agent method or agentic function call)
records the first frame above it that is not the library's own (`openprogram/`) nor the
standard library's (`contextlib`, `asyncio`, `threading` sit between a user's call and the node
it makes). The walk is a few attribute reads per frame, and a site seen before is the same
`CallSite` object, so recording one costs about a microsecond.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["CallSite", "call_site", "program_entry"]

_LIBRARY = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_INSTALLED = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


class CallSite:
    """Where the user's code made a node: `file`, `line`, `function` (its qualified name).
    `str(site)` reads "agents.py:42 in Support.handle_ticket"; `key` ("agents.py:42") is
    what a view collapses repeated nodes by and what `Run.diff` aligns two runs' decisions by."""

    __slots__ = ("file", "line", "function")

    def __init__(self, file: str, line: int, function: str):
        self.file, self.line, self.function = file, line, function

    @property
    def key(self) -> str:
        """"file.py:42": the file's name without its folder, which is what stays the same
        from run to run of a notebook (a cell's code is compiled into a file named by its
        hash, in a folder named by the kernel's process)."""
        return f"{os.path.basename(self.file)}:{self.line}"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function}

    @classmethod
    def from_dict(cls, data: Any) -> CallSite | None:
        if not isinstance(data, dict):
            return None
        return cls(str(data.get("file")), int(data.get("line") or 0), str(data.get("function")))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CallSite) and (self.file, self.line, self.function) == \
            (other.file, other.line, other.function)

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.function))

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} in {self.function}"

    def __repr__(self) -> str:
        return f"CallSite({self.file!r}, {self.line}, {self.function!r})"


def _internal(filename: str) -> bool:
    if filename.startswith(_LIBRARY):
        return True
    if filename.startswith("<frozen "):
        return True
    return filename.startswith(_STDLIB) and not any(p in filename for p in _INSTALLED)


_inside: dict[str, bool] = {}
_sites: dict[tuple, CallSite] = {}
#: The frames of the run machinery that call the program itself (`Run._execute`): a node made
#: by the program's own call has no call site in the user's code (it is the run's entry, made
#: from wherever `run()` or `fork()` was called, which is no place in the program).
_entries: set = set()


def program_entry(fn: Any) -> Any:
    """Mark `fn` as a frame that calls a run's program (see `_entries`). Returns `fn`."""
    _entries.add(fn.__code__)
    return fn


#: For each code object that opened a sited node (the frame just above the hook: `Plan.run`,
#: `run_agent_decision`, an Agent method's wrapper), how many frames above it the user's frame
#: was last time: the shape of the library's own call chain from an entry point is fixed, so a
#: site is found with two jumps and two checks instead of a walk (checked, and walked again
#: whenever the shape differs).
_skips: dict = {}


def call_site(depth: int = 2) -> CallSite | None:
    """The user's frame above the caller's `depth`-th frame (None when every frame is the
    library's or the standard library's, as in a thread the library started, or when the run
    itself called the program: its own top call)."""
    try:
        start: Any = sys._getframe(depth)
    except ValueError:
        return None
    inside = _inside
    skip = _skips.get(start.f_code)
    if skip:  # the shape seen last time from this entry: the user's frame is where it was,
        try:  # and the frame it called is the library's
            f = sys._getframe(depth + skip)
            callee = sys._getframe(depth + skip - 1)
        except ValueError:
            f = callee = None
        if f is not None and inside.get(f.f_code.co_filename) is False and \
                f.f_code not in _entries and inside.get(callee.f_code.co_filename):
            return _site(f)
    f, n = start, 0
    while f is not None:
        code = f.f_code
        if code in _entries:
            return None
        name = code.co_filename
        known = inside.get(name)
        if known is None:
            known = inside[name] = _internal(name)
        if not known:
            if len(_skips) > 10_000:
                _skips.clear()
            _skips[start.f_code] = n
            return _site(f)
        f, n = f.f_back, n + 1
    return None


def _site(f: Any) -> CallSite:
    code = f.f_code
    key = (code, f.f_lineno)
    site = _sites.get(key)
    if site is None:
        if len(_sites) > 100_000:  # a kernel that ran very many cells: start again
            _sites.clear()
        site = _sites[key] = CallSite(code.co_filename, f.f_lineno,
                                      getattr(code, "co_qualname", code.co_name))
    return site
