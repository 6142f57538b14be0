"""Which tests must share one pytest-xdist worker, for `./dev test`'s two workers.

Loaded for every run (pyproject's addopts, `-p xdist_groups`; found through `pythonpath`, like
nbval_displays), since a run of notebooks alone loads no tests/conftest.py. Under xdist with
`--dist loadscope`, the tests that share what one process holds go to one worker, one after
another: a notebook's cells (they run in order, on one kernel), the JupyterLab and chromium of
tests/browser, the llama-cpp-python servers of tests/servers, the model of tests/runtimes/llamacpp,
the local Ray instance of tests/ray.
Every other test is a unit of its own, handed to whichever worker is free, as with `--dist load`.

This is a scheduler of our own rather than `--dist loadgroup` with `xdist_group` marks, because
xdist 3.8 carries a mark's group in the node id, which pytest 9.2 no longer lets it change: the
marks are silently ignored (pytest-dev/pytest-xdist#1386)."""
from __future__ import annotations

import pytest

#: Folders whose tests share one worker, by the name of what they share.
SHARED = {"tests/browser/": "browser", "tests/servers/": "llama-server",
          "tests/runtimes/llamacpp/": "local-model", "tests/ray/": "ray"}


def group_of(nodeid: str) -> str:
    """The unit of work `nodeid` belongs to: its shared group, else itself."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    return next((name for prefix, name in SHARED.items() if path.startswith(prefix)), nodeid)


@pytest.hookimpl(optionalhook=True)   # a hook of xdist's: a run without xdist never calls it
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)
    return SharedScopes(config, log)
