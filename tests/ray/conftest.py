"""The tests of `openprogram.ray` share one local Ray instance, started by the first test that
needs it with two CPUs (`ray.init(num_cpus=2)`) and stopped when the session ends, in a
`finally`, so no `ray::` worker outlives the run. Its workers find this folder's helpers and the
loopback server through PYTHONPATH, as a user's workers find the user's modules. All of them run
on one pytest-xdist worker (tests/notebooks/xdist_groups.py: "ray")."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SUPPORT = HERE.parent / "support"


@pytest.fixture(scope="session")
def ray_local():
    import ray
    # loopback only: Ray's token authentication has nothing to protect here
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    path = os.pathsep.join([str(HERE), str(SUPPORT), *filter(None, [os.environ.get("PYTHONPATH")])])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, "RAY_AUTH_MODE": "disabled"}})
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        yield ray
    finally:
        ray.shutdown()
