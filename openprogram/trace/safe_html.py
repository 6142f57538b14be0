"""Safe HTML: the toolkit every HTML view of the library draws with. Text of any value escaped
(`esc`, quotes included), cut to a head with a note of what was left out (`clip`), shown in a
scrolling block (`pre`), JSON of anything a record holds, hand-built tables whose every cell is
escaped and cut, and the wrapper every view sits in (`wrap`): MathJax skips it, so a reply can
neither run script nor add markup, a link or typeset math. `quiet_frame` gives a pandas frame
the same wrapper. Standard library only; pandas is the caller's, found loaded.
"""
from __future__ import annotations

import json

from ..base.secrets import holding, scrub
from ..base.text import cut, safe_repr, safe_str

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["esc", "clip", "pre", "pre_html", "label", "json_text", "result_text", "wrap",
           "text_html", "quiet_frame", "html_table", "NO_MATH", "MAX_CHARS"]

#: What a view's outer element carries: MathJax 3 (JupyterLab) skips `mathjax_ignore`, MathJax 2
#: (the classic notebook, older exports) skips `tex2jax_ignore`.
NO_MATH = "mathjax_ignore tex2jax_ignore"
# A text block longer than this is cut (with a note of how much is left out): a reply of many
# megabytes must not become a page of many megabytes, once per redraw.
MAX_CHARS = 50_000
CELL_CHARS = 300
PRE_STYLE = ("white-space:pre-wrap;word-break:break-word;margin:2px 0 6px 0;padding:6px;"
             "background:#fff;border:1px solid #ddd;border-radius:3px;font-size:12px;"
             "font-family:var(--jp-code-font-family,monospace);max-height:{h}px;overflow:auto")
LABEL_STYLE = "font-weight:600;font-size:12px;color:#333;margin-top:4px"
# Headers never break inside a word; cells wrap between words only (overflow-wrap:break-word
# keeps the columns' minimum widths), and the table scrolls sideways when it is too wide.
TABLE_STYLE = ("<style>.op-table table{border-collapse:collapse;font-size:12px;width:max-content}"
               ".op-table th,.op-table td{border:1px solid #ddd;padding:2px 6px;"
               "text-align:left;vertical-align:top;max-width:420px;white-space:pre-wrap;"
               "word-break:normal;overflow-wrap:break-word}"
               ".op-table th{white-space:nowrap}.op-table thead th{background:#f3f3f3}</style>")


def esc(value: Any) -> str:
    """Escaped text of any value (quotes included, so it is safe in attributes too), masked of
    every secret this process holds: a function's or a tool's result, an error's message, an
    option's text is the program's, not redacted by a runtime, and may hold a key."""
    import html  # here, not at the top: a view is drawn long after `import openprogram`, if ever
    text = value if isinstance(value, str) else safe_str(value)
    return html.escape(scrub(text) if holding() else text, quote=True)


def clip(text: str, limit: int = MAX_CHARS) -> str:
    return cut(text, limit, "\n… [{n:,} more characters not shown]")


def pre(text: Any, height: int = 260, cls: str = "", limit: int = MAX_CHARS) -> str:
    return pre_html(esc(clip(safe_str(text), limit)), height, cls)


def pre_html(body: str, height: int = 260, cls: str = "") -> str:
    """A scrolling block of already escaped HTML (`body`)."""
    return f'<pre class="{cls}" style="{PRE_STYLE.format(h=height)}">{body}</pre>'


def label(text: str) -> str:
    return f'<div style="{LABEL_STYLE}">{esc(text)}</div>'


def json_text(obj: Any, indent: int | None = 2) -> str:
    """JSON of anything a record holds (pretty unless `indent` is None); its repr when it is
    not JSON (a cycle)."""
    try:
        return json.dumps(obj, indent=indent, ensure_ascii=False, default=safe_repr)
    except (TypeError, ValueError, RecursionError):
        return safe_repr(obj)


def result_text(value: Any) -> str:
    """A result as a person reads it: JSON for dicts and lists, else its repr."""
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
    return safe_repr(value)


def wrap(body: str, cls: str = "") -> str:
    """`body` inside the outer element every view has: MathJax leaves it alone."""
    return (f'<div class="{f"op-view {NO_MATH} {cls}".strip()}" style="font-family:'
            f'var(--jp-ui-font-family,sans-serif);font-size:13px;max-width:1000px">{body}</div>')


def text_html(text: Any, cls: str = "") -> str:
    """Plain text (a menu, a report) as a view: escaped, in a `<pre>`, inside the wrapper. The
    front end turns URLs of printed (plain-text) output into links; this one it shows as
    written."""
    return wrap(pre(text, 600, cls), cls)


def quiet_frame(frame: Any) -> Any:
    """`frame` (a pandas DataFrame) as one whose HTML view sits in the wrapper, with pandas'
    MathJax marking off too; frames made from it (`.head()`, a selection) keep that view."""
    return _quiet_frame_class()(frame)


def _quiet_frame_class():
    global _QuietFrame
    if _QuietFrame is None:
        import sys
        # the frame's own library, loaded already: this module imports nothing but the
        # standard library
        pd = sys.modules["pandas"]

        class QuietFrame(pd.DataFrame):
            """A DataFrame whose `_repr_html_` is the library's wrapper around pandas' own."""

            @property
            def _constructor(self):
                return QuietFrame

            def _repr_html_(self):
                with pd.option_context("display.html.use_mathjax", False):
                    body = super()._repr_html_()
                return None if body is None else wrap(body, "op-frame-view")

        _QuietFrame = QuietFrame
    return _QuietFrame


_QuietFrame = None


def short_cell(text: str) -> str:
    return cut(text, CELL_CHARS, "…")


def cell_html(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (dict, list, tuple)):
        try:
            value = json.dumps(value, ensure_ascii=False, default=safe_repr)
        except (TypeError, ValueError):
            value = safe_repr(value)
    return esc(short_cell(value if isinstance(value, str) else safe_str(value)))


def html_table(columns: list[str], rows: list[list], cls: str = "") -> str:
    """An HTML table whose first column is the row's name (a `<th>`, like a frame's index)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + f"<th>{cell_html(r[0])}</th>"
                   + "".join(f"<td>{cell_html(v)}</td>" for v in r[1:]) + "</tr>" for r in rows)
    return (f'<div class="op-table {cls}" style="overflow:auto"><table class="op-frame">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")

