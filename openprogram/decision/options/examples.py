"""Worked picks attached to an option: `with_examples(handler, examples)` on an entry of an option
set, and the `Examples:` section of a function's docstring, read into example records, each
checked as a pick of its option (`read_examples`), and written as the menu and the tool
description show them (`example_text`). Apart from kinds.py because an example is about an option
rather than a kind of one: every kind carries its examples the same way, and `Option` calls these
functions without this module knowing any kind (the option is duck-typed here, so it imports
nothing of kinds.py and kinds.py imports it).
"""
from __future__ import annotations

import inspect
import json

from ...base.errors import AttemptError, OptionError
from ...base.json_form import to_jsonable

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    # `Option` in annotations: kinds.py's, never imported, not even here (kinds.py imports this
    # module, and tests/package/test_core_layers.py counts an import for annotations as a cycle)
    Option = Any


class WithExamples:
    """An option-set entry with worked picks attached (`openprogram.with_examples`)."""

    def __init__(self, handler: Any, examples: Any):
        if isinstance(handler, WithExamples):
            raise OptionError("with_examples(with_examples(...)): give all the examples in one "
                              "call")
        if not isinstance(examples, (list, tuple)) or not examples:
            raise OptionError(f"with_examples(handler, examples): examples is a non-empty list "
                              f"of (request, args) pairs or args dicts, got {examples!r:.80}")
        self.handler, self.examples = handler, list(examples)

    def __repr__(self) -> str:
        return f"with_examples({self.handler!r:.60}, {len(self.examples)} examples)"


def with_examples(handler: Any, examples: Any) -> WithExamples:
    """Mark an entry of an option set (any handler the dict or list form accepts) with a few
    worked picks: `examples` is a list of `(request, args)` pairs (`("refund order 7",
    {"order_id": 7})`), `{"request": ..., "args": ...}` dicts, or bare `args` dicts. Each is
    checked as a pick of the option when the option set is read; the menu shows them after
    the `Call:` line, tools mode adds them to the tool's description, json_schema mode to the
    pick schema's `examples`, and the trace's option table and the step-through say where each
    came from."""
    return WithExamples(handler, examples)


_EXAMPLES_HEADS = ("examples:", "example:")


def docstring_examples(fn: Any) -> list[tuple[str | None, dict, str]]:
    """The worked picks in a function docstring's `Examples:` section: lines `request ->
    {"arg": value}` (a JSON object after the last `->`). Other lines there (doctests, prose)
    are not picks and are left alone. Returns (request, args, the line's text)."""
    doc = inspect.getdoc(fn) or ""
    if "xample" not in doc:
        return []
    out, inside = [], False
    for raw in doc.splitlines()[:400]:  # bounded: a docstring is the user's, but may be huge
        line = raw.strip()
        if line.lower() in _EXAMPLES_HEADS:
            inside = True
            continue
        if not inside:
            continue
        if not raw.startswith((" ", "\t")) and line and line.endswith(":"):
            inside = False  # the next section (Returns:, Raises:, ...)
            continue
        request, arrow, tail = line.rpartition("->")
        if not arrow or not tail.strip().startswith("{"):
            continue
        try:
            args = json.loads(tail.strip())
        except ValueError:
            continue
        if isinstance(args, dict):
            out.append((request.strip().strip("\"'") or None, args, line))
    return out


def read_examples(option: Option, examples: Any, source: Any) -> list[dict]:
    """`examples` (pairs, dicts or args dicts; a pair may carry its source third) as the
    option's example records, each checked as a pick of it: an example that names an unknown
    argument or gives a value its parameter refuses is an OptionError naming it."""
    out = []
    for i, e in enumerate(examples):
        src = source
        if isinstance(e, tuple) and len(e) == 3:
            e, src = e[:2], e[2]
        if isinstance(e, tuple) and len(e) == 2:
            request, args = e
        elif isinstance(e, dict) and "args" in e and set(e) <= {"request", "args"}:
            request, args = e.get("request"), e["args"]
        elif isinstance(e, dict):
            request, args = None, e
        else:
            raise OptionError(f"example #{i} of option {option.name!r}: give (request, args), "
                              f"{{'request': ..., 'args': {{...}}}} or an args dict; got "
                              f"{e!r:.80}")
        if request is not None and not isinstance(request, str):
            raise OptionError(f"example #{i} of option {option.name!r}: the request is text, "
                              f"got {request!r:.60}")
        if not isinstance(args, dict):
            raise OptionError(f"example #{i} of option {option.name!r}: args is a dict of "
                              f"the option's arguments, got {args!r:.60}")
        dropped: list[str] = []
        try:
            option.bind(dict(args), runtime=None, context={}, dropped=dropped, injected=[],
                        prefix="args")
        except AttemptError as exc:
            raise OptionError(f"example #{i} of option {option.name!r} is not a valid pick of "
                              f"it: {exc}; fix the example's args") from None
        if dropped:
            raise OptionError(f"example #{i} of option {option.name!r} gives arguments the "
                              f"model cannot set ({', '.join(dropped)}); the option takes "
                              f"{[p.name for p in option.llm_params]}")
        if isinstance(src, str):
            src = {"kind": "option_set", "label": src}
        out.append({"request": request, "args": dict(args),
                    "source": dict(src or {"kind": "note", "label": "an example"})})
    return out


def redescribe(schema: dict, described: dict) -> dict:
    """`schema` (an option's args object, written as given) with the parameters'
    descriptions of `described` in place; a root that is a `$ref` is followed into `$defs`."""
    if not described:
        return schema
    import copy
    schema = copy.deepcopy(schema)   # the kind may hand out a schema it keeps
    node = schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        _, where, key = ref.split("/", 2)
        node = (schema.get(where) or {}).get(key, schema)
    props = node.get("properties")
    for name, text in described.items():
        if isinstance(props, dict) and isinstance(props.get(name), dict):
            props[name] = {**props[name], "description": text}
    return schema


def example_text(option: Option, e: dict) -> str:
    """One example as the menu and the tool description show it: `"request" → pick`."""
    call: dict = {"call": option.name}
    if e["args"] or option.llm_params:
        call["args"] = to_jsonable(e["args"])
    pick = json.dumps(call, ensure_ascii=False)
    return f"{json.dumps(e['request'], ensure_ascii=False)} → {pick}" if e["request"] else pick
