"""What the decision core costs of its own, offline, each figure beside its target in one run:

1. `decision.make` on 10 / 100 / 1,000 function options: the first time (nothing cached), on a
   fresh dict of functions seen before (a re-run notebook cell), on the same dict again, and on
   one normalised option set (a Menu, as evaluate reuses it). The figure is the core's own time:
   the wall time of the call minus the time spent inside the scripted model's `complete()`.
2. Memory: one runtime reused for 30,000 decisions, with the default window, with
   `window=None` (keep everything), and recorded to a cassette (a RecordingRuntime, which keeps
   the window in memory and appends every call to its file), RSS at 5,000 and 30,000 decisions
   and the growth between.
3. Import time: `import openprogram, openprogram.runtimes` timed inside a fresh interpreter,
   started bare (`-S`: no site packages, nothing preloaded) and as installed (site on).
4. Validation of one 50-field nested args object (20 scalars and enums at the top, two nested
   objects of 10 fields, a list of three 10-field objects): the validator (validator.py, over
   the field's compiled schema) beside the one it replaced (benchmarks/_old_validator.py, kept
   verbatim) and beside pydantic's `TypeAdapter(...).validate_python` of the same structure as
   TypedDicts.
5. A schema as written using patternProperties, if/then/else and unevaluatedProperties (judged
   by schemaeval.py), on the same valid and invalid values: this library's validator, the
   `jsonschema` package's (`is_valid` of a validator made once; target: ours >= 5x faster) and
   `jsonschema-rs` (compiled, the limit: the ratio is printed).

Run: .venv/bin/python benchmarks/bench_core.py   (about a minute on 2 cores); name sections to
run only those: `bench_core.py make validate schema` (of make, memory, import, validate,
schema).
Prints figures and ratios; asserts nothing about time.
"""
from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openprogram import decision  # noqa: E402
from openprogram.decision.options import normalize  # noqa: E402
from openprogram.runtimes import RecordingRuntime, ScriptedRuntime  # noqa: E402
from openprogram.trace import decision_trace as trace_mod  # noqa: E402

FRESH_TARGET_MS = 1.0     # a fresh dict of 100 seen functions
REUSED_TARGET_MS = 0.1    # a reused option set of 100
MEMORY_TARGET_MB = 2.0    # growth from decision 5,000 to 30,000
IMPORT_TARGET_MS = 30.0


class TimedScript(ScriptedRuntime):
    """The scripted model, timing itself: its time is the model's, not the core's."""
    model_s = model_cpu = 0.0

    def complete(self, messages, **kwargs):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return super().complete(messages, **kwargs)
        finally:
            TimedScript.model_s += time.perf_counter() - t0
            TimedScript.model_cpu += time.thread_time() - c0


def functions(n: int) -> dict:
    """n function options with typed, described, defaulted and hidden parameters."""
    out = {}
    for i in range(n):
        def travel(city: str, days: int = 1, fast: bool = False, i=i):
            return (i, city, days, fast)
        travel.__doc__ = f"Option {i}: travel somewhere."
        travel.input_meta = {"city": {"description": "where to go"}, "i": {"hidden": True}}
        out[f"travel_{i}"] = travel
    return out


def core_ms(call, rounds: int) -> tuple[float, float, float]:
    """The core's own milliseconds per call: median and minimum of the wall time, and the
    median of the CPU time of this thread (which other processes on a busy machine inflate
    far less)."""
    own, cpu = [], []
    for _ in range(rounds):
        TimedScript.model_s = TimedScript.model_cpu = 0.0
        t0, c0 = time.perf_counter(), time.thread_time()
        call()
        own.append(time.perf_counter() - t0 - TimedScript.model_s)
        cpu.append(time.thread_time() - c0 - TimedScript.model_cpu)
    return statistics.median(own) * 1e3, min(own) * 1e3, statistics.median(cpu) * 1e3


def bench_make() -> list[tuple]:
    rows = []
    for n in (10, 100, 1000):
        fns = functions(n)
        reply = json.dumps({"call": f"travel_{n - 1}",
                            "args": {"city": "Rome", "days": 3, "fast": True}})
        rt = TimedScript(rule=lambda prompt: reply)
        rounds = {10: 400, 100: 300, 1000: 40}[n]

        def first():
            decision.clear_option_cache()
            return decision.make("Pick one.", dict(fns), runtime=rt)
        same = dict(fns)
        menu = normalize(fns)
        cases = [
            ("first time (nothing cached)", first, max(5, rounds // 10)),
            ("fresh dict, functions seen", lambda: decision.make("Pick one.", dict(fns),
                                                                 runtime=rt), rounds),
            ("the same dict again", lambda: decision.make("Pick one.", same, runtime=rt),
             rounds),
            ("one normalised set (Menu)", lambda: decision.make("Pick one.", menu,
                                                                runtime=rt), rounds),
        ]
        for label, call, times in cases:
            assert call()[1] == "Rome"
            rows.append((n, label, *core_ms(call, times)))
    return rows


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def bench_memory(window, n: int = 30_000, cassette: Path | None = None) -> dict:
    def route(message: str, priority: int = 1) -> str:
        return f"routed {message} at {priority}"
    options = {"route": route, "ignore": ("IGNORED", "Nothing to do"),
               "escalate": ("Hand to a person", {"team": {"type": str,
                                                          "options": ["billing", "tech"]}})}
    reply = json.dumps({"call": "route", "args": {"message": "m", "priority": 2}})
    rt = ScriptedRuntime(rule=lambda prompt: reply, window=window)
    if cassette is not None:
        rt = RecordingRuntime(rt, cassette, window=window)
    marks = {}
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        decision.make(f"Route message number {i}. Pick one.", options, runtime=rt)
        if i in (5_000, n):
            gc.collect()
            marks[i] = rss_mb()
    return {"growth": marks[n] - marks[5_000], "at_5k": marks[5_000], "at_end": marks[n],
            "dag": len(rt.dag), "calls": len(rt.calls), "history": len(trace_mod.history),
            "seconds": time.perf_counter() - t0}


def bench_import(runs: int = 15) -> dict:
    """`import openprogram, openprogram.runtimes` timed inside fresh interpreters, bare
    (`-S`: no site packages, nothing preloaded) and as installed here (site on); and the
    process wall time over `python -S -c pass`."""
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache  # compiled once, then read from cache as usual

        def python(*args: str) -> tuple[float, str]:
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, *args], env=env, check=True,
                                 capture_output=True, text=True).stdout
            return time.perf_counter() - t0, out
        timed = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); "
                 f"t = time.perf_counter(); import openprogram, openprogram.runtimes; "
                 f"print(time.perf_counter() - t)")
        python("-S", "-c", timed)  # warm the bytecode cache
        python("-c", timed)
        bare, site, import_wall, pass_wall = [], [], [], []
        for _ in range(runs):
            wall, out = python("-S", "-c", timed)
            bare.append(float(out) * 1e3)
            import_wall.append(wall * 1e3)
            pass_wall.append(python("-S", "-c", "pass")[0] * 1e3)
            site.append(float(python("-c", timed)[1]) * 1e3)
        return {"bare": statistics.median(bare), "bare_min": min(bare),
                "site": statistics.median(site), "site_min": min(site),
                "wall_delta": statistics.median(import_wall) - statistics.median(pass_wall)}


def wide_args() -> tuple[dict, dict, object]:
    """(spec-form schema, a value that fits it, the same structure as TypedDicts)."""
    from typing import Literal

    from typing_extensions import TypedDict  # pydantic needs it before Python 3.12
    kinds = [(str, "text"), (int, 7), (float, 2.5), (bool, True)]
    colors = ["red", "green", "blue"]

    def group(n: int, prefix: str) -> tuple[dict, dict, dict]:
        spec, value, ann = {}, {}, {}
        for i in range(n):
            t, v = kinds[i % 4]
            if i % 5 == 4:
                spec[f"{prefix}{i}"] = {"type": "str", "options": colors}
                value[f"{prefix}{i}"], ann[f"{prefix}{i}"] = "green", Literal["red", "green",
                                                                              "blue"]
            else:
                spec[f"{prefix}{i}"], value[f"{prefix}{i}"], ann[f"{prefix}{i}"] = t, v, t
        return spec, value, ann
    spec, value, ann = group(20, "f")
    for name in ("address", "profile"):
        s, v, a = group(10, name[0])
        spec[name], value[name], ann[name] = s, v, TypedDict(name.title(), a)
    s, v, a = group(10, "i")
    spec["items"], value["items"] = [s], [dict(v) for _ in range(3)]
    ann["items"] = list[TypedDict("Item", a)]
    return spec, value, TypedDict("Args", ann)


def bench_validate(rounds: int = 7, loops: int = 400) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _old_validator
    from pydantic import TypeAdapter

    from openprogram.decision.options import schema_field, validate
    spec, value, typed = wide_args()
    f = schema_field(spec, "args")
    adapter = TypeAdapter(typed)
    assert validate(value, f, "args", []) == _old_validator.validate(value, f, "args", []) \
        == adapter.validate_python(value)

    def per_call_us(fn) -> tuple[float, float]:
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(loops):
                fn()
            times.append((time.perf_counter() - t0) / loops * 1e6)
        return statistics.median(times), min(times)
    return {"new": per_call_us(lambda: validate(value, f, "args", [])),
            "old": per_call_us(lambda: _old_validator.validate(value, f, "args", [])),
            "pydantic": per_call_us(lambda: adapter.validate_python(value))}


#: Section 5's schema: keys by pattern, a condition, and no key no part of it evaluated.
RULES_SCHEMA = {
    "type": "object",
    "properties": {"kind": {"enum": ["person", "company"]}, "name": {"type": "string",
                                                                   "minLength": 1}},
    "required": ["kind", "name"],
    "patternProperties": {"^x-": {"type": "string", "maxLength": 40}},
    "if": {"properties": {"kind": {"const": "company"}}},
    "then": {"properties": {"vat": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{8,12}$"}},
             "required": ["vat"]},
    "else": {"properties": {"age": {"type": "integer", "minimum": 0, "maximum": 150}}},
    "unevaluatedProperties": False,
}
RULES_VALUES = [
    ({"kind": "company", "name": "Acme", "vat": "DE123456789", "x-source": "crm"}, True),
    ({"kind": "person", "name": "Ann", "age": 41, "x-a": "1", "x-b": "2"}, True),
    ({"kind": "company", "name": "Acme"}, False),                 # then: vat required
    ({"kind": "person", "name": "Ann", "vat": "DE123456789"}, False),  # vat unevaluated
    ({"kind": "person", "name": "Ann", "x-a": 3}, False),          # pattern-keyed value
]


def bench_rules(rounds: int = 15, loops: int = 100) -> dict:
    import jsonschema

    from openprogram.base.errors import AttemptError
    from openprogram.decision.schema.validator import compile_schema
    ours = compile_schema(RULES_SCHEMA, "bench", as_written=True)
    theirs = jsonschema.Draft202012Validator(RULES_SCHEMA)

    def ours_valid(v):
        try:
            ours(v, "args", [])
            return True
        except AttemptError:
            return False
    runs = {"ours": ours_valid, "jsonschema": theirs.is_valid}
    try:
        import jsonschema_rs
        runs["jsonschema-rs"] = jsonschema_rs.validator_for(RULES_SCHEMA).is_valid
    except ImportError:
        pass
    for name, fn in runs.items():  # all three judge every value alike
        assert [fn(v) for v, _ in RULES_VALUES] == [ok for _, ok in RULES_VALUES], name

    # The three take turns within each round, timed in this thread's CPU time: on a machine
    # shared with other work a load that comes and goes then weighs on all three alike, so
    # the ratios (taken round by round) hold where wall-time phases one after another do not.
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            t0 = time.thread_time()
            for _ in range(loops):
                for v, _ in RULES_VALUES:
                    fn(v)
            times[name].append((time.thread_time() - t0) / loops / len(RULES_VALUES) * 1e6)
    out = {name: (statistics.median(t), min(t)) for name, t in times.items()}
    out["ratio"] = statistics.median(j / o for j, o in zip(times["jsonschema"], times["ours"]))
    return out


def main() -> None:
    t_start = time.perf_counter()
    wanted = set(sys.argv[1:]) or {"make", "memory", "import", "validate", "schema"}
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
          f"CPU(s), load average {os.getloadavg()[0]:.1f} at start\n")

    if "validate" in wanted:
        v = bench_validate()
        (new, new_min), (old, old_min), (pyd, pyd_min) = v["new"], v["old"], v["pydantic"]
        print("Validation of one 50-field nested args object, microseconds per call "
              "(median, min):")
        print(f"  new validator (validator.py)     {new:8.1f} {new_min:8.1f}")
        print(f"  old validator (before issue 23)  {old:8.1f} {old_min:8.1f}   new/old "
              f"{new / old:.2f}x, min {new_min / old_min:.2f}x (target <= 1.00)")
        print(f"  pydantic TypeAdapter             {pyd:8.1f} {pyd_min:8.1f}   new/pydantic "
              f"{new / pyd:.2f}x, min {new_min / pyd_min:.2f}x (target <= 2.00)\n")
    if "schema" in wanted:
        r = bench_rules()
        ours, ours_min = r["ours"]
        print(f"A schema as written with patternProperties, if/then/else and "
              f"unevaluatedProperties, {len(RULES_VALUES)} values (2 valid, 3 not), "
              f"CPU microseconds per value (median, min; the three take turns each round):")
        print(f"  this library (schemaeval.py)     {ours:8.2f} {ours_min:8.2f}")
        js, js_min = r["jsonschema"]
        print(f"  jsonschema Draft202012Validator  {js:8.2f} {js_min:8.2f}   jsonschema/ours "
              f"{js / ours:.1f}x, min {js_min / ours_min:.1f}x, round by round "
              f"{r['ratio']:.1f}x (target >= 5.0)")
        if "jsonschema-rs" in r:
            rs, rs_min = r["jsonschema-rs"]
            print(f"  jsonschema-rs (compiled)         {rs:8.2f} {rs_min:8.2f}   ours/rs "
                  f"{ours / rs:.1f}x, min {ours_min / rs_min:.1f}x (the compiled limit)\n")
        else:
            print("  jsonschema-rs: not installed (pip install jsonschema-rs)\n")
    if "make" not in wanted:
        return _rest(wanted, t_start)
    print("decision.make, the core's own time per decision (wall time minus the scripted "
          "model's), ms:")
    print(f"{'options':>8}  {'option set':<30} {'median':>8} {'min':>8} {'CPU median':>11}")
    rows = bench_make()
    for n, label, med, low, cpu in rows:
        print(f"{n:>8}  {label:<30} {med:>8.3f} {low:>8.3f} {cpu:>11.3f}")
    fresh = next(m for n, label, m, _, _ in rows if n == 100 and "seen" in label)
    reused = next(m for n, label, m, _, _ in rows if n == 100 and "Menu" in label)
    print(f"target: fresh dict of 100 seen functions <= {FRESH_TARGET_MS} ms -> "
          f"{fresh:.3f} ms ({fresh / FRESH_TARGET_MS:.2f}x the target); reused set of 100 <= "
          f"{REUSED_TARGET_MS} ms -> {reused:.3f} ms ({reused / REUSED_TARGET_MS:.2f}x)")
    _rest(wanted, t_start)


def _rest(wanted: set, t_start: float) -> None:
    if "memory" in wanted:
        _memory()
    if "import" in wanted:
        _import()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; total run time "
          f"{time.perf_counter() - t_start:.0f} s")


def _memory() -> None:
    print("\nMemory of one runtime reused for 30,000 decisions (RSS, MB):")
    print(f"{'window':>14} {'at 5,000':>9} {'at 30,000':>10} {'growth':>8} {'dag':>7} "
          f"{'calls':>7} {'history':>8}")
    folder = tempfile.TemporaryDirectory()
    recorded = Path(folder.name) / "c.json"
    # (keeping everything last: memory it frees could hide growth in a later row)
    for label, window, cassette in (("default 1,000", 1000, None),
                                    ("recorded", 1000, recorded), ("None (all)", None, None)):
        m = bench_memory(window, cassette=cassette)
        print(f"{label:>14} {m['at_5k']:>9.1f} {m['at_end']:>10.1f} {m['growth']:>8.2f} "
              f"{m['dag']:>7} {m['calls']:>7} {m['history']:>8}")
        if cassette is None and window is not None:
            growth = m["growth"]
    print(f"  (recorded: the cassette holds all 30,000 calls, "
          f"{recorded.stat().st_size / 1e6:.1f} MB)")
    folder.cleanup()
    print(f"target: growth from 5,000 to 30,000 <= {MEMORY_TARGET_MB} MB with the default "
          f"window -> {growth:.2f} MB ({'met' if growth <= MEMORY_TARGET_MB else 'MISSED'})")


def _import() -> None:
    print("\nImport time of `import openprogram, openprogram.runtimes`, timed inside a fresh "
          "interpreter (ms):")
    imp = bench_import()
    print(f"  bare `python -S` (nothing preloaded):  median {imp['bare']:.1f}, min "
          f"{imp['bare_min']:.1f}; process wall time over `python -S -c pass`: "
          f"{imp['wall_delta']:.1f}")
    print(f"  `python` as installed here (site on):  median {imp['site']:.1f}, min "
          f"{imp['site_min']:.1f}")
    print(f"target: <= {IMPORT_TARGET_MS:.0f} ms -> bare {imp['bare']:.1f} ms "
          f"({imp['bare'] / IMPORT_TARGET_MS:.2f}x), as installed {imp['site']:.1f} ms "
          f"({imp['site'] / IMPORT_TARGET_MS:.2f}x)")


if __name__ == "__main__":
    main()
