"""`decision.improve` (issue 36) on a picker whose picks depend on what the menu says: a toy
model that picks the option whose menu block (description and examples) shares the most words
with the request. A useful description edit therefore really helps on held-out rows, an edit
fitted to the training rows' own words helps only there, and a neutral one changes nothing."""
import json
import random
import re

import pytest

import openprogram as op
from openprogram import UsageError, decision
from openprogram.runtimes import CachedRuntime, ScriptedRuntime

WORDS = {"billing": ["invoice", "charged", "refund", "receipt", "payment", "price"],
         "shipping": ["parcel", "courier", "tracking", "delivery", "package", "arrive"],
         "account": ["password", "login", "username", "locked", "profile", "email"],
         "other": ["weather", "joke", "poem", "music", "football", "recipe"]}
# Each option's description names one of its words, so the menu starts out half right.
OPTIONS = {"billing": ("BILL", "Questions about an invoice"),
           "shipping": ("SHIP", "Where a parcel is"),
           "account": ("ACCOUNT", "Trouble with a password"),
           "other": ("OTHER", "Anything else, like the weather")}
PROMPT = "Route this request to one team: {text}"


def labelled(n=48, seed=1):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = list(WORDS)[i % 4]
        rows.append({"text": f"ticket{i}x {' '.join(rng.sample(WORDS[label], 2))}",
                     "label": label})
    return rows


def words(text):
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class Picker:
    """The toy model: reads the request and the menu out of the prompt, as a model would."""

    def __init__(self):
        self.requests = []

    def __call__(self, prompt):
        request = re.search(r"one team: (.*)", prompt).group(1)
        self.requests.append(request)
        menu = prompt[prompt.index("Options ("):]
        best, best_score = None, -1
        for block in menu.split("\n\n- ")[1:]:
            name = block.split("(", 1)[0].strip()
            body = "\n".join(line for line in block.splitlines()[1:]
                             if not line.strip().startswith("Call:"))
            body += " " + name.replace("_", " ")   # a name is read too (the request's words
            # are never the four names, so this matters only once improve renames one)
            score = len(words(request) & words(body))
            if score > best_score:
                best, best_score = name, score
        return json.dumps({"call": best})


def picker_runtime():
    picker = Picker()
    return ScriptedRuntime(rule=picker), picker


def run(proposer, *, max_examples=0, budget=2000, runtime=None, rows=None, **kw):
    rt = runtime or picker_runtime()[0]
    return decision.improve(PROMPT, OPTIONS, rows or labelled(), expected="label", runtime=rt,
                            proposer=proposer, budget=budget, max_examples=max_examples, **kw)


def passed(imp, e):
    """Whether a kept edit passed the held-out test: alone, or in a kept combination."""
    if e["combination"] is None:
        return e["held_gain_lo"] > 0
    combo = imp.combinations[e["combination"]]
    return combo["kept"] and combo["held_gain_lo"] > 0 and \
        imp.edits.index(e) in combo["members"]


def test_a_helpful_description_is_kept_and_measured_on_held_out_rows():
    imp = run("keywords")
    assert imp.kept, imp.edits
    before, after = imp.report["held_out_before"], imp.report["held_out_after"]
    assert after["accuracy"] > before["accuracy"]
    assert imp.report["measured_on"] == "accuracy"
    assert imp.report["split"]["held_out"] == 24 and imp.report["split"]["train"] == 24
    for e in imp.kept:
        assert passed(imp, e) and e["kind"] == "description"
    per = imp.report["per_option"]
    assert sum(v["held_out_rows"] for v in per.values()) == 24
    assert per[imp.kept[0]["option"]]["after"] >= per[imp.kept[0]["option"]]["before"]
    # the new option set works as given
    rt, _ = picker_runtime()
    kept = imp.kept[0]
    better = {o.name: o for o in imp.options}[kept["option"]]
    assert better.description == kept["after"] != kept["before"]
    assert "requests about" in imp.diff() and kept["option"] in imp.diff()
    assert decision.make(PROMPT.format(text="my invoice and refund"), imp.options,
                         runtime=rt) == "BILL"
    frame = imp.to_frame()
    assert list(frame["kept"]).count(True) == len(imp.kept)
    assert "<script>" not in imp._repr_html_()


def test_an_edit_fitted_to_the_training_rows_is_rejected_by_the_held_out_rows():
    seen = []

    def overfit(name, description, evidence):
        seen.append(evidence)
        # the training requests' own ticket numbers: they match those rows and no other
        ids = [w for r in evidence["requests"] for w in r.split() if w.startswith("ticket")]
        return f"{description} {' '.join(ids)}"

    imp = run(overfit)
    tried = [e for e in imp.edits if e["kind"] == "description"]
    assert tried and not imp.kept
    # each helped on the training rows and did nothing on held-out ones
    assert any(e["train_after"] > e["train_before"] and e["held_gain"] == 0 for e in tried)
    assert "leans optimistic" in imp.report["caveat"]
    assert all(e["why"] != "held-out gain above zero at 95 %" for e in tried)
    assert [o.description for o in imp.options] == [o.description
                                                      for o in decision_options()]
    assert "No edit helped" in imp.diff() and "found" in imp.report
    # the proposer saw training rows only
    held = {labelled()[i]["text"] for i in imp.report["split"]["held_out_rows"]}
    for ev in seen:
        shown = ev["requests"] + ev["other_requests"] + [t for t, _ in ev["missed"]] + \
            [t for t, _ in ev["taken"]]
        assert shown and not (set(shown) & held)


def decision_options():
    from openprogram.decision.options import normalize
    return list(normalize(OPTIONS))


def test_a_neutral_edit_is_rejected_on_the_training_rows_and_costs_no_held_out_call():
    rt, picker = picker_runtime()
    imp = run(lambda name, description, ev: description + " Thanks.", runtime=rt)
    assert not imp.kept and imp.edits
    assert {e["why"] for e in imp.edits} == {"no gain on the training rows"}
    # baseline: train + held-out once; then each candidate on the training rows only
    assert imp.report["calls"] == 48 + 24 * len(imp.edits) == len(picker.requests)


def test_held_out_rows_never_feed_an_example_and_examples_can_help():
    rt, picker = picker_runtime()
    imp = run("keywords", max_examples=3, runtime=rt)
    examples = [e for e in imp.edits if e["kind"] == "example"]
    assert examples
    held = {labelled()[i]["text"] for i in imp.report["split"]["held_out_rows"]}
    train = {labelled()[i]["text"] for i in imp.report["split"]["train_rows"]}
    for e in examples:
        assert {x["request"] for x in e["after"]} <= train
        assert not {x["request"] for x in e["after"]} & held
    for o in imp.options:
        for ex in o.examples:
            assert ex["source"]["kind"] == "improve"
            assert "training row" in ex["source"]["label"]
    # the toy picker reads examples: the one kept example edit raised held-out accuracy
    kept = [e for e in examples if e["kept"]]
    assert kept and all(passed(imp, e) for e in kept)
    assert set(imp.report["split"]["train_rows"]).isdisjoint(imp.report["split"]["held_out_rows"])


def test_a_rerun_through_the_cache_makes_no_model_call(tmp_path):
    rt, picker = picker_runtime()
    cached = CachedRuntime(rt, tmp_path / "cache.jsonl")
    first = run("keywords", max_examples=1, runtime=cached)
    n = len(picker.requests)
    assert first.report["calls"] == first.report["new_calls"] == n > 0
    again = run("keywords", max_examples=1, runtime=CachedRuntime(rt, tmp_path / "cache.jsonl"))
    assert len(picker.requests) == n and again.report["new_calls"] == 0
    # the cached calls count against the budget as they did the first time
    assert again.report["calls"] == again.report["cached_calls"] == n
    assert [e["kept"] for e in again.edits] == [e["kept"] for e in first.edits]
    assert again.report["held_out_after"] == first.report["held_out_after"]


def test_the_budget_stops_the_search_and_keeps_what_was_measured():
    with pytest.warns(op.OptionWarning, match="stopped the search after 0 of 4 candidates"):
        imp = run("keywords", budget=100)
    assert imp.report["stopped"] == "budget of 100 model calls reached"
    assert imp.report["calls"] <= 100 + 48
    assert "held_out_after" in imp.report


def test_a_proposer_with_nothing_usable_is_counted_and_skipped():
    answers = iter([None, "", 42, "   "] * 4)
    imp = run(lambda *a: next(answers))
    assert imp.edits and all(e["why"] == "the proposer returned nothing usable"
                             for e in imp.edits)
    assert not imp.kept


def test_a_model_as_proposer_is_asked_through_the_mechanism():
    # a proposer runtime that answers with a description naming the option's own words
    def propose(prompt):
        name = re.search(r"Option '(\w+)'", prompt).group(1)
        return json.dumps({"call": "rewrite", "args": {"description": " ".join(WORDS[name])}})
    proposer = ScriptedRuntime(rule=propose)
    imp = run(proposer)
    assert imp.kept and imp.report["proposer_calls"] == len(proposer.calls) > 0
    assert imp.report["held_out_after"]["accuracy"] > imp.report["held_out_before"]["accuracy"]


def test_bad_input_gets_clear_errors():
    rt, _ = picker_runtime()
    with pytest.raises(UsageError, match="at least 20 labelled rows"):
        decision.improve(PROMPT, OPTIONS, labelled(10), expected="label", runtime=rt)
    rows = labelled()
    rows[3]["label"] = "refunds"
    with pytest.raises(UsageError, match="'refunds' name no option"):
        decision.improve(PROMPT, OPTIONS, rows, expected="label", runtime=rt)
    with pytest.raises(UsageError, match="rename=.*True"):
        decision.improve(PROMPT, OPTIONS, labelled(), expected="label", runtime=rt,
                         rename="yes")
    with pytest.warns(op.OptionWarning, match="nothing an edit does can be"):
        imp = decision.improve(PROMPT, OPTIONS, labelled(10), expected="label", runtime=rt,
                               holdout=0)
    assert not imp.edits and imp.report["split"]["held_out"] == 0


def test_aimprove_gives_the_same_result():
    import asyncio
    rt, _ = picker_runtime()
    imp = asyncio.run(decision.aimprove(PROMPT, OPTIONS, labelled(), expected="label",
                                        runtime=rt, proposer="keywords", max_examples=0))
    assert [e["kept"] for e in imp.edits] == [e["kept"] for e in run("keywords").edits]


def test_a_proposers_text_is_escaped_in_the_panel_and_cut_to_a_bound():
    hostile = "<script>alert(1)</script> " + " ".join(w for ws in WORDS.values() for w in ws)
    imp = run(lambda name, description, ev: hostile + " x" * 1000)
    html = imp._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert all(len(e["after"]) <= 400 for e in imp.edits if e["after"])


def function_options():
    """The same four teams as functions, each with one parameter whose description the
    proposer may rewrite (its menu line is part of the block the toy picker reads)."""
    def make(team, said):
        def route(note: str = "") -> str:
            return team
        route.__doc__ = said
        route.__name__ = team.lower()
        route.input_meta = {"note": {"description": "a note"}}
        return route
    return {name: make(value, said) for name, (value, said) in OPTIONS.items()}


def test_a_helpful_parameter_description_is_kept_and_shows_in_every_way_of_asking():
    asked = []

    def params_only(name, description, evidence):
        asked.append((name, evidence))
        if evidence["parameter"] is None:
            return None   # leave the options' own descriptions alone
        option = evidence["option"]
        return f"{description}, about {' '.join(WORDS[option])}"

    options = function_options()
    rt, _ = picker_runtime()
    imp = decision.improve(PROMPT, options, labelled(), expected="label", runtime=rt,
                           proposer=params_only, budget=2000, max_examples=0)
    params = [e for e in imp.edits if e["kind"] == "parameter"]
    assert params and {e["parameter"] for e in params} == {"note"}
    assert {n for n, _ in asked if "." in n} == {f"{o}.note" for o in OPTIONS}
    assert all(ev["parameter"] == "note" and ev["option"] == n.split(".")[0]
               for n, ev in asked if "." in n)
    kept = [e for e in imp.kept if e["kind"] == "parameter"]
    assert kept and all(passed(imp, e) for e in kept)
    assert imp.report["held_out_after"]["accuracy"] > imp.report["held_out_before"]["accuracy"]
    e = kept[0]
    new = {o.name: o for o in imp.options}[e["option"]]
    old = {o.name: o for o in decision_options_of(options)}[e["option"]]
    # the edited option: its menu line, its tool schema and its pick schema say the new text
    assert e["after"] in "\n".join(new.menu_lines())
    assert new.json_schema()["properties"]["note"]["description"] == e["after"]
    assert new.pick_schema()["properties"]["args"]["properties"]["note"]["description"] \
        == e["after"]
    # the option set the user gave, and its cached options, are untouched
    assert old.json_schema()["properties"]["note"]["description"] == "a note" == e["before"]
    assert options[e["option"]].input_meta == {"note": {"description": "a note"}}
    assert "parameter 'note'" in imp.diff() and "input_meta=" in imp.diff()
    assert list(imp.to_frame()["parameter"]).count("note") == len(params)
    # the picked function still runs with the edited description
    assert decision.make(PROMPT.format(text="my invoice and refund"), imp.options,
                         runtime=picker_runtime()[0]) == "BILL"


def decision_options_of(options):
    from openprogram.decision.options import normalize
    return list(normalize(options))


def test_a_parameter_description_on_a_tool_definition_and_a_class():
    import pydantic

    from openprogram.decision.options import normalize

    class Order(pydantic.BaseModel):
        """An order."""
        qty: int = pydantic.Field(description="how many")

    ship = op.tool({"name": "ship", "description": "Ship it", "input_schema": {
        "type": "object", "properties": {"city": {"type": "string", "description": "dest"}},
        "required": ["city"]}})
    order, tool = normalize({"order": Order, "ship": ship})
    for option, param, before in ((order, "qty", "how many"), (tool, "city", "dest")):
        new = option.with_param_description(param, "NEW TEXT")
        assert "NEW TEXT" in "\n".join(new.menu_lines())
        assert "NEW TEXT" in json.dumps(new.json_schema())
        assert "NEW TEXT" not in json.dumps(option.json_schema())
        assert before in json.dumps(option.json_schema())
    with pytest.raises(op.OptionError, match="no parameter 'nope'.*\\['qty'\\]"):
        order.with_param_description("nope", "x")


class InterruptingPicker(Picker):
    """The toy picker, which presses Ctrl-C (interrupts the main thread) on call `after`."""

    def __init__(self, after=None):
        super().__init__()
        self.after = after

    def __call__(self, prompt):
        out = super().__call__(prompt)
        if len(self.requests) == self.after:
            import _thread
            _thread.interrupt_main()
        return out


@pytest.mark.usefixtures("python_sigint")
def test_an_interrupted_improve_resumes_from_its_journal(tmp_path):
    from openprogram.evaluation.journal import JournalMismatch
    path = tmp_path / "improve.jsonl"
    proposed = []

    def propose(prompt):
        proposed.append(prompt)
        name = re.search(r"Option '(\w+)'", prompt).group(1)
        return json.dumps({"call": "rewrite", "args": {"description": " ".join(WORDS[name])}})

    def go(picker, **kw):
        return run(ScriptedRuntime(rule=propose, name="proposer"), max_examples=1,
                   runtime=ScriptedRuntime(rule=picker, name="picker"), concurrency=1,
                   journal=path, **kw)

    whole_picker = Picker()
    whole = run(ScriptedRuntime(rule=propose, name="proposer"), max_examples=1,
                runtime=ScriptedRuntime(rule=whole_picker, name="picker"), concurrency=1)
    asked_whole, proposed[:] = len(proposed), []
    assert whole.kept and asked_whole > 0

    first = InterruptingPicker(after=110)   # past the baseline (48 rows), amid the candidates
    with pytest.raises(KeyboardInterrupt, match="same call resumes"):
        go(first)
    asked_first = len(proposed)
    assert 110 <= len(first.requests) < len(whole_picker.requests) and asked_first > 0

    second = Picker()
    resumed = go(second)
    j = resumed.report["journal"]
    # nothing journaled is asked again: the rows and the proposals split between the runs
    assert j["rows_resumed"] >= 110 - 1 and j["proposals_resumed"] == asked_first
    assert j["rows_resumed"] + len(second.requests) == len(whole_picker.requests)
    assert len(proposed) == asked_whole   # the second run asked only what the first did not
    assert resumed.report["new_calls"] == len(second.requests) + asked_whole - asked_first
    # what the journal answered counts against the budget as it did when it was asked
    assert resumed.report["calls"] == whole.report["calls"]
    # and it ends where the uninterrupted run ends
    assert [(e["option"], e["kind"], e["after"], e["kept"]) for e in resumed.edits] == \
        [(e["option"], e["kind"], e["after"], e["kept"]) for e in whole.edits]
    assert resumed.report["held_out_after"] == whole.report["held_out_after"]

    third = Picker()
    again = go(third)
    assert third.requests == [] and again.report["new_calls"] == 0
    assert again.report["calls"] == again.report["resumed_calls"] == whole.report["calls"]
    assert len(proposed) == asked_whole
    assert [e["kept"] for e in again.edits] == [e["kept"] for e in whole.edits]

    # the journal of one runtime is not resumed with another
    with pytest.raises(JournalMismatch, match="runtime"):
        run("keywords", runtime=ScriptedRuntime(rule=Picker(), name="another"), journal=path)
    with pytest.raises(UsageError, match="journal=.*file path"):
        run("keywords", journal=True)


def test_a_helpful_rename_is_kept_and_a_pick_still_returns_the_codes_name():
    def names_only(name, description, evidence):
        # a name made of the option's own words: it helps on rows of every side
        return f"{name}_{'_'.join(WORDS[name])}" if evidence.get("rename") else None

    options = {**OPTIONS, "account": ("Trouble with a password", {"user": str}),
               "other": ("Anything else, like the weather", {"topic": str})}
    picker = ScriptedRuntime(rule=lambda prompt: _with_args(Picker()(prompt)))
    imp = decision.improve(PROMPT, options, labelled(), expected="label", runtime=picker,
                           proposer=names_only, rename=True, budget=4000, max_examples=0)
    renames = [e for e in imp.edits if e["kind"] == "name"]
    assert {e["option"] for e in renames} == set(OPTIONS)
    kept = [e for e in imp.kept if e["kind"] == "name"]
    assert kept and all(e["after"].startswith(e["option"] + "_") for e in kept)
    assert imp.report["held_out_after"]["accuracy"] > imp.report["held_out_before"]["accuracy"]
    assert set(imp.report["per_option"]) == set(OPTIONS)
    by_code = {o.code_name: o for o in imp.options}
    assert set(by_code) == set(OPTIONS)
    for e in kept:
        assert by_code[e["option"]].name == e["after"]
        assert f"shown to the model as {e['after']!r}" in imp.diff()
    # the caller's code sees the names it gave: a value option, a schema option
    shown = {o.code_name: o.name for o in imp.options}
    assert decision.make(PROMPT.format(text="my invoice and refund"), imp.options,
                         runtime=picker) == "BILL"
    assert decision.parse_args(json.dumps({"call": shown["billing"]}), imp.options)[0] \
        == "billing"
    got = decision.parse_args(json.dumps({"call": shown["account"], "args": {"user": "x"}}),
                              imp.options)
    assert got[0] == "account"
    assert decision.make("x", imp.options, runtime=ScriptedRuntime(replies=[json.dumps(
        {"call": shown["account"], "args": {"user": "ann"}})])) == \
        {"decision": "account", "user": "ann"}


def _with_args(reply):
    pick = json.loads(reply)
    if pick["call"].startswith("account"):
        pick["args"] = {"user": "ann"}
    elif pick["call"].startswith("other"):
        pick["args"] = {"topic": "x"}
    return json.dumps(pick)


def test_a_rename_that_is_not_a_name_or_names_another_option_is_skipped():
    replies = iter(["shipping", "two words", "9lives", "<script>", "x" * 65] * 4)

    def bad(name, description, evidence):
        return next(replies) if evidence.get("rename") else None

    imp = run(bad, rename=True)
    renames = [e for e in imp.edits if e["kind"] == "name"]
    assert len(renames) == 4 and not imp.kept
    assert {e["why"] for e in renames} == {"the proposer returned nothing usable"}


def test_the_built_in_and_a_model_proposer_propose_names():
    from openprogram.evaluation.improve import keyword_proposer
    evidence = {"requests": ["an invoice refund"], "other_requests": ["a parcel"],
                "rename": True}
    assert keyword_proposer("billing", "billing", evidence) == "billing_invoice"

    def propose(prompt):
        if "improve the name" not in prompt:
            return json.dumps({"call": "rewrite", "args": {"description": "same"}})
        name = re.search(r"\(in the code: '(\w+)'\)", prompt).group(1)
        return json.dumps({"call": "rename", "args": {"name": f"{name}_{'_'.join(WORDS[name])}"}})

    proposer = ScriptedRuntime(rule=propose)
    imp = run(proposer, rename=True)
    assert [e for e in imp.kept if e["kind"] == "name"]
    assert imp.report["proposer_calls"] == len(proposer.calls)


def test_a_tampered_journal_is_a_clear_error(tmp_path):
    from openprogram.evaluation.journal import JournalFileError
    path = tmp_path / "improve.jsonl"
    run("keywords", journal=path, max_examples=0)
    lines = path.read_text().splitlines()
    for field, value in (("p", "lots"), ("pick", "nobody"), ("args", [1])):
        at = next(k for k, line in enumerate(lines) if '"kind":"row"' in line
                  and '"pick"' in line)
        row = json.loads(lines[at])
        row[field] = value
        path.write_text("\n".join(lines[:at] + [json.dumps(row)] + lines[at + 1:]) + "\n")
        with pytest.raises(JournalFileError, match=f"{field} = .*never writes"):
            run("keywords", journal=path, max_examples=0)
    path.write_text("\n".join(lines) + "\n")
    again = run("keywords", journal=path, max_examples=0)
    assert again.report["new_calls"] == 0 and again.report["journal"]["rows_resumed"] > 0


def test_the_step_through_cites_improve_for_every_line_it_wrote():
    from openprogram.decision.stepthrough import menu_sources

    def everything(name, description, evidence):
        words = WORDS[evidence["option"]]
        if evidence.get("rename"):
            return f"{name}_{'_'.join(words[4:])}"
        if evidence["parameter"]:
            return f"{description}, about {' '.join(words[2:4])}"
        return f"{description}, about {' '.join(words[:2])}"

    imp = decision.improve(PROMPT, function_options(), labelled(), expected="label",
                           runtime=picker_runtime()[0], proposer=everything, rename=True,
                           budget=4000, max_examples=1)
    assert imp.kept, imp.edits
    rows = menu_sources(imp.options)
    for e in imp.kept:
        shown = {o.code_name: o.name for o in imp.options}[e["option"]]
        part = {"description": "description", "name": "signature", "parameter": "param",
                "example": "example"}[e["kind"]]
        mine = [r for r in rows if r["option"] == shown and r["part"] == part]
        assert mine and any(r["source"]["kind"] == "improve" for r in mine), (e, mine)
    # a line no edit touched still cites the code
    untouched = [r for r in rows if r["part"] == "call"]
    assert untouched and all(r["source"]["kind"] == "derived" for r in untouched)


def test_the_step_through_cites_improve_for_a_kept_description():
    from openprogram.decision.stepthrough import menu_sources
    imp = run("keywords")
    edited = {e["option"] for e in imp.kept if e["kind"] == "description"}
    assert edited
    for option in edited:
        rows = [r for r in menu_sources(imp.options) if r["option"] == option]
        assert [r["source"]["kind"] for r in rows if r["part"] == "description"] == ["improve"]
    others = [r for r in menu_sources(imp.options) if r["option"] not in edited
              and r["part"] == "description"]
    assert others and all(r["source"]["kind"] != "improve" for r in others)
