"""Shortlists: narrowing a menu of hundreds of options to the few a request is about.

An agent with a few MCP servers has a hundred tools or more, and rendering every one into every
prompt costs tokens and, past some size, picks. `shortlist=k` (or `Shortlist(k, by=...)`) ranks
the options against the request before the menu is rendered and shows the model only the top k;
a pick of an option that was not shown is refused like any unknown call. The default ranker is
Okapi BM25 (k1=1.2, b=0.75) over each option's name (split at `_`, `-`, `.` and camelCase, and
counted twice: a name is the densest description there is), its description and its parameters'
names and descriptions; standard library only, an inverted index built once per option set
(kept on the `Menu`, which the option cache hands back for the same options) and per option
(kept on the option). A ranker of the user's (an embedding model) is a callable
`by(request, options) -> scores`, one number per option.

A shortlist can hurt: an option the ranker misses cannot be picked at all. `Shortlist.ranks`
gives the rank of the expected option for labelled requests and `Shortlist.recall` how often it
was shown, so the cost is measured on the user's own rows before a shortlist is trusted
(benchmarks/bench_shortlist.py measures the default ranker on a 600-tool menu).

`shortlist="native"` leaves the ranking to the provider, where it has one: in tools mode every
option is sent marked `defer_loading`, beside the provider's own tool search (Anthropic's tool
search tool), and the provider loads the few it finds for the request; the trace's `shortlist`
says so and each attempt's raw record holds what the provider searched and loaded
(`loaded_tools`). A runtime without native tool search, or another way of asking, is refused
at the call with the fix: `shortlist=k` for the built-in ranker.
"""
from __future__ import annotations

import math
import re
import warnings

from ...base.errors import ArgumentError, OptionWarning
from ...base.model_protocol import wrapped
from .kinds import Option
from .menu import Menu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["Shortlist", "NativeSearch", "check_shortlist", "narrow", "terms", "BM25",
           "defer_tools", "loaded_tools"]

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
# Words that say nothing about which option is meant (English function words, and the verbs
# of every request). Kept short: a word the ranker drops can never match.
_STOP = frozenset("""a an the and or of to in on for with by at from as is are be this that it
its into about please can could would you me my i we our your do does should want need""".split())


def terms(text: str) -> list[str]:
    """The words BM25 counts: split at anything not a letter or digit and at camelCase,
    lower-cased, function words left out, a plural's final s dropped (so "files" finds
    "file")."""
    out = []
    for w in _WORD.findall(text or ""):
        w = w.lower()
        if w in _STOP:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


def _option_terms(option: Option) -> list[str]:
    got = option.__dict__.get("_shortlist_terms")
    if got is None:
        words = terms(option.name) * 2 + terms(option.description or "")
        for p in option.params:
            if p.source == "llm":
                words += terms(p.name) + terms(p.field.description or "")
        got = option.__dict__["_shortlist_terms"] = words
    return got


class BM25:
    """Okapi BM25 over a menu's options, built once: postings term -> [(option, tf)]."""
    k1, b = 1.2, 0.75

    def __init__(self, menu: Sequence[Option]):
        self.n = len(menu)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        lengths = []
        for i, option in enumerate(menu):
            words = _option_terms(option)
            lengths.append(len(words))
            counts: dict[str, int] = {}
            for w in words:
                counts[w] = counts.get(w, 0) + 1
            for w, tf in counts.items():
                self.postings.setdefault(w, []).append((i, tf))
        avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        self.norm = [self.k1 * (1 - self.b + self.b * n / (avg or 1.0)) for n in lengths]
        self.idf = {w: math.log(1 + (self.n - len(p) + 0.5) / (len(p) + 0.5))
                    for w, p in self.postings.items()}

    @classmethod
    def of(cls, menu: Menu) -> BM25:
        """The index of `menu`, built on first use and kept on it."""
        index = menu.__dict__.get("_bm25")
        if index is None:
            index = menu.__dict__["_bm25"] = cls(menu)
        return index

    def scores(self, request: str) -> list[float]:
        out = [0.0] * self.n
        for w in set(terms(request)):
            posting = self.postings.get(w)
            if posting is None:
                continue
            idf, k1 = self.idf[w], self.k1
            for i, tf in posting:
                out[i] += idf * tf * (k1 + 1) / (tf + self.norm[i])
        return out


class Shortlist:
    """Show the model only the `k` options that rank highest against the request. `by` is
    "bm25" (the default ranker, see the module) or a callable `by(request, options)` returning
    one score per option (higher: more likely meant)."""

    def __init__(self, k: int = 20,
                 by: str | Callable[[str, list[Option]], Sequence[float]] = "bm25"):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ArgumentError(f"a shortlist's k is how many options the model is shown, a "
                                f"whole number >= 1 (None turns the shortlist off), got {k!r}")
        if by != "bm25" and not callable(by):
            raise ArgumentError(f"Shortlist(by=...) is 'bm25' or a callable "
                                f"by(request, options) -> one score per option, got {by!r}")
        self.k, self.by = k, by

    @property
    def ranker(self) -> str:
        return "bm25" if self.by == "bm25" else getattr(self.by, "__name__", repr(self.by))

    def scores(self, request: str, menu: Menu) -> list[float]:
        if self.by == "bm25":
            return BM25.of(menu).scores(request)
        try:
            got = list(self.by(request, list(menu)))
        except Exception as exc:
            raise ArgumentError(f"the shortlist's ranker {self.ranker} raised "
                                f"{type(exc).__name__}: {exc}; fix it, or use "
                                f"shortlist=Shortlist(k) for the built-in BM25") from exc
        if len(got) != len(menu) or not all(isinstance(s, (int, float)) and
                                            not isinstance(s, bool) and s == s for s in got):
            raise ArgumentError(f"the shortlist's ranker {self.ranker} must return one number "
                                f"per option ({len(menu)}), got {len(got)} values")
        return [float(s) for s in got]

    def rank(self, request: str, menu: Menu) -> list[tuple[str, float]]:
        """Every option's name and score, best first (ties keep the menu's order)."""
        scores = self.scores(request, menu)
        order = sorted(range(len(menu)), key=lambda i: -scores[i])
        return [(menu[i].name, scores[i]) for i in order]

    def ranks(self, options: Any, labelled: Sequence[tuple[str, str]]) -> list[int]:
        """For each (request, expected option name): the expected option's rank (1 = first)."""
        from .option_set import normalize
        menu = normalize(options)
        if any(name not in menu.by_name for _, name in labelled):
            missing = sorted({n for _, n in labelled if n not in menu.by_name})
            raise ArgumentError(f"expected options not in the option set: {missing[:5]}")
        out = []
        for request, name in labelled:
            ranking = self.rank(request, menu)
            out.append(next(i for i, (n, _) in enumerate(ranking, 1) if n == name))
        return out

    def recall(self, options: Any, labelled: Sequence[tuple[str, str]]) -> float:
        """How often the expected option is among the k shown (recall@k) over labelled rows."""
        ranks = self.ranks(options, labelled)
        return sum(r <= self.k for r in ranks) / len(ranks) if ranks else float("nan")

    def narrow(self, request: str, menu: Menu, *, runtime: Any = None,
               way: Any = None) -> tuple[Menu, dict | None]:
        """The k options of `menu` that rank highest against `request`, in the menu's own
        order, and what the trace records: the ranker, k, the ranking (names and scores, best
        first), the names shown and the names left out. A k not below the menu's size shows
        every option (with a warning) and records nothing."""
        if self.k >= len(menu):
            warnings.warn(f"shortlist k={self.k} is not smaller than the menu "
                          f"({len(menu)} options): every option is shown", OptionWarning,
                          stacklevel=5)
            return menu, None
        ranking = self.rank(request, menu)
        shown = {n for n, _ in ranking[:self.k]}
        narrowed = Menu(o for o in menu if o.name in shown)  # the menu's order, not the rank's
        return narrowed, {"by": self.ranker, "k": self.k, "of": len(menu),
                          "ranking": [[n, round(s, 4)] for n, s in ranking],
                          "shown": [o.name for o in narrowed],
                          "left_out": [n for n, _ in ranking[self.k:]]}

    def __repr__(self) -> str:
        return f"Shortlist(k={self.k}, by={self.ranker!r})"


class NativeSearch:
    """`shortlist="native"`: every option is sent, deferred, and the provider's own tool
    search loads the ones it finds for the request (see the module)."""
    ranker = "native"

    def narrow(self, request: str, menu: Menu, *, runtime: Any = None,
               way: Any = None) -> tuple[Menu, dict | None]:
        """The whole menu (the provider searches it), once `runtime` and the way of asking
        are checked to allow it."""
        if way is None or not way.options_as_tools:
            raise ArgumentError(f"shortlist='native' sends the options as deferred native tools "
                                f"for the provider's tool search, which needs mode='tools' "
                                f"(this call uses mode={getattr(way, 'name', None)!r}); use "
                                f"mode='tools', or shortlist=k for the built-in BM25 shortlist")
        if not any(rt.native_tool_search for rt in wrapped(runtime)):
            name = type(runtime).__name__ if runtime is not None else "no runtime"
            raise ArgumentError(f"shortlist='native' needs a runtime whose provider searches "
                                f"deferred tools itself (AnthropicRuntime: Anthropic's tool "
                                f"search tool); {name} has none. Use shortlist=k (e.g. 20) for "
                                f"the built-in BM25 shortlist, which works with every runtime")
        return menu, {"by": "native", "k": None, "of": len(menu), "ranking": [],
                      "shown": [o.name for o in menu], "left_out": [], "deferred": True}

    def __repr__(self) -> str:
        return "'native'"


def check_shortlist(shortlist: Any) -> Shortlist | NativeSearch | None:
    """`shortlist=` as given: None, a k, a Shortlist, or "native"."""
    if shortlist is None or isinstance(shortlist, (Shortlist, NativeSearch)):
        return shortlist
    if shortlist == "native":
        return NativeSearch()
    if isinstance(shortlist, int) and not isinstance(shortlist, bool):
        return Shortlist(shortlist)
    raise ArgumentError(f"shortlist= is a number of options to show (e.g. 20), "
                        f"Shortlist(k, by=...) or None, got {shortlist!r}")


def narrow(shortlist: Shortlist | NativeSearch | None, request: str, menu: Menu, *,
           runtime: Any = None, way: Any = None) -> tuple[Menu, dict | None]:
    """The menu the model is shown, and what the trace records of the narrowing (None without
    a shortlist): see `Shortlist.narrow` and `NativeSearch.narrow`. `way` is the decision's way
    of asking (a `Mode` class)."""
    if shortlist is None:
        return menu, None
    return shortlist.narrow(request, menu, runtime=runtime, way=way)


def defer_tools(request: dict) -> dict:
    """A tools-mode request (`{"tools": [...], ...}`) with every tool marked `defer_loading`:
    the provider loads it only when its own tool search finds it."""
    return {**request, "tools": [{**t, "defer_loading": True} for t in request.get("tools") or []]}


def loaded_tools(raw: Any) -> list[str] | None:
    """The tools a provider's native search loaded, read from a reply's raw record (the
    `tool_reference`s of its tool search results), or None when it searched nothing."""
    response = (raw or {}).get("response") if isinstance(raw, dict) else None
    found: list[str] = []
    searched = False

    def walk(node: Any) -> None:
        nonlocal searched
        if isinstance(node, dict):
            if node.get("type") == "tool_search_tool_result":
                searched = True
            if node.get("type") == "tool_reference" and isinstance(node.get("tool_name"), str):
                found.append(node["tool_name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(response)
    return found if searched or found else None
