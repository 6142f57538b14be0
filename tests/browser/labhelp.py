"""Helpers for browser tests: a JupyterLab server handle and a `Lab` that opens notebooks in
chromium and runs them. The fixtures in conftest.py build them; a test that starts its own server
(e.g. the README's command on a fresh clone) can use them directly:

    server = JupyterServer(proc, url, token, root, env, log)
    lab = Lab(server, browser_context)
    page = lab.open_notebook(root / "notebooks" / "01-tour.ipynb")
    assert lab.run_all_and_wait(page)
    lab.close(page)
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
KERNEL_NAME = "openprogram-test"
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
# From the recipe: without the background-networking flags chromium keeps dialing out, and the
# closed network refuses it many times over.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ipc_runtime_dir(preferred: Path) -> Path:
    """The folder for a server's runtime files when its kernels talk over ipc (Unix sockets,
    `<folder>/kernel-<uuid>-ipc-N`; over TCP ipykernel warns of eavesdropping): `preferred`, or a
    new private folder in /tmp when its path is too long for a socket's (at most 107 bytes)."""
    if len(str(preferred)) + 52 <= 107:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    return Path(tempfile.mkdtemp(prefix="opk", dir="/tmp"))


def isolated_jupyter(base: Path, names=("config", "data", "runtime", "ipython")) -> dict:
    """Fresh Jupyter and IPython folders under `base` (so a test never reads or writes the
    user's), with the "news" toast turned off: it covers part of the page even with
    news_url=None (recipe). Returns the folders and `env`, the variables that select them."""
    dirs = {name: base / name for name in names}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    settings = dirs["config"] / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    dirs["env"] = {"JUPYTER_CONFIG_DIR": str(dirs["config"]),
                   "JUPYTER_DATA_DIR": str(dirs["data"]),
                   "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
                   "IPYTHONDIR": str(dirs["ipython"])}
    return dirs


# The notebook a page opened (open_notebook stores its path in window.__opPath), its session's
# kernel, and the app: `app`, `w`, `k` (each null when not there yet).
_OURS = """const app = window.jupyterapp;
           const w = app && [...app.shell.widgets('main')].find(
               x => x.context && x.context.path === window.__opPath);
           const k = w && w.sessionContext && w.sessionContext.session
                     && w.sessionContext.session.kernel;"""


class JupyterServer:
    def __init__(self, proc, url, token, root, env, log):
        self.proc, self.url, self.token, self.root, self.env, self.log = \
            proc, url, token, root, env, log

    def api(self, method: str, path: str):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        for k in self.api("GET", "/api/kernels") or []:
            try:
                self.api("DELETE", f"/api/kernels/{k['id']}")
            except OSError:
                pass

    def wait_ready(self, timeout_s: float, what: str = "JupyterLab") -> None:
        """Poll /api/status until the server answers; fail at once if its process exited
        (a server that exited would leave the poll waiting forever)."""
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise AssertionError(f"{what} exited with code {code}:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{what} did not answer /api/status in {timeout_s:.0f} "
                                         f"s:\n{self.log_tail()}") from None
                time.sleep(0.25)

    def stop(self) -> None:
        """Shut its kernels down (they outlive pages), then stop the server."""
        try:
            if self.proc.poll() is None:
                self.shutdown_kernels()
        except OSError:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


class Lab:
    """Opens notebooks in JupyterLab and runs them."""

    def __init__(self, server: JupyterServer, context):
        self.server, self.context = server, context
        self.root: Path = server.root

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        """A notebook of code cells (a cell starting with '# md' is markdown) in the server
        root, on this Python's kernel."""
        import nbformat
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "openprogram (.venv)",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(c[4:].lstrip()) if c.startswith("# md")
                    else nbformat.v4.new_code_cell(c) for c in cells]
        path = self.root / name
        nbformat.write(nb, path)
        return path

    def copy_in(self, path: Path, name: str | None = None) -> Path:
        """Copy a notebook into the server root (set its kernel to this Python)."""
        import nbformat
        nb = nbformat.read(path, as_version=4)
        nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "openprogram (.venv)",
                                     "language": "python"}
        target = self.root / (name or Path(path).name)
        nbformat.write(nb, target)
        return target

    def open_notebook(self, path: Path, timeout_ms: int = 90_000):
        """A new page with the notebook open and its kernel idle. On a timeout the error says
        what the page showed (a kernel dialog, the kernel's status)."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        rel = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        page = self.context.new_page()
        page.goto(f"{self.server.url}/lab/tree/{rel}?token={self.server.token}")
        try:
            # Found by its path, not as the current widget: JupyterLab may restore notebooks
            # an earlier page left open in the workspace, and one of those can take the focus.
            page.evaluate("(rel) => { window.__opPath = rel; }", rel)
            page.wait_for_function(
                f"""() => {{ {_OURS}
                           if (!(k && k.status === 'idle' && w.content
                                 && w.content.widgets.length)) return false;
                           if (app.shell.currentWidget !== w) app.shell.activateById(w.id);
                           return app.shell.currentWidget === w; }}""",
                timeout=timeout_ms)
            # A restored notebook stays in the DOM as a hidden tab, and then page-wide locators
            # (".jp-Cell", ".op-panel") find its cells first: dispose of every other document
            # (dispose, not close: a close of a changed one asks to save, in a dialog).
            page.evaluate(f"""() => {{ {_OURS}
                                for (const x of [...app.shell.widgets('main')])
                                    if (x !== w) x.dispose(); }}""")
        except PlaywrightTimeout:
            state = page.evaluate(
                """() => { const app = window.jupyterapp;
                           const w = app && app.shell.currentWidget;
                           const s = w && w.sessionContext;
                           const k = s && s.session && s.session.kernel;
                           const d = document.querySelector('.jp-Dialog');
                           return {app: !!app, widget: w ? w.title.label : null,
                                   kernel: k ? k.name + ' ' + k.status : null,
                                   kernelPreference: s ? JSON.stringify(s.kernelPreference)
                                                       : null,
                                   dialog: d ? d.innerText : null}; }""")
            page.close()
            raise AssertionError(f"{rel} did not reach an idle kernel in {timeout_ms / 1000:.0f}"
                                 f" s; the page showed {state}\nserver log:\n"
                                 f"{self.server.log_tail(2000)}") from None
        return page

    def kernel_name(self, page) -> str:
        return page.evaluate(f"() => {{ {_OURS} return k.name; }}")

    def run_all_and_wait(self, page, timeout_ms: int = 120_000) -> bool:
        """Run every cell; returns True when all ran without error. Waits for the kernel to be
        idle again and for widget views to be drawn."""
        page.set_default_timeout(timeout_ms)
        ok = page.evaluate(f"""async () => {{ {_OURS}
                                app.shell.activateById(w.id);  // the command runs the current one
                                return await app.commands.execute('notebook:run-all-cells'); }}""")
        page.wait_for_function(f"() => {{ {_OURS} return !!(k && k.status === 'idle'); }}",
                               timeout=timeout_ms)
        return bool(ok)

    def save_and_export(self, page, path: Path, out: Path) -> Path:
        """Save the open notebook (JupyterLab keeps no widget state by default, so an export
        shows the outputs' HTML copies), export it with `jupyter nbconvert --to html` into
        `out`; the exported page's path."""
        page.evaluate("async () => await window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model"
                               ".dirty")
        run = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir",
                              str(out), str(path)], capture_output=True, text=True,
                             env=self.server.env)
        assert run.returncode == 0, run.stderr[-3000:]
        return out / (Path(path).stem + ".html")

    def cell(self, page, index: int):
        """The locator of the index-th cell (0-based, markdown cells included)."""
        return page.locator(".jp-Notebook .jp-Cell").nth(index)

    def close(self, page) -> None:
        """Close the page and shut its kernel down (kernels outlive pages)."""
        kernel_id = None
        try:
            kernel_id = page.evaluate(f"() => {{ {_OURS} return k.id; }}")
        except Exception:  # a page that never opened a notebook
            pass
        page.close()
        if kernel_id:
            try:
                self.server.api("DELETE", f"/api/kernels/{kernel_id}")
            except OSError:
                pass
