"""repair=: sloppy replies read without a re-ask where the menu makes them unambiguous (issue 39).

A corpus of sloppy replies, written here from correct picks by one small serialiser per kind of
sloppiness, each with the pick it means and the re-ask it gets below the level that repairs
it: every repair kind, the three ways of asking, nested arguments, non-ASCII text. Then the
refusals (two options equally near, a repair that would change a value, a required field
missing), the bounds on work, and the property that a valid reply is never changed.
"""
from __future__ import annotations

import json
import re
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram import DecisionError, decision
from openprogram.base.model_protocol import ModelResponse, ToolCall
from openprogram.decision import repair as R
from openprogram.decision.repair import syntax as S  # the token loop and its limits
from openprogram.decision.stepthrough import steps
from openprogram.runtimes import ScriptedRuntime

LEVELS = ("off", "safe", "menu")


def refund(order_id: int, amount: float, priority: Literal["high", "low"], urgent: bool,
           note: str):
    """Give the customer their money back."""
    return {"order_id": order_id, "amount": amount, "priority": priority, "urgent": urgent,
            "note": note}


def look_up(city: str, days: int = 1):
    """Find the weather of a city."""
    return {"city": city, "days": days}


OPTIONS = {
    "refund": refund,
    "look_up": look_up,
    "plan": ("Plan the steps.", {"steps": [{"do": {"type": str, "options": ["go", "stop"]},
                                            "n": int}], "title": str}),
    "wait": ("WAIT", "Nothing to do yet."),
}

# Correct picks: (option, args) with the result each resolves to.
BASES = [
    ("refund", {"order_id": 3, "amount": 2.5, "priority": "high", "urgent": True,
                "note": "late"}),
    ("refund", {"order_id": 17, "amount": 10, "priority": "low", "urgent": False,
                "note": "Zürich — 東京, naïve café"}),
    ("look_up", {"city": "Bern", "days": 2}),
    ("look_up", {"city": "São Paulo"}),
    ("plan", {"steps": [{"do": "go", "n": 1}, {"do": "stop", "n": 2}],
              "title": "Übersicht"}),
    ("wait", None),
]


def expected_result(name, args):
    args = args or {}
    if name == "refund":
        return refund(**{**args, "amount": float(args["amount"])})
    if name == "look_up":
        return look_up(**args)
    if name == "plan":
        return {"decision": "plan", **args}
    return "WAIT"


# -- a serialiser that writes JSON the sloppy ways models do --------------------------------------

def dump(v, *, sq=False, bare=False, py=False, comma=False, comment=False, depth=0) -> str:
    kw = dict(sq=sq, bare=bare, py=py, comma=comma, comment=comment, depth=depth + 1)
    if isinstance(v, bool):
        return ("True" if v else "False") if py else ("true" if v else "false")
    if v is None:
        return "None" if py else "null"
    if isinstance(v, str):
        if sq:
            return "'" + json.dumps(v, ensure_ascii=False)[1:-1].replace('\\"', '"').replace(
                "'", "\\'") + "'"
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (int, float)):
        return json.dumps(v)
    if isinstance(v, list):
        body = ", ".join(dump(x, **kw) for x in v)
        return "[" + body + ("," if comma and v else "") + "]"
    items = []
    for k, x in v.items():
        key = k if bare and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) else dump(k, sq=sq)
        items.append(f"{key}: {dump(x, **kw)}")
    lead = "// the pick\n" if comment and depth == 0 else ""
    inner = ", ".join(items)
    if comment and depth == 1 and items:
        inner = "/* args */ " + inner
    return "{" + lead + inner + ("," if comma and items else "") + "}"


def pick_obj(name, args):
    return {"call": name, **({"args": args} if args is not None else {})}


SYNTAX = {  # repair kind -> serialiser flags
    "trailing_comma": dict(comma=True),
    "single_quotes": dict(sq=True),
    "python_literal": dict(py=True),
    "unquoted_key": dict(bare=True),
    "comment": dict(comment=True),
}


def wrap(text: str, way: str) -> str:
    if way == "menu-fence":
        return f"I pick this.\n```json\n{text}\n```"
    if way == "menu-text":
        return f"Thinking about it... {text}"
    return '{"decision": ' + text + "}"  # json_schema: a structured output written sloppily


WAYS = ["menu-fence", "menu-text", "json_schema"]


class Case:
    def __init__(self, label, reply, mode, level, kind, want, below):
        self.label, self.reply, self.mode, self.level = label, reply, mode, level
        self.kind, self.want, self.below = kind, want, below  # want: (name, args) | None

    def __repr__(self):
        return self.label


def corpus() -> list[Case]:
    cases = []
    for way in WAYS:
        mode = "json_schema" if way == "json_schema" else "menu"
        for b, (name, args) in enumerate(BASES):
            obj = pick_obj(name, args)
            for kind, flags in SYNTAX.items():
                text = dump(obj, **flags)
                if kind == "python_literal" and "True" not in text and "False" not in text:
                    text = text[:-1] + ', "extra": None}'  # a dropped field, written as Python
                cases.append(Case(f"{way}-{b}-{kind}", wrap(text, way), mode, "safe", kind,
                                  (name, args), "no_action"))
            # every syntax slip at once
            text = dump(obj, sq=True, bare=True, py=True, comma=True, comment=True)
            cases.append(Case(f"{way}-{b}-all", wrap(text, way), mode, "safe", "single_quotes",
                              (name, args), "no_action"))
            # cut off at the token limit where only closing quotes and brackets are missing
            full = json.dumps(obj, ensure_ascii=False)
            if full.endswith('"}}') or full.endswith('"}'):
                cut = full.rstrip("}")[:-1]
                reply = (f"I pick this.\n```json\n{cut}" if way != "json_schema"
                         else '{"decision": ' + cut)
                cases.append(Case(f"{way}-{b}-cut", ModelResponse(text=reply,
                                                                  finish_reason="length"),
                                  mode, "safe", "closed_truncation", (name, args), "truncated"))
    # menu: what the option set makes unambiguous, in the three ways of asking
    base = BASES[0][1]
    menu_cases = [
        ("option_name", "Refund", base, None),
        ("option_name", "REFUND", base, None),
        ("option_name", "look-up", {"city": "Bern"}, None),
        ("option_name", "Look Up", {"city": "Bern"}, None),
        ("option_name", "look.up", {"city": "Bern"}, None),
        ("enum_value", "refund", {**base, "priority": "High "}, {"priority": "high"}),
        ("enum_value", "refund", {**base, "priority": " LOW"}, {"priority": "low"}),
        ("string_to_number", "refund", {**base, "order_id": "3"}, None),
        ("string_to_number", "refund", {**base, "amount": "2.5"}, None),
        ("string_to_number", "look_up", {"city": "Bern", "days": "-4"}, {"days": -4}),
        ("string_to_boolean", "refund", {**base, "urgent": "true"}, None),
        ("string_to_boolean", "refund", {**base, "urgent": "false"}, {"urgent": False}),
        ("number_to_string", "refund", {**base, "note": 42}, {"note": "42"}),
        ("number_to_string", "look_up", {"city": 1066}, {"city": "1066"}),
        ("enum_value", "plan", {"steps": [{"do": "Go", "n": 1}, {"do": "STOP ", "n": 2}],
                                "title": "Übersicht"}, None),
        ("string_to_number", "plan", {"steps": [{"do": "go", "n": "1"}], "title": "x"},
         {"steps": [{"do": "go", "n": 1}]}),
    ]
    for way in WAYS + ["tools"]:
        mode = {"json_schema": "json_schema", "tools": "tools"}.get(way, "menu")
        for i, (kind, name, args, fixed) in enumerate(menu_cases):
            true_name = R.repair_name(name, list(OPTIONS)) or name
            want_args = dict(args)
            if kind == "option_name":
                want_args = args
            elif fixed is not None:
                want_args = {**args, **fixed}
            elif kind == "string_to_number":
                want_args = {k: (float(v) if k == "amount" else int(v)) if isinstance(v, str)
                             and k in ("order_id", "amount") else v for k, v in args.items()}
            elif kind == "string_to_boolean":
                want_args = {**args, "urgent": True}
            elif kind == "enum_value":
                want_args = {**args, "steps": [{"do": "go", "n": 1}, {"do": "stop", "n": 2}]}
            below = "unknown_call" if kind == "option_name" else (
                "enum_violation" if kind == "enum_value" else "type_mismatch")
            if way == "tools":
                reply = [ToolCall(name, args)]
            else:
                reply = wrap(json.dumps({"call": name, "args": args}, ensure_ascii=False), way)
            cases.append(Case(f"{way}-menu{i}-{kind}", reply, mode, "menu", kind,
                              (true_name, want_args), below))
        # a lone pick without the call wrapper (the whole reply, or in a fence), its keys those
        # of one option only
        lone = {"order_id": 3, "amount": 2.5, "priority": "high", "urgent": True, "note": "x"}
        if way != "tools":
            text = json.dumps(lone) if way != "json_schema" else json.dumps({"decision": lone})
            reply = f"```json\n{text}\n```" if way == "menu-fence" else text
            cases.append(Case(f"{way}-wrapper", reply, mode, "menu", "call_wrapper",
                              ("refund", lone),
                              "bad_args" if way == "json_schema" else "no_action"))
    return cases


CORPUS = corpus()
NEVER = [  # (label, options, reply, the error at every level)
    ("two options equally near", {"go_home": ("A", ""), "go-home": ("B", "")},
     '{"call": "Go Home"}', "unknown_call"),
    ("two allowed values equally near",
     {"x": ("", {"v": {"type": str, "options": ["high", "HIGH"]}})},
     '{"call": "x", "args": {"v": "High"}}', "enum_violation"),
    ("a changed value: 3.5 for an integer", OPTIONS,
     '{"call": "look_up", "args": {"city": "Bern", "days": "3.5"}}', "type_mismatch"),
    ("a changed value: spaces around a number", OPTIONS,
     '{"call": "look_up", "args": {"city": "Bern", "days": " 3"}}', "type_mismatch"),
    ("a changed value: a near enum value", OPTIONS,
     '{"call": "refund", "args": {"order_id": 3, "amount": 2.5, "priority": "hi", '
     '"urgent": true, "note": "x"}}', "enum_violation"),
    ("a changed value: yes for a boolean", OPTIONS,
     '{"call": "refund", "args": {"order_id": 3, "amount": 2.5, "priority": "high", '
     '"urgent": "yes", "note": "x"}}', "type_mismatch"),
    ("a changed value: a float for a string", OPTIONS,
     '{"call": "look_up", "args": {"city": 1.50}}', "type_mismatch"),
    ("a required field missing", OPTIONS,
     '{"call": "refund", "args": {"order_id": 3, "amount": 2.5, "priority": "high"}}',
     "missing_required"),
    ("a lone object missing a required field", OPTIONS, '{"order_id": 3, "amount": 2.5}',
     "no_action"),
    ("a lone object two options fit", {"a": look_up, "b": look_up}, '{"city": "Bern"}',
     "no_action"),
    # "menu" reads a lone object of arguments, nothing else (issue 54, case 4): not one quoted
    # in prose (a refusal quoting the format, an example), not the last of several
    ("an object in a refusal", OPTIONS,
     'I cannot look that up; a request would be {"city": "Bern"}.', "no_action"),
    ("an object after prose", OPTIONS, 'For example: {"city": "Bern"}', "no_action"),
    ("the last of several objects", OPTIONS, '{"city": "Bern"}\n{"city": "Paris"}',
     "no_action"),
    ("an object in a fence among prose", OPTIONS,
     'Like this:\n```json\n{"city": "Bern"}\n```\nbut I will not.', "no_action"),
    # and "only in case" is case, not Unicode's full folding: the KELVIN SIGN is not k, STRASSE
    # is not straße, the ligature ﬁ is not fi
    ("the KELVIN SIGN for k", {"k": ("K", ""), "m": ("M", "")}, '{"call": "\u212a"}',
     "unknown_call"),
    ("STRASSE for straße", {"straße": ("S", ""), "weg": ("W", "")}, '{"call": "STRASSE"}',
     "unknown_call"),
    ("a ligature for its letters", {"file": ("F", ""), "x": ("X", "")}, '{"call": "\ufb01le"}',
     "unknown_call"),
    ("the KELVIN SIGN for an allowed k",
     {"x": ("", {"v": {"type": str, "options": ["k", "m"]}})},
     '{"call": "x", "args": {"v": "\u212a"}}', "enum_violation"),
    ("STRASSE for an allowed straße",
     {"x": ("", {"v": {"type": str, "options": ["straße", "weg"]}})},
     '{"call": "x", "args": {"v": "STRASSE"}}', "enum_violation"),
    ("a number cut off at the end", OPTIONS, ModelResponse(
        text='{"call": "look_up", "args": {"city": "Bern", "days": 2', finish_reason="length"),
     "truncated"),
    ("cut off after a key", OPTIONS, ModelResponse(
        text='{"call": "look_up", "args": {"city":', finish_reason="length"), "truncated"),
    ("a reply that stops inside the pick on its own", OPTIONS,
     '{"call": "look_up", "args": {"city": "Bern', "no_action"),
    ("a bare word value", OPTIONS, "{'call': 'look_up', 'args': {'city': Bern}}", "no_action"),
    ("two values where one is meant", OPTIONS,
     "{'call': 'look_up' 'wait', 'args': {}}", "no_action"),
]


def run(reply, mode, level, options=OPTIONS):
    rt = ScriptedRuntime([reply])
    try:
        return decision.make("Pick.", options, runtime=rt, max_retries=0, mode=mode,
                             repair=level), decision.last_trace()
    except DecisionError as err:
        return err, err.trace


def test_the_corpus_is_large_and_covers_every_kind_and_way():
    assert len(CORPUS) + len(NEVER) >= 200
    assert {c.kind for c in CORPUS} == set(R.KINDS)
    assert {c.mode for c in CORPUS} == {"menu", "json_schema", "tools"}


@pytest.mark.parametrize("case", CORPUS, ids=repr)
def test_each_sloppy_reply_is_picked_or_reasked_by_level(case):
    rank = LEVELS.index(case.level)
    for level in LEVELS:
        out, trace = run(case.reply, case.mode, level)
        att = trace.attempts[-1]
        if LEVELS.index(level) < rank:
            assert isinstance(out, DecisionError), (level, out)
            assert out.kind == case.below, (level, out)
            assert not att.ok
        else:
            assert not isinstance(out, DecisionError), (level, str(out))
            name, args = case.want
            assert att.chosen == name
            assert out == expected_result(name, args)
            kinds = [r.kind for r in att.repairs]
            assert case.kind in kinds, kinds
            assert all(R.allows(level, k) for k in kinds)
            frame = trace.to_frame()
            assert frame["repairs"].iloc[-1] == len(att.repairs) and frame["repaired"].iloc[-1]


@pytest.mark.parametrize("label, options, reply, kind", NEVER, ids=[n[0] for n in NEVER])
def test_what_no_level_repairs(label, options, reply, kind):
    for level in LEVELS:
        out, trace = run(reply, "menu", level, options)
        assert isinstance(out, DecisionError) and out.kind == kind, (level, out)


def test_menu_reads_names_and_values_that_differ_only_in_case_in_any_script():
    options = {"ärger": ("A", ""), "οδός": ("O", ""), "x": ("", {"v": {"type": str,
                                                                      "options": ["Ωmega"]}})}
    for reply, want in [('{"call": "ÄRGER"}', "A"), ('{"call": "Οδός"}', "O"),
                        ('{"call": "x", "args": {"v": "ωMEGA"}}', {"decision": "x",
                                                                   "v": "Ωmega"})]:
        rt = ScriptedRuntime([reply])
        assert decision.make("Pick.", options, runtime=rt, repair="menu") == want
        assert decision.last_trace().attempts[0].repairs


def test_a_pick_inside_a_broken_pick_gives_way_to_the_repaired_outer_one():
    # The strict reading finds the inner object keyed "action" (an alias of "call") once the
    # outer one fails to decode; the repaired outer pick is what was meant.
    options = {"plan": ("", {"steps": [{"action": str, "n": int}]}), "wait": ("W", "")}
    reply = '{"call": "plan", "args": {"steps": [{"action": "go", "n": 1}]}, "x": None}'
    out, _ = run(reply, "menu", "off", options)
    assert isinstance(out, DecisionError) and out.kind == "unknown_call"
    for level in ("safe", "menu"):
        out, trace = run(reply, "menu", level, options)
        assert out == {"decision": "plan", "steps": [{"action": "go", "n": 1}]}
        assert [r.kind for r in trace.attempts[0].repairs] == ["python_literal"]


def test_a_valid_reply_is_the_same_pick_with_no_repair_at_every_level():
    for name, args in BASES:
        reply = json.dumps(pick_obj(name, args), ensure_ascii=False)
        for level in LEVELS:
            out, trace = run(reply, "menu", level)
            assert out == expected_result(name, args)
            assert trace.attempts[-1].repairs == []


# -- the record, the views, the re-ask -----------------------------------------------------------

def test_each_repair_is_named_with_where_and_before_and_after():
    reply = "```json\n{'call': 'Refund', 'args': {order_id: '3', \"amount\": 1, " \
            "\"priority\": \"High \", \"urgent\": True, \"note\": \"<script>x</script>\",},}\n```"
    out, trace = run(reply, "menu", "menu")
    att = trace.attempts[0]
    got = [(r.kind, r.path, r.before, r.after) for r in att.repairs]
    assert ("single_quotes", "call", "'Refund'", '"Refund"') in got
    assert ("unquoted_key", "args.order_id", "order_id", '"order_id"') in got
    assert ("python_literal", "args.urgent", "True", "true") in got
    assert ("trailing_comma", "args.note", ",", "") in got
    assert ("option_name", "call", '"Refund"', '"refund"') in got
    assert ("enum_value", "args.priority", '"High "', '"high"') in got
    assert ("string_to_number", "args.order_id", '"3"', "3") in got
    for r in att.repairs:
        assert r.kind in R.KINDS
        if r.span is not None and r.kind not in ("closed_truncation",):
            assert att.reply[r.span[0]:r.span[1]] == r.before
    # events: the loop said so as it went
    assert att.to_dict()["repairs"][0]["kind"] == "single_quotes"
    html = trace._repr_mimebundle_()["text/html"]
    assert "op-repair-mark" in html and "op-repairs" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    text = trace.format_text()
    assert "repaired option_name at call" in text
    stages = steps(trace)
    kinds = [s.kind for s in stages]
    assert kinds.index("reply") < kinds.index("repair") < kinds.index("validation")
    repair_stage = stages[kinds.index("repair")]
    assert "<script>" not in repair_stage.html()
    assert len(repair_stage.data["repairs"]) == len(att.repairs)


def test_a_cut_off_pick_is_closed_and_the_truncation_stays_on_the_trace():
    rt = ScriptedRuntime([ModelResponse(text='```json\n{"call": "look_up", "args": '
                                             '{"city": "Bern', finish_reason="length")])
    assert decision.make("Pick.", OPTIONS, runtime=rt) == {"city": "Bern", "days": 1}
    att = decision.last_trace().attempts[0]
    assert att.finish_reason == "length"
    assert [r.kind for r in att.repairs] == ["closed_truncation"]
    assert att.repairs[0].after == '"}}'
    assert "op-repair-ins" in decision.last_trace()._repr_mimebundle_()["text/html"]


def test_a_closed_pick_that_fails_is_still_truncated():
    rt = ScriptedRuntime([ModelResponse(text='{"call": "refund", "args": {"note": "lat',
                                        finish_reason="length")])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt, max_retries=0)
    assert info.value.kind == "truncated"
    assert "missing" in info.value.message or "required" in info.value.message


def test_an_unknown_level_is_a_clear_error_listing_the_levels():
    for bad in ("strict", "MENU", 1, True):
        with pytest.raises(ValueError, match="'off', 'safe', 'menu'"):
            decision.make("Pick.", OPTIONS, runtime=ScriptedRuntime([]), repair=bad)
    with pytest.raises(ValueError, match="repair="):
        decision.parse_args("{}", OPTIONS, repair="loose")
    from openprogram.evaluation.variants import Variant
    with pytest.raises(ValueError, match="'off', 'safe', 'menu'"):
        Variant(repair="all")


def test_parse_args_takes_repair():
    chosen, kwargs = decision.parse_args("{'call': 'look_up', 'args': {'city': 'Bern',}}",
                                         OPTIONS)
    assert chosen is look_up and kwargs == {"city": "Bern"}
    with pytest.raises(DecisionError) as info:
        decision.parse_args("{'call': 'look_up', 'args': {'city': 'Bern',}}", OPTIONS,
                            repair="off")
    assert info.value.kind == "no_action"


def test_a_repaired_pick_still_has_its_key_redacted():
    from openprogram.runtimes.providers.key_redaction import redact as redact_text
    secret = "sk-proj-" + "A1b2C3d4" * 5
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)

    class Keyed(ScriptedRuntime):
        def redact(self, text):
            return redact_text(text, (secret,))

    reply = "{'call': 'look_up', 'args': {'city': '" + escaped + "',}}"
    rt = Keyed([reply])
    decision.make("Pick.", OPTIONS, runtime=rt)
    trace = decision.last_trace()
    att = trace.attempts[0]
    assert att.repairs and att.args["city"] != secret and att.redacted == ["args.city"]
    blob = json.dumps(trace.to_dict()) + trace.format_text() + \
        trace._repr_mimebundle_()["text/html"]
    assert secret not in blob and secret not in json.loads(json.dumps(blob))


# -- evaluate, compare, revalidate ---------------------------------------------------------------

SLOPPY_ROWS = ["{'call': 'look_up', 'args': {'city': 'Bern',}}",
               '{"call": "Look_Up", "args": {"city": "Bern"}}',
               '{"call": "look_up", "args": {"city": "Bern"}}']


def test_evaluate_counts_the_rows_each_repair_kind_saved():
    res = decision.evaluate("Pick {i}.", OPTIONS, [{"i": i} for i in range(3)],
                            runtime=ScriptedRuntime(list(SLOPPY_ROWS)), concurrency=1,
                            max_retries=0, progress=False, repair="menu")
    assert res.failure_rate == 0
    counts = res.repair_counts
    assert counts["single_quotes"] == 1 and counts["trailing_comma"] == 1
    assert counts["option_name"] == 1 and "call_wrapper" not in counts


def test_revalidate_shows_what_each_level_would_save():
    res = decision.evaluate("Pick {i}.", OPTIONS, [{"i": i} for i in range(3)],
                            runtime=ScriptedRuntime(list(SLOPPY_ROWS)), concurrency=1,
                            max_retries=0, progress=False, repair="off")
    assert res.failure_rate == pytest.approx(2 / 3)
    ok = {lv: sum(r.after_ok for r in decision.revalidate(res, OPTIONS, repair=lv).rows)
          for lv in LEVELS}
    assert ok == {"off": 1, "safe": 2, "menu": 3}
    frame = decision.revalidate(res, OPTIONS, repair="menu").to_frame()
    assert list(frame["repairs"]) == [6, 1, 0]  # five quoted strings and a comma; a name


def test_compare_runs_each_variant_at_its_own_level():
    from openprogram.evaluation.variants import Variant
    rows = [{"i": i} for i in range(3)]
    rt = ScriptedRuntime(list(SLOPPY_ROWS) * 3)
    res = decision.compare("Pick {i}.", {"off": Variant(repair="off"),
                                         "safe": Variant(repair="safe"),
                                         "menu": Variant(repair="menu")}, rows,
                           options=OPTIONS, runtime=rt, concurrency=1, max_retries=0,
                           progress=False)
    assert [res[v].failure_rate for v in ("off", "safe", "menu")] == \
        pytest.approx([2 / 3, 1 / 3, 0])


# -- bounds and properties -----------------------------------------------------------------------

class Counting:
    """A stand-in for the token pattern that counts its matches (the repair's unit of work)."""

    def __init__(self, pattern):
        self.pattern, self.calls = pattern, 0

    def match(self, text, pos=0):
        self.calls += 1
        return self.pattern.match(text, pos)


HOSTILE = {
    "trailing commas": "{'call': 'a', 'args': {" + "'k': [1,]," * 20_000 + "}}",
    "open brackets": "{'call': " + "[" * 100_000,
    "quotes": "{'call': '" + "'" * 100_000,
    "comments": "{'call': 'a' " + "/* x */" * 50_000,
    "many starts": "{'call': 'a', " * 30_000,
    "long string": "{'call': '" + "x" * 1_000_000 + "'}",
}


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_repair_work_is_linear_in_the_reply(name, cut, monkeypatch):
    text = HOSTILE[name]
    counter = Counting(S._TOKEN)
    monkeypatch.setattr(S, "_TOKEN", counter)
    R.repair_syntax(text, cut)
    assert counter.calls <= S._MAX_STARTS * (len(text) + 1)


def test_thousands_of_repairs_are_bounded():
    text = "{'call': 'a', 'args': {" + ",".join(f"k{i}: True" for i in range(5000)) + "}}"
    assert R.repair_syntax(text) is None  # more repairs than one pick can plausibly need


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(args=st.dictionaries(st.text(max_size=6), JSON, max_size=4), fence=st.booleans(),
       prose=st.text(max_size=20))
def test_a_valid_reply_is_never_changed(args, fence, prose):
    reply = prose.replace("{", "(") + " " + json.dumps({"call": "free", "args": {"v": args}},
                                                       ensure_ascii=False)
    if fence:
        reply = f"```json\n{reply}\n```"
    options = {"free": ("", {"v": dict})}
    strict, _ = run(reply, "menu", "off", options)
    for level in ("safe", "menu"):
        out, trace = run(reply, "menu", level, options)
        assert trace.attempts[-1].repairs == []
        assert out == strict


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("{}[]:,'\"/* \nTrueNoncal_1.-x")),
                    max_size=300))
def test_any_text_gives_a_pick_or_none_within_the_bound(text):
    counter = Counting(S._TOKEN)
    saved, S._TOKEN = S._TOKEN, counter
    try:
        got = R.repair_syntax("{'call': " + text, cut=True)
    finally:
        S._TOKEN = saved
    assert counter.calls <= S._MAX_STARTS * (len(text) + 10)
    if got is not None:
        obj, span, repairs = got
        assert isinstance(obj, dict) and repairs
        assert all(r.kind in R.KINDS and R.KINDS[r.kind][0] == "safe" for r in repairs)


def test_below_menu_the_reask_names_the_fix():
    rt = ScriptedRuntime(['{"call": "Look-Up", "args": {"city": "Bern"}}',
                          '{"call": "look_up", "args": {"city": "Bern", "days": "2"}}',
                          '{"call": "refund", "args": {"order_id": 3, "amount": 2.5, '
                          '"priority": "LOW", "urgent": true, "note": "x"}}',
                          '{"call": "look_up", "args": {"city": "Bern"}}'])
    decision.make("Pick.", OPTIONS, runtime=rt, max_retries=3, repair="safe")
    reasks = [c.prompt for c in rt.calls[1:]]
    assert """It nearly matches the option 'look_up': write "call": "look_up".""" in reasks[0]
    assert "At args.days write 2 (the number without quotes)." in reasks[1]
    assert 'At args.priority write "low" (the allowed value exactly as listed).' in reasks[2]
    # the error itself says what was wrong, as before; the fix is advice in the re-ask
    assert decision.last_trace().attempts[1].error_message == \
        'args.days must be int, got string "2"'
    rt = ScriptedRuntime(['{"call": "Go Home"}', '{"call": "go_home"}'])
    decision.make("Pick.", {"go_home": ("A", ""), "go-home": ("B", "")}, runtime=rt,
                  repair="menu")
    assert "equally near the options 'go_home', 'go-home'" in rt.calls[1].prompt


def test_a_key_with_a_broken_escape_is_reasked_not_raised():
    # the repaired key is decoded as JSON text; a bad escape in it (\\x) raised the decoder's
    # own JSONDecodeError out of decision.make instead of failing the attempt
    for bad in ("{'call': 'go', 'c\\x': 1}", '{"call": "go", "c\\x": 1,}'):
        rt = ScriptedRuntime([bad, '{"call": "go"}'])
        assert decision.make("Pick.", ["stay", "go"], runtime=rt) == "go"
        first = decision.last_trace().attempts[0]
        assert first.error_kind == "no_action" and first.repairs == []
        assert R.repair_syntax(bad) is None


def wants_text(x: str):
    """Say it."""
    return x


# Replies that need a syntax repair and whose repaired pick then fails validation (x must be a
# str), each with the failing value as written (None: not marked, a key without quotes moves
# every offset). Where the failing value sits was looked for in the raw reply with the strict
# JSON scanner, whose "no value here" (a StopIteration) left a generator as Python's bare
# `RuntimeError: generator raised StopIteration`: no re-ask, no trace (issue 54, case 1).
SYNTAX_THEN_INVALID = [
    ("{'call': 'wants_text', 'args': {'x': [1]}}", "[1]"),
    ('{"call": "wants_text", "args": {"x": [1,]}}', "[1,]"),
    ('{"call": "wants_text", "args": {"x": [True]}}', "[True]"),
    ('{"call": "wants_text", "args": {"x": [1, // one\n 2]}}', "[1, // one\n 2]"),
    ('{"call": "wants_text", "args": {"x": [1e400],}}', "[1e400]"),
    ("{'call': 'wants_text', 'args': {'x': 1e400}}", "1e400"),
    ("{'call': 'wants_text', /* a \"note\" */ 'args': {'x': {'it\\'s': None}}}",
     "{'it\\'s': None}"),
    ("{call: 'wants_text', args: {x: 7}}", None),
]


@pytest.mark.parametrize("reply, marked", SYNTAX_THEN_INVALID)
def test_a_repaired_pick_that_fails_validation_is_reasked_with_its_trace(reply, marked):
    ok = '{"call": "wants_text", "args": {"x": "fine"}}'
    rt = ScriptedRuntime([reply, ok])
    assert decision.make("Say it.", [wants_text], runtime=rt) == "fine"
    first = decision.last_trace().attempts[0]
    assert first.repairs and first.error_path == "args.x"
    assert first.error_kind in ("type_mismatch", "invalid_value")
    # the failing value is marked in the raw reply, as the repair read it
    span = first.error_span
    assert (reply[span[0]:span[1]] if span is not None else None) == marked
    assert "args.x" in rt.calls[1].prompt  # the re-ask names the problem
    # with no re-ask left: the library's DecisionError, carrying the whole trace
    with pytest.raises(DecisionError) as info:
        decision.make("Say it.", [wants_text], runtime=ScriptedRuntime([reply]),
                      max_retries=0)
    assert info.value.kind == first.error_kind and info.value.trace.attempts[0].repairs
    # an evaluation's row is re-asked like any other (one row at a time: the replies are one
    # queue, and two rows at once could each take the other's)
    res = decision.evaluate("Say it: {n}", [wants_text], [{"n": 1}, {"n": 2}],
                            runtime=ScriptedRuntime([reply, ok, reply, ok]), progress=False,
                            concurrency=1)
    assert res.statuses == ["resolved", "resolved"] and res.results == ["fine", "fine"]


def test_a_custom_reask_gets_the_same_hint_as_the_default():
    replies = ['{"call": "Look-Up", "args": {"city": "Bern"}}',
               '{"call": "look_up", "args": {"city": "Bern", "days": "2"}}',
               '{"call": "look_up", "args": {"city": "Bern"}}']
    rt = ScriptedRuntime(replies)
    decision.make("Pick.", OPTIONS, runtime=rt, max_retries=2, repair="safe",
                  reask="{kind}: {error} | {hint}")
    assert [c.prompt.split(":")[0] for c in rt.calls[1:]] == ["unknown_call", "type_mismatch"]
    hints = [c.prompt.split(" | ", 1)[1] for c in rt.calls[1:]]
    assert hints == ["""It nearly matches the option 'look_up': write "call": "look_up".""",
                     "At args.days write 2 (the number without quotes)."]
    seen: list = []
    rt = ScriptedRuntime(replies)
    decision.make("Pick.", OPTIONS, runtime=rt, max_retries=2, repair="safe",
                  reask=lambda r: seen.append(r) or f"again ({r.hint or 'no hint'})")
    assert [r.hint for r in seen] == hints
    assert rt.calls[2].prompt == "again (At args.days write 2 (the number without quotes).)"
    # a failure no repair level would fix has no hint
    rt = ScriptedRuntime(['{"call": "look_up", "args": {}}', '{"call": "look_up", '
                          '"args": {"city": "Bern"}}'])
    decision.make("Pick.", OPTIONS, runtime=rt, repair="safe", reask="[{hint}]")
    assert rt.calls[1].prompt == "[]"


SAFE_TEXT = st.text(alphabet=st.characters(blacklist_characters="\\\"'",
                                           blacklist_categories=("Cs",)), max_size=8)
SLOPPY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9),
              st.floats(allow_nan=False, allow_infinity=False), SAFE_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=6),
                            st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
                                            inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(args=st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
                            SLOPPY_JSON, max_size=4),
       flags=st.fixed_dictionaries({k: st.booleans() for k in
                                    ("sq", "bare", "py", "comma", "comment")}))
def test_a_sloppy_pick_repairs_to_the_value_it_spells(args, flags):
    obj = {"call": "x", "args": args}
    text = dump(obj, **flags)
    got = R.repair_syntax("Here it is: " + text)
    if text == json.dumps(obj, ensure_ascii=False) or json_ok(text):
        assert got is None  # valid as written: the strict reading's, never repaired
        return
    assert got is not None, text
    assert got[0] == obj
    assert got[1] == (12, 12 + len(text))


PLAIN_TEXT = st.text(alphabet=st.characters(blacklist_characters="\\\"' \t",
                                            blacklist_categories=("Cs",)), max_size=8)
PLAIN_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), PLAIN_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
                                            inner, max_size=4)),
    max_leaves=16)


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
                            PLAIN_JSON, max_size=5),
       flags=st.fixed_dictionaries({k: st.booleans() for k in
                                    ("sq", "bare", "py", "comma", "comment")}),
       cut_at=st.one_of(st.none(), st.integers(1, 400)))
def test_plain_members_read_in_one_match_as_token_by_token(args, flags, cut_at):
    # Members written `key: value, key` with single spaces are read one match at a time; a tab
    # in place of each space (same length, same token count) makes the token loop read them:
    # the pick, its span and every repair are the same either way.
    text = "Here it is: " + dump({"call": "x", "args": args}, **flags)
    cut = cut_at is not None
    if cut:
        text = text[:cut_at]
    fast, slow = R.repair_syntax(text, cut), R.repair_syntax(text.replace(" ", "\t"), cut)
    if fast is None or slow is None:
        assert fast is None and slow is None, text
        return
    assert fast[:2] == slow[:2]
    assert [(r.kind, r.path, r.before, r.after, r.span) for r in fast[2]] == \
        [(r.kind, r.path, r.before.replace("\t", " "), r.after, r.span) for r in slow[2]]


NO_MATCH = re.compile(r"(?!)")


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
                            PLAIN_JSON, max_size=5),
       flags=st.fixed_dictionaries({k: st.booleans() for k in
                                    ("sq", "bare", "py", "comma", "comment")}),
       spacing=st.sampled_from([("", ""), (": ", ":"), (", ", ","), ("{", "{ "), ("}", " }"),
                                (",}", ", }"), ("}", "},"), (" ", "  ")]),
       cut_at=st.one_of(st.none(), st.integers(1, 400)),
       budget=st.one_of(st.none(), st.integers(0, 80)))
def test_the_object_lane_reads_as_the_token_loop_alone(args, flags, spacing, cut_at, budget):
    # The lane (_MEMBER, _AFTER) reads members, nested objects and closing braces a match at a
    # time; with _MEMBER never matching, every token goes through the token loop. Same pick,
    # span, repairs, and the same budget left, on the whole reply or a budget that runs out.
    text = "Here it is: " + dump({"call": "x", "args": args}, **flags).replace(*spacing)
    cut = cut_at is not None
    if cut:
        text = text[:cut_at]

    assert _read(text, cut, budget, lane=True) == _read(text, cut, budget, lane=False)


def _read(text, cut, budget, lane):
    """What the repair makes of `text` with the object lane or with the token loop alone:
    the pick, its span and its repairs; with a budget, `_one_value`'s reading and the budget
    left (or that it failed)."""
    saved = S._MEMBER
    if not lane:
        S._MEMBER = NO_MATCH
    try:
        if budget is None:
            got = R.repair_syntax(text, cut)
            return None if got is None else (
                got[:2], [(r.kind, r.path, r.before, r.after, r.span) for r in got[2]])
        left, start = [budget], text.find("{")
        if start < 0:
            return None  # cut before the pick
        try:
            fixed, repairs, end = S._one_value(text, start, left, cut)
        except S._Fail:
            return "failed", left
        return fixed, end, repairs, left  # (kind, path, span, text written) each
    finally:
        S._MEMBER = saved


QUOTED_TEXT = st.text(alphabet=st.sampled_from(list("ab '\"\\é/{}")), max_size=6)
QUOTED_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-99, 99), QUOTED_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(QUOTED_TEXT, inner, max_size=3)),
    max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(QUOTED_TEXT, QUOTED_JSON, max_size=4),
       flags=st.fixed_dictionaries({k: st.booleans() for k in
                                    ("sq", "bare", "py", "comma", "comment")}),
       cut_at=st.one_of(st.none(), st.integers(1, 300)),
       budget=st.one_of(st.none(), st.integers(0, 80)))
def test_quotes_and_backslashes_in_strings_read_as_by_the_token_loop_alone(args, flags, cut_at,
                                                                             budget):
    # The lane reads a single-quoted string only when it holds no " and no \ (it swaps the
    # quotes); the others, keys and values, go to the token loop, which requotes them whole.
    # Same pick, span, repairs and budget left with the lane and without it; whole, the pick
    # repairs to the value it spells.
    obj = {"call": "x", "args": args}
    text = "Here it is: " + dump(obj, **flags)
    cut = cut_at is not None
    if cut:
        text = text[:cut_at]
    elif budget is None and not json_ok(text[12:]):
        got = R.repair_syntax(text)
        assert got is not None and got[0] == obj and got[1] == (12, len(text)), text

    assert _read(text, cut, budget, lane=True) == _read(text, cut, budget, lane=False)


def json_ok(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False
