"""Evaluation at scale and the cache's lookup cost, each measured in a process of its own.

1. `--rows` rows (default 1,000,000) from a generator on an async model that answers at once,
   with a journal: peak RSS above the interpreter's start (target <= 300 MB), wall time, and
   the core's own processor time per row (target <= 0.15 ms), with what it is spent on (a
   profile of a 20,000-row slice, grouped by module).
2. `--plain-rows` rows (default 100,000) the same way without a journal (every trace in memory).
3. The cache: a cache file of `--entries` entries (default 100,000), opened by CachedRuntime,
   then 20,000 lookups of requests it holds: the time per lookup (target <= 50 us) and the
   processor time of it, the time to open the file, and the inner model's calls (0).

    .venv/bin/python benchmarks/bench_scale.py                  (the full million: minutes)
    .venv/bin/python benchmarks/bench_scale.py --rows 200000    (what fits a busy machine)
    .venv/bin/python benchmarks/bench_scale.py --gc-off         (the collector's share out)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PROMPT = "Route this message: {message}\nPick one option."
PICKS = [json.dumps({"call": "route", "args": {"message": "m", "priority": 2}}),
         json.dumps({"call": "escalate", "args": {"team": "tech"}}),
         '```json\n{"call": "ignore"}\n```']


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def route(message: str, priority: int = 1) -> str:
    return f"routed {message} at {priority}"


def options():
    return {
        "route": route,
        "refund": (lambda amount, reason="": f"refund {amount}", "Refund an order"),
        "escalate": ("Hand to a person", {"team": {"type": str, "options": ["billing", "tech"]}}),
        "ignore": ("IGNORED", "Nothing to do"),
    }


def rows(n: int):
    for i in range(n):
        yield {"message": f"message number {i} " + "x" * (i % 7)}


def runtime():
    from openprogram import Runtime

    async def model(content):  # an async model that answers at once
        return PICKS[len(content[-1]["text"]) % 3]
    return Runtime(call=model, model="instant")


def one_run(n: int, journal: bool, concurrency: int, gc_off: bool = False) -> dict:
    """Run in a fresh process: the figures of one evaluation (with `gc_off`, the garbage
    collector's share taken out, to tell it from the library's own)."""
    if gc_off:
        import gc
        gc.disable()
    start = rss_mb()
    from openprogram import decision
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.jsonl") if journal else None
        cpu0, t0 = time.process_time(), time.perf_counter()
        res = decision.evaluate(PROMPT, options(), rows(n), total=n, runtime=runtime(),
                                concurrency=concurrency, journal=path, progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        assert res.finished == n and res.failure_rate == 0, res.summary
        size = os.path.getsize(path) if path else 0
        picks = res.pick_counts["count"].to_dict()
    return {"rows": n, "journal": journal, "wall_s": wall, "cpu_s": cpu,
            "cpu_ms_per_row": cpu / n * 1000, "rows_per_s": n / wall,
            "rss_start_mb": start, "peak_above_start_mb": peak_mb() - start,
            "journal_mb": size / 2**20, "picks": picks}


def profile(n: int) -> dict:
    """Where the core's time goes on `n` journaled rows: own time per module, in us per row."""
    import asyncio
    import cProfile
    import pstats

    from openprogram import decision
    prof = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        # aevaluate: the rows run on this thread's loop, where the profiler sees them
        # (evaluate runs them on a loop in a worker thread)
        prof.enable()
        asyncio.run(decision.aevaluate(PROMPT, options(), rows(n), total=n, runtime=runtime(),
                                       concurrency=64, journal=os.path.join(tmp, "p.jsonl"),
                                       progress=False))
        prof.disable()
    stats = pstats.Stats(prof).stats
    by: dict[str, float] = {}
    for (file, _, _), (_, _, tottime, _, _) in stats.items():
        if "openprogram" in file:
            key = "openprogram/" + file.split("openprogram/")[-1]
        elif file == "~":
            key = "C builtins (json encoding, writes, copies)"
        elif "asyncio" in file:
            key = "asyncio"
        else:
            key = "other stdlib (" + os.path.basename(file) + ")"
        by[key] = by.get(key, 0.0) + tottime
    total = sum(by.values())
    top = sorted(by.items(), key=lambda kv: -kv[1])[:10]
    return {"rows": n, "us_per_row_profiled": total / n * 1e6,
            "top": [(k, v / n * 1e6, v / total) for k, v in top]}


def cache_lookup(entries: int, lookups: int = 20000) -> dict:
    """A cache file of `entries` calls, opened and asked `lookups` requests it holds."""
    import random

    from openprogram import Runtime
    from openprogram.runtimes import CachedRuntime
    from openprogram.runtimes.cassette.cassette_file import (
        header,
        keyed_line,
        line,
        request_key,
        request_record,
        settings_of,
    )

    def never(content):
        raise AssertionError("the inner model was called")
    inner = Runtime(call=never, model="instant")
    settings = settings_of(inner)

    def ask(i: int) -> list[dict]:
        return [{"role": "user", "content": [{"type": "text", "text":
                 f"Route this message: message number {i}\nPick one option.\n\nOptions: "
                 f"route, refund, escalate, ignore"}]}]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cache.jsonl")
        with open(path, "wb") as f:
            f.write(line(header("instant", "instant")))
            for i in range(entries):
                req = request_record(ask(i), None, {})
                f.write(keyed_line({"key": request_key(req, settings), "call": i + 1,
                                    "decision": None, "request": req, "settings": settings,
                                    "response": {"text": PICKS[i % 3], "tool_calls": [],
                                                 "usage": None, "model": "instant"},
                                    "duration_s": 0.0}))
        size = os.path.getsize(path)
        m0 = rss_mb()
        t0 = time.perf_counter()
        rt = CachedRuntime(inner, path)
        opened = time.perf_counter() - t0
        index_mb = rss_mb() - m0
        picks = [ask(random.randrange(entries)) for _ in range(lookups)]
        t0, c0 = time.perf_counter(), time.process_time()
        for messages in picks:
            rt.complete(messages)
        per = (time.perf_counter() - t0) / lookups
        cpu = (time.process_time() - c0) / lookups
    assert rt.misses == 0 and rt.hits == lookups
    return {"entries": entries, "file_mb": size / 2**20, "open_s": opened,
            "index_mb": index_mb, "lookup_us": per * 1e6, "lookup_cpu_us": cpu * 1e6,
            "inner_calls": rt.misses}


def child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--plain-rows", type=int, default=100_000)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--profile-rows", type=int, default=20_000)
    ap.add_argument("--gc-off", action="store_true",
                    help="run the two evaluations with the garbage collector off: what a row "
                         "costs without the collector's passes over the traces a result keeps")
    ap.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        kind, *rest = a.child
        if kind == "run":
            print(json.dumps(one_run(int(rest[0]), rest[1] == "1", int(rest[2]),
                                     rest[3:] == ["gc-off"])))
        elif kind == "profile":
            print(json.dumps(profile(int(rest[0]))))
        else:
            print(json.dumps(cache_lookup(int(rest[0]))))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; each figure from a "
          f"process of its own")
    for n, journal in ((a.rows, True), (a.plain_rows, False)):
        r = child(["--child", "run", str(n), "1" if journal else "0", str(a.concurrency),
                   *(["gc-off"] if a.gc_off else [])])
        label = ("with a journal" if journal else "without a journal") + (
            ", garbage collector off" if a.gc_off else "")
        print(f"\n{n:,} rows from a generator, async instant model, concurrency "
              f"{a.concurrency}, {label}:")
        print(f"  wall {r['wall_s']:.1f} s ({r['rows_per_s']:,.0f} rows/s); processor "
              f"{r['cpu_ms_per_row']:.3f} ms per row (target <= 0.15)")
        print(f"  peak RSS {r['peak_above_start_mb']:.0f} MB above the interpreter's start "
              f"({r['rss_start_mb']:.0f} MB) (target <= 300 with a journal); "
              f"{r['peak_above_start_mb'] * 2**20 / n:,.0f} bytes per row")
        if journal:
            print(f"  journal {r['journal_mb']:.0f} MB ({r['journal_mb'] * 2**20 / n:,.0f} "
                  f"bytes per row)")
    p = child(["--child", "profile", str(a.profile_rows)])
    print(f"\nwhere a journaled row's processor time goes ({p['rows']:,} rows under cProfile, "
          f"which inflates it: {p['us_per_row_profiled']:.0f} us per row profiled):")
    for name, us, share in p["top"]:
        print(f"  {share:6.1%}  {us:7.1f} us/row  {name}")
    c = child(["--child", "cache", str(a.entries)])
    print(f"\ncache of {c['entries']:,} entries ({c['file_mb']:.0f} MB): opened in "
          f"{c['open_s']:.2f} s, index {c['index_mb']:.0f} MB; lookup {c['lookup_us']:.1f} us "
          f"per call (target <= 50), of processor {c['lookup_cpu_us']:.1f} us (what other "
          f"processes on the machine do not change); inner model calls {c['inner_calls']}")


if __name__ == "__main__":
    main()
