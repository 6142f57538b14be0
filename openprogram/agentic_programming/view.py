"""PLACEHOLDER (replaced by the widgets branch): the HTML view of a trace."""
from __future__ import annotations

import html


def trace_html(trace) -> str:
    return f'<div class="mathjax_ignore tex2jax_ignore"><pre>{html.escape(trace.format_text())}</pre></div>'
