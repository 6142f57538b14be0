"""The live run view in the kernel: it grows as the run goes, costs the same per node at the
1,000th decision as at the 10th (counted in messages sent, never in time), opens a decision's
panel beneath the tree, forks the run from a decision (a reply, a pick from its menu, the
runner-up in one click) and shows the fork with its diff, and carries a static copy that holds no
markup and no key. `%%run_program` runs a cell as a run and shows the view; the cell's code is
the program a fork runs again."""
from __future__ import annotations

import html
import re

import comm
import pytest
from fakeserver import FAKE_KEY, FakeServer, text, tools
from widgethelp import all_html, press

import openprogram
from openprogram import Agent, agent, decision
from openprogram.runs import on_run
from openprogram.runtimes import ScriptedRuntime, ToolCall
from openprogram.widgets.panel import DecisionPanel
from openprogram.widgets.runview import RunDiffView, RunView

TAG = re.compile(r"<\s*/?\s*(script|img|svg|iframe)\b", re.I)
IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</pre><script>alert(1)</script>"


def lookup_order(order_id: str) -> dict:
    """Look an order up by its id."""
    return {"order": order_id, "item": "kettle", "paid": 39.0}


def issue_refund(order_id: str, amount: float) -> str:
    """Give the customer their money back."""
    return f"refunded {amount} for {order_id}"


def escalate(reason: str) -> str:
    """Hand the ticket to a person."""
    return f"escalated: {reason}"


FLOWS = {"refund": issue_refund, "escalate": escalate, "close": ("CLOSED", "nothing to do")}


class Support(Agent):
    def handle_ticket(self, ticket: str):
        """Two decisions, then a turn with a tool that ends in a third."""
        lang = decision.make(f"Which language is this? {ticket}", ["en", "de"])
        urgency = decision.make(f"How urgent? {ticket}", ["low", "high"],
                                confidence=decision.Samples(4))
        return agent(f"Handle this {lang} ticket ({urgency}): {ticket}", tools=[lookup_order],
                     options=FLOWS)


def support_model():
    """A scripted model as a function of the request (a fork re-asks it from its fork point):
    "en"; "high" three times in four samples; a lookup, then a refund."""
    asked: dict[str, int] = {}

    def reply(prompt: str):
        n = asked[prompt] = asked.get(prompt, 0) + 1
        if prompt.startswith("Which language"):
            return '{"call": "en"}'
        if prompt.startswith("How urgent"):
            return '{"call": "low"}' if n % 4 == 0 else '{"call": "high"}'
        if n % 2:
            return ToolCall("lookup_order", {"order_id": "A-17"})
        return '{"call": "refund", "args": {"order_id": "A-17", "amount": 39.0}}'
    return ScriptedRuntime(rule=reply)


@pytest.fixture
def run():
    r = openprogram.run(Support().handle_ticket, "My kettle arrived broken.",
                        runtime=support_model())
    assert r.status == "ok", r.error
    assert len(r.decisions) == 3
    return r


class Counted:
    """Every widget message the kernel would send, counted (no front end here)."""

    def __init__(self, monkeypatch):
        from comm.base_comm import BaseComm
        counter = self

        class CountingComm(BaseComm):
            def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
                counter.sent += 1
                state = (data or {}).get("state") or {}
                if (data or {}).get("method") == "update" and "children" in state:
                    counter.children += 1
        self.sent = self.children = 0
        monkeypatch.setattr(comm, "create_comm", lambda *a, **k: CountingComm(*a, **k))


def rows_text(view: RunView) -> str:
    return "\n".join(rv.line.value for rv in view._views.values())


def test_the_view_grows_while_the_run_goes():
    """The view made when the run starts (as %%run_program makes it) holds each decision as
    soon as it is made: read from inside the program, before the run ends."""
    seen = []
    views: list[RunView] = []

    def program():
        for i in range(20):
            decision.make(f"Step {i}: pick.", ["a", "b"])
            view = views[0]
            seen.append((view.outline.decisions, f"{i + 1} decision" in view.header.value))
        lookup = agent("Look it up, then pick.", tools=[lookup_order], options=["a", "b"])
        return lookup

    replies = ['{"call": "a"}'] * 20 + [ToolCall("lookup_order", {"order_id": "A-1"}),
                                        '{"call": "b"}']
    with on_run(lambda r: views.append(RunView(r))):
        run = openprogram.run(program, runtime=ScriptedRuntime(replies))
    assert run.status == "ok", run.error
    assert seen == [(i + 1, True) for i in range(20)]
    view = views[0]
    # the twenty decisions made on one line are one row counting them; the turn and its tool
    # are rows of their own
    text = repr(view)
    assert "x20" in text and "picks: a ×20" in text, text
    assert "agent(options=)" in text and "tool lookup_order" in text
    assert "21 decisions" in view.header.value and "1 tool call" in view.header.value
    assert "ok" in view.header.value


# Ten call sites, one a line: ten rows of decisions under the loop's method.
SITES = [
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
    lambda: decision.make("Pick.", ["a", "b"]),
]


def test_a_node_costs_the_same_at_the_1000th_decision_as_at_the_10th(monkeypatch):
    """Counted, not timed: per decision, the messages the view sends and the rows it draws
    again, for the ten decisions before the 20th and before the 1,000th; and the widgets it
    holds (none is made after the first of each call site)."""
    from openprogram.widgets import runview
    counted = Counted(monkeypatch)
    drawn = [0]
    row_html = runview.run_view.row_html

    def counting_row_html(row):
        drawn[0] += 1
        return row_html(row)
    monkeypatch.setattr(runview.run_view, "row_html", counting_row_html)
    per_decision: dict[int, tuple] = {}
    views: list = []

    class Loop(Agent):
        def step(self, i: int):
            return SITES[i % len(SITES)]()

    def program():
        loop = Loop()
        for i in range(1000):
            before = counted.sent, drawn[0]
            loop.step(i)
            per_decision[i + 1] = (counted.sent - before[0], drawn[0] - before[1])
            if i + 1 == 20:
                views.append(len(views[0]._views))
        return None

    rt = ScriptedRuntime(rule=lambda prompt: '{"call": "a"}', window=None)
    with on_run(lambda r: views.append(RunView(r))):
        run = openprogram.run(program, runtime=rt)
    assert run.status == "ok", run.error
    view, rows_at_20 = views
    early = [per_decision[k] for k in range(11, 21)]
    late = [per_decision[k] for k in range(991, 1001)]
    assert early == late, (early, late)
    # per event at most the rows on the node's path and the header: the three nodes of a
    # decision here (method call, decision, model call) send 9 messages and draw 7 lines, never
    # a tree's worth (11 rows)
    assert max(m for m, _ in late) <= 10 and max(d for _, d in late) <= 8, late
    # no widget was made after the first decisions: the rows are folded by call site
    assert len(view._views) == rows_at_20 == 11, len(view._views)   # Loop.step, ten sites
    assert "×100" in rows_text(view) and "#9…#999" in rows_text(view)


def test_a_run_drawn_whole_sends_each_box_its_children_once(monkeypatch):
    """A view made on a finished run appends its rows under hold_sync: the loop's method row
    gains ten decision rows (and its fold button), the tree one row, each box updated once."""
    def program():
        return [SITES[i % len(SITES)]() for i in range(30)]

    class Loop(Agent):
        def all(self):
            return program()

    r = openprogram.run(Loop().all, runtime=ScriptedRuntime(rule=lambda p: '{"call": "a"}'))
    counted = Counted(monkeypatch)
    view = RunView(r)
    assert len(view._views) == 11 and "×3" in rows_text(view)
    # the tree box, the method row's children box and its head (the fold button): once each
    assert counted.children == 3, counted.children


def test_selecting_a_decision_opens_its_panel_beneath_the_tree(run):
    view = RunView(run)
    row_views = {rv.row.last.index: rv for rv in view._views.values()
                 if rv.row.kind == "decision"}
    assert sorted(row_views) == [0, 1, 2]
    assert view.detail.layout.display == "none"
    press(row_views[1].open_button)
    assert view.selected == 1
    assert view.detail.layout.display != "none"
    panel = view.detail.panel
    assert isinstance(panel, DecisionPanel) and panel.trace is run.decisions[1].trace
    assert "Decision #1" in view.detail.title.value
    # the runner-up (confidence was asked) is one click away; the pick menu lists the options
    assert view.detail.actions.pick.options == ("low", "high")
    assert view.detail.actions.runner_up.description == "Fork to the runner-up: low (0.25)"
    assert not view.detail.actions.runner_up.disabled
    # another decision: the same panel shows it; the one without confidence says so
    view.selected = 2
    assert view.detail.panel is panel and panel.trace is run.decisions[2].trace
    assert view.detail.actions.runner_up.disabled
    assert "no confidence was recorded" in view.detail.actions.runner_up.description
    press(row_views[2].open_button)      # the same button again closes it
    assert view.selected is None and view.detail.layout.display == "none"
    view.selected = 7
    assert "this run has 3 decision(s)" in view.detail.status.value


def test_a_folded_row_lists_its_decisions_to_open_any_of_them():
    def program():
        return [decision.make(f"Pick {i}.", ["a", "b"]) for i in range(5)]
    r = openprogram.run(program, runtime=ScriptedRuntime(['{"call": "a"}', '{"call": "b"}'] * 3))
    view = RunView(r)
    row = next(rv for rv in view._views.values() if rv.row.kind == "decision")
    assert row.row.count == 5 and "picks: a ×3, b ×2" in row.line.value
    press(row.open_button)                 # the latest one opens first
    assert view.selected == 4
    members = view.detail.members
    assert members.options == (("#0: a", 0), ("#1: b", 1), ("#2: a", 2), ("#3: b", 3),
                               ("#4: a", 4))
    members.value = 1
    assert view.selected == 1 and view.detail.panel.trace is r.decisions[1].trace


def test_fork_with_a_reply_shows_the_fork_and_the_diff(run):
    view = RunView(run)
    view.selected = 2
    actions = view.detail.actions
    actions.reply.value = '{"call": "escalate", "args": {"reason": "the customer is angry"}}'
    press(actions.reply_button)
    assert len(view.forks) == 1
    fork = view.forks[0]
    assert fork.forked_from is run and fork.fork_point == 2
    assert fork.result == "escalated: the customer is angry" and run.result != fork.result
    section = view.fork_box.children[0]
    diff_view, fork_view = section.body.children
    assert isinstance(diff_view, RunDiffView) and isinstance(fork_view, RunView)
    assert fork_view.run is fork
    # the diff names the decision and the part; the two before it are the common prefix
    assert diff_view.diff.first.index == 2 and diff_view.diff.first.part == "reply"
    shown = diff_view.html.value
    assert "First divergence: decision #2, in its reply" in shown
    assert "2 decision(s) the same in both runs" in shown and "<details" in shown
    assert "escalated: the customer is angry" in shown
    # the fork's own view says where it comes from, and that the prefix cost nothing
    assert "fork of Support.handle_ticket at decision #2" in fork_view.header.value
    assert "from the recording" in fork_view.header.value
    # the static copy keeps the fork: the diff and the forked run after the run itself
    copy = view.static_html()
    assert copy.index("Run Support.handle_ticket") < copy.index("First divergence") \
        < copy.index("fork of Support.handle_ticket")
    # the two decisions where they part, side by side, on request
    press(diff_view.open_button)
    a, b = diff_view.pair.children
    assert a.trace is run.decisions[2].trace and b.trace is fork.decisions[2].trace


def test_fork_to_a_pick_and_to_the_runner_up(run):
    view = RunView(run)
    view.selected = 1
    press(view.detail.actions.runner_up)
    fork = view.forks[-1]
    assert fork.edit["kind"] == "pick"
    assert fork.decisions[1].trace.chosen == "low"     # the runner-up of "high" (0.75 / 0.25)
    view.selected = 0
    view.detail.actions.pick.value = "de"
    press(view.detail.actions.pick_button)
    assert view.forks[-1].decisions[0].trace.chosen == "de"
    assert len(view.fork_box.children) == 2
    assert run.decisions[0].trace.chosen == "en"       # the original never changes


def test_a_fork_that_cannot_replay_says_why_and_raises_nothing():
    calls = [0]

    def program():
        calls[0] += 1                   # read outside the recording: the prefix differs
        first = decision.make(f"Attempt {calls[0]}: pick.", ["a", "b"])
        return first, decision.make("Then pick.", ["a", "b"])

    r = openprogram.run(program, runtime=ScriptedRuntime(rule=lambda p: '{"call": "a"}'))
    view = RunView(r)
    view.selected = 1
    view.detail.actions.pick.value = "b"
    press(view.detail.actions.pick_button)
    assert view.forks == []
    status = view.fork_box.children[0].status.value
    assert "The fork stopped" in status and "RunDiverged" in status
    # an empty reply is refused by the core, and said in the view
    view.detail.actions.reply.value = ""
    press(view.detail.actions.reply_button)
    assert view.fork_box.children[-1].status.value.startswith('<span style="color:#c62828">')


class Shown:
    def __repr__(self):
        return IMG + SCRIPT


def shown() -> Shown:
    """Returns an object whose repr is markup."""
    return Shown()


def test_every_field_from_a_model_a_tool_or_an_option_is_text():
    def looked(q: str) -> str:
        """Look it up."""
        return IMG + SCRIPT

    options = {IMG: ("X", SCRIPT), "shown": shown, "b": ("B", IMG)}

    def program():
        decision.make("Pick " + IMG, options)
        agent("Look.", tools=[looked], options=options)
        return decision.make("Last.", ["a", IMG])

    rt = ScriptedRuntime([SCRIPT + '{"call": "%s"}' % IMG.replace('"', '\\"'),
                          ToolCall("looked", {"q": IMG}), ToolCall(IMG, {}),
                          '{"call": "shown"}', '{"call": "%s"}' % IMG])
    r = openprogram.run(program, runtime=rt)
    assert r.status == "ok", r.error
    assert r.result == IMG
    view = RunView(r)
    view.selected = 0
    texts = {"static copy": view.static_html(), "widget": all_html(view),
             "the output": view._repr_mimebundle_()["text/html"]}
    for where, t in texts.items():
        assert not TAG.search(t), (where, TAG.search(t).group(0))
        assert html.escape(IMG) in t, where
    # the pick menu and the runner-up's button are plain text widgets (no HTML)
    assert IMG in view.detail.actions.pick.options
    diff = r.diff(openprogram.run(program, runtime=ScriptedRuntime(
        ['{"call": "b"}', ToolCall("looked", {"q": IMG}), '{"call": "b"}', '{"call": "a"}'])))
    for t in (RunDiffView(diff).static_html(), all_html(RunDiffView(diff))):
        assert not TAG.search(t) and "First divergence: decision #0" in t


def test_no_key_reaches_the_view_or_its_static_copy():
    """A provider runtime holds the key; a function option returns it, a tool returns it and
    the program fails with it in its message: the view shows none of it."""
    from openprogram.runtimes import OpenAIRuntime

    def secret_tool(q: str) -> str:
        """Returns the key."""
        return "the key is " + FAKE_KEY

    def leak() -> str:
        """Returns the key."""
        return FAKE_KEY

    with FakeServer("openai") as server:
        server.push(text('```json\n{"call": "leak"}\n```'),
                    tools(("c1", "secret_tool", {"q": "x"})),
                    text('```json\n{"call": "other"}\n```'))
        rt = OpenAIRuntime(model="m", base_url=server.base_url, api_key=FAKE_KEY,
                           max_retries=0)

        def program():
            decision.make("Pick.", {"leak": leak, "other": ("X", "x")})
            agent("Look.", tools=[secret_tool], options={"leak": leak, "other": ("X", "x")})
            raise RuntimeError("failed with " + FAKE_KEY)

        r = openprogram.run(program, runtime=rt)
        assert r.status == "error" and FAKE_KEY in str(r.error)
        view = RunView(r)
        bundle = view._repr_mimebundle_()
        assert "failed with" in view.header.value and "= &#x27;[redacted" in rows_text(view)
        for t in (view.static_html(), view.header.value, rows_text(view), repr(view),
                  bundle["text/plain"], bundle["text/html"]):
            assert FAKE_KEY not in t and FAKE_KEY[-12:] not in t


def test_run_view_and_diff_view_are_what_the_core_shows(run):
    assert isinstance(run.view(), RunView)
    fork = run.fork(at=2, reply='{"call": "close"}')
    d = run.diff(fork)
    assert isinstance(d.view(), RunDiffView)
    bundle = d.view()._repr_mimebundle_()
    assert "First divergence: decision #2, in its reply" in bundle["text/html"]
    assert "decision #2 differs in its reply" in bundle["text/plain"]


PROGRAM_CELL = '''
from openprogram import Agent, agent, decision

def lookup(q: str) -> str:
    """Look it up."""
    return "found " + q

class Desk(Agent):
    def handle(self, ticket):
        first = decision.make("Pick one for " + ticket, ["a", "b"])
        return first, agent("Look, then pick.", tools=[lookup], options=["x", "y"])

desk = Desk()
'''


@pytest.fixture
def shown_views(live_shell, monkeypatch):
    """The views %%run_program displays, with the bundles their outputs were refreshed to."""
    from openprogram.widgets import runview
    shown, updates = [], []

    class Handle:
        def update(self, obj):
            updates.append(obj._repr_mimebundle_())

    def display(obj, display_id=None):
        shown.append(obj)
        return Handle()
    monkeypatch.setattr(runview, "display", display)
    live_shell.shown, live_shell.updates = shown, updates
    return live_shell


def test_run_program_shows_the_live_view_binds_the_run_and_forks_the_cell(shown_views):
    shell = shown_views
    replies = ("['{\"call\": \"a\"}', ToolCall('lookup', {'q': 't'}), '{\"call\": \"x\"}', "
               "'{\"call\": \"y\"}']")
    assert shell.run_cell(PROGRAM_CELL + f"\nrt = ScriptedRuntime({replies})").success
    r = shell.run_cell("%%run_program --runtime rt --as first\nticket = 'T-1'\n"
                       "desk.handle(ticket)")
    assert r.success, r.error_in_exec
    run = shell.user_ns["first"]
    assert isinstance(run, openprogram.Run) and run.status == "ok"
    assert run.result == ("a", "x")                    # the cell's last expression
    assert shell.user_ns["ticket"] == "T-1"            # the cell ran in the notebook's namespace
    [view] = shell.shown
    assert isinstance(view, RunView) and view.run is run
    # shown when the run started, its output refreshed with the final run when it ended
    assert len(shell.updates) == 1
    final = shell.updates[0]["text/html"]
    assert "2 decisions" in final and "Desk.handle" in final and "lookup" in final
    # the cell's code is the program: a fork runs it again, the prefix from the recording
    fork = run.fork(at=1, pick="y")
    assert fork.result == ("a", "y") and fork.forked_from is run


def test_run_program_fails_the_cell_as_the_program_did_after_showing_it(shown_views):
    shell = shown_views
    assert shell.run_cell(PROGRAM_CELL).success
    shell.run_cell("%decision_runtime ScriptedRuntime(['{\"call\": \"a\"}'])")
    r = shell.run_cell("%%run_program --as failed\ndecision.make('Pick.', ['a'])\n"
                       "raise ValueError('the program broke')")
    assert isinstance(r.error_in_exec, ValueError)
    run = shell.user_ns["failed"]
    assert run.status == "error" and len(run.decisions) == 1
    assert "the program broke" in shell.updates[0]["text/html"]


def test_run_program_refuses_bad_arguments_and_prints_the_run_in_a_terminal(shell, capsys):
    r = shell.run_cell("%%run_program --as 2x\n1")
    assert "--as '2x' is not a Python name" in str(r.error_in_exec)
    r = shell.run_cell("%%run_program --runtime nowhere\n1")
    assert "nowhere" in str(r.error_in_exec)
    r = shell.run_cell("%%run_program\ndecision.make('Pick.', ['a', 'b'], "
                       "runtime=ScriptedRuntime(['{\"call\": \"b\"}']))")
    assert r.success, r.error_in_exec
    out = capsys.readouterr().out
    assert "1 decision" in out and "-> b" in out


def test_a_run_and_a_diff_show_as_static_html_without_the_widgets(run):
    fork = run.fork(at=2, reply='{"call": "close"}')
    page = run._repr_html_()
    assert page.startswith('<div class="op-view mathjax_ignore tex2jax_ignore op-run op-static')
    assert "Run Support.handle_ticket" in page and "<table" in page and "→ refund" in page
    diff = run.diff(fork)._repr_html_()
    assert "First divergence: decision #2, in its reply" in diff and "CLOSED" in diff


def test_run_program_refuses_a_cell_that_awaits_and_names_arun(shell):
    r = shell.run_cell("%%run_program\nimport asyncio\nawait asyncio.sleep(0)")
    assert "openprogram.arun(program)" in str(r.error_in_exec)


def test_a_saved_run_loaded_again_shows_and_forks_from_the_view(run, tmp_path):
    run.save(tmp_path / "run.json")
    loaded = openprogram.Run.load(tmp_path / "run.json", program=Support().handle_ticket)
    view = loaded.view()
    assert repr(view).splitlines()[1:] == repr(RunView(run)).splitlines()[1:]
    view.selected = 2
    view.detail.actions.reply.value = '{"call": "close"}'
    press(view.detail.actions.reply_button)
    [fork] = view.forks
    assert fork.result == "CLOSED" and fork.totals["live"] == 0


def test_a_block_shows_but_its_fork_actions_say_it_cannot_be_forked():
    with openprogram.run_block("notebook block",
                               runtime=ScriptedRuntime(['{"call": "a"}'])) as block:
        decision.make("Pick.", ["a", "b"])
    view = block.view()
    assert repr(view).startswith("Run notebook block · ok · 1 decision, 1 model call, 1 attempt,")
    view.selected = 0
    actions = view.detail.actions
    assert actions.reply_button.disabled and actions.pick_button.disabled
    assert "cannot be forked" in actions.note.value
