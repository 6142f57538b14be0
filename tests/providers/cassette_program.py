"""A small program run twice by test_cassette: live against the fake server through a
RecordingRuntime, then in a fresh process on a ReplayRuntime with the server stopped. `run(rt)`
returns everything observable (results, errors, traces and DAG without times and ids) as JSON
data, so the two runs can be compared for equality."""
import json
import sys

from openprogram import DecisionError, agent, decision, observe

VOLATILE = {"id", "started_at", "duration_s", "model_call_id"}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


def run(rt) -> dict:
    out = {"results": [], "traces": [], "chunks": 0}

    def count(event):
        if event.kind == "reply_chunk":
            out["chunks"] += 1

    with observe(count):
        out["results"].append(agent("Say hello.", runtime=rt))
        out["results"].append(decision.make("Refund or escalate? Pick one.",
                                            ["refund", "escalate"], runtime=rt))
        out["traces"].append(decision.last_trace().to_dict())
        out["results"].append(agent("Where is order 42?", tools=[lookup],
                                    choices={"tell": "told", "apologise": "sorry"},
                                    runtime=rt))
        out["traces"].append(decision.last_trace().to_dict())
        try:
            decision.make("Pick one.", ["a", "b"], runtime=rt)
        except DecisionError as err:
            out["results"].append({"error": str(err)})
            out["traces"].append(err.trace.to_dict())
    out["dag"] = [{k: v for k, v in n.to_dict().items() if k not in VOLATILE}
                  for n in rt.dag.nodes]
    return _stable(out)


if __name__ == "__main__":
    from openprogram.runtimes import ReplayRuntime
    print(json.dumps(run(ReplayRuntime(sys.argv[1]))))
