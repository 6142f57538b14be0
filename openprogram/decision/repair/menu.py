"""The "menu" repairs: what the option set makes unambiguous in a pick that failed its check.

An option name that differs from one on the menu only in case or in -, _, . and spaces
(`repair_name`), a lone object of arguments whose keys fit exactly one option's parameters
(`repair_wrapper`), a value the option's JSON Schema reads one way only — an allowed value in
other case, `"3"` for an integer (`repair_value`, found along an error path by `value_fix`).
Each is taken only when exactly one candidate fits; none guesses an option, changes a value's
meaning or fills a missing field. The same finders say, for a re-ask, what the model nearly
wrote (`name_hint`, `value_hint`), so a level that does not repair still points at the fix.
"""
from __future__ import annotations

import json
import re

from ...base.errors import OptionError
from ...base.text import cut_middle
from ...trace.records import Repair
from ..schema.refs import Document
from .syntax import _SHOWN

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

__all__ = ["near_names", "repair_name", "repair_wrapper", "repair_value", "value_fix",
           "name_hint", "value_hint"]


_FOLD = re.compile(r"[-_\s.]+")


def _case(text: str) -> str:
    """`text` in lower case where a letter differs only in case: each character as its one
    lower-case letter whose upper case is that character again. Not Unicode's full case
    folding (`casefold`), which also reads the KELVIN SIGN as `k`, `ß` as `ss` and `ﬁ` as
    `fi`: those are other characters, not another case of the same one, and "menu" repairs
    only what differs in case. Keeps the length, so texts of other lengths never match."""
    if text.isascii():
        return text.lower()
    out = []
    for c in text:
        low = c.lower()
        out.append(low if len(low) == 1 and (low == c or low.upper() == c) else c)
    return "".join(out)


def _fold(name: str) -> str:
    return _case(_shape(name))


def _shape(name: str) -> str:
    return _FOLD.sub("_", name.strip()).strip("_")


def near_names(name: str, names: list[str]) -> list[str]:
    """The option names `name` differs from only in case or -, _, . and spaces."""
    shape = _shape(name)
    if not shape:
        return []
    folded = [(_fold(n), n) for n in names]
    if all(len(f) != len(shape) for f, _ in folded):
        return []  # (case keeps the length: a long name is not read letter by letter)
    key = _case(shape)
    return [n for f, n in folded if f == key]


def repair_name(name: str, names: list[str]) -> str | None:
    """The one option name `name` nearly matches, or None (none, or two or more)."""
    near = near_names(name, names)
    return near[0] if len(near) == 1 else None


def repair_wrapper(obj: Any, menu: list[Any]) -> tuple[str, dict[str, Any]] | None:
    """A lone object of arguments as a pick: `(option name, args)` of the one option whose
    model-written parameters its keys match (all required ones present, none unknown)."""
    if not isinstance(obj, dict) or not obj:
        return None
    if set(obj) == {"args"} and isinstance(obj["args"], dict) and obj["args"]:
        obj = obj["args"]
    keys = set(obj)
    fits = []
    for o in menu:
        params = o.llm_params
        names = {p.name for p in params}
        if keys <= names and {p.name for p in params if p.required} <= keys:
            fits.append(o.name)
    return (fits[0], dict(obj)) if len(fits) == 1 else None


_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,300})")
_NUM = re.compile(r"-?(?:0|[1-9][0-9]{0,300})(?:\.[0-9]{1,300})?(?:[eE][+-]?[0-9]{1,3})?")


def _types(s: dict[str, Any]) -> set[str]:
    t = s.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return set(t)
    return set()


def repair_value(value: Any, s: Any) -> tuple[Any, str] | None:
    """`(the value as the schema node `s` wants it, the repair kind)` when exactly one value
    fits and the conversion loses nothing; None otherwise."""
    if not isinstance(s, dict):
        return None
    enum = s.get("enum")
    if "const" in s:
        enum = [s["const"]]
    if isinstance(enum, list):
        if isinstance(value, str):
            bare = value.strip()
            same = [e for e in enum if isinstance(e, str) and len(e.strip()) == len(bare)]
            key = _case(bare) if same else None  # (case keeps the length)
            near = [e for e in same if _case(e.strip()) == key]
            if len(near) == 1 and near[0] != value:
                return near[0], "enum_value"
            conv = _from_string(value, {"integer", "number", "boolean"})
            if conv is not None and any(type(e) is type(conv[0]) and e == conv[0]
                                        for e in enum):
                return conv
        elif isinstance(value, int) and not isinstance(value, bool) and str(value) in enum:
            return str(value), "number_to_string"
        return None
    types = _types(s)
    if isinstance(value, str):
        return _from_string(value, types)
    if "string" in types and not (types & {"integer", "number", "boolean", "null"}):
        if isinstance(value, bool):
            return ("true" if value else "false"), "number_to_string"
        if isinstance(value, int):
            return str(value), "number_to_string"
    return None


def _from_string(value: str, types: set[str]) -> tuple[Any, str] | None:
    if "string" in types:
        return None  # a string is already what is wanted: its being wrong is another matter
    if types & {"integer", "number"} and _INT.fullmatch(value):
        return int(value), "string_to_number"
    if "number" in types and _NUM.fullmatch(value):
        f = float(value)
        if f - f == 0:  # finite: "1e999" is no number a schema accepts
            return f, "string_to_number"
        return None
    if "boolean" in types and value in ("true", "false"):
        return value == "true", "string_to_boolean"
    return None


_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[([0-9]+)\]")


def _parts(path: str) -> list[Any] | None:
    parts: list[Any] = []
    pos = 0
    while pos < len(path):
        m = _PATH_PART.match(path, pos)
        if m is None:
            return None
        parts.append(m.group(1) if m.group(2) is None else int(m.group(2)))
        pos = m.end()
    return parts


def _deref(s: Any, root: dict[str, Any]) -> Any:
    doc = Document(root)
    for _ in range(32):
        if not isinstance(s, dict) or "$ref" not in s:
            break
        try:   # (the one rule every reader of a schema follows: schema/refs.py)
            s = doc.resolve(s["$ref"])[0]
        except OptionError:
            return None
    if isinstance(s, dict):
        for key in ("anyOf", "oneOf"):
            alts = s.get(key)
            if isinstance(alts, list):  # `X | None`: the one alternative that is not null
                real = [a for a in alts if not (isinstance(a, dict) and a.get("type") == "null")]
                return _deref(real[0], root) if len(real) == 1 else None
    return s


def value_fix(option: Any, args: dict[str, Any], path: str) -> tuple[dict[str, Any], Repair] | None:
    """The option's `args` with the value at the error `path` (`args.a.b[0]`) repaired, and the
    record of it; None when no single repair fits."""
    parts = _parts(path)
    if not parts or parts[0] != "args" or len(parts) < 2 or not isinstance(parts[1], str):
        return None
    param = next((p for p in option.llm_params if p.name == parts[1]), None)
    if param is None:
        return None
    root = param.field.json_schema()
    s: Any = _deref(root, root)
    value: Any = args
    holders = []
    for part in parts[1:]:
        if isinstance(part, str):
            if not isinstance(value, dict) or part not in value:
                return None
            if part != parts[1]:
                props = s.get("properties") if isinstance(s, dict) else None
                s = _deref(props.get(part), root) if isinstance(props, dict) else None
        else:
            if not isinstance(value, list) or part >= len(value):
                return None
            if isinstance(s, dict):
                pre = s.get("prefixItems")
                s = _deref(pre[part] if isinstance(pre, list) and part < len(pre)
                           else s.get("items"), root)
        holders.append((value, part))
        value = value[part]
    if s is None:
        return None
    fixed = repair_value(value, s)
    if fixed is None:
        return None
    new, kind = fixed
    # a copy along the path: the extracted pick on the record stays as the model wrote it
    out = dict(args)
    cur: Any = out
    for _holder, part in holders[:-1]:
        nxt = cur[part]
        nxt = dict(nxt) if isinstance(nxt, dict) else list(nxt)
        cur[part] = nxt
        cur = nxt
    cur[holders[-1][1]] = new
    shown = path
    return out, Repair(kind, shown, _json(value), _json(new))


def _json(value: Any) -> str:
    try:
        return cut_middle(json.dumps(value, ensure_ascii=False), _SHOWN)
    except (TypeError, ValueError):
        return cut_middle(repr(value), _SHOWN)


def name_hint(name: str, names: list[str]) -> str:
    """What a re-ask says about an option name that nearly matches: the name to write, or the
    ones it cannot tell apart; "" when none is near."""
    near = near_names(name, names)
    if len(near) == 1:
        return f"It nearly matches the option {near[0]!r}: write \"call\": {_json(near[0])}."
    if near:
        return (f"It is equally near the options {', '.join(map(repr, near))}: write exactly "
                f"the one you mean.")
    return ""


def value_hint(err: Any, option: Any, args: dict[str, Any]) -> str:
    """What a re-ask says after `err` (a AttemptError from validating `args`) where one value is
    what the model nearly wrote (an allowed value in other case, a number in quotes): the value
    to write; "" otherwise."""
    if err.kind not in ("type_mismatch", "enum_violation") or not err.path:
        return ""
    fix = value_fix(option, args, err.path)
    if fix is None:
        return ""
    r = fix[1]
    return f"At {err.path} write {r.after} ({_HOW[r.kind]})."


_HOW = {"enum_value": "the allowed value exactly as listed",
        "string_to_number": "the number without quotes",
        "string_to_boolean": "true or false without quotes",
        "number_to_string": "the text in quotes"}
