"""Billing deliveries: what the bill of a month was made of, delivery by delivery.

AWS restates a month several times a day while it is open and again after it closes. Each
materialization of `billing_facts` records the delivery it read per source in
`billing_deliveries` (execution id, files, total EffectiveCost) — upserted, so reading the
same delivery again adds no row — and each row carries the change against the delivery of
that month seen before it: by how much the bill moved.

`source_fingerprints` is the cheap side for the delivery sensor: per source and month, a
fingerprint of the manifests (else the data files) as listed — names, sizes, modification
times — without reading any of them; a source that cannot be listed is returned apart, so
it holds back no other. A FOCUS source's files count for the month their path names
(`BILLING_PERIOD=YYYY-MM` of an AWS export, an Azure export's `YYYYMMDD-YYYYMMDD` folder);
a file whose path names none for the open month and the one before, the months a
provider's export writes.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb

from cost_pipeline.config import AwsCur2Source, FocusSource, PipelineConfig
from cost_pipeline.ingest.sources import SourceError, s3, source_names
from cost_pipeline.ingest.sources.s3 import S3Uri
from cost_pipeline.months import parse_month
from cost_pipeline.warehouse import query, sql_text


def delivery_id(delivery) -> str:
    """The manifest's executionId, else a hash of the file list with sizes and mtimes."""
    if getattr(delivery, "execution_id", None):
        return str(delivery.execution_id)
    stats = getattr(delivery, "stats", {}) or {}
    listing = [[f, *stats.get(f, ())] for f in sorted(getattr(delivery, "files", []))]
    return "files:" + _digest(listing)


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def record_deliveries(con: duckdb.DuckDBPyConnection, month: date, deliveries: list,
                      seen_at: datetime | None = None) -> list[dict]:
    """Upsert the month's deliveries (one per source read) and recompute each delivery's
    change against the previous one of its month and source. Returns the rows written."""
    seen_at = seen_at or datetime.now(UTC).replace(tzinfo=None)
    written = []
    for delivery in deliveries:
        source = getattr(delivery, "source", None)
        if not source:
            continue
        (total,) = con.execute(
            "SELECT coalesce(fsum(EffectiveCost), 0) FROM billing_facts "
            "WHERE month = ? AND starts_with(x_SourceLine, ?)", [month, source + ":"]).fetchone()
        stats = getattr(delivery, "stats", {}) or {}
        row = {
            "month": month, "source": source, "execution_id": delivery_id(delivery),
            "location": getattr(delivery, "manifest", None) or "",
            "files": sorted(getattr(delivery, "files", [])),
            "file_bytes": sum(size for size, *_ in stats.values()) if stats else None,
            "seen_at": seen_at, "total": float(total),
        }
        query(con, sql_text("billing_delivery_upsert"), row)
        written.append(row)
    query(con, sql_text("billing_delivery_changes"), {"month": month})
    for row in written:
        row["change"] = con.execute(
            "SELECT change_effective_cost FROM billing_deliveries WHERE month = ? AND source = ? "
            "AND execution_id = ?", [month, row["source"], row["execution_id"]]).fetchone()[0]
    return written


# ------------------------------------------------------------------ sensor side: listings only

def source_fingerprints(cfg: PipelineConfig, today: date | None = None
                        ) -> tuple[dict[str, dict[str, str]], dict[str, SourceError]]:
    """Per source name, `YYYY-MM` → fingerprint of its delivery of that month; and the
    sources that could not be listed (a folder not there yet, a bucket refused), with why —
    one of them holds back no other."""
    today = today or datetime.now(UTC).date()
    listed: dict[str, dict[str, str]] = {}
    unlisted: dict[str, SourceError] = {}
    for name, source in zip(source_names(cfg.billing), cfg.billing, strict=True):
        try:
            if isinstance(source, AwsCur2Source):
                if s3.is_s3(source.path):
                    listing = _s3_listing(name, source)
                else:
                    listing = _local_listing(name, Path(cfg.resolve(source.path)))
            elif isinstance(source, FocusSource):
                listing = _focus_listing(name, source, cfg, today)
            else:
                continue
        except SourceError as exc:
            unlisted[name] = exc
            continue
        except OSError as exc:  # a local folder that cannot be read (permissions)
            unlisted[name] = SourceError(name, str(source.path), str(exc))
            continue
        listed[name] = {month: _digest(entries) for month, entries in sorted(listing.items())}
    return listed, unlisted


def month_fingerprints(per_source: dict[str, dict[str, str]]) -> dict[str, str]:
    """`YYYY-MM` → one fingerprint of the sources' deliveries of that month."""
    per_month: dict[str, dict[str, str]] = {}
    for name, months in per_source.items():
        for month, fingerprint in months.items():
            per_month.setdefault(month, {})[name] = fingerprint
    return {month: _digest(sources) for month, sources in sorted(per_month.items())}


# the month a FOCUS file's path names: an AWS export's `BILLING_PERIOD=YYYY-MM` folder, an
# Azure export's date-range folder `YYYYMMDD-YYYYMMDD` (its first day's month)
_FOCUS_MONTH = re.compile(r"(?:^|/)(?:BILLING_PERIOD=(\d{4}-\d{2})|(\d{4})(\d{2})\d{2}-\d{8})(?=/)")


def _focus_listing(name: str, source: FocusSource, cfg: PipelineConfig,
                   today: date) -> dict[str, list]:
    """Per month: a FOCUS source's data files and manifests as listed (path, size, time),
    by the month their path names, or else the source's path (a month's folder); those naming
    none count for the open month and the one before (an export rewriting its month to date,
    or closing the last one)."""
    from cost_pipeline.ingest.sources import focus
    from cost_pipeline.ingest.sources.focus_s3 import find_files as find_s3_files
    from cost_pipeline.ingest.sources.local_files import walk_files

    if s3.is_s3(source.path):
        fs = s3.filesystem(source.endpoint_url, source.region)
        files, sizes, modified = find_s3_files(name, source.path, fs, focus.SUFFIXES)
        listed = [[p[len(source.path.rstrip("/")) + 1:] or p, sizes.get(p, 0), modified[p]]
                  for p in sorted(modified) if p in sizes or p.lower().endswith(".json")]
    else:
        root = Path(cfg.resolve(source.path))
        if root.is_file():
            stat = root.stat()
            listed = [[root.name, stat.st_size, stat.st_mtime_ns]]
        elif root.is_dir():
            listed = [[path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns]
                      for path, stat in walk_files(root, name)
                      if focus.is_data_file(path) or path.name.lower().endswith(".json")]
        else:
            raise SourceError(name, str(root), "FOCUS file or folder not found")
    opened = date(today.year, today.month, 1)
    undated = [f"{opened - timedelta(days=1):%Y-%m}", f"{opened:%Y-%m}"]
    # a path at a month's folder (`data/BILLING_PERIOD=2026-07`) names the month of the files
    # below it, whose own paths name none
    at_month = [*_FOCUS_MONTH.finditer(f"/{source.path.rstrip('/')}/")]
    months: dict[str, list] = {}
    for entry in listed:
        named = _FOCUS_MONTH.search("/" + entry[0]) or (at_month[-1] if at_month else None)
        if named:
            month = _valid_month(named.group(1) or f"{named.group(2)}-{named.group(3)}")
            if month is not None:  # a folder naming no month is no delivery (`_month_of`)
                months.setdefault(month, []).append(entry)
        else:
            for month in undated:
                months.setdefault(month, []).append(entry)
    return months


def _month_of(folder: str) -> str | None:
    """The month of a `BILLING_PERIOD=YYYY-MM` folder; None for any other folder — one that
    names no month (`BILLING_PERIOD=2026-13`, a template's `YYYY-MM`) is not a delivery, and
    taken as one it stopped the delivery sensor at every tick."""
    return _valid_month(folder.split("=", 1)[1]) if folder.startswith("BILLING_PERIOD=") else None


def _valid_month(month: str) -> str | None:
    """`month` when it is a `YYYY-MM` naming a month, else None."""
    if len(month) == 7 and month[4] == "-":
        try:
            parse_month(month)
        except ValueError:
            return None
        return month
    return None


def _data_file(name: str) -> bool:
    """A month's data file: parquet, or the CSV of an export in that format."""
    from cost_pipeline.ingest.sources.cur2 import is_data_file

    return is_data_file(name)


def _local_listing(name: str, root: Path) -> dict[str, list]:
    """Per month: its manifests when it has any (they name the delivery), else its files."""
    if not root.is_dir():
        raise SourceError(name, str(root), "export folder not found")
    months: dict[str, list] = {}
    for kind, pattern in (("metadata", "*Manifest.json"), ("data", "*")):
        for folder in sorted((root / kind).glob("BILLING_PERIOD=*")):
            month = _month_of(folder.name)
            if month is None or (kind == "data" and month in months):
                continue
            entries = []
            for file in sorted(folder.rglob(pattern)):
                if kind == "data" and not (_data_file(file.name) and file.is_file()):
                    continue
                stat = file.stat()
                entries.append([file.relative_to(root).as_posix(), stat.st_size,
                                stat.st_mtime_ns])
            if entries:
                months[month] = entries
    return months


def _s3_listing(name: str, source: AwsCur2Source) -> dict[str, list]:
    fs = s3.filesystem(source.endpoint_url, source.region)
    root = S3Uri.parse(source.path)
    months: dict[str, list] = {}
    for info in s3.list_files(fs, root.child("metadata").path, name):
        relative = info.path[len(root.path) + 1:]
        parts = relative.split("/")
        month = _month_of(parts[1]) if len(parts) > 2 else None
        if month and info.is_file and info.base_name.endswith("Manifest.json"):
            months.setdefault(month, []).append([relative, info.size, s3.mtime_text(info)])
    # months without a manifest: their data files (listed only for those months)
    for folder in s3.list_files(fs, root.child("data").path, name, recursive=False):
        month = _month_of(folder.base_name)
        if month is None or month in months:
            continue
        entries = [[info.path[len(root.path) + 1:], info.size, s3.mtime_text(info)]
                   for info in s3.list_files(fs, folder.path, name)
                   if info.is_file and _data_file(info.path)]
        if entries:
            months[month] = sorted(entries)
    return {month: sorted(entries) for month, entries in months.items()}


def delivery_metadata(record: dict) -> dict:
    """A source's asset metadata about its delivery: which one, and how much the bill moved
    against the delivery of the month read before it."""
    metadata = {"delivery": record["execution_id"]}
    if record.get("change") is not None:
        metadata["change_vs_previous_delivery"] = round(record["change"], 2)
    return metadata
