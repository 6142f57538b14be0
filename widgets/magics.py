"""The IPython magics of `%load_ext openprogram`.

`%%decide OPTIONS` runs `decision.make` with the cell as the prompt and shows the decision panel
live; `%%agent OPTIONS` does the same through `agent(..., options=OPTIONS)` with tools;
`%%run_program` runs the cell's code as one run and shows its live tree, from which a decision is
opened and the run forked; `%decision_menu OPTIONS` previews an option set without a model,
`%decision_lint OPTIONS` checks it without one; `%decision_runtime [EXPR]` shows or sets the
notebook's default runtime; `%decision_trace [N]` shows a past decision again, and
`%decision_steps [N]` steps through it stage by stage.
Arguments that name options, runtimes, contexts, tools, rules (`--validate`) or re-ask texts
(`--reask`) are names of the notebook's variables or Python expressions evaluated in its namespace
(quote an expression that holds spaces); `--mode` picks the way of asking. An async runtime works
as is: the decision finishes inside the kernel's running event loop and the panel follows it
live. Every magic has `--help`. It is long because it holds every magic, each a short front end
over the core on IPython's magic_arguments, sharing the helpers that resolve names in the user's
namespace and show results.
"""
from __future__ import annotations

import argparse
import keyword
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from openprogram.decision.modes import MODES
from openprogram.decision.repair import LEVELS as REPAIR_LEVELS

__all__ = ["DecisionMagics", "load_ipython_extension", "unload_ipython_extension"]

_SET_RUNTIME_HINT = ("set the notebook's default with %decision_runtime ScriptedRuntime([...]) "
                     "(from openprogram.runtimes) or any Runtime(call=your_model), or pass "
                     "--runtime NAME")


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _unquote(text: str) -> str:
    # IPython's argument splitter keeps the quotes around a quoted argument.
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _first_flag(line: str, flags: list[str]) -> int:
    """Where the first option flag starts (outside quotes and brackets), else len(line)."""
    depth, quote, i = 0, None, 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "-" and depth <= 0 and (i == 0 or line[i - 1].isspace()):
            word = line[i:].split(None, 1)[0].split("=", 1)[0]
            if word in flags:
                return i
        i += 1
    return len(line)


def _decision_flags(func):
    """The flags %%decide and %%agent share: --runtime, --context, --timeout, --mode,
    --repair, --validate, --reask, --confidence, --min-confidence, --low-confidence,
    --pick-set, --as."""
    for flag in reversed([
            argument("--runtime", "-r", default=None,
                     help="the Runtime to call (default: the one set with %%decision_runtime)"),
            argument("--context", "-c", default=None,
                     help="a dict with the values of hidden parameters"),
            argument("--timeout", type=float, default=None,
                     help="seconds for the whole decision, re-asks and tool rounds included"),
            argument("--mode", default="menu", choices=list(MODES),
                     help="the way of asking: the text menu (default), the options as native "
                          "tools, or the provider's JSON schema"),
            argument("--repair", default=None, choices=list(REPAIR_LEVELS),
                     help="how sloppy a reply may be and still be read without a re-ask: off, "
                          "safe (JSON syntax; the default) or menu (also what the options make "
                          "unambiguous)"),
            argument("--validate", default=None, metavar="NAME",
                     help="a rule: a function of the pick; raising openprogram.Retry('why') "
                          "rejects it and re-asks"),
            argument("--reask", default=None, metavar="NAME",
                     help="the re-ask text: a template string with {request}, {reply}, "
                          "{kind}, {error}, {path}, {menu}, {attempt}, {hint}, or a function "
                          "of them"),
            argument("--confidence", nargs="?", const="True", default=None, metavar="N|EXPR",
                     help="put the model's probability of every option on the decision: "
                          "alone, the runtime's own (confidence=True); a number N draws N "
                          "samples (decision.Samples(N)); or an expression such as "
                          "decision.Samples(5, fallback=True)"),
            argument("--min-confidence", type=float, default=None, metavar="P",
                     help="a pick below this probability fails as low_confidence, or resolves "
                          "--low-confidence's option instead"),
            argument("--low-confidence", default=None, metavar="OPTION",
                     help="the option to resolve when the pick is below --min-confidence, or "
                          "its --pick-set set holds more than the pick"),
            argument("--pick-set", default=None, metavar="NAME",
                     help="a calibrated pick-set policy (result.conformal(alpha)): the "
                          "decision resolves when the set is the pick alone, and "
                          "--low-confidence's option (or fails as low_confidence) otherwise"),
            argument("--as", dest="as_name", default=None, metavar="NAME",
                     help="also bind the result to this variable")]):
        func = flag(func)
    return func


@magics_class
class DecisionMagics(Magics):
    """The decision magics. The notebook's default runtime lives on this object."""

    def __init__(self, shell):
        super().__init__(shell)
        self.default_runtime = None
        self.mcp_connections: dict[str, Any] = {}  # %mcp_connect's, ended at unload

    # -- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _parse(func, line: str):
        """The parsed arguments, or None after printing the help for --help / -h.

        A leading positional expression (OPTIONS, or the runtime of %decision_runtime) is taken
        from the raw line, up to the first option flag outside quotes and brackets, so that
        `{'a': 1, 'b': 2}` or `ScriptedRuntime(['x  y'])` arrive exactly as written."""
        from IPython.utils.process import arg_split
        if {"--help", "-h"} & set(arg_split(line, strict=False)):
            print(func.parser.format_help())
            return None
        flags = [s for a in func.parser._actions for s in a.option_strings]
        positional = next((a.dest for a in func.parser._actions
                           if not a.option_strings and a.dest in ("options", "runtime")), None)
        expr = None
        if positional and line.strip() and not line.lstrip().startswith("-"):
            cut = _first_flag(line, flags)
            expr, line = line[:cut].strip(), "_ " + line[cut:]
        args = parse_argstring(func, line)
        if positional:
            value = getattr(args, positional)
            if expr is not None:
                value = expr
            elif isinstance(value, list):  # flags came first: the words after them, rejoined
                value = " ".join(value) if value else None
            setattr(args, positional, value)
        return args

    def _eval(self, expr: str, what: str) -> Any:
        expr = _unquote(expr.strip())
        if not expr:
            raise UsageError(f"{what} is empty: give a variable name or a Python expression")
        try:
            return self.shell.ev(expr)
        except NameError as exc:
            raise UsageError(f"{what} {expr!r}: {exc} in the notebook. Define it in a cell "
                             f"above, or write a Python expression (quote it if it has spaces)"
                             ) from None
        except SyntaxError as exc:
            raise UsageError(f"{what} {expr!r} is not a name or a Python expression "
                             f"({exc.msg}); quote an expression that holds spaces, e.g. "
                             f"\"{{'a': 1, 'b': 2}}\"") from None
        except Exception as exc:
            raise UsageError(f"{what} {expr!r} raised {type(exc).__name__}: {exc}") from None

    def _runtime(self, expr: str | None, what: str = "--runtime"):
        from openprogram import Runtime
        rt = self._eval(expr, what) if expr is not None else self.default_runtime
        if rt is None:
            raise UsageError(f"no runtime for this decision: {_SET_RUNTIME_HINT}")
        if not isinstance(rt, Runtime):
            raise UsageError(f"{what} {expr!r} is {_a(type(rt).__name__)}, not an openprogram "
                             f"Runtime; wrap a model function with Runtime(call=fn) or use "
                             f"ScriptedRuntime([...])")
        return rt

    def _named(self, expr: str | None, flag: str, ok, need: str):
        """The value `flag` names (None when the flag is not given); a UsageError naming the
        flag when `ok(value)` is false, saying what it `need`s."""
        if expr is None:
            return None
        value = self._eval(expr, flag)
        if not ok(value):
            raise UsageError(f"{flag} {expr!r} is {_a(type(value).__name__)}; {need}")
        return value

    def _menu(self, expr: str):
        """The option set OPTIONS names, as the menu a decision would use (a UsageError naming
        it when it is not one)."""
        options = self._eval(expr, "OPTIONS")
        from openprogram.decision.options import OptionError, normalize
        try:
            return normalize(options)
        except (OptionError, TypeError) as exc:
            raise UsageError(f"OPTIONS {expr!r} is not a usable option set: {exc}") from None

    def _context(self, expr: str | None):
        return self._named(expr, "--context", lambda v: isinstance(v, dict),
                           "it must be a dict of the hidden parameters' values")

    def _prompt(self, cell: str) -> str:
        """The cell with {name} (and $name) expanded from the user namespace, as IPython does
        for `!` commands; a cell that does not format is left as written, with a warning."""
        from IPython.utils.text import DollarFormatter
        try:
            # shell.var_expand would also read this method's own locals; only the notebook's
            # names belong in a prompt.
            text = DollarFormatter().vformat(cell, args=[], kwargs=self.shell.user_ns.copy())
        except Exception as exc:
            if "{" in cell or "$" in cell:
                print(f"note: the prompt was sent as written, without {{name}} expansion "
                      f"({type(exc).__name__}: {exc}); write {{{{ and }}}} for literal braces")
            text = cell
        text = text.strip("\n")
        if not text.strip():
            raise UsageError("the cell is empty: the cell body is the prompt, e.g.\n"
                             "%%decide OPTIONS\nPick the next step for {task}.")
        return text

    def _validate(self, expr: str | None):
        return self._named(expr, "--validate", callable, "give a function of the pick that "
                           "raises openprogram.Retry('why') to reject it")

    def _reask(self, expr: str | None):
        from openprogram.decision.settings import check_reask
        text = self._named(expr, "--reask", lambda v: True, "")
        try:
            check_reask(text)   # a template naming an unknown field fails here, before a call
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--reask {expr!r}: {exc}") from None
        return text

    def _confidence(self, expr: str | None) -> Any:
        """--confidence: absent (False), alone (True), a number of samples, or an expression
        (a `decision.Samples(...)`); what it gives is checked by the decision itself."""
        if expr is None:
            return False
        text = _unquote(expr.strip())
        if text == "True":
            return True
        if text.isdigit():
            from openprogram.trace.confidence import Samples
            return Samples(int(text))
        return self._eval(text, "--confidence")

    def _pick_set(self, expr: str | None) -> Any:
        from openprogram.decision.conformal import PickSetPolicy
        return self._named(expr, "--pick-set", lambda v: isinstance(v, PickSetPolicy),
                           "it must be a pick-set policy, what result.conformal(alpha) "
                           "returns")

    def _check_mode(self, rt, mode: str) -> None:
        from openprogram.base.model_protocol import check_modes
        try:
            check_modes(rt, mode)
        except ValueError as exc:
            raise UsageError(f"--mode {mode}: {exc}") from None

    def _bind(self, name: str | None, value: Any) -> None:
        if name is not None:
            self.shell.user_ns[name] = value

    def _check_as(self, name: str | None) -> None:
        if name is None:
            return
        if not name.isidentifier():
            raise UsageError(f"--as {name!r} is not a Python name; write e.g. --as next_step")
        if keyword.iskeyword(name):
            # user_ns would accept it, but no cell could ever read the variable back.
            raise UsageError(f"--as {name!r} is a Python keyword; write e.g. --as {name}_")

    def _run(self, call, options: Any, options_expr: str, context: dict | None,
             tools: Any = None) -> Any:
        from .panel import DecisionPanel
        panel = DecisionPanel(options=options, options_expr=_unquote(options_expr),
                              context=context, tools=tools)
        # In a kernel the panel shows as soon as the decision starts, updates live, and
        # refreshes its output's text and HTML copies when the decision ends (what nbconvert
        # and a saved notebook keep); a terminal shows the finished trace as text.
        live = getattr(self.shell, "kernel", None) is not None
        with panel.live(show=DecisionPanel.show if live else None):
            try:
                return call()
            finally:
                if not live and panel.trace is not None:
                    print(panel.trace.format_text())

    def _decision_cell(self, magic, line: str, cell: str, start) -> Any:
        """What %%decide and %%agent share: read the flags, look the names up, make the
        decision with its panel live, bind --as. `start(args, prompt, options, settings)` checks
        the magic's own flags and returns the call that makes the decision and the tools the
        panel's test needs; `settings` are the decision's settings both entries take, built
        from the flags and checked (`openprogram.decision.settings.Settings`)."""
        args = self._parse(magic, line)
        if args is None:
            return None
        self._check_as(args.as_name)
        prompt = self._prompt(cell)
        options = self._eval(args.options, "OPTIONS")
        rt = self._runtime(args.runtime)
        self._check_mode(rt, args.mode)
        ctx = self._context(args.context)
        from openprogram.decision.settings import MAGIC, Settings
        settings = Settings.of(
            dict(runtime=rt, context=ctx, timeout_s=args.timeout, mode=args.mode,
                 validate=self._validate(args.validate), reask=self._reask(args.reask),
                 confidence=self._confidence(args.confidence),
                 min_confidence=args.min_confidence, low_confidence=args.low_confidence,
                 pick_set=self._pick_set(args.pick_set), repair=args.repair),
            f"%%{magic.__name__}", MAGIC)
        call, tools = start(args, prompt, options, settings)
        result = self._run(call, options, args.options, ctx, tools)
        self._bind(args.as_name, result)
        return result

    # -- %%decide -----------------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("options", nargs="+", help="the option set: a variable name or a Python expression")
    @argument("--max-retries", type=int, default=1,
              help="re-asks after a bad reply (default 1; 0 turns them off)")
    @_decision_flags
    @cell_magic
    def decide(self, line, cell):
        """Run `decision.make` with the cell as the prompt and show the decision panel.

        The cell body is the prompt; {name} is replaced by the notebook variable `name`. The
        prompt must ask the model to pick: the menu is appended to it (with --mode tools or
        json_schema, the options go as native tools or as a JSON schema instead). The resolved
        result is the cell's value. A failed decision shows every attempt in the panel and
        raises DecisionError.

            %%decide OPTIONS --as step --validate in_stock --reask REASK
            The order {order_id} is late. Pick the next step.
        """
        def start(args, prompt, options, settings):
            if args.max_retries < 0:
                raise UsageError(f"--max-retries {args.max_retries}: give 0 or more (0 turns "
                                 f"re-asks off)")
            from openprogram import decision
            return (lambda: decision.make(prompt, options, max_retries=args.max_retries,
                                          **settings.keywords())), None
        return self._decision_cell(self.decide, line, cell, start)

    # -- %%agent ------------------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("options", nargs="+",
              help="the option set the turn ends with: a variable name or expression")
    @argument("--tools", "-t", default=None,
              help="the tools: a function, a list of them, or names separated by commas")
    @argument("--toolset", default=None,
              help="a toolset: a variable (an Agent, a list) or a registered toolset name")
    @argument("--max-iterations", type=int, default=20,
              help="model calls allowed in the tool loop (default 20)")
    @_decision_flags
    @cell_magic
    def agent(self, line, cell):
        """Run a full turn, `agent(prompt, tools=..., options=OPTIONS)`, and show the panel.

        The model may call the tools first (each round shows in the panel); its final reply
        picks one option and is resolved like %%decide. The re-pick count on this path is fixed
        at one by the mechanism, so there is no --max-retries.

            %%agent OPTIONS --tools search,fetch --as answer
            Find out whether {city} has a direct train to Rome, then pick.
        """
        def start(args, prompt, options, settings):
            tools = self._eval(args.tools, "--tools") if args.tools else None
            toolset = None
            if args.toolset:
                name = _unquote(args.toolset.strip())
                # A bare name that is not a notebook variable is a registered toolset's name.
                toolset = name if name.isidentifier() and name not in self.shell.user_ns \
                    else self._eval(name, "--toolset")
            from openprogram import agent
            return (lambda: agent(prompt, tools=tools, toolset=toolset, options=options,
                                  max_iterations=args.max_iterations,
                                  **settings.keywords())), tools
        return self._decision_cell(self.agent, line, cell, start)

    # -- %%run_program ------------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("--runtime", "-r", default=None,
              help="the Runtime the program's decisions use when nothing in it binds one "
                   "(default: the one set with %%decision_runtime, if any)")
    @argument("--as", dest="as_name", default=None, metavar="NAME",
              help="bind the Run to this variable (to fork it, diff it, save it)")
    @cell_magic
    def run_program(self, line, cell):
        """Run the cell's code as one run (`openprogram.run`) and show the run's live view: the
        tree of method calls, decisions and tool calls as they happen, instead of a panel per
        decision. Open a decision in it to see its panel and fork the run there.

            %%run_program --as first
            router.route(ticket)
        """
        args = self._parse(self.run_program, line)
        if args is None:
            return None
        self._check_as(args.as_name)
        rt = self._runtime(args.runtime) if args.runtime or self.default_runtime else None
        from .runview import run_cell
        run = run_cell(self.shell, cell, rt, live=getattr(self.shell, "kernel", None) is not None)
        self._bind(args.as_name, run)
        if run.error is not None:   # the cell fails as the program did, after its view shows it
            raise run.error
        return None

    # -- %decision_menu -----------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("options", nargs="+", help="the option set: a variable name or a Python expression")
    @argument("--text-only", action="store_true", help="print the menu text, no table")
    @line_magic
    def decision_menu(self, line):
        """Preview an option set without calling a model: print the menu text the model would
        see, and return a table of the options (one row per parameter: type, default, allowed
        values, whether it is hidden).

            %decision_menu OPTIONS
        """
        args = self._parse(self.decision_menu, line)
        if args is None:
            return None
        from openprogram.decision.options import render_menu
        menu = self._menu(args.options)
        # shown as HTML in the library's wrapper, not printed: the front end would make links
        # of URLs in the option texts, and MathJax typeset their `$...$`
        from IPython.display import display

        from openprogram.trace.safe_html import text_html
        text = render_menu(menu)
        display({"text/plain": text, "text/html": text_html(text, "op-menu-text")}, raw=True)
        if args.text_only:
            return None
        return menu_frame(menu)

    # -- %decision_lint -----------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("options", nargs="+", help="the option set: a variable name or a Python expression")
    @line_magic
    def decision_lint(self, line):
        """Check an option set without calling a model: near-duplicate descriptions, names
        that differ only in case, missing descriptions, a value under two options. Returns
        the findings as a table (each with the option, the rule and the fix).

            %decision_lint OPTIONS
        """
        args = self._parse(self.decision_lint, line)
        if args is None:
            return None
        from openprogram import decision
        return decision.lint(self._menu(args.options))

    # -- %decision_runtime --------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("runtime", nargs="*", default=None,
              help="a Runtime: a variable name or an expression such as ScriptedRuntime([...])")
    @argument("--clear", action="store_true", help="forget the default runtime")
    @line_magic
    def decision_runtime(self, line):
        """Show or set the notebook's default runtime, used by %%decide and %%agent when they
        are not given --runtime.

            %decision_runtime ScriptedRuntime(['{"call": "done"}'])
            %decision_runtime            # show it
            %decision_runtime --clear
        """
        args = self._parse(self.decision_runtime, line)
        if args is None:
            return None
        if args.clear:
            self.default_runtime = None
            return None
        if args.runtime is None:
            if self.default_runtime is None:
                print(f"no default runtime: {_SET_RUNTIME_HINT}")
            return self.default_runtime
        self.default_runtime = self._runtime(args.runtime, "%decision_runtime")
        return self.default_runtime

    # -- %decision_trace ----------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("n", nargs="?", type=int, default=None,
              help="the decision's number (#N in its panel); negative counts back from the "
                   "last (-1 is the last)")
    @line_magic
    def decision_trace(self, line):
        """Show the panel of the last decision of this kernel again, or of decision #N.

            %decision_trace        # the last one
            %decision_trace 3      # decision #3
            %decision_trace -2     # the one before the last
        """
        from .panel import DecisionPanel
        args = self._parse(self.decision_trace, line)
        if args is None:
            return None
        return DecisionPanel(self._kept_trace(args.n))

    # -- %decision_steps ----------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("n", nargs="?", type=int, default=None,
              help="the decision's number (#N in its panel); negative counts back from the "
                   "last (-1 is the last)")
    @argument("--options", "-o", default=None,
              help="the option set the decision was made with (a variable or an expression): "
                   "links each menu line to where it came from")
    @line_magic
    def decision_steps(self, line):
        """Step through the last decision of this kernel, or decision #N, stage by stage.

            %decision_steps                 # the last one
            %decision_steps 3 -o OPTIONS    # decision #3, menu lines linked to OPTIONS
        """
        from .steps import StepThrough
        args = self._parse(self.decision_steps, line)
        if args is None:
            return None
        options = None if args.options is None else self._eval(args.options, "--options")
        return StepThrough(self._kept_trace(args.n), options=options)

    def _kept_trace(self, n: int | None):
        """Decision #n of the kernel's history (negative: counted back from the last)."""
        from openprogram.trace import decision_trace as _trace
        kept = list(_trace.history)
        if not kept:
            raise UsageError("no decision has finished in this kernel yet")
        ids = f"#{kept[0].id}–#{kept[-1].id}" if len(kept) > 1 else f"#{kept[0].id}"
        n = -1 if n is None else n
        if n < 0:
            if -n > len(kept):
                raise UsageError(f"only {len(kept)} decision(s) are kept ({ids}); {n} goes "
                                 f"back too far")
            found = kept[n]
        else:
            found = next((t for t in kept if t.id == n), None)
            if found is None:
                raise UsageError(f"decision #{n} is not kept: the kernel keeps the last "
                                 f"{_trace.history.maxlen} ({ids})")
        return found

    # -- %mcp_connect --------------------------------------------------------------------------
    @no_var_expand
    @magic_arguments()
    @argument("--runtime", "-r", default=None,
              help="a runtime that records or replays tool calls (a RecordingRuntime, "
                   "CachedRuntime or ReplayRuntime: a variable name or an expression); with a "
                   "replay no server is started")
    @argument("--cache", default=None,
              help="a JSON file that keeps every tool result and answers the same call again")
    @argument("--config", default=None,
              help="an MCP client config file ({'mcpServers': {...}}); COMMAND is then optional")
    @argument("--env", default=None,
              help="a dict (variable or expression) of environment variables for a stdio "
                   "server; a token in it is masked everywhere")
    @argument("--headers", default=None,
              help="a dict (variable or expression) of HTTP headers for a URL server, e.g. "
                   "auth = {'Authorization': 'Bearer ' + os.environ['TOKEN']}; masked everywhere")
    @argument("--cwd", default=None, help="the working directory of a stdio server")
    @argument("--timeout", type=float, default=None,
              help="seconds a server gets to start and list its tools (default 30)")
    @argument("name", help="the Python name the connection is bound to")
    @argument("command", nargs=argparse.REMAINDER,
              help="the server: a command line with its own arguments, or an http(s) URL")
    @line_magic
    def mcp_connect(self, line):
        """Start an MCP server (a command line, or the URL of a streamable-HTTP server) and bind
        its connection to NAME; its tools are the option set NAME.options. The options come
        before NAME: everything after NAME is the server's own command line.

            %mcp_connect clock mcp-server-time --local-timezone Etc/UTC
            %mcp_connect --runtime rec clock mcp-server-time --local-timezone Etc/UTC
            %mcp_connect --headers auth shop https://example.com/mcp
            %%decide clock.options
            What time is it in Tokyo?

        The server runs on a loop and thread of its own, so %%decide (a sync call inside the
        kernel's running loop) never waits on itself. With `--runtime rec` (a RecordingRuntime)
        the server's tool listing is recorded beside the tool results; with `--runtime replay`
        (its ReplayRuntime) no server starts, so the notebook runs where it is not installed.
        `%mcp_connect NAME` again replaces (and ends) the connection NAME had; unloading the
        extension ends them all."""
        words = line.split()
        if words[:1] in (["-h"], ["--help"]):
            print(self.mcp_connect.parser.format_help())
            return None
        args = parse_argstring(self.mcp_connect, line)
        name, command = args.name, list(args.command)
        flags = {s for a in self.mcp_connect.parser._actions for s in a.option_strings}
        if command and command[0] in flags:
            raise UsageError(f"%mcp_connect: {command[0]} comes after NAME, where the server's "
                             f"own command line begins; put the options before NAME: "
                             f"%mcp_connect {command[0]} ... {name} COMMAND...")
        if not name.isidentifier() or keyword.iskeyword(name) or \
                not (command or args.config):
            raise UsageError("usage: %mcp_connect [--runtime RT] [options] NAME COMMAND "
                             "[ARGS...] (or NAME URL, or --config FILE NAME): NAME is a Python "
                             "name to bind the connection to")
        from openprogram import UsageError as Refused
        from openprogram import mcp
        is_dict = (lambda v: isinstance(v, dict)), "give a dict of names to strings"
        options: dict[str, Any] = {
            "runtime": self._runtime(args.runtime) if args.runtime is not None else None,
            "cache": _unquote(args.cache) if args.cache is not None else None,
            "config": _unquote(args.config) if args.config is not None else None,
            "env": self._named(args.env, "--env", *is_dict),
            "headers": self._named(args.headers, "--headers", *is_dict),
            "cwd": _unquote(args.cwd) if args.cwd is not None else None,
        }
        if args.timeout is not None:
            options["timeout_s"] = args.timeout
        old = self.mcp_connections.pop(name, None)
        if old is not None:
            old.close()
        try:
            # one server: it takes NAME as its key (a recording names it so); a config's
            # servers keep their own keys
            conn = mcp.connect(*([command] if command else []),
                               name=name if command else None, **options).open()
        except (mcp.ServerError, Refused) as exc:
            raise UsageError(str(exc)) from None
        self.mcp_connections[name] = conn
        self.shell.user_ns[name] = conn
        print(f"{name}: {len(conn.options)} tools ({', '.join(o.name for o in conn.options)}); "
              f"use {name}.options as the option set")
        return None


def menu_frame(menu) -> Any:
    """The option table of `%decision_menu`: one row per parameter (an option without
    parameters has one row)."""
    rows = []
    for info in (o.info() for o in menu):
        base = {"option": info["name"], "kind": info["kind"],
                "description": info["description"]}
        if not info["params"]:
            rows.append({**base, "parameter": "", "type": "", "required": None,
                         "default": None, "allowed": None, "hidden": None, "source": ""})
        for p in info["params"]:
            rows.append({**base, "parameter": p["name"], "type": p["type"],
                         "required": p["required"], "default": p["default"],
                         "allowed": p["options"], "hidden": p["hidden"],
                         "source": p["source"]})
    import pandas as pd

    from openprogram.trace.safe_html import quiet_frame
    # an option's description is the author's text: `$...$` in it shows as written, not as
    # typeset math or a link (the library's wrapper, as in every view)
    return quiet_frame(pd.DataFrame(rows, columns=["option", "kind", "description", "parameter",
                                                   "type", "required", "default", "allowed",
                                                   "hidden", "source"]))


def load_ipython_extension(ipython) -> None:
    """Register the magics. Loading twice keeps the first registration (and its default
    runtime)."""
    if "DecisionMagics" in ipython.magics_manager.registry:
        return
    ipython.register_magics(DecisionMagics)


def unload_ipython_extension(ipython) -> None:
    magics = ipython.magics_manager.registry.pop("DecisionMagics", None)
    if magics is None:
        return
    for conn in magics.mcp_connections.values():  # no server outlives the extension
        conn.close()
    magics.mcp_connections.clear()
    for kind, names in magics.magics.items():
        table = ipython.magics_manager.magics[kind]
        for name in names:
            table.pop(name, None)
