"""One cache file shared by two processes (issue 41, findings 4 and 5): appends that cannot
overwrite each other, another writer's lines read and never cut, a writer killed mid-line losing
nothing but that line, and a line whose key was edited never answering another request."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from openprogram.runtimes import CachedRuntime, ReplayRuntime, ScriptedRuntime
from openprogram.runtimes.cassette import cache as cache_module
from openprogram.runtimes.cassette.cassette_file import request_key

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _child(path, go, prefix, n):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    return subprocess.Popen([sys.executable, str(HERE / "cache_program.py"), str(path),
                             str(go), prefix, str(n)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _lines(path: Path) -> tuple[list[dict], int]:
    """The call lines of the file, and how many lines are not JSON."""
    calls, bad = [], 0
    for raw in path.read_bytes().split(b"\n")[1:]:
        if not raw:
            continue
        try:
            calls.append(json.loads(raw))
        except ValueError:
            bad += 1
    return calls, bad


def _fresh():
    cache_module._Store._open.clear()   # as a new process opens it


def _asked(prefix: str, i: int):
    return [{"role": "user", "content": f"{prefix} {i}"}]


def test_two_processes_600_requests_600_lines(tmp_path):
    path, go = tmp_path / "shared.jsonl", tmp_path / "go"
    kids = [_child(path, go, p, 300) for p in ("left", "right")]
    go.touch()
    outs = [k.communicate(timeout=300) for k in kids]
    assert [k.returncode for k in kids] == [0, 0], outs
    assert [o[0].split() for o in outs] == [["0", "300"], ["0", "300"]]
    calls, bad = _lines(path)
    assert (len(calls), bad) == (600, 0)
    assert all(c["key"] == request_key(c["request"], c["settings"]) for c in calls)
    assert len({c["key"] for c in calls}) == 600
    # every one answers a third runtime from the file, and the file still replays
    _fresh()
    counted = []
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: counted.append(t) or "new"), path)
    for p in ("left", "right"):
        for i in range(300):
            assert rt.complete(_asked(p, i)).text == f"answer to {p} {i}"
    assert (rt.hits, rt.misses, counted) == (600, 0, [])
    assert ReplayRuntime(path, strict=False).remaining == 600


def test_two_processes_asking_the_same_requests(tmp_path):
    path, go = tmp_path / "shared.jsonl", tmp_path / "go"
    kids = [_child(path, go, "same", 200) for _ in range(2)]
    go.touch()
    outs = [k.communicate(timeout=300) for k in kids]
    assert [k.returncode for k in kids] == [0, 0], outs
    calls, bad = _lines(path)
    # each request is in the file once, whole: when both asked before either wrote, the
    # second to write finds the first's line and keeps it
    assert bad == 0 and sorted(c["request"]["messages"][0]["content"] for c in calls) == \
        sorted(f"same {i}" for i in range(200))


def test_a_writer_killed_mid_run_loses_nothing_but_its_last_line(tmp_path):
    path, go = tmp_path / "shared.jsonl", tmp_path / "go"
    CachedRuntime(ScriptedRuntime(["x"]), path)          # the file, with its header
    survivor, victim = _child(path, go, "kept", 300), _child(path, go, "killed", 100_000)
    go.touch()
    while path.read_bytes().count(b'"killed ') < 50:   # the victim has written 50 lines
        time.sleep(0.001)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    out = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, out
    calls, bad = _lines(path)
    kept = [c for c in calls if c["request"]["messages"][0]["content"].startswith("kept")]
    killed = [c for c in calls if c["request"]["messages"][0]["content"].startswith("killed")]
    assert len(kept) == 300 and bad <= 1
    # the victim's lines are its first requests, in order, with no gap: at most its last one
    # (cut off by the kill) is missing
    assert [c["request"]["messages"][0]["content"] for c in killed] == \
        [f"killed {i}" for i in range(len(killed))]
    _fresh()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "new"), path)
        for i in range(300):
            assert rt.complete(_asked("kept", i)).text == f"answer to kept {i}"
        for i in range(len(killed)):
            assert rt.complete(_asked("killed", i)).text == f"answer to killed {i}"
    assert (rt.hits, rt.misses) == (300 + len(killed), 0)
    cut = [str(w.message) for w in caught]
    assert len(cut) == bad and all("was cut off" in m and "line " in m for m in cut)
    assert _lines(path)[1] == 0       # the torn line was removed, under the lock


def test_a_line_whose_key_was_edited_does_not_answer_another_request(tmp_path):
    path = tmp_path / "c.jsonl"
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: f"answer to {t.strip()}"), path)
    for who in ("A", "B"):
        rt.complete(_asked("ticket", who))
    head, a, b = path.read_text().splitlines()
    key_a, key_b = json.loads(a)["key"], json.loads(b)["key"]
    # B's line now claims A's key, and comes last (the newest line for a key wins)
    path.write_text("\n".join([head, a.replace(key_a, "0" * 64), b.replace(key_b, key_a)])
                    + "\n")
    _fresh()
    asked = []
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: asked.append(t) or "fresh A"), path)
    with pytest.warns(RuntimeWarning, match=r"line 3 of the cache .* not the digest of its own "
                                            r"request"):
        assert rt.complete(_asked("ticket", "A")).text == "fresh A"
    assert rt.misses == 1 and len(asked) == 1


def test_a_first_hit_on_a_line_holding_the_live_request_digests_it_once(tmp_path, monkeypatch):
    """The live request's digest is its key; a line holding the same values needs no second
    digest of its own (a cache lookup's largest cost on a file asked mostly once per line)."""
    path = tmp_path / "c.jsonl"
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "first"), path)
    rt.complete(_asked("ticket", 1))
    _fresh()
    digests = []
    real = cache_module.request_key
    monkeypatch.setattr(cache_module, "request_key", lambda *a: digests.append(a) or real(*a))
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "asked again"), path)
    assert rt.complete(_asked("ticket", 1)).text == "first" and rt.hits == 1
    assert digests == []


@pytest.mark.parametrize("spelled", ["true", "1.0"])
def test_a_line_whose_request_differs_only_in_a_numbers_type_is_still_refused(tmp_path, spelled):
    """A first hit skips digesting its line when the line holds the live request value for
    value and type for type (cassette_file.same_request); `1` edited to `true` or `1.0` is
    equal in Python but another request in JSON: its digest is taken, and refuses it."""
    from openprogram.runtimes.cassette.cassette_file import same_request
    path = tmp_path / "c.jsonl"
    tools = [{"name": "lookup", "parameters": {"type": "object", "minProperties": 1}}]
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "first"), path)
    rt.complete(_asked("ticket", 1), tools=tools)
    head, line = path.read_text().splitlines()
    assert '"minProperties": 1}' in line
    path.write_text(head + "\n" + line.replace('"minProperties": 1}',
                                                f'"minProperties": {spelled}}}') + "\n")
    _fresh()
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "asked again"), path)
    with pytest.warns(RuntimeWarning, match=r"line 2 of the cache .* not the digest of its own"):
        assert rt.complete(_asked("ticket", 1), tools=tools).text == "asked again"
    assert rt.misses == 1
    line = json.loads(line)
    assert same_request(line["request"], line["settings"], line["request"], line["settings"])
    edited = json.loads(json.dumps(line["request"]).replace('"minProperties": 1}',
                                                            f'"minProperties": {spelled}}}'))
    assert edited == line["request"]     # Python's == would take it
    assert not same_request(edited, line["settings"], line["request"], line["settings"])


@pytest.mark.parametrize("edit", ["not json", "bad utf-8", "deep", "non-ascii key"])
def test_a_damaged_line_is_skipped_naming_file_and_line(tmp_path, edit):
    path = tmp_path / "c.jsonl"
    rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "old"), path)
    rt.complete(_asked("q", 1))
    head, line = path.read_bytes().splitlines()
    key = json.loads(line)["key"].encode()
    damaged = {"not json": b'{"key": "' + key + b'", "request": {',
               "bad utf-8": b'{"key": "' + key + b'", "request": "\xff\xfe"}',
               "deep": b'{"key": "' + key + b'", "x": ' + b"[" * 100_000 + b"]" * 100_000
               + b"}",
               "non-ascii key": line.replace(key[:2], "é".encode())}[edit]
    path.write_bytes(b"\n".join([head, damaged]) + b"\n")
    _fresh()
    # a key that is not a digest is recomputed from the line's own request: a correct load
    want = "old" if edit == "non-ascii key" else "new"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt = CachedRuntime(ScriptedRuntime(rule=lambda t: "new"), path)
        assert rt.complete(_asked("q", 1)).text == want
    if want == "new":
        assert any("line 2 of the cache" in str(w.message) for w in caught), \
            [str(w.message) for w in caught]
        assert rt.complete(_asked("q", 1)).text == "new" and rt.hits == 1
    else:
        assert (rt.hits, rt.misses) == (1, 0)
