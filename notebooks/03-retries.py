# %% [markdown]
# # Retries, one error kind at a time
#
# When a reply cannot be used, the mechanism records **why** (a stable error kind, a message, and the
# path of the failing field), re-asks the model with its previous reply, the problem and the menu, and
# — when no attempt is left — raises `DecisionError` with the whole trace.

# %%
# %load_ext openprogram
import pandas as pd
from openprogram import decision, DecisionError, ERROR_KINDS
from openprogram.runtimes import ScriptedRuntime

def schedule(day: str, hour: int, remind: bool = False) -> str:
    """Schedule the meeting."""
    return f"meeting on {day} at {hour}:00" + (" with a reminder" if remind else "")

options = {
    "schedule": schedule,
    "decline": ("DECLINED", "pick when no time works"),
    "propose": ("Propose other times.", {
        "slots": [{"day": {"type": str, "options": ["mon", "tue", "wed"]}, "hour": int}],
    }),
}
prompt = "Alice asks to meet on Tuesday at 10. Pick the next step."

# %% [markdown]
# ## The error kinds
#
# Each reply below is wrong in one way. With `max_retries=0` the first failure is final, so the
# `DecisionError` shows exactly what the mechanism made of that one reply.

# %%
replies = {
    "no JSON at all": "Sure, Tuesday works!",
    "an option that does not exist": '{"call": "reschedule"}',
    "args that are not an object": '{"call": "schedule", "args": "tuesday at 10"}',
    "a required field missing": '{"call": "schedule", "args": {"day": "tue"}}',
    "a field of the wrong type": '{"call": "schedule", "args": {"day": "tue", "hour": "10"}}',
    "a value outside the enum": '{"call": "propose", "args": {"slots": [{"day": "sun", "hour": 9}]}}',
}

def first_failure(reply: str) -> dict:
    try:
        decision.make(prompt, options, runtime=ScriptedRuntime([reply]), max_retries=0)
    except DecisionError as err:
        return {"error_kind": err.kind, "path": err.path, "message": err.message}
    return {"error_kind": None, "path": None, "message": "resolved"}

pd.set_option("display.max_colwidth", 120)
pd.DataFrame({what: first_failure(reply) for what, reply in replies.items()}).T

# %% [markdown]
# Every kind has a sentence a person can act on:

# %%
pd.Series(ERROR_KINDS, name="what to do").to_frame()

# %% [markdown]
# ## What the re-ask looks like
#
# With the default `max_retries=1`, a bad first reply is followed by a re-ask: the request, the
# previous reply, the problem, and the menu again. The panel shows both attempts; the scripted model's
# `calls` show the exact text the model received the second time.

# %%
second_chance = ScriptedRuntime([
    '{"call": "schedule", "args": {"day": "tue", "hour": "10"}}',
    '{"call": "schedule", "args": {"day": "tue", "hour": 10, "remind": true}}',
])

# %%
# %%decide options --runtime second_chance
{prompt}

# %%
print(second_chance.calls[1].prompt)

# %% [markdown]
# ## When every attempt fails
#
# The `DecisionError` carries the last error's kind, message and the head of the last reply; its
# `.trace` has every attempt, so the last invalid reply is never lost. Displaying the trace draws it.

# %%
no_luck = ScriptedRuntime(['{"call": "schedule", "args": {"day": "tue"}}', 'I give up.'])
try:
    decision.make(prompt, options, runtime=no_luck)
except DecisionError as err:
    failed = err
print(failed)

# %%
failed.trace

# %% [markdown]
# ## The trace as DataFrames
#
# `to_frame()` gives the attempts; `"options"`, `"tools"` and `"summary"` are the other tables. The
# runtime's DAG lists every model call (the re-ask included) with its parent.

# %%
failed.trace.to_frame()[["chosen", "error_kind", "error_path", "error_message", "reply"]]

# %%
failed.trace.to_frame("summary")[["entry", "status", "attempts", "error_kinds"]]

# %%
no_luck.dag.to_frame()[["parent", "kind", "name", "status"]]
