"""All configured checkpoint listings → the month's `checkpoint_inventory`."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa

from cost_pipeline.config import (
    InventoryCheckpoints,
    LocalCheckpoints,
    PipelineConfig,
    S3Checkpoints,
)
from cost_pipeline.ingest.sources import SourceError, s3
from cost_pipeline.ingest.sources.listing_arrow import object_batches
from cost_pipeline.ingest.sources.listing_inventory import read_inventory
from cost_pipeline.ingest.sources.listing_rows import walk_local
from cost_pipeline.months import month_bounds
from cost_pipeline.warehouse import replace_month, sql_text

OBJECT_SCHEMA = pa.schema([
    ("source", pa.string()), ("bucket", pa.string()), ("key", pa.string()),
    ("size", pa.int64()), ("last_modified", pa.timestamp("us")),
    ("snapshot_date", pa.date32()), ("source_prefix", pa.string()),
])


def read_listing(cfg: PipelineConfig, month: date, log: logging.Logger, *,
                 vectorized: bool = True) -> pa.Table:
    """The objects of every configured listing that belong to the month's snapshot(s);
    `vectorized=False` reads every listing file row by row (the reference the vectorized
    reader is tested against)."""
    _, month_end = month_bounds(month)
    batches: list[pa.RecordBatch] = []
    for i, entry in enumerate(cfg.checkpoints):
        name = f"checkpoints[{i}] {entry.kind}"
        if isinstance(entry, InventoryCheckpoints):
            listed = read_inventory(cfg.resolve(entry.path), name, month, entry.bucket,
                                    entry.endpoint_url, entry.region, vectorized=vectorized)
        elif isinstance(entry, S3Checkpoints):
            listed = object_batches(s3.list_bucket(s3.client(entry.endpoint_url, entry.region),
                                                   entry.bucket, name), month, month_end)
        elif isinstance(entry, LocalCheckpoints):
            listed = object_batches(walk_local(Path(cfg.resolve(entry.path)), name,
                                               entry.bucket), month, month_end)
        else:
            raise SourceError(name, None, f"checkpoint kind {entry.kind!r} is not supported yet")
        count = 0
        for batch in listed:
            count += batch.num_rows
            batches.append(_with_source(batch, name, entry.prefix))
        log.info(f"{name}: {count} object(s) in {month:%Y-%m}")
    return pa.Table.from_batches(batches, schema=OBJECT_SCHEMA)


def _with_source(batch: pa.RecordBatch, source: str, prefix: str | None) -> pa.RecordBatch:
    rows = batch.num_rows
    return pa.RecordBatch.from_arrays(
        [pa.repeat(pa.scalar(source, pa.string()), rows), *batch.columns,
         pa.repeat(pa.scalar(prefix, pa.string()), rows)], schema=OBJECT_SCHEMA)


def build_checkpoint_inventory(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    listing: pa.Table | None = None,
) -> int:
    """Write the month's objects of `listing` (default: read the listings now)."""
    con.register("listing_arrow", read_listing(cfg, month, log) if listing is None else listing)
    try:
        sql = sql_text("checkpoint_inventory")
        # distinct hashes can only under-count: equal counts prove no object repeats
        ((objects, distinct),) = con.execute(
            "SELECT count(*), count(DISTINCT hash(bucket, key, snapshot_date)) "
            "FROM listing_arrow").fetchall()
        if objects != distinct:
            sql = (f"SELECT * FROM ({sql}) QUALIFY row_number() OVER (PARTITION BY bucket, key, "
                   "snapshot_date ORDER BY prefix IS NOT NULL DESC, source) = 1")
        return replace_month(con, "checkpoint_inventory", month, sql, {"month": month})
    finally:
        con.unregister("listing_arrow")
