"""`openprogram.testgen`: a trace becomes a pytest test that replays it on ScriptedRuntime.
Every generated test is written to tmp_path and run by pytest in a subprocess, as generated;
then the option set changes and the same tests must fail."""
import os
import subprocess
import sys
import textwrap

import pytest

from openprogram import DecisionError, Runtime, agent, decision
from openprogram.runtimes import ModelCallError, ScriptedRuntime, ToolCall
from openprogram.testgen import option_set_source, trace_to_pytest

MODULE = '''
from typing import Literal


class Booking:
    def __init__(self, city):
        self.city = city

    def __repr__(self):
        return f"Booking({self.city!r})"


class Overbooked(Exception):
    pass


def book(city: Literal["Paris", "Rome"], nights: int = 1, user_id: str = ""):
    """Book a hotel."""
    return {"city": city, "nights": nights, "user": user_id}


book.input_meta = {"user_id": {"hidden": True}}


def reserve(city: str):
    """Reserve, returning an object."""
    return Booking(city)


def divide():
    """Always fails."""
    return 1 / 0


def overbook():
    """Fails with a custom error."""
    raise Overbooked("full")


def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q


OPTIONS = {"book": book, "reserve": reserve, "divide": divide, "overbook": overbook,
           "wait": ("WAIT", "do nothing yet"),
           "form": ("Fill a form.", {"name": str, "tags": [str]})}
CONTEXT = {"user_id": "u1"}
'''


@pytest.fixture
def mod(tmp_path, monkeypatch):
    (tmp_path / "replay_options.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("replay_options", None)
    import replay_options
    yield replay_options
    sys.modules.pop("replay_options", None)


def run_pytest(folder, path=None):
    """pytest on `folder` in a fresh process; `path` (the option module's folder) goes on
    PYTHONPATH as it would in a project."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(folder)], cwd=folder, capture_output=True, text=True, env=env)


def timeout_runtime():
    def model(content):
        raise ModelCallError("the model took too long", partial='{"call": "bo', kind="timeout")
    return Runtime(call=model, name="slow")


def test_generated_tests_pass_as_generated_and_fail_when_the_options_change(tmp_path, mod):
    OPT, CTX = mod.OPTIONS, mod.CONTEXT
    cases = {}

    rt = ScriptedRuntime(['{"call": "book", "args": {"city": "Oslo"}}',
                          'ok: ```json\n{"call": "book", "args": {"city": "Rome", "nights": 2,'
                          ' "user_id": "x"}}\n```'])
    decision.make("Book. Pick.", OPT, runtime=rt, context=CTX)
    cases["reask"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    with pytest.raises(DecisionError):
        decision.make("Pick.", OPT, runtime=ScriptedRuntime(["no", "still no"]), context=CTX)
    cases["failed"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    with pytest.raises(DecisionError):
        decision.make("Pick.", OPT, runtime=timeout_runtime(), context=CTX)
    cases["timeout"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    with pytest.raises(ZeroDivisionError):
        decision.make("Pick.", OPT, runtime=ScriptedRuntime(['{"call": "divide"}']), context=CTX)
    cases["builtin_raise"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    with pytest.raises(mod.Overbooked):
        decision.make("Pick.", OPT, runtime=ScriptedRuntime(['{"call": "overbook"}']), context=CTX)
    cases["custom_raise"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    decision.make("Pick.", OPT, runtime=ScriptedRuntime(['{"call": "reserve", "city": "Rome"}']),
                  context=CTX, max_retries=0)
    cases["object_result"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    decision.make("Fill.", OPT, context=CTX, runtime=ScriptedRuntime(
        ['{"call": "form", "args": {"name": "Ada", "tags": ["x", "y"], "extra": 1}}']))
    cases["schema"] = (decision.last_trace(), {"context_expr": "CONTEXT"})

    agent("Look it up, then pick.", choices=OPT, tools=[mod.lookup], context=CTX,
          runtime=ScriptedRuntime([[ToolCall("lookup", {"q": "a"}), ToolCall("lookup",
                                                                             {"q": "b"})],
                                   '{"call": "wait"}']))
    cases["agent_tools"] = (decision.last_trace(),
                            {"context_expr": "CONTEXT", "tools_expr": "[lookup]"})

    gen = tmp_path / "generated"
    gen.mkdir()
    for name, (trace, kw) in cases.items():
        code = trace_to_pytest(trace, "OPTIONS", "replay_options", **kw)
        compile(code, name, "exec")
        (gen / f"test_{name}.py").write_text(code)
    run = run_pytest(gen, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(cases)} passed" in run.stdout

    # What the generated tests assert is real: rename an option and describe the schema
    # differently, and the replays no longer end the same way.
    changed = MODULE.replace('"book": book', '"book_hotel": book').replace(
        '"tags": [str]', '"tags": [int]')
    (tmp_path / "replay_options.py").write_text(changed)
    run = run_pytest(gen, tmp_path)
    assert run.returncode == 1
    assert "FAILED test_reask.py" in run.stdout and "FAILED test_schema.py" in run.stdout
    assert "FAILED test_object_result.py" not in run.stdout


def test_a_notebook_option_set_is_copied_by_source(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    InteractiveShell.clear_instance()
    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=cfg)
    try:
        r = sh.run_cell(textwrap.dedent('''
            from typing import Literal
            def book(city: Literal["Paris", "Rome"], nights: int = 1):
                """Book a hotel."""
                return f"{city} for {nights}"
            opts = {"book": book, "wait": ("WAIT", "later"), "form": ("Fill.", {"n": int}),
                    "done": True}
        '''))
        assert r.success
        opts = sh.user_ns["opts"]
    finally:
        InteractiveShell.clear_instance()
    src = option_set_source(opts, "opts")
    assert "def book(city: Literal[\"Paris\", \"Rome\"], nights: int = 1):" in src
    assert "opts = {'book': book, 'wait': ('WAIT', 'later'), 'form': ('Fill.', {'n': int}), " \
           "'done': True}" in src
    rt = ScriptedRuntime(['{"call": "book", "args": {"city": "Lima"}}',
                          '{"call": "book", "args": {"city": "Paris", "nights": 4}}'])
    assert decision.make("Pick.", opts, runtime=rt) == "Paris for 4"
    code = trace_to_pytest(decision.last_trace(), "opts", setup=src, test_name="nb case")
    assert "def test_nb_case():" in code
    (tmp_path / "test_nb.py").write_text(code)
    run = run_pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_option_set_source_refuses_what_it_cannot_write():
    with pytest.raises(ValueError, match="not a named plain function"):
        option_set_source({"f": lambda: 1})
    with pytest.raises(ValueError, match="cannot be written as Python source"):
        option_set_source({"v": (object(), "an object")})
    with pytest.raises(ValueError, match="not a Python identifier"):
        option_set_source({"a": 1}, "not a name")


def test_what_cannot_be_replayed_is_refused_with_the_fix(mod):
    rt = ScriptedRuntime(['{"call": "wait"}'])
    decision.make("Pick.", mod.OPTIONS, runtime=rt, context=mod.CONTEXT)
    trace = decision.last_trace()
    with pytest.raises(ValueError, match="module='pkg.mod'"):
        trace_to_pytest(trace)
    with pytest.raises(ValueError, match="pass context_expr="):
        trace_to_pytest(trace, module="replay_options")
    with pytest.raises(ValueError, match="is not a Python expression"):
        trace_to_pytest(trace, "OPTIONS[", module="m", context_expr="C")
    with pytest.raises(ValueError, match="is not a dotted module path"):
        trace_to_pytest(trace, module="a b", context_expr="C")
    code = trace_to_pytest(trace, "pick(OPTIONS, len)", module="pkg.m", context_expr="CONTEXT")
    assert "from pkg.m import pick, OPTIONS, CONTEXT" in code  # builtins are not imported
    trace.status = "running"
    with pytest.raises(ValueError, match="still running"):
        trace_to_pytest(trace, module="m", context_expr="C")
    agent("Tools.", choices={"a": 1}, tools=[mod.lookup],
          runtime=ScriptedRuntime([ToolCall("lookup", {"q": "x"}), '{"call": "a"}']))
    with pytest.raises(ValueError, match="pass tools_expr="):
        trace_to_pytest(decision.last_trace(), module="m")


# Code in every string of a trace read from a file someone else wrote (issue 41, finding 6):
# each payload breaks out of a different kind of quoting if written as text.
_PAYLOADS = ['"""\nimport os; os.environ["OP_TESTGEN_PWNED"] = "docstring"\n"""',
             "'''\nimport os; os.environ['OP_TESTGEN_PWNED'] = 'single'\n'''",
             "\nimport os; os.environ['OP_TESTGEN_PWNED'] = 'newline'  #",
             "x}; __import__('os').environ.__setitem__('OP_TESTGEN_PWNED', 'brace') #",
             "\\\nimport os; os.environ['OP_TESTGEN_PWNED'] = 'backslash'"]


def _hostile_trace(payload: str, **overrides):
    from openprogram.trace.decision_trace import trace_from_dict
    attempt = {"attempt": 1, "is_last": True, "prompt": payload, "reply": payload,
               "chosen": payload, "args": {payload: payload}, "error_kind": payload,
               "error_message": payload, "finish_reason": payload}
    d = {"entry": "make", "status": "failed", "prompt": payload, "menu": payload,
         "options": [payload], "runtime": payload, "mode": payload, "max_attempts": 1,
         "attempts": [attempt], "result": payload,
         "error": {"kind": payload, "type": payload, "message": payload}}
    d.update(overrides)
    return trace_from_dict(d)


@pytest.mark.parametrize("payload", _PAYLOADS)
def test_a_trace_whose_every_string_holds_code_generates_a_test_that_runs_none(
        tmp_path, monkeypatch, payload):
    import importlib.util
    monkeypatch.delenv("OP_TESTGEN_PWNED", raising=False)
    source = trace_to_pytest(_hostile_trace(payload), setup="OPTIONS = {'a': ('A', 'a')}")
    path = tmp_path / "test_hostile.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("test_hostile", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)      # importing the generated test runs none of the payload
    assert "OP_TESTGEN_PWNED" not in os.environ
    # the strings are in the test as the values they were
    assert module.PROMPT == payload and module.EXPECTED_CHOSEN == [payload]
    assert module.__doc__.startswith("Replays decision #") and \
        "(make, failed, 1 attempt(s))" in module.__doc__


@pytest.mark.parametrize("field,value", [
    ("status", 'failed"""\nimport os; os.environ["OP_TESTGEN_PWNED"] = "status"\n"""'),
    ("entry", 'make"""\nimport os\n"""'), ("max_attempts", "1) or (1"),
    ("max_attempts", True)])
def test_fields_that_can_only_be_a_few_values_are_refused_otherwise(field, value):
    with pytest.raises(ValueError) as info:   # before: the status ran as code on import
        trace_to_pytest(_hostile_trace("x", **{field: value}), setup="OPTIONS = {}")
    assert "edited file" in str(info.value) or "can be replayed" in str(info.value)
