"""Where each line of an option's menu came from: a function's signature, docstring and
`input_meta` entry in its file, a class's field, a JSON pointer into a tool definition, a path
into the option set. The option kinds answer for themselves (`Option.head_sources`,
`Option.param_source`, `Option.code_place`) with these helpers; the step-through shows the answers
beside the menu's lines.
"""
from __future__ import annotations

import inspect

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["code_place", "line_of", "place", "where", "meta_line", "raw_schema", "path_text"]


def code_place(obj: Any) -> tuple[str | None, int | None, list[str]]:
    """(file, first line, source lines) of a function or class, or Nones when Python cannot
    tell (a builtin, a class made at run time)."""
    target = inspect.unwrap(obj) if callable(obj) and not isinstance(obj, type) else obj
    try:
        file = inspect.getsourcefile(target)
        lines, start = inspect.getsourcelines(target)
    except (TypeError, OSError):
        return None, None, []
    return file, max(start, 1), lines


def line_of(lines: list[str], start: int, test) -> int | None:
    for i, line in enumerate(lines):
        if test(line):
            return start + i
    return None


def place(file: str | None, line: int | None, what: str) -> dict:
    if file is None or line is None:
        return {"kind": "note", "label": what}
    return {"kind": "file", "file": file, "line": line, "label": f"{what} ({where(file, line)})"}


def where(file: str, line: int) -> str:
    """A file and line as a reader finds them: a notebook cell's code lives in a file named
    after the kernel's process, which says nothing to a reader (and changes every run)."""
    import os
    if "ipykernel_" in file or file.startswith("<ipython-input"):
        return f"a notebook cell, line {line}"
    try:
        rel = os.path.relpath(file)
    except ValueError:  # another drive
        rel = file
    return f"{rel if not rel.startswith('..') else file}:{line}"


def meta_line(file: str | None, start: int | None, fn: Any, name: str) -> int | None:
    """The line of `input_meta` that names `name`: in the function's file from its `def` on
    (`fn.input_meta = {...}` after it, or a decorator's argument just above it)."""
    if file is None or start is None:
        return None
    import linecache
    lines = linecache.getlines(file)
    quoted = (f"'{name}'", f'"{name}"')
    for lo in (start - 1, 0):  # after the def first, then anywhere in the file
        for i in range(max(lo, 0), len(lines)):
            if "input_meta" in lines[i]:
                # the entry may sit on a later line of a dict written over several
                for j in range(i, min(i + 30, len(lines))):
                    if any(q in lines[j] for q in quoted):
                        return j + 1
    return None


def raw_schema(options: Any, option: Any) -> tuple[list, dict] | None:
    """(path into the option set, the schema dict) of a dict-schema option (O2, O3)."""
    if isinstance(options, dict):
        raw = options.get(option.name)
        if isinstance(raw, tuple) and len(raw) == 2 and isinstance(raw[1], dict):
            return [option.name, 1], raw[1]
        return None
    if isinstance(options, (list, tuple)):
        for i, item in enumerate(options):
            if isinstance(item, tuple) and len(item) == 3 and item[0] == option.name \
                    and isinstance(item[2], dict):
                return [i, 2], item[2]
    return None


def path_text(path: list) -> str:
    return "options" + "".join(f"[{p!r}]" for p in path)
