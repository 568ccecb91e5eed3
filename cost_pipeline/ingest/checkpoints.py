"""All configured checkpoint listings → the month's `checkpoint_inventory`, and the S3
Inventory reports read → `checkpoint_snapshots` (a report listing no object leaves no object
row, yet its day's snapshot of the bucket is empty: SPEC §6 rule 4 then makes that day's
storage untracked, where without the report it would read the latest snapshot)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from cost_pipeline.config import (
    InventoryCheckpoints,
    LocalCheckpoints,
    PipelineConfig,
    S3Checkpoints,
)
from cost_pipeline.ingest.sources import SourceError, s3
from cost_pipeline.ingest.sources.listing_arrow import (
    object_batches,
    without_folder_markers,
)
from cost_pipeline.ingest.sources.listing_inventory import read_inventory
from cost_pipeline.ingest.sources.listing_rows import walk_local
from cost_pipeline.months import month_bounds
from cost_pipeline.warehouse import (
    ensure_schema,
    month_transaction,
    register,
    register_stream,
    sql_text,
    unregister,
    write_month,
)

# a source's name and prefix are the same on every object it lists, and its buckets few:
# dictionary-encoded, they take 4 bytes an object instead of their text (~60 of 150 bytes an
# object at 10M objects, listed daily)
OBJECT_SCHEMA = pa.schema([
    ("source", pa.dictionary(pa.int32(), pa.string())),
    ("bucket", pa.dictionary(pa.int32(), pa.string())),
    ("key", pa.string()), ("size", pa.int64()), ("last_modified", pa.timestamp("us")),
    ("snapshot_date", pa.date32()),
    ("source_prefix", pa.dictionary(pa.int32(), pa.string())),
])
# the listing table's schema metadata: the S3 Inventory reports read, [source, bucket,
# snapshot date] (`read_listing`), empty ones included
REPORTS = b"inventory_reports"
# and "1" when no object (bucket, key, snapshot) is listed twice, "0" when one is: its copies
# are kept once (`_listed_once`)
EACH_ONCE = b"each_object_once"


def read_listing(cfg: PipelineConfig, month: date, log: logging.Logger, *,
                 vectorized: bool = True) -> pa.Table:
    """The objects of every configured listing that belong to the month's snapshot(s), but
    folder markers (`without_folder_markers`), an object listed twice by one listing
    checked here (`_listed_once`); `vectorized=False` reads every listing file row by row
    (the reference the vectorized reader is tested against)."""
    _, month_end = month_bounds(month)
    batches: list[pa.RecordBatch] = []
    reports: set[tuple[str, str, str]] = set()
    may_repeat: dict[str, str] = {}
    for name, entry in zip(source_names(cfg), cfg.checkpoints, strict=True):
        read: list[tuple[str, date]] = []
        if isinstance(entry, InventoryCheckpoints):
            listed = read_inventory(cfg.resolve(entry.path), name, month, entry.bucket,
                                    entry.endpoint_url, entry.region, vectorized=vectorized,
                                    reports=read)
        elif isinstance(entry, S3Checkpoints):
            listed = object_batches(s3.list_bucket(s3.client(entry.endpoint_url, entry.region),
                                                   entry.bucket, name), month, month_end)
        elif isinstance(entry, LocalCheckpoints):
            listed = object_batches(walk_local(Path(cfg.resolve(entry.path)), name,
                                               entry.bucket), month, month_end)
        else:
            raise SourceError(name, None, f"checkpoint kind {entry.kind!r} is not supported yet")
        count, located, first_key = 0, not entry.prefix, None
        prefix = run_prefix(entry.prefix)
        first = len(batches)
        for batch in map(without_folder_markers, listed):
            count += batch.num_rows
            if not located and batch.num_rows:  # until one key is under the prefix
                first_key = first_key or batch.column("key")[0].as_py()
                located = pc.any(pc.starts_with(batch.column("key"), prefix)).as_py()
            batches.append(_with_source(batch, name, prefix))
        dated = read or (_dated_snapshots(batches[first:])  # a plain CSV's snapshot_date days
                         if isinstance(entry, InventoryCheckpoints) else [])
        log.info(f"{name}: {count} object(s) in {month:%Y-%m}")
        if isinstance(entry, InventoryCheckpoints) and not count and not read:
            # a month whose only report is dated the 1st of the next one read as an empty
            # bucket without a word: its storage all untracked, no violation
            log.warning(f"{name}: no object listed in {month:%Y-%m}: its buckets read as "
                        "empty this month (an S3 Inventory month is read from the reports "
                        "dated in it; keep a daily or weekly report)")
        if count and not located:  # `/checkpoints/` for `checkpoints/`: no run folder at all
            log.warning(f"{name}: none of its {count} object(s) is under prefix "
                        f"{entry.prefix!r}, so no object is a run's checkpoint (keys start "
                        f"like {first_key!r}): check the prefix")
        reports.update((name, bucket, day.isoformat()) for bucket, day in dated)
        if not _lists_each_object_once(entry, read):
            may_repeat[name] = cfg.resolve(entry.path)  # (an `inventory` entry's)
    listing = pa.Table.from_batches(batches, schema=OBJECT_SCHEMA)
    # one listing made to list each object once, else counted (and checked)
    made_once = len(cfg.checkpoints) <= 1 and not may_repeat
    each_once = made_once or _listed_once(listing, may_repeat)
    return listing.replace_schema_metadata(
        {REPORTS: json.dumps(sorted(reports)), EACH_ONCE: b"1" if each_once else b"0"})


def source_names(cfg: PipelineConfig) -> list[str]:
    """The name of each configured listing, as `checkpoint_inventory.source` holds it."""
    return [f"checkpoints[{i}] {entry.kind}" for i, entry in enumerate(cfg.checkpoints)]


def _dated_snapshots(batches: list[pa.RecordBatch]) -> list[tuple[str, date]]:
    """The (bucket, day) snapshots a plain CSV's `snapshot_date` column dates, as S3 Inventory
    reports add theirs: `checkpoint_snapshots` then holds every dated snapshot by its source,
    which is how a bucket's configurations are told apart (macros.sql `month_end_snapshot`)."""
    dated = [b.select(["bucket", "snapshot_date"]).filter(pc.is_valid(b.column("snapshot_date")))
             for b in batches]
    if not any(b.num_rows for b in dated):
        return []
    days = pa.Table.from_batches(dated).group_by(["bucket", "snapshot_date"]).aggregate([])
    return list(zip(days.column("bucket").to_pylist(), days.column("snapshot_date").to_pylist(),
                    strict=True))


def _lists_each_object_once(entry: object, reports: list[tuple[str, date]]) -> bool:
    """Whether a listing lists no object (bucket, key, snapshot) twice, by how it is made: a
    bucket listed (`s3`: S3 lists each key once), a folder walked, or S3 Inventory reports
    of distinct days (a report lists each current object once). A plain CSV, made by hand or
    by a script, may repeat a row: its objects are counted (`_repeats_an_object`). Counting
    the 10.8M objects of a month of daily reports took 1.07 s."""
    if isinstance(entry, S3Checkpoints | LocalCheckpoints):
        return True
    days = [day for _, day in reports]
    return bool(days) and len(set(days)) == len(days)


def run_prefix(prefix: str) -> str:
    """The text every key in the entry's run folders starts with (`checkpoint_inventory.sql`
    takes the next segment as the run id). A prefix ending in a letter or digit names a
    folder: `checkpoints` is `checkpoints/`, and `checkpoints-old/…` is outside it (read as
    run `-old` of `checkpoints`, its objects were orphans). A prefix ending in `/` or in any
    other character is the keys' start as written (SPEC §3 `<prefix><run_id>/`):
    `ckpt-` locates `ckpt-r1/…` as run `r1`."""
    return f"{prefix}/" if prefix[-1:].isalnum() else prefix


def _with_source(batch: pa.RecordBatch, source: str, prefix: str | None) -> pa.RecordBatch:
    rows = batch.num_rows
    return pa.RecordBatch.from_arrays(
        [_repeated(source, rows), pc.dictionary_encode(batch.column("bucket")),
         *batch.columns[1:], _repeated(prefix, rows)],
        schema=OBJECT_SCHEMA)


def _repeated(value: str | None, rows: int) -> pa.DictionaryArray:
    """`value` `rows` times, as a dictionary of one entry (null: no entry)."""
    if value is None:
        return pa.nulls(rows, pa.dictionary(pa.int32(), pa.string()))
    return pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), rows),
                                          pa.array([value], pa.string()))


class HandedListing:
    """A listing (`read_listing`) handed to `build_checkpoint_inventory` with no other holder:
    its record batches are let go as DuckDB reads them, so that its memory shrinks while the
    table fills instead of adding to the write's (10.8M objects of a month of daily reports:
    880 MiB of Arrow)."""

    def __init__(self, table: pa.Table) -> None:
        self._table: pa.Table | None = table

    def take(self) -> pa.Table:
        table, self._table = self._table, None
        if table is None:
            raise RuntimeError("the listing was handed over already")
        return table


# the listing's memory goes back to the system after every this many bytes handed to DuckDB
# (Arrow's allocator keeps freed pages until asked)
RELEASE_EVERY = 64 << 20


def build_checkpoint_inventory(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    listing: pa.Table | HandedListing | None = None, keep_held: bool = True,
) -> int:
    """Write the month's objects of `listing` (default: read the listings now), read once,
    each object once, and the S3 Inventory reports it was read from, in one transaction. A
    `HandedListing`, or the listing read here, is let go batch by batch as it is written
    (`_handed_out`). A configured listing that lists no object where the month holds objects
    from it is refused (`_refuse_emptied_listings`) unless not `keep_held`
    (`materialize --force`)."""
    if listing is None:
        listing = HandedListing(read_listing(cfg, month, log))
    handed = isinstance(listing, HandedListing)
    if handed:
        listing = listing.take()
    sql = sql_text("checkpoint_inventory")
    metadata = listing.schema.metadata or {}
    each_once = metadata.get(EACH_ONCE)
    if each_once is None:  # a listing `read_listing` did not read: any source may repeat
        each_once = b"1" if _listed_once(listing, None) else b"0"
    if each_once != b"1":
        # copies in one source are identical (`_listed_once`); of two sources', the one
        # under a prefix, then the first source's
        sql = (f"SELECT * FROM ({sql}) QUALIFY row_number() OVER (PARTITION BY bucket, key, "
               "snapshot_date ORDER BY prefix IS NOT NULL DESC, source, last_modified DESC, "
               "size DESC) = 1")
    reports = pa.Table.from_pylist(
        [{"source": source, "bucket": bucket, "snapshot_date": day} for source, bucket, day
         in json.loads(metadata.get(REPORTS, b"[]"))],
        schema=pa.schema([("source", pa.string()), ("bucket", pa.string()),
                          ("snapshot_date", pa.string())]))
    ensure_schema(con)
    if keep_held:
        _refuse_emptied_listings(con, cfg, month, listing)
    schema, batches = listing.schema, listing.to_batches()
    del listing  # (a handed listing's batches are now held by `batches` alone)
    register_stream(con, "listing_arrow", schema,
                    _handed_out(batches) if handed else iter(batches))
    register(con, "listing_reports", reports)
    try:
        with month_transaction(con):
            rows = write_month(con, "checkpoint_inventory", month, sql, {"month": month})
            write_month(con, "checkpoint_snapshots", month,
                        "SELECT CAST($month AS DATE) AS month, source, bucket, "
                        "CAST(snapshot_date AS DATE) AS snapshot_date FROM listing_reports",
                        {"month": month})
        return rows
    finally:
        unregister(con, "listing_arrow")
        unregister(con, "listing_reports")


def _refuse_emptied_listings(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig,
                             month: date, listing: pa.Table) -> None:
    """A configured listing that now lists no object of the month, where the month holds
    objects from it (a listing file cut to its header, a path moved to an empty folder, a
    bucket's objects gone), is refused as an emptied bill or tracker is: its objects replaced
    by none left the month's storage all untracked and no retention violation. The sources
    listed are read from the batches' one-entry dictionaries (`_with_source`); the warehouse
    is asked only when a configured one lists none."""
    listed: set[str] = set()
    for chunk in listing.column("source").chunks:
        if not len(chunk):
            continue
        if pa.types.is_dictionary(chunk.type) and len(chunk.dictionary) == 1:
            listed.update(chunk.dictionary.to_pylist())
        else:
            listed.update(pc.unique(chunk.cast(pa.string())).to_pylist())
    missing = [name for name in source_names(cfg) if name not in listed]
    if not missing:
        return
    held = dict(con.execute(
        "SELECT source, count(*) FROM checkpoint_inventory WHERE month = ? "
        "AND list_contains(?, source) GROUP BY source", [month, missing]).fetchall())
    for name in missing:
        if held.get(name):
            raise SourceError(name, f"{month:%Y-%m}", (
                f"the listing holds no object of the month, where the warehouse holds "
                f"{held[name]:,} of the month's from it: its file or bucket emptied, or a "
                "path moved? The month keeps its listing; `materialize --force` empties it"))


def _handed_out(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`batches` in their order, each let go once the reader has moved past it; their memory
    returned to the system every `RELEASE_EVERY` bytes."""
    batches.reverse()
    since_release = 0
    while batches:
        batch = batches.pop()
        since_release += batch.nbytes
        yield batch
        del batch
        if since_release >= RELEASE_EVERY:
            pa.default_memory_pool().release_unused()
            since_release = 0
    pa.default_memory_pool().release_unused()


def _repeats_an_object(listing: pa.Table) -> bool:
    """Whether an object (bucket, key, snapshot) is listed twice — counted on a connection of
    its own, which lets go of the table when it closes. Distinct hashes can only under-count:
    equal counts prove that no object repeats. The key is hashed with its reversed text, as
    macros.sql `key_hash` does: DuckDB's hash of the text alone gives keys differing in a
    few digits one number, and such a listing was deduplicated for nothing."""
    with duckdb.connect() as check:
        check.register("listing_arrow", listing)
        ((objects, distinct),) = check.execute(
            "SELECT count(*), count(DISTINCT hash(bucket, key, reverse(key), snapshot_date)) "
            "FROM listing_arrow").fetchall()
    return objects != distinct


def _listed_once(listing: pa.Table, sources: dict[str, str] | None) -> bool:
    """Whether no object (bucket, key, snapshot) is listed twice (`_repeats_an_object`). When
    one is, SPEC §11 duplicates in the `sources` that may list an object twice themselves
    ({source: its path}; None: every source): copies in one source are one object when
    identical, and an error naming the source, its path, the object and the values they
    differ in when not (the first such object in key order). Copies in two sources are kept
    once by precedence (`build_checkpoint_inventory`). The comparison (~1.2 s at 5M
    objects) is made only after the count found a repeat, over those sources (a plain CSV,
    two reports of one day); made as the listing is read, a bad one is refused before any
    table of the run is written."""
    if not _repeats_an_object(listing):
        return True
    if sources != {}:
        _refuse_differing_copies(listing, sources)
    return False


def _refuse_differing_copies(listing: pa.Table, sources: dict[str, str] | None) -> None:
    with duckdb.connect() as check:
        check.register("listing_arrow", listing)
        found = check.execute(
            "SELECT source, bucket, key, snapshot_date, min(size), max(size), "
            "min(last_modified), max(last_modified) FROM listing_arrow "
            "WHERE $sources IS NULL OR list_contains($sources, source) "
            "GROUP BY source, bucket, key, snapshot_date "
            "HAVING min(size) <> max(size) OR min(last_modified) <> max(last_modified) "
            "ORDER BY source, bucket, key, snapshot_date LIMIT 1",
            {"sources": None if sources is None else list(sources)}).fetchall()
    if not found:
        return
    ((source, bucket, key, snapshot, *values),) = found
    differ = [f"{name} {low} and {high}" for name, low, high
              in (("size", *values[:2]), ("last_modified", *values[2:]))
              if low != high]
    raise SourceError(source, (sources or {}).get(source),
                      f"bucket {bucket}, key {key!r}"
                      + (f", snapshot {snapshot}" if snapshot else "")
                      + f": listed twice with different values: {', '.join(differ)}")

