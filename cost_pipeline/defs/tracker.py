"""Tracker runs and the checkpoint listing: what the ML side recorded."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from ..inventory import build_checkpoint_inventory
from ..tracker import build_tracker_runs
from .partitions import monthly
from .resources import PipelineSettings, month_of


@dg.asset(
    partitions_def=monthly,
    group_name="tracker",
    kinds={"duckdb"},
    owners=["team:ml-platform"],
    description="Every run the trackers know (SPEC §4), as a snapshot stored under the month.",
)
def tracker_runs(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        rows = build_tracker_runs(con, cfg, month, context.log)
    return dg.MaterializeResult(metadata={"runs": rows})


@dg.asset(
    partitions_def=monthly,
    group_name="tracker",
    kinds={"duckdb"},
    owners=["team:ml-platform"],
    description="Checkpoint and artifact objects of the month's snapshot(s), with the run and "
    "checkpoint each object belongs to.",
)
def checkpoint_inventory(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        rows = build_checkpoint_inventory(con, cfg, month, context.log)
        (total,) = con.execute(
            "SELECT coalesce(sum(size), 0) FROM checkpoint_inventory WHERE month = ?", [month]
        ).fetchone()
    return dg.MaterializeResult(metadata={"objects": rows, "bytes": int(total)})
