"""The month's three inputs as one step: the bill (`billing_facts`), the trackers' runs
(`tracker_runs`) and the checkpoint listing (`checkpoint_inventory`).

One subsettable multi-asset reads each selected input once and validates all of them before it
writes anything, so a bad runs file or listing fails the materialization while every table
still holds its previous rows; a run that selects only some of the three (the CLI skips an
unchanged bill) reads only their sources. The three share no data with each other: the graph
draws no edge between them.

The runs and the listing are read in worker threads while the bill is loaded (DuckDB releases
the interpreter while it works): at 100k runs and 1M objects that is ~1.2 s of reading hidden
behind the bill's insert. Their log lines are held and written after the bill's, so the
output keeps one order."""

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.checks import billing_complete
from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.metadata import rounded
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, forced, month_of
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.ingest.checkpoints import (
    HandedListing,
    build_checkpoint_inventory,
    read_listing,
)
from cost_pipeline.ingest.runs import runs_table, write_tracker_runs

BILLING_FACTS, TRACKER_RUNS, CHECKPOINT_INVENTORY = (
    "billing_facts", "tracker_runs", "checkpoint_inventory")
_SOURCES = "cost_pipeline.ingest.sources"

INPUT_SPECS = [
    dg.AssetSpec(
        BILLING_FACTS,
        group_name="billing",
        kinds={"duckdb"},
        owners=["team:finops"],
        skippable=True,
        code_version=code_version(
            ("billing_facts_cur2", "billing_facts_cur2_split", "billing_facts_focus",
             "billing_facts_gcp", "gcp_billing_export.bq", "billing_delivery_upsert",
             "billing_delivery_changes", "period_month_totals"),
            ("cost_pipeline.ingest.billing", "cost_pipeline.ingest.deliveries",
             "cost_pipeline.ingest.accelerators", f"{_SOURCES}.cur2", f"{_SOURCES}.cur2_s3",
             f"{_SOURCES}.focus", f"{_SOURCES}.gcp_billing", f"{_SOURCES}.s3")),
        description="Normalized billing line items of the month (FOCUS names, SPEC §5): net "
        "amortized EffectiveCost, ChargeCategory, cost component, accelerator count, usage "
        "hours.",
    ),
    dg.AssetSpec(
        TRACKER_RUNS,
        group_name="tracker",
        kinds={"duckdb"},
        owners=["team:ml-platform"],
        skippable=True,
        code_version=code_version(
            (), ("cost_pipeline.ingest.runs", f"{_SOURCES}.runs_file",
                 f"{_SOURCES}.runs_file_sql", f"{_SOURCES}.mlflow_runs")),
        description="Every run the trackers know (SPEC §4), as a snapshot stored under the "
        "month.",
    ),
    dg.AssetSpec(
        CHECKPOINT_INVENTORY,
        group_name="tracker",
        kinds={"duckdb"},
        owners=["team:ml-platform"],
        skippable=True,
        code_version=code_version(
            ("checkpoint_inventory",),
            ("cost_pipeline.ingest.checkpoints", f"{_SOURCES}.listing_rows",
             f"{_SOURCES}.listing_arrow", f"{_SOURCES}.listing_inventory", f"{_SOURCES}.s3")),
        description="Checkpoint and artifact objects of the month's snapshot(s), with the run "
        "and checkpoint each object belongs to.",
    ),
]


@dg.multi_asset(
    name="ingest",
    specs=INPUT_SPECS,
    partitions_def=monthly,
    can_subset=True,
    check_specs=[dg.AssetCheckSpec(
        "billing_complete", asset=BILLING_FACTS, blocking=False,
        description="every day of the month has Usage lines (ERROR for a closed month, WARN "
        "for the open month)")],
    description="Reads the month's bill, runs and checkpoint listing once, validates them "
    "all, then writes the selected input tables.",
)
def ingest(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> Iterator[dg.MaterializeResult]:
    cfg, month = settings.load(), month_of(context)
    selected = {key.to_user_string() for key in context.selected_asset_keys}
    # every selected input is read (and so validated) before the month is committed: the
    # run's one transaction rolls the bill back when the runs file or the listing is bad
    runs_log, listing_log = HeldLog(), HeldLog()
    try:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ingest-read") as pool:
            runs_read = (pool.submit(runs_table, cfg, runs_log)
                         if TRACKER_RUNS in selected else None)
            listing_read = (pool.submit(read_listing, cfg, month, listing_log)
                            if CHECKPOINT_INVENTORY in selected else None)
            if BILLING_FACTS in selected:
                # a connection block per table: leaving it drops any result left unread
                with first_error(runs_read, listing_read), duckdb.get_connection() as con:
                    summary = build_billing_facts(con, cfg, month, context.log,
                                                  keep_held=not forced(context))
                    complete = billing_complete(con, month, datetime.now(UTC).date())
            runs = runs_read.result() if runs_read else None
            # the listing's one holder from here (the future lets go of it below)
            listing = HandedListing(listing_read.result()) if listing_read else None
            listing_read = None
    finally:
        runs_log.replay(context.log)
        listing_log.replay(context.log)
    if BILLING_FACTS in selected:
        yield dg.MaterializeResult(
            asset_key=BILLING_FACTS,
            metadata=rounded({
                "rows": summary.rows,
                # to the currency's smallest unit (`rounded`: a fils, a yen)
                "total_effective_cost": summary.total_effective_cost,
                "total_billed_cost": summary.total_billed_cost,
                # a month without lines is in bill_currency's default, as every other
                # asset's metadata names it (it read "")
                "currency": summary.currency or "USD",
                "duplicates_dropped": summary.duplicates_dropped,
                "unknown_instance_types": ", ".join(summary.unknown_instance_types),
                # every source's files read: the CUR deliveries' and the FOCUS files (a
                # bill read from a FOCUS file read `files: 0` beside `focus.files: 1`); a
                # BigQuery export reads none
                "files": sum(len(d.files) for d in summary.deliveries) + sum(
                    values.get("files", 0) for values in summary.source_metadata.values()),
                # per source: e.g. `gcp_billing_export.bytes_scanned_estimate`
                **{f"{source}.{key}": value
                   for source, values in summary.source_metadata.items()
                   for key, value in values.items() if value is not None},
            }),
            check_results=[complete],
        )
    if runs is not None:
        with duckdb.get_connection() as con:
            rows, kept = write_tracker_runs(con, cfg, month, context.log, runs=runs,
                                            keep_identical=not forced(context))
        yield dg.MaterializeResult(asset_key=TRACKER_RUNS, metadata={"runs": rows, "kept": kept})
    if listing is not None:
        with duckdb.get_connection() as con:
            rows = build_checkpoint_inventory(con, cfg, month, context.log, listing=listing,
                                              keep_held=not forced(context))
            ((total,),) = con.execute(
                "SELECT coalesce(sum(size), 0) FROM checkpoint_inventory WHERE month = ?",
                [month]).fetchall()
        yield dg.MaterializeResult(asset_key=CHECKPOINT_INVENTORY,
                                   metadata={"objects": rows, "bytes": int(total)})
    # the runs and the listing were Arrow tables: their memory goes back to the system before
    # the attribution, rather than stay in Arrow's pool (mimalloc keeps freed pages): at 1M
    # runs and 1M objects the run's peak drops by ~290 MiB. The futures hold them too.
    del runs, listing, runs_read, listing_read
    pa.default_memory_pool().release_unused()


class HeldLog:
    """A logger for a worker thread: its lines are kept, then `replay`ed in order."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level: str) -> Callable[[str], None]:
        if level not in ("debug", "info", "warning", "error"):
            raise AttributeError(level)
        return lambda message, *args, **_: self.lines.append((level, message % args
                                                              if args else message))

    def replay(self, log) -> None:
        for level, message in self.lines:
            getattr(log, level)(message)


@contextmanager
def first_error(*reads: Future | None) -> Iterator[None]:
    """When the block fails, the error of a read started before it (the runs file, the
    listing) is raised instead, if there is one: the sources fail in the order they are
    listed, as when they were read one after another."""
    try:
        yield
    except BaseException:
        for read in reads:
            earlier = read.exception() if read is not None else None
            if earlier is not None:
                raise earlier from None
        raise
