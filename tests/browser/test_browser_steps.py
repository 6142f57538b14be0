"""The step-through in a real JupyterLab and chromium (issue 27): Next, Back and the stage list move
through every stage of a two-attempt decision, each stage showing its own content; the panel's
"Step through" button opens the same view; script a model wrote shows as text and runs nothing."""
import pytest

# The cells of the notebook on show: JupyterLab may restore, in hidden tabs, notebooks that an
# earlier test's page left open in the workspace, and their cells come first in the page.
CELL_SELECTOR = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"


def cell(page, index: int):
    return page.locator(CELL_SELECTOR).nth(index)


PAYLOAD = "<img src=x onerror=\"window.__pwned=1\">"
SETUP = f'''%load_ext openprogram
from openprogram import decision
from openprogram.runtimes import ScriptedRuntime

def analyze(text: str, depth: int = 1, user: str = "x") -> str:
    """Analyze the sentiment."""
    return f"{{text}}:{{depth}}:{{user}}"
analyze.input_meta = {{"user": {{"hidden": True}}}}

OPTIONS = {{"analyze": analyze, "done": ("OVER", "nothing left")}}
rt = ScriptedRuntime([{PAYLOAD!r} + ' {{"call": "done"}} then {{"action": "analyze", "args": {{"text": "hi", "depth": "two"}}}}',
                      '{{"call": "analyze", "args": {{"text": "hi", "depth": 2, "user": "root"}}}}'])
decision.make("Pick one.", OPTIONS, runtime=rt, context={{"user": "ann"}})'''  # noqa: E501 (a cell, typed into JupyterLab as it is)

KINDS = ["options", "sent", "reply", "validation", "hidden", "reask",
         "sent", "reply", "validation", "hidden", "resolution"]


@pytest.fixture(scope="module")
def page(lab):
    path = lab.write_notebook("steps_test.ipynb", [
        SETUP, "%decision_steps --options OPTIONS",
        "from openprogram.widgets import DecisionPanel\n"
        "DecisionPanel(decision.last_trace(), options=OPTIONS)"])
    page = lab.open_notebook(path)
    try:
        ok = lab.run_all_and_wait(page)
        assert ok, "a cell failed:\n" + "\n".join(
            page.locator(".jp-OutputArea-output").all_inner_texts())[-2000:]
        page.locator(".op-panel:not(.op-steps)").wait_for(state="visible")
        yield page
    finally:
        lab.close(page)


def _shown(view):
    section = view.locator("section.op-stage")
    assert section.count() == 1
    return int(section.get_attribute("data-stage")), section


def test_next_back_and_the_stage_list_move_through_every_stage(lab, page):
    view = cell(page, 1).locator(".op-steps")
    view.wait_for(state="visible")
    nxt = view.locator("button", has_text="Next")
    back = view.locator("button", has_text="Back")
    assert back.is_disabled()
    seen = []
    for i, kind in enumerate(KINDS):
        index, section = _shown(view)
        assert index == i
        assert f"op-stage-{kind}" in section.get_attribute("class")
        assert f"stage {i + 1} of {len(KINDS)}" in view.inner_text()
        seen.append(section.inner_text())
        if i < len(KINDS) - 1:
            nxt.click()
            view.locator(f'section.op-stage[data-stage="{i + 1}"]').wait_for()
    assert nxt.is_disabled()
    # each stage shows its own content
    assert "analyze(text: str, depth: int = 1)" in seen[0] and "the signature of analyze" in seen[0]
    assert "Pick one." in seen[1]
    assert "#1 ignored" in seen[2] and "#2 pick" in seen[2]
    assert 'the alias "action" was normalised to "call"' in seen[2]
    assert PAYLOAD in seen[2]  # the model's markup, shown as text
    assert "type_mismatch at args.depth" in seen[3]
    assert "user: not injected" in seen[4]
    assert "the previous reply: in the re-ask" in seen[5]
    assert "dropped what the model wrote at args.user" in seen[9]
    assert "result: 'hi:2:ann'" in seen[10]
    back.click()
    view.locator('section.op-stage[data-stage="9"]').wait_for()
    view.locator("select").select_option(index=5)
    view.locator('section.op-stage[data-stage="5"]').wait_for()
    assert "The re-ask, built from its parts" in _shown(view)[1].inner_text()
    assert page.evaluate("window.__pwned") is None


def test_the_panel_s_step_through_button_opens_the_step_through(lab, page):
    panel = cell(page, 2).locator(".op-panel").first
    panel.locator("button", has_text="Step through").click()
    view = panel.locator(".op-steps")
    view.wait_for(state="visible")
    assert _shown(view)[0] == 0
    view.locator("button", has_text="Next").click()
    view.locator('section.op-stage[data-stage="1"]').wait_for()
    assert page.evaluate("window.__pwned") is None
