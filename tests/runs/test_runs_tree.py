"""A run's tree (issue 51): `openprogram.run` records a program's method calls, decisions, model
calls and tool calls under one root, each decision with its trace and the user's call site; the
live hook reports every node as it starts and ends; `to_dict()` / `tree()` are JSON."""
from __future__ import annotations

import json

import pytest

import openprogram
from openprogram import Agent, ToolCall, UsageError, agent, decision
from openprogram.runs import Run, RunEvent, on_run, run_block
from openprogram.runtimes import ScriptedRuntime


def pick(name, **args):
    return "```json\n" + json.dumps({"call": name, **({"args": args} if args else {})}) + "\n```"


def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


class Support(Agent):
    def handle(self, ticket: str):
        kind = decision.make(f"Kind of ticket: {ticket}", ["billing", "shipping"])
        urgency = decision.make("How urgent?", {"low": 1, "high": 2})
        return agent(f"Handle: {ticket} ({kind}, {urgency})", tools=[lookup],
                     options={"refund": "REFUND", "close": {"status": "closed"}})


SCRIPT = [pick("shipping"), pick("high"), ToolCall("lookup", {"order": "42"}), pick("close")]


def test_a_run_holds_the_whole_tree_in_order():
    rt = ScriptedRuntime(list(SCRIPT))
    r = openprogram.run(Support().handle, "where is 42", runtime=rt)
    assert isinstance(r, Run) and r.status == "ok" and r.error is None
    assert r.result == {"status": "closed"}
    assert [(n.id, n.kind, n.parent) for n in r.nodes] == [
        ("n0", "run", None), ("n1", "agent_method", "n0"),
        ("n2", "decision", "n1"), ("n3", "model_call", "n2"),
        ("n4", "decision", "n1"), ("n5", "model_call", "n4"),
        ("n6", "decision", "n1"), ("n7", "model_call", "n6"), ("n8", "tool", "n6"),
        ("n9", "model_call", "n6")]
    assert [d.index for d in r.decisions] == [0, 1, 2]
    assert [d.trace.chosen for d in r.decisions] == ["shipping", "high", "close"]
    # each decision's call site is the line of this file that made it
    lines = [d.site.line for d in r.decisions]
    assert len(set(lines)) == 3 and all(d.site.file == __file__ for d in r.decisions)
    assert [d.site.function for d in r.decisions] == ["Support.handle"] * 3
    # the agent method the run called is the run's entry, made from no line of the program
    assert r.nodes[1].site is None
    assert [n.in_decision for n in r.nodes] == [None, None, 0, 0, 1, 1, 2, 2, 2, 2]
    assert r.nodes[9].attempt == 1 and r.nodes[7].attempt == 1
    t = r.totals
    assert (t["decisions"], t["model_calls"], t["tool_calls"], t["attempts"], t["live"],
            t["recorded"]) == (3, 4, 1, 3, 4, 0)
    assert t["input_tokens"] == sum(c.input_tokens for c in r.nodes if c.kind == "model_call")
    assert len(r.calls) == 4 and [c.decision for c in r.calls] == [0, 1, 2, 2]


def test_to_dict_and_tree_are_json_and_nest_the_nodes():
    r = openprogram.run(Support().handle, "where is 42", runtime=ScriptedRuntime(list(SCRIPT)))
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert [n["id"] for n in d["nodes"]] == [f"n{i}" for i in range(10)]
    assert d["nodes"][2]["decision"]["chosen"] == "shipping"
    assert d["nodes"][2]["site"]["function"] == "Support.handle"
    tree = json.loads(json.dumps(r.tree()))
    assert tree["id"] == "n0" and tree["children"][0]["id"] == "n1"
    assert [c["kind"] for c in tree["children"][0]["children"]] == ["decision"] * 3
    assert [c["name"] for c in tree["children"][0]["children"][2]["children"]] == \
        ["model_call", "lookup", "model_call"]


def test_watchers_see_each_node_start_and_end_as_the_run_grows():
    seen: list[tuple[str, str | None, int]] = []

    def attach(run):
        def on_event(e: RunEvent):
            # the node is in the run when it is reported
            seen.append((e.kind, None if e.node is None else e.node.id, len(e.run.nodes)))
        run.watch(on_event)
    with on_run(attach):
        r = openprogram.run(Support().handle, "x", runtime=ScriptedRuntime(list(SCRIPT)))
    starts = [(i, n) for k, i, n in seen if k == "node_started"]
    assert [i for i, _ in starts] == [f"n{i}" for i in range(10)]  # the root first
    assert [n for _, n in starts] == list(range(1, 11))  # reported as each one is added
    assert sorted(i for k, i, _ in seen if k == "node_finished") == \
        sorted(f"n{i}" for i in range(10))
    # each node ends after it started; the root last, then the run
    order = [(k, i) for k, i, _ in seen]
    for i in range(10):
        assert order.index(("node_started", f"n{i}")) < order.index(("node_finished", f"n{i}"))
    assert order[-2:] == [("node_finished", "n0"), ("run_finished", None)]
    assert r.status == "ok"


def test_the_programs_error_is_the_runs_not_raised():
    def program():
        decision.make("Pick", ["a", "b"])
    r = openprogram.run(program, runtime=ScriptedRuntime(["no pick here", "still none"]))
    assert r.status == "error" and isinstance(r.error, openprogram.DecisionError)
    assert r.decisions[0].trace.status == "failed" and len(r.decisions[0].trace.attempts) == 2


def test_a_block_is_recorded_and_cannot_be_forked():
    rt = ScriptedRuntime([pick("a")])
    with run_block("cell", runtime=rt) as r:
        assert decision.make("Pick", ["a", "b"]) == "a"
    assert r.status == "ok" and len(r.decisions) == 1 and r.name == "cell"
    with pytest.raises(UsageError, match=r"block.*cannot be forked.*openprogram.run\(fn\)"):
        r.fork(at=0, reply=pick("b"))


def test_a_run_inside_a_run_is_refused():
    def inner():
        return openprogram.run(lambda: 1)
    r = openprogram.run(inner)
    assert isinstance(r.error, UsageError) and "inside another run" in str(r.error)


def test_bad_program_and_runtime_are_named():
    with pytest.raises(UsageError, match="callable"):
        openprogram.run(42)
    with pytest.raises(UsageError, match=r"runtime=\) takes an openprogram Runtime"):
        openprogram.run(lambda: 1, runtime="gpt")


def test_to_frame_lists_the_nodes_and_the_decisions():
    r = openprogram.run(Support().handle, "where is 42", runtime=ScriptedRuntime(list(SCRIPT)))
    nodes = r.to_frame()
    assert list(nodes.index) == [f"n{i}" for i in range(10)]
    assert list(nodes["kind"])[:3] == ["run", "agent_method", "decision"]
    assert nodes.loc["n2", "chosen"] == "shipping" and nodes.loc["n2", "site"].startswith(
        "test_runs_tree.py:")
    decisions = r.to_frame("decisions")
    assert list(decisions["chosen"]) == ["shipping", "high", "close"]
    assert list(decisions["attempts"]) == [1, 1, 1]
    assert decisions["input_tokens"].sum() == r.totals["input_tokens"]
    with pytest.raises(UsageError, match="'nodes' and 'decisions'"):
        r.to_frame("calls")


def test_a_node_is_found_by_its_id_and_knows_its_place():
    r = openprogram.run(Support().handle, "where is 42", runtime=ScriptedRuntime(list(SCRIPT)))
    node = r.node("n8")
    assert node.kind == "tool" and node.name == "lookup" and node.decision is r.decisions[2]
    assert node.depth == 3 and [n.id for n in node.path] == ["n0", "n1", "n6", "n8"]
    assert node.run is r and r.root.children == [r.nodes[1]]
    with pytest.raises(KeyError, match="no node 'n10'.*n0 to n9"):
        r.node("n10")


def test_view_is_the_registered_ones_and_names_the_fix_without_one():
    from openprogram.runs import register_run_view, views
    before = views._factory  # (the notebook layer's, when a test before this loaded it)
    r = openprogram.run(Support().handle, "where is 42", runtime=ScriptedRuntime(list(SCRIPT)))
    try:
        register_run_view(None)
        with pytest.raises(UsageError, match=r"%load_ext openprogram"):
            r.view()
        register_run_view(lambda thing: ("a view of", thing))
        assert r.view() == ("a view of", r)
        d = r.diff(r)
        assert d.view() == ("a view of", d)
    finally:
        register_run_view(before)


def test_a_watcher_or_on_run_hook_that_raises_is_reported_and_the_run_goes_on():
    def bad(_):
        raise RuntimeError("a broken view")
    with pytest.warns(RuntimeWarning, match="on_run callback"), on_run(bad):
        r = openprogram.run(Support().handle, "x", runtime=ScriptedRuntime(list(SCRIPT)))
    assert r.status == "ok"
    with pytest.warns(RuntimeWarning, match="run watcher .* removed"), on_run(
            lambda run: run.watch(bad)):
        r = openprogram.run(Support().handle, "x", runtime=ScriptedRuntime(list(SCRIPT)))
    assert r.status == "ok" and r.watchers == ()
