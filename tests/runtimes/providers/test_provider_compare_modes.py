"""compare() of the three ways of asking on a real SDK against the loopback server: each
variant's request bodies say how it asked."""
from __future__ import annotations

from fakeserver import text, tools

from openprogram import Variant, compare

OPTIONS = {"refund": ("REFUND", "give the money back"), "answer": ("ANSWER", "reply in writing")}
ROWS = [{"m": "broken vase", "label": "refund"}, {"m": "when does it ship", "label": "answer"}]


def test_compare_modes_request_bodies(provider, server, make_runtime):
    # menu: text replies; tools: one tool call each; json_schema: the structured document
    # (Anthropic carries it as a forced tool, so it answers with a tool call there too).
    server.push(text('{"call": "refund"}'), text('{"call": "refund"}'))
    server.push(tools(("c1", "refund", {})), tools(("c2", "answer", {})))
    if provider == "openai":
        server.push(text('{"decision": {"call": "refund", "args": {}}}'),
                    text('{"decision": {"call": "answer", "args": {}}}'))
    else:
        server.push(tools(("c3", "decision", {"decision": {"call": "refund", "args": {}}})),
                    tools(("c4", "decision", {"decision": {"call": "answer", "args": {}}})))
    res = compare("Message: {m}", {"menu": Variant(mode="menu"), "tools": Variant(mode="tools"),
                                   "schema": Variant(mode="json_schema")}, ROWS,
                  options=OPTIONS, runtime=make_runtime(), expected="label", concurrency=1,
                  progress=False)
    bodies = server.bodies
    menu, tool, schema = bodies[0:2], bodies[2:4], bodies[4:6]
    assert all("tools" not in b and "Options (reply with one JSON object" in str(b)
               for b in menu)
    assert all(sorted(t.get("name") or t["function"]["name"] for t in b["tools"]) ==
               ["answer", "refund"] for b in tool)
    assert all("Options (reply with one JSON" not in str(b) for b in tool + schema)
    if provider == "openai":
        assert all(b["response_format"]["type"] == "json_schema" for b in schema)
        assert all(b["tool_choice"] == "required" for b in tool)
    else:
        assert all(b["tool_choice"]["type"] == "tool" for b in schema)
        assert all(b["tool_choice"]["type"] == "any" for b in tool)
    frame = res.to_frame()
    assert list(frame["menu"]) == ["refund", "refund"]
    assert list(frame["tools"]) == ["refund", "answer"]
    assert list(frame["schema"]) == ["refund", "answer"]
    assert res.summary.loc["schema", "accuracy"] == 1.0
