"""A key spelled inside a string that repair= touched reaches nothing the mechanism keeps or
shows (issue 39): against the loopback server, through the real SDK clients, in menu mode, a
sloppy pick (single quotes, trailing commas, a Python literal) whose argument spells the key
with JSON escapes, and one where it is written as is. The repair records, the trace's dict,
text and HTML views, the panel's static copy and what the function was handed are searched for
the key and every 12-character run of it, as written and decoded once."""
from __future__ import annotations

import json
import re

import pytest
from fakeserver import FAKE_KEY, text

from openprogram import DecisionError, decision

KEY = FAKE_KEY
RUNS = {KEY[i:i + 12] for i in range(len(KEY) - 11)}
HANDED: list = []


def lookup(q: str, urgent: bool = False) -> str:
    """Look something up."""
    HANDED.append(q)
    return "looked up"


OPTIONS = {"lookup": lookup, "done": ("DONE", "nothing left to do")}


def esc(s: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in s)


def decode_once(blob: str) -> str:
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), blob)


def leaks(blob: str) -> list[str]:
    return [r for spelling in (blob, decode_once(blob)) for r in RUNS if r in spelling]


@pytest.mark.parametrize("spelling", ["escaped", "plain"])
def test_a_key_inside_a_repaired_string_is_redacted(make_runtime, server, spelling):
    from openprogram.widgets import DecisionPanel
    HANDED.clear()
    key = esc(KEY) if spelling == "escaped" else KEY
    server.push(text(f"Done.\n```json\n{{'call': 'lookup', 'args': {{'q': 'find {key}', "
                     f"'urgent': True,}},}}\n```"))
    rt = make_runtime(stream=False)
    try:
        decision.make("Pick.", OPTIONS, runtime=rt, max_retries=0)
        trace = decision.last_trace()
    except DecisionError as err:
        trace = err.trace
    att = trace.attempts[0]
    kinds = {r.kind for r in att.repairs}
    assert {"single_quotes", "trailing_comma", "python_literal"} <= kinds
    places = {
        "repairs": json.dumps([r.to_dict() for r in att.repairs]),
        "to_dict": json.dumps(trace.to_dict()),
        "format_text": trace.format_text(),
        "html": trace._repr_mimebundle_()["text/html"],
        "panel": DecisionPanel(trace)._repr_mimebundle_()["text/html"],
        "handed": json.dumps(HANDED),
    }
    bad = {where: leaks(blob)[:2] for where, blob in places.items() if leaks(blob)}
    assert not bad, f"the key is in: {bad}"
    assert HANDED and "[redacted]" in HANDED[0] or att.redacted
