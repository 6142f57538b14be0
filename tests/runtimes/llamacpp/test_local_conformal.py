"""Pick sets on the real SmolLM2-135M (issue 53), kept small: 32 of the labelled support
requests (notebooks/data/support_desk.csv, 4 per option), its exact distribution in json_schema
mode. Replies depend on the CPU, so the test asserts what must hold for any model: the policy's
threshold is the hand-computed quantile of its calibration rows' scores, its figures on the other
rows are what their distributions give, and a decision made with `pick_set=` resolves the
model's pick exactly when the set is the pick alone, the trace recording the set.
(tests/evaluation/test_conformal_bundled.py checks the coverage over 240 rows, recorded.)"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from openprogram import DecisionError, decision
from openprogram.runtimes import LlamaCppRuntime

DESK = {
    "refund": ("REFUND", "give the customer their money back"),
    "track_parcel": ("TRACK", "tell the customer where their parcel is"),
    "reset_password": ("RESET", "help the customer get back into their account"),
    "change_address": ("ADDRESS", "change where an order is delivered"),
    "cancel_order": ("CANCEL", "stop an order before it ships"),
    "report_damage": ("DAMAGE", "record that an item arrived broken"),
    "update_payment": ("PAYMENT", "change the card the customer pays with"),
    "talk_to_human": ("HUMAN", "pass the customer to a person"),
}
PROMPT = "A customer writes: {text}\nPick the one next step that helps this customer."
ROWS = Path(__file__).resolve().parents[3] / "notebooks" / "data" / "support_desk.csv"


def test_a_pick_set_on_the_real_model():
    with open(ROWS, newline="") as f:
        table = list(csv.DictReader(f))
    rows = [r for k in DESK for r in [t for t in table if t["label"] == k][:4]]
    rt = LlamaCppRuntime(seed=0, temperature=0.0)
    result = decision.evaluate(PROMPT, DESK, rows, runtime=rt, expected="label",
                               mode="json_schema", confidence=True, max_retries=0,
                               concurrency=1, progress=False)
    assert result.summary["failed"] == 0
    calibration, rest = list(range(0, 32, 2)), list(range(1, 32, 2))
    policy = result.conformal(alpha=0.2, rows=calibration)
    traces = result.traces
    scores = sorted(1 - traces[i].confidence.probs[rows[i]["label"]] for i in calibration)
    rank = math.ceil(17 * 0.8)   # 14
    assert policy.rank == rank and policy.qhat == scores[rank - 1]
    assert (policy.mode, policy.source, policy.n) == ("json_schema", "exact", 16)
    sets = [tuple(n for n, p in sorted(traces[i].confidence.probs.items(), key=lambda kv: -kv[1])
                  if 1 - p <= policy.qhat) for i in rest]
    figures = result.pick_set_figures(policy)
    assert figures["rows"] == 16
    assert figures["coverage"] == sum(rows[i]["label"] in s for i, s in zip(rest, sets)) / 16
    assert figures["mean_set_size"] == sum(map(len, sets)) / 16
    # decisions with the policy: the pick resolves exactly when the set is the pick alone
    for i in rest[:3]:
        prompt = PROMPT.format(text=rows[i]["text"])
        try:
            decision.make(prompt, DESK, runtime=rt, mode="json_schema", pick_set=policy)
            err = None
        except DecisionError as exc:
            err = exc
        trace = decision.last_trace()
        conf = trace.confidence
        assert conf.pick_set == tuple(n for n, p in sorted(conf.probs.items(),
                                                           key=lambda kv: -kv[1])
                                      if 1 - p <= policy.qhat)
        if conf.pick_set == (conf.pick,):
            assert err is None and trace.chosen == conf.pick
        else:
            assert err is not None and err.kind == "low_confidence"
            assert err.pick_set == conf.pick_set
    with pytest.raises(Exception, match="mode 'json_schema', and this one is asked in mode "
                                        "'menu'"):
        decision.make(PROMPT.format(text="hi"), DESK, runtime=rt, pick_set=policy)
