"""A harness for tests whose failure would be a deadlock: the scenario runs in a daemon thread,
and one still running after a generous bound fails the test instead of hanging the suite. The
bound is never a measure of speed: the scenarios take milliseconds to seconds."""
from __future__ import annotations

import threading


def finishes(scenario, bound_s: float = 60):
    """Run `scenario()` in a daemon thread; its value, or its exception re-raised. A scenario
    still running after `bound_s` is a deadlock, and fails the test."""
    box = {}

    def run():
        try:
            box["value"] = scenario()
        except BaseException as exc:
            box["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(bound_s)
    assert not t.is_alive(), "deadlock: the scenario never came back"
    if "error" in box:
        raise box["error"]
    return box["value"]
