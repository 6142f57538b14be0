"""Fixtures for the decision-core tests. Everything runs on ScriptedRuntime: no network, no key."""
import pytest

from openprogram import observe


@pytest.fixture
def events():
    """The TraceEvents of every decision made inside the test, in order."""
    seen = []
    with observe(seen.append):
        yield seen
