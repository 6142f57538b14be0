"""Input tables for evaluation: the rows a prompt template is filled from, checked, streamed.

`evaluate` takes a pandas DataFrame, a list of dicts, or any iterable of dicts — a generator, a
`csv.DictReader`, the chunks of `pandas.read_csv(..., chunksize=)` (each a DataFrame), the
batches of a pyarrow reader (anything with `to_pylist()`). A DataFrame or a list is checked whole
before any model call (a missing column, a bad template, an expected pick that is no option
fails naming the row); an iterable is read one row at a time as the run needs rows, so a million
rows are never held at once, and each row is checked as it is read (a bad row stops the run
with the same message, keeping what finished). `total=` tells the progress bar how many rows an
iterable holds. Each row's key (a digest of its filled prompt) is what a journal recognises it
by when a run resumes.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from collections.abc import Iterator
    from typing import Any

__all__ = ["Table", "row_key"]


def row_key(text: str) -> str:
    """What a journal knows a row by: a digest of its filled prompt."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _is_frame(x: Any) -> bool:
    return hasattr(x, "columns") and hasattr(x, "to_dict")  # a DataFrame, no pandas import


def _frame_records(frame: Any) -> tuple[list, list[Mapping]]:
    if not frame.columns.is_unique:
        dup = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        raise ValueError(f"the inputs DataFrame has duplicate columns {dup}; rename them so "
                         f"each template field names one column")
    return list(frame.columns), frame.to_dict("records")


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fill(prompt: str, row: Mapping, i: int, columns: Any) -> str:
    """`prompt.format_map(row)`; a missing column or a bad template names the column and row."""
    try:
        return prompt.format_map(row)
    except _FILL_ERRORS as exc:
        raise _fill_error(exc, i, columns) from None


_FILL_ERRORS = (KeyError, IndexError, ValueError, AttributeError, TypeError)


def _fill_error(exc: Exception, i: int, columns: Any) -> ValueError:
    """What `fill` raises for the error `exc` of filling the template from input row `i`."""
    if isinstance(exc, KeyError):
        have = ", ".join(map(repr, columns)) or "none"
        return ValueError(
            f"the prompt template uses {{{exc.args[0]}}} but input row {i} has no column "
            f"{exc.args[0]!r} (the columns are {have}); add the column, or write a literal "
            f"brace as {{{{ or }}}}")
    return ValueError(
        f"the prompt template could not be filled from input row {i}: {exc}. Fields are "
        f"named after columns, e.g. {{message}}; write a literal brace as {{{{ or }}}}")


def check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str template such as 'Route this: {{message}}', got "
                        f"{type(prompt).__name__}")
    return prompt


class Table:
    """The inputs of one evaluation. `rows()` yields `(position, record, filled prompt, expected
    pick)`; `columns` are the column names in first-seen order; `records` is the list of rows
    when the inputs were given whole (a DataFrame or a list), else None (`keep=True` keeps the
    rows of an iterable as they are read); `total` is the number of rows when known."""

    def __init__(self, prompt: Any, inputs: Any, expected: Any, names: list[str], what: str,
                 total: Any = None, keep: bool = True):
        self.prompt = check_prompt(prompt)
        self.names = names
        self._known = set(names)
        if total is not None and (isinstance(total, bool) or not isinstance(total, int)
                                  or total < 0):
            raise ValueError(f"total must be the number of input rows (a whole number >= 0) or "
                             f"None, got {total!r}")
        if _is_frame(inputs):
            self.columns, records = _frame_records(inputs)
            self._source = None
        elif isinstance(inputs, list):
            records = inputs
            self.columns = []
            self._source = None
        elif isinstance(inputs, (str, bytes, Mapping)) or not hasattr(inputs, "__iter__") or \
                hasattr(inputs, "to_frame"):
            hint = (" (for a pandas Series, use series.to_frame())"
                    if hasattr(inputs, "to_frame") else "")
            raise TypeError(f"inputs must be a pandas DataFrame, a list of dicts, or an "
                            f"iterable of dicts (a generator, a csv.DictReader, "
                            f"pandas.read_csv(..., chunksize=) chunks), one per input; got "
                            f"{type(inputs).__name__}{hint}")
        else:
            records = None
            self.columns = []
            self._source = inputs
        self.records: list | None = records
        self._keep = keep and records is None
        if self._keep:
            self.records = []
        self._column_set: set = set(self.columns)
        self._expected_column: str | None = None
        self._expected_list: list | None = None
        self.expected: list | None = None if expected is None else []
        if records is not None:
            for i, row in enumerate(records):
                self._check_row(i, row)
            if not records:
                raise ValueError(f"inputs is empty: give at least one row to {what}")
            self.total = len(records)
            self.texts = [fill(self.prompt, row, i, self.columns)
                          for i, row in enumerate(records)]
            self._set_expected(expected, len(records))
            self.expected = None if expected is None else \
                [self._expected_of(i, row) for i, row in enumerate(records)]
        else:
            self.total = total
            self.texts = None
            self._set_expected(expected, total)
        self.what = what

    def _check_row(self, i: int, row: Any) -> None:
        if not isinstance(row, Mapping):
            raise TypeError(f"inputs[{i}] is a {type(row).__name__}, not a dict; every input "
                            f"is a dict of the columns the prompt template uses")
        for c in row:
            if c not in self._column_set:
                self._column_set.add(c)
                self.columns.append(c)

    def _set_expected(self, expected: Any, n: int | None) -> None:
        if expected is None:
            return
        if isinstance(expected, str):
            if self.records is not None and not self._keep and expected not in self.columns:
                raise ValueError(f"expected={expected!r} is not a column of the inputs (the "
                                 f"columns are {', '.join(map(repr, self.columns))}); pass a "
                                 f"column name or a list of expected option names, one per input")
            self._expected_column = expected
            return
        try:
            values = list(expected)
        except TypeError:
            raise TypeError(f"expected must be a column name or a list of option names, got "
                            f"{type(expected).__name__}") from None
        if n is not None and len(values) != n:
            raise ValueError(f"expected has {len(values)} items but there are {n} inputs; give "
                             f"one expected option name per input (None if unknown)")
        bad = [v for v in values if not _is_missing(v) and
               (not isinstance(v, str) or v not in self._known)]
        if bad:
            self._bad_expected(bad)
        self._expected_list = values

    def _bad_expected(self, bad: list) -> None:
        shown = ", ".join(sorted({repr(v) for v in bad})[:5])
        raise ValueError(f"expected names {shown} are not options of the option set (the "
                         f"options are {', '.join(self.names)}); fix the spelling, or use None "
                         f"for inputs with no expected pick")

    def _expected_of(self, i: int, row: Mapping) -> str | None:
        if self._expected_column is not None:
            if self._expected_column not in row and self.records is None:
                raise ValueError(f"expected={self._expected_column!r} is not a column of input "
                                 f"row {i} (its columns are {', '.join(map(repr, row))}); pass a "
                                 f"column name every row has")
            v = row.get(self._expected_column)
        elif self._expected_list is not None:
            if i >= len(self._expected_list):
                raise ValueError(f"expected has {len(self._expected_list)} items but the inputs "
                                 f"have more rows; give one expected option name per input")
            v = self._expected_list[i]
        else:
            return None
        if _is_missing(v):
            return None
        if not isinstance(v, str) or v not in self._known:
            self._bad_expected([v])
        return v

    @property
    def has_expected(self) -> bool:
        """Whether expected picks were given (a column name or a list)."""
        return self._expected_column is not None or self._expected_list is not None

    @property
    def streamed(self) -> bool:
        """Whether the rows are read as the run goes (an iterable), not given whole."""
        return self.texts is None

    def _source_rows(self) -> Iterator[Mapping]:
        for item in self._source:
            if type(item) is dict:   # most rows: neither a chunk nor a batch
                yield item
            elif _is_frame(item):  # a chunk of pandas.read_csv(..., chunksize=)
                yield from _frame_records(item)[1]
            elif hasattr(item, "to_pylist"):  # a pyarrow RecordBatch
                yield from item.to_pylist()
            else:
                yield item

    def rows(self) -> Iterator[tuple[int, Mapping, str, str | None]]:
        """`(position, record, filled prompt, expected pick)` for every row, in order. A given
        table was checked whole already; a streamed one is checked row by row."""
        if self.texts is not None:
            exp = self.expected
            for i, (row, text) in enumerate(zip(self.records, self.texts)):
                yield i, row, text, (exp[i] if exp is not None else None)
            return
        n = 0
        prompt, known, columns = self.prompt, self._column_set, self.columns
        check = self.expected is not None
        for i, row in enumerate(self._source_rows()):
            # `_check_row` and `fill` written out for a dict whose columns were all seen before
            # (every row of most tables): this runs once per input row
            if type(row) is not dict:
                self._check_row(i, row)
            else:
                for c in row:
                    if c not in known:
                        self._check_row(i, row)
                        break
            try:
                text = prompt.format_map(row)
            except _FILL_ERRORS as exc:
                raise _fill_error(exc, i, columns) from None
            exp = self._expected_of(i, row) if check else None
            if self._keep:
                self.records.append(row)
                if check:
                    self.expected.append(exp)
            n = i + 1
            yield i, row, text, exp
        if n == 0:
            raise ValueError(f"inputs is empty: give at least one row to {self.what}")
        if self._expected_list is not None and len(self._expected_list) != n:
            raise ValueError(f"expected has {len(self._expected_list)} items but there are {n} "
                             f"inputs; give one expected option name per input (None if "
                             f"unknown)")
        self.total = n

    def refill(self, prompt: str) -> Table:
        """The same rows with another prompt template (a compare variant's own prompt)."""
        other = object.__new__(Table)
        other.__dict__.update(self.__dict__)
        other.prompt = check_prompt(prompt)
        if self.texts is not None:
            other.texts = [fill(prompt, row, i, self.columns)
                           for i, row in enumerate(self.records)]
        return other
