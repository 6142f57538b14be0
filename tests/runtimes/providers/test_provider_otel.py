"""A key a server echoes back never reaches an OpenTelemetry span, even with content capture on."""
from __future__ import annotations

import json

from fakeserver import FAKE_KEY, text
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openprogram import decision, otel


def test_an_echoed_key_is_in_no_span(provider, server, make_runtime, monkeypatch):
    monkeypatch.setenv(otel.CAPTURE_ENV, "true")
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    server.push(text(f'Your key is {FAKE_KEY}. {{"call": "a"}}', chunk=4))
    with otel.instrument(tracer_provider=tp):
        assert decision.make("Pick.", ["a", "b"], runtime=make_runtime()) == "a"
    spans = exporter.get_finished_spans()
    chat = [s for s in spans if s.name == "chat test-model"][0]
    assert chat.attributes["gen_ai.provider.name"] == provider
    dump = json.dumps([dict(s.attributes) for s in spans], default=str)
    assert "Your key is [redacted]" in dump and FAKE_KEY not in dump and FAKE_KEY[:12] not in dump
