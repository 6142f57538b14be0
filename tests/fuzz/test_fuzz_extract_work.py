"""Finding the pick takes work linear in the reply's length (rule A5; issue 18, item 6).

Work is counted, never timed: the lines of Python the package executes while `find_action` runs
(sys.settrace), the characters its module-level regular expressions advance over, and the
characters handed to json's decoder. A generated unit of JSON-like text is repeated to about
16 000 and then 32 000 characters (with a generated prefix and suffix); doubling the reply may
at most a little more than double the work. A scan that restarts at every brace, or decodes
from every `{` to the end, does four times the work instead.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from fuzzhelp import LONG, budget
from hypothesis import example, given
from hypothesis import strategies as st

import openprogram
from openprogram.decision import extract

PACKAGE = str(Path(openprogram.__file__).parent)


class _CountingPattern:
    """A compiled pattern that adds the characters each call advanced over to a counter."""

    def __init__(self, pattern: re.Pattern, work: Work):
        self._p, self._w = pattern, work

    def __getattr__(self, name):
        return getattr(self._p, name)

    def _pos(self, args, kw) -> tuple[str, int]:
        return args[0], (args[1] if len(args) > 1 else kw.get("pos", 0))

    def match(self, *args, **kw):
        m = self._p.match(*args, **kw)
        text, pos = self._pos(args, kw)
        self._w.chars += (m.end() - pos) if m else 1
        return m

    fullmatch = match

    def search(self, *args, **kw):
        m = self._p.search(*args, **kw)
        text, pos = self._pos(args, kw)
        self._w.chars += (m.end() if m else len(text)) - pos
        return m

    def finditer(self, *args, **kw):
        text, pos = self._pos(args, kw)
        self._w.chars += len(text) - pos
        return self._p.finditer(*args, **kw)

    def findall(self, *args, **kw):
        return list(m.group() for m in self.finditer(*args, **kw))


class Work:
    """The work one call does inside `scope` (the package): Python lines executed, characters
    the extraction module's patterns advanced over, and characters handed to json's decoder (to
    where it stopped, or to the end of the text when it failed: an unterminated string is
    reported at its start, but was read to the end)."""

    def __init__(self, scope: str = PACKAGE):
        self.scope = scope
        self.lines = self.chars = self.decoded = 0

    @property
    def total(self) -> int:
        return self.lines + self.chars + self.decoded

    def _trace(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(self.scope):
            return None

        def line(frame, event, arg):
            if event == "line":
                self.lines += 1
            return line
        return line

    def run(self, fn, *args):
        patterns = {k: v for k, v in vars(extract).items() if isinstance(v, re.Pattern)}
        raw_decode = json.JSONDecoder.raw_decode
        work = self

        def counting_raw_decode(self, s, idx=0):
            try:
                obj, end = raw_decode(self, s, idx)
            except json.JSONDecodeError:
                work.decoded += len(s) - idx
                raise
            work.decoded += end - idx
            return obj, end

        for k, v in patterns.items():
            setattr(extract, k, _CountingPattern(v, self))
        json.JSONDecoder.raw_decode = counting_raw_decode
        sys.settrace(self._trace)
        try:
            return fn(*args)
        finally:
            sys.settrace(None)
            json.JSONDecoder.raw_decode = raw_decode
            for k, v in patterns.items():
                setattr(extract, k, v)


def work_of(text: str) -> int:
    w = Work()
    w.run(extract.find_action, text)
    return w.total


FRAGMENTS = ['{', '}', '[', ']', '"', ':', ',', ' ', '\n', '\\', '\\"', 'x', '1', '-', '.5e',
             'null', 'true', '"call"', '"call":', '{"call":', '"a"', '"args": {', '{"call": "a"}',
             '```', '```json\n', '\\u12', '\\ud800', '\ud800', '"tool": ', '{"action": "b",',
             '[{', '"k": [', '1e400', '<opxss>']
UNITS = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map("".join)
EDGES = st.lists(st.sampled_from(FRAGMENTS + ['{"call": "a", "args": {"x": 1}}']),
                 max_size=4).map("".join)
SIZE = 16_000


def repeated(prefix: str, unit: str, suffix: str, n: int) -> str:
    return prefix + unit * (n // len(unit) + 1) + suffix


@budget(ci=16, long=600)
@given(prefix=EDGES, unit=UNITS, suffix=EDGES)
@example(prefix="", unit='{"a":', suffix="")
@example(prefix="", unit='{"call":', suffix="")
@example(prefix="", unit='{"call": "a"} ', suffix="")
@example(prefix="", unit='{"call":"a","args":{"x":"', suffix='"}}')
@example(prefix='{"call": "a", "x": "', unit="{", suffix="")
@example(prefix="", unit='"call": "', suffix="{")
@example(prefix="", unit="[{", suffix='{"call": "a"}')
def test_fuzz_extraction_work_grows_linearly(prefix, unit, suffix):
    n = SIZE * (4 if LONG else 1)
    once, twice = (work_of(repeated(prefix, unit, suffix, size)) for size in (n, 2 * n))
    assert twice <= 2.5 * once + 2_000, (
        f"unit {unit!r}: {n} characters took {once} steps of work, {2 * n} took {twice} "
        f"({twice / max(once, 1):.2f} times as many)")


def test_the_work_counter_sees_a_quadratic_scan():
    """The counter is not blind: decoding from every quote of `\\"\\"\\"...` (each string
    runs to the end) and a Python loop over every pair of positions both do four times the work
    on a text twice as long."""
    def decode_everywhere(text):
        dec = json.JSONDecoder()
        for i, ch in enumerate(text):
            if ch == '"':
                try:
                    dec.raw_decode(text, i)
                except ValueError:
                    pass

    def pairs(text):
        for i in range(len(text)):
            for _ in range(i, len(text)):
                pass

    for fn in (decode_everywhere, pairs):
        counts = []
        for n in (300, 600):
            w = Work(scope=__file__)
            w.run(fn, '\\"' * n)
            counts.append(w.total)
        assert counts[1] > 3.5 * counts[0], (fn.__name__, counts)
