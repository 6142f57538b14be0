"""How long compiling llama-cpp-python takes here, as pip builds it by default and as `./dev`
builds it.

`./dev test` (and `./dev local`) install llama-cpp-python, which has no binary wheel on the index:
pip compiles llama.cpp. `./dev` builds only what the Python package loads (libllama and libggml: no
multimodal library, no `common` helpers, no server, tools, examples or tests; see LLAMA_CMAKE_ARGS
in ./dev). This script builds the wheel both ways, one build after the other, each with
`pip wheel --no-cache-dir` (so pip's wheel cache is neither read nor written), and prints the wall
and CPU time of each, the ratio, the load average around each build and the libraries each wheel
ships.

    .venv/bin/python benchmarks/bench_llama_build.py            # about 5-30 minutes on 2 cores

The machine's other work shows in the load average: compare the two figures of one run only.
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "llama-cpp-python==0.3.36"


def dev_cmake_args() -> str:
    """LLAMA_CMAKE_ARGS as ./dev sets it (it names files by absolute path under the checkout)."""
    out = subprocess.run(["bash", "-c", 'cd "$1" && eval "$(grep "^LLAMA_CMAKE_ARGS=" dev)" '
                          '&& printf %s "$LLAMA_CMAKE_ARGS"', "bash", str(REPO)],
                         check=True, capture_output=True, text=True).stdout
    if not out:
        raise SystemExit("./dev has no LLAMA_CMAKE_ARGS= line: this script reads the flags from it")
    return out


def build(label: str, cmake_args: str | None, into: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CMAKE_ARGS", "SKBUILD_CMAKE_ARGS")}
    if cmake_args:
        env["CMAKE_ARGS"] = cmake_args
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps",
                           "--disable-pip-version-check", "-q", PACKAGE, "-w", str(into)],
                          env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{label}: pip wheel failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    wheel = next(into.glob("*.whl"))
    libs = sorted(Path(n).name for n in zipfile.ZipFile(wheel).namelist()
                  if re.search(r"\.so(\.|$)", n))
    return {"label": label, "wall": wall, "load": (load, os.getloadavg()[0]),
            "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "size": wheel.stat().st_size, "libs": libs}


def main() -> None:
    args = dev_cmake_args()
    print(f"{PACKAGE}, {os.cpu_count()} CPUs; ./dev's CMAKE_ARGS: {args}")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, label, cmake_args in (("default", "pip's default build", None),
                                        ("dev", "./dev's build", args)):
            print(f"building: {label} ...", flush=True)
            runs.append(build(label, cmake_args, Path(tmp) / name))
            r = runs[-1]
            print(f"  wall {r['wall'] / 60:.1f} min ({r['wall']:.0f} s),"
                  f" CPU {r['cpu'] / 60:.1f} min,"
                  f" load average {r['load'][0]:.1f} before / {r['load'][1]:.1f} after,"
                  f" wheel {r['size'] / 1e6:.1f} MB: {' '.join(r['libs'])}", flush=True)
    old, new = runs
    print(f"./dev's build / pip's default: wall {new['wall'] / old['wall']:.2f}x, "
          f"CPU {new['cpu'] / old['cpu']:.2f}x")


if __name__ == "__main__":
    main()
