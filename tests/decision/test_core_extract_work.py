"""How much work extraction does on hostile replies (counted, never timed: times are in
benchmarks/bench_extract.py), that counting repeats gives the same results as decoding them, and
where an error path's value sits in the raw reply (value_span)."""
import json
import random
import tracemalloc

import pytest

from openprogram import DecisionError, decision
from openprogram.decision import extract
from openprogram.decision.extract import find_action
from openprogram.decision.repair import value_span
from openprogram.runtimes import ScriptedRuntime


class Decoder:
    """Counts the entries into the C decoder, the characters it consumed, and the characters its
    errors scan to number their line (a JSONDecodeError counts the newlines before its position
    in the text the decoder was given)."""

    def __init__(self, real):
        self.real, self.entries, self.read, self.line_scan = real, 0, 0, 0

    def __call__(self, text, i):
        self.entries += 1
        try:
            value, end = self.real(text, i)
        except json.JSONDecodeError as err:
            self.read += err.pos - i
            self.line_scan += err.pos
            raise
        except StopIteration as err:
            self.read += err.value - i
            raise
        self.read += end - i
        return value, end


@pytest.fixture
def decoder(monkeypatch):
    counter = Decoder(extract._scan)
    monkeypatch.setattr(extract, "_scan", counter)
    return counter


def pick(name="x", **args):
    return json.dumps({"call": name, "args": args} if args else {"call": name})


# Replies built from n repeats of a unit (n is what the work must not grow with).
REPEATED = {
    "picks": lambda n: (pick() + " ") * n,
    "fences": lambda n: f"```json\n{pick(n=1)}\n```\n" * n,
    "unclosed picks": lambda n: '{"call": "x"' * n + "}",
    "open calls, one }": lambda n: '{"call":' * n + "}",
    "open calls": lambda n: '{"call":' * n,
    "braces, then a pick": lambda n: "{" * n + pick(),
    "spaced braces, then a pick": lambda n: "{ " * n + pick(),
    "broken objects between picks": lambda n: ('{"call": "a"} {"a": [1, 2 oops ') * n,
    "prose with quotes and braces": lambda n: 'I said "{x}" and {y} {"no": 1} ' * n + pick(),
    "deep array in a pick": lambda n: '{"call": "x", "args": ' + "[" * n + "]" * n + "}",
    "one object, a key repeated": lambda n: "{" + '"call": "x", ' * n + '"k": 1}',
}
EXPECTED = {  # name -> (candidates per repeat or in all, pick)
    "picks": (lambda n: n, {"call": "x"}),
    "fences": (lambda n: n, {"call": "x", "args": {"n": 1}}),
    "unclosed picks": (lambda n: 1, {"call": "x"}),
    "open calls, one }": (lambda n: 0, None),
    "open calls": (lambda n: 0, None),
    "braces, then a pick": (lambda n: 1, {"call": "x"}),
    "spaced braces, then a pick": (lambda n: 1, {"call": "x"}),
    "broken objects between picks": (lambda n: n, {"call": "a"}),
    "prose with quotes and braces": (lambda n: 1, {"call": "x"}),
    "deep array in a pick": (lambda n: 0, None),
    "one object, a key repeated": (lambda n: 1, {"call": "x", "k": 1}),
}


@pytest.mark.rule("A5")
@pytest.mark.parametrize("name", sorted(REPEATED))
def test_A5_decoder_entries_do_not_grow_with_the_repeats(name, decoder):
    """Each shape at 2,000, 32,000 and 128,000 repeats: the same results, and the decoder is
    entered a few times, not once per candidate or per brace."""
    entries = {}
    for n in (2_000, 32_000, 128_000):
        text = REPEATED[name](n)
        decoder.entries = decoder.read = 0
        ex = find_action(text)
        count, want = EXPECTED[name]
        assert (ex.candidates, ex.action) == (count(n), want)
        assert decoder.read <= 2 * len(text) + 10_000
        entries[n] = decoder.entries
    assert max(entries.values()) <= 32 and entries[128_000] <= entries[32_000] + 2, entries


@pytest.mark.rule("A6")
def test_A6_distinct_candidates_are_each_decoded_once(decoder):
    """20,000 different picks cannot be counted by comparing text: each is decoded, once."""
    text = "".join(f"Option {i}:\n```json\n{pick(f'opt_{i}', n=i)}\n```\n" for i in range(20_000))
    ex = find_action(text)
    assert ex.candidates == 20_000 and ex.action == {"call": "opt_19999", "args": {"n": 19999}}
    assert decoder.entries == 20_000
    assert decoder.read == sum(len(pick(f"opt_{i}", n=i)) for i in range(20_000))


@pytest.mark.rule("A6")
def test_A6_a_reply_with_no_call_key_anywhere_is_not_decoded(decoder):
    """100,000 different objects, none with a call key: the answer is known without reading one."""
    text = "".join(f'{{"a": {i}, "b": [{i}]}} ' for i in range(100_000))
    ex = find_action(text)
    assert ex.action is None and ex.candidates == 0 and "no JSON object with a" in ex.problem
    assert decoder.entries == 0
    assert find_action(text, require_key=False).action == {"a": 99999, "b": [99999]}
    assert decoder.entries > 0  # without a required key, each object is a candidate


@pytest.mark.rule("A6")
def test_A6_the_first_failure_after_a_long_run_of_picks_is_decoded_once(monkeypatch):
    """Picks decoded in place in a tight loop, then a broken one: the loop hands the failure it
    met to the search instead of the search decoding that object again."""
    broken = '{"call": "bad", oops}'
    entered = []  # each entry into the decoder at the broken object (whole text or a slice)
    real = extract._scan
    monkeypatch.setattr(extract, "_scan", lambda text, i: entered.append(
        text.startswith(broken, i)) or real(text, i))
    text = "".join(f"{pick(f'opt_{i}', n=i)}\n" for i in range(2_000)) + broken + " " + pick("end")
    ex = find_action(text)
    assert ex.action == {"call": "end"} and ex.candidates == 2_001
    assert entered.count(True) == 1


@pytest.mark.rule("A6")
def test_A6_a_call_key_spelled_with_escapes_is_still_found():
    """The shortcut for replies with no call key does not miss one written as \\u escapes."""
    ex = find_action('I pick {"\\u0063all": "go"} now, not {"x": 1}')
    assert ex.action == {"call": "go"} and ex.candidates == 1


def _without_repeat_counting(monkeypatch, text, **kw):
    with monkeypatch.context() as m:
        m.setattr(extract, "_repeat_end", lambda text, a, period: a)
        return find_action(text, **kw)


@pytest.mark.rule("A5")
@pytest.mark.parametrize("name", sorted(REPEATED))
def test_A5_counting_repeats_gives_what_decoding_each_gives(name, monkeypatch):
    text = REPEATED[name](3_000)
    for require_key in (True, False):
        assert find_action(text, require_key=require_key) == \
            _without_repeat_counting(monkeypatch, text, require_key=require_key)


@pytest.mark.rule("A5")
def test_A5_counting_repeats_agrees_on_random_repeated_replies(monkeypatch):
    """Random units of JSON fragments and prose, repeated: the same Extraction (pick, key, span,
    candidates, problem) with and without counting repeats."""
    frags = ['{', '}', '"', ':', ',', ' ', 'x', '\\"', '{"call": "a"}', '[', ']', '1', '\n',
             '{"call": "b", "args": {"n": 1}}', '{"a": ', '"call"', '{"tool": "t"}', '"s"',
             '```json\n', '\n```', '{"x": {"call": "c"}}', '{ "call" : "f" }', 'é', '}}',
             '{"a": {"b": ', '[{"call": "h"}]', '{"args": {}, "call": "i"}', '{"s": "\\u00e9"}']
    rnd = random.Random(20261203)
    for _ in range(600):
        unit = "".join(rnd.choice(frags) for _ in range(rnd.randint(1, 8)))
        text = (unit * rnd.choice([2, 5, 40, 150])
                + "".join(rnd.choice(frags) for _ in range(rnd.randint(0, 5))))
        for require_key in (True, False):
            assert find_action(text, require_key=require_key) == \
                _without_repeat_counting(monkeypatch, text, require_key=require_key), text


@pytest.mark.rule("A5")
def test_A5_a_failing_object_costs_its_own_length_not_the_reply_before_it(decoder):
    """json's errors count the lines before their position: every failure is decoded from a
    slice, so 20,000 failures late in a long reply read about their own length."""
    text = "x" * 1_000_000 + "".join(f'{{"call": "x{i}" oops ' for i in range(20_000))
    ex = find_action(text)
    assert ex.action is None and "not valid JSON" in ex.problem
    assert decoder.entries <= 2 * 20_000
    assert decoder.read <= 40 * 20_000
    assert decoder.line_scan <= 40 * 20_000


@pytest.mark.rule("A5")
@pytest.mark.parametrize("reply", [
    (pick() + " ") * 1_500_000,                       # 21 MB of repeated picks
    "{" * 20_000_000 + pick(),                          # 20 MB of braces, then a pick
    'a "b" {c} ' * 2_000_000 + pick(),                  # 20 MB of prose, then a pick
    '{"call": "x", "args": {"t": "' + "y" * 20_000_000,  # a pick cut off in a 20 MB string
], ids=["repeated picks", "braces", "prose", "truncated"])
def test_A5_memory_beside_a_20_mb_reply_stays_bounded(reply):
    tracemalloc.start()
    try:
        find_action(reply)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak


@pytest.mark.rule("P1")
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_P1_nan_and_infinity_are_not_json(value):
    ex = find_action('{"call": "a", "args": {"v": %s}} then {"call": "b"}' % value)
    assert ex.action == {"call": "b"} and ex.candidates == 1
    ex = find_action('{"call": "a", "args": {"v": %s}}' % value)
    assert ex.action is None and f"{value} (not JSON) at character 28" in ex.problem


@pytest.mark.rule("A5")
def test_A5_a_pick_nested_within_the_decoders_depth_is_found_and_a_deeper_one_is_not():
    ex = find_action('{"call": "x", "args": ' + "[" * 300 + "]" * 300 + "}")
    assert ex.action["call"] == "x"
    ex = find_action('{"call": "x", "args": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert ex.action is None and ex.candidates == 0
    assert "nested deeper than the JSON decoder allows" in ex.problem


# -- where the value an error path names sits in the raw reply ------------------------------------

def marked(text, path):
    ex = find_action(text)
    span = value_span(text, ex.span, path)
    return None if span is None else text[span[0]:span[1]]


@pytest.mark.rule("P1")
def test_P1_span_of_the_pick_in_a_fenced_and_a_bare_reply():
    obj = pick("go", city="Rome")
    fenced = f"Thinking « é ».\n```json\n{obj}\n```\n"
    ex = find_action(fenced)
    assert fenced[ex.span[0]:ex.span[1]] == obj and ex.found_in == "fence"
    bare = f'Options look like {{"call": "a"}}; I pick {obj} — done.'
    ex = find_action(bare)
    assert bare[ex.span[0]:ex.span[1]] == obj and ex.found_in == "text"


@pytest.mark.rule("P3")
@pytest.mark.parametrize("path, value", [
    ("args.items[0].qty", '"two"'),
    ("args.items[1].qty", "3"),
    ("args.items[1]", '{"qty": 3}'),
    ("args.steps[0].action", '"fly"'),
    ("args.note", '"a\\"b\\u00e9 \u00ab\u00bb"'),
    ("call", '"order"'),
    ("args", None),  # the whole args object, checked below
])
def test_P3_value_span_follows_nested_paths(path, value):
    args = '{"note": "a\\"b\\u00e9 \u00ab\u00bb", "items": [{"qty": "two"}, {"qty": 3}], ' \
           '"steps": [{"action": "fly"}]}'
    text = 'Voilà — « réponse » with "quotes" and {braces}:\n```json\n' \
           '{"call": "order", "args": ' + args + '}\n```'
    assert marked(text, path) == (value if value is not None else args)


@pytest.mark.rule("P3")
@pytest.mark.parametrize("reply, path, value", [
    ('{"tool": "greet", "args": {"n": 1}}', "call", '"greet"'),
    ('{"action": "a", "call": "b"}', "call", '"b"'),          # call wins over an alias
    ('{"call": "x", "qty": "1", "unit": "kg"}', "args.qty", '"1"'),  # the flat form
    ('{"call": "x", "args": {"q": 1, "q": "late"}}', "args.q", '"late"'),  # the kept duplicate
    ('{"call": "x", "note": 5, "args": {}}', "note", "5"),     # a dropped field
    ('{"call": "x", "args": {"a": [1, 2]}}', "args.a[2]", None),
    ('{"call": "x", "args": {"a": 1}}', "args.b", None),       # a missing field
    ('{"call": "x", "args": {"a": 1}}', "args.a.b", None),
    ('{"call": "x", "args": [1]}', "args", "[1]"),
])
def test_P3_value_span_aliases_flat_form_and_missing_values(reply, path, value):
    assert marked("Answer: " + reply, path) == value


@pytest.mark.rule("P3")
def test_P3_value_span_of_a_response_format_field():
    text = 'Here: {"name": "Ada", "age": "forty"}'
    ex = find_action(text, require_key=False)
    start, end = value_span(text, ex.span, "response.age")
    assert text[start:end] == '"forty"'


@pytest.mark.rule("P3")
def test_P3_value_span_marks_the_value_a_decision_failed_on():
    """End to end: the error path of a failed attempt leads to the offending characters."""
    def order(items: list[dict], note: str = ""):
        return items

    reply = ('Je commande — « voilà » \\"x\\".\n```json\n'
             '{"call": "order", "args": {"note": "caf\\u00e9 \u00e9", '
             '"items": [{"qty": 1}, "two"]}}\n```')
    rt = ScriptedRuntime([reply])
    with pytest.raises(DecisionError) as info:
        decision.make("Order.", {"order": ("order", {"items": [{"qty": int}], "note": str})},
                      runtime=rt, max_retries=0)
    att = info.value.trace.attempts[0]
    assert att.error_path == "args.items[1]"
    start, end = value_span(reply, find_action(reply).span, att.error_path)
    assert reply[start:end] == '"two"'


@pytest.mark.rule("P3")
def test_P3_value_span_needs_an_object_at_the_span():
    assert value_span('x {"call": "a"}', (0, 1), "call") is None
    assert value_span('{"call": "a"}', (0, 13), "") is None
