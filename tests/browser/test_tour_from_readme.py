"""The README's first command, on a fresh clone, as a new user meets it.

`git clone` of this checkout's HEAD into a temporary folder; the README's first command, word for
word, run there with a fresh home (so nothing of this machine's Jupyter or IPython configuration
applies, and the test adds none of its own: no news setting, no flag); then exactly the address it
prints, opened in Debian's chromium with a fresh profile. The page must land on the tour notebook
itself, with no dialog and no toast, its stored decision panels drawn (a trusted notebook), and not
marked modified once its kernel is connected, nor after a reload, with every file of the clone
unchanged; "Run All" from the menu must complete and draw the panels; a save from JupyterLab must
write the run's outputs and leave the notebook's .py source as it was. Only loopback, only the
local clone. The page is driven like a person would (menus, keys): the command exposes no
JupyterLab internals to scripts.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
from labhelp import REPO, JupyterServer
from playwright.sync_api import TimeoutError as PlaywrightTimeout

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Recorded from the first script of the page on: every toast or dialog that was ever added, and
# every document tab marked modified after it had been clean once (a tab is born "modified" until
# its file is loaded), so a prompt or a mark that shows and goes is caught too.
WATCH = """
window.__popups = []; window.__dirty = []; const loaded = new Set();
new MutationObserver(records => {
  for (const r of records) {
    const t = r.target;
    if (r.type === 'attributes' && t.matches('.lm-DockPanel-tabBar .lm-TabBar-tab')) {
      if (!t.classList.contains('jp-mod-dirty')) loaded.add(t.id);
      else if (loaded.has(t.id)) window.__dirty.push(t.innerText);
    }
    for (const n of r.addedNodes || []) {
      if (n.nodeType !== 1) continue;
      for (const e of [n, ...n.querySelectorAll('.Toastify__toast, .jp-Dialog')])
        if (e.matches('.Toastify__toast, .jp-Dialog')) window.__popups.push(e.innerText);
    }
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ['class']});
"""  # noqa: E501 (JavaScript, run as it is)
IDLE = """() => { const s = document.querySelector('#jp-main-statusbar');
                  return !!s && /[|] Idle/.test(s.innerText); }"""
CURRENT_TAB = "#jp-main-dock-panel .lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current"


def readme_commands() -> list[str]:
    """The commands of the README's first code block (comments stripped)."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", text, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()
            if line.split("#")[0].strip()]


def test_readme_has_exactly_two_commands_tour_then_test():
    cmds = readme_commands()
    assert cmds == ["./dev tour", "./dev test"], cmds
    assert "dev test" in (REPO / ".ci" / "run").read_text(), ".ci/run must run the README's test"


def printed_address(proc, log: Path, timeout_s: float) -> str:
    """The first address with a token the command printed (it builds a venv first)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = log.read_text(errors="replace")
        found = re.search(r"https?://\S+\?token=\w+", text)
        if found:
            return found.group(0)
        if proc.poll() is not None:
            raise AssertionError(f"the README's first command exited with {proc.returncode}:\n"
                                 f"{text[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no address printed in {timeout_s:.0f} s:\n{text[-4000:]}")
        time.sleep(0.5)


def land(page, url: str, settle_ms: int = 3000) -> None:
    """Open (or reload to) the address; wait for the notebook's kernel to be idle, then a little
    longer: JupyterLab rewrote the notebook's kernelspec about half a second after connecting."""
    page.goto(url)
    page.wait_for_function(IDLE, timeout=120_000)
    page.wait_for_timeout(settle_ms)


def assert_clean_landing(page, what: str) -> None:
    assert urlsplit(page.url).path.endswith("/lab/tree/01-tour.ipynb"), (what, page.url)
    assert page.locator(CURRENT_TAB).inner_text().strip() == "01-tour.ipynb", what
    seen = page.evaluate("() => ({popups: window.__popups, dirty: window.__dirty})")
    assert seen["popups"] == [], f"{what}: a dialog or toast showed: {seen['popups']}"
    assert page.locator(".jp-Dialog, .Toastify__toast").count() == 0, what
    assert seen["dirty"] == [], f"{what}: the notebook was marked modified"
    assert "jp-mod-dirty" not in page.locator(CURRENT_TAB).get_attribute("class"), what
    # Trusted: the stored widget outputs (the decision panels) are drawn without running anything;
    # an untrusted notebook shows their plain-text fallback instead (and a trace's HTML view,
    # which is not a widget, carries .op-panel too: look for a panel drawn by ipywidgets).
    try:
        page.wait_for_selector(".op-panel.jupyter-widgets, .jupyter-widgets .op-panel",
                               state="attached", timeout=30_000)
    except PlaywrightTimeout:
        raise AssertionError(f"{what}: no stored decision panel was drawn (is the notebook "
                             f"trusted?)") from None


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.slow
def test_first_readme_command_on_a_fresh_clone_lands_on_a_clean_trusted_tour(
        tmp_path, browser_context):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    # A new user: a fresh home, none of this session's venv, Jupyter or IPython variables.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VIRTUAL_ENV", "PYTHON", "JUPYTER", "IPYTHON", "OPENPROGRAM",
                                "XDG_"))}
    env.update(HOME=str(home),
               PATH=":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p))
    log = tmp_path / "tour.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", readme_commands()[0]], cwd=clone, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    page = None
    try:
        url = printed_address(proc, log, 600)
        parts = urlsplit(url)
        server = JupyterServer(proc, f"{parts.scheme}://{parts.netloc}",
                               parse_qs(parts.query)["token"][0], clone / "notebooks", env, log)
        server.wait_ready(60, "the README's first command")
        assert (clone / ".venv" / "bin" / "python").exists(), "the command built no venv"

        page = browser_context.new_page()
        page.add_init_script(WATCH)
        land(page, url)
        assert_clean_landing(page, "the printed address")

        # Reload without running anything: still unmodified, and nothing written to disk.
        page.reload()
        page.wait_for_function(IDLE, timeout=120_000)
        page.wait_for_timeout(3000)
        assert_clean_landing(page, "after a reload")
        assert git(clone, "status", "--porcelain") == "", "opening the tour changed files"

        # Run All, from the menu; the notebook's execution indicator is busy until the last cell.
        page.evaluate("""() => { window.__busy = false;
            new MutationObserver(() => {
              const i = document.querySelector('.jp-Notebook-ExecutionIndicator');
              if (i && i.dataset.status === 'busy') window.__busy = true;
            }).observe(document, {subtree: true, attributes: true,
                                  attributeFilter: ['data-status']}); }""")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
        page.wait_for_function("""() => { const i = document.querySelector(
                                      '.jp-Notebook-ExecutionIndicator');
                                  return window.__busy && i.dataset.status === 'idle'; }""",
                               timeout=120_000)
        page.wait_for_function(IDLE, timeout=60_000)
        # The last panel (%decision_trace 2, just above the tour's closing "where to go next")
        # shows decision 2 with the attempt that failed validation.
        panel = ".op-panel.jupyter-widgets"
        last_panel = page.locator(".jp-Cell", has=page.locator(panel)).last.locator(panel)
        last_panel.scroll_into_view_if_needed(timeout=30_000)
        last_panel.wait_for(timeout=30_000)
        assert "type_mismatch" in last_panel.inner_text()
        assert page.evaluate("() => window.__popups") == [], "a dialog or toast showed"

        # Save from JupyterLab: the run's outputs go to the .ipynb; the .py source is unchanged.
        page.keyboard.press("Control+s")
        page.wait_for_function(f"""() => !document.querySelector('{CURRENT_TAB}')
                                       .classList.contains('jp-mod-dirty')""", timeout=30_000)
        changed = git(clone, "status", "--porcelain").split("\n")
        assert [c for c in changed if c] == [" M notebooks/01-tour.ipynb"], changed
        nb = nbformat.read(clone / "notebooks" / "01-tour.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
        outputs = [o for c in code for o in c.outputs]
        assert not [o for o in outputs if o.output_type == "error"]
        views = [o for o in outputs if WIDGET_VIEW in o.get("data", {})]
        assert len(views) >= 4          # %%decide x3 (incl. --as), %%agent, %decision_trace
        shown = json.dumps(outputs)
        assert "pick when nothing is left to do" in shown   # the menu of %decision_menu
        assert "unknown_call" in shown                     # the decision that ran out of retries
        assert nb.metadata.kernelspec.display_name == "Python 3 (ipykernel)"
        assert page.evaluate("() => window.__popups") == [], "saving showed a dialog or toast"
    finally:
        try:
            if page is not None:
                page.close()
            if proc.poll() is None and "server" in locals():
                server.shutdown_kernels()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
