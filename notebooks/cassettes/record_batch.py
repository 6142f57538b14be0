"""Record cassettes/batch.jsonl: a small evaluation answered through OpenAI's Batch API, by the
real OpenAI SDK against the loopback server of the provider tests (it speaks the files and
batches protocol too). The first reply to one row is unusable, so that row is asked again in a
second batch round. What is recorded is the real SDK's requests and the server's answers, each
reply with the batch, request and round that answered it.

    .venv/bin/python notebooks/cassettes/record_batch.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests" / "providers"))

from fakeserver import FAKE_KEY, FakeServer, text  # noqa: E402

from openprogram import decision  # noqa: E402
from openprogram.runtimes import OpenAIRuntime, RecordingRuntime  # noqa: E402

OPTIONS = {"refund": ("REFUND", "give the customer their money back"),
           "answer": ("ANSWER", "answer a question in writing"),
           "escalate": ("ESCALATE", "hand the conversation to a person")}
ROWS = [{"message": "The vase arrived broken, I want my money back", "label": "refund"},
        {"message": "When does my parcel ship?", "label": "answer"},
        {"message": "This is the third time, get me a manager", "label": "escalate"},
        {"message": "Can I pay by invoice?", "label": "answer"}]
PROMPT = "Customer message: {message}\nPick one way to handle it."


def respond():
    asked: set = set()

    def reply(body):
        asks = body["messages"][0]["content"]      # the first message: the row's own prompt
        row = next(r for r in ROWS if r["message"] in asks)
        if row is ROWS[1] and "first" not in asked:      # thinks aloud, no pick: round 2
            asked.add("first")
            return text("I would tell them shipping takes two days.")
        return text('{"call": "%s"}' % row["label"])
    return reply


if __name__ == "__main__":
    with FakeServer("openai") as server:
        server.responder = respond()
        batched = OpenAIRuntime(model="demo-model", base_url=server.base_url, api_key=FAKE_KEY,
                                max_retries=0).batched(poll_s=0.0, settle_s=0.2)
        path = HERE / "batch.jsonl"
        path.unlink(missing_ok=True)
        rt = RecordingRuntime(batched, path)
        res = decision.evaluate(PROMPT, OPTIONS, ROWS, runtime=rt, expected="label",
                                concurrency=4, progress=False)
        print(res.summary, "batches:", server.batches_created)
