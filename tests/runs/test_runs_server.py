"""The run is the unit (issue 51), against a loopback server that speaks OpenAI's chat
completions protocol and counts every request it gets (tests/support/fakeserver.py), through the
real OpenAI SDK: a program with three decisions — an Agent method calling `decision.make` twice,
then `agent(..., options=)` with a tool — is run; forks at its decisions send no request for
what comes before the fork point; a diff names the decision and the part where two runs part; a
program that reads a counter the recording does not hold stops with RunDiverged at the right
node; and a saved run, loaded again, forks with no server running."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from fakeserver import FAKE_KEY, FakeServer, Reply, text, tools

import openprogram
from openprogram import Agent, agent, decision
from openprogram.runs import Run, RunDiverged
from openprogram.runtimes import OpenAIRuntime

TEAMS = {"billing": "BILLING", "shipping": "SHIPPING"}
URGENCY = {"high": "HIGH", "low": "LOW"}
OUTCOMES = {"refund": "REFUNDED", "escalate": "ESCALATED", "close": "CLOSED"}
ln = math.log


def track(order: str) -> str:
    """Where an order is."""
    return f"order {order}: in transit, due Friday"


class Desk(Agent):
    """The specification's example, small: a method that decides twice, then works with a tool
    and ends in a decision."""

    def handle_ticket(self, ticket: str) -> str:
        team = decision.make(f"Ticket: {ticket}\nWhich team handles it? Pick one.", TEAMS)
        urgency = decision.make(f"Ticket: {ticket}\nHow urgent is it? Pick one.", URGENCY,
                                confidence=True)
        return agent(f"Ticket: {ticket} (team {team}, urgency {urgency}). Resolve it: track "
                     f"the order first.", tools=[track], options=OUTCOMES)


DESK = Desk()  # a module's object: `test_runs_server:DESK.handle_ticket` imports it again
TICKETS = itertools.count(1)


class CountingDesk(Desk):
    """Reads a counter the recording does not hold: each run numbers the ticket anew."""

    def handle_ticket(self, ticket: str) -> str:
        team = decision.make(f"Ticket: {ticket}\nWhich team handles it? Pick one.", TEAMS)
        n = next(TICKETS)
        urgency = decision.make(f"Ticket #{n}: {ticket}\nHow urgent is it? Pick one.", URGENCY)
        return agent(f"Ticket: {ticket} ({team}, {urgency}). Resolve it.", tools=[track],
                     options=OUTCOMES)


def tokens(before: str, name: list, after: str) -> list:
    return [(c, 0.0, []) for c in before] + name + [(c, 0.0, []) for c in after]


def respond(body: dict) -> Reply:
    """The model, by what it is asked (whatever order requests arrive in)."""
    messages = body["messages"]
    asked = json.dumps(messages[0]["content"])
    if "Which team" in asked:
        return text('{"call": "shipping"}')
    if "How urgent" in asked:
        # high 0.7, low 0.3: the pick is "high" and the runner-up "low"
        return Reply(text='{"call": "high"}', logprobs=tokens(
            '{"call": "', [("high", ln(0.7), [("high", ln(0.7)), ("low", ln(0.3))])], '"}'))
    if any(m.get("role") == "tool" for m in messages):
        return text('Tracked: in transit.\n```json\n{"call": "close"}\n```')
    return tools(("c1", "track", {"order": "42"}))


@pytest.fixture
def server():
    with FakeServer("openai", responder=respond) as s:
        yield s


def model(server) -> OpenAIRuntime:
    return OpenAIRuntime(model="m", base_url=server.base_url, api_key=FAKE_KEY, max_retries=0)


def same(trace) -> dict:
    """A trace as data without what differs between two runs of the same decision: its id,
    its clock times and the DAG ids of its model calls."""
    d = trace.to_dict()
    for k in ("id", "started_at", "duration_s"):
        d.pop(k)
    for a in d["attempts"]:
        for k in ("started_at", "duration_s", "model_call_id"):
            a.pop(k, None)
    return d


ESCALATE = '```json\n{"call": "escalate"}\n```'


@pytest.fixture
def recorded(server):
    r = openprogram.run(DESK.handle_ticket, "Where is order 42?", runtime=model(server))
    assert r.status == "ok" and r.result == "CLOSED", r.error
    assert len(server.requests) == 4  # two decisions, then the turn: a tool round and the pick
    return r


def test_the_run_records_three_decisions_with_the_tool_between(recorded):
    assert [d.name for d in recorded.decisions] == ["decision.make", "decision.make",
                                                    "agent(options=)"]
    assert [d.trace.chosen for d in recorded.decisions] == ["shipping", "high", "close"]
    kinds = [n.kind for n in recorded.decisions[2].children]
    assert kinds == ["model_call", "tool", "model_call"]
    assert recorded.decisions[1].trace.confidence.runner_up == "low"
    assert recorded.totals["input_tokens"] == 4 * 11  # the server's usage, each call
    assert FAKE_KEY not in json.dumps(recorded.to_dict())


def test_a_fork_at_the_third_decision_sends_nothing_before_it(server, recorded):
    sent = len(server.requests)
    fork = recorded.fork(at=2, reply=ESCALATE)
    assert len(server.requests) == sent  # decisions 0 and 1 from the recording, 2 from the reply
    assert fork.result == "ESCALATED" and fork.forked_from is recorded and fork.fork_point == 2
    for a, b in zip(recorded.decisions[:2], fork.decisions[:2]):
        assert same(a.trace) == same(b.trace)
    assert [c.source for c in fork.calls] == ["recording", "recording", "edit"]
    third = fork.decisions[2].trace
    assert third.attempts[0].reply == ESCALATE and third.chosen == "escalate"
    assert third.tool_rounds == []  # the model is taken to have written the pick at once
    diff = recorded.diff(fork)
    assert diff.first.index == 2 and diff.first.part == "reply" and diff.common == 2
    assert diff.first.a is recorded.decisions[2] and diff.first.b is fork.decisions[2]
    # the original is untouched
    assert recorded.result == "CLOSED" and len(recorded.calls) == 4
    assert [c.source for c in recorded.calls] == ["live"] * 4


def test_a_fork_to_the_runner_up_resolves_it_without_asking(server, recorded):
    sent = len(server.requests)
    fork = recorded.fork(at=1, pick="runner_up")
    second = fork.decisions[1].trace
    assert second.chosen == "low" and fork.edit["value"] == "low"
    # a value option has nothing for the model to fill: no request for decision 1; the turn
    # after it goes to the runtime (a tool round and the pick)
    assert len(server.requests) == sent + 2
    assert "urgency LOW" in json.dumps(server.requests[-2].body["messages"])
    assert fork.result == "CLOSED"
    assert [c.source for c in fork.calls] == ["recording", "edit", "live", "live"]
    # held to one option (its menu that option alone, no reply asked), decision 1 differs
    # first in what the fork changed: its pick
    diff = recorded.diff(fork)
    assert (diff.first.index, diff.first.part) == (1, "pick")
    assert (diff.first.a_value, diff.first.b_value) == ("high", "low")
    assert [o["name"] for o in fork.decisions[1].trace.options] == ["low"]


def test_a_fork_with_another_runtime_sends_the_later_calls_there_only(server, recorded):
    with FakeServer("openai", responder=respond) as other:
        sent = len(server.requests)
        fork = recorded.fork(at=1, runtime=model(other))
        assert len(server.requests) == sent  # the first server gets nothing more
        assert len(other.requests) == 3      # decision 1, and the turn of decision 2
        assert "How urgent" in json.dumps(other.requests[0].body["messages"])
    assert fork.result == "CLOSED"
    assert [c.source for c in fork.calls] == ["recording", "live", "live", "live"]
    assert recorded.diff(fork).first is None  # the same answers from the other server


def test_a_program_reading_a_counter_stops_at_the_decision_that_reads_it(server):
    r = openprogram.run(CountingDesk().handle_ticket, "Where is order 42?",
                        runtime=model(server))
    assert r.status == "ok"
    sent = len(server.requests)
    with pytest.raises(RunDiverged) as info:
        r.fork(at=2, reply=ESCALATE)
    err = info.value
    assert len(server.requests) == sent  # nothing was sent
    assert err.decision.index == 1 and err.node.kind == "model_call"
    assert err.node.up is err.decision and err.decision.run is err.run
    assert "Ticket #1:" in json.dumps(err.expected) and "Ticket #2:" in json.dumps(err.actual)
    message = str(err)
    assert "decision 1" in message and "test_runs_server.py" in message
    assert "Ticket #1" in message and "Ticket #2" in message  # both requests shown
    assert "argument of the program" in message  # and the fix


def test_a_saved_run_forks_with_no_server_for_the_prefix(tmp_path):
    path = tmp_path / "ticket.run.jsonl"
    with FakeServer("openai", responder=respond) as server:
        r = openprogram.run(DESK.handle_ticket, "Where is order 42?", runtime=model(server))
        r.save(path)
    # the server is gone: a request would fail
    raw = Path(path).read_text(encoding="utf-8")
    assert FAKE_KEY not in raw and FAKE_KEY[-12:] not in raw
    loaded = Run.load(path)
    assert loaded.name == r.name and loaded.result == "CLOSED"
    assert [same(d.trace) for d in loaded.decisions] == [same(d.trace) for d in r.decisions]
    assert [n.to_dict() for n in loaded.nodes] == [n.to_dict() for n in r.nodes]
    fork = loaded.fork(at=2, reply=ESCALATE)
    assert fork.status == "ok" and fork.result == "ESCALATED"
    assert [c.source for c in fork.calls] == ["recording", "recording", "edit"]
    assert loaded.diff(fork).first.index == 2
    # and to the runner-up: decision 2 needs a model now, which a loaded run has not
    fork = loaded.fork(at=1, pick="runner_up")
    assert fork.decisions[1].trace.chosen == "low"
    assert fork.status == "error" and "runtime=" in str(fork.error)
