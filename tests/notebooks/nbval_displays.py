"""A pytest plugin for nbval: a display refreshed while its cell runs is compared as it ends.

The decision magics show their panel at once (its output still says "running") and refresh that
output when the decision ends (`update_display_data`, by display id). A front end applies the
refresh, and so does nbclient, which stores the refreshed output in the committed notebooks;
nbval 0.11 drops it ("unhandled iopub msg: update_display_data") and would compare the first,
"running" output with the stored final one. Rather than sanitize those outputs away (they are the
decisions a notebook shows), this applies each refresh as nbclient does: once a cell displays an
output with a display id, its messages are held until the kernel is idle again, every refresh is
applied to the held outputs of its display id, and the messages are then handed to nbval in the
order they came. nbval compares the final panels, line for line, under notebooks/sanitize.cfg.

Loaded with `-p nbval_displays` (pyproject's addopts; `pythonpath` puts this folder on sys.path
before `-p` plugins are imported).
"""
from __future__ import annotations

from collections import deque
from queue import Empty


class _AppliedRefreshes:
    """Wraps an IPyNbFile's get_kernel_message (nbval reads every iopub message through it)."""

    def __init__(self, get_message):
        self.get_message = get_message
        self.ready: deque = deque()   # messages handed to nbval next, in order
        self.held: list = []          # messages of a cell that displayed an output with an id

    def __call__(self, timeout=None, stream="iopub"):
        if stream != "iopub":
            return self.get_message(timeout=timeout, stream=stream)
        while not self.ready:
            try:
                msg = self.get_message(timeout=timeout, stream=stream)
            except Empty:
                if not self.held:
                    raise
                self._release()   # nbval sees what came, then its own timeout
                break
            kind, content = msg["msg_type"], msg["content"]
            display_id = (content.get("transient") or {}).get("display_id")
            if kind == "update_display_data" and self._refresh(display_id, content):
                continue
            if kind == "display_data" and display_id or self.held:
                self.held.append(msg)
                if kind == "status" and content.get("execution_state") == "idle":
                    self._release()
                continue
            return msg
        return self.ready.popleft()

    def _refresh(self, display_id, content) -> bool:
        """Apply a refresh to the held outputs of its display id; False when none is held (an
        output of an earlier cell: nbval reports the refresh as unhandled)."""
        outputs = [m["content"] for m in self.held if m["msg_type"] == "display_data"
                   and (m["content"].get("transient") or {}).get("display_id") == display_id]
        for out in outputs:
            out["data"], out["metadata"] = content["data"], content.get("metadata", {})
        return bool(outputs)

    def _release(self) -> None:
        self.ready.extend(self.held)
        self.held = []


def pytest_collectstart(collector):
    try:
        from nbval.plugin import IPyNbFile
    except ImportError:
        return
    if isinstance(collector, IPyNbFile):
        collector.get_kernel_message = _AppliedRefreshes(collector.get_kernel_message)
