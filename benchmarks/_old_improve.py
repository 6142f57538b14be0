"""`decision.improve`'s improve module as it was before issue 53
(openprogram/evaluation/improve.py at commit ce24f4b), kept verbatim but for its imports so
benchmarks/bench_improve.py can run the old search beside the new one in one run.
Not imported by the library or the tests.

The module's own docstring follows.

`decision.improve`: make an option set better from labelled rows, and keep only what held-out
rows show helps (issue 36).

The labelled rows are split, with a seed, into a training side and a held-out side. Edits are
proposed from the training side only: worked examples per option (a training row's request and
the arguments the model gave when it picked that option right), the descriptions of options
and of their parameters rewritten by a proposer (a runtime asked through the decision
mechanism itself, a callable, or the deterministic built-in `"keywords"`), and, with
`rename=True`, the names the model sees (a renamed option resolves as the original does, so
a pick returns the name the code gave it). Each edit is first scored on the training rows (the
mean probability of the expected option where the run has distributions, accuracy otherwise);
one that helps there is measured on the held-out rows, and kept only when a paired bootstrap of
the held-out rows puts its gain above zero at 95 %. Figures reported are held-out figures: a
gain on the rows an edit was chosen from says nothing. The search stops at `budget` model
calls (replies served by a `CachedRuntime` are not counted, so a re-run through the cache is
free). The user's code is never edited: the result carries the new option set as data, and the
edits as text to paste. It is long because the search — the split, the candidates, scoring on
train, the held-out bootstrap, the budget and the journal it resumes from — is one procedure; where
its texts come from is `proposers`.
"""
from __future__ import annotations

import copy
import json
import os
import random
import string
import warnings

from _old_proposers import NAME, Journaled, digest, keyword_proposer, proposed, proposer_of

from openprogram.base.errors import DecisionError, OptionWarning, UsageError
from openprogram.decision.options import Option, normalize
from openprogram.evaluation.results import bootstrap_interval

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["improve", "aimprove", "Improvement", "keyword_proposer", "MIN_ROWS"]

#: Fewer labelled rows than this hold nothing out worth measuring on.
MIN_ROWS = 20
# where an edit's text came from, as the step-through cites it
_SOURCE = {"kind": "improve", "label": "decision.improve: a proposer's text, from the "
                                       "training rows"}


def _rows_of(rows: Any) -> list[dict]:
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        return [dict(r) for r in rows.to_dict("records")]
    out = list(rows)
    if not all(isinstance(r, dict) for r in out):
        raise UsageError("improve(rows=...): rows is a DataFrame or a list of dicts, one per "
                         "labelled request")
    return out


def _labels(rows: list[dict], expected: Any, names: list[str]) -> list[str]:
    if isinstance(expected, str):
        missing = [i for i, r in enumerate(rows) if expected not in r]
        if missing:
            raise UsageError(f"improve(expected={expected!r}): rows {missing[:5]} have no "
                             f"{expected!r} column; give the column holding each row's option")
        labels = [r[expected] for r in rows]
    elif isinstance(expected, (list, tuple)):
        if len(expected) != len(rows):
            raise UsageError(f"improve(expected=[...]) has {len(expected)} labels for "
                             f"{len(rows)} rows; give one option name per row")
        labels = list(expected)
    else:
        raise UsageError("improve(expected=...) is a column name or a list of option names, "
                         "one per row")
    bad = sorted({repr(x) for x in labels if x not in names})
    if bad:
        raise UsageError(f"improve: labels {', '.join(bad[:5])} name no option; the options "
                         f"are {names}")
    return labels


def _request(prompt: str, row: dict) -> str:
    """The part of a row the model is asked about: the values the prompt's fields take."""
    fields = [f for _, f, _, _ in string.Formatter().parse(prompt) if f]
    values = [str(row[f]) for f in fields if f in row]
    return " / ".join(values) if values else prompt.format_map(row)


def _edited(option: Option, description: str) -> Option:
    out = copy.copy(option)
    for k in ("_block", "_info"):
        out.__dict__.pop(k, None)
    out.description = description
    out.edited = {**option.edited, "description": _SOURCE}
    return out


class _Scorer:
    """Runs the option set over rows through `evaluate`, counting the model calls it makes.
    With a journal, each row's outcome under a menu is appended as it finishes (a section per
    menu, rows by their position in the table), and a row the journal holds under the same
    menu is read back instead of asked again: that is how an interrupted `improve` resumes."""

    def __init__(self, prompt: str, rows: list[dict], labels: list[str], runtime: Any,
                 settings: dict, budget: int, journal: Any = None):
        self.prompt, self.rows, self.labels, self.rt = prompt, rows, labels, runtime
        self.settings, self.budget, self.journal = settings, budget, journal
        self.calls = 0
        self.resumed = 0   # rows read back from the journal (no call made for them)
        self.uses_p: bool | None = None
        self.seen: dict[str, set[int]] = {"train": set(), "held_out": set()}
        self.per_attempt = getattr(settings.get("confidence"), "n", 1) or 1

    def affordable(self, idx: list[int]) -> bool:
        # the worst case of one more evaluation: every row re-asked as often as allowed
        per_row = (1 + self.settings.get("max_retries", 1)) * self.per_attempt
        return self.calls + len(idx) * per_row <= self.budget

    def _key(self, i: int) -> str:
        return digest([_filled(self.prompt, self.rows[i]), self.labels[i]])

    def _open(self, menu: list[Option], what: str) -> Any:
        from openprogram.decision.options import render_menu
        from openprogram.evaluation.journal import Journal
        text = render_menu(menu)
        # A section per menu, named by its text's digest: the same option set met again (a
        # resumed run, another seed) finds its rows whatever candidate it came from.
        return Journal(self.journal, {
            "section": f"improve {digest(text)}: {what}", "prompt": self.prompt,
            "menu": text, "mode": self.settings["mode"], "runtime": self.rt.name,
            "options": [o.name for o in menu], "total": len(self.rows)})

    def score(self, menu: list[Option], idx: list[int], side: str,
              what: str = "an option set") -> dict:
        self.seen[side].update(idx)
        got: dict[int, dict] = {}
        j = self._open(menu, what) if self.journal is not None else None
        try:
            todo = []
            for i in idx:
                if j is not None and j.check_key(i, self._key(i)):
                    got[i] = self._read_back(j, i, {o.code_name for o in menu})
                    self.resumed += 1
                else:
                    todo.append(i)
            # With a journal the rows go in small batches, each journaled when it ends, so an
            # interruption loses at most the batch in flight.
            step = len(todo) if j is None else 2 * self.settings["concurrency"]
            for at in range(0, len(todo), step or 1):
                self._run(menu, todo[at:at + step], got, j)
        finally:
            if j is not None:
                j.close()
        picks = [got[i]["pick"] for i in idx]   # by the names the user's code gave
        hits = [1.0 if got[i]["pick"] == self.labels[i] else 0.0 for i in idx]
        ps = [got[i]["p"] for i in idx]
        if self.uses_p is None:  # a row without a distribution (a failed one) counts as p = 0
            self.uses_p = bool(self.settings.get("confidence")) and \
                any(p is not None for p in ps)
        per_row = [(p or 0.0) if self.uses_p else h for p, h in zip(ps, hits)]
        return {"scores": per_row, "accuracy": hits, "p": ps, "picks": picks,
                "args": [got[i]["args"] for i in idx]}

    def _read_back(self, j: Any, i: int, names: set[str]) -> dict:
        """Row `i` as the journal holds it, checked: a journal is a file anyone may hand over,
        and the journal checks only the fields it reads itself."""
        from openprogram.evaluation.journal import JournalFileError
        line = j.done[i][1]
        pick, p, args = line.get("pick"), line.get("p"), line.get("args")
        wrong = ("pick" if pick is not None and pick not in names else
                 "p" if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))
                                           or not 0 <= p <= 1) else
                 "args" if args is not None and not isinstance(args, dict) else None)
        if wrong is not None:
            raise JournalFileError(
                f"the journal {str(self.journal)!r} holds row {i} of section {j.name!r} with "
                f"{wrong} = {json.dumps(line.get(wrong), default=repr)[:80]}, which improve "
                f"never writes; pass a new journal= path (or delete the file) to start over")
        return {"pick": pick, "p": p, "args": args}

    def _run(self, menu: list[Option], chunk: list[int], got: dict, journal: Any) -> None:
        from openprogram.base.json_form import to_jsonable
        from openprogram.evaluation.evaluate import evaluate
        # a renamed option is picked by its new name; labels and picks are the code's names
        shown = {o.code_name: o.name for o in menu}
        code = {o.name: o.code_name for o in menu}
        try:
            res = evaluate(self.prompt, list(menu), [self.rows[i] for i in chunk],
                           runtime=self.rt, expected=[shown[self.labels[i]] for i in chunk],
                           progress=False, on_interrupt="raise", **self.settings)
            interrupted = None
        except KeyboardInterrupt as exc:
            res, interrupted = getattr(exc, "result", None), exc
            if res is None:
                raise
        statuses = res.statuses
        for k, i in enumerate(chunk):
            if statuses[k] == "cancelled":
                continue
            trace, pick = res.traces[k], code.get(res.picks[k], res.picks[k])
            made = 0
            if trace is not None:  # each sample of Samples(n) is a call of its own
                made = self.per_attempt * sum(1 for a in trace.attempts if not a.cached)
            self.calls += made
            conf = getattr(trace, "confidence", None) if trace is not None else None
            row = {"pick": pick, "p": (conf.probs.get(shown[self.labels[i]], 0.0)
                                       if conf is not None else None),
                   "args": _picked_args(trace)}
            got[i] = row
            if journal is not None:
                journal.write_row(i, self._key(i), {
                    "status": statuses[k], "expected": self.labels[i], "calls": made,
                    **row, "args": to_jsonable(row["args"])})
        if interrupted is not None:
            where = (f"; the rows that finished are in the journal {str(self.journal)!r}, and "
                     f"the same call resumes from them" if self.journal is not None else
                     "; pass journal= to keep the finished rows and resume")
            raise KeyboardInterrupt(f"improve was interrupted after {self.calls} model "
                                    f"calls{where}") from None


def _filled(prompt: str, row: dict) -> str:
    try:
        return prompt.format_map(row)
    except (KeyError, IndexError, ValueError, AttributeError):
        return json.dumps(row, sort_keys=True, default=repr)


def _picked_args(trace: Any) -> dict | None:
    if trace is None:
        return None
    for a in reversed(trace.attempts):
        if a.ok:
            return dict(a.args or {})
    return None


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _figures(s: dict, uses_p: bool) -> dict:
    out = {"accuracy": _mean(s["accuracy"]), "accuracy_ci": bootstrap_interval(s["accuracy"])}
    if uses_p:
        ps = [p or 0.0 for p in s["p"]]
        out.update(mean_p_expected=_mean(ps), mean_p_expected_ci=bootstrap_interval(ps))
    return out


class Improvement:
    """What `decision.improve` found: `.options` (the option set to pass to `make`, edits
    applied), `.original`, `.edits` (every candidate tried, kept or not, with its scores),
    `.report` (the split, held-out before / after with 95 % intervals and per option, calls
    spent, candidates tried and rejected),
    `.diff()` (the kept edits as text to paste into the code), `.to_frame()`."""

    def __init__(self, original: list[Option], options: list[Option], edits: list[dict],
                 report: dict):
        self.original, self.options, self.edits, self.report = original, options, edits, report

    @property
    def kept(self) -> list[dict]:
        return [e for e in self.edits if e["kept"]]

    def diff(self) -> str:
        """The kept edits, one block per option, as text a user can paste into their code."""
        if not self.kept:
            return "No edit helped on the held-out rows; the option set is unchanged."
        out = []
        for e in self.kept:
            if e["kind"] == "description":
                out.append(f"option {e['option']!r}: description\n- {e['before']!r}\n"
                           f"+ {e['after']!r}")
            elif e["kind"] == "name":
                out.append(f"option {e['option']!r}: shown to the model as {e['after']!r}\n"
                           f"  (.options keep {e['option']!r} as the name a pick returns; "
                           f"renamed in your code, a value option's pick and a schema "
                           f"option's 'decision' become {e['after']!r})")
            elif e["kind"] == "parameter":
                p = e["parameter"]
                out.append(f"option {e['option']!r}, parameter {p!r}: description\n"
                           f"- {e['before']!r}\n+ {e['after']!r}\n"
                           f"  (a function: {p}: Annotated[<its type>, {e['after']!r}], or "
                           f"input_meta={{{p!r}: {{'description': {e['after']!r}}}}}; a schema "
                           f"or a tool definition: the property's \"description\")")
            else:
                pairs = ", ".join(f"({x['request']!r}, {json.dumps(x['args'])})"
                                  for x in e["after"])
                lines = "".join(f"\n      {x['request']} -> {json.dumps(x['args'])}"
                                for x in e["after"])
                out.append(f"option {e['option']!r}: add examples\n"
                           f"+ with_examples(..., [{pairs}])\n"
                           f"  or, in a function's docstring:\n    Examples:{lines}")
        return "\n\n".join(out)

    def to_frame(self) -> Any:
        import pandas as pd
        return pd.DataFrame([{k: (json.dumps(v) if isinstance(v, (dict, list)) else v)
                              for k, v in e.items()} for e in self.edits],
                            columns=["option", "kind", "parameter", "before", "after",
                                     "train_before",
                                     "train_after", "held_gain", "held_gain_lo",
                                     "held_gain_hi", "kept", "why"])

    def _headline(self) -> str:
        r = self.report
        b, a = r["held_out_before"], r["held_out_after"]
        key = "mean_p_expected" if "mean_p_expected" in b else "accuracy"
        return (f"Improvement: {len(self.kept)} of {len(self.edits)} edits kept; held-out "
                f"{key} {b[key]:.3f} → {a[key]:.3f} on {r['split']['held_out']} rows; "
                f"{r['calls']} model calls")

    def __repr__(self) -> str:
        return self._headline()

    def _repr_html_(self) -> str:
        import html
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(e.get(k)))}</td>" for k in
                             ("option", "kind", "parameter", "after", "held_gain", "kept",
                              "why")) + "</tr>"
            for e in self.edits)
        return (f"<div><p>{html.escape(self._headline())}</p><table><tr><th>option</th>"
                f"<th>kind</th><th>parameter</th><th>edit</th><th>held-out gain</th>"
                f"<th>kept</th><th>why</th>"
                f"</tr>{rows}</table><pre>{html.escape(self.diff())}</pre></div>")


def improve(prompt: str, options: Any, rows: Any, *, expected: Any, runtime: Any = None,
            proposer: Any = None, budget: int = 500, holdout: float = 0.5, seed: int = 0,
            rename: bool = False, max_examples: int = 2, mode: str = "menu",
            confidence: Any = False, max_retries: int = 1,
            concurrency: int = 4, journal: Any = None) -> Improvement:
    """Propose edits to `options` from the training side of the labelled `rows` and keep each
    only when the held-out side shows it helps (see the module's docstring). `expected` is a
    column of `rows` or a list of option names; `holdout` the share held out (split with
    `seed`); `budget` the model calls the search may spend; `proposer` a Runtime (default:
    `runtime`), a callable `(name, description, evidence) -> str` or `"keywords"`. A proposer
    is asked for each option's description (`name` the option's) and for each of its
    parameters' (`name` written `option.parameter`, `evidence["parameter"]` naming it and
    `evidence["values"]` the values the model gave it in right picks). With `rename=True` it
    is also asked for each option's name (`evidence["rename"]` set, `description` the name
    the model sees now); a reply that is not an identifier, or names another option, is
    skipped as nothing usable.

    `journal="runs/improve.jsonl"` appends each row's outcome under each option set tried, and
    each proposer's answer, to that file as they finish; calling the same `improve` with the
    same journal after an interruption resumes: what the journal holds is read back, not asked
    again (and not counted against `budget`). A journal written with another prompt, way of
    asking, runtime or proposer is refused with `JournalMismatch`; with other rows, when a
    row's request differs from the one journaled at its position."""
    from openprogram.base.model_protocol import resolve_runtime
    if not isinstance(rename, bool):
        raise UsageError(f"improve(rename=...) is True (propose the names the model sees) or "
                         f"False (names are code: left alone), got {rename!r:.40}")
    rt = resolve_runtime(runtime, "improve")
    table = _rows_of(rows)
    original = list(normalize(options))
    names = [o.name for o in original]
    labels = _labels(table, expected, names)
    if not isinstance(budget, int) or budget < 1:
        raise UsageError(f"improve(budget=...) is a positive number of model calls, got "
                         f"{budget!r}")
    if not 0 <= holdout < 1:
        raise UsageError(f"improve(holdout=...) is the share of rows held out, in [0, 1); got "
                         f"{holdout!r}")
    if holdout == 0:
        warnings.warn("improve(holdout=0): no row is held out, so nothing an edit does can be "
                      "measured; the option set comes back unchanged", OptionWarning,
                      stacklevel=2)
    elif len(table) < MIN_ROWS:
        raise UsageError(f"improve needs at least {MIN_ROWS} labelled rows to hold some out "
                         f"(got {len(table)}); label more rows, or pass holdout=0 to see the "
                         f"proposals without measuring them")
    order = list(range(len(table)))
    random.Random(seed).shuffle(order)
    n_held = round(len(table) * holdout)
    held, train = sorted(order[:n_held]), sorted(order[n_held:])
    settings = {"mode": mode, "confidence": confidence, "max_retries": max_retries,
                "concurrency": concurrency}
    if journal is not None and (isinstance(journal, bool) or
                                not isinstance(journal, (str, os.PathLike))):
        raise UsageError(f"improve(journal=...) is a file path (str or pathlib.Path), got "
                         f"{type(journal).__name__}")
    scorer = _Scorer(prompt, table, labels, rt, settings, budget, journal)
    propose = proposer_of(proposer, rt, counter := [0, 0])
    if propose is not None and journal is not None:
        propose = Journaled(propose, journal, prompt, original, proposer, rt)
    report: dict = {"split": {"seed": seed, "train": len(train), "held_out": len(held),
                              "train_rows": train, "held_out_rows": held},
                    "stopped": None}
    current = list(original)
    edits: list[dict] = []
    base_train = scorer.score(current, train, "train", "the option set as given")
    if not held:
        figures = _figures(base_train, bool(scorer.uses_p))
        report.update(held_out_before=figures, held_out_after=figures, calls=scorer.calls,
                      measured_on="nothing (holdout=0)")
        return Improvement(original, current, edits, report)
    base_held = scorer.score(current, held, "held_out", "the option set as given")
    report["held_out_before"] = _figures(base_held, bool(scorer.uses_p))
    report["measured_on"] = "mean_p_expected" if scorer.uses_p else "accuracy"
    cur_train, cur_held = base_train, base_held

    for kind, pos, build in _candidates(prompt, current, train, table, labels, base_train,
                                        propose, max_examples, rename):
        scorer.calls += counter[0]  # the proposer's calls count against the same budget
        counter[0] = 0
        if not scorer.affordable(train + held):
            report["stopped"] = f"budget of {budget} model calls reached"
            break
        made = build(current[pos], [o.name for o in current])
        option = current[pos].code_name
        kind, param = kind if isinstance(kind, tuple) else (kind, None)
        if made is None:
            edits.append({"option": option, "kind": kind, "parameter": param, "before": None,
                          "after": None, "kept": False,
                          "why": "the proposer returned nothing usable"})
            continue
        new_option, before, after = made
        trial = current[:pos] + [new_option] + current[pos + 1:]
        what = (f"description of parameter {param!r} of {option!r}" if param else
                f"{kind} of {option!r}")
        t = scorer.score(trial, train, "train", what)
        edit = {"option": option, "kind": kind, "parameter": param, "before": before,
                "after": after,
                "train_before": _mean(cur_train["scores"]), "train_after": _mean(t["scores"]),
                "held_gain": None, "held_gain_lo": None, "held_gain_hi": None, "kept": False}
        edits.append(edit)
        if edit["train_after"] <= edit["train_before"]:
            edit["why"] = "no gain on the training rows"
            continue
        h = scorer.score(trial, held, "held_out", what)
        diffs = [a - b for a, b in zip(h["scores"], cur_held["scores"])]
        lo, hi = bootstrap_interval(diffs)
        edit.update(held_gain=_mean(diffs), held_gain_lo=lo, held_gain_hi=hi)
        if lo > 0:
            edit.update(kept=True, why="held-out gain above zero at 95 %")
            current, cur_train, cur_held = trial, t, h
        else:
            edit["why"] = "held-out gain not above zero at 95 %"
    report["held_out_after"] = _figures(cur_held, bool(scorer.uses_p))
    report["per_option"] = {
        n: {"held_out_rows": sum(1 for i in held if labels[i] == n),
            "before": _mean([s for s, i in zip(base_held["scores"], held) if labels[i] == n]),
            "after": _mean([s for s, i in zip(cur_held["scores"], held) if labels[i] == n])}
        for n in names}
    report["proposer_calls"] = counter[1]
    report["calls"] = scorer.calls + counter[0]
    report["candidates"] = len(edits)
    report["rejected"] = sum(1 for e in edits if not e["kept"])
    report["rows_seen"] = {k: sorted(v) for k, v in scorer.seen.items()}
    if journal is not None:
        report["journal"] = {"path": str(journal), "rows_resumed": scorer.resumed,
                             "proposals_resumed": getattr(propose, "resumed", 0)}
    gated = sum(1 for e in edits if e.get("held_gain") is not None)
    if gated > 1:  # each look at the held-out rows is a chance to keep an edit by luck
        report["caveat"] = (f"the held-out rows decided {gated} candidates, so the 'after' "
                            f"figure leans optimistic; confirm it on rows neither side saw")
    if not any(e["kept"] for e in edits):
        report["found"] = "no edit helped on the held-out rows; the original option set is returned"
    return Improvement(original, current, edits, report)


async def aimprove(prompt: str, options: Any, rows: Any, **kwargs: Any) -> Improvement:
    """`improve` from async code: the search runs on a worker thread (each of its evaluations
    runs its rows concurrently as `evaluate` does), so the event loop is not blocked."""
    import asyncio
    return await asyncio.to_thread(improve, prompt, options, rows, **kwargs)


def _candidates(prompt: str, menu: list[Option], train: list[int], table: list[dict],
                labels: list[str], base: dict, propose: Callable | None, max_examples: int,
                rename: bool):
    """(kind, position, build) of each candidate edit, the most confused options first. A
    build takes the option as it is now (after earlier kept edits) and the names the menu
    uses now, and returns (new option, before, after), or None when nothing usable came of
    it. Only training rows feed them."""
    names = [o.name for o in menu]
    errors = {n: 0 for n in names}
    for k, i in enumerate(train):
        pick = base["picks"][k]
        if pick != labels[i]:
            errors[labels[i]] += 1
            if pick in errors:
                errors[pick] += 1
    ranked = sorted(range(len(menu)), key=lambda p: (-errors[names[p]], p))
    for pos in ranked:
        name = names[pos]
        mine = [k for k, i in enumerate(train) if labels[i] == name]
        # A worked example is a request and the arguments its pick should get: a training row
        # the model picked right gives both; a missed row only for an option with no arguments.
        missed = [k for k in mine if base["picks"][k] != name]
        right = [k for k in mine if base["picks"][k] == name and base["args"][k] is not None]
        chosen = (missed + right if not menu[pos].llm_params else right)[:max_examples]
        if chosen:
            def build(option: Option, taken: list[str], chosen=chosen) -> Any:
                made = [(_request(prompt, table[train[k]]),
                         base["args"][k] if base["args"][k] is not None else {},
                         {"kind": "improve", "label": f"decision.improve: training row "
                                                      f"{train[k]}"}) for k in chosen]
                new = option.with_examples(made, None, replace=False)
                return new, None, [{"request": r, "args": a} for r, a, _ in made]
            yield "example", pos, build
        if propose is not None and mine:
            evidence = {
                "option": name, "parameter": None,
                "requests": [_request(prompt, table[train[k]]) for k in mine],
                "other_requests": [_request(prompt, table[i]) for i in train
                                   if labels[i] != name],
                "missed": [(_request(prompt, table[train[k]]), base["picks"][k])
                           for k in missed],
                "taken": [(_request(prompt, table[i]), labels[i])
                          for k, i in enumerate(train)
                          if base["picks"][k] == name and labels[i] != name]}

            def build(option: Option, taken: list[str], evidence=evidence) -> Any:
                text = proposed(propose, option.code_name, option.description, evidence)
                if text is None:
                    return None
                return _edited(option, text), option.description, text
            yield "description", pos, build
            # Each parameter's description is a line of the option's menu block too, and the
            # one a model reads when it weighs what the option needs.
            for param in menu[pos].llm_params:
                values = [base["args"][k].get(param.name) for k in mine
                          if base["picks"][k] == name and base["args"][k] is not None
                          and param.name in base["args"][k]]
                evidence_p = {**evidence, "option": name, "parameter": param.name,
                              "values": values}

                def build(option: Option, taken: list[str], evidence=evidence_p,
                          pname=param.name) -> Any:
                    before = next(p.field.description for p in option.params
                                  if p.name == pname)
                    text = proposed(propose, f"{option.code_name}.{pname}", before,
                                     evidence)
                    if text is None:
                        return None
                    return (option.with_param_description(pname, text, _SOURCE), before,
                            text)
                yield ("parameter", param.name), pos, build
            if rename:
                def build(option: Option, taken: list[str], evidence=evidence) -> Any:
                    try:
                        new = propose(option.code_name, option.name,
                                      {**evidence, "rename": True})
                    except DecisionError:
                        new = None
                    # a name is code the model writes back: an identifier, unique in the menu
                    if not isinstance(new, str) or not NAME.fullmatch(new.strip()) or \
                            new.strip() in taken:
                        return None
                    return option.renamed(new.strip(), _SOURCE), option.name, new.strip()
                yield "name", pos, build
