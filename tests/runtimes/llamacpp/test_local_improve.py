"""`decision.improve` on the real SmolLM2-135M model (issue 36), kept small: 20 labelled rows
over 4 options, a budget of 60 model calls. Replies depend on the CPU, so the test asserts what
must hold for any model: it measures on the exact distribution (mean_p_expected), the sides of
the split are disjoint and cover the rows, a kept edit has a held-out gain above zero at 95 %,
and the option set it returns gives, on the held-out rows, the figure it reports."""
from __future__ import annotations

import pytest

from openprogram import decision
from openprogram.runtimes import LlamaCppRuntime

OPTIONS = {"refund": ("REFUND", "give the customer their money back"),
           "track_parcel": ("TRACK", "tell the customer where their parcel is"),
           "reset_password": ("RESET", "help the customer get back into their account"),
           "talk_to_human": ("HUMAN", "pass the customer to a person")}
ROWS = [(t, "refund") for t in ["I want my money back", "Refund order 51 please",
                                "Reverse the charge", "Credit me for the broken lamp",
                                "Give back what I paid"]] + \
    [(t, "track_parcel") for t in ["Where is my package?", "My order has not arrived",
                                   "Has the courier picked it up?", "Tracking status of 8812?",
                                   "When does the delivery come?"]] + \
    [(t, "reset_password") for t in ["I forgot my password", "I cannot log in",
                                     "Locked out of my profile", "Reset my credentials",
                                     "The sign-in link fails"]] + \
    [(t, "talk_to_human") for t in ["Let me speak to an agent", "I want a real person",
                                    "Transfer me to an operator", "Can a human help?",
                                    "Get me a representative"]]
PROMPT = "A customer writes: {text}\nPick the one next step that helps this customer."


def test_improve_measures_held_out_rows_on_the_exact_distribution():
    rt = LlamaCppRuntime(seed=0)
    rows = [{"text": t, "label": k} for t, k in ROWS]
    imp = decision.improve(PROMPT, OPTIONS, rows, expected="label", runtime=rt,
                           proposer="keywords", budget=60, mode="json_schema", confidence=True,
                           max_retries=0, max_examples=1)
    r = imp.report
    assert r["measured_on"] == "mean_p_expected"
    split = r["split"]
    assert split["train"] == split["held_out"] == 10
    assert sorted(split["train_rows"] + split["held_out_rows"]) == list(range(20))
    assert 0 < r["calls"] <= 60 + 20 and r["candidates"] == len(imp.edits) >= 1
    for e in imp.kept:
        assert e["held_gain_lo"] > 0
    # the returned option set, run again on the held-out rows, gives the reported figure
    held = [rows[i] for i in split["held_out_rows"]]
    again = decision.evaluate(PROMPT, imp.options, held, runtime=rt, expected="label",
                              mode="json_schema", confidence=True, max_retries=0,
                              progress=False)
    assert again.mean_p_expected == pytest.approx(r["held_out_after"]["mean_p_expected"],
                                                  abs=1e-6)
