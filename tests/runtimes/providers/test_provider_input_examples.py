"""An option's worked examples on the wire in tools mode (issue 36): the Anthropic messages API
takes them natively as the tool's `input_examples` (the loopback server checks each against
the tool's input schema, as the API does), and every example that says which request leads to
it stays in the description, which the native field has no place for; OpenAI's chat
completions has no such field (the server refuses it), so there every example is written into
the tool's description."""
import datetime

import pytest
from fakeserver import FAKE_KEY, FakeServer, tools

import openprogram as op
from openprogram import decision


def refund(order_id: int, when: datetime.date | None = None) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


OPTIONS = {
    "refund": op.with_examples(refund, [
        ("refund order 7 please", {"order_id": 7}),
        {"order_id": 12, "when": "2026-01-02"},     # arguments only (as JSON, as the model writes)
    ]),
    "done": ("DONE", "nothing left to do"),
}


def tool_of(provider, body, name):
    (spec,) = [t for t in body["tools"]
               if (t["function"]["name"] if provider == "openai" else t["name"]) == name]
    return spec["function"] if provider == "openai" else spec


def test_examples_go_natively_to_anthropic_and_as_text_elsewhere(provider, server,
                                                                   make_runtime):
    server.push(tools(("call_1", "refund", {"order_id": 7})))
    rt = make_runtime()
    assert decision.make("Refund order 7.", OPTIONS, runtime=rt, mode="tools") == "refunded 7"
    (body,) = server.bodies
    spec = tool_of(provider, body, "refund")
    done = tool_of(provider, body, "done")
    assert "input_examples" not in done       # an option without arguments: nothing to send
    if provider == "anthropic":
        assert spec["input_examples"] == [{"order_id": 7},
                                          {"order_id": 12, "when": "2026-01-02"}]
        # the request-led example stays in the description; the arguments-only one does not
        assert '"refund order 7 please"' in spec["description"]
        assert "2026-01-02" not in spec["description"]
    else:
        assert "input_examples" not in spec
        assert '"refund order 7 please"' in spec["description"]
        assert "2026-01-02" in spec["description"]
    assert server.refused == 0


def test_the_server_refuses_an_example_the_schema_refuses_as_the_api_does():
    import anthropic
    with FakeServer("anthropic") as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)
        tool = {"name": "refund", "input_schema": {
            "type": "object", "properties": {"order_id": {"type": "integer"}},
            "required": ["order_id"]}, "input_examples": [{"order_id": "seven"}]}
        with pytest.raises(anthropic.BadRequestError, match=r"input_examples\.0"):
            client.messages.create(model="m", max_tokens=10, tools=[tool],
                                   messages=[{"role": "user", "content": "hi"}])
        assert server.refused == 1
    import openai
    with FakeServer("openai") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)
        with pytest.raises(openai.BadRequestError, match="input_examples"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "h"}],
                                           tools=[{"type": "function", "function": {
                                               "name": "f", "parameters": {"type": "object"},
                                               "input_examples": [{}]}}])
