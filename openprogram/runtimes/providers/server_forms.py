"""What each OpenAI-compatible server accepts, and the nearest form a refused request steps down to.

The chat-completions protocol is spoken by OpenAI and by the servers people run locally (vLLM,
Ollama, llama.cpp's `llama-server`, llama-cpp-python's `llama_cpp.server`, LM Studio), but each
accepts a different subset of the request forms the three ways of asking use: structured output
(`response_format` json_schema, `strict`), a forced tool call (`tool_choice: "required"`,
`parallel_tool_calls: false`) and token usage on streams (`stream_options`). A `Negotiator` holds,
for one runtime, the forms that runtime's server is believed to accept — from a profile when the
server is named (`OpenAIRuntime(server="vllm")`), else the OpenAI forms — and shapes each request
with them. When the server refuses a form (its error's words name it), the negotiator steps that
form down to the nearest one left (json_schema → json_object with the schema in the request or
the prompt; "required" → the one tool named, or "auto" and the decision's re-ask; the optional
fields left out) and remembers it, so a later request sends the accepted form at once; a refusal
with nothing nearer left is an error that names the form and the server's words. Every request
records, in `Ask.negotiated`, each form sent in place of the one the way of asking means, and why.
The stream is such a form too: a request the server cannot stream (llama-cpp-python's
chatml-function-calling raises "Automatic streaming tool choice is not supported", which reaches
the client only as a stream that ends before any reply) is sent once more without streaming,
and later requests of that kind (with tools, with a schema, or plain) go unstreamed at once; a
named server's profile says up front what it cannot stream, and is never stepped down.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...runtime.runtime import ModelCallError
from .strict_schema import NotStrict, api_name, to_strict, unexpressed

__all__ = ["SERVERS", "Server", "Negotiator", "FORMS"]

# The structured-output forms, each a way to send one JSON Schema.
STRICT = "json_schema strict"            # OpenAI's structured outputs, strict mode
PLAIN = "json_schema"                    # the same without `strict` (the schema as it is)
OBJECT_SCHEMA = "json_object+schema"     # llama.cpp and llama-cpp-python: a grammar from `schema`
OBJECT_BOTH = "json_object+schema+prompt"  # the same, and the schema in the prompt too
GUIDED = "guided_json"                   # vLLM's own parameter
OBJECT_PROMPT = "json_object+prompt"     # JSON mode; the schema only in the prompt

#: How many alternatives at each token `confidence=True` asks for (OpenAI's most).
TOP_LOGPROBS = 20

# The ways of forcing a tool call.
REQUIRED, NAMED, AUTO = "required", "named", "auto"

#: What each form is, as the trace and the errors say it.
FORMS = {
    STRICT: 'response_format {"type": "json_schema", "strict": true}',
    PLAIN: 'response_format {"type": "json_schema"} without "strict"',
    OBJECT_SCHEMA: 'response_format {"type": "json_object", "schema": ...}',
    OBJECT_BOTH: 'response_format {"type": "json_object", "schema": ...} and the schema in '
                 'the prompt',
    GUIDED: "vLLM's guided_json with the schema",
    OBJECT_PROMPT: 'response_format {"type": "json_object"} and the schema in the prompt',
    REQUIRED: 'tool_choice "required"',
    NAMED: "tool_choice naming the one tool",
    AUTO: 'tool_choice "auto" (a reply with no tool call is re-asked)',
    "parallel_tool_calls": "parallel_tool_calls false",
    "stream_options": "stream_options.include_usage",
    "logprobs": "logprobs with top_logprobs (the probability of each option)",
    "n": "n (the samples of decision.Samples drawn in one request)",
    "stream": "stream true (the reply grows in the panel)",
    "unstreamed": "stream false (the reply reaches the panel whole, at once)",
    "null": "an assistant message with tool calls and content null",
    "empty": 'an assistant message with tool calls and content ""',
    "tools": "native tools",
    "omitted": "nothing (the field left out)",
}

#: What a refusal's words must contain to be about a form: kind -> words (lower case).
_WORDS = {
    "stream_options": ("stream_options", "include_usage"),
    "logprobs": ("logprobs", "logprob", "log_probs"),
    "parallel_tool_calls": ("parallel_tool_calls",),
    "strict": ("strict",),
    "structured": ("response_format", "json_schema", "json_object", "guided_json", "schema"),
    "tool_choice": ("tool_choice", "tool choice", "'required'", '"required"', "required tool"),
    "tools": ("tools", "tool call", "function call", "jinja"),
}

#: The statuses a refusal of a request's shape comes with: the 4xx of a request a server does not
#: take, and the 500 some servers (llama-cpp-python, older llama.cpp) answer it with.
_REFUSAL_STATUSES = frozenset({400, 404, 405, 415, 422, 500, 501, "stream", "dropped"})


@dataclass(frozen=True)
class Server:
    """What one server accepts: the structured-output forms and the tool choices it takes,
    nearest first, whether it takes `parallel_tool_calls` and `stream_options`, and why (the
    documentation it follows)."""
    name: str
    structured: tuple[str, ...]
    tool_choice: tuple[str, ...]
    parallel_tool_calls: bool = True
    stream_usage: bool = True
    null_content: bool = True     # an assistant turn of tool calls may have content null
    stream_auto_tools: bool = True  # it streams a reply whose tool_choice is "auto"
    why: str = ""


#: The servers that can be named with `OpenAIRuntime(server=...)` (docs/models.md holds the table).
SERVERS = {s.name: s for s in (
    Server("openai", (STRICT, PLAIN, OBJECT_PROMPT), (REQUIRED, NAMED, AUTO),
           why="OpenAI's own API takes every form"),
    Server("vllm", (PLAIN, GUIDED), (REQUIRED, NAMED, AUTO),
           why="vLLM takes response_format json_schema and, before it did, guided_json; "
               "tool_choice 'required' since 0.8.3; it ignores parallel_tool_calls"),
    Server("ollama", (PLAIN, OBJECT_PROMPT), (REQUIRED, NAMED, AUTO),
           why="Ollama's /v1 takes response_format (turned into its own `format`), tools, "
               "tool_choice and stream_options.include_usage"),
    Server("llama.cpp", (PLAIN, OBJECT_SCHEMA), (REQUIRED, NAMED, AUTO),
           why="llama-server takes response_format json_schema or json_object with a schema, "
               "and tools with --jinja"),
    Server("llama-cpp-python", (OBJECT_SCHEMA,), (NAMED, AUTO), parallel_tool_calls=False,
           stream_usage=False, null_content=False, stream_auto_tools=False,
           why="llama-cpp-python's server takes response_format text or json_object (with a "
               "schema), tool_choice 'auto', 'none' or a named function, an assistant "
               "message's content only as a string, sends no usage in streams, and cannot "
               "stream a tool call chosen by tool_choice 'auto' (chatml-function-calling: "
               "\"Automatic streaming tool choice is not supported\")"),
    Server("lm-studio", (PLAIN,), (REQUIRED, NAMED, AUTO),
           why="LM Studio takes response_format json_schema (not json_object)"),
)}

#: An unnamed server: the OpenAI forms first, then what the local servers take.
UNNAMED = Server("", (STRICT, PLAIN, OBJECT_BOTH), (REQUIRED, NAMED, AUTO))


def check_server(server: Any) -> Server:
    if server is None:
        return UNNAMED
    if isinstance(server, str) and server in SERVERS:
        return SERVERS[server]
    raise ValueError(f"server must be one of {', '.join(repr(s) for s in SERVERS)} (or None to "
                     f"find out from the server's answers), got {server!r}")


def _bare(words: str) -> str:
    """A server's words without what the SDK puts around them ("Error code: 500 - ...")."""
    return re.sub(r"^error code: \d+( - )?", "", words.strip(), flags=re.I).strip(" '\"")


def schema_prompt(schema: dict) -> str:
    return ("Answer with one JSON document and nothing else. It must follow this JSON Schema:\n"
            + json.dumps(schema, ensure_ascii=False, separators=(",", ":")))


def _with_prompt(messages: list[dict], text: str) -> None:
    """`text` appended to the last user message (small models follow it best there)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                m["content"] = [*content, {"type": "text", "text": text}]
            else:
                m["content"] = f"{content}\n\n{text}" if content else text
            return
    messages.append({"role": "user", "content": text})


class Negotiator:
    """The forms one runtime's server accepts, as far as is known, and the steps down."""

    def __init__(self, server: Server):
        self.server = server
        self.structured = list(server.structured)
        self.tool_choice = list(server.tool_choice)
        self.parallel_tool_calls = server.parallel_tool_calls
        self.stream_usage = server.stream_usage
        self.null_content = server.null_content
        self.tools = True
        self.logprobs = True   # False once the server refused logprobs / top_logprobs
        self.n = True          # False once the server refused n (each sample its own request)
        #: kind -> the server's words when it refused that kind's form on an earlier call
        self.learned: dict[str, str] = {}
        #: every refusal this runtime met: {"asked", "refused", "sent"}
        self.refusals: list[dict] = []
        #: (kind, form) pairs a request carried that the server answered: known to be accepted
        self.confirmed: set[tuple[str, str]] = set()
        #: the kinds of request (`_stream_kind`) the server could not stream: sent unstreamed
        self.unstreamed: set[str] = set()

    @property
    def modes(self) -> frozenset:
        return frozenset({"menu"} | ({"tools"} if self.tools and self.tool_choice else set())
                         | ({"json_schema"} if self.structured else set()))

    # -- shaping a request ------------------------------------------------------------------------
    def _why(self, kind: str) -> str:
        if kind in self.learned:
            return f"the server refused it on an earlier call: {self.learned[kind]}"
        return f"server={self.server.name!r}: {self.server.why}" if self.server.name else ""

    def _record(self, ask: Any, kind: str, asked: str, sent: str) -> None:
        ask.forms[kind] = sent
        if asked != sent:
            ask.negotiated.append({"kind": kind, "asked": FORMS[asked], "sent": FORMS[sent],
                                   "why": self._why(kind)})

    def shape_messages(self, messages: list[dict], ask: Any) -> None:
        """An assistant turn that only called tools has content null (OpenAI's form), or ""
        for a server that takes only a string."""
        turns = [m for m in messages if m.get("role") == "assistant" and m.get("content") is None]
        if not turns:
            return
        if self.null_content:
            ask.forms["assistant_content"] = "null"
            return
        for m in turns:
            m["content"] = ""
        self._record(ask, "assistant_content", "null", "empty")

    def shape_tool_choice(self, body: dict, ask: Any, choice: str | None, specs: list) -> None:
        if not self.tools:
            raise self._unsatisfiable("tools", None)
        if choice != REQUIRED:
            if choice is not None:
                body["tool_choice"] = choice
            return
        form = next((f for f in self.tool_choice if f != NAMED or len(specs) == 1), None)
        if form is None:
            raise self._unsatisfiable("tool_choice", REQUIRED)
        body["tool_choice"] = {REQUIRED: "required", AUTO: "auto"}.get(form) or \
            {"type": "function", "function": {"name": specs[0]["name"]}}
        self._record(ask, "tool_choice", REQUIRED, form)
        if self.parallel_tool_calls:
            body["parallel_tool_calls"] = False
            ask.forms["parallel_tool_calls"] = "parallel_tool_calls"
        elif self.server.parallel_tool_calls or "parallel_tool_calls" in self.learned:
            self._record(ask, "parallel_tool_calls", "parallel_tool_calls", "omitted")

    def shape_structured(self, body: dict, ask: Any, fmt: dict, messages: list[dict]) -> None:
        if not self.structured:
            raise self._unsatisfiable("structured", STRICT)
        form, schema, name = self.structured[0], fmt["schema"], api_name(fmt.get("name"))
        if form == STRICT:
            try:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": name, "schema": to_strict(schema), "strict": True}}
                ask.schema = schema
                lost = unexpressed(schema)
                if lost:
                    ask.notes.append(f"strict mode cannot express {', '.join(lost)}; the "
                                     f"reply is validated after it is written")
            except NotStrict as exc:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": name, "schema": schema, "strict": False}}
                ask.notes.append(f"strict mode is off for this schema: {exc}")
        elif form == PLAIN:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": schema}}
        elif form == GUIDED:
            body["guided_json"] = schema
        else:
            body["response_format"] = {"type": "json_object"}
            if form in (OBJECT_SCHEMA, OBJECT_BOTH):
                body["response_format"]["schema"] = schema
            if form in (OBJECT_BOTH, OBJECT_PROMPT):
                _with_prompt(messages, schema_prompt(schema))
        self._record(ask, "structured", STRICT, form)

    @staticmethod
    def _stream_kind(body: dict) -> str:
        """What a server's ability to stream a request depends on: its tools, its schema."""
        if "tools" in body:
            return "tools"
        return "structured" if "response_format" in body or "guided_json" in body else "plain"

    def shape_streaming(self, body: dict, ask: Any) -> bool:
        """Whether this request goes streamed (the runtime streams): not when the server
        could not stream its kind of request before, or its profile says it cannot."""
        cannot = self._stream_kind(body) in self.unstreamed or (
            not self.server.stream_auto_tools and body.get("tool_choice") == "auto"
            and "tools" in body)
        if cannot:
            self._record(ask, "stream", "stream", "unstreamed")
            return False
        ask.forms["stream"] = "stream"
        return True

    def shape_stream(self, body: dict, ask: Any) -> None:
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
            ask.forms["stream_options"] = "stream_options"
        else:
            self._record(ask, "stream_options", "stream_options", "omitted")

    def shape_logprobs(self, body: dict, ask: Any) -> None:
        """`confidence=True`: the tokens' log-probabilities and the alternatives at each (20,
        OpenAI's most), from which the probability of every option is read; left out once the
        server refused them (the reply then carries no distribution, and the decision says
        so or draws samples)."""
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
            ask.forms["logprobs"] = "logprobs"
        else:
            self._record(ask, "logprobs", "logprobs", "omitted")

    def shape_n(self, body: dict, ask: Any, n: int) -> None:
        """`decision.Samples(n)`: the n samples asked in one request (OpenAI's `n`), left out
        once the server refused it (each sample is then a request of its own)."""
        if self.n:
            body["n"] = n
            ask.forms["n"] = "n"
        else:
            self._record(ask, "n", "n", "omitted")

    # -- a refusal ----------------------------------------------------------------------------
    def confirm(self, ask: Any) -> None:
        """The server answered `ask`: every form it carried is accepted."""
        self.confirmed.update((k, f) for k, f in ask.forms.items() if f != "omitted")

    def culprits(self, words: str, ask: Any) -> list[str]:
        """The kinds of form in `ask` that the server's `words` are about. A refusal without
        words (llama-cpp-python's function-calling chat format crashes on tool_choice
        "required" with an empty 500) is about every form not yet known to be accepted."""
        w = _bare(words).lower()
        sent = ask.forms
        if not w or w in ("internal server error", "internal_server_error"):
            found = [k for k, f in sent.items() if f not in ("omitted", "stream") and
                     (k, f) not in self.confirmed and self._could_step(k, f, ask)]
            # the stream last: a server that streams one request may not stream another (no
            # earlier answer confirms it), and losing it costs only the growing reply
            return found or (["stream"] if self._may_unstream(ask) else [])
        if self._may_unstream(ask) and re.search(r"\bstream(ing|ed)?\b", w) and \
                not any(x in w for x in _WORDS["stream_options"]):
            return ["stream"]   # the same request unstreamed: nothing else is given up
        hits = [k for k in ("stream_options", "parallel_tool_calls", "tool_choice", "logprobs")
                if k in sent and sent[k] != "omitted" and any(x in w for x in _WORDS[k])]
        # the field's name is one letter: only the word `n` on its own (as in "'n' must be 1")
        if sent.get("n") == "n" and re.search(r"(?<![\w-])n(?![\w-])", w):
            hits.append("n")
        if sent.get("assistant_content") == "null" and "assistant" in w and "content" in w \
                and ("none" in w or "null" in w):
            hits.append("assistant_content")
        if "structured" in sent:
            if sent["structured"] == STRICT and any(x in w for x in _WORDS["strict"]) and \
                    "json_object" not in w:
                hits.append("strict")
            elif any(x in w for x in _WORDS["structured"]):
                hits.append("structured")
        if not hits and "tools" in ask.body and any(x in w for x in _WORDS["tools"]):
            hits.append("tools")
        return hits

    def _could_step(self, kind: str, form: str, ask: Any) -> bool:
        """Whether a nearer form than `form` is left that this very request could send (the
        one tool named only where it offers one tool)."""
        if not self._step_down(kind, form, dry=True):
            return False
        if kind == "tool_choice" and len(ask.body.get("tools") or []) != 1:
            return any(f not in (form, NAMED) for f in self.tool_choice)
        return True

    def _may_unstream(self, ask: Any) -> bool:
        """The request streamed and may go again unstreamed: never for a named server, whose
        profile says what it cannot stream."""
        return ask.forms.get("stream") == "stream" and not self.server.name

    def refused(self, status: int | str | None, words: str, ask: Any,
                where: str) -> dict | ModelCallError | None:
        """Learn from a refusal of `ask` (`status` "stream": a stream that ended before any
        reply): the record of what was refused (the caller sends the request again, shaped
        anew), an error when no nearer form is left, or None when the refusal names no form
        the request carried (it is not a negotiation)."""
        if status not in _REFUSAL_STATUSES:
            return None
        kinds = self.culprits(words, ask)
        if not kinds:
            return None
        said = ("a stream that ended before any reply (no finish_reason)" if status == "stream"
                else "a connection the server closed before any reply" if status == "dropped"
                else f"{status}: {words}" if _bare(words) else f"{status}, with no message")
        asked = []
        for kind in kinds:
            if kind == "stream":   # the kind of request, not the runtime, goes unstreamed
                self.unstreamed.add(self._stream_kind(ask.body))
                self.learned["stream"] = said
                asked.append(FORMS["stream"])
                continue
            form = ask.forms.get("structured" if kind == "strict" else kind)
            asked.append(FORMS.get(form, FORMS.get(kind, kind)))
            left = self._step_down(kind, form)
            self.learned["structured" if kind == "strict" else kind] = said
            if not left:
                return self._unsatisfiable(kind, form, said, where)
        record = {"kind": kinds[0] if len(kinds) == 1 else "+".join(kinds),
                  "asked": "; ".join(asked), "refused": said}
        self.refusals.append(record)
        return record

    def _step_down(self, kind: str, form: str | None, dry: bool = False) -> bool:
        """Take the refused form out (only say what would be left, when `dry`); False when
        nothing is left to send in its place."""
        if kind == "tools":
            if not dry:
                self.tools = False
            return False
        if kind in ("tool_choice", "strict", "structured"):
            # a refusal of json_schema is a refusal of both its forms
            gone = {STRICT} if kind == "strict" else {STRICT, PLAIN} \
                if kind == "structured" and form in (STRICT, PLAIN) else {form}
            now = self.tool_choice if kind == "tool_choice" else self.structured
            left = [f for f in now if f not in gone]
            if not dry:
                setattr(self, "tool_choice" if kind == "tool_choice" else "structured", left)
            return bool(left)
        if not dry:   # an optional field: left out from now on
            setattr(self, {"stream_options": "stream_usage", "logprobs": "logprobs", "n": "n",
                           "parallel_tool_calls": "parallel_tool_calls",
                           "assistant_content": "null_content"}[kind], False)
        return True

    def _unsatisfiable(self, kind: str, form: str | None, said: str | None = None,
                       where: str = "the server") -> ModelCallError:
        what = FORMS.get(form, FORMS.get(kind, kind)) if form else FORMS.get(kind, kind)
        words = said or self.learned.get("structured" if kind == "strict" else kind, "")
        mode = "tools" if kind in ("tools", "tool_choice") else "json_schema"
        tried = {"tools": "", "tool_choice": " (tried: " + ", ".join(
            FORMS[f] for f in self.server.tool_choice) + ")",
            "structured": " (tried: " + ", ".join(FORMS[f] for f in self.server.structured)
            + ")"}.get("structured" if kind == "strict" else kind, "")
        return ModelCallError(
            f"{where} does not accept {what} ({words}), and no nearer form of mode={mode!r} is "
            f"left that it accepts{tried}. Running again will not help: ask in another mode "
            f"(mode='menu' needs nothing of the server), or start the server with what the "
            f"mode needs (docs/models.md lists what each server takes).", kind="model_error")
