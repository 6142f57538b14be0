"""Record against the loopback server, replay offline: in a fresh process with the server
stopped the program gives the same results, traces and DAG; a changed program fails clearly."""
import json
import os
import subprocess
import sys
from pathlib import Path

import cassette_program
import pytest
from fakeserver import FAKE_KEY, text, tools

import openprogram
from openprogram import DecisionError, agent, decision
from openprogram.runtimes import (
    CassetteExhausted,
    CassetteMismatch,
    ModelCallError,
    RecordingRuntime,
    ReplayRuntime,
    ScriptedRuntime,
    cassette_decisions,
    load_cassette,
)

HERE = Path(__file__).resolve().parent


def script_replies(provider):
    tid = "call_1" if provider == "openai" else "toolu_1"
    return [
        text("Hello!", chunk=2),
        text("hmm, not sure"),                               # decision: no JSON -> re-ask
        text('```json\n{"call": "refund"}\n```', usage=(30, 8)),
        tools((tid, "lookup", {"order_id": "42"}), text="Checking."),
        text('It shipped.\n```json\n{"call": "tell"}\n```'),
        text("I was about to say", chunk=3, drop_after=2),   # a failure, recorded too
    ]


def test_recorded_cassette_replays_in_a_fresh_process(provider, server, make_runtime,
                                                      tmp_path):
    path = tmp_path / "cassettes" / "session.json"
    server.push(*script_replies(provider))
    rec = RecordingRuntime(make_runtime(), path)
    live = cassette_program.run(rec)
    assert live["results"][:3] == ["Hello!", "refund", "told"]
    assert "dropped in the middle of the reply" in live["results"][3]["error"]
    assert live["chunks"] > 6
    server.stop()  # replay needs no server (and no key)

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HERE)}
    proc = subprocess.run([sys.executable, str(HERE / "cassette_program.py"), str(path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads(proc.stdout)
    assert replayed["traces"] == live["traces"]
    assert replayed["dag"] == live["dag"]
    assert replayed["results"] == live["results"]
    assert replayed["chunks"] > 0

    # the cassette is readable JSON Lines: a header, then one line per model call, with the
    # wire-level facts
    raw = path.read_text()
    header, *lines = raw.splitlines()
    assert header.startswith('{"format": "openprogram-cassette", "version": 4, ')
    assert [json.loads(c)["call"] for c in lines] == [1, 2, 3, 4, 5, 6]
    data = load_cassette(path)
    assert [c["call"] for c in data["calls"]] == [1, 2, 3, 4, 5, 6]
    third = data["calls"][2]
    assert third["response"]["usage"] == {"input_tokens": 30, "output_tokens": 8}
    assert third["request"]["messages"][0]["content"].startswith(
        "Your previous reply could not be used")
    assert data["calls"][3]["request"]["tools"][0]["name"] == "lookup"
    assert data["calls"][3]["response"]["tool_calls"][0]["args"] == {"order_id": "42"}
    assert data["calls"][5]["error"]["partial"] == "I was "  # two 3-character deltas
    assert FAKE_KEY not in raw and FAKE_KEY[-12:] not in raw


def _record_one(tmp_path, reply='{"call": "a"}'):
    path = tmp_path / "one.json"
    rec = RecordingRuntime(ScriptedRuntime([reply]), path)
    decision.make("Pick a or b.", ["a", "b"], runtime=rec)
    return path


def test_changed_request_fails_naming_the_call_and_the_difference(tmp_path):
    path = _record_one(tmp_path)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick a or c.", ["a", "c"], runtime=ReplayRuntime(path))
    att = info.value.trace.attempts[0]
    assert att.error_kind == "not_recorded"
    msg = att.error_message
    assert "call #1 asks a request that the cassette" in msg and "did not record" in msg
    assert "The nearest recorded request is call #1 (line 2)" in msg
    assert 'recorded: ' in msg and 'asked: ' in msg
    assert "Pick a or b." in msg.split("recorded:")[1].split("asked:")[0]
    assert "Pick a or c." in msg.split("asked:")[1]
    assert "record it again with RecordingRuntime" in msg
    # a request the recording never saw is the program's change, never the network's fault
    assert "network" not in msg and "network" not in openprogram.ERROR_KINDS["not_recorded"]
    assert "changed since recording" not in msg or "did not record" in msg
    cause = info.value.__cause__
    assert isinstance(cause, CassetteMismatch) and cause.call == 1


def test_more_calls_than_recorded(tmp_path):
    path = _record_one(tmp_path)
    rt = ReplayRuntime(path)
    assert decision.make("Pick a or b.", ["a", "b"], runtime=rt) == "a"
    # the same request once more than recorded: every recording of it was replayed
    with pytest.raises(CassetteExhausted, match=r"call #2 asks a request the cassette .* "
                                                r"recorded 1 time, and every recording"):
        rt.complete(load_cassette(path)["calls"][0]["request"]["messages"])
    # a request never recorded is a mismatch naming the nearest recorded one
    with pytest.raises(CassetteMismatch, match=r"nearest recorded request is call #1") as info:
        rt.complete([{"role": "user", "content": "one more"}])
    assert not isinstance(info.value, CassetteExhausted)
    # strict=False plays replies back by position, and says when they run out
    loose = ReplayRuntime(path, strict=False)
    loose.complete([{"role": "user", "content": "anything"}])
    with pytest.raises(CassetteExhausted, match=r"holds 1 model calls and the program asked "
                                                r"for call #2"):
        loose.complete([{"role": "user", "content": "one more"}])


def test_strict_false_replays_replies_regardless(tmp_path):
    path = _record_one(tmp_path)
    assert decision.make("Something else entirely", ["a", "b"],
                         runtime=ReplayRuntime(path, strict=False)) == "a"


def test_replay_streams_through_on_text_and_keeps_usage(tmp_path):
    path = _record_one(tmp_path, reply='I choose: {"call": "b", "args": {}}')
    chunks = []
    with openprogram.observe(lambda e: e.kind == "reply_chunk" and chunks.append(e.data["text"])):
        assert decision.make("Pick a or b.", ["a", "b"],
                             runtime=ReplayRuntime(path, stream_chunk=5)) == "b"
    assert chunks[0] == "I cho" and "".join(chunks) == 'I choose: {"call": "b", "args": {}}'
    att = decision.last_trace().attempts[0]
    assert att.usage == load_cassette(path)["calls"][0]["response"]["usage"]


def test_replayed_failure_is_the_recorded_error(tmp_path):
    def boom(content):
        raise ModelCallError("the server went away", partial="half a rep", kind="model_error")

    from openprogram import Runtime
    path = tmp_path / "fail.json"
    with pytest.raises(ModelCallError):
        RecordingRuntime(Runtime(call=boom), path).complete([{"role": "user",
                                                              "content": "q"}])
    with pytest.raises(ModelCallError) as info:
        ReplayRuntime(path).complete([{"role": "user", "content": "q"}])
    assert str(info.value) == "the server went away" and info.value.partial == "half a rep"


def test_recording_wraps_only_runtimes(tmp_path):
    with pytest.raises(TypeError, match="wraps an openprogram Runtime"):
        RecordingRuntime(lambda c: "x", tmp_path / "x.json")


def test_cassette_load_errors_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="RecordingRuntime"):
        ReplayRuntime(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"calls": []}')
    with pytest.raises(ValueError, match="not an openprogram cassette"):
        ReplayRuntime(bad)
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="not a JSON cassette"):
        ReplayRuntime(bad)


def test_replay_runtime_takes_the_recorded_name_and_model(tmp_path):
    path = tmp_path / "n.json"
    rec = RecordingRuntime(ScriptedRuntime(["hi"], name="my-model", model="gpt-x"), path)
    agent("hello", runtime=rec)
    rt = ReplayRuntime(path)
    assert (rt.name, rt.model) == ("my-model", "gpt-x")
    assert repr(rt) == f"ReplayRuntime({str(path)!r}, 1 calls, 0 replayed)"


# -- nothing a reply holds, and nothing that happens while writing, poisons a recording ----------

def _tmp_files(folder):
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


@pytest.mark.parametrize("raw_utf8, stream", [(False, True), (False, False), (True, False)])
def test_a_lone_surrogate_poisons_neither_the_runtime_nor_the_recording(
        provider, server, make_runtime, tmp_path, raw_utf8, stream):
    """A reply holding U+D800 — JSON-escaped ("\\ud800"), or as the raw bytes ED A0 80, which a
    non-streamed body decodes to the same lone surrogate — is recorded escaped, not dropped;
    the re-ask that carries it back to the server is sent (with U+FFFD in its place, since a
    lone surrogate cannot be encoded), and every later call works and is recorded."""
    path = tmp_path / "c.json"
    rec = RecordingRuntime(make_runtime(stream=stream), path)
    odd = "odd \ud800 reply"
    server.push(text(odd, raw_utf8=raw_utf8), text('{"call": "a"}'), text("fine"))
    assert decision.make("Pick.", ["a", "b"], runtime=rec) == "a"
    assert [a.error_kind for a in decision.last_trace().attempts] == ["no_action", None]
    assert "odd \ufffd reply" in json.dumps(server.requests[1].body, ensure_ascii=False)
    assert agent("hi", runtime=rec) == "fine"
    data = load_cassette(path)
    assert [c["call"] for c in data["calls"]] == [1, 2, 3]
    assert data["calls"][0]["response"]["text"] == odd       # kept as it came
    assert odd in json.dumps(data["calls"][1]["request"], ensure_ascii=False)  # the re-ask
    assert "odd \\ud800 reply" in path.read_text(encoding="utf-8")  # stored escaped
    assert _tmp_files(tmp_path) == []
    # and it replays: the same requests match, the same reply comes back
    assert decision.make("Pick.", ["a", "b"], runtime=ReplayRuntime(path)) == "a"
    assert decision.last_trace().attempts[0].reply == odd


def test_an_unserialisable_value_from_a_custom_runtime_does_not_poison_the_recording(tmp_path):
    """A runtime is any object with complete(); one that names its model with an object (or
    raises an error whose partial text is not a string) used to fail the write of every later
    call and leave a temporary file behind."""
    from openprogram import Runtime
    from openprogram.runtimes import ModelResponse

    class Custom(Runtime):
        def __init__(self):
            super().__init__(model="custom")
            self.n = 0

        def complete(self, messages, *, tools=None, on_text=None, timeout=None):
            self.n += 1
            if self.n == 2:
                raise ModelCallError("flaky", partial=object(), kind="model_error")
            return ModelResponse(text=f"reply {self.n}", model=object())

    path = tmp_path / "c.json"
    rec = RecordingRuntime(Custom(), path)
    q = [{"role": "user", "content": "q"}]
    assert rec.complete(q).text == "reply 1"
    with pytest.raises(ModelCallError, match="flaky"):
        rec.complete(q)
    assert rec.complete(q).text == "reply 3"
    calls = load_cassette(path)["calls"]
    assert [c["call"] for c in calls] == [1, 2, 3]
    assert calls[0]["response"]["model"].startswith("<object object at")
    assert _tmp_files(tmp_path) == []


_INTERRUPTED = r'''
import json, os, sys
from pathlib import Path
from openprogram.runtimes import RecordingRuntime, ScriptedRuntime, load_cassette

path = Path(sys.argv[1])
rec = RecordingRuntime(ScriptedRuntime(rule=lambda prompt: "reply to " + prompt), path)
q = lambda n: [{"role": "user", "content": f"call {n}"}]
rec.complete(q(0))

# Interrupt one model call at its n-th audited operation (opening a file, ...), for every n a
# call goes through. (json's id() calls are not counted: their number grows with the call.)
state = {"left": None, "events": 0}
def hook(event, args):
    if state["left"] is None or event == "builtins.id":
        return
    state["events"] += 1
    state["left"] -= 1
    if state["left"] == 0:
        state["left"] = None
        raise KeyboardInterrupt(f"open {Path(args[0]).name}" if event == "open" else event)
sys.addaudithook(hook)

def files():
    return sorted(os.listdir(path.parent))

report, n = [], 0
while n < 100:
    n += 1
    state["left"], state["events"] = n, 0
    try:
        rec.complete(q(n))
        interrupted = None
    except KeyboardInterrupt as exc:
        interrupted = str(exc)
    state["left"] = None
    on_disk = len(load_cassette(path)["calls"])   # always a whole cassette
    report.append({"n": n, "at": interrupted, "files": files(), "on_disk": on_disk})
    if interrupted is None:
        break

# Ctrl-C after the call's line reached the file, before it was flushed to disk: the write is cut
# back off, the file is what it was, and the call is written with the next one.
size = path.stat().st_size
real_fsync = os.fsync
def interrupted_fsync(fd):
    os.fsync = real_fsync
    raise KeyboardInterrupt("fsync")
os.fsync = interrupted_fsync
try:
    rec.complete(q("at fsync"))
    at_fsync = None
except KeyboardInterrupt as exc:
    at_fsync = str(exc)
fsync = {"at": at_fsync, "same_size": path.stat().st_size == size, "files": files(),
         "on_disk": len(load_cassette(path)["calls"])}

rec.complete(q("last"))
calls = load_cassette(path)["calls"]
print(json.dumps({"report": report, "fsync": fsync, "kept": len(rec.calls),
                  "final": [c["call"] for c in calls],
                  "prompts": [c["request"]["messages"][0]["content"] for c in calls]}))
'''


def test_interrupted_writes_leave_no_temporary_file_and_a_whole_cassette(tmp_path):
    """Ctrl-C can land anywhere in a write — as the cassette is opened to append, or after the
    call's line reached the file but before it was flushed: the cassette on disk is always a
    whole one (the previous calls, or those and the new one), nothing but the cassette is left
    in its folder, and every call recorded in memory is written, in order, by the next call."""
    import subprocess
    import sys
    path = tmp_path / "rec" / "c.json"
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED, str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    report = out["report"]
    where = {r["at"] for r in report if r["at"]}
    assert "open c.json" in where, where   # it did land inside the write: opening the file
    assert out["fsync"]["at"] == "fsync" and out["fsync"]["same_size"]
    assert all(r["files"] == ["c.json"] for r in [*report, out["fsync"]])
    # the interrupted calls are not on disk yet; the next call writes them
    assert [r["on_disk"] for r in report] == [1 + 0] + [1 + r["n"] for r in report[1:]]
    assert out["fsync"]["on_disk"] == 1 + len(report)
    # every call that got as far as being recorded (here all: the scripted model does nothing
    # audited before it answers) is on disk at the end, once, in order: the first, each
    # interrupted one, the last
    n = len(report) + 3
    assert out["kept"] == n and out["final"] == list(range(1, n + 1))
    assert out["prompts"] == ["call 0", *(f"call {r['n']}" for r in report), "call at fsync",
                              "call last"]


_FULL_DISK = r'''
import json, os, resource, signal, sys, warnings
from pathlib import Path
from openprogram.runtimes import RecordingRuntime, ScriptedRuntime, load_cassette

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG
path = Path(sys.argv[1])
rec = RecordingRuntime(ScriptedRuntime(["short", "x" * 200_000, "short again"]), path)
q = [{"role": "user", "content": "q"}]
rec.complete(q)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    big = rec.complete(q).text
files_after_failure = os.listdir(path.parent)
size_after_failure = path.stat().st_size
on_disk = len(load_cassette(path)["calls"])
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
rec.complete(q)
print(json.dumps({"big": len(big), "warnings": [str(w.message) for w in caught],
                  "files": files_after_failure, "size": size_after_failure, "on_disk": on_disk,
                  "final": [c["call"] for c in load_cassette(path)["calls"]]}))
'''


def test_a_failed_write_warns_keeps_the_calls_and_leaves_no_temporary_file(tmp_path):
    """A write that fails part-way (here at the file-size limit, as on a full disk: the first
    100,000 bytes of the 200,000-character reply's line are written, then the write fails) does
    not fail the model call: the reply is returned, a warning names the cassette and the cause,
    the part written is cut back off (the file on disk is the last whole one), and the next
    write holds the call left over and the new one."""
    import subprocess
    import sys
    path = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK, str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["big"] == 200_000
    (warning,) = out["warnings"]
    assert str(path) in warning and "could not write" in warning and "File too large" in warning
    assert "keeps the 1 calls written before" in warning and "call #2 is kept" in warning
    assert out["files"] == ["c.json"] and out["size"] < 100_000
    assert out["on_disk"] == 1 and out["final"] == [1, 2, 3]


def _rewrite(path, header=None, call=None, document=False):
    """Rewrite a recorded cassette with its header changed by `header` and its first call by
    `call`: as JSON Lines (version 3, as recorded), or as one indented document (`document`,
    the form of versions 1 and 2)."""
    data = load_cassette(path)
    calls = data.pop("calls")
    if header:
        header(data)
    if call:
        call(calls[0])
    if document:
        path.write_text(json.dumps({**data, "calls": calls}, indent=2) + "\n")
    else:
        path.write_text("".join(json.dumps(x) + "\n" for x in [data, *calls]))


@pytest.mark.parametrize("change", ["truncate", "delete"])
def test_a_cassette_changed_underneath_the_recorder_is_a_warning_not_a_broken_file(tmp_path,
                                                                                    change):
    """Something else empties or deletes the file while recording: appending would leave a
    file that is no cassette (no header) or a wrong one, so the recorder says so and keeps the
    call in memory; the model call itself works."""
    path = tmp_path / "c.json"
    rec = RecordingRuntime(ScriptedRuntime(["one", "two"]), path)
    q = [{"role": "user", "content": "q"}]
    rec.complete(q)
    path.write_text("") if change == "truncate" else path.unlink()
    with pytest.warns(RuntimeWarning, match="could not write the cassette") as caught:
        assert rec.complete(q).text == "two"
    expect = "truncated or replaced the file" if change == "truncate" else "No such file"
    assert expect in str(caught[0].message) and "call #2 is kept" in str(caught[0].message)
    # nothing was appended to what is left (no headless cassette was made)
    assert (path.read_text() == "") if change == "truncate" else not path.exists()


def test_half_a_line_left_after_the_last_write_is_cut_off_by_the_next(tmp_path):
    """If a failed write could not be cut back either (a second Ctrl-C, a failing disk), the
    half line it left is cut off before the next append, so it never ends up mid-file."""
    path = tmp_path / "c.json"
    rec = RecordingRuntime(ScriptedRuntime(["one", "two"]), path)
    q = [{"role": "user", "content": "q"}]
    rec.complete(q)
    with open(path, "a") as f:
        f.write('{"call": 2, "request": {"messa')
    with pytest.raises(ValueError, match="line 3, was cut off"):
        load_cassette(path)
    rec.complete(q)
    assert [c["response"]["text"] for c in load_cassette(path)["calls"]] == ["one", "two"]
    text = path.read_text()
    assert text.count("\n") == 3 and "\0" not in text and text.endswith("}\n")


def test_a_half_written_version_2_cassette_says_so(tmp_path):
    path = _record_one(tmp_path)
    _rewrite(path, lambda h: h.update(version=2), document=True)
    whole = path.read_text()
    path.write_text(whole[:len(whole) // 2])
    with pytest.raises(ValueError) as info:
        ReplayRuntime(path)
    msg = str(info.value)
    assert "cut short" in msg and "re-record" in msg and str(path) in msg


def _record_three(tmp_path):
    path = tmp_path / "three.json"
    rec = RecordingRuntime(ScriptedRuntime(['{"call": "a"}', '{"call": "b"}', "hi"]), path)
    decision.make("Pick a or b.", ["a", "b"], runtime=rec)
    decision.make("Pick a or b.", ["a", "b"], runtime=rec)
    agent("hello", runtime=rec)
    return path


@pytest.mark.parametrize("cut, why", [
    (lambda t, last: t[:last + 1], "it has no newline at its end"),
    (lambda t, last: t[:last + 40], "it has no newline at its end"),
    (lambda t, last: t[:-2], "it has no newline at its end"),
    (lambda t, last: t[:-1], "it has no newline at its end"),     # whole JSON, but no newline
    (lambda t, last: t[:last + 40] + "\n", "it is not whole JSON"),
], ids=["one-character", "part", "no-brace", "no-newline", "part-then-newline"])
def test_a_version_3_cassette_cut_in_its_last_line_names_the_line_and_the_fix(tmp_path, cut,
                                                                               why):
    """A recording stopped mid-write (power lost) leaves a last line without its newline; the
    error names the line, says how many whole calls come before it and how to keep them, and
    following that advice gives a cassette that replays them."""
    path = _record_three(tmp_path)
    text = path.read_text()
    last = text.rstrip("\n").rfind("\n") + 1      # where line 4 (call #3) begins
    path.write_text(cut(text, last))
    with pytest.raises(ValueError) as info:
        ReplayRuntime(path)
    msg = str(info.value)
    assert f"the last line of the cassette {str(path)!r}, line 4, was cut off: {why}" in msg
    assert "The 2 calls before it are whole: delete line 4 to replay them" in msg
    lines = path.read_text().split("\n")
    path.write_text("\n".join(lines[:3]) + "\n")     # the fix the message gives
    rt = ReplayRuntime(path)
    assert decision.make("Pick a or b.", ["a", "b"], runtime=rt) == "a"
    assert decision.make("Pick a or b.", ["a", "b"], runtime=rt) == "b"
    assert rt.remaining == 0


def test_a_version_3_cassette_with_a_line_edited_into_something_else_names_it(tmp_path):
    path = _record_three(tmp_path)
    lines = path.read_text().split("\n")
    lines[2] = lines[2][:-1]                        # call #2 loses its closing brace
    path.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=r"line 3 of the cassette .* is not JSON .*edited by "
                                         r"hand; re-record") as info:
        load_cassette(path)
    assert "cut off" not in str(info.value)


@pytest.mark.parametrize("document", [False, True], ids=["lines", "document"])
@pytest.mark.parametrize("change, expect", [
    ({"version": 0}, "format version 0, older than"),
    ({"version": "1"}, "not a format version"),
    ({"version": None}, "not a format version"),
    ({"version": 99}, "pip install -U openprogram-decisions"),
])
def test_a_cassette_of_another_format_version_says_what_to_do(tmp_path, change, expect,
                                                               document):
    path = _record_one(tmp_path)
    _rewrite(path, lambda h: h.update(change), document=document)
    with pytest.raises(ValueError, match=expect) as info:
        ReplayRuntime(path)
    assert ("re-record" in str(info.value)) == (change["version"] != 99)


def test_a_version_2_header_on_lines_is_refused(tmp_path):
    path = _record_one(tmp_path)
    _rewrite(path, lambda h: h.update(version=2))
    with pytest.raises(ValueError, match="written as JSON Lines, as version 3 cassettes are, but "
                                         "its first line says version 2"):
        load_cassette(path)


@pytest.mark.parametrize("document", [False, True], ids=["lines", "document"])
def test_a_cassette_without_a_version_is_refused(tmp_path, document):
    path = _record_one(tmp_path)
    _rewrite(path, lambda h: h.pop("version"), document=document)
    with pytest.raises(ValueError, match='no "version"'):
        load_cassette(path)


@pytest.mark.parametrize("damage, expect", [
    (lambda c: c.pop("response"), "call #1 .* has no response and no error"),
    (lambda c: c.pop("request"), "call #1 .* has no request"),
    (lambda c: c["response"].update(tool_calls=[{"args": {}}]), "call #1 .* tool call"),
    (lambda c: c.update(response="text"), "call #1 .* a response that is not an object"),
])
@pytest.mark.parametrize("document", [False, True], ids=["lines", "document"])
def test_a_damaged_call_entry_is_named(tmp_path, damage, expect, document):
    """A cassette cut or merged by hand fails when it is loaded, naming the call (and in a
    version-3 file its line), instead of replaying an empty reply or raising a KeyError in the
    middle of a program."""
    path = _record_one(tmp_path)
    _rewrite(path, call=damage, document=document)
    with pytest.raises(ValueError, match=expect) as info:
        ReplayRuntime(path, strict=False)
    assert "re-record" in str(info.value)
    assert ("call #1 (line 2) of" in str(info.value)) == (not document)


# -- the ways of asking, async calls, and where each call sits ------------------------------------

def modes_replies(provider):
    """The server's side of cassette_program.run_modes."""
    cut = "length" if provider == "openai" else "max_tokens"

    def schema(pick, call_id):
        if provider == "openai":
            return text(json.dumps({"decision": pick}))
        return tools((call_id, "decision", {"decision": pick}))
    bo = {"call": "greet", "args": {"name": "Bo", "loud": None}} if provider == "openai" else \
        {"call": "greet", "args": {"name": "Bo"}}
    refusal = text("", refusal="No.") if provider == "openai" else text("No.", finish="refusal")
    return [
        tools(("c1", "greet", {"name": 3})), tools(("c2", "greet", {"name": "Ada"})),
        schema(bo, "t1"),
        tools(("c3", "lookup", {"order_id": "42"})), tools(("c4", "done", {})),
        schema({"call": "done", "args": {}}, "t2"),
        refusal, tools(("c5", "greet", '{"name": "A'), finish=cut),
        text("hi"),
    ]


def test_every_way_of_asking_and_async_calls_replay_in_a_fresh_process(
        provider, server, make_runtime, tmp_path):
    path = tmp_path / "modes.json"
    server.push(*modes_replies(provider))
    rec = RecordingRuntime(make_runtime(), path)
    live = cassette_program.run_modes(rec)
    assert live["results"] == ["hello Ada", "hello Bo", "DONE", "DONE",
                               {"error": ["refused", "truncated"]}, "hi"]
    assert all(t["attempts"][0]["raw"]["request"] for t in live["traces"])
    server.stop()

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HERE)}
    proc = subprocess.run([sys.executable, str(HERE / "cassette_program.py"), str(path),
                           "modes"], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads(proc.stdout)
    assert replayed["results"] == live["results"]
    assert replayed["traces"] == live["traces"]   # raw records, finish reasons, tool calls
    assert replayed["dag"] == live["dag"]

    calls = load_cassette(path)["calls"]
    assert calls[0]["request"]["tool_choice"] == "required"
    assert calls[2]["request"]["response_format"]["name"] == "decision"
    assert calls[7]["response"]["finish_reason"] in ("length", "max_tokens")
    assert calls[6]["response"]["refusal"]
    assert FAKE_KEY not in path.read_text()

    groups = cassette_decisions(path)
    assert [(g["entry"], g["mode"], [len(a["calls"]) for a in g["attempts"]])
            for g in groups] == [
        ("decision.make", "tools", [1, 1]),          # a bad-arguments re-ask
        ("decision.make", "json_schema", [1]),
        ("agent(options=)", "tools", [2]),           # a tool round, then the choice
        ("decision.amake", "json_schema", [1]),
        ("decision.make", "tools", [1, 1]),          # refused, then cut off
    ]
    assert [a["attempt"] for a in groups[0]["attempts"]] == [1, 2]
    assert sum(len(a["calls"]) for g in groups for a in g["attempts"]) == len(calls) - 1
    assert calls[-1]["decision"] is None      # the plain turn is no decision's


def _grouped(tmp_path, program):
    path = tmp_path / "g.json"
    program(path)
    return [(g["mode"], [[c["call"] for c in a["calls"]] for a in g["attempts"]])
            for g in cassette_decisions(path)]


def test_calls_are_grouped_into_decisions_and_attempts(tmp_path):
    from openprogram import ToolCall

    def lookup(order: int) -> str:
        """Look an order up."""
        return "delayed"

    def program(path):
        rec = RecordingRuntime(ScriptedRuntime([
            "no pick here", '{"call": "a"}',                                   # make: re-ask
            ToolCall("lookup", {"order": 1}), "still no pick", '{"call": "b"}',  # agent, menu
            ToolCall("lookup", {"order": 2}), ToolCall("nope", {}),            # agent, tools:
            ToolCall("b", {"n": "x"}), ToolCall("b", {"n": 1}),                # two rounds
            "plain",                                                            # no decision
        ]), path)
        decision.make("Pick a or b.", ["a", "b"], runtime=rec)
        agent("Look, then pick.", tools=[lookup], options=["a", "b"], runtime=rec)
        agent("Look, then pick.", tools=[lookup], options={"a": "A", "b": ("B", {"n": int})},
              runtime=rec, mode="tools")
        agent("hello", runtime=rec)
    assert _grouped(tmp_path, program) == [
        ("menu", [[1], [2]]),
        ("menu", [[3, 4], [5]]),
        # a round that ran a tool, a round that named no offered tool (answered with an
        # error), the choice called with bad arguments ends the turn; its re-ask
        ("tools", [[6, 7, 8], [9]]),
    ]


def test_a_version_1_cassette_replays_but_cannot_be_grouped(tmp_path):
    path = _record_one(tmp_path)
    _rewrite(path, lambda h: h.update(version=1), lambda c: c.pop("decision"), document=True)
    assert decision.make("Pick a or b.", ["a", "b"], runtime=ReplayRuntime(path)) == "a"
    with pytest.raises(ValueError) as info:
        cassette_decisions(path)
    msg = str(info.value)
    assert "format version 1" in msg and "does not record which decision" in msg
    assert "re-record it with RecordingRuntime" in msg and "writes version 4" in msg


def test_a_request_in_another_mode_is_a_mismatch_naming_what_differs(tmp_path):
    from openprogram import ToolCall
    path = tmp_path / "t.json"
    rec = RecordingRuntime(ScriptedRuntime([ToolCall("a")]), path)
    assert decision.make("Pick a or b.", ["a", "b"], runtime=rec, mode="tools") == "a"
    with pytest.raises(DecisionError) as info:
        decision.make("Pick a or b.", ["a", "b"], runtime=ReplayRuntime(path),
                      mode="json_schema")
    msg = info.value.trace.attempts[0].error_message
    assert "did not record" in msg and "where they first differ: the response_format " \
        "differ" in msg
    assert ReplayRuntime(path).modes == {"menu", "tools", "json_schema"}
    assert rec.modes == ScriptedRuntime(["x"]).modes


def test_async_replay_streams_and_answers_on_the_loop(tmp_path):
    import asyncio
    path = _record_one(tmp_path, reply='I pick {"call": "b"}')
    chunks = []
    rt = ReplayRuntime(path, stream_chunk=4)

    async def main():
        with openprogram.observe(lambda e: e.kind == "reply_chunk" and
                                 chunks.append(e.data["text"])):
            return await decision.amake("Pick a or b.", ["a", "b"], runtime=rt)
    assert asyncio.run(main()) == "b"
    assert chunks[0] == "I pi" and "".join(chunks) == 'I pick {"call": "b"}'
