"""A `DecisionError` states each fact once: the failure in its own words, then only what to do
about it (issue 28). Every error kind is produced by a real decision on a real runtime, and the
message is checked sentence by sentence."""
import re

import pytest

from openprogram import (
    ERROR_KINDS,
    DecisionError,
    JsonSchema,
    ModelCallError,
    ModelResponse,
    Runtime,
    ToolError,
    decision,
)
from openprogram.runtimes import ReplayRuntime, ScriptedRuntime, ToolCall


def add(x: int, unit: str = "kg") -> int:
    """Add one."""
    return x + 1


def lookup(order_id: int) -> str:
    """Look an order up (the server knows none)."""
    raise ToolError(f"the server knows no order {order_id}")


def _options():
    return {"add": add, "done": "DONE", "lookup": lookup,
            "size": JsonSchema({"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 1},
                "colour": {"enum": ["red", "blue"]}}, "required": ["n"]})}


def _model(reply):
    return Runtime(call=lambda content: reply)


def _failing(content):
    raise ModelCallError("the server went away; run again later")


class _Promising(Runtime):
    """A runtime that says it gives log-probabilities and returns a reply without any (what a
    server that dropped them sends)."""
    confidence_source = "logprobs"


def _cassette(tmp_path):
    path = tmp_path / "c.jsonl"
    from openprogram.runtimes import RecordingRuntime
    rec = RecordingRuntime(ScriptedRuntime(['{"call": "done"}']), path)
    decision.make("another prompt", _options(), runtime=rec)
    return ReplayRuntime(path)


CASES = {
    "not_text": lambda tmp: dict(runtime=_model(5)),
    "no_action": lambda tmp: dict(runtime=ScriptedRuntime(["I would pick add."])),
    "bad_args": lambda tmp: dict(runtime=ScriptedRuntime(['{"call": 5}'])),
    "unknown_call": lambda tmp: dict(runtime=ScriptedRuntime(['{"call": "zzz"}'])),
    "missing_required": lambda tmp: dict(runtime=ScriptedRuntime(['{"call": "add", "args": {}}'])),
    "type_mismatch": lambda tmp: dict(runtime=ScriptedRuntime(
        ['{"call": "add", "args": {"x": "a"}}'])),
    "enum_violation": lambda tmp: dict(runtime=ScriptedRuntime(
        ['{"call": "size", "args": {"n": 2, "colour": "green"}}'])),
    "invalid_value": lambda tmp: dict(runtime=ScriptedRuntime(
        ['{"call": "size", "args": {"n": 0}}'])),
    "rejected": lambda tmp: dict(runtime=ScriptedRuntime(['{"call": "done"}']),
                                 validate=lambda pick: False),
    "tool_error": lambda tmp: dict(runtime=ScriptedRuntime(
        ['{"call": "lookup", "args": {"order_id": 4}}'])),
    "multiple_calls": lambda tmp: dict(runtime=ScriptedRuntime(
        [[ToolCall("done", {}), ToolCall("add", {"x": 1})]]), mode="tools"),
    "refused": lambda tmp: dict(runtime=_model(ModelResponse(text="", refusal="I cannot help."))),
    "truncated": lambda tmp: dict(runtime=_model(ModelResponse(text='{"call": "ad',
                                                               finish_reason="length"))),
    "timeout": lambda tmp: dict(runtime=ScriptedRuntime(['{"call": "done"}'], latency=5.0),
                                timeout_s=0.01),
    "model_error": lambda tmp: dict(runtime=Runtime(call=_failing)),
    "not_recorded": lambda tmp: dict(runtime=_cassette(tmp)),
    "low_confidence": lambda tmp: dict(runtime=ScriptedRuntime(
        ['{"call": "done"}', '{"call": "add", "args": {"x": 1}}']),
        confidence=decision.Samples(2), min_confidence=0.9),
    "no_confidence": lambda tmp: dict(runtime=_Promising(call=lambda content: '{"call": "done"}'),
                                      confidence=True),
}


def _sentences(text: str) -> list[str]:
    """Sentences, lower-cased, with quotes and brackets folded, so a fact said twice in other
    case or punctuation still counts as said twice; indented lines are quoted data (a request),
    not sentences."""
    prose = "\n".join(line for line in text.splitlines() if not line.startswith(" "))
    folded = re.sub(r"[\"'`()\[\]]", "", prose.lower())
    return [s.strip() for s in re.split(r"(?<=[.;:])\s+", folded) if len(s.strip()) > 12]


def test_every_error_kind_has_a_case():
    assert set(CASES) == set(ERROR_KINDS)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_decision_error_states_each_fact_once(kind, tmp_path):
    kw = CASES[kind](tmp_path)
    with pytest.raises(DecisionError) as info:
        decision.make("Pick one.", _options(), max_retries=0, **kw)
    err = info.value
    assert err.kind == kind, (kind, str(err))
    sentences = _sentences(str(err))
    for i, a in enumerate(sentences):
        for b in sentences[i + 1:]:
            shorter, longer = sorted((a.rstrip(".;:"), b.rstrip(".;:")), key=len)
            assert shorter not in longer, f"{kind}: said twice: {a!r} / {b!r}\n{err}"
