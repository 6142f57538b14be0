"""`jsonl.write_whole` appends a line whole or not at all: a system that takes part of a write
gets the rest, and a write that fails part-way is cut back, so the file never ends in half a
line."""
import os

import pytest

from openprogram.base import jsonl


def appended(tmp_path, data, write):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"kept\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    real = os.write
    calls = []

    def counted(f, chunk):
        calls.append(len(chunk))
        return write(real, f, chunk, len(calls))
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(jsonl.os, "write", counted)
            end = jsonl.write_whole(fd, data, 5)
    finally:
        os.close(fd)
    return path.read_bytes(), end, calls


def test_a_line_is_written_in_one_call_when_the_system_takes_it(tmp_path):
    got, end, calls = appended(tmp_path, b'{"a":1}\n', lambda w, f, c, n: w(f, c))
    assert got == b'kept\n{"a":1}\n' and end == 13 and calls == [8]


def test_what_the_system_did_not_take_is_written_next(tmp_path):
    got, end, calls = appended(tmp_path, b'{"abc":1}\n', lambda w, f, c, n: w(f, c[:3]))
    assert got == b'kept\n{"abc":1}\n' and end == 15 and calls == [10, 7, 4, 1]


def test_a_write_that_fails_part_way_is_cut_back(tmp_path):
    def fail_second(w, f, c, n):
        if n == 2:
            raise OSError(28, "No space left on device")
        return w(f, c[:4])
    path = tmp_path / "f.jsonl"
    with pytest.raises(OSError, match="No space"):
        appended(tmp_path, b'{"abc":1}\n', fail_second)
    assert path.read_bytes() == b"kept\n"
