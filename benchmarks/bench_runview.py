"""The live run view's cost per added node at the 10th, 100th and 1,000th decision (it must be flat).

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
10th is, if anything, the dearest).

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


def json_comms() -> None:
    """Every widget's comm encodes what it would send as JSON (the kernel's cost of a message,
    without a kernel)."""
    import comm
    from comm.base_comm import BaseComm

    class JsonComm(BaseComm):
        sent = 0

        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            json.dumps(data, default=str)
            JsonComm.sent += 1
    comm.create_comm = lambda *a, **k: JsonComm(*a, **k)


def measure(n: int, sites: int) -> dict[int, list[float]]:
    """Seconds the view spent per node, for the decisions ending at each checkpoint."""
    import openprogram
    from openprogram import Agent, decision
    from openprogram.runs import on_run
    from openprogram.runtimes import ScriptedRuntime
    from openprogram.widgets.runview import RunView

    costs: list[tuple[int, float]] = []     # (decisions started so far, seconds of one event)

    class TimedView(RunView):
        def on_event(self, event):
            t0 = time.perf_counter()
            super().on_event(event)
            costs.append((self.outline.decisions, time.perf_counter() - t0))

    class Loop(Agent):
        def step(self, i: int):
            # `sites` call sites: a decision made at line k of this block is one row per k
            if sites == 1 or i % sites == 0:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 1:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 2:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 3:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 4:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 5:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 6:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 7:
                return decision.make("Pick.", ["a", "b"])
            if i % sites == 8:
                return decision.make("Pick.", ["a", "b"])
            return decision.make("Pick.", ["a", "b"])

    def program():
        agent = Loop()
        return [agent.step(i) for i in range(n)]

    rt = ScriptedRuntime(rule=lambda prompt: '{"call": "a"}', window=None)
    views = []
    with on_run(lambda run: views.append(TimedView(run))):
        run = openprogram.run(program, runtime=rt)
    assert run.status == "ok", run.error
    assert len(run.decisions) == n and views[0].outline.decisions == n
    per_node: dict[int, list[float]] = {}
    for k in (10, 100, 1000):
        if k > n:
            continue
        window = [c for d, c in costs if k - 10 < d <= k]
        nodes = 3 * 10                      # method call, decision, model call per decision
        per_node[k] = [sum(window) / nodes, statistics.median(window) * 2]
    return per_node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    json_comms()
    for sites in (1, 10):
        runs = [measure(args.decisions, sites) for _ in range(args.repeat)]
        print(f"\n{args.decisions} decisions at {sites} call site(s), {args.repeat} runs; "
              f"the view's time per node (mean of the 10 decisions before the k-th; and the "
              f"median event, x2 for a node's two events):")
        base = None
        for k in sorted(runs[0]):
            mean = statistics.median(r[k][0] for r in runs)
            median = statistics.median(r[k][1] for r in runs)
            base = base or (mean, median)
            print(f"  k={k:>5}: {mean * 1e6:8.1f} µs/node (mean)  {median * 1e6:8.1f} µs/node "
                  f"(median event x2)   ratio to k=10: {mean / base[0]:.2f} / "
                  f"{median / base[1]:.2f}")


if __name__ == "__main__":
    main()
