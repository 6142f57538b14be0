"""Shared pytest setup for every engineer's tests. Kept minimal on purpose: it is loaded by every
test run, so nothing heavy (notebook layer, pandas, servers) is imported or started here; fixtures
live beside the tests that use them (e.g. tests/runtimes/conftest.py), except `events`, which
the tests of every stage of a decision use. tests/ is laid out as openprogram/ is: a test of a
module sits in the folder of its package (tests/decision/schema/ for the validator); whole-package
checks (layers, public names) are in tests/package/, helpers shared across folders in
tests/support/ (on pytest's `pythonpath`)."""

import signal
from pathlib import Path

import pytest

from openprogram import observe

_BROWSER = Path(__file__).parent / "browser"


def pytest_collection_modifyitems(config, items):
    """Browser tests run last. Playwright's sync API keeps an event loop marked as running in the
    main thread while its session-scoped browser lives, and code under test that calls
    asyncio.run() (the A7 tests of tests/decision) must not see it. Under xdist (`./dev test`) this
    holds too: the browser tests are one unit of work (tests/notebooks/xdist_groups.py), the
    last one handed out, so the worker that runs them runs nothing after them."""
    items.sort(key=lambda item: _BROWSER in Path(str(item.fspath)).parents)


@pytest.fixture
def events():
    """The TraceEvents of every decision made inside the test, in order."""
    seen = []
    with observe(seen.append):
        yield seen


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test's duration. A test that interrupts itself
    (`_thread.interrupt_main()`, `os.kill(pid, SIGINT)`) needs it: a process started with SIGINT
    ignored — what a non-interactive shell does for `cmd &`, nohup, many job runners — never gets
    Python's handler, and then the simulated Ctrl-C does nothing and the test fails. Restored after,
    so the rest of the session keeps the state it was started in."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        # None: the previous handler was not installed from Python and cannot be put back
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
