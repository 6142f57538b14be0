"""The raw record's bound: whatever a request or a response holds, each side stays within
`LIMIT` characters of JSON, keeps its shape and says what was cut; a small one is kept whole."""
import json

import pytest

from openprogram.runtimes.providers.raw_record import LIMIT, bounded, raw_record, size


def test_a_small_value_is_kept_whole():
    value = {"messages": [{"role": "user", "content": "hi"}], "n": 1, "ok": True, "x": None}
    assert bounded(value) is value


@pytest.mark.parametrize("value, marker", [
    ("x" * 200_000, "more characters cut"),
    ('"quoted" \\ ' * 30_000, "more characters cut"),          # escapes take room too
    ([{"i": i, "text": "y" * 100} for i in range(5000)], "more items cut"),
    ({f"k{i}": "z" * 100 for i in range(5000)}, "more keys cut"),
    ({"stream": [{"delta": "w" * 50}] * 3000, "model": "m"}, "more items cut"),
])
def test_a_big_value_is_cut_within_the_limit_with_a_marker(value, marker):
    out = bounded(value)
    assert size(out) <= LIMIT
    assert marker in json.dumps(out)
    assert type(out) is type(value)


def test_the_shape_is_kept_where_the_cut_falls():
    value = {"model": "m", "stream": [{"delta": "w" * 50} for _ in range(3000)]}
    out = bounded(value)
    assert out["model"] == "m" and out["stream"][0] == {"delta": "w" * 50}
    assert out["stream"][-1].endswith("more items cut]") and size(out) <= LIMIT


def test_redaction_comes_before_the_cut():
    key = "sk-op-test-Q7xW9zK2mP4vR8tY6uJ3"
    # the key sits where a cut would fall: redacted first, no piece of it survives the cut
    text = "a" * (LIMIT - 150) + key + "b" * 1000
    raw = raw_record({"messages": [text]}, {"text": text, key: 1},
                     lambda s: s.replace(key, "[redacted]") if isinstance(s, str) else s,
                     notes=[f"a note with {key}"])
    whole = json.dumps(raw)
    assert key[:12] not in whole and key[-12:] not in whole
    assert raw["notes"] == ["a note with [redacted]"]
