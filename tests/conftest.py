"""Shared pytest setup for every engineer's tests. Kept minimal on purpose: it is loaded by every
test run, so nothing heavy (notebook layer, pandas, servers) is imported or started here; fixtures
live beside the tests that use them (e.g. tests/core/conftest.py)."""
