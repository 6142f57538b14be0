"""`Improvement`: what `improve` found — the options before and after, every edit tried with its
figures on both sides, the combinations, the report (text, a frame, the escaped HTML view).
"""
from __future__ import annotations

import json

from ...decision.options import Option

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Improvement:
    """What `decision.improve` found: `.options` (the option set to pass to `make`, edits
    applied), `.original`, `.edits` (every candidate tried, kept or not, with its scores),
    `.combinations` (the candidates with a positive held-out gain tried together, kept or not),
    `.report` (the split, held-out before / after with 95 % intervals and per option, the calls
    spent and how they were answered, the candidates tried and those the budget left untried),
    `.diff()` (the kept edits as text to paste into the code), `.to_frame()`."""

    def __init__(self, original: list[Option], options: list[Option], edits: list[dict],
                 report: dict, combinations: list[dict] | None = None):
        self.original, self.options, self.edits, self.report = original, options, edits, report
        self.combinations = combinations or []

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
                                     "held_gain_hi", "kept", "why", "combination"])

    def _headline(self) -> str:
        r = self.report
        b, a = r["held_out_before"], r["held_out_after"]
        key = "mean_p_expected" if "mean_p_expected" in b else "accuracy"
        tried = f"{r.get('tried', len(self.edits))} of {r.get('candidates_total', len(self.edits))}"
        untried = f", {r['untried']} left untried by the budget" if r.get("untried") else ""
        combined = (f" (+{len(self.combinations)} combination(s) tried)"
                    if self.combinations else "")
        cached = r.get("calls", 0) - r.get("new_calls", r.get("calls", 0))
        return (f"Improvement: {len(self.kept)} of {len(self.edits)} edits kept; held-out "
                f"{key} {b[key]:.3f} → {a[key]:.3f} on {r['split']['held_out']} rows; "
                f"candidates tried {tried}{combined}{untried}; {r['calls']} model calls"
                + (f" ({cached} answered from a cache or the journal)" if cached else ""))

    def __repr__(self) -> str:
        return self._headline()

    def _repr_html_(self) -> str:
        # The library's one wrapper, as every view: a proposed description is a model's text,
        # which MathJax must not typeset (`$\href{javascript:…}$`) nor the front end link.
        from ...trace.safe_html import TABLE_STYLE, esc, html_table, pre, wrap
        rows = [[e.get(k) for k in ("option", "kind", "parameter", "after", "held_gain",
                                    "kept", "why")]
                for e in [*self.edits, *(_shown_combination(c, self.edits)
                                         for c in self.combinations)]]
        table = html_table(["option", "kind", "parameter", "edit", "held-out gain", "kept",
                            "why"], rows)
        warning = self.report.get("warning")
        return wrap(f"{TABLE_STYLE}<p>{esc(self._headline())}</p>"
                    + (f"<p><b>{esc(warning)}</b></p>" if warning else "")
                    + f"{table}{pre(self.diff())}", "op-improve-view")


def _shown_combination(c: dict, edits: list[dict]) -> dict:
    """A combination as a row of the edits' table: its members named by option and kind."""
    members = ", ".join(f"{edits[k]['option']} {edits[k]['kind']}" for k in c["members"])
    return {"option": c["option"] or "(all)", "kind": "combination", "parameter": None,
            "after": members, "held_gain": c["held_gain"], "kept": c["kept"],
            "why": c["why"]}
