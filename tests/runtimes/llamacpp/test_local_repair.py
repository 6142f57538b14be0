"""repair= on the real SmolLM2-135M model (issue 39): what must hold for any reply it writes.

A constrained (json_schema) reply is valid as written, so no level changes it; a reply cut at
max_tokens is closed by "safe" only where closing quotes and brackets is all it lacks and the
closed pick validates, and stays `truncated` otherwise; re-reading the same menu-mode replies
at a higher level never loses a pick or changes one. Work is bounded by max_tokens, never by
time."""
from __future__ import annotations

from localhelp import OPTIONS, REQUESTS, prompt

from openprogram import DecisionError, decision
from openprogram.decision import repair as R
from openprogram.runtimes import LlamaCppRuntime

LEVELS = ("off", "safe", "menu")


def _decide(rt, request, **kw):
    try:
        decision.make(prompt(request), OPTIONS, runtime=rt, max_retries=0, **kw)
    except DecisionError as exc:
        return exc.trace
    return decision.last_trace()


def test_a_constrained_reply_is_never_repaired():
    traces = [_decide(LlamaCppRuntime(seed=seed), REQUESTS[seed % len(REQUESTS)],
                      mode="json_schema", repair="off") for seed in range(4)]
    assert all(t.status == "resolved" for t in traces)
    for level in ("safe", "menu"):
        rv = decision.revalidate(traces, OPTIONS, repair=level)
        assert all(r.after_ok and r.after == r.before and r.repairs == 0 for r in rv.rows)


def test_a_reply_cut_at_max_tokens_is_closed_only_when_the_closed_pick_validates():
    closed = 0
    for n in range(4, 20):
        trace = _decide(LlamaCppRuntime(seed=0, max_tokens=n), REQUESTS[1], mode="json_schema",
                        repair="safe")
        att = trace.attempts[0]
        assert att.usage["output_tokens"] <= n
        if att.finish_reason != "length":
            assert att.repairs == []  # a whole reply: valid as written
            continue
        if trace.status == "resolved":
            assert [r.kind for r in att.repairs] == ["closed_truncation"]
            assert att.chosen in OPTIONS
            closed += 1
        else:
            assert att.error_kind == "truncated"
        # the same reply without repair is re-asked as truncated
        (row,) = decision.revalidate([trace], OPTIONS, repair="off").rows
        assert not row.after_ok and row.error_kind == "truncated"
    assert closed >= 1, "no cut reply was closed into a pick"


def test_menu_replies_read_at_a_higher_level_keep_every_pick():
    rt = LlamaCppRuntime(seed=3, max_tokens=64)
    traces = [_decide(rt, r, repair="off") for r in REQUESTS]
    rows = {lv: decision.revalidate(traces, OPTIONS, repair=lv).rows for lv in LEVELS}
    for lower, higher in zip(LEVELS, LEVELS[1:]):
        for a, b in zip(rows[lower], rows[higher]):
            if a.after_ok:
                assert b.after_ok and b.after == a.after
    for lv in LEVELS:
        rv = decision.revalidate(traces, OPTIONS, repair=lv)
        for _row, t in zip(rv.rows, rv.after):
            for att in t.attempts:
                assert all(R.allows(lv, r.kind) for r in att.repairs)
