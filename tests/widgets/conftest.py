"""Fixtures for the notebook layer's kernel-side tests: a fresh IPython shell with the extension
loaded, and helpers that walk a widget tree for the HTML it shows."""
import pytest


@pytest.fixture
def shell():
    """A fresh InteractiveShell (no kernel: the magics print the trace as text) with
    `%load_ext openprogram` done. History goes to memory, not to the user's profile."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    InteractiveShell.clear_instance()
    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=cfg)
    ok = sh.run_cell("%load_ext openprogram")
    assert ok.success, ok.error_in_exec
    sh.run_cell("from openprogram.runtimes import ScriptedRuntime, ToolCall\n"
                "from openprogram import decision, Runtime")
    yield sh
    InteractiveShell.clear_instance()


@pytest.fixture
def live_shell(shell, monkeypatch):
    """The shell as if it ran in a kernel: the magics display the panel live. The panels they
    display are collected in `shell.panels`, the display handles (with the bundles each was
    updated to) in `shell.handles`."""
    from openprogram.widgets import panel
    shell.panels = []
    shell.handles = []
    monkeypatch.setattr(shell, "kernel", object(), raising=False)

    class Handle:
        def __init__(self):
            self.updates = []

        def update(self, obj):
            self.updates.append((obj, obj._repr_mimebundle_()))

    def display(obj, display_id=None):
        shell.panels.append(obj)
        handle = Handle()
        shell.handles.append(handle)
        return handle
    monkeypatch.setattr(panel, "display", display)
    return shell
