"""The suite passes however it is started. A process started with SIGINT ignored (`cmd &` in a
non-interactive shell, nohup, many job runners) never gets Python's SIGINT handler, and then
`_thread.interrupt_main()` and `os.kill(pid, SIGINT)` — how the tests below simulate Ctrl-C and a
kernel interrupt — do nothing. Those tests take the `python_sigint` fixture (tests/conftest.py);
here pytest is started exactly that way and must pass them."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Every test that interrupts itself. The check below finds the files that do so, so a new one
# cannot be left out of this list unnoticed.
INTERRUPTING = [
    "tests/evaluation/test_evaluate_interrupt.py",
    "tests/evaluation/test_evaluate_async.py::test_ctrl_c_stops_evaluate_on_the_loop_and_cancels_rows_in_flight",
    "tests/runtimes/providers/test_batch.py::test_ctrl_c_cancels_the_batch_unless_a_journal_can_reattach",
    "tests/runtimes/llamacpp/test_local_decisions.py::test_a_kernel_interrupt_stops_the_generation",
    "tests/evaluation/test_improve.py::test_an_interrupted_improve_resumes_from_its_journal",
]

# The child checks its premise (SIGINT really is ignored, as the shell left it) before running
# pytest.
CHILD = """
import signal, sys
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGINT)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_every_file_that_interrupts_itself_is_listed():
    simulated = re.compile(r"interrupt_main\(|os\.kill\(.*SIGINT")
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
             if p.name != Path(__file__).name and simulated.search(p.read_text())}
    assert found == {node.split("::")[0] for node in INTERRUPTING}


@pytest.mark.slow
def test_the_interrupting_tests_pass_when_pytest_starts_with_sigint_ignored():
    def ignore_sigint():   # runs in the child before exec: SIG_IGN survives exec, as for `cmd &`
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    # -p no:xdist: the tests must run in this very process, where SIGINT is ignored
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         *INTERRUPTING],
        cwd=ROOT, preexec_fn=ignore_sigint, capture_output=True, text=True, timeout=600)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", done.stdout)
    # five of test_evaluate_interrupt.py, one async, two of the batch (per provider), one local
    assert passed and int(passed.group(1)) >= 9, tail
    assert "failed" not in done.stdout.splitlines()[-1], tail
