"""An evaluation run in a process of its own by test_evaluate_journal: 40 tickets routed through
the real OpenAI SDK against the loopback server at argv[1], journaled to argv[2], one row at a
time. The test kills it with SIGKILL part-way, then runs it again to resume."""
import json
import sys

PROMPT = "Route ticket {n}: {message}"
OPTIONS = {"refund": "Refund the order", "escalate": "Hand to a person",
           "ignore": "Nothing to do"}
WORDS = ["refund", "escalate", "ignore"]
N = 40


def rows():
    """A generator: the inputs are read as the run goes, never held whole."""
    for i in range(N):
        yield {"n": i, "message": f"please {WORDS[i % 3]} this" +
               (" (garbled)" if i % 7 == 0 else "")}


if __name__ == "__main__":
    from openprogram import decision
    from openprogram.runtimes import OpenAIRuntime
    rt = OpenAIRuntime(model="test-model", base_url=sys.argv[1], api_key="sk-local",
                       max_retries=0)
    result = decision.evaluate(PROMPT, OPTIONS, rows(), total=N, runtime=rt, concurrency=1,
                               journal=sys.argv[2], progress=False)
    print(json.dumps({"picks": result.picks, "statuses": result.statuses}))
