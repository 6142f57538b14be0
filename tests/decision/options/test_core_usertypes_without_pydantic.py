"""Dataclasses, TypedDicts, Enums and Literal work without pydantic installed.

The script below runs in a fresh interpreter where `import pydantic` fails (a `None` in
`sys.modules` is what Python's import system reads as "not importable"), so nothing it does can
lean on pydantic; it prints what it saw as JSON and the test checks that.
"""
import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import sys
    sys.modules["pydantic"] = None  # `import pydantic` now raises ImportError
    import dataclasses, datetime, enum, json, typing
    from typing import Literal, Optional

    from openprogram import DecisionError, decision
    from openprogram.decision.options import normalize, render_menu
    from openprogram.runtimes import ScriptedRuntime

    class Color(enum.Enum):
        RED = "red"
        GREEN = "green"

    @dataclasses.dataclass
    class Line:
        """A line of an order."""
        sku: typing.Annotated[str, "the stock code"]
        qty: int = 1
        color: Color = Color.RED

        def __post_init__(self):
            if self.qty < 1:
                raise ValueError("qty must be at least 1")

    @dataclasses.dataclass
    class Node:
        value: int
        children: list["Node"] = dataclasses.field(default_factory=list)

    class Address(typing.TypedDict):
        """Where to deliver."""
        city: str
        zip: typing.NotRequired[str]

    @dataclasses.dataclass
    class Order:
        """Place an order."""
        lines: list[Line]
        to: Address
        tree: Optional[Node] = None
        by_store: dict[str, Line] = dataclasses.field(default_factory=dict)

    def ship(order: Order, color: Literal[Color.RED, Color.GREEN], shade: Color, day=None):
        """Ship an order."""
        return [repr(order), repr(color), repr(shade), repr(day)]
    ship.input_meta = {"day": {"options": [datetime.date(2024, 1, 1), datetime.date(2024, 2, 1)]}}

    def go(city: str, n: int = 1):
        return f"go {city} {n}"

    def make(options, args, name):
        rt = ScriptedRuntime([json.dumps({"call": name, "args": args})])
        try:
            return repr(decision.make("Decide.", options, runtime=rt, max_retries=0))
        except DecisionError as err:
            att = err.trace.attempts[0]
            return [att.error_kind, att.error_path, att.error_message]

    try:
        import pydantic
        blocked = False
    except ImportError:
        blocked = True
    options = {"order": Order, "ship": ship, "node": ("A tree.", Node), "address": Address}
    menu = normalize(options)
    good = {"lines": [{"sku": "AB", "qty": 2, "colour": "x"}], "to": {"city": "Bern"},
            "tree": {"value": 1, "children": [{"value": 2}]}, "by_store": {"b": {"sku": "C"}}}
    out = {
        "blocked": blocked,
        "kinds": [o.kind for o in menu],
        "menu": render_menu(menu),
        "order": make(menu, good, "order"),
        "dropped": decision.last_trace().attempts[0].dropped,
        "ship": make(menu, {"order": {"lines": [], "to": {"city": "Bern"}}, "color": "green",
                            "shade": "red", "day": "2024-02-01"}, "ship"),
        "node": make(menu, {"value": 1, "children": [{"value": 2}]}, "node"),
        "address": make(menu, {"city": "Bern", "zip": "3000"}, "address"),
        "errors": [
            make(menu, {"to": {"city": "Bern"}}, "order"),
            make(menu, {"lines": [{"sku": "AB", "qty": 0}], "to": {"city": "B"}}, "order"),
            make(menu, {"lines": [{"sku": "AB", "qty": "2"}], "to": {"city": "B"}}, "order"),
            make(menu, {"lines": [{"sku": "AB", "color": "blue"}], "to": {"city": "B"}},
                 "order"),
            make(menu, {"lines": [], "to": {"zip": "3000"}}, "order"),
            make(menu, {"order": {"lines": [], "to": {"city": "B"}}, "color": "blue",
                        "shade": "red"}, "ship"),
            make(menu, {"value": 1, "children": [{"value": "two"}]}, "node"),
        ],
        "plain": make({"go": go, "stop": "STOP", "form": ("Fill it.", {"n": int})},
                      {"city": "Bern"}, "go"),
        "pydantic_loaded": sys.modules.get("pydantic") is not None,
    }
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def out() -> dict:
    """What the script saw, run once for the module."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_dataclasses_typeddicts_enums_and_literal_work_without_pydantic(out):
    assert out["blocked"] and not out["pydantic_loaded"]
    assert out["kinds"] == ["class", "function", "class", "class"]
    assert out["order"] == ("Order(lines=[Line(sku='AB', qty=2, color=<Color.RED: 'red'>)], "
                            "to={'city': 'Bern'}, tree=Node(value=1, children=[Node(value=2, "
                            "children=[])]), by_store={'b': Line(sku='C', qty=1, "
                            "color=<Color.RED: 'red'>)})")
    assert out["dropped"] == ["args.lines[0].colour"]
    assert out["ship"] == repr([
        "Order(lines=[], to={'city': 'Bern'}, tree=None, by_store={})",
        "<Color.GREEN: 'green'>", "<Color.RED: 'red'>", "datetime.date(2024, 2, 1)"])
    assert out["node"] == "Node(value=1, children=[Node(value=2, children=[])])"
    assert out["address"] == "{'city': 'Bern', 'zip': '3000'}"
    assert out["plain"] == "'go Bern 1'"  # a set without the user's classes: as before


def test_without_pydantic_each_failure_has_its_kind_path_and_message(out):
    missing, post_init, wrong_type, enum_value, typeddict, literal, recursive = out["errors"]
    assert missing[:2] == ["missing_required", "args.lines"]
    assert post_init == ["invalid_value", "args.lines[0]",
                         "args.lines[0]: qty must be at least 1"]
    assert wrong_type[:2] == ["type_mismatch", "args.lines[0].qty"]
    assert 'must be int, got string "2"' in wrong_type[2]
    assert enum_value[:2] == ["enum_violation", "args.lines[0].color"]
    assert typeddict == ["missing_required", "args.to.city",
                         "args.to.city is required by Address (str)"]
    assert literal[:2] == ["enum_violation", "args.color"]
    assert recursive[:2] == ["type_mismatch", "args.children[0].value"]


def test_without_pydantic_the_menu_shows_the_classes_fields_and_json_values(out):
    menu = out["menu"].splitlines()
    for line in [
        "- order(lines: list[Line], to: Address, tree: Node | null = null, "
        "by_store: dict[str, Line] = ...)",
        "  Place an order.",
        "      - lines[] (Line, required): A line of an order.",
        "        - lines[].sku (str, required): the stock code",
        "        - lines[].qty (int, optional, default 1)",
        '        - lines[].color (str, optional, default "red"); one of: "red", "green"',
        "    - to (Address, required): Where to deliver.",
        "      - to.zip (str, optional)",
        "      - tree.children (list[Node], optional)",
        "      - by_store.<key> (Line, required): A line of an order.",
        "- ship(order: Order, color: str, shade: str, day: str = null)",
        '    - color (str, required); one of: "red", "green"',
        '    - day (str, optional, default null); one of: "2024-01-01", "2024-02-01"',
        "- node(value: int, children: list[Node] = ...)",
        '  Call: {"call": "node", "args": {"value": 0, "children": []}}',
    ]:
        assert line in menu
