# %% [markdown]
# # The run is the unit: see it whole, fork it at a decision, compare the two
#
# A program that decides is more than its decisions: an `Agent` method decides, calls tools,
# calls another method that decides again. `openprogram.run(program, ...)` runs it under one
# root and returns a `Run`: every method call, decision, model call and tool call as a tree, with
# its time and tokens, and the **recording** of every call by request. `%%run_program` runs a
# cell that way and shows the tree as it grows.
#
# The recording is what makes a run cheap to question. `run.fork(at=k, ...)` runs the program
# again, every model and tool call before decision `k` answered from the recording — no request,
# nothing paid, nothing a model could now answer differently — and at `k` one edit: another
# reply, another pick (the runner-up in one word), another description, another model.
# `run_a.diff(run_b)` names the first decision where two runs part, and what differs there.
#
# The program is the specification's own example: an `Agent` whose `handle_ticket` looks the
# order up with a tool and ends in a decision, and a router whose decision calls it. It runs on a
# scripted model first, then on the bundled SmolLM2-135M, replayed from a recording.

# %%
# %load_ext openprogram
from openprogram import Agent, agent, decision
from openprogram.runs import with_descriptions
from openprogram.runtimes import ScriptedRuntime, ToolCall

ORDERS = {"A-17": {"item": "kettle", "paid": 39.0, "status": "arrived broken"}}

def lookup_order(order_id: str) -> dict:
    """Look an order up by its id: the item, what was paid, where it stands."""
    return ORDERS.get(order_id, {"error": f"no order {order_id}"})

def issue_refund(order_id: str, amount: float) -> str:
    """Give the customer their money back for an order."""
    return f"refunded {amount:.2f} for {order_id}"

def escalate_to_human(reason: str) -> str:
    """Hand the ticket to a person, saying why."""
    return f"escalated: {reason}"

FLOWS = {"refund": issue_refund, "escalate": escalate_to_human,
         "close": ("CLOSED", "the customer needs nothing more")}
SURE = decision.Samples(4, fallback=True)   # the runtime's own probabilities, else 4 samples

class SupportAgent(Agent):
    # a tool method: a native tool for a model, and an option of a decision; the ticket is
    # passed by the program (context=), hidden from the model
    method_options = {"handle_ticket": {"tool": True, "input": {"ticket": {"hidden": True}}}}

    def __init__(self, runtime=None, *, tools=(lookup_order,), mode="menu"):
        super().__init__(runtime)
        self.tools, self.mode = list(tools), mode

    def handle_ticket(self, ticket: str) -> str:
        """The support team: reads the ticket, looks the order up, then picks the flow."""
        urgency = decision.make(f"How urgent is this ticket?\n{ticket}", ["low", "high"],
                                mode=self.mode, confidence=SURE)
        return agent(f"Handle this {urgency}-urgency ticket: {ticket}", tools=self.tools or None,
                     options=FLOWS, mode=self.mode)

class Router(Agent):
    def __init__(self, support, runtime=None, *, mode="menu"):
        super().__init__(runtime)
        self.support, self.mode = support, mode

    def route(self, ticket: str):
        """Send the ticket to the team that handles it: the decision is the branch."""
        return decision.make(f"A customer wrote:\n{ticket}\nWhich team handles it?", {
            "support": self.support.handle_ticket,
            "sales": ("SALES", "questions about buying something"),
            "spam": ("IGNORED", "advertising or nonsense"),
        }, context={"ticket": ticket}, mode=self.mode, confidence=SURE)

router = Router(SupportAgent())
TICKET = "Order A-17: my kettle arrived broken. I want my money back."

# %% [markdown]
# ## The scripted model
#
# It answers by what each request asks, and how often it was asked: a turn's request comes twice
# (the model looks the order up, then picks), and the urgency is asked four times (the samples
# behind its probability), "low" once.

# %%
def scripted_model():
    asked = {}

    def reply(prompt):
        n = asked[prompt] = asked.get(prompt, 0) + 1
        if prompt.startswith("A customer wrote"):
            return '{"call": "support"}'
        if prompt.startswith("How urgent"):
            return '{"call": "low"}' if n % 4 == 3 else '{"call": "high"}'
        if n % 2:
            return ToolCall("lookup_order", {"order_id": "A-17"})
        if "low-urgency" in prompt:
            return '```json\n{"call": "close"}\n```'
        if "Only when" in prompt:
            return ('```json\n{"call": "escalate", "args": {"reason": "a refund over 20 '
                    'needs a person"}}\n```')
        return '```json\n{"call": "refund", "args": {"order_id": "A-17", "amount": 39.0}}\n```'
    return ScriptedRuntime(rule=reply)

scripted = scripted_model()

# %% [markdown]
# ## The run, live
#
# The view grows as the run goes: the router's method call, its decision (#0), the support
# agent's call that decision made, the urgency (#1) and the turn's decision (#2) with the tool it
# called. On each decision: the pick, its probability and the runner-up (confidence was asked),
# the attempts (a failed one is a red ✗), time and tokens. Rows of one kind at one call site are
# one row: a loop's thousand decisions would be one row counting them. The magnifier on a
# decision opens its panel beneath the tree, with the fork actions (a reply box, a menu of its
# options, the runner-up in one click).

# %%
# %%run_program --runtime scripted --as first
router.route(TICKET)

# %%
first.to_frame("decisions").drop(columns="duration_s")   # (its time varies from run to run)

# %% [markdown]
# ## A fork at the third decision, with another reply
#
# The fork runs the program again. Decisions #0 and #1 — six model calls — are answered from the
# recording; at #2 the model is taken to have written the given reply (validated as any reply).

# %%
escalated = first.fork(at=2, reply='```json\n{"call": "escalate", "args": {"reason": '
                                   '"the customer asked for a person"}}\n```')
escalated.view()

# %%
{k: escalated.totals[k] for k in ("model_calls", "recorded", "live")}

# %% [markdown]
# ## Where the two runs part
#
# `diff` walks both runs' decisions in order; the ones that agree are the common prefix (folded),
# the first that differs is named with the part that differs first — its request, menu, reply,
# pick, arguments, result or error — and the two values.

# %%
first.diff(escalated).view()

# %% [markdown]
# ## The road not taken: a fork to the runner-up
#
# Decision #1 said "high" with probability 0.75; "low" was the runner-up. `pick="runner_up"`
# makes decision #1 again with its choice held to "low" (an option with nothing to fill resolves
# without a model call); from there the program goes on, and the model closes the ticket.

# %%
low = first.fork(at=1, pick="runner_up")
first.diff(low).view()

# %% [markdown]
# ## A fork with an edited description
#
# `options=` gives decision #2 another option set: here the same one, its `refund` described
# differently (`with_descriptions` keeps everything else). The request changes, so the model is
# asked — and picks otherwise.

# %%
stricter = first.fork(at=2, options=with_descriptions(
    {"refund": "Only when the order cost less than 20: give the money back."}))
first.diff(stricter)

# %% [markdown]
# ## A real model, replayed
#
# The same program on SmolLM2-135M (see 06-local-model): the turn without tools (llama.cpp runs
# no native tool calls) and every decision in `json_schema` mode, which samples under a grammar
# made from the options, so every reply parses. Its probabilities are exact: read from its logits.
# The notebook replays `cassettes/07-runs.json`, recorded from the model by
# `./dev notebooks --record-07`; with `OPENPROGRAM_LIVE=1` (`./dev local` sets it) it runs the
# model itself.

# %%
import os

from openprogram.runtimes import RecordingRuntime, ReplayRuntime

CASSETTE = "cassettes/07-runs.json"

def local_model():
    """SmolLM2-135M-Instruct in process, greedy: a live run repeats itself on one machine."""
    from openprogram.runtimes import LlamaCppRuntime
    return LlamaCppRuntime(seed=0, temperature=0.0)

if os.environ.get("OPENPROGRAM_RECORD") == "1":
    local = RecordingRuntime(local_model(), CASSETTE)
elif os.environ.get("OPENPROGRAM_LIVE") == "1":
    local = local_model()
else:
    local = ReplayRuntime(CASSETTE)
small_router = Router(SupportAgent(tools=(), mode="json_schema"), mode="json_schema")

# %%
# %%run_program --runtime local --as small
small_router.route(TICKET)

# %% [markdown]
# The small model sends a broken kettle to sales, sure of it. Its runner-up was support: the fork
# goes down the road it did not take, and the support agent's own decisions follow.

# %%
supported = small.fork(at=0, pick="runner_up")
small.diff(supported).view()

# %% [markdown]
# In that fork the urgency was close to a coin toss: the probability beside each pick says so.

# %%
supported.view()
