"""The step-through of one decision: a recorded trace told as ordered stages, for teaching.

`steps(trace, options)` reads a finished `DecisionTrace` (and, when given, the option set it was
made with) into `Steps`: (1) the option set and its menu, every menu line with where it came
from (the function's file and line, its docstring or `input_meta`, the pydantic field, the
option set entry, the JSON Schema keyword); then for each attempt (2) what was sent, (3) the raw
reply with every JSON candidate outlined and the pick marked, (4) validation argument by
argument, (5) the hidden and context parameters; then (6) the resolution, or (7) for a failed
attempt the re-ask built from its parts, followed by the next attempt's stages. Each stage has
a short explanation that names the rule of docs/rules.md it shows. The stages render as static
HTML (each its own section, inside `view.wrap`, every text a model or option set wrote escaped)
and as terminal text (`python -m openprogram steps`); the notebook layer steps through the same
`Stage` records. It reads records only: no model is called and nothing is re-validated. It is long
because it tells one recorded decision stage by stage, each stage citing its rule, and the stages
read the same attempt.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..base.errors import UsageError, explain
from ..trace.decision_trace import DecisionTrace
from ..trace.view import (
    clip,
    confidence_html,
    confidence_source_text,
    esc,
    json_text,
    label,
    pre,
    pre_html,
    result_text,
    safe_repr,
    wrap,
)
from .extract import candidates as _found
from .modes import MODES, JsonSchemaMode
from .options.option_set import normalize

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["steps", "Steps", "Stage", "menu_sources", "side_by_side", "STAGE_RULES"]

#: The rule of docs/rules.md each kind of stage illustrates.
STAGE_RULES = {"options": "R1", "sent": "E1", "reply": "A6", "repair": "P7", "validation": "P3",
               "hidden": "A5", "resolution": "Z1", "reask": "P7", "failure": "P8"}
#: The issue's numbering of the kinds of stage (what a learner sees as "stage 3").
STAGE_NUMBERS = {"options": 1, "sent": 2, "reply": 3, "repair": 3, "validation": 4, "hidden": 5,
                 "resolution": 6, "failure": 6, "reask": 7}
# The candidates are the extractor's own (extract.candidates: its search, its bounds); the
# outline shows those in a reply's first this many characters, at most this many, so the
# view of a huge reply does not grow with it.
_SCAN_CHARS = 100_000
_MAX_CANDIDATES = 50
_MARKS = {"pick": "#c8e6c9", "ignored": "#eeeeee", "part": "#fff3c4"}


@dataclass(frozen=True)
class Stage:
    """One stage of the step-through: what it shows, in text and in escaped HTML."""
    index: int                    # its place in the step-through, from 0
    kind: str                     # "options", "sent", "reply", "validation", "hidden", ...
    attempt: int | None           # the attempt it belongs to (None: the whole decision)
    title: str
    rule: str                     # the rule id of docs/rules.md it illustrates
    explanation: str
    lines: tuple = ()             # the terminal text of its content
    body: str = ""                # its content as escaped HTML
    data: dict = field(default_factory=dict)  # what a test or a widget may read (JSON-able)

    @property
    def number(self) -> int:
        """The issue's stage number (1-7) of this kind of stage."""
        return STAGE_NUMBERS[self.kind]

    def heading(self) -> str:
        where = f"attempt {self.attempt} · " if self.attempt is not None else ""
        return f"{self.index + 1}. {where}{self.title} [rule {self.rule}]"

    def html(self) -> str:
        """This stage as its own `<section>` (escaped; not wrapped)."""
        return (f'<section class="op-stage op-stage-{esc(self.kind)}" data-stage="{self.index}" '
                f'data-rule="{esc(self.rule)}" style="margin:6px 0;padding:6px 8px;'
                f'border-left:3px solid #90a4ae">'
                f'<h4 style="margin:2px 0">{esc(self.heading())}</h4>'
                f'<p class="op-stage-why" style="margin:2px 0 6px 0;color:#444">'
                f"{esc(self.explanation)}</p>{self.body}</section>")

    def text(self) -> str:
        """This stage for a terminal: control characters a model wrote (an ANSI escape, a
        carriage return) are shown as escapes, so a reply cannot recolour or rewrite the
        screen."""
        return "\n".join([_term(self.heading()), f"  {_term(self.explanation)}",
                          *(f"    {_term(line)}" for line in self.lines)])


def _term(text: str) -> str:
    return "".join(c if c == "\t" or c.isprintable() or c == " " else
                   ascii(c)[1:-1] for c in text)


class Steps:
    """A decision as ordered stages. `len()`, indexing and iteration give the `Stage`s; in a
    notebook it shows as every stage's section; `format_text()` is the terminal form."""

    def __init__(self, trace: DecisionTrace, stages: list[Stage]):
        self.trace, self.stages = trace, stages

    def __len__(self) -> int:
        return len(self.stages)

    def __getitem__(self, i: int) -> Stage:
        return self.stages[i]

    def __iter__(self):
        return iter(self.stages)

    def __repr__(self) -> str:
        return f"<Steps of decision #{self.trace.id}: {len(self.stages)} stages>"

    def to_html(self) -> str:
        index = "".join(f"<li>{esc(s.heading())}</li>" for s in self.stages)
        return wrap(f'<div class="op-steps"><ol style="margin:2px 0 6px 0;font-size:12px">'
                    f"{index}</ol>" + "".join(s.html() for s in self.stages) + "</div>",
                    "op-steps-view")

    def format_text(self) -> str:
        return "\n\n".join(s.text() for s in self.stages)

    def to_dict(self) -> list[dict]:
        return [{"index": s.index, "kind": s.kind, "number": s.number, "attempt": s.attempt,
                 "title": s.title, "rule": s.rule, "explanation": s.explanation,
                 "lines": list(s.lines), "data": s.data} for s in self.stages]

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self.format_text(), "text/html": self.to_html()}


class SideBySide:
    """Decisions' stages in columns, one per decision (`side_by_side`)."""

    def __init__(self, columns: dict[str, Steps]):
        self.columns = columns

    def to_html(self) -> str:
        heads = "".join(f'<th style="text-align:left">{esc(name)}</th>' for name in self.columns)
        cells = "".join(
            f'<td style="vertical-align:top;width:{100 // max(len(self.columns), 1)}%">'
            f'<div style="font-size:12px">{esc(repr(st.trace))}</div>'
            + "".join(s.html() for s in st.stages if s.kind != "options") + "</td>"
            for st in self.columns.values())
        return wrap(f'<table class="op-side-by-side" style="table-layout:fixed;width:100%">'
                    f"<tr>{heads}</tr><tr>{cells}</tr></table>", "op-steps-compare")

    def format_text(self) -> str:
        return "\n\n".join(f"=== {name} ===\n" + "\n\n".join(
            s.text() for s in st.stages if s.kind != "options")
            for name, st in self.columns.items())

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self.format_text(), "text/html": self.to_html()}


def side_by_side(traces: dict, options: Any = None) -> SideBySide:
    """The stages of several decisions of the same request in columns, one per decision (`{"you":
    trace, "the model": trace}`): what each was sent, replied, and became, stage against stage.
    The option set's stage is left out: it is the same for all."""
    if not isinstance(traces, dict) or not traces:
        raise UsageError("side_by_side() takes a dict of column titles to DecisionTraces, e.g. "
                         "{'you': mine, 'the model': theirs}")
    return SideBySide({str(name): steps(t, options) for name, t in traces.items()})


# ---------------------------------------------------------------------------------------------
# Where each menu line came from
# ---------------------------------------------------------------------------------------------

def menu_sources(options: Any) -> list[dict]:
    """Every line of the menu of `options`, one dict each: `option`, `line` (the text as the
    menu shows it), `part` ("signature", "description", "param", "call", "example") and `source`
    (where it came from: `kind` "file" with `file` and `line`, "option_set" with a `path` into the
    option set, "json_pointer" with a `pointer` into the option's JSON Schema, "value" with the
    value's repr, or "note")."""
    out = []
    for option in normalize(options):
        code = option.code_place()
        sig, doc = option.head_sources(options, code)
        # a line an edit wrote (decision.improve's) cites the edit, not the code it replaced
        edited = option.edited
        sig, doc = edited.get("name", sig), edited.get("description", doc)

        def param_source(name: str, nested: list[str], option: Any = option,
                         edited: Any = edited, code: Any = code) -> dict:  # this loop's option
            if not nested and f"param:{name}" in edited:
                return dict(edited[f"param:{name}"])
            return option.param_source(name, nested, options, code)
        lines = option.menu_lines()
        shown_examples = option.example_lines()
        top = {p.name for p in option.llm_params}
        current: str | None = None
        for i, line in enumerate(lines):
            stripped = line.strip()
            if i == 0:
                part, src = "signature", sig
            elif stripped.startswith("Call:"):
                part, src = "call", {"kind": "derived", "label": "built from the parameters' "
                                     "types (R3): every Call: line is itself a valid pick"}
            elif stripped.startswith("- "):
                word = stripped[2:].split(" ", 1)[0]
                if line.startswith("    - ") and not line.startswith("     ") and word in top:
                    current = word
                    part, src = "param", param_source(word, [])
                else:  # a nested field line ("who.a") belongs to its top-level parameter
                    nested = [n for n in word.split(".")[1:] if n] if current else []
                    part = "param"
                    src = param_source(current or word, nested)
            elif current is not None:
                part, src = "param", param_source(current, [])
            else:
                part, src = "description", doc
            out.append({"option": option.name, "kind": option.kind, "line": line,
                        "part": part, "source": src})
        for line, e in zip(shown_examples, option.examples):  # each worked pick cites its origin
            out.append({"option": option.name, "kind": option.kind, "line": line,
                        "part": "example", "source": dict(e["source"])})
    return out


# ---------------------------------------------------------------------------------------------
# The reply's candidates
# ---------------------------------------------------------------------------------------------

def candidates(text: str) -> list[dict]:
    """The JSON objects with a call key in `text` that the extractor counts, outermost only, in
    order: `span`, `key` (the alias written) and `call`. Those in the first `_SCAN_CHARS`
    characters, at most `_MAX_CANDIDATES`."""
    if not isinstance(text, str):
        return []
    found, _ = _found(text[:_SCAN_CHARS], _MAX_CANDIDATES)
    return [{"span": [start, end], "key": key, "call": safe_repr(call)}
            for start, end, key, call in found]


def _marked(text: str, spans: list[tuple[int, int, str, str]]) -> str:
    """`text` escaped with each (start, end, style key, tag) span inside a titled `<mark>`;
    spans that overlap an earlier one are left unmarked."""
    out, pos = [], 0
    for start, end, style, tag in sorted(spans):
        if start < pos or end > len(text):
            continue
        out.append(esc(text[pos:start]))
        out.append(f'<mark class="op-cand op-cand-{esc(style)}" title="{esc(tag)}" '
                   f'style="background:{_MARKS[style]};color:inherit;outline:1px solid #888">'
                   f'<sup style="font-size:10px">{esc(tag)}</sup>{esc(text[start:end])}</mark>')
        pos = end
    out.append(esc(clip(text[pos:])))
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------------------------

def _options_stage(trace: DecisionTrace, options: Any) -> tuple[list, str, dict]:
    if options is None:
        lines = trace.menu.splitlines()
        body = (label("The menu (pass the option set to steps() to see where each line came "
                      "from)") + pre(trace.menu, 400, "op-menu"))
        return lines, body, {"sources": None}
    rows = menu_sources(options)
    out, cells = [], []
    for r in rows:
        out.append(f"{r['line']}    <- {r['source']['label']}")
        cells.append(f'<tr><td><code style="white-space:pre">{esc(r["line"])}</code></td>'
                     f'<td class="op-source" data-kind="{esc(r["source"]["kind"])}">'
                     f'{esc(r["source"]["label"])}</td></tr>')
    body = (label(f"The option set: {len(trace.options)} options, "
                  + ", ".join(f"{o['name']} ({o['kind']})" for o in trace.options))
            + '<table class="op-menu-sources" style="font-size:12px;border-collapse:collapse">'
            + "<tr><th>menu line</th><th>came from</th></tr>" + "".join(cells) + "</table>")
    return out, body, {"sources": rows}


def _sent_stage(trace: DecisionTrace, att: Any) -> tuple[str, list, str]:
    how = MODES.get(trace.mode, JsonSchemaMode).how_sent
    lines = [f"mode: {trace.mode}", *att.prompt.splitlines()[:40]]
    body = label(f"Sent ({trace.mode} mode, {len(att.prompt)} characters)") + pre(att.prompt, 320)
    if att.sent:
        lines.append(f"and with it: {json_text(att.sent, None)[:400]}")
        body += label("Sent with it in place of the menu") + pre(json_text(att.sent), 260)
    return how, lines, body


def _reply_stage(att: Any) -> tuple[list, str, dict]:
    reply = att.reply if isinstance(att.reply, str) else ""
    cands = candidates(reply)
    pick = list(att.span) if att.span is not None else None
    spans, lines = [], []
    for n, c in enumerate(cands, 1):
        is_pick = c["span"] == pick
        c["role"] = "pick" if is_pick else "ignored"
        tag = f"#{n} {'pick' if is_pick else 'ignored'}"
        spans.append((c["span"][0], c["span"][1], "pick" if is_pick else "ignored", tag))
        lines.append(f"candidate #{n} at {c['span'][0]}-{c['span'][1]} (key {c['key']!r}): "
                     f"{'THE PICK' if is_pick else 'ignored, a later one wins'}")
    if len(reply) > _SCAN_CHARS or len(cands) >= _MAX_CANDIDATES:
        beyond = pick is not None and not any(c["role"] == "pick" for c in cands)
        lines.append((f"only the first {_MAX_CANDIDATES} candidates are outlined"
                      if len(cands) >= _MAX_CANDIDATES else
                      f"only the first {_SCAN_CHARS:,} characters are outlined")
                     + ("; the pick lies beyond" if beyond else ""))
    body = label(f"Raw reply: {len(cands)} candidate(s) outlined") + pre_html(
        _marked(reply, spans), 260, "op-reply")
    if len(lines) > len(cands):
        body += label(lines[-1])
    if att.tool_calls:
        from ..trace.view import tool_calls_text
        body += label("Native tool call(s)") + pre(tool_calls_text(att.tool_calls), 160)
        lines.append(f"native tool call(s): {tool_calls_text(att.tool_calls)}")
    if att.extracted is not None:
        alias = att.key_alias or "call"
        note = (f'the alias "{alias}" was normalised to "call"' if alias != "call"
                else 'written with "call" itself')
        body += (label(f"The pick, found in the {att.found_in} ({note})")
                 + pre(json_text(att.extracted), 200, "op-extracted"))
        lines.append(f"the pick ({note}): {json_text(att.extracted, None)}")
    else:
        lines.append("no pick was found")
        body += label("No pick was found")
    return lines, body, {"candidates": cands, "alias": att.key_alias}


def _repair_stage(att: Any) -> tuple[list, str, dict]:
    from ..trace.view import repair_marked_html, repairs_html
    reply = att.reply if isinstance(att.reply, str) else ""
    lines = [f"repaired {r}" for r in att.repairs]
    body = (label("The raw reply, the repaired spans marked")
            + pre_html(repair_marked_html(reply, att.repairs), 200, "op-reply")
            + repairs_html(att))
    return lines, body, {"repairs": [r.to_dict() for r in att.repairs]}


def _value_seen(att: Any, given: dict, name: str) -> Any:
    """The argument as validation saw it: after a repair of it (repair="menu"), the repaired
    value; else as the model gave it."""
    if att.args is not None and name in att.args and any(
            r.path == f"args.{name}" or r.path.startswith((f"args.{name}.", f"args.{name}["))
            for r in getattr(att, "repairs", ()) or ()):
        return att.args[name]
    return given.get(name)


def _given_args(att: Any) -> dict:
    ex = att.extracted if isinstance(att.extracted, dict) else {}
    if "args" in ex:
        return ex["args"] if isinstance(ex["args"], dict) else {}
    return {k: v for k, v in ex.items() if k != "call"}


def _validation_stage(trace: DecisionTrace, att: Any) -> tuple[list, str, dict]:
    ex = att.extracted if isinstance(att.extracted, dict) else None
    if ex is None:
        rows = []
        note = "nothing to validate: no pick was found"
    else:
        call = ex.get("call")
        if att.chosen is not None and getattr(att, "repairs", None):
            call = att.chosen  # an option name repaired (repair="menu"): the stage before says
        info = next((o for o in trace.options if o["name"] == call), None)
        note = (f"option {call!r} ({info['kind']})" if info else
                f"{safe_repr(call)} names no option (unknown_call)")
        given = _given_args(att)
        params = {p["name"]: p for p in (info or {}).get("params", [])}
        rows = []
        # The schema kinds check parameters in order and stop at the first failure, so those
        # before it passed; a user's class is checked all at once and reports every problem.
        order = list(params)
        failed_at = (att.error_path or "")[5:].split(".")[0].split("[")[0]
        before = set(order[:order.index(failed_at)]) if failed_at in order and \
            (info or {}).get("kind") != "class" else set()
        for name in dict.fromkeys([*params, *given]):
            p = params.get(name)
            path = f"args.{name}"
            schema_line = (f"{p['type']}{', required' if p['required'] else ''}"
                           + (f", one of {p['options']}" if p.get("options") else "")
                           if p else "not declared")
            if p is not None and p["hidden"]:
                continue  # stage 5 shows these
            if att.error_path and (att.error_path == path or
                                   att.error_path.startswith((path + ".", path + "["))):
                mark, why = "✗", f"{att.error_kind} at {att.error_path}: {att.error_message}"
            elif att.args is not None and name in att.args:
                mark, why = "✓", "fits"
            elif name in before and name in given:
                mark, why = "✓", "fits (checked before the failure)"
            elif path in att.dropped:
                mark, why = "–", "dropped: not a parameter of the option"
            elif name not in given:
                mark, why = "·", "not given" + ("" if not p or not p["required"] else
                                                " (required)")
            else:
                mark, why = "·", "not checked: the attempt failed first"
            rows.append({"name": name, "mark": mark, "schema": schema_line,
                         "value": json_text(_value_seen(att, given, name), None)
                         if name in given else None,
                         "why": why, "path": path})
    lines = [note] + [f"{r['mark']} {r['path']} = {r['value']}  [{r['schema']}]  {r['why']}"
                      for r in rows]
    if att.error_kind and not any(r["mark"] == "✗" for r in rows):
        lines.append(f"✗ {att.error_kind}" + (f" at {att.error_path}" if att.error_path else "")
                     + f": {att.error_message}")
    cells = "".join(
        f'<tr class="op-arg"><td>{esc(r["mark"])}</td><td><code>{esc(r["path"])}</code></td>'
        f'<td><code>{esc(r["value"])}</code></td><td>{esc(r["schema"])}</td>'
        f'<td>{esc(r["why"])}</td></tr>' for r in rows)
    body = label(note) + ('<table style="font-size:12px"><tr><th></th><th>path</th><th>value'
                          "</th><th>schema</th><th>result</th></tr>" + cells + "</table>")
    if att.error_kind:
        body += (f'<div class="op-error" style="color:#c62828"><b>{esc(att.error_kind)}</b>'
                 f"{esc(' at ' + att.error_path if att.error_path else '')}: "
                 f"{esc(att.error_message or '')}<br><i>{esc(explain(att.error_kind))}</i></div>")
    return lines, body, {"args": rows, "error_kind": att.error_kind, "error_path": att.error_path}


def _hidden_stage(trace: DecisionTrace, att: Any) -> tuple[list, str, dict]:
    call = (att.extracted or {}).get("call") if isinstance(att.extracted, dict) else None
    info = next((o for o in trace.options if o["name"] == call), None)
    hidden = [p for p in (info or {}).get("params", []) if p["hidden"]]
    lines = []
    for p in hidden:
        where = "the Runtime" if p["source"] == "runtime" else "context="
        got = (f"injected from {where}" if p["name"] in att.injected else
               "not injected: the attempt failed before it" if att.error_kind else "not injected")
        lines.append(f"{p['name']}: {got} (source {p['source']})")
    for d in att.dropped:
        lines.append(f"dropped what the model wrote at {d}")
    if not lines:
        lines.append("no hidden or context parameter, nothing dropped")
    body = pre("\n".join(lines), 160, "op-hidden")
    return lines, body, {"dropped": list(att.dropped), "injected": list(att.injected),
                         "hidden": [p["name"] for p in hidden]}


def _reask_stage(trace: DecisionTrace, att: Any, nxt: Any) -> tuple[list, str, dict]:
    text = nxt.prompt if isinstance(nxt.prompt, str) else ""
    reply = att.reply if isinstance(att.reply, str) else ""
    parts = [("the request", trace.prompt), ("the previous reply", reply),
             ("the problem", att.error_message or ""),
             ("the advice", explain(att.error_kind or "")),
             ("the menu", trace.menu)]
    spans, lines, found = [], [], {}
    for name, part in parts:
        at = text.find(part) if part else -1
        found[name] = at >= 0
        lines.append(f"{name}: {'in the re-ask at ' + str(at) if at >= 0 else 'not in it'}")
        if at >= 0:
            spans.append((at, at + len(part), "part", name))
    if not found["the previous reply"] and reply:
        lines.append("(a long reply is shortened in the middle; a reask= template may leave "
                     "parts out)")
    body = (pre("\n".join(lines), 120, "op-reask-parts") + label("The re-ask, its parts marked")
            + pre_html(_marked(text, spans), 320, "op-reask"))
    return lines, body, {"parts": found}


def steps(trace: DecisionTrace, options: Any = None) -> Steps:
    """The step-through of a recorded decision. `options` (the option set it was made with)
    links each menu line to where it came from; without it the menu is shown as sent."""
    if not isinstance(trace, DecisionTrace):
        raise UsageError(f"steps() takes a DecisionTrace (decision.last_trace(), err.trace or "
                         f"trace.history[i]), got {type(trace).__name__}")
    stages: list[Stage] = []

    def add(kind: str, attempt: int | None, title: str, explanation: str, got) -> None:
        lines, body, data = got
        stages.append(Stage(len(stages), kind, attempt, title, STAGE_RULES[kind], explanation,
                            tuple(lines), body, data))

    add("options", None, "The option set and its menu",
        "Every option becomes a block of the menu: a signature line, its description, a line "
        "per parameter the model fills, and a Call: line that is itself a valid pick. Each "
        "line is read from something you wrote.", _options_stage(trace, options))
    atts = trace.attempts
    for i, att in enumerate(atts):
        how, lines, body = _sent_stage(trace, att)
        add("sent", att.number, "What was sent" if att.number == 1 else "What was sent again",
            how + (" This is a re-ask: the same request with the failure explained." if i else ""),
            (lines, body, {"mode": trace.mode}))
        add("reply", att.number, "The raw reply and its candidates",
            "The extractor looks for JSON objects with a call key (call, action, function or "
            "tool). When there are several, the last one is the pick: a model that thinks aloud "
            "often quotes an example before it decides.", _reply_stage(att))
        if getattr(att, "repairs", None):
            add("repair", att.number, "The repairs, instead of a re-ask",
                "The reply was almost right: what repair= allows (\"safe\": JSON syntax where "
                "one value is meant; \"menu\": also what the option set makes unambiguous) "
                "was repaired rather than asked again, each repair only where exactly one "
                "reading fits. Each is listed with where it was and what it was before.",
                _repair_stage(att))
        add("validation", att.number, "Validation, argument by argument",
            "The picked option's schema checks each argument the model gave: its JSON type, "
            "its allowed values, nested fields all the way down. The first problem fails the "
            "attempt with an error kind and the path to the value.", _validation_stage(trace, att))
        add("hidden", att.number, "Hidden and context parameters",
            "Parameters the model must not set (hidden ones, context= ones, the Runtime) are "
            "not in the menu. Whatever the model writes for them is dropped, and their values "
            "are injected from context= or the Runtime.", _hidden_stage(trace, att))
        if att.error_kind and i + 1 < len(atts):
            add("reask", att.number, "The re-ask, built from its parts",
                "A failed attempt is not the end: the model is asked again with the request, "
                "its previous reply, what was wrong (kind, path, advice) and the menu. A "
                "reask= template or callable writes that text from the same parts.",
                _reask_stage(trace, att, atts[i + 1]))
    if trace.status == "resolved":
        last = atts[-1] if atts else None
        kind = next((o["kind"] for o in trace.options if last and o["name"] == last.chosen), "")
        what = {"function": "the function ran with these keyword arguments and its return "
                "value is the result", "value": "the value itself is the result",
                "schema": "the filled fields, under the option's name, are the result"}.get(
                    kind, "the option made the result from the validated arguments")
        lines = [f"chosen: {last.chosen if last else None} ({kind})",
                 f"arguments: {json_text(last.args if last else None, None)}",
                 f"injected: {', '.join(last.injected) if last and last.injected else 'none'}",
                 f"result: {clip(result_text(trace.result), 2000)}"]
        conf = getattr(last, "confidence", None) if last else None
        body = pre("\n".join(lines), 240, "op-result")
        data = {"chosen": last.chosen if last else None, "kind": kind}
        why = (f"Picking the option is the branch: {what}. The caller never checks which "
               "option won.")
        if conf is not None:  # how sure the model was, and where that number comes from
            lines += [f"probability of {n}: {p:.3f}" for n, p in conf.ranked()]
            lines += [f"other: {conf.other:.3f}", confidence_source_text(conf)]
            body += confidence_html(conf, getattr(last, "low_pick", None))
            data["confidence"] = conf.to_dict()
            why += " " + confidence_source_text(conf)
        add("resolution", last.number if last else None, "The resolution", why,
            (lines, body, data))
    else:
        err = trace.error
        lines = [f"status: {trace.status}", f"error: {clip(safe_repr(err), 2000)}"]
        add("failure", atts[-1].number if atts else None, "No attempt left",
            "When the last attempt fails too, DecisionError carries the kind, the message and "
            "the start of the last reply, and its trace keeps every attempt. There is no "
            "built-in fallback: the caller decides what failure means.",
            (lines, pre("\n".join(lines), 200, "op-result"), {"status": trace.status}))
    return Steps(trace, stages)
