"""Checkpoint listings read vectorized (pyarrow) into Arrow batches of the month's objects.

The vectorized reader accepts only values it can convert exactly as the row-by-row reader
(`checkpoints`) would; on anything else it gives up on the file (`NotClean`), and the
row-by-row reader reads it again: it returns the same objects, or raises the error naming
the row."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator
from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.fs as pafs

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.listing_rows import header_index, in_month

LISTING_SCHEMA = pa.schema([
    ("bucket", pa.string()), ("key", pa.string()), ("size", pa.int64()),
    ("last_modified", pa.timestamp("us")), ("snapshot_date", pa.date32()),
])
ROWS_PER_BATCH = 65_536
# what `str.strip()` removes (every character whose `isspace()` is true)
PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
                 "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# The timestamp spellings read vectorized, each one parsed alike by `parse_time` and by
# Arrow's cast; years 1000-9899 so that no offset moves a value out of `datetime`'s range.
_DATE = r"(?:1[0-9]|[2-8][0-9]|9[0-8])[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = r"[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
_ZONE = r"(?:Z|[+-](?:[01][0-9]|2[0-3])(?::?[0-5][0-9])?)"
_EPOCH = r"^[0-9]{9,14}(?:\.[0-9]+)?$"
_HEADER_PEEK = 1 << 20
CSV_BLOCK = 16 << 20  # bytes of CSV per batch: fewer, larger batches amortize the per-call
# cost, and a batch of more than a row group (122,880 rows; ~6 MB of inventory CSV) is written
# into checkpoint_inventory as it is: at 1M objects the insert took 0.78 s from 4 MB batches,
# 0.43 s from 16 MB ones


class NotClean(Exception):
    """The vectorized reader met something it does not vouch for: read the file row by row."""


def every(mask: pa.Array) -> bool:
    return pc.all(mask, min_count=0).as_py()  # an empty batch is clean


def some(mask: pa.Array) -> bool:
    return pc.any(mask, min_count=0).as_py()


def value_bytes(strings: pa.Array) -> bytes:
    """The bytes of a string array's values, all at once: its data buffer from its first
    value's start to its last value's end (null values' bytes between, if any, included) —
    a byte search over it answers for every value in one pass."""
    _, offsets, data = strings.buffers()
    if data is None or len(strings) == 0:
        return b""
    at = memoryview(offsets).cast("q" if pa.types.is_large_string(strings.type) else "i")
    return data[at[strings.offset]:at[strings.offset + len(strings)]].to_pybytes()


def all_digits(strings: pa.Array, longest: int) -> bool:
    """Whether every value is 0 to `longest` ASCII digits (`^[0-9]{0,longest}$`): the
    values' bytes are searched first, the pattern matched only when they hold another byte
    (a null value's)."""
    if value_bytes(strings).translate(None, b"0123456789"):
        return every(pc.match_substring_regex(strings, f"^[0-9]{{0,{longest}}}$"))
    return (pc.max(pc.binary_length(strings)).as_py() or 0) <= longest


def inventory_csv_batches(fs: pafs.FileSystem, path: str,
                          bucket: str | None) -> Iterator[pa.RecordBatch]:
    """`read_inventory_csv` vectorized: the same objects as Arrow batches (LISTING_SCHEMA),
    or NotClean."""
    header = _header(fs, path)
    try:
        index = header_index(header, "", path, bucket)
    except SourceError:
        raise NotClean from None
    names = [f"c{i}" for i in range(len(header))]
    try:
        with fs.open_input_stream(path) as raw:
            reader = pacsv.open_csv(
                raw, read_options=pacsv.ReadOptions(column_names=names, skip_rows=1,
                                                    block_size=CSV_BLOCK),
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False))
            for batch in reader:
                yield _csv_objects(batch, index, bucket)
    except (pa.ArrowException, OSError):
        raise NotClean from None


def _header(fs: pafs.FileSystem, path: str) -> list[str]:
    """The header as `read_inventory_csv` reads it, when it is the file's first line (the
    CSV reader then skips that line)."""
    try:
        with fs.open_input_stream(path) as raw:
            head = raw.read(_HEADER_PEEK)
        ends = [at for at in (head.find(b"\n"), head.find(b"\r")) if at >= 0]
        if not ends:
            raise NotClean
        reader = csv.reader(io.StringIO(head[:min(ends)].decode("utf-8-sig") + "\n\n",
                                        newline=""))
        header = next(reader, [])
    except (OSError, UnicodeDecodeError, csv.Error):
        raise NotClean from None
    if reader.line_num != 1:  # a quoted line break: the header goes on past the first line
        raise NotClean
    return [h.strip().lower() for h in header]


def _csv_objects(batch: pa.RecordBatch, index: dict[str, int],
                 bucket: str | None) -> pa.RecordBatch:
    limit = csv.field_size_limit()  # the row reader refuses longer fields
    for column in batch.columns:
        if len(column) and pc.max(pc.binary_length(column)).as_py() > limit:
            raise NotClean

    def field(name: str) -> pa.Array | None:
        i = index.get(name)
        return None if i is None else pc.utf8_trim(batch.column(i), characters=PY_WHITESPACE)

    size = field("size")
    if not all_digits(size, 15):
        raise NotClean  # floats, signs, exponents, > 2**53: as the row reader has them
    key = field("key")
    snapshot = field("snapshot_date")
    return listing_batch(field("bucket"), bucket, key,
                         pc.cast(pc.if_else(pc.equal(size, ""), "0", size), pa.int64()),
                         arrow_times(field("last_modified")),
                         None if snapshot is None else pc.cast(arrow_times(snapshot), pa.date32()))


def listing_batch(names: pa.Array | None, bucket: str | None, keys: pa.Array, sizes: pa.Array,
                  modified: pa.Array, snapshots: pa.Array | date | None) -> pa.RecordBatch:
    """A LISTING_SCHEMA batch; the `bucket` given stands in for blank or missing `names`.
    NotClean when a key is blank or a time missing (the row reader names its row), or a
    bucket is missing and no `bucket` is given."""
    rows = len(keys)
    if modified.null_count or not every(pc.fill_null(pc.not_equal(keys, ""), False)):
        raise NotClean
    known = isinstance(bucket, str) and bucket != ""
    if names is None:
        if rows and not known:
            raise NotClean
        names = pa.repeat(pa.scalar(bucket if known else None, pa.string()), rows)
    else:
        missing = pc.fill_null(pc.equal(names, ""), True)
        if some(missing):
            if not known:
                raise NotClean
            names = pc.if_else(missing, bucket, names)
    if not isinstance(snapshots, pa.Array):
        snapshots = pa.repeat(pa.scalar(snapshots, pa.date32()), rows)
    return pa.RecordBatch.from_arrays([names, keys, sizes, modified, snapshots],
                                      schema=LISTING_SCHEMA)


def arrow_times(text: pa.Array) -> pa.Array:
    """`parse_time` over stripped strings → timestamp[us] (blank → null). Raises NotClean
    for any value that is not one of the spellings both parsers agree on."""
    converters: list[tuple[str, Callable[[pa.Array], pa.Array]]] = [
        (f"^{_DATE}{_TIME}{_ZONE}$",
         lambda v: pc.cast(v, pa.timestamp("us", tz="UTC")).view(pa.timestamp("us"))),
        (f"^{_DATE}(?:{_TIME})?$", lambda v: pc.cast(v, pa.timestamp("us"))),
        (f"^{_DATE}{_TIME} UTC$",
         lambda v: pc.cast(pc.utf8_slice_codeunits(v, 0, -4), pa.timestamp("us"))),
        (_EPOCH, _epoch_times),
    ]
    result = pa.nulls(len(text), pa.timestamp("us"))
    left = pc.not_equal(text, "")
    for pattern, convert in converters:
        if not some(left):
            break
        lane = pc.and_(left, pc.match_substring_regex(text, pattern))
        if some(lane):
            try:
                converted = convert(text.filter(lane))
            except pa.ArrowInvalid:  # a day the month does not have, …
                raise NotClean from None
            result = pc.replace_with_mask(result, lane, converted)
            left = pc.and_not(left, lane)
    if some(left):
        raise NotClean
    return result


def _epoch_times(text: pa.Array) -> pa.Array:
    """Epoch seconds, or milliseconds above 1e11, rounded to the microsecond in the same
    double arithmetic as `datetime.fromtimestamp` (modf, then half-even). NotClean where a
    whole number of 12 or 14 digits spells a date and time: `parse_time` reads it as a
    compact `YYYYMMDDHHMM[SS]`."""
    for width, spelled in ((12, "%Y%m%d%H%M"), (14, "%Y%m%d%H%M%S")):
        whole = text.filter(pc.and_(pc.equal(pc.utf8_length(text), width),
                                    pc.match_substring_regex(text, "^[0-9]+$")))
        if len(whole) and pc.any(pc.is_valid(pc.strptime(
                whole, format=spelled, unit="us", error_is_null=True))).as_py():
            raise NotClean
    number = pc.cast(text, pa.float64())
    seconds = pc.if_else(pc.greater(number, 1e11), pc.divide(number, 1000.0), number)
    whole = pc.floor(seconds)
    micros = pc.round(pc.multiply(pc.subtract(seconds, whole), 1e6), round_mode="half_to_even")
    carry = pc.greater_equal(micros, 1e6)
    whole = pc.if_else(carry, pc.add(whole, 1.0), whole)
    micros = pc.if_else(carry, pc.subtract(micros, 1e6), micros)
    total = pc.add(pc.multiply(pc.cast(whole, pa.int64()), 1_000_000),
                   pc.cast(micros, pa.int64()))
    return total.cast(pa.timestamp("us"))


def month_objects(batch: pa.RecordBatch, month: date, month_end: datetime) -> pa.RecordBatch:
    """`in_month` over a batch of LISTING_SCHEMA."""
    snapshot, modified = batch.column("snapshot_date"), batch.column("last_modified")
    dated = pc.and_(pc.greater_equal(snapshot, pa.scalar(month.replace(day=1), pa.date32())),
                    pc.less(snapshot, pa.scalar(month_end.date(), pa.date32())))
    undated = pc.and_(pc.is_null(snapshot),
                      pc.less(modified, pa.scalar(month_end, pa.timestamp("us"))))
    return batch.filter(pc.or_(pc.fill_null(dated, False), pc.fill_null(undated, False)))


def without_folder_markers(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` (LISTING_SCHEMA) without its folder markers: zero-byte objects whose key ends
    in `/`, as the S3 console's "Create folder" writes. They hold no data: counted, one was a
    run's newest checkpoint (pushing a real one out of the newest kept), and a run folder's
    marker a checkpoint of its own. The sizes are looked at first: most batches hold no
    empty object."""
    empty = pc.equal(batch.column("size"), 0)
    if not some(empty):
        return batch
    marker = pc.fill_null(pc.and_(empty, pc.ends_with(batch.column("key"), "/")), False)
    return batch.filter(pc.invert(marker)) if some(marker) else batch


def object_batches(objects: Iterable[dict[str, Any]], month: date,
                   month_end: datetime) -> Iterator[pa.RecordBatch]:
    """The month's objects among row-by-row `objects`, a bounded number per batch."""
    rows: list[dict[str, Any]] = []
    for obj in objects:
        if in_month(obj, month, month_end):
            rows.append(obj)
            if len(rows) == ROWS_PER_BATCH:
                yield pa.RecordBatch.from_pylist(rows, schema=LISTING_SCHEMA)
                rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=LISTING_SCHEMA)


def month_batches(vectorized: Callable[[], Iterator[pa.RecordBatch]] | None,
                  objects: Callable[[], Iterable[dict[str, Any]]], month: date,
                  month_end: datetime) -> Iterator[pa.RecordBatch]:
    """One file's objects of the month: read `vectorized`, else (NotClean, or None) the
    `objects` read row by row. A file given up halfway is read again from its start."""
    kept = None
    if vectorized is not None:
        try:
            kept = [month_objects(batch, month, month_end) for batch in vectorized()]
        except NotClean:
            kept = None
    yield from object_batches(objects(), month, month_end) if kept is None else kept
