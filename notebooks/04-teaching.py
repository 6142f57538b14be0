# %% [markdown]
# # Teaching the next-step decision: a 45-minute lesson with no key
#
# An LLM that must decide what happens next is given a **menu** and replies with a small JSON object
# that picks one option; the framework finds that object, checks it, asks again when it cannot be
# used, and turns the pick into the result (a function runs, a value comes back, a structure is
# filled). This lesson takes a class through that mechanism in three parts. Everything runs here:
# the "model" is scripted, then **you**, then a real small model's recorded answers.
#
# | time | part | what the class does |
# |---|---|---|
# | 10 min | 1. The stages | step through one recorded decision, stage by stage, each with its rule |
# | 20 min | 2. Play the model | type replies in the playground until every goal is ticked |
# | 10 min | 3. You vs the model | answer the prompts a 135M-parameter model answered; compare the traces |
# | 5 min | wrap-up | collect `playground.progress()` from each learner |
#
# Each stage cites a rule of [docs/rules.md](../docs/rules.md) (`R1`, `P3`, ...): the rules are
# the library's promises, one numbered sentence each.

# %%
# %load_ext openprogram
from openprogram import decision
from openprogram.runtimes import ScriptedRuntime
from openprogram.widgets import Playground, StepThrough

def book_table(guests: int, time: str, terrace: bool = False, user_id: str = "") -> str:
    """Book a table at the restaurant."""
    return f"table for {guests} at {time}{' on the terrace' if terrace else ''} ({user_id})"

book_table.input_meta = {"user_id": {"hidden": True},
                         "time": {"description": "24-hour time",
                                  "options": ["19:00", "20:00", "21:00"]}}

options = {
    "book_table": book_table,
    "waitlist": ("WAITLISTED", "pick when the restaurant is full"),
    "order": ("Take a takeaway order.", {
        "items": [{"dish": str, "quantity": int}],
        "pickup": {"type": str, "options": ["18:00", "19:00", "20:00"]},
    }),
}
prompt = "A guest writes: 'Can we be four tonight at 8, outside if possible?' Pick the next step."
context = {"user_id": "guest-7"}

# %% [markdown]
# ## Part 1: the stages of one decision
#
# A scripted model thinks aloud, quotes an example pick, then picks `book_table` under the alias
# `action` with `guests` as text. That fails validation; the mechanism re-asks, and the second
# reply passes, even though it tries to set the hidden `user_id`.

# %%
model = ScriptedRuntime([
    'Example: {"call": "waitlist"}. Better: {"action": "book_table", "args": '
    '{"guests": "four", "time": "20:00", "terrace": true}}',
    '{"call": "book_table", "args": {"guests": 4, "time": "20:00", "terrace": true, '
    '"user_id": "admin"}}',
])
result = decision.make(prompt, options, runtime=model, context=context)
result

# %% [markdown]
# Step through it: **Next** / **Back**, or jump with the stage list. `%decision_steps --options options`
# does the same for the last decision of the notebook (and a decision panel has a **Step through**
# button). Questions for the class, one per stage:
#
# 1. Which line of the menu came from the docstring, which from `input_meta`, which from the
#    annotation? Why is `user_id` not on the menu?
# 2. What exactly did the model receive?
# 3. Two candidates: why does the **last** one win? What happened to the alias `action`?
# 4. Which argument failed, against which line of the schema, with which error kind?
# 5. Where did `user_id`'s value come from, and what became of `"admin"`?
# 6. (re-ask) Find the request, the previous reply, the problem and the menu inside the re-ask.

# %%
steps = StepThrough(decision.last_trace(), options=options)
steps

# %% [markdown]
# The same stages as text, for a terminal (`python -m openprogram steps` prints a decision of its
# own this way):

# %%
print(steps.steps[5].text())

# %% [markdown]
# ## Part 2: play the model
#
# In the playground **you** are the model: type a reply, press **Run**. A reply that cannot be used
# makes the mechanism re-ask, and waits for your next one; **Reset** starts a new decision. The goals
# tick as your replies meet them; **Hints** shows a hint for each goal not met yet. The last goal is
# a teacher's own: any `(title, check)` where `check(trace)` says whether a decision meets it.

# %%
playground = Playground(options, prompt=prompt, context=context, goals=[
    ("Book the terrace at 8",
     lambda trace: trace.result == "table for 4 at 20:00 on the terrace (guest-7)",
     "book_table, four guests, 20:00, terrace true"),
])
playground

# %% [markdown]
# The cell below plays three replies without typing, so you can check the goals tick: a reply with
# no pick, then one with two candidates that also tries to set `user_id`.

# %%
demo = Playground(options, prompt=prompt, context=context)
demo.run("I think they want the terrace.")
demo.run('Not {"call": "waitlist"} but {"call": "book_table", "args": {"guests": 4, '
         '"time": "20:00", "terrace": true, "user_id": "admin"}}')
print(demo.state, "->", demo.result)
print([goal["title"] for goal in demo.progress()["goals"] if goal["met"]])

# %% [markdown]
# ## Part 3: you vs the model
#
# SmolLM2-135M-Instruct, a model small enough to run on a laptop's CPU, answered customer messages
# about a hotel, asked both ways: with the text menu, and under a JSON Schema (`mode="json_schema"`,
# where llama.cpp may only write JSON of the schema's form). Its answers are in
# `cassettes/06-local-model.json` (see `06-local-model` to run it live). Answer the same request in
# the playground below, then compare your trace with the model's.

# %%
from openprogram import DecisionError
from openprogram.decision.stepthrough import side_by_side
from openprogram.runtimes import ReplayRuntime

def book_hotel(city: str, nights: int) -> str:
    """Book a hotel room in a city for a number of nights."""
    return f"booked {nights} night(s) in {city}"

hotel = {
    "book_hotel": book_hotel,
    "done": ("DONE", "pick when the customer needs nothing more"),
    "escalate": ("Hand the request to a person.", {
        "reason": str, "urgency": {"type": str, "options": ["low", "high"]}}),
}
request = ("Customer: I need a room in Lisbon for three nights.\n"
           "Pick the one next step that helps this customer.")
recorded = ReplayRuntime("cassettes/06-local-model.json")

def model_trace(mode):
    try:
        decision.make(request, hotel, runtime=recorded, mode=mode)
        return decision.last_trace()
    except DecisionError as err:
        return err.trace

the_model = {mode: model_trace(mode) for mode in ("menu", "json_schema")}
{mode: (t.status, t.error_kinds, t.result) for mode, t in the_model.items()}

# %%
you = Playground(hotel, prompt=request)
you

# %% [markdown]
# Here a learner's answer is played for you; with your own, use `you.panel.trace`.

# %%
you.run('{"call": "book_hotel", "args": {"city": "Lisbon", "nights": 3}}')
side_by_side({"you": you.panel.trace, "the model (menu)": the_model["menu"],
              "the model (json_schema)": the_model["json_schema"]}, hotel)

# %% [markdown]
# For the class: the menu-mode model never wrote a pick (which error kinds, and why would a larger
# model do better?). Under the schema it always wrote valid JSON: was its pick *right*? What does
# validation check, and what can it never check?
#
# ## Wrap-up: where the class stands
#
# `progress()` is plain JSON: each learner can send it, and a teacher can put a class in one table.

# %%
import json

import pandas as pd

report = demo.progress()
print(json.dumps({key: report[key] for key in ("met", "total", "decisions", "replies_typed")}))
pd.DataFrame(report["goals"])[["title", "met"]]
