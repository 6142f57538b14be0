"""A decision's settings: the one definition of the keywords that say how to decide.

Every entry point that makes decisions — `make` / `amake`, `parse_args`, `agent` / `aagent` and
`Runtime.exec` / `aexec`, `evaluate` / `aevaluate`, `compare` / `acompare` and each `Variant`,
`improve`, the magics — takes some of the same keywords: `runtime=`, `context=`, `max_retries=`,
`timeout_s=`, `validate=`, `reask=`, `mode=`, `confidence=`, `min_confidence=`, `low_confidence=`,
`pick_set=`, `repair=`, `shortlist=`. `SETTINGS` defines each once: its name, default, type, check
and documentation. An entry point builds one frozen `Settings` from the keywords it was called with
(`Settings.of`), which checks every value before any model call, and passes it whole: `Plan` and
`Decider` take it, an evaluation's rows share it, a `Variant` is settings with some of them
overridden (`Settings.replace`). Where a setting names a strategy, the checked value is the
strategy itself, chosen from what the caller wrote: the way of asking (`mode`: a class of
modes.py), the repair level (`repair`: repair/), where the probabilities come from (`confidence`:
confidence.py). An entry point's signature (what `help()` and `inspect.signature` show) and the
keyword part of its docstring are made from `SETTINGS` too (`takes_settings`), so a new setting is
one `Setting` here (and the code that reads it): every entry point that takes the decision's
settings takes it, and tests/decision/test_settings.py checks each accepts exactly the keywords it
documents.
"""
from __future__ import annotations

import inspect

from ..base.errors import ArgumentError, UsageError
from ..base.model_protocol import check_timeout
from ..trace.records import Reask, build
from .confidence import check_threshold, confidence_of
from .conformal import check_pick_set
from .modes import get_mode
from .options.shortlist import check_shortlist
from .repair import repair_level

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, TypedDict, TypeVar

    from ..base.model_protocol import ModelCaller
    from ..base.type_names import ModeName
    from ..trace.confidence import Samples
    from .confidence import ConfidenceSource
    from .conformal import PickSetPolicy
    from .modes import Mode
    from .options.shortlist import NativeSearch, Shortlist
    from .repair import RepairLevel
    F = TypeVar("F", bound=Callable[..., Any])

    class Keywords(TypedDict, total=False):
        """The keywords of `SETTINGS`, for type checkers (`**settings: Unpack[Keywords]`);
        tests/decision/test_settings.py holds it to `SETTINGS`."""
        runtime: ModelCaller | None
        context: dict[str, Any] | None
        max_retries: int
        timeout_s: float | None
        validate: Callable[..., Any] | None
        reask: str | Callable[[Reask], str] | None
        mode: ModeName
        confidence: bool | Samples
        min_confidence: float | None
        low_confidence: str | None
        pick_set: PickSetPolicy | None
        repair: str | None
        shortlist: int | str | Shortlist | None

__all__ = ["Setting", "SETTINGS", "Settings", "takes_settings", "checked", "ALL", "TURN",
           "AGENT", "COMPARE", "PARSE", "VARIANT", "IMPROVE", "REVALIDATE", "PLAN", "MAGIC",
           "check_reask", "check_validate", "REASK_FIELDS"]


class Setting:
    """One keyword of a decision's settings: its `name`, `default`, the type a caller writes
    (`annotation`, as text), what it does (`doc`), `check(value, where)`, which returns the
    value a decision keeps (the strategy a name names) or raises what is wrong with it, and
    `written(kept)`, the kept value as a caller writes it again."""
    __slots__ = ("name", "default", "annotation", "doc", "check", "written", "checked_default")

    def __init__(self, name: str, default: Any, annotation: str, doc: str,
                 check: Callable[[Any, str], Any] | None = None,
                 written: Callable[[Any], Any] | None = None) -> None:
        self.name, self.default, self.annotation, self.doc = name, default, annotation, doc
        self.check, self.written = check, written
        # every decision that leaves it out keeps this, checked once
        self.checked_default = default if check is None else check(default, "")

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, default={self.default!r})"


REASK_FIELDS = tuple(Reask.__dataclass_fields__)


def check_reask(reask: Any, where: str = "") -> Callable[[Reask], str] | None:
    """`reask=` as a function of a `Reask`: None (the default text), a format template naming
    only the fields of `Reask`, or a callable. Checked before any model call."""
    if reask is None or callable(reask):
        own: Callable[[Reask], str] | None = reask
        return own
    if not isinstance(reask, str):
        raise UsageError(f"reask= takes a format template (str) or a callable of the failure, "
                         f"got {type(reask).__name__}")
    import string  # at first use: most decisions never write their own re-ask
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(reask) if f is not None}
    except ValueError as exc:
        raise ArgumentError(f"reask= template is not a valid format string ({exc}); write fields "
                            f"as {{error}} and a literal brace as {{{{") from None
    bad = sorted(n for n in names if n.split(".")[0].split("[")[0] not in REASK_FIELDS or not n)
    if bad:
        raise ArgumentError(f"reask= template names unknown field(s) "
                            f"{', '.join(map(repr, bad))}; the fields are "
                            f"{', '.join('{' + f + '}' for f in REASK_FIELDS)}")
    return lambda r: reask.format(**{f: getattr(r, f) for f in REASK_FIELDS})


def check_validate(validate: Any, where: str = "") -> Callable[..., Any] | None:
    """`validate=`: None or a callable of the `Pick`. Checked before any model call."""
    if validate is not None and not callable(validate):
        raise UsageError(f"validate= takes a callable of the pick (raise openprogram.Retry "
                         f"to reject it), got {type(validate).__name__}")
    rule: Callable[..., Any] | None = validate
    return rule


def _retries(max_retries: Any, where: str = "") -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ArgumentError(f"max_retries must be a whole number >= 0 (0 turns re-asks off), "
                            f"got {max_retries!r}")
    return max_retries


def _timeout(timeout_s: Any, where: str = "") -> Any:
    check_timeout(timeout_s)
    return timeout_s


def _context(context: Any, where: str = "") -> Any:
    return context   # checked against the menu's hidden parameters (options.check_context)


#: The decision's settings, in the order the signatures list them. Each entry point takes all
#: of them or the subset named below.
SETTINGS: tuple[Setting, ...] = (
    Setting("runtime", None, "ModelCaller | None",
            "the Runtime to call; without one, the Runtime bound by the enclosing Agent method "
            "(or `using_runtime`) (E3)"),
    Setting("context", None, "dict[str, Any] | None",
            "the values of hidden and context parameters, filled in and never shown to the "
            "model (P4, A8)", _context),
    Setting("max_retries", 1, "int",
            "how many times a bad reply is re-asked (P7); 0 turns re-asks off", _retries),
    Setting("timeout_s", None, "float | None",
            "seconds for the whole decision, re-asks, tool rounds and async options included; "
            "a decision out of time fails with kind `timeout`", _timeout),
    Setting("validate", None, "Callable[..., Any] | None",
            "a rule called with the `Pick` before anything runs; raising `openprogram.Retry"
            "(\"why\")` (or returning False) rejects it (kind `rejected`) and \"why\" goes to "
            "the model in the re-ask", check_validate),
    Setting("reask", None, "str | Callable[[Reask], str] | None",
            "the re-ask text: a format template with the fields of `Reask` ({request}, "
            "{reply}, {kind}, {error}, {path}, {menu}, {attempt}, {hint}) or a callable of a "
            "`Reask`", check_reask),
    Setting("mode", "menu", "ModeName",
            "the way of asking: \"menu\" (the text menu, the default), \"tools\" (one native "
            "tool per option) or \"json_schema\" (the provider's structured output); see "
            "docs/modes.md", lambda v, where: get_mode(v), lambda way: way.name),
    Setting("confidence", False, "bool | Samples",
            "`True` puts the model's probability of every option on each attempt "
            "(`trace.confidence`, a `Confidence`) from the runtime's own numbers; "
            "`decision.Samples(n)` counts the picks of n replies instead (any runtime)",
            lambda v, where: confidence_of(v, where or "decision.make"),
            lambda source: source.given),
    Setting("min_confidence", None, "float | None",
            "a pick below this probability fails as `low_confidence`, or resolves the option "
            "named by `low_confidence=` in its place (needs `confidence=`)"),
    Setting("low_confidence", None, "str | None",
            "the option resolved instead of a pick below `min_confidence=`, or of a pick "
            "whose `pick_set=` set is not the pick alone"),
    Setting("pick_set", None, "PickSetPolicy | None",
            "a calibrated pick-set policy (`result.conformal(alpha)`): the options whose "
            "probability clears its threshold form the pick set, which holds the right option "
            "on at least 1 - alpha of rows like those it was fitted on; the decision resolves "
            "when the set is the pick alone and otherwise resolves `low_confidence=` (or fails "
            "as `low_confidence`, the set on `err.pick_set`); the set is on "
            "`trace.confidence.pick_set`. It sets `confidence=` as it was fitted; a decision "
            "asked otherwise (options, menu, mode, distribution) is refused",
            check_pick_set),
    Setting("repair", None, "str | None",
            "how sloppy a reply may be and still be read without a re-ask: \"off\" (every "
            "deviation is re-asked), \"safe\" (the default: JSON syntax where one value is "
            "meant) or \"menu\" (also what the options make unambiguous); each repair is on "
            "`attempt.repairs`", lambda v, where: repair_level(v), lambda level: level.name),
    Setting("shortlist", None, "int | str | Shortlist | None",
            "`k` (or `Shortlist(k, by=...)`) shows the model only the k options that rank "
            "highest against the prompt (BM25 by default; `\"native\"`: the provider's own "
            "tool search, in tools mode); the trace records the ranking (`trace.shortlist`, "
            "`trace.pick_rank`)", lambda v, where: check_shortlist(v)),
)
_BY_NAME = {s.name: s for s in SETTINGS}
_MISSING = object()

#: Which settings each entry point takes (those it takes no keyword of keep their defaults):
#: every one (`make`, `evaluate`); a turn's (`Runtime.exec`: on its own runtime, one re-pick);
#: `agent`'s (a turn's and `runtime=`); `compare`'s; `parse_args`'s (a reply read, the re-asks
#: through a runtime when there is one); a `Variant`'s (what may differ between variants);
#: `improve`'s; `revalidate`'s (recorded replies read again); `decision.plan`'s (a batch
#: engine sends the requests: no runtime, no time budget); the magics' (`%%decide`, `%%agent`).
ALL = frozenset(_BY_NAME)
TURN = ALL - {"runtime", "max_retries"}
AGENT = ALL - {"max_retries"}
COMPARE = ALL - {"shortlist"}
PARSE = frozenset({"runtime", "context", "max_retries", "validate", "reask", "repair"})
VARIANT = ALL - {"context", "timeout_s"}
IMPROVE = frozenset({"runtime", "mode", "confidence", "max_retries"})
REVALIDATE = frozenset({"validate", "repair"})
PLAN = ALL - {"runtime", "timeout_s"}
MAGIC = ALL - {"max_retries", "shortlist"}


def checked(name: str, value: Any, where: str = "decision.make") -> Any:
    """The value of setting `name` checked on its own (as `Settings.of` checks it, without
    the checks between settings): what a decision would keep."""
    s = _BY_NAME.get(name)
    if s is None:
        raise UsageError(f"{name!r} is not a setting of a decision; the settings are "
                         f"{', '.join(_BY_NAME)}")
    return value if s.check is None else s.check(value, where)


class Settings:
    """A decision's settings, checked (see the module): one attribute per `Setting`, holding
    the checked value — the strategy a name names (`mode`: a `Mode` class; `repair`: a
    `RepairLevel`; `confidence`: a `ConfidenceSource`; `reask`: a function of a `Reask`).
    Frozen: `replace(...)` makes another. Build one with `Settings.of(keywords)`."""

    runtime: ModelCaller | None
    context: dict[str, Any] | None
    max_retries: int
    timeout_s: float | None
    validate: Callable[..., Any] | None
    reask: Callable[[Reask], str] | None
    mode: type[Mode]
    confidence: ConfidenceSource
    min_confidence: float | None
    low_confidence: str | None
    pick_set: PickSetPolicy | None
    repair: RepairLevel
    shortlist: Shortlist | NativeSearch | None

    @classmethod
    def of(cls, keywords: Mapping[str, Any] = {}, where: str = "decision.make",
           takes: Iterable[str] = ALL) -> Settings:
        """The settings `keywords` (a caller's, by name) ask for, each checked; the others at
        their defaults. A keyword outside `takes` (the entry point's own list) is refused as
        Python refuses an unexpected keyword argument; `where` names the entry point in the
        errors."""
        if keywords:
            extra = [k for k in keywords if k not in takes]
            if extra:
                raise UsageError(
                    f"{where}() got an unexpected keyword argument {extra[0]!r}; it takes "
                    f"{', '.join(s.name + '=' for s in SETTINGS if s.name in takes)}")
        state = {}
        for s in SETTINGS:
            value = keywords.get(s.name, _MISSING)
            state[s.name] = (s.checked_default if value is _MISSING or value is s.default
                             else value if s.check is None else s.check(value, where))
        _thresholds(state, where)
        return build(cls, state)

    def replace(self, where: str = "decision.make", **changes: Any) -> Settings:
        """These settings with `changes` (keywords as a caller writes them) checked and put in."""
        state = dict(self.__dict__)
        for name, value in changes.items():
            state[name] = checked(name, value, where)
        _thresholds(state, where)
        return build(type(self), state)

    def bound(self, **checked: Any) -> Settings:
        """These settings with values already checked put in (the confidence source a runtime
        gives, say): the same object when nothing changes."""
        if all(self.__dict__[k] is v for k, v in checked.items()):
            return self
        return build(type(self), {**self.__dict__, **checked})

    @property
    def attempts(self) -> int:
        """How many attempts a decision makes at most: the first and each re-ask."""
        return self.max_retries + 1

    def keywords(self) -> dict[str, Any]:
        """The settings that differ from their defaults, as keywords an entry point takes
        again (a strategy as the name or value that chose it)."""
        out = {}
        for s in SETTINGS:
            value = self.__dict__[s.name]
            if value is not s.checked_default:
                out[s.name] = value if s.written is None else s.written(value)
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Settings are frozen: settings.replace({name}=...) makes new ones")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Settings are frozen")

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.keywords().items()) + ")"


def _thresholds(state: dict[str, Any], where: str) -> None:
    """The checks between the threshold settings (in `state`, checked values): `min_confidence=`
    and `low_confidence=` need a distribution; a `pick_set=` policy takes the place of
    `min_confidence=` and, when `confidence=` was left out, asks for the distribution the
    policy was fitted on."""
    policy = state["pick_set"]
    if policy is not None and not state["confidence"].asks:
        state["confidence"] = confidence_of(policy.confidence_setting(), where)
    check_threshold(state["min_confidence"], state["low_confidence"], state["confidence"],
                    where=where, pick_set=policy)


def takes_settings(takes: Iterable[str] = ALL) -> Callable[[F], F]:
    """Mark `fn(..., **settings)` as an entry point taking the settings named in `takes`: its
    signature (`inspect.signature`, `help()`) lists them as keyword-only parameters after its
    own, with their defaults and types, and its docstring ends with what each does."""
    names = [s for s in SETTINGS if s.name in set(takes)]

    def mark(fn: F) -> F:
        own = inspect.signature(fn)
        params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
        params += [inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.default,
                                     annotation=s.annotation) for s in names]
        fn.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n    The decision's settings:\n\n" + \
            "\n".join(_lines(f"{s.name}: {s.doc}.") for s in names)
        return fn
    return mark


def _lines(text: str, width: int = 96) -> str:
    """`text` in lines of at most `width` characters for a docstring: the first indented four
    spaces, the rest eight (textwrap's fill, without importing it with every `import
    openprogram`)."""
    lines, line = [], "   "
    for word in text.split():
        if len(line) + 1 + len(word) > width and line.strip():
            lines.append(line)
            line = "       "
        line += " " + word
    lines.append(line)
    return "\n".join(lines)
