"""Writes the notebooks of this folder from the cells below, runs them, and saves their outputs.

The notebooks are committed with their outputs (they read on GitHub, and nbval compares them), so
after changing a cell here or the library, run `.venv/bin/python notebooks/build.py` (or name some:
`... build.py 01-tour`) and commit the .ipynb files. Editing a notebook in JupyterLab works too; copy
the change back here so the next build keeps it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str, *tags: str):
    cell = nbformat.v4.new_code_cell(text.strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


NOTEBOOKS: dict[str, list] = {}

NOTEBOOKS["01-tour"] = [
    md("""
# A tour of next-step decisions

An LLM is handed a **menu** of options — functions, plain values, or schemas to fill — picks one by
replying with a small JSON object, and openprogram resolves that pick straight into the **next step's
result**: the function runs, the value comes back, the filled structure comes back. The caller writes
no `if`; the decision is the branch.

This notebook runs on `ScriptedRuntime`, a model whose replies are written in advance, so it needs no
key and no network. Every decision shows the **decision panel**: the prompt with its menu, the raw
reply, the JSON that was extracted, the validation error of each retry, and the resolved result.
"""),
    code("""
%load_ext openprogram
from openprogram import agent, decision, DecisionError
from openprogram.runtimes import ScriptedRuntime, ToolCall
"""),
    md("""
## An option set with the three kinds of option

- a **function** option: picked → it runs with the arguments the model wrote, and its return value is the result;
- a **value** option: picked → the value itself is the result;
- a **schema** option: the model fills the declared fields → `{"decision": name, **fields}`.
"""),
    code('''
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
'''),
    md("""
## What the model sees

`%decision_menu` renders the menu without calling a model: one signature line per option, its
description, a line per parameter, and a `Call:` line with a JSON example.
"""),
    code("%decision_menu options"),
    md("""
## A decision that resolves at once

`%%decide OPTIONS` sends the cell (with `{message}` filled from the notebook) plus the menu in one
model call. The scripted model picks `analyze`, so `analyze` runs and its return value is the cell's
value.
"""),
    code("""
quick = ScriptedRuntime(['{"call": "analyze", "args": {"text": "I love the new release!"}}'])
"""),
    code("""
%%decide options --runtime quick
Pick one way to handle this message: {message}
"""),
    md("""
## A reply that fails validation, and the re-ask that fixes it

The first reply writes `depth` as a string. The mechanism records a `type_mismatch` at
`args.depth`, re-asks the model with its previous reply, the problem and the menu again, and the
second reply resolves. Both attempts stay in the panel.
"""),
    code("""
recovering = ScriptedRuntime([
    'Let me analyze it. {"call": "analyze", "args": {"text": "I love the new release!", "depth": "two"}}',
    '```json\\n{"call": "analyze", "args": {"text": "I love the new release!", "depth": 2}}\\n```',
])
"""),
    code("""
%%decide options --runtime recovering --as analysis
Pick one way to handle this message: {message}
"""),
    code("print(recovering.calls[1].prompt[:700])"),
    md("""
## A decision that exhausts its retries

When every attempt fails, `decision.make` raises `DecisionError` (a `ValueError`) carrying the last
error's kind, message and the head of the last reply — and the whole trace, so nothing the model
wrote is lost. What to do next is the caller's choice: there is no built-in fallback.
"""),
    code("""
stubborn = ScriptedRuntime(['I would rather not choose.', '{"call": "celebrate"}'])
try:
    decision.make(f"Pick one way to handle this message: {message}", options, runtime=stubborn)
except DecisionError as err:
    failure = err
print(failure.kind)
print(failure.trace.error_kinds)
"""),
    code("failure.trace"),
    md("""
## `agent(choices=)`: work first, decide last

With `%%agent` (or `agent(prompt, tools=..., choices=...)`) the model first does a normal turn — here
it calls the native tool `lookup_order` — and only its final reply is the decision. The tool round
shows in the panel too.
"""),
    code('''
def lookup_order(order_id: str) -> dict:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "lost in transit"}

working = ScriptedRuntime([
    ToolCall("lookup_order", {"order_id": "A17"}),
    'The parcel is lost. ```json\\n{"call": "escalate", "args": {"reason": "parcel A17 lost", "urgency": "high"}}\\n```',
])
'''),
    code("""
%%agent options --tools [lookup_order] --runtime working
Handle this ticket: "Where is my order A17?"
"""),
    md("""
## The trace as tables

Every decision leaves a `DecisionTrace`. `decision.last_trace()` returns the most recent one;
`to_frame()` gives its attempts as a pandas DataFrame (`"options"`, `"tools"` and `"summary"` are
the other tables). `%decision_trace N` shows the panel of an earlier decision again.
"""),
    code("""
decision.last_trace().to_frame()[["chosen", "error_kind", "error_path", "args", "found_in", "candidates"]]
"""),
    code("%decision_trace 2"),
]

NOTEBOOKS["02-prototyping"] = [
    md("""
# Prototyping an option set

Designing an option set means choosing what the model may pick, what it must write for each pick,
and what it must never write. This notebook builds one step by step and watches the menu and the
picks change. Everything runs on `ScriptedRuntime`.
"""),
    code("""
%load_ext openprogram
from typing import Literal
from openprogram import Agent, decision
from openprogram.runtimes import ScriptedRuntime
"""),
    md("""
## Parameters the model fills, and parameters it never sees

A function option's parameters come from its signature: type annotations (a `Literal[...]` is an
enum), defaults, and `input_meta` for descriptions, allowed values and **hidden** parameters. A
hidden parameter is filled from `context=`, never from the model; a parameter named `runtime` gets
the Runtime. Neither appears in the menu.
"""),
    code('''
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
'''),
    code("%decision_menu options"),
    md("""
The model below tries to set `user_id` itself. The value is **dropped** (and recorded as dropped);
the hidden parameter comes from the context.
"""),
    code("""
sneaky = ScriptedRuntime(['{"call": "refund", "args": {"order_id": "A17", "amount": 12, "user_id": "admin"}}'])
ctx = {"user_id": "u-123"}
"""),
    code("""
%%decide options --runtime sneaky --context ctx --as refunded
The parcel A17 arrived broken. Pick the next step.
"""),
    code("""
attempt = decision.last_trace().attempts[-1]
print("kept:    ", attempt.args)
print("dropped: ", attempt.dropped)
print("injected:", attempt.injected)
"""),
    md("""
## Nested schemas

A schema option's fields nest: `[{"action": str, "target": str}]` is a list whose every element is an
object with those two fields. Validation recurses, and an error names the exact path.
"""),
    code("""
planner = ScriptedRuntime([
    '{"call": "plan", "args": {"steps": [{"action": "check"}], "rationale": "first look"}}',
    '{"call": "plan", "args": {"steps": [{"action": "check", "target": "carrier"}, {"action": "refund", "target": "A17"}], "rationale": "verify, then pay"}}',
])
plan = decision.make("The parcel A17 arrived broken. Pick the next step.", options, runtime=planner,
                     context=ctx)
first = decision.last_trace().attempts[0]
print(first.error_kind, "at", first.error_path)
plan
"""),
    md("""
## An Agent: the same methods as options and as tools

In an `Agent` subclass, `method_options` marks methods as tools and gives their parameters metadata.
Each method call binds the Agent's Runtime, so `decision.make` inside it needs no `runtime=`.
"""),
    code('''
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
'''),
    md("""
## Descriptions steer the pick

A menu is a prompt. Below, a toy model picks the option whose description shares the most words with
the message (a stand-in for a real model's reading). Changing one description changes the pick,
with no change to the code that uses the result.
"""),
    code('''
import re

def word_overlap_model(prompt: str) -> str:
    """Pick the option whose description shares the most words with the message."""
    message = set(re.findall(r"[a-z]+", prompt.split("Message:")[1].split("Options")[0].lower()))
    best, best_score = None, -1
    for block in prompt.split("\\n- ")[1:]:
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
    pick = decision.make(f"Message: {message}\\nPick one option.", menu(description), runtime=model)
    print(f"{description!r:62} -> {pick}")
'''),
    md("""
## Many inputs at once: `decision.evaluate`

One decision shows how the mechanism works; an option set is designed well only once it has run over
many inputs. `decision.evaluate` fills the prompt template from each row of a DataFrame, runs the
decisions concurrently (with a progress bar), and returns one row per input plus summaries: the pick
distribution, the retry and failure rates, and — with `expected=` — accuracy and a confusion table.
The toy model answers after a random 10–30 ms, like a small real one.
"""),
    code('''
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
    "label": ["answer", "answer", "escalate", "escalate", "escalate", "answer", "escalate", "answer"],
})
slow_model = ScriptedRuntime(rule=word_overlap_model, latency=(0.01, 0.03), seed=7)
template = "Message: {message}\\nPick one option."
v1 = menu("hand the conversation to a person")
v2 = menu("hand a broken parcel or a money back request to a person")
'''),
    code('''
run = decision.evaluate(template, v1, messages, runtime=slow_model, concurrency=4, expected="label")
run.to_frame()[["message", "chosen", "expected", "correct", "attempts", "status"]]
'''),
    code("""
# mean_duration_s and wall_s are in the summary too; they change from run to run, so they are
# left out here to keep this notebook's outputs comparable.
run.summary.drop(["mean_duration_s", "wall_s"])
"""),
    code("run.confusion"),
    code("_ = run.plot()"),
    md("""
`compare` runs two or more option sets (or runtimes) over the same inputs and lines their picks up
side by side; `.differences` keeps the inputs where they disagree.
"""),
    code('''
from openprogram import compare

versions = compare(template, {"v1": v1, "v2": v2}, messages, runtime=slow_model, concurrency=4,
                   expected="label")
versions.differences
'''),
    code("""
versions.summary.drop(columns=["mean_duration_s", "wall_s"])
"""),
    md("Any row opens in the decision panel:"),
    code("run.panel(2)"),
]

NOTEBOOKS["03-retries"] = [
    md("""
# Retries, one error kind at a time

When a reply cannot be used, the mechanism records **why** (a stable error kind, a message, and the
path of the failing field), re-asks the model with its previous reply, the problem and the menu, and
— when no attempt is left — raises `DecisionError` with the whole trace.
"""),
    code('''
%load_ext openprogram
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
'''),
    md("""
## The error kinds

Each reply below is wrong in one way. With `max_retries=0` the first failure is final, so the
`DecisionError` shows exactly what the mechanism made of that one reply.
"""),
    code("""
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
"""),
    md("Every kind has a sentence a person can act on:"),
    code("""
pd.Series(ERROR_KINDS, name="what to do").to_frame()
"""),
    md("""
## What the re-ask looks like

With the default `max_retries=1`, a bad first reply is followed by a re-ask: the request, the
previous reply, the problem, and the menu again. The panel shows both attempts; the scripted model's
`calls` show the exact text the model received the second time.
"""),
    code("""
second_chance = ScriptedRuntime([
    '{"call": "schedule", "args": {"day": "tue", "hour": "10"}}',
    '{"call": "schedule", "args": {"day": "tue", "hour": 10, "remind": true}}',
])
"""),
    code("""
%%decide options --runtime second_chance
{prompt}
"""),
    code("print(second_chance.calls[1].prompt)"),
    md("""
## When every attempt fails

The `DecisionError` carries the last error's kind, message and the head of the last reply; its
`.trace` has every attempt, so the last invalid reply is never lost. Displaying the trace draws it.
"""),
    code("""
no_luck = ScriptedRuntime(['{"call": "schedule", "args": {"day": "tue"}}', 'I give up.'])
try:
    decision.make(prompt, options, runtime=no_luck)
except DecisionError as err:
    failed = err
print(failed)
"""),
    code("failed.trace"),
    md("""
## The trace as DataFrames

`to_frame()` gives the attempts; `"options"`, `"tools"` and `"summary"` are the other tables. The
runtime's DAG lists every model call (the re-ask included) with its parent.
"""),
    code("""
failed.trace.to_frame()[["chosen", "error_kind", "error_path", "error_message", "reply"]]
"""),
    code("""
failed.trace.to_frame("summary")[["entry", "status", "attempts", "error_kinds"]]
"""),
    code("""
no_luck.dag.to_frame()[["parent", "kind", "name", "status"]]
"""),
]

NOTEBOOKS["04-teaching"] = [
    md("""
# Play the model: a classroom playground

In the playground **you** are the model. The prompt and the menu are what a model would receive;
type a reply, press **Run**, and watch the mechanism extract the JSON, validate it, re-ask when it
cannot be used, and resolve the pick into a result. A re-ask waits for your next reply: type it and
press Run again. **Reset** starts over.
"""),
    code('''
%load_ext openprogram
from openprogram.widgets.playground import Playground

def book_table(guests: int, time: str, terrace: bool = False) -> str:
    """Book a table at the restaurant."""
    return f"table for {guests} at {time}" + (" on the terrace" if terrace else "")

def answer(text: str, user_id: str = "") -> str:
    """Answer the guest's question."""
    return f"answered {user_id}: {text}"

answer.input_meta = {"user_id": {"hidden": True}}

options = {
    "book_table": book_table,
    "answer": answer,
    "waitlist": ("WAITLISTED", "pick when the restaurant is full"),
    "order": ("Take a takeaway order.", {
        "items": [{"dish": str, "quantity": int}],
        "pickup": {"type": str, "options": ["18:00", "19:00", "20:00"]},
    }),
}
prompt = "A guest writes: 'Can we be four tonight at 8, outside if possible?' Pick the next step."
'''),
    code("""
playground = Playground(options, prompt=prompt, context={"user_id": "guest-7"})
playground
"""),
    md("""
## Exercises

1. **Resolve at once.** Write a reply that books the table. What is the result, and which fields did
   you have to write?
2. **Meet every error kind.** Write replies that produce `no_action`, `unknown_call`, `bad_args`,
   `missing_required`, `type_mismatch` and `enum_violation`. For each, read the re-ask prompt the
   panel shows: would it help a model fix its reply?
3. **Think aloud.** Write a reply that first quotes an example `{"call": "waitlist"}` and then
   picks `book_table`. Which one wins, and what does the panel say about candidates? Why is the
   *last* one the pick?
4. **Try to cheat.** Pick `answer` and write a `user_id` yourself. What happens to it, and where
   does the value that reaches the function come from?
5. **Fill a structure.** Take a takeaway order of two dishes for 19:00. What does the result look
   like, and who decides its shape?
6. **Design.** Change one description in `options` so that a reply you wrote in exercise 1 would
   more likely pick something else. Re-run the cell that builds the playground.

The cell below plays exercise 3 and 4 without typing, so you can check your answers.
"""),
    code('''
demo = Playground(options, prompt=prompt, context={"user_id": "guest-7"})
print(demo.run('Maybe {"call": "waitlist"}? No - there is room: {"call": "book_table", "args": {"guests": 4, "time": "20:00", "terrace": true}}'))
attempt = demo.panel.trace.attempts[-1]
print("candidates:", attempt.candidates, "| picked:", attempt.chosen)
'''),
    code('''
demo.reset()
print(demo.run('{"call": "answer", "args": {"text": "See you at 8!", "user_id": "admin"}}'))
print("dropped:", demo.panel.trace.attempts[-1].dropped)
'''),
]

NOTEBOOKS["05-real-models"] = [
    md("""
# Real models

The same option sets, magics and panel work on real models. Three ways to reach one:

| where | runtime |
|---|---|
| OpenAI, or any hosted OpenAI-compatible API | `OpenAIRuntime(model="gpt-4o-mini")` (key from `OPENAI_API_KEY`) |
| Anthropic | `AnthropicRuntime(model="claude-3-5-haiku-latest")` (key from `ANTHROPIC_API_KEY`) |
| a local server: Ollama, vLLM, llama.cpp's server, LM Studio | `OpenAIRuntime(model="llama3.2", base_url="http://localhost:11434/v1")` |

Replies stream into the panel as the model writes. Every call can be **recorded** to a JSON cassette
(`RecordingRuntime(live, path)`) and **replayed** offline (`ReplayRuntime(path)`) — on Binder, in CI,
in a classroom without keys. Keys never reach a trace, a cassette, a repr or an output.

This notebook uses a live model only when you ask for one: set `OPENPROGRAM_LIVE=1` plus a key
(`OPENAI_API_KEY` or `ANTHROPIC_API_KEY`) or a local server (`OPENPROGRAM_BASE_URL`), and optionally
`OPENPROGRAM_MODEL`. Otherwise it replays `cassettes/05-real-models.json`, which was recorded
through the real `openai` SDK against the project's loopback test server
(`tests/providers/fakeserver.py`, run by `notebooks/build.py --record-05`), so its replies are
scripted, not a hosted model's.
"""),
    code('''
%load_ext openprogram
import os
from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime, RecordingRuntime, ReplayRuntime

CASSETTE = "cassettes/05-real-models.json"

def live_runtime():
    """The live model the environment asks for, or None."""
    if os.environ.get("OPENPROGRAM_LIVE") != "1":
        return None
    model = os.environ.get("OPENPROGRAM_MODEL")
    if os.environ.get("ANTHROPIC_API_KEY") and not os.environ.get("OPENPROGRAM_BASE_URL"):
        return AnthropicRuntime(model=model or "claude-3-5-haiku-latest")
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENPROGRAM_BASE_URL"):
        return OpenAIRuntime(model=model or "gpt-4o-mini", base_url=os.environ.get("OPENPROGRAM_BASE_URL"))
    return None

live = live_runtime()
if live is None:
    print("No live model configured (OPENPROGRAM_LIVE=1 with a key or OPENPROGRAM_BASE_URL): "
          f"skipping the live model and replaying {CASSETTE}.")
    runtime = ReplayRuntime(CASSETTE)
elif os.environ.get("OPENPROGRAM_RECORD") == "1":
    print(f"Recording the live model's calls to {CASSETTE}.")
    runtime = RecordingRuntime(live, CASSETTE)
else:
    print("Using the live model", live)
    runtime = live
'''),
    md("""
## A decision on the model

The prompt must ask the model to pick (`decision.make` sends only your prompt and the menu).
"""),
    code('''
def summarize(text: str, sentences: int = 1) -> str:
    """Summarize the message."""
    return f"summary of {text!r} in {sentences} sentence(s)"

options = {
    "summarize": summarize,
    "translate": ("Translate the message.", {"target_language": {"type": str, "options": ["fr", "de", "es"]}}),
    "ignore": ("IGNORED", "pick when the message is spam"),
}
message = "Bonjour! Could you tell my German colleague what this invoice is about?"
'''),
    code("""
%%decide options --runtime runtime
Message: {message}
Pick the one next step that helps the sender most, and reply with its JSON.
"""),
    md("""
## Work first, decide last, with a native tool

`%%agent` runs a full turn: the model may call `word_count` through the provider's own tool protocol
before its final reply, which is the decision.
"""),
    code('''
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())
'''),
    code("""
%%agent options --tools [word_count] --runtime runtime
Message: {message}
If the message is long, summarize it in more sentences. Check its length first.
"""),
    md("""
## Tokens and latency

Every model call is a node of the runtime's DAG, with its tokens; the trace tables have them per
attempt. (The replay reports the tokens recorded with each call.)
"""),
    code("""
runtime.dag.to_frame().query("kind == 'model_call'")[["parent", "input_tokens", "output_tokens", "status"]]
"""),
]

NOTEBOOKS_ORDER = list(NOTEBOOKS)


def record_05() -> None:
    """Re-record the cassette of 05-real-models through the real openai SDK against the loopback
    test server, whose replies are scripted here."""
    import os
    sys.path.insert(0, str(HERE.parent / "tests" / "providers"))
    from fakeserver import FakeServer, text, tools

    cassette = HERE / "cassettes" / "05-real-models.json"
    cassette.parent.mkdir(exist_ok=True)
    cassette.unlink(missing_ok=True)
    with FakeServer("openai") as server:
        server.push(
            text('The sender wants the content explained to a German colleague.\n'
                 '```json\n{"call": "translate", "args": {"target_language": "de"}}\n```',
                 usage=(412, 31), model="gpt-4o-mini"),
            tools(("call_1", "word_count", {"text": "Bonjour! Could you tell my German colleague "
                                                     "what this invoice is about?"}),
                  usage=(455, 22), model="gpt-4o-mini"),
            text('It has 13 words, so one sentence is enough.\n'
                 '```json\n{"call": "summarize", "args": {"text": "Invoice question for a '
                 'German colleague", "sentences": 1}}\n```', usage=(490, 40), model="gpt-4o-mini"),
        )
        env = {"OPENPROGRAM_LIVE": "1", "OPENPROGRAM_RECORD": "1", "OPENAI_API_KEY": "sk-local-test",
               "OPENPROGRAM_BASE_URL": server.base_url, "OPENPROGRAM_MODEL": "gpt-4o-mini"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            nb = nbformat.v4.new_notebook()
            nb.cells = NOTEBOOKS["05-real-models"]
            NotebookClient(nb, timeout=120, kernel_name="python3",
                           resources={"metadata": {"path": str(HERE)}}).execute()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    print("recorded", cassette)


def build(name: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = NOTEBOOKS[name]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    names = sys.argv[1:]
    if "--record-05" in names:
        names.remove("--record-05")
        record_05()
        names = names or ["05-real-models"]
    for name in names or NOTEBOOKS:
        print("built", build(name))
