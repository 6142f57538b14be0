"""`CascadeRuntime([small, large], min_confidence=0.8)`: ask a small model first, and a larger one
only when the small one is unsure of its pick.

Each decision made on a cascade asks its first runtime with the probability of every option
(`confidence=True` where that runtime gives one, or `decision.Samples(n)` given as
`confidence=`); when the probability of the pick is at least `min_confidence` that reply is the
decision's, otherwise the next runtime is asked the same request, and so on to the last, whose
reply stands whatever its probability. The cascade drives its stages through the protocol the
decision loop calls every runtime by (`ModelCaller.staged`, `answer_in_stages`): the loop hands
it a function that asks one stage and reads the pick and its probability from the reply (only
the decision knows how its way of asking reads a pick), and the cascade decides which stages to
ask. Every stage asked is on the attempt (`attempt.cascade`: runtime, pick, p_pick, tokens) and
`evaluate` counts how many rows each runtime answered and the tokens each spent
(`EvaluationResult.cascade_counts`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..base.errors import ArgumentError, UsageError
from ..base.model_protocol import ModelCaller, ModelResponse, add_usage
from ..decision.confidence import (
    NO_CONFIDENCE,
    RuntimeConfidence,
    SampledConfidence,
    native_source,
)
from ..decision.modes import MenuMode
from ..runtime.runtime import DAG, Runtime
from ..trace.confidence import Samples

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
        stages: list[tuple[Any, Any]] = []
        for k, rt in enumerate(self.runtimes):
            last = k == len(self.runtimes) - 1
            if native_source(rt) is not None:
                source: Any = RuntimeConfidence()
            elif isinstance(confidence, Samples) and not last:
                source = SampledConfidence(confidence)
            elif last:
                source = NO_CONFIDENCE   # its reply stands: asked plainly
            else:   # refused, naming Samples
                source = RuntimeConfidence().on(rt, MenuMode, "CascadeRuntime")
            stages.append((rt, source))
        #: Each stage: its runtime and where its probabilities come from.
        self.stages = stages
        super().__init__(call=_no_direct_call, name=name or
                         "cascade(" + ", ".join(str(r.name) for r in runtimes) + ")")
        self.dag = DAG()

    staged = True

    async def answer_in_stages(self, ask: Any) -> tuple[ModelResponse, Any, Any,
                                                         list[dict[str, Any]]]:
        """Each stage asked in turn until one is sure enough of its pick (`min_confidence`),
        the last one's reply standing whatever its probability. Every stage asked is recorded,
        with its tokens; the attempt's tokens are all of theirs."""
        asked: list[dict[str, Any]] = []
        spent = []
        for k, (rt, source) in enumerate(self.stages):
            last = k == len(self.stages) - 1
            got = await ask(rt, source, k == 0)
            resp, conf, p = got.response, got.confidence, got.p_pick
            spent.append(resp.usage)
            asked.append({"runtime": rt.name, "pick": got.pick, "p_pick": p,
                          "answered": False, "usage": dict(resp.usage) if resp.usage else None,
                          "confidence": conf.to_dict() if conf is not None else None})
            if last or (p is not None and p >= self.min_confidence):
                asked[-1]["answered"] = True
                return (dataclasses.replace(resp, usage=add_usage(spent)), got.node, conf,
                        asked)
        raise RuntimeError("internal error: a cascade with no stage")

    @property
    def modes(self) -> frozenset:
        """The ways of asking every stage can do."""
        out = None
        for rt in self.runtimes:
            m = frozenset(rt.modes)
            out = m if out is None else out & m
        return out or frozenset()

    @property
    def model(self) -> str | None:
        return " → ".join(str(r.model or r.name or "?") for r in self.runtimes)

    @model.setter
    def model(self, value: Any) -> None:  # Runtime.__init__ sets it; the stages' names stand
        pass

    def __repr__(self) -> str:
        return (f"CascadeRuntime({self.runtimes!r}, min_confidence={self.min_confidence})")


def _no_direct_call(content: Any) -> Any:
    raise UsageError("a CascadeRuntime answers decisions (decision.make, evaluate, "
                     "agent(options=)): it needs the pick's probability to know whether to ask "
                     "the next runtime; for a plain turn call one of its runtimes")
