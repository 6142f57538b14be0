"""`%decision_lint OPTIONS` (issue 53): the lint report of an option set, in IPython, without a
model; a name or a value that is not an option set is a UsageError naming it."""
from IPython.core.error import UsageError
from widgethelp import error_of

from openprogram.decision.options.lint import LintReport


def test_the_magic_shows_the_report(shell):
    shell.run_cell("rt = ScriptedRuntime([])\n"
                   "OPTS = {'Refund': ('R', 'Give the money back'), 'refund': ('r', ''),\n"
                   "        'track': ('T', 'Tell where the parcel is')}")
    r = shell.run_cell("%decision_lint OPTS")
    assert r.success, error_of(r)
    assert isinstance(r.result, LintReport)
    assert sorted(f.rule for f in r.result) == ["missing_description",
                                                "names_differ_only_in_case"]
    r = shell.run_cell("%decision_lint {'a': ('A', 'x'), 'b': ('B', 'y')}")
    assert r.success and list(r.result) == []
    for cell, needle in (("%decision_lint 42", "is not a usable option set"),
                         ("%decision_lint NOPE", "name 'NOPE' is not defined")):
        err = error_of(shell.run_cell(cell))
        assert isinstance(err, UsageError) and needle in str(err), cell
    assert shell.user_ns["rt"].calls == []


def test_help_prints_usage(shell, capsys):
    assert shell.run_cell("%decision_lint --help").success
    out = capsys.readouterr().out
    assert "%decision_lint" in out and "positional arguments" in out
