"""How fast the decision core is, offline: menu rendering, extraction of a realistic reply and a
whole decision on ScriptedRuntime for 10- and 100-option menus. Extraction on hostile replies is
measured in bench_extract.py.

Run: .venv/bin/python benchmarks/bench_decision.py   (a few seconds)
Prints figures; asserts nothing about time.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openprogram import decision  # noqa: E402
from openprogram.decision.options import normalize  # noqa: E402
from openprogram.runtimes import ScriptedRuntime  # noqa: E402
from openprogram.trace import decision_trace as trace_mod  # noqa: E402


def median_time(fn, *, repeat: int, number: int = 1) -> float:
    """Median seconds per call over `repeat` rounds of `number` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def menu_of(n: int) -> dict:
    """n options of every kind: functions with typed and enum parameters, schemas, values."""
    options: dict = {}
    for i in range(n):
        kind = i % 3
        if kind == 0:
            def fn(city: str, days: int = 1, fast: bool = False, i=i):
                return (i, city, days, fast)
            fn.__doc__ = f"Option {i}: travel somewhere."
            fn.input_meta = {"city": {"description": "where to go"}, "i": {"hidden": True}}
            options[f"travel_{i}"] = fn
        elif kind == 1:
            options[f"plan_{i}"] = (f"Option {i}: write a plan.",
                                    {"steps": [{"action": {"type": str, "options": ["a", "b"]},
                                                "n": int}], "note": "why"})
        else:
            options[f"value_{i}"] = (i, f"Option {i}: a value.")
    return options


def reply_for(options: dict) -> str:
    """A realistic reply: some reasoning, then the pick of the last function option."""
    name = [k for k in options if k.startswith("travel_")][-1]
    pick = json.dumps({"call": name, "args": {"city": "Rome", "days": 3, "fast": True}})
    return "Let me think about the options. " * 20 + f"\n```json\n{pick}\n```"


def bench_menus() -> list[tuple]:
    rows = []
    for n in (10, 100):
        options = menu_of(n)
        reply = reply_for(options)
        repeat = 30 if n == 10 else 15
        render = median_time(lambda: decision.render_options(options), repeat=repeat, number=5)
        extract = median_time(lambda: decision.extract_action(reply), repeat=repeat, number=20)

        def make():
            rt = ScriptedRuntime([reply])
            return decision.make("Pick one.", options, runtime=rt)

        assert make()[1] == "Rome"
        whole = median_time(make, repeat=repeat, number=3)
        # What evaluate() does: normalise once, then decide many times on the same Menu (whose
        # menu text and option table are built once).
        menu = normalize(options)
        reuse_rt = ScriptedRuntime(rule=lambda prompt: reply)
        reused = median_time(lambda: decision.make("Pick one.", menu, runtime=reuse_rt),
                             repeat=repeat, number=3)
        rows.append((n, render, extract, whole, reused, len(decision.render_options(options))))
    return rows


def main() -> None:
    t_start = time.perf_counter()
    trace_mod.history.clear()
    print(f"Python {sys.version.split()[0]}; medians of repeated runs\n")
    print("Menus (ScriptedRuntime, no latency):")
    print(f"{'options':>8} {'menu chars':>11} {'render_options':>15} {'extract_action':>15} "
          f"{'decision.make':>14} {'make, one Menu':>15}")
    for n, render, extract, whole, reused, chars in bench_menus():
        print(f"{n:>8} {chars:>11} {render * 1e3:>12.3f} ms {extract * 1e6:>12.1f} us "
              f"{whole * 1e3:>11.3f} ms {reused * 1e3:>12.3f} ms")
    print("(decision.make normalises the option set on every call; 'make, one Menu' reuses "
          "one normalised set, as evaluate does)")
    print(f"\ntotal run time {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
