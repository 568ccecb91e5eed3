"""An `inventory` checkpoint source → listing rows: a plain CSV (`bucket,key,size,
last_modified`), or real S3 Inventory reports, local or on S3 (pyarrow's filesystems).

An S3 Inventory report is `…/<source-bucket>/<config-id>/YYYY-MM-DDTHH-MMZ/manifest.json`
(`sourceBucket`, `creationTimestamp` in ms, `fileFormat`, `fileSchema`, `files[].key`) with
its data files under `…/<config-id>/data/`: gzipped headerless CSV whose columns are the
`fileSchema` names and whose keys are URL-encoded, or Parquet (snake_case columns). ORC is
refused. Each report is one snapshot dated by its `creationTimestamp` (else its folder's
date), so daily inventories give daily snapshots. `path` is one manifest.json, or the
configuration folder holding the dated reports: only the reports dated in (or a day around)
the month are opened. Delete markers and non-current versions are left out: a checkpoint's
storage is its current object.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from . import SourceError, s3
from .checkpoints import read_inventory_csv
from .runs_file import parse_time

DATED_FOLDER = re.compile(r"^(\d{4}-\d{2}-\d{2})T\d{2}-\d{2}Z$")
PARQUET_COLUMNS = {"bucket": "bucket", "key": "key", "size": "size",
                   "last_modified": "last_modified_date", "is_latest": "is_latest",
                   "is_delete_marker": "is_delete_marker"}
CSV_COLUMNS = {"bucket": "Bucket", "key": "Key", "size": "Size",
               "last_modified": "LastModifiedDate", "is_latest": "IsLatest",
               "is_delete_marker": "IsDeleteMarker"}


def read_inventory(path: str, source: str, month: date, bucket: str | None = None,
                   endpoint_url: str | None = None,
                   region: str | None = None) -> Iterator[dict[str, Any]]:
    """The listing rows of an `inventory` entry around `month` (the caller keeps the month)."""
    if s3.is_s3(path):
        fs: pafs.FileSystem = s3.filesystem(endpoint_url, region)
        base, show = s3.S3Uri.parse(path).path, s3.uri_of
    else:
        fs, base, show = pafs.LocalFileSystem(), path, str
    inventory = _Inventory(fs, show, source)
    kind = inventory.info(base).type
    if kind == pafs.FileType.NotFound:
        raise SourceError(source, show(base), "inventory not found")
    if kind == pafs.FileType.File and not base.endswith("manifest.json"):
        yield from inventory.plain_csv(base, bucket)
        return
    for manifest in inventory.manifests(base, month, kind == pafs.FileType.File):
        yield from inventory.report(manifest, month)


class _Inventory:
    def __init__(self, fs: pafs.FileSystem, show, source: str):
        self.fs, self.show, self.source = fs, show, source

    def info(self, path: str) -> pafs.FileInfo:
        try:
            return self.fs.get_file_info(path)
        except OSError as exc:
            raise s3.source_error(self.source, self.show(path), exc) from None

    def plain_csv(self, path: str, bucket: str | None) -> Iterator[dict[str, Any]]:
        if isinstance(self.fs, pafs.LocalFileSystem):
            yield from read_inventory_csv(Path(path), self.source, bucket)
            return
        try:
            raw = self.fs.open_input_stream(path)
        except OSError as exc:
            raise s3.source_error(self.source, self.show(path), exc) from None
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
            raise s3.source_error(self.source, self.show(base), exc) from None
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

    def report(self, manifest: str, month: date) -> Iterator[dict[str, Any]]:
        where = self.show(manifest)
        try:
            with self.fs.open_input_stream(manifest) as stream:
                doc = json.loads(stream.read().decode("utf-8"))
        except FileNotFoundError:
            return  # a report still being written has no manifest yet
        except OSError as exc:
            raise s3.source_error(self.source, where, exc) from None
        except ValueError as exc:
            raise SourceError(self.source, where, f"unreadable manifest: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
            raise SourceError(self.source, where, "not an S3 Inventory manifest (no files list)")
        snapshot = _snapshot_date(doc, manifest, self.source, where)
        if (snapshot.year, snapshot.month) != (month.year, month.month):
            return
        file_format = str(doc.get("fileFormat", "")).upper()
        if file_format not in ("CSV", "PARQUET"):
            raise SourceError(self.source, where, f"fileFormat {doc.get('fileFormat')!r} is not "
                              "read: configure the S3 Inventory report as CSV or Parquet")
        bucket = doc.get("sourceBucket")
        config_folder = manifest.rsplit("/", 2)[0]
        for entry in doc["files"]:
            key = entry.get("key", "") if isinstance(entry, dict) else str(entry)
            data = _data_path(config_folder, key)
            rows = (self._csv_rows(data, doc) if file_format == "CSV"
                    else self._parquet_rows(data))
            for line, row in rows:
                obj = _object(row, bucket, snapshot, self.source, f"{self.show(data)} row {line}")
                if obj is not None:
                    yield obj

    def _csv_rows(self, path: str, doc: dict) -> Iterator[tuple[int, dict]]:
        names = [n.strip() for n in str(doc.get("fileSchema", "")).split(",")]
        wanted = {field: names.index(column) for field, column in CSV_COLUMNS.items()
                  if column in names}
        if "key" not in wanted or "size" not in wanted:
            raise SourceError(self.source, self.show(path), "fileSchema lacks Key or Size: "
                              "add Size and LastModifiedDate to the inventory's fields")
        columns = [f"c{i}" for i in range(len(names))]
        try:
            with self.fs.open_input_stream(path, compression="gzip"
                                           if path.endswith(".gz") else None) as raw:
                reader = pacsv.open_csv(raw, read_options=pacsv.ReadOptions(
                    column_names=columns), convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(columns, "string"), strings_can_be_null=False))
                line = 0
                for batch in reader:
                    values = {f: batch.column(i).to_pylist() for f, i in wanted.items()}
                    for n in range(batch.num_rows):
                        line += 1
                        row = {f: values[f][n] for f in wanted}
                        row["key"] = unquote_plus(row["key"])
                        yield line, row
        except OSError as exc:
            raise s3.source_error(self.source, self.show(path), exc) from None
        except Exception as exc:  # pyarrow's CSV errors: wrong column count, bad gzip …
            raise SourceError(self.source, self.show(path),
                              f"unreadable: {str(exc).splitlines()[0]}") from None

    def _parquet_rows(self, path: str) -> Iterator[tuple[int, dict]]:
        try:
            with self.fs.open_input_file(path) as raw:
                parquet = pq.ParquetFile(raw)
                names = set(parquet.schema_arrow.names)
                wanted = {f: c for f, c in PARQUET_COLUMNS.items() if c in names}
                if "key" not in wanted or "size" not in wanted:
                    raise SourceError(self.source, self.show(path), "no key or size column")
                line = 0
                for batch in parquet.iter_batches(columns=list(wanted.values())):
                    values = {f: batch.column(c).to_pylist() for f, c in wanted.items()}
                    for n in range(batch.num_rows):
                        line += 1
                        yield line, {f: values[f][n] for f in wanted}
        except OSError as exc:
            raise s3.source_error(self.source, self.show(path), exc) from None


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
    try:
        modified = parse_time(row.get("last_modified"))
    except (TypeError, ValueError, OverflowError):
        raise SourceError(source, where, f"LastModifiedDate: {row.get('last_modified')!r} "
                          "is not a timestamp") from None
    name = row.get("bucket") or bucket
    if not name or not row.get("key"):
        raise SourceError(source, where, "bucket or key empty")
    return {"bucket": name, "key": row["key"], "size": size, "last_modified": modified,
            "snapshot_date": snapshot}
