"""`%decision_menu`'s menu is shown as the library's HTML view, not printed: JupyterLab turns URLs
in printed (plain-text) output into links and MathJax typesets `$...$` in it, and an option's
description is the option author's text (issue 29)."""
import re

from IPython.utils.capture import capture_output
from widgethelp import error_of


def test_the_menu_is_an_escaped_html_view_out_of_mathjax(shell):
    shell.run_cell("OPTIONS = {'go': ('GO', 'see data:text/html,<b>x</b> or $a^2$ "
                   "<a href=x>y</a>')}")
    with capture_output() as cap:
        r = shell.run_cell("%decision_menu OPTIONS --text-only")
    assert r.success, error_of(r)
    assert cap.stdout == ""   # nothing printed: a printed URL would become a link
    (shown,) = cap.outputs
    html, text = shown.data["text/html"], shown.data["text/plain"]
    assert text.startswith("Options (reply with one JSON object") and "data:text/html" in text
    assert re.match(r'<div class="op-view mathjax_ignore tex2jax_ignore op-menu-text"', html)
    assert "<pre" in html and "<b>" not in html and "<a " not in html
    assert "data:text/html,&lt;b&gt;x&lt;/b&gt;" in html and "$a^2$" in html
    # the option table is in the same wrapper
    table = shell.run_cell("%decision_menu OPTIONS").result._repr_html_()
    assert re.match(r'<div class="op-view mathjax_ignore tex2jax_ignore', table)
