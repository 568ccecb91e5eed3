"""All configured checkpoint listings → the month's `checkpoint_inventory`."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa

from .config import InventoryCheckpoints, LocalCheckpoints, PipelineConfig, S3Checkpoints
from .months import month_bounds
from .sources import SourceError, s3
from .sources.checkpoints import in_month, walk_local
from .sources.s3_inventory import read_inventory
from .warehouse import replace_month, sql_text

OBJECT_SCHEMA = pa.schema([
    ("source", pa.string()), ("bucket", pa.string()), ("key", pa.string()),
    ("size", pa.int64()), ("last_modified", pa.timestamp("us")),
    ("snapshot_date", pa.date32()), ("source_prefix", pa.string()),
])


def read_listing(cfg: PipelineConfig, month: date, log: logging.Logger) -> pa.Table:
    """The objects of every configured listing that belong to the month's snapshot(s)."""
    _, month_end = month_bounds(month)
    batches: list[pa.RecordBatch] = []
    for i, entry in enumerate(cfg.checkpoints):
        name = f"checkpoints[{i}] {entry.kind}"
        if isinstance(entry, InventoryCheckpoints):
            objects = read_inventory(cfg.resolve(entry.path), name, month, entry.bucket,
                                     entry.endpoint_url, entry.region)
        elif isinstance(entry, S3Checkpoints):
            objects = s3.list_bucket(s3.client(entry.endpoint_url, entry.region), entry.bucket,
                                     name)
        elif isinstance(entry, LocalCheckpoints):
            objects = walk_local(Path(cfg.resolve(entry.path)), name, entry.bucket)
        else:
            raise SourceError(name, None, f"checkpoint kind {entry.kind!r} is not supported yet")
        rows = [
            {**obj, "source": name, "source_prefix": entry.prefix}
            for obj in objects if in_month(obj, month, month_end)
        ]
        log.info(f"{name}: {len(rows)} object(s) in {month:%Y-%m}")
        batches.append(pa.RecordBatch.from_pylist(rows, schema=OBJECT_SCHEMA))
    return pa.Table.from_batches(batches, schema=OBJECT_SCHEMA)


def build_checkpoint_inventory(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    listing: pa.Table | None = None,
) -> int:
    """Write the month's objects of `listing` (default: read the listings now)."""
    con.register("listing_arrow", read_listing(cfg, month, log) if listing is None else listing)
    try:
        return replace_month(con, "checkpoint_inventory", month, sql_text("checkpoint_inventory"),
                             {"month": month})
    finally:
        con.unregister("listing_arrow")
