"""`to_jsonable`: a value JSON can hold stays that value; the rest becomes its JSON form or a
tagged repr; the result always survives a strict `json.dumps` (no NaN, UTF-8 encodable)."""
import dataclasses
import datetime
import enum
import json
import random
import sys
from decimal import Decimal
from typing import Optional

import numpy as np
import pydantic
import pytest

from openprogram.base.json_form import MAX_DEPTH, REPR_LIMIT, to_jsonable


def strict(value):
    """to_jsonable(value) written as strict JSON, UTF-8 encoded, and read back."""
    text = json.dumps(to_jsonable(value), allow_nan=False, ensure_ascii=False)
    return json.loads(text.encode("utf-8").decode("utf-8"))


def name_of(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)
    ODD = object()


class Level(enum.IntEnum):
    LOW = 1


class Perm(enum.Flag):
    R = 4
    W = 2


@dataclasses.dataclass
class Stop:
    name: str
    when: datetime.date
    color: Color = Color.RED


@dataclasses.dataclass
class Trip:
    stops: list
    budget: float
    back: Optional["Trip"] = None


class Hotel(pydantic.BaseModel):
    name: str
    stars: int
    color: Color = Color.RED
    opened: datetime.datetime
    tags: set[str] = set()


class Booking(pydantic.BaseModel):
    hotel: Hotel
    nights: list[int]
    price: Decimal


# -- what JSON can hold stays exactly that --------------------------------------------------------

@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 10 ** 100, 1.5, -0.0, 1e308, "", "plain", "ünïcödé ✓ 😀",
    [], {}, [1, "a", None, [2.5, {"k": [True]}]], {"t": "a", "d": 1, "nested": {"x": [1, 2]}},
])
def test_a_json_value_comes_back_equal_and_of_the_same_types(value):
    out = to_jsonable(value)
    assert out == value and strict(value) == value
    assert json.dumps(out) == json.dumps(value)      # same types all the way down


def test_tuples_and_sets_become_lists_and_subclasses_the_plain_types():
    class Name(str):
        def __str__(self):
            return "not the value"

    class Count(int):
        pass

    out = to_jsonable({"t": (1, (2, 3)), "s": {3, 1, 2}, "f": frozenset({"b", "a"}),
                       "name": Name("ada"), "n": Count(4), "np_f": np.float64(0.25),
                       "np_i": np.int64(9), "mixed": {1, "a"}})
    assert out["t"] == [1, [2, 3]] and out["s"] == [1, 2, 3] and out["f"] == ["a", "b"]
    assert type(out["name"]) is str and out["name"] == "ada"
    assert type(out["n"]) is int and type(out["np_f"]) is float and out["np_i"] == 9
    assert type(out["np_i"]) is int and sorted(map(str, out["mixed"])) == ["1", "a"]


# -- JSON forms: enums, dataclasses, pydantic models, dates ---------------------------------------

def test_enum_members_become_their_values_json_form():
    assert to_jsonable([Color.RED, Color.PAIR, Level.LOW, Perm.R | Perm.W]) == ["red", [1, 2], 1, 6]
    assert type(to_jsonable(Level.LOW)) is int
    odd = to_jsonable(Color.ODD)                      # a value JSON cannot hold: the member, tagged
    assert odd["type"] == f"{__name__}.Color" and odd["repr"].startswith("<Color.ODD: <object")


def test_dates_and_times_become_iso_text():
    tz = datetime.timezone(datetime.timedelta(hours=2))
    assert strict([datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tz),
                   datetime.time(23, 59)]) == \
        ["2024-02-29", "2024-01-02T03:04:05+02:00", "23:59:00"]


def test_a_dataclass_becomes_the_dict_of_its_fields_all_the_way_down():
    trip = Trip([Stop("Pisa", datetime.date(2024, 5, 1)), Stop("Rome", datetime.date(2024, 5, 2),
                                                              Color.PAIR)], 99.5)
    assert strict(trip) == {"stops": [{"name": "Pisa", "when": "2024-05-01", "color": "red"},
                                      {"name": "Rome", "when": "2024-05-02", "color": [1, 2]}],
                            "budget": 99.5, "back": None}
    trip.back = trip                                   # dataclasses.asdict would never return
    out = strict(trip)
    assert out["back"]["type"] == f"{__name__}.Trip" and "cycle" in out["back"]["repr"]
    assert to_jsonable(Trip)["type"] == "type"          # the class itself is not an instance


def test_a_pydantic_model_becomes_its_json_mode_dump():
    booking = Booking(hotel=Hotel(name="H", stars=4, opened=datetime.datetime(2020, 1, 1),
                                  tags={"sea"}), nights=[1, 2], price=Decimal("10.50"))
    out = strict(booking)
    assert out == booking.model_dump(mode="json")
    assert out == {"hotel": {"name": "H", "stars": 4, "color": "red",
                             "opened": "2020-01-01T00:00:00", "tags": ["sea"]},
                   "nights": [1, 2], "price": "10.50"}
    assert strict({"results": [booking, Hotel]})["results"][1]["type"] == \
        "pydantic._internal._model_construction.ModelMetaclass"


def test_a_model_dump_that_fails_gives_a_tagged_repr():
    class Broken:
        def model_dump(self, mode):
            raise ValueError("Circular reference detected")

        def __repr__(self):
            return "Broken()"

    assert to_jsonable(Broken()) == {"repr": "Broken()", "type": name_of(Broken)}


# -- tagged reprs ---------------------------------------------------------------------------------

def test_exceptions_and_other_objects_become_tagged_reprs():
    out = strict([ValueError("bad input"), b"\x00bytes", Decimal("1.1"),
                  datetime.timedelta(seconds=3), object, print])
    assert out[0] == {"repr": "ValueError('bad input')", "type": "ValueError"}
    assert out[1] == {"repr": "b'\\x00bytes'", "type": "bytes"}
    assert out[2] == {"repr": "Decimal('1.1')", "type": "decimal.Decimal"}
    assert out[3] == {"repr": "datetime.timedelta(seconds=3)", "type": "datetime.timedelta"}
    assert out[4] == {"repr": "<class 'object'>", "type": "type"}
    assert out[5]["type"] == "builtin_function_or_method"
    array = to_jsonable(np.arange(3))
    assert array == {"repr": "array([0, 1, 2])", "type": "numpy.ndarray"}


def test_a_tagged_repr_is_bounded_and_a_failing_repr_is_survived():
    class Huge:
        def __repr__(self):
            return "x" * 1_000_000

    class Refuses:
        def __repr__(self):
            raise RuntimeError("no repr")

    huge = to_jsonable(Huge())["repr"]
    assert huge == "x" * REPR_LIMIT + f"... [{1_000_000 - REPR_LIMIT} more characters]"
    assert to_jsonable(Refuses()) == {
        "repr": f"<{name_of(Refuses)} object; its repr raised RuntimeError>",
        "type": name_of(Refuses)}


# -- made safe ------------------------------------------------------------------------------------

def test_non_finite_floats_are_tagged_so_strict_json_accepts_them():
    out = strict({"a": float("nan"), "b": float("inf"), "c": [float("-inf"), np.float64("nan")]})
    assert out == {"a": {"repr": "nan", "type": "float"}, "b": {"repr": "inf", "type": "float"},
                   "c": [{"repr": "-inf", "type": "float"}, {"repr": "nan", "type": "float"}]}


def test_lone_surrogates_are_replaced_and_pairs_joined():
    out = to_jsonable({"bad\udc80key": "a\ud800b", "pair": "\ud83d\ude00", "fine": "é"})
    assert out == {"bad\ufffdkey": "a\ufffdb", "pair": "😀", "fine": "é"}
    "".join(out).encode("utf-8")
    strict(out)


def test_huge_integers_that_json_cannot_write_are_tagged():
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if not limit:  # this interpreter writes any int: a big one stays an int
        assert to_jsonable(10 ** 5000) == 10 ** 5000
        return
    n = 10 ** (limit + 10)
    assert to_jsonable(n) == {"repr": f"<int of {n.bit_length()} bits>", "type": "int"}
    assert to_jsonable(10 ** (limit - 10)) == 10 ** (limit - 10)


def test_cycles_are_cut_and_shared_values_are_not():
    shared = {"k": 1}
    loop = [1]
    loop.append(loop)
    d = {"self": None, "a": shared, "b": shared}
    d["self"] = d
    out = strict({"loop": loop, "d": d})
    assert out["loop"][0] == 1 and out["loop"][1]["type"] == "list"
    assert "contains itself" in out["loop"][1]["repr"]
    assert out["d"]["a"] == out["d"]["b"] == {"k": 1}
    assert out["d"]["self"]["type"] == "dict"


def test_deep_nesting_is_cut_at_the_bound_without_an_error():
    deep = leaf = []
    for _ in range(50_000):
        leaf.append([])
        leaf = leaf[0]
    out = strict(deep)
    depth, node = 0, out
    while isinstance(node, list):
        node, depth = node[0], depth + 1
    assert depth == MAX_DEPTH and "nested deeper than" in node["repr"]
    shallow = [[[[1]]]]
    assert to_jsonable(shallow) == shallow


def test_mapping_keys_follow_json_and_colliding_keys_keep_both():
    out = to_jsonable({1: "a", None: "b", 2.5: "c", (1, 2): "d", Color.RED: "e"})
    assert out == {"1": "a", "null": "b", "2.5": "c", "(1, 2)": "d", "red": "e"}
    both = strict({1: "int", "1": "str"})
    assert both == {"type": "dict", "items": [[1, "int"], ["1", "str"]]}


def test_it_never_raises_on_hostile_values():
    class BadMapping(dict):
        def items(self):
            raise OSError("items broke")

    class BadIndex:
        def __index__(self):
            raise ValueError("no index")

        def __repr__(self):
            return "BadIndex()"

    class BadClassAttr:
        @property
        def model_dump(self):
            raise RuntimeError("property broke")

    @dataclasses.dataclass
    class BadField:
        x: int

    bad_field = BadField(1)
    del bad_field.x            # dataclasses.fields still names it; reading it (and repr) raises
    hostile = [BadMapping(a=1), BadIndex(), BadClassAttr(), bad_field, {"k": BadIndex()}]
    out = [strict(h) for h in hostile]
    assert out[0] == {"repr": "{'a': 1}", "type": name_of(BadMapping)}
    assert out[1] == {"repr": "BadIndex()", "type": name_of(BadIndex)}
    assert out[2]["type"] == name_of(BadClassAttr) and out[4] == {"k": out[1]}
    assert out[3] == {"repr": f"<{name_of(BadField)} object; its repr raised AttributeError>",
                      "type": name_of(BadField)}


def test_random_mixtures_always_dump_strictly():
    rnd = random.Random(20261214)
    atoms = [None, True, 3, -2.5, float("nan"), "s", "\ud800", Color.RED, Level.LOW,
             datetime.date(2024, 1, 1), ValueError("e"), b"b", Decimal("1"), object(),
             np.int64(1), Stop("x", datetime.date(2024, 1, 2))]

    def build(depth):
        kind = rnd.randrange(5) if depth < 6 else 0
        if kind == 0:
            return rnd.choice(atoms)
        items = [build(depth + 1) for _ in range(rnd.randrange(4))]
        if kind == 1:
            return items
        if kind == 2:
            return tuple(items)
        if kind == 3:
            return {rnd.choice(["a", 1, None, (1,), Color.RED]): x for x in items}
        return {str(i): x for i, x in enumerate(items)}

    for _ in range(500):
        value = build(0)
        first = strict(value)
        assert strict(first) == first              # its own JSON form is a fixed point


def test_json_ready_writes_the_text_to_jsonable_writes_and_shares_what_is_json():
    """The journal encodes `json_ready(value)` at once: it must write what `to_jsonable(value)`
    writes for every value, while returning a value that is already JSON uncopied."""
    from openprogram.base.json_form import json_ready
    rnd = random.Random(20261206)
    atoms = [None, True, 3, -2.5, 1e308, float("nan"), float("inf"), "s", "ünï", "\ud800",
             "a\udc00b", 10 ** 5000, Color.RED, Level.LOW, datetime.date(2024, 1, 1),
             ValueError("e"), b"b", Decimal("1"), np.int64(1), np.float64(0.5), "x" * 50]

    def build(depth):
        kind = rnd.randrange(5) if depth < 6 else 0
        if kind == 0:
            return rnd.choice(atoms)
        items = [build(depth + 1) for _ in range(rnd.randrange(4))]
        if kind == 1:
            return items
        if kind == 2:
            return tuple(items)
        if kind == 3:
            return {rnd.choice(["a", 1, None, "\ud800k", (1,), Color.RED]): x for x in items}
        return {str(i): x for i, x in enumerate(items)}

    cycle: list = [1]
    cycle.append(cycle)
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    values = [build(0) for _ in range(500)] + [cycle, deep, {"k": cycle}, {1: "a", "1": "b"}]
    for value in values:
        assert json.dumps(json_ready(value)) == json.dumps(to_jsonable(value)), value
    plain = {"call": "route", "args": {"message": "m", "priority": 2, "tags": ["a", 1.5, None]}}
    assert json_ready(plain) is plain and json_ready("ünï") == "ünï"


def test_the_encoder_made_once_writes_and_refuses_what_json_encoder_does():
    """base/jsonl.encoder: the C encoder made once (no markers shared between threads) writes
    JSONEncoder's text; a cycle or a default that raises goes through JSONEncoder, which raises
    what it always has. jsonl.loads reads what json.loads reads and refuses what it refuses."""
    import math

    from openprogram.base import jsonl

    class Odd:
        def __repr__(self):
            return "odd ü"

    values = [None, "ü \ud800 \"q\"\n", 1.5, math.nan, -math.inf, 10**40, True, [], {},
              {"b": [1, {"z": None, "a": Odd()}], "a": (1, 2), 3: "int key"},
              [[[["deep"]]]], {"t": 1e-7}]
    for options in ({"ensure_ascii": False, "separators": (",", ":"), "default": repr},
                    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True,
                     "default": repr}, {}):
        fast, general = jsonl.encoder(**options), json.JSONEncoder(**options).encode
        for v in values:
            try:
                want = general(v)
            except TypeError as exc:   # Odd() with no default
                with pytest.raises(TypeError, match=str(exc)[:20]):
                    fast(v)
                continue
            assert fast(v) == want, (options, v)
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular reference"):
        jsonl.encoder(separators=(",", ":"))(cyclic)
    assert jsonl.encoder()([1, [2]]) == "[1, [2]]"   # still writes after a refusal
    for text in ['{"a": [1, 2.5, "x"]}', '  {"a": 1}  \n', '"s"', "[] ", "1e400"]:
        assert jsonl.loads(text) == json.loads(text) or text == "1e400"
    for bad in ['{"a": 1} x', "", '{"a": }', "\ufeff{}", "[1,"]:
        with pytest.raises(ValueError):
            jsonl.loads(bad)
