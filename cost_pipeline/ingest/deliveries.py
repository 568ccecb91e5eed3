"""Billing deliveries: what the bill of a month was made of, delivery by delivery.

AWS restates a month several times a day while it is open and again after it closes. Each
materialization of `billing_facts` records the delivery it read per source in
`billing_deliveries` (execution id, files, total EffectiveCost) — upserted, so reading the
same delivery again adds no row — and each row carries the change against the delivery of
that month seen before it: by how much the bill moved.

`export_fingerprints` is the cheap side for the delivery sensor: per month, a fingerprint of
the manifests (else the data files) as listed — names, sizes, modification times — without
reading any of them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb

from cost_pipeline.config import AwsCur2Source, PipelineConfig
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

def export_fingerprints(cfg: PipelineConfig) -> dict[str, str]:
    """`YYYY-MM` → fingerprint of every CUR export's delivery of that month (all sources)."""
    per_month: dict[str, dict[str, str]] = {}
    for name, source in zip(source_names(cfg.billing), cfg.billing, strict=True):
        if not isinstance(source, AwsCur2Source):
            continue
        if s3.is_s3(source.path):
            listing = _s3_listing(name, source)
        else:
            listing = _local_listing(name, Path(cfg.resolve(source.path)))
        for month, entries in listing.items():
            per_month.setdefault(month, {})[name] = _digest(entries)
    return {month: _digest(sources) for month, sources in sorted(per_month.items())}


def _month_of(folder: str) -> str | None:
    """The month of a `BILLING_PERIOD=YYYY-MM` folder; None for any other folder — one that
    names no month (`BILLING_PERIOD=2026-13`, a template's `YYYY-MM`) is not a delivery, and
    taken as one it stopped the delivery sensor at every tick."""
    if folder.startswith("BILLING_PERIOD="):
        month = folder.split("=", 1)[1]
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
