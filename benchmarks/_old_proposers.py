"""`decision.improve`'s proposers module as it was before issue 53
(openprogram/evaluation/proposers.py at commit ce24f4b), kept verbatim but for its imports so
benchmarks/bench_improve.py can run the old search beside the new one in one run.
Not imported by the library or the tests.

The module's own docstring follows.

Where `improve`'s rewritten descriptions and names come from: a proposer is a runtime asked
through the decision mechanism itself, a callable of the user's, or the deterministic built-in
`"keywords"` (`keyword_proposer`); its answers are journaled with the run, so a resumed
`improve` asks nothing twice. Everything a proposer writes is untrusted text: cut to a bound
before it reaches a menu, and a proposed name must be an identifier.
"""
from __future__ import annotations

import json
import re

from openprogram.base.errors import DecisionError, UsageError
from openprogram.decision.options import Option

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


__all__ = ["keyword_proposer", "MAX_DESCRIPTION", "NAME"]

MAX_DESCRIPTION = 400   # a proposer's text is untrusted: cut before it reaches a menu
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def digest(value: Any) -> str:
    """A short, stable digest of JSON data: the key of a journaled answer or section."""
    import hashlib
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode(
        "utf-8", "surrogatepass")).hexdigest()[:16]


def keyword_proposer(name: str, description: str, evidence: dict) -> str | None:
    """The built-in proposer (deterministic, no model): the description, plus the words most
    typical of the training requests labelled with this option and rare in the others'
    (asked for a name, `evidence["rename"]`: the name joined to the most typical word). It
    works offline and in tests; a model proposer writes better prose."""
    def words(text: str) -> set[str]:
        return {w.strip(".,;:!?\"'()").lower() for w in text.split() if len(w) > 3}
    mine = [words(t) for t in evidence["requests"]]
    theirs = [words(t) for t in evidence["other_requests"]]
    if not mine:
        return None
    score: dict[str, float] = {}
    for ws in mine:
        for w in ws:
            score[w] = score.get(w, 0) + 1 / len(mine)
    for ws in theirs:
        for w in ws:
            if w in score:
                score[w] -= 1 / max(len(theirs), 1)
    top = [w for w, s in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])) if s > 0][:6]
    if not top:
        return None
    if evidence.get("rename"):
        word = re.sub(r"[^a-z0-9_]", "", top[0])
        return f"{name}_{word}" if word else None
    return f"{description} (requests about: {', '.join(top)})".strip()


def ask_model(proposer: Any, counter: list[int]) -> Callable[[str, str, dict], str | None]:
    """A runtime as a proposer: asked through the decision mechanism, with one option whose
    argument is the new description."""
    from openprogram.decision.entry import make

    def rewrite(description: str) -> str:
        """Use this new description of the option."""
        return description

    def rename(name: str) -> str:
        """Use this new name of the option (a short snake_case identifier)."""
        return name

    def ask(name: str, description: str, evidence: dict) -> str | None:
        wrong = "\n".join(f"- {t!r} was picked as {p!r}" for t, p in evidence["missed"][:8])
        taken = "\n".join(f"- {t!r} (meant {e!r})" for t, e in evidence["taken"][:8])
        examples = "\n".join(f"- {t!r}" for t in evidence["requests"][:8])
        param = evidence.get("parameter")
        what = (f"Parameter {param!r} of option {evidence['option']!r}" if param
                else f"Option {name!r}")
        values = "".join(f"\nValues it was given when the option was picked right: "
                         f"{json.dumps(evidence['values'][:8], default=str)}"
                         for _ in [0] if param and evidence.get("values"))
        text = (f"You improve the description of one "
                f"{'parameter of an option' if param else 'option'} in a menu a model picks "
                f"from.\n{what}, described now as: {description!r}.{values}\n"
                f"Requests that should pick it:\n{examples or '- (none)'}\n"
                f"Requests that should have picked it but did not:\n{wrong or '- (none)'}\n"
                f"Requests that picked it but should not have:\n{taken or '- (none)'}\n"
                f"Write a short description (one or two sentences) of the "
                f"{'parameter' if param else 'option'} that makes the right requests pick "
                f"this option and the wrong ones not.")
        menu: dict = {"rewrite": rewrite}
        if evidence.get("rename"):
            text = (f"You improve the name of one option in a menu a model picks from.\n"
                    f"Option {description!r} (in the code: {name!r}).\n"
                    f"Requests that should pick it:\n{examples or '- (none)'}\n"
                    f"Requests that should have picked it but did not:\n{wrong or '- (none)'}\n"
                    f"Requests that picked it but should not have:\n{taken or '- (none)'}\n"
                    f"Write a short snake_case name that makes the right requests pick this "
                    f"option and the wrong ones not.")
            menu = {"rename": rename}
        from openprogram.trace.decision_trace import last_trace
        try:
            out = make(text, menu, runtime=proposer, max_retries=1)
        except DecisionError:
            out = None
        trace = last_trace()
        made = sum(1 for a in (trace.attempts if trace else ()) if not a.cached)
        counter[0] += made   # not yet charged to the budget
        counter[1] += made   # all the proposer's calls
        return out
    return ask


class Journaled:
    """A proposer whose answers are journaled (section "improve: proposals"), keyed by what
    it was asked: a resumed run reads each answer back instead of asking again, so it meets
    the same candidates and makes no proposer call for them."""

    def __init__(self, propose: Callable, path: Any, prompt: str, menu: list[Option],
                 proposer: Any, runtime: Any):
        from openprogram.decision.options import render_menu
        self.propose, self.path, self.resumed = propose, path, 0
        # the proposer, named as a runtime is: another proposer is another journal
        source = runtime if proposer is None else proposer
        who = source if isinstance(source, str) else getattr(source, "name", None) or \
            getattr(source, "__qualname__", type(source).__name__)
        self.section = {"section": "improve: proposals", "prompt": prompt,
                        "menu": render_menu(menu), "mode": "proposer", "runtime": str(who)}

    def __call__(self, name: str, description: str, evidence: dict) -> Any:
        from openprogram.evaluation.journal import Journal
        key = digest([name, description, evidence])
        j = Journal(self.path, self.section)
        try:
            for _, line, _ in j.done.values():
                if line.get("key") == key:
                    self.resumed += 1
                    text = line.get("text")
                    return text if isinstance(text, str) else None
            text = self.propose(name, description, evidence)
            kept = " ".join(text.split())[:MAX_DESCRIPTION] if isinstance(text, str) else None
            j.write_row(max(j.done, default=-1) + 1, key,
                        {"status": "resolved" if kept else "failed", "option": name,
                         "text": kept})
            return kept
        finally:
            j.close()


def proposer_of(proposer: Any, runtime: Any, counter: list[int]) -> Callable | None:
    if proposer == "keywords":
        return keyword_proposer
    if proposer is None:
        proposer = runtime
    if hasattr(proposer, "call_model"):
        return ask_model(proposer, counter)
    if callable(proposer):
        return proposer
    raise UsageError(f"improve(proposer=...): a Runtime, a callable (name, description, "
                     f"evidence) -> str, or 'keywords'; got {proposer!r:.60}")


def proposed(propose: Callable, name: str, description: str, evidence: dict) -> str | None:
    """The proposer's text for `name`, cut to a bound, or None when nothing usable came."""
    try:
        text = propose(name, description, evidence)
    except DecisionError:
        text = None
    if not isinstance(text, str) or not text.strip() or text.strip() == description:
        return None
    return " ".join(text.split())[:MAX_DESCRIPTION]
