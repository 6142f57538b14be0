"""Three ways to ask: the same option set as a text menu, as native tools, or as a JSON schema.

One class per way of asking (rule E1's text menu is `MenuMode`), each owning what it sends and
how it reads the reply back into an action `{"call": name, "args": {...}}`:
- `MenuMode` ("menu", the default): the menu text is appended to the prompt; the pick is the
  last JSON object with a call key in the reply text (rules P1, A6).
- `ToolsMode` ("tools"): each option is one native tool (its parameters' JSON Schema from the
  option class), the tool choice forced to "some tool", parallel calls off; the model's tool call
  is the pick. No tool call is `no_action`, several are `multiple_calls`; a re-ask goes back as
  the tool call's result, in the provider's own message shapes.
- `JsonSchemaMode` ("json_schema"): the provider's structured output, with one schema whose
  alternatives are the options' picks, wrapped in a root object (`{"decision": <pick>}`) since
  providers require an object at the root; the reply is parsed and validated as in menu mode.
In the tools and json_schema modes the menu text is not sent: names, descriptions and
parameters travel in the tools or the schema. The decision loop asks its mode and never
branches on the mode's name.
"""
from __future__ import annotations

import json
import re

from ..base.errors import ArgumentError, AttemptError
from ..base.model_protocol import ToolCall
from .extract import Extraction, find_action
from .options import Option
from .options.examples import example_text
from .repair import value_span
from .schema.refs import embed

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Sequence
    from typing import Any, ClassVar

__all__ = ["MODES", "Mode", "MenuMode", "ToolsMode", "JsonSchemaMode", "ResponseSchemaMode",
           "get_mode", "format_mode", "decision_schema", "option_tool", "api_name"]

#: The root key the json_schema mode wraps a pick in.
ROOT_KEY = "decision"


class Mode:
    """A way of asking. Subclasses say what the first request carries (`prompt`, `request`;
    the trace records the request as what was sent), how a response becomes an action
    (`action`), and how a re-ask continues the conversation (`reask_messages`); what a person
    reads of it (`how_sent`, `shown`) and what a reply can be (`menu_in_prompt`,
    `checked_before_sent`, `several_candidates`) are theirs too, so the step-through, the
    runtime's turns and the playground ask the mode instead of testing its name."""
    name: ClassVar[str]
    #: The menu text travels in the prompt (else the options go as tools or as a schema).
    menu_in_prompt: ClassVar[bool] = False
    #: The provider makes the reply fit the decision's schema before it is sent, so no error
    #: of the pick's shape or arguments can reach the mechanism (structured output).
    checked_before_sent: ClassVar[bool] = False
    #: A reply is free text that may hold several candidate picks (the extractor takes the last).
    several_candidates: ClassVar[bool] = False
    #: One sentence on what this way of asking sends, for the step-through.
    how_sent: ClassVar[str] = ""
    #: The options go to the provider as native tools (what its own tool search can defer).
    options_as_tools: ClassVar[bool] = False
    #: A reply can carry the runtime's probabilities of the options: the providers return no
    #: token log-probabilities for a native tool call.
    gives_probabilities: ClassVar[bool] = True
    #: The object a reply holds is a pick, with a call key (`repair=` may read a broken one);
    #: `exec(response_format=)` in menu mode reads the last JSON object of any keys instead.
    require_key: bool = True

    def __init__(self, menu: Sequence[Option]):
        self.menu = menu

    def prompt(self, prompt: str, menu_text: str) -> str:
        """The text of the first user message."""
        return prompt

    def menu_for_reask(self, menu_text: str) -> str:
        """The menu a re-ask repeats (`{menu}` of a re-ask template)."""
        return ""

    def request(self) -> dict:
        """What else goes with every model call: tools, tool choice, response format."""
        return {}

    def action(self, response: Any) -> Extraction:
        """The action in a model response, as an `Extraction` (action None: nothing found)."""
        return find_action(response.text)

    def payload(self, action: dict) -> Any:
        """The object an `exec(response_format=)` reply carries, from its action."""
        return action

    def ends_turn(self) -> frozenset:
        """Tool names whose call ends a turn with tool rounds: the picks (tools mode)."""
        return frozenset()

    def reask_messages(self, messages: list[dict], response: Any, text: str) -> list[dict]:
        """The conversation for a re-ask: by default a fresh user message with `text`."""
        return [{"role": "user", "content": text}]

    @classmethod
    def for_format(cls, option: Option) -> Mode:
        """This way of asking for `exec(response_format=)`, whose one `option` is the object."""
        return cls([option])

    def shown(self, menu_text: str) -> tuple[str, str, str]:
        """(title, text, an example reply) of what this way of asking shows the model."""
        return ("The menu the model sees", menu_text, '{"call": "<option>", "args": {...}}')

    @classmethod
    def typed_reply(cls, text: str) -> tuple[str, list]:
        """A reply a person typed (the playground), as (text, native tool calls)."""
        return text, []

    def reply_schema(self) -> dict | None:
        """The JSON Schema the provider holds a reply to before sending it, if any."""
        return None


class MenuMode(Mode):
    name = "menu"
    menu_in_prompt = True
    several_candidates = True
    how_sent = ("In the menu way of asking the request is one text: the prompt, a blank line "
                "and the menu, so the model reads its options as prose.")

    def __init__(self, menu: Sequence[Option], require_key: bool = True):
        super().__init__(menu)
        # exec(response_format=) reads the last JSON object of any keys, not a pick.
        self.require_key = require_key

    def action(self, response: Any) -> Extraction:
        return find_action(response.text, require_key=self.require_key)

    def prompt(self, prompt: str, menu_text: str) -> str:
        return prompt + "\n\n" + menu_text

    def menu_for_reask(self, menu_text: str) -> str:
        return menu_text

    @classmethod
    def for_format(cls, option: Option) -> Mode:
        # the object is the last JSON object of the reply, of any keys: not a pick
        return cls([option], require_key=False)


def api_name(name: Any, default: str = "response") -> str:
    """A name as the APIs accept it for a response format or a tool: letters, digits, `_` and
    `-`, at most 64 characters."""
    out = re.sub(r"[^A-Za-z0-9_-]", "_", str(name or ""))[:64]
    return out or default


def option_tool(option: Option, name: str | None = None) -> dict:
    """An option as a native tool spec (`name`, `description`, `parameters`); `name` is the
    name sent, when the option's own is one the providers refuse.

    An option whose examples give arguments also carries them as `input_examples` (the
    arguments objects, Anthropic's field), with `description_beside_inputs`: the description
    a provider that sends `input_examples` natively sends instead of `description`, holding
    only the examples whose request the native field has no place for. Any other provider
    sends `description`, where every example is written out."""
    params = option.json_schema()
    plain = params.pop("description", option.description) or ""
    out = {"name": name or option.name, "description": with_example_text(option, plain),
           "parameters": params}
    if option.llm_params and option.examples:
        from ..base.json_form import to_jsonable
        out["input_examples"] = [to_jsonable(e["args"]) for e in option.examples]
        out["description_beside_inputs"] = with_example_text(
            option, plain, [e for e in option.examples if e["request"]])
    return out


def with_example_text(option: Option, desc: str, examples: Any = None) -> str:
    """`desc` followed by the option's examples (or those of `examples`), requests included.
    A description is the one text every provider (and a local model's schema brief) shows
    the model, where the JSON Schema `examples` keyword holds picks only, without the request
    that leads to each."""
    examples = option.examples if examples is None else examples
    if not examples:
        return desc
    return "\n".join([desc, "Examples:"] if desc else ["Examples:"]) + "".join(
        f"\n- {example_text(option, e)}" for e in examples)


class ToolsMode(Mode):
    name = "tools"
    options_as_tools = True
    gives_probabilities = False
    how_sent = ("In the tools way of asking each option is sent as a native tool with its JSON "
                "Schema, and the model answers with a tool call instead of text.")

    def __init__(self, menu: Sequence[Option]):
        super().__init__(menu)
        # Providers refuse tool names with a dot (`math.factorial`) and the like: such a name is
        # sent in an accepted form and the call is mapped back, so the pick, the trace and the
        # panel keep the user's name.
        self.sent: dict[str, str] = {}
        for i, o in enumerate(menu):
            n = api_name(o.name, "option")
            if n in self.sent or (n != o.name and any(p.name == n for p in menu)):
                n = f"{n[:58]}_{i}"
            self.sent[n] = o.name
        self.renamed = {v: k for k, v in self.sent.items() if k != v}

    def request(self) -> dict:
        return {"tools": [option_tool(o, self.renamed.get(o.name)) for o in self.menu],
                "tool_choice": "required"}

    def ends_turn(self) -> frozenset:
        return frozenset(self.sent)

    def action(self, response: Any) -> Extraction:
        calls = response.tool_calls
        if not calls:
            return Extraction(None, None, None, 0, problem=(
                "the reply called no tool; in tools mode the pick is a call of one of the "
                "tools offered"))
        if len(calls) > 1:
            names = ", ".join(repr(c.name) for c in calls)
            raise AttemptError("multiple_calls", f"the reply called {len(calls)} tools ({names}); "
                                               f"call exactly one")
        tc = calls[0]
        return Extraction({"call": self.sent.get(tc.name, tc.name), "args": tc.args}, "call",
                          "tool_call", 1)

    def payload(self, action: dict) -> Any:
        return action.get("args")

    def shown(self, menu_text: str) -> tuple[str, str, str]:
        return ("The tools the model is offered (write a call: name {JSON arguments})",
                json.dumps(self.request()["tools"], indent=2, ensure_ascii=False),
                'option_name {"arg": 1}')

    @classmethod
    def typed_reply(cls, text: str) -> tuple[str, list]:
        """`name {"arg": value}` (or `name` alone, no arguments) is a native tool call; other
        text stays text. Arguments that are JSON but not an object are passed on as the
        provider would decode them, for the mechanism to refuse (bad_args)."""
        call = tool_call_of(text)
        return (text, []) if call is None else ("", [call])

    def reask_messages(self, messages: list[dict], response: Any, text: str) -> list[dict]:
        """The re-ask as the result of the call(s) the model made, so it sees its own call and
        what was wrong with it; after a text reply, as a user message."""
        calls = list(response.tool_calls or []) if response is not None else []
        if not calls:
            reply = response.text if response is not None and isinstance(response.text, str) \
                else ""
            return [*messages, {"role": "assistant", "content": reply},
                    {"role": "user", "content": text}]
        for i, tc in enumerate(calls):
            tc.id = tc.id or f"call_reask_{i}"
        return [*messages,
                {"role": "assistant", "content": response.text if isinstance(response.text, str)
                 else "", "tool_calls": calls, **provider_blocks(response)},
                *({"role": "tool", "tool_call_id": tc.id, "name": tc.name, "content": text}
                  for tc in calls)]


def provider_blocks(response: Any) -> dict:
    """`{"content_blocks": [...]}` for an assistant message rebuilt from `response` when the
    provider's reply held blocks the core has no form for (a native tool search's call and
    results, which the provider needs again to accept a call of a tool that search loaded),
    else nothing."""
    blocks = getattr(response, "content_blocks", None)
    return {"content_blocks": blocks} if blocks else {}


def _document(text: Any) -> Any:
    """A structured-output reply is one JSON document; None when it is not."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _span_of(text: str, path: str) -> tuple[int, int] | None:
    """Where the object at `path` sits in a one-document reply (so an error in it can be
    marked): `response` is the document itself."""
    start = len(text) - len(text.lstrip())
    whole = (start, len(text.rstrip()))
    return whole if path == "response" else value_span(text, whole, path)


def _with_examples(option: Option) -> dict:
    """An option's pick schema, with its worked picks as the JSON Schema `examples` keyword
    (an annotation: it never changes what validates) and, requests included, in its
    description."""
    pick = option.pick_schema()
    if option.examples:
        pick = {**pick, "description": with_example_text(option, pick.get("description", "")),
                "examples": option.example_picks()}
    return pick


def decision_schema(menu: Sequence[Option]) -> dict:
    """One JSON Schema whose alternatives are the options' picks, under a root object. Each
    pick is a document of its own placed below the root, so its references are rewritten
    (`embed`) to point at copies of their targets under the root's `$defs`: a reference
    means here what it means in the option's own schema (as in menu and tools mode)."""
    defs: dict = {}
    picks = [embed(_with_examples(o), defs, f"option {o.name!r}") for o in menu]
    out = {"type": "object",
           "properties": {ROOT_KEY: picks[0] if len(picks) == 1 else {"anyOf": picks}},
           "required": [ROOT_KEY], "additionalProperties": False}
    if defs:
        out["$defs"] = defs
    return out


def tool_call_of(text: str) -> ToolCall | None:
    """`name {"arg": value}` (or `name` alone) as a `ToolCall`; None when not written so."""
    head, _, rest = text.strip().partition(" ")
    name = head.split("{", 1)[0] if "{" in head and not rest else head
    if "{" in head and not rest:
        rest = head[len(name):]
    if not name.isidentifier():
        return None
    if not rest.strip():
        return ToolCall(name, {})
    try:
        args = json.loads(rest)
    except ValueError:
        return None
    return ToolCall(name, args)


class JsonSchemaMode(Mode):
    name = "json_schema"
    checked_before_sent = True
    how_sent = ("In the json_schema way of asking the provider is given one schema of every "
                "possible pick, and the reply is a JSON document that must fit it.")

    def request(self) -> dict:
        return {"response_format": {"name": "decision", "schema": decision_schema(self.menu)}}

    def action(self, response: Any) -> Extraction:
        doc = _document(response.text)
        if isinstance(doc, dict) and isinstance(doc.get(ROOT_KEY), dict):
            return Extraction(doc[ROOT_KEY], "call" if "call" in doc[ROOT_KEY] else None,
                              "schema", 1, span=_span_of(response.text, f"response.{ROOT_KEY}"))
        return find_action(response.text)  # a server that ignored the schema: as menu mode

    @classmethod
    def for_format(cls, option: Option) -> Mode:
        return ResponseSchemaMode([option])

    def shown(self, menu_text: str) -> tuple[str, str, str]:
        return ("The JSON Schema the model's reply must fit (structured output)",
                json.dumps(self.reply_schema(), indent=2, ensure_ascii=False),
                '{"decision": {"call": "<option>", "args": {...}}}')

    def reply_schema(self) -> dict | None:
        return decision_schema(self.menu)


class ResponseSchemaMode(JsonSchemaMode):
    """`exec(response_format=schema, mode="json_schema")`: the schema is the object's own."""

    def request(self) -> dict:
        (option,) = self.menu
        return {"response_format": {"name": option.name, "schema": option.json_schema()}}

    def action(self, response: Any) -> Extraction:
        doc = _document(response.text)
        if isinstance(doc, dict):
            return Extraction(doc, None, "schema", 1, span=_span_of(response.text, "response"))
        return find_action(response.text, require_key=False)


def format_mode(mode: Any, option: Option) -> Mode:
    """The way of asking for `exec(response_format=)`: the object as the last JSON object of
    the reply (menu), as the arguments of one forced tool (tools), or as the structured output
    itself (json_schema)."""
    return get_mode(mode).for_format(option)


MODES: dict[str, type[Mode]] = {m.name: m for m in (MenuMode, ToolsMode, JsonSchemaMode)}


def get_mode(mode: Any) -> type[Mode]:
    """The class of a mode name; a clear error listing the modes otherwise."""
    if mode is None:
        return MenuMode
    cls = MODES.get(mode) if isinstance(mode, str) else None
    if cls is None:
        raise ArgumentError(f"unknown mode {mode!r}: the ways of asking are "
                         f"{', '.join(repr(m) for m in MODES)}")
    return cls
