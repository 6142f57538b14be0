"""The local model's speed, and what a decision costs on it in each way of asking.

Runs SmolLM2-135M-Instruct in process (LlamaCppRuntime, the bundled file) and prints, from one
run on this machine:
- tokens per second of a plain reply (the model's writing speed, prompt evaluation excluded, and
  overall), from a 256-token reply with the end token banned so the length is fixed;
- per way of asking ("menu", the text menu; "json_schema", the grammar-constrained pick): the
  median decision latency over the same inputs and seeds, the median tokens written per
  decision, the parse rate (attempts whose reply held a pick) and the decisions resolved.

Needs the `local` extra (./dev test installs it):

    .venv/bin/python benchmarks/bench_local.py [--runs 12]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from openprogram import DecisionError, decision
from openprogram.runtimes import LlamaCppRuntime

# The option set and requests of the local-model tests: a function, a value and a schema option.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "local"))
from localhelp import OPTIONS, REQUESTS, prompt  # noqa: E402

UNPARSED = {"no_action", "bad_args", "truncated", "not_text"}


def writing_speed(tokens: int = 256) -> tuple[float, float]:
    """(tokens/s while writing, tokens/s including the prompt) of one fixed-length reply."""
    probe = LlamaCppRuntime()
    llama = probe.llama
    ends = {llama.token_eos()} | set(llama.tokenize(b"<|im_end|>", add_bos=False, special=True))
    rt = LlamaCppRuntime(max_tokens=tokens, seed=0, logit_bias={i: -1e4 for i in ends})
    rt.complete([{"role": "user", "content": "Tell me about the sea."}])  # warm-up
    t0 = time.perf_counter()
    reply = rt.complete([{"role": "user", "content": "Tell me about the mountains."}])
    total = time.perf_counter() - t0
    n = reply.usage["output_tokens"]
    writing = total - reply.raw["response"]["timings"]["first_token_s"]
    return (n - 1) / writing, n / total


def decisions(mode: str, runs: int) -> dict:
    latencies, written, attempts, parsed, resolved = [], [], 0, 0, 0
    for i in range(runs):
        rt = LlamaCppRuntime(seed=i, temperature=0.8, max_tokens=256)
        text = prompt(REQUESTS[i % len(REQUESTS)])
        t0 = time.perf_counter()
        try:
            decision.make(text, OPTIONS, runtime=rt, mode=mode)
            trace = decision.last_trace()
            resolved += 1
        except DecisionError as exc:
            trace = exc.trace
        latencies.append(time.perf_counter() - t0)
        written.append(sum((a.usage or {}).get("output_tokens") or 0 for a in trace.attempts))
        attempts += len(trace.attempts)
        parsed += sum(a.error_kind not in UNPARSED for a in trace.attempts)
    return {"median_s": statistics.median(latencies), "tokens": statistics.median(written),
            "parse_rate": parsed / attempts, "resolved": resolved, "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=12, help="decisions per way of asking")
    args = ap.parse_args()
    loads = LlamaCppRuntime.loads
    t0 = time.perf_counter()
    LlamaCppRuntime()
    load_s = time.perf_counter() - t0
    writing, overall = writing_speed()
    print(f"model: {LlamaCppRuntime().model} (loaded in {load_s:.2f} s)")
    print(f"writing speed: {writing:.0f} tokens/s while writing, {overall:.0f} tokens/s "
          f"including the prompt (a 256-token reply)")
    rows = {mode: decisions(mode, args.runs) for mode in ("menu", "json_schema")}
    print(f"\n{'mode':<12} {'median latency':>15} {'median tokens':>14} {'parse rate':>11} "
          f"{'resolved':>9}")
    for mode, r in rows.items():
        print(f"{mode:<12} {r['median_s']:>13.2f} s {r['tokens']:>14.0f} "
              f"{r['parse_rate']:>10.0%} {r['resolved']:>4}/{r['runs']}")
    ratio = rows["menu"]["median_s"] / rows["json_schema"]["median_s"]
    print(f"\njson_schema decisions are {ratio:.1f}x faster than menu decisions (median); "
          f"model loads in this run: {LlamaCppRuntime.loads - loads}")


if __name__ == "__main__":
    main()
