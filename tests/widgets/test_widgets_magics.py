"""The magics of `%load_ext openprogram`, run in IPython's InteractiveShell: argument errors,
name lookups, prompt expansion, --as, the default runtime, the live panel, the menu preview and
the trace history."""
import pytest
from IPython.core.error import UsageError
from widgethelp import all_html, error_of

from openprogram import DecisionError

OPTIONS_CELL = '''
def book(city: Literal["Paris", "Rome"], nights: int = 1, user_id: str = "anon"):
    """Book a hotel."""
    return {"city": city, "nights": nights, "user": user_id}
book.input_meta = {"user_id": {"hidden": True}}
from typing import Literal
OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet")}
city = "Paris"
'''

GOOD = '{"call": "book", "args": {"city": "Rome", "nights": 2}}'


def setup_options(shell):
    r = shell.run_cell("from typing import Literal\n" + OPTIONS_CELL)
    assert r.success, error_of(r)


def test_loading_twice_keeps_the_magics_and_the_default_runtime(shell):
    shell.run_cell("%decision_runtime ScriptedRuntime(['{\"call\": \"x\"}'])")
    r = shell.run_cell("%load_ext openprogram")
    assert r.success
    for name in ("decision_menu", "decision_runtime", "decision_trace"):
        assert name in shell.magics_manager.magics["line"]
    for name in ("decide", "agent"):
        assert name in shell.magics_manager.magics["cell"]
    # a second %load_ext is a no-op; the runtime set before it is still the default
    r = shell.run_cell("%decision_runtime")
    assert r.result is not None and r.result.replies == ['{"call": "x"}']
    # %reload_ext is the way to start afresh
    assert shell.run_cell("%reload_ext openprogram").success
    assert shell.run_cell("%decision_runtime").result is None
    assert "decide" in shell.magics_manager.magics["cell"]


def test_decide_returns_the_result_binds_it_and_expands_the_prompt(shell):
    setup_options(shell)
    shell.run_cell(f"rt = ScriptedRuntime([{GOOD!r}])")
    r = shell.run_cell("%%decide OPTIONS --runtime rt --as step --context {'user_id':'u1'}\n"
                       "Book a stay in {city}. Pick one.\n")
    assert r.success, error_of(r)
    assert r.result == {"city": "Rome", "nights": 2, "user": "u1"}
    assert shell.user_ns["step"] == r.result
    sent = shell.user_ns["rt"].calls[0].prompt
    assert sent.startswith("Book a stay in Paris. Pick one.\n\nOptions")


def test_decide_takes_python_expressions_for_options_and_runtime(shell):
    shell.run_cell("""REPLIES = ['{"call": "stop"}']""")
    r = shell.run_cell("%%decide {'go': 'GO', 'stop': ('STOP', 'halt now')} "
                       "--runtime 'ScriptedRuntime(REPLIES, latency=0)'\n"
                       "Pick.\n")
    assert r.success, error_of(r)
    assert r.result == "STOP"


def test_prompt_with_literal_braces_is_sent_as_written_with_a_note(shell, capsys):
    shell.run_cell("rt = ScriptedRuntime(['{\"call\": \"go\"}'])")
    r = shell.run_cell('%%decide {"go": "GO"} -r rt\nAnswer like {"call": "go"} for {city}.\n')
    assert r.success, error_of(r)
    assert shell.user_ns["rt"].calls[0].prompt.startswith(
        'Answer like {"call": "go"} for {city}.')
    assert "without {name} expansion" in capsys.readouterr().out


def test_default_runtime_is_used_shown_and_cleared(shell, capsys):
    setup_options(shell)
    r = shell.run_cell(f"%decision_runtime ScriptedRuntime([{GOOD!r}, {GOOD!r}])")
    assert r.success, error_of(r)
    rt = r.result
    assert shell.run_cell("%decision_runtime").result is rt
    r = shell.run_cell("%%decide OPTIONS -c \"{'user_id': 'u'}\"\nPick.\n")
    assert r.success, error_of(r)
    assert len(rt.calls) == 1
    shell.run_cell("%decision_runtime --clear")
    capsys.readouterr()
    assert shell.run_cell("%decision_runtime").result is None
    assert "no default runtime" in capsys.readouterr().out
    r = shell.run_cell("%%decide OPTIONS\nPick.\n")
    err = error_of(r)
    assert isinstance(err, UsageError)
    assert "%decision_runtime ScriptedRuntime" in str(err) and "--runtime" in str(err)


@pytest.mark.parametrize("cell, needle", [
    ("%%decide NOPE -r rt\nPick.\n", "name 'NOPE' is not defined in the notebook"),
    ("%%decide OPTS -r nort\nPick.\n", "name 'nort' is not defined"),
    ("%%decide OPTS -r 'rt.(' \nPick.\n", "is not a name or a Python expression"),
    ("%%decide OPTS -r city\nPick.\n", "is a str, not an openprogram Runtime"),
    ("%%decide OPTS -r rt --context city\nPick.\n", "it must be a dict"),
    ("%%decide OPTS -r rt --max-retries x\nPick.\n", "invalid int value: 'x'"),
    ("%%decide OPTS -r rt --max-retries -1\nPick.\n", "give 0 or more"),
    ("%%decide OPTS -r rt --as 2bad\nPick.\n", "is not a Python name"),
    ("%%decide OPTS -r rt --as class\nPick.\n", "is a Python keyword"),
    ("%%agent OPTS -r rt --as None\nPick.\n", "is a Python keyword"),
    ("%%decide OPTS -r rt\n\n   \n", "the cell is empty"),
    ("%%decide -r rt\nPick.\n", "the following arguments are required: options"),
    ("%%decide OPTS -r rt --bogus 1\nPick.\n", "unrecognized arguments: --bogus"),
    ("%%agent OPTS -r rt --tools nothing_here\nPick.\n", "--tools 'nothing_here'"),
    ("%decision_menu NOPE", "name 'NOPE' is not defined"),
    ("%decision_menu city", "is not a usable option set"),
    ("%decision_runtime 42", "%decision_runtime '42' is an int, not an openprogram Runtime"),
])
def test_argument_errors_say_what_is_wrong(shell, cell, needle):
    shell.run_cell("OPTS = {'go': 'GO'}\nrt = ScriptedRuntime(['{\"call\": \"go\"}'])\n"
                   "city = 'Paris'")
    r = shell.run_cell(cell)
    err = error_of(r)
    assert isinstance(err, UsageError), err
    assert needle in str(err)
    assert shell.user_ns["rt"].calls == []  # no model call was made


def test_help_on_every_magic_prints_usage_and_runs_nothing(shell, capsys):
    shell.run_cell("OPTS = {'go': 'GO'}\nrt = ScriptedRuntime(['{\"call\": \"go\"}'])")
    for cell, usage in [("%%decide --help\nPick.\n", "%decide"),
                        ("%%agent OPTS -h\nPick.\n", "%agent"),
                        ("%decision_menu --help", "%decision_menu"),
                        ("%decision_runtime --help", "%decision_runtime"),
                        ("%decision_trace --help", "%decision_trace")]:
        r = shell.run_cell(cell)
        assert r.success, (cell, error_of(r))
        out = capsys.readouterr().out
        assert usage in out and "positional arguments" in out, cell
    assert shell.user_ns["rt"].calls == []


def test_failed_decision_raises_decision_error_and_prints_every_attempt(shell, capsys):
    shell.run_cell("rt = ScriptedRuntime(['no json', '{\"call\": \"nope\"}'])")
    r = shell.run_cell("%%decide {'go': 'GO'} -r rt --as never\nPick.\n")
    err = error_of(r)
    assert isinstance(err, DecisionError) and err.kind == "unknown_call"
    assert "never" not in shell.user_ns
    out = capsys.readouterr().out
    assert "attempt 1: no_action" in out and "attempt 2 (last): unknown_call" in out


def test_max_retries_zero_makes_one_attempt(shell):
    shell.run_cell("rt = ScriptedRuntime(['no json', '{\"call\": \"go\"}'])")
    r = shell.run_cell("%%decide {'go': 'GO'} -r rt --max-retries 0\nPick.\n")
    err = error_of(r)
    assert isinstance(err, DecisionError) and len(err.trace.attempts) == 1
    assert shell.user_ns["rt"].remaining == 1


def test_in_a_kernel_the_panel_is_shown_live_and_keeps_the_failure(live_shell):
    sh = live_shell
    sh.run_cell("rt = ScriptedRuntime(['<b>no</b> json', '{\"call\": \"nope\"}'], "
                "stream_chunk=4)")
    r = sh.run_cell("%%decide {'go': 'GO'} -r rt\nPick.\n")
    assert isinstance(error_of(r), DecisionError)
    (panel,) = sh.panels
    assert panel.trace is error_of(r).trace
    views = panel.attempts_box.children
    assert [("op-attempt-failed" in v._dom_classes) for v in views] == [True, True]
    assert "op-final-error" in panel.outcome.value and "unknown_call" in panel.outcome.value
    assert "&lt;b&gt;no&lt;/b&gt; json" in all_html(panel)
    # once the decision is over, the output is refreshed: its text and HTML copies are the
    # final state (what nbconvert and a saved notebook keep), not the running one
    ((updated, bundle),) = sh.handles[0].updates
    assert updated is panel
    assert bundle["text/plain"] == panel.trace.format_text()
    assert "op-final-error" in bundle["text/html"] and "running" not in bundle["text/html"]
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id
    assert repr(panel).startswith(f"<DecisionTrace #{panel.trace.id} make failed")


def test_a_bad_option_set_fails_before_any_panel_is_shown(live_shell):
    sh = live_shell
    sh.run_cell("rt = ScriptedRuntime(['{\"call\": \"go\"}'])")
    r = sh.run_cell("%%decide {} -r rt\nPick.\n")
    assert "the option set is empty" in str(error_of(r))
    assert sh.panels == []


def test_agent_runs_tools_and_shows_the_rounds(live_shell):
    sh = live_shell
    sh.run_cell('''
def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q
rt = ScriptedRuntime([ToolCall("lookup", {"q": "trains"}), '{"call": "go"}'])
''')
    r = sh.run_cell("%%agent {'go': 'GO', 'stay': 'STAY'} -r rt --tools lookup --as out\n"
                    "Check the trains, then pick.\n")
    assert r.success, error_of(r)
    assert r.result == "GO" and sh.user_ns["out"] == "GO"
    (panel,) = sh.panels
    assert panel.trace.entry == "agent"
    assert "lookup" in panel.tools.value and "found trains" in panel.tools.value
    # the refreshed output's HTML copy holds the tool round and the result
    ((_, bundle),) = sh.handles[0].updates
    assert "found trains" in bundle["text/html"] and "Result (option go)" in bundle["text/html"]
    # the turn's prompt carries the finish instruction and the menu
    assert "Check the trains, then pick." in sh.user_ns["rt"].calls[0].prompt
    assert "Call: {\"call\": \"go\"}" in sh.user_ns["rt"].calls[0].prompt


def test_the_panel_of_agent_writes_a_green_test_with_its_context_and_tools(live_shell,
                                                                            tmp_path):
    import subprocess
    import sys
    sh = live_shell
    setup_options(sh)
    sh.user_ns["GOOD"] = GOOD
    r = sh.run_cell('''
def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q
rt = ScriptedRuntime([ToolCall("lookup", {"q": "trains"}), GOOD])
ctx = {"user_id": "u9"}
''')
    assert r.success, error_of(r)
    r = sh.run_cell("%%agent OPTIONS -r rt --tools lookup --context ctx\nCheck, then pick.\n")
    assert r.success, error_of(r)
    assert r.result == {"city": "Rome", "nights": 2, "user": "u9"}
    (panel,) = sh.panels
    assert panel.context == {"user_id": "u9"} and panel.tool_functions is sh.user_ns["lookup"]
    panel.test_box.button.click()
    code = panel.test_box.code.value
    assert "TOOLS = lookup" in code and "CONTEXT = {'user_id': 'u9'}" in code, \
        panel.test_box.status.value
    (tmp_path / "test_agent_panel.py").write_text(code)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_agent_toolset_by_registered_name(shell):
    shell.run_cell('''
from openprogram import register_toolset
def clock() -> str:
    """The time."""
    return "noon"
register_toolset("widgets_test_tools", [clock])
rt = ScriptedRuntime([ToolCall("clock", {}), '{"call": "go"}'])
''')
    r = shell.run_cell("%%agent {'go': 'GO'} -r rt --toolset widgets_test_tools\nPick.\n")
    assert r.success, error_of(r)
    from openprogram import last_trace
    assert [t.name for t in last_trace().tool_rounds] == ["clock"]


def test_decision_menu_prints_the_menu_and_returns_the_option_table(shell, capsys):
    setup_options(shell)
    r = shell.run_cell("%decision_menu OPTIONS")
    assert r.success, error_of(r)
    out = capsys.readouterr().out
    assert out.startswith("Options (reply with one JSON object")
    assert "- book(city: str, nights: int = 1)" in out
    df = r.result
    rows = {(row.option, row.parameter): row for row in df.itertuples()}
    assert rows[("book", "city")].allowed == ["Paris", "Rome"]
    assert rows[("book", "city")].required
    assert rows[("book", "nights")].default == 1
    assert rows[("book", "user_id")].hidden and rows[("book", "user_id")].source == "context"
    assert rows[("wait", "")].kind == "value"
    assert rows[("wait", "")].description == "do nothing yet"


def test_decision_trace_shows_the_last_or_nth_decision(shell):
    from openprogram.trace import decision_trace as T
    from openprogram.widgets import DecisionPanel
    shell.run_cell("rt = ScriptedRuntime(['{\"call\": \"a\"}', '{\"call\": \"b\"}'])")
    shell.run_cell("%%decide {'a': 1, 'b': 2} -r rt\nPick.\n")
    first = T.history[-1]
    shell.run_cell("%%decide {'a': 1, 'b': 2} -r rt\nPick.\n")
    second = T.history[-1]
    last = shell.run_cell("%decision_trace").result
    assert isinstance(last, DecisionPanel) and last.trace is second
    # the output carries the decision as static HTML too (for nbconvert, GitHub)
    static = shell.display_formatter.format(last)[0]["text/html"]
    assert "Result (option b)" in static and static.count("<table") == 2
    assert shell.run_cell(f"%decision_trace {first.id}").result.trace is first
    assert shell.run_cell("%decision_trace -2").result.trace is first
    r = shell.run_cell("%decision_trace 999999")
    assert "decision #999999 is not kept" in str(error_of(r))
    r = shell.run_cell(f"%decision_trace -{len(T.history) + 1}")
    assert "goes back too far" in str(error_of(r))


def test_unload_removes_the_magics(shell):
    shell.run_cell("%unload_ext openprogram")
    assert "decide" not in shell.magics_manager.magics["cell"]
    assert "decision_menu" not in shell.magics_manager.magics["line"]
    shell.run_cell("%load_ext openprogram")
    assert "decide" in shell.magics_manager.magics["cell"]


def test_expressions_arrive_exactly_as_written_and_flags_may_come_first(shell):
    r = shell.run_cell("%decision_runtime ScriptedRuntime(['{\"call\":   \"go\"}  -r x'])")
    assert r.success, error_of(r)
    assert r.result.replies == ['{"call":   "go"}  -r x']
    r = shell.run_cell("%%decide --as picked {'go': ('GO', 'a -- b'), 'stop': 'STOP'}\nPick.\n")
    assert r.success, error_of(r)
    assert shell.user_ns["picked"] == "GO"


# -- --validate, --reask, --mode ------------------------------------------------------------------

def test_validate_names_a_rule_that_rejects_a_pick_and_the_model_is_asked_again(shell):
    setup_options(shell)
    r = shell.run_cell('''
from openprogram import Retry
seen = []
def only_rome(pick):
    seen.append((pick.call, dict(pick.args)))
    if pick.args.get("city") != "Rome":
        raise Retry("we only book Rome this week")
rt = ScriptedRuntime(['{"call": "book", "args": {"city": "Paris"}}', GOOD])
''' .replace("GOOD", repr(GOOD)))
    assert r.success, error_of(r)
    r = shell.run_cell("%%decide OPTIONS -r rt --validate only_rome -c \"{'user_id': 'u'}\"\n"
                       "Pick.\n")
    assert r.success, error_of(r)
    assert r.result == {"city": "Rome", "nights": 2, "user": "u"}
    assert shell.user_ns["seen"] == [("book", {"city": "Paris"}),
                                     ("book", {"city": "Rome", "nights": 2})]
    from openprogram import last_trace
    assert last_trace().attempts[0].error_kind == "rejected"
    assert "we only book Rome this week" in shell.user_ns["rt"].calls[1].prompt


@pytest.mark.parametrize("reask, sent", [
    ('"Wrong ({kind} at {path}) on attempt {attempt}: {error}"',
     "Wrong (type_mismatch at args.nights) on attempt 1: args.nights must be int"),
    ("lambda r: f'again, {r.kind}: {r.reply}'",
     'again, type_mismatch: {"call": "book", "args": {"city": "Rome", "nights": "two"}}'),
])
def test_reask_names_a_template_or_a_function_and_writes_the_text_sent_back(shell, reask, sent):
    setup_options(shell)
    shell.user_ns["rt"] = shell.ev(
        """ScriptedRuntime(['{"call": "book", "args": {"city": "Rome", "nights": "two"}}', """
        f"{GOOD!r}])")
    shell.run_cell(f"REASK = {reask}")
    r = shell.run_cell("%%decide OPTIONS -r rt --reask REASK -c \"{'user_id': 'u'}\"\nPick.\n")
    assert r.success, error_of(r)
    assert shell.user_ns["rt"].calls[1].prompt.startswith(sent)


def test_mode_sends_the_options_as_tools_in_decide_and_agent(shell):
    r = shell.run_cell('''
def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q
seen = []
def rule(pick):
    seen.append(pick.call)
OPTS = {"go": "GO", "stay": ("STAY", "do nothing yet")}
rt = ScriptedRuntime([ToolCall("stay", {})])
art = ScriptedRuntime([ToolCall("lookup", {"q": "trains"}), ToolCall("go", {})])
''')
    assert r.success, error_of(r)
    r = shell.run_cell("%%decide OPTS -r rt --mode tools\nPick.\n")
    assert r.success, error_of(r)
    assert r.result == "STAY"
    call = shell.user_ns["rt"].calls[0]
    assert [t["name"] for t in call.tools] == ["go", "stay"]
    assert call.mode_args["tool_choice"] == "required" and "Options (" not in call.prompt
    r = shell.run_cell("%%agent OPTS -r art --tools lookup --mode tools --validate rule\n"
                       "Check the trains, then pick.\n")
    assert r.success, error_of(r)
    assert r.result == "GO" and shell.user_ns["seen"] == ["go"]
    from openprogram import last_trace
    trace = last_trace()
    assert trace.mode == "tools" and [t.name for t in trace.tool_rounds] == ["lookup"]
    assert {"go", "stay", "lookup"} <= {t["name"] for t in shell.user_ns["art"].calls[0].tools}


@pytest.mark.parametrize("flags, needle", [
    ("--validate nope", "--validate 'nope': name 'nope' is not defined in the notebook"),
    ("--validate city", "--validate 'city' is a str; give a function of the pick"),
    ("--reask nope", "--reask 'nope': name 'nope' is not defined in the notebook"),
    ("--reask BAD_TEMPLATE", "--reask 'BAD_TEMPLATE': reask= template names unknown field(s) "
                             "'oops'"),
    ("--reask 42", "--reask '42': reask= takes a format template (str) or a callable"),
    ("--mode bogus", "argument --mode: invalid choice: 'bogus'"),
    ("--mode tools -r plain", "--mode tools: 'plain' cannot ask in mode 'tools'"),
])
def test_bad_validate_reask_and_mode_flags_name_the_flag(shell, flags, needle):
    shell.run_cell("OPTS = {'go': 'GO'}\nrt = ScriptedRuntime(['{\"call\": \"go\"}'])\n"
                   "city = 'Paris'\nBAD_TEMPLATE = 'try again: {oops}'\ncalled = []\n"
                   "plain = Runtime(call=lambda p: called.append(p) or '{\"call\": \"go\"}',"
                   " name='plain')")
    for magic in ("decide", "agent"):
        runtime = "" if "-r " in flags else "-r rt "
        r = shell.run_cell(f"%%{magic} OPTS {runtime}{flags}\nPick.\n")
        err = error_of(r)
        assert isinstance(err, UsageError), (magic, err)
        assert needle in str(err), (magic, str(err))
    assert shell.user_ns["rt"].calls == [] and shell.user_ns["called"] == []


def test_confidence_flags_draw_samples_and_escalate(shell):
    setup_options(shell)
    wait = '{"call": "wait"}'
    shell.run_cell(f"rt = ScriptedRuntime([{GOOD!r}, {GOOD!r}, {wait!r}])")
    r = shell.run_cell("%%decide OPTIONS --runtime rt --confidence 3 --as step\nPick for {city}.")
    assert r.success, error_of(r)
    r = shell.run_cell("from openprogram import decision; decision.last_trace().confidence")
    assert r.result.probs == {"book": 2 / 3, "wait": 1 / 3} and r.result.n == 3
    shell.run_cell(f"rt = ScriptedRuntime([{GOOD!r}, {wait!r}, {wait!r}, {GOOD!r}])")
    r = shell.run_cell("%%decide OPTIONS --runtime rt --confidence decision.Samples(4) "
                       "--min-confidence 0.9 --low-confidence wait\nPick for {city}.")
    assert r.success and r.result == "WAIT", error_of(r)
    # confidence=True on a runtime with no distribution of its own names samples
    r = shell.run_cell("%%decide OPTIONS --runtime rt --confidence\nPick for {city}.")
    assert not r.success and "decision.Samples(n)" in str(r.error_in_exec)
def test_repair_sets_the_level_in_decide_and_agent_and_the_panel_shows_the_repairs(shell):
    setup_options(shell)
    sloppy = """{'call': 'Book', 'args': {'city': 'rome ', 'nights': '2',},}"""
    r = shell.run_cell(f"rt = ScriptedRuntime([{sloppy!r}, {sloppy!r}, {sloppy!r}])")
    assert r.success, error_of(r)
    r = shell.run_cell("%%decide OPTIONS -r rt --repair off --max-retries 0\nPick.\n")
    assert not r.success and isinstance(r.error_in_exec, DecisionError)
    assert r.error_in_exec.kind == "no_action"
    r = shell.run_cell("%%decide OPTIONS -r rt --repair menu --as step\nPick.\n")
    assert r.success, error_of(r)
    assert r.result == {"city": "Rome", "nights": 2, "user": "anon"}
    from openprogram import last_trace
    from openprogram.widgets import DecisionPanel
    att = last_trace().attempts[0]
    assert {"single_quotes", "trailing_comma", "option_name", "enum_value",
            "string_to_number"} <= {x.kind for x in att.repairs}
    html = DecisionPanel(last_trace())._repr_mimebundle_()["text/html"]
    assert "op-repair-mark" in html and "Repaired, not re-asked" in html
    r = shell.run_cell("%%agent OPTIONS -r rt --repair menu\nPick.\n")
    assert r.success, error_of(r)
    r = shell.run_cell("%%decide OPTIONS -r rt --repair loose\nPick.\n")
    assert not r.success and "loose" in str(r.error_in_exec)
