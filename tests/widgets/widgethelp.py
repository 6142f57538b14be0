"""Helpers for the notebook layer's tests (imported by name: every test folder has its own
helper module, so their names must differ)."""


def all_html(widget) -> str:
    """Every HTML / Textarea value in a widget tree, joined (what the front end would render)."""
    import ipywidgets as W
    out = []

    def walk(w):
        if isinstance(w, (W.HTML, W.HTMLMath, W.Textarea, W.Label)):
            out.append(w.value)
        for c in getattr(w, "children", ()) or ():
            walk(c)
    walk(widget)
    return "\n".join(out)


def run(shell, code):
    """Run a cell; return its ExecutionResult (errors are in .error_in_exec /
    .error_before_exec)."""
    return shell.run_cell(code)


def error_of(result):
    return result.error_in_exec or result.error_before_exec


def press(button):
    """Run a button's click handlers directly, so that a handler that raises fails the test
    (ipywidgets' own dispatch would catch it and print it to the kernel's log instead)."""
    for handler in button._click_handlers.callbacks:
        handler(button)
