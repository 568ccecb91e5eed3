"""The vectorized listing readers against the row-by-row readers they stand in for: on any
input both give the month's objects column by column alike, or the same error; on clean
input (offsets, epoch seconds and milliseconds, blank cells, quoted fields, URL-encoded
keys, local or on S3) the vectorized reader does the work and the row reader is never
called."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import unquote_plus

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.checkpoints import read_listing
from cost_pipeline.ingest.sources import SourceError, listing_arrow
from cost_pipeline.ingest.sources import listing_inventory as s3_inventory
from cost_pipeline.ingest.sources.listing_arrow import PY_WHITESPACE, NotClean, arrow_times
from cost_pipeline.ingest.sources.runs_file import parse_time
from tests.support.s3_server import new_bucket, put

JULY = date(2026, 7, 1)
LOG = logging.getLogger("test")
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CSV_SCHEMA = ("Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, "
              "ETag, StorageClass")


def both(entries: list[dict], base: Path, month: date = JULY) -> tuple:
    """(vectorized, row by row): each a Table, or the error raised (a SourceError, or what
    the row reader lets through, such as a size beyond int64)."""
    cfg = parse_config({"checkpoints": entries}, base)
    out = []
    for vectorized in (True, False):
        try:
            out.append(read_listing(cfg, month, LOG, vectorized=vectorized))
        except Exception as exc:  # noqa: BLE001 - compared below
            out.append(f"{type(exc).__name__}: {exc}")
    return tuple(out)


def assert_same(fast, slow) -> None:
    if isinstance(fast, str) or isinstance(slow, str):
        assert fast == slow
        return
    assert fast.schema == slow.schema
    for name in slow.schema.names:
        assert fast.column(name).to_pylist() == slow.column(name).to_pylist(), name


def vectorized_only(entries: list[dict], base: Path, month: date = JULY) -> pa.Table:
    """`read_listing` with the row readers made to fail: the vectorized reader must do it."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("read row by row")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(s3_inventory, "read_inventory_csv", refuse)
        patch.setattr(s3_inventory._Inventory, "_csv_rows", refuse)
        patch.setattr(s3_inventory._Inventory, "_columnar_rows", refuse)
        return read_listing(parse_config({"checkpoints": entries}, base), month, LOG)


def test_whitespace_is_what_str_strip_removes():
    assert set(PY_WHITESPACE) == {chr(c) for c in range(0x110000) if chr(c).isspace()}


CLEAN_STAMPS = {
    "2026-07-01T10:00:00Z": datetime(2026, 7, 1, 10),
    "2026-07-01T10:00:00+02:00": datetime(2026, 7, 1, 8),
    "2026-07-01T10:00:00.123-05:30": datetime(2026, 7, 1, 15, 30, 0, 123000),
    "2026-07-01T10:00+0530": datetime(2026, 7, 1, 4, 30),
    "2026-07-01 10:00:00+05": datetime(2026, 7, 1, 5),
    "2026-07-01 10:00:00.5": datetime(2026, 7, 1, 10, 0, 0, 500000),
    "2026-07-01T10:00": datetime(2026, 7, 1, 10),
    "2026-07-01": datetime(2026, 7, 1),
    "2024-02-29": datetime(2024, 2, 29),
    "2026-07-01 10:00:00 UTC": datetime(2026, 7, 1, 10),
    "1751328000": datetime(2025, 7, 1),
    "1751328000123": datetime(2025, 7, 1, 0, 0, 0, 123000),
    "1751328000.25": datetime(2025, 7, 1, 0, 0, 0, 250000),
    "100000000000": datetime(5138, 11, 16, 9, 46, 40),  # 1e11 is still seconds
    "": None,
}


def test_arrow_times_of_the_usual_spellings():
    values = arrow_times(pa.array(list(CLEAN_STAMPS), pa.string())).to_pylist()
    assert values == list(CLEAN_STAMPS.values())
    assert values == [parse_time(v) for v in CLEAN_STAMPS]


@pytest.mark.parametrize("text", ["last tuesday", "2026-02-29", "2026-07-01Z", "20260701",
                                  "2026-07-01T24:00:00Z", "2026-07-01T10:00:00+05:99",
                                  "0999-01-01", "2026-07-01T10:00:00.1234567", "12345678",
                                  "\u0661\u0667\u0665\u0661\u0663\u0662\u0668\u0660\u0660\u0660",
                                  "2026-07-01t10:00", "202607011000", "20260701100000"])
def test_arrow_times_leaves_the_rest_to_parse_time(text):
    with pytest.raises(NotClean):
        arrow_times(pa.array(["2026-07-01", text], pa.string()))


def test_a_compact_time_is_its_date_and_time_not_epoch_milliseconds():
    # `%Y%m%d%H%M[%S]`, as exports without separators write it: read as epoch milliseconds
    # they were 1976 and 2612 (a checkpoint's age, a run's month)
    assert parse_time("202607011000") == datetime(2026, 7, 1, 10)
    assert parse_time("20260701100000") == parse_time(20260701100000) == datetime(2026, 7, 1, 10)
    assert parse_time("100000000000") == datetime(5138, 11, 16, 9, 46, 40)  # no date: epoch


CLEAN_ZONES = ["", "Z", "+02:00", "-05:30", "+0530", "+05", "-00:00", "+23:59", " UTC"]
ZONES = CLEAN_ZONES + ["z", "+24:00", "+05:99", "UTC", "+00:00:30", " Z"]


@st.composite
def stamp_texts(draw, messy: bool = True, blank: bool = True) -> str:
    """Timestamps as listings spell them; `messy` adds spellings the vectorized reader leaves
    to `parse_time` (and some `parse_time` refuses); `blank`, blank cells (an object's
    `last_modified` must not be: those are refused)."""
    kinds = ["iso", "iso", "iso", "epoch"] + (["blank"] if blank else []) + (
        ["junk"] if messy else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "iso":
        wide = draw(st.booleans())
        moment = draw(st.datetimes(min_value=datetime(990 if wide else 2026, 1, 1),
                                   max_value=datetime(9999 if wide else 2026, 12, 31)))
        text = draw(st.sampled_from([f"{moment:%Y-%m-%d}".zfill(10)] * 6 + ([
            "2026-02-29", "2024-02-29", "2026-04-31", "2026-13-01", "0000-01-01"] if messy
            else ["2024-02-29"])))
        if draw(st.booleans()):
            text += draw(st.sampled_from(["T", "T", " "] + (["t", "_"] if messy else [])))
            text += f"{moment:%H:%M}"
            if draw(st.booleans()):
                text += f":{moment:%S}"
                if draw(st.booleans()):
                    text += "." + f"{moment:%f}"[:draw(st.integers(1, 6))]
                    text += draw(st.sampled_from(["", "", "789"] if messy else [""]))
            text += draw(st.sampled_from(ZONES if messy else CLEAN_ZONES))
        elif messy:
            text += draw(st.sampled_from(["", "", "", "Z", " UTC"]))
    elif kind == "epoch":
        number = draw(st.one_of(
            st.integers(0, 10**15 if messy else 10**14 - 1),
            st.sampled_from([10**11 - 1, 10**11, 10**11 + 1, 10**8]),
            st.integers(1_700_000_000, 1_800_000_000),
            st.integers(1_700_000_000_000, 1_800_000_000_000)))
        text = str(number).zfill(draw(st.sampled_from([0, 0, 9, 12])))
        if draw(st.booleans()):
            text += "." + str(draw(st.integers(0, 10**9))).zfill(draw(st.integers(1, 10)))
    elif kind == "junk":
        text = draw(st.text(alphabet="0123456789-:TZ+. UTCz\u0660", max_size=25))
    else:
        text = ""
    pad = st.sampled_from(["", "", "", " ", "\t", "\u3000", "\xa0"])
    return draw(pad) + text + draw(pad)


@PROPERTY
@given(st.lists(stamp_texts(), max_size=12))
def test_arrow_times_is_parse_time(texts):
    stripped = [t.strip() for t in texts]
    try:
        fast = arrow_times(pa.array(stripped, pa.string())).to_pylist()
    except NotClean:
        return
    assert fast == [parse_time(t) for t in stripped]  # parse_time raises on a value refused


@PROPERTY
@given(st.lists(st.text(alphabet="%+aZ/ é2034fF5C9Ag0", max_size=12), max_size=12))
def test_url_decoding_is_unquote_plus(keys):
    inventory = s3_inventory._Inventory(pafs.LocalFileSystem(), str, "test", JULY)
    try:
        decoded = inventory._url_decode(pa.array(keys, pa.string())).to_pylist()
    finally:
        inventory.close()
    assert decoded == [unquote_plus(k) for k in keys]


def write_listing(path: Path, header: list[str], rows: list[list[str]], *, bom: bool = False,
                  quoting: int = csv.QUOTE_MINIMAL, terminator: str = "\n") -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=quoting, lineterminator=terminator)
    writer.writerow(header)
    writer.writerows(rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buffer.getvalue().encode("utf-8"))


def test_clean_listing_is_read_vectorized(tmp_path):
    rows = [
        ["ml-ckpt", "checkpoints/run-a/step 1/model,v2.pt", "100", "2026-07-10T00:00:00+02:00",
         ""],
        ["", 'checkpoints/run-a/"quoted".pt', " 7 ", "1751328000", "2026-07-01"],
        ["ml-ckpt", "checkpoints/run-b/x.pt", "", "1785542399999", ""],  # ms: 2026-07-31
        ["ml-ckpt", "checkpoints/run-b/late.pt", "5", "2026-08-01T01:00:00+02:00", ""],
        ["ml-ckpt", "checkpoints/run-b/gone.pt", "5", "2026-08-01", ""],
        ["ml-ckpt", "checkpoints/run-c/é.pt", "5", "2026-06-01 10:00:00 UTC", "2026-08-01"],
    ]
    write_listing(tmp_path / "inv.csv", ["Bucket", " key", "SIZE", "last_modified",
                                         "snapshot_date"], rows, bom=True,
                  quoting=csv.QUOTE_ALL, terminator="\r\n")
    entry = {"kind": "inventory", "path": "inv.csv", "bucket": "cfg-bucket",
             "prefix": "checkpoints/"}
    fast = vectorized_only([entry], tmp_path)
    assert_same(fast, both([entry], tmp_path)[1])
    assert [(r["bucket"], r["key"], r["size"], r["last_modified"], r["snapshot_date"])
            for r in fast.to_pylist()] == [
        ("ml-ckpt", "checkpoints/run-a/step 1/model,v2.pt", 100, datetime(2026, 7, 9, 22),
         None),
        ("cfg-bucket", 'checkpoints/run-a/"quoted".pt', 7, datetime(2025, 7, 1),
         date(2026, 7, 1)),
        ("ml-ckpt", "checkpoints/run-b/x.pt", 0, datetime(2026, 7, 31, 23, 59, 59, 999000),
         None),
        ("ml-ckpt", "checkpoints/run-b/late.pt", 5, datetime(2026, 7, 31, 23), None),
    ]


def test_a_bad_row_after_clean_batches_is_named_by_the_row_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(listing_arrow, "CSV_BLOCK", 1024)  # many batches
    rows = [["b", f"k{i}", str(i), f"2026-07-{1 + i % 28:02d}T00:00:00Z"] for i in range(500)]
    write_listing(tmp_path / "inv.csv", ["bucket", "key", "size", "last_modified"], rows)
    entry = {"kind": "inventory", "path": "inv.csv"}
    fast, slow = both([entry], tmp_path)
    assert_same(fast, slow)
    assert fast.num_rows == 500 and len(fast.to_batches()) > 10
    rows[420][2] = "1.5"
    write_listing(tmp_path / "inv.csv", ["bucket", "key", "size", "last_modified"], rows)
    fast, slow = both([entry], tmp_path)
    assert fast == slow == (f"SourceError: checkpoints[0] inventory: {tmp_path / 'inv.csv'} "
                            "row 422: size: '1.5' is not a whole number of bytes")


SIZES = ["", "0", "12", " 7 ", "007", "1.0", "1e3", "-3", "-0", "12kB", "1_000",
         "999999999999999", "9999999999999999", "\u0661", "inf"]
KEY_TEXT = "abc/,\"\n é+%\u3000\t"


@st.composite
def listings(draw):
    """(header, rows) of a listing CSV; one in three is messy (values that the vectorized
    reader leaves to the row reader, errors, ragged rows)."""
    messy = draw(st.integers(0, 2)) == 0
    columns = ["bucket", "key", "size", "last_modified"]
    if draw(st.booleans()):
        columns.append("snapshot_date")
    if draw(st.booleans()):
        columns.append("etag")
    if draw(st.integers(0, 3)) == 0:
        columns.remove("bucket")
    columns = draw(st.permutations(columns))
    header = [draw(st.sampled_from([c, c.upper(), f" {c} "])) for c in columns]
    values = {
        "bucket": st.sampled_from(["ml-ckpt", "ml-ckpt", " ml-ckpt ", "a,b", 'q"t']
                                  + ([""] if messy else [])),
        "key": st.one_of(st.sampled_from(["checkpoints/run-a/s1/x.pt", "k"]),
                         st.text(alphabet=KEY_TEXT, min_size=0 if messy else 1, max_size=10)
                         .filter(lambda k: messy or k.strip())),
        "size": st.one_of(st.sampled_from(SIZES if messy else ["", "0", "12", " 7 ", "007"]),
                          st.integers(0, 10**12).map(str)),
        "last_modified": stamp_texts(messy, blank=messy),
        "snapshot_date": st.one_of(st.sampled_from(
            ["", "", "2026-06-30", "2026-07-01", "2026-07-31", "2026-08-01",
             "2026-07-31T23:00:00-02:00"]), stamp_texts(messy)),
        "etag": st.text(alphabet="ab\"'", max_size=3),
    }
    rows = draw(st.lists(st.fixed_dictionaries({c: values[c] for c in columns}),
                         max_size=8))
    table = [[row[c] for c in columns] for row in rows]
    if table and messy and draw(st.booleans()):  # a ragged row
        table[draw(st.integers(0, len(table) - 1))].append("extra")
    return header, table


@PROPERTY
@given(listings(), st.sampled_from([None, "cfg-bucket"]), st.booleans(),
       st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]), st.sampled_from(["\n", "\r\n"]))
def test_listing_csv_is_read_alike(tmp_path, listing, bucket, bom, quoting, terminator):
    header, rows = listing
    write_listing(tmp_path / "inv.csv", header, rows, bom=bom, quoting=quoting,
                  terminator=terminator)
    entry = {"kind": "inventory", "path": "inv.csv", "prefix": "checkpoints/"}
    if bucket:
        entry["bucket"] = bucket
    assert_same(*both([entry], tmp_path))


TOKENS = ["b", "k", "k2", "1", "7", "2026-07-01", "2026-07-01T00:00:00Z", ",", '"', '""', "\n",
          "\r\n", "\r", " ", "é", "\x00", "\ufeff"]
CELLS = st.one_of(st.sampled_from(["b", "k", "1", "2026-07-01", '"k,\n2"', '"a""b"', '"x"y']),
                  st.lists(st.sampled_from(TOKENS), max_size=3).map("".join))


SIZE_CELLS = st.sampled_from(["1", "7", '"7"', "", " 7 ", '"1"2'])
TIME_CELLS = st.sampled_from(["2026-07-01", '"2026-07-01T00:00:00Z"', "", "1751328000",
                              '"2026-07-01 00:00"Z'])
ROWS = st.tuples(CELLS, CELLS, st.one_of(SIZE_CELLS, SIZE_CELLS, SIZE_CELLS, CELLS),
                 st.one_of(TIME_CELLS, TIME_CELLS, TIME_CELLS, CELLS)).map(",".join)


@PROPERTY
@given(st.lists(st.tuples(ROWS, st.sampled_from(["\n", "\n", "\r\n", "\r", "\n\n"])),
                max_size=6))
def test_any_csv_text_is_read_alike(tmp_path, lines):
    text = "bucket,key,size,last_modified\n" + "".join(row + end for row, end in lines)
    (tmp_path / "inv.csv").write_text(text, encoding="utf-8", newline="")
    assert_same(*both([{"kind": "inventory", "path": "inv.csv"}], tmp_path))


@pytest.mark.parametrize("raw", [b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80",
                                 b"\xef\xbf\xbf", b"\xf0\x9f\x98\x80", b"k" * 131_071,
                                 b"k" * 131_072])
def test_bytes_the_row_reader_refuses_are_refused(tmp_path, raw):
    """Not UTF-8 (a surrogate, an overlong form, beyond U+10FFFF), and fields longer than the
    csv module's limit, are errors; the rest is read."""
    (tmp_path / "inv.csv").write_bytes(b"bucket,key,size,last_modified\nb,k" + raw
                                       + b",1,2026-07-01\n")
    fast, slow = both([{"kind": "inventory", "path": "inv.csv"}], tmp_path)
    assert_same(fast, slow)
    assert isinstance(slow, str) == (raw[:1] in (b"\xed", b"\xc0", b"\xf4")
                                     or len(raw) == 131_072)


def manifest(day: str, file_format: str, keys: list[str], schema: str = CSV_SCHEMA) -> str:
    created = int(datetime.fromisoformat(f"{day}T01:00:00+00:00").timestamp() * 1000)
    return json.dumps({"sourceBucket": "ml-checkpoints", "creationTimestamp": str(created),
                       "fileFormat": file_format, "fileSchema": schema,
                       "files": [{"key": k} for k in keys]})


def csv_report(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return gzip.compress(buffer.getvalue().encode())


def write_report(folder: Path, data: dict[str, bytes], file_format: str = "CSV") -> None:
    for name, body in data.items():
        (folder / "data").mkdir(parents=True, exist_ok=True)
        (folder / "data" / name).write_bytes(body)
    (folder / "2026-07-15T01-00Z").mkdir(parents=True, exist_ok=True)
    (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
        manifest("2026-07-15", file_format, [f"x/data/{name}" for name in data]))


FLAGS = ["true", "false", "TRUE", " true ", "", "yes", "False"]


@st.composite
def report_rows(draw, messy: bool) -> list[str]:
    flags = FLAGS if messy else ["true", "false", "", "TRUE"]
    return ["ml-checkpoints" if draw(st.integers(0, 4)) else draw(st.sampled_from(["", "b 2"])),
            draw(st.one_of(st.sampled_from(["checkpoints/run-a/step%202/model+v2.pt", "k"]),
                           st.text(alphabet="%+aZ/ é2034fF5C9", min_size=0 if messy else 1,
                                   max_size=10))),
            "", draw(st.sampled_from(flags)), draw(st.sampled_from(flags)),
            draw(st.sampled_from(["", "5", "0", " 5", "-1", "5.0", "99999999999999999999"]
                                 if messy else ["", "5", "0", "123456789012"])),
            draw(stamp_texts(messy, blank=messy)), "e", "STANDARD"]


@st.composite
def reports(draw) -> list[list[list[str]]]:
    messy = draw(st.integers(0, 2)) == 0
    return draw(st.lists(st.lists(report_rows(messy), max_size=6), min_size=1, max_size=3))


@PROPERTY
@given(reports())
def test_inventory_report_csv_is_read_alike(tmp_path_factory, files):
    folder = tmp_path_factory.mktemp("inv")
    write_report(folder, {f"part{i}.csv.gz": csv_report(rows) for i, rows in enumerate(files)})
    assert_same(*both([{"kind": "inventory", "path": str(folder)}], folder))


def parquet_report(columns: dict[str, pa.Array]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def test_inventory_report_parquet_is_read_alike(tmp_path):
    stamp = datetime(2026, 7, 15, 0, 30, tzinfo=UTC)
    aws = parquet_report({
        "bucket": pa.array(["ml-checkpoints", None, ""]),
        "key": pa.array(["checkpoints/run-z/a.pt", "checkpoints/run-z/b+c.pt", "x"]),
        "is_latest": pa.array([True, None, False]),
        "is_delete_marker": pa.array([False, False, None]),
        "size": pa.array([10, None, 30], pa.int64()),
        "last_modified_date": pa.array([stamp, stamp, None], pa.timestamp("ms", tz="UTC")),
    })
    other_types = parquet_report({
        "key": pa.array(["a", "b"]), "size": pa.array([1, 2], pa.int32()),
        "last_modified_date": pa.array([datetime(2026, 7, 1, 2)] * 2, pa.timestamp("s")),
    })
    float_size = parquet_report({
        "key": pa.array(["f"]), "size": pa.array([1.5]),
        "last_modified_date": pa.array([datetime(2026, 7, 1)], pa.timestamp("s"))})
    write_report(tmp_path, {"aws.parquet": aws, "other.parquet": other_types},
                 file_format="Parquet")
    entry = {"kind": "inventory", "path": str(tmp_path)}
    fast = vectorized_only([entry], tmp_path)
    assert_same(fast, both([entry], tmp_path)[1])
    assert [(r["bucket"], r["key"], r["size"], r["last_modified"]) for r in fast.to_pylist()] \
        == [("ml-checkpoints", "checkpoints/run-z/a.pt", 10, datetime(2026, 7, 15, 0, 30)),
            ("ml-checkpoints", "checkpoints/run-z/b+c.pt", 0, datetime(2026, 7, 15, 0, 30)),
            ("ml-checkpoints", "a", 1, datetime(2026, 7, 1, 2)),
            ("ml-checkpoints", "b", 2, datetime(2026, 7, 1, 2))]
    write_report(tmp_path, {"aws.parquet": aws, "float.parquet": float_size},
                 file_format="Parquet")
    assert_same(*both([entry], tmp_path))  # a float size: read row by row


def test_a_report_without_last_modified_date_is_refused(tmp_path):
    """An S3 Inventory report whose fields leave out LastModifiedDate (a CSV `fileSchema` of
    `Bucket, Key, Size`; a Parquet or ORC file without `last_modified_date`) cannot place an
    object in a month or age it: accepted, its objects had no time, and
    `retention_violations` was silently empty. Both readers refuse it, naming the manifest
    (a CSV report's fields are its manifest's) or the data file, and the field."""
    row = ["ml-checkpoints", "checkpoints/run-a/s1/m.pt", "5"]
    folder = tmp_path / "csv"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "part0.csv.gz").write_bytes(csv_report([row]))
    (folder / "2026-07-15T01-00Z").mkdir()
    (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
        manifest("2026-07-15", "CSV", ["x/data/part0.csv.gz"], schema="Bucket, Key, Size"))
    fast, slow = both([{"kind": "inventory", "path": str(folder)}], tmp_path)
    assert fast == slow == (
        f"SourceError: checkpoints[0] inventory: {folder}/2026-07-15T01-00Z/manifest.json: "
        "fileSchema lacks LastModifiedDate: add LastModifiedDate to the inventory's fields")
    columnar = tmp_path / "parquet"
    write_report(columnar, {"part0.parquet": parquet_report({
        "bucket": pa.array(row[:1]), "key": pa.array(row[1:2]),
        "size": pa.array([5], pa.int64())})}, file_format="Parquet")
    fast, slow = both([{"kind": "inventory", "path": str(columnar)}], tmp_path)
    assert fast == slow == (
        f"SourceError: checkpoints[0] inventory: {columnar}/data/part0.parquet: no "
        "last_modified_date column: add LastModifiedDate to the inventory's fields")


def test_an_object_without_its_time_is_refused_naming_the_row(tmp_path):
    """A blank `last_modified` (a plain CSV) or LastModifiedDate (an S3 Inventory row, CSV
    or Parquet) was read as no time: the month-end snapshot (`last_modified` before the
    month's end) left the object out, the bucket's listed bytes shrank and its storage was
    split among the runs as if it were not there. Both readers refuse it, naming the file,
    the row and the field; a delete marker or a non-current version, left out, needs none."""
    write_listing(tmp_path / "inv.csv", ["bucket", "key", "size", "last_modified"],
                  [["b", "k1", "1", "2026-07-01"], ["b", "k2", "2", " "]])
    fast, slow = both([{"kind": "inventory", "path": "inv.csv"}], tmp_path)
    assert fast == slow == (f"SourceError: checkpoints[0] inventory: {tmp_path / 'inv.csv'} "
                            "row 3: last_modified: empty: an object needs its time")

    stamped = ["ml-checkpoints", "checkpoints/run-a/s1/m.pt", "", "true", "false", "5",
               "2026-07-01T00:00:00.000Z", "e", "STANDARD"]
    gone = ["ml-checkpoints", "checkpoints/run-a/s2/m.pt", "v2", "true", "true", "", "", "",
            ""]
    old = ["ml-checkpoints", "checkpoints/run-a/s3/m.pt", "v1", "false", "false", "7", "",
           "e", "STANDARD"]
    folder = tmp_path / "csv"
    write_report(folder, {"part0.csv.gz": csv_report([stamped, gone, old])})
    fast = vectorized_only([{"kind": "inventory", "path": str(folder)}], tmp_path)
    assert_same(fast, both([{"kind": "inventory", "path": str(folder)}], tmp_path)[1])
    assert fast.column("key").to_pylist() == ["checkpoints/run-a/s1/m.pt"]
    write_report(folder, {"part0.csv.gz": csv_report([stamped, gone, stamped[:6] + [""]
                                                      + stamped[7:]])})
    fast, slow = both([{"kind": "inventory", "path": str(folder)}], tmp_path)
    assert fast == slow == (f"SourceError: checkpoints[0] inventory: {folder}/data/"
                            "part0.csv.gz row 3: LastModifiedDate: empty: an object needs "
                            "its time")

    columnar = tmp_path / "parquet"
    write_report(columnar, {"part0.parquet": parquet_report({
        "key": pa.array(["a", "gone", "b"]), "size": pa.array([1, 0, 2], pa.int64()),
        "is_delete_marker": pa.array([False, True, False]),
        "last_modified_date": pa.array([datetime(2026, 7, 1), None, None],
                                       pa.timestamp("ms", tz="UTC"))})}, file_format="Parquet")
    fast, slow = both([{"kind": "inventory", "path": str(columnar)}], tmp_path)
    assert fast == slow == (f"SourceError: checkpoints[0] inventory: {columnar}/data/"
                            "part0.parquet row 3: LastModifiedDate: empty: an object needs "
                            "its time")


def test_a_broken_or_missing_local_data_file_is_named_as_such(tmp_path):
    """A local report's data file cut short, not gzip, or listed by its manifest but absent
    was reported as an S3 error after retries; it is a fault of the file, said as such."""
    row = ["ml-checkpoints", "checkpoints/r1/s1/m.pt", "", "true", "false", "100",
           "2026-07-01T00:00:00.000Z", "e", "STANDARD"]
    cases = {"cut": ({"p.csv.gz": csv_report([row] * 50)[:-10]},
                     "data/p.csv.gz: broken gzip: truncated (its compressed stream ends "
                     "early)"),
             "plain": ({"p.csv.gz": b"plain text"},
                       "data/p.csv.gz: broken gzip: not a gzip file")}
    for name, (data, problem) in cases.items():
        write_report(tmp_path / name, data)
        fast, slow = both([{"kind": "inventory", "path": name}], tmp_path)
        assert fast == slow == f"SourceError: checkpoints[0] inventory: {tmp_path / name}/{problem}"
    for name, data_file, file_format in (("gone", "p.csv.gz", "CSV"),
                                         ("gone-parquet", "p.parquet", "Parquet")):
        folder = tmp_path / name
        write_report(folder, {data_file: b""}, file_format=file_format)
        (folder / "data" / data_file).unlink()
        fast, slow = both([{"kind": "inventory", "path": name}], tmp_path)
        assert fast == slow == (
            f"SourceError: checkpoints[0] inventory: {folder}/data/{data_file}: not found "
            f"(listed by {folder}/2026-07-15T01-00Z/manifest.json)")


def test_on_s3_the_vectorized_readers_do_the_work(tmp_path, s3_server):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, "listing/inventory.csv",
        "bucket,key,size,last_modified\nml-ckpt,checkpoints/run-a/s1/x.pt,5,1782864000000\n"
        'ml-ckpt,"checkpoints/run-a/s1/y,z.pt",6,2026-07-02T00:00:00+02:00\n')
    folder = "inv/ml-checkpoints/daily"
    put(endpoint, bucket, f"{folder}/data/part0.csv.gz", csv_report([
        ["ml-checkpoints", "checkpoints/run-a/step%202/model+v2.pt", "", "true", "false", "200",
         "2026-07-15T00:30:00.000Z", "e", "STANDARD"],
        ["ml-checkpoints", "checkpoints/run-b/gone.pt", "v2", "true", "true", "", "", "", ""]]))
    put(endpoint, bucket, f"{folder}/2026-07-15T01-00Z/manifest.json",
        manifest("2026-07-15", "CSV", [f"{folder}/data/part0.csv.gz"]))
    entries = [{"kind": "inventory", "path": f"s3://{bucket}/listing/inventory.csv",
                "endpoint_url": endpoint},
               {"kind": "inventory", "path": f"s3://{bucket}/{folder}", "endpoint_url": endpoint}]
    fast = vectorized_only(entries, tmp_path)
    assert_same(fast, both(entries, tmp_path)[1])
    assert [(r["key"], r["size"], r["last_modified"], r["snapshot_date"])
            for r in fast.to_pylist()] == [
        ("checkpoints/run-a/s1/x.pt", 5, datetime(2026, 7, 1), None),
        ("checkpoints/run-a/s1/y,z.pt", 6, datetime(2026, 7, 1, 22), None),
        ("checkpoints/run-a/step 2/model v2.pt", 200, datetime(2026, 7, 15, 0, 30),
         date(2026, 7, 15))]


def daily_folder(folder: Path, days: int, bad: int | None = None) -> list[Path]:
    """A daily configuration's reports, July 1 onwards: report n lists 40 + n objects of run
    n (keys URL-encoded); report `bad`'s data file is not gzip. Its manifests, in date order."""
    manifests = []
    for n in range(days):
        day = f"2026-07-{n + 1:02d}"
        rows = [["ml-checkpoints", f"checkpoints/run-{n}/s{i}/m%2B{i}.pt", "", "true", "false",
                 str(n * 100 + i), f"{day}T00:00:0{i % 10}.000Z", "e", "STANDARD"]
                for i in range(40 + n)]
        (folder / "data").mkdir(parents=True, exist_ok=True)
        (folder / "data" / f"{day}.csv.gz").write_bytes(
            b"not gzip" if n == bad else csv_report(rows))
        (folder / f"{day}T01-00Z").mkdir()
        manifests.append(folder / f"{day}T01-00Z" / "manifest.json")
        manifests[-1].write_text(manifest(day, "CSV", [f"x/data/{day}.csv.gz"]))
    return manifests


def test_daily_reports_are_read_side_by_side_in_their_order(tmp_path):
    """A configuration folder of daily reports is read a report per thread: its objects come
    in the reports' order, as reading each report's manifest one after another gives them,
    and a bad report is named as when it is read alone."""
    folder = tmp_path / "daily"
    manifests = daily_folder(folder, 12)
    whole = read_listing(parse_config({"checkpoints": [
        {"kind": "inventory", "path": str(folder)}]}, tmp_path), JULY, LOG)
    one_by_one = pa.concat_tables(read_listing(parse_config({"checkpoints": [
        {"kind": "inventory", "path": str(m)}]}, tmp_path), JULY, LOG) for m in manifests)
    assert whole.to_pylist() == one_by_one.to_pylist()
    assert whole.num_rows == sum(40 + n for n in range(12))
    assert whole.column("snapshot_date").to_pylist() == sorted(
        whole.column("snapshot_date").to_pylist())
    assert whole.column("key").to_pylist()[0] == "checkpoints/run-0/s0/m+0.pt"

    broken = tmp_path / "broken"
    manifests = daily_folder(broken, 12, bad=7)
    errors = []
    for path in (broken, manifests[7]):
        with pytest.raises(SourceError) as raised:
            read_listing(parse_config({"checkpoints": [
                {"kind": "inventory", "path": str(path)}]}, tmp_path), JULY, LOG)
        errors.append(str(raised.value))
    assert errors[0] == errors[1] and "2026-07-08.csv.gz" in errors[0]


@PROPERTY
@given(st.lists(st.one_of(st.none(), st.text(alphabet="0123456789%+a é", max_size=25)),
                max_size=12), st.integers(0, 6), st.integers(0, 6), st.booleans())
def test_a_byte_search_answers_for_every_value(values, start, cut, large):
    """`value_bytes` holds every value's bytes (a slice's too, nulls or not), so that a byte
    it lacks is in no value; `all_digits` is the pattern it stands in for."""
    array = pa.array(values, pa.large_string() if large else pa.string())
    array = array.slice(min(start, len(array)), max(0, len(array) - start - cut))
    text = listing_arrow.value_bytes(array)
    for value in array.to_pylist():
        assert value is None or value.encode() in text
    for longest in (3, 18):
        assert listing_arrow.all_digits(array, longest) == listing_arrow.every(
            pa.compute.match_substring_regex(array, f"^[0-9]{{0,{longest}}}$"))


def test_a_record_of_another_cell_count_is_named_by_its_row(tmp_path, s3_server):
    """A CSV report's record of more or fewer cells than its manifest's fileSchema names
    read `…/data/p.csv.gz: unreadable: CSV parse error: Expected 4 columns, got 2: …`, the
    file alone (pyarrow fails a whole block): both readers name its row, found by a second
    read of the file (a data file has no header: its first record is row 1), local or on
    S3."""
    schema = "Bucket, Key, Size, LastModifiedDate"
    good = [["src", f"checkpoints/r/a{n}.pt", "5", "2026-07-01T00:00:00.000Z"] for n in (1, 2)]
    short = csv_report([*good, ["src", "checkpoints/r/b.pt"]])
    long = csv_report([good[0], [*good[1], "STANDARD"], *good])
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    for name, data, row, cells in (("short", short, 3, 2), ("long", long, 2, 5)):
        folder = tmp_path / name
        write_report(folder, {"p.csv.gz": data})
        (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
            manifest("2026-07-15", "CSV", ["x/data/p.csv.gz"], schema=schema))
        for path, entry in ((str(folder), {}), (f"s3://{bucket}/{name}",
                                                {"endpoint_url": endpoint})):
            if entry:
                for file in ("data/p.csv.gz", "2026-07-15T01-00Z/manifest.json"):
                    put(endpoint, bucket, f"{name}/{file}", (folder / file).read_bytes())
            fast, slow = both([{"kind": "inventory", "path": path, **entry}], tmp_path)
            assert fast == slow == (
                f"SourceError: checkpoints[0] inventory: {path}/data/p.csv.gz row {row}: "
                f"{cells} cells where the manifest's fileSchema has 4 (Bucket, Key, Size, "
                "LastModifiedDate)")
    # bytes that are no UTF-8: the row, and the column by its fileSchema name
    folder = tmp_path / "latin1"
    write_report(folder, {"p.csv.gz": gzip.compress(
        b'"src","k1","5","2026-07-01"\n"src","k\xe9","5","2026-07-01"\n')})
    (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
        manifest("2026-07-15", "CSV", ["x/data/p.csv.gz"], schema=schema))
    fast, slow = both([{"kind": "inventory", "path": str(folder)}], tmp_path)
    assert fast == slow == (
        f"SourceError: checkpoints[0] inventory: {folder}/data/p.csv.gz row 2: unreadable: "
        "In CSV column #1 (Key): CSV conversion error to string: invalid UTF8 data")


def test_a_file_schema_without_a_field_names_only_what_it_lacks(tmp_path):
    """A CSV `fileSchema` without Key read `fileSchema lacks Key: add Size and
    LastModifiedDate to the inventory's fields`, naming two fields it has and leaving the
    one it lacks to no advice: every S3 Inventory report holds Bucket and Key, so a schema
    without Key is no report's. One without Size names Size alone, as a Parquet data file
    without its size column does; both readers alike."""
    row = ["ml-checkpoints", "5", "2026-07-01T00:00:00.000Z"]
    cases = {
        "Bucket, Size, LastModifiedDate": "fileSchema lacks Key: not the schema of an S3 "
        "Inventory report (every report lists Bucket and Key)",
        "Bucket, Key, LastModifiedDate": "fileSchema lacks Size: add Size to the "
        "inventory's fields",
        "Bucket, LastModifiedDate": "fileSchema lacks Key and Size: not the schema of an S3 "
        "Inventory report (every report lists Bucket and Key)",
    }
    for n, (schema, problem) in enumerate(cases.items()):
        folder = tmp_path / f"csv{n}"
        write_report(folder, {"part0.csv.gz": csv_report([row])})
        (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
            manifest("2026-07-15", "CSV", ["x/data/part0.csv.gz"], schema=schema))
        fast, slow = both([{"kind": "inventory", "path": str(folder)}], tmp_path)
        assert fast == slow == (f"SourceError: checkpoints[0] inventory: {folder}/"
                                f"2026-07-15T01-00Z/manifest.json: {problem}")
    columnar = tmp_path / "parquet"
    write_report(columnar, {"part0.parquet": parquet_report({
        "bucket": pa.array(["ml-checkpoints"]), "key": pa.array(["k"]),
        "last_modified_date": pa.array([datetime(2026, 7, 1)], pa.timestamp("ms", tz="UTC"))})},
        file_format="Parquet")
    fast, slow = both([{"kind": "inventory", "path": str(columnar)}], tmp_path)
    assert fast == slow == (f"SourceError: checkpoints[0] inventory: {columnar}/data/"
                            "part0.parquet: no size column: add Size to the inventory's fields")
    keyless = tmp_path / "keyless"
    write_report(keyless, {"part0.parquet": parquet_report({
        "bucket": pa.array(["ml-checkpoints"]), "size": pa.array([5], pa.int64()),
        "last_modified_date": pa.array([datetime(2026, 7, 1)], pa.timestamp("ms", tz="UTC"))})},
        file_format="Parquet")
    fast, slow = both([{"kind": "inventory", "path": str(keyless)}], tmp_path)
    assert fast == slow == (f"SourceError: checkpoints[0] inventory: {keyless}/data/"
                            "part0.parquet: no key column: not an S3 Inventory data file "
                            "(every report lists bucket and key)")
