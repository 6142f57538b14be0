"""The API key reaches the server and nothing else: not a trace, its json, its DataFrames, the
DAG, a cassette, a repr, an error message or a printed traceback — even when the server echoes
the key back in an error body or a reply."""
import json
import pickle
import traceback

import pytest
from fakeserver import FAKE_KEY, status, text, tools

import openprogram
from openprogram import DecisionError, agent, decision
from openprogram.runtimes import ModelCallError, RecordingRuntime
from openprogram.runtimes.providers.key_redaction import redact

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
    assert agent("Look x up, then pick.", tools=[lookup], options=["a", "b"], runtime=rt) == "b"
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
    assert agent("Look up, then pick.", tools=[lookup], options=["a"], runtime=rt) == "a"
    trace = decision.last_trace()
    assert trace.tool_rounds[0].args["q"] == "key [redacted]"
    for where, blob in {"tool arguments": repr(seen), "cassette": path.read_text(),
                        "trace": json.dumps(trace.to_dict(), default=repr),
                        "tools table": trace.to_frame("tools").to_string()}.items():
        assert_clean(blob, where)


def assert_no_fragment(blob: str, where: str, n: int = 7) -> None:
    """Not even a stretch of `n` characters of the key (a cut that keeps 7 of them is a leak
    that the 8-character check above cannot see)."""
    leaked = {FAKE_KEY[i:i + n] for i in range(len(FAKE_KEY) - n + 1)} & \
        {blob[i:i + n] for i in range(len(blob) - n + 1)}
    assert not leaked, f"pieces of the key {sorted(leaked)} are in {where}"


@pytest.mark.parametrize("chunk, stream", [(3, True), (16, True), (40, False)])
def test_streamed_chunks_are_redacted_before_observers_see_them(provider, server, make_runtime,
                                                               chunk, stream):
    """Every piece of text an observer (the live panel) is handed is already redacted, even
    when the key is cut across chunks: with 16-character chunks the first holds `sk-op-t`,
    too short to be recognised alone; with 3-character chunks no chunk holds 8."""
    rt = make_runtime(stream=stream)
    reply = f'The key: {FAKE_KEY} end. {{"call": "a"}}'
    server.push(text(reply, chunk=chunk))
    seen = []

    def watch(event):
        if event.kind == "reply_chunk":
            seen.append(event.data["text"])
    with openprogram.observe(watch):
        assert decision.make("Pick.", ["a", "b"], runtime=rt) == "a"
    final = decision.last_trace().attempts[0].reply
    assert final == 'The key: [redacted] end. {"call": "a"}'
    # the chunks (each event carries only its new text) add up to the final, redacted text;
    # every prefix of them is what a live view shows while the reply grows
    assert "".join(seen) == final
    grown = ["".join(seen[:i + 1]) for i in range(len(seen))]
    for where, blob in {"chunks": "\n".join(seen), "growing reply": "\n".join(grown)}.items():
        assert_clean(blob, where)
        assert_no_fragment(blob, where)
    if stream:  # held-back tails are short: the text still flows chunk by chunk
        assert len(seen) >= len(reply) // chunk - len(FAKE_KEY) // chunk - 2


def test_key_split_across_chunks_with_on_text(provider, server, make_runtime):
    rt = make_runtime()
    server.push(text(f"a{FAKE_KEY}b{FAKE_KEY}", chunk=5))
    pieces = []
    resp = rt.complete([{"role": "user", "content": "q"}], on_text=pieces.append)
    assert resp.text == "a[redacted]b[redacted]" == "".join(pieces)


def test_key_echoed_in_a_tool_calls_name_id_and_model_is_redacted(provider, server,
                                                                  make_runtime, tmp_path):
    path = tmp_path / "c.json"
    rt = RecordingRuntime(make_runtime(), path)

    def lookup(q: str) -> str:
        return "found " + q

    server.push(tools((f"call_{FAKE_KEY}", f"lookup{FAKE_KEY}", {"q": "x"}),
                      model=f"model-{FAKE_KEY}"),
                text('```json\n{"call": "a"}\n```'))
    assert agent("Look x up, then pick.", tools=[lookup], options=["a"], runtime=rt) == "a"
    trace = decision.last_trace()
    (round_,) = trace.tool_rounds
    assert round_.name == "lookup[redacted]"
    # the unknown tool's answer, sent back to the server, names the redacted call too
    second = json.dumps(server.requests[1].body)
    blobs = {"cassette": path.read_text(), "answer sent back": second,
             "trace": json.dumps(trace.to_dict(), default=repr),
             "trace text": trace.format_text() + repr(trace),
             "tools table": trace.to_frame("tools").to_string(),
             "dag": json.dumps([n.to_dict() for n in rt.dag.nodes], default=repr)}
    for where, blob in blobs.items():
        assert_clean(blob, where)
    assert "call_[redacted]" in blobs["cassette"] and "model-[redacted]" in blobs["cassette"]


def test_key_in_a_long_error_body_is_redacted_before_it_is_shortened(provider, server,
                                                                     make_runtime):
    """Error details are cut to 300 characters; cutting first kept `sk-op-t`, 7 characters of
    the key, which no rule recognises on their own."""
    rt = make_runtime()
    long_body = "x" * 293 + FAKE_KEY + " and more"
    server.push(status(400, long_body, headers={"x-echo": FAKE_KEY}),
                status(500, long_body, headers={"x-echo": FAKE_KEY}),
                text("partial reply", chunk=4, error_after=2))
    errors = []
    for _ in range(2):
        with pytest.raises(ModelCallError) as info:
            rt.complete([{"role": "user", "content": "q"}])
        errors.append(info.value)
    assert "rejected the request (400: xxx" in str(errors[0])
    assert "server error (500: xxx" in str(errors[1])
    for i, e in enumerate(errors):
        blob = str(e) + repr(e) + e.partial + "".join(traceback.format_exception(e))
        assert_clean(blob, f"error {i}")
        assert_no_fragment(blob, f"error {i}")


def test_key_in_the_base_url_path_is_not_shown(provider, server, make_runtime):
    """Some gateways take the key in the URL path; safe_url drops a query and a password, but
    a path is kept, so the runtime's repr and its errors redact it."""
    rt = make_runtime(base_url=f"{server.base_url}/{FAKE_KEY}")
    server.push(status(404, "no such model"))
    with pytest.raises(ModelCallError) as info:
        rt.complete([{"role": "user", "content": "q"}])
    assert server.requests[0].path.startswith(f"/{FAKE_KEY}/") or \
        f"/{FAKE_KEY}/" in server.requests[0].path  # the key did reach the server
    for where, blob in {"repr": repr(rt), "vars": repr(vars(rt)),
                        "error": str(info.value)}.items():
        assert_clean(blob, where)
    assert "[redacted]" in repr(rt)


STREAMED = [f"The key: {FAKE_KEY} end.", f"a{FAKE_KEY}b{FAKE_KEY}", FAKE_KEY * 3,
            f"{FAKE_KEY[:12]} and {FAKE_KEY[-10:]} and {FAKE_KEY[5:20]}{FAKE_KEY[3:15]}",
            "Authorization: Bearer abc123456789 ok; is bearer bearer model",
            '{"api_key": "tok_9a8b7c6d5e4f"} and sk-proj-AbCdEf0123456789xyz now',
            f"x{FAKE_KEY[:7]}", "plain words: sk, be, api, x-api, author"]


@pytest.mark.parametrize("whole", STREAMED)
def test_stream_redactor_adds_up_to_redact_of_the_whole_text(whole):
    """However the text is cut into pieces, what is passed on adds up to `redact` of the whole,
    and no prefix of it ever holds more of the key than the whole redacted text does."""
    import random

    from openprogram.runtimes.providers.key_redaction import StreamRedactor
    want = redact(whole, (FAKE_KEY,))
    rng = random.Random(7)
    splits = [[i] for i in range(1, len(whole))]  # every two-piece cut, then random ones
    splits += [sorted(rng.sample(range(1, len(whole)), rng.randint(2, min(9, len(whole) - 1))))
               for _ in range(200)]
    for cuts in splits:
        pieces = [whole[i:j] for i, j in zip([0, *cuts], [*cuts, len(whole)])]
        out = []
        r = StreamRedactor((FAKE_KEY,), out.append)
        for piece in pieces:
            r.feed(piece)
            assert want.startswith("".join(out)), pieces
        r.close()
        assert "".join(out) == want, pieces


def test_stream_redactor_keeps_the_text_flowing():
    """Text without a key is held back by at most a key's length, even when its words begin
    like a key, an auth header or a stretch of the key."""
    import random

    from openprogram.runtimes.providers.key_redaction import StreamRedactor
    rng = random.Random(3)
    words = ["the", "model", "sk", "s", "api", "bear", "x-api", "author", "op-test", "Q7x",
             '{"call":', '"a"}', "tY6", "key:"]
    whole = " ".join(rng.choice(words) for _ in range(3000))
    out, fed = [], 0
    r = StreamRedactor((FAKE_KEY,), out.append)
    for i in range(0, len(whole), 4):
        r.feed(whole[i:i + 4])
        fed = i + len(whole[i:i + 4])
        assert fed - len("".join(out)) <= len(FAKE_KEY)
    r.close()
    assert "".join(out) == whole
    assert len(out) >= 0.75 * (len(whole) / 4)


# -- spellings that decode to the key, and streams redacted as one text (issue 29) -------------

#: A key with a slash and a character outside the BMP: JSON may write them `\/` and as an
#: escaped surrogate pair.
ODD_KEY = "tok/\U0001F511-Zq8Lm3Np7Xw2"


def _esc(s: str) -> str:
    """Every character of `s` as a `\\uXXXX` escape (a surrogate pair for the astral one)."""
    units = s.encode("utf-16-le")
    return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'little'):04x}"
                   for i in range(0, len(units), 2))


@pytest.mark.parametrize("spelled, key", [
    ("".join(f"\\u{ord(c):04x}" for c in FAKE_KEY), FAKE_KEY),                 # every character
    ("".join(f"\\u{ord(c):04X}" if i % 2 else c for i, c in enumerate(FAKE_KEY)), FAKE_KEY),
    (FAKE_KEY[:9] + "".join(f"\\u{ord(c):04x}" for c in FAKE_KEY[9:20]), FAKE_KEY),
    (json.dumps(ODD_KEY, ensure_ascii=True).strip('"').replace("/", "\\/"), ODD_KEY),
    (_esc(ODD_KEY), ODD_KEY),
    (ODD_KEY.replace("/", "\\/").encode("utf-16", "surrogatepass").decode("utf-16"), ODD_KEY),
    # the surrogate pair held as two code points (how a lenient decoder can leave it)
    ("tok/" + "\ud83d\udd11" + "-Zq8Lm3Np7Xw2", ODD_KEY),
])
def test_spellings_that_decode_to_the_key_are_redacted(spelled, key):
    wrapped = f'{{"call": "a", "args": {{"q": "x {spelled} y", "{spelled}": 1}}}}'
    out = redact(wrapped, (key,))
    assert out == '{"call": "a", "args": {"q": "x [redacted] y", "[redacted]": 1}}'
    assert json.loads(out)  # what is left is still the JSON it was


def test_an_escaped_backslash_is_not_an_escape():
    """`\\\\u0073` is a backslash then the letters `u0073`: not an `s`; the text is left as it
    is unless its letters themselves are 8 characters of the key."""
    text = "".join(f"\\\\u{ord(c):04x}" for c in FAKE_KEY)
    assert redact(text, (FAKE_KEY,)) == text


STREAMED_ESCAPED = [
    '{"q": "' + "".join(f"\\u{ord(c):04x}" for c in FAKE_KEY) + '"} then ' + FAKE_KEY,
    "a" + "".join(f"\\u{ord(c):04X}" if i % 3 else c for i, c in enumerate(FAKE_KEY)) + "\\",
    "\\\\u0073" + "".join(f"\\\\u{ord(c):04x}" for c in FAKE_KEY[:5]) + "\\u" + FAKE_KEY,
]


@pytest.mark.parametrize("whole, key", [*((w, FAKE_KEY) for w in STREAMED_ESCAPED),
                                        (f'{{"k": "{_esc(ODD_KEY)}"}} and {ODD_KEY}', ODD_KEY),
                                        ("x\ud83d" + _esc(ODD_KEY)[6:] + "\udd11y", ODD_KEY)])
def test_stream_redactor_finds_escaped_keys_however_the_text_is_cut(whole, key):
    """An escape cut anywhere (after its backslash, inside its hex digits, between the halves of
    `\\\\`) is held back until it is complete; what is passed on adds up to `redact` of the
    whole text, and no prefix holds more of the key, as written or decoded."""
    import random

    from openprogram.runtimes.providers.key_redaction import StreamRedactor
    want = redact(whole, (key,))
    rng = random.Random(11)
    splits = [[i] for i in range(1, len(whole))]
    splits += [sorted(rng.sample(range(1, len(whole)), rng.randint(2, 40))) for _ in range(150)]
    for cuts in splits:
        pieces = [whole[i:j] for i, j in zip([0, *cuts], [*cuts, len(whole)])]
        out = []
        r = StreamRedactor((key,), out.append)
        for piece in pieces:
            r.feed(piece)
            assert want.startswith("".join(out)), pieces
        r.close()
        assert "".join(out) == want, pieces


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11])
@pytest.mark.parametrize("whole", [STREAMED[0], STREAMED[2], STREAMED[3], STREAMED_ESCAPED[0],
                                   STREAMED_ESCAPED[1]])
def test_pieces_of_one_stream_are_redacted_as_the_joined_text(whole, size):
    """`redact_pieces` keeps the pieces (one per delta) and masks over their joint: joined, they
    read as `redact` of the whole text, and no piece (nor any run of pieces) holds 8 characters
    of the key."""
    from openprogram.runtimes.providers.key_redaction import redact_pieces
    pieces = [whole[i:i + size] for i in range(0, len(whole), size)]
    out = redact_pieces(pieces, (FAKE_KEY,))
    assert len(out) == len(pieces)
    assert "".join(out) == redact(whole, (FAKE_KEY,))
    assert_clean("".join(out), "the joined pieces")
