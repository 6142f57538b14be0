"""Saved runs (issue 51): `run.save(path)` writes a cassette holding every call, the tree and
the traces, the program's import path and its arguments as JSON; `Run.load(path)` gives a run
that forks again (with `program=` for a function that has no import path); a file whose lines
were edited, cut or written by another tool is named, with what to do."""
from __future__ import annotations

import json

import pytest

import openprogram
from openprogram import Agent, UsageError, decision
from openprogram.runs import Run, RunFileError, run_block
from openprogram.runtimes import ScriptedRuntime
from openprogram.runtimes.cassette import (
    RecordingRuntime,
    ReplayRuntime,
    cassette_decisions,
)


def pick(name, **args):
    return "```json\n" + json.dumps({"call": name, **({"args": args} if args else {})}) + "\n```"


class Desk(Agent):
    def handle(self, ticket: str, priority: int = 1) -> str:
        team = decision.make(f"Ticket: {ticket} (p{priority}). Team?", ["billing", "shipping"])
        return decision.make(f"Ticket: {ticket} for {team}. Outcome?",
                             {"refund": "REFUNDED", "close": "CLOSED"})


DESK = Desk()


def answers(prompt: str) -> str:
    return pick("shipping") if "Team?" in prompt else pick("close")


def saved(tmp_path, fn=None, *args, **kwargs):
    r = openprogram.run(fn or DESK.handle, *(args or ("late",)),
                        runtime=ScriptedRuntime(rule=answers), **kwargs)
    path = tmp_path / "run.jsonl"
    assert r.save(path) == path
    return r, path


def lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_a_saved_run_is_a_cassette_with_its_program_and_tree(tmp_path):
    r, path = saved(tmp_path, None, "late", priority=2)
    head, *calls = lines(path)
    assert head["format"] == "openprogram-cassette" and head["version"] == 4
    rec = head["run"]
    assert rec["program"] == f"{__name__}:DESK.handle"
    assert (rec["args"], rec["kwargs"]) == (["late"], {"priority": 2})
    assert [n["id"] for n in rec["nodes"]] == [n.id for n in r.nodes]
    assert len(rec["traces"]) == 2 and rec["status"] == "ok" and rec["result"] == "CLOSED"
    assert [c["call"] for c in calls] == [1, 2]
    assert [c["decision"]["id"] for c in calls] == [0, 1]
    assert [c["decision"]["entry"] for c in calls] == ["make", "make"]
    # a cassette like any other: grouped into its decisions, and replayed
    assert [g["decision"] for g in cassette_decisions(path)] == [0, 1]
    with openprogram.using_runtime(ReplayRuntime(path)):
        assert DESK.handle("late", priority=2) == "CLOSED"


def test_a_loaded_run_is_the_run_and_forks_again(tmp_path):
    r, path = saved(tmp_path, None, "late", priority=2)
    loaded = Run.load(path)
    assert loaded.args == ("late",) and loaded.kwargs == {"priority": 2}
    assert loaded.re_executable and loaded.path == str(path)
    assert [n.to_dict() for n in loaded.nodes] == [n.to_dict() for n in r.nodes]
    assert [d.trace.chosen for d in loaded.decisions] == ["shipping", "close"]
    assert loaded.diff(r).first is None
    f = loaded.fork(at=1, reply=pick("refund"))
    assert f.result == "REFUNDED" and [c.source for c in f.calls] == ["recording", "edit"]
    # after the fork point a loaded run has no model of its own: runtime= gives one
    f = loaded.fork(at=0, reply=pick("billing"))
    assert f.status == "error" and "fork it with runtime=" in str(f.error)
    f = loaded.fork(at=0, runtime=ScriptedRuntime([pick("billing"), pick("refund")]))
    assert f.result == "REFUNDED"
    # a loaded run (and its fork) saves again
    f.save(tmp_path / "fork.jsonl")
    again = Run.load(tmp_path / "fork.jsonl")
    assert again.result == "REFUNDED" and again.fork(at=1, reply=pick("close")).result == \
        "CLOSED"


def test_a_notebooks_function_is_given_again_with_program(tmp_path):
    def cell(ticket: str) -> str:   # defined inside a function: no import path
        return decision.make(f"{ticket}: Team?", ["billing", "shipping"])
    r, path = saved(tmp_path, cell, "late")
    loaded = Run.load(path)
    assert not loaded.re_executable
    with pytest.raises(UsageError, match=r"no import path.*Run.load\(.*program=fn\)"):
        loaded.fork(at=0, reply=pick("billing"))
    loaded = Run.load(path, program=cell)
    assert loaded.fork(at=0, reply=pick("billing")).result == "billing"
    with pytest.raises(TypeError, match="program="):
        Run.load(path, program="cell")


def test_arguments_that_are_not_json_need_a_program_that_binds_them(tmp_path):
    class Ticket:
        text = "late"

    def program(ticket) -> str:
        return decision.make(f"{ticket.text}: Team?", ["billing", "shipping"])
    ticket = Ticket()
    r, path = saved(tmp_path, program, ticket)
    assert lines(path)[0]["run"]["arguments_json"] is False
    loaded = Run.load(path, program=lambda: program(ticket))
    assert loaded.fork(at=0, reply=pick("billing")).result == "billing"
    r2, path2 = saved(tmp_path, DESK.handle, ("a", "tuple"))  # a tuple is no JSON value
    with pytest.raises(UsageError, match=r"arguments were not JSON.*program=fn"):
        Run.load(path2).fork(at=0, reply=pick("billing"))


def test_a_block_saves_and_loads_but_does_not_fork(tmp_path):
    with run_block("cell", runtime=ScriptedRuntime([pick("x")])) as r:
        decision.make("Pick", ["x", "y"])
    r.save(tmp_path / "b.jsonl")
    loaded = Run.load(tmp_path / "b.jsonl")
    assert loaded.block and loaded.decisions[0].trace.chosen == "x"
    with pytest.raises(UsageError, match="block"):
        loaded.fork(at=0, reply=pick("y"))


def edited(path, n, change):
    rows = path.read_text(encoding="utf-8").splitlines()
    rows[n - 1] = json.dumps(change(json.loads(rows[n - 1])))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_an_edited_request_or_key_is_named(tmp_path):
    r, path = saved(tmp_path)

    def prompt(entry):
        entry["request"]["messages"][0]["content"] = "something else"
        return entry
    edited(path, 3, prompt)
    with pytest.raises(RunFileError, match=r"line 3 of the saved run .* was edited: its key is "
                                           r"not the digest of its request.*save the run again"):
        Run.load(path)
    r, path = saved(tmp_path)
    edited(path, 2, lambda e: {**e, "key": "0" * 64})
    with pytest.raises(RunFileError, match="line 2 .* was edited"):
        Run.load(path)


def test_a_cut_file_another_cassette_and_a_newer_release_are_named(tmp_path):
    r, path = saved(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:-40], encoding="utf-8")
    with pytest.raises(RunFileError, match=r"was cut off.*line 3"):
        Run.load(path)
    other = tmp_path / "rec.jsonl"
    rec = RecordingRuntime(ScriptedRuntime([pick("x")]), other)
    decision.make("Pick", ["x", "y"], runtime=rec)
    with pytest.raises(RunFileError, match=r"a cassette but not a saved run.*ReplayRuntime"):
        Run.load(other)
    r, path = saved(tmp_path)
    edited(path, 1, lambda h: {**h, "run": {**h["run"], "version": 99}})
    with pytest.raises(RunFileError, match=r"newer release.*pip install -U"):
        Run.load(path)
    with pytest.raises(FileNotFoundError):
        Run.load(tmp_path / "none.jsonl")
