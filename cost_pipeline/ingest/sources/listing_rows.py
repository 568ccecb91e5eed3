"""Checkpoint listings → `checkpoint_inventory` rows (bucket, key, size, last_modified,
snapshot_date). A plain CSV (`bucket,key,size,last_modified[,snapshot_date]`) or a local
folder standing in for a bucket is one listing of the bucket as it is now; each month keeps
the objects that existed before its end.

This is the row-by-row reader: it words every error. `listing_arrow` reads the same files
vectorized and falls back to it."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TextIO

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.local_files import walk_files
from cost_pipeline.ingest.sources.runs_file import parse_time, repeated_column

OBJECT_FIELDS = ("bucket", "key", "size", "last_modified", "snapshot_date")
def read_inventory_csv(path: Path | str, source: str, bucket: str | None,
                       handle: TextIO | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a plain listing CSV at `path` (or read from `handle`, `path` naming it)."""
    if handle is None:
        try:
            handle = Path(path).open(newline="", encoding="utf-8-sig")
        except OSError as exc:
            raise SourceError(source, str(path), exc.strerror or str(exc)) from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = [h.strip().lower() for h in next(reader, [])]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise SourceError(source, str(path), f"unreadable: {exc}") from None
        index = header_index(header, source, str(path), bucket)
        try:
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                if any(cell.strip() for cell in row[len(header):]):
                    # read by its first cells, a key cut at its comma was another object
                    raise SourceError(source, f"{path} row {line}",
                                      f"{len(row)} cells where the header has {len(header)}: "
                                      "a key holding a comma must be quoted")
                yield _object(row, index, bucket, source, f"{path} row {line}")
        except (UnicodeDecodeError, csv.Error) as exc:
            raise SourceError(source, str(path), f"unreadable: {exc}") from None


def header_index(header: list[str], source: str, path: str, bucket: str | None) -> dict[str, int]:
    if "key" not in header:
        raise SourceError(source, path, "expected a header with bucket,key,size,"
                          f"last_modified; found {','.join(header) or 'nothing'}")
    for needed in ("size", "last_modified"):
        if needed not in header:
            raise SourceError(source, path, f"missing column {needed}")
    if "bucket" not in header and not bucket:
        raise SourceError(source, path, "no bucket column: set `bucket:` in the config")
    repeated = repeated_column(header, OBJECT_FIELDS)
    if repeated:
        raise SourceError(source, path, repeated)
    return {name: header.index(name) for name in OBJECT_FIELDS if name in header}


def _object(row: list[str], index: dict[str, int], bucket: str | None, source: str,
            where: str) -> dict[str, Any]:
    def field(name: str) -> str:
        i = index.get(name)
        return row[i].strip() if i is not None and i < len(row) else ""

    try:
        number = float(field("size") or 0)
    except ValueError:
        number = math.nan
    if not number.is_integer():
        raise SourceError(source, where, f"size: {field('size')!r} is not a whole number "
                          "of bytes")
    size = int(number)
    if size < 0:
        raise SourceError(source, where, f"size: {size} is negative")
    if size >= 2**63:
        raise SourceError(source, where, f"size: {field('size')} is too large for a byte count")
    values: dict[str, Any] = {}
    for name in ("last_modified", "snapshot_date"):
        try:
            values[name] = parse_time(field(name))
        except (TypeError, ValueError, OverflowError):
            raise SourceError(source, where,
                              f"{name}: {field(name)!r} is not a timestamp") from None
    if values["last_modified"] is None:
        # no time: in no month-end snapshot, so the bucket's listed bytes left it out
        raise SourceError(source, where, "last_modified: empty: an object needs its time")
    key = field("key")
    if not key:
        raise SourceError(source, where, "key: empty")
    name = field("bucket") or bucket
    if not name:
        raise SourceError(source, where, "bucket: empty (and no `bucket:` in the config)")
    snapshot = values["snapshot_date"]
    return {
        "bucket": name,
        "key": key,
        "size": size,
        "last_modified": values["last_modified"],
        "snapshot_date": snapshot.date() if snapshot else None,
    }


def walk_local(path: Path, source: str, bucket: str) -> Iterator[dict[str, Any]]:
    if path.exists() and not path.is_dir():
        raise SourceError(source, str(path), "a file, not a folder: a `local` path names the "
                          "folder standing in for the bucket")
    if not path.is_dir():
        raise SourceError(source, str(path), "checkpoint folder not found")
    # links are not followed out of the folder, nor into a linked folder (local_files.py)
    for file, stat in walk_files(path, source):
        key = file.relative_to(path).as_posix()
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:  # undecodable bytes come back as lone surrogates
            shown = os.fsencode(file).decode("utf-8", "backslashreplace")
            raise SourceError(source, shown, "the file name is not UTF-8 (an S3 key is "
                              "UTF-8 text): rename it") from None
        yield {
            "bucket": bucket,
            "key": key,
            "size": stat.st_size,
            "last_modified": datetime.fromtimestamp(stat.st_mtime, UTC).replace(tzinfo=None),
            "snapshot_date": None,
        }


def in_month(obj: dict[str, Any], month: date, month_end: datetime) -> bool:
    """Whether a listed object (which has its time) belongs to the month's snapshot(s)."""
    snapshot = obj["snapshot_date"]
    if snapshot is not None:
        return snapshot.year == month.year and snapshot.month == month.month
    return obj["last_modified"] < month_end


