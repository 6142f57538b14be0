"""What a model, a server or an option set wrote, in the text view and the pandas frames (issue
41, finding 11): `format_text()` (the repr a terminal shows) escapes control characters as the
step-through's text does, and every frame the library returns for display sits in the wrapper
MathJax skips, as its HTML views do."""
from __future__ import annotations

import pytest

from openprogram import DecisionError, decision
from openprogram.evaluation.evaluate import evaluate
from openprogram.runtimes import ScriptedRuntime

# an OSC that retitles the terminal, a screen clear, a carriage return that overwrites the line,
# a bell, a C1 control and a line separator
HOSTILE = "tool\x1b]0;pwned\x07\x1b[2J\r\x9bX\u2028end"
CONTROLS = ["\x1b", "\x07", "\r", "\x9b", "\u2028"]


def test_format_text_escapes_control_characters():
    from openprogram.decision.stepthrough import steps
    options = {HOSTILE: ("V", "a value")}
    got = []
    from openprogram import observe
    with observe(lambda e: got.append(e.trace) if e.kind == "decision_started" else None), \
            pytest.raises(DecisionError):
        decision.make(f"pick {HOSTILE}", options,
                      runtime=ScriptedRuntime([f"{HOSTILE} {{\"call\": \"nothing\"}}"]),
                      max_retries=0)
    trace = got[0]
    text = trace.format_text()
    assert "tool" in text and "pwned" in text      # the text is there, shown
    for c in CONTROLS:
        assert c not in text, repr(c)
        assert c not in steps(trace).format_text()  # as the step-through shows it
    assert "\\x1b]0;pwned\\x07" in text
    assert "\n" in text                             # its own lines stay lines


def test_every_frame_for_display_sits_in_the_wrapper():
    pd = pytest.importorskip("pandas")
    options = {"a": ("A", "one"), "b": ("B", "two")}
    rows = [{"m": "$x^2$ costs $5", "label": "a"}, {"m": "hi", "label": "b"}]
    rt = ScriptedRuntime(rule=lambda prompt: '{"call": "%s"} $\\frac{1}{2}$' %
                         ("a" if "x^2" in prompt else "b"))
    res = evaluate("Message: {m}", options, rows, runtime=rt, expected="label", progress=False,
                   concurrency=1)
    frames = {"to_frame": res.to_frame(), "pick_counts": res.pick_counts,
              "confusion": res.confusion, "trace attempts": res.traces[0].to_frame(),
              "trace summary": res.traces[0].to_frame("summary"),
              "trace options": res.traces[0].to_frame("options")}
    from openprogram.evaluation.variants import compare
    cmp = compare("Message: {m}", {"one": options, "two": options}, rows,
                  runtime=ScriptedRuntime(rule=lambda prompt: '{"call": "a"}'),
                  progress=False, concurrency=1)
    frames.update({"compare to_frame": cmp.to_frame(), "compare pick_counts": cmp.pick_counts,
                   "compare summary": cmp.summary, "compare differences": cmp.differences,
                   "the runtime's DAG": rt.dag.to_frame()})
    for name, frame in frames.items():
        assert isinstance(frame, pd.DataFrame), name
        html = frame._repr_html_()
        assert "mathjax_ignore" in html and "tex2jax_ignore" in html, name
        # and what is derived from it for display too
        assert "mathjax_ignore" in frame.head(1)._repr_html_(), name
    assert "$x^2$" in frames["to_frame"]._repr_html_()
