"""Every handler of the notebook layer fails softly: a button or a text box given bad input (a
NUL byte, an unwritable path, a huge paste) says what went wrong in the widget, and nothing
raises into the kernel's log."""
import pytest
from widgethelp import all_html, press

from openprogram import decision
from openprogram.runtimes import ScriptedRuntime
from openprogram.widgets.panel import DecisionPanel
from openprogram.widgets.playground import Playground


def book(city: str, nights: int = 1):
    """Book a hotel."""
    return {"city": city, "nights": nights}


OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet")}
HUGE = "y" * 5_000_000
PASTE = "Some text pasted into the wrong box, line after line.\n" * 100_000   # 5 MB


@pytest.fixture
def box(tmp_path, monkeypatch):
    """The test box of a finished decision's panel, in a scratch folder."""
    monkeypatch.chdir(tmp_path)
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(['{"call": "wait"}']))
    return DecisionPanel(decision.last_trace(), options=OPTIONS).test_box


def test_a_nul_byte_in_the_file_name_is_reported_in_the_box(box, tmp_path):
    press(box.button)
    box.path.value = "test_a\x00b.py"
    press(box.save)
    assert "Not saved" in box.status.value and "NUL byte" in box.status.value
    assert "&#x27;test_a\\x00b.py&#x27;" in box.status.value   # the name, shown with \x00
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["a_file/test_x.py", "no/such/folder/test_x.py", "."])
def test_an_unwritable_path_is_reported_in_the_box(box, tmp_path, where):
    (tmp_path / "a_file").write_text("not a folder")
    press(box.button)
    box.path.value = where
    press(box.save)
    assert "Not saved" in box.status.value and "folder you can write to" in box.status.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


@pytest.mark.parametrize("field", ["path", "module", "options_expr"])
def test_a_huge_paste_into_any_text_box_is_reported(box, tmp_path, field):
    press(box.button)
    getattr(box, field).value = PASTE
    press(box.button)
    press(box.save)
    status = box.status.value
    assert "Not saved" in status or "Cannot write the test" in status, status[:300]
    assert len(status) < 5_000     # the reason, not the paste
    assert list(tmp_path.iterdir()) == []


def test_saving_after_a_failed_generation_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(['{"call": "wait"}']))
    box = DecisionPanel(decision.last_trace()).test_box   # no option set: cannot write it
    box.details.layout.display = "flex"
    press(box.save)
    assert "Cannot write the test" in box.status.value
    assert list(tmp_path.iterdir()) == []


def test_the_buttons_really_dispatched_print_nothing_to_the_kernel_log(box, shell, capsys,
                                                                       caplog):
    # through ipywidgets' own dispatch, with an IPython shell present (as in a kernel): a
    # handler that raised would have its traceback shown there
    box.button.click()
    box.path.value = "bad\x00name.py"
    box.save.click()
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and not caplog.records
    assert "NUL byte" in box.status.value


def test_the_playground_takes_a_huge_paste_and_a_nul_byte():
    pg = Playground(OPTIONS, prompt="Pick.\x00")
    pg.reply.value = HUGE + "\x00"
    press(pg.run_button)
    assert pg.state == "waiting"
    assert "no_action" in pg.panel.attempts_box.children[0].title.value
    assert len(all_html(pg).replace(pg.reply.value, "")) < 400_000
    pg.reply.value = '{"call": "book", "args": {"city": "a\\u0000b"}}'
    press(pg.run_button)
    assert pg.state == "resolved" and pg.result == {"city": "a\x00b", "nights": 1}
    press(pg.reset_button)
    assert pg.state == "ready"


def test_a_playground_button_that_fails_says_so_in_the_status_line(monkeypatch):
    pg = Playground(OPTIONS)

    def broken_start():
        raise OSError("cannot start a thread")
    monkeypatch.setattr(pg, "_start", broken_start)
    pg.reply.value = '{"call": "wait"}'
    press(pg.run_button)
    assert "That did not work: OSError: cannot start a thread" in pg.status.value
