"""Immutable records of what one decision did, step by step.

Each step of the decision loop (attempt sent, reply received, extracted, validated or failed)
moves the attempt's frozen `Attempt` record forward, hands it to the trace and to every observer
that wants the step, and moves on. An observer (the live panel, a logger, an OpenTelemetry
exporter) may keep any record it was given: it never changes afterwards. Once an observer holds a
record, the next step makes a new one with `replace`; a record nobody outside the decision has
been handed yet is completed in place instead (`Decider._change` in decision/loop.py), so a
decision nobody watches step by step makes one record per attempt. The lists inside a record
handed out are never mutated. `build` is the one way a record is made without its class's
`__init__`.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from ..base.json_form import to_jsonable
from ..base.text import cut_middle

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any, TypeVar
    T = TypeVar("T")

__all__ = ["Attempt", "ToolRound", "Pick", "Reask", "Repair", "replace", "new_attempt", "build",
           "repairs_of", "ATTEMPT_JSON", "json_fields", "AS_IS", "JSON", "REPLY", "SPAN",
           "JSON_LIST", "LIST", "RECORD", "RECORDS"]


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class Repair:
    """One repair made to a reply: its `kind` (a key of `KINDS`), the `path` of the value it
    touched (as error paths read: `args.city`, `call`), the text `before` and `after`, and
    where `before` sits in the raw reply (`span`, when it is known)."""
    kind: str
    path: str
    before: str
    after: str
    span: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "before": self.before,
                "after": self.after, "span": None if self.span is None else list(self.span)}

    def __str__(self) -> str:
        return f"{self.kind} at {self.path or '(the pick)'}: {self.before!r} → {self.after!r}"


@dataclass(frozen=True)
class Attempt:
    """One model call of a decision and what the mechanism made of its reply."""
    number: int
    is_last: bool
    prompt: str
    reply: str | None = None
    extracted: dict | None = None
    found_in: str | None = None        # "fence", "text", "tool_call" or "schema"
    span: tuple[int, int] | None = None        # where the extracted JSON sits in the reply
    error_span: tuple[int, int] | None = None  # where the value at error_path sits in it
    key_alias: str | None = None       # "call", "action", "function" or "tool"
    candidates: int = 0
    error_kind: str | None = None
    error_message: str | None = None
    error_path: str | None = None      # e.g. "args.steps[0].action"
    chosen: str | None = None
    args: dict | None = None           # the model-supplied arguments that were kept
    dropped: list[str] = field(default_factory=list)
    injected: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=_now)
    duration_s: float | None = None
    model_call_id: int | None = None
    usage: dict | None = None          # {"input_tokens": n, "output_tokens": m} when the
                                       # runtime knows
    sent: dict | None = None           # besides the prompt: the tools or the schema the mode sent
    tool_calls: list[dict] | None = None  # the reply's native tool calls, if any
    finish_reason: str | None = None   # why the model stopped, as the provider says
    raw: dict | None = None            # the raw request and response of the model call, if known
    cached: bool = False               # the reply came from a cache file (CachedRuntime), not
                                       # the model
    redacted: list[str] = field(default_factory=list)  # where the decoded pick held a key (paths)
    confidence: Any = None             # a confidence.Confidence when the decision asked for one
    low_pick: str | None = None        # the model's pick set aside for low_confidence=
                                       # (p below min)
    cascade: list | None = None        # CascadeRuntime: each runtime asked (pick, p_pick, tokens)
    repairs: list = field(default_factory=list)  # the Repair records (decision/repair/) that saved
                                                 # a re-ask

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.chosen is not None

    def to_dict(self, jsonable: Any = to_jsonable) -> dict:
        """The record as JSON data, each field in the form `ATTEMPT_JSON` gives it; a writer
        that encodes it at once passes `jsonable=json_ready`, which shares what is already JSON
        instead of copying it."""
        d = self.__dict__
        return {key: _WRITE[form](d[name], jsonable) for name, key, form in ATTEMPT_JSON}


# The forms a record's field takes in its JSON form: written as it is (a name, a number, a flag,
# None); made JSON, as any value may need (`to_jsonable`, or `json_ready` for a writer that
# encodes at once: a lone surrogate a reply held is made writable, since UTF-8 refuses it); a
# reply: text, or the repr of what is not text (bytes, a dict from a broken runtime), made JSON;
# a (start, end) span as a list; a fresh list, made JSON or not; a record's `to_dict()`, or each
# record's of a list.
AS_IS, JSON, REPLY, SPAN, JSON_LIST, LIST, RECORD, RECORDS = (
    "as_is", "json", "reply", "span", "json_list", "list", "record", "records")
_WRITE: dict[str, Any] = {
    AS_IS: lambda v, j: v,
    JSON: lambda v, j: j(v),
    REPLY: lambda v, j: j(v if v is None or isinstance(v, str) else repr(v)),
    SPAN: lambda v, j: None if v is None else list(v),
    JSON_LIST: lambda v, j: j(list(v)),
    LIST: lambda v, j: list(v),
    RECORD: lambda v, j: None if v is None else v.to_dict(),
    RECORDS: lambda v, j: [r.to_dict() for r in v],
}


def json_fields(cls: type, keys: dict[str, str], forms: dict[str, str]) -> tuple:
    """`(field, key, form)` for every field of the record class `cls`, in order: the key it is
    written under (its name, unless `keys` says otherwise) and its form (as it is, unless
    `forms` says otherwise)."""
    return tuple((f.name, keys.get(f.name, f.name), forms.get(f.name, AS_IS))
                 for f in dataclasses.fields(cls))


#: An Attempt's JSON form, field by field: what `Attempt.to_dict` writes, and what a journal's
#: line writer writes from the record itself (evaluation/journal_text.py makes its writer from
#: this list), so a new field of Attempt is written alike by both, with no change elsewhere
#: unless it needs a form of its own here.
ATTEMPT_JSON = json_fields(Attempt, {"number": "attempt"}, {
    "prompt": JSON, "reply": REPLY, "extracted": JSON, "span": SPAN, "error_span": SPAN,
    "error_message": JSON, "error_path": JSON, "chosen": JSON, "args": JSON,
    "dropped": JSON_LIST, "injected": LIST, "sent": JSON, "tool_calls": JSON, "raw": JSON,
    "redacted": LIST, "confidence": RECORD, "cascade": JSON, "repairs": RECORDS})


@dataclass(frozen=True)
class ToolRound:
    """One native tool call made during an `agent(..., options=)` turn."""
    round: int
    name: str
    args: dict
    result: Any = None
    error: str | None = None
    duration_s: float | None = None

    def to_dict(self, jsonable: Any = to_jsonable) -> dict:
        return {"round": self.round, "tool": self.name, "args": jsonable(self.args),
                "result": jsonable(self.result), "error": self.error,
                "duration_s": self.duration_s}


@dataclass(frozen=True)
class Pick:
    """What a `validate=` rule is handed: the picked option's name (`call`), its arguments as
    validated (`args`), and the `option` itself (its `kind`, `description`, `params`)."""
    call: str
    args: dict
    option: Any


@dataclass(frozen=True)
class Reask:
    """What a `reask=` callable is handed (and the fields a `reask=` template may name): the
    original request, the previous reply, the error's kind, message and path, the menu, the
    number of the attempt that failed, and the `hint`: the fix a higher `repair=` level would
    have made, as the default re-ask words it (the option name or the value the reply nearly
    wrote; "" when there is none)."""
    request: str
    reply: str
    kind: str
    error: str
    path: str
    menu: str
    attempt: int
    hint: str = ""


def new_attempt(number: int, is_last: bool, prompt: str, sent: dict | None) -> Attempt:
    """`Attempt(number=, is_last=, prompt=, sent=)` without the frozen dataclass's `__init__`
    (it sets each of the thirty fields through `object.__setattr__`): the defaults are copied
    from a record made once, with fresh lists and the time of now, as `__init__` makes them."""
    state = _BLANK.copy()
    state.update(number=number, is_last=is_last, prompt=prompt, sent=sent, dropped=[],
                 injected=[], started_at=_now(), redacted=[], repairs=[])
    return build(Attempt, state)


def build(cls: type[T], state: dict[str, Any]) -> T:
    """A frozen record of `cls` whose fields are `state` (taken, not copied), made without the
    class's `__init__`: a frozen dataclass's sets each field through `object.__setattr__`, which
    costs more than the rest of a small record's making. With `repairs_of`, the one place a
    frozen record is made so; the caller has checked `state` (every field, of the types the
    class says)."""
    new = object.__new__(cls)
    _set(new, "__dict__", state)
    return new


def repairs_of(notes: Any, shown: int) -> list[Repair]:
    """`Repair` records of `(kind, path, span, after, before)` notes (what the syntax repair
    writes down as it reads), each text cut to `shown` characters (head and tail), made without
    the frozen dataclass's `__init__`: each record's state written straight into its own
    `__dict__`, which costs less than even `build` (a reply's repairs are most of what a small
    one costs to read)."""
    out = []
    for kind, path, span, after, before in notes:
        r = object.__new__(Repair)
        d = r.__dict__
        d["kind"], d["path"], d["span"] = kind, path, span
        d["before"] = before if len(before) <= shown else cut_middle(before, shown)
        d["after"] = after if len(after) <= shown else cut_middle(after, shown)
        out.append(r)
    return out


def replace(record: Any, **changes) -> Any:
    """`dataclasses.replace` for these records, without running the frozen dataclass's
    `__init__` again (it sets each of an Attempt's twenty fields through `object.__setattr__`,
    which was a tenth of a decision's own time). The loop passes field names only; what is not
    changed is shared with the previous record, as `dataclasses.replace` shares it."""
    state = getattr(record, "__dict__", None)
    if state is None:  # a record class with __slots__
        return dataclasses.replace(record, **changes)
    # the state copied and handed over whole: filling the new record's own (empty) __dict__
    # key by key cost about as much again
    state = state.copy()
    state.update(changes)
    return build(type(record), state)


_BLANK = Attempt(number=0, is_last=False, prompt="").__dict__
_set = object.__setattr__  # a frozen record's own __setattr__ refuses every name
