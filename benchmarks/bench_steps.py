"""What a step-through costs beside the decision it shows, per reply size, in one run.

For each reply shape (the lesson's two-attempt decision; replies of 10 kB, 1 MB and 5 MB of
objects without a call key before the pick) the decision is made on ScriptedRuntime, then read
into stages with `steps(trace, options)` and drawn as HTML and as text. Printed: the decision's
time, the step-through's time and their ratio, the number of places a JSON decode was tried, and
the size of the page against the size of the reply: a step-through is bounded (its outline stops
at 100,000 characters or 50 candidates), so the page must not grow with the reply.

Run: .venv/bin/python benchmarks/bench_steps.py   (a few seconds)
Asserts only what the figures are about: the decode tries and the page size stay bounded.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openprogram import decision  # noqa: E402
from openprogram.decision import stepthrough as S  # noqa: E402
from openprogram.runtimes import ScriptedRuntime  # noqa: E402


def analyze(text: str, depth: int = 1, user: str = "x") -> str:
    """Analyze the sentiment."""
    return f"{text}:{depth}:{user}"


analyze.input_meta = {"user": {"hidden": True}}
OPTIONS = {"analyze": analyze, "done": ("OVER", "nothing left"),
           "esc": ("Hand over.", {"reason": str, "urgency": {"type": str,
                                                            "options": ["low", "high"]}})}
GOOD = '{"call": "analyze", "args": {"text": "hi", "depth": 2, "user": "root"}}'
SHAPES = {
    "two attempts": ['Example {"call": "done"} then {"action": "analyze", "args": '
                     '{"text": "hi", "depth": "two"}}', GOOD],
    "10 kB": ['{"a": 1} ' * 1_100 + GOOD],
    "1 MB": ['{"a": 1} ' * 110_000 + GOOD],
    "5 MB": ['{"a": 1} ' * 550_000 + GOOD],
}


def main() -> None:
    real = S._DECODER.raw_decode
    tries = [0]

    class Counting:
        @staticmethod
        def raw_decode(text, i):
            tries[0] += 1
            return real(text, i)

    S._DECODER = Counting()
    print(f"{'reply':>13} {'chars':>10} {'decide s':>9} {'steps s':>9} {'ratio':>6} "
          f"{'tries':>6} {'html chars':>11} {'html/reply':>10}")
    for name, replies in SHAPES.items():
        t0 = time.perf_counter()
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(replies), context={"user": "a"})
        t1 = time.perf_counter()
        tries[0] = 0
        st = decision.steps(decision.last_trace(), OPTIONS)
        page, text = st.to_html(), st.format_text()
        t2 = time.perf_counter()
        size = sum(map(len, replies))
        print(f"{name:>13} {size:>10,} {t1 - t0:>9.4f} {t2 - t1:>9.4f} "
              f"{(t2 - t1) / (t1 - t0):>6.2f} {tries[0]:>6} {len(page):>11,} "
              f"{len(page) / size:>10.3f}")
        assert tries[0] <= 2 * S._SCAN_STARTS and len(page) < 400_000 and len(text) < 200_000


if __name__ == "__main__":
    main()
