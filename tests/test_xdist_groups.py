"""`./dev test` runs the suite on two pytest-xdist workers; tests that share what one process
holds (a notebook's kernel, JupyterLab and chromium, the llama servers, the model) must run in
one worker, in the order collected (tests/notebooks/xdist_groups.py). Checked on a real run:
which worker ran each test is in pytest's verbose report."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from xdist_groups import group_of

ROOT = Path(__file__).resolve().parent.parent
DEV = (ROOT / "dev").read_text()


def test_each_shared_thing_is_one_unit_and_the_rest_are_single_tests():
    assert group_of("notebooks/02-prototyping.ipynb::Cell 3") == "notebooks/02-prototyping.ipynb"
    assert group_of("tests/browser/test_browser_panel.py::test_x[a]") == "browser"
    assert group_of("tests/servers/test_llama_cpp_server.py::test_y") == "llama-server"
    assert group_of("tests/runtimes/llamacpp/test_local_speed.py::test_z") == "local-model"
    assert group_of("tests/decision/test_core_parse.py::test_w") == \
        "tests/decision/test_core_parse.py::test_w"


def test_dev_test_runs_two_workers_with_this_scheduler():
    assert "-n 2 --dist loadscope --no-loadscope-reorder" in DEV


@pytest.mark.slow
def test_a_notebooks_cells_and_the_local_model_tests_stay_on_one_worker_each():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope",
         "--no-loadscope-reorder", "-v", "-p", "no:cacheprovider",
         "notebooks/04-teaching.ipynb", "tests/runtimes/llamacpp/test_local_runtime.py",
         "tests/test_dev.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    ran = 0
    for worker, nodeid in re.findall(r"^\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)", done.stdout, re.M):
        ran += 1
        unit = "notebook" if "04-teaching" in nodeid else \
            "local" if nodeid.startswith("tests/runtimes/llamacpp/") else nodeid
        workers[unit].add(worker)
    assert ran >= 20, done.stdout[-3000:]
    assert len(workers["notebook"]) == 1 and len(workers["local"]) == 1, dict(workers)
    # the rest went to both: two workers did work
    assert len(set().union(*workers.values())) == 2, dict(workers)
