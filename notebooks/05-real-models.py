# %% [markdown]
# # Real models
#
# The same option sets, magics and panel work on real models. Three ways to reach one:
#
# | where | runtime |
# |---|---|
# | OpenAI, or any hosted OpenAI-compatible API | `OpenAIRuntime(model="gpt-4o-mini")` (key from `OPENAI_API_KEY`) |
# | Anthropic | `AnthropicRuntime(model="claude-3-5-haiku-latest")` (key from `ANTHROPIC_API_KEY`) |
# | a local server: Ollama, vLLM, llama.cpp's server, LM Studio | `OpenAIRuntime(model="llama3.2", base_url="http://localhost:11434/v1")` |
#
# Replies stream into the panel as the model writes. Every call can be **recorded** to a JSON cassette
# (`RecordingRuntime(live, path)`) and **replayed** offline (`ReplayRuntime(path)`) — on Binder, in CI,
# in a classroom without keys. Keys never reach a trace, a cassette, a repr or an output.
#
# This notebook uses a live model only when you ask for one: set `OPENPROGRAM_LIVE=1` plus a key
# (`OPENAI_API_KEY` or `ANTHROPIC_API_KEY`) or a local server (`OPENPROGRAM_BASE_URL`), and optionally
# `OPENPROGRAM_MODEL`. Otherwise it replays `cassettes/05-real-models.json`, which was recorded
# through the real `openai` SDK against the project's loopback test server
# (`tests/support/fakeserver.py`, run by `./dev notebooks --record-05`), so its replies are
# scripted, not a hosted model's.

# %%
# %load_ext openprogram
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
        return OpenAIRuntime(model=model or "gpt-4o-mini",
                             base_url=os.environ.get("OPENPROGRAM_BASE_URL"))
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


# %% [markdown]
# ## A decision on the model
#
# The prompt must ask the model to pick (`decision.make` sends only your prompt and the menu).

# %%
def summarize(text: str, sentences: int = 1) -> str:
    """Summarize the message."""
    return f"summary of {text!r} in {sentences} sentence(s)"

options = {
    "summarize": summarize,
    "translate": ("Translate the message.",
                  {"target_language": {"type": str, "options": ["fr", "de", "es"]}}),
    "ignore": ("IGNORED", "pick when the message is spam"),
}
message = "Bonjour! Could you tell my German colleague what this invoice is about?"

# %%
# %%decide options --runtime runtime
Message: {message}
Pick the one next step that helps the sender most, and reply with its JSON.


# %% [markdown]
# ## Work first, decide last, with a native tool
#
# `%%agent` runs a full turn: the model may call `word_count` through the provider's own tool protocol
# before its final reply, which is the decision.

# %%
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


# %%
# %%agent options --tools [word_count] --runtime runtime
Message: {message}
If the message is long, summarize it in more sentences. Check its length first.

# %% [markdown]
# ## Tokens and latency
#
# Every model call is a node of the runtime's DAG, with its tokens; the trace tables have them per
# attempt. (The replay reports the tokens recorded with each call.)

# %%
runtime.dag.to_frame().query("kind == 'model_call'")[["parent", "input_tokens", "output_tokens",
                                                      "status"]]

# %% [markdown]
# ## Half the price: an evaluation through the batch API
#
# OpenAI's Batch API and Anthropic's Message Batches answer the same requests at half the price,
# within 24 hours. `evaluate(..., batch=True)` on an `OpenAIRuntime` or `AnthropicRuntime` sends the
# rows as one batch, waits for it (the progress bar shows the batch's own counts), and sends the
# re-asks of rows whose reply was unusable as the next round, so every decision keeps its retries.
# With `journal=` the batch id is journaled: after a kernel restart the same call re-attaches to the
# batch in flight instead of paying for it again. Use it for runs that can wait; use the online path
# (with `rate_limit=`) while you iterate.
#
# The run below replays `cassettes/batch.jsonl`, recorded through the real `openai` SDK against the
# loopback server, which speaks the files and batches protocol (`cassettes/record_batch.py`). One
# row's first reply held no pick, so it was answered in round 2: each attempt's raw record says
# which batch, request and round answered it.

# %%
from openprogram import decision

BATCH_OPTIONS = {"refund": ("REFUND", "give the customer their money back"),
                 "answer": ("ANSWER", "answer a question in writing"),
                 "escalate": ("ESCALATE", "hand the conversation to a person")}
BATCH_ROWS = [{"message": "The vase arrived broken, I want my money back", "label": "refund"},
              {"message": "When does my parcel ship?", "label": "answer"},
              {"message": "This is the third time, get me a manager", "label": "escalate"},
              {"message": "Can I pay by invoice?", "label": "answer"}]
batch_run = decision.evaluate("Customer message: {message}\nPick one way to handle it.",
                              BATCH_OPTIONS, BATCH_ROWS,
                              runtime=ReplayRuntime("cassettes/batch.jsonl"),
                              expected="label", concurrency=4, progress=False)
[[(a.raw["batch"]["batch_id"], a.raw["batch"]["round"], a.error_kind) for a in t.attempts]
 for t in batch_run.traces]

# %%
batch_run.picks, batch_run.accuracy, batch_run.retry_rate

# %% [markdown]
# ## Live tools from an MCP server
#
# `%mcp_connect NAME COMMAND...` starts an MCP server and binds its connection to `NAME`; its tools
# are the option set `NAME.options`. A pick calls the tool with arguments checked against the tool's
# own schema first, and resolves to what the tool returned; a tool error goes back to the model in
# the re-ask. Here the server is the reference time server from the package index (`pip install
# 'openprogram-decisions[mcp]' mcp-server-time`), which runs offline:
#
#     %mcp_connect clock mcp-server-time --local-timezone Etc/UTC
#
# The server runs on a thread and event loop of its own, so `%%decide clock.options` and
# `decision.make` work inside the kernel's running loop. A scripted model stands in for a real one
# (pass `runtime` from the top instead): it first names a time zone that does not exist.

# %%
import json
import tempfile
from importlib.util import find_spec

from openprogram import decision
from openprogram.runtimes import ScriptedRuntime

HAVE_MCP = bool(find_spec("mcp") and find_spec("mcp_server_time"))
if HAVE_MCP:
    get_ipython().run_line_magic("mcp_connect", "clock mcp-server-time --local-timezone Etc/UTC")
else:
    print("This section needs the MCP SDK and a server: "
          "pip install 'openprogram-decisions[mcp]' mcp-server-time")

def convert_pick(source_timezone):
    return json.dumps({"call": "convert_time", "args": {
        "source_timezone": source_timezone, "time": "10:00", "target_timezone": "Etc/UTC"}})

# %% [markdown]
# Recording works for tools too: `RecordingRuntime` keeps each tool's result in the cassette beside
# the model's replies (keys masked, even one a server echoes back).

# %%
TOOL_CASSETTE = f"{tempfile.mkdtemp()}/mcp-tour.jsonl"
if HAVE_MCP:
    scripted = ScriptedRuntime([convert_pick("Tokyo"), convert_pick("Asia/Tokyo")])
    converted = decision.make("It is 10:00 in Tokyo. What time is it in UTC?", clock.options,
                              runtime=RecordingRuntime(scripted, TOOL_CASSETTE))
    first = decision.last_trace().attempts[0]
    print("10:00 in Tokyo is", converted["target"]["datetime"][11:16], "UTC")
    print("attempt 1:", first.error_kind, "-", first.error_message)
    print("server calls:", clock.calls)

# %% [markdown]
# With the server closed, `ReplayRuntime` answers the model and the tool from the cassette: the
# same result, and no server call.

# %%
if HAVE_MCP:
    clock.close()
    calls_before = len(clock.calls)
    again = decision.make("It is 10:00 in Tokyo. What time is it in UTC?", clock.options,
                          runtime=ReplayRuntime(TOOL_CASSETTE))
    print("same result:", again == converted, "| server calls during the replay:",
          len(clock.calls) - calls_before, "|", clock)
