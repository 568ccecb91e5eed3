"""The record a CSV reader's error is about.

pyarrow's streaming CSV reader fails a whole block (4 MiB, some ten thousand records) when one
record in it has more or fewer cells than the header, or bytes that are no UTF-8 in a column
it converts; its message quotes the record's cells but not where it is. On that error only,
the file is read once more with Python's csv module to find the record: its row as `_row`
numbers rows (the header is row 1, empty lines are no rows; in a file of no header, such as
an S3 Inventory report's data file, its first record is) and the line it starts on (lines
end at LF), which differs after a value spanning lines."""

from __future__ import annotations

import csv
import io
import logging
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import IO

import pyarrow as pa

from cost_pipeline.ingest.sources import SourceError

# pyarrow's words for a cell it could not convert, and for a record of another number of cells
# than the columns it was given (a reader naming the record's fault reads them too)
CSV_COLUMN = re.compile(r"CSV column #(\d+)")
CELL_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")


def record_at_fault(stream: IO[bytes], delimiter: str, reason: str,
                    newlines_in_values: bool = True, header: bool = True
                    ) -> tuple[int, int] | None:
    """(row, first line) of the first record of `stream` (decompressed CSV bytes, header
    first unless not `header`) that `reason` — pyarrow's error — is about: a record of the
    number of cells its `Expected 40 columns, got 61` says (not the header's, or without a
    header the 40 it expected), or, for `In CSV column #N: … invalid UTF8`, whose N-th cell
    (from 0) is no UTF-8. None when no record is (the fault was the stream's, or a quote the
    two readers read differently)."""
    column, count = CSV_COLUMN.search(reason), CELL_COUNT.search(reason)
    index = int(column.group(1)) if column else None
    got = int(count.group(2)) if count else None  # the cells pyarrow counted in the record
    # lines end at LF only (as `wc -l`, `grep -n` and `sed` count them): a lone CR inside a
    # quoted value stays in its line
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape",
                            newline="\n")
    records = _records(text, delimiter, newlines_in_values)
    if header:
        first = next(records, None)
        if first is None:
            return None
        width, row = len(first[0]), 1
    elif count or column:  # the cells pyarrow expected: the columns it was given
        width, row = int(count.group(1)) if count else 0, 0
    else:  # no record's width to tell it by
        return None
    for cells, line in records:
        if not cells:  # an empty line: no record (pyarrow skips it)
            continue
        row += 1
        if index is None:
            if len(cells) != width and got in (None, len(cells)):
                return row, line
        elif index < len(cells) and not _utf8(cells[index]):
            return row, line
    return None


def _records(text: IO[str], delimiter: str,
             newlines_in_values: bool) -> Iterator[tuple[list[str], int]]:
    """(cells, first line) of every record; without `newlines_in_values` every line is one
    record, as pyarrow then reads it."""
    if not newlines_in_values:
        for number, line in enumerate(text, start=1):
            yield next(csv.reader([line], delimiter=delimiter), []), number
        return
    reader = csv.reader(text, delimiter=delimiter)
    line = 1
    for cells in reader:
        yield cells, line
        line = reader.line_num + 1


def _utf8(cell: str) -> bool:
    try:
        cell.encode("utf-8")
    except UnicodeEncodeError:  # a byte that is no UTF-8, kept as a lone surrogate
        return False
    return True


def where(file: str, reason: str, fallback: str,
          opened: Callable[[], AbstractContextManager[IO[bytes]]], delimiter: str, *,
          newlines_in_values: bool = True, header: bool = True,
          log: logging.Logger | None = None, source: str = "") -> str:
    """Where in `file` the record pyarrow's CSV error `reason` is about is: `file row R`
    (`(line L)` after a value spanning lines), found by reading the file again (`opened`:
    its decompressed bytes); `fallback` when `reason` is no CSV error, or the second read
    finds no such record or cannot read the file either."""
    if "CSV" not in reason:
        return fallback
    if log is not None:  # a file of millions of records takes seconds
        log.info(f"{source}: {file}: unreadable; reading it again to name the record")
    try:
        with opened() as stream:
            found = record_at_fault(stream, delimiter, reason, newlines_in_values, header)
    except (OSError, EOFError, csv.Error, zipfile.BadZipFile, pa.ArrowException, SourceError):
        return fallback
    if found is None:
        return fallback
    row, line = found
    return f"{file} row {row}" + (f" (line {line})" if line != row else "")
