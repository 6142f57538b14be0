"""`./dev` explains itself: `help` (and -h, --help) describes each command in a line and exits 0;
an unknown command says so and names the closest one (exit 2), as does no command at all.
Nothing here sets anything up: these paths of ./dev return before its first setup step."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

DEV = Path(__file__).resolve().parent.parent / "dev"


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
