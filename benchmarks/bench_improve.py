"""`decision.improve` on the bundled model: does a measured search over examples and descriptions
make a support desk's menu better on rows it never saw — and what did issue 53's search (every
call counted, candidates with a positive held-out gain tried together, the most confused
options first) change, against the search as it was (benchmarks/_old_improve.py)?

Runs SmolLM2-135M-Instruct in process (LlamaCppRuntime, the bundled file) in json_schema mode
with the exact distribution over the option names (`confidence=True`), on 64 labelled customer
requests over 8 options (written for this benchmark, 8 per option, below). The rows are split
in half with a seed; edits are proposed from the training half (examples: training requests;
descriptions: the built-in `keywords` proposer, or the model itself with `--proposer model`),
scored on the training half by the mean probability of the expected option, and kept only when
a paired bootstrap of the held-out half puts the gain above zero at 95 %. Both searches run in
this one run, one after the other with the same arguments, each on the model itself (no cache
between them: the old search did not count cached calls against its budget). Prints, for each:
held-out accuracy and mean_p_expected before and after with 95 % intervals, the edits tried
with their held-out gains, the edits kept, the model calls spent and the wall time; then the
two side by side.

    .venv/bin/python benchmarks/bench_improve.py [--budget 400] [--proposer keywords|model]
        [--rename] [--only new|old]
"""
from __future__ import annotations

import argparse
import os
import time

from openprogram import decision
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

REQUESTS = {
    "refund": ["I want my money back for the shoes", "Please return the charge for order 51",
               "The jacket was not what I ordered, refund me", "Can I get reimbursed for this?",
               "I was charged but never got the item, give it back",
               "Send the payment back to my bank", "I returned the lamp, where is my refund?",
               "Reverse the purchase and credit me"],
    "track_parcel": ["Where is my package?", "My order hasn't arrived yet",
                     "Has the courier picked up my box?", "What is the tracking status of 8812?",
                     "When will the delivery come?", "The parcel is late, where is it now?",
                     "Is my shipment still in the warehouse?", "Show me where my order is"],
    "reset_password": ["I forgot my password", "I can't log in to my account",
                       "My login says the password is wrong", "Locked out of my profile",
                       "How do I reset my credentials?", "The sign-in link does not work",
                       "I need a new password please", "Account access is blocked for me"],
    "change_address": ["I moved, please ship to my new flat",
                       "Deliver order 40 to my office instead",
                       "Update the street on my shipping details",
                       "Wrong house number on my order, fix it", "Send it to my parents' home",
                       "Change the delivery destination", "My postcode changed",
                       "Ship to a different city please"],
    "cancel_order": ["Cancel my order", "I don't want the blender anymore, stop it",
                     "Please call off purchase 77 before it ships", "Abort the order I just made",
                     "I ordered by mistake, undo it", "Stop the shipment of my bike",
                     "Don't send the order, I changed my mind", "Withdraw my order please"],
    "report_damage": ["The vase arrived cracked", "My screen came broken in the box",
                      "The box was crushed and the toy is damaged",
                      "Item arrived with a dent", "The glass was shattered on delivery",
                      "The chair has a snapped leg", "Water damaged the books in shipping",
                      "My phone case is torn"],
    "update_payment": ["My card expired, use a new one", "Change my credit card",
                       "Switch billing to PayPal", "Update the card on file",
                       "I want to pay with a different bank account",
                       "Replace my debit card details", "The payment method needs updating",
                       "Use my new Visa for future orders"],
    "talk_to_human": ["Let me speak to an agent", "I want a real person",
                      "Connect me to customer service staff", "Can a human help me?",
                      "Transfer me to an operator", "This bot is useless, get me someone",
                      "I need to talk to a representative", "Put me through to support staff"],
}

PROMPT = "A customer writes: {text}\nPick the one next step that helps this customer."


def search(improve, rt, rows, args) -> tuple:
    start = time.perf_counter()
    imp = improve(PROMPT, DESK, rows, expected="label", runtime=rt,
                  proposer="keywords" if args.proposer == "keywords" else rt,
                  budget=args.budget, seed=args.seed, mode="json_schema",
                  confidence=True, max_retries=0, concurrency=1, rename=args.rename)
    return imp, time.perf_counter() - start


def show(label: str, imp, wall: float) -> None:
    r = imp.report
    print(f"\n== {label} ==\nsplit: {r['split']['train']} train / {r['split']['held_out']} held "
          f"out (seed {r['split']['seed']}); scored on {r['measured_on']}")
    for when in ("before", "after"):
        f = r[f"held_out_{when}"]
        a_lo, a_hi = f["accuracy_ci"]
        line = f"held-out {when:6}: accuracy {f['accuracy']:.3f} [{a_lo:.3f}, {a_hi:.3f}]"
        if "mean_p_expected" in f:
            p_lo, p_hi = f["mean_p_expected_ci"]
            line += f"; mean_p_expected {f['mean_p_expected']:.3f} [{p_lo:.3f}, {p_hi:.3f}]"
        print(line)
    untried = r.get("untried")
    print(f"edits tried {len(imp.edits)}"
          + (f" of {r['candidates_total']} ({untried} left untried)" if untried is not None
             else "")
          + f", kept {len(imp.kept)}; combinations tried "
          f"{len(getattr(imp, 'combinations', []))}; stopped: "
          f"{r['stopped'] or 'all candidates tried'}")
    for e in imp.edits:
        gain = "-" if e.get("held_gain") is None else \
            f"{e['held_gain']:+.3f} [{e['held_gain_lo']:+.3f}, {e['held_gain_hi']:+.3f}]"
        tb, ta = e.get("train_before"), e.get("train_after")
        train = "-" if tb is None else f"{tb:.3f} -> {ta:.3f}"
        name = e["after"] or "" if e["kind"] == "name" else ""
        print(f"  {e['option']:15} {e['kind']:11} {name:22} train {train:15} held-out gain "
              f"{gain:32} {'KEPT' if e['kept'] else 'rejected'}: {e['why']}")
    for c in getattr(imp, "combinations", []):
        members = ", ".join(f"{imp.edits[k]['option']} {imp.edits[k]['kind']}"
                            for k in c["members"])
        print(f"  together: {members}: held-out gain {c['held_gain']:+.3f} "
              f"[{c['held_gain_lo']:+.3f}, {c['held_gain_hi']:+.3f}] "
              f"{'KEPT' if c['kept'] else 'rejected'}")
    print(f"model calls {r['calls']} (proposer {r['proposer_calls']}); wall time {wall:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--proposer", choices=["keywords", "model"], default="keywords")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rename", action="store_true",
                    help="also propose the names the model sees (improve(rename=True))")
    ap.add_argument("--only", choices=["new", "old"], default=None,
                    help="run one of the two searches")
    args = ap.parse_args()
    import warnings

    import _old_improve
    rows = [{"text": t, "label": k} for k, ts in REQUESTS.items() for t in ts]
    rt = LlamaCppRuntime(seed=0)
    print(f"load average {os.getloadavg()[0]:.2f}; {len(rows)} rows over {len(DESK)} options; "
          f"budget {args.budget} model calls; proposer {args.proposer}"
          f"{'; names proposed too' if args.rename else ''}")
    done = {}
    for label, improve in (("before issue 53 (benchmarks/_old_improve.py)",
                            _old_improve.improve), ("after (decision.improve)",
                                                    decision.improve)):
        if args.only and (args.only == "new") != improve.__module__.startswith("openprogram"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the budget's warning is in the report
            imp, wall = search(improve, rt, rows, args)
        show(label, imp, wall)
        done[label] = imp
    if len(done) == 2:
        (old_label, old), (new_label, new) = done.items()
        key = old.report["measured_on"]
        print("\n== side by side ==")
        print(f"{'':28}{'before':>12}{'after':>12}")
        for name, get in (
                ("held-out accuracy after", lambda i: i.report["held_out_after"]["accuracy"]),
                (f"held-out {key} after", lambda i: i.report["held_out_after"][key]),
                ("edits kept", lambda i: len(i.kept)),
                ("edits tried", lambda i: len(i.edits)),
                ("model calls", lambda i: i.report["calls"])):
            print(f"{name:28}{get(old):>12.3f}{get(new):>12.3f}" if isinstance(get(old), float)
                  else f"{name:28}{get(old):>12}{get(new):>12}")
        print(f"(held-out accuracy before: {old.report['held_out_before']['accuracy']:.3f}, "
              f"{key} before: {old.report['held_out_before'][key]:.3f}, the same rows for both)")
        print("\n" + new.diff())


if __name__ == "__main__":
    main()
