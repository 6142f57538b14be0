"""A fork: the program run again, every call before decision k answered from the recording, one
edit at k, and the calls after k sent to the runtime (or, with `after="recorded"`, answered
from the recording wherever the request is byte-for-byte the recorded one).

`plan_fork` checks what the user asked for — where (`at=`: an index, a decision node of this
run, or a node id) and which one edit (`reply=`, `pick=`, `options=`, `runtime=`, or none: ask
the runtime again from k) — before anything runs, and returns a `ForkPlan`, which the fork's
recorder consults at every call:

- a model call made before decision k started is answered by the recorded call with the same
  request (in recorded order; out of order only for a concurrent program), and a live (MCP)
  tool call likewise; any other request stops the fork with `RunDiverged`, naming the call's
  node and decision and showing both requests — the program did not ask the same thing again
  (it read the clock, drew a random number, read state that changed). Decision k itself must
  start where the recorded one did, after every recorded call before it was asked again;
- `reply=` answers decision k's first model call (validated, repaired and re-asked as usual);
- `pick=` holds decision k to one option: its option set is narrowed to that option before the
  decision starts, so every way of asking constrains the model to it (the grammar, the schema,
  the forced tool, or a text menu of one option), and an option with nothing for the model to
  fill is answered without a model call;
- `options=` replaces decision k's option set (an option set, or a function of the recorded
  decision's `Menu` returning one);
- `runtime=` sends every call from decision k on to that runtime.

Function options and tools are the user's code: they run again in a fork (their results feed
the requests, which are compared). What the fork never does is send a request to a model or a
server before k. It is one module (over 500 lines) because an edit is two things that change
together: an argument `plan_fork` checks, and the answers `ForkPlan` gives.
"""
from __future__ import annotations

import copy
import json

from ..base.errors import ArgumentError, RunDiverged, UsageError
from ..base.model_protocol import ModelCaller, ModelResponse, ToolCall
from ..base.text import cut
from ..decision.extract import find_action
from ..decision.modes import ROOT_KEY, api_name
from ..decision.options import Menu, normalize
from ..runtime.calls import as_response
from ..runtimes.cassette.replay import first_difference
from .calls import copied

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable
    from typing import Any

    from .calls import RecordedCall, RecordedTool
    from .nodes import RunNode

__all__ = ["ForkPlan", "plan_fork", "AFTER", "with_descriptions"]

#: Where the calls after the fork point go: to the runtime, or to the recording when it holds
#: the same request.
AFTER = ("runtime", "recorded")

_UNSET: Any = object()


def with_descriptions(descriptions: dict[str, str]) -> Callable[[Any], list]:
    """An `options=` edit for `run.fork` that describes some options otherwise:
    `run.fork(at=2, options=with_descriptions({"refund": "Only for damaged items"}))` makes
    decision 2 again with the option set its program builds, those descriptions changed (each
    option a copy: the program's own options are never changed). A name the decision's
    option set does not have stops the fork with an error naming the options it has."""
    if not isinstance(descriptions, dict) or not descriptions or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in descriptions.items()):
        raise UsageError(f"with_descriptions() takes a dict {{option name: new description}} "
                         f"of strings, got {descriptions!r}")

    def edit(menu: Any) -> list:
        names = [o.name for o in menu]
        unknown = sorted(set(descriptions) - set(names))
        if unknown:
            raise ArgumentError(f"with_descriptions() names {', '.join(map(repr, unknown))}, "
                                f"not an option of this decision; its options are "
                                f"{', '.join(map(repr, names))}")
        out = []
        for option in menu:
            text = descriptions.get(option.name)
            if text is not None:
                option = copy.copy(option)
                for k in ("_block", "_info"):  # the text made from the old description
                    option.__dict__.pop(k, None)
                option.description = text
                option.edited = {**option.edited, "description": {"kind": "fork"}}
            out.append(option)
        return out
    edit.descriptions = dict(descriptions)  # type: ignore[attr-defined]
    return edit


def _named(resp: ModelResponse) -> str | None:
    """The option a reply names (its first tool call's, or the `call` of its JSON), if any."""
    if resp.tool_calls:
        return resp.tool_calls[0].name
    if not isinstance(resp.text, str):
        return None
    try:
        doc = json.loads(resp.text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get(ROOT_KEY), dict):
        doc = doc[ROOT_KEY]
    action = doc if isinstance(doc, dict) and "call" in doc else find_action(resp.text).action
    name = action.get("call") if isinstance(action, dict) else None
    return name if isinstance(name, str) else None


def _where(node: RunNode | None) -> str:
    if node is None:
        return "outside any node"
    d = node.decision
    if d is None:
        return f"node {node.id} ({node.kind}), outside any decision"
    site = f" at {d.site}" if d.site is not None else ""
    return f"decision {d.index}{site}, node {node.id} ({node.kind})"


_CAUSE = ("The program did not ask the same thing when run again: it reads something the "
          "recording does not hold (the clock, a random number, a counter or a file that "
          "changed since the run). Make that input an argument of the program (or fix its "
          "seed), or fork at that decision or earlier.")


class ForkPlan:
    """One fork's plan (see the module's text), consulted by the fork's recorder."""

    def __init__(self, run: Any, k: int, kind: str | None, value: Any, other: Any,
                 after: str):
        self.run, self.k, self.kind, self.value = run, k, kind, value
        self.other, self.after = other, after
        self.prefix = [c for c in run.calls if c.before <= k]
        self.later = [c for c in run.calls if c.before > k]
        self.tool_prefix = [t for t in run.tool_calls if t.before <= k]
        self.tool_later = [t for t in run.tool_calls if t.before > k]
        self._taken: set[int] = set()
        self._next = 0
        self._queues: dict[str, list[int]] | None = None
        self._later_taken: set[int] = set()
        self._tools_taken: set[int] = set()
        self.diverged: RunDiverged | None = None
        self.edit_done = False     # the reply (or a pick with nothing to fill) was given
        self.edit_attempt: int | None = None  # ... in this attempt of decision k
        self.menu_done = False     # the option set of decision k was edited
        self.synthetic: Any = None  # pick= an option with nothing to fill: that option
        # the option sets the forked run was made with (it may be a fork itself), before k
        self.inherited = {i: (kind, v) for i, kind, v in run.menu_edits if i < k}

    # -- what the fork records ------------------------------------------------------------
    def edit_record(self) -> dict:
        value = self.value
        if self.kind == "runtime":
            value = getattr(value, "name", None)
        elif self.kind == "options":
            value = getattr(value, "descriptions", None) or (
                "<a function of the menu>" if callable(value) else
                [o.name for o in normalize(value)])
        elif self.kind == "reply" and not isinstance(value, str):
            value = repr(value)
        return {"kind": self.kind, "value": value, "after": self.after}

    # -- model calls ----------------------------------------------------------------------
    def _diverge(self, message: str, **kw: Any) -> RunDiverged:
        err = RunDiverged(message, at=self.k, **kw)
        if self.diverged is None:
            self.diverged = err
        return err

    def _take(self, call: RecordedCall) -> RecordedCall | None:
        prefix, taken = self.prefix, self._taken
        i = self._next
        while i < len(prefix) and i in taken:
            i += 1
        self._next = i
        key = call.key
        if i < len(prefix) and prefix[i].key == key:
            taken.add(i)
            return prefix[i]
        if self._queues is None:  # a concurrent program asks in another order
            self._queues = {}
            for j, c in enumerate(prefix):
                self._queues.setdefault(c.key, []).append(j)
        for j in self._queues.get(key, ()):
            if j not in taken:
                taken.add(j)
                return prefix[j]
        return None

    def _expected(self) -> RecordedCall | None:
        return next((c for j, c in enumerate(self.prefix) if j not in self._taken), None)

    def answer(self, recorder: Any, call: RecordedCall) -> Callable[[], Any] | None:
        """Who answers `call`: a function giving the recorded reply or the edit's, or None
        (the runtime). Before the fork point a call the recording does not hold raises
        RunDiverged."""
        if call.before <= self.k:
            rec = self._take(call)
            if rec is None:
                expected = self._expected()
                shown = ("the recording holds no further model call before decision "
                         f"{self.k}" if expected is None else
                         "where it first differs from the next recorded request: " +
                         first_difference(expected.request, call.request))
                raise self._diverge(
                    f"the fork of run {self.run.name!r} at decision {self.k} stopped at "
                    f"{_where(call.node)}: before the fork point every request is answered "
                    f"from the recording, and the recording does not hold this one; "
                    f"{shown}. {_CAUSE}", node=call.node,
                    decision=None if call.node is None else call.node.decision,
                    expected=None if expected is None else expected.request,
                    actual=call.request)
            return self._from(call, rec)
        if call.decision == self.k and (self.kind == "reply" or self.synthetic is not None) \
                and (not self.edit_done or (call.attempt == self.edit_attempt and
                                            "sample" in (call.mode_args or {}))):
            # decision k's first call; and with confidence=Samples(n), each sample of that
            # attempt: the model is taken to have written the same reply every time
            self.edit_done, self.edit_attempt = True, call.attempt
            call.source, call.runtime, call.runtime_name = "edit", None, "edit"
            return lambda: self._edit(call)
        if self.after == "recorded":
            for j, rec in enumerate(self.later):
                if j not in self._later_taken and rec.finished and rec.key == call.key:
                    self._later_taken.add(j)
                    return self._from(call, rec)
        return None

    @staticmethod
    def _from(call: RecordedCall, rec: RecordedCall) -> Callable[[], Any]:
        call.copy_from(rec)
        call.source = "recording"
        return rec.answer

    def _edit(self, call: RecordedCall) -> ModelResponse:
        mode_args = call.mode_args or {}
        if self.kind == "reply":
            resp = copied(as_response(self.value))
            name = _named(resp)
        else:
            name = self.synthetic.name
            if mode_args.get("tool_choice") is not None:   # tools mode: the pick is a call
                resp = ModelResponse(text="", tool_calls=[ToolCall(api_name(name, "option"),
                                                                   {})])
            elif mode_args.get("response_format") is not None:  # json_schema: the document
                resp = ModelResponse(text=json.dumps({ROOT_KEY: {"call": name, "args": {}}}))
            else:
                resp = ModelResponse(text="```json\n" + json.dumps({"call": name}) + "\n```")
        names = mode_args.get("confidence")
        if isinstance(names, list):
            # the decision asks the runtime for its distribution: the edit is taken as certain
            # of the option it names (held to it, or written so), and says so
            probs = {name: 1.0} if name in names else {}
            resp.confidence = {"probs": probs, "other": 0.0 if probs else 1.0,
                               "source": "exact",
                               "note": f"the fork's edit ({self.kind}=) at decision {self.k}: "
                                       f"taken as certain"}
        return resp

    def runtime_for(self, call: RecordedCall) -> Any:
        """The runtime of `runtime=` for a call made once decision k started, else None."""
        return self.other if self.kind == "runtime" and call.before > self.k else None

    # -- live tool calls ------------------------------------------------------------------
    def tool_answer(self, recorder: Any, entry: RecordedTool) -> RecordedTool | None:
        if entry.before <= self.k:
            for j, rec in enumerate(self.tool_prefix):
                if j not in self._tools_taken and rec.key == entry.key:
                    self._tools_taken.add(j)
                    entry.source = "recording"
                    return rec
            expected = next((t for j, t in enumerate(self.tool_prefix)
                             if j not in self._tools_taken), None)
            raise self._diverge(
                f"the fork of run {self.run.name!r} at decision {self.k} stopped at "
                f"{_where(entry.node)}: the live tool call {entry.call['name']!r} on server "
                f"{entry.call['server']!r} with arguments "
                f"{json.dumps(entry.call['arguments'], ensure_ascii=False)[:200]} is not in "
                f"the recording before the fork point"
                + ("" if expected is None else " (the next recorded one: "
                   f"{json.dumps(expected.call, ensure_ascii=False)[:240]})")
                + f". {_CAUSE}", node=entry.node,
                decision=None if entry.node is None else entry.node.decision,
                expected=None if expected is None else expected.call, actual=entry.call)
        if self.after == "recorded":
            for j, rec in enumerate(self.tool_later):
                key = ("later", j)
                if key not in self._tools_taken and rec.done and rec.key == entry.key:
                    self._tools_taken.add(key)  # type: ignore[arg-type]
                    entry.source = "recording"
                    return rec
        return None

    # -- decision k ---------------------------------------------------------------------------
    def decision_started(self, recorder: Any, node: RunNode) -> None:
        """At decision k: every recorded call before it was asked again, and it is made where
        the recorded one was (else the fork has diverged; the next call raises it)."""
        if node.index != self.k or self.diverged is not None:
            return
        missing = self._expected()
        if missing is not None:
            left = len(self.prefix) - len(self._taken)
            self._diverge(
                f"the fork of run {self.run.name!r} reached decision {self.k} without asking "
                f"{left} request(s) the run asked before it; the first was made at "
                f"{_where(missing.node)}. {_CAUSE}", node=node, decision=node,
                expected=missing.request, actual=None)
            return
        recorded = self.run.decisions[self.k].site
        if recorded is not None and node.site is not None and recorded != node.site:
            self._diverge(
                f"the fork of run {self.run.name!r}: decision {self.k} is made at {node.site}, "
                f"the run's decision {self.k} at {recorded}; the program took another path "
                f"before the fork point. {_CAUSE}", node=node, decision=node)

    def options(self, recorder: Any, options: Any) -> Any:
        """The option set of the decision about to start: edited at k (`pick=`, `options=`)
        and where a run this one forks was itself made with an edited option set (a fork of a
        fork: its recording holds what the edited decision asked, so the edit applies again);
        any other as it is."""
        n = len(recorder.run.decisions)
        inherited = self.inherited.get(n)
        if inherited is not None:
            return self._edited(options, n, *inherited)
        if self.menu_done or self.kind not in ("pick", "options") or n != self.k:
            return options
        self.menu_done = True
        return self._edited(options, n, self.kind, self.value, own=True)

    def _edited(self, options: Any, n: int, kind: str, value: Any, own: bool = False) -> Any:
        menu = normalize(options)
        if kind == "options":
            if value is None:   # a saved run's options= edit, which no file can hold
                self._diverge(f"the fork of run {self.run.name!r}: decision {n} was made, in "
                              f"the run forked here, with an option set given to fork(options="
                              f") that a saved run cannot hold; fork the run it was forked from "
                              f"instead (or give that edit again)")
                return options
            return value(menu) if callable(value) else value
        option = menu.by_name.get(value)
        if option is None:
            self._diverge(f"the fork of run {self.run.name!r}: decision {n}'s option set has no "
                          f"option {value!r} now (its options are {', '.join(menu.by_name)}), "
                          f"though the recorded one had. {_CAUSE}")
            return options
        if own and not option.llm_params:   # nothing for the model to fill: no model call
            self.synthetic = option
        # held (Menu.held): no threshold judges the fork's pick, and the decision's
        # low_confidence= option need not be on this one-option menu
        held = Menu(normalize([option]))
        held.held = True
        return held

    # -- the end ----------------------------------------------------------------------------
    def finish(self, fork: Any) -> None:
        """Raise what stopped the fork, or what kept its edit from applying."""
        err = self.diverged
        raised = fork.error
        if err is None and len(fork.decisions) <= self.k and raised is not None:
            # the program failed on its way: say with what, not that it read the clock
            err = self._diverge(
                f"the fork of run {self.run.name!r} stopped after {len(fork.decisions)} "
                f"decision(s), before decision {self.k}: the program raised "
                f"{type(raised).__name__}: {cut(str(raised), 600)} (fork.error; the "
                f"fork is err.run)", node=fork.root)
            err.__cause__ = raised
        if err is None and len(fork.decisions) <= self.k:
            err = self._diverge(
                f"the fork of run {self.run.name!r} ended after {len(fork.decisions)} "
                f"decision(s), before decision {self.k}: the program took another path "
                f"before the fork point. {_CAUSE}", node=fork.root)
        if err is None and self.kind == "reply" and not self.edit_done:
            err = self._diverge(
                f"the fork of run {self.run.name!r}: decision {self.k} made no model call, so "
                f"the reply given was never used (it failed before asking: see the fork's "
                f"decision {self.k}, fork.decisions[{self.k}].trace)",
                node=fork.decisions[self.k], decision=fork.decisions[self.k])
        if err is not None:
            err.run = fork
            raise err


# ---------------------------------------------------------------------------------------------
# Checking what was asked for
# ---------------------------------------------------------------------------------------------


def decision_index(run: Any, at: Any) -> int:
    """`at=` as an index into `run.decisions` (see `Run.fork`), or the error naming the fix."""
    n = len(run.decisions)
    made = (f"the run made {n} decision(s), indexed 0 to {n - 1}" if n else
            "the run made no decision")
    if isinstance(at, bool) or at is None:
        raise UsageError(f"fork(at=) takes a decision's index, one of run.decisions, or a node "
                         f"id such as 'n3'; got {at!r}")
    if isinstance(at, int):
        i = at + n if at < 0 else at
        if not 0 <= i < n:
            raise ArgumentError(f"fork(at={at}) is past the run's last decision: {made}; pick "
                                f"one of them (at=-1 is the last)")
        return i
    node = at
    if isinstance(at, str):
        try:
            node = run.node(at)
        except KeyError:
            node = None
        if node is None:
            raise ArgumentError(f"fork(at={at!r}) names no node of this run (its node ids run "
                                f"from n0 to n{len(run.nodes) - 1}); pass a decision's index, "
                                f"one of run.decisions, or the id of a decision node")
    if getattr(node, "run", None) is not run or not hasattr(node, "index"):
        other = getattr(getattr(node, "run", None), "name", None)
        whose = f" of run {other!r}" if other else ""
        raise ArgumentError(f"fork(at=...) got {node!r}, which is not a decision of this run "
                            f"(it is a node{whose}, or no node at all): that decision does not "
                            f"exist in run {run.name!r}; pass one of run.decisions or its index "
                            f"({made})")
    if node.index is None:
        inside = node.decision
        hint = (f"; it is inside decision {inside.index} ({inside.id}): fork(at={inside.index})"
                if inside is not None else "")
        raise ArgumentError(f"fork(at={node.id!r}) names a {node.kind} node, not a decision"
                            f"{hint}")
    return node.index


def _check_reply(reply: Any) -> None:
    if isinstance(reply, (str, ToolCall, ModelResponse)):
        return
    if isinstance(reply, (list, tuple)) and reply and all(isinstance(t, ToolCall)
                                                         for t in reply):
        return
    raise UsageError(f"fork(reply=) takes the text the model is taken to have written (a str), "
                     f"or a ToolCall (a list of them, a ModelResponse) in the tools way of "
                     f"asking; got {type(reply).__name__}")


def plan_fork(run: Any, at: Any, *, reply: Any = _UNSET, pick: Any = None, options: Any = None,
              runtime: Any = None, after: str = "runtime") -> ForkPlan:
    """Check a fork's arguments against the run (see `Run.fork`) and plan it."""
    k = decision_index(run, at)
    given = [name for name, value in (("reply", reply is not _UNSET), ("pick", pick is not None),
                                      ("options", options is not None),
                                      ("runtime", runtime is not None)) if value]
    if len(given) > 1:
        edits = ", ".join(f"{g}=" for g in given)
        raise UsageError(f"fork() got {len(given)} edits at once ({edits}); "
                         f"a fork applies exactly one edit at its fork point. Fork once per "
                         f"edit, or fork the fork: run.fork(at=k, {given[0]}=...)"
                         f".fork(at=..., {given[1]}=...)")
    if after not in AFTER:
        raise ArgumentError(f"fork(after={after!r}): after= is 'runtime' (the calls after the "
                            f"fork point go to the runtime) or 'recorded' (answered from the "
                            f"recording wherever the request is the recorded one)")
    decision = run.decisions[k]
    trace = decision.trace
    names = [o.get("name") for o in (trace.options if trace is not None else [])]
    kind, value = (given[0] if given else None), None
    if kind == "reply":
        _check_reply(reply)
        value = reply
    elif kind in ("pick", "options") and trace is not None and trace.entry == "format":
        raise UsageError(f"decision {k} is a reply to a format (exec(response_format=)); it has "
                         f"no option set to {kind}: fork it with reply= or runtime=")
    elif kind == "pick":
        if not isinstance(pick, str):
            raise UsageError(f"fork(pick=) takes an option's name or 'runner_up', got "
                             f"{type(pick).__name__}")
        value = pick
        if pick == "runner_up" and pick not in names:
            conf = None if trace is None else trace.confidence
            if conf is None:
                raise ArgumentError(
                    f"fork(pick='runner_up'): decision {k} recorded no confidence, so it has "
                    f"no runner-up; make the decision with confidence=True (or "
                    f"confidence=decision.Samples(n)) to record one, or pick= an option by "
                    f"name ({', '.join(map(repr, names))})")
            value = conf.runner_up
            if value is None:
                raise ArgumentError(f"fork(pick='runner_up'): decision {k}'s confidence names "
                                    f"no option besides its pick; pick= an option by name")
        elif pick not in names:
            raise ArgumentError(f"fork(pick={pick!r}) names no option of decision {k}; its "
                                f"options are {', '.join(map(repr, names))} (or 'runner_up' "
                                f"when confidence was recorded)")
    elif kind == "options":
        if not callable(options):
            normalize(options)   # a bad option set is named now, before anything runs
        unknown = sorted(set(getattr(options, "descriptions", None) or ()) - set(names))
        if unknown:
            raise ArgumentError(f"with_descriptions() names {', '.join(map(repr, unknown))}, "
                                f"not an option of decision {k}; its options are "
                                f"{', '.join(map(repr, names))}")
        value = options
    elif kind == "runtime":
        if not isinstance(runtime, ModelCaller):
            raise UsageError(f"fork(runtime=) takes an openprogram Runtime, got "
                             f"{type(runtime).__name__}; wrap a model with Runtime(call=fn)")
        value = runtime
    return ForkPlan(run, k, kind, value, runtime, after)
