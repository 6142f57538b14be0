"""OpenTelemetry spans for decisions, following the GenAI semantic conventions.

`openprogram.otel.instrument(tracer_provider=None)` observes every decision of the process and
turns it into spans: one span per decision (`decision <entry>`, with the options, the pick, the
error kinds and the status), one child span per attempt named and attributed as a GenAI
inference span (`chat <model>`: `gen_ai.operation.name`, `gen_ai.provider.name`,
`gen_ai.request.model`, `gen_ai.usage.input_tokens` / `output_tokens`,
`gen_ai.response.finish_reasons`, plus the attempt's error kind), and one parent span per
`evaluate` / `compare` run. Message content (prompts, replies, tool arguments) is recorded only
when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, as the conventions ask; API keys
never (the provider runtimes redact them before any event, also where JSON escapes spell them,
and the pick is redacted again once decoded). When the OpenAI or Anthropic SDK's
own OpenTelemetry instrumentation is active, it reports the model call: the attempt span is then
an internal span under which the SDK's `chat` span nests, so no call is reported twice.

Works as a call (`instrument()`, undone by `uninstrument()`) and as a context manager
(`with instrument(...):`). Needs the `otel` extra: `pip install 'openprogram-decisions[otel]'`.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any

from .base.text import cut
from .trace import decision_trace as _trace
from .trace.decision_trace import TraceEvent

__all__ = ["instrument", "uninstrument", "Instrumentation", "CAPTURE_ENV"]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_SCOPE = "openprogram"
_CONTENT_LIMIT = 16_000


def _otel():
    try:
        from opentelemetry import context, trace
    except ImportError:
        raise ImportError("openprogram.otel needs OpenTelemetry: pip install "
                          "'openprogram-decisions[otel]'") from None
    return context, trace


def _capture() -> bool:
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def _sdk_reports_model_calls() -> bool:
    """Whether an OpenAI / Anthropic SDK instrumentation of OpenTelemetry is active."""
    try:
        from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
    except ImportError:
        return False
    stack = list(BaseInstrumentor.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        mod = cls.__module__.lower()
        if ("openai" in mod or "anthropic" in mod) and \
                getattr(cls, "_instance", None) is not None and \
                getattr(cls._instance, "_is_instrumented_by_opentelemetry", False):
            return True
    return False


def _text(value: Any) -> str:
    s = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    return cut(s, _CONTENT_LIMIT, "...[cut]")


class Instrumentation:
    """An active instrumentation: an observer that keeps one span per running decision and
    attempt. `uninstrument()` (or leaving the `with` block) removes it."""

    def __init__(self, tracer_provider: Any = None):
        _, trace = _otel()
        self.tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        self._decisions: dict[int, Any] = {}
        self._attempts: dict[int, tuple[Any, Any]] = {}  # trace id -> (span, context token)
        self._lock = threading.Lock()
        self._batches: list = []
        _trace.add_observer(self)
        _trace.register_batch_hook(self._batch)

    # -- the observer -------------------------------------------------------------------------
    def __call__(self, event: TraceEvent) -> None:
        handler = getattr(self, "_on_" + event.kind, None)
        if handler is not None:
            handler(event)

    def _on_decision_started(self, e: TraceEvent) -> None:
        _, trace = _otel()
        t = e.trace
        span = self.tracer.start_span(f"decision {t.entry}", attributes={
            "openprogram.decision.id": t.id, "openprogram.decision.entry": t.entry,
            "openprogram.decision.mode": t.mode,
            "openprogram.decision.options": [o["name"] for o in t.options],
            "openprogram.decision.max_attempts": t.max_attempts,
            **({"openprogram.runtime": t.runtime} if t.runtime else {})})
        with self._lock:
            self._decisions[t.id] = span

    def _on_attempt_sent(self, e: TraceEvent) -> None:
        context, trace = _otel()
        t, att = e.trace, e.attempt
        with self._lock:
            parent = self._decisions.get(t.id)
        if parent is None:
            return
        ctx = trace.set_span_in_context(parent)
        model = t.model or t.runtime or "unknown"
        if _sdk_reports_model_calls():
            # The SDK's instrumentation makes the GenAI span of the call; ours only groups it.
            span = self.tracer.start_span(f"attempt {att.number}", context=ctx, attributes={
                "openprogram.attempt.number": att.number})
        else:
            span = self.tracer.start_span(f"chat {model}", context=ctx,
                                          kind=trace.SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": t.provider or "openprogram",
                "gen_ai.request.model": model,
                "openprogram.attempt.number": att.number})
        if _capture():
            span.set_attribute("gen_ai.input.messages", _text(
                [{"role": "user", "parts": [{"type": "text", "content": att.prompt}]}]))
        # The attempt span is current while the model is called (same thread or task), so an
        # SDK's own spans nest under it.
        token = context.attach(trace.set_span_in_context(span))
        with self._lock:
            self._attempts[t.id] = (span, token)

    def _on_reply_received(self, e: TraceEvent) -> None:
        span = self._attempt_span(e)
        att = e.attempt
        if span is None:
            return
        usage = att.usage or {}
        for key in ("input_tokens", "output_tokens"):
            if usage.get(key) is not None:
                span.set_attribute(f"gen_ai.usage.{key}", int(usage[key]))
        span.set_attribute("gen_ai.response.finish_reasons", [att.finish_reason or "stop"])
        if _capture():
            parts = [{"type": "text", "content": att.reply if isinstance(att.reply, str)
                      else repr(att.reply)}]
            parts += [{"type": "tool_call", "name": c.get("name"), "arguments": c.get("args")}
                      for c in att.tool_calls or []]
            span.set_attribute("gen_ai.output.messages",
                               _text([{"role": "assistant", "parts": parts}]))

    def _on_validated(self, e: TraceEvent) -> None:
        self._end_attempt(e, None)

    def _on_attempt_failed(self, e: TraceEvent) -> None:
        self._end_attempt(e, e.attempt.error_kind)

    def _on_resolved(self, e: TraceEvent) -> None:
        self._end_decision(e, None)

    def _on_decision_failed(self, e: TraceEvent) -> None:
        self._end_decision(e, e.data.get("error"))

    # -- helpers ------------------------------------------------------------------------------
    def _attempt_span(self, e: TraceEvent):
        with self._lock:
            entry = self._attempts.get(e.trace.id)
        return entry[0] if entry else None

    def _end_attempt(self, e: TraceEvent, error_kind: str | None) -> None:
        context, trace = _otel()
        with self._lock:
            entry = self._attempts.pop(e.trace.id, None)
        if entry is None:
            return
        span, token = entry
        if error_kind:
            span.set_attribute("openprogram.attempt.error_kind", error_kind)
            span.set_attribute("error.type", error_kind)
            span.set_status(trace.Status(trace.StatusCode.ERROR, e.attempt.error_message or ""))
        elif e.attempt.chosen:
            span.set_attribute("openprogram.attempt.pick", e.attempt.chosen)
        conf = getattr(e.attempt, "confidence", None)
        if conf is not None:  # how sure: numbers and option names only, never content
            span.set_attribute("openprogram.attempt.confidence.source", conf.source)
            if conf.p_pick is not None:
                span.set_attribute("openprogram.attempt.confidence.p_pick", conf.p_pick)
            if conf.margin is not None:
                span.set_attribute("openprogram.attempt.confidence.margin", conf.margin)
            span.set_attribute("openprogram.attempt.confidence.entropy", conf.entropy)
        span.end()
        try:
            context.detach(token)
        except Exception:  # ended from another context (a worker thread): nothing to restore
            pass

    def _end_decision(self, e: TraceEvent, error: Any) -> None:
        _, trace = _otel()
        if e.trace.id in self._attempts:  # ended mid-attempt (a model error, Ctrl-C)
            self._end_attempt(e, getattr(error, "kind", None) or type(error).__name__)
        with self._lock:
            span = self._decisions.pop(e.trace.id, None)
        if span is None:
            return
        t = e.trace
        span.set_attribute("openprogram.decision.status", t.status)
        span.set_attribute("openprogram.decision.attempts", len(t.attempts))
        span.set_attribute("openprogram.decision.error_kinds", [k for k in t.error_kinds])
        if t.status == "resolved" and t.chosen:
            span.set_attribute("openprogram.decision.pick", t.chosen)
        if error is not None:
            span.set_attribute("error.type", getattr(error, "kind", None) or type(error).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)[:500]))
        span.end()

    def _batch(self, kind: str, name: str | None, attrs: dict):
        """A parent span around an evaluate / compare run (a batch hook of decision_trace.py)."""
        _, trace = _otel()
        return self.tracer.start_as_current_span(
            f"{kind} {name}" if name else kind,
            attributes={f"openprogram.{kind}.{k}": v for k, v in attrs.items()})

    def uninstrument(self) -> None:
        _trace.remove_observer(self)
        _trace.register_batch_hook(self._batch, remove=True)
        global _active
        if _active is self:
            _active = None

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc) -> None:
        self.uninstrument()


_active: Instrumentation | None = None


def instrument(tracer_provider: Any = None) -> Instrumentation:
    """Report every decision as OpenTelemetry spans (see the module doc). Calling it again
    replaces the active instrumentation."""
    global _active
    if _active is not None:
        _active.uninstrument()
    _active = Instrumentation(tracer_provider)
    return _active


def uninstrument() -> None:
    """Stop reporting decisions as spans."""
    if _active is not None:
        _active.uninstrument()
