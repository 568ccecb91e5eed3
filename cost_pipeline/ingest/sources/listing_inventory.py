"""An `inventory` checkpoint source → Arrow batches of the month's listed objects: a plain CSV
(`bucket,key,size,last_modified`), or real S3 Inventory reports, local or on S3 (pyarrow's
filesystems).

An S3 Inventory report is `…/<source-bucket>/<config-id>/YYYY-MM-DDTHH-MMZ/manifest.json`
(`sourceBucket`, `creationTimestamp` in ms, `fileFormat`, `fileSchema`, `files[].key`) with
its data files under `…/<config-id>/data/`: gzipped headerless CSV whose columns are the
`fileSchema` names and whose keys are URL-encoded, or Parquet or ORC (snake_case columns).
Each report is one snapshot dated by its `creationTimestamp` (else its folder's date), so
daily inventories give daily snapshots; a report listing no object is still a snapshot of
its bucket (the bucket was empty that day). `path` is one manifest.json, or the
configuration folder holding the dated reports: only the reports dated in (or a day around)
the month are opened. Delete markers and non-current versions are left out: a checkpoint's
storage is its current object. A manifest names neither the configuration's prefix filter nor
its cadence: where several configurations report one bucket, the keys each covers are read
from those it lists (macros.sql `configuration_scopes`).

A configuration folder's reports are read side by side, a report per thread, their objects
given in the reports' order. Each file is read vectorized, or row by row when the vectorized
reader is in doubt (`checkpoints.month_batches`).
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import SourceError, csv_fault, s3
from cost_pipeline.ingest.sources.listing_arrow import (
    CSV_BLOCK,
    PY_WHITESPACE,
    NotClean,
    all_digits,
    arrow_times,
    inventory_csv_batches,
    listing_batch,
    month_batches,
    some,
    value_bytes,
)
from cost_pipeline.ingest.sources.listing_rows import read_inventory_csv
from cost_pipeline.ingest.sources.runs_file import parse_time
from cost_pipeline.months import month_bounds

DATED_FOLDER = re.compile(r"^(\d{4}-\d{2}-\d{2})T\d{2}-\d{2}Z$")
PARQUET_COLUMNS = {"bucket": "bucket", "key": "key", "size": "size",
                   "last_modified": "last_modified_date", "is_latest": "is_latest",
                   "is_delete_marker": "is_delete_marker"}
# the types AWS writes: others convert otherwise row by row (a float size truncates)
PARQUET_TYPES = {
    "bucket": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "key": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "size": pa.types.is_integer, "is_latest": pa.types.is_boolean,
    "is_delete_marker": pa.types.is_boolean,
    "last_modified": lambda t: pa.types.is_timestamp(t) and t.unit in ("s", "ms", "us"),
}
# epoch microseconds a day inside `datetime`'s range
DATETIME_MICROS = (-62135510400_000_000, 253402128000_000_000)
CSV_COLUMNS = {"bucket": "Bucket", "key": "Key", "size": "Size",
               "last_modified": "LastModifiedDate", "is_latest": "IsLatest",
               "is_delete_marker": "IsDeleteMarker"}
# the fields a report must hold: without LastModifiedDate no object has a time, and none
# was ever old enough for `retention_violations` (the report was read, the table empty).
# Size and LastModifiedDate are optional fields of an inventory configuration; Bucket and Key
# are in every report
REQUIRED_FIELDS = ("key", "size", "last_modified")


def read_inventory(path: str, source: str, month: date, bucket: str | None = None,
                   endpoint_url: str | None = None, region: str | None = None, *,
                   vectorized: bool = True,
                   reports: list[tuple[str, date]] | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """The objects of an `inventory` entry in `month`'s snapshot(s) (LISTING_SCHEMA);
    `vectorized=False` reads every file row by row. Each S3 Inventory report of the month
    adds (its bucket, snapshot date) to `reports`, whether it lists objects or none: the
    manifest's `sourceBucket`, else `bucket`, else the bucket(s) its objects name (one
    listing none must name its bucket)."""
    if s3.is_s3(path):
        fs: pafs.FileSystem = s3.filesystem(endpoint_url, region)
        base, show = s3.S3Uri.parse(path).path, s3.uri_of
    else:
        fs, base, show = pafs.LocalFileSystem(), path, str
    inventory = _Inventory(fs, show, source, month, vectorized, reports, bucket)
    try:
        kind = inventory.info(base).type
        if kind == pafs.FileType.NotFound:
            raise SourceError(source, show(base), "inventory not found")
        if kind == pafs.FileType.File and not base.endswith("manifest.json"):
            yield from inventory.plain_csv(base, bucket)
            return
        manifests = inventory.manifests(base, month, kind == pafs.FileType.File)
        if len(manifests) <= 1:
            for manifest in manifests:
                yield from inventory.report(manifest, month)
            return
        # a daily configuration's reports are read side by side (Arrow's readers and
        # kernels leave the GIL), and their objects given in the reports' order
        pool = ThreadPoolExecutor(max_workers=min(len(manifests), os.cpu_count() or 1, 4),
                                  thread_name_prefix="inventory-report")
        try:
            for objects in pool.map(lambda m: list(inventory.report(m, month)), manifests):
                yield from objects
        finally:
            pool.shutdown(cancel_futures=True)
    finally:
        inventory.close()


class _Inventory:
    def __init__(self, fs: pafs.FileSystem, show, source: str, month: date,
                 vectorized: bool = True,
                 reports: list[tuple[str, date]] | None = None,
                 bucket: str | None = None):
        self.fs, self.show, self.source, self.vectorized = fs, show, source, vectorized
        # the entry's `bucket:`, for a manifest naming no sourceBucket
        self.bucket = bucket
        # the reports read, (source bucket, snapshot date): appended from the report threads
        self.reports = [] if reports is None else reports
        self.month, self.month_end = month, month_bounds(month)[1]
        self._duckdb: duckdb.DuckDBPyConnection | None = None
        self._duckdb_lock = threading.Lock()  # reports are read in threads

    def close(self) -> None:
        if self._duckdb is not None:
            self._duckdb.close()
            self._duckdb = None

    def info(self, path: str) -> pafs.FileInfo:
        try:
            return self.fs.get_file_info(path)
        except OSError as exc:
            raise self.read_error(path, exc) from None

    def read_error(self, path: str, exc: OSError, listed_by: str | None = None
                   ) -> SourceError:
        """An OSError reading `path`. A gzip data file cut short or not gzip is the file's
        own fault, local or on S3 (no transfer failed: every read gets the same bytes), and
        so is a file missing (`listed_by` the manifest that names it). Else on S3 it is the
        transfer's, after S3's own retries; a local file's is the file's own, read once:
        unreadable …"""
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if _broken_gzip(path, exc):
            return SourceError(self.source, self.show(path), "broken gzip: " + (
                "not a gzip file" if "incorrect header check" in reason  # zlib's words
                else "truncated (its compressed stream ends early)"
                if "truncated compressed stream" in reason.lower() else reason))
        if isinstance(exc, FileNotFoundError):  # S3 answered too: the object is not there
            return SourceError(self.source, self.show(path), "not found" + (
                f" (listed by {self.show(listed_by)})" if listed_by else ""))
        if not isinstance(self.fs, pafs.LocalFileSystem):
            return s3.source_error(self.source, self.show(path), exc)
        if isinstance(exc, PermissionError):
            return SourceError(self.source, self.show(path), "unreadable (permission denied)")
        return SourceError(self.source, self.show(path), f"unreadable ({reason})")

    def _batches(self, fast, rows) -> Iterator[pa.RecordBatch]:
        return month_batches(fast if self.vectorized else None, rows, self.month,
                             self.month_end)

    def plain_csv(self, path: str, bucket: str | None) -> Iterator[pa.RecordBatch]:
        return self._batches(partial(inventory_csv_batches, self.fs, path, bucket),
                             partial(self._plain_csv_rows, path, bucket))

    def _plain_csv_rows(self, path: str, bucket: str | None) -> Iterator[dict[str, Any]]:
        if isinstance(self.fs, pafs.LocalFileSystem):
            yield from read_inventory_csv(Path(path), self.source, bucket)
            return
        try:
            raw = self.fs.open_input_stream(path)
        except OSError as exc:
            raise self.read_error(path, exc) from None
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as handle:
            yield from read_inventory_csv(self.show(path), self.source, bucket, handle)

    def manifests(self, base: str, month: date, single: bool) -> list[str]:
        """The manifest(s) to read: the one named, or those of the dated report folders
        near `month` (folders of other months are not opened)."""
        if single:
            return [base]
        if self.info(f"{base}/manifest.json").is_file:
            return [f"{base}/manifest.json"]
        try:
            folders = self.fs.get_file_info(pafs.FileSelector(base, recursive=False))
        except OSError as exc:
            raise self.read_error(base, exc) from None
        start = month - timedelta(days=1)
        end = (month.replace(day=28) + timedelta(days=5)).replace(day=1) + timedelta(days=1)
        wanted = []
        for folder in folders:
            dated = DATED_FOLDER.match(folder.base_name)
            if dated and start <= date.fromisoformat(dated.group(1)) <= end:
                wanted.append(f"{folder.path}/manifest.json")
        if not wanted and not any(DATED_FOLDER.match(f.base_name) for f in folders):
            raise SourceError(self.source, self.show(base), "no S3 Inventory report here: "
                              "expected YYYY-MM-DDTHH-MMZ/manifest.json folders, a "
                              "manifest.json or a CSV")
        return sorted(wanted)

    def report(self, manifest: str, month: date) -> Iterator[pa.RecordBatch]:
        where = self.show(manifest)
        try:
            with self.fs.open_input_stream(manifest) as stream:
                doc = json.loads(stream.read().decode("utf-8"))
        except FileNotFoundError:
            return  # a report still being written has no manifest yet
        except OSError as exc:
            raise self.read_error(manifest, exc) from None
        except ValueError as exc:
            raise SourceError(self.source, where, f"unreadable manifest: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
            raise SourceError(self.source, where, "not an S3 Inventory manifest (no files list)")
        snapshot = _snapshot_date(doc, manifest, self.source, where)
        if (snapshot.year, snapshot.month) != (month.year, month.month):
            return
        file_format = str(doc.get("fileFormat", "")).upper()
        if file_format not in ("CSV", "PARQUET", "ORC"):
            raise SourceError(self.source, where, f"fileFormat {doc.get('fileFormat')!r} is not "
                              "an S3 Inventory format: CSV, Parquet or ORC")
        if file_format == "CSV":
            missing = [f for f in REQUIRED_FIELDS if CSV_COLUMNS[f] not in _csv_names(doc)]
            if missing:
                raise SourceError(self.source, where, "fileSchema lacks " + " and ".join(
                    CSV_COLUMNS[f] for f in missing) + ": " + _advice(
                    missing, "not the schema of an S3 Inventory report (every report lists "
                    "Bucket and Key)"))
        bucket = doc.get("sourceBucket")
        bucket = bucket if isinstance(bucket, str) and bucket else self.bucket
        if bucket is not None:
            self.reports.append((bucket, snapshot))
        config_folder = manifest.rsplit("/", 2)[0]
        listed = 0
        named: set[str] = set()  # without a bucket, those the report's objects name
        for entry in doc["files"]:
            key = entry.get("key", "") if isinstance(entry, dict) else str(entry)
            data = _data_path(config_folder, key)
            if file_format == "CSV":
                fast = partial(self._csv_batches, data, doc, bucket, snapshot)
                rows = partial(self._csv_rows, data, doc, manifest)
            else:
                fast = partial(self._columnar_batches, data, file_format, bucket, snapshot)
                rows = partial(self._columnar_rows, data, file_format, manifest)
            for batch in self._batches(fast, partial(self._objects, rows, data, bucket,
                                                     snapshot)):
                listed += batch.num_rows
                if bucket is None:
                    named.update(pc.unique(batch.column("bucket")).to_pylist())
                yield batch
        if bucket is None:
            if not listed:
                # its objects would name their bucket; an empty snapshot has only the
                # manifest's
                raise SourceError(self.source, where, f"the report of {snapshot} lists no "
                                  "object and names no sourceBucket: set `bucket:` on this "
                                  "checkpoints entry to the bucket it inventories")
            # the snapshot of the bucket(s) its objects name (an inventory lists one)
            self.reports.extend((name, snapshot) for name in sorted(named - {None}))

    def _objects(self, rows, data: str, bucket: str | None,
                 snapshot: date) -> Iterator[dict[str, Any]]:
        for line, row in rows():
            obj = _object(row, bucket, snapshot, self.source, f"{self.show(data)} row {line}")
            if obj is not None:
                yield obj

    def _data_stream(self, path: str) -> pa.NativeFile:
        """A data file's bytes, decompressed."""
        return self.fs.open_input_stream(path, compression="gzip"
                                         if path.endswith(".gz") else None)

    @contextmanager
    def _open_csv(self, path: str, doc: dict) -> Iterator[tuple[dict[str, int], Any]]:
        """The report's columns wanted (field → index), and a CSV reader of its text."""
        names = _csv_names(doc)
        wanted = {field: names.index(column) for field, column in CSV_COLUMNS.items()
                  if column in names}
        columns = [f"c{i}" for i in range(len(names))]
        with self._data_stream(path) as raw:
            try:
                reader = pacsv.open_csv(
                    raw, read_options=pacsv.ReadOptions(column_names=columns,
                                                        block_size=CSV_BLOCK),
                    convert_options=pacsv.ConvertOptions(
                        column_types=dict.fromkeys(columns, "string"),
                        strings_can_be_null=False))
            except pa.ArrowInvalid as exc:
                if not str(exc).startswith("Empty CSV file"):
                    raise
                reader = iter(())  # a data file of no row: the report lists no object
            yield wanted, reader

    def _csv_rows(self, path: str, doc: dict, manifest: str) -> Iterator[tuple[int, dict]]:
        # (the manifest's fileSchema holds REQUIRED_FIELDS: `report` checked it)
        try:
            with self._open_csv(path, doc) as (wanted, reader):
                line = 0
                for batch in reader:
                    values = {f: batch.column(i).to_pylist() for f, i in wanted.items()}
                    for n in range(batch.num_rows):
                        line += 1
                        row = {f: values[f][n] for f in wanted}
                        row["key"] = unquote_plus(row["key"])
                        yield line, row
        except OSError as exc:
            raise self.read_error(path, exc, manifest) from None
        except Exception as exc:  # pyarrow's CSV errors: wrong column count, bad gzip …
            raise self._csv_error(path, doc, exc) from None

    def _csv_error(self, path: str, doc: dict, exc: Exception) -> SourceError:
        """pyarrow's error reading the CSV data file `path`, at the record it is about where a
        second read of the file finds it (`csv_fault`: pyarrow fails a whole block). A data
        file has no header: its first record is row 1, as `_objects` numbers rows."""
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        shown, names = self.show(path), _csv_names(doc)
        where = csv_fault.where(shown, reason, shown, partial(self._data_stream, path), ",",
                                newlines_in_values=False, header=False)
        count = csv_fault.CELL_COUNT.search(reason)
        if count and where != shown:
            return SourceError(self.source, where, f"{count.group(2)} cells where the "
                               f"manifest's fileSchema has {count.group(1)} "
                               f"({', '.join(names)})")
        # pyarrow numbers the columns from 0: name the column
        reason = csv_fault.CSV_COLUMN.sub(lambda m: m.group(0) + (
            f" ({names[int(m.group(1))]})" if int(m.group(1)) < len(names) else ""), reason)
        return SourceError(self.source, where, f"unreadable: {reason}")

    def _csv_batches(self, path: str, doc: dict, bucket: str | None,
                     snapshot: date) -> Iterator[pa.RecordBatch]:
        """`_csv_rows` → `_object`, vectorized."""
        try:
            with self._open_csv(path, doc) as (wanted, reader):
                for batch in reader:
                    text = {f: batch.column(i) for f, i in wanted.items()}
                    text = _current(text, _csv_flag(text.get("is_delete_marker")),
                                    _csv_flag(text.get("is_latest")))
                    size = text["size"]
                    if not all_digits(size, 18):
                        raise NotClean
                    yield listing_batch(
                        text.get("bucket"), bucket, self._url_decode(text["key"]),
                        pc.cast(pc.if_else(pc.equal(size, ""), "0", size), pa.int64()),
                        arrow_times(pc.utf8_trim(text["last_modified"],
                                                 characters=PY_WHITESPACE)),
                        snapshot)
        except OSError as exc:
            if _broken_gzip(path, exc):  # the row reader would download it again, to fail
                raise self.read_error(path, exc) from None
            raise NotClean from None
        except pa.ArrowException:
            raise NotClean from None

    def _url_decode(self, keys: pa.Array) -> pa.Array:
        """`unquote_plus` of every key: DuckDB's `url_decode` leaves malformed escapes as they
        are, as `unquote` does, and fails where the bytes are not UTF-8 (where `unquote`
        puts U+FFFD): those keys are decoded by `unquote` itself."""
        text = value_bytes(keys)
        if b"+" in text:
            keys = pc.replace_substring(keys, "+", " ")
        if b"%" not in text:
            return keys
        escaped = pc.match_substring(keys, "%")
        if not some(escaped):
            return keys
        encoded = keys.filter(escaped)
        with self._duckdb_lock:
            if self._duckdb is None:
                self._duckdb = duckdb.connect(config={"memory_limit": "256MB"})
                self._duckdb.execute("SET TimeZone = 'UTC'")
            try:
                self._duckdb.register("encoded_keys", pa.table({"key": encoded}))
                decoded = self._duckdb.sql("SELECT url_decode(key) FROM encoded_keys")
                decoded = decoded.to_arrow_table().column(0).combine_chunks().cast(pa.string())
            except duckdb.Error:
                decoded = pa.array([unquote(k) for k in encoded.to_pylist()], pa.string())
            finally:
                self._duckdb.unregister("encoded_keys")
        return pc.replace_with_mask(keys, escaped, decoded)

    @contextmanager
    def _open_columnar(self, path: str, file_format: str
                       ) -> Iterator[tuple[dict[str, str], Iterator[pa.RecordBatch]]]:
        """A Parquet or ORC data file's columns wanted (field → column) and its batches of
        them; ORC's nanosecond times come as microseconds, as Parquet's do."""
        with self.fs.open_input_file(path) as raw:
            if file_format == "PARQUET":
                parquet = pq.ParquetFile(raw)
                names = set(parquet.schema_arrow.names)
                wanted = {f: c for f, c in PARQUET_COLUMNS.items() if c in names}
                yield wanted, parquet.iter_batches(columns=list(wanted.values()))
                return
            try:  # (imported here: not every platform's pyarrow is built with ORC)
                import pyarrow.orc as paorc
            except ImportError:
                raise SourceError(self.source, self.show(path), "this pyarrow cannot read "
                                  "ORC: configure the S3 Inventory report as CSV or Parquet"
                                  ) from None
            orc = paorc.ORCFile(raw)
            names = set(orc.schema.names)
            wanted = {f: c for f, c in PARQUET_COLUMNS.items() if c in names}
            yield wanted, (_micros(orc.read_stripe(i, columns=list(wanted.values())))
                           for i in range(orc.nstripes))

    def _columnar_rows(self, path: str, file_format: str, manifest: str
                       ) -> Iterator[tuple[int, dict]]:
        try:
            with self._open_columnar(path, file_format) as (wanted, batches):
                missing = [f for f in REQUIRED_FIELDS if f not in wanted]
                if missing:
                    raise SourceError(self.source, self.show(path), "no " + " or ".join(
                        PARQUET_COLUMNS[f] for f in missing) + " column: " + _advice(
                        missing, "not an S3 Inventory data file (every report lists bucket "
                        "and key)"))
                line = 0
                for batch in batches:
                    values = {f: batch.column(c).to_pylist() for f, c in wanted.items()}
                    for n in range(batch.num_rows):
                        line += 1
                        yield line, {f: values[f][n] for f in wanted}
        except OSError as exc:
            raise self.read_error(path, exc, manifest) from None
        except pa.ArrowException as exc:  # not a Parquet or ORC file, a broken one
            raise SourceError(self.source, self.show(path),
                              f"unreadable: {str(exc).splitlines()[0]}") from None

    def _columnar_batches(self, path: str, file_format: str, bucket: str | None,
                          snapshot: date) -> Iterator[pa.RecordBatch]:
        """`_columnar_rows` → `_object`, vectorized, for the column types AWS writes."""
        try:
            with self._open_columnar(path, file_format) as (wanted, batches):
                if not all(f in wanted for f in REQUIRED_FIELDS):
                    raise NotClean  # the row reader names the columns missing
                for batch in batches:
                    yield _parquet_objects({f: batch.column(c) for f, c in wanted.items()},
                                           bucket, snapshot)
        except (pa.ArrowException, OSError):
            raise NotClean from None


def _advice(missing: list[str], not_a_report: str) -> str:
    """What a report lacking the REQUIRED_FIELDS `missing` is told: without Key it is no S3
    Inventory report's (`not_a_report`); else the optional fields its configuration must add,
    those it lacks only."""
    if "key" in missing:
        return not_a_report
    return f"add {' and '.join(CSV_COLUMNS[f] for f in missing)} to the inventory's fields"


def _broken_gzip(path: str, exc: OSError) -> bool:
    """Whether reading the gzip data file `path` failed on its bytes (pyarrow's zlib
    decoder: cut short, not gzip, corrupt), not on their transfer."""
    reason = str(exc).lower()
    return path.endswith(".gz") and ("truncated compressed stream" in reason
                                     or "zlib inflate failed" in reason)


def _csv_names(doc: dict) -> list[str]:
    """A CSV report's column names, from its manifest's `fileSchema`."""
    return [n.strip() for n in str(doc.get("fileSchema", "")).split(",")]


def _micros(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with its nanosecond timestamps as microseconds (ORC reads times in ns)."""
    arrays = [pc.cast(column, pa.timestamp("us", column.type.tz), safe=False)
              if pa.types.is_timestamp(column.type) and column.type.unit == "ns" else column
              for column in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _data_path(config_folder: str, key: str) -> str:
    """A data file's key (in the destination bucket) mapped onto the folder read: AWS writes
    them under `<config-id>/data/`, next to the dated report folders."""
    at = key.rfind("data/")
    return f"{config_folder}/{key[at:] if at >= 0 else key.rsplit('/', 1)[-1]}"


def _snapshot_date(doc: dict, manifest: str, source: str, where: str) -> date:
    stamp = doc.get("creationTimestamp")
    if stamp not in (None, ""):
        try:
            return datetime.fromtimestamp(int(stamp) / 1000, UTC).date()
        except (TypeError, ValueError, OverflowError):
            raise SourceError(source, where, f"creationTimestamp {stamp!r} is not epoch "
                              "milliseconds") from None
    dated = DATED_FOLDER.match(manifest.rsplit("/", 2)[-2])
    if not dated:
        raise SourceError(source, where, "no creationTimestamp and no dated folder: the "
                          "report's date is unknown")
    return date.fromisoformat(dated.group(1))


def _truthy(value: Any) -> bool | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


def _object(row: dict, bucket: str | None, snapshot: date, source: str,
            where: str) -> dict[str, Any] | None:
    if _truthy(row.get("is_delete_marker")) or _truthy(row.get("is_latest")) is False:
        return None
    size = row.get("size")
    try:
        size = int(size) if size not in (None, "") else 0
    except ValueError:
        raise SourceError(source, where, f"Size: {size!r} is not a whole number") from None
    if not 0 <= size < 2**63:
        raise SourceError(source, where, f"Size: {size} is not a byte count (0 to 2^63 - 1)")
    try:
        modified = parse_time(row.get("last_modified"))
    except (TypeError, ValueError, OverflowError):
        raise SourceError(source, where, f"LastModifiedDate: {row.get('last_modified')!r} "
                          "is not a timestamp") from None
    if modified is None:
        raise SourceError(source, where, "LastModifiedDate: empty: an object needs its time")
    name = row.get("bucket") or bucket
    if not name or not row.get("key"):
        raise SourceError(source, where, "bucket or key empty")
    return {"bucket": name, "key": row["key"], "size": size, "last_modified": modified,
            "snapshot_date": snapshot}


def _csv_flag(values: pa.Array | None) -> pa.Array | None:
    """`_truthy` of CSV text: null where blank, else whether it says true."""
    if values is None:
        return None
    said = pc.equal(pc.ascii_lower(pc.utf8_trim(values, characters=PY_WHITESPACE)), "true")
    return pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.bool_()), said)


def _current(columns: dict[str, pa.Array], delete_marker: pa.Array | None,
             latest: pa.Array | None) -> dict[str, pa.Array]:
    """The rows `_object` keeps: no delete marker, no version known to be non-current."""
    dropped = [pc.fill_null(delete_marker, False)] if delete_marker is not None else []
    if latest is not None:
        dropped.append(pc.invert(pc.fill_null(latest, True)))
    if not dropped:
        return columns
    kept = pc.invert(dropped[0] if len(dropped) == 1 else pc.or_(*dropped))
    return {f: v.filter(kept) for f, v in columns.items()}


def _parquet_objects(columns: dict[str, pa.Array], bucket: str | None,
                     snapshot: date) -> pa.RecordBatch:
    if not all(PARQUET_TYPES[f](v.type) for f, v in columns.items()):
        raise NotClean
    columns = _current(columns, columns.get("is_delete_marker"), columns.get("is_latest"))
    stamps = columns["last_modified"]
    # the instant, as the row reader's aware datetimes turned to naive UTC have it
    stamps = pc.cast(stamps.view(pa.timestamp(stamps.type.unit)), pa.timestamp("us"))
    low, high = pc.min_max(stamps.view(pa.int64())).values()
    if low.is_valid and not (DATETIME_MICROS[0] <= low.as_py()
                             and high.as_py() <= DATETIME_MICROS[1]):
        raise NotClean  # near or beyond what `datetime` holds
    names = columns.get("bucket")
    return listing_batch(None if names is None else names.cast(pa.string()), bucket,
                         columns["key"].cast(pa.string()),
                         pc.fill_null(pc.cast(columns["size"], pa.int64()), 0), stamps,
                         snapshot)
