"""Fixtures for the provider runtimes: a loopback fake server per test, and a factory that makes
the matching runtime pointed at it through `base_url` (the real SDK client, never patched)."""
import pytest

# FAKE_KEY lives in fakeserver (tests/support, on pytest's pythonpath), not here: every test
# folder has a conftest.py, so `from conftest import ...` would get whichever folder's conftest
# pytest loaded last.
from fakeserver import FAKE_KEY, FakeServer


@pytest.fixture(params=["openai", "anthropic"])
def provider(request):
    return request.param


@pytest.fixture
def server(provider):
    with FakeServer(provider) as s:
        yield s


@pytest.fixture
def make_runtime(provider, server):
    """`make_runtime(**kw)`: the provider's runtime on the fake server; short retries."""
    from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime
    cls = OpenAIRuntime if provider == "openai" else AnthropicRuntime

    def make(**kw):
        kw.setdefault("model", "test-model")
        kw.setdefault("base_url", server.base_url)
        kw.setdefault("api_key", FAKE_KEY)
        kw.setdefault("max_retries", 0)
        return cls(**kw)
    return make
