"""What users install is what is tested: the sdist and the wheel are built from the checkout as a
release would build them (`python -m build`: the sdist, then the wheel from the sdist, each in
build's own isolated environment), checked with `twine check`, and each is installed into a fresh
venv — not editable, the working directory outside the repository — where every module of the
source tree must import and the user's first steps must work: the README's first example, a
decision through `OpenAIRuntime` against a loopback server speaking OpenAI's protocol, its
recording replayed by `ReplayRuntime`, and the same request answered again by `CachedRuntime`;
`python -m openprogram` and the console script.

The modules to import are found by walking the source tree, so a package that discovery leaves
out of the build fails here by name (a hand-written package list once shipped a wheel without
`runtimes/providers` and `runtimes/llamacpp`, and every other test ran from the source tree).

The project installs with `--no-deps` (its core needs nothing); the optional packages that some
modules import (the SDKs, IPython, ipywidgets, pandas, llama.cpp, mcp) are the ones this test run
already has: the fresh venv reads the test venv's site-packages through a plain path line in a
.pth file, which adds the folder to `sys.path` after the venv's own and runs none of the .pth
files in it — so the test venv's editable install of this project is never activated, and the
script checks that every module it imported came from the fresh venv."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from build_inputs import copy_build_inputs
from fakeserver import FakeServer, text

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def source_modules() -> list[str]:
    """Every module of the source tree, as users import it."""
    names = []
    for top, package in ((ROOT / "openprogram", "openprogram"),
                         (ROOT / "widgets", "openprogram.widgets")):
        for path in sorted(top.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [package, *path.relative_to(top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(parts))
    return names


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _env(home: Path) -> dict:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1",
           "HOME": str(home)}
    for name in ("PYTHONPATH", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(the sdist, the wheel, the folder they are in), built from a copy of the build inputs (so
    the build writes nothing into the checkout)."""
    base = tmp_path_factory.mktemp("artifact")
    src = copy_build_inputs(base / "src")
    out = base / "dist"
    # the sdist first, then the wheel from the unpacked sdist: the wheel proves the sdist holds
    # what a rebuild needs
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], cwd=str(base),
         env=_env(base))
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel, base


def _fresh_venv(base: Path, name: str, artifact: Path) -> Path:
    """A new venv holding `artifact` (installed, not editable) and, behind its own packages,
    the optional ones of this test run; its python."""
    venv = base / name
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    purelib = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                        ).stdout.strip())
    (purelib / "zz_test_run_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", str(artifact)],
         cwd=str(base), env=_env(base))
    return py


@pytest.fixture(scope="module")
def wheel_venv(built):
    sdist, wheel, base = built
    return _fresh_venv(base, "wheel-venv", wheel), base


@pytest.fixture(scope="module")
def sdist_venv(built):
    sdist, wheel, base = built
    return _fresh_venv(base, "sdist-venv", sdist), base


IMPORT_ALL = textwrap.dedent("""
    import importlib, json, sys, traceback
    names = json.loads(sys.argv[1])
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            failed[name] = traceback.format_exc(limit=2)[-600:]
    import openprogram, openprogram.widgets
    from importlib.metadata import version
    outside = sorted(n for n, m in sys.modules.items()
                     if n.split(".")[0] == "openprogram" and getattr(m, "__file__", None)
                     and not m.__file__.startswith(sys.prefix))
    print(json.dumps({"failed": failed, "outside": outside, "version": openprogram.__version__,
                      "dist_version": version("openprogram-decisions"),
                      "editable": [type(f).__name__ for f in sys.meta_path
                                   if "editable" in type(f).__module__.lower()]}))
""")


def _import_everything(py: Path, base: Path) -> dict:
    proc = _run([str(py), "-c", IMPORT_ALL, json.dumps(source_modules())], cwd=str(base),
                env=_env(base))
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["wheel_venv", "sdist_venv"])
def test_every_module_of_the_source_tree_imports_from_the_installed_artifact(which, request):
    py, base = request.getfixturevalue(which)
    out = _import_everything(py, base)
    failed = "\n".join(f"{k}: {v}" for k, v in out["failed"].items())
    assert not failed, f"modules of the source tree that do not import from the {which}:\n{failed}"
    assert out["outside"] == [], f"imported from outside the fresh venv: {out['outside']}"
    assert out["editable"] == []
    assert out["version"] == out["dist_version"]


def test_the_source_tree_walk_sees_every_package():
    """The list the test above imports is the source tree's, providers and llama.cpp included
    (what a hand-written package list once left out)."""
    names = source_modules()
    for name in ("openprogram.runtimes.providers.openai_runtime", "openprogram.runtimes.llamacpp",
                 "openprogram.runtimes.cassette.replay", "openprogram.mcp",
                 "openprogram.widgets.panel"):
        assert name in names
    assert len(names) > 100


def test_twine_accepts_both_artifacts(built):
    sdist, wheel, base = built
    proc = _run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
                cwd=str(base))
    assert proc.stdout.count("PASSED") == 2, proc.stdout


def test_the_wheel_holds_the_package_and_its_types_and_no_tests(built):
    sdist, wheel, base = built
    names = zipfile.ZipFile(wheel).namelist()
    code = {n for n in names if n.endswith(".py")}
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "openprogram").rglob("*.py")}
    expected |= {"openprogram/widgets/" + str(p.relative_to(ROOT / "widgets"))
                 for p in (ROOT / "widgets").rglob("*.py")}
    assert code == {n for n in expected if "__pycache__" not in n}, \
        sorted(code ^ expected)
    assert "openprogram/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "widgets/", "notebooks/"))
                or "/tests/" in n or n.startswith("openprogram/test_")]
    top = {n.split("/")[0] for n in names}
    assert top == {"openprogram", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
                   + ".dist-info"}, top
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "License-Expression: MIT" in meta
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_sdist_holds_what_a_rebuild_needs_and_no_tests(built):
    sdist, wheel, base = built
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE",
                   "CHANGELOG.md", "openprogram/py.typed", "openprogram/__init__.py",
                   "widgets/__init__.py", "openprogram/runtimes/providers/openai_runtime.py"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "benchmarks/"))]


def readme_first_example() -> tuple[str, str]:
    """The README's first python block and the output its last comment promises."""
    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    promised = re.findall(r"^# (?:prints|->):? (.*)$", block, re.M)
    assert promised, "the README's first example should say what it prints (# prints: ...)"
    return block, promised[-1].strip()


def test_the_readmes_first_example_prints_its_result(wheel_venv):
    py, base = wheel_venv
    block, promised = readme_first_example()
    script = base / "readme_example.py"
    script.write_text(block)
    proc = _run([str(py), str(script)], cwd=str(base), env=_env(base))
    assert proc.stdout.strip().splitlines()[-1] == promised.strip('"')


PROVIDER = textwrap.dedent("""
    import json, sys
    from openprogram import decision
    from openprogram.runtimes import CachedRuntime, OpenAIRuntime, RecordingRuntime, ReplayRuntime

    url, key, folder = sys.argv[1:4]

    def refund(order: str) -> str:
        "Refund the order."
        return "REFUND " + order

    options = {"refund": refund, "keep": "KEEP"}
    prompt = "The parcel arrived broken (order A1)."

    def model():
        return OpenAIRuntime(model="test-model", base_url=url, api_key=key, max_retries=0)

    recorded = decision.make(prompt, options,
                             runtime=RecordingRuntime(model(), folder + "/run.json"))
    replayed = decision.make(prompt, options, runtime=ReplayRuntime(folder + "/run.json"))
    first = CachedRuntime(model(), folder + "/cache.jsonl")
    cached_miss = decision.make(prompt, options, runtime=first)
    again = CachedRuntime(model(), folder + "/cache.jsonl")
    cached_hit = decision.make(prompt, options, runtime=again)
    files = "".join(open(folder + "/" + name).read() for name in ("run.json", "cache.jsonl"))
    print(json.dumps({"recorded": recorded, "replayed": replayed, "miss": cached_miss,
                      "hit": cached_hit, "hits": again.hits, "misses": again.misses,
                      "key_in_files": key in files}))
""")


def test_a_provider_decision_is_recorded_replayed_and_cached(wheel_venv):
    py, base = wheel_venv
    key = "sk-artifact-test-9f3kQ2"
    with FakeServer("openai") as server:
        server.push(text('{"call": "refund", "args": {"order": "A1"}}'),
                    text('{"call": "refund", "args": {"order": "A1"}}'))
        proc = _run([str(py), "-c", PROVIDER, server.base_url, key, str(base)], cwd=str(base),
                    env=_env(base))
        asked = len(server.requests)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["recorded"] == out["replayed"] == out["miss"] == out["hit"] == "REFUND A1"
    assert (out["hits"], out["misses"]) == (1, 0)
    assert asked == 2, "the replay and the cache hit must not reach the server"
    assert out["key_in_files"] is False


def test_python_m_openprogram_and_the_console_script_run_the_tour(wheel_venv):
    py, base = wheel_venv
    module = _run([str(py), "-m", "openprogram", "tour"], cwd=str(base), env=_env(base))
    script = _run([str(py.parent / "openprogram"), "tour"], cwd=str(base), env=_env(base))
    assert module.stdout == script.stdout
    assert "The decision resolved to:" in module.stdout and "positive" in module.stdout


def test_a_build_without_the_package_index_names_the_missing_build_requirement(tmp_path):
    """`./dev dist` where pip can reach no index for build's isolated environment: one message
    naming the requirement and the two ways out, not pip's traceback."""
    env = {**_env(tmp_path), "OPENPROGRAM_VENV": sys.prefix, "PIP_CONFIG_FILE": os.devnull,
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}
    proc = subprocess.run([str(ROOT / "dev"), "dist", str(tmp_path / "out")], cwd=str(ROOT),
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    (said,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("./dev dist:")]
    assert "the build requirement 'setuptools>=77' could not be installed" in said
    assert "--no-isolation" in said and "PIP_INDEX_URL" in said
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
