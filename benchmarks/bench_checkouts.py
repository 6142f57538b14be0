"""One benchmark script run on two checkouts in one run, its figures side by side.

A change that should cost nothing (a move of files, say) is checked by running the same
benchmark on the code before it and after it, interleaved (old, new, old, new, ...) so that the
machine's drift during the run falls on both alike. Each run's printed lines are matched line by
line; for a line whose words agree, the numbers of each side are shown with the ratio new / old
of each (the median of the runs per side).

    .venv/bin/python benchmarks/bench_checkouts.py 560fa4f bench_core.py make validate
    .venv/bin/python benchmarks/bench_checkouts.py 560fa4f bench_scale.py --rows 100000 \\
        --plain-rows 20000 --entries 20000

The old checkout is a `git worktree` of REV in a temporary folder (removed at the end); both run
with this venv's interpreter, each script importing its own checkout's `openprogram` (the
benchmarks put their checkout first on sys.path). `--new REV` runs a second worktree instead of
this checkout, so the checkout can be edited while a long comparison runs; `--same-script` runs
the new side's copy of the script on both (a benchmark that gained a figure since REV, which the
old code can still be measured by). The load average is
printed at the start and the end: the machine's speed drifts, the ratios are what compare.
Prints figures; asserts nothing about time.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:e-?\d+)?")


def run(checkout: Path, script: str, args: list[str]) -> list[str]:
    env = {"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    out = subprocess.run([sys.executable, str(checkout / "benchmarks" / script), *args],
                         cwd=checkout, env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{script} failed in {checkout}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout.splitlines()


def numbers(line: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(line)]


def best(lines_per_run: list[list[str]]) -> list[str]:
    """The runs' lines merged: where every run printed the same words, each number is the
    median of what the runs printed (the lowest would favour a time and disfavour a rate)."""
    merged = []
    for group in zip(*lines_per_run):
        shape = {NUMBER.sub("#", g) for g in group}
        if len(shape) != 1:
            merged.append(group[0])
            continue
        lows = [statistics.median(col) for col in zip(*(numbers(g) for g in group))]
        it = iter(lows)
        merged.append(NUMBER.sub(lambda m: f"{next(it):g}", group[0]))
    return merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="the old checkout's revision, e.g. 560fa4f")
    ap.add_argument("script", help="a script of benchmarks/, e.g. bench_core.py")
    ap.add_argument("--runs", type=int, default=3, help="runs of each side, interleaved")
    ap.add_argument("--new", default=None,
                    help="the new side's revision (default: this checkout as it is)")
    ap.add_argument("--same-script", action="store_true",
                    help="run the new side's copy of the script on the old checkout too")
    ns, rest = ap.parse_known_args()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        old, new = Path(tmp) / "old", (Path(tmp) / "new" if ns.new else ROOT)
        for path, rev in ((old, ns.rev), (new, ns.new)):
            if rev:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                                str(path), rev], check=True)
        if ns.same_script:
            shutil.copyfile(new / "benchmarks" / ns.script, old / "benchmarks" / ns.script)
        try:
            runs: dict[str, list[list[str]]] = {"old": [], "new": []}
            for i in range(ns.runs):
                for side, checkout in (("old", old), ("new", new)):
                    print(f"run {i + 1} of {ns.runs}: {side}", file=sys.stderr, flush=True)
                    runs[side].append(run(checkout, ns.script, rest))
        finally:
            for path in (old, new):
                if path != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                    str(path)], check=False)
    old_lines, new_lines = best(runs["old"]), best(runs["new"])
    print(f"{ns.script} {' '.join(rest)}: old = {ns.rev}, "
          f"new = {ns.new or 'this checkout'}; median of {ns.runs} interleaved runs each"
          f"{' (the new script on both sides)' if ns.same_script else ''}; load average "
          f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} "
          f"cores)")
    for a, b in zip(old_lines, new_lines):
        na, nb = numbers(a), numbers(b)
        if NUMBER.sub("#", a) != NUMBER.sub("#", b) or not na:
            print(f"  {b}")
            continue
        ratios = ", ".join(f"{y / x:.2f}" if x else "-" for x, y in zip(na, nb))
        print(f"  {b}\n      old: {a.strip()}\n      new/old: {ratios}")


if __name__ == "__main__":
    main()
