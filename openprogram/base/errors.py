"""The mechanism's errors: one family, and the stable list of error kinds.

Every exception this library raises on purpose derives from `OpenProgramError`, so
`except openprogram.OpenProgramError` catches "anything openprogram raised", and each also keeps
the builtin base users already catch (`DecisionError` is a `ValueError`, `ModelCallError` a
`RuntimeError`, ...). `ERROR_KINDS` names every way an attempt can fail, each with a sentence a
person can act on; the trace, the panel, the re-ask and `DecisionError` all read it from here.
This module is the bottom layer: it imports nothing else of the package.
"""
from __future__ import annotations

from .text import cut

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

#: The stable set of error kinds, each with a sentence a person can act on.
ERROR_KINDS: dict[str, str] = {
    "not_text": "The model reply was not text. A Runtime's model call must return a str "
                "(or native tool calls); check the runtime's call function.",
    "no_action": "The reply holds no JSON object with a \"call\" key. Ask the model to end its "
                 "reply with one JSON object such as {\"call\": \"<option>\", \"args\": {...}}.",
    "bad_args": "The JSON object names an option but its \"call\" or \"args\" has the wrong shape: "
                "\"call\" must be a string and \"args\" a JSON object.",
    "unknown_call": "The reply calls an option that is not on the menu. Check the option names, "
                    "or make the names and descriptions easier to tell apart.",
    "missing_required": "A required field is missing. Every schema field, and every function "
                        "parameter without a default, must be given.",
    "type_mismatch": "A field has the wrong JSON type (bool never counts as int; float accepts "
                     "int).",
    "enum_violation": "A field's value is not one of its allowed values.",
    "invalid_value": "A field has the right JSON type but a value its declared type refuses (a "
                     "number JSON cannot hold such as 1e400 or NaN, text that is not valid "
                     "Unicode, or a constraint or validator of the option's own). Say in the "
                     "field's description what values are allowed.",
    "rejected": "A rule of the caller's (validate=, or the option raising openprogram.Retry) "
                "rejected the pick; its message says why and was sent back to the model.",
    "tool_error": "The picked tool ran and reported an error for those arguments (an MCP "
                  "server's isError result); its message was sent back to the model.",
    "multiple_calls": "The model asked for several options at once; exactly one must be picked.",
    "refused": "The provider reported that the model refused to answer; rephrase the request "
               "or check it against the provider's policies.",
    "truncated": "The reply was cut off at the token limit before the pick was complete; raise "
                 "max_tokens or ask for a shorter reply.",
    "timeout": "The decision ran out of time (timeout_s covers the whole decision, re-asks "
               "included).",
    "model_error": "The model call itself failed (network, key, rate limit, server error).",
    "not_recorded": "A replayed cassette holds no recording of this request: the program asks "
                    "something it did not ask when recording (a prompt, an option, a tool result "
                    "or the way of asking changed). Record it again, or use CachedRuntime.",
    "low_confidence": "The model's probability of its pick was below min_confidence=, or its "
                      "pick_set= set held more than the pick; the error's .confidence holds "
                      "the whole distribution (and .pick_set the set). Name an option to take "
                      "instead with low_confidence=, or lower the threshold.",
    "no_confidence": "The decision asked for confidence=True but the runtime returned no "
                     "probabilities for the reply (a server that refuses logprobs); allow "
                     "samples in their place with confidence=decision.Samples(5, fallback=True).",
}


#: What to do about each kind, without restating what happened: a `DecisionError`'s message
#: already says that in the words of the failure itself, so it appends only this (each fact once).
_FIXES: dict[str, str] = {
    "not_text": "A Runtime's model call must return a str (or native tool calls): check the "
                "runtime's call function.",
    "no_action": "Ask the model to end its reply with one JSON object such as "
                 "{\"call\": \"<option>\", \"args\": {...}}.",
    "bad_args": "The menu's Call: lines show the shape to write: a string under \"call\", a JSON "
                "object under \"args\".",
    "unknown_call": "Check the option names, or make the names and descriptions easier to tell "
                    "apart.",
    "missing_required": "Every schema field, and every function parameter without a default, must "
                        "be given.",
    "type_mismatch": "bool never counts as int; float accepts int. Describe the field so the model "
                     "writes its type.",
    "enum_violation": "Name the allowed values in the field's description.",
    "invalid_value": "Say in the field's description what values are allowed.",
    "rejected": "The rule's message was sent back to the model with the re-ask.",
    "tool_error": "Describe in the tool's description what arguments it accepts, or raise "
                  "max_retries so the model can correct them.",
    "multiple_calls": "Ask the model for exactly one pick.",
    "refused": "Rephrase the request or check it against the provider's policies.",
    "truncated": "Raise max_tokens or ask for a shorter reply.",
    "timeout": "timeout_s covers the whole decision, re-asks included: raise it or lower "
               "max_retries.",
    "model_error": "Its message says whether running again can help.",
    "not_recorded": "",   # the replay's own message names the fix (record again, or cache)
    "low_confidence": "The error's .confidence holds the distribution (and .pick_set the "
                      "pick set); name an option to take instead with low_confidence=, or "
                      "lower min_confidence= (a pick set's: fit it at a larger alpha).",
    "no_confidence": "",  # the message names the fix (Samples(n, fallback=True))
}


def explain(kind: str) -> str:
    """The actionable sentence for an error kind (empty for an unknown kind)."""
    return ERROR_KINDS.get(kind, "")


def fix(kind: str) -> str:
    """What to do about an error kind, without saying again what happened: empty where the
    failure's own message already says it, the kind's whole explanation for a kind with no
    entry here."""
    return _FIXES.get(kind, explain(kind))


class OpenProgramError(Exception):
    """Base of every exception openprogram raises on purpose."""


class OptionError(OpenProgramError, ValueError):
    """An option set that cannot be used; raised before any model call."""


class UsageError(OpenProgramError, TypeError):
    """An argument of the wrong kind (`runtime=` that is not a Runtime, a class where an
    instance is needed, `context=` that is not a dict); raised before any model call."""


class ArgumentError(OpenProgramError, ValueError):
    """An argument of the right kind with a value that cannot be used (`timeout_s=-1`, a
    `reask=` template naming an unknown field); raised before any model call."""


class SchemaError(OpenProgramError, TypeError):
    """A schema or an annotation that cannot be described (rules S1-S3): `[str, int]`, an
    empty dict, a type JSON has no form for."""


class NoRuntimeError(OpenProgramError, RuntimeError):
    """A model call with no Runtime to make it (rule E3); the message says how to give one."""


class MissingExtraError(OpenProgramError, ImportError):
    """A feature needs an optional package that is not installed; the message names the extra
    of this project's distribution that brings it."""


def require(module: str, extra: str, what: str) -> Any:
    """`module`, imported, or a `MissingExtraError` saying that `what` needs it and which extra
    installs it (the core itself needs nothing beyond the standard library)."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{what} needs {top}, which is not installed here: "
            f"pip install 'openprogram-decisions[{extra}]'") from exc


class OptionWarning(UserWarning):
    """An option set that works but probably does not say what was meant (a dict that looks
    like a tool definition used as a value, a description that is only a type name), or a
    schema whose annotations are kept but not checked. The message names the fix."""


class AttemptError(OpenProgramError, ValueError):
    """One attempt failed: its reply held no readable pick, the pick's arguments did not fit
    the option, a rule or the tool rejected it, the pick was too unsure, or the model call
    itself failed. `kind` (one of ERROR_KINDS) says which; `path` points into the arguments
    (`args.items[0].qty`) when it can. The decision loop records it on the attempt and re-asks;
    only `DecisionError` reaches the caller."""

    #: What the re-ask adds after the problem: the fix a `repair=` level above would have made
    #: (the option name or the value the reply nearly wrote), "" when there is none.
    hint: str = ""

    def __init__(self, kind: str, message: str, path: str | None = None):
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path


#: The name this error had before it said what it is (it was raised for every failed attempt,
#: not only for a reply that does not parse); kept so code that imports it keeps working.
ParseError = AttemptError


class Retry(OpenProgramError, ValueError):
    """Raise `Retry("why")` from a `validate=` rule or from inside a function option to reject
    the pick: the attempt fails with kind `rejected`, "why" is sent back to the model in the
    re-ask, and nothing of the pick runs (or, from inside an option, its result is dropped)."""

    kind = "rejected"

    def __init__(self, message: str = "a rule of the caller's rejected this pick; pick again"):
        super().__init__(message)
        self.message = message


class ToolError(Retry):
    """A tool reported an error for the arguments it was given (an MCP server's result with
    `isError`, or any function option raising it): the attempt fails with kind `tool_error`,
    and the tool's message is sent back to the model in the re-ask, like a `Retry`."""
    kind = "tool_error"


class WaitTimeout(OpenProgramError, TimeoutError):
    """An awaitable of a decision (an async option, tool or model function) did not finish in
    the time `timeout_s` left; it was cancelled. The message says where it was waited on."""


class ModelCallError(OpenProgramError, RuntimeError):
    """A model call failed (network, key, rate limit, server error, timeout). `partial` holds the
    text received before the failure, so nothing that arrived is lost."""

    def __init__(self, message: str, *, partial: str = "", kind: str = "model_error"):
        super().__init__(message)
        self.partial = partial
        self.kind = kind


_REPLY_HEAD = 300


def reply_head(text: Any, n: int = _REPLY_HEAD) -> str | None:
    """The beginning of a reply, for error messages."""
    if text is None:
        return None
    s = text if isinstance(text, str) else repr(text)
    return cut(s, n)


class DecisionError(OpenProgramError, ValueError):
    """The model never produced a usable pick. `kind`, `message` and `reply_head` describe the
    last failure; `trace` holds every attempt (so the last invalid reply is never lost)."""

    def __init__(self, kind: str, message: str, reply_head: str | None,
                 trace: Any = None, path: str | None = None):
        self.kind, self.message, self.reply_head = kind, message, reply_head
        self.trace, self.path = trace, path
        #: the last attempt's distribution over the options, when the decision asked for one
        self.confidence: Any = None
        #: with `pick_set=`: the options the last attempt's pick set held (most probable first)
        self.pick_set: tuple[str, ...] | None = None
        n = len(trace.attempts) if trace else 1
        text = f"no usable decision after {n} attempt(s): [{kind}] {message.rstrip('.')}."
        hint = fix(kind)
        if hint:
            text += f" {hint}"
        if reply_head is not None:
            text += f" The last reply began: {reply_head!r}."
        text += " Every attempt is on err.trace."
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # picklable for process pools; the trace travels as a dict
        return (_rebuild_error, (self.kind, self.message, self.reply_head, self.path))


def _rebuild_error(kind: str, message: str, reply_head: str | None,
                   path: str | None) -> DecisionError:
    return DecisionError(kind, message, reply_head, None, path)


# -- what a run's files, a recording and a server can say -------------------------------------
# Defined here with the rest of the family (a user meets them from `evaluate`, a cassette, an MCP
# server); the modules that raise them import them from here.


class RecordedError(OpenProgramError):
    """A recorded decision's error, read back (a journal's row): its kind, its type's name and
    message; the exception object itself stayed in the process that ran the decision."""

    def __init__(self, kind: str | None, type_name: str, message: str):
        super().__init__(message)
        self.kind, self.type_name = kind, type_name

    def __str__(self) -> str:
        return str(self.args[0])


class JournalMismatch(OpenProgramError, ValueError):
    """The journal holds another evaluation's rows (its prompt, options, way of asking, runtime,
    repair level or inputs differ)."""


class JournalFileError(OpenProgramError, ValueError):
    """A journal that cannot be read as one: a line that is not JSON, nested too deep, or with
    a field of the wrong type, or a file written by a newer release. Names the file, the line
    and what to do."""


class JournalWriteError(OpenProgramError, OSError):
    """A journal line could not be written (a full disk): says how many rows are safe in the
    journal and that the same call resumes."""


class ServerError(OpenProgramError, RuntimeError):
    """An MCP server could not be started or reached, or ended while in use. The message names
    the server and what to do; whatever was started is ended before it is raised."""


class ScriptExhausted(OpenProgramError, RuntimeError):
    """A ScriptedRuntime was asked for more replies than it was given."""


class CassetteMismatch(ModelCallError):
    """The program sent a request the cassette did not record. `call` is the number of the
    program's call (1, 2, ... in the order this replay answered them), `expected` the nearest
    recorded request and `actual` the one sent."""

    def __init__(self, message: str, *, call: int, expected: Any = None, actual: Any = None):
        super().__init__(message, kind="not_recorded")
        self.call, self.expected, self.actual = call, expected, actual


class CassetteExhausted(CassetteMismatch):
    """The program asked a recorded request more times than the cassette recorded it (or, with
    `strict=False`, made more calls than it holds)."""


class CassetteFileError(OpenProgramError, ValueError):
    """A file that cannot be read as a cassette: says which file, which line and what to do."""


class CacheFileError(OpenProgramError, ValueError):
    """A cache file this release cannot append to."""


class ToolNotRecorded(OpenProgramError, LookupError):
    """A replay was asked for a tool call the cassette did not record (or recorded fewer times
    than it is asked)."""


class RunFileError(CassetteFileError):
    """A file that cannot be read as a saved run: says which file, which line and what to do."""


class RunDiverged(OpenProgramError, RuntimeError):
    """A fork's program asked, before the fork point, something its recording does not hold.
    `node` is the fork's node where it happened (a model or tool call, or decision k itself),
    `decision` the decision it belongs to (a RunNode of the fork, or None), `expected` the
    recorded request (None when the recording holds none there) and `actual` the one asked
    (None when the program asked nothing where the recording did); `run` is the fork as far as
    it got."""

    def __init__(self, message: str, *, node: Any = None, decision: Any = None,
                 expected: Any = None, actual: Any = None, at: int | None = None):
        super().__init__(message)
        self.node, self.decision, self.expected, self.actual = node, decision, expected, actual
        self.at = at
        self.run: Any = None
