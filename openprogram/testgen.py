"""Turn a recorded decision into a pytest test that replays it offline.

`trace_to_pytest(trace, ...)` writes the source of a test that plays the trace's recorded replies
back on `ScriptedRuntime` and asserts that the mechanism makes the same attempts (same error kinds,
same picks, same kept arguments), runs the same tool rounds and ends the same way (the same result,
or the same error). Change a prompt or an option set, re-run the test, and see whether the model's
old replies still lead where they led.

Where the generated test gets the option set from is the caller's choice, because a trace records
the option *names* and their menu, not the functions and values behind them:
- `module="pkg.options"`: the test imports the names `options_expr` uses from that module
  (`options_expr="OPTIONS"` gives `from pkg.options import OPTIONS`;
  `options_expr="make_options(3)"` gives `from pkg.options import make_options`). Best for option
  sets that live in a package.
- `setup="...source..."`: the source is pasted at the top of the test and must define those names.
  `option_set_source(options)` writes such source for an option set made in a notebook: its
  functions by `inspect.getsource`, its values and schemas as literals.
The same applies to `context_expr` (hidden parameters' values) and `tools_expr` (the tools of an
`agent(..., options=)` turn). Only the standard library is used; nothing here needs Jupyter.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import keyword
import re
import textwrap
from typing import Any

from .base.errors import DecisionError

__all__ = ["trace_to_pytest", "option_set_source", "definitions_source"]

_TYPE_NAMES = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "dict",
               type(None): "type(None)"}


def _literal(value: Any) -> str | None:
    """Python source that evaluates to `value`, or None when repr does not round-trip."""
    try:
        src = repr(value)
        back = ast.literal_eval(src)
    except Exception:
        return None
    return src if back == value and type(back) is type(value) else None


def _names_used(expr: str, what: str) -> list[str]:
    """The free names an expression reads (builtins excluded), in order of appearance."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"{what} {expr!r} is not a Python expression ({exc.msg}); write a name "
                         f"such as OPTIONS or an expression such as make_options()") from None
    seen: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and not hasattr(builtins, node.id) and node.id not in seen:
            seen.append(node.id)
    return seen


def _names_defined(setup: str) -> set[str]:
    """The names a setup source binds at its top level."""
    try:
        tree = ast.parse(textwrap.dedent(setup))
    except SyntaxError as exc:
        raise ValueError(f"setup= is not valid Python ({exc.msg}, line {exc.lineno})") from None
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in getattr(node, "targets", None) or [node.target]:
                out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return out


def _identifier(name: str) -> str:
    out = re.sub(r"\W", "_", name, flags=re.ASCII)
    if not out or out[0].isdigit() or keyword.iskeyword(out):
        out = "_" + out
    return out


def _reply_item(att, helpers: set[str]) -> str:
    """The ScriptedRuntime item that reproduces one attempt's final model call."""
    if att.error_kind in ("model_error", "timeout"):
        helpers.add("fails")
        partial = att.reply if isinstance(att.reply, str) else ""
        return (f"_model_call_fails({att.error_kind!r}, {att.error_message!r}, "
                f"partial={partial!r})")
    src = _literal(att.reply)
    if src is None:
        raise ValueError(f"attempt {att.number}'s reply {att.reply!r:.80} cannot be written as a "
                         f"Python literal, so it cannot be replayed")
    return src


def _expected(value: Any, label: str) -> list[str]:
    """Assertion lines for a resolved result."""
    src = _literal(value)
    if src is not None:
        return [f"    assert result == {src}"]
    r = repr(value)
    if re.search(r"0x[0-9a-fA-F]{6,}", r) is None and len(r) <= 2000:
        return [f"    assert repr(result) == {r!r}  # {label} is not a literal; compared by repr"]
    return [f"    assert type(result).__name__ == {type(value).__name__!r}  # repr varies"]


def trace_to_pytest(trace, options_expr: str = "OPTIONS", module: str | None = None, *,
                    setup: str | None = None, context_expr: str | None = None,
                    tools_expr: str | None = None, test_name: str | None = None) -> str:
    """The source of a pytest test that replays `trace` on ScriptedRuntime (see the module's
    docstring for where the option set comes from). Raises ValueError when the trace cannot be
    replayed as given, with what to pass instead."""
    # A trace may come from a file someone else wrote (a journal): nothing of it is written
    # into the test as text. Strings go through repr; what only a few values can be (the
    # status, the entry point, the numbers) is checked to be one of them, and refused if not.
    if isinstance(trace.id, bool) or not isinstance(trace.id, (int, type(None))):
        raise ValueError(f"the trace's id {trace.id!r:.80} is not a decision number; it was read "
                         f"from an edited file and cannot be turned into a test")
    if trace.status == "running":
        raise ValueError(f"decision #{trace.id} is still running; generate its test once it has "
                         f"resolved or failed")
    if trace.status not in ("resolved", "failed"):
        raise ValueError(f"decision #{trace.id} has status {trace.status!r:.80}, not 'resolved' "
                         f"or 'failed': only a finished decision can be replayed (was the trace "
                         f"read from an edited file?)")
    if trace.entry not in ("make", "agent"):
        raise ValueError(f"decision #{trace.id} came from {trace.entry!r:.80}; only decision.make "
                         f"and agent(..., options=) traces can be replayed")
    if isinstance(trace.max_attempts, bool) or not isinstance(trace.max_attempts, int) or \
            trace.max_attempts < 1:
        raise ValueError(f"decision #{trace.id} has max_attempts {trace.max_attempts!r:.80}, not "
                         f"a whole number >= 1 (was the trace read from an edited file?)")
    if not trace.attempts:
        raise ValueError(f"decision #{trace.id} has no attempts to replay")
    if module is None and setup is None:
        raise ValueError(
            "say where the test gets the option set: module='pkg.mod' (the test imports the "
            f"names {options_expr!r} uses from it) or setup='source that defines them' "
            "(option_set_source(options) writes it for a notebook's option set)")
    if trace.context_keys and context_expr is None:
        raise ValueError(f"decision #{trace.id} used context keys {trace.context_keys}; pass "
                         f"context_expr= (e.g. 'CONTEXT') naming a dict the test can import or "
                         f"that setup= defines")
    if trace.tool_rounds and tools_expr is None:
        raise ValueError(f"decision #{trace.id} ran tools "
                         f"{sorted({t.name for t in trace.tool_rounds})}; pass tools_expr= (e.g. "
                         f"'[search, fetch]') naming them for the test")

    exprs = [("options_expr", options_expr)]
    if context_expr:
        exprs.append(("context_expr", context_expr))
    if tools_expr:
        exprs.append(("tools_expr", tools_expr))
    names: list[str] = []
    for what, expr in exprs:
        for n in _names_used(expr, what):
            if n not in names:
                names.append(n)

    helpers: set[str] = set()
    replies: list[str] = []
    for att in trace.attempts:
        if att.number == 1 and trace.tool_rounds:
            # A turn's tool calls come back one per model call; how the model grouped them is not
            # recorded and does not change what the tools return.
            helpers.add("toolcall")
            for t in trace.tool_rounds:
                args = _literal(t.args)
                if args is None:
                    raise ValueError(f"tool round {t.round}'s arguments are not literals")
                replies.append(f"ToolCall({t.name!r}, {args})")
        replies.append(_reply_item(att, helpers))

    name = test_name or f"test_decision_{trace.id}_replays"
    if not name.startswith("test"):
        name = "test_" + name
    name = _identifier(name)

    kinds = [a.error_kind for a in trace.attempts]
    chosen = [a.chosen for a in trace.attempts]
    args = [a.args for a in trace.attempts]
    args_src = _literal(args)

    out: list[str] = [
        f'"""Replays decision #{trace.id} ({trace.entry}, {trace.status}, '
        f'{len(trace.attempts)} attempt(s)) on ScriptedRuntime.',
        "",
        "Generated by openprogram.testgen.trace_to_pytest: the recorded model replies are played",
        "back in order; the test checks that the mechanism makes the same attempts with the same",
        "error kinds and picks, and ends the same way. Re-run it after changing the prompt or the",
        'option set."""',
        "import pytest",
        "",
        "from openprogram import agent, decision, observe",
        "from openprogram.runtimes import ModelCallError, ScriptedRuntime, ToolCall",
        "",
    ]
    imported: list[str] = []
    if module is not None:
        if not re.fullmatch(r"[A-Za-z_][\w.]*", module):
            raise ValueError(f"module {module!r} is not a dotted module path such as "
                             f"'pkg.options'")
        # With both, the option set can come from a package while a notebook's context or
        # tools are pasted: a name setup= defines is not imported too.
        defined = _names_defined(setup) if setup is not None else set()
        imported = [n for n in names if n not in defined]
        if imported:
            out.append(f"from {module} import {', '.join(imported)}")
    if setup is not None:
        pasted = [n for n in names if n not in imported]
        out += ["", "# --- setup: defines " + (", ".join(pasted) or "what the test uses") + " ---",
                textwrap.dedent(setup).strip("\n"), "# --- end of setup ---"]
    if "fails" in helpers:
        out += ["", "",
                "def _model_call_fails(kind, message, partial=''):",
                '    """A recorded model call that failed (timeout or model error)."""',
                "    def reply(prompt):",
                "        raise ModelCallError(message, partial=partial, kind=kind)",
                "    return reply", ""]
    out += ["", f"PROMPT = {trace.prompt!r}", "", "# The model's replies, in the order they came.",
            "REPLIES = ["]
    out += [f"    {r}," for r in replies] + ["]"]
    out += ["EXPECTED_ERROR_KINDS = " + repr(kinds) + "  # per attempt; None = the reply passed",
            "EXPECTED_CHOSEN = " + repr(chosen)]
    if args_src is not None:
        out.append("EXPECTED_ARGS = " + args_src
                   + "  # the arguments the model gave that were kept")
    if trace.tool_rounds:
        out.append("EXPECTED_TOOLS = " + repr([t.name for t in trace.tool_rounds]))

    if trace.entry == "make":
        call = (f"decision.make(PROMPT, {options_expr}, runtime=runtime, "
                f"max_retries={trace.max_attempts - 1}"
                + (f", context={context_expr}" if context_expr else "") + ")")
    else:
        call = (f"agent(PROMPT, options={options_expr}, runtime=runtime"
                + (f", tools={tools_expr}" if tools_expr else "")
                + (f", context={context_expr}" if context_expr else "") + ")")

    out += ["", "", f"def {name}():",
            "    runtime = ScriptedRuntime(REPLIES)",
            "    started = []",
            "    with observe(lambda e: started.append(e.trace) if e.kind == 'decision_started' "
            "else None):"]
    err = trace.error

    if trace.status == "resolved":
        out.append(f"        result = {call}")
    elif isinstance(err, DecisionError):
        out += ["        with pytest.raises(DecisionError) as info:",
                f"            {call}",
                f"    assert info.value.kind == {err.kind!r}"]
        out[out.index("from openprogram import agent, decision, observe")] = \
            "from openprogram import DecisionError, agent, decision, observe"
    else:
        etype = type(err)
        if etype.__module__ == "builtins" and getattr(builtins, etype.__name__, None) is etype:
            out += [f"        with pytest.raises({etype.__name__}):", f"            {call}"]
        else:
            out += ["        with pytest.raises(Exception) as info:", f"            {call}",
                    f"    assert type(info.value).__name__ == {etype.__name__!r}"]
    out += ["    trace = started[0]",
            f"    assert trace.status == {trace.status!r}",
            "    assert [a.error_kind for a in trace.attempts] == EXPECTED_ERROR_KINDS",
            "    assert [a.chosen for a in trace.attempts] == EXPECTED_CHOSEN"]
    if args_src is not None:
        out.append("    assert [a.args for a in trace.attempts] == EXPECTED_ARGS")
    if trace.tool_rounds:
        out.append("    assert [t.name for t in trace.tool_rounds] == EXPECTED_TOOLS")
    out.append("    assert runtime.remaining == 0, 'the decision used fewer replies than recorded'")
    if trace.status == "resolved":
        out += _expected(trace.result, "the result")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Source for an option set defined in a notebook
# ---------------------------------------------------------------------------------------------


def option_set_source(options: Any, name: str = "OPTIONS") -> str:
    """Python source that defines `name` as the given option set: each function option by its
    own source (`inspect.getsource`, which also works for functions defined in IPython cells),
    values and schemas as literals. Names a function uses from elsewhere (imports, globals) are
    not copied; the common typing names are imported. Raises ValueError for anything that cannot
    be written as source (pass module= to trace_to_pytest instead)."""
    return definitions_source({name: options})


def definitions_source(values: dict[str, Any]) -> str:
    """`option_set_source` for several names at once, e.g. `{"OPTIONS": options, "CONTEXT":
    context, "TOOLS": [search]}`: a function used by more than one of them is written once."""
    for name in values:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"name {name!r} is not a Python identifier")
    functions: dict[str, str] = {}

    def fn_source(fn) -> str:
        fname = getattr(fn, "__name__", None)
        if not inspect.isfunction(fn) or not fname or fname == "<lambda>":
            raise ValueError(f"{fn!r} is not a named plain function, so its source cannot be "
                             f"copied; import the option set from a module (module=...)")
        if fname not in functions:
            try:
                code = textwrap.dedent(inspect.getsource(fn))
            except (OSError, TypeError) as exc:
                raise ValueError(f"the source of {fname!r} is not available ({exc}); import the "
                                 f"option set from a module (module=...)") from None
            meta = getattr(fn, "input_meta", None)
            if meta:
                # Set after the def, so getsource does not see it; without it a hidden
                # parameter would be shown to the model and the replay would differ.
                code = code.rstrip("\n") + f"\n\n\n{fname}.input_meta = {src(meta)}\n"
            functions[fname] = code
        return fname

    def src(v: Any) -> str:
        if inspect.isfunction(v):
            return fn_source(v)
        if isinstance(v, type) and v in _TYPE_NAMES:
            return _TYPE_NAMES[v]
        if isinstance(v, dict):
            return "{" + ", ".join(f"{src(k)}: {src(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(src(x) for x in v) + "]"
        if isinstance(v, tuple):
            inner = ", ".join(src(x) for x in v)
            return f"({inner}{',' if len(v) == 1 else ''})"
        lit = _literal(v)
        if lit is None:
            raise ValueError(f"{v!r:.80} cannot be written as Python source; import the option "
                             f"set from a module (module=...)")
        return lit

    bodies = [f"{name} = {src(value)}" for name, value in values.items()]
    head = []
    if functions:
        head.append("from typing import Annotated, Any, Literal, Optional, Union")
        head += ["", *("\n" + s.rstrip("\n") + "\n" for s in functions.values())]
    return "\n".join(head + ["", *bodies]).strip("\n") + "\n"
