"""What the exact distribution costs on the local model (issue 35): a json_schema decision over
4, 10 and 20 options with and without the probability of every option's name.

Runs SmolLM2-135M-Instruct in process (LlamaCppRuntime, the bundled file) on a support desk's
options (value options: a name and a description; some names share their first tokens, as
`refund` / `refund_partial` / `refund_status` do, which is where the distribution has to read
more tokens) and prints, from one run on this machine:
- the machine's load average (other work on the same cores slows the model a lot);
- per menu size, over the same rows, for names that share their first tokens and for names
  that differ in their first letter: seconds per decision without the distribution and with it
  (median; the two are interleaved row by row, so a change of load hits both, and no
  request follows itself, so neither finds its prompt in the model's memory), the ratio, the
  branches of the names' tree the distribution read beyond the reply, the model evaluations
  they took and their tokens (a branch reads only its own tokens, on top of its parent's
  memory), and the probability the distribution gave the pick; with `--from-the-reply`, also
  the time with every branch's whole path read again from the reply, as before branches kept
  their memory (`TREE_SEQUENCES=0`, interleaved with the rest);
- the targets: with the distribution <= 1.5x the decision's own time at 20 options, <= 1.2x at 4.

The decisions go through the decision loop (`decision.make(..., mode="json_schema")`) on a
runtime that adds `confidence=[the option names]` to its `complete()` call, as the loop does
when a decision asks for confidence (`confidence=True` on LlamaCppRuntime). Every row runs once
untimed first, so both sides read the shared system message from the model's memory.

Last, the core's own cost of reading log-probabilities from a canned reply (target <= 50 us):
`core_logprobs_cost()`, what `OpenAIRuntime` does with a reply that carries them.

    .venv/bin/python benchmarks/bench_confidence.py [--rows 8] [--sizes 4 10 20] [--threads N]
        [--from-the-reply]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from openprogram import DecisionError, decision
from openprogram.runtimes import LlamaCppRuntime
from openprogram.runtimes.llamacpp import confidence

#: A support desk's next steps, most common first; a menu of n options is the first n.
DESK = {
    "refund": "give the customer all of their money back",
    "track_parcel": "tell the customer where their parcel is",
    "cancel_order": "cancel an order that has not shipped yet",
    "escalate": "hand the conversation to a person on the team",
    "refund_partial": "give the customer part of their money back",
    "change_address": "change the delivery address of an order",
    "reset_password": "send the customer a link to set a new password",
    "invoice_copy": "send the customer a copy of an invoice",
    "refund_status": "tell the customer where their refund stands",
    "exchange_item": "send a replacement item in another size or colour",
    "report_damage": "record that an item arrived damaged, with photos",
    "close_account": "close the customer's account and delete their data",
    "update_payment": "change the card or bank account the customer pays with",
    "apply_coupon": "apply a discount code to an order",
    "delivery_slot": "book a delivery time window",
    "gift_wrap": "add gift wrapping to an order",
    "loyalty_points": "tell the customer their loyalty points balance",
    "product_question": "answer a question about a product",
    "order_status": "tell the customer the status of an order",
    "done": "the customer needs nothing more",
}
#: The same desk with names that differ in their first letter, so no token the model may write
#: first leaves two names possible: the distribution needs no model evaluation of its own.
DISTINCT = {
    "refund": DESK["refund"], "track_parcel": DESK["track_parcel"],
    "cancel_order": DESK["cancel_order"], "escalate": DESK["escalate"],
    "partial_refund": DESK["refund_partial"], "move_address": DESK["change_address"],
    "new_password": DESK["reset_password"], "invoice_copy": DESK["invoice_copy"],
    "where_is_refund": DESK["refund_status"], "xchange_item": DESK["exchange_item"],
    "broken_item": DESK["report_damage"], "leave_shop": DESK["close_account"],
    "update_payment": DESK["update_payment"], "apply_coupon": DESK["apply_coupon"],
    "slot_booking": DESK["delivery_slot"], "gift_wrap": DESK["gift_wrap"],
    "keep_points": DESK["loyalty_points"], "question": DESK["product_question"],
    "order_status": DESK["order_status"], "done": DESK["done"],
}
REQUESTS = [
    "Customer: the blender arrived broken, I want my money back.",
    "Customer: where is my parcel? It was due on Monday.",
    "Customer: please cancel order 5531, I ordered it by mistake.",
    "Customer: I moved last week, send order 7712 to my new flat.",
    "Customer: I forgot my password and cannot log in.",
    "Customer: one of the two lamps was scratched, can I get some money back?",
    "Customer: has my refund been processed yet?",
    "Customer: thanks, that is everything!",
]


class Asking(LlamaCppRuntime):
    """The runtime as the loop calls it when a decision asks for confidence."""

    names: list[str] | None = None
    last = None

    def complete(self, messages, **kw):
        if self.names is not None:
            kw["confidence"] = list(self.names)
        self.last = super().complete(messages, **kw)
        return self.last


def decide(rt: Asking, request: str, options: dict) -> float:
    t0 = time.perf_counter()
    try:
        decision.make(f"{request}\nPick the one next step for this customer.", options,
                      runtime=rt, mode="json_schema", max_retries=0)
    except DecisionError:
        pass  # a wrong or failed pick costs the same
    return time.perf_counter() - t0


def bench_size(desk: dict, n: int, rows: int, threads: int | None,
               from_reply: bool = False, tolerances: list[float] | None = None) -> dict:
    """Per tolerance (`confidence_tolerance=`, the runtime's default first): the medians of
    the decisions with the distribution, interleaved row by row with those without it."""
    options = {name: (name.upper(), about) for name, about in list(desk.items())[:n]}
    settings = {"temperature": 0.0, "seed": 0}
    if threads:
        settings["n_threads"] = threads
    tolerances = tolerances or [confidence.CONFIDENCE_TOLERANCE]
    # runtimes that differ in their tolerance only share one loaded model
    rts = [Asking(**settings, confidence_tolerance=t) for t in tolerances]
    rt = rts[0]
    plain, alone = [], []
    sure: dict[float, list] = {t: [] for t in tolerances}
    evals: dict[float, list] = {t: [] for t in tolerances}
    batches: dict[float, list] = {t: [] for t in tolerances}
    tokens: dict[float, list] = {t: [] for t in tolerances}
    p_pick: dict[float, list] = {t: [] for t in tolerances}
    left: dict[float, list] = {t: [] for t in tolerances}
    requests = [REQUESTS[i % len(REQUESTS)] for i in range(max(rows, 3))]
    rt.names = list(options)
    decide(rt, requests[0], options)  # the shared system message into the model's memory
    together = confidence.TREE_SEQUENCES
    for i, request in enumerate(requests):
        # never the same request twice in a row: the model's memory would hold its prompt
        rt.names = None
        plain.append(decide(rt, request, options))
        other = requests[(i + len(requests) // 2) % len(requests)]
        if from_reply:  # every branch read again from the reply, as before reuse
            rt.names = list(options)
            confidence.TREE_SEQUENCES = 0
            try:
                alone.append(decide(rt, other, options))
            finally:
                confidence.TREE_SEQUENCES = together
            rt.names = None
            decide(rt, request, options)  # so the next one does not find `other` in memory
        for k, (t, asking) in enumerate(zip(tolerances, rts)):
            if k:  # so this one does not find `other` in memory either
                rt.names = None
                decide(rt, request, options)
            asking.names = list(options)
            sure[t].append(decide(asking, other, options))
            asking.names = None
            work = asking.last.raw["response"]["confidence_work"]
            evals[t].append(work["evaluations"])
            batches[t].append(work["batches"])
            tokens[t].append(work["tokens"])
            left[t].append(work["unfollowed"])
            conf = asking.last.confidence
            pick = max(conf["probs"], key=conf["probs"].get)
            p_pick[t].append(conf["probs"][pick])
            assert abs(sum(conf["probs"].values()) + conf["other"] - 1) < 1e-6
    return {"n": n, "plain": statistics.median(plain),
            "alone": statistics.median(alone) if alone else None,
            "by_tolerance": {t: {"sure": statistics.median(sure[t]),
                                 "evals": statistics.mean(evals[t]),
                                 "batches": statistics.mean(batches[t]),
                                 "tokens": statistics.mean(tokens[t]),
                                 "max_evals": max(evals[t]),
                                 "unfollowed": max(left[t]),
                                 "p_pick": statistics.median(p_pick[t])} for t in tolerances}}


def core_logprobs_cost(repeat: int = 2000) -> str:
    """The core's cost of reading log-probabilities per decision against a canned reply
    (target <= 50 us): what `OpenAIRuntime` does with a reply that carries them —
    `logprobs.tokens_of` over the reply's tokens (as the server's JSON sends them) and
    `logprobs.distribution` over the 20 options of the desk, 20 alternatives at every token
    (OpenAI's most), the pick `refund_partial` written in three tokens."""
    from openprogram.runtimes.providers.logprobs import distribution, tokens_of
    names = list(DESK)
    pieces = ['{"', "decision", '":{"', "call", '":"', "ref", "und", "_partial", '","',
              "args", '":{', "}}}"]
    starts = sorted({n[:k] for n in names for k in (1, 2, 3)})
    content = []
    for piece in pieces:
        alts = starts[:20] if piece == "ref" else [f"x{j}" for j in range(20)]
        content.append({"token": piece, "logprob": -0.05, "bytes": list(piece.encode()),
                        "top_logprobs": [{"token": a, "logprob": -3.0 - j / 10,
                                          "bytes": list(a.encode())}
                                         for j, a in enumerate(alts)]})
    text = "".join(pieces)
    conf = distribution(text, tokens_of(content), names)
    # the alternatives at "ref" begin other names: read into their probabilities
    assert max(conf["probs"], key=conf["probs"].get) == "refund_partial", conf
    assert sum(p > 0 for p in conf["probs"].values()) > 5, conf
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        distribution(text, tokens_of(content), names)
        times.append(time.perf_counter() - t0)
    med, low = statistics.median(times) * 1e6, min(times) * 1e6
    return (f"{med:.1f} us median ({low:.1f} min) for 20 options x 20 alternatives, "
            f"target <= 50 us: {'ok' if med <= 50 else 'MISS'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 10, 20])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--tolerance", type=float, nargs="*", default=[],
                    help="also time the distribution at these confidence_tolerance values "
                         "(the runtime's default is always timed, first), interleaved")
    ap.add_argument("--from-the-reply", dest="from_reply", action="store_true",
                    help="also time the distribution with every branch's path read again "
                         "from the reply (TREE_SEQUENCES=0), interleaved with the rest")
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}, rows {args.rows}, threads "
          f"{args.threads or 'from the machine'}")
    targets = {4: 1.2, 20: 1.5}
    tolerances = [confidence.CONFIDENCE_TOLERANCE] + [
        t for t in args.tolerance if t != confidence.CONFIDENCE_TOLERANCE]
    for title, desk in (("names sharing first tokens (refund, refund_partial, refund_status, "
                         "reset_password, report_damage, ...)", DESK),
                        ("names differing in their first letter", DISTINCT)):
        print(f"\n{title}")
        print(f"{'options':>7}  {'tolerance':>9}  {'decision s':>10}  {'with dist s':>11}  "
              f"{'ratio':>5}  {'target':>9}  {'branches':>8}  {'batches':>7}  {'tokens':>6}  "
              f"{'max br':>6}  {'max left':>8}  {'p(pick)':>7}" +
              (f"  {'from reply s':>15}  {'ratio':>5}" if args.from_reply else ""))
        for n in args.sizes:
            r = bench_size(desk, n, args.rows, args.threads, args.from_reply, tolerances)
            for k, (t, b) in enumerate(r["by_tolerance"].items()):
                ratio = b["sure"] / r["plain"]
                target = targets.get(n) if k == 0 else None
                mark = "" if target is None else \
                    f"<={target}" + (" ok" if ratio <= target else " MISS")
                print(f"{n:>7}  {t:>9.0e}  {r['plain']:>10.3f}  {b['sure']:>11.3f}  "
                      f"{ratio:>5.2f}  {mark:>9}  {b['evals']:>8.1f}  {b['batches']:>7.1f}  "
                      f"{b['tokens']:>6.1f}  {b['max_evals']:>6}  {b['unfollowed']:>8.1e}  "
                      f"{b['p_pick']:>7.3f}" +
                      (f"  {r['alone']:>15.3f}  {r['alone'] / r['plain']:>5.2f}"
                       if r["alone"] is not None and k == 0 else ""))
    print(f"core: reading logprobs per decision: {core_logprobs_cost()}")
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
