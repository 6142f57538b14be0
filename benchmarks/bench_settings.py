"""Issue 50's speed check: the same three hot paths timed on two source trees, paired.

Issue 50 moved a decision's keywords into one checked `Settings`, made the repair levels and
confidence sources classes, drove the journal's line writer from the record's field list and
split the repair's fast lane into readable functions. None of that may cost more than 5 % on:
1. `decision.make` on a 10-option menu (bench_decision.py's menu and reply, ScriptedRuntime),
   the options given as the dict each time: processor time per call, best of 15 runs of 300;
2. a journaled evaluation row (bench_scale.py's row: an async model that answers at once,
   concurrency 64, a journal): the evaluation's processor time per row over `--rows` rows,
   the least of three evaluations;
3. the repair of a 2 KB reply (bench_extract.py's two replies, one fix and fourteen):
   processor time per call, best of 15 runs of 2,000.

Each tree is imported in a process of its own (its directory first on PYTHONPATH; the child
checks that `openprogram` came from there), and the trees take turns, A B B A ..., so a load
that comes and goes on a shared machine falls on both. Per figure it prints each tree's best
and median over the rounds, and the ratio of the others to the first tree's.

    .venv/bin/python benchmarks/bench_settings.py --tree before=/work/wt-50base --tree now=.
    .venv/bin/python benchmarks/bench_settings.py ... --rounds 8 --rows 10000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIGURES = (("make_us", "decision.make, 10 options (us per call)"),
           ("journal_row_us", "journaled evaluation row (us of CPU per row)"),
           ("repair_1_us", "2 KB repair, one fix (us per call)"),
           ("repair_14_us", "2 KB repair, 14 fixes (us per call)"))


def best_per_call(fn, runs: int, calls: int) -> float:
    """The least processor time per call over `runs` runs of `calls` calls, in microseconds."""
    best = float("inf")
    for _ in range(runs):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t0) / calls)
    return best * 1e6


def measure(tree: str, rows: int) -> dict:
    """The three figures of the tree this process imported (run as a child)."""
    import openprogram
    where = Path(openprogram.__file__).resolve()
    if not where.is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"openprogram came from {where}, not from {tree}")
    # (the helpers below put this script's own tree on sys.path; openprogram is imported
    # already, so every module of it still comes from `tree`)
    sys.path.insert(0, str(HERE))
    from bench_decision import menu_of, reply_for
    from bench_extract import two_kb_replies
    from bench_scale import one_run

    from openprogram import decision
    from openprogram.decision.repair import repair_syntax
    from openprogram.runtimes import ScriptedRuntime

    options = menu_of(10)
    reply = reply_for(options)
    rt = ScriptedRuntime(rule=lambda prompt: reply)
    assert decision.make("Pick one.", options, runtime=rt)[1] == "Rome"
    out = {"tree": str(where.parent.parent),
           "make_us": best_per_call(lambda: decision.make("Pick one.", options, runtime=rt),
                                    15, 300)}
    pick, replies = two_kb_replies()
    for key, (_, text) in zip(("repair_1_us", "repair_14_us"), replies):
        assert repair_syntax(text)[0] == pick
        out[key] = best_per_call(lambda text=text: repair_syntax(text), 15, 2_000)
    # (the least of three evaluations: one alone moves by 15 % from run to run here)
    out["journal_row_us"] = min(one_run(rows, True, 64)["cpu_ms_per_row"] for _ in range(3)) * 1000
    return out


def child(path: str, rows: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())}
    out = subprocess.run([sys.executable, __file__, "--child", path, "--rows", str(rows)],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        raise SystemExit(f"the child for {path} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                    help="a source tree to time (the first is the reference); give two or more")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(measure(a.child, a.rows)))
        return
    trees = [t.partition("=")[::2] for t in a.tree]
    if len(trees) < 2 or not all(name and path for name, path in trees):
        ap.error("give two or more --tree NAME=PATH")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {a.rounds} rounds, the "
          f"trees in turns (A B, then B A); {a.rows:,} journaled rows a round")
    got: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for r in range(a.rounds):
        for name, path in (trees if r % 2 == 0 else trees[::-1]):
            got[name].append(child(path, a.rows))
            print(f"  round {r + 1} {name:<8} " + "  ".join(
                f"{key} {got[name][-1][key]:8.2f}" for key, _ in FIGURES), flush=True)
    ref = trees[0][0]
    print(f"\n{'figure':<46} {'tree':<8} {'best':>9} {'median':>9} {'best/ref':>9} "
          f"{'median/ref':>11}")
    for key, label in FIGURES:
        base = [g[key] for g in got[ref]]
        for name, _ in trees:
            vals = [g[key] for g in got[name]]
            print(f"{label:<46} {name:<8} {min(vals):9.2f} {statistics.median(vals):9.2f} "
                  f"{min(vals) / min(base):9.3f} "
                  f"{statistics.median(vals) / statistics.median(base):11.3f}")
            label = ""


if __name__ == "__main__":
    main()
