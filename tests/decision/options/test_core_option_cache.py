"""The normalize cache: a fresh option set of functions seen before reads no signature, and a
function that changed — redefined, or the same object with new input_meta, docstring, defaults or
annotations — is never served from the cache. Work is bounded by counting calls, never by time."""
from __future__ import annotations

import functools
import gc
import inspect
import typing

import pytest

import openprogram
from openprogram import decision
from openprogram.decision.options import cache as optioncache
from openprogram.decision.options import kinds as kinds_mod
from openprogram.decision.options import menu as menu_mod
from openprogram.decision.options import normalize, render_menu
from openprogram.runtimes import ScriptedRuntime


@pytest.fixture(autouse=True)
def _fresh_cache():
    decision.clear_option_cache()
    yield
    decision.clear_option_cache()


@pytest.fixture
def reads(monkeypatch):
    """How often a signature, type hints or a docstring were read."""
    counts = {"signature": 0, "get_type_hints": 0, "getdoc": 0}

    def counting(module, name):
        original = getattr(module, name)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)
    counting(inspect, "signature")
    counting(typing, "get_type_hints")
    counting(inspect, "getdoc")
    return counts


def make_functions(n: int) -> dict:
    out = {}
    for i in range(n):
        def fn(city: str, days: int = 1, i=i):
            return (i, city, days)
        fn.__doc__ = f"Travel option {i}."
        fn.input_meta = {"city": {"description": "where to go"}, "i": {"hidden": True}}
        out[f"travel_{i}"] = fn
    return out


def define(source: str, namespace: dict | None = None):
    """Run a notebook cell's `def` and return the function it defined (as re-running a cell
    does: a new function object of the same name and qualified name)."""
    ns = {} if namespace is None else namespace
    exec(source, ns)
    return ns["pick"]


def test_a_fresh_dict_of_seen_functions_reads_no_signature(reads):
    fns = make_functions(20)
    first = normalize(dict(fns))
    assert reads["signature"] >= 20  # built once
    before = dict(reads)
    again = normalize(dict(fns))  # a re-run cell: a new dict, the same functions
    assert reads == before
    assert again is first  # the very same options, hence the same Menu: rendered once
    changed = dict(fns)
    changed["travel_3"] = make_functions(4)["travel_3"]  # a new function object
    other = normalize(changed)
    assert other is not first and other[3] is not first[3]
    assert [a is b for a, b in zip(other, first)].count(False) == 1


def test_a_whole_decision_on_seen_functions_reads_no_signature(reads):
    fns = make_functions(5)
    rt = ScriptedRuntime(rule=lambda p: '{"call": "travel_3", "args": {"city": "Rome"}}')
    assert decision.make("Pick.", dict(fns), runtime=rt, context={"i": 0}) == (0, "Rome", 1)
    before = dict(reads)
    # the hidden `i` comes from context; resolving calls the function without reading it again
    assert decision.make("Pick.", dict(fns), runtime=rt, context={"i": 9}) == (9, "Rome", 1)
    assert reads == before


def test_the_list_form_and_described_functions_are_cached_too(reads):
    def ship(order: str) -> str:
        """Ship an order."""
        return order
    normalize([ship, (ship, "Ship it now.")][:1])
    normalize({"ship": (ship, "Ship it now.")})
    before = dict(reads)
    menu = normalize([ship])
    described = normalize({"ship": (ship, "Ship it now.")})
    assert reads == before
    assert menu[0].description == "Ship an order."
    assert described[0].description == "Ship it now."


def test_a_redefined_function_is_rebuilt():
    old = define("def pick(city: str):\n    'Go to a city.'\n    return city\n")
    assert "city: str" in render_menu(normalize({"go": old}))
    new = define("def pick(city: str, days: int = 2):\n    'Go for a while.'\n"
                 "    return city, days\n")
    assert new.__qualname__ == old.__qualname__ and new is not old
    menu = normalize({"go": new})
    assert menu[0].handler is new
    assert "days: int = 2" in render_menu(menu) and "Go for a while." in render_menu(menu)
    rt = ScriptedRuntime(['{"call": "go", "args": {"city": "Oslo"}}'])
    assert decision.make("Pick.", {"go": new}, runtime=rt) == ("Oslo", 2)


def test_two_functions_alike_in_everything_but_identity_are_never_mixed_up():
    # Closures of one factory share name, qualified name, code, defaults and docstring.
    def factory(tag):
        def pick(x: int):
            return (tag, x)
        return pick
    a, b = factory("a"), factory("b")
    assert normalize({"go": a})[0].handler is a
    assert normalize({"go": b})[0].handler is b
    rt = ScriptedRuntime(rule=lambda p: '{"call": "go", "args": {"x": 1}}')
    assert decision.make("Pick.", {"go": a}, runtime=rt) == ("a", 1)
    assert decision.make("Pick.", {"go": b}, runtime=rt) == ("b", 1)


def test_an_id_reused_after_garbage_collection_is_not_served():
    # A function that is collected frees its id for the next object; an entry found under the
    # same name must still belong to the very function asked about.
    source = "def pick(x: int):\n    'first'\n    return x\n"
    first = define(source)
    normalize({"go": first})
    old_id = id(first)
    del first
    gc.collect()
    for _ in range(2000):
        other = define("def pick(y: str = 'z'):\n    'second'\n    return y\n")
        menu = normalize({"go": other})
        assert menu[0].handler is other
        assert [p.name for p in menu[0].params] == ["y"]
        if id(other) == old_id:
            break


@pytest.mark.parametrize("change", ["input_meta in place", "input_meta replaced", "docstring",
                                    "defaults", "keyword defaults", "annotations"])
def test_the_same_function_object_changed_is_rebuilt(change):
    def pick(city: str, days: int = 1, *, fast: bool = False):
        """Go somewhere."""
        return city, days, fast
    pick.input_meta = {"city": {"description": "where", "options": ["Rome", "Oslo"]}}
    before = render_menu(normalize({"go": pick}))
    if change == "input_meta in place":
        pick.input_meta["city"]["options"].append("Lima")
        expect = '"Lima"'
    elif change == "input_meta replaced":
        pick.input_meta = {"city": {"description": "the destination"}}
        expect = "the destination"
    elif change == "docstring":
        pick.__doc__ = "Travel far away."
        expect = "Travel far away."
    elif change == "defaults":
        pick.__defaults__ = (7,)
        expect = "days: int = 7"
    elif change == "keyword defaults":
        pick.__kwdefaults__ = {"fast": True}
        expect = "fast: bool = true"
    else:
        pick.__annotations__["days"] = float
        expect = "days: float"
    after = render_menu(normalize({"go": pick}))
    assert after != before and expect in after and expect not in before


def test_a_global_named_by_a_string_annotation_is_read_again_when_rebound():
    ns = {"Literal": typing.Literal}
    exec("Color = Literal['red', 'blue']\n"
         "def pick(color: 'Color'):\n    return color\n", ns)
    assert '"blue"' in render_menu(normalize({"paint": ns["pick"]}))
    exec("Color = Literal['green']", ns)  # the next cell redefines Color, not pick
    menu = render_menu(normalize({"paint": ns["pick"]}))
    assert '"green"' in menu and '"blue"' not in menu


def test_a_wrapped_function_changed_underneath_is_rebuilt():
    def inner(city: str, days: int = 1):
        return city, days

    @functools.wraps(inner)
    def outer(*args, **kwargs):
        return inner(*args, **kwargs)
    assert "days: int = 1" in render_menu(normalize({"go": outer}))
    inner.__defaults__ = (3,)
    assert "days: int = 3" in render_menu(normalize({"go": outer}))


def test_values_that_cannot_be_compared_still_work():
    class Odd:
        def __eq__(self, other):
            raise TypeError("cannot compare")
        __hash__ = object.__hash__

        def __repr__(self):
            return "Odd()"

    def pick(x: str = "a"):
        return x
    pick.input_meta = {"x": {"description": "x", "options": ["a", Odd()]}}
    first = normalize({"go": pick})
    second = normalize({"go": pick})
    assert first[0].name == second[0].name == "go"


def test_other_callables_are_rebuilt_every_time(reads):
    class Desk:
        def book(self, room: str) -> str:
            return room
    desk = Desk()
    part = functools.partial(lambda room, floor: (room, floor), floor=2)
    normalize({"book": desk.book, "part": part})
    before = reads["signature"]
    menu = normalize({"book": desk.book, "part": part})
    assert reads["signature"] > before
    assert [o.name for o in menu] == ["book", "part"]


def test_the_cache_is_bounded_and_can_be_cleared(monkeypatch, reads):
    monkeypatch.setattr(optioncache, "OPTION_CACHE_SIZE", 8)
    fns = make_functions(30)
    normalize(fns)
    assert len(optioncache._cache) == 8
    decision.clear_option_cache()
    assert len(optioncache._cache) == 0
    before = reads["signature"]
    normalize(make_functions(1) | {})
    assert reads["signature"] > before


def test_a_newly_registered_kind_is_asked_about_cached_functions():
    def pick(x: int):
        return x
    assert normalize({"go": pick})[0].kind == "function"

    class Counted(openprogram.Option):
        kind = "counted"

        @classmethod
        def from_handler(cls, name, handler, description, where):
            return cls(name, "counted") if handler is pick else None

        def resolve(self, kwargs):
            return "counted"
    openprogram.register_option_kind(Counted)
    try:
        assert normalize({"go": pick})[0].kind == "counted"
    finally:
        kinds_mod._option_kinds.remove(Counted)
        decision.clear_option_cache()


def test_a_mixed_option_set_handed_again_is_the_same_menu(monkeypatch):
    """Functions, values and schemas of the dict form: the same entries in a fresh dict give back
    the same Menu, so its text is rendered once (counted)."""
    rendered = []
    real = menu_mod._render_menu
    monkeypatch.setattr(menu_mod, "_render_menu", lambda menu: rendered.append(1) or real(menu))
    fns = make_functions(2)
    done, schema = ["a", "list", "value"], {"reason": str, "urgency": {"type": str,
                                                                      "options": ["low", "high"]}}
    entries = {**fns, "done": (done, "Nothing is left."), "stop": "STOP",
               "escalate": ("Hand it to a person.", schema)}
    first = normalize(dict(entries))
    assert first.text and rendered == [1]
    again = normalize(dict(entries))
    assert again is first and again.text == first.text and rendered == [1]
    rt = ScriptedRuntime(['{"call": "done"}', '{"call": "escalate", "args": {"reason": "r", '
                                              '"urgency": "high"}}'])
    assert decision.make("Pick.", dict(entries), runtime=rt) is done  # the very object
    assert decision.make("Pick.", dict(entries), runtime=rt) == {
        "decision": "escalate", "reason": "r", "urgency": "high"}
    assert rendered == [1]


def test_a_value_or_schema_that_changed_is_rebuilt():
    """A value entry is served only while it is the very same object; a schema only while it
    equals the schema the option was built from (one changed in place is read again)."""
    schema = {"reason": str}
    value = ["v"]
    first = normalize({"esc": ("Hand it over.", schema), "done": (value, "Done.")})
    schema["urgency"] = {"type": str, "options": ["low", "high"]}   # changed in place
    second = normalize({"esc": ("Hand it over.", schema), "done": (value, "Done.")})
    assert second is not first and second[1] is first[1]
    assert [p.name for p in second[0].params] == ["reason", "urgency"]
    other = ["v"]   # equal, but another object: the pick must return this one
    third = normalize({"esc": ("Hand it over.", schema), "done": (other, "Done.")})
    assert third[1] is not first[1] and third[1].value is other
    assert normalize({"esc": ("Hand it over.", schema), "done": (other, "Done.")}) is third
