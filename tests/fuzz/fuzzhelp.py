"""Generators for the fuzz tests, and an oracle that knows what each generated parameter declares.

An option set is generated from a small model of declared types (`Ty`), independent of
`options.Field`: the same `Ty` writes a function's annotation or a schema's entry, draws a valid
value, and (`fits`) re-checks whatever a function or a result finally received. Replies are drawn
valid, mutated (a field swapped for a hostile value, dropped, truncated, an injected hidden or
runtime parameter) or plain hostile (random JSON, surrogates escaped and raw, NUL, numbers JSON
cannot hold, markup, deep nesting, long strings), and serialized by hand so that text `json.dumps`
would never write (a raw lone surrogate, `1e400`) reaches the reply.
"""
from __future__ import annotations

import functools
import json
import math
import os
import re
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from openprogram import Runtime

LONG = os.environ.get("OPENPROGRAM_FUZZ") == "long"


def budget(ci: int, long: int) -> settings:
    """The number of examples of one property: `ci` in the derandomized CI profile, `long` in
    the long run (OPENPROGRAM_FUZZ=long), scaled by OPENPROGRAM_FUZZ_SCALE there."""
    scale = float(os.environ.get("OPENPROGRAM_FUZZ_SCALE", "1")) if LONG else 1
    return settings(max_examples=max(1, int((long if LONG else ci) * scale)),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example,
                                           HealthCheck.filter_too_much])


# ---------------------------------------------------------------------------------------------
# Declared types
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ty:
    kind: str                       # str int float bool list dict any enum opt union object
    sub: Ty | None = None         # list / dict item, opt's inner type
    values: tuple = ()              # enum values
    alts: tuple = ()                # union alternatives
    fields: tuple = ()              # object fields: ((name, Ty), ...)

    @property
    def base(self) -> Ty:
        """An enum's base type, as options.py derives it (one kind of value, else any)."""
        kinds = {type(v) for v in self.values}
        if len(kinds) == 1:
            return Ty({str: "str", int: "int", float: "float", bool: "bool"}[kinds.pop()])
        return Ty("any")


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_clean(v: Any) -> bool:
    """A value JSON can hold and UTF-8 can write: finite numbers, valid Unicode, str keys."""
    try:
        json.dumps(v, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        return False
    return True


def fits(v: Any, t: Ty) -> bool:
    """Does `v` satisfy the declared type `t`? The oracle, written apart from options.validate."""
    k = t.kind
    if k == "str":
        return type(v) is str and not _SURROGATE.search(v)
    if k == "int":
        return type(v) is int
    if k == "float":
        return type(v) is float and math.isfinite(v)
    if k == "bool":
        return type(v) is bool
    if k == "any":
        return json_clean(v)
    if k == "list":
        return type(v) is list and (all(fits(x, t.sub) for x in v) if t.sub else json_clean(v))
    if k == "dict":
        return (type(v) is dict and all(type(key) is str and fits(key, Ty("str")) for key in v)
                and (all(fits(x, t.sub) for x in v.values()) if t.sub else json_clean(v)))
    if k == "enum":
        # the value is one of the declared values, and of that value's type: Literal[1, "a"]
        # never receives 1.0, and True is never the allowed value 1
        return fits(v, t.base) and any(v == o and type(v) is type(o) for o in t.values)
    if k == "opt":
        return v is None or fits(v, t.sub)
    if k == "union":
        return any(fits(v, a) for a in t.alts)
    if k == "object":
        names = [n for n, _ in t.fields]
        return type(v) is dict and sorted(v) == sorted(names) and \
            all(fits(v[n], ft) for n, ft in t.fields)
    raise AssertionError(k)


# -- hostile text and values ------------------------------------------------------------------

MARKUP = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<opxss>",
          "<iframe src=javascript:alert(1)>", "<svg onload=alert(1)>", "</pre></div><opxss>",
          "$\\href{https://evil.example}{click}$", "&lt;opxss&gt;", "<!--", "]]>"]
#: The tag names the markup above opens: none may appear as a tag in any HTML view.
HOSTILE_TAGS = {"script", "img", "opxss", "iframe", "svg"}
HOSTILE_STRINGS = ["\ud800", "a\udfffb", "\udc80\ud800", "\x00", "nul\x00byte", "\u202e", "",
                   "\\", '"', "\ufeff", "😀", "\U0010ffff", *MARKUP]


@dataclass(frozen=True)
class Lit:
    """Text written into the reply as it stands: a number JSON cannot hold, deep nesting."""
    text: str


HOSTILE_LITERALS = [Lit("1e400"), Lit("-1e999"), Lit("1E+400"), Lit("NaN"), Lit("Infinity"),
                    Lit("-Infinity"), Lit("1" + "0" * 400), Lit("-" + "9" * 330),
                    Lit("9" * 5000), Lit("1e-400"), Lit("-0"), Lit("[" * 300 + "]" * 300),
                    Lit("[" * 255 + "]" * 255), Lit('{"a":' * 200 + "1" + "}" * 200)]


# Strategy factories are cached: Hypothesis validates every new strategy object, and building
# them afresh on each draw cost more than running the decisions themselves.
@functools.cache
def text_values(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text: ordinary, hostile, or with lone surrogates anywhere (hypothesis leaves them out)."""
    surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    anychar = st.one_of(st.characters(codec=None, exclude_categories=()), surrogates)
    return st.one_of(st.text(max_size=max_size), st.sampled_from(HOSTILE_STRINGS),
                     st.text(anychar, max_size=max_size),
                     st.builds(lambda a, b: a + b, st.sampled_from(MARKUP), st.text(max_size=8)))


@functools.cache
def long_text() -> st.SearchStrategy[str]:
    sizes = [1000, 20_000] + ([300_000] if LONG else [])
    return st.builds(lambda n, c: c * n, st.sampled_from(sizes),
                     st.sampled_from(["a", "ж", "😀", "<opxss>", "\ud800", "\\", "{"]))


@functools.cache
def hostile_values() -> st.SearchStrategy[Any]:
    """A value that may break whatever it reaches: numbers JSON cannot hold, bad text, deep
    nesting, a long string, or simply a value of the wrong JSON type."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False,
                                                                           allow_infinity=False),
                        text_values())
    return st.one_of(st.sampled_from(HOSTILE_LITERALS), st.sampled_from(HOSTILE_STRINGS),
                     text_values(), long_text(), scalars,
                     st.lists(st.one_of(scalars, st.sampled_from(HOSTILE_LITERALS)), max_size=4),
                     st.dictionaries(text_values(8), st.one_of(
                         scalars, st.sampled_from(HOSTILE_LITERALS)), max_size=3))


@functools.cache
def json_values(leaves: st.SearchStrategy | None = None) -> st.SearchStrategy[Any]:
    leaves = leaves if leaves is not None else st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
        text_values(20), st.sampled_from(HOSTILE_LITERALS))
    return st.recursive(leaves, lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(text_values(10), kids, max_size=4)),
        max_leaves=12)


# -- writing a reply --------------------------------------------------------------------------

def dump(v: Any, raw: bool) -> str:
    """JSON text of `v`, by hand: `Lit` as it stands; strings escaped (`raw=False`, lone
    surrogates as \\udXXX) or with every character but `"` and `\\` left raw (control
    characters and lone surrogates too, which json.loads(strict=False) reads back)."""
    if isinstance(v, Lit):
        return v.text
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else {"inf": "1e400", "-inf": "-1e400"}.get(
            repr(v), "NaN")
    if isinstance(v, str):
        return ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"') if raw else json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(dump(x, raw) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{dump(str(k), raw)}: {dump(x, raw)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


@functools.cache
def valid_value(t: Ty) -> st.SearchStrategy[Any]:
    """A value that fits `t`, as a model that follows the menu would write it."""
    k = t.kind
    if k == "str":
        return st.one_of(st.text(max_size=30), st.sampled_from(MARKUP + ["\x00", "😀"]))
    if k == "int":
        return st.one_of(st.integers(-10**6, 10**6), st.integers(-10**300, 10**300))
    if k == "float":
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                         st.integers(-10**6, 10**6))
    if k == "bool":
        return st.booleans()
    if k == "any":
        return json_values(st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000),
                                     st.text(max_size=10)))
    if k == "list":
        return st.lists(valid_value(t.sub) if t.sub else valid_value(Ty("any")), max_size=4)
    if k == "dict":
        return st.dictionaries(st.text(max_size=8),
                               valid_value(t.sub) if t.sub else valid_value(Ty("any")),
                               max_size=3)
    if k == "enum":
        return st.sampled_from(t.values)
    if k == "opt":
        return st.one_of(st.none(), valid_value(t.sub))
    if k == "union":
        return st.one_of(*[valid_value(a) for a in t.alts])
    if k == "object":
        return st.fixed_dictionaries({n: valid_value(ft) for n, ft in t.fields})
    raise AssertionError(k)


def _twists(v: Any) -> list:
    """Values a careless model writes for `v`: the same thing in a neighbouring JSON type."""
    if isinstance(v, bool):
        return [int(v), str(v).lower(), float(v)]
    if isinstance(v, int):
        return [float(v) if abs(v) < 2**53 else v, v != 0, str(v), [v]]
    if isinstance(v, float):
        return [int(v) if v.is_integer() else v, str(v), v != 0]
    if isinstance(v, str):
        return [len(v), [v], {v: v}, None]
    if isinstance(v, list):
        return [{str(i): x for i, x in enumerate(v)}, v[:1] * 2, [[x] for x in v]]
    if isinstance(v, dict):
        return [list(v.values()), list(v), {k: [x] for k, x in v.items()}]
    return [0, "", False, [], {}]


@functools.cache
def twisted_value(t: Ty) -> st.SearchStrategy[Any]:
    """A valid value of `t`, then bent into a neighbouring type (1 as 1.0, true as 1, ...)."""
    return valid_value(t).flatmap(lambda v: st.sampled_from(_twists(v)))


# ---------------------------------------------------------------------------------------------
# Declared types, as annotations and as schemas
# ---------------------------------------------------------------------------------------------

ENUM_POOL = ["a", "b", "<b>c</b>", "$x$", 0, 1, 2, -5, True, False]
# No field is named after a key of a field description ("items", "type", ...): rule S3 reads
# {"items": int} as a list of int.
FIELD_NAMES = ["x", "n", "city", "entries", "mode", "data", "flag", "qty", "note", "call", "args",
               "action", "tool", "<opxss>", "a b", "ж"]


@st.composite
def enum_types(draw) -> Ty:
    values = draw(st.lists(st.sampled_from(ENUM_POOL), min_size=1, max_size=4,
                           unique_by=lambda v: (type(v), v)))
    # one kind of value most of the time: a mixed enum is the rare case
    if draw(st.integers(0, 3)):
        kind = type(values[0])
        values = [v for v in values if type(v) is kind]
    return Ty("enum", values=tuple(values))


SCALARS = [Ty("str"), Ty("int"), Ty("float"), Ty("bool")]


@functools.cache
def param_types(depth: int = 2) -> st.SearchStrategy[Ty]:
    """Types a function parameter can declare (annotation_field's vocabulary)."""
    leaf = st.one_of(st.sampled_from(SCALARS + [Ty("any"), Ty("list"), Ty("dict")]),
                     enum_types())
    if depth == 0:
        return leaf
    inner = param_types(depth - 1)
    return st.one_of(
        leaf, leaf,
        st.builds(lambda s: Ty("list", sub=s), inner),
        st.builds(lambda s: Ty("dict", sub=s), inner),
        st.builds(lambda s: Ty("opt", sub=s), inner.filter(lambda s: s.kind != "opt")),
        st.builds(lambda a, b: Ty("union", alts=(a, b)), st.sampled_from(SCALARS),
                  st.sampled_from([Ty("str"), Ty("list")])).filter(
            lambda u: u.alts[0] != u.alts[1]))


@functools.cache
def schema_types(depth: int = 2) -> st.SearchStrategy[Ty]:
    """Types a schema field can declare (schema_field's vocabulary: no Optional, no union)."""
    leaf = st.one_of(st.sampled_from(SCALARS + [Ty("any"), Ty("list"), Ty("dict")]),
                     enum_types())
    if depth == 0:
        return leaf
    inner = schema_types(depth - 1)
    return st.one_of(leaf, leaf, st.builds(lambda s: Ty("list", sub=s), inner), object_types(inner))


@functools.cache
def object_types(inner: st.SearchStrategy[Ty]) -> st.SearchStrategy[Ty]:
    return st.lists(st.tuples(st.sampled_from(FIELD_NAMES), inner), min_size=1, max_size=3,
                    unique_by=lambda f: f[0]).map(lambda fs: Ty("object", fields=tuple(fs)))


def annotation(draw, t: Ty) -> str:
    """Source text of an annotation declaring `t` (names from ANNOTATION_NAMES)."""
    k = t.kind
    if k in ("str", "int", "float", "bool"):
        text = k
    elif k == "any":
        text = draw(st.sampled_from(["Any", "typing.Any"]))
    elif k == "list":
        text = "list" if t.sub is None else draw(st.sampled_from(
            ["list[{}]", "typing.List[{}]"])).format(annotation(draw, t.sub))
    elif k == "dict":
        text = "dict" if t.sub is None else draw(st.sampled_from(
            ["dict[str, {}]", "typing.Dict[str, {}]"])).format(annotation(draw, t.sub))
    elif k == "enum":
        text = f"Literal[{', '.join(map(repr, t.values))}]"
    elif k == "opt":
        text = draw(st.sampled_from(["Optional[{}]", "{} | None"])).format(annotation(draw, t.sub))
    elif k == "union":
        text = "typing.Union[{}]".format(", ".join(annotation(draw, a) for a in t.alts))
    else:
        raise AssertionError(k)
    if draw(st.integers(0, 9)) == 0:
        text = f"Annotated[{text}, {'a <b>described</b> parameter'!r}]"
    return text


ANNOTATION_NAMES = {"typing": typing, "Any": Any, "Literal": Literal, "Optional": Optional,
                    "Annotated": Annotated, "Runtime": Runtime}


def schema_spec(draw, t: Ty) -> Any:
    """A schema entry declaring `t`, in one of the forms rule S1 allows."""
    k = t.kind
    pick = lambda *forms: draw(st.sampled_from(forms))  # noqa: E731
    if k == "str":
        return pick(str, "a <i>described</i> text", {"type": str}, {"type": "string"},
                    {"type": "str", "description": "<opxss>"})
    if k in ("int", "float", "bool"):
        py = {"int": int, "float": float, "bool": bool}[k]
        js = {"int": "integer", "float": "number", "bool": "boolean"}[k]
        return pick(py, {"type": py}, {"type": js}, {"type": k, "description": "d"})
    if k == "any":
        return typing.Any
    if k == "list":
        if t.sub is None:
            return pick(list, {"type": "array"})
        item = schema_spec(draw, t.sub)
        return [item] if draw(st.booleans()) else {"items": item}
    if k == "dict":
        return pick(dict, {"type": "object"})
    if k == "enum":
        if t.base.kind == "any" or draw(st.booleans()):
            return {"options": list(t.values)}
        return {"type": {"str": str, "int": int, "float": float, "bool": bool}[t.base.kind],
                "options": list(t.values), "description": "one of these"}
    if k == "object":
        fields = {n: schema_spec(draw, ft) for n, ft in t.fields}
        return fields if draw(st.integers(0, 3)) else {"fields": fields}
    raise AssertionError(k)


# ---------------------------------------------------------------------------------------------
# Option sets
# ---------------------------------------------------------------------------------------------

class Sentinel:
    """A context value or default that no reply can produce: received means injected."""

    def __init__(self, label: str):
        self.label = label

    def __repr__(self) -> str:
        return f"Sentinel({self.label!r})"


class UserBoom(Exception):
    """The user's own exception, raised by a generated function: it must reach the caller."""


@dataclass
class ParamSpec:
    name: str
    ty: Ty | None                   # None for hidden and runtime parameters
    source: str                     # llm, context, runtime
    default: Any = None
    has_default: bool = False
    posonly: bool = False
    ann: str | None = None
    meta_options: list | None = None


@dataclass
class OptionSpec:
    name: str
    kind: str                       # function, value, schema
    params: list[ParamSpec] = field(default_factory=list)
    value: Any = None
    ty: Ty | None = None            # schema: its object type
    fn: Any = None
    raises: str | None = None       # "boom" (UserBoom) or "retry" (openprogram.Retry)
    has_rest: bool = False
    has_extra: bool = False

    @property
    def llm(self) -> list[ParamSpec]:
        return [p for p in self.params if p.source == "llm"]

    @property
    def not_llm(self) -> set[str]:
        return {p.name for p in self.params if p.source != "llm"}


@dataclass
class Generated:
    options: Any                    # what the caller hands decision.make
    specs: list[OptionSpec]
    context: dict
    calls: list = field(default_factory=list)        # (option name, received locals, returned)
    raised: list = field(default_factory=list)       # exceptions the functions raised

    def spec(self, name: str) -> OptionSpec:
        return next(s for s in self.specs if s.name == name)


OPTION_NAMES = ["go", "stop", "search", "pay", "form", "done", "a", "ask_user", "<b>bold</b>",
                "<img src=x onerror=alert(1)>", "$\\href{https://evil.example}{x}$", "два",
                "x y"]
IDENT_NAMES = ["go", "stop", "search", "pay", "form", "done", "a", "ask_user", "route", "plan"]
PARAM_NAMES = ["x", "n", "city", "items", "mode", "data", "flag", "qty", "note", "q", "limit"]
RUNTIME_NAMES = ["runtime", "exec_runtime", "review_runtime"]


@st.composite
def function_option(draw, name: str, ident: str, gen: Generated) -> OptionSpec:
    raises = draw(st.sampled_from([None] * 6 + ["boom", "retry"]))
    spec = OptionSpec(name, "function", raises=raises)
    names = draw(st.lists(st.sampled_from(PARAM_NAMES), max_size=4, unique=True))
    for pname in names:
        t = draw(param_types())
        p = ParamSpec(pname, t, "llm")
        # an untyped parameter takes the type of its scalar default (rule S, "decided here")
        untyped = t.kind in ("str", "int", "float", "bool") and draw(st.integers(0, 4)) == 0
        if untyped or draw(st.booleans()):
            p.has_default = True
            p.default = draw(valid_value(t))
            if t.kind == "float":
                p.default = float(p.default)
        if untyped:
            p.ann = None
        elif t.kind == "enum" and draw(st.integers(0, 2)) == 0:
            # allowed values given by input_meta, on the base type's annotation
            p.ann, p.meta_options = annotation(draw, t.base), list(t.values)
        else:
            p.ann = annotation(draw, t)
        spec.params.append(p)
    for i in range(draw(st.integers(0, 2))):   # hidden: input_meta {"hidden": True}
        pname = f"secret{i}"
        p = ParamSpec(pname, None, "context",
                      ann=draw(st.sampled_from([None, "str", "set", "dict", "Any"])))
        p.has_default = draw(st.booleans())
        if p.has_default:
            p.default = Sentinel(f"default of {name}.{pname}")
        if not p.has_default or draw(st.booleans()):
            gen.context[pname] = Sentinel(f"context {pname}")
        spec.params.append(p)
    for rname in draw(st.lists(st.sampled_from(RUNTIME_NAMES + ["llm_runtime"]), max_size=2,
                               unique=True)):
        spec.params.append(ParamSpec(rname, None, "runtime", has_default=True, default=None,
                                     ann="Runtime" if rname == "llm_runtime" else None))
    spec.has_rest = draw(st.integers(0, 5)) == 0
    spec.has_extra = draw(st.integers(0, 3)) == 0
    head = [p for p in spec.params if p.source == "llm" and not p.has_default]
    for p in head[:draw(st.integers(0, len(head)))] if draw(st.integers(0, 4)) == 0 else []:
        p.posonly = True
    spec.fn = build_function(spec, ident, draw(st.integers(0, 5)) == 0, gen)
    return spec


def _param_text(p: ParamSpec) -> str:
    text = p.name + (f": {p.ann}" if p.ann else "")
    if p.has_default:
        text += f" = _D[{p.name!r}]"
    return text


def build_function(spec: OptionSpec, ident: str, is_async: bool, gen: Generated):
    """A real def (exec'd source) with the spec's signature; it records what it received."""
    pos = [p for p in spec.params if p.posonly]
    kw = [p for p in spec.params if not p.posonly]
    parts = [_param_text(p) for p in pos] + (["/"] if pos else [])
    if spec.has_rest or kw:
        parts.append("*rest" if spec.has_rest else "*")
    parts += [_param_text(p) for p in kw]
    if spec.has_extra:
        parts.append("**extra")
    doc = f"A generated option: <b>{spec.name}</b> & co."
    src = (f"{'async ' if is_async else ''}def {ident}({', '.join(parts)}):\n"
           f"    {doc!r}\n"
           f"    return _record(locals())\n")

    def record(received: dict):
        returned = Sentinel(f"returned by {spec.name}")
        gen.calls.append((spec.name, dict(received), returned))
        if spec.raises == "boom":
            exc = UserBoom(spec.name)
            gen.raised.append(exc)
            raise exc
        if spec.raises == "retry":
            from openprogram import Retry
            raise Retry("generated option says no <opxss>")
        return returned

    ns = dict(ANNOTATION_NAMES, _record=record, _D={p.name: p.default for p in spec.params})
    exec(src, ns)  # noqa: S102 - the fuzzer writes the functions an author would
    fn = ns[ident]
    meta = {p.name: {"hidden": True} for p in spec.params if p.source == "context"}
    for p in spec.llm:
        if p.meta_options is not None:
            meta[p.name] = {"options": p.meta_options}
    if meta:
        fn.input_meta = meta
    return fn


@st.composite
def option_sets(draw, max_options: int = 4) -> Generated:
    """An option set of function, value and schema options, in the dict or the list form,
    with its specs and the context its hidden parameters need."""
    gen = Generated(None, [], {})
    n = draw(st.integers(1, max_options))
    dict_form = draw(st.booleans())
    names = draw(st.lists(st.sampled_from(OPTION_NAMES if dict_form else IDENT_NAMES),
                          min_size=n, max_size=n, unique=True))
    entries: list = []
    for i, name in enumerate(names):
        kind = draw(st.sampled_from(["function", "function", "value", "schema"]))
        desc = draw(st.sampled_from([None, "Pick me <opxss> when $x$ holds", "plain"]))
        if kind == "function":
            spec = draw(function_option(name, name if not dict_form else f"fn{i}", gen))
            entry = spec.fn if desc is None else (spec.fn, desc)
        elif kind == "value":
            value = name if not dict_form else draw(st.one_of(
                st.sampled_from([0, 1, "DONE", "<opxss>", None, 2.5]),
                st.builds(lambda: {"fresh": Sentinel("value")}),
                st.builds(lambda: Sentinel("value option"))))
            spec = OptionSpec(name, "value", value=value)
            if dict_form:
                entry = value if desc is None else (value, desc)
            else:
                entry = name if desc is None else (name, desc)
        else:
            t = draw(object_types(schema_types(1)))
            spec = OptionSpec(name, "schema", ty=t)
            schema = {n: schema_spec(draw, ft) for n, ft in t.fields}  # the top level: a dict
            entry = (desc or "fill the form", schema) if dict_form else \
                (name, desc or "fill the form", schema)
        gen.specs.append(spec)
        entries.append((name, entry))
    gen.options = dict(entries) if dict_form else [e for _, e in entries]
    if draw(st.booleans()):
        gen.context["unrelated"] = Sentinel("unrelated context")
    return gen


# ---------------------------------------------------------------------------------------------
# Replies
# ---------------------------------------------------------------------------------------------

PROSE = st.one_of(st.just(""), st.sampled_from([
    "Let me think.\n", "I pick the form { not JSON }.\n", 'An example: {"call": "x"}\n',
    "```json\n{\"call\": \"nope\"}\n```\n", "<opxss>I am markup</opxss>\n",
    "$\\href{https://evil.example}{click}$ and $$x$$\n", "{{{{\n", '"unterminated\n', "```\n"]),
    text_values(60))


@st.composite
def pick_reply(draw, gen: Generated) -> str:
    """A pick written as a model might: valid, or mutated field by field, then maybe broken."""
    spec = draw(st.sampled_from(gen.specs)) if gen.specs else None
    name = spec.name if spec is not None and draw(st.integers(0, 9)) else draw(text_values(10))
    args: dict = {}
    if spec is None or spec.kind == "value":
        params = []
    elif spec.kind == "function":
        params = spec.llm
    else:
        params = [ParamSpec(n, t, "llm") for n, t in spec.ty.fields]
    mutate = draw(st.integers(0, 2)) > 0
    for p in params:
        how = draw(st.sampled_from(["valid"] * 3 + ["twisted", "hostile", "absent"])) \
            if mutate else "valid"
        if how == "valid":
            args[p.name] = draw(valid_value(p.ty))
        elif how == "twisted":
            args[p.name] = draw(twisted_value(p.ty))
        elif how == "hostile":
            args[p.name] = draw(hostile_values())
    if spec is not None and mutate:
        for pname in spec.not_llm if spec.kind == "function" else ():
            if draw(st.booleans()):   # the model tries to set what it must never set
                args[pname] = draw(st.one_of(hostile_values(), st.just("attacker")))
        for _ in range(draw(st.integers(0, 2))):
            args[draw(text_values(8))] = draw(hostile_values())
    key = draw(st.sampled_from(["call"] * 6 + ["action", "function", "tool"]))
    form = draw(st.sampled_from(["args"] * 4 + ["flat", "null", "notdict"]))
    raw = draw(st.booleans())
    if form == "args":
        text = dump({key: name, "args": args}, raw)
    elif form == "flat":
        text = dump({key: name, **{k: v for k, v in args.items() if k != key}}, raw)
    elif form == "null":
        text = dump({key: name, "args": None}, raw)
    else:
        text = dump({key: name, "args": draw(st.one_of(hostile_values(), st.lists(st.integers())))},
                    raw)
    if mutate and draw(st.integers(0, 4)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = draw(st.sampled_from([text[:cut], text[:cut] + text[cut + 1:],
                                     text[:cut] + draw(st.sampled_from('{}[]":,\\')) + text[cut:]]))
    if draw(st.booleans()):
        text = f"```json\n{text}\n```"
    return draw(PROSE) + text + draw(PROSE)


JSONISH = st.text(st.sampled_from('{}[]":,\\ \nacl0123456789.eE+-ntrufsu\ud800`<>'), max_size=200)


@st.composite
def replies(draw, gen: Generated) -> str:
    """One reply: mostly a pick (valid or mutated), else random JSON or JSON-like text."""
    kind = draw(st.sampled_from(["pick"] * 6 + ["json", "callish", "text"]))
    if kind == "pick":
        return draw(pick_reply(gen))
    if kind == "json":
        return dump(draw(json_values()), draw(st.booleans()))
    if kind == "callish":
        obj = draw(st.dictionaries(text_values(6), json_values(), max_size=3))
        obj[draw(st.sampled_from(["call", "action", "function", "tool"]))] = draw(
            st.one_of(st.sampled_from([s.name for s in gen.specs]), json_values()))
        return draw(PROSE) + dump(obj, draw(st.booleans()))
    return draw(JSONISH)
