"""Record cassettes/modes.json: one option set asked three ways (menu, tools, json_schema) over a
small table, through the real OpenAI SDK against the loopback server of the provider tests (it
speaks the chat-completions protocol). The replies are scripted as a model might answer each
way; what is recorded is the real SDK's requests and the server's responses.

    .venv/bin/python notebooks/cassettes/record_modes.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests" / "providers"))

from fakeserver import FAKE_KEY, FakeServer, text, tools  # noqa: E402

from openprogram import Variant, compare  # noqa: E402
from openprogram.runtimes import OpenAIRuntime, RecordingRuntime  # noqa: E402

OPTIONS = {"refund": ("REFUND", "give the customer their money back"),
           "answer": ("ANSWER", "answer a question in writing"),
           "escalate": ("ESCALATE", "hand the conversation to a person")}
ROWS = [{"message": "The vase arrived broken, I want my money back", "label": "refund"},
        {"message": "When does my parcel ship?", "label": "answer"},
        {"message": "This is the third time, get me a manager", "label": "escalate"},
        {"message": "Can I pay by invoice?", "label": "answer"}]

MENU = [text("The customer wants a refund.\n```json\n{\"call\": \"refund\"}\n```"),
        text("I would answer them: shipping takes two days."),          # no pick: re-asked
        text('{"call": "answer"}'),
        text('Escalate it. {"call": "escalate"}'),
        text('{"call": "answer"}')]
TOOLS = [tools(("t1", "refund", {})), tools(("t2", "answer", {})),
         tools(("t3", "escalate", {})), tools(("t4", "escalate", {}))]   # a wrong pick
SCHEMA = [text('{"decision": {"call": "refund", "args": {}}}'),
          text('{"decision": {"call": "answer", "args": {}}}'),
          text('{"decision": {"call": "escalate", "args": {}}}'),
          text('{"decision": {"call": "answer", "args": {}}}')]

if __name__ == "__main__":
    with FakeServer("openai") as server:
        server.push(*MENU, *TOOLS, *SCHEMA)
        rt = RecordingRuntime(OpenAIRuntime(model="demo-model", base_url=server.base_url,
                                            api_key=FAKE_KEY, max_retries=0),
                              HERE / "modes.json")
        res = compare("Customer message: {message}\nPick one way to handle it.",
                      {"menu": Variant(mode="menu"), "tools": Variant(mode="tools"),
                       "json_schema": Variant(mode="json_schema")}, ROWS, options=OPTIONS,
                      runtime=rt, expected="label", concurrency=1, progress=False)
        print(res.summary)
