"""`csv_fault.record_at_fault`: the record pyarrow's CSV reader fails on, found by a second
read with Python's csv module — against pyarrow's own error on files of any text."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_pipeline.ingest.sources import csv_fault

CELL = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def _write(records: list[list[str]]) -> tuple[bytes, list[int]]:
    """The CSV of `records` (a header first) and each record's first line."""
    out, lines = io.StringIO(), []
    writer = csv.writer(out, lineterminator="\r\n")
    for cells in records:
        lines.append(out.getvalue().count("\n") + 1)
        writer.writerow(cells)
    return out.getvalue().encode("utf-8"), lines


def _pyarrow_error(data: bytes, block: int = 1 << 10) -> str:
    """pyarrow's error reading `data` as the CUR reader reads it (every column text)."""
    width = len(next(csv.reader(io.StringIO(data.decode("utf-8")))))
    names = [f"c{i}" for i in range(width)]
    with pytest.raises(pa.ArrowInvalid) as error:
        for _ in pacsv.open_csv(pa.BufferReader(data),
                                read_options=pacsv.ReadOptions(block_size=block),
                                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                                convert_options=pacsv.ConvertOptions(
                                    column_types=dict.fromkeys(names, pa.string()))):
            pass
    return str(error.value)


def _locate(data: bytes, reason: str, **kw) -> tuple[int, int] | None:
    return csv_fault.record_at_fault(pa.BufferReader(data), ",", reason, **kw)


@settings(max_examples=60, deadline=None)
@given(width=st.integers(1, 5), data=st.data())
def test_the_record_pyarrow_fails_on_is_found_by_its_row_and_line(width, data):
    # any text in the cells — delimiters, quotes, line breaks, any Unicode — and one record
    # of another number of cells anywhere: the row and line it was written at
    good = data.draw(st.lists(st.lists(CELL, min_size=width, max_size=width), max_size=120))
    at = data.draw(st.integers(0, len(good)))
    cells = data.draw(st.integers(1, 8).filter(lambda n: n != width))
    bad = data.draw(st.lists(CELL, min_size=cells, max_size=cells))
    if cells == 1 and bad == [""]:  # an empty line: no record (pyarrow skips it too)
        bad = ["x"]
    header = [f"c{i}" for i in range(width)]
    written, lines = _write([header, *good[:at], bad, *good[at:]])
    reason = _pyarrow_error(written)
    assert f"got {cells}" in reason
    assert _locate(written, reason) == (at + 2, lines[at + 1])


def test_the_record_named_is_the_one_of_the_cell_count_pyarrow_says():
    # a record Python's reader splits otherwise than pyarrow (here: none) is not taken for it
    data = b"a,b\r\n1,2\r\n\r\n3,4,5\r\n6\r\n"
    assert _locate(data, "CSV parse error: Expected 2 columns, got 3: 3,4,5") == (3, 4)
    assert _locate(data, "CSV parse error: Expected 2 columns, got 1: 6") == (4, 5)
    assert _locate(data, "CSV parse error: Expected 2 columns, got 7: …") is None
    assert _locate(b"", "CSV parse error: Expected 2 columns, got 3") is None


def test_bytes_that_are_no_utf8_are_found_in_the_column_pyarrow_names():
    data = b"a,b\r\n1,\xff\r\n\xfe,2\r\n"
    assert _locate(data, "In CSV column #0: CSV conversion error to string: invalid UTF8") == (
        3, 3)
    assert _locate(data, "In CSV column #1: CSV conversion error to string: invalid UTF8") == (
        2, 2)


def test_without_newlines_in_values_every_line_is_a_record():
    # FOCUS CSV is read so: a quoted line break splits the record, as pyarrow splits it
    data = b'a,b\r\n"1\r\n2",3\r\n4,5\r\n'
    reason = "CSV parse error: Expected 2 columns, got 1: \"1"
    assert _locate(data, reason, newlines_in_values=False) == (2, 2)
    assert _locate(data, reason) is None  # read with newlines in values: no such record
