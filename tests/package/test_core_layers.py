"""The core's layers import one way (docs/architecture.md).

Reads every module of `openprogram/` and of the notebook layer (`widgets/`, installed as
`openprogram.widgets`) with `ast` — imports inside functions included, since an import moved into
a function to dodge a cycle is still a cycle — and fails on any import cycle, on a module that
imports a package of a layer above its own (`LAYERS`), on an underscore name imported from another
package, on an exception class outside the `OpenProgramError` family, and on any import of the
notebook layer, IPython or ipywidgets from the core. The one sanctioned exception is IPython's
extension hook in `openprogram/__init__.py` (`%load_ext openprogram` must find it there, and it
loads the notebook layer only when IPython calls it).
"""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import openprogram
import openprogram.widgets

ROOT = Path(openprogram.__file__).resolve().parent
WIDGETS = Path(openprogram.widgets.__file__).resolve().parent
FORBIDDEN = ("IPython", "ipywidgets", "openprogram.widgets")
HOOKS = {("openprogram", "load_ipython_extension"), ("openprogram", "unload_ipython_extension")}

# The packages in the order a decision flows, bottom to top: a module may import its own
# package and those listed before it, never one listed after (docs/architecture.md has a row for
# each). "openprogram" stands for the modules directly in openprogram/ (the public face, otel,
# testgen) and agentic_programming (the original project's paths); the notebook layer is last.
LAYERS = ["openprogram.base", "openprogram.trace", "openprogram.decision.schema",
          "openprogram.decision.options", "openprogram.decision", "openprogram.runtime",
          "openprogram.evaluation", "openprogram.runtimes", "openprogram.runs", "openprogram",
          "openprogram.widgets"]


def module_name(path: Path) -> str:
    if path.is_relative_to(WIDGETS):
        parts = ["openprogram", "widgets", *path.relative_to(WIDGETS).with_suffix("").parts]
    else:
        parts = ["openprogram", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def modules(widgets: bool = False) -> dict[str, Path]:
    """The core's modules by name (and the notebook layer's with `widgets`)."""
    paths = list(ROOT.rglob("*.py")) + (list(WIDGETS.rglob("*.py")) if widgets else [])
    return {module_name(p): p for p in paths}


def layer(module: str) -> int:
    """The index in LAYERS of the innermost package holding `module`."""
    found = [i for i, p in enumerate(LAYERS) if module == p or module.startswith(p + ".")]
    return max(found, key=lambda i: len(LAYERS[i]))


def package_of(module: str, path: Path | None) -> str:
    return module if path is not None and is_package(path) else module.rsplit(".", 1)[0]


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


def graph(widgets: bool = False) -> dict[str, set[str]]:
    mods = modules(widgets)
    known = set(mods)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for target, func, _ in imports(path, known):
            # IPython's hook loads the notebook layer only when IPython calls it
            if target in known and target != m and (m, func) not in HOOKS:
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
    cycle = find_cycle(graph(widgets=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def upward_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, imported module) for every import of a package of a higher layer."""
    return sorted((m, t) for m, targets in edges.items() for t in targets
                  if layer(t) > layer(m))


def test_no_module_imports_a_layer_above_its_own():
    up = upward_imports(graph(widgets=True))
    assert not up, "imports of a higher layer:\n" + "\n".join(f"{m} -> {t}" for m, t in up)


def private_imports() -> list[str]:
    """Every `from X import _name` where X is in another package than the importing module:
    what one package uses of another must be public there."""
    mods = modules(widgets=True)
    bad = []
    for m, path in mods.items():
        own = package_of(m, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = own.split(".")
                target = ".".join(base[:len(base) - node.level + 1] +
                                  ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("openprogram"):
                continue
            theirs = package_of(target, mods.get(target))
            for a in node.names:
                private = a.name.startswith("_") and not a.name.startswith("__")
                if private and theirs != own and f"{target}.{a.name}" not in mods:
                    bad.append(f"{path}:{node.lineno} {m} imports {a.name} from {target}")
    return bad


def test_no_underscore_name_crosses_a_package():
    bad = private_imports()
    assert not bad, "private names used across packages:\n" + "\n".join(bad)


def test_every_exception_is_in_the_family():
    """Each exception class the core defines derives from OpenProgramError (and keeps the
    builtin base users catch), so `except OpenProgramError` catches all of them; a private one
    used for control flow inside a module (`_Cancelled`, a BaseException that must pass through
    `except Exception`) is the only exception to the rule."""
    from openprogram import OpenProgramError
    outside = []
    for m, path in modules().items():
        if "class " not in path.read_text(encoding="utf-8"):
            continue
        mod = importlib.import_module(m)
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and \
                    cls.__module__ == m and not name.startswith("_") and \
                    not issubclass(cls, (OpenProgramError, Warning)):
                outside.append(f"{m}.{name}")
    assert not outside, "exceptions outside the OpenProgramError family: " + ", ".join(outside)


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
    fake = ROOT / "decision" / "loop.py"
    src = fake.read_text(encoding="utf-8") + (
        "\n\ndef _late():\n    from ..runtime.runtime import Runtime\n"
        "    from openprogram.widgets.panel import DecisionPanel\n")
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None:
                        src if self == fake else Path.open(self, encoding=encoding).read())
    found = imports(fake, set(modules()))
    assert ("openprogram.runtime.runtime", "_late", src.count("\n") - 1) in found
    assert any(t == "openprogram.widgets.panel" and f == "_late" for t, f, _ in found)
    cycle = find_cycle(graph())
    assert cycle is not None and "openprogram.decision.loop" in cycle
