"""`CascadeRuntime([small, large], min_confidence=0.8)`: ask a small model first, and a larger one
only when the small one is unsure of its pick.

Each decision made on a cascade asks its first runtime with the probability of every option
(`confidence=True` where that runtime gives one, or `decision.Samples(n)` given as
`confidence=`); when the probability of the pick is at least `min_confidence` that reply is the
decision's, otherwise the next runtime is asked the same request, and so on to the last, whose
reply stands whatever its probability. The decision loop runs the stages (it alone knows how
the way of asking reads a pick from a reply): it reads `cascade_stages` from the runtime, so
this module only holds the runtimes and checks them. Every stage asked is on the attempt
(`attempt.cascade`: runtime, pick, p_pick, tokens) and `evaluate` counts how many rows each
runtime answered and the tokens each spent (`EvaluationResult.cascade_counts`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base.errors import ArgumentError, UsageError
from ..base.model_protocol import ModelCaller
from ..runtime.runtime import DAG, Runtime
from ..trace.confidence import Samples, check_confidence, confidence_source

__all__ = ["CascadeRuntime"]


class CascadeRuntime(Runtime):
    """Ask `runtimes[0]` first and each next one only while the pick's probability is below
    `min_confidence`. `confidence=True` (default) uses each runtime's own distribution;
    `confidence=decision.Samples(n)` draws samples on the runtimes that have none."""

    def __init__(self, runtimes: Sequence[Any], *, min_confidence: float,
                 confidence: Any = True, name: str | None = None):
        if not isinstance(runtimes, (list, tuple)) or len(runtimes) < 2:
            raise UsageError("CascadeRuntime takes a list of two or more runtimes, the "
                             "cheapest first: CascadeRuntime([small, large], min_confidence=0.8)")
        for rt in runtimes:
            if not isinstance(rt, ModelCaller):
                raise UsageError(f"CascadeRuntime: {rt!r} is not an openprogram Runtime; wrap "
                                 f"a model function with Runtime(call=fn)")
        m = min_confidence
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 < m <= 1:
            raise ArgumentError(f"CascadeRuntime(min_confidence=...) must be a probability in "
                                f"(0, 1], e.g. 0.8, got {m!r}")
        if confidence is not True and not isinstance(confidence, Samples):
            raise UsageError(f"CascadeRuntime(confidence=...) takes True or "
                             f"decision.Samples(n), got {confidence!r}")
        self.runtimes = list(runtimes)
        self.min_confidence = float(m)
        # what each stage is asked for: every stage but the last must say how sure it is; the
        # last one's reply stands, so it is asked for its distribution only where that is free
        stages = []
        for k, rt in enumerate(self.runtimes):
            last = k == len(self.runtimes) - 1
            own = confidence_source(rt) is not None
            if own:
                ask = check_confidence(True, rt, where="CascadeRuntime")
            elif isinstance(confidence, Samples) and not last:
                ask = check_confidence(confidence, rt, where="CascadeRuntime")
            elif last:
                ask = None
            else:
                check_confidence(True, rt, where="CascadeRuntime")  # raises, naming Samples
            stages.append((rt, ask))
        self.cascade_stages = stages
        super().__init__(call=_no_direct_call, name=name or
                         "cascade(" + ", ".join(str(getattr(r, "name", r)) for r in runtimes) + ")")
        self.dag = DAG()

    @property
    def modes(self) -> frozenset:
        """The ways of asking every stage can do."""
        out = None
        for rt in self.runtimes:
            m = frozenset(getattr(rt, "modes", frozenset({"menu"})))
            out = m if out is None else out & m
        return out or frozenset()

    @property
    def model(self) -> str | None:
        return " → ".join(str(getattr(r, "model", None) or getattr(r, "name", "?"))
                          for r in self.runtimes)

    @model.setter
    def model(self, value: Any) -> None:  # Runtime.__init__ sets it; the stages' names stand
        pass

    def __repr__(self) -> str:
        return (f"CascadeRuntime({self.runtimes!r}, min_confidence={self.min_confidence})")


def _no_direct_call(content: Any) -> Any:
    raise UsageError("a CascadeRuntime answers decisions (decision.make, evaluate, "
                     "agent(options=)): it needs the pick's probability to know whether to ask "
                     "the next runtime; for a plain turn call one of its runtimes")
