"""Async models in a real Jupyter kernel, whose event loop is already running when a cell runs:
`%%decide` / `%%agent` with an async runtime finish the decision (the model runs on a worker
thread's loop) and the panel follows it live, streamed text included, from that thread;
`await decision.amake(...)` works at a cell's top level. The notebook is executed by nbclient,
which records every message the kernel sends while a cell runs, in order: the widget updates
the front end would apply, as it would get them."""
from __future__ import annotations

import html

import pytest

SETUP = '''%load_ext openprogram
import asyncio, threading
from openprogram import decision, observe, Runtime
from openprogram.base.model_protocol import ModelResponse, run_blocking
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.widgets import DecisionPanel

OPTIONS = {"go": "GO", "stay": ("STAY", "do nothing yet")}
model_threads = set()

async def model(prompt):
    model_threads.add(threading.current_thread().name)
    await asyncio.sleep(0.05)
    return '{"call": "go"}'

arun = Runtime(call=model, model="async-model")

class AsyncStreaming(Runtime):
    """A model with only an async, streaming client: its sync complete() finishes the async
    call (as a provider runtime on an async SDK client does), so the text streams from the
    worker thread that runs it."""
    streams = True

    def __init__(self, reply):
        super().__init__(name="async-streaming")
        self.reply = reply

    async def acomplete(self, messages, *, tools=None, on_text=None, timeout=None, **kw):
        model_threads.add(threading.current_thread().name)
        for i in range(0, len(self.reply), 6):
            await asyncio.sleep(0.15)   # longer than the panel's redraw interval
            on_text(self.reply[i:i + 6])
        return ModelResponse(text=self.reply)

    def complete(self, messages, **kw):
        return run_blocking(self.acomplete(messages, **kw))

STREAMED = '{"call": "stay", "args": {}}'
srt = AsyncStreaming(STREAMED)

def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q

tool_replies = [ToolCall("lookup", {"q": "trains"}), '{"call": "go"}']

async def tool_model(prompt, tools=None):
    model_threads.add(threading.current_thread().name)
    await asyncio.sleep(0.01)
    return tool_replies.pop(0)

trt = Runtime(call=tool_model, model="async-tools")'''

CELLS = [
    SETUP,
    "%%decide OPTIONS -r arun --as picked\nPick one.",
    "%%decide OPTIONS -r srt\nPick one.",
    "%%agent OPTIONS -r trt --tools lookup --as turned\nCheck the trains, then pick.",
    '''panel = DecisionPanel(options=OPTIONS)
panel.show()
with observe(panel.observer):
    result = await decision.amake("Pick one.", OPTIONS, runtime=ScriptedRuntime(
        ['{"call": "stay"}'], stream_chunk=4, latency=0.6))
(result, panel.trace.status, len(panel.trace.attempts))''',
    "(picked, turned, sorted(model_threads))",
]


class _Run:
    """The notebook, executed, with every message of each cell in the order the kernel sent
    them."""

    def __init__(self, base):
        import nbformat
        from nbclient import NotebookClient

        messages: dict[int, list[dict]] = {}

        class Recording(NotebookClient):
            def process_message(self, msg, cell, cell_index):
                messages.setdefault(cell_index, []).append(msg)
                return super().process_message(msg, cell, cell_index)

        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
        with pytest.MonkeyPatch.context() as env:
            # Jupyter's and IPython's folders are the test's own, not the user's
            for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                         "IPYTHONDIR"):
                env.setenv(name, str(base / name))
            env.setenv("JUPYTER_PATH", str(base / "JUPYTER_DATA_DIR"))
            # the kernel starts in a scratch folder: at the repository root the checkout would
            # shadow the installed package (recipes/nbval-and-binder.md)
            Recording(nb, timeout=120, kernel_name="python3",
                      resources={"metadata": {"path": str(base)}}).execute()
        self.nb, self.messages = nb, messages

    def result(self, i: int) -> str:
        (out,) = [o for o in self.nb.cells[i].outputs if o.output_type == "execute_result"]
        return out.data["text/plain"]

    def html_updates(self, i: int) -> list[str]:
        """The values of the HTML widgets a cell's messages set, in order."""
        return [m["content"]["data"]["state"]["value"] for m in self.messages[i]
                if m["msg_type"] == "comm_msg"
                and m["content"]["data"].get("method") == "update"
                and isinstance(m["content"]["data"].get("state", {}).get("value"), str)]

    def first(self, i: int, kind: str) -> int:
        return next(n for n, m in enumerate(self.messages[i]) if m["msg_type"] == kind)

    def index_of(self, i: int, needle: str) -> int:
        return next(n for n, m in enumerate(self.messages[i])
                    if m["msg_type"] == "comm_msg"
                    and needle in str(m["content"]["data"].get("state", {}).get("value")))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _Run(tmp_path_factory.mktemp("kernel-async"))


def test_every_cell_ran_and_the_async_models_ran_on_the_worker_thread(run):
    for cell in run.nb.cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    # the sync decisions awaited their async models on the worker thread that the running
    # loop needs; amake awaited its model on the kernel's own loop
    assert run.result(5) == "('GO', 'GO', ['openprogram-sync-await'])"


def test_decide_with_an_async_model_shows_the_panel_before_the_reply_and_updates_it(run):
    cell = 1
    assert run.result(cell) == "'GO'"
    shown = run.first(cell, "display_data")
    waiting = run.index_of(cell, "waiting for the reply")
    picked = run.index_of(cell, "picked go")
    # the panel is on the page and says it waits while the model runs; then it is updated
    assert shown < picked and waiting < picked
    titles = [v for v in run.html_updates(cell) if "op-attempt-title" in v]
    assert "waiting for the reply" in titles[0] and "picked go" in titles[-1]


def test_text_streamed_from_the_worker_thread_reaches_the_panel_as_it_arrives(run):
    cell = 2
    reply = '{"call": "stay", "args": {}}'
    bodies = [v for v in run.html_updates(cell) if 'class="op-reply"' in v]
    partial = [b for b in bodies if html.escape(reply) not in b]
    # the streamed prefixes arrive one after another (each chunk is a redraw: the model waits
    # longer than the panel's redraw interval), then the whole reply
    grown = [html.escape(reply[:n]) + "</pre>" for n in range(6, len(reply), 6)]
    assert [g for g in grown if any(g in b for b in partial)] == grown
    assert html.escape(reply) in bodies[-1]
    assert run.index_of(cell, html.escape(reply[:6]) + "</pre>") < \
        run.index_of(cell, "picked stay")


def test_agent_with_an_async_model_runs_its_tool_round_live(run):
    cell = 3
    assert run.result(cell) == "'GO'"
    tools = [v for v in run.html_updates(cell) if "found trains" in v]
    assert tools and run.index_of(cell, "found trains") < run.index_of(cell, "picked go")


def test_await_amake_at_a_cells_top_level_streams_into_a_live_panel(run):
    cell = 4
    assert run.result(cell) == "('STAY', 'resolved', 1)"
    bodies = [v for v in run.html_updates(cell) if 'class="op-reply"' in v]
    reply = '{"call": "stay"}'
    assert any(html.escape(reply[:4]) + "</pre>" in b for b in bodies)
    assert html.escape(reply) in bodies[-1]
