"""What schemas, replies and tool lists from outside cost (issue 54's timing cases), each against a
reference timed in the same run.

- uniqueItems on a list of arrays and objects (8,000 items; a quarter for the ratio), against
  the pairwise comparison it replaced (run on the quarter only: it is quadratic);
- an anyOf whose two $refs point at the next level, depth 20: refused when built (the time to
  the refusal), and depth 10 (under the budget) built and a wrong value checked;
- Samples(n) read from one answer of 20,000 choices (a server sending far more than the n=5
  asked), and n=2,000 choices all asked for, on the real OpenAI SDK against the loopback server;
- a tool of 50,000 properties (refused when built) and of 9,000 (built), and 1,000 for the
  ratio per property;
- the same plain list of 1,841 tool dicts handed to decision.make again, against a decision on
  the Menu built once (interleaved), on a plain Runtime; the objects the garbage collector
  tracks for that menu, and a full collection with it alive.

Run: .venv/bin/python benchmarks/bench_hardening.py [--items N] [--depth D] [--choices N]
     [--props N] [--tools N]            (about a minute; sizes default to the issue's)
Prints figures and ratios; asserts nothing about time. The sizes can be made smaller to run
the script on older code (benchmarks/bench_checkouts.py REV bench_hardening.py --same-script
--items 1000 ...), whose costs at the full sizes ran to minutes.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

import openprogram  # noqa: E402
from openprogram import decision  # noqa: E402
from openprogram.base.errors import AttemptError, OptionError  # noqa: E402
from openprogram.decision.options import normalize  # noqa: E402
from openprogram.decision.schema.reply_values import equal  # noqa: E402
from openprogram.decision.schema.validator import compile_schema  # noqa: E402
from openprogram.runtime.runtime import Runtime  # noqa: E402


def timed(fn, repeat=1):
    """(median, min) seconds of `repeat` calls, and the last result (or the exception)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:   # a refusal is a result here
            out = exc
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), out


def ms(s):
    return f"{s * 1e3:9.1f} ms"


# -- uniqueItems ----------------------------------------------------------------------------------

def pairwise_repeat(v):   # the check uniqueItems had (value_keywords.first_repeat before)
    for i in range(len(v)):
        for j in range(i):
            if equal(v[i], v[j]):
                return i, j
    return None


def unique_items(n):
    items = [[i, {"a": i, "b": [str(i)]}] for i in range(n)]
    out = {}
    for as_written in (False, True):
        check = compile_schema({"type": "array", "uniqueItems": True}, "bench",
                               as_written=as_written)
        out[as_written] = timed(lambda: check(items, "args.x", []), 3)
    return out, items


def bench_unique(n):
    print("uniqueItems, a list of [int, object] items")
    k = n // 4
    small, items_small = unique_items(k)
    big, _ = unique_items(n)
    old = timed(lambda: pairwise_repeat(items_small))
    for as_written, label in ((False, "compiled"), (True, "as written")):
        print(f"  {label:>10}: {k:,} items {ms(small[as_written][0])}; {n:,} items "
              f"{ms(big[as_written][0])}; ratio {big[as_written][0] / small[as_written][0]:.1f} "
              f"for 4x the items")
    print(f"  the pairwise comparison it replaced, {k:,} items: {ms(old[0])} "
          f"({old[0] / small[True][0]:.0f}x this check's)")


# -- anyOf / $ref chain -----------------------------------------------------------------------

def chain(depth):
    defs = {f"L{i}": {"anyOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]}
            for i in range(depth)}
    defs[f"L{depth}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "required": ["x"],
            "$defs": defs}


def bench_chain(depth):
    print(f"\nanyOf of two $refs to the next level ({len(json.dumps(chain(depth)))} bytes of "
          f"schema at depth {depth})")
    for d in sorted({10, depth}):
        t, _, out = timed(lambda d=d: normalize({"fill": openprogram.JsonSchema(chain(d))}), 3)
        what = "refused: " + str(out)[:110] + "..." if isinstance(out, OptionError) else \
            "built"
        print(f"  depth {d:>2}: {ms(t)} to {what}")
        if not isinstance(out, Exception):
            option = out[0]

            def wrong(option=option):
                try:
                    option.bind({"x": 5}, runtime=None, context={}, dropped=[], injected=[])
                except AttemptError:
                    return None
            t, _, _ = timed(wrong, 3)
            print(f"            a wrong value checked in {ms(t)} ({2 ** (d + 1) - 1:,} "
                  f"alternatives tried)")


# -- Samples(n) over one answer of many choices -----------------------------------------------

def choices_body(n):
    return json.dumps({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": i, "finish_reason": "stop", "message": {
            "role": "assistant", "content": '{"call": "escalate"}'}} for i in range(n)],
        "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}})


def sampled(sent, asked):
    from fakeserver import FAKE_KEY, FakeServer, raw

    from openprogram.runtimes import OpenAIRuntime
    with FakeServer("openai") as server:
        server.push(raw(choices_body(sent)))
        rt = OpenAIRuntime(model="m", base_url=server.base_url, api_key=FAKE_KEY,
                           max_retries=0, stream=False)
        cpu, t0 = time.process_time(), time.perf_counter()
        decision.make("Route it.", {"refund": "REFUND", "escalate": "ESCALATE"}, runtime=rt,
                      confidence=decision.Samples(asked, temperature=0.8))
        return time.perf_counter() - t0, time.process_time() - cpu


def bench_samples(n):
    print("\nSamples(n) read from one answer (the SDK's parse of the answer included)")
    small = sampled(n // 10, 5)
    big = sampled(n, 5)
    print(f"  {n // 10:>6,} choices sent for n=5: {ms(small[0])} ({ms(small[1]).strip()} CPU); "
          f"{n:,}: {ms(big[0])} ({ms(big[1]).strip()} CPU); ratio {big[1] / small[1]:.1f} "
          f"(CPU) for 10x the choices")
    asked = sampled(n // 10, n // 10)
    print(f"  {n // 10:>6,} choices, all asked for (n={n // 10:,}): {ms(asked[0])} "
          f"({asked[0] / (n // 10) * 1e6:.0f} us a sample, each resolved as its own call)")


# -- a tool of many properties ----------------------------------------------------------------

def wide(n):
    return {"name": "wide", "inputSchema": {"type": "object", "properties": {
        f"p{i}": {"type": "string", "description": "a field"} for i in range(n)}}}


def bench_wide(n):
    print("\nA tool of many properties")
    per = {}
    for k in sorted({1000, 9000, n}):
        tool = wide(k)
        t, _, out = timed(lambda tool=tool: normalize([tool]).text)
        if isinstance(out, Exception):
            print(f"  {k:>6,} properties: {ms(t)} to refuse it: {str(out)[:120]}...")
        else:
            per[k] = t / k
            print(f"  {k:>6,} properties: {ms(t)} built with its menu ({len(out):,} chars), "
                  f"{per[k] * 1e6:.0f} us a property")
    if 1000 in per and 9000 in per:
        print(f"  per property, 9,000 against 1,000: {per[9000] / per[1000]:.2f}")


# -- the same plain list of tool dicts ----------------------------------------------------------

def tools_list(n, seed=1):
    """Tool definitions of a realistic shape (BFCL's are not here): one to six described
    parameters of every JSON type, some enums, arrays of scalars, small nested objects."""
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        props = {}
        for j in range(rnd.randint(1, 6)):
            t = rnd.choice(["string", "integer", "number", "boolean", "array", "object"])
            p = {"type": t, "description": f"The parameter {j} of function {i}, which says "
                                           f"what it is for."}
            if t == "array":
                p["items"] = {"type": rnd.choice(["string", "integer"])}
            if t == "object":
                p["properties"] = {"k": {"type": "string"}, "v": {"type": "integer"}}
                p["required"] = ["k"]
            if t == "string" and rnd.random() < .3:
                p["enum"] = ["a", "b", "c"]
            props[f"param_{j}"] = p
        out.append({"type": "function", "function": {
            "name": f"module_{i}_function_name",
            "description": f"Does thing number {i}; a longer description of what the tool does "
                           f"and when to use it.",
            "parameters": {"type": "object", "properties": props,
                           "required": list(props)[:2]}}})
    return out


def bench_tools(n):
    tools = tools_list(n)
    print(f"\nThe same plain list of {n:,} tool dicts ({len(json.dumps(tools)) / 1e6:.1f} MB) "
          f"handed to decision.make again (a plain Runtime)")
    gc.collect()
    before = len(gc.get_objects())
    t_gc0, _, _ = timed(gc.collect, 5)
    reply = []

    def make(options):
        # (a Runtime of its own each time: a Runtime's window of calls keeps every prompt, and
        # hundreds of prompts of 1.2 MB would measure the allocator)
        rt = Runtime(call=lambda content, **kw: reply[0], model="m")
        return decision.make("Pick the tool.", options, runtime=rt, max_retries=0)
    t_read, _, menu = timed(lambda: normalize(tools))
    t_text, _, _ = timed(lambda: menu.text)
    reply.append(menu[7].example())
    kept = normalize(tools_list(n, seed=2))   # a Menu built once, as a caller keeps it
    assert kept.text
    reply_kept = kept[7].example()
    again, built = [], []
    for _ in range(25):   # interleaved: the machine's drift falls on both alike
        again.append(timed(lambda: make(tools))[0])
        reply.insert(0, reply_kept)
        built.append(timed(lambda: make(kept))[0])
        reply.pop(0)
    print(f"  first: the list read in {ms(t_read).strip()}, its menu written in "
          f"{ms(t_text).strip()}")
    t_hit, t_hit_min, _ = timed(lambda: normalize(tools), 25)
    print(f"  normalize(the list) again, alone (its content compared): median {ms(t_hit).strip()}, "
          f"min {ms(t_hit_min).strip()}")
    ratio = statistics.median(again) / statistics.median(built)
    print(f"  again: median {ms(statistics.median(again))}, min {ms(min(again)).strip()}; "
          f"on a Menu built once and kept: median {ms(statistics.median(built))}, min "
          f"{ms(min(built)).strip()}; ratio {ratio:.1f} (medians)")
    gc.collect()
    tracked = len(gc.get_objects()) - before
    t_gc, _, _ = timed(gc.collect, 5)
    print(f"  the garbage collector tracks {tracked:,} more objects for the two lists and their "
          f"menus ({tracked / (2 * n):.0f} a tool, the tool dicts included); a full collection "
          f"takes {ms(t_gc).strip()} with them alive, {ms(t_gc0).strip()} before")
    times = []
    reply.insert(0, reply_kept)
    for _ in range(300):
        t0 = time.perf_counter()
        make(kept)
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"  300 decisions on the kept Menu: median {ms(times[150])}, p99 {ms(times[296])}, "
          f"max {ms(times[-1])} (collections included, as they come)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=8000)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--choices", type=int, default=20000)
    ap.add_argument("--props", type=int, default=50000)
    ap.add_argument("--tools", type=int, default=1841)
    args = ap.parse_args()
    start = time.perf_counter()
    print(f"Python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f}\n")
    bench_unique(args.items)
    bench_chain(args.depth)
    bench_samples(args.choices)
    bench_wide(args.props)
    bench_tools(args.tools)
    print(f"\nload average {os.getloadavg()[0]:.1f}; total run time "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
