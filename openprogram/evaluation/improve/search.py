"""`decision.improve`: make an option set better from labelled rows, and keep only what held-out
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
the held-out rows puts its gain above zero at 95 %. On a small table an edit that helps a few
rows cannot pass that test alone, so the candidates that each showed a positive held-out gain
are then tried together — per option, then all of them — and a combination is kept on the same
test. Candidates for the options the model confuses most (the probability mass each takes on
the other's training rows, `confusability`) come first. Figures reported are held-out figures:
a gain on the rows an edit was chosen from says nothing. The search stops before `budget` model
calls, counting every call it makes however it is answered (the model, a `CachedRuntime`, the
journal of an interrupted run): the search is a function of its inputs, so a re-run through
the cache makes no new call and returns the same result, and going further is a larger budget.
The user's code is never edited: the result carries the new option set as data, and the edits
as text to paste. It is long because the search — the split, the candidates, scoring on train,
the held-out bootstrap, the combinations, the budget and the journal it resumes from — is one
procedure; where its texts come from is `proposers`.
"""
from __future__ import annotations

import copy
import json
import os
import random
import string
import warnings

from ...base.errors import DecisionError, OptionWarning, UsageError
from ...decision.options import Option, normalize
from ...decision.settings import IMPROVE, Settings, takes_settings
from ..confusability import mass_table, option_words, ranked_pairs, shared_words
from ..results import bootstrap_interval
from .proposers import NAME, Journaled, Spent, digest, keyword_proposer, proposed, proposer_of
from .report import Improvement

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
    """Runs the option set over rows through `evaluate`, counting every model call it makes
    on `spent` (a call answered from a cache too). With a journal, each row's outcome under a
    menu is appended as it finishes (a section per menu, rows by their position in the table),
    with the calls it took, and a row the journal holds under the same menu is read back
    instead of asked again, its calls counted as they were: that is how an interrupted
    `improve` resumes and still ends where the uninterrupted one would."""

    def __init__(self, prompt: str, rows: list[dict], labels: list[str], runtime: Any,
                 settings: Settings, concurrency: int, budget: int, spent: Spent,
                 journal: Any = None):
        self.prompt, self.rows, self.labels, self.rt = prompt, rows, labels, runtime
        self.settings, self.budget, self.journal = settings, budget, journal
        self.concurrency, self.spent = concurrency, spent
        self.resumed = 0   # rows read back from the journal (no call made for them)
        self.uses_p: bool | None = None
        self.seen: dict[str, set[int]] = {"train": set(), "held_out": set()}
        self.per_attempt = settings.confidence.draws

    def affordable(self, idx: list[int]) -> bool:
        # the worst case of one more evaluation: every row re-asked as often as allowed
        per_row = self.settings.attempts * self.per_attempt
        return self.spent.calls + len(idx) * per_row <= self.budget

    def _key(self, i: int) -> str:
        return digest([_filled(self.prompt, self.rows[i]), self.labels[i]])

    def _open(self, menu: list[Option], what: str) -> Any:
        from ...decision.options import render_menu
        from ..journal import Journal
        text = render_menu(menu)
        # A section per menu, named by its text's digest: the same option set met again (a
        # resumed run, another seed) finds its rows whatever candidate it came from.
        return Journal(self.journal, {
            "section": f"improve {digest(text)}: {what}", "prompt": self.prompt,
            "menu": text, "mode": self.settings.mode.name, "runtime": self.rt.name,
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
            step = len(todo) if j is None else 2 * self.concurrency
            for at in range(0, len(todo), step or 1):
                self._run(menu, todo[at:at + step], got, j)
        finally:
            if j is not None:
                j.close()
        picks = [got[i]["pick"] for i in idx]   # by the names the user's code gave
        hits = [1.0 if got[i]["pick"] == self.labels[i] else 0.0 for i in idx]
        ps = [got[i]["p"] for i in idx]
        if self.uses_p is None:  # a row without a distribution (a failed one) counts as p = 0
            self.uses_p = self.settings.confidence.asks and \
                any(p is not None for p in ps)
        per_row = [(p or 0.0) if self.uses_p else h for p, h in zip(ps, hits)]
        return {"scores": per_row, "accuracy": hits, "p": ps, "picks": picks,
                "args": [got[i]["args"] for i in idx],
                "probs": [got[i].get("probs") for i in idx]}

    def _read_back(self, j: Any, i: int, names: set[str]) -> dict:
        """Row `i` as the journal holds it, checked: a journal is a file anyone may hand over,
        and the journal checks only the fields it reads itself."""
        from ..journal import JournalFileError
        line = j.done[i][1]
        pick, p, args = line.get("pick"), line.get("p"), line.get("args")
        probs, calls = line.get("probs"), line.get("calls", 0)
        wrong = ("pick" if pick is not None and pick not in names else
                 "p" if p is not None and not _is_p(p) else
                 "args" if args is not None and not isinstance(args, dict) else
                 "probs" if probs is not None and not (
                     isinstance(probs, dict) and all(k in names and _is_p(v)
                                                     for k, v in probs.items())) else
                 "calls" if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0
                 else None)
        if wrong is not None:
            raise JournalFileError(
                f"the journal {str(self.journal)!r} holds row {i} of section {j.name!r} with "
                f"{wrong} = {json.dumps(line.get(wrong), default=repr)[:80]}, which improve "
                f"never writes; pass a new journal= path (or delete the file) to start over")
        self.spent.add(calls, resumed=calls)
        return {"pick": pick, "p": p, "args": args, "probs": probs}

    def _run(self, menu: list[Option], chunk: list[int], got: dict, journal: Any) -> None:
        from ...base.json_form import to_jsonable
        from ..evaluate import evaluation
        # a renamed option is picked by its new name; labels and picks are the code's names
        shown = {o.code_name: o.name for o in menu}
        code = {o.name: o.code_name for o in menu}
        try:
            res = evaluation(self.prompt, list(menu), [self.rows[i] for i in chunk],
                             self.settings.bound(runtime=self.rt),
                             expected=[shown[self.labels[i]] for i in chunk],
                             concurrency=self.concurrency, progress=False, on_interrupt="raise")
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
            made = cached = 0
            if trace is not None:  # each sample of Samples(n) is a call of its own
                made = self.per_attempt * len(trace.attempts)
                cached = self.per_attempt * sum(1 for a in trace.attempts if a.cached)
            self.spent.add(made, cached=cached)
            conf = getattr(trace, "confidence", None) if trace is not None else None
            row = {"pick": pick, "p": (conf.probs.get(shown[self.labels[i]], 0.0)
                                       if conf is not None else None),
                   "args": _picked_args(trace),
                   # the whole distribution, by the code's names: which options compete
                   "probs": ({code.get(n, n): q for n, q in conf.probs.items()}
                             if conf is not None else None)}
            got[i] = row
            if journal is not None:
                journal.write_row(i, self._key(i), {
                    "status": statuses[k], "expected": self.labels[i], "calls": made,
                    **row, "args": to_jsonable(row["args"])})
        if interrupted is not None:
            where = (f"; the rows that finished are in the journal {str(self.journal)!r}, and "
                     f"the same call resumes from them" if self.journal is not None else
                     "; pass journal= to keep the finished rows and resume")
            raise KeyboardInterrupt(f"improve was interrupted after {self.spent.calls} model "
                                    f"calls{where}") from None


def _is_p(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= 1


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


@takes_settings(IMPROVE)
def improve(prompt: str, options: Any, rows: Any, *, expected: Any, proposer: Any = None,
            budget: int = 500, holdout: float = 0.5, seed: int = 0, rename: bool = False,
            max_examples: int = 2, concurrency: int = 4, journal: Any = None,
            **settings: Any) -> Improvement:
    """Propose edits to `options` from the training side of the labelled `rows` and keep each
    only when the held-out side shows it helps, alone or together with the other candidates
    that each showed a positive held-out gain (see the module's docstring). `expected` is a
    column of `rows` or a list of option names; `holdout` the share held out (split with
    `seed`); `budget` the model calls the search may make, every call counted however it is
    answered (a cache, the journal), so a re-run through a `CachedRuntime` makes no new call
    and returns the same result; `report["untried"]` says how many candidates the budget left,
    with a warning. `proposer` a Runtime (default: `runtime`), a callable
    `(name, description, evidence) -> str` or `"keywords"`. A proposer
    is asked for each option's description (`name` the option's) and for each of its
    parameters' (`name` written `option.parameter`, `evidence["parameter"]` naming it and
    `evidence["values"]` the values the model gave it in right picks);
    `evidence["confused_with"]` lists the options the model confuses it with most, each with
    the words their menu lines share. With `rename=True` it
    is also asked for each option's name (`evidence["rename"]` set, `description` the name
    the model sees now); a reply that is not an identifier, or names another option, is
    skipped as nothing usable.

    `journal="runs/improve.jsonl"` appends each row's outcome under each option set tried, and
    each proposer's answer, to that file as they finish; calling the same `improve` with the
    same journal after an interruption resumes: what the journal holds is read back, not asked
    again (and counted against `budget` as the first run counted it, so the resumed run ends
    where an uninterrupted one would). A journal written with another prompt, way of
    asking, runtime or proposer is refused with `JournalMismatch`; with other rows, when a
    row's request differs from the one journaled at its position."""
    from ...base.model_protocol import resolve_runtime
    checked = Settings.of(settings, "improve", IMPROVE)
    if not isinstance(rename, bool):
        raise UsageError(f"improve(rename=...) is True (propose the names the model sees) or "
                         f"False (names are code: left alone), got {rename!r:.40}")
    rt = resolve_runtime(checked.runtime, "improve")
    table = _rows_of(rows)
    original = list(normalize(options))
    names = [o.name for o in original]
    labels = _labels(table, expected, names)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
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
    if journal is not None and (isinstance(journal, bool) or
                                not isinstance(journal, (str, os.PathLike))):
        raise UsageError(f"improve(journal=...) is a file path (str or pathlib.Path), got "
                         f"{type(journal).__name__}")
    spent = Spent()
    scorer = _Scorer(prompt, table, labels, rt, checked, concurrency, budget, spent, journal)
    propose = proposer_of(proposer, rt, spent)
    if propose is not None and journal is not None:
        propose = Journaled(propose, journal, prompt, original, proposer, rt, spent)
    report: dict = {"split": {"seed": seed, "train": len(train), "held_out": len(held),
                              "train_rows": train, "held_out_rows": held},
                    "stopped": None}
    current = list(original)
    edits: list[dict] = []
    base_train = scorer.score(current, train, "train", "the option set as given")
    if not held:
        figures = _figures(base_train, bool(scorer.uses_p))
        report.update(held_out_before=figures, held_out_after=figures, calls=spent.calls,
                      new_calls=spent.new, measured_on="nothing (holdout=0)")
        return Improvement(original, current, edits, report)
    base_held = scorer.score(current, held, "held_out", "the option set as given")
    report["held_out_before"] = _figures(base_held, bool(scorer.uses_p))
    report["measured_on"] = "mean_p_expected" if scorer.uses_p else "accuracy"
    cur_train, cur_held = base_train, base_held

    # Every candidate is known before any is tried (its text is asked for only when tried),
    # so the report can say how many the budget left.
    ranked, confused, pairs = _ranked_options(current, train, labels, base_train,
                                              bool(scorer.uses_p))
    # which pairs the training rows show the model confusing: their options come first
    report["confused_pairs"] = [{"options": [a, b], "mass": mass}
                                for a, b, mass, *_ in pairs[:5]]
    candidates = list(_candidates(prompt, current, train, table, labels, base_train,
                                  propose, max_examples, rename, ranked, confused))
    applies: list[tuple[int, Callable | None]] = []   # per edit: where, and how to redo it
    for kind, pos, build in candidates:
        if not scorer.affordable(train + held):
            report["stopped"] = f"budget of {budget} model calls reached"
            break
        made = build(current[pos], [o.name for o in current])
        option = current[pos].code_name
        kind, param = kind if isinstance(kind, tuple) else (kind, None)
        if made is None:
            edits.append({"option": option, "kind": kind, "parameter": param, "before": None,
                          "after": None, "kept": False,
                          "why": "the proposer returned nothing usable", "combination": None})
            applies.append((pos, None))
            continue
        apply, before, after = made
        trial = current[:pos] + [apply(current[pos])] + current[pos + 1:]
        what = (f"description of parameter {param!r} of {option!r}" if param else
                f"{kind} of {option!r}")
        t = scorer.score(trial, train, "train", what)
        edit = {"option": option, "kind": kind, "parameter": param, "before": before,
                "after": after,
                "train_before": _mean(cur_train["scores"]), "train_after": _mean(t["scores"]),
                "held_gain": None, "held_gain_lo": None, "held_gain_hi": None, "kept": False,
                "combination": None}
        edits.append(edit)
        applies.append((pos, apply))
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
    # Combinations ask the held-out side only, so one may fit in what a single candidate (both
    # sides) could not: tried whether or not the budget stopped the single candidates.
    combinations: list[dict] = []
    current, cur_held, untried_combinations = _combine(
        scorer, edits, applies, current, cur_held, held, combinations, report, budget)
    report["held_out_after"] = _figures(cur_held, bool(scorer.uses_p))
    report["per_option"] = {
        n: {"held_out_rows": sum(1 for i in held if labels[i] == n),
            "before": _mean([s for s, i in zip(base_held["scores"], held) if labels[i] == n]),
            "after": _mean([s for s, i in zip(cur_held["scores"], held) if labels[i] == n])}
        for n in names}
    report["proposer_calls"] = spent.proposer
    report["calls"] = spent.calls
    report["new_calls"] = spent.new
    report["cached_calls"] = spent.cached
    report["resumed_calls"] = spent.resumed
    report["candidates"] = report["tried"] = len(edits)
    report["candidates_total"] = len(candidates)
    report["untried"] = len(candidates) - len(edits) + untried_combinations
    report["combinations"] = len(combinations)
    report["rejected"] = sum(1 for e in edits if not e["kept"])
    report["rows_seen"] = {k: sorted(v) for k, v in scorer.seen.items()}
    if journal is not None:
        report["journal"] = {"path": str(journal), "rows_resumed": scorer.resumed,
                             "proposals_resumed": getattr(propose, "resumed", 0)}
    # each look at the held-out rows is a chance to keep an edit by luck; a combination is one
    gated = sum(1 for e in edits if e.get("held_gain") is not None) + len(combinations)
    if gated > 1:
        combined = (f" ({len(combinations)} of them combinations of single candidates)"
                    if combinations else "")
        report["caveat"] = (f"the held-out rows decided {gated} candidates{combined}, so the "
                            f"'after' figure leans optimistic; confirm it on rows neither side "
                            f"saw")
    if report["stopped"] is not None:
        report["warning"] = (f"improve: the budget of {budget} model calls stopped the search "
                             f"after {len(edits)} of {len(candidates)} candidates "
                             f"({report['untried']} left untried"
                             f"{', combinations included' if untried_combinations else ''}); "
                             f"pass a larger budget= to try them (through a CachedRuntime, "
                             f"what this run asked costs no new call)")
        warnings.warn(report["warning"], OptionWarning, stacklevel=2)
    if not any(e["kept"] for e in edits):
        report["found"] = "no edit helped on the held-out rows; the original option set is returned"
    return Improvement(original, current, edits, report, combinations)


def _combine(scorer: _Scorer, edits: list[dict], applies: list[tuple[int, Any]],
             current: list[Option], cur_held: dict, held: list[int], combinations: list[dict],
             report: dict, budget: int) -> tuple[list[Option], dict, int]:
    """The candidates that each showed a positive held-out gain without passing alone, tried
    together: those of one option, then all of them left; a combination is kept, its members
    with it, when its paired held-out gain is above zero at 95 %. Only the held-out side is
    asked (each member already gained on the training side). Returns the option set, its
    held-out scores and how many combinations the budget left untried."""
    positive = [k for k, e in enumerate(edits)
                if not e["kept"] and (e.get("held_gain") or 0) > 0]
    groups: dict[str, list[int]] = {}
    for k in positive:
        groups.setdefault(edits[k]["option"], []).append(k)
    plan: list[tuple[str | None, list[int]]] = [(o, ks) for o, ks in groups.items()
                                                if len(ks) > 1]
    tried: list[list[int]] = []
    step = 0
    while step < len(plan) + 1:
        if step < len(plan):
            option, members = plan[step]
        else:   # then all the positive candidates no combination has kept yet
            option, members = None, [k for k in positive if not edits[k]["kept"]]
            if len(members) < 2 or members in tried:
                break
        step += 1
        if not scorer.affordable(held):
            report["stopped"] = f"budget of {budget} model calls reached"
            left = len(plan) - step + 1
            rest = [k for k in positive if not edits[k]["kept"]]
            return current, cur_held, left + (step <= len(plan) and len(rest) > 1)
        tried.append(members)
        trial = list(current)
        for k in members:
            pos, apply = applies[k]
            trial[pos] = apply(trial[pos])
        what = (f"{len(members)} edits of {option!r} together" if option is not None else
                f"{len(members)} edits together")
        h = scorer.score(trial, held, "held_out", what)
        diffs = [a - b for a, b in zip(h["scores"], cur_held["scores"])]
        lo, hi = bootstrap_interval(diffs)
        combo = {"option": option, "members": list(members), "held_gain": _mean(diffs),
                 "held_gain_lo": lo, "held_gain_hi": hi, "kept": lo > 0}
        combinations.append(combo)
        if lo > 0:
            combo["why"] = "held-out gain of the edits together above zero at 95 %"
            current, cur_held = trial, h
            for k in members:
                edits[k].update(kept=True, combination=len(combinations) - 1,
                                why=f"kept together with {len(members) - 1} other edit(s) "
                                    f"(combination {len(combinations) - 1}): their held-out "
                                    f"gain together is above zero at 95 %")
        else:
            combo["why"] = "held-out gain of the edits together not above zero at 95 %"
    return current, cur_held, 0


async def aimprove(prompt: str, options: Any, rows: Any, **kwargs: Any) -> Improvement:
    """`improve` from async code: the search runs on a worker thread (each of its evaluations
    runs its rows concurrently as `evaluate` does), so the event loop is not blocked."""
    import asyncio
    return await asyncio.to_thread(improve, prompt, options, rows, **kwargs)


def _ranked_options(menu: list[Option], train: list[int], labels: list[str], base: dict,
                    uses_p: bool) -> tuple[list[int], dict[str, list[tuple[str, list[str]]]],
                                           list[tuple[str, str, float, float, float]]]:
    """The positions of the options in the order their candidates are proposed — the options
    of the most confused pairs first (the probability mass each took on the other's training
    rows; with no distributions, a wrong pick is all its mass), then the others by how often
    they were involved in a wrong pick — and, per option, the options it is confused with, with
    the words their menu lines share; and the pairs, most confused first."""
    names = [o.name for o in menu]
    rows = []
    for k, i in enumerate(train):
        probs = base["probs"][k] if uses_p else None
        if probs is None:  # a pick is a distribution with all its mass on the option picked
            pick = base["picks"][k]
            probs = {pick: 1.0} if pick in names else {}
        rows.append((labels[i], probs, 0.0))
    means, counts = mass_table(rows, names)
    pairs = ranked_pairs(means, counts, names)
    order: list[str] = []
    for a, b, *_ in pairs:
        order += [n for n in (a, b) if n not in order]
    errors = {n: 0 for n in names}
    for k, i in enumerate(train):
        pick = base["picks"][k]
        if pick != labels[i]:
            errors[labels[i]] += 1
            if pick in errors:
                errors[pick] += 1
    order += sorted((n for n in names if n not in order),
                    key=lambda n: (-errors[n], names.index(n)))
    words = {o.name: option_words(o.info()) for o in menu}
    everyone = list(words.values())
    confused: dict[str, list[tuple[str, list[str]]]] = {n: [] for n in names}
    for a, b, *_ in pairs:
        shared = shared_words(words[a], words[b], everyone)
        confused[a].append((b, shared))
        confused[b].append((a, shared))
    return [names.index(n) for n in order], confused, pairs


def _candidates(prompt: str, menu: list[Option], train: list[int], table: list[dict],
                labels: list[str], base: dict, propose: Callable | None, max_examples: int,
                rename: bool, ranked: list[int],
                confused: dict[str, list[tuple[str, list[str]]]]):
    """(kind, position, build) of each candidate edit, the options in `ranked` order (the
    most confused first; `confused` says with which, for the proposer's evidence). A
    build takes the option as it is now (after earlier kept edits) and the names the menu
    uses now, and returns (apply, before, after) — `apply` makes the edit on an option, so a
    combination can make it again on top of others — or None when nothing usable came of it.
    Only training rows feed them."""
    names = [o.name for o in menu]
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
                return ((lambda o: o.with_examples(made, None, replace=False)), None,
                        [{"request": r, "args": a} for r, a, _ in made])
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
                          if base["picks"][k] == name and labels[i] != name],
                "confused_with": confused[name][:3]}

            def build(option: Option, taken: list[str], evidence=evidence) -> Any:
                text = proposed(propose, option.code_name, option.description, evidence)
                if text is None:
                    return None
                return (lambda o: _edited(o, text)), option.description, text
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
                    return ((lambda o: o.with_param_description(pname, text, _SOURCE)),
                            before, text)
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
                    new = new.strip()
                    return (lambda o: o.renamed(new, _SOURCE)), option.name, new
                yield "name", pos, build
