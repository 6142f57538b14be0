"""What recording a run costs (issue 51): the same program with and without `openprogram.run`.

The program is an Agent method that makes `--decisions` decisions in a row with `decision.make`
(three value options, the scripted model answering every call by a rule, no latency): the case
where the run's own work weighs most, since the model costs nothing. Each round times the
program called directly, then the same program under `openprogram.run(...)` (recording every
node, call site, trace and model call), in alternation (plain, run, plain, run, ...), so a
change of load on this shared machine hits both sides, each timed in the processor time of this
thread (wall time counts whatever else the machine runs); the figure is the median over rounds
of each side's time per decision, and the overhead is the median of the per-round ratios.
Target: overhead <= 5 %.

A fork is timed too (`run.fork(at=last, reply=...)`: every decision before the last answered
from the recording), per decision, beside the live run: what a fork costs instead of asking.

Run: .venv/bin/python benchmarks/bench_runs.py [--decisions 50] [--rounds 41]
Prints figures and ratios; asserts nothing about time.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openprogram  # noqa: E402
from openprogram import Agent, decision  # noqa: E402
from openprogram.runtimes import ScriptedRuntime  # noqa: E402

TARGET = 0.05
OPTIONS = {"billing": "BILLING", "shipping": "SHIPPING", "other": "OTHER"}
REPLY = '```json\n{"call": "shipping"}\n```'


class Desk(Agent):
    def __init__(self, runtime, n: int):
        super().__init__(runtime)
        self.n = n

    def work(self, ticket: str) -> list:
        return [decision.make(f"Ticket {i}: {ticket}. Which team?", OPTIONS)
                for i in range(self.n)]


def timed(fn) -> float:
    """The processor time this thread spent in `fn()`: the machine is shared, and wall time
    counts whatever else runs meanwhile."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--decisions", type=int, default=50, help="decisions per program")
    ap.add_argument("--rounds", type=int, default=41, help="rounds of each side, alternated")
    ns = ap.parse_args()
    n = ns.decisions
    rt = ScriptedRuntime(rule=lambda prompt: REPLY, usage=True)
    desk = Desk(rt, n)
    for _ in range(5):  # warm: option cache, menus, code paths
        desk.work("where is 42")
        openprogram.run(desk.work, "where is 42")
    gc.collect()
    plain, run, ratios = [], [], []
    for _ in range(ns.rounds):
        a = timed(lambda: desk.work("where is 42"))
        b = timed(lambda: openprogram.run(desk.work, "where is 42"))
        plain.append(a / n)
        run.append(b / n)
        ratios.append(b / a)
    recorded = openprogram.run(desk.work, "where is 42")
    forks = [timed(lambda: recorded.fork(at=n - 1, reply=REPLY)) / n
             for _ in range(max(5, ns.rounds // 4))]
    p, r = statistics.median(plain), statistics.median(run)
    over = statistics.median(ratios) - 1
    out = {"decisions_per_program": n, "rounds": ns.rounds,
           "plain_us_per_decision": round(p * 1e6, 2), "run_us_per_decision": round(r * 1e6, 2),
           "overhead_us_per_decision": round((r - p) * 1e6, 2),
           "overhead": round(over, 4), "target": TARGET,
           "fork_us_per_decision": round(statistics.median(forks) * 1e6, 2),
           "nodes_per_decision": round((len(recorded.nodes) - 2) / n, 2)}
    print(json.dumps(out, indent=2))
    print(f"recording overhead: {over:+.1%} per decision (target <= {TARGET:.0%}): "
          f"{'MET' if over <= TARGET else 'NOT MET'}")


if __name__ == "__main__":
    main()
