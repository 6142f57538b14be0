"""Files read as untrusted input (issue 41, findings 8-10): a journal, a cassette or a cache
edited by someone else ends in the library's own error naming the file, the line and what to do
(or loads correctly), never in Python's RecursionError / KeyError / TypeError / MemoryError, and
with memory bounded by what the file holds; a file written by a newer release is never appended
to; a full disk ends a journaled run saying how many rows are safe and that the same call
resumes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from evalhelp import OPTIONS, PROMPT, rule

from openprogram.base.errors import OpenProgramError
from openprogram.evaluation.evaluate import EvaluationResult, evaluate
from openprogram.runtimes import CachedRuntime, ReplayRuntime, ScriptedRuntime

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"message": m} for m in ("please refund me", "escalate this", "just saying hi")]
DEEP = "[" * 100_000 + "]" * 100_000


def _journal(tmp_path) -> Path:
    path = tmp_path / "run.jsonl"
    evaluate(PROMPT, OPTIONS, ROWS, runtime=ScriptedRuntime(rule=rule), journal=path,
             progress=False)
    return path


def _edit_row(path: Path, change) -> int:
    """Apply `change(row line dict)` to the first row line; returns its line number."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, raw in enumerate(lines):
        item = json.loads(raw)
        if item.get("kind") == "row":
            change(item)
            lines[n] = json.dumps(item)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            return n + 1
    raise AssertionError("no row line")


def _refusals(path: Path) -> list[str]:
    """What reading the journal at `path` says, both ways (the result, and a resume), each of
    which must end in the library's own error."""
    out = []
    for read in (lambda: EvaluationResult.from_journal(path),
                 lambda: evaluate(PROMPT, OPTIONS, ROWS, runtime=ScriptedRuntime(rule=rule),
                                  journal=path, progress=False)):
        with pytest.raises(OpenProgramError) as info:
            read()
        assert isinstance(info.value, ValueError)
        out.append(str(info.value))
    return out


def _set(*keys, value):
    def change(item):
        target = item
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return change


@pytest.mark.parametrize("change,says", [
    (_set("row", value=30_000_000), "input position"),
    (_set("row", value=1e11), "'row' is 100000000000.0, not a whole number"),
    (_set("row", value=[0]), "'row' is [0], not a whole number"),
    (_set("row", value=True), "not a whole number"),
    (_set("status", value="bogus"), '"status" is "bogus"'),
    (_set("trace", "duration_s", value="slow"), "trace's 'duration_s'"),
    (_set("trace", "attempts", value=[{"attempt": "one"}]), "attempt 1's 'attempt'"),
    (_set("error_kinds", value="model_error"), "'error_kinds'"),
])
def test_an_edited_journal_row_is_refused_naming_the_line(tmp_path, change, says):
    path = _journal(tmp_path)
    n = _edit_row(path, change)
    before = path.read_bytes()
    tracemalloc.start()
    try:
        for message in _refusals(path):
            assert f"line {n} of the journal {str(path)!r}" in message and says in message
            assert "delete that line" in message
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000          # bounded: no array of 30 million rows was made
    assert path.read_bytes() == before    # nothing appended to a file that failed to read


GOOD_CONF = {"probs": {"refund": 0.5, "escalate": 0.25, "other": 0.25}, "other": 0.0,
             "source": "samples", "n": 4, "pick": "refund", "note": None}


def _conf(**changes):
    return {**GOOD_CONF, **changes}


# Confidence read back from a journal (issue 54, case 14): NaN, -50 or inf made ece, summary
# and the HTML view raise, 7.0 gave ece=6.5 and a bar showing 7.000, a list a TypeError.
@pytest.mark.parametrize("conf,says", [
    (_conf(probs={"refund": float("nan"), "escalate": 0.5, "other": 0.5}),
     "probability of 'refund' is nan"),
    (_conf(probs={"refund": -50, "escalate": 1.0, "other": 50.0}), "'refund' is -50"),
    (_conf(probs={"refund": float("inf"), "escalate": 0.0, "other": 0.0}), "'refund' is inf"),
    (_conf(probs={"refund": 7.0, "escalate": 0.0, "other": 0.0}), "'refund' is 7.0"),
    (_conf(probs={"refund": 0.9, "escalate": 0.9, "other": 0.0}), "sum to 1.8"),
    (_conf(probs=[["refund", 0.5]]), '"probs" is [['),
    ([0.5, 0.5], "it is [0.5, 0.5], not an object"),
    (_conf(other=float("nan")), '"other" is nan'),
    (_conf(n=[2]), '"n" is [2]'),
    (_conf(source="guess"), '"source" is \'guess\''),
])
@pytest.mark.parametrize("where", [("confidence",), ("trace", "attempts", 0, "confidence")],
                         ids=["row", "attempt"])
def test_a_confidence_that_is_not_a_distribution_is_refused_naming_the_line(tmp_path, conf,
                                                                            says, where):
    path = _journal(tmp_path)
    n = _edit_row(path, _set(*where, value=conf))
    for message in _refusals(path):
        assert f"line {n} of the journal" in message and "is not a distribution" in message
        assert says in message and "delete that line" in message


def test_a_distribution_read_back_is_checked_wherever_it_comes_from():
    from openprogram.base.errors import ArgumentError
    from openprogram.trace.confidence import Confidence
    good = Confidence.from_dict(GOOD_CONF)
    assert good.p_pick == 0.5 and good.to_dict() == GOOD_CONF
    for bad in ([1], {"probs": {"a": float("nan")}, "other": 0.0, "source": "logprobs"},
                {"probs": {"a": 7.0}, "other": 0.0, "source": "exact"}):
        with pytest.raises(ArgumentError, match="not one Confidence.to_dict\\(\\) writes"):
            Confidence.from_dict(bad)


@pytest.mark.parametrize("total", [10 ** 11, 1e11, "many"])
def test_a_section_total_the_file_cannot_hold(tmp_path, total):
    path = _journal(tmp_path)
    lines = path.read_text().splitlines()
    n = next(k for k, raw in enumerate(lines) if json.loads(raw).get("kind") == "section")
    item = json.loads(lines[n])
    item["total"] = total
    lines[n] = json.dumps(item)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(OpenProgramError, match=f"line {n + 1} of the journal .*'total'|"
                                               f"line {n + 1} of the journal .*\"total\""):
        EvaluationResult.from_journal(path)


@pytest.mark.parametrize("bad", [DEEP.encode(), b'{"kind": "row", "x": "\xff\xfe"}',
                                 b"not json"])
def test_a_journal_line_that_is_not_json(tmp_path, bad):
    path = _journal(tmp_path)
    lines = path.read_bytes().splitlines()
    lines.insert(2, bad)
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(OpenProgramError, match="line 3 of the journal .* cannot be read"):
        EvaluationResult.from_journal(path)


def test_a_newer_journal_is_neither_read_nor_appended_to(tmp_path):
    path = _journal(tmp_path)
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    head.update(version=2, written_by="9.0.0")
    # and its rows are of a shape this release does not know
    rows = [json.dumps({**json.loads(x), "row": {"at": 0}}) if '"kind": "row"' in x or
            '"kind":"row"' in x else x for x in lines[1:]]
    path.write_text("\n".join([json.dumps(head)] + rows) + "\n")
    before = path.read_bytes()
    for read in (lambda: EvaluationResult.from_journal(path),
                 lambda: evaluate(PROMPT, OPTIONS, ROWS + [{"message": "new"}],
                                  runtime=ScriptedRuntime(rule=rule), journal=path,
                                  progress=False)):
        with pytest.raises(OpenProgramError, match="format version 2, written by openprogram "
                                                   "\"9.0.0\".* upgrade"):
            read()
    assert path.read_bytes() == before


def test_a_newer_cache_is_not_appended_to(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"format": "openprogram-cassette", "version": 99}) + "\n")
    before = path.read_bytes()
    with pytest.raises(OpenProgramError, match="format version 99, written by a newer release"):
        CachedRuntime(ScriptedRuntime(["x"]), path)
    assert path.read_bytes() == before


def test_a_cassette_nested_too_deep(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"format": "openprogram-cassette", "version": 4}) + "\n"
                    + DEEP + "\n")
    with pytest.raises(OpenProgramError, match="line 2 of the cassette .* nested deeper"):
        ReplayRuntime(path)


def test_a_full_disk_says_how_many_rows_are_safe_and_that_the_same_call_resumes(tmp_path):
    """The journal's file may grow only so far (RLIMIT_FSIZE, in a child process: the kernel
    refuses the write past it, as a full disk does)."""
    path = tmp_path / "run.jsonl"
    program = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from evalhelp import OPTIONS, PROMPT, rule
        from openprogram.evaluation.evaluate import evaluate
        from openprogram.runtimes import ScriptedRuntime
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (12_000, 12_000))
        rows = [{{"message": f"please refund me {{i}}"}} for i in range(200)]
        try:
            evaluate(PROMPT, OPTIONS, rows, runtime=ScriptedRuntime(rule=rule),
                     journal={str(path)!r}, progress=False, concurrency=1)
        except Exception as exc:
            print(type(exc).__name__, isinstance(exc, OSError), exc)
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    said = out.stdout.strip()
    assert said.startswith("JournalWriteError True"), (said, out.stderr[-2000:])
    safe = int(re.search(r"the (\d+) rows journaled before are safe in it", said).group(1))
    assert "call the same evaluation with the same journal= again" in said
    # the journal holds exactly that many rows, whole; the same call resumes from them
    done = EvaluationResult.from_journal(path)
    assert done.finished == safe > 0
    rt = ScriptedRuntime(rule=rule)
    rows = [{"message": f"please refund me {i}"} for i in range(200)]
    res = evaluate(PROMPT, OPTIONS, rows, runtime=rt, journal=path, progress=False)
    assert res.finished == 200 and len(rt.calls) == 200 - safe


def test_a_cassette_whose_latency_is_not_a_number(tmp_path):
    from openprogram import decision
    from openprogram.runtimes import RecordingRuntime
    path = tmp_path / "c.jsonl"
    decision.make("pick", {"a": ("A", "one")},
                  runtime=RecordingRuntime(ScriptedRuntime(['{"call": "a"}']), path))
    head, call = path.read_text().splitlines()
    entry = json.loads(call)
    entry["duration_s"] = "slow"
    path.write_text(head + "\n" + json.dumps(entry) + "\n")
    with pytest.raises(OpenProgramError, match=r"call #1 \(line 2\) .* \"duration_s\" that is not "
                                               r"a number"):
        ReplayRuntime(path, realtime=True)
