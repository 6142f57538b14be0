"""What a Ray job costs beside `evaluate` in one process, in one run.

The same 20,000 rows, a model answering after 20 ms (ScriptedRuntime, latency 0.02), the same
rows in flight per process (concurrency 64): `evaluate` in this process, then
`openprogram.ray.decide` with 1 and 2 workers, then `evaluate` again, all with a local Ray
(`ray.init(num_cpus=2)`) started first and idle beside the `evaluate` runs. For each: wall
time, rows per second, and the processor time per row of every process involved (this one
and, for Ray, its raylet, GCS and workers: every descendant of this process, read from /proc).
Last, the adapter's own overhead per row: one worker's `__call__` on batches of 1,000 rows
against `evaluate` on the same rows in this process, with a model that answers at once,
interleaved (A B A B ...), so only what `decide` adds — reading the Arrow batch, the output
columns, the trace as JSON — differs.

    .venv/bin/python benchmarks/bench_ray.py     (about 90 s on 2 cores; Linux: reads /proc)
"""
from __future__ import annotations

import functools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROWS = 20_000
LATENCY = 0.020
CONCURRENCY = 64
BATCH = 1_000

HELPERS = str(Path(__file__).resolve().parent.parent / "tests" / "ray")
sys.path.insert(0, HELPERS)
import rayhelp  # noqa: E402  (the tests' options, rows and scripted model)

from openprogram import evaluate  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of_tree(root: int) -> dict[int, float]:
    """Processor seconds of `root` and of every live descendant, by process id."""
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        pid, ppid = int(d), int(fields[1])
        kids.setdefault(ppid, []).append(pid)
        cpu[pid] = sum(int(x) for x in fields[11:13]) / TICK   # utime, stime
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        if p in cpu:
            out[p] = cpu[p]
        todo.extend(kids.get(p, []))
    return out


class Sampler:
    """The processor time the process tree spends while running: /proc read every 0.1 s, each
    process's last reading kept, so a Ray worker that exits before the end still counts (up to
    its last 0.1 s)."""

    def __init__(self):
        import threading
        self.first = cpu_of_tree(os.getpid())
        self.last = dict(self.first)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            self.last.update(cpu_of_tree(os.getpid()))

    def total(self) -> float:
        self.stop.set()
        self.thread.join()
        self.last.update(cpu_of_tree(os.getpid()))
        return sum(v - self.first.get(p, 0.0) for p, v in self.last.items())


def measured(label: str, run) -> dict:
    sampler, t0 = Sampler(), time.perf_counter()
    n = run()
    wall, cpu = time.perf_counter() - t0, sampler.total()
    assert n == ROWS, (label, n)
    print(f"  {label:<28} {wall:7.2f} s  {ROWS / wall:8.0f} rows/s  "
          f"{cpu / ROWS * 1e6:7.0f} us processor/row  ({cpu:.1f} s)")
    return {"wall": wall, "cpu": cpu}


def in_process(data: list[dict]) -> int:
    res = evaluate(rayhelp.TEMPLATE, rayhelp.OPTIONS, data, concurrency=CONCURRENCY,
                   runtime=rayhelp.scripted(LATENCY), progress=False)
    return len(res)


def on_ray(data: list[dict], workers: int) -> int:
    import ray

    from openprogram import ray as opray
    out = opray.decide(ray.data.from_items(data, override_num_blocks=workers * 4),
                       rayhelp.TEMPLATE, rayhelp.OPTIONS,
                       runtime=functools.partial(rayhelp.scripted, LATENCY), workers=workers,
                       concurrency=CONCURRENCY, batch_size=BATCH)
    return sum(b.num_rows for b in out.iter_batches(batch_format="pyarrow", batch_size=None))


def overhead(data: list[dict], rounds: int = 5) -> None:
    """One worker's call on Arrow batches beside evaluate on the same records, no latency."""
    import pyarrow as pa

    from openprogram.ray.workers import _Decide
    worker = _Decide(rayhelp.scripted, rayhelp.TEMPLATE, rayhelp.OPTIONS, {}, 8, None, False)
    rt = rayhelp.scripted()
    batches = [data[i:i + BATCH] for i in range(0, 4 * BATCH, BATCH)]
    tables = [pa.Table.from_pylist(b) for b in batches]
    a, b = [], []
    for _ in range(rounds):
        t0 = time.process_time()
        for batch in batches:
            evaluate(rayhelp.TEMPLATE, rayhelp.OPTIONS, batch, runtime=rt, concurrency=8,
                     progress=False)
        a.append((time.process_time() - t0) / (len(batches) * BATCH))
        t0 = time.process_time()
        for table in tables:
            worker(table)
        b.append((time.process_time() - t0) / (len(batches) * BATCH))
    ea, eb = statistics.median(a), statistics.median(b)
    print(f"  evaluate on the batch's rows   {ea * 1e6:7.1f} us processor/row (median of "
          f"{rounds})")
    print(f"  the worker's call on the batch {eb * 1e6:7.1f} us processor/row")
    print(f"  the adapter's own overhead     {(eb - ea) * 1e6:7.1f} us/row "
          f"({(eb - ea) / ea:+.0%} of evaluate's)")


def main() -> None:
    import ray
    print(f"bench_ray: {ROWS:,} rows, a model answering after {LATENCY * 1000:.0f} ms, "
          f"{CONCURRENCY} rows in flight per process; {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, ray {ray.__version__}")
    data = rayhelp.rows(ROWS)
    ideal = ROWS * LATENCY / CONCURRENCY
    print(f"  ideal for one process: {ideal:.2f} s ({ROWS / ideal:.0f} rows/s)")
    t0 = time.perf_counter()
    rayhelp.start_ray(os.pathsep.join([HELPERS, *filter(None, [os.environ.get("PYTHONPATH")])]))
    figures = {}
    try:
        print(f"  ray.init: {time.perf_counter() - t0:.1f} s (Ray idles beside every run below)")
        idle = Sampler()
        time.sleep(5)
        print(f"  Ray idle: {idle.total() / 5 * 100:.0f}% of a CPU (raylet, GCS, this driver's "
              f"threads; part of every figure below)")
        figures["evaluate"] = measured("evaluate, one process", lambda: in_process(data))
        for workers in (1, 2):
            figures[f"ray{workers}"] = measured(f"decide, {workers} worker(s)",
                                                lambda: on_ray(data, workers))
        figures["evaluate2"] = measured("evaluate again", lambda: in_process(data))
    finally:
        ray.shutdown()
    base = figures["evaluate"]
    for key, label in (("ray1", "decide, 1 worker"), ("ray2", "decide, 2 workers")):
        f = figures[key]
        print(f"  {label}: {base['wall'] / f['wall']:.2f}x evaluate's rows/s, "
              f"{f['cpu'] / base['cpu']:.2f}x its processor time")
    print("the adapter's own overhead per row (no latency, batches of 1,000):")
    overhead(data)


if __name__ == "__main__":
    main()
