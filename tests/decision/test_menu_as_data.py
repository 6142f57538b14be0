"""The model protocol carries the menu as data (issue 42): a runtime that lays the menu out itself
declares `takes_menu`, and a menu-mode decision passes it the menu text it put into the prompt as
`menu=`; every other runtime gets the prompt alone, and no recording or cache key holds it."""
import json

from openprogram import decision
from openprogram.runtimes import CachedRuntime, ScriptedRuntime
from openprogram.runtimes.cassette.cassette_file import live_key, request_key, request_record

OPTIONS = {"refund": "give the money back", "escalate": "hand over to a person"}
PICK = json.dumps({"call": "refund"})


class MenuTaking(ScriptedRuntime):
    takes_menu = True


def test_a_runtime_that_takes_the_menu_is_told_where_it_is():
    rt = MenuTaking([PICK])
    assert decision.make("Where is my money?", OPTIONS, runtime=rt) == OPTIONS["refund"]
    call = rt.calls[-1]
    menu = call.mode_args["menu"]
    # exactly the menu the prompt ends with, not a header a runtime would have to look for
    assert call.prompt.endswith("\n\n" + menu)
    assert "refund" in menu and "escalate" in menu and "Where is my money?" not in menu
    assert decision.last_trace().menu == menu


def test_a_re_ask_tells_it_again_and_json_schema_mode_sends_no_menu():
    rt = MenuTaking(["no pick here", PICK])
    decision.make("Where is my money?", OPTIONS, runtime=rt)
    first, second = rt.calls
    assert first.mode_args["menu"] == second.mode_args["menu"]
    assert ("\n\n" + second.mode_args["menu"]) in second.prompt
    schema_rt = MenuTaking([json.dumps({"call": "refund", "args": {}})])
    schema_rt.modes = frozenset({"menu", "json_schema"})
    decision.make("Where is my money?", OPTIONS, runtime=schema_rt, mode="json_schema")
    assert "menu" not in schema_rt.calls[-1].mode_args


def test_other_runtimes_get_the_prompt_alone():
    rt = ScriptedRuntime([PICK])
    decision.make("Where is my money?", OPTIONS, runtime=rt)
    assert "menu" not in rt.calls[-1].mode_args


def test_the_menu_as_data_is_in_no_record_and_no_key():
    messages = [{"role": "user", "content": "Where is my money?\n\nOptions..."}]
    with_menu = request_record(messages, None, {"menu": "Options..."})
    assert with_menu == request_record(messages, None, {})
    settings = {"model": "m"}
    assert live_key(messages, None, {"menu": "Options..."}, settings) == \
        live_key(messages, None, {}, settings) == request_key(with_menu, settings)


def test_a_cache_passes_it_through_and_keys_as_before(tmp_path):
    inner = MenuTaking([PICK])
    cached = CachedRuntime(inner, tmp_path / "cache.jsonl")
    assert cached.takes_menu
    assert decision.make("Where is my money?", OPTIONS, runtime=cached) == OPTIONS["refund"]
    assert "menu" in inner.calls[-1].mode_args
    # the same request from a runtime that takes no menu is the same entry: answered from the file
    plain = CachedRuntime(ScriptedRuntime([]), tmp_path / "cache.jsonl")
    assert decision.make("Where is my money?", OPTIONS, runtime=plain) == OPTIONS["refund"]
    assert decision.last_trace().attempts[-1].cached
