"""Tracker runs and the checkpoint listing: what the ML side recorded. Both are ordered
after `billing_facts`, which reads and validates their inputs before the month's first write
(see run_inputs.py), and write what it read."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.assets import run_inputs
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, month_of
from cost_pipeline.ingest.checkpoints import build_checkpoint_inventory, read_listing
from cost_pipeline.ingest.runs import build_tracker_runs, runs_table


@dg.asset(
    partitions_def=monthly,
    group_name="tracker",
    kinds={"duckdb"},
    owners=["team:ml-platform"],
    deps=["billing_facts"],
    description="Every run the trackers know (SPEC §4), as a snapshot stored under the month.",
)
def tracker_runs(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with run_inputs.failing_run_forgotten(context):
        run_inputs.read_ahead(context, cfg, month)  # both inputs, when billing_facts did not
        runs = run_inputs.take(context, run_inputs.RUNS, lambda: runs_table(cfg, context.log))
        with duckdb.get_connection() as con:
            rows = build_tracker_runs(con, cfg, month, context.log, runs=runs)
    return dg.MaterializeResult(metadata={"runs": rows})


@dg.asset(
    partitions_def=monthly,
    group_name="tracker",
    kinds={"duckdb"},
    owners=["team:ml-platform"],
    deps=["billing_facts"],
    description="Checkpoint and artifact objects of the month's snapshot(s), with the run and "
    "checkpoint each object belongs to.",
)
def checkpoint_inventory(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with run_inputs.failing_run_forgotten(context):
        run_inputs.read_ahead(context, cfg, month)  # both inputs, when billing_facts did not
        listing = run_inputs.take(context, run_inputs.LISTING,
                                  lambda: read_listing(cfg, month, context.log))
        with duckdb.get_connection() as con:
            rows = build_checkpoint_inventory(con, cfg, month, context.log, listing=listing)
            (total,) = con.execute(
                "SELECT coalesce(sum(size), 0) FROM checkpoint_inventory WHERE month = ?",
                [month]).fetchone()
    return dg.MaterializeResult(metadata={"objects": rows, "bytes": int(total)})
