"""`decision.lint` (issue 53): the problems of an option set found without a model. A test option
set seeds one problem per rule; each is found, named by option, rule and fix, and nothing else
is; the tour's option set (read out of notebooks/01-tour.py, as the tour defines it) has none."""
import json
from pathlib import Path
from typing import Annotated, Literal

import pytest

from openprogram import OptionError, decision, tool
from openprogram.decision.options.lint import RULES, Finding, LintReport
from openprogram.runtimes import ScriptedRuntime

TOUR = Path(__file__).resolve().parents[3] / "notebooks" / "01-tour.py"


def tour_options():
    """The option set the tour defines: the cell of 01-tour.py that builds `options`, run."""
    cells = TOUR.read_text().split("# %%")
    (cell,) = [c for c in cells if "\noptions = {" in c]
    namespace: dict = {}
    exec(cell, namespace)
    return namespace["options"]


def route(x: str, category: Literal["billing", "shipping"] = "billing") -> str:
    """Send a ticket to a queue."""
    return category


def forward(topic: Literal["shipping", "returns"], note: str = "") -> str:
    """Forward the ticket to a partner."""
    return topic


def notify(urgency: Literal["low", "high"], data: str = "") -> str:
    return urgency


def escalate(urgency: Literal["low", "high"],
             reason: Annotated[str, "why a person must look at it"]) -> str:
    """Hand the ticket to a person."""
    return urgency


SEEDED = {
    "Refund": ("REFUND", "Give the customer their money back for the order"),
    "refund": ("REFUND_NOW", "Give the customer their money back for this order"),
    "route": route,            # x says nothing, and 'billing' is also an option's name
    "forward": forward,        # 'shipping' is also a value of route's category
    "notify": notify,          # no description; `data` says nothing
    "escalate": escalate,      # shares `urgency` with notify: a shared vocabulary, not a problem
    "billing": ("BILLING", "Answer a question about an invoice"),
    "lookup": tool({"name": "lookup", "description": "Find an order",
                    "input_schema": {"type": "object", "properties": {
                        "q": {"type": "string"}, "order_id": {"type": "string"}}}}),
}


def test_lint_finds_each_seeded_problem_and_nothing_else():
    report = decision.lint(SEEDED)
    assert isinstance(report, LintReport) and all(isinstance(f, Finding) for f in report)
    found = sorted((f.rule, f.option, f.parameter) for f in report)
    assert found == sorted([
        ("names_differ_only_in_case", "Refund, refund", None),
        ("near_duplicate_descriptions", "Refund, refund", None),
        ("missing_parameter_description", "route", "x"),
        ("missing_description", "notify", None),
        ("missing_parameter_description", "notify", "data"),
        ("missing_parameter_description", "lookup", "q"),
        ("value_under_two_options", "route, forward", "route.category, forward.topic"),
        ("value_under_two_options", "billing, route", "route.category"),
    ])
    assert {f.rule for f in report} == set(RULES)
    by = {(f.rule, f.option, f.parameter): f for f in report}
    dup = by[("near_duplicate_descriptions", "Refund, refund", None)]
    assert "'Refund' and 'refund'" in dup.problem and "sets it apart" in dup.fix
    value = by[("value_under_two_options", "route, forward", "route.category, forward.topic")]
    assert "'shipping'" in value.problem and "2 options" in value.problem
    named = by[("value_under_two_options", "billing, route", "route.category")]
    assert "also the name of option 'billing'" in named.problem
    missing = by[("missing_parameter_description", "route", "x")]
    assert "Annotated" in missing.fix and "input_meta" in missing.fix
    # every finding says what to do
    assert all(f.fix and f.problem for f in report)


def test_the_tours_option_set_has_no_problem():
    options = tour_options()
    assert set(options) == {"analyze", "done", "escalate"}   # the tour's, as it reads
    report = decision.lint(options)
    assert list(report) == [] and repr(report) == "lint: no problem found in 3 option(s)"
    assert "no problem found" in report._repr_html_()


def test_each_rule_alone():
    assert [f.rule for f in decision.lint({"a": ("A", "x"), "A": ("B", "y")})] == \
        ["names_differ_only_in_case"]
    # alike descriptions but one word apart in a short text are told apart, not flagged
    assert list(decision.lint({"cancel": ("C", "Cancel an order"),
                               "track": ("T", "Track an order")})) == []
    # a missing description is not also a near duplicate of another missing one
    assert [f.rule for f in decision.lint({"a": ("A", ""), "b": ("B", "")})] == \
        ["missing_description"] * 2
    # a parameter whose name says what it holds needs no description to pass
    def book(city: str, nights: int, order_id: str, userId: str) -> str:
        """Book a room."""
    assert list(decision.lint({"book": book})) == []

    def bad(val1: str, arg: int, i: int, payloadData: str) -> str:
        """Do it."""
    assert [f.parameter for f in decision.lint({"bad": bad})] == \
        ["val1", "arg", "i", "payloadData"]

    # a hidden parameter is not in the menu: nothing to describe
    def hidden(city: str, x: str = "") -> str:
        """Book."""
    hidden.input_meta = {"x": {"hidden": True}}
    assert list(decision.lint({"hidden": hidden})) == []


def test_the_report_is_a_table_escaped_and_no_model_is_called():
    rt = ScriptedRuntime([])
    hostile = {"a<script>": ("A", "<script>alert(1)</script> do it"),
               "A<script>": ("B", "<script>alert(1)</script> do it")}
    report = decision.lint(hostile)
    html = report._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "mathjax_ignore" in html
    frame = report.to_frame()
    assert list(frame.columns) == ["option", "rule", "parameter", "problem", "fix"]
    assert len(frame) == len(report) == 2
    assert "mathjax_ignore" in frame._repr_html_()
    assert rt.calls == []
    text = repr(report)
    assert text.startswith("lint: 2 problem(s) in 2 option(s)")
    assert "[names_differ_only_in_case]" in text and "Fix:" in text


def test_an_unusable_option_set_is_the_error_make_gives():
    with pytest.raises(OptionError):
        decision.lint({})
    with pytest.raises(OptionError) as lint_error:
        decision.lint(42)
    with pytest.raises(OptionError) as make_error:
        decision.make("pick", 42, runtime=ScriptedRuntime([]))
    assert str(lint_error.value) == str(make_error.value)


def test_findings_are_plain_data():
    (f,) = decision.lint({"a": ("A", ""), "b": ("B", "pick me")})
    assert json.loads(json.dumps(f.__dict__)) == {
        "option": "a", "rule": "missing_description", "problem": f.problem, "fix": f.fix,
        "parameter": None}
