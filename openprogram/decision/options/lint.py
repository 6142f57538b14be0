"""`decision.lint(options)`: the problems of an option set that need no model to find — what a
user otherwise meets only after paying for an evaluation. Each rule reads the options as the
menu shows them (names, descriptions, each visible parameter's description and allowed values):
two options whose descriptions say nearly the same thing, names that differ only in case, an
option with no description, a parameter whose menu line gives the model nothing but a name that
says little, and an allowed value that appears under two options (or is another option's name).
Each finding names the option, the rule and the fix; the report is a table. No model is called.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass

from .option_set import normalize

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from .kinds import Option

__all__ = ["lint", "Finding", "LintReport", "RULES"]

#: The rules, each with what it catches.
RULES = {
    "near_duplicate_descriptions": "two options whose descriptions say nearly the same thing: "
                                   "the model cannot tell from them which to pick",
    "names_differ_only_in_case": "two option names that differ only in case: a model that "
                                 "writes either may mean the other",
    "missing_description": "an option with no description: the model sees only its name",
    "missing_parameter_description": "a parameter with no description whose name says little "
                                     "(one or two letters, or a word such as data or value): "
                                     "the model has nothing to fill it from",
    "value_under_two_options": "an allowed value that appears under two options (or is "
                               "another option's name): a request naming it points at both",
}

#: How alike two descriptions must be (difflib's ratio over their words) to be near duplicates.
SIMILAR = 0.8
# Parameter names that say nothing of what to write in them.
_GENERIC = frozenset("""data value values val arg args argument arguments param params parameter
parameters input inputs obj object item items thing things stuff info tmp temp foo bar baz var
field fields payload kwargs opts misc""".split())
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Finding:
    """One problem of an option set: the option (for a rule about two options, both names,
    comma-separated), the rule (a key of `RULES`), the parameter when the problem is in one,
    what is wrong and how to fix it."""
    option: str
    rule: str
    problem: str
    fix: str
    parameter: str | None = None


class LintReport(list):
    """The findings of `decision.lint`, a list of `Finding`; `.to_frame()` as a table, and shown
    as one (escaped: option texts are the author's, a proposer's or a server's)."""

    COLUMNS = ["option", "rule", "parameter", "problem", "fix"]

    def __init__(self, findings: list[Finding], options: int):
        super().__init__(findings)
        self.options = options

    def to_frame(self) -> Any:
        from ...base.errors import require
        from ...trace.safe_html import quiet_frame
        pd = require("pandas", "pandas", "the lint report's to_frame()")
        return quiet_frame(pd.DataFrame([asdict(f) for f in self], columns=self.COLUMNS))

    def _headline(self) -> str:
        if not self:
            return f"lint: no problem found in {self.options} option(s)"
        return f"lint: {len(self)} problem(s) in {self.options} option(s)"

    def __repr__(self) -> str:
        lines = [self._headline()]
        lines += [f"- {f.option}{f' ({f.parameter})' if f.parameter else ''} [{f.rule}]: "
                  f"{f.problem} Fix: {f.fix}" for f in self]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from ...trace.safe_html import esc, html_table, wrap
        head = f"<p><b>{esc(self._headline())}</b></p>"
        if not self:
            return wrap(head, "op-lint")
        rows = [[f.option, f.rule, f.parameter, f.problem, f.fix] for f in self]
        return wrap(head + html_table(self.COLUMNS, rows, "op-lint-table"), "op-lint")


def lint(options: Any) -> LintReport:
    """The problems of `options` (any option set `decision.make` takes) that need no model:
    near-duplicate descriptions, names that differ only in case, missing descriptions of
    options and of parameters whose names say little, allowed values under two options (see
    `RULES`). Returns a `LintReport` (a list of `Finding`, shown as a table); an option set
    that cannot be used at all raises the `OptionError` `make` would."""
    menu = list(normalize(options))
    found: list[Finding] = []
    found += _missing(menu)
    found += _case_clashes(menu)
    found += _near_duplicates(menu)
    found += _shared_values(menu)
    return LintReport(found, len(menu))


def _visible(option: Option) -> list[Any]:
    """The parameters the menu shows (a hidden one is filled from the context or runtime)."""
    return [p for p in option.params if p.source == "llm"]


def _missing(menu: list[Option]) -> list[Finding]:
    out = []
    for o in menu:
        if not (o.description or "").strip():
            out.append(Finding(o.name, "missing_description",
                               f"option {o.name!r} has no description: the model sees only "
                               f"its name.",
                               "say what picking it does: a docstring for a function, the "
                               "second item of a (value, description) pair, a schema's or "
                               "tool's \"description\"."))
        for p in _visible(o):
            if not (p.field.description or "").strip() and _says_little(p.name):
                out.append(Finding(o.name, "missing_parameter_description",
                                   f"parameter {p.name!r} of {o.name!r} has no description "
                                   f"and its name says little of what to write in it.",
                                   f"describe it: {p.name}: Annotated[<type>, \"what it "
                                   f"holds\"], input_meta={{{p.name!r}: {{'description': "
                                   f"...}}}}, or the property's \"description\"; or give it a "
                                   f"name that says what it holds.", p.name))
    return out


def _says_little(name: str) -> bool:
    """A parameter name the model cannot act on: every part of it (split at `_` and at
    camelCase) is one or two letters, a number, or a generic word such as data or value."""
    parts = [w.lower() for w in re.split(r"_+|(?<=[a-z])(?=[A-Z])", name) if w]
    return all(len(w.rstrip("0123456789")) <= 2 or w.rstrip("0123456789") in _GENERIC
               for w in parts)


def _case_clashes(menu: list[Option]) -> list[Finding]:
    groups: dict[str, list[str]] = {}
    for o in menu:
        groups.setdefault(o.name.lower(), []).append(o.name)
    return [Finding(", ".join(names), "names_differ_only_in_case",
                    f"the options {', '.join(map(repr, names))} differ only in case.",
                    "rename one so the names differ in a word, not in case.")
            for names in groups.values() if len(names) > 1]


def _near_duplicates(menu: list[Option]) -> list[Finding]:
    said = [(o.name, _WORD.findall((o.description or "").lower())) for o in menu]
    out = []
    for k, (a, wa) in enumerate(said):
        for b, wb in said[k + 1:]:
            if not wa or not wb:
                continue   # a missing description is its own finding
            ratio = difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio()
            if ratio >= SIMILAR:
                out.append(Finding(f"{a}, {b}", "near_duplicate_descriptions",
                                   f"the descriptions of {a!r} and {b!r} are {ratio:.0%} the "
                                   f"same words in the same order.",
                                   f"say in each what sets it apart from the other (when to "
                                   f"pick {a!r} rather than {b!r}), or merge the two "
                                   f"options."))
    return out


def _shared_values(menu: list[Option]) -> list[Finding]:
    """An allowed value under parameters of two options, or equal (ignoring case) to another
    option's name. The same parameter name with the same value under two options is a shared
    vocabulary (an `urgency` both take), not a pointer to one of them, and is left alone."""
    where: dict[str, list[tuple[str, str]]] = {}
    shown: dict[str, Any] = {}
    for o in menu:
        for p in _visible(o):
            for v in p.field.options or ():
                key = json.dumps(v, sort_keys=True, default=repr)
                shown.setdefault(key, v)
                if (o.name, p.name) not in where.setdefault(key, []):
                    where[key].append((o.name, p.name))
    names = {o.name.lower(): o.name for o in menu}
    out = []
    for key, places in where.items():
        value = shown[key]
        options = list(dict.fromkeys(o for o, _ in places))
        if len(options) > 1 and len({p for _, p in places}) > 1:
            at = ", ".join(f"{o}.{p}" for o, p in places)
            out.append(Finding(", ".join(options), "value_under_two_options",
                               f"the value {value!r} is allowed under {at}: a request that "
                               f"names it points at {len(options)} options.",
                               "keep each value under one option, or say in the "
                               "descriptions which option a request naming it should pick.",
                               at))
        other = names.get(str(value).lower()) if isinstance(value, str) else None
        if other is not None and any(o != other for o in options):
            at = ", ".join(f"{o}.{p}" for o, p in places if o != other)
            out.append(Finding(f"{other}, {', '.join(o for o in options if o != other)}",
                               "value_under_two_options",
                               f"the value {value!r} of {at} is also the name of option "
                               f"{other!r}: a request that names it points at both.",
                               f"rename the option or the value, or say in the "
                               f"descriptions when {other!r} is meant.", at))
    return out
