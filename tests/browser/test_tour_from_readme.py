"""The README's first command, on a fresh clone, serves the tour and the tour runs to the end.

A new user clones the repository and runs the first command of the README. This test does exactly
that: `git clone` of this checkout's HEAD into a temporary folder, the README's first command run
there in the background (it builds its own venv from nothing — pip's cache makes that quick — and
starts JupyterLab), then Debian's chromium opens notebooks/01-tour.ipynb, runs every cell, and
checks that each ran and that the decision panels were drawn. Only loopback, only the local clone.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
from pathlib import Path

import pytest

from labhelp import REPO, JupyterServer, Lab, free_port, isolated_jupyter


def readme_commands() -> list[str]:
    """The commands of the README's first code block (comments stripped)."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", text, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()
            if line.split("#")[0].strip()]


def test_readme_has_exactly_two_commands_tour_then_test():
    cmds = readme_commands()
    assert len(cmds) == 2, cmds
    assert "tour" in cmds[0] and "test" in cmds[1]
    assert "dev test" in (REPO / ".ci" / "run").read_text(), ".ci/run must run the README's test"


@pytest.mark.slow
def test_first_readme_command_on_a_fresh_clone_runs_the_tour(tmp_path, browser_context):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    port, token = free_port(), secrets.token_hex(16)
    dirs = isolated_jupyter(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON",
                                                                    "JUPYTER", "OPENPROGRAM"))}
    env.update(dirs["env"], HOME=str(tmp_path / "home"),
               PATH=":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p))
    # The README's command, word for word, plus what a test needs: a known port and token, and
    # the app object exposed so the page can be driven.
    cmd = readme_commands()[0] + (f" --port={port} --IdentityProvider.token={token}"
                                  " --LabApp.expose_app_in_browser=True --LabApp.news_url=None"
                                  " --ServerApp.port_retries=0")
    log = tmp_path / "tour.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=clone, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    # Given a notebook path, JupyterLab serves its folder (notebooks/) and opens it there.
    server = JupyterServer(proc, f"http://127.0.0.1:{port}", token, clone / "notebooks", env, log)
    try:
        server.wait_ready(600, "the README's first command")   # a fresh venv, then the lab
        assert (clone / ".venv" / "bin" / "python").exists(), "the command built no venv"
        lab = Lab(server, browser_context)
        page = lab.open_notebook(clone / "notebooks" / "01-tour.ipynb")
        try:
            assert lab.kernel_name(page) == "python3"
            assert lab.run_all_and_wait(page), "a cell of the tour failed:\n" + server.log_tail()
            # Read the notebook's model (JupyterLab draws only the cells in view).
            cells = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
                .filter(c => c.model.type === 'code')
                .map(c => ({count: c.model.executionCount,
                            outputs: c.model.outputs.toJSON()}))""")
            assert len(cells) >= 10
            assert all(c["count"] for c in cells), [c["count"] for c in cells]
            outputs = [o for c in cells for o in c["outputs"]]
            assert not [o for o in outputs if o["output_type"] == "error"]
            views = [o for o in outputs if "application/vnd.jupyter.widget-view+json"
                     in o.get("data", {})]
            assert len(views) >= 4          # %%decide x3 (incl. --as), %%agent, %decision_trace
            shown = json.dumps(outputs)
            assert "pick when nothing is left to do" in shown   # the menu of %decision_menu
            assert "type_mismatch" in shown              # the failed first attempt
            assert "unknown_call" in shown               # the decision that ran out of retries
            assert "lookup_order" in shown               # the tool round of %%agent
            # and the panels are drawn: scroll to the last one and read it
            page.locator(".op-panel").last.scroll_into_view_if_needed()
            page.wait_for_function("() => document.querySelectorAll('.op-panel').length >= 1",
                                   timeout=30_000)
        finally:
            lab.close(page)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
