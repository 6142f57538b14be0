"""A RecordingRuntime used for a long time: memory holds the runtime's window of calls, the file
holds every call, and recording a call writes that call only (not the file so far). Cassettes
of format version 2, as the notebooks commit them, still load, replay, group and re-check."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from openprogram import decision
from openprogram.runtimes import (
    RecordingRuntime,
    ReplayRuntime,
    ScriptedRuntime,
    cassette_decisions,
    cassette_traces,
    load_cassette,
)

NOTEBOOK_CASSETTES = sorted((Path(__file__).resolve().parents[3] / "notebooks" /
                             "cassettes").glob("*.json"))
WINDOW = 20


def _reply(prompt):
    """Every seventh message gets no pick first, so its decision has a re-ask."""
    if prompt.startswith("Message ") and int(prompt.split()[1].rstrip(":")) % 7 == 0:
        return "let me think"
    return '{"call": "b"}' if "odd" in prompt else '{"call": "a"}'


def _program(runtime, n):
    return [decision.make(f"Message {i}: {'odd' if i % 2 else 'even'}. Pick a or b.",
                          ["a", "b"], runtime=runtime) for i in range(n)]


def test_memory_holds_the_window_and_the_file_holds_every_call_in_order(tmp_path):
    path = tmp_path / "long.json"
    rec = RecordingRuntime(ScriptedRuntime(rule=_reply), path, window=WINDOW)
    live = _program(rec, 3 * WINDOW)
    n = 3 * WINDOW + len(range(0, 3 * WINDOW, 7))   # one call each, a re-ask every seventh
    assert len(rec.calls) == WINDOW and len(rec.dag) <= WINDOW
    assert [c["call"] for c in rec.calls] == list(range(n - WINDOW + 1, n + 1))
    assert len(rec._places._last) <= WINDOW        # the decision grouping forgets old ones too
    assert repr(rec).endswith(f", {n} calls)")

    data = load_cassette(path)
    assert data["version"] == 4
    assert [c["call"] for c in data["calls"]] == list(range(1, n + 1))
    firsts = [c["request"]["messages"][-1]["content"] for c in data["calls"]
              if c["decision"]["attempt"] == 1]
    assert [f.split(":")[0] for f in firsts] == [f"Message {i}" for i in range(3 * WINDOW)]
    # each decision's calls are still grouped into it, re-asks included, past the window
    groups = cassette_decisions(path)
    assert [[len(a["calls"]) for a in g["attempts"]] for g in groups] == \
        [[1, 1] if i % 7 == 0 else [1] for i in range(3 * WINDOW)]

    replay = ReplayRuntime(path)
    assert _program(replay, 3 * WINDOW) == live and replay.remaining == 0

    rec.window = 5
    assert len(rec.calls) == 5 and len(rec.dag) <= 5


_BYTES = r'''
import json, sys
from pathlib import Path
from openprogram import decision
from openprogram.runtimes import RecordingRuntime, ScriptedRuntime

def written():
    """Bytes this process has handed to write() so far, whatever the file (Linux's count)."""
    with open("/proc/self/io") as f:
        return int(next(row for row in f if row.startswith("wchar:")).split()[1])

path = Path(sys.argv[1])
rec = RecordingRuntime(ScriptedRuntime(rule=lambda prompt: '{"call": "a"}'), path, window=50)
rows = []
for i in range(300):
    before, size = written(), path.stat().st_size
    decision.make(f"Message {i:05d}: pick a or b.", ["a", "b"], runtime=rec)
    rows.append([written() - before, path.stat().st_size - size])
print(json.dumps(rows))
'''


def test_recording_a_call_writes_that_call_not_the_file_so_far(tmp_path):
    """Counted, not timed: the bytes the process writes for each call (every write of any file,
    as the kernel counts them) are exactly what the cassette grew by, and as many for the 300th
    call as for the 6th — a recording of N calls writes O(N) bytes, not O(N²)."""
    path = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, "-c", _BYTES, str(path)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)[5:]   # after the first calls' lazy imports
    assert all(wrote == grew for wrote, grew in rows), rows
    early, late = [w for w, _ in rows[:20]], [w for w, _ in rows[-20:]]
    # the same request each time: lines differ only by the digits of numbers and durations
    assert max(late) - min(early) < 40, (early, late)
    assert len(load_cassette(path)["calls"]) == 300


def _as_version_2(path, to):
    data = load_cassette(path)
    to.write_text(json.dumps({**data, "version": 2}, indent=2) + "\n")
    return to


def test_a_version_2_cassette_replays_groups_and_rechecks_as_the_version_3_one(tmp_path):
    v3 = tmp_path / "v3.json"
    rec = RecordingRuntime(ScriptedRuntime(rule=_reply), v3)
    live = _program(rec, 9)
    v2 = _as_version_2(v3, tmp_path / "v2.json")
    assert v3.read_text().count("\n") == 1 + 9 + 2 and v2.read_text().startswith("{\n")
    assert _program(ReplayRuntime(v2), 9) == live
    assert cassette_decisions(v2) == cassette_decisions(v3)
    def traces(p):
        return [(t.entry, t.mode, [(a.number, a.prompt, a.reply, a.tool_calls, a.finish_reason)
                                   for a in t.attempts]) for t in cassette_traces(p)]
    assert traces(v2) == traces(v3)
    options = ["a", "c"]
    rows = [[(r.after, r.passing_attempt) for r in decision.revalidate(str(p), options).rows]
            for p in (v2, v3)]
    assert rows[0] == rows[1] and {after for after, _ in rows[0]} == {"a", "unknown_call"}


@pytest.mark.parametrize("path", NOTEBOOK_CASSETTES, ids=lambda p: p.name)
def test_the_committed_notebook_cassettes_still_load(path):
    data = load_cassette(path)
    from openprogram.runtimes.cassette.cassette_file import OLDEST, VERSION
    assert OLDEST <= data["version"] <= VERSION and data["calls"]
    assert ReplayRuntime(path).remaining == len(data["calls"])
    if data["version"] == 2:
        groups = cassette_decisions(path)
        assert sum(len(a["calls"]) for g in groups for a in g["attempts"]) == \
            sum(c["decision"] is not None for c in data["calls"])
