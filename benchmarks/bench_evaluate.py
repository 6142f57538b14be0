"""How close `decision.evaluate` gets to ideal concurrency, and what the core costs per decision.

Runs decisions on a ScriptedRuntime with a fixed 20 ms model latency at concurrency 1, 8 and 32
and prints the wall time beside the ideal (total model latency / concurrency) and their ratio; the
target is within 1.3x of ideal at concurrency 32. The core's own overhead per decision (menu,
extraction, validation, trace, events, the pool) is measured on the same runtime with zero latency.
Concurrency 1 runs 250 decisions (5 s) rather than 1,000 (20 s) to keep the whole run short.

    .venv/bin/python benchmarks/bench_evaluate.py
"""
from __future__ import annotations

import json
import time

from openprogram import decision
from openprogram.runtimes import ScriptedRuntime

LATENCY = 0.020
TARGET = 1.3


def route(message: str, priority: int = 1) -> str:
    return f"routed {message} at {priority}"


OPTIONS = {
    "route": route,
    "refund": (lambda amount, reason="": f"refund {amount}", "Refund an order"),
    "escalate": ("Hand to a person", {"team": {"type": str, "options": ["billing", "tech"]}}),
    "ignore": ("IGNORED", "Nothing to do"),
}
PICKS = [json.dumps({"call": "route", "args": {"message": "m", "priority": 2}}),
         json.dumps({"call": "escalate", "args": {"team": "tech"}}),
         '```json\n{"call": "ignore"}\n```']


def rule(prompt: str) -> str:
    return PICKS[len(prompt) % len(PICKS)]


def inputs(n: int) -> list[dict]:
    return [{"message": f"message number {i} " + "x" * (i % 7)} for i in range(n)]


def run(n: int, concurrency: int, latency: float) -> float:
    rt = ScriptedRuntime(rule=rule, latency=latency)
    t0 = time.perf_counter()
    res = decision.evaluate("Route this message: {message}\nPick one option.", OPTIONS,
                            inputs(n), runtime=rt, concurrency=concurrency, progress=False)
    wall = time.perf_counter() - t0
    assert res.failure_rate == 0, res.summary
    return wall


def main() -> None:
    run(50, 8, 0.0)  # warm-up: imports, first-call costs
    n0 = 1000
    rt = ScriptedRuntime(rule=rule, latency=0.0)
    t0 = time.perf_counter()
    for row in inputs(n0):
        decision.make(f"Route this message: {row['message']}\nPick one option.", OPTIONS,
                      runtime=rt)
    core = (time.perf_counter() - t0) / n0
    total = run(n0, 1, 0.0) / n0
    print(f"overhead per decision at zero latency ({n0} decisions, concurrency 1):")
    print(f"  decision.make loop (normalises the option set every call){core * 1e3:7.3f} ms")
    print(f"  evaluate (normalises once; adds pool, context, observer) {total * 1e3:7.3f} ms")
    print(f"{'concurrency':>11} {'decisions':>9} {'wall s':>8} {'ideal s':>8} {'ratio':>6}")
    ratios = {}
    for concurrency, n in ((1, 250), (8, 1000), (32, 1000)):
        wall = run(n, concurrency, LATENCY)
        ideal = n * LATENCY / concurrency
        ratios[concurrency] = wall / ideal
        print(f"{concurrency:>11} {n:>9} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>6.2f}")
    ok = ratios[32] <= TARGET
    print(f"target: within {TARGET}x of ideal at concurrency 32 -> "
          f"{'met' if ok else 'MISSED'} ({ratios[32]:.2f}x)")
    print("(concurrency 1 runs 250 decisions to keep the benchmark short; its ideal is "
          "250 x 20 ms)")


if __name__ == "__main__":
    main()
