"""What repair= saves on the bundled small model, and what the repair itself costs.

Runs SmolLM2-135M-Instruct in process (LlamaCppRuntime, the bundled file) on the tool set of
tests/runtimes/llamacpp/localhelp.py (4 functions, 20 labelled customer requests) and prints, from
one run:
- the same replies at each level: every row asked once in menu mode, in json_schema mode, and
  in json_schema mode with a tight max_tokens (`--cut`, replies cut before the pick closes)
  (repair="off", no re-ask), then the recorded replies re-read offline at "off", "safe"
  and "menu" (`decision.revalidate(..., repair=)`), so the levels differ in nothing but the
  repair: rows resolved without a re-ask, right picks, and the repair kinds that saved them;
- live, each level with its re-ask (max_retries=1): rows resolved, right picks and model calls
  (`--live-rows`, 0 to skip);
- the repair's own cost per reply: a 2 KB sloppy reply (a pick among prose, single quotes,
  trailing commas, Python literals) and a 1 MB one, against json.loads of the same pick written
  correctly (targets of issue 39: <= 20 us on 2 KB, <= 10x json.loads on 1 MB).

Needs the `local` extra (./dev test installs it):

    .venv/bin/python benchmarks/bench_repair.py [--rows 20] [--live-rows 10]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from openprogram import DecisionError, decision
from openprogram.decision import repair as R
from openprogram.decision.repair import syntax as S
from openprogram.runtimes import LlamaCppRuntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "local"))
from localhelp import TOOL_REQUESTS, TOOLS, tool_prompt  # noqa: E402

LEVELS = ("off", "safe", "menu")
MODES = ("menu", "json_schema")


def load() -> str:
    return "load %.2f" % os.getloadavg()[0]


def ask_once(mode: str, rows: int, **settings) -> list:
    """Each row asked once (no re-ask, no repair): the recorded traces."""
    rt = LlamaCppRuntime(seed=0, **settings)
    traces = []
    for request, _ in TOOL_REQUESTS[:rows]:
        try:
            decision.make(tool_prompt(request), TOOLS, runtime=rt, mode=mode, max_retries=0,
                          repair="off")
            traces.append(decision.last_trace())
        except DecisionError as exc:
            traces.append(exc.trace)
    return traces


def same_replies(mode: str, rows: int, label: str | None = None, **settings) -> list[str]:
    traces = ask_once(mode, rows, **settings)
    mode = label or mode
    wants = [w for _, w in TOOL_REQUESTS[:rows]]
    lines = []
    for level in LEVELS:
        rv = decision.revalidate(traces, TOOLS, repair=level)
        resolved = sum(r.after_ok for r in rv.rows)
        right = sum(r.after_ok and r.after == w for r, w in zip(rv.rows, wants))
        kinds: Counter = Counter()
        errors: Counter = Counter()
        for r, t in zip(rv.rows, rv.after):
            if r.after_ok:
                kinds.update({x.kind for x in t.attempts[r.passing_attempt - 1].repairs})
            else:
                errors[r.error_kind] += 1
        lines.append(f"  {mode:<22} {level:<5} resolved without a re-ask {resolved:>3}/{rows:<3} "
                     f"right {right:>3}/{rows:<3} saved by: "
                     f"{dict(kinds.most_common()) or '-'}; still failing: "
                     f"{dict(errors.most_common()) or '-'}")
    return lines


def cut_replies(rows: int, cut: int) -> list[str]:
    """Each json_schema row asked whole, then again with max_tokens `cut` below what the
    whole reply took: a reply cut near its end, as a tight token limit cuts it."""
    whole = ask_once("json_schema", rows)
    traces = []
    for (request, _), t in zip(TOOL_REQUESTS[:rows], whole):
        n = max((t.attempts[0].usage or {}).get("output_tokens", 0) - cut, 1)
        rt = LlamaCppRuntime(seed=0, max_tokens=n)
        try:
            decision.make(tool_prompt(request), TOOLS, runtime=rt, mode="json_schema",
                          max_retries=0, repair="off")
            traces.append(decision.last_trace())
        except DecisionError as exc:
            traces.append(exc.trace)
    wants = [w for _, w in TOOL_REQUESTS[:rows]]
    cut_rows = sum(t.attempts[0].finish_reason == "length" for t in traces)
    lines = [f"  {cut_rows}/{rows} replies cut at the token limit"]
    for level in LEVELS:
        rv = decision.revalidate(traces, TOOLS, repair=level)
        resolved = sum(r.after_ok for r in rv.rows)
        right = sum(r.after_ok and r.after == w for r, w in zip(rv.rows, wants))
        errors = Counter(r.error_kind for r in rv.rows if not r.after_ok)
        lines.append(f"  {'json_schema, cut':<22} {level:<5} resolved without a re-ask "
                     f"{resolved:>3}/{rows:<3} right {right:>3}/{rows:<3} still failing: "
                     f"{dict(errors.most_common()) or '-'}")
    return lines


def live(mode: str, rows: int) -> list[str]:
    lines = []
    for level in LEVELS:
        rt = LlamaCppRuntime(seed=0)
        resolved = right = calls = 0
        t0 = time.perf_counter()
        for request, want in TOOL_REQUESTS[:rows]:
            try:
                decision.make(tool_prompt(request), TOOLS, runtime=rt, mode=mode,
                              max_retries=1, repair=level)
                trace = decision.last_trace()
            except DecisionError as exc:
                trace = exc.trace
            calls += len(trace.attempts)
            ok = trace.status == "resolved"
            resolved += ok
            right += ok and trace.attempts[-1].chosen == want
        lines.append(f"  {mode:<12} {level:<5} resolved {resolved:>3}/{rows:<3} right "
                     f"{right:>3}/{rows:<3} model calls {calls:>3} "
                     f"({time.perf_counter() - t0:.1f} s, {load()})")
    return lines


def sloppy(pick: dict) -> str:
    """The pick as a careless model writes it: single quotes, Python literals, trailing
    commas, unquoted keys."""
    text = json.dumps(pick, ensure_ascii=False)
    text = text.replace('"', "'").replace("true", "True").replace("false", "False")
    return text.replace("}", ",}").replace("]", ",]")


def per_call(fn, arg, budget_s: float = 0.5) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        fn(arg)
        n += 1
        spent = time.perf_counter() - t0
        if spent > budget_s and n >= 3:
            return spent / n


def repair_cost() -> list[str]:
    lines = []
    small = {"call": "book_room", "args": {"city": "Lisbon", "check_in": "2026-04-01",
                                           "nights": 2, "breakfast": True, "notes": "quiet"}}
    prose = "I read the request and the options. " * 48  # about 1.7 KB of thinking aloud
    reply = f"{prose}\n```json\n{sloppy(small)}\n```"
    good = json.dumps(small)
    t_rep = per_call(R.repair_syntax, reply)
    t_json = per_call(json.loads, good)
    assert R.repair_syntax(reply) is not None
    lines.append(f"  {len(reply):>9,} chars (a pick after prose, {len(R.repair_syntax(reply)[2])} "
                 f"repairs): repair {t_rep * 1e6:8.1f} us, json.loads of the pick "
                 f"{t_json * 1e6:6.1f} us")
    one = f"{prose}\n```json\n{good[:-1]},}}\n```"  # one trailing comma
    t_rep = per_call(R.repair_syntax, one)
    lines.append(f"  {len(one):>9,} chars (a pick after prose, 1 repair): repair "
                 f"{t_rep * 1e6:8.1f} us")
    big = {"call": "open_ticket", "args": {
        "summary": "s", "category": "other", "priority": "low",
        "email": "", "log": [{"line": i, "text": "x" * 40, "ok": i % 2 == 0}
                             for i in range(13_000)]}}
    good = json.dumps(big)
    # a few slips around a megabyte of valid arguments: the whole pick must be read
    reply = "{'call': 'open_ticket', " + good[len('{"call": "open_ticket", '):-2] + ",},}"
    t_rep = per_call(R.repair_syntax, reply, 2.0)
    t_json = per_call(json.loads, good, 2.0)
    got = R.repair_syntax(reply)
    assert got is not None and got[0] == big, got and got[2]
    lines.append(f"  {len(reply):>9,} chars ({len(got[2]):,} repairs): repair "
                 f"{t_rep * 1e3:8.1f} ms, json.loads of the valid text {t_json * 1e3:6.1f} ms, "
                 f"ratio {t_rep / t_json:5.1f}x")
    reply = sloppy(big)  # a slip in every item: more repairs than a pick may need
    t_rep = per_call(R.repair_syntax, reply, 2.0)
    assert R.repair_syntax(reply) is None
    lines.append(f"  {len(reply):>9,} chars (thousands of slips): given up after "
                 f"{S._MAX_REPAIRS:,} repairs in {t_rep * 1e3:8.1f} ms, json.loads of the "
                 f"valid text {t_json * 1e3:6.1f} ms")
    long_string = "{'call': 'open_ticket', 'args': {'summary': '" + "y" * 1_000_000 + "'}}"
    valid = long_string.replace("'", '"')
    t_rep = per_call(R.repair_syntax, long_string, 1.0)
    t_json = per_call(json.loads, valid, 1.0)
    lines.append(f"  {len(long_string):>9,} chars (one long string): repair "
                 f"{t_rep * 1e3:8.2f} ms, json.loads {t_json * 1e3:6.2f} ms, ratio "
                 f"{t_rep / t_json:5.1f}x")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20, help="labelled rows asked once per mode")
    ap.add_argument("--live-rows", type=int, default=10,
                    help="rows of the live runs with re-asks, per mode and level (0: skip)")
    ap.add_argument("--only", choices=MODES, help="one way of asking")
    ap.add_argument("--cut", type=int, default=2,
                    help="how many tokens before its end each json_schema reply is cut (2)")
    args = ap.parse_args()
    modes = [args.only] if args.only else list(MODES)
    print(f"bench_repair: SmolLM2-135M (bundled), {args.rows} labelled rows, {load()}")
    print("\nThe repair's own cost per reply:")
    for line in repair_cost():
        print(line)
    print("\nThe same replies (asked once, repair='off', no re-ask), re-read at each level:")
    for mode in modes:
        for line in same_replies(mode, args.rows):
            print(line)
    if "json_schema" in modes:
        print(f"\njson_schema replies cut {args.cut} token(s) before their end (max_tokens set "
              f"per row from its whole reply), re-read at each level:")
        for line in cut_replies(args.rows, args.cut):
            print(line)
    if args.live_rows:
        print(f"\nLive, each level with its re-ask (max_retries=1), {args.live_rows} rows:")
        for mode in modes:
            for line in live(mode, args.live_rows):
                print(line)


if __name__ == "__main__":
    main()
