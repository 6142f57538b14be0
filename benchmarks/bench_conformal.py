"""Pick sets with a guarantee on the bundled model: does split conformal prediction hold its
coverage on a real small model's distributions?

Runs SmolLM2-135M-Instruct in process (LlamaCppRuntime, the bundled file, greedy) in json_schema
mode with the exact distribution over the option names (`confidence=True`) once over the 240
labelled support requests of notebooks/data/support_desk.csv (8 options, 30 each; the options
are bench_improve's desk). Then, with no further model call, 20 random calibration / test
splits (half and half, seeds 0-19): a policy is fitted on the calibration half
(`result.conformal(alpha, rows=...)`) and measured on the other half
(`result.pick_set_figures(policy)`). Prints, per alpha: the mean, lowest and highest coverage
over the splits against the promised 1 - alpha, the mean set size, the share of rows a
decision would resolve (a set of one option) and the mean threshold; and the model's accuracy
and mean_p_expected, and the wall time of the evaluation.

    .venv/bin/python benchmarks/bench_conformal.py [--replay CASSETTE] [--alpha 0.05 0.1 0.2]

`--cache FILE` keeps the model's replies in a CachedRuntime file, so a second run makes no model
call; `--replay CASSETTE` answers from a recording instead of the model. `--save FILE` writes
each row's request, label, pick and distribution as JSON lines: what
tests/evaluation/test_conformal_bundled.py replays (tests/evaluation/data/).
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import time
from pathlib import Path

from bench_improve import DESK, PROMPT

from openprogram import decision

ROWS = Path(__file__).resolve().parent.parent / "notebooks" / "data" / "support_desk.csv"


def rows() -> list[dict]:
    with open(ROWS, newline="") as f:
        return list(csv.DictReader(f))


def splits(result, alpha: float, n: int = 20) -> list[dict]:
    """The figures of `n` random half / half splits of `result`'s rows at `alpha`."""
    out = []
    positions = list(range(len(result)))
    for seed in range(n):
        order = positions[:]
        random.Random(seed).shuffle(order)
        policy = result.conformal(alpha, rows=order[: len(order) // 2])
        figures = result.pick_set_figures(policy)
        out.append({**figures, "threshold": policy.threshold})
    return out


def save(result, path: str) -> None:
    """Each row's request, label, pick and distribution, one JSON object a line, after a line
    saying what made them."""
    import json
    from datetime import datetime, timezone
    with open(path, "w") as f:
        f.write(json.dumps({"runtime": result.runtime, "mode": "json_schema", "prompt": PROMPT,
                            "options": list(DESK), "rows": len(result),
                            "recorded_at": datetime.now(timezone.utc).strftime(
                                "%Y-%m-%dT%H:%M:%SZ")}) + "\n")
        frame = result.to_frame()
        for i, trace in enumerate(result.traces):
            conf = trace.confidence
            f.write(json.dumps({"text": frame["text"][i], "label": frame["expected"][i],
                                # 9 digits: the total stays within 1e-6 of one, as read
                                "pick": result.picks[i],
                                "probs": {k: round(v, 9) for k, v in conf.probs.items()},
                                "other": round(conf.other, 9), "source": conf.source}) + "\n")
    print(f"saved {len(result)} rows to {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", default=None,
                    help="answer from this cassette instead of running the model")
    ap.add_argument("--cache", default=None,
                    help="a CachedRuntime file: a second run answers from it")
    ap.add_argument("--save", default=None,
                    help="write each row's pick and distribution to this JSON-lines file")
    ap.add_argument("--alpha", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    args = ap.parse_args()
    if args.replay:
        from openprogram.runtimes import ReplayRuntime
        rt = ReplayRuntime(args.replay)
        source = f"replayed from {args.replay}"
    else:
        from openprogram.runtimes import LlamaCppRuntime
        rt = LlamaCppRuntime(seed=0, temperature=0.0)
        source = "SmolLM2-135M in process"
        if args.cache:
            from openprogram.runtimes import CachedRuntime
            rt = CachedRuntime(rt, args.cache)
            source += f", cached in {args.cache}"
    table = rows()
    print(f"load average {os.getloadavg()[0]:.2f}; {len(table)} rows over {len(DESK)} options; "
          f"{source}; json_schema, confidence=True")
    start = time.perf_counter()
    result = decision.evaluate(PROMPT, DESK, table, runtime=rt, expected="label",
                               mode="json_schema", confidence=True, max_retries=0,
                               concurrency=1, progress=False)
    wall = time.perf_counter() - start
    print(f"evaluation: {wall:.1f} s; accuracy {result.accuracy:.3f}; mean_p_expected "
          f"{result.mean_p_expected:.3f}; failed rows {result.summary['failed']}")
    if args.save:
        save(result, args.save)
    print("alpha  promised  coverage mean [min, max] over 20 splits  mean set size  "
          "resolved (set of one)  mean threshold")
    for alpha in args.alpha:
        got = splits(result, alpha)
        cov = [g["coverage"] for g in got]
        print(f"{alpha:<6} {1 - alpha:<9.2f} {statistics.mean(cov):.3f} [{min(cov):.3f}, "
              f"{max(cov):.3f}]{'':20} {statistics.mean(g['mean_set_size'] for g in got):<14.2f} "
              f"{statistics.mean(g['singletons'] for g in got):<22.3f} "
              f"{statistics.mean(g['threshold'] for g in got):.4f}")


if __name__ == "__main__":
    main()
