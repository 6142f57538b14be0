"""What a shortlist buys and costs (issue 38), offline: on the 558-tool menu of
tests/support/shortlist_corpus.py and its 240 labelled requests, for shortlist=None and k = 5, 10,
20: recall@k (how often the expected tool was among those shown: a pick the model cannot make
otherwise), the prompt's size per decision (characters, and tokens estimated as characters / 4),
and the core's ranking time per decision, on this menu and on one of 1,116 tools (the menu twice,
renamed), with the index built once per option set and reused.

Run: .venv/bin/python benchmarks/bench_shortlist.py   (about ten seconds)
Prints figures; asserts nothing about time.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "core"))

import shortlist_corpus as corpus  # noqa: E402

from openprogram import Shortlist, decision, tool  # noqa: E402
from openprogram.decision.options import normalize  # noqa: E402
from openprogram.decision.options.shortlist import BM25  # noqa: E402
from openprogram.runtimes import ScriptedRuntime  # noqa: E402


def prompt_chars(menu, rows, k):
    """Mean characters of the prompt actually sent (one decision per row, the expected pick)."""
    sizes = []
    for request, name in rows:
        rt = ScriptedRuntime([f'{{"call": "{name}", "args": {{}}}}'])
        try:
            decision.make(request, menu, runtime=rt, shortlist=k, max_retries=0)
        except Exception:  # a pick the shortlist hid, or arguments left out: the prompt was sent
            pass
        sizes.append(len(decision.last_trace().attempts[0].prompt))
    return statistics.mean(sizes)


def ranking_ms(menu, rows, k, repeat=5):
    s = Shortlist(k)
    m = normalize(menu)
    BM25.of(m)  # built once per option set, as in a run of many decisions
    best = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for request, _ in rows:
            s.rank(request, m)
        best.append((time.perf_counter() - t0) / len(rows) * 1000)
    return min(best)


def main():
    defs = corpus.tools()
    rows = corpus.requests()
    menu = [tool(d) for d in defs]
    big = menu + [tool({**d, "name": "v2_" + d["name"]}) for d in defs]
    t0 = time.perf_counter()
    big_menu = normalize(big)  # reading 1,116 schemas: once per option set, not per decision
    read_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    BM25(big_menu)
    build_ms = (time.perf_counter() - t0) * 1000
    named = [r for i, r in enumerate(rows) if i % 4 != 3]
    unnamed = [r for i, r in enumerate(rows) if i % 4 == 3]
    print(f"menu: {len(defs)} tools; {len(rows)} labelled requests "
          f"({len(unnamed)} without the service's name)")
    print(f"{'shortlist':>10} {'recall@k':>9} {'named':>7} {'unnamed':>8} "
          f"{'prompt chars':>13} {'~tokens':>8} {'rank ms (558)':>14} {'rank ms (1116)':>15}")
    sample = rows[:40]
    for k in (None, 5, 10, 20):
        if k is None:
            recall = named_r = unnamed_r = 1.0
            rank_small = rank_big = 0.0
        else:
            s = Shortlist(k)
            recall, named_r, unnamed_r = (s.recall(menu, rows), s.recall(menu, named),
                                          s.recall(menu, unnamed))
            rank_small, rank_big = ranking_ms(menu, rows, k), ranking_ms(big, rows, k)
        chars = prompt_chars(menu, sample, k)
        print(f"{str(k):>10} {recall:9.3f} {named_r:7.3f} {unnamed_r:8.3f} {chars:13.0f} "
              f"{chars / 4:8.0f} {rank_small:14.3f} {rank_big:15.3f}")
    print(f"the 1,116-tool menu, once per option set (reused through the option cache): "
          f"reading its schemas {read_ms:.0f} ms, building its BM25 index {build_ms:.1f} ms")
    print("shortlist=None shows every tool: its recall is 1 by definition")


if __name__ == "__main__":
    main()
