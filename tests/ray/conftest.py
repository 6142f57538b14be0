"""The tests of `openprogram.ray` share one local Ray instance, started by the first test that
needs it with two CPUs (`ray.init(num_cpus=2)`) and stopped when the session ends, in a
`finally`; the teardown then checks that no Ray process it started is left (a driver killed
mid-job leaves `ray::` workers running otherwise). Its workers find this folder's helpers and the
loopback server through PYTHONPATH, as a user's workers find the user's modules. All of them run
on one pytest-xdist worker (tests/notebooks/xdist_groups.py: "ray")."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SUPPORT = HERE.parent / "support"


def ray_processes() -> list[tuple[int, str]]:
    """(pid, command line) of every Ray process below this one (raylet, GCS, workers)."""
    parent: dict[int, int] = {}
    command: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
        command[int(d)] = cmd
    me = os.getpid()

    def below(pid: int) -> bool:
        seen = set()
        while pid in parent and pid not in seen:
            seen.add(pid)
            pid = parent[pid]
            if pid == me:
                return True
        return False
    return [(p, c[:80]) for p, c in command.items()
            if below(p) and ("ray" in c or "gcs_server" in c)]


@pytest.fixture(scope="session")
def ray_local():
    import ray
    from rayhelp import start_ray
    start_ray(os.pathsep.join([str(HERE), str(SUPPORT),
                               *filter(None, [os.environ.get("PYTHONPATH")])]))
    try:
        yield ray
    finally:
        ray.shutdown()
    for _ in range(60):   # processes end a moment after shutdown returns
        left = ray_processes()
        if not left:
            break
        time.sleep(0.5)
    assert not left, f"Ray processes left after ray.shutdown(): {left}"
