"""Shared pytest setup for every engineer's tests. Kept minimal on purpose: it is loaded by every
test run, so nothing heavy (notebook layer, pandas, servers) is imported or started here; fixtures
live beside the tests that use them (e.g. tests/core/conftest.py)."""

from pathlib import Path

_BROWSER = Path(__file__).parent / "browser"


def pytest_collection_modifyitems(config, items):
    """Browser tests run last. Playwright's sync API keeps an event loop marked as running in the
    main thread while its session-scoped browser lives, and code under test that calls
    asyncio.run() (the A7 tests of tests/core) must not see it."""
    items.sort(key=lambda item: _BROWSER in Path(str(item.fspath)).parents)
