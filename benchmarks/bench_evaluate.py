"""How close `evaluate` and `aevaluate` get to ideal concurrency, each beside its ideal in one run.

The headline: 2,000 decisions at concurrency 128 on an async model that sleeps 20 ms — wall time,
the ideal (2000 / 128 x 20 ms = 312.5 ms) and their ratio, target <= 1.2x — through `evaluate`
(rows as tasks on one event loop in a worker thread) and `aevaluate` (on the caller's loop),
three runs each, with the processor time each took.
Then `evaluate` at concurrency 32 and 128 on both kinds of model: the async one, and
ScriptedRuntime with a 20 ms latency, whose synchronous model runs on a thread pool. First, what
the core costs per decision at zero latency, which is what limits the ratio.

    .venv/bin/python benchmarks/bench_evaluate.py     (about 30 s on 2 cores)
"""
from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import time

from openprogram import Runtime, decision
from openprogram.runtimes import ScriptedRuntime

LATENCY = 0.020
TARGET = 1.2


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
PROMPT = "Route this message: {message}\nPick one option."


def rule(prompt: str) -> str:
    return PICKS[len(prompt) % len(PICKS)]


async def async_model(content):
    """An async model: 20 ms of waiting (a network call), then a pick."""
    await asyncio.sleep(LATENCY)
    return rule(content[-1]["text"])


def inputs(n: int) -> list[dict]:
    return [{"message": f"message number {i} " + "x" * (i % 7)} for i in range(n)]


def checked(res) -> float:
    assert res.failure_rate == 0 and res.finished == len(res), res.summary
    return res.wall_s


def run_evaluate(rt, n: int, concurrency: int) -> float:
    t0 = time.perf_counter()
    checked(decision.evaluate(PROMPT, OPTIONS, inputs(n), runtime=rt, concurrency=concurrency,
                              progress=False))
    return time.perf_counter() - t0


def run_aevaluate(rt, n: int, concurrency: int) -> float:
    async def main():
        t0 = time.perf_counter()
        checked(await decision.aevaluate(PROMPT, OPTIONS, inputs(n), runtime=rt,
                                         concurrency=concurrency, progress=False))
        return time.perf_counter() - t0
    return asyncio.run(main())


def overhead() -> list[tuple[str, float]]:
    n = 2000
    rows = inputs(n)
    out = []
    rt = ScriptedRuntime(rule=rule)
    t0 = time.perf_counter()
    for row in rows:
        decision.make(PROMPT.format(**row), OPTIONS, runtime=rt)
    out.append(("decision.make loop, scripted model", (time.perf_counter() - t0) / n))

    async def instant(content):
        return rule(content[-1]["text"])
    art = Runtime(call=instant)

    async def amakes():
        t0 = time.perf_counter()
        for row in rows:
            await decision.amake(PROMPT.format(**row), OPTIONS, runtime=art)
        return (time.perf_counter() - t0) / n
    out.append(("decision.amake loop, async model", asyncio.run(amakes())))
    out.append(("evaluate, async model, concurrency 128",
                run_evaluate(art, n, 128) / n))
    out.append(("evaluate, scripted model (threads), concurrency 8",
                run_evaluate(ScriptedRuntime(rule=rule), n, 8) / n))
    return out


def main() -> None:
    t_start = time.perf_counter()
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
          f"CPU(s), load average {os.getloadavg()[0]:.1f} at start\n")
    run_evaluate(Runtime(call=async_model), 200, 64)  # warm-up: imports, first-call costs
    print("The core's own cost per decision at zero model latency (2,000 decisions):")
    for label, seconds in overhead():
        print(f"  {label:<52} {seconds * 1e3:7.3f} ms")

    print(f"\n2,000 decisions at concurrency 128 on an async model that sleeps "
          f"{LATENCY * 1e3:.0f} ms, three runs each:")
    n, c = 2000, 128
    ideal = n / c * LATENCY
    print(f"{'':>10} {'run':>4} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'CPU s':>7}")
    ratios: dict[str, list[float]] = {}
    for label, run in (("evaluate", run_evaluate), ("aevaluate", run_aevaluate)):
        for k in range(1, 4):
            cpu = time.process_time()
            wall = run(Runtime(call=async_model), n, c)
            cpu = time.process_time() - cpu
            ratios.setdefault(label, []).append(wall / ideal)
            print(f"{label:>10} {k:>4} {wall:>8.3f} {ideal:>8.3f} {wall / ideal:>6.2f} "
                  f"{cpu:>7.3f}")
    print("(CPU s: the processor time the run took. On a shared machine other processes only "
          "add wall time, so the best run is the closest to what the code itself costs.)")
    for label, rs in ratios.items():
        best, median = min(rs), statistics.median(rs)
        print(f"target: {label} within {TARGET}x of ideal -> best {best:.2f}x "
              f"({'met' if best <= TARGET else 'MISSED'}), median {median:.2f}x "
              f"({'met' if median <= TARGET else 'MISSED'})")

    print(f"\nevaluate against the ideal (decisions x {LATENCY * 1e3:.0f} ms / concurrency):")
    print(f"{'model':<28} {'concurrency':>11} {'decisions':>9} {'wall s':>8} {'ideal s':>8} "
          f"{'ratio':>6}")
    for label, make_rt in (("async (tasks on one loop)", lambda: Runtime(call=async_model)),
                           ("scripted (thread pool)",
                            lambda: ScriptedRuntime(rule=rule, latency=LATENCY))):
        for concurrency, n in ((32, 1000), (128, 2000)):
            wall = run_evaluate(make_rt(), n, concurrency)
            ideal = n * LATENCY / concurrency
            print(f"{label:<28} {concurrency:>11} {n:>9} {wall:>8.3f} {ideal:>8.3f} "
                  f"{wall / ideal:>6.2f}")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; total run time "
          f"{time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
