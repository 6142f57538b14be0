"""The HTML view of a decision: plain, escaped HTML made with the standard library only.

`trace_html(trace)` draws one decision — a header, every attempt (the prompt with its menu, or the
tools or JSON schema sent in its place; the raw reply with the value that broke it marked, or the
native tool call it made; the extracted JSON, the validation error, the chosen option and its
arguments; the raw request and response of the model call), the tool rounds, the outcome, and the
attempts / options / tools / summary tables as hand-built `<table>`s — as HTML that needs no
script, no stylesheet of the page and no library. `compare_attempts_html(trace, a, b)` puts two
attempts side by side, their replies and extracted JSON diffed, with the re-ask between them.
`display(trace)`, static exports (nbconvert, GitHub, nbviewer) and the notebook panel, which puts
each part into its own widget, all draw with these functions, so every view of a decision shows the
same thing. Everything a model, a server or an option set wrote goes through `html.escape`; every
view sits in a wrapper that MathJax skips (`mathjax_ignore`, `tex2jax_ignore`), so a reply can
neither run script nor add markup, a link or typeset math; very long texts are cut, so a huge reply
cannot flood a page. No function here raises on what a trace holds: a result or an error whose repr
or str fails is shown as such. The toolkit these functions draw with — escaping, cutting, the
wrapper, hand-built tables — is `safe_html`, which the library's other HTML (evaluation and
comparison tables, re-check results, the `.differences` frame, the `%decision_menu` printout, the
step-through) uses too, so no view lets MathJax typeset or the front end turn into links what a
model or an option set wrote. It is long because it draws every part of a decision (attempts,
replies with their marks, confidence bars, repairs, the raw exchange, the tables), and one module
keeps those parts alike; the toolkit they share is `safe_html`.
"""
from __future__ import annotations

import re

# The explanation of an error kind is the only thing taken from the layers below; the Attempt
# and DecisionTrace named in annotations are read by attribute only (decision_trace.py imports
# this).
from ..base.errors import ArgumentError, explain
from ..base.text import safe_repr, safe_str
from .safe_html import (
    LABEL_STYLE,
    MAX_CHARS,
    TABLE_STYLE,
    clip,
    esc,
    html_table,
    json_text,
    label,
    pre,
    pre_html,
    quiet_frame,
    result_text,
    text_html,
    wrap,
)
from .tables import (
    TABLES,
    option_rows,
    table_rows,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    # Named for the reader, never imported, not even here: decision_trace.py imports this module
    # (tests/package/test_core_layers.py counts an import for annotations as a cycle) and
    # tests/widgets/test_widgets_view.py holds this module to the imports above.
    Attempt = DecisionTrace = Any

__all__ = ["trace_html", "attempt_html", "compare_attempts_html", "table_html",
           "confidence_html", "confidence_source_text",
           "options_table_html", "marked_html", "diff_html", "wrap", "text_html", "quiet_frame",
           "esc", "TABLES", "COLOURS"]

#: The tables a trace has, in the order the panel shows them.
#: Per attempt state, the colour of its text and border and of its background: a failed attempt
#: is red, a passed one green, one in progress grey; the outcome box repeats the colour so the end
#: of a decision reads at a glance.
COLOURS = {"ok": ("#2e7d32", "#eef7ee"), "failed": ("#c62828", "#fdeeee"),
           "running": ("#757575", "#f6f6f6")}
_OK, _BAD = COLOURS["ok"][0], COLOURS["failed"][0]
#: The raw request and the raw response of a model call are each cut to this many characters of
#: their JSON: they repeat the whole conversation, tools and schema included.
RAW_CHARS = 20_000
# Texts up to this long are diffed word by word; longer ones line by line, which stays cheap.
_WORD_DIFF_CHARS = 2_000
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")
_MARK = ('<mark class="op-error-mark" style="background:#ffe082;color:inherit;'
         f'outline:1px solid {_BAD};border-radius:2px">{{}}</mark>')
_DEL = ('<del class="op-del" style="background:#ffd7d5;color:inherit">{}</del>')
_REPAIR_MARK = ('<mark class="op-repair-mark" title="{}" style="background:#c8e6c9;'
                'color:inherit;outline:1px solid #2e7d32;border-radius:2px">{}</mark>')
_REPAIR_INS = ('<ins class="op-repair-ins" title="{}" style="background:#c8e6c9;'
               'color:#2e7d32;text-decoration:none">{}</ins>')
_INS = ('<ins class="op-ins" style="background:#ccffd8;color:inherit;text-decoration:none">'
        '{}</ins>')


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------

def text_span(text: Any, span: Any) -> tuple[int, int] | None:
    """`span` as (start, end) when it is a non-empty range of character offsets inside `text`,
    else None (a record from elsewhere may hold anything)."""
    if not isinstance(text, str) or not isinstance(span, (tuple, list)) or len(span) != 2:
        return None
    start, end = span
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in span):
        return None
    return (start, end) if 0 <= start < end <= len(text) else None


def marked_html(text: str, span: Any, limit: int = MAX_CHARS) -> str:
    """`text` escaped, with the characters at `span` inside a `<mark>` (escaped too: the mark
    holds no markup of the text's). No mark when `span` is None or not inside `text`. The text
    is cut to about `limit` characters; a mark beyond that is kept with the text just before
    it, the characters in between left out (and said so)."""
    where = text_span(text, span)
    if where is None:
        return esc(clip(text, limit))
    start, end = where
    if end <= limit:
        return (esc(text[:start]) + _MARK.format(esc(text[start:end]))
                + esc(clip(text[end:], limit - end)))
    keep, around = limit // 2, 500
    head = min(start, keep)
    window = max(head, start - around)
    gap = (f"\n… [{window - head:,} characters not shown] …\n" if window > head else "")
    return (esc(text[:head]) + esc(gap) + esc(text[window:start])
            + _MARK.format(esc(clip(text[start:end], keep)))
            + esc(clip(text[end:], around)))


def repair_marked_html(text: str, repairs: Any, limit: int = MAX_CHARS) -> str:
    """`text` escaped, each repaired span inside a green `<mark>` (its kind as the title), and
    what a repair added at a point (closing brackets after a cut-off reply) as an `<ins>`; only
    spans within the first `limit` characters are marked, the rest of the text is cut as
    `clip` cuts it."""
    marks = []
    for r in repairs or []:
        span = getattr(r, "span", None)
        if (isinstance(span, (tuple, list)) and len(span) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in span)
                and 0 <= span[0] <= span[1] <= min(len(text), limit)):
            marks.append((span[0], span[1], r))
    marks.sort(key=lambda m: (m[0], m[1]))
    out, pos = [], 0
    for start, end, r in marks:
        if start < pos:
            continue  # overlapping spans: the first one is marked
        out.append(esc(text[pos:start]))
        title = esc(f"{r.kind} at {r.path or 'the pick'}: {r.before} → {r.after}")
        if end > start:
            out.append(_REPAIR_MARK.format(title, esc(text[start:end])))
        else:
            out.append(_REPAIR_INS.format(title, esc(r.after)))
        pos = end
    out.append(esc(clip(text[pos:], max(limit - pos, 0))))
    return "".join(out)


def repairs_html(att: Attempt) -> str:
    """The repairs that saved the attempt from a re-ask (decision/repair/), one line each: kind,
    where, before → after; "" when there were none."""
    repairs = getattr(att, "repairs", None)
    if not repairs:
        return ""
    rows = "".join(
        f"<li><b>{esc(r.kind)}</b> at {esc(r.path or 'the pick')}: "
        f"<code>{esc(clip(r.before, 200)) or '(nothing)'}</code> → "
        f"<code>{esc(clip(r.after, 200)) or '(nothing)'}</code></li>" for r in repairs[:200])
    more = f"<li>… and {len(repairs) - 200} more</li>" if len(repairs) > 200 else ""
    return (label(f"Repaired, not re-asked ({len(repairs)} repair(s))")
            + f'<ul class="op-repairs" style="font-size:12px;margin:2px 0">{rows}{more}</ul>')




# ---------------------------------------------------------------------------------------------
# Attempts
# ---------------------------------------------------------------------------------------------

def attempt_state(att: Attempt) -> str:
    """The state an attempt is drawn in: "failed", "ok" (its pick passed) or "running"."""
    if att.error_kind:
        return "failed"
    return "ok" if att.ok else "running"


def attempt_title(att: Attempt, trace: DecisionTrace, reply: str | None = None) -> str:
    """One line: attempt n of m, last, seconds, tokens — and what became of it. `reply` is the
    text streamed so far when the attempt record does not hold it yet."""
    state = attempt_state(att)
    reply = att.reply if reply is None else reply
    what = {"ok": f"picked {att.chosen}", "failed": f"failed: {att.error_kind}"}.get(
        state, "waiting for the reply" if not reply else "reply arriving")
    bits = [f"attempt {att.number} of {trace.max_attempts}"]
    if att.is_last and trace.max_attempts > 1:
        bits.append("last")
    if att.duration_s is not None:
        bits.append(f"{att.duration_s:.2f}s")
    if att.usage:
        # A runtime that keeps what prompts share (llama.cpp in process) says how many of the
        # prompt's tokens it did not have to read again.
        reused = att.usage.get("reused_input_tokens")
        bits.append(f"{att.usage.get('input_tokens') or 0} in"
                    + (f" ({reused} reused)" if reused else "")
                    + f" / {att.usage.get('output_tokens') or 0} out tokens")
    return (f'<div class="op-attempt-title" style="font-weight:600;color:{COLOURS[state][0]}">'
            f"{esc(' · '.join(bits))} — {esc(what)}</div>")


def sent_summary(sent: Any) -> str:
    """What a way of asking sent besides the prompt, in a few words ("" when nothing)."""
    if not sent:
        return ""
    tools = sent.get("tools") if isinstance(sent, dict) else None
    if isinstance(tools, list):
        return f"{len(tools)} native tool{'' if len(tools) == 1 else 's'}"
    if isinstance(sent, dict) and "response_format" in sent:
        return "a JSON schema (structured output)"
    return "the settings of the way of asking"


def attempt_prompt_html(att: Attempt, mode: str | None = None) -> str:
    """What the attempt sent: the prompt (the menu appended, in the menu mode) and, in the other
    ways of asking, the tools or the JSON schema that stand in the menu's place."""
    what = sent_summary(att.sent)
    if att.number == 1:
        first = f"prompt and {what}" if what else "prompt and menu"
    else:
        first = ("re-ask: the previous reply, the problem" + (f"; {what} again" if what
                                                                else ", the menu"))
    sent = ""
    if what:
        way = f" ({mode} mode)" if mode else ""
        sent = (label(f"Sent with it in place of the menu{way}: {what}")
                + pre(json_text(att.sent), 320, "op-sent"))
    # A runtime may lay the conversation out its own way (the local model puts the menu first,
    # so what every row shares is read once); the raw request says which.
    request = att.raw.get("request") if isinstance(att.raw, dict) else None
    layout = request.get("layout") if isinstance(request, dict) else None
    if isinstance(layout, str) and layout != "as_sent":
        sent += label(f"Laid out by the runtime: {layout} (the raw request holds the "
                      f"messages as sent)")
    return (f'<details class="op-prompt"><summary style="{LABEL_STYLE};cursor:pointer">'
            f"Sent to the model ({esc(first)}; {len(att.prompt)} characters)</summary>"
            f"{pre(att.prompt, 320)}{sent}</details>")


# Why a model stopped, in the words of a reply that ended as it should: anything else is shown.
_NORMAL_FINISH = frozenset({"stop", "end_turn", "tool_calls", "tool_use", "stop_sequence"})


def tool_calls_text(calls: Any) -> str:
    """Native tool calls as a person reads them, one a line: `name({"arg": value})`."""
    lines = []
    for call in calls if isinstance(calls, (list, tuple)) else [calls]:
        if isinstance(call, dict):
            lines.append(f"{safe_str(call.get('name'))}({json_text(call.get('args'), None)})")
        else:
            lines.append(safe_repr(call))
    return "\n".join(lines)


def reply_text(att: Attempt) -> str:
    """The reply as text: what the model wrote, then the native tool calls it made, if any."""
    reply = att.reply
    text = reply if isinstance(reply, str) else "" if reply is None else safe_repr(reply)
    if att.tool_calls:
        text += ("\n" if text else "") + tool_calls_text(att.tool_calls)
    return text


def reply_html(att: Attempt, reply: str | None = None) -> str:
    """The raw reply. Once the attempt failed on a value inside it, that value is marked; a
    reply that is a native tool call without text shows as the call. `reply` is the text
    streamed so far, when the record does not hold it yet (never marked)."""
    streamed = reply is not None
    reply = att.reply if reply is None else reply
    if att.tool_calls and not streamed and (reply is None or reply == ""):
        n = len(att.tool_calls)
        title = "Reply: a native tool call" if n == 1 else f"Reply: {n} native tool calls"
        return label(title) + pre(tool_calls_text(att.tool_calls), 240, "op-reply op-tool-call")
    where = None if streamed else text_span(reply, att.error_span)
    title = "Raw reply" + ("" if reply is not None else " (none yet)")
    if where is not None:
        title += f" — the value at {att.error_path or 'the error'} is marked"
    if att.finish_reason and att.finish_reason not in _NORMAL_FINISH:
        title += f" (finish reason: {att.finish_reason})"
    if att.cached:
        title += " [cached: answered from the cache file, not the model]"
    repairs = [] if streamed else getattr(att, "repairs", None)
    if isinstance(reply, str) and where is None and repairs:
        title += " — the repaired spans are marked"
        body = repair_marked_html(reply, repairs)
    elif isinstance(reply, str):
        body = marked_html(reply, where)
    else:
        body = "" if reply is None else esc(clip(safe_repr(reply)))
    parts = [label(title), pre_html(body, 240, "op-reply")]
    if att.tool_calls and not streamed:
        parts += [label("and native tool calls"),
                  pre(tool_calls_text(att.tool_calls), 160, "op-tool-call")]
    return "".join(parts)


def error_box(att: Attempt) -> str:
    """An attempt's error: kind, path, message and what the kind means."""
    where = f" at {att.error_path}" if att.error_path else ""
    return (f'<div class="op-error" style="margin:4px 0;padding:6px;border-radius:3px;'
            f'background:#fff;border:1px solid {_BAD};color:{_BAD}">'
            f"<b>{esc(att.error_kind)}</b>{esc(where)}: {esc(clip(att.error_message or ''))}"
            f'<div style="color:#555;font-size:12px">{esc(explain(att.error_kind))}</div></div>')


def attempt_body_html(att: Attempt, reply: str | None = None) -> str:
    """The reply and what the mechanism made of it (`reply`: the text streamed so far)."""
    parts = [reply_html(att, reply)]
    if att.extracted is not None:
        how = f"found in a {att.found_in}" if att.found_in == "fence" else \
            f"found in the {att.found_in}"
        parts.append(label(f"Extracted JSON ({how}, key \"{att.key_alias}\", "
                           f"{att.candidates} candidate(s); the last one is the pick)"))
        parts.append(pre(json_text(att.extracted), 200, "op-extracted"))
        parts.append(repairs_html(att))
        if getattr(att, "redacted", None):
            where = ", ".join(att.redacted)
            parts.append('<div class="op-redacted" style="font-size:12px;color:#555">'
                         f"{esc('an API key, as decoded, replaced with [redacted] at: ' + where)}"
                         "</div>")
    elif att.error_kind == "no_action":
        parts.append(label(f"Extracted JSON: none ({att.candidates} candidate(s))"))
    if att.error_kind:
        parts.append(error_box(att))
    if att.chosen and not att.error_kind:
        parts.append(label(f"Chosen option: {att.chosen}"))
        parts.append(pre(json_text(att.args if att.args is not None else {}), 160, "op-args"))
        extras = []
        if att.dropped:
            extras.append(f"dropped (never used): {', '.join(att.dropped)}")
        if att.injected:
            extras.append(f"injected: {', '.join(att.injected)}")
        if extras:
            parts.append(f'<div style="font-size:12px;color:#555">{esc("; ".join(extras))}</div>')
    if getattr(att, "confidence", None) is not None:
        parts.append(confidence_html(att.confidence, getattr(att, "low_pick", None)))
    return "".join(parts)


#: How many options the bars show; the rest are summed in one line (a menu may have hundreds).
CONFIDENCE_BARS = 25


def confidence_source_text(conf: Any) -> str:
    """One sentence on where a distribution's numbers come from."""
    return getattr(conf, "about", None) or "Where these numbers come from is not recorded."


def confidence_html(conf: Any, low_pick: str | None = None) -> str:
    """The attempt's distribution as one horizontal bar per option, most probable first, the
    pick marked, `other` in grey, the source (and n) in the caption; plain HTML with inline
    styles (no script), every name escaped."""
    try:
        ranked = sorted(dict(conf.probs).items(), key=lambda kv: -kv[1])
        other, pick = float(conf.other), conf.pick
    except Exception:  # a record that is not a Confidence: said so, never raised
        return f'<div class="op-confidence">{esc("confidence: " + safe_repr(conf))}</div>'
    n = f", n={conf.n}" if getattr(conf, "n", None) is not None else ""
    caption = f"How sure: probability of each option ({conf.source}{n})"
    rows = []

    def bar(name: str, p: float, cls: str, colour: str, mark: str = "") -> str:
        width = max(0.0, min(1.0, p)) * 100
        return (f'<div class="op-conf-row {cls}" style="display:flex;align-items:center;'
                f'gap:6px;font-size:12px;line-height:16px">'
                f'<span class="op-conf-name" style="flex:0 0 180px;overflow:hidden;'
                f'text-overflow:ellipsis;white-space:nowrap{";font-weight:600" if mark else ""}">'
                f"{esc(name)}{esc(mark)}</span>"
                f'<span style="flex:1 1 auto;background:#eee;height:10px;min-width:60px">'
                f'<span class="op-conf-bar" style="display:block;height:10px;width:{width:.1f}%;'
                f'background:{colour}"></span></span>'
                f'<span class="op-conf-p" style="flex:0 0 48px;text-align:right">{p:.3f}</span>'
                "</div>")
    chosen = getattr(conf, "pick_set", None)   # pick_set=: the calibrated set, marked
    for name, p in ranked[:CONFIDENCE_BARS]:
        picked = name == pick
        mark = " ◀ picked" if picked else ""
        if name == low_pick:
            mark = (" ◀ picked (its pick set is not the pick alone)" if chosen is not None
                    else " ◀ picked (below min_confidence)")
        if chosen is not None and name in chosen:
            mark += " · in the pick set"
        rows.append(bar(name, p, "op-conf-pick" if picked else "op-conf-option",
                        _OK if picked else "#5c7cfa", mark))
    if len(ranked) > CONFIDENCE_BARS:
        rest = sum(p for _, p in ranked[CONFIDENCE_BARS:])
        rows.append(f'<div class="op-conf-more" style="font-size:12px;color:#555">'
                    f"{esc(f'{len(ranked) - CONFIDENCE_BARS} more options, {rest:.3f} together')}"
                    "</div>")
    rows.append(bar("other (no option named)", other, "op-conf-other", "#9e9e9e"))
    note = getattr(conf, "note", None)
    if chosen is not None:
        said = ", ".join(map(str, chosen)) or "empty: no option is sure enough"
        note = f"pick set (pick_set=): {said}" + (f"; {note}" if note else "")
    foot = (f'<div class="op-conf-note" style="font-size:11px;color:#555">'
            f"{esc(clip(str(note), 600))}</div>") if note else ""
    return (f'<div class="op-confidence" style="margin:4px 0;padding:4px 6px;background:#fff;'
            f'border:1px solid #ddd;border-radius:3px">'
            f'<div class="op-conf-caption" style="{LABEL_STYLE}">{esc(caption)}</div>'
            + "".join(rows) + foot + "</div>")


def negotiated_html(raw: Any) -> str:
    """One line per request form the runtime sent in place of the one the way of asking means
    (`raw["negotiated"]`: what was asked, what was sent, the server's refusal or the reason),
    shown outside the collapsed raw record; "" when there is none."""
    entries = raw.get("negotiated") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        return ""
    lines = []
    for e in entries[:20]:
        if not isinstance(e, dict):
            continue
        line = f"Asked for {safe_str(e.get('asked'))}; sent {safe_str(e.get('sent'))}"
        if e.get("refused"):
            line += f" — the server refused it: {safe_str(e.get('refused'))}"
        elif e.get("why"):
            line += f" — {safe_str(e.get('why'))}"
        lines.append(f"<div>{esc(clip(line, 600))}</div>")
    return (f'<div class="op-negotiated" style="font-size:12px;color:#555;margin:2px 0">'
            f"{''.join(lines)}</div>") if lines else ""


def attempt_raw_html(att: Attempt) -> str:
    """The raw request and response of the attempt's model call, as the runtime recorded them
    (keys redacted by the runtime), in a collapsed section, each cut to RAW_CHARS characters
    of JSON, after a line for each request form sent in place of another; "" when the runtime
    recorded none."""
    raw = att.raw
    if not raw:
        return ""
    items = sorted(raw.items(), key=lambda kv: (kv[0] != "request", kv[0] != "response")) \
        if isinstance(raw, dict) else [("record", raw)]
    parts = []
    for key, value in items:
        known = key in ("request", "response")
        text = json_text(value)
        parts.append(label(f"{'Raw ' if known else ''}{safe_str(key)} ({len(text):,} characters "
                           f"of JSON)"))
        parts.append(pre(text, 300, f"op-raw-{key}" if known else "op-raw-other", RAW_CHARS))
    return (negotiated_html(raw) +
            f'<details class="op-raw"><summary style="{LABEL_STYLE};cursor:pointer">'
            f"Raw request and response of the model call</summary>{''.join(parts)}</details>")


def attempt_html(att: Attempt, trace: DecisionTrace) -> str:
    """One attempt as a box: red when it failed, green when its pick passed."""
    state = attempt_state(att)
    colour, bg = COLOURS[state]
    return (f'<div class="op-attempt op-attempt-{state}" style="border-left:4px solid {colour};'
            f'background:{bg};padding:4px 8px;margin:4px 0">'
            + attempt_title(att, trace) + attempt_prompt_html(att, trace.mode)
            + attempt_body_html(att) + attempt_raw_html(att) + "</div>")


# ---------------------------------------------------------------------------------------------
# Two attempts side by side
# ---------------------------------------------------------------------------------------------

def diff_html(old: str, new: str) -> tuple[str, str]:
    """Two texts for side by side reading, escaped: `old` with what `new` no longer has in
    `<del>`, `new` with what it added in `<ins>`. Short texts are compared word by word, long
    ones (and each is cut to MAX_CHARS first) line by line."""
    old, new = clip(old), clip(new)
    if len(old) <= _WORD_DIFF_CHARS and len(new) <= _WORD_DIFF_CHARS:
        a, b, junk = _WORDS.findall(old), _WORDS.findall(new), False
    else:   # difflib's heuristic for frequent lines keeps a long comparison cheap
        a, b, junk = old.splitlines(keepends=True), new.splitlines(keepends=True), True
    import difflib
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=junk).get_opcodes():
        x, y = esc("".join(a[i1:i2])), esc("".join(b[j1:j2]))
        if op == "equal":
            left.append(x)
            right.append(y)
            continue
        if x:
            left.append(_DEL.format(x))
        if y:
            right.append(_INS.format(y))
    return "".join(left), "".join(right)


def _outcome_of(att: Attempt) -> str:
    if att.error_kind:
        return error_box(att)
    if att.ok:
        return (label(f"Chosen option: {att.chosen}")
                + pre(json_text(att.args if att.args is not None else {}), 160))
    return f'<div style="color:#777">{esc(attempt_state(att))}</div>'


def compare_attempts_html(trace: DecisionTrace, first: int | None = None,
                          second: int | None = None) -> str:
    """Two attempts of `trace` side by side (by number; the last two by default), the earlier
    on the left: their replies and extracted JSON diffed — what the later one no longer has
    struck out on the left, what it added marked on the right —, what became of each, and the
    re-ask text the later one was sent (its prompt)."""
    attempts = {a.number: a for a in trace.attempts}
    numbers = sorted(attempts)
    if len(numbers) < 2:
        return wrap(f'<div class="op-compare" style="color:#777">Decision #{esc(trace.id)} has '
                    f"{len(numbers)} attempt(s): nothing to compare yet.</div>")
    first = numbers[-2] if first is None else first
    second = numbers[-1] if second is None else second
    for n in (first, second):
        if n not in attempts:
            raise ArgumentError(f"attempt {n!r} is not in decision #{trace.id}; its attempts are "
                             f"{', '.join(map(str, numbers))}")
    if first == second:
        raise ArgumentError(f"attempt {first} is compared with itself: pick two different attempts")
    a, b = sorted((attempts[first], attempts[second]), key=lambda att: att.number)
    cols = [(a, *diff_html(reply_text(a), reply_text(b))),
            (None, *diff_html(_extracted_text(a), _extracted_text(b)))]
    head = "".join(
        f'<th style="color:{COLOURS[attempt_state(att)][0]}">{attempt_title_text(att)}</th>'
        for att in (a, b))
    cell = '<td style="vertical-align:top">{}</td>'
    rows = [("reply", cols[0][1], cols[0][2]), ("extracted JSON", cols[1][1], cols[1][2])]
    body = "".join(f"<tr><th>{esc(name)}</th>" + cell.format(pre_html(left, 240))
                   + cell.format(pre_html(right, 240)) + "</tr>" for name, left, right in rows)
    body += ("<tr><th>outcome</th>" + cell.format(_outcome_of(a)) + cell.format(_outcome_of(b))
             + "</tr>")
    between = "" if b.number == a.number + 1 else f" (the re-ask after attempt {b.number - 1})"
    legend = (f'<div style="font-size:12px;color:#555">{_DEL.format("struck out")}: not in '
              f"attempt {b.number}; {_INS.format('marked')}: new in attempt {b.number}</div>")
    return wrap(
        f'<div class="op-compare">{label(f"Attempts {a.number} and {b.number} side by side")}'
        f"{legend}"
        '<table style="table-layout:fixed;width:100%;border-collapse:collapse;font-size:12px">'
        '<colgroup><col style="width:90px"><col><col></colgroup>'
        f'<thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'
        f"{label(f'Between them: the re-ask sent as attempt {b.number} (its prompt){between}')}"
        f'{pre(b.prompt, 320, "op-reask")}</div>', "op-compare-view")


def attempt_title_text(att: Attempt) -> str:
    what = {"ok": f"picked {att.chosen}", "failed": f"failed: {att.error_kind}"}.get(
        attempt_state(att), "in progress")
    return esc(f"attempt {att.number} — {what}")


def _extracted_text(att: Attempt) -> str:
    return "" if att.extracted is None else json_text(att.extracted)


# ---------------------------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------------------------

def header_html(trace: DecisionTrace | None) -> str:
    if trace is None:
        return ('<div class="op-header" style="font-weight:600">Decision: waiting for it to '
                "start…</div>")
    colour = {"resolved": _OK, "failed": _BAD}.get(trace.status, COLOURS["running"][0])
    entry = {"make": "decision.make", "agent": "agent(options=)", "format": "response_format",
             "parse": "parse_args"}.get(trace.entry, trace.entry)
    bits = [f"{len(trace.options)} option(s)", f"mode {trace.mode}",
            f"{len(trace.attempts)} attempt(s)"]
    if trace.runtime:
        bits.append(f"runtime {trace.runtime}")
    if trace.duration_s is not None:
        bits.append(f"{trace.duration_s:.2f}s")
    u = trace.usage()
    if u["input_tokens"] or u["output_tokens"]:
        bits.append(f"{u['input_tokens']} in / {u['output_tokens']} out tokens")
    return (f'<div class="op-header" style="font-weight:600">Decision #{esc(trace.id)} · '
            f"{esc(entry)} · "
            f'<span class="op-status" style="color:{colour}">{esc(trace.status)}</span>'
            f' <span style="font-weight:400;color:#555">({esc(", ".join(bits))})</span></div>')


def outcome_html(trace: DecisionTrace | None) -> str:
    """The result in a green box, or the final error in a red one ("" while it runs)."""
    if trace is None or trace.status == "running":
        return ""
    box = ('<div class="op-outcome {cls}" style="border:2px solid {fg};background:{bg};'
           'padding:6px 8px;margin:6px 0;border-radius:4px">'
           '<div style="font-weight:700;color:{fg}">{title}</div>{body}</div>')
    if trace.status == "resolved":
        return box.format(cls="op-result", fg=_OK, bg=COLOURS["ok"][1],
                          title=f"Result (option {esc(trace.chosen)})",
                          body=pre(result_text(trace.result), 200, "op-result-value"))
    err = trace.error
    kind = getattr(err, "kind", None)
    title = type(err).__name__ + (f" [{kind}]" if kind else "")
    return box.format(cls="op-final-error", fg=_BAD, bg=COLOURS["failed"][1],
                      title=f"Failed: {esc(title)}", body=pre(safe_str(err), 200))


def tools_html(trace: DecisionTrace | None) -> str:
    if trace is None or not trace.tool_rounds:
        return ""
    return (label(f"Tool rounds ({len(trace.tool_rounds)})")
            + html_table(*table_rows(trace, "tools", shown=True), cls="op-tools"))


def trace_html(trace: DecisionTrace, cls: str = "") -> str:
    """The whole decision as static, escaped HTML (what `display(trace)` and exports show);
    `cls` adds classes to the outer element."""
    parts = [header_html(trace)]
    parts += [attempt_html(a, trace) for a in trace.attempts]
    parts.append(tools_html(trace))
    parts.append(outcome_html(trace))
    for table in ("attempts", "options"):
        parts.append(f'<details><summary style="{LABEL_STYLE};cursor:pointer">Table: {table}'
                     f"</summary>{table_html(trace, table)}</details>")
    return wrap(TABLE_STYLE + "".join(parts), f"op-panel op-static {cls}".strip())


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

def table_html(trace: DecisionTrace, table: str) -> str:
    """One of the trace's tables ("attempts", "options", "tools", "summary") as an escaped
    `<table>`; the same rows as `trace.to_frame(table)` (trace/tables.py), without pandas."""
    columns, body = table_rows(trace, table, shown=True)
    if not body:
        return f'<div style="color:#777">no {esc(table)}</div>'
    return TABLE_STYLE + html_table(columns, body, cls=f"op-table-{table}")


def options_table_html(infos: list[dict]) -> str:
    """The option table of a menu (`Option.info()` rows) — what the model can pick."""
    return TABLE_STYLE + html_table(*option_rows(infos, shown=True), cls="op-table-options")
