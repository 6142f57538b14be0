# %% [markdown]
# # Retries, one error kind at a time
#
# When a reply cannot be used, the mechanism records **why** (a stable error kind, a message, and the
# path of the failing field), re-asks the model with its previous reply, the problem and the menu, and
# — when no attempt is left — raises `DecisionError` with the whole trace.

# %%
# %load_ext openprogram
import pandas as pd

from openprogram import ERROR_KINDS, DecisionError, decision
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
    "a value outside the enum": '{"call": "propose", "args": {"slots": '
                                '[{"day": "sun", "hour": 9}]}}',
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

# %% [markdown]
# ## Your own types, your own rules, your own re-ask
#
# A pydantic model is an option of its own: the menu shows its fields, constraints and
# descriptions, and a pick comes back as an instance. pydantic validates it — a `field_validator`
# that refuses the first reply fails that attempt as `invalid_value`, with the path and the
# validator's message, and the model is asked again. A `validate=` rule sees every pick before
# anything runs; raising `Retry("why")` rejects it (`rejected`). `reask=` writes the text sent back.

# %%
from pydantic import BaseModel, Field, field_validator

from openprogram import Retry

class Order(BaseModel):
    """Place an order for the customer."""
    item: str = Field(description="what to order")
    qty: int = Field(ge=1, le=10, description="how many")

    @field_validator("item")
    @classmethod
    def known_item(cls, v: str) -> str:
        if v not in {"tea", "coffee"}:
            raise ValueError(f"we only sell tea and coffee, not {v!r}")
        return v

def no_coffee_after_six(pick):
    if pick.call == "Order" and pick.args["item"] == "coffee":
        raise Retry("it is after six: offer tea instead")

shop = [Order, ("done", "nothing to order")]
print(decision.render_options(shop))

# %%
model = ScriptedRuntime([
    '{"call": "Order", "args": {"item": "cake", "qty": 2}}',      # the validator refuses it
    '{"call": "Order", "args": {"item": "coffee", "qty": 2}}',    # the rule rejects it
    '{"call": "Order", "args": {"item": "tea", "qty": 2}}',
])
order = decision.make("Two teas? Or coffee?", shop, runtime=model, max_retries=2,
                      validate=no_coffee_after_six,
                      reask="Attempt {attempt} failed ({kind} at {path}): {error}. Pick again.")
order

# %%
t = decision.last_trace()
t.to_frame()[["chosen", "error_kind", "error_path", "error_message"]]

# %%
print(model.calls[1].prompt)

# %% [markdown]
# ## An async model
#
# `Runtime(call=async_fn)` wraps an async model function. `await decision.amake(...)` works at a
# cell's top level, many `amake`s run concurrently on the kernel's loop, and the plain
# `decision.make` finishes an async model too (the cell's loop is already running).

# %%
import asyncio

from openprogram import Runtime

async def slow_model(content):
    await asyncio.sleep(0.05)
    return '{"call": "decline"}'

async_rt = Runtime(call=slow_model, model="slow")
results = await asyncio.gather(*(decision.amake(prompt, options, runtime=async_rt)
                                 for _ in range(10)))
results

# %%
decision.make(prompt, options, runtime=async_rt)
