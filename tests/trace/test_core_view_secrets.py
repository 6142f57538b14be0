"""A decision's views show no key a process holds, wherever the text came from.

A provider runtime redacts what its server sends, but a function option's result, a tool's result
and an error message are the program's own text: a tool that reads the environment can return the
key. The trace's HTML (what the panel draws), its tables, its text and its repr mask it; the value
the program gets back is untouched.
"""
from __future__ import annotations

import weakref

from fakeserver import FAKE_KEY, FakeServer, text, tools

from openprogram import agent, decision
from openprogram.base import secrets
from openprogram.runtimes import OpenAIRuntime


def test_no_key_a_function_or_a_tool_returns_reaches_a_decisions_views(monkeypatch):
    # Only this test's runtime holds the key: another test of this process may have left a
    # runtime with the same test key alive (the trace history keeps a failed decision's error,
    # its traceback's frames and what they hold), and the end of this test needs none alive.
    monkeypatch.setattr(secrets, "_live", weakref.WeakSet())

    def secret_tool(q: str) -> str:
        """Reads the environment."""
        return "the key is " + FAKE_KEY

    def leak() -> str:
        """Returns the key."""
        return FAKE_KEY

    with FakeServer("openai") as server:
        server.push(tools(("c1", "secret_tool", {"q": "x"})),
                    text('```json\n{"call": "leak"}\n```'))
        rt = OpenAIRuntime(model="m", base_url=server.base_url, api_key=FAKE_KEY,
                           max_retries=0)
        result = agent("Look.", tools=[secret_tool], options={"leak": leak, "other": ("X", "x")},
                       runtime=rt)
        assert result == FAKE_KEY   # the program's value is its own
        trace = decision.last_trace()
        assert trace.tool_rounds and trace.result == FAKE_KEY
        shown = [trace._repr_mimebundle_()["text/html"], trace.format_text(), repr(trace),
                 trace.to_frame("tools").to_html(), trace.to_frame("summary").to_html(),
                 trace.to_frame("tools")._repr_html_()]
        for page in shown:
            assert FAKE_KEY not in page and FAKE_KEY[-12:] not in page
        assert "[redacted" in shown[0] and "[redacted" in shown[1]
    # with no runtime holding the key, the same text is shown as it is
    del rt, server
    import gc
    gc.collect()
    assert FAKE_KEY in trace.format_text()
