"""`./dev` explains itself: `help` (and -h, --help) describes each command in a line and exits 0;
an unknown command says so and names the closest one (exit 2), as does no command at all; every
file its comments cite is in the repository. Its steps, called one at a time (`source ./dev`
defines them and runs none) with stand-ins for the programs they run, say what they do and
leave nothing behind. Nothing here sets anything up."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

DEV = Path(__file__).resolve().parent.parent / "dev"
ROOT = DEV.parent


def dev(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(DEV), *args], capture_output=True, text=True, timeout=60)


def commands() -> list[str]:
    """The commands ./dev dispatches on (its `case` branches), help's aliases aside."""
    text = DEV.read_text()
    return re.findall(r"^  ([a-z]+)\)$", text, re.M)


@pytest.mark.parametrize("flag", ["help", "-h", "--help"])
def test_help_describes_every_command_in_a_line_and_exits_0(flag):
    done = dev(flag)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    described = {m.group(1): m.group(2) for m in
                 re.finditer(r"^  ([a-z]+)(?: \[[A-Z]+\])? +(\S.*)$", done.stdout, re.M)}
    assert set(commands()) == {"tour", "test", "local", "notebooks", "dist"}
    for command in commands():
        assert len(described.get(command, "")) > 20, f"./dev {flag} does not describe {command}"


@pytest.mark.parametrize("typed, closest", [("tuor", "tour"), ("tets", "test"),
                                            ("notebook", "notebooks"), ("lcoal", "local")])
def test_an_unknown_command_is_named_with_the_closest_one(typed, closest):
    done = dev(typed)
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"unknown command '{typed}'" in done.stderr
    assert f"the closest is '{closest}'" in done.stderr


def test_no_command_prints_the_list_and_exits_2():
    done = dev()
    assert done.returncode == 2
    assert "tour" in done.stderr and "notebooks" in done.stderr


def test_every_file_its_comments_cite_is_in_the_repository():
    # (comments once cited shared/recipes/nbval-and-binder.md, outside the repository, and
    # tests/schema/test_schema_suite.py, which is under tests/decision/)
    text = DEV.read_text()
    cited = set(re.findall(r"(?<![\w./$*-])((?:[\w.-]+/)+[\w.-]+"
                           r"\.(?:py|md|cmake|json|txt|toml|cfg))(?![\w/])", text))
    cited = {c for c in cited if not re.search(r"\b[A-Z]{3,}\b", c)}  # NAME.py: a placeholder
    assert "tests/decision/schema/test_schema_suite.py" in cited
    assert sorted(c for c in cited if not (ROOT / c).is_file()) == []


def stand_in(path: Path, body: str) -> None:
    """An executable shell script at `path` in place of a program a step runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def step(call: str, venv: Path, **env: str) -> subprocess.CompletedProcess:
    """`call` (a step of ./dev) run in bash after `source ./dev`, its venv `venv`."""
    return subprocess.run(["bash", "-c", f"source ./dev && {call}"], cwd=ROOT,
                          env={**os.environ, "OPENPROGRAM_VENV": str(venv), **env},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("status", [0, 1])
def test_a_socket_folder_of_its_own_is_removed_when_jupyterlab_stops(tmp_path, status):
    # A runtime folder whose path is too long for a kernel's socket gets a private one in
    # /tmp; each run left one behind (JupyterLab was exec'd, so nothing could remove it).
    venv, seen = tmp_path / "venv", tmp_path / "seen"
    long = str(tmp_path / ("r" * 120))
    stand_in(venv / "bin" / "jupyter", f"""case "$1" in
  --runtime-dir) echo "{long}" ;;
  lab) echo "$JUPYTER_RUNTIME_DIR" > "{seen}"
       test -d "$JUPYTER_RUNTIME_DIR" && echo there >> "{seen}"
       exit {status} ;;
esac
""")
    done = step("lab 01-tour.ipynb", venv)
    assert done.returncode == status, done.stderr
    folder, there = seen.read_text().split()
    assert folder.startswith("/tmp/jupyter-runtime.") and there == "there"
    assert not Path(folder).exists()
    assert f"kernels' sockets in {folder}" in done.stderr
    assert "removed when JupyterLab stops" in done.stderr


def test_the_trust_step_says_what_it_did(tmp_path):
    venv, args = tmp_path / "venv", tmp_path / "args"
    stand_in(venv / "bin" / "jupyter", f'[ "$1" = trust ] && echo "$@" > "{args}"\n')
    done = step("setup_lab", venv)
    assert done.returncode == 0, done.stderr
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("notebooks/*.ipynb"))
    assert notebooks and set(notebooks) <= set(args.read_text().split())
    assert f"==> trusting the {len(notebooks)} committed notebooks for this user" in done.stderr
    assert re.search(r"^    took \d+s$", done.stderr, re.M)


def test_the_schema_suite_step_takes_only_jsonschema_as_source_and_says_so(tmp_path):
    # With --no-binary :all: pip built the sdist's build backend (hatchling) and each of its
    # dependencies from source to read the sdist's metadata: 1 min 54 s on a fresh machine,
    # for a step that said "usually 10 s" and printed nothing meanwhile.
    venv, calls = tmp_path / "venv", tmp_path / "calls"
    pin = re.search(r"^jsonschema==(\S+)$", (ROOT / "requirements-dev.txt").read_text(),
                    re.M).group(1)
    stand_in(venv / "bin" / "python", f"""echo "$*" >> "{calls}"
while [ $# -gt 0 ]; do
  case "$1" in -d) shift; dir="$1" ;; jsonschema==*) version="${{1#jsonschema==}}" ;; esac
  shift
done
printf 'sdist' > "$dir/jsonschema-$version.tar.gz"
""")
    done = step("setup_schema_suite", venv)
    assert done.returncode == 0, done.stderr
    (call,) = calls.read_text().splitlines()
    assert "-m pip download" in call and f"jsonschema=={pin}" in call and "--no-deps" in call
    assert "--no-binary jsonschema" in call and ":all:" not in call
    folder = venv / "share" / "json-schema-test-suite"
    assert f"the jsonschema {pin} sdist from the package index into {folder}" in done.stderr
    assert f"saved {folder}/jsonschema-{pin}.tar.gz" in done.stderr
    # once there, it is not fetched again
    again = step("setup_schema_suite", venv)
    assert again.returncode == 0 and again.stderr == ""
    assert len(calls.read_text().splitlines()) == 1
