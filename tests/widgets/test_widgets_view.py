"""The HTML view of a decision (`openprogram.trace.view`): the standard library
only, the same tables as the trace's frames, one MathJax-proof wrapper around every view, and
nothing a trace can hold (a result whose repr raises, a huge reply) breaks or floods it."""
import ast
import dataclasses
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from widgethelp import all_html

from openprogram import DecisionError, decision
from openprogram.runtimes import ScriptedRuntime
from openprogram.trace import view
from openprogram.widgets.panel import DecisionPanel
from openprogram.widgets.playground import Playground

VIEW = Path(view.__file__)


def book(city: str, nights: int = 1):
    """Book a hotel."""
    return {"city": city, "nights": nights}


OPTIONS = {"book": book, "wait": ("WAIT", "do nothing yet")}


def two_attempt_trace():
    decision.make("Where to? Pick.", OPTIONS, runtime=ScriptedRuntime([
        '{"call": "book", "args": {"city": "Rome", "nights": "two"}}',
        '{"call": "book", "args": {"city": "Rome", "nights": 2}}']))
    return decision.last_trace()


def test_the_view_imports_the_standard_library_errors_text_and_tables_only(tmp_path):
    # the view and the safe-HTML toolkit it draws with (which every other HTML view uses); the
    # toolkit masks the keys the process holds in every text it escapes (base.secrets, itself
    # standard library only)
    for path, allowed in ((VIEW, {"base.errors", "base.text", "tables", "safe_html"}),
                          (VIEW.with_name("safe_html.py"), {"base.text", "base.secrets"})):
        tree = ast.parse(path.read_text())
        imported, ours = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level:
                ours.add(node.module)  # relative: a module of the package
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module)
        assert ours == allowed, (path.name, ours)
        assert not {m for m in imported if m.split(".")[0] == "openprogram"}
        others = {m.split(".")[0] for m in imported - ours} - {"__future__"}
        assert others <= set(sys.stdlib_module_names), others
    # and importing it (then drawing a trace) loads no pandas, IPython or notebook layer
    code = ("import sys\nfrom openprogram import decision\n"
            "from openprogram.runtimes import ScriptedRuntime\n"
            "from openprogram.trace.view import trace_html\n"
            "decision.make('p', {'a': 1}, runtime=ScriptedRuntime(['{\"call\": \"a\"}']))\n"
            "assert '<table' in trace_html(decision.last_trace())\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'IPython', 'ipywidgets') or m.startswith('openprogram.widgets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_tables_are_the_trace_frames_without_pandas():
    trace = two_attempt_trace()
    for table in view.TABLES:
        frame = trace.to_frame(table)
        text = view.table_html(trace, table)
        if frame.empty:
            assert f"no {table}" in text
            continue
        heads = re.findall(r"<thead><tr>(.*?)</tr></thead>", text)[0]
        names = [] if frame.index.name is None else [frame.index.name]
        assert re.findall(r"<th>(.*?)</th>", heads) == names + list(frame.columns)
        assert text.count("<tbody><tr>") == 1 and text.count("</tr>") == len(frame) + 1
    attempts = view.table_html(trace, "attempts")
    assert "<td>type_mismatch</td>" in attempts and "<td>args.nights</td>" in attempts
    assert "<td>" + html.escape(json.dumps({"city": "Rome", "nights": 2})) + "</td>" in attempts
    options = view.table_html(trace, "options")
    assert "<th>book</th>" in options and "nights: int = 1" in options
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        view.table_html(trace, "nope")


def test_every_view_opts_out_of_math_typesetting():
    trace = two_attempt_trace()
    wrapper = re.compile(r'^<div class="op-view mathjax_ignore tex2jax_ignore [^"]*"')
    assert wrapper.match(view.trace_html(trace))
    panel = DecisionPanel(trace)
    pg = Playground(OPTIONS)
    for widget in (panel, pg):
        assert {"mathjax_ignore", "tex2jax_ignore"} <= set(widget._dom_classes)
        bundle = widget._repr_mimebundle_()
        assert wrapper.match(bundle["text/html"]), bundle["text/html"][:120]
        assert "<table" in bundle["text/html"]
    assert wrapper.match(DecisionPanel().static_html())


def test_a_result_and_an_error_whose_str_and_repr_raise_are_shown_as_such():
    class Sulky:
        def __repr__(self):
            raise RuntimeError("no repr")

    class Mute(Exception):
        def __str__(self):
            raise RuntimeError("no str")

    def sulky():
        """Returns an object without a repr."""
        return Sulky()

    decision.make("Pick.", {"sulky": sulky}, runtime=ScriptedRuntime(['{"call": "sulky"}']))
    trace = decision.last_trace()
    assert "&lt;unrepresentable Sulky: no repr&gt;" in view.trace_html(trace)
    # (the decision loop itself cannot finish on such an error today: the runtime's span
    # formats it; the view is checked on the record such a decision would leave)
    failed = dataclasses.replace(trace, status="failed", result=None, error=Mute())
    for text in (view.trace_html(failed), all_html(DecisionPanel(failed))):
        assert "Failed: Mute" in text and "Mute whose str() raised RuntimeError" in text


def test_a_huge_reply_is_cut_in_every_view():
    reply = "x" * 3_000_000 + ' {"call": "wait"}'
    decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([reply]))
    trace = decision.last_trace()
    for text in (view.trace_html(trace), all_html(DecisionPanel(trace))):
        assert len(text) < 2 * view.MAX_CHARS + 20_000
        assert f"[{len(reply) - view.MAX_CHARS:,} more characters not shown]" in text
    assert "Result (option wait)" in view.trace_html(trace)


def test_a_failed_decision_keeps_every_attempt_and_the_error_in_the_static_view():
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime(["none", '{"call": "fly"}']))
    text = view.trace_html(info.value.trace)
    assert text.count('class="op-attempt op-attempt-failed"') == 2
    assert "Failed: DecisionError [unknown_call]" in text
    assert view.explain("unknown_call") in text
