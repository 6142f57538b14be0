"""A key spelled with JSON escapes, or cut into short streamed deltas, reaches nothing the mechanism
keeps or shows (issue 29).

Against the loopback server, through the real SDK clients, in the three ways of asking, streamed
and whole, sync and async: the server echoes the key with `\\u` escapes in a pick's argument, in
a nested argument's key, in a tool call's arguments and in an error body, and as written across
text or argument deltas of 1, 2, 3, 5, 7 and 11 characters. Every place a person or a program
reads afterwards is searched for the key and for every 12-character run of it, as written and
as one JSON decoding reads it: the trace's `to_dict()`, its repr / str / `format_text`, its HTML
views, the panel's widget state and static copy, the generated test, the cassette read back,
OpenTelemetry spans with content capture on, every observer event, the joined text of the raw
deltas, and what the option's function was handed and returned.
"""
from __future__ import annotations

import asyncio
import json
import re

import pytest
from fakeserver import FAKE_KEY, status, text, tools
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import openprogram
from openprogram import DecisionError, aagent, agent, decision, otel
from openprogram.runtimes import RecordingRuntime
from openprogram.testgen import trace_to_pytest
from openprogram.trace.view import TABLES, compare_attempts_html, table_html

KEY = FAKE_KEY
RUNS = {KEY[i:i + 12] for i in range(len(KEY) - 11)}
MODES = ["menu", "tools", "json_schema"]


# -- spellings of the key ---------------------------------------------------------------------

def esc(s: str) -> str:
    """Every character as a `\\uXXXX` escape (JSON text)."""
    return "".join(f"\\u{ord(c):04x}" for c in s)


def esc_mixed(s: str) -> str:
    """Plain characters, lower- and upper-case escapes, mixed."""
    return "".join(c if i % 3 == 0 else f"\\u{ord(c):04X}" if i % 3 == 1 else f"\\u{ord(c):04x}"
                   for i, c in enumerate(s))


def esc_twice(s: str) -> str:
    """JSON text of a string that holds the escapes: one decoding gives `\\u0073...`, a second
    the key (the mechanism decodes the pick once; what it then holds must not be the key as
    JSON reads it)."""
    return "".join(f"\\\\u{ord(c):04x}" for c in s)


def decode_once(text: str) -> str:
    """JSON's escapes decoded wherever they are (an oracle independent of the library)."""
    simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
              "t": "\t"}
    out = re.sub(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])",
                 lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                 else simple[m.group(1)], text)
    return out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def leaks(blob: str) -> list[str]:
    found = []
    for spelling in (blob, decode_once(blob)):
        if KEY in spelling:
            found.append("the whole key")
        found += sorted(r for r in RUNS if r in spelling)
    return found


def strings(value, out: list[str]) -> list[str]:
    """Every string inside decoded JSON (keys too)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            strings(k, out)
            strings(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            strings(v, out)
    return out


def assert_clean(blobs: dict) -> None:
    bad = {}
    for where, blob in blobs.items():
        # strings apart (a key cannot run from one string into the next), each decoded alone
        found = leaks(blob if isinstance(blob, str) else "\0".join(strings(blob, [])))
        if found:
            bad[where] = found[:3]
    assert not bad, f"the key (or a 12-character run of it) is in: {bad}"


# -- what the model can pick -----------------------------------------------------------------

RECEIVED: list = []


def lookup(q: str, opts: dict, note: str = "") -> str:
    """Look something up."""
    RECEIVED.append({"q": q, "opts": opts, "note": note})
    return f"looked up {q} with {opts} ({note})"   # the result repeats the arguments


def echo(text: str) -> str:
    """Say the text back."""
    RECEIVED.append({"echo": text})
    return "echo: " + text


OPTIONS = {"lookup": lookup, "done": ("DONE", "nothing left to do")}


def pick_json(q: str, key: str, note: str) -> str:
    """The pick's arguments as JSON text, written as given (escapes stay escapes)."""
    return f'{{"q": "{q}", "opts": {{"{key}": 1}}, "note": "{note}"}}'


def pick_reply(provider: str, mode: str, args: str, chunk: int, lead: str = ""):
    """The reply that picks `lookup` with `args` (JSON text) in the way of asking `mode`,
    streamed in deltas of `chunk` characters."""
    if mode == "tools":
        return tools(("call_1", "lookup", args), args_chunk=chunk)
    pick = f'{{"call": "lookup", "args": {args}}}'
    if mode == "menu":
        return text(f"{lead}Thinking.\n```json\n{pick}\n```", chunk=chunk)
    if provider == "openai":
        return text(f'{{"decision": {pick}}}', chunk=chunk)
    return tools(("toolu_s1", "decision", f'{{"decision": {pick}}}'), args_chunk=chunk)


# -- running decisions and reading every place -------------------------------------------------

class Run:
    """Decisions on a recording provider runtime with observers and OTel on: what they left."""

    def __init__(self, runtime: RecordingRuntime, monkeypatch, sync: bool):
        monkeypatch.setenv(otel.CAPTURE_ENV, "true")
        self.rt, self.path, self.sync = runtime, runtime.path, sync
        self.exporter = InMemorySpanExporter()
        self.tp = TracerProvider()
        self.tp.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.events: list = []
        self.traces: list = []
        self.results: list = []
        RECEIVED.clear()

    def _watch(self, event) -> None:
        # a chunk event's record is the one its attempt_sent event carried: its text is new
        record = event.attempt.to_dict() if event.attempt and event.kind != "reply_chunk" \
            else None
        self.events.append({"kind": event.kind, "data": repr(event.data), "attempt": record})

    def decide(self, how: str, prompt: str, **kw) -> None:
        """One decision: `how` is "make" or "agent"; a DecisionError is kept, not raised."""
        entry = {("make", True): decision.make, ("make", False): decision.amake,
                 ("agent", True): agent, ("agent", False): aagent}[how, self.sync]
        opts = {"runtime": self.rt, **kw}
        if how == "agent":
            opts["choices"] = opts.pop("options")
            args = (prompt,)
        else:
            args = (prompt, opts.pop("options"))
        with openprogram.observe(self._watch), otel.instrument(tracer_provider=self.tp):
            try:
                if self.sync:
                    self.results.append(entry(*args, **opts))
                else:
                    self.results.append(asyncio.run(entry(*args, **opts)))
                self.traces.append(decision.last_trace())
            except DecisionError as err:
                self.traces.append(err.trace)
                self.results.append(str(err) + repr(err))

    def places(self) -> dict:
        """Everything that was kept or shown, by where."""
        from openprogram.widgets import DecisionPanel
        out: dict = {"results": [repr(r) for r in self.results],
                     "what the functions were handed": RECEIVED,
                     "cassette": [json.loads(line) for line in
                                  self.path.read_text(encoding="utf-8").splitlines()],
                     "otel spans": [dict(s.attributes) for s in
                                    self.exporter.get_finished_spans()],
                     "observer events": self.events}
        generated = 0
        for i, t in enumerate(self.traces):
            out[f"#{i} to_dict"] = t.to_dict()
            out[f"#{i} repr/str/format_text"] = repr(t) + str(t) + t.format_text()
            html = t._repr_mimebundle_()["text/html"] + "".join(table_html(t, n) for n in TABLES)
            if len(t.attempts) > 1:
                html += compare_attempts_html(t)
            out[f"#{i} html"] = html
            panel = DecisionPanel(t)
            out[f"#{i} panel widget state"] = widget_states(panel)
            out[f"#{i} panel static copy"] = panel._repr_mimebundle_()["text/html"]
            try:
                out[f"#{i} generated test"] = trace_to_pytest(
                    t, module="test_provider_decoded_keys",
                    tools_expr="[echo]" if t.tool_rounds else None)
                generated += 1
            except ValueError:
                pass
            out[f"#{i} raw deltas joined"] = joined_deltas(t.to_dict())
        assert generated, "no generated test was checked"
        out["cassette's raw deltas joined"] = joined_deltas(out["cassette"])
        return out


def widget_states(widget) -> list:
    """The state every widget of the tree sends to the front end."""
    import ipywidgets as W
    states, seen = [], set()

    def walk(w):
        if id(w) in seen:
            return
        seen.add(id(w))
        state = w.get_state()
        states.append(json.loads(json.dumps(state, default=repr)))
        for v in state.values():
            for item in (v if isinstance(v, (list, tuple)) else [v]):
                if isinstance(item, W.Widget):
                    walk(item)
        for c in getattr(w, "children", ()) or ():
            walk(c)
    walk(widget)
    return states


def streams(value, out: list) -> list:
    """Every list of streamed events (a raw record's `"stream"`) inside decoded JSON."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "stream" and isinstance(v, list):
                out.append(v)
            else:
                streams(v, out)
    elif isinstance(value, list):
        for v in value:
            streams(v, out)
    return out


def joined_deltas(value) -> list[str]:
    """For each stream of raw events in `value` (a trace's dict, a cassette), the strings at
    each place of the events joined in order (`choices[0].delta.content`,
    `delta.partial_json`, ...): what a reader of the file rebuilds."""
    out = []
    for events in streams(value, []):
        by_place: dict = {}

        def walk(v, path, by_place=by_place):
            if isinstance(v, str):
                by_place.setdefault(path, []).append(v)
            elif isinstance(v, dict):
                for k, x in v.items():
                    walk(x, (*path, k))
            elif isinstance(v, list):
                for i, x in enumerate(v):
                    walk(x, (*path, i))
        for ev in events:
            walk(ev, ())
        out += ["".join(pieces) for pieces in by_place.values()]
    return out


def recorded_redaction(att) -> bool:
    notes = " ".join((att.raw or {}).get("notes") or [])
    return bool(att.redacted) or "API key" in notes


# -- the tests ---------------------------------------------------------------------------------

@pytest.fixture(params=[True, False], ids=["sync", "async"])
def sync(request):
    return request.param


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", MODES)
def test_a_key_spelled_with_escapes_is_nowhere(provider, server, make_runtime, tmp_path,
                                               monkeypatch, mode, stream, sync):
    path = tmp_path / "run.json"
    run = Run(RecordingRuntime(make_runtime(stream=stream), path), monkeypatch, sync)
    args = pick_json(esc(KEY), esc_mixed(KEY), esc_twice(KEY))
    server.push(
        # a pick whose argument, nested argument's key and (twice-escaped) note spell the key
        pick_reply(provider, mode, args, chunk=3),
        # a tool round whose arguments spell it, then the same pick
        tools(("t_1", "echo", f'{{"text": "{esc_mixed(KEY)} and {esc(KEY)}"}}'), args_chunk=3),
        pick_reply(provider, mode, args, chunk=3),
        # an error body that echoes it escaped and as written
        status(400, f"bad key {esc(KEY)} ({KEY[:20]}{esc(KEY[20:])})"),
    )
    run.decide("make", "Look it up.", options=OPTIONS, mode=mode)
    run.decide("agent", "Echo, then look it up.", options=OPTIONS, tools=[echo], mode=mode)
    run.decide("make", "Look it up.", options=OPTIONS, mode=mode)
    made, turn, failed = run.traces
    assert made.status == turn.status == "resolved", (made.error, turn.error)
    assert failed.status == "failed" and "rejected the request (400: bad key" in \
        failed.attempts[-1].error_message
    # the function ran, with every spelling of the key replaced, and the trace says so
    assert [sorted(r) for r in RECEIVED] == [["note", "opts", "q"], ["echo"],
                                             ["note", "opts", "q"]]
    assert RECEIVED[0] == {"q": "[redacted]", "opts": {"[redacted]": 1}, "note": "[redacted]"}
    assert RECEIVED[1] == {"echo": "[redacted] and [redacted]"}
    assert recorded_redaction(made.attempts[-1]) and recorded_redaction(turn.attempts[-1])
    assert_clean(run.places())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size, sync", [(1, True), (2, False), (3, True), (5, False),
                                        (7, True), (11, False)])
def test_a_key_cut_into_short_deltas_is_nowhere(provider, server, make_runtime, tmp_path,
                                                monkeypatch, mode, size, sync):
    path = tmp_path / "run.json"
    run = Run(RecordingRuntime(make_runtime(stream=True), path), monkeypatch, sync)
    server.push(pick_reply(provider, mode, pick_json(KEY, KEY, f"{KEY} {KEY[3:19]}"),
                           chunk=size, lead=f"My key is {KEY}, then {KEY[::-1]}{KEY}. "))
    run.decide("make", "Look it up.", options=OPTIONS, mode=mode)
    (trace,) = run.traces
    assert trace.status == "resolved", trace.error
    assert RECEIVED == [{"q": "[redacted]", "opts": {"[redacted]": 1},
                         "note": "[redacted] [redacted]"}]
    events = trace.attempts[0].raw["response"]["stream"]
    assert len(events) > len(KEY) // size  # the deltas were kept, one event each
    places = run.places()
    assert_clean(places)
    assert any("[redacted]" in j for j in places["#0 raw deltas joined"])


def test_the_twice_escaped_key_in_a_pick_is_redacted_after_decoding_and_recorded(
        provider, server, make_runtime):
    """Text is redacted as written and as JSON reads it once; the pick decoded from it is
    redacted again, so a spelling that takes two decodings never reaches the function, and the
    trace says where it was."""
    RECEIVED.clear()
    rt = make_runtime(stream=False)
    server.push(text(f'{{"call": "lookup", "args": '
                     f'{pick_json("plain", "k", esc_twice(KEY))[:-1]}, '
                     f'"{esc_twice(KEY)}": {{"{esc_twice(KEY)}": "{esc_twice(KEY)}"}}}}}}'))
    options = {"lookup": lookup, "note": ("Write a note.", {"text": str, "extra": dict})}
    decision.make("Look it up.", options, runtime=rt)
    att = decision.last_trace().attempts[-1]
    assert RECEIVED == [{"q": "plain", "opts": {"k": 1}, "note": "[redacted]"}]
    assert set(att.redacted) >= {"args.note", "args.[redacted]", "args.[redacted].[redacted]"}
    assert att.extracted["args"]["[redacted]"] == {"[redacted]": "[redacted]"}
    trace = decision.last_trace()
    assert "args.note" in trace.to_dict()["attempts"][-1]["redacted"]
    assert "replaced with [redacted] at: args.note" in trace._repr_mimebundle_()["text/html"]
