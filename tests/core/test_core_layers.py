"""The core's layers import one way (docs/architecture.md).

Reads every module of `openprogram/` with `ast` — imports inside functions included, since an
import moved into a function to dodge a cycle is still a cycle — and fails on any import cycle
between the package's modules, and on any import of the notebook layer, IPython or ipywidgets.
The one sanctioned exception is IPython's extension hook in `openprogram/__init__.py`
(`%load_ext openprogram` must find it there, and it loads the notebook layer only when IPython
calls it).
"""
from __future__ import annotations

import ast
from pathlib import Path

import openprogram

ROOT = Path(openprogram.__file__).resolve().parent
FORBIDDEN = ("IPython", "ipywidgets", "openprogram.widgets")
HOOKS = {("openprogram", "load_ipython_extension"), ("openprogram", "unload_ipython_extension")}


def module_name(path: Path) -> str:
    parts = ["openprogram", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def imports(path: Path, known: set[str]) -> list[tuple[str, str | None, int]]:
    """(imported module, enclosing function or None, line) for every import in the file."""
    name = module_name(path)
    package = name if is_package(path) else name.rsplit(".", 1)[0]
    found: list[tuple[str, str | None, int]] = []

    def visit(node: ast.AST, func: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else func
            if isinstance(child, ast.Import):
                found.extend((a.name, func, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append((target, func, child.lineno))
                for a in child.names:  # `from . import tools` names a module
                    if f"{target}.{a.name}" in known:
                        found.append((f"{target}.{a.name}", func, child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for target, _, _ in imports(path, known):
            if target in known and target != m:
                edges[m].add(target)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None. Importing a package's own
    `__init__` from inside it is not counted: Python runs it first anyway."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if m.startswith(t + "."):
                continue
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state:
                found = dfs(t)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = dfs(m)
            if found:
                return found
    return None


def test_no_import_cycle_counting_imports_inside_functions():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_core_never_imports_the_notebook_layer_ipython_or_ipywidgets():
    known = set(modules())
    bad = []
    for m, path in modules().items():
        for target, func, line in imports(path, known):
            if target.startswith(FORBIDDEN) and (m, func) not in HOOKS:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    assert not bad, "the core imports the notebook layer:\n" + "\n".join(bad)


def test_the_checker_sees_cycles_and_forbidden_imports(monkeypatch):
    # The checks above can fail: a function-level import that closes a loop is a cycle, and a
    # function-level import of the notebook layer is found.
    edges = {"openprogram.a": {"openprogram.b"}, "openprogram.b": {"openprogram.a"}}
    assert find_cycle(edges) == ["openprogram.a", "openprogram.b", "openprogram.a"]
    fake = ROOT / "agentic_programming" / "loop.py"
    src = fake.read_text(encoding="utf-8") + (
        "\n\ndef _late():\n    from .runtime import Runtime\n"
        "    from openprogram.widgets.panel import DecisionPanel\n")
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None:
                        src if self == fake else Path.open(self, encoding=encoding).read())
    found = imports(fake, set(modules()))
    assert ("openprogram.agentic_programming.runtime", "_late", src.count("\n") - 1) in found
    assert any(t == "openprogram.widgets.panel" and f == "_late" for t, f, _ in found)
    cycle = find_cycle(graph())
    assert cycle is not None and "openprogram.agentic_programming.loop" in cycle
