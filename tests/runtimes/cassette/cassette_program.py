"""A small program run twice by test_cassette: live against the fake server through a
RecordingRuntime, then in a fresh process on a ReplayRuntime with the server stopped. `run(rt)`
(the menu mode) and `run_modes(rt)` (the tools and json_schema modes, an async decision, a
refusal and a cut-off reply) return everything observable (results, errors, traces with their
raw records, and the DAG, without times and ids) as JSON data, so the two runs can be compared
for equality."""
import asyncio
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


def _observed(rt, steps) -> dict:
    """Run `steps(out)` counting streamed chunks; everything observable, without times and
    ids."""
    out = {"results": [], "traces": [], "chunks": 0}

    def count(event):
        if event.kind == "reply_chunk":
            out["chunks"] += 1

    with observe(count):
        steps(out)
    out["dag"] = [{k: v for k, v in n.to_dict().items() if k not in VOLATILE}
                  for n in rt.dag.nodes]
    return _stable(out)


def run(rt) -> dict:
    def steps(out):
        out["results"].append(agent("Say hello.", runtime=rt))
        out["results"].append(decision.make("Refund or escalate? Pick one.",
                                            ["refund", "escalate"], runtime=rt))
        out["traces"].append(decision.last_trace().to_dict())
        out["results"].append(agent("Where is order 42?", tools=[lookup],
                                    options={"tell": "told", "apologise": "sorry"},
                                    runtime=rt))
        out["traces"].append(decision.last_trace().to_dict())
        try:
            decision.make("Pick one.", ["a", "b"], runtime=rt)
        except DecisionError as err:
            out["results"].append({"error": str(err)})
            out["traces"].append(err.trace.to_dict())
    return _observed(rt, steps)


def greet(name: str, loud: bool = False) -> str:
    """Greet someone."""
    return f"hello {name}" + ("!" if loud else "")


OPTIONS = {"greet": greet, "done": ("DONE", "nothing left to do"),
           "note": ("Write a note.", {"text": str})}


def run_modes(rt) -> dict:
    def steps(out):
        def keep(result):
            out["results"].append(result)
            out["traces"].append(decision.last_trace().to_dict())
        keep(decision.make("Greet Ada.", OPTIONS, runtime=rt, mode="tools"))
        keep(decision.make("Greet Bo.", OPTIONS, runtime=rt, mode="json_schema"))
        keep(agent("Where is order 42?", tools=[lookup], options=OPTIONS, runtime=rt,
                   mode="tools"))
        keep(asyncio.run(decision.amake("Anything left?", OPTIONS, runtime=rt,
                                        mode="json_schema")))
        try:
            decision.make("Greet someone.", OPTIONS, runtime=rt, mode="tools")
        except DecisionError as err:
            out["results"].append({"error": [a.error_kind for a in err.trace.attempts]})
            out["traces"].append(err.trace.to_dict())
        out["results"].append(agent("Say hi.", runtime=rt))
    return _observed(rt, steps)


if __name__ == "__main__":
    from openprogram.runtimes import ReplayRuntime
    program = run_modes if sys.argv[2:] == ["modes"] else run
    print(json.dumps(program(ReplayRuntime(sys.argv[1]))))
