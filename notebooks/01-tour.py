# %% [markdown]
# # A tour of next-step decisions
#
# An LLM is handed a **menu** of options — functions, plain values, or schemas to fill — picks one by
# replying with a small JSON object, and openprogram resolves that pick straight into the **next step's
# result**: the function runs, the value comes back, the filled structure comes back. The caller writes
# no `if`; the decision is the branch.
#
# This notebook runs on `ScriptedRuntime`, a model whose replies are written in advance, so it needs no
# key and no network. Every decision shows the **decision panel**: the prompt with its menu, the raw
# reply, the JSON that was extracted, the validation error of each retry, and the resolved result.

# %%
# %load_ext openprogram
from openprogram import DecisionError, decision
from openprogram.runtimes import ScriptedRuntime, ToolCall


# %% [markdown]
# ## An option set with the three kinds of option
#
# - a **function** option: picked → it runs with the arguments the model wrote, and its return value is the result;
# - a **value** option: picked → the value itself is the result;
# - a **schema** option: the model fills the declared fields → `{"decision": name, **fields}`.

# %%
def analyze(text: str, depth: int = 1) -> str:
    """Analyze the sentiment of the message."""
    return f"sentiment of {text!r} at depth {depth}: positive"

options = {
    "analyze": analyze,                                                  # function option
    "done": ("CONVERSATION_OVER", "pick when nothing is left to do"),   # value option
    "escalate": ("Hand the message to a person.", {                     # schema option
        "reason": str,
        "urgency": {"type": str, "options": ["low", "high"]},
    }),
}
message = "I love the new release!"

# %% [markdown]
# ## What the model sees
#
# `%decision_menu` renders the menu without calling a model: one signature line per option, its
# description, a line per parameter, and a `Call:` line with a JSON example.

# %%
# %decision_menu options

# %% [markdown]
# ## A decision that resolves at once
#
# `%%decide OPTIONS` sends the cell (with `{message}` filled from the notebook) plus the menu in one
# model call. The scripted model picks `analyze`, so `analyze` runs and its return value is the cell's
# value.

# %%
quick = ScriptedRuntime(['{"call": "analyze", "args": {"text": "I love the new release!"}}'])

# %%
# %%decide options --runtime quick
Pick one way to handle this message: {message}

# %% [markdown]
# ## A reply that fails validation, and the re-ask that fixes it
#
# The first reply writes `depth` as a string. The mechanism records a `type_mismatch` at
# `args.depth`, re-asks the model with its previous reply, the problem and the menu again, and the
# second reply resolves. Both attempts stay in the panel.

# %%
recovering = ScriptedRuntime([
    'Let me analyze it. {"call": "analyze", "args": {"text": "I love the new release!", '
    '"depth": "two"}}',
    '```json\n{"call": "analyze", "args": {"text": "I love the new release!", "depth": 2}}\n```',
])

# %%
# %%decide options --runtime recovering --as analysis
Pick one way to handle this message: {message}

# %%
print(recovering.calls[1].prompt[:700])

# %% [markdown]
# ## A decision that exhausts its retries
#
# When every attempt fails, `decision.make` raises `DecisionError` (a `ValueError`) carrying the last
# error's kind, message and the head of the last reply — and the whole trace, so nothing the model
# wrote is lost. What to do next is the caller's choice: there is no built-in fallback.

# %%
stubborn = ScriptedRuntime(['I would rather not choose.', '{"call": "celebrate"}'])
try:
    decision.make(f"Pick one way to handle this message: {message}", options, runtime=stubborn)
except DecisionError as err:
    failure = err
print(failure.kind)
print(failure.trace.error_kinds)

# %%
failure.trace


# %% [markdown]
# ## `agent(options=)`: work first, decide last
#
# With `%%agent` (or `agent(prompt, tools=..., options=...)`) the model first does a normal turn — here
# it calls the native tool `lookup_order` — and only its final reply is the decision. The tool round
# shows in the panel too.

# %%
def lookup_order(order_id: str) -> dict:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "lost in transit"}

working = ScriptedRuntime([
    ToolCall("lookup_order", {"order_id": "A17"}),
    'The parcel is lost. ```json\n{"call": "escalate", "args": {"reason": "parcel A17 lost", '
    '"urgency": "high"}}\n```',
])

# %%
# %%agent options --tools [lookup_order] --runtime working
Handle this ticket: "Where is my order A17?"

# %% [markdown]
# ## The trace as tables
#
# Every decision leaves a `DecisionTrace`. `decision.last_trace()` returns the most recent one;
# `to_frame()` gives its attempts as a pandas DataFrame (`"options"`, `"tools"` and `"summary"` are
# the other tables). `%decision_trace N` shows the panel of an earlier decision again.

# %%
decision.last_trace().to_frame()[["chosen", "error_kind", "error_path", "args", "found_in",
                                  "candidates"]]

# %%
# %decision_trace 2

# %% [markdown]
# ## Where to go next
#
# | to | open |
# |---|---|
# | **prototype** an option set: design it, run it over a table of inputs, compare designs and models | [02-prototyping](02-prototyping.ipynb) |
# | **inspect retries**: every error kind, what the re-ask told the model, the reply that fixed it | [03-retries](03-retries.ipynb) |
# | **teach** the mechanism: play the model yourself in the playground, with exercises | [04-teaching](04-teaching.ipynb) |
# | connect a provider (OpenAI, Anthropic, a server on your machine), record and replay | [05-real-models](05-real-models.ipynb) |
# | **run a whole program**: its tree of decisions live, a fork at any decision with an edit, the diff of two runs | [07-runs](07-runs.ipynb) |
#
# Everything here ran on a scripted model. To watch a **real** one decide — SmolLM2-135M in the
# kernel's process, no key, no network — run **`./dev local`** in a terminal at the repository's
# root: it compiles llama.cpp the first time (about 10 minutes on two cores), installs the model
# and opens [06-local-model](06-local-model.ipynb) with the model running live.
