"""The user's own types: pydantic models, dataclasses, TypedDicts and Enums as options and as
function parameters — the menu they make, pydantic's validation mapped to the error kinds (with
the path and the validator's own message), and the instances a pick resolves to."""
# No `from __future__ import annotations`: a TypedDict reads NotRequired from its annotations
# as objects, not as strings.
import dataclasses
import datetime
import enum
import json
import subprocess
import sys
import textwrap
import threading
import typing
from typing import Literal, Optional

import pytest
import typing_extensions
from corehelp import pick
from pydantic import BaseModel, ConfigDict, Field, field_validator

from openprogram import DecisionError, OptionError, decision
from openprogram.decision.options import normalize, render_menu
from openprogram.runtime.tools import Tool
from openprogram.runtimes import ScriptedRuntime


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Item(BaseModel):
    """A line of an order."""
    sku: str = Field(alias="SKU", description="the stock code", pattern=r"^[A-Z]{2,8}$")
    qty: int = Field(1, ge=1, le=100, description="how many")

    @field_validator("qty")
    @classmethod
    def even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("qty must be even: items ship in pairs")
        return v


class Order(BaseModel):
    """Place an order for the customer.

    This second paragraph is not shown in the menu."""
    items: list[Item]
    priority: Priority = Priority.LOW
    note: str | None = Field(None, max_length=20)
    channel: Literal["web", "phone"] = "web"


class Node(BaseModel):
    """A tree of numbers."""
    value: int
    children: list["Node"] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Adopt(BaseModel):
    """Adopt a pet."""
    pet: Cat | Dog = Field(discriminator="kind")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    amount: float


class Loose(BaseModel):
    amount: float  # pydantic's default: allow_inf_nan=True


@dataclasses.dataclass
class Parcel:
    """Send a parcel."""
    weight_kg: float
    fragile: bool = False
    tags: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        if self.weight_kg > 30:
            raise ValueError("a parcel weighs at most 30 kg")


class Address(typing.TypedDict):
    """Where to deliver."""
    city: str
    zip: typing.NotRequired[str]


class PydanticAddress(typing_extensions.TypedDict):
    city: str


def run(options, *replies, **kw):
    """A decision over scripted replies, with one re-ask per extra reply."""
    rt = ScriptedRuntime(list(replies))
    return decision.make("Decide.", options, runtime=rt, max_retries=len(replies) - 1, **kw), rt


def failure(options, args, name=None):
    """(kind, path, message) of the one attempt a bad pick makes."""
    name = name or next(iter(options))
    with pytest.raises(DecisionError) as info:
        run(options, pick(name, args))
    att = info.value.trace.attempts[0]
    return att.error_kind, att.error_path, att.error_message


GOOD = {"items": [{"SKU": "AB", "qty": 2}]}


# -- a class as an option ------------------------------------------------------------------------


@pytest.mark.rule("O2")
def test_O2_a_class_is_an_option_in_every_form_and_named_after_itself_in_the_list_form():
    forms = {
        "dict": {"order": Order},
        "dict, described": {"order": (Order, "Order things.")},
        "schema position": {"order": ("Order things.", Order)},
        "list": [Order],
        "list, described": [(Order, "Order things.")],
    }
    for form, options in forms.items():
        (option,) = normalize(options)
        assert option.kind == "class", form
        assert option.name == ("Order" if form.startswith("list") else "order"), form
        assert option.description == ("Order things." if "described" in form or "schema" in form
                                      else "Place an order for the customer."), form
        result, _ = run(options, pick(option.name, GOOD))
        assert isinstance(result, Order) and result.items[0].qty == 2, form


@pytest.mark.rule("Z1")
def test_Z1_a_class_pick_is_an_instance_while_a_dict_schema_keeps_its_form():
    options = {"order": Order, "parcel": Parcel, "address": Address,
               "form": ("Fill the form.", {"name": str})}
    order, _ = run(options, pick("order", {"items": [{"SKU": "AB", "qty": 4}],
                                           "priority": "high"}))
    assert order == Order(items=[Item(SKU="AB", qty=4)], priority=Priority.HIGH)
    assert order.priority is Priority.HIGH and order.channel == "web"
    parcel, _ = run(options, pick("parcel", {"weight_kg": 2}))
    assert parcel == Parcel(weight_kg=2.0) and isinstance(parcel.weight_kg, float)
    address, _ = run(options, pick("address", {"city": "Bern"}))
    assert address == {"city": "Bern"} and type(address) is dict
    form, _ = run(options, pick("form", {"name": "Ada"}))
    assert form == {"decision": "form", "name": "Ada"}


def test_the_menu_shows_docstring_types_descriptions_aliases_defaults_values_constraints():
    text = render_menu(normalize({"order": Order}))
    assert text.splitlines()[2:] == [
        '- order(items: list[Item], priority: Priority = "low", note: str | null = null, '
        'channel: str = "web")',
        "  Place an order for the customer.",
        "    - items (list[Item], required)",
        "      - items[] (Item, required): A line of an order.",
        '        - items[].SKU (str, required): the stock code; matching the pattern '
        '"^[A-Z]{2,8}$"; alias of sku',
        "        - items[].qty (int, optional, default 1): how many; >= 1; <= 100",
        '    - priority (Priority, optional, default "low"); one of: "low", "high"',
        "    - note (str | null, optional, default null); at most 20 characters",
        '    - channel (str, optional, default "web"); one of: "web", "phone"',
        '  Call: {"call": "order", "args": {"items": [{"SKU": "<str>", "qty": 1}], '
        '"priority": "low", "note": "<str>", "channel": "web"}}',
    ]


def test_a_recursive_model_is_shown_once_and_its_schema_refers_to_itself():
    (option,) = normalize({"tree": Node})
    text = render_menu([option])
    assert "    - children (list[Node], optional, default [])" in text
    assert text.count("children") == 3  # signature, its line, Call: not expanded forever
    assert '"args": {"value": 0, "children": []}' in text
    schema = option.pick_schema()
    refs = set(_refs(schema))
    assert refs == {"#/$defs/Node"} and "Node" in schema["$defs"]
    tree, _ = run([option], pick("tree", {"value": 1, "children": [
        {"value": 2, "children": [{"value": 3}]}]}))
    assert tree.children[0].children[0] == Node(value=3)
    assert failure({"tree": Node}, {"value": 1, "children": [{"value": 2, "children": [
        {"value": "three"}]}]})[:2] == ("type_mismatch", "args.children[0].children[0].value")


def _refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_a_discriminated_union_shows_each_member_under_its_tag_and_validates_by_it():
    text = render_menu(normalize({"adopt": Adopt}))
    assert '      - pet as Cat (kind = "cat"):' in text
    assert "        - pet.lives (int, required)" in text
    assert '      - pet as Dog (kind = "dog"):' in text
    assert '"args": {"pet": {"kind": "cat", "lives": 0}}' in text
    adopted, _ = run({"adopt": Adopt}, pick("adopt", {"pet": {"kind": "dog", "good": True}}))
    assert adopted.pet == Dog(kind="dog", good=True)
    kind, path, message = failure({"adopt": Adopt}, {"pet": {"kind": "cow"}})
    assert (kind, path) == ("enum_violation", "args.pet.kind") and "'cat', 'dog'" in message
    assert failure({"adopt": Adopt}, {"pet": {"lives": 9}})[:2] == \
        ("missing_required", "args.pet.kind")


# -- pydantic's validation, as error kinds with paths -------------------------------------------


@pytest.mark.parametrize("args, kind, path, says", [
    ({}, "missing_required", "args.items", "args.items is required"),
    ({"items": [{"qty": 2}]}, "missing_required", "args.items[0].SKU", "is required"),
    ({"items": "AB"}, "type_mismatch", "args.items", "valid list"),
    ({"items": [{"SKU": "AB", "qty": "two"}]}, "type_mismatch", "args.items[0].qty",
     'valid integer, unable to parse string as an integer (got string "two")'),
    ({"items": [{"SKU": "AB", "qty": 2.5}]}, "type_mismatch", "args.items[0].qty", "integer"),
    ({"items": [{"SKU": "AB", "qty": 0}]}, "invalid_value", "args.items[0].qty",
     "greater than or equal to 1 (got integer 0)"),
    ({"items": [{"SKU": "AB", "qty": 102}]}, "invalid_value", "args.items[0].qty",
     "less than or equal to 100"),
    ({"items": [{"SKU": "ab1", "qty": 2}]}, "invalid_value", "args.items[0].SKU",
     "should match pattern '^[A-Z]{2,8}$'"),
    ({"items": [{"SKU": "AB", "qty": 3}]}, "invalid_value", "args.items[0].qty",
     "args.items[0].qty: qty must be even: items ship in pairs (got integer 3)"),
    ({**GOOD, "priority": "urgent"}, "enum_violation", "args.priority", "'low' or 'high'"),
    ({**GOOD, "channel": "fax"}, "enum_violation", "args.channel", "'web' or 'phone'"),
    ({**GOOD, "note": "x" * 21}, "invalid_value", "args.note", "at most 20 characters"),
    ({**GOOD, "note": 5}, "type_mismatch", "args.note", "valid string"),
])
def test_each_pydantic_failure_has_its_kind_path_and_message(args, kind, path, says):
    got_kind, got_path, message = failure({"order": Order}, args)
    assert (got_kind, got_path) == (kind, path)
    assert says in message
    assert "Value error," not in message  # a validator's message is its own


def test_every_problem_of_a_reply_is_in_the_message_and_the_reask_repeats_it():
    bad = {"items": [{"SKU": "ab", "qty": 0}], "priority": "urgent"}
    order, rt = run({"order": Order}, pick("order", bad), pick("order", GOOD))
    assert order.items == [Item(SKU="AB", qty=2)]
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "invalid_value" and first.error_path == "args.items[0].SKU"
    assert "also args.items[0].qty: Input should be greater than or equal to 1" in \
        first.error_message
    assert "args.priority: Input should be 'low' or 'high'" in first.error_message
    assert "args.items[0].SKU" in rt.calls[1].prompt
    assert "should match pattern" in rt.calls[1].prompt


def test_coercion_defaults_and_dropped_fields_are_pydantic_s_and_recorded():
    order, _ = run({"order": Order}, pick("order", {
        "items": [{"SKU": "AB", "qty": "4", "colour": "red"}], "gift": True}))
    assert order.items[0].qty == 4 and order.priority is Priority.LOW and order.note is None
    att = decision.last_trace().attempts[0]
    assert sorted(att.dropped) == ["args.gift", "args.items[0].colour"]
    assert set(att.args) == {"items"}  # what the model gave, validated
    assert att.args["items"] == [Item(SKU="AB", qty=4)]
    assert failure({"strict": Strict}, {"amount": 1, "tip": 2})[:2] == \
        ("invalid_value", "args.tip")  # extra="forbid" refuses instead of dropping


def test_allow_inf_nan_is_the_model_s_own_setting():
    # 1e400 is valid JSON that Python reads as inf (the extractor refuses NaN and Infinity).
    with pytest.raises(DecisionError) as info:
        run({"strict": Strict}, '{"call": "strict", "args": {"amount": 1e400}}')
    att = info.value.trace.attempts[0]
    assert (att.error_kind, att.error_path) == ("invalid_value", "args.amount")
    assert "finite number" in att.error_message
    loose, _ = run({"loose": Loose}, '{"call": "loose", "args": {"amount": 1e400}}')
    assert loose.amount == float("inf")
    # Text that is not valid Unicode never reaches the user's class, whatever its settings.
    kind, path, _ = failure({"loose": Loose}, {"amount": 1, "x": "\ud800"})
    assert (kind, path) == ("invalid_value", "args.x")


def test_a_dataclass_and_a_typeddict_are_validated_by_pydantic_too():
    kind, path, message = failure({"parcel": Parcel}, {"weight_kg": 31})
    assert (kind, path) == ("invalid_value", "args") and "at most 30 kg" in message
    assert failure({"parcel": Parcel}, {"weight_kg": "heavy"})[:2] == \
        ("type_mismatch", "args.weight_kg")
    assert failure({"address": Address}, {"zip": "3000"})[:2] == \
        ("missing_required", "args.city")
    place, _ = run({"address": PydanticAddress}, pick("address", {"city": "Bern", "x": 1}))
    assert place == {"city": "Bern"}
    assert decision.last_trace().attempts[0].dropped == ["args.x"]
    text = render_menu(normalize([Parcel, Address]))
    assert "  Send a parcel." in text and "  Where to deliver." in text
    assert "    - tags (list[str], optional)" in text  # a default_factory has no value to show
    assert "Parcel(weight_kg: float, fragile: bool = false, tags: list[str] = ...)" in text
    assert "    - zip (str, optional)" in text


def test_parse_args_gives_the_fields_and_resolve_decision_the_very_instance():
    options = {"order": Order}
    chosen, kwargs = decision.parse_args(pick("order", GOOD), options)
    assert chosen == "order" and kwargs["items"] == [Item(SKU="AB", qty=2)]
    first = decision.resolve_decision(chosen, kwargs, options)
    assert first is decision.resolve_decision(chosen, kwargs, options)  # not validated twice
    by_hand = decision.resolve_decision("order", {"items": [{"SKU": "CD", "qty": 2}]}, options)
    assert by_hand == Order(items=[Item(SKU="CD", qty=2)])


def test_a_validate_rule_sees_the_validated_fields_of_a_class_pick():
    seen = []
    run({"order": Order}, pick("order", GOOD), validate=seen.append)
    (p,) = seen
    assert p.call == "order" and p.option.kind == "class" and p.option.cls is Order
    assert p.args == {"items": [Item(SKU="AB", qty=2)]}


def test_a_class_pydantic_cannot_describe_is_refused_before_any_model_call():
    @dataclasses.dataclass
    class Locked:
        lock: threading.Lock

    with pytest.raises(OptionError, match=r"option 'locked': pydantic cannot describe Locked: "
                                          r"Unable to generate pydantic-core schema"):
        normalize({"locked": Locked})


# -- the user's types as function parameters ------------------------------------------------------


def ship(order: Order, speed: Priority, express: bool = False) -> tuple:
    """Ship an order."""
    return order, speed, express


# typing.Optional beside X | None on purpose: the two reach the library as different unions
def restock(lines: list[Item], by_store: dict[str, Item],
            spare: Optional[Item] = None,  # noqa: UP045
            pet: Cat | Dog | None = None) -> tuple:
    """Restock the shelves."""
    return lines, by_store, spare, pet


def test_a_function_receives_instances_and_enum_members():
    (order, speed, express), _ = run([ship], pick("ship", {"order": GOOD, "speed": "high"}))
    assert order == Order(items=[Item(SKU="AB", qty=2)])
    assert speed is Priority.HIGH and express is False
    (lines, by_store, spare, pet), _ = run([restock], pick("restock", {
        "lines": [{"SKU": "AB", "qty": 2}], "by_store": {"bern": {"SKU": "CD", "qty": 4}},
        "pet": {"kind": "cat", "lives": 9}}))
    assert lines == [Item(SKU="AB", qty=2)] and by_store == {"bern": Item(SKU="CD", qty=4)}
    assert spare is None and pet == Cat(kind="cat", lives=9)


@pytest.mark.parametrize("args, kind, path", [
    ({"speed": "low"}, "missing_required", "args.order"),
    ({"order": GOOD, "speed": "urgent"}, "enum_violation", "args.speed"),
    ({"order": {"items": [{"SKU": "AB", "qty": 3}]}, "speed": "low"}, "invalid_value",
     "args.order.items[0].qty"),
    ({"order": {"items": [{"SKU": "AB"}], "priority": 1}, "speed": "low"}, "enum_violation",
     "args.order.priority"),
])
def test_a_parameter_s_failure_has_its_path_into_the_arguments(args, kind, path):
    assert failure([ship], args, "ship")[:2] == (kind, path)


def test_restock_failures_reach_into_lists_dicts_and_unions():
    assert failure([restock], {"lines": [{"SKU": "AB", "qty": 2}, {"SKU": "AB", "qty": -2}],
                               "by_store": {}}, "restock")[:2] == \
        ("invalid_value", "args.lines[1].qty")
    assert failure([restock], {"lines": [], "by_store": {"bern": {"qty": 2}}}, "restock")[:2] \
        == ("missing_required", "args.by_store.bern.SKU")


def test_a_function_s_menu_shows_the_nested_shapes_of_its_parameters():
    text = render_menu(normalize([ship, restock]))
    assert "- ship(order: Order, speed: str, express: bool = false)" in text
    assert "    - order (Order, required): Place an order for the customer." in text
    assert "        - order.items[] (Item, required): A line of an order." in text
    assert '    - speed (str, required); one of: "low", "high"' in text
    assert "    - by_store (dict[str, Item], required)" in text
    assert "      - by_store.<key> (Item, required): A line of an order." in text
    assert "    - spare (Item | null, optional, default null)" in text
    assert '"by_store": {"<key>": {"SKU": "<str>", "qty": 1}}' in text
    assert '"pet": {"kind": "cat", "lives": 0}' in text


def test_a_tool_spec_writes_the_user_s_types_out_in_place():
    spec = Tool("restock", restock, "").spec()
    assert not list(_refs(spec))  # nothing points into a $defs the tool spec does not have
    items = spec["parameters"]["properties"]["lines"]["items"]
    assert items["properties"]["qty"] == {"default": 1, "description": "how many",
                                          "maximum": 100, "minimum": 1, "title": "Qty",
                                          "type": "integer"}
    tree = Tool("grow", _grow, "").spec()["parameters"]["properties"]["tree"]
    assert tree["properties"]["children"]["items"] == {"type": "object",
                                                        "description": "a Node, as above"}


def _grow(tree: Node) -> Node:
    return tree


# -- Enums, Literal of Enum members, non-JSON values in input_meta ---------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def paint(color: Literal[Color.RED, Color.GREEN], shade: Color = Color.GREEN, day=None,
          urgency=None) -> tuple:
    """Paint the wall."""
    return color, shade, day, urgency


paint.input_meta = {"day": {"options": [datetime.date(2024, 1, 1), datetime.date(2024, 2, 1)]},
                    "urgency": {"options": [Priority.LOW, Priority.HIGH]}}


def test_enum_members_and_dates_are_shown_by_their_json_value_and_arrive_as_themselves():
    text = render_menu(normalize([paint]))  # was a bare TypeError: an Enum is not JSON
    # (an untyped parameter whose allowed values are all text is shown as a str)
    assert '- paint(color: str, shade: str = "green", day: str = null, urgency: str = null)' \
        in text
    assert '    - color (str, required); one of: "red", "green"' in text
    assert '    - day (str, optional, default null); one of: "2024-01-01", "2024-02-01"' in text
    assert '    - urgency (str, optional, default null); one of: "low", "high"' in text
    assert '"args": {"color": "red", "shade": "red", "day": "2024-01-01", "urgency": "low"}' \
        in text
    result, _ = run([paint], pick("paint", {"color": "green", "shade": "red",
                                            "day": "2024-02-01", "urgency": "high"}))
    assert result == (Color.GREEN, Color.RED, datetime.date(2024, 2, 1), Priority.HIGH)
    assert result[0] is Color.GREEN and result[3] is Priority.HIGH
    assert failure([paint], {"color": "blue"}, "paint")[:2] == ("enum_violation", "args.color")
    info = normalize([paint])[0].info()
    json.dumps(info)  # the option table is plain JSON
    assert info["params"][2]["options"] == ["2024-01-01", "2024-02-01"]


# -- pydantic is imported only when a class of the user's is met ----------------------------------


def test_pydantic_is_imported_only_when_a_class_of_the_user_s_is_met():
    script = textwrap.dedent('''
        import enum, json, sys
        from typing import Literal
        from openprogram import decision
        from openprogram.runtimes import ScriptedRuntime

        class Color(enum.Enum):
            RED = "red"

        def paint(color: Color, finish: Literal["matt", "gloss"] = "matt"):
            return color, finish

        rt = ScriptedRuntime(['{"call": "paint", "args": {"color": "red"}}'] * 2)
        decision.make("Paint.", [paint], runtime=rt)
        before = "pydantic" in sys.modules
        import dataclasses

        @dataclasses.dataclass
        class Wall:
            height_m: float

        decision.make("Build.", {"wall": Wall}, runtime=ScriptedRuntime(
            ['{"call": "wall", "args": {"height_m": 2}}']))
        print(json.dumps([before, "pydantic" in sys.modules]))
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [False, True]
