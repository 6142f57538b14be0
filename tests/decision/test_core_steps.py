"""The step-through of a recorded decision (openprogram.decision.stepthrough, issue 27).

Decisions run on ScriptedRuntime; the stages are read from their traces. The static HTML is
parsed with html.parser (the standard library's), so "escaped" means the parser met no element
the model or the option set wrote; the source links are followed to the file and line, the
option set entry, the pydantic field or the JSON Schema keyword they name.
"""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

import openprogram
from openprogram import DecisionError, ToolCall, decision
from openprogram.__main__ import main
from openprogram.base.errors import UsageError
from openprogram.decision.stepthrough import STAGE_RULES, candidates, menu_sources
from openprogram.runtimes import ScriptedRuntime

RULES_MD = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
RULE_IDS = set(re.findall(r"^- ([A-Z]\d+) ", RULES_MD.read_text(encoding="utf-8"), flags=re.M))


def analyze(text: str, depth: int = 1, user: str = "x") -> str:
    """Analyze the sentiment."""
    return f"{text}:{depth}:{user}"


analyze.input_meta = {"user": {"hidden": True}, "text": {"description": "the message"}}


class Order(BaseModel):
    """An order of one item."""
    item: str = Field(description="what to order")
    qty: int = Field(ge=1)


BOOK_SCHEMA = {"type": "object", "description": "Book seats.",
               "properties": {"n": {"type": "integer", "minimum": 1},
                              "who": {"type": "object", "properties": {"a": {"type": "string"}},
                                      "required": ["a"]}},
               "required": ["n"]}

OPTIONS = {"analyze": analyze, "done": ("OVER", "nothing left"),
           "esc": ("Hand over.", {"reason": str, "urgency": {"type": str,
                                                            "options": ["low", "high"]}}),
           "order": Order, "book": openprogram.JsonSchema(BOOK_SCHEMA)}

FIRST = ('Example: {"call": "done"} then {"action": "analyze", '
         '"args": {"text": "hi", "depth": "two"}}')
SECOND = '{"call": "analyze", "args": {"text": "hi", "depth": 2, "user": "root"}}'


def two_attempts():
    rt = ScriptedRuntime([FIRST, SECOND])
    assert decision.make("Pick one.", OPTIONS, runtime=rt, context={"user": "ann"}) == "hi:2:ann"
    return decision.last_trace()


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.sections, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "section":
            self.sections.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: str) -> Elements:
    p = Elements()
    p.feed(page)
    return p


def test_every_stage_of_a_two_attempt_decision_is_its_own_section_of_the_static_html():
    st = decision.steps(two_attempts(), OPTIONS)
    kinds = [s.kind for s in st]
    assert kinds == ["options", "sent", "reply", "validation", "hidden", "reask",
                     "sent", "reply", "validation", "hidden", "resolution"]
    assert [s.attempt for s in st] == [None, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    assert sorted({s.number for s in st}) == [1, 2, 3, 4, 5, 6, 7]
    static = st.to_html()
    assert static.startswith('<div class="op-view mathjax_ignore tex2jax_ignore')
    page = parsed(static)
    assert [int(s["data-stage"]) for s in page.sections] == list(range(len(st)))
    text = "".join(page.text)
    for stage in st:
        assert stage.heading() in text and stage.explanation in text
    # and each stage's content, not only its heading
    for row in st[0].data["sources"]:
        assert row["line"] in text and row["source"]["label"] in text
    for i in (1, 6):
        assert st.trace.attempts[st[i].attempt - 1].prompt in text
    assert FIRST in text and SECOND in text
    for i in (3, 8):
        for row in st[i].data["args"]:
            assert row["path"] in text and row["why"] in text
    assert "dropped what the model wrote at args.user" in text
    for line in st[5].lines:
        assert line in text
    assert "result: 'hi:2:ann'" in text
    assert st._repr_mimebundle_()["text/html"] == static


def test_each_stage_cites_a_rule_that_exists_in_docs_rules_md():
    assert set(STAGE_RULES.values()) <= RULE_IDS
    rt = ScriptedRuntime(["no pick here", '{"call": "nope"}'])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    for trace in (two_attempts(), info.value.trace):
        for stage in decision.steps(trace, OPTIONS):
            assert stage.rule in RULE_IDS, stage
            assert f'data-rule="{stage.rule}"' in stage.html()


def test_the_reply_stage_outlines_every_candidate_marks_the_pick_and_the_alias():
    st = decision.steps(two_attempts(), OPTIONS)
    reply = st[2]
    cands = reply.data["candidates"]
    assert [c["role"] for c in cands] == ["ignored", "pick"]
    assert [c["key"] for c in cands] == ["call", "action"]
    assert FIRST[slice(*cands[0]["span"])] == '{"call": "done"}'
    assert reply.data["alias"] == "action"
    assert 'the alias "action" was normalised to "call"' in html.unescape(reply.body)
    assert reply.body.count("op-cand-ignored") == 1 and reply.body.count("op-cand-pick") == 1
    assert candidates('{"x": 1} {"tool": "a", "args": {"call": "inner"}}') == [
        {"span": [9, 49], "key": "tool", "call": "'a'"}]


def test_the_outlined_candidates_are_the_ones_the_extractor_counts(monkeypatch):
    from openprogram.decision import extract
    reply = ('First {"call": "a"}, then {"x": {"action": "b"}} and {"call": NaN} and '
             '{"call": "c", "args": {"call": "d"}}')
    ex = extract.find_action(reply)
    cands = candidates(reply)
    assert [c["call"] for c in cands] == ["'a'", "'b'", "'c'"]  # NaN is not JSON: no candidate
    assert len(cands) == ex.candidates and cands[-1]["span"] == list(ex.span)
    # a model repeating itself: the extractor counts the repeats without decoding each one,
    # and the outline lists the first fifty of them, where they sit
    decodes = []
    real = extract._scan
    monkeypatch.setattr(extract, "_scan", lambda text, i: (decodes.append(i), real(text, i))[1])
    reply = 'say {"call": "a"} ' * 2_000
    cands = candidates(reply)
    assert len(cands) == 50 and len(decodes) < 50
    assert [c["span"][0] for c in cands] == [4 + 18 * i for i in range(50)]
    assert all(reply[slice(*c["span"])] == '{"call": "a"}' for c in cands)


def test_validation_goes_argument_by_argument_with_kind_and_path():
    st = decision.steps(two_attempts(), OPTIONS)
    first, second = st[3].data, st[8].data
    assert [(r["name"], r["mark"]) for r in first["args"]] == [("text", "✓"), ("depth", "✗")]
    assert first["error_kind"] == "type_mismatch" and first["error_path"] == "args.depth"
    assert "type_mismatch at args.depth" in first["args"][1]["why"]
    assert [(r["name"], r["mark"]) for r in second["args"]] == [("text", "✓"), ("depth", "✓")]


def test_hidden_params_show_what_was_dropped_and_what_was_injected():
    st = decision.steps(two_attempts(), OPTIONS)
    assert st[4].data == {"dropped": [], "injected": [], "hidden": ["user"]}
    assert st[9].data == {"dropped": ["args.user"], "injected": ["user"], "hidden": ["user"]}
    assert "user: injected from context=" in st[9].lines[0]


def test_the_reask_stage_finds_each_part_in_the_text_sent_and_a_template_s_choice_shows():
    st = decision.steps(two_attempts(), OPTIONS)
    assert st[5].data["parts"] == {"the request": True, "the previous reply": True,
                                   "the problem": True, "the advice": True, "the menu": True}
    rt = ScriptedRuntime([FIRST, SECOND])
    decision.make("Pick one.", OPTIONS, runtime=rt, context={"user": "ann"},
                  reask="Wrong: {error}. Try again.")
    parts = decision.steps(decision.last_trace(), OPTIONS)[5].data["parts"]
    assert parts == {"the request": False, "the previous reply": False, "the problem": True,
                     "the advice": False, "the menu": False}


def test_a_failed_decision_ends_with_the_failure_stage_and_keeps_every_attempt():
    rt = ScriptedRuntime(["no pick here", '{"call": "nope"}'])
    with pytest.raises(DecisionError) as info:
        decision.make("Pick.", OPTIONS, runtime=rt)
    st = decision.steps(info.value.trace, OPTIONS)
    assert [s.kind for s in st][-1] == "failure" and st[-1].rule == "P8"
    assert [s.attempt for s in st if s.kind == "reply"] == [1, 2]
    assert "nothing to validate" in st[3].lines[0]
    assert "'nope' names no option" in st[-3].lines[0]


def _resolve_pointer(schema: dict, pointer: str):
    node = schema
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part]
    return node


def test_every_menu_line_s_source_points_at_a_real_place():
    rows = menu_sources(OPTIONS)
    # the rows are the menu's lines after its opening one, blank lines between blocks aside
    menu = decision.render_options(OPTIONS).splitlines()[1:]
    assert [r["line"] for r in rows] == [line for line in menu if line]
    by_kind = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r)
        src = r["source"]
        if src["kind"] == "file":
            line = Path(src["file"]).read_text(encoding="utf-8").splitlines()[src["line"] - 1]
            if r["part"] == "signature":
                assert line.lstrip().startswith(("def ", "class ")), (r, line)
            elif r["part"] == "description":
                assert '"""' in line, (r, line)
            elif "input_meta" in src:
                assert f'"{src["input_meta"]}"' in line
                assert "input_meta" in Path(src["file"]).read_text().splitlines()[src["line"] - 1]
            elif "param" in src:
                assert src["param"] in line, (r, line)
            else:  # a pydantic field
                assert line.strip().startswith(src["field"] + ":"), (r, line)
                assert src["field"] in Order.model_fields
        elif src["kind"] == "option_set":
            node = OPTIONS
            for key in src["path"]:
                node = node[key]
            if r["kind"] == "value":
                assert node == "nothing left"
            elif r["part"] == "description":
                assert node == "Hand over."
            elif r["part"] == "param":
                fields = {"reason": str, "urgency": {"type": str, "options": ["low", "high"]}}
                assert node == fields[src["path"][-1]]
        elif src["kind"] == "json_pointer":
            _resolve_pointer(BOOK_SCHEMA, src["pointer"])  # a KeyError fails the test
        elif src["kind"] == "value":
            assert src["value"] == repr(OPTIONS["done"][0]) and src["path"] == ["done", 0]
    assert set(by_kind) == {"function", "value", "schema", "class", "json_schema"}
    for kind, kind_rows in by_kind.items():
        assert {"signature", "call"} <= {r["part"] for r in kind_rows}, kind
        assert all(r["source"]["kind"] != "note" for r in kind_rows), kind_rows
    text_line = next(r for r in rows if r["line"].strip().startswith("- text ("))
    assert text_line["source"]["input_meta"] == "text"
    nested = next(r for r in rows if "who.a" in r["line"])
    assert nested["source"]["pointer"] == "#/properties/who/properties/a"


def test_model_and_option_written_text_stays_escaped_in_html_and_terminal():
    def evil(note: str) -> str:
        """<img src=x onerror=alert(1)> runs."""
        return note

    options = {"evil": evil, "<b>v</b>": ("<i>value</i>", "<script>alert(2)</script>")}
    reply1 = '<script>alert(3)</script>\x1b[31m {"call": "evil", "args": {"note": 5}}'
    reply2 = '$x$ <a href="http://e.x">l</a> {"call": "evil", "args": {"note": "<u>n</u>"}}'
    rt = ScriptedRuntime([reply1, reply2])
    decision.make("Pick <em>one</em>.", options, runtime=rt)
    st = decision.steps(decision.last_trace(), options)
    page = parsed(st.to_html())
    assert set(page.tags) <= {"div", "ol", "li", "section", "h4", "p", "pre", "mark", "sup",
                              "table", "tr", "th", "td", "code", "b", "i", "br"}
    text = "".join(page.text)
    for written in ("<script>alert(3)</script>", "<img src=x onerror=alert(1)>",
                    '<a href="http://e.x">l</a>', "<u>n</u>", "<em>one</em>"):
        assert written in text  # shown as text, since the parser met no such element
    terminal = st.format_text()
    assert "\x1b" not in terminal and "\\x1b[31m" in terminal
    assert all(c == "\n" or c.isprintable() for c in terminal)


def test_tools_mode_steps_show_the_tools_sent_and_the_tool_call():
    rt = ScriptedRuntime([ToolCall("analyze", {"text": 3}), ToolCall("done", {})])
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="tools") == "OVER"
    st = decision.steps(decision.last_trace())
    assert [s.kind for s in st] == ["options", "sent", "reply", "validation", "hidden", "reask",
                                    "sent", "reply", "validation", "hidden", "resolution"]
    assert "native tool" in st[1].explanation and "Sent with it in place of the menu" in st[1].body
    assert any('"name": "analyze"' in line for line in st[1].lines)
    assert "native tool call(s): analyze" in "\n".join(st[2].lines)
    assert st[3].data["error_path"] == "args.text"


def test_steps_of_something_else_says_what_it_takes():
    with pytest.raises(UsageError, match=r"steps\(\) takes a DecisionTrace .*got dict"):
        decision.steps({"attempts": []})


def test_python_m_openprogram_steps_prints_every_stage(capsys):
    assert main(["steps"]) == 0
    out = capsys.readouterr().out
    headings = re.findall(r"^(\d+)\. .*\[rule ([A-Z]\d+)\]$", out, flags=re.M)
    assert [int(n) for n, _ in headings] == list(range(1, len(headings) + 1))
    assert len(headings) == 11 and {r for _, r in headings} <= RULE_IDS
    assert "The re-ask, built from its parts" in out and "The resolution" in out


def test_side_by_side_puts_each_decision_s_stages_in_its_own_column():
    from openprogram.decision.stepthrough import side_by_side
    mine = two_attempts()
    decision.make("Pick one.", OPTIONS, runtime=ScriptedRuntime(['{"call": "done"}']))
    theirs = decision.last_trace()
    both = side_by_side({"you <3": mine, "the model": theirs}, OPTIONS)
    page = parsed(both.to_html())
    stages = [int(s["data-stage"]) for s in page.sections]
    assert stages == [*range(1, 11), *range(1, 6)]  # the option set's stage is shared, left out
    assert "you <3" in "".join(page.text)
    assert both.to_html().count('<td style="vertical-align:top') == 2  # one column each
    assert both.format_text().startswith("=== you <3 ===\n2. attempt 1 · What was sent")
    with pytest.raises(UsageError, match="a dict of column titles to DecisionTraces"):
        side_by_side([mine, theirs])


def test_a_huge_reply_makes_a_bounded_step_through(monkeypatch):
    from openprogram.decision import extract
    # a reply of two megabytes of objects without a call key, then the pick
    reply = '{"a": 1} ' * 250_000 + '{"call": "done"}'
    rt = ScriptedRuntime([reply])
    decision.make("Pick.", OPTIONS, runtime=rt)
    tried = []
    real = extract._scan
    monkeypatch.setattr(extract, "_scan", lambda text, i: (tried.append(i), real(text, i))[1])
    st = decision.steps(decision.last_trace(), OPTIONS)
    assert len(tried) <= 10  # the outline is the extractor's search: nothing to decode here
    assert len(st.to_html()) < 400_000   # the page does not grow with the reply
    assert len(st.format_text()) < 200_000
    assert "only the first 100,000 characters are outlined; the pick lies beyond" in \
        "\n".join(st[2].lines)


def test_json_schema_mode_steps_mark_the_pick_inside_the_document():
    rt = ScriptedRuntime(['{"decision": {"call": "done", "args": {}}}'])
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema") == "OVER"
    st = decision.steps(decision.last_trace(), OPTIONS)
    assert [s.kind for s in st] == ["options", "sent", "reply", "validation", "hidden",
                                    "resolution"]
    assert "one schema of every possible pick" in st[1].explanation
    assert "response_format" in "\n".join(st[1].lines)
    assert [(c["role"], c["span"]) for c in st[2].data["candidates"]] == [("pick", [13, 41])]
