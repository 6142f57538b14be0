"""The loopback OpenAI server answers `n=` as OpenAI does (issue 35's samples in one request):
a choice per queued reply, each with its index, streamed or not, read back by the real
OpenAI SDK; a server short of replies answers fewer choices, as Ollama does."""
from __future__ import annotations

import openai
import pytest
from fakeserver import FAKE_KEY, FakeServer, status, text


def _client(server):
    return openai.OpenAI(base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)


def _ask(client, n, stream):
    kw = {"model": "m", "messages": [{"role": "user", "content": "pick"}], "n": n}
    if not stream:
        r = client.chat.completions.create(**kw)
        return {c.index: c.message.content for c in r.choices}, r.usage.completion_tokens
    got: dict[int, str] = {}
    usage = None
    for ev in client.chat.completions.create(stream=True,
                                             stream_options={"include_usage": True}, **kw):
        for c in ev.choices:
            got[c.index] = got.get(c.index, "") + (c.delta.content or "")
        usage = ev.usage or usage
    return got, usage.completion_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_n_choices_come_back_each_with_its_index(stream):
    with FakeServer("openai") as server:
        server.push(text('{"call": "a"}', usage=(11, 4)), text('{"call": "b"}', usage=(11, 5)),
                    text('{"call": "a"}', usage=(11, 6)), text("left for the next request"))
        got, completion = _ask(_client(server), 3, stream)
        assert got == {0: '{"call": "a"}', 1: '{"call": "b"}', 2: '{"call": "a"}'}
        assert completion == 4 + 5 + 6
        assert len(server.requests) == 1 and server.requests[0].body["n"] == 3
        assert len(server.replies) == 1  # the fourth reply is still queued


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_short_of_replies_answers_fewer_choices(stream):
    with FakeServer("openai") as server:
        server.push(text("one"), text("two"), status(500, "the next request's"))
        got, _ = _ask(_client(server), 4, stream)
        assert got == {0: "one", 1: "two"}
        assert len(server.replies) == 1
