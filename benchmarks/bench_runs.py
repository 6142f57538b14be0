"""What recording a run costs (issue 51): the same program with and without `openprogram.run`.

Two programs, on the scripted model (no latency, so the model costs nothing and the library's
own work is all there is to measure):

- "minimal": an Agent method making `--decisions` decisions in a row with `decision.make` on
  three value options: the cheapest decision there is, where a run's own work weighs most;
- "ticket": the specification's example, a router whose option is an Agent's `handle_ticket`,
  which makes two decisions and then works with a tool and ends in a decision
  (`agent(..., options=)`): four decisions and five model calls a ticket, `--tickets` tickets
  a run.

Each round times the program called directly, then under `openprogram.run(...)` (recording
every node, call site, trace and model call), alternated (plain, run, plain, run, ...) so a
change of load on this shared machine hits both sides, each in the processor time of this
thread (wall time counts whatever else the machine runs); the figure is the median of each
side's time per decision and the median of the per-round ratios. Processor time still moves
with the machine's load (caches shared with other work), so `--instructions` also counts the
instructions each side executes, under valgrind's callgrind when it is installed: the same
figure on a loaded machine and an idle one (a few minutes). Target: overhead <= 5 %.

A fork is timed too (`run.fork(at=last, reply=...)`, everything before the last decision
answered from the recording), per decision, beside the live run.

Run: .venv/bin/python benchmarks/bench_runs.py [--rounds 41] [--instructions]
Prints figures and ratios; asserts nothing about time.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openprogram  # noqa: E402
from openprogram import Agent, agent, decision  # noqa: E402
from openprogram.runtimes import ScriptedRuntime, ToolCall  # noqa: E402

TARGET = 0.05
OPTIONS = {"billing": "BILLING", "shipping": "SHIPPING", "other": "OTHER"}
REPLY = '```json\n{"call": "shipping"}\n```'


class Desk(Agent):
    """The minimal program: `n` decisions in a row."""

    def __init__(self, runtime, n: int):
        super().__init__(runtime)
        self.n = n

    def work(self, ticket: str) -> list:
        return [decision.make(f"Ticket {i}: {ticket}. Which team?", OPTIONS)
                for i in range(self.n)]


def track(order: str) -> str:
    """Where an order is."""
    return f"order {order}: in transit"


class Support(Agent):
    method_options = {"handle_ticket": {"tool": True}}

    def handle_ticket(self, ticket: str) -> str:
        """Handle a support ticket."""
        team = decision.make(f"Ticket: {ticket}\nWhich team handles it?", {
            "billing": "BILLING", "shipping": "SHIPPING", "returns": "RETURNS"})
        urgency = decision.make(f"Ticket: {ticket}\nHow urgent is it?", {
            "high": "HIGH", "normal": "NORMAL", "low": "LOW"})
        return agent(f"Ticket: {ticket} ({team}, {urgency}). Resolve it: track the order "
                     f"first.", tools=[track],
                     options={"refund": "REFUNDED", "escalate": "ESCALATED",
                              "close": {"status": "closed"}})


_turns = {"n": 0}


def answer(prompt: str):
    """The scripted model of the ticket program (a rule of the last user message: a turn's
    tool round asks the same message again, so the turn's calls alternate)."""
    if "Route" in prompt:
        return '```json\n{"call": "support", "args": {"ticket": "where is 42"}}\n```'
    if "Which team" in prompt:
        return '```json\n{"call": "shipping"}\n```'
    if "How urgent" in prompt:
        return '```json\n{"call": "high"}\n```'
    _turns["n"] += 1
    if _turns["n"] % 2:
        return ToolCall("track", {"order": "42"})
    return 'Tracked.\n```json\n{"call": "close"}\n```'


class Router(Agent):
    def __init__(self, runtime, tickets: int):
        super().__init__(runtime)
        self.support, self.tickets = Support(), tickets

    def route_all(self, message: str) -> list:
        return [decision.make(f"Message {i}: {message}. Route it.",
                              {"support": self.support.handle_ticket, "ignore": "IGNORED"})
                for i in range(self.tickets)]


def programs(decisions: int, tickets: int) -> dict:
    """name -> (the program, its argument, decisions a call makes)."""
    desk = Desk(ScriptedRuntime(rule=lambda prompt: REPLY), decisions)
    router = Router(ScriptedRuntime(rule=answer), tickets)
    return {"minimal": (desk.work, "where is 42", decisions),
            "ticket": (router.route_all, "where is my order 42?", 4 * tickets)}


def timed(fn) -> float:
    """The processor time this thread spent in `fn()`."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def measure(name: str, fn, arg, n: int, rounds: int) -> dict:
    for _ in range(5):  # warm: option cache, menus, code paths
        fn(arg)
        openprogram.run(fn, arg)
    gc.collect()
    plain, run, ratios = [], [], []
    for _ in range(rounds):
        a = timed(lambda: fn(arg))
        b = timed(lambda: openprogram.run(fn, arg))
        plain.append(a / n)
        run.append(b / n)
        ratios.append(b / a)
    recorded = openprogram.run(fn, arg)
    assert recorded.status == "ok" and len(recorded.decisions) == n, recorded.error
    last = recorded.decisions[-1]
    reply = last.trace.attempts[-1].reply
    forks = [timed(lambda: recorded.fork(at=n - 1, reply=reply)) / n
             for _ in range(max(5, rounds // 4))]
    p, r = statistics.median(plain), statistics.median(run)
    return {"program": name, "decisions_per_run": n, "rounds": rounds,
            "nodes_per_decision": round((len(recorded.nodes) - 1) / n, 2),
            "plain_us_per_decision": round(p * 1e6, 2),
            "run_us_per_decision": round(r * 1e6, 2),
            "overhead_cpu": round(statistics.median(ratios) - 1, 4),
            "fork_us_per_decision": round(statistics.median(forks) * 1e6, 2)}


def child(side: str, name: str, calls: int, decisions: int, tickets: int) -> None:
    """Run one side `calls` times (after the same warm-up as `measure`), for callgrind."""
    fn, arg, _ = programs(decisions, tickets)[name]
    for _ in range(5):
        fn(arg)
        openprogram.run(fn, arg)
    for _ in range(calls):
        fn(arg) if side == "plain" else openprogram.run(fn, arg)


def instructions(name: str, n: int, decisions: int, tickets: int) -> dict | None:
    """Instructions per decision of each side, counted by callgrind: the difference between
    3 and 11 calls of the program, so start-up and warm-up cancel out."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = {}
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        for side in ("plain", "run"):
            for calls in (3, 11):
                out = subprocess.run(
                    [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp}/cg",
                     sys.executable, __file__, "--child", side, name, str(calls),
                     "--decisions", str(decisions), "--tickets", str(tickets)],
                    capture_output=True, text=True, env=env, check=True).stderr
                line = next(x for x in out.splitlines() if "Collected" in x)
                counts[side, calls] = int(line.split()[-1])
    per = {side: (counts[side, 11] - counts[side, 3]) / (8 * n) for side in ("plain", "run")}
    return {"plain_instructions_per_decision": round(per["plain"]),
            "run_instructions_per_decision": round(per["run"]),
            "overhead_instructions": round(per["run"] / per["plain"] - 1, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--decisions", type=int, default=50, help="decisions of the minimal run")
    ap.add_argument("--tickets", type=int, default=12, help="tickets of the ticket run")
    ap.add_argument("--rounds", type=int, default=41, help="rounds of each side, alternated")
    ap.add_argument("--program", choices=["minimal", "ticket", "both"], default="both")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions under valgrind's callgrind (minutes)")
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "PROGRAM", "CALLS"),
                    help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        side, name, calls = ns.child
        return child(side, name, int(calls), ns.decisions, ns.tickets)
    names = ["minimal", "ticket"] if ns.program == "both" else [ns.program]
    table = programs(ns.decisions, ns.tickets)
    for name in names:
        fn, arg, n = table[name]
        out = measure(name, fn, arg, n, ns.rounds)
        if ns.instructions:
            counted = instructions(name, n, ns.decisions, ns.tickets)
            out.update(counted or {"instructions": "valgrind is not installed"})
        print(json.dumps(out, indent=2))
        for key in ("overhead_cpu", "overhead_instructions"):
            if key in out:
                over = out[key]
                print(f"{name}: recording overhead ({key.split('_')[1]}) {over:+.1%} per "
                      f"decision (target <= {TARGET:.0%}): "
                      f"{'MET' if over <= TARGET else 'NOT MET'}")


if __name__ == "__main__":
    main()
