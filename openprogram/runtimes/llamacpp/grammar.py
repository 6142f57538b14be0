"""What the model is shown and held to in json_schema mode: the schema bounded so that its
grammar always ends (`bounded_schema`), the brief one-line-per-option form of a decision schema
the model reads (`schema_brief`), and the GBNF grammar of a decision that writes the option's
name first and then only that option's arguments (`decision_grammar`)."""
from __future__ import annotations

import copy
import json
from typing import Any

from ...decision.schema.reader import first_paragraph, type_name

#: The `maxLength` a json_schema grammar gives every string whose schema sets none.
STRING_MAX_LENGTH = 64
#: The `maxItems` a json_schema grammar gives every array whose schema sets none.
ARRAY_MAX_ITEMS = 20
#: What opens the system message that shows the model the schema in json_schema mode.
SCHEMA_INSTRUCTION = "Reply with one JSON object that follows this JSON Schema:\n"
#: How the schema is shown to the model in json_schema mode (`schema_in_prompt=`).
SCHEMA_FORMS = {
    "brief": "one line per option: its name, its arguments with their types and descriptions "
             "('?' after one that may be left out), what it does; a schema of another shape "
             "than a decision's is shown as JSON (the default)",
    "json": "the JSON Schema itself, as compact JSON",
}


#: What opens the brief form. "Only the arguments the request gives" keeps optional strings
#: empty: without it this model filled them to their bound (the longest reply 264 tokens
#: against 95 with it, in one bench run).
BRIEF_INSTRUCTION = ('Reply with one JSON object {"decision": {"call": NAME, "args": {...}}} '
                     'for one of these calls. Write only the arguments the request gives; one '
                     'marked "?" may be left out:')


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def bounded_schema(schema: Any, max_length: int = STRING_MAX_LENGTH,
                   max_items: int = ARRAY_MAX_ITEMS) -> Any:
    """A copy of `schema` in which every string without a `maxLength` (and without an enum, a
    const, a pattern or a format, which bound it already) gets `maxLength: max_length`, and
    every array with `items` but no `maxItems` gets `maxItems: max_items`. A type list such as
    `["string", "null"]` becomes an `anyOf` of one schema per type, since llama.cpp's converter
    keeps only the bare type of each member of a type list."""
    return _bound(copy.deepcopy(schema), max_length, max_items)


def _bound(s: Any, max_length: int, max_items: int) -> Any:
    if not isinstance(s, dict):
        return s
    types = s.get("type")
    if isinstance(types, list):
        rest = {k: v for k, v in s.items() if k != "type"}
        return _bound({"anyOf": [{**copy.deepcopy(rest), "type": t} for t in types]},
                      max_length, max_items)
    for key in _SCHEMA_MAPS:
        if isinstance(s.get(key), dict):
            s[key] = {k: _bound(v, max_length, max_items) for k, v in s[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(s.get(key), list):
            s[key] = [_bound(v, max_length, max_items) for v in s[key]]
    for key in ("items", "additionalProperties", "not"):
        if isinstance(s.get(key), dict):
            s[key] = _bound(s[key], max_length, max_items)
    if types == "string" and not {"maxLength", "enum", "const", "pattern", "format"} & set(s):
        s["maxLength"] = max_length
    if types == "array" and isinstance(s.get("items"), dict) and "maxItems" not in s:
        s["maxItems"] = max_items
    return s


def _picks(schema: dict) -> list[tuple[str, dict]] | None:
    """The (option name, argument schema) of each alternative of a decision schema
    (`{"decision": {"anyOf": [{"call": {"const": name}, "args": {...}}, ...]}}`), or None when
    the schema has another shape."""
    root = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(root, dict) or list(root) != ["decision"]:
        return None
    pick = root["decision"]
    alts = pick.get("anyOf", [pick]) if isinstance(pick, dict) else None
    out = []
    for alt in alts or []:
        props = alt.get("properties") if isinstance(alt, dict) else None
        if not isinstance(props, dict) or set(props) != {"call", "args"} or \
                not isinstance(props["call"], dict) or \
                not isinstance(props["call"].get("const"), str):
            return None
        out.append((props["call"]["const"], props["args"]))
    return out or None


def schema_brief(schema: dict) -> str | None:
    """A decision schema as a few lines the model reads (`schema_in_prompt="brief"`): per
    option `- name(arg: type (description), arg?: type, ...): what it does`. It says what the
    model must choose and fill; the grammar holds the rest (bounds, required keys, no other
    keys), so none of it has to be read. None for a schema of another shape."""
    picks = _picks(schema)
    if picks is None:
        return None
    pick = schema["properties"]["decision"]
    lines = [BRIEF_INSTRUCTION]
    for (name, args), alt in zip(picks, pick.get("anyOf", [pick])):
        required = set(args.get("required", ())) if isinstance(args, dict) else set()
        props = args.get("properties", {}) if isinstance(args, dict) else {}
        shown = []
        for key, prop in props.items():
            arg = f"{key}{'' if key in required else '?'}: {_brief_type(prop)}"
            about = _one_line(prop.get("description")) if isinstance(prop, dict) else ""
            shown.append(f"{arg} ({about})" if about else arg)
        about = _one_line(alt.get("description"))
        lines.append(f"- {name}({', '.join(shown)})" + (f": {about}" if about else ""))
    return "\n".join(lines)


def _brief_type(s: Any) -> str:
    if not isinstance(s, dict):
        return "any"
    if "enum" in s:
        return "|".join(json.dumps(v, ensure_ascii=False) for v in s["enum"])
    if "const" in s:
        return json.dumps(s["const"], ensure_ascii=False)
    if "$ref" in s:
        return str(s["$ref"]).rsplit("/", 1)[-1]
    if isinstance(s.get("anyOf"), list):
        return "|".join(_brief_type(a) for a in s["anyOf"])
    kind = s.get("type")
    if isinstance(kind, list):
        return "|".join(map(str, kind))
    if kind == "array":
        return f"list of {_brief_type(s.get('items'))}"
    if kind == "object" and isinstance(s.get("properties"), dict):
        return "{" + ", ".join(f"{k}: {_brief_type(v)}" for k, v in s["properties"].items()) + "}"
    return type_name(s)


def _one_line(text: Any) -> str:
    """A description's first paragraph (a docstring's details stay out), its indentation
    collapsed: one line of the brief."""
    return " ".join(first_paragraph(text).split())


def _shared_strings(s: Any, defs: dict) -> Any:
    """`s` with every bounded plain string replaced by a reference to one definition per
    bound, so a grammar holds one string rule per length instead of one per field."""
    if not isinstance(s, dict):
        return s
    if s.get("type") == "string" and set(s) <= {"type", "maxLength", "minLength",
                                                "description", "title", "default"}:
        bound = {k: s[k] for k in ("maxLength", "minLength") if k in s}
        name = "string" + "".join(f"-{k[:3]}{v}" for k, v in sorted(bound.items()))
        defs[name] = {"type": "string", **bound}
        return {"$ref": f"#/$defs/{name}"}
    out = dict(s)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _shared_strings(v, defs) for k, v in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_shared_strings(v, defs) for v in out[key]]
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _shared_strings(out[key], defs)
    return out


def decision_grammar(schema: dict, compact: bool = False) -> str:
    """The GBNF grammar of a (bounded) JSON Schema, by llama.cpp's own converter. A decision
    schema gets a grammar of its own shape: `{"decision": {"call": NAME, "args": ARGS}}` with
    the option's name written first and, after it, only that option's argument rule (the
    converter would keep one whole-object rule per option alive until the names part); strings
    of one bound share one rule. Any other schema is converted as it is. `compact=True` allows
    no space between tokens of JSON, so that every character the schema fixes — `{"decision":
    {"call":"`, the rest of a name once it is told apart, `","args":{"`, a required key — is
    the only one the grammar allows, and the runtime writes it without asking the model."""
    conv = _converter()
    picks = _picks(schema)
    if picks is None:
        conv.visit(conv.resolve_refs(copy.deepcopy(schema), "input"), "")
        return _compact(conv) if compact else conv.format_grammar()
    # (the options' own definitions: the picks' references point at the root's $defs)
    given = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    defs: dict = {}
    shared = [(name, _shared_strings(args, defs)) for name, args in picks]
    if set(defs) & set(given):   # (a definition named like a shared string rule: none shared)
        defs, shared = {}, picks
    whole = conv.resolve_refs({"$defs": {**given, **defs}, "picks": [a for _, a in shared]},
                              "input")
    alts = []
    for i, ((name, _), args) in enumerate(zip(shared, whole["picks"])):
        arg_rule = conv.visit(args, f"args{i}")
        alts.append(conv._add_rule(
            f"pick{i}", f'{conv._format_literal(json.dumps(name))} space "," space '
                        f'"\\"args\\"" space ":" space {arg_rule}'))
    conv._add_rule("root", '"{" space "\\"decision\\"" space ":" space "{" space '
                           '"\\"call\\"" space ":" space (' + " | ".join(alts) + ') "}" space '
                           '"}" space')
    return _compact(conv) if compact else conv.format_grammar()


#: What a GBNF literal escapes: the backslash first of all. llama-cpp-python's converter escapes
#: only the quote and line ends, so the JSON text of `say "hi"` (`"say \"hi\""`) became a
#: literal that ended before `hi`: llama.cpp printed a parse error and drew with no grammar.
#: And a backslash in a name (JSON `"a\\b"`) became a literal forcing `"a\b"`: no JSON.
_GBNF_ESCAPES = {"\\": "\\\\", '"': '\\"', "\r": "\\r", "\n": "\\n"}


def _converter() -> Any:
    """llama-cpp-python's `SchemaConverter`, writing each literal (an option's name, a key, an
    enum or const value, each as its JSON text) with every character GBNF escapes escaped."""
    import re

    from llama_cpp.llama_grammar import SchemaConverter
    escape = re.compile(r'[\\"\r\n]')

    class Converter(SchemaConverter):
        def _format_literal(self, literal: str) -> str:
            return '"' + escape.sub(lambda m: _GBNF_ESCAPES[m.group(0)], literal) + '"'

    return Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _compact(conv: Any) -> str:
    """The converter's grammar with its optional space (`space ::= " "?`) made empty."""
    if "space" in conv._rules:
        conv._rules["space"] = '""'
    return conv.format_grammar()
