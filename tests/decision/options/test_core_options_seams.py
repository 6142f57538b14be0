"""The seams between the ways of declaring a parameter, closed (issue 23, item 3).

A function parameter takes any type a dataclass field may (dates, UUIDs, Decimal, paths); the
spec forms keep their meaning but warn where it looks like a mistake; `input_meta` typos are
refused; `validate=` returning False rejects; `Retry()` needs no message; every error raised on
purpose is an `OpenProgramError` that keeps its builtin base.
"""
import dataclasses
import datetime
import decimal
import pathlib
import re
import uuid
import warnings

import pytest
from corehelp import pick

import openprogram
from openprogram import DecisionError, OpenProgramError, OptionError, OptionWarning, Retry, decision
from openprogram.decision.options import normalize, render_menu
from openprogram.runtimes import ScriptedRuntime


def make(options, *replies, **kw):
    rt = ScriptedRuntime(list(replies))
    return decision.make("Pick one.", options, runtime=rt, **kw), rt


def book(day: datetime.date, ref: uuid.UUID, amount: decimal.Decimal, folder: pathlib.Path,
         at: datetime.datetime | None = None, alarm: datetime.time | None = None):
    """Book a slot."""
    return day, ref, amount, folder, at, alarm


@pytest.mark.rule("S1")
def test_S1_a_parameter_may_be_any_type_a_dataclass_field_may_be():
    @dataclasses.dataclass
    class Slot:
        day: datetime.date
        ref: uuid.UUID

    menu = render_menu(normalize([book]))
    assert '- day (str, required); format "date"' in menu
    assert '- ref (str, required); format "uuid"' in menu
    assert '- at (str | null, optional, default null); format "date-time"' in menu
    # The Call: example is itself a valid pick: dates and UUIDs in their formats.
    args = {"day": "2024-02-03", "ref": "12345678-1234-1234-1234-123456789abc", "amount": 2.5,
            "folder": "/tmp/x", "at": "2024-02-03T10:00:00Z", "alarm": "07:30:00"}
    result, _ = make([book], pick("book", args))
    assert result == (datetime.date(2024, 2, 3), uuid.UUID(args["ref"]), decimal.Decimal("2.5"),
                      pathlib.Path("/tmp/x"),
                      datetime.datetime(2024, 2, 3, 10, tzinfo=datetime.timezone.utc),
                      datetime.time(7, 30))
    # The same types as a dataclass's fields arrive the same way.
    result, _ = make({"slot": Slot}, pick("slot", {"day": "2024-02-03", "ref": args["ref"]}))
    assert result == Slot(datetime.date(2024, 2, 3), uuid.UUID(args["ref"]))


@pytest.mark.rule("P3")
def test_P3_a_date_parameter_refuses_text_that_is_not_a_date():
    bad = {"day": "2024-02-30", "ref": "12345678-1234-1234-1234-123456789abc", "amount": 1,
           "folder": "/"}
    good = dict(bad, day="2024-02-28")
    result, _ = make([book], pick("book", bad), pick("book", good))
    assert result[0] == datetime.date(2024, 2, 28)
    first = decision.last_trace().attempts[0]
    assert (first.error_kind, first.error_path) == ("invalid_value", "args.day")
    assert "format date" in first.error_message
    with pytest.raises(DecisionError) as err:
        make([book], pick("book", dict(good, ref="not-a-uuid")), max_retries=0)
    assert (err.value.kind, err.value.path) == ("invalid_value", "args.ref")


@pytest.mark.rule("S1")
def test_S1_a_description_that_is_only_a_type_name_warns_and_keeps_its_meaning():
    with pytest.warns(OptionWarning, match=r"'int' is a str field described as 'int'.*"
                                           r"write the type itself \(int\)"):
        menu = normalize({"order": ("Place it.", {"qty": "int"})})
    # S1 still holds: it is a str field, and "hello" passes.
    assert menu[0].params[0].field.type == "str"
    result, _ = make(menu, pick("order", {"qty": "hello"}))
    assert result == {"decision": "order", "qty": "hello"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real description or the type itself: no warning
        normalize({"order": ("Place it.", {"qty": int, "note": "a short note"})})


@pytest.mark.rule("O2")
def test_O2_a_value_option_holding_python_types_warns_naming_the_schema_spelling():
    with pytest.warns(OptionWarning, match=r"holds Python types.*\{'fill': \('description', "
                                           r"\{'name': <class 'str'>\}\)\}"):
        menu = normalize({"fill": {"name": str}, "done": "DONE"})
    result, _ = make(menu, pick("fill"))
    assert result == {"name": str}  # O2: still the value


@pytest.mark.rule("O2")
def test_O2_unmarked_tool_definitions_and_json_schemas_keep_their_meaning_with_a_warning():
    tool = {"type": "function", "function": {"name": "find", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
    with pytest.warns(OptionWarning, match=r"OpenAI tool definition.*openprogram\.tool\("):
        menu = normalize({"find": tool})
    assert menu[0].kind == "value"
    schema = tool["function"]["parameters"]
    with pytest.warns(OptionWarning) as caught:
        menu = normalize({"find": ("Find.", schema)})
    # (its 'type': 'object' also reads as a str field described "object", and says so)
    assert any(re.search(r"looks like a JSON Schema.*openprogram\.JsonSchema", str(w.message))
               for w in caught)
    assert menu[0].kind == "schema"
    # Marked, both are what they say.
    marked = normalize({"find": openprogram.tool(tool), "q": openprogram.JsonSchema(schema)})
    assert [o.kind for o in marked] == ["json_schema", "json_schema"]


@pytest.mark.rule("A8")
def test_A8_an_unknown_key_in_input_meta_is_refused_naming_it_and_the_known_ones():
    def lookup(user: str, q: str):
        return q
    lookup.input_meta = {"user": {"hiden": True}}
    with pytest.raises(OptionError, match=r"input_meta\['user'\] has unknown key\(s\) 'hiden'; "
                                          r"the keys are 'description', 'hidden', 'options'"):
        normalize([lookup])
    lookup.input_meta = {"user": "hidden"}
    with pytest.raises(OptionError, match=r"input_meta\['user'\] must be a dict"):
        normalize([lookup])


def test_validate_returning_false_rejects_the_pick():
    seen = []

    def rule(p):
        seen.append(p.args["n"])
        return p.args["n"] > 1
    result, _ = make({"go": ("Go.", {"n": int})}, pick("go", {"n": 1}), pick("go", {"n": 2}),
                     validate=rule)
    assert result == {"decision": "go", "n": 2} and seen == [1, 2]
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "rejected"
    assert "validate= rule returned False" in first.error_message
    # None (a rule that only raises Retry) and other values accept.
    result, _ = make({"go": ("Go.", {"n": int})}, pick("go", {"n": 1}), validate=lambda p: None)
    assert result["n"] == 1


def test_retry_without_a_message_has_a_default_text():
    def only_two(p):
        if p.args["n"] != 2:
            raise Retry()
    result, _ = make({"go": ("Go.", {"n": int})}, pick("go", {"n": 1}), pick("go", {"n": 2}),
                     validate=only_two)
    assert result["n"] == 2
    first = decision.last_trace().attempts[0]
    assert first.error_kind == "rejected" and "rejected this pick" in first.error_message


@pytest.mark.parametrize("call, base", [
    (lambda: normalize({"x": ("d", {"a": [str, int]})}), TypeError),              # S2
    (lambda: normalize({"x": ("d", {"a": object()})}), TypeError),
    (lambda: decision.make("p", ["a"]), RuntimeError),                              # E3
    (lambda: decision.make("p", ["a"], runtime=ScriptedRuntime), TypeError),        # a class
    (lambda: decision.make(3, ["a"], runtime=ScriptedRuntime([])), TypeError),
    (lambda: decision.make("p", ["a"], runtime=ScriptedRuntime([]), timeout_s=-1), ValueError),
    (lambda: decision.make("p", ["a"], runtime=ScriptedRuntime([]), context=[1]), TypeError),
    (lambda: normalize({}), ValueError),                                            # O4
    (lambda: openprogram.Runtime(), TypeError),
    (lambda: openprogram.Runtime(call="gpt"), TypeError),
    (lambda: openprogram.JsonSchema({"type": "object", "properties": {}, "not": {}}) and
     normalize({"x": openprogram.JsonSchema({"type": "object", "minimum": "3"})}), ValueError),
])
def test_every_deliberate_error_is_an_openprogram_error_keeping_its_builtin_base(call, base):
    with pytest.raises(base) as err:
        call()
    assert isinstance(err.value, OpenProgramError), type(err.value).__mro__


def test_a_class_where_an_instance_is_needed_says_so():
    with pytest.raises(TypeError, match=r"got the class ScriptedRuntime.*"
                                        r"runtime=ScriptedRuntime\(\.\.\.\)"):
        decision.make("p", ["a"], runtime=ScriptedRuntime)
