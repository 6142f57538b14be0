"""Call sites: the line of the user's code that made a decision or called an Agent method.

A run's decisions are told apart, collapsed in a view and aligned between two runs by where the
program made them, so each decision node (and each Agent method or agentic function call)
records the first frame above it that is not the library's own (`openprogram/`) nor the
standard library's (`contextlib`, `asyncio`, `threading` sit between a user's call and the node
it makes). This runs on every decision of a recorded program: the first walk from an entry
point remembers how high the user's frame was, so the next one is a single frame jump and two
identity checks (`_skips`), and a site seen before is the same `CallSite` object."""
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


# The caches below are keyed by `id()` of code objects, not by the objects: a code object's
# hash is computed from its whole content every time it is asked for (a microsecond or two),
# and a site is looked up on every decision. Each value holds its code object, which keeps it
# alive, so an id in a cache is never another object's.
_inside: dict[str, bool] = {}
_sites: dict[tuple, tuple] = {}
#: The frames of the run machinery that call the program itself (`Run._execute`): a node made
#: by the program's own call has no call site in the user's code (it is the run's entry, made
#: from wherever `run()` or `fork()` was called, which is no place in the program).
_entries: dict[int, Any] = {}


def program_entry(fn: Any) -> Any:
    """Mark `fn` as a frame that calls a run's program (see `_entries`). Returns `fn`."""
    _entries[id(fn.__code__)] = fn.__code__
    return fn


#: For each kind of sited node (by its DAG name: "decision.make", "agent(options=)", an Agent
#: method's "Class.method"), what the walk found last time: how many frames above the frame
#: that opened the node the user's frame was, the code of the frame the user's called and of
#: the user's own, its instruction and its site. The library's own call chain from an entry
#: point is fixed, so the next site is found with one jump and two identity checks (the frame
#: at that height runs the same user code, calling the same library function: no other frame
#: of the user's can sit below it), and walked again whenever the shape differs.
_skips: dict[str, list] = {}


def call_site(depth: int = 2, name: str = "") -> CallSite | None:
    """The user's frame above the caller's `depth`-th frame (None when every frame is the
    library's or the standard library's, as in a thread the library started, or when the run
    itself called the program: its own top call); `name` says what kind of node it is for."""
    known = _skips.get(name)
    if known is not None:
        skip, callee_code, user_code, lasti, site = known
        try:  # (no frame that high, or no frame above it: walked below)
            callee = sys._getframe(depth + skip - 1)
            f = callee.f_back
            if callee.f_code is callee_code and f.f_code is user_code:
                if f.f_lasti == lasti:  # the same line as last time (a loop, a method)
                    return site
                site = _site(f)
                known[3], known[4] = f.f_lasti, site
                return site
        except (ValueError, AttributeError):
            pass
    try:
        start: Any = sys._getframe(depth)
    except ValueError:
        return None
    return _walk(start, name)


def _walk(start: Any, name: str) -> CallSite | None:
    inside = _inside
    f, callee, n = start, None, 0
    while f is not None:
        here_code = f.f_code
        if id(here_code) in _entries:
            return None
        filename = here_code.co_filename
        here = inside.get(filename)
        if here is None:
            here = inside[filename] = _internal(filename)
        if not here:
            site = _site(f)
            if n:  # (a user's frame that opened the node itself: nothing to skip, no memo)
                if len(_skips) > 10_000:
                    _skips.clear()
                _skips[name] = [n, callee.f_code, here_code, f.f_lasti, site]
            return site
        f, callee, n = f.f_back, f, n + 1
    return None


def _site(f: Any) -> CallSite:
    code = f.f_code
    key = (id(code), f.f_lasti)
    known = _sites.get(key)
    if known is not None and known[0] is code:
        return known[1]
    if len(_sites) > 100_000:  # a kernel that ran very many cells: start again
        _sites.clear()
    line = f.f_lineno
    # the same line reached from another instruction is the same site (one object per line)
    site = next((s for c, s in _by_line.get((id(code), line), ()) if c is code), None)
    if site is None:
        site = CallSite(code.co_filename, line, getattr(code, "co_qualname", code.co_name))
        _by_line.setdefault((id(code), line), []).append((code, site))
    _sites[key] = (code, site)
    return site


_by_line: dict[tuple, list] = {}
