"""What every input row goes through outside its decision, written out for the common case (a
dict whose columns were seen before; a decision of one attempt): a streamed table reads and
checks its rows as a table given whole does, and a row's summary is the one the loop over its
attempts gives."""
import dataclasses
from collections import OrderedDict
from types import MappingProxyType

import pytest
from evalhelp import OPTIONS, PROMPT, rule

from openprogram import decision
from openprogram.evaluation.inputs import Table
from openprogram.evaluation.outcomes import summarize
from openprogram.evaluation.runner import Row
from openprogram.runtimes import ScriptedRuntime
from openprogram.trace.decision_trace import observe

NAMES = ["refund", "escalate", "ignore"]


def read(rows, streamed, expected=None):
    table = Table(PROMPT, iter(rows) if streamed else rows, expected, NAMES, "evaluate")
    return list(table.rows()), table.columns


def test_a_streamed_table_reads_and_checks_its_rows_as_a_whole_one():
    rows = [{"message": "a"}, {"message": "b", "label": "refund"},
            OrderedDict([("extra", 1), ("message", "c")]),
            MappingProxyType({"message": "d", "label": "ignore"})]
    assert read(rows, True, "label") == read(rows, False, "label")
    assert read(rows, True)[1] == ["message", "label", "extra"]
    with pytest.raises(ValueError, match=r"\{message\}.*row 1 has no column 'message'.*'text'"):
        read([{"message": "a"}, {"text": "b"}], True)
    with pytest.raises(ValueError, match="prompt template could not be filled from input row 0"):
        list(Table("{message[0]}", iter([{"message": 5}]), None, NAMES, "evaluate").rows())
    with pytest.raises(TypeError, match=r"inputs\[1\] is a list, not a dict"):
        read([{"message": "a"}, ["b"]], True)


def loop_summary(row):
    """summarize's loop over the attempts, for any number of them."""
    attempts = row.trace.attempts
    tin = tout = 0
    for a in attempts:
        u = a.usage
        if u:
            tin += u.get("input_tokens") or 0
            tout += u.get("output_tokens") or 0
    last = attempts[-1]
    return (row.status, last.chosen if last.error_kind is None else None, len(attempts),
            tuple(a.error_kind for a in attempts if a.error_kind), None, tin, tout,
            row.duration_s, all(a.cached for a in attempts))


def test_a_row_of_one_attempt_is_summarized_as_the_loop_over_attempts_does():
    got = []
    with observe(lambda e: got.append(e.trace), kinds=("decision_started",)):
        for message in ("refund me", "garbage", "escalate"):
            try:
                decision.make(PROMPT.format(message=message), OPTIONS,
                              runtime=ScriptedRuntime(rule=rule), max_retries=0)
            except Exception:
                pass
    a = got[0].attempts[0]
    shapes = [t.attempts[0] for t in got] + [
        dataclasses.replace(a, usage={"input_tokens": 3, "output_tokens": None}, cached=1),
        dataclasses.replace(a, usage={"input_tokens": True}, cached=None),
        dataclasses.replace(a, usage={}, error_kind="bad_args")]
    for one in shapes:
        row = Row()
        row.status, row.duration_s = "resolved", 0.5
        row.trace = dataclasses.replace(got[0], attempts=[one])
        assert summarize(row) == loop_summary(row)
        assert [type(v) for v in summarize(row)] == [type(v) for v in loop_summary(row)]
    row.trace = dataclasses.replace(got[0], attempts=[dataclasses.replace(a, usage={
        "input_tokens": "3"})])
    with pytest.raises(TypeError):   # as the loop's sum raises
        summarize(row)
