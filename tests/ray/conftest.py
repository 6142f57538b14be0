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


@pytest.fixture(scope="session")
def ray_local():
    import ray
    from rayhelp import ray_processes, start_ray
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
