"""OpenTelemetry spans of decisions, read back with the SDK's in-memory exporter."""
from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openprogram import DecisionError, Runtime, decision, otel
from openprogram.runtimes import ScriptedRuntime


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with otel.instrument(tracer_provider=provider):
        yield exporter
    assert otel._active is None


def by_name(exporter):
    return {s.name: s for s in exporter.get_finished_spans()}


def test_a_decision_span_with_attempt_spans_as_children(spans, monkeypatch):
    monkeypatch.delenv(otel.CAPTURE_ENV, raising=False)
    rt = ScriptedRuntime(["no pick here", '{"call": "yes"}'], model="scripted-1")
    assert decision.make("Secret prompt?", ["yes", "no"], runtime=rt) == "yes"
    finished = spans.get_finished_spans()
    dec = [s for s in finished if s.name == "decision make"][0]
    chats = [s for s in finished if s.name == "chat scripted-1"]
    assert len(chats) == 2 and all(c.parent.span_id == dec.context.span_id for c in chats)
    first, second = sorted(chats, key=lambda s: s.attributes["openprogram.attempt.number"])
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "scripted-1"
    assert first.attributes["gen_ai.provider.name"] == "openprogram"
    assert first.attributes["gen_ai.usage.input_tokens"] > 0
    assert first.attributes["gen_ai.usage.output_tokens"] == 3
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert first.attributes["openprogram.attempt.error_kind"] == "no_action"
    assert second.attributes["openprogram.attempt.pick"] == "yes"
    assert dec.attributes["openprogram.decision.pick"] == "yes"
    assert dec.attributes["openprogram.decision.status"] == "resolved"
    assert tuple(dec.attributes["openprogram.decision.options"]) == ("yes", "no")
    assert tuple(dec.attributes["openprogram.decision.error_kinds"]) == ("no_action",)
    # No content by default: neither the prompt nor the reply is anywhere in the spans.
    dump = json.dumps([dict(s.attributes) for s in finished], default=str)
    assert "Secret prompt" not in dump and "no pick here" not in dump


def test_content_only_when_opted_in_and_never_a_key(spans, monkeypatch):
    monkeypatch.setenv(otel.CAPTURE_ENV, "true")
    rt = ScriptedRuntime(['Thinking. {"call": "yes"}'], model="m")
    decision.make("Which one?", ["yes", "no"], runtime=rt)
    chat = by_name(spans)["chat m"]
    assert "Which one?" in chat.attributes["gen_ai.input.messages"]
    out = json.loads(chat.attributes["gen_ai.output.messages"])
    assert out[0]["role"] == "assistant" and "Thinking." in out[0]["parts"][0]["content"]


def test_a_failed_decision_has_an_error_status_and_kinds(spans):
    with pytest.raises(DecisionError):
        decision.make("Pick.", ["a"], runtime=ScriptedRuntime(["x", "y"]))
    dec = by_name(spans)["decision make"]
    assert dec.status.status_code.name == "ERROR"
    assert dec.attributes["openprogram.decision.status"] == "failed"
    assert dec.attributes["error.type"] == "no_action"


def test_async_decisions_get_their_own_spans(spans):
    async def model(content):
        await asyncio.sleep(0.01)
        return '{"call": "a"}'
    rt = Runtime(call=model, model="async-m")

    async def main():
        await asyncio.gather(*(decision.amake("Pick.", ["a", "b"], runtime=rt)
                               for _ in range(5)))
    asyncio.run(main())
    finished = spans.get_finished_spans()
    decisions = [s for s in finished if s.name == "decision make"]
    chats = [s for s in finished if s.name == "chat async-m"]
    assert len(decisions) == 5 and len(chats) == 5
    assert {c.parent.span_id for c in chats} == {d.context.span_id for d in decisions}


def test_evaluate_is_one_parent_span(spans):
    rt = ScriptedRuntime(rule=lambda p: '{"call": "a"}')
    decision.evaluate("Row {i}", ["a", "b"], [{"i": i} for i in range(3)], runtime=rt,
                      progress=False, concurrency=2)
    finished = spans.get_finished_spans()
    (run,) = [s for s in finished if s.name.startswith("evaluate")]
    decisions = [s for s in finished if s.name == "decision make"]
    assert len(decisions) == 3 and all(d.parent.span_id == run.context.span_id
                                       for d in decisions)


def test_uninstrument_stops_reporting():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    otel.uninstrument()
    decision.make("Pick.", ["a"], runtime=ScriptedRuntime(['{"call": "a"}']))
    assert exporter.get_finished_spans() == ()


def test_with_an_sdk_instrumentation_active_the_attempt_is_not_a_second_chat_span(spans):
    # An OpenAI SDK instrumentor (a real BaseInstrumentor, as opentelemetry-instrumentation-
    # openai-v2 is) that is active: it reports the model call, so ours only groups it.
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

    class OpenAIInstrumentor(BaseInstrumentor):
        def instrumentation_dependencies(self):
            return []

        def _instrument(self, **kwargs):
            pass

        def _uninstrument(self, **kwargs):
            pass
    OpenAIInstrumentor.__module__ = "opentelemetry.instrumentation.openai_v2"
    inst = OpenAIInstrumentor()
    inst.instrument()
    try:
        decision.make("Pick.", ["a"], runtime=ScriptedRuntime(['{"call": "a"}'], model="m"))
    finally:
        inst.uninstrument()
    names = [s.name for s in spans.get_finished_spans()]
    assert "attempt 1" in names and not any(n.startswith("chat ") for n in names)
    decision.make("Pick.", ["a"], runtime=ScriptedRuntime(['{"call": "a"}'], model="m"))
    assert "chat m" in [s.name for s in spans.get_finished_spans()]


def test_an_attempt_span_carries_how_sure_the_model_was(spans):
    rt = ScriptedRuntime(['{"call": "yes"}', '{"call": "no"}', '{"call": "yes"}',
                          '{"call": "yes"}'], model="m")
    decision.make("Which one?", ["yes", "no"], runtime=rt, confidence=decision.Samples(4))
    # the four samples are one attempt: one span, its tokens those of all four
    (chat,) = [s for s in spans.get_finished_spans() if s.name == "chat m"]
    assert chat.attributes["openprogram.attempt.confidence.source"] == "samples"
    assert chat.attributes["openprogram.attempt.confidence.p_pick"] == 0.75
    assert chat.attributes["openprogram.attempt.confidence.margin"] == 0.5
    assert chat.attributes["openprogram.attempt.confidence.entropy"] == pytest.approx(0.8112781)
