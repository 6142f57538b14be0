"""Every install hint in the repository names this project's distribution, `openprogram-decisions`.

The import name `openprogram` is also the name of another distribution on the package index
(OpenProgram, the original project), so a hint that installs the bare import name (with or
without an extra) installs the wrong project. This test reads every file git tracks (README, docs,
notebooks and their outputs, binder/, error messages in the code), finds each `pip install` command,
and checks the requirement it names: never `openprogram`, and `openprogram-decisions` only with
extras that pyproject.toml declares. A requirement with extras under the old name is caught
anywhere, with or without the command beside it.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:     # Python 3.10: pip carries the same parser
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "openprogram-decisions"
# `pip install`, `pip3 install`, `python -m pip install`, `uv pip install`, then what follows on
# the line up to a quote that ends a surrounding string, a backtick or a comment.
INSTALL = re.compile(r"\bpip3?\s+install\b([^`#\n]*)")
# A requirement with extras written apart from its command ("... or `'openprogram[anthropic]'`").
WRONG_WITH_EXTRAS = re.compile(r"(?<![\w.-])openprogram\[[\w,\s-]*\]")
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?")
OPTIONS_WITH_VALUE = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t",
                      "--target", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
                      "--prefix", "--root", "-d", "--dest"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(command: str) -> list[tuple[str, str | None]]:
    """(name, extras) of each requirement a pip install command line names; options, their
    values and paths are skipped."""
    found, skip = [], False
    for token in command.replace("\\", " ").split():
        token = token.strip("'\"`,;()")
        if skip:
            skip = False
            continue
        if token in OPTIONS_WITH_VALUE:
            skip = True
            continue
        if not token or token.startswith(("-", ".", "/", "$", "~", "{")) or "/" in token:
            continue
        match = REQUIREMENT.match(token)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def test_the_parser_reads_the_forms_hints_take():
    line = "run: python -m pip install -q -r requirements-dev.txt 'pkg-a[x,y]>=1' -e . pkg_b"
    assert requirements(INSTALL.search(line).group(1)) == [("pkg-a", "x,y"), ("pkg_b", None)]
    assert requirements(INSTALL.search("`pip install \"other[notebook]\"`").group(1)) == [
        ("other", "notebook")]


def tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.fail(f"this test reads the files git tracks; run it in a git checkout ({err})")
    files = []
    for rel in filter(None, out.decode().split("\0")):
        path = ROOT / rel
        # The parser's own examples above are not hints.
        if path == Path(__file__).resolve() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" not in data[:8192]:
            files.append(path)
    return files


def test_every_install_hint_names_the_distribution_with_a_declared_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    extras = set(project["optional-dependencies"])
    wrong, ours = [], []
    for path in tracked_text_files():
        text = path.read_text(errors="replace")
        for match in WRONG_WITH_EXTRAS.finditer(text):
            line_no = text.count("\n", 0, match.start()) + 1
            wrong.append(f"{path.relative_to(ROOT)}:{line_no}: {match.group(0)}  (the other "
                         f"project's name; say {DISTRIBUTION})")
        for match in INSTALL.finditer(text):
            line_no = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line_no}: {match.group(0).strip()}"
            for name, extra in requirements(match.group(1)):
                if normalize(name) == "openprogram":
                    wrong.append(f"{where}  (installs the other project; say {DISTRIBUTION})")
                elif normalize(name) == DISTRIBUTION:
                    ours.append(where)
                    unknown = {e.strip() for e in (extra or "").split(",")
                               if e.strip() and "{" not in e} - extras
                    if unknown:
                        wrong.append(f"{where}  (no extra {sorted(unknown)}; pyproject.toml "
                                     f"declares {sorted(extras)})")
    assert not wrong, "install hints to fix:\n" + "\n".join(wrong)
    # The README does tell people what to install (so the scan saw real hints).
    assert any(h.startswith("README.md:") for h in ours), ours
