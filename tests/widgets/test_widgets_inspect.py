"""Looking into a decision: the value that broke an attempt marked inside its raw reply, two
attempts side by side with their replies and extracted JSON diffed, the raw request and response
of each model call, the tools or JSON schema sent in the menu's place, and tool-call replies
shown as calls — in the static view and in the panel, every model-written character escaped."""
from __future__ import annotations

import dataclasses
import html
import json
import re

import pytest
from widgethelp import all_html

from openprogram import DecisionError, ModelResponse, ToolCall, decision
from openprogram.runtimes import ScriptedRuntime
from openprogram.trace import view
from openprogram.widgets.panel import DecisionPanel

MARK = re.compile(r'<mark class="op-error-mark"[^>]*>(.*?)</mark>', re.S)
# A tag a reply could open (the view's own markup uses none of these).
TAG = re.compile(r"<\s*/?\s*(script|img|svg|i)\b", re.I)
IMG = "<img src=x onerror=alert(1)>"


@dataclasses.dataclass
class Item:
    sku: str
    qty: int


def ship(items: list[Item], note: str = ""):
    """Ship the items."""
    return [i.qty for i in items]


def wait():
    """Wait for the customer."""
    return "waiting"


OPTIONS = {"ship": ship, "wait": wait}
GOOD = '{"call": "ship", "args": {"items": [{"sku": "a", "qty": 1}]}}'


def failed_first(reply: str, mode: str = "menu", second: object = GOOD):
    decision.make("Ship it. Pick.", OPTIONS, runtime=ScriptedRuntime([reply, second]),
                  mode=mode)
    return decision.last_trace()


def marks(text: str) -> list[str]:
    return MARK.findall(text)


# ---------------------------------------------------------------------------------------------
# The offending value, marked in the reply
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply, value", [
    # fenced, with an earlier object holding the same path: the pick's value is marked
    ('Was: {"call": "ship", "args": {"items": [{"sku": "a", "qty": 1}, {"sku": "b", '
     '"qty": 1}]}}\nNow:\n```json\n{"call": "ship", "args": {"items": [{"sku": "a", '
     '"qty": 1}, {"sku": "b", "qty": "two"}]}}\n```\n', '"two"'),
    # bare, in prose, with markup around and inside the value
    ('I pick <b>this</b> {"call": "ship", "args": {"items": [{"sku": "x", "qty": 2}, '
     '{"qty": ["<img src=x onerror=alert(1)>"], "sku": "y"}]}} <i>done</i>',
     '["<img src=x onerror=alert(1)>"]'),
    # a nested object as the bad value, written over several lines
    ('{"call": "ship",\n "args": {"items": [\n  {"sku": "q", "qty": {"n":\n 3}}]}}',
     '{"n":\n 3}'),
])
def test_the_value_at_a_nested_path_is_marked_in_fenced_and_bare_replies(reply, value):
    trace = failed_first(reply)
    att = trace.attempts[0]
    assert att.error_kind == "type_mismatch" and re.fullmatch(r"args\.items\[\d\]\.qty",
                                                              att.error_path)
    start, end = att.error_span
    assert reply[start:end] == value
    for text in (view.trace_html(trace), all_html(DecisionPanel(trace))):
        (inner,) = marks(text)
        # the mark holds exactly the value, escaped: no markup of the reply's
        assert inner == html.escape(value)
        assert not TAG.search(inner) and "<" not in inner
        # and it sits inside the escaped reply, at its place
        body = text[text.index('class="op-reply"'):]
        body = body[body.index(">") + 1:body.index("</pre>")]
        assert html.unescape(MARK.sub(lambda m: m.group(1), body)) == reply
        assert f"the value at {att.error_path} is marked" in text
        assert not TAG.search(text) and "<b>this" not in text


def test_no_mark_without_a_span_or_with_one_outside_the_reply():
    trace = failed_first('{"call": "ship", "args": {"items": [{"sku": "a"}]}}')  # missing qty
    att = trace.attempts[0]
    assert att.error_kind == "missing_required" and att.error_span is None
    assert marks(view.trace_html(trace)) == []
    for bad in [(0, 10_000), (-1, 3), (5, 5), (7, 2), (True, 4), ("0", "3"), (1,), None]:
        broken = dataclasses.replace(att, error_span=bad)
        assert marks(view.attempt_body_html(broken)) == []
        assert html.escape(att.reply) in view.attempt_body_html(broken)
    (inner,) = marks(view.marked_html("a<b>c", (1, 4)))
    assert inner == "&lt;b&gt;"
    assert view.marked_html("a<b>c", (1, 4)).startswith("a<mark ")
    assert view.marked_html("a<b>c", (1, 4)).endswith("</mark>c")


def test_a_mark_far_into_a_huge_reply_is_kept_and_the_page_stays_bounded():
    filler = "x" * (3 * view.MAX_CHARS)
    reply = filler + '{"call": "ship", "args": {"items": [{"sku": "<svg/onload=1>", ' \
                     '"qty": "nine"}]}}'
    trace = failed_first(reply)
    start, end = trace.attempts[0].error_span
    assert reply[start:end] == '"nine"'
    text = view.reply_html(trace.attempts[0])
    assert marks(text) == [html.escape('"nine"')]
    assert len(text) < view.MAX_CHARS + 5_000
    assert "characters not shown" in text and "&lt;svg/onload=1&gt;" in text
    # a huge offending value is cut inside its mark
    big = '{"call": "ship", "args": {"items": [{"sku": "a", "qty": "' + "z" * 200_000 + '"}]}}'
    body = view.reply_html(failed_first(big).attempts[0])
    (inner,) = marks(body)
    assert len(body) < view.MAX_CHARS + 5_000 and "more characters not shown" in inner


# ---------------------------------------------------------------------------------------------
# What was sent in the menu's place, tool-call replies, the mode
# ---------------------------------------------------------------------------------------------

def test_a_tools_trace_shows_the_tools_sent_and_the_calls_made():
    evil = ToolCall("ship", {"items": [{"sku": IMG, "qty": "x"}]})
    rt = ScriptedRuntime([evil, ToolCall("wait", {})])
    assert decision.make("Ship it. Pick.", OPTIONS, runtime=rt, mode="tools") == "waiting"
    trace = decision.last_trace()
    sent = rt.calls[0]
    assert trace.mode == "tools" and trace.attempts[0].sent["tools"] == sent.tools
    for text in (view.trace_html(trace), all_html(DecisionPanel(trace))):
        assert "mode tools" in text          # the header
        assert "Sent with it in place of the menu (tools mode): 2 native tools" in text
        # what the model was sent, as pretty JSON, escaped
        assert html.escape(json.dumps(trace.attempts[0].sent, indent=2)) in text
        assert "Sent to the model (prompt and 2 native tools;" in text
        # the replies are calls, shown as calls
        assert text.count("Reply: a native tool call") == 2
        assert html.escape('ship({"items": [{"sku": "' + IMG + '", "qty": "x"}]})') in text
        assert "wait({})" in text
        assert IMG not in text and not TAG.search(text)


def test_a_json_schema_trace_shows_the_schema_sent():
    rt = ScriptedRuntime(['{"decision": {"call": "wait", "args": {}}}'])
    assert decision.make("Pick.", OPTIONS, runtime=rt, mode="json_schema") == "waiting"
    trace = decision.last_trace()
    fmt = rt.calls[0].mode_args["response_format"]
    assert trace.attempts[0].sent == {"response_format": fmt}
    text = view.trace_html(trace)
    assert "mode json_schema" in text
    assert "in place of the menu (json_schema mode): a JSON schema (structured output)" in text
    assert html.escape(json.dumps({"response_format": fmt}, indent=2)) in text


def test_a_menu_trace_shows_the_menu_in_the_prompt_and_nothing_in_its_place():
    trace = failed_first('{"call": "ship", "args": {"items": 1}}')
    text = view.trace_html(trace)
    assert "mode menu" in text and "in place of the menu" not in text
    assert "Sent to the model (prompt and menu;" in text
    assert "re-ask: the previous reply, the problem, the menu" in text
    assert "native tool" not in text


# ---------------------------------------------------------------------------------------------
# The raw request and response
# ---------------------------------------------------------------------------------------------

def raw_trace(request_text: str):
    raw = {"request": {"model": "m", "messages": [{"role": "user", "content": request_text}]},
           "response": {"id": "resp-1", "choices": [{"message": {"content": IMG}}]}}
    rt = ScriptedRuntime([ModelResponse(text='{"call": "wait"}', raw=raw,
                                        finish_reason="length")])
    decision.make("Pick.", OPTIONS, runtime=rt)
    return decision.last_trace()


def test_the_raw_request_and_response_are_in_a_collapsed_escaped_section():
    trace = raw_trace("Pick. " + IMG)
    raw = trace.attempts[0].raw
    for text in (view.trace_html(trace), all_html(DecisionPanel(trace))):
        section = text[text.index('<details class="op-raw">'):]
        section = section[:section.index("</details>")]
        assert "Raw request and response of the model call" in section
        assert html.escape(json.dumps(raw["request"], indent=2)) in section
        assert html.escape(json.dumps(raw["response"], indent=2)) in section
        assert section.index("Raw request") < section.index("Raw response")
        assert IMG not in text and not TAG.search(text)
        # a stop the provider reports as unusual is said where the reply is
        assert "(finish reason: length)" in text
    panel = DecisionPanel(trace)
    assert panel.attempts_box.children[0].raw.value == view.attempt_raw_html(trace.attempts[0])


def test_a_huge_raw_record_is_cut_and_an_absent_one_adds_nothing():
    trace = raw_trace("y" * 1_000_000)
    section = view.attempt_raw_html(trace.attempts[0])
    assert len(section) < 2 * view.RAW_CHARS + 5_000
    assert "more characters not shown" in section
    assert html.escape(json.dumps(trace.attempts[0].raw["response"], indent=2)) in section
    plain = failed_first('{"call": "wait"}', second=None)
    assert plain.attempts[0].raw is None
    assert view.attempt_raw_html(plain.attempts[0]) == "" and "op-raw" not in \
        view.trace_html(plain)


# ---------------------------------------------------------------------------------------------
# Two attempts side by side
# ---------------------------------------------------------------------------------------------

def columns(text: str) -> list[str]:
    """The contents of the <pre> blocks of the comparison, in order."""
    return re.findall(r"<pre [^>]*>(.*?)</pre>", text, re.S)


def plain(block: str, keep: str) -> str:
    """A diffed column as text: the `keep` marks ("del" or "ins") unwrapped."""
    return html.unescape(re.sub(rf"</?{keep}[^>]*>", "", block))


def test_two_attempts_side_by_side_diff_their_replies_and_json_and_show_the_reask():
    first = '<b>Sure</b> {"call": "ship", "args": {"items": [{"sku": "a", "qty": "two"}]}}'
    second = '{"call": "ship", "args": {"items": [{"sku": "a", "qty": 2}], "note": "' + \
        IMG.replace('"', "'") + '"}}'
    trace = failed_first(first, second=second)
    a, b = trace.attempts
    text = view.compare_attempts_html(trace)
    assert text.startswith('<div class="op-view mathjax_ignore tex2jax_ignore op-compare-view"')
    assert not TAG.search(text) and IMG.replace('"', "'") not in text
    left_reply, right_reply, left_json, right_json, *_, reask = columns(text)
    # each side reads as its own text once the marks are taken off
    assert plain(left_reply, "del") == first and plain(right_reply, "ins") == second
    assert plain(left_json, "del") == json.dumps(a.extracted, indent=2)
    assert plain(right_json, "ins") == json.dumps(b.extracted, indent=2)
    # what changed is marked on each side, escaped: the removed words on the left only, the
    # added ones on the right only
    removed = "".join(re.findall(r"<del [^>]*>(.*?)</del>", left_reply))
    added = "".join(re.findall(r"<ins [^>]*>(.*?)</ins>", right_reply))
    assert "&lt;b&gt;Sure&lt;/b&gt;" in removed and "two" in removed
    assert "note" in added and html.escape("<img src=x onerror=alert(1)>".replace('"', "'")) \
        in added
    assert "<ins" not in left_reply and "<del" not in right_reply
    assert "qty" not in removed and "qty" not in added      # unchanged words stay plain
    # the re-ask the second attempt was sent sits between them, escaped
    assert html.unescape(reask) == b.prompt and "Your previous reply" in b.prompt
    assert "Between them: the re-ask sent as attempt 2" in text
    assert "type_mismatch" in text and "Chosen option: ship" in text


def test_comparing_picks_attempts_by_number_and_says_what_is_wrong():
    rt = ScriptedRuntime(["no json", '{"call": "fly"}', '{"call": "wait"}'])
    decision.make("Pick.", OPTIONS, runtime=rt, max_retries=2)
    trace = decision.last_trace()
    text = view.compare_attempts_html(trace, 3, 1)   # the earlier one goes left
    assert re.findall(r"<th [^>]*>(attempt \d — [^<]*)</th>", text) == [
        "attempt 1 — failed: no_action", "attempt 3 — picked wait"]
    assert "(the re-ask after attempt 2)" in text
    with pytest.raises(ValueError, match=r"attempt 4 is not in decision #\d+; its attempts are "
                                         r"1, 2, 3"):
        view.compare_attempts_html(trace, 1, 4)
    with pytest.raises(ValueError, match="compared with itself"):
        view.compare_attempts_html(trace, 2, 2)
    one = failed_first('{"call": "wait"}', second=None)
    assert "has 1 attempt(s): nothing to compare yet" in view.compare_attempts_html(one)


def test_the_long_texts_of_two_attempts_are_diffed_by_line_and_cut():
    a = "\n".join(f"line {i}" for i in range(20_000)) + '\n{"call": "fly"}'
    b = "\n".join(f"line {i}" for i in range(1, 20_000)) + '\n{"call": "wait"}'
    left, right = view.diff_html(a, b)
    assert left.startswith('<del class="op-del"') and "line 0\n</del>" in left
    assert len(left) < view.MAX_CHARS + 2_000 and len(right) < view.MAX_CHARS + 2_000
    assert "more characters not shown" in left


def test_the_panel_compares_attempts_when_its_section_is_opened():
    rt = ScriptedRuntime(["no json", '{"call": "fly"}', '{"call": "wait"}'])
    decision.make("Pick.", OPTIONS, runtime=rt, max_retries=2)
    trace = decision.last_trace()
    panel = DecisionPanel(trace)
    box = panel.compare
    assert box.html.value == ""                   # drawn only once opened
    assert (box.first.options, box.first.value, box.second.value) == ((1, 2, 3), 2, 3)
    panel.compare_section.selected_index = 0
    assert box.html.value == view.compare_attempts_html(trace, 2, 3)
    box.first.value = 1
    assert box.html.value == view.compare_attempts_html(trace, 1, 3)
    box.second.value = 1
    assert "Cannot compare" in box.html.value and "compared with itself" in box.html.value
    # a new trace shows its own last two
    panel.set_trace(failed_first('{"call": "ship", "args": {"items": 3}}'))
    assert (box.first.options, box.first.value, box.second.value) == ((1, 2), 1, 2)
    assert box.html.value == view.compare_attempts_html(panel.trace, 1, 2)


def test_a_live_panel_follows_the_last_two_attempts_unless_others_were_picked():
    from openprogram import observe
    panel = DecisionPanel()
    panel.compare_section.selected_index = 0
    box, seen = panel.compare, []

    def watch(event):   # after the panel's observer: what the front end shows by now
        if event.kind == "attempt_failed":
            seen.append((box.first.options, box.first.value, box.second.value))
            if event.attempt.number == 3:
                box.first.value, box.second.value = 1, 3    # the user picks two others
    with observe(panel.observer), observe(watch):
        with pytest.raises(DecisionError):
            decision.make("Pick.", OPTIONS, max_retries=3, runtime=ScriptedRuntime(
                ["no json", '{"call": "fly"}', "<b>still</b> no", "nothing"]))
    assert seen == [((1,), None, None), ((1, 2), 1, 2), ((1, 2, 3), 2, 3), ((1, 2, 3, 4), 1, 3)]
    assert box.html.value == view.compare_attempts_html(panel.trace, 1, 3)
    assert "&lt;b&gt;still&lt;/b&gt;" in box.html.value
