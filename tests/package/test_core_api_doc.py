"""docs/api.md lists the public surface, one line a name: the same names as the `__all__` of
openprogram, openprogram.decision, openprogram.runtimes and openprogram.widgets, and every one
of them importable."""
import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
MODULES = ["openprogram", "openprogram.decision", "openprogram.runtimes", "openprogram.widgets"]


def documented() -> dict[str, list[str]]:
    """{module: [name, ...]} from the page: the `## \\`module\\`` headings and the `- \\`name\\``
    lines under each."""
    out: dict[str, list[str]] = {}
    module = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        head = re.match(r"## `([\w.]+)`$", line)
        if head:
            module = head.group(1)
            out[module] = []
            continue
        item = re.match(r"- `(\w+)` — \S", line)
        if item and module is not None:
            out[module].append(item.group(1))
    return out


def test_the_page_has_a_section_for_each_public_module():
    assert list(documented()) == MODULES


@pytest.mark.parametrize("module", MODULES)
def test_the_page_lists_exactly_the_modules_all_once_each(module):
    names = documented()[module]
    mod = importlib.import_module(module)
    assert len(names) == len(set(names)), \
        f"listed twice: {sorted(n for n in names if names.count(n) > 1)}"
    missing = sorted(set(mod.__all__) - set(names))
    extra = sorted(set(names) - set(mod.__all__))
    assert not missing, f"in {module}.__all__ but not in docs/api.md: {missing}"
    assert not extra, f"in docs/api.md but not in {module}.__all__: {extra}"
    for name in mod.__all__:
        assert getattr(mod, name) is not None
