"""The API key reaches the server and nothing else: not a trace, its json, its DataFrames, the
DAG, a cassette, a repr, an error message or a printed traceback — even when the server echoes
the key back in an error body or a reply."""
import json
import pickle
import traceback

import pytest

from fakeserver import FAKE_KEY
from fakeserver import status, text, tools

from openprogram import DecisionError, agent, decision
from openprogram.runtimes import ModelCallError, RecordingRuntime
from openprogram.runtimes._provider import redact

SECRET_PART = FAKE_KEY[len("sk-op-test-"):]


def assert_clean(blob: str, where: str) -> None:
    assert FAKE_KEY not in blob, f"the key is in {where}"
    pieces = [SECRET_PART[i:i + 8] for i in range(len(SECRET_PART) - 7)]
    leaked = [p for p in pieces if p in blob]
    assert not leaked, f"pieces of the key {leaked} are in {where}"


def test_key_never_leaves_the_wire(provider, server, make_runtime, tmp_path):
    path = tmp_path / "c.json"
    inner = make_runtime(max_retries=1)
    rt = RecordingRuntime(inner, path)

    def lookup(q: str) -> str:
        return "found " + q

    server.push(
        # a decision whose reply quotes the key (a server or model echoing what it saw)
        text(f'Your key is {FAKE_KEY}. ```json\n{{"call": "a"}}\n```'),
        # a tool round
        tools(("id1", "lookup", {"q": "x"})), text('```json\n{"call": "b"}\n```'),
        # a 401 whose body echoes the key and the header, like some gateways do
        status(401, f"Incorrect API key provided: {FAKE_KEY}. Sent header "
                    f"'Authorization: Bearer {FAKE_KEY}' and x-api-key: {FAKE_KEY}",
               err_type="authentication_error"),
        # a 500 that names part of the key, twice (first try and the retry)
        *[status(500, f"upstream failure for key ...{FAKE_KEY[-12:]}",
                 headers={"retry-after-ms": "5"}) for _ in range(2)],
        # a stream that drops
        text("partial words here", drop_after=2),
    )
    traces, errors = [], []
    assert decision.make("Pick.", ["a", "b"], runtime=rt) == "a"
    traces.append(decision.last_trace())
    assert agent("Look x up, then pick.", tools=[lookup], choices=["a", "b"], runtime=rt) == "b"
    traces.append(decision.last_trace())
    for _ in range(3):
        with pytest.raises(DecisionError) as info:
            decision.make("Pick.", ["a", "b"], runtime=rt)
        errors.append(info.value)
        traces.append(info.value.trace)
    assert len(server.requests) == 7
    # the key did go to the server
    assert any(FAKE_KEY in v for v in server.requests[0].headers.values())
    assert "rejected the API key (401" in str(errors[0])

    blobs = {"cassette": path.read_text(), "repr(runtime)": repr(inner),
             "repr(recording)": repr(rt), "vars(runtime)": repr(vars(inner)),
             "dag": json.dumps([n.to_dict() for n in rt.dag.nodes], default=repr),
             "dag frame": rt.dag.to_frame().to_json(default_handler=repr)}
    for i, t in enumerate(traces):
        blobs[f"trace {i} json"] = json.dumps(t.to_dict(), default=repr)
        blobs[f"trace {i} text"] = t.format_text() + repr(t)
        for table in ("attempts", "options", "tools", "summary"):
            blobs[f"trace {i} {table}"] = t.to_frame(table).to_string() + \
                t.to_frame(table).to_json(default_handler=repr)
    for i, e in enumerate(errors):
        blobs[f"error {i}"] = str(e) + repr(e) + str(e.__cause__) + repr(e.__cause__)
        blobs[f"traceback {i}"] = "".join(traceback.format_exception(e))
    for where, blob in blobs.items():
        assert_clean(blob, where)
    # what was redacted is marked, so a reader knows something was there
    assert "[redacted]" in blobs["trace 0 json"] and "[redacted]" in blobs["error 0"]


def test_runtime_with_a_key_does_not_pickle(provider, make_runtime):
    rt = make_runtime()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(rt)


def test_stored_key_is_masked(provider, make_runtime):
    rt = make_runtime()
    assert repr(rt._key) == "<secret>" and FAKE_KEY not in str(rt.__dict__)


def test_base_url_credentials_are_not_shown(provider, server, make_runtime):
    url = server.base_url.replace("http://", "http://user:hunter2hunter2@") + "?token=abc12345"
    rt = make_runtime(base_url=url)
    assert "hunter2" not in repr(rt) and "abc12345" not in repr(rt)
    server.push(status(404, "no such model"))
    with pytest.raises(ModelCallError) as info:
        rt.complete([{"role": "user", "content": "q"}])
    assert "hunter2" not in str(info.value) and "abc12345" not in str(info.value)


@pytest.mark.parametrize("leak, expect", [
    (f"key={FAKE_KEY}", "key=[redacted]"),
    (f"Authorization: Bearer {FAKE_KEY}", "Authorization: Bearer [redacted]"),
    ("x-api-key: sk-ant-api03-abcdef123456", "x-api-key: [redacted]"),
    ("using sk-proj-AbCdEf0123456789xyz now", "using sk-[redacted] now"),
    ('{"api_key": "tok_9a8b7c6d5e4f"}', '{"api_key": "[redacted]"}'),
    (f"the tail {FAKE_KEY[-10:]} of it", "the tail [redacted] of it"),
])
def test_redact_patterns(leak, expect):
    assert redact(leak, (FAKE_KEY,)) == expect


def test_redact_leaves_ordinary_text_alone():
    s = "pass api_key= or set OPENAI_API_KEY; see https://example.com/v1 for the API key docs"
    assert redact(s, (FAKE_KEY,)) == s


def test_key_echoed_in_tool_call_arguments_is_redacted(provider, server, make_runtime, tmp_path):
    path = tmp_path / "c.json"
    rt = RecordingRuntime(make_runtime(), path)
    seen = []

    def lookup(q: str, opts: dict) -> str:
        seen.append((q, opts))
        return "ok"

    server.push(tools(("id1", "lookup", {"q": f"key {FAKE_KEY}", "opts": {"k": [FAKE_KEY]}})),
                text('```json\n{"call": "a"}\n```'))
    assert agent("Look up, then pick.", tools=[lookup], choices=["a"], runtime=rt) == "a"
    trace = decision.last_trace()
    assert trace.tool_rounds[0].args["q"] == "key [redacted]"
    for where, blob in {"tool arguments": repr(seen), "cassette": path.read_text(),
                        "trace": json.dumps(trace.to_dict(), default=repr),
                        "tools table": trace.to_frame("tools").to_string()}.items():
        assert_clean(blob, where)
