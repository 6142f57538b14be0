# %% [markdown]
# # Prototyping an option set
#
# Designing an option set means choosing what the model may pick, what it must write for each pick,
# and what it must never write. This notebook builds one step by step and watches the menu and the
# picks change. Everything runs on `ScriptedRuntime`.

# %%
# %load_ext openprogram
from typing import Literal

from openprogram import Agent, decision
from openprogram.runtimes import ScriptedRuntime


# %% [markdown]
# ## Parameters the model fills, and parameters it never sees
#
# A function option's parameters come from its signature: type annotations (a `Literal[...]` is an
# enum), defaults, and `input_meta` for descriptions, allowed values and **hidden** parameters. A
# hidden parameter is filled from `context=`, never from the model; a parameter named `runtime` gets
# the Runtime. Neither appears in the menu.

# %%
def refund(order_id: str, amount: float, reason: Literal["damaged", "late", "other"] = "other",
           user_id: str = "", runtime=None) -> str:
    """Refund part or all of an order."""
    return f"refunded {amount:.2f} on {order_id} for {user_id} ({reason})"

refund.input_meta = {
    "order_id": {"description": "the order to refund, e.g. A17"},
    "amount": {"description": "how much to refund, in euros"},
    "user_id": {"hidden": True},
}

options = {
    "refund": refund,
    "reply": ("Answer the customer in writing.", {
        "text": "the message to send",
        "tone": {"type": str, "options": ["formal", "friendly"]},
    }),
    "plan": ("Break the request into steps.", {
        "steps": [{"action": str, "target": str}],
        "rationale": str,
    }),
    "done": ("NOTHING_TO_DO", "pick when the request needs no action"),
}

# %%
# %decision_menu options

# %% [markdown]
# The model below tries to set `user_id` itself. The value is **dropped** (and recorded as dropped);
# the hidden parameter comes from the context.

# %%
sneaky = ScriptedRuntime(['{"call": "refund", "args": {"order_id": "A17", "amount": 12, '
                          '"user_id": "admin"}}'])
ctx = {"user_id": "u-123"}

# %%
# %%decide options --runtime sneaky --context ctx --as refunded
The parcel A17 arrived broken. Pick the next step.

# %%
attempt = decision.last_trace().attempts[-1]
print("kept:    ", attempt.args)
print("dropped: ", attempt.dropped)
print("injected:", attempt.injected)

# %% [markdown]
# ## Nested schemas
#
# A schema option's fields nest: `[{"action": str, "target": str}]` is a list whose every element is an
# object with those two fields. Validation recurses, and an error names the exact path.

# %%
planner = ScriptedRuntime([
    '{"call": "plan", "args": {"steps": [{"action": "check"}], "rationale": "first look"}}',
    '{"call": "plan", "args": {"steps": [{"action": "check", "target": "carrier"}, '
    '{"action": "refund", "target": "A17"}], "rationale": "verify, then pay"}}',
])
plan = decision.make("The parcel A17 arrived broken. Pick the next step.", options, runtime=planner,
                     context=ctx)
first = decision.last_trace().attempts[0]
print(first.error_kind, "at", first.error_path)
plan


# %% [markdown]
# ## An Agent: the same methods as options and as tools
#
# In an `Agent` subclass, `method_options` marks methods as tools and gives their parameters metadata.
# Each method call binds the Agent's Runtime, so `decision.make` inside it needs no `runtime=`.

# %%
class Support(Agent):
    method_options = {
        "lookup": {"tool": True, "input": {"order_id": {"description": "the order id"}}},
    }

    def lookup(self, order_id: str) -> dict:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered"}

    def route(self, message: str):
        return decision.make(f"Pick the next step for: {message}", {
            "lookup": self.lookup,
            "done": "NOTHING_TO_DO",
        })

support = Support(runtime=ScriptedRuntime(['{"call": "lookup", "args": {"order_id": "B2"}}']))
route = support.route          # a bound method copied out keeps its Agent and Runtime
route("Where is B2?")

# %% [markdown]
# ## Descriptions steer the pick
#
# A menu is a prompt. Below, a toy model picks the option whose description shares the most words with
# the message (a stand-in for a real model's reading). Changing one description changes the pick,
# with no change to the code that uses the result.

# %%
import re

def word_overlap_model(prompt: str) -> str:
    """Pick the option whose description shares the most words with the message."""
    message = set(re.findall(r"[a-z]+", prompt.split("Message:")[1].split("Options")[0].lower()))
    best, best_score = None, -1
    for block in prompt.split("\n- ")[1:]:
        name = block.split("(")[0]
        score = len(message & set(re.findall(r"[a-z]+", block.lower())))
        if score > best_score:
            best, best_score = name, score
    return '{"call": "%s"}' % best

def menu(escalate_description: str) -> dict:
    return {
        "answer": ("ANSWERED", "answer a question about delivery times"),
        "escalate": ("ESCALATED", escalate_description),
    }

message = "My parcel arrived broken and I want my money back"
model = ScriptedRuntime(rule=word_overlap_model)
for description in ["hand the conversation to a person",
                    "hand a broken parcel or a money back request to a person"]:
    pick = decision.make(f"Message: {message}\nPick one option.", menu(description), runtime=model)
    print(f"{description!r:62} -> {pick}")

# %% [markdown]
# ## Many inputs at once: `decision.evaluate`
#
# One decision shows how the mechanism works; an option set is designed well only once it has run over
# many inputs. `decision.evaluate` fills the prompt template from each row of a DataFrame, runs the
# decisions concurrently (with a progress bar), and returns one row per input plus summaries: the pick
# distribution, the retry and failure rates, and — with `expected=` — accuracy and a confusion table.
# The toy model answers after a random 10–30 ms, like a small real one.

# %%
import pandas as pd

messages = pd.DataFrame({
    "message": [
        "When will my parcel arrive?",
        "How long does delivery take to Berlin?",
        "My parcel arrived broken, I want my money back",
        "The box was broken and the vase inside too",
        "I want my money back, the order never came",
        "Is delivery faster on weekdays?",
        "Please hand me to a person, this is urgent",
        "What are your delivery times for Sundays?",
    ],
    "label": ["answer", "answer", "escalate", "escalate", "escalate", "answer", "escalate",
              "answer"],
})
slow_model = ScriptedRuntime(rule=word_overlap_model, latency=(0.01, 0.03), seed=7)
template = "Message: {message}\nPick one option."
v1 = menu("hand the conversation to a person")
v2 = menu("hand a broken parcel or a money back request to a person")

# %%
run = decision.evaluate(template, v1, messages, runtime=slow_model, concurrency=4, expected="label")
run.to_frame()[["message", "chosen", "expected", "correct", "attempts", "status"]]

# %%
# mean_duration_s and wall_s are in the summary too; they change from run to run, so they are
# left out here to keep this notebook's outputs comparable.
run.summary.drop(["mean_duration_s", "wall_s"])

# %%
run.confusion

# %%
_ = run.plot()

# %% [markdown]
# `compare` runs two or more option sets (or runtimes) over the same inputs and lines their picks up
# side by side; `.differences` keeps the inputs where they disagree.

# %%
from openprogram import compare

versions = compare(template, {"v1": v1, "v2": v2}, messages, runtime=slow_model, concurrency=4,
                   expected="label")
versions.differences

# %%
versions.summary.drop(columns=["mean_duration_s", "wall_s"])

# %% [markdown]
# Any row opens in the decision panel:

# %%
run.panel(2)

# %% [markdown]
# ## Edit the option set, re-check offline
#
# Each turn of the design loop need not cost a new run of model calls. `decision.revalidate` takes
# what a run recorded and checks every recorded reply again against the **edited** option set (and
# rule), in the way of asking it was recorded with: no function runs, no model is called. Below,
# `escalate` is renamed `handoff` and the refund amount is made an integer: the table says, per
# input, what the pick was before and after, and the summary counts what got better and worse.

# %%
recorded_model = ScriptedRuntime([
    '{"call": "escalate"}', '{"call": "answer"}',
    'Refund it: {"call": "refund", "args": {"order_id": "A17", "amount": 12.5}}',
])
small = {"answer": v1["answer"], "escalate": v1["escalate"], "refund": refund}
recorded = decision.evaluate("Message: {message}\nPick one option.", small,
                             messages.iloc[[2, 0, 4]], runtime=recorded_model, concurrency=1,
                             progress=False, context={"user_id": "u-1"})

def refund_whole_euros(order_id: str, amount: int, user_id: str = "") -> str:
    """Refund part or all of an order, in whole euros."""
    return f"refunded {amount} on {order_id}"
refund_whole_euros.input_meta = {"user_id": {"hidden": True}}

edited = {"answer": v1["answer"], "handoff": v1["escalate"], "refund": refund_whole_euros}
check = decision.revalidate(recorded, edited)
print(check)
check.to_frame()[["input", "before", "after", "changed", "error_path"]]

# %% [markdown]
# The re-checked decision of the refund shows where in the reply the value that broke it sits
# (highlighted), beside what was sent:

# %%
check.after[2]

# %% [markdown]
# ## Three ways to ask, side by side
#
# The same option set can be asked for as the text menu (`mode="menu"`), as native tools (one per
# option, `mode="tools"`) or as the provider's structured output (one JSON schema whose
# alternatives are the picks, `mode="json_schema"`). `compare` with one `Variant` per way of
# asking runs them over the same inputs; the trace records what each sent. This run replays a
# cassette recorded through the real OpenAI SDK against a local server that speaks its protocol
# (`cassettes/record_modes.py`), so it needs no key.

# %%
import json

from openprogram import Variant
from openprogram.runtimes import ReplayRuntime

support = {"refund": ("REFUND", "give the customer their money back"),
           "answer": ("ANSWER", "answer a question in writing"),
           "escalate": ("ESCALATE", "hand the conversation to a person")}
tickets = pd.DataFrame({
    "message": ["The vase arrived broken, I want my money back", "When does my parcel ship?",
                "This is the third time, get me a manager", "Can I pay by invoice?"],
    "label": ["refund", "answer", "escalate", "answer"]})
ways = compare("Customer message: {message}\nPick one way to handle it.",
               {"menu": Variant(mode="menu"), "tools": Variant(mode="tools"),
                "json_schema": Variant(mode="json_schema")}, tickets, options=support,
               runtime=ReplayRuntime("cassettes/modes.json"), expected="label", concurrency=1,
               progress=False)
ways.to_frame()

# %%
ways.summary[["accuracy", "retry_rate", "failure_rate", "tokens_in", "tokens_out"]]

# %%
_ = ways.plot()

# %% [markdown]
# What the tools variant sent in place of the menu (the same option set, as native tools):

# %%
print(json.dumps(ways.results["tools"].traces[0].attempts[0].sent["tools"], indent=1)[:600])

# %% [markdown]
# ## Never pay twice: the cache and resumable runs
#
# While prototyping, wrap the model once in `CachedRuntime(model, path)`: a request the file
# already answered (the same request to the same model with the same sampling settings) is
# answered from it, streamed into the panel and marked `cached`; only new requests reach the model,
# and their replies are appended. Re-running a cell, or the whole notebook, costs nothing. Here a
# scripted model stands in for a paid one, and counts its calls.

# %%
import tempfile
from pathlib import Path

from openprogram.runtimes import CachedRuntime

def route_by_message(text):
    message = text.split("\n")[0]
    pick = "answer" if "?" in message else "refund" if "money" in message else "escalate"
    return json.dumps({"call": pick})

paid = ScriptedRuntime(rule=route_by_message)
workdir = Path(tempfile.mkdtemp())
handle = "Customer message: {message}\nPick one way to handle it."
cache = workdir / "cache.jsonl"
first = decision.evaluate(handle, support, tickets, runtime=CachedRuntime(paid, cache),
                          progress=False)
calls_after_first = len(paid.calls)
again = decision.evaluate(handle, support, tickets, runtime=CachedRuntime(paid, cache),
                          progress=False)
print(f"model calls: {calls_after_first} for the first run, "
      f"{len(paid.calls) - calls_after_first} for the second")
again.to_frame()[["message", "chosen", "cached"]]

# %% [markdown]
# A long evaluation should survive a crash. With `journal=`, every finished row is appended to the
# file as it finishes; calling the same evaluation again resumes it (journaled rows are not run
# again), and `EvaluationResult.from_journal` reads a run back for analysis without any model.
# Here the first call stops after two rows, as a crashed run would:

# %%
from openprogram.evaluation.evaluate import EvaluationResult

journal = workdir / "triage.jsonl"
decision.evaluate(handle, support, tickets.iloc[:2], runtime=paid, journal=journal, progress=False)
before = len(paid.calls)
resumed = decision.evaluate(handle, support, tickets, runtime=paid, journal=journal,
                            expected="label", progress=False)
print(f"the resumed run asked the model {len(paid.calls) - before} times for {len(tickets)} rows")
EvaluationResult.from_journal(journal).to_frame()[["message", "chosen", "status", "attempts"]]

# %% [markdown]
# ## How sure was the model: the probability of every option
#
# A pick made with 99 % and one made with 34 % against a runner-up at 33 % look the same in a
# trace, in `to_frame()` and in accuracy. `confidence=` puts on each attempt the probability the
# model gave **every** option (`trace.confidence`, a `Confidence`: `probs`, `other` for replies
# that name no option, `p_pick`, `runner_up`, `margin`, `entropy`), and the panel draws it as a
# bar per option. The bundled model gives the exact distribution (`confidence=True` on
# `LlamaCppRuntime`: the probability of each option's whole name, read from its logits where the
# reply writes the name); OpenAI-compatible servers give it from token log-probabilities; any
# runtime can draw samples: `decision.Samples(n)` asks the same request n times and counts the
# picks.
#
# This section runs the bundled SmolLM2-135M (see `06-local-model`) in json_schema mode. Its
# replies depend on the CPU, so the notebook replays `cassettes/02-prototyping.json`, recorded
# from the model by `./dev notebooks --record-02`; with `OPENPROGRAM_LIVE=1` (`./dev local` sets
# it) it runs the model itself.

# %%
import os

from openprogram.runtimes import RecordingRuntime, ReplayRuntime

LOCAL_CASSETTE = "cassettes/02-prototyping.json"

def local_model():
    """SmolLM2-135M-Instruct in process, its greedy reply (temperature 0): a live run repeats
    itself on one machine."""
    from openprogram.runtimes import LlamaCppRuntime
    return LlamaCppRuntime(seed=0, temperature=0.0)

if os.environ.get("OPENPROGRAM_RECORD") == "1":
    local = RecordingRuntime(local_model(), LOCAL_CASSETTE)
elif os.environ.get("OPENPROGRAM_LIVE") == "1":
    local = local_model()
else:
    local = ReplayRuntime(LOCAL_CASSETTE)

decision.make(template.format(message="My parcel arrived broken, I want my money back"), v1,
              runtime=local, mode="json_schema", confidence=True)
decision.last_trace()

# %% [markdown]
# Over a table, with `expected=`, the probability given to the expected option moves with every
# edit of a description, where accuracy on a few rows moves in big steps. `compare` ranks the
# variants by `mean_p_expected` (with a 95 % bootstrap interval) beside their accuracy, and says
# when two intervals overlap: then these rows cannot tell the two apart.

# %%
sure_of = compare(template, {"v1": v1, "v2": v2}, messages, runtime=local, mode="json_schema",
                  expected="label", confidence=True, concurrency=1, progress=False)
sure_of.ranking

# %%
scored = sure_of["v2"]
scored.to_frame()[["message", "chosen", "expected", "p_pick", "runner_up", "margin"]]

# %% [markdown]
# The 135M model picks `answer` for every message, and is sure of it each time: its accuracy
# says it is right half the time, its probabilities say 86–98 %. `calibration()` bins the rows by
# the probability of their pick and compares it with how often the pick was right (`ece` and
# `brier` sum that up); `selective()` shows what a threshold would buy: the accuracy of the most
# confident share of the rows, and the threshold that keeps them. Here no threshold helps:
# a model this small is not calibrated, and these numbers show it before any user does.

# %%
scored.calibration(bins=5)

# %%
scored.selective([0.25, 0.5, 0.75, 1.0])

# %%
_ = scored.plot_selective()

# %% [markdown]
# A threshold chosen from that curve is used where the decision is made: `min_confidence=`
# with `low_confidence=` resolves the named option instead of an unsure pick (the decision is
# still the branch: the caller writes no `if`); without `low_confidence=` an unsure pick fails as
# `low_confidence`, carrying the distribution. A `CascadeRuntime` asks a cheap model first and a
# bigger one only when the cheap one is unsure; `cascade_counts` says how many rows each
# answered and the tokens each spent.

# %%
careful = {**v2, "review": ("QUEUED FOR REVIEW", "queue it for review later")}
unsure_message = template.format(message="How long does delivery take to Berlin?")
decision.make(unsure_message, careful, runtime=local, mode="json_schema", confidence=True,
              min_confidence=0.95, low_confidence="review")

# %% [markdown]
# The model's own pick (its `low_pick`) and the probability it gave it, below the threshold:

# %%
decision.last_trace().confidence

# %%
try:
    decision.make(unsure_message, careful, runtime=local, mode="json_schema", confidence=True,
                  min_confidence=0.95)
except decision.DecisionError as err:
    print(err.kind, err.confidence)

# %% [markdown]
# The cascade's second stage stands in for a bigger model: the word-overlap reader from above,
# writing its pick in the json_schema form.

# %%
from openprogram.runtimes import CascadeRuntime

def bigger_model(prompt: str) -> str:
    """The word-overlap pick over v2's descriptions, as a json_schema reply."""
    said = set(re.findall(r"[a-z]+", prompt.split("Message:")[1].split("Pick")[0].lower()))
    best = max(v2, key=lambda name: len(said & set(re.findall(r"[a-z]+", v2[name][1]))))
    return '{"decision": {"call": "%s", "args": {}}}' % best

bigger = ScriptedRuntime(rule=bigger_model, name="bigger")
cascade = CascadeRuntime([local, bigger], min_confidence=0.95)
cascaded = decision.evaluate(template, v2, messages, runtime=cascade, mode="json_schema",
                             expected="label", concurrency=1, progress=False)
cascaded.cascade_counts

# %% [markdown]
# ## A better option set, measured: `decision.improve`
#
# Editing a description by hand and re-reading accuracy on a few dozen rows mostly measures
# noise. `decision.improve` splits labelled rows (seeded; half held out), proposes edits from
# the training half only (worked examples per option, and descriptions from a proposer: here
# the built-in deterministic `"keywords"`; a runtime writes better ones), and keeps an edit only
# when a paired bootstrap of the held-out half puts its gain above zero at 95 %. The figures it
# reports are held-out figures. It never edits your code: `.options` is the new option set, and
# `.diff()` the text to paste.

# %%
import random

rng = random.Random(3)
topic_words = {"answer": ["delivery", "days", "shipping", "arrive", "week", "long"],
               "escalate": ["broken", "refund", "damaged", "money", "cracked", "complaint"]}
labelled = [{"message": f"Order {i}: {' '.join(rng.sample(topic_words[label], 2))}",
             "label": label} for i, label in enumerate(["answer", "escalate"] * 20)]
better = decision.improve(template, menu("hand the conversation to a person"), labelled,
                          expected="label", runtime=model, proposer="keywords", budget=400)
better

# %%
print(better.diff())

# %%
better.to_frame()[["option", "kind", "train_before", "train_after", "held_gain", "kept", "why"]]

# %% [markdown]
# An example is shown in the menu after its option's `Call:` line; the trace and the
# step-through say where it came from (an example `improve` keeps cites its training row). Your own
# go in a docstring's `Examples:` section, in a tool definition's `input_examples`, or on any
# entry with `openprogram.with_examples(handler, [(request, args), ...])`.

# %%
print(decision.render_options(better.options))

# %% [markdown]
# ## The menu doctor: what the model confuses, and a pick set with a guarantee
#
# A support desk with eight next steps, and a table of 240 labelled customer requests
# (`data/support_desk.csv`, 30 per option). Before paying for a single model call,
# `decision.lint` (or `%decision_lint`) reads the option set as the menu shows it and lists what
# needs no model to find: two descriptions that say nearly the same thing, names that differ
# only in case, an option or a parameter the model is told nothing about, a value allowed under
# two options. Each finding names the option, the rule and the fix. A first draft of the desk:

# %%
def cancel_order(order_id: str, x: str = "") -> str:
    return f"cancelled {order_id}"

draft = {
    "refund": ("REFUND", "give the customer their money back"),
    "Refund": ("REFUND_ORDER", "give the customer their money back for an order"),
    "track_parcel": ("TRACK", "tell the customer where their parcel is"),
    "cancel_order": cancel_order,
}

# %%
# %decision_lint draft

# %% [markdown]
# The desk as it is used below: one option per next step, each described by what it does.

# %%
desk = {
    "refund": ("REFUND", "give the customer their money back"),
    "track_parcel": ("TRACK", "tell the customer where their parcel is"),
    "reset_password": ("RESET", "help the customer get back into their account"),
    "change_address": ("ADDRESS", "change where an order is delivered"),
    "cancel_order": ("CANCEL", "stop an order before it ships"),
    "report_damage": ("DAMAGE", "record that an item arrived broken"),
    "update_payment": ("PAYMENT", "change the card the customer pays with"),
    "talk_to_human": ("HUMAN", "pass the customer to a person"),
}
decision.lint(desk)

# %% [markdown]
# ### Which options the model confuses, and why
#
# An evaluation with `confidence=` keeps the probability the model gave every option on every
# row. `confusability()` sums it up as a map: for the rows expected to pick each option, the
# mean probability every *other* option took (the diagonal, what the right option kept, is left
# out). `confused_pairs(k)` ranks the pairs of options by the mass they take from each other,
# with the rows behind each pair and the words the two options' menu lines share — what in
# their texts overlaps. Here the bundled model runs over 48 of the requests (6 per option), in
# json_schema mode with its exact distribution, through a cache: each request is asked of the
# model once in this section, however often the cells below ask it.

# %%
desk_rows = pd.read_csv("data/support_desk.csv")
desk_sample = desk_rows.groupby("label").head(6).reset_index(drop=True)
customer = "A customer writes: {text}\nPick the one next step that helps this customer."
doctor = CachedRuntime(local, workdir / "desk.jsonl")
checked = decision.evaluate(customer, desk, desk_sample, runtime=doctor, expected="label",
                            mode="json_schema", confidence=True, max_retries=0,
                            concurrency=1, progress=False)
checked.summary[["accuracy", "mean_p_expected", "mean_p_expected_lo", "mean_p_expected_hi"]]

# %%
fig = checked.plot_confusability()
fig.savefig(workdir / "confusability.png")

# %%
checked.confused_pairs(3)

# %% [markdown]
# ### `improve`, most confused pair first, and the same answer again for free
#
# `improve` proposes its edits for the options of the most confused pairs first (and tells a
# model proposer which option each is confused with). The candidates that each gain a little on
# the held-out rows, without passing the paired test alone, are tried together — per option,
# then all — and kept when the combination passes it. `budget` counts every model call the
# search makes, those the cache answers too, so running the same cell again asks the model
# nothing and returns the same result; the report says how many candidates the budget left.
# (A budget of 150 calls tries only the first few candidates here: those for the options of the
# pair the *training* rows show most confused, `report["confused_pairs"]`.)

# %%
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # the budget's warning: the report below says the same
    treated = decision.improve(customer, desk, desk_sample, expected="label", runtime=doctor,
                               proposer="keywords", mode="json_schema", confidence=True,
                               max_retries=0, concurrency=1, max_examples=1, budget=150)
treated

# %%
treated.to_frame()[["option", "kind", "train_before", "train_after", "held_gain", "kept", "why"]]

# %%
{k: treated.report[k] for k in ("confused_pairs", "tried", "untried", "combinations", "calls",
                                 "new_calls", "cached_calls", "caveat", "warning")
 if k in treated.report}

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    again = decision.improve(customer, desk, desk_sample, expected="label", runtime=doctor,
                             proposer="keywords", mode="json_schema", confidence=True,
                             max_retries=0, concurrency=1, max_examples=1, budget=150)
print(f"the second run: {again.report['new_calls']} new model calls of "
      f"{again.report['calls']}; the same option set: "
      f"{decision.render_options(again.options) == decision.render_options(treated.options)}")

# %% [markdown]
# ### A pick set with a guarantee instead of a threshold chosen by eye
#
# `min_confidence=` needs a threshold, and the selective curve above shows what one buys on the
# rows at hand, not what it will do next. Split conformal prediction gives one with a stated
# guarantee: on labelled rows, each row scores `1 − p(expected option)`; the threshold is the
# ⌈(n + 1)(1 − α)⌉-th smallest score, and a decision's *pick set* is every option whose
# probability clears it. On new rows like the calibration rows, the set holds the right option
# at least 1 − α of the time. `result.conformal(alpha=0.1)` fits the policy on the rows it is
# given (here half of the 48; it needs at least ⌈1/α⌉ − 1 of them), and `pick_set_figures`
# measures it on the other half.

# %%
calibration = list(range(0, len(desk_sample), 2))
policy = checked.conformal(alpha=0.1, rows=calibration)
policy

# %%
checked.pick_set_figures(policy)

# %% [markdown]
# The policy is a setting of the decision like any other: `pick_set=policy` (it asks for the
# distribution it was fitted on), and `low_confidence=` names the option to resolve when the set
# is not the pick alone — without it such a decision fails as `low_confidence`, carrying the set.
# The trace records the set. Over the rows it was not fitted on, `evaluate(..., pick_set=)`
# reports the coverage the sets reached and their mean size. These rows were asked once
# already: the cache answers them.

# %%
held_back = desk_sample.drop(index=calibration)
judged = decision.evaluate(customer, desk, held_back, runtime=doctor, expected="label",
                           mode="json_schema", pick_set=policy, low_confidence="talk_to_human",
                           max_retries=0, concurrency=1, progress=False)
print(f"coverage {judged.coverage:.3f} (promised at least {1 - policy.alpha:.2f}); mean set "
      f"size {judged.mean_set_size:.2f} of {len(desk)}; resolved by the model "
      f"{judged.pick_set_figures()['singletons']:.0%} of the rows")
judged.to_frame()[["text", "chosen", "expected", "p_pick"]].head(6)

# %%
decision.make(customer.format(text=desk_sample["text"][1]), desk, runtime=doctor,
              mode="json_schema", pick_set=policy, low_confidence="talk_to_human")
decision.last_trace()

# %% [markdown]
# One split of 48 rows says little; twenty random splits say more, and need no model call: each
# fits a policy on half the rows and measures it on the other half.

# %%
import statistics

def split_figures(result, alpha, seeds=range(20)):
    figures = []
    for seed in seeds:
        order = list(range(len(result)))
        random.Random(seed).shuffle(order)
        figures.append(result.pick_set_figures(result.conformal(alpha, rows=order[::2])))
    return {"mean coverage": statistics.mean(f["coverage"] for f in figures),
            "lowest": min(f["coverage"] for f in figures),
            "mean set size": statistics.mean(f["mean_set_size"] for f in figures)}

split_figures(checked, alpha=0.1)

# %% [markdown]
# The sets are large because this 135M model is unsure between most of the eight options: a
# guarantee of 90 % costs it a set of about six, and every decision here goes to a person.
# That is the honest answer — the selective curve above promised nothing on new rows. Over all
# 240 rows of the table, `benchmarks/bench_conformal.py` measures a mean coverage of 0.91 at
# α = 0.1 over 20 splits (set size 5.9 of 8) and 0.83 at α = 0.2 (5.1). A larger model, or a
# better menu, makes the sets smaller; the guarantee stays.
