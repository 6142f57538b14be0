"""Which options a model confuses, from the probabilities it gave over a table of labelled rows:
for each expected option, the mean probability mass every other option took on its rows (the
map `EvaluationResult.confusability()` draws), the pairs of options ranked by the mass they
take from each other (`confused_pairs`, and the order in which `improve` proposes edits), and
the words two options' menu lines share — what in their texts overlaps. Plain arithmetic over
`(expected, {option: p})` rows, so any confidence source (exact, log-probabilities, samples) and
a table of bare picks (a pick is a distribution with all its mass on one option) read the same.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["NONE", "mass_table", "ranked_pairs", "option_words", "shared_words"]

#: The column of the mass on replies that named no option.
NONE = "(no option)"

# Words that carry no meaning of an option's own: an overlap in them says nothing.
_STOP = frozenset("""a an the and or but if of to in on at by for from with without into onto
over under about as is are was were be been being it its this that these those there here
their them they he she his her we our you your i me my not no nor so than then too very can
could should would may might must will shall do does did done has have had having which who
whom whose what when where why how all any each every some such only own same other others
more most less one ones pick picks picked option options call args str int float bool list
dict required optional default e g eg""".split())
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)


def mass_table(rows: Iterable[tuple[str, Mapping[str, float], float]],
               names: Sequence[str]) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Per expected option: the mean probability each option of `names` (and `NONE`, the mass on
    no option) took over the rows expected to pick it, and how many rows that is. `rows` are
    `(expected, probs, other)`; an expected option off `names` is left out. The expected
    option's own mean is in the table too (the diagonal): a caller drops it where only the
    wrong options matter."""
    sums = {e: dict.fromkeys([*names, NONE], 0.0) for e in names}
    counts = dict.fromkeys(names, 0)
    for expected, probs, other in rows:
        if expected not in sums:
            continue
        counts[expected] += 1
        row = sums[expected]
        for name, p in probs.items():
            if name in row:
                row[name] += p
        row[NONE] += other
    means = {e: {o: (s / counts[e] if counts[e] else float("nan")) for o, s in row.items()}
             for e, row in sums.items()}
    return means, counts


def ranked_pairs(means: dict[str, dict[str, float]], counts: dict[str, int],
                 names: Sequence[str]) -> list[tuple[str, str, float, float, float]]:
    """The unordered pairs of options, most confused first: `(a, b, mass, a_to_b, b_to_a)`,
    where `a_to_b` is the mean mass b took on a's rows and `mass` the mean over both options'
    rows of the mass the other took (so a pair seen on more rows weighs by its rows). Pairs
    with no mass are left out; a tie keeps menu order."""
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            na, nb = counts.get(a, 0), counts.get(b, 0)
            if not na + nb:
                continue
            ab = means[a][b] if na else 0.0
            ba = means[b][a] if nb else 0.0
            mass = (ab * na + ba * nb) / (na + nb)
            if mass > 0:
                out.append((a, b, mass, ab, ba))
    order = {n: k for k, n in enumerate(names)}
    out.sort(key=lambda t: (-t[2], order[t[0]], order[t[1]]))
    return out


def option_words(info: Mapping[str, Any]) -> set[str]:
    """The words an option's menu lines say, from its table row (`Option.info()`, or a trace's
    `options`): the name's parts, the description, each parameter's name, description and
    allowed values, and the requests of its worked examples; lower case, stop words out."""
    parts = [str(info.get("name") or "").replace("_", " "), str(info.get("description") or "")]
    for p in info.get("params") or ():
        if p.get("hidden"):
            continue   # a hidden parameter is not in the menu
        parts += [str(p.get("name") or "").replace("_", " "), str(p.get("description") or "")]
        parts += [str(v) for v in p.get("options") or ()]
    parts += [str(e.get("request") or "") for e in info.get("examples") or ()]
    return {w for w in _WORD.findall(" ".join(parts).lower()) if w not in _STOP}


def shared_words(a: set[str], b: set[str], everyone: Sequence[set[str]] = ()) -> list[str]:
    """The words two options' menu lines share, sorted; with three or more options, a word every
    option says (the menu's own vocabulary, like "customer" in a support desk's) is left out:
    it cannot be what tells these two apart."""
    common = set.intersection(*map(set, everyone)) if len(everyone) > 2 else set()
    return sorted((a & b) - common)
