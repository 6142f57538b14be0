"""Names a module exports but imports only when first asked for (PEP 562's module `__getattr__`).

`import openprogram` should cost what a decision needs, not what evaluation, re-checking
recordings or a provider's SDK need: those modules load the first time one of their names is
used (`decision.evaluate`, `openprogram.compare`, `openprogram.runtimes.OpenAIRuntime`), and the
name is then kept in the module like any other, so later uses cost nothing.
"""
from __future__ import annotations

import importlib
import sys


def lazy_names(module_name: str, where: dict[str, str]):
    """`__getattr__` and `__dir__` for the module `module_name`: each name in `where` is read
    from the module `where[name]` (relative to `module_name`'s package) on first use."""
    def __getattr__(name: str):
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module = sys.modules[module_name]
        value = getattr(importlib.import_module(source, module.__package__), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        # A module with __all__ shows its public names only, not what it imported to build them
        module = sys.modules[module_name]
        public = getattr(module, "__all__", None)
        return sorted(set(public) if public is not None else set(vars(module)) | set(where))
    return __getattr__, __dir__
