"""The properties every fuzzed decision must keep, as assertions shared by the fuzz tests."""
from __future__ import annotations

import json
from html.parser import HTMLParser

from fuzzhelp import HOSTILE_TAGS, Generated, OptionSpec, fits

from openprogram import ERROR_KINDS, DecisionError
from openprogram.trace import view


def show(v, n: int = 200) -> str:
    """repr(v), cut; a value whose repr fails (an int of more digits than Python prints) too."""
    try:
        return repr(v)[:n]
    except Exception as exc:
        return f"<{type(v).__name__} whose repr raised {type(exc).__name__}>"


def check_received(gen: Generated, spec: OptionSpec, received: dict, runtime) -> None:
    """What a generated function received: each model-filled value fits its declared type (or
    is the default, untouched); hidden ones are the context's value or the default; runtime
    ones are the runtime; nothing reaches *rest or **extra."""
    for p in spec.params:
        v = received[p.name]
        where = f"option {spec.name!r} parameter {p.name!r}"
        if p.source == "runtime":
            assert v is runtime, f"{where} should hold the runtime, got {show(v)}"
        elif p.source == "context":
            want = gen.context[p.name] if p.name in gen.context else p.default
            assert v is want, f"{where} is hidden: it should hold {want!r}, got {show(v)}"
        else:
            assert (p.has_default and v is p.default) or fits(v, p.ty), \
                f"{where} declares {p.ty} ({p.ann}) but received {show(v)}"
    if spec.has_rest:
        assert received["rest"] == (), f"{spec.name}: *rest got {show(received['rest'])}"
    if spec.has_extra:
        assert received["extra"] == {}, f"{spec.name}: **extra got {show(received['extra'])}"


def check_kwargs(gen: Generated, spec: OptionSpec, kwargs: dict, runtime) -> None:
    """parse_args' keyword arguments, before anything runs: the same promises, with defaults
    left out."""
    if spec.kind == "schema":
        assert fits(kwargs, spec.ty), f"{spec.name}: {show(kwargs)} does not fit {spec.ty}"
        return
    if spec.kind == "value":
        assert kwargs == {}, kwargs
        return
    names = {p.name for p in spec.params}
    assert set(kwargs) <= names, f"{spec.name}: unknown keyword arguments {set(kwargs) - names}"
    full = dict(kwargs)
    for p in spec.params:
        if p.name not in full:
            assert p.has_default or (p.source == "context" and p.name not in gen.context), \
                f"{spec.name}: required {p.name!r} missing from {show(kwargs)}"
            full[p.name] = p.default
    full.setdefault("rest", ())
    full.setdefault("extra", {})
    check_received(gen, spec, full, runtime)


def check_result(gen: Generated, result, trace) -> None:
    spec = gen.spec(trace.chosen)
    if spec.kind == "function":
        mine = [ret for name, _, ret in gen.calls if name == spec.name]
        assert mine and result is mine[-1], f"{spec.name}: result {result!r} is not its return"
    elif spec.kind == "value":
        assert result is spec.value, f"{spec.name}: result {result!r} is not {spec.value!r}"
    else:
        assert type(result) is dict and result.get("decision") == spec.name, result
        fields = {k: v for k, v in result.items() if k != "decision"}
        assert fits(fields, spec.ty), f"{spec.name}: {show(fields)} does not fit {spec.ty}"


def check_trace(gen: Generated, trace) -> None:
    """No attempt keeps a model value for a hidden or runtime parameter, and only those are
    injected."""
    for att in trace.attempts:
        if att.chosen is None:
            continue
        spec = next((s for s in gen.specs if s.name == att.chosen), None)
        assert spec is not None, att.chosen
        assert not set(att.args or {}) & spec.not_llm, \
            f"attempt {att.number} kept model values for {set(att.args) & spec.not_llm}"
        assert set(att.injected or ()) <= spec.not_llm, att.injected


def check_writable(trace) -> None:
    """What the mechanism writes about each attempt (error, path, what was dropped) and the
    trace's export are text UTF-8 can write (to a file, a socket, a notebook), whatever the
    reply held."""
    for att in trace.attempts:
        for text in [att.error_message, att.error_path, *att.dropped, *att.injected]:
            (text or "").encode("utf-8")
    json.dumps(trace.to_dict(), ensure_ascii=False, allow_nan=False).encode("utf-8")


def check_error(err: DecisionError) -> None:
    assert err.kind in ERROR_KINDS, err.kind
    assert err.trace is not None and err.trace.status == "failed"
    str(err).encode("utf-8")            # an error message can always be printed or logged
    (err.path or "").encode("utf-8")
    (err.reply_head or "").encode("utf-8", "surrogatepass")


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}


class _Tags(HTMLParser):
    """The tags of an HTML text, its comments, and any text MathJax would typeset: text with no
    enclosing element of class `mathjax_ignore` (style sheets aside)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.comments: list[str] = []
        self.typeset: list[str] = []
        self._open: list[tuple[str, bool]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag not in _VOID:
            ignored = "mathjax_ignore" in (dict(attrs).get("class") or "").split()
            self._open.append((tag, ignored))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        inside = [t for t, _ in self._open]
        if data.strip() and "style" not in inside and not any(ig for _, ig in self._open):
            self.typeset.append(data)

    def handle_comment(self, data):
        self.comments.append(data)

    def unknown_decl(self, data):
        self.comments.append(data)


def check_html(html: str, what: str = "trace_html") -> None:
    """An HTML view shows everything as text: no tag or inline handler of the reply's (or an
    option author's) markup, no comment it could open, and no text outside an element that
    MathJax skips (class `mathjax_ignore`), so `$...$` in a reply is never typeset."""
    parser = _Tags()
    parser.feed(html)
    parser.close()
    bad = [t for t in parser.tags if t[0] in HOSTILE_TAGS]
    assert not bad, f"{what} lets markup through: {bad[:3]}"
    handlers = [(t, a) for t, attrs in parser.tags for a, _ in attrs if a.startswith("on")]
    assert not handlers, f"{what} carries inline handlers: {handlers[:3]}"
    assert not parser.comments, f"{what} holds a comment or declaration: {parser.comments[:2]}"
    assert not parser.typeset, \
        f"{what} shows text outside a mathjax_ignore element: {parser.typeset[:2]}"


def check_views(trace) -> None:
    check_html(view.trace_html(trace), "view.trace_html")
    check_html(trace._repr_mimebundle_()["text/html"], "display(trace)")
