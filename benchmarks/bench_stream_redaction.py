"""What redacting a streamed reply chunk by chunk costs: StreamRedactor (which every provider
runtime puts between the SDK's stream and `on_text`) against handing the chunks on unchanged and
against `redact()` of the whole text once (what the runtime does to the final reply anyway), on
prose, on a reply that echoes the key many times, and on one long key-like word; with a
realistic 108-character key and 4-character chunks. Also how far the text shown lags behind the
text received (the held-back tail), in characters.

Run: .venv/bin/python benchmarks/bench_stream_redaction.py   (a few seconds)
Prints figures; asserts nothing about time.
"""
from __future__ import annotations

import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openprogram.runtimes.providers.key_redaction import StreamRedactor, redact  # noqa: E402

CHUNK = 4


def texts(key: str) -> dict[str, str]:
    rng = random.Random(0)
    words = ["the", "model", "answer", "is", "option", "apple", "because", "sk", "api",
             "bear", "author", '{"call":', '"a"}', key[10:14], key[40:47]]
    prose = " ".join(rng.choice(words) for _ in range(20000))
    echo = " ".join(rng.choice(words + [key]) for _ in range(3000))
    # JSON text as a model streams a pick: escapes everywhere (quotes, newlines, accents), and
    # now and then the key spelled with \u escapes, which the redactor decodes to find
    escaped_key = "".join(f"\\u{ord(c):04x}" for c in key)
    json_words = words + ['\\"', "\\n", "caf\\u00e9", "\\\\path", "\\/"]
    escaped = " ".join(rng.choice(json_words + [escaped_key] if i % 16 == 0 else json_words)
                       for i in range(20000))
    return {"prose (115k chars)": prose, "key echoed (~1 in 16 words)": echo,
            "JSON escapes, key escaped at times": escaped,
            "one 100k-char sk- word": "sk-" + "a" * 100_000}


def run(text: str, key: str) -> tuple[float, float, float, int, int]:
    """Seconds for: the redactor over all chunks, the chunks handed on as-is, redact() of the
    whole text once; the largest lag (characters received but not yet shown); pieces shown."""
    chunks = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]

    def redacted() -> tuple[int, int]:
        out, lag = [], 0
        r = StreamRedactor((key,), out.append)
        for c in chunks:
            r.feed(c)
            lag = max(lag, len(r._held))  # what it holds back: received, not yet shown
        r.close()
        return lag, len(out)

    def plain() -> None:
        out = []
        for c in chunks:
            out.append(c)

    def median(fn, repeat=5) -> float:
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    lag, pieces = redacted()
    return (median(redacted), median(plain), median(lambda: redact(text, (key,))), lag, pieces)


def main() -> None:
    rng = random.Random(1)
    key = "sk-ant-api03-" + "".join(rng.choice(string.ascii_letters + string.digits)
                                    for _ in range(95))
    print(f"key: {len(key)} characters; chunks of {CHUNK} characters")
    print(f"{'text':32} {'chunks':>7} {'us/chunk':>9} {'x as-is':>8} {'x redact()':>11} "
          f"{'max lag':>8} {'shown':>7}")
    for name, text in texts(key).items():
        t_red, t_plain, t_once, lag, pieces = run(text, key)
        n = -(-len(text) // CHUNK)
        print(f"{name:32} {n:7d} {t_red / n * 1e6:9.1f} {t_red / t_plain:8.0f} "
              f"{t_red / t_once:11.1f} {lag:8d} {pieces:7d}")
    print("lag: characters received but not yet passed to on_text (held back until the next "
          "chunk shows whether they are part of the key or of a key-like word)")


if __name__ == "__main__":
    main()
