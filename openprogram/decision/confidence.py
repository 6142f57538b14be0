"""Where a decision's probabilities come from: `confidence=` as a strategy the loop asks.

A decision asked with `confidence=` gets, on each attempt, the model's probability of every
option (the frozen `trace.confidence.Confidence`). What the caller passes names where those
numbers come from, and each is a small class here that owns how an attempt's model call is made
for it: nothing (`NoConfidence`, `confidence=False`, the default: one plain call), the runtime's
own distribution (`RuntimeConfidence`, `confidence=True`: the call passes `confidence=[names]`
and the runtime fills `ModelResponse.confidence`), counted samples (`SampledConfidence`,
`confidence=Samples(n)`: n calls of the same request, the picks counted), or the runtime's own
and samples where it gives none (`FallbackConfidence`, `Samples(n, fallback=True)` on a runtime
that can give a distribution). `confidence_of(value)` picks the class from what the caller
passed; `on(runtime, way)` checks it against the runtime and the way of asking before any model
call (`confidence=True` on a runtime that has no distribution is refused, naming samples). The
decision loop calls `ask(...)` and never tests which source it holds.
"""
from __future__ import annotations

import dataclasses

from ..base.errors import ArgumentError, UsageError
from ..base.model_protocol import add_usage, wrapped
from ..trace.confidence import Samples, from_counts, from_response

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Sequence
    from typing import Any, ClassVar

    from ..base.model_protocol import ModelCaller

__all__ = ["ConfidenceSource", "NoConfidence", "RuntimeConfidence", "SampledConfidence",
           "FallbackConfidence", "NO_CONFIDENCE", "confidence_of", "native_source",
           "check_threshold"]


def native_source(runtime: Any) -> str | None:
    """The distribution `runtime` can give ("exact", "logprobs") or None; a wrapper (a cache, a
    recorder, a batch path) gives what the runtime it wraps gives."""
    for rt in wrapped(runtime):
        if rt.confidence_source is not None:
            return rt.confidence_source
    return None


def _native(runtime: Any, way: Any) -> bool:
    return native_source(runtime) is not None and way.gives_probabilities


_NO_SAMPLES_WITH_TOOLS = (
    "confidence=decision.Samples(n) cannot be drawn in a turn that calls tools (each sample "
    "would run the tools again); ask without tools=, or with confidence=True on a runtime that "
    "gives a distribution (LlamaCppRuntime, OpenAIRuntime)")


class ConfidenceSource:
    """What a decision asks of the model's probabilities (see the module). `given` is the value
    as the caller passed it; `asks` whether the attempts carry a distribution at all; `draws`
    how many model calls one attempt makes at most."""
    given: Any = False
    asks: ClassVar[bool] = True
    draws: int = 1
    #: what kind of distribution the attempts carry, as a pick-set policy is fitted on one:
    #: "native" (the runtime's own numbers), "samples" (counted picks), None (none at all)
    distribution: ClassVar[str | None] = "native"

    @property
    def sample_count(self) -> int | None:
        """How many samples a counted distribution is made of (None for any other)."""
        return None

    def on(self, runtime: Any, way: Any, where: str = "decision.make") -> ConfidenceSource:
        """This source checked against `runtime` and the way of asking (a `Mode` class), before
        any model call: the source the decision uses."""
        return self

    def check_turn(self, tools: Any) -> None:
        """Refuse, before the turn starts, what this source cannot do in a turn with tools."""

    def fingerprint(self) -> Any:
        """What a journal keeps of this setting (None: nothing asked)."""
        return self.given

    async def ask(self, d: Any, rt: ModelCaller, messages: list[dict[str, Any]],
                  extra: dict[str, Any], on_text: Callable[[str], None] | None,
                  specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any, str | None]:
        """One attempt's model call on `rt` for the decision `d` (a `Decider`): `(response,
        node, Confidence or None, why there is none when one was asked for, or None)`."""
        resp, node = await d.call_once(rt, messages, extra, on_text)
        return resp, node, None, None

    def __repr__(self) -> str:
        return repr(self.given)


class NoConfidence(ConfidenceSource):
    """`confidence=False`: one plain call, no distribution."""
    asks = False
    distribution = None

    def fingerprint(self) -> Any:
        return None


class RuntimeConfidence(ConfidenceSource):
    """`confidence=True`: the runtime's own distribution (LlamaCppRuntime's exact one, a
    server's token log-probabilities); a reply without one fails as `no_confidence`."""
    given = True

    def on(self, runtime: Any, way: Any, where: str = "decision.make") -> ConfidenceSource:
        if runtime is None or runtime.staged or _native(runtime, way):
            return self
        why = (" In mode='tools' the providers return no log-probabilities for a native tool "
               "call." if not way.gives_probabilities and native_source(runtime) else "")
        raise UsageError(
            f"{where}(confidence=True): runtime {runtime.name or type(runtime).__name__!r} "
            f"cannot give the probability of each option (only LlamaCppRuntime and "
            f"OpenAIRuntime can, in mode 'menu' or 'json_schema').{why} Draw samples instead: "
            f"confidence=decision.Samples(n), e.g. decision.Samples(5), which asks the same "
            f"request n times and counts the picks.")

    async def ask(self, d: Any, rt: ModelCaller, messages: list[dict[str, Any]],
                  extra: dict[str, Any], on_text: Callable[[str], None] | None,
                  specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any, str | None]:
        resp, node = await d.call_once(rt, messages, {**extra, "confidence": d.names}, on_text)
        if resp.confidence is not None:
            return resp, node, from_response(resp.confidence, d.names), None
        return await self.without(d, rt, messages, extra, on_text, specs, resp, node)

    async def without(self, d: Any, rt: ModelCaller, messages: list[dict[str, Any]],
                      extra: dict[str, Any], on_text: Callable[[str], None] | None,
                      specs: list[dict[str, Any]] | None, resp: Any,
                      node: Any) -> tuple[Any, Any, Any, str | None]:
        """A reply that came without the runtime's distribution: the attempt fails."""
        negotiated = (resp.raw or {}).get("negotiated") if isinstance(resp.raw, dict) else None
        why = f" (the server's answer: {negotiated})" if negotiated else ""
        return resp, node, None, (
            f"runtime {rt.name or type(rt).__name__!r} returned no probabilities for this "
            f"reply{why}; ask with confidence=decision.Samples(5, fallback=True) to draw "
            f"samples when it gives none")


class SampledConfidence(ConfidenceSource):
    """`confidence=Samples(n)`: n replies to the same request, each its own call (its index
    goes with the request as `sample=`, so a cache or a cassette keeps each apart), concurrently
    on the async path. The reply that resolves is the first drawn of the most frequent pick;
    the tokens are those of all n."""

    distribution = "samples"

    def __init__(self, samples: Samples) -> None:
        self.given = self.samples = samples
        self.draws = samples.n

    @property
    def sample_count(self) -> int | None:
        return self.samples.n

    def on(self, runtime: Any, way: Any, where: str = "decision.make") -> ConfidenceSource:
        if self.samples.fallback and runtime is not None and _native(runtime, way):
            return FallbackConfidence(self.samples)
        return self

    def check_turn(self, tools: Any) -> None:
        if tools:
            raise UsageError(
                "agent(options=..., confidence=decision.Samples(n)) cannot draw samples of a "
                "turn that calls tools (each sample would run the tools again); drop tools=, or "
                "use confidence=True on a runtime that gives a distribution (LlamaCppRuntime, "
                "OpenAIRuntime)")

    def fingerprint(self) -> Any:
        s = self.samples
        return {"samples": s.n, "temperature": s.temperature, "fallback": s.fallback}

    async def ask(self, d: Any, rt: ModelCaller, messages: list[dict[str, Any]],
                  extra: dict[str, Any], on_text: Callable[[str], None] | None,
                  specs: list[dict[str, Any]] | None) -> tuple[Any, Any, Any, str | None]:
        if specs:
            raise UsageError(_NO_SAMPLES_WITH_TOOLS)
        s = self.samples
        base = {k: v for k, v in extra.items() if k != "confidence"}
        # `samples=` lets a runtime that can draw the n in one request (OpenAI's n=) do so
        calls = [(on_text if i == 0 else None, {**base, "sample": i, "samples": s.n,
                                                 "temperature": s.temperature})
                 for i in range(s.n)]
        if d.sync:
            got = [rt.call_model(messages, on_text=show, deadline=d.deadline, **kw)
                   for show, kw in calls]
        else:
            import asyncio
            tasks = [asyncio.ensure_future(rt.acall_model(messages, on_text=show,
                                                          deadline=d.deadline, **kw))
                     for show, kw in calls]
            try:
                got = await asyncio.gather(*tasks)
            except BaseException:  # one sample failed (or the decision was cancelled): the
                for t in tasks:     # others are not left running on their own
                    t.cancel()
                raise
        conf, i = from_counts([d.named(r) for r, _ in got], d.names)
        resp, node = got[i]
        # a copy: a scripted runtime may hand out the same response object again
        resp = dataclasses.replace(resp, usage=add_usage([r.usage for r, _ in got]),
                                   cached=all(r.cached for r, _ in got))
        return resp, node, conf, None


class FallbackConfidence(RuntimeConfidence):
    """`Samples(n, fallback=True)` on a runtime that can give a distribution: its own, and the
    samples drawn in its place for a reply that came without one."""

    def __init__(self, samples: Samples) -> None:
        self.given = self.samples = samples
        self.draws = samples.n
        self._draw = SampledConfidence(samples)

    def fingerprint(self) -> Any:
        return self._draw.fingerprint()

    async def without(self, d: Any, rt: ModelCaller, messages: list[dict[str, Any]],
                      extra: dict[str, Any], on_text: Callable[[str], None] | None,
                      specs: list[dict[str, Any]] | None, resp: Any,
                      node: Any) -> tuple[Any, Any, Any, str | None]:
        spent = resp.usage
        resp, node, conf, _ = await self._draw.ask(d, rt, messages, extra, on_text, specs)
        return dataclasses.replace(resp, usage=add_usage([spent, resp.usage])), node, conf, None


NO_CONFIDENCE = NoConfidence()
_RUNTIME = RuntimeConfidence()


def confidence_of(value: Any, where: str = "decision.make") -> ConfidenceSource:
    """`confidence=` as the source it names: False or None (nothing), True (the runtime's own
    distribution) or a `decision.Samples(n)`; checked before any model call."""
    if value is None or value is False:
        return NO_CONFIDENCE
    if value is True:
        return _RUNTIME
    if isinstance(value, ConfidenceSource):
        return value
    if isinstance(value, Samples):
        return SampledConfidence(value)
    raise UsageError(f"{where}(confidence=...) takes True, False or decision.Samples(n), got "
                     f"{value!r}")


def check_threshold(min_confidence: Any, low_confidence: Any, source: ConfidenceSource,
                    names: Sequence[str] | None = None, where: str = "decision.make",
                    pick_set: Any = None) -> None:
    """`min_confidence=` in (0, 1] and `low_confidence=` naming an option of the menu (checked
    when `names` are given); both need `confidence=`. With a `pick_set=` policy (the other
    threshold a decision can have, calibrated), `low_confidence=` goes with it, and
    `min_confidence=` is refused: one decision, one threshold."""
    if pick_set is not None:
        if min_confidence is not None:
            raise UsageError(f"{where}(pick_set=..., min_confidence={min_confidence!r}): a "
                             f"decision takes one threshold; the pick set's is calibrated "
                             f"(at least {1 - pick_set.alpha:.0%} of sets hold the right "
                             f"option), so drop min_confidence=")
        _check_low_option(low_confidence, names, where, "when the pick set is not the pick alone")
        return
    if min_confidence is None:
        if low_confidence is not None:
            raise UsageError(f"{where}(low_confidence={low_confidence!r}) needs min_confidence=, "
                             f"the probability below which that option is taken instead, "
                             f"e.g. min_confidence=0.7")
        return
    m = min_confidence
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 < m <= 1:
        raise ArgumentError(f"{where}(min_confidence=...) must be a probability in (0, 1], "
                            f"e.g. 0.7, got {m!r}")
    if not source.asks:
        raise UsageError(f"{where}(min_confidence={m!r}) needs confidence=True (or "
                         f"confidence=decision.Samples(n)): the threshold is on the "
                         f"probability of the pick")
    _check_low_option(low_confidence, names, where, "instead of a pick below min_confidence")


def _check_low_option(low_confidence: Any, names: Sequence[str] | None, where: str,
                      when: str) -> None:
    """`low_confidence=` names an option of the menu (when `names` are given); `when` says
    when that option is resolved, for the error."""
    if names is not None and low_confidence is not None and low_confidence not in names:
        raise ArgumentError(f"{where}(low_confidence={low_confidence!r}) names no option of the "
                            f"menu; it must be one of {', '.join(map(repr, names))} (the option "
                            f"to resolve {when})")
