"""The live run view: its cost per added node at the 10th, 100th and 1,000th decision (flat).

A program makes 1,000 decisions in a loop, each inside a call of an Agent method (three nodes per
decision: the method call, the decision, its model call), on ScriptedRuntime, under
`openprogram.run` with a `RunView` watching it from the start, as `%%run_program` shows it. The
view's own time per event is measured (its watcher, timed around the call), and the events of the
ten decisions before the 10th, 100th and 1,000th are compared: per node (two events, started and
finished), the median and the mean. There is no front end here: what is measured is the view's
work in the kernel — folding the node into its row, drawing the changed rows' HTML, setting the
widgets' traits and encoding each update message as JSON, as the kernel's comm would (a comm that
json-encodes every message is installed for this). The same figures for a program whose
decisions sit at ten different call sites follow. Ratios are to the figure at the 10th decision,
taken in the same run; a flat view stays near 1.0 (the first rows are made at the start, so the
10th is, if anything, the dearest). The median event and a mean without the slowest tenth are
given (on a machine shared with other work a stray pause of the process lands on any event), and
the messages and bytes sent per node, which do not depend on the machine.

    .venv/bin/python benchmarks/bench_runview.py [--decisions 1000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openprogram import decision  # noqa: E402  (the checkout's, found through the path above)


def json_comms() -> None:
    """Every widget's comm encodes what it would send as JSON (the kernel's cost of a message,
    without a kernel)."""
    import comm
    from comm.base_comm import BaseComm

    class JsonComm(BaseComm):
        sent = 0

        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            JsonComm.bytes += len(json.dumps(data, default=str))
            JsonComm.sent += 1
    JsonComm.sent = JsonComm.bytes = 0
    global COMM
    COMM = JsonComm
    comm.create_comm = lambda *a, **k: JsonComm(*a, **k)


# Ten call sites, one a line: a decision made on line k is one row of the view per k.
PICKS = [
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
]


def measure(n: int, sites: int) -> dict[int, list[float]]:
    """Seconds the view spent per node, for the decisions ending at each checkpoint."""
    import openprogram
    from openprogram import Agent
    from openprogram.runs import on_run
    from openprogram.runtimes import ScriptedRuntime
    from openprogram.widgets.runview import RunView

    # (decisions started so far, seconds of one event, messages it sent, bytes of them)
    costs: list[tuple[int, float, int, int]] = []

    class TimedView(RunView):
        def on_event(self, event):
            sent, size = COMM.sent, COMM.bytes
            t0 = time.perf_counter()
            super().on_event(event)
            costs.append((self.outline.decisions, time.perf_counter() - t0, COMM.sent - sent,
                          COMM.bytes - size))

    class Loop(Agent):
        def step(self, i: int):
            return PICKS[i % sites]()

    def program():
        agent = Loop()
        return [agent.step(i) for i in range(n)]

    rt = ScriptedRuntime(rule=lambda prompt: '{"call": "a"}', window=None)
    views = []
    with on_run(lambda run: views.append(TimedView(run))):
        run = openprogram.run(program, runtime=rt)
    assert run.status == "ok", run.error
    assert len(run.decisions) == n and views[0].outline.decisions == n
    # the tree: the root, the method's row, and one row per call site, however many decisions
    assert len(views[0].outline.rows) == 2 + sites, len(views[0].outline.rows)
    per_node: dict[int, tuple] = {}
    for k in (10, 100, 1000):
        if k > n:
            continue
        window = [c for c in costs if k - 10 < c[0] <= k]
        times = sorted(c[1] for c in window)
        kept = times[:len(times) - len(times) // 10]   # the slowest tenth is the machine's
        nodes = 3 * 10                      # method call, decision, model call per decision
        per_node[k] = (statistics.median(times) * 2, sum(kept) / len(kept) * 2,
                       sum(c[2] for c in window) / nodes, sum(c[3] for c in window) / nodes)
    return per_node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    json_comms()
    for sites in (1, 10):
        runs = [measure(args.decisions, sites) for _ in range(args.repeat)]
        print(f"\n{args.decisions} decisions at {sites} call site(s), the median of {args.repeat} "
              f"runs; the view's work per node over the 10 decisions before the k-th:")
        print("            median    trimmed mean   messages   bytes     ratios to k=10 "
              "(median, trimmed, messages)")
        base, figures = None, {}
        for k in sorted(runs[0]):
            median, trimmed, msgs, size = (statistics.median(r[k][i] for r in runs)
                                           for i in range(4))
            figures[k] = (median, trimmed, msgs)
            base = base or (median, trimmed, msgs)
            print(f"  k={k:>5}: {median * 1e6:7.1f} µs  {trimmed * 1e6:7.1f} µs     "
                  f"{msgs:6.2f}   {size:7.0f}      {median / base[0]:.2f}  "
                  f"{trimmed / base[1]:.2f}  {msgs / base[2]:.2f}")
        if 100 in figures and 1000 in figures:
            a, b = figures[100], figures[1000]
            print(f"  k=1000 against k=100 (past the rows made at the start): "
                  f"{b[0] / a[0]:.2f}  {b[1] / a[1]:.2f}  {b[2] / a[2]:.2f}")


if __name__ == "__main__":
    main()
