"""`%%decide ... --pick-set POLICY --low-confidence OPTION` (issue 53): the magic decides with a
calibrated pick set as `decision.make(pick_set=)` does; a name that is not a policy is a
UsageError naming the flag."""
from IPython.core.error import UsageError
from widgethelp import error_of

SETUP = '''
import json, re
from openprogram import ModelResponse, Runtime
class Exact(Runtime):
    confidence_source = "exact"
    def __init__(self, table):
        super().__init__(name="exact-stub")
        self.table = table
    def complete(self, messages, *, confidence=None, **kw):
        probs = self.table[int(re.search(r"ticket (\\d+)", messages[-1]["content"]).group(1))]
        return ModelResponse(text=json.dumps({"call": max(probs, key=probs.get)}),
                             confidence={"probs": probs, "other": 0.0, "source": "exact"})
OPTS = {"a": ("A", "first"), "b": ("B", "second"), "human": ("HUMAN", "a person")}
table = [{"a": p, "b": 1 - p, "human": 0.0} for p in (0.9, 0.8, 0.95, 0.7, 0.85)]
table += [{"a": 0.97, "b": 0.03, "human": 0.0}, {"a": 0.5, "b": 0.5, "human": 0.0}]
rt = Exact(table)
fitted = decision.evaluate("Route ticket {x}.", OPTS, [{"x": i} for i in range(5)], runtime=rt,
                           expected=["a"] * 5, confidence=True, progress=False)
policy = fitted.conformal(alpha=0.2)
'''


def test_decide_takes_a_pick_set(shell):
    r = shell.run_cell(SETUP)
    assert r.success, error_of(r)
    r = shell.run_cell("%%decide OPTS -r rt --pick-set policy --low-confidence human\n"
                       "Route ticket 5.\n")
    assert r.success, error_of(r)
    assert r.result == "A"   # p(a) = 0.97 alone clears the threshold, 0.7
    r = shell.run_cell("%%decide OPTS -r rt --pick-set policy --low-confidence human --as got\n"
                       "Route ticket 6.\n")
    assert r.result == "HUMAN" == shell.user_ns["got"]
    trace = shell.run_cell("decision.last_trace()").result
    assert trace.confidence.pick_set == ()   # neither 0.5 clears it
    assert trace.attempts[-1].low_pick == "a"
    err = error_of(shell.run_cell("%%decide OPTS -r rt --pick-set table\nRoute ticket 5.\n"))
    assert isinstance(err, UsageError)
    assert "--pick-set 'table' is a list" in str(err) and "result.conformal(alpha)" in str(err)
