"""The month's attributed bill as a FOCUS 1.2 parquet file beside the warehouse
(`<warehouse folder>/exports/focus-YYYY-MM.parquet`), for FinOps tools; the same file as
`cost-pipeline export focus`. The logic is `cost_pipeline/export/focus.py`."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, Warehouse, month_of


@dg.asset(
    partitions_def=monthly,
    group_name="decisions",
    kinds={"parquet"},
    owners=["team:finops"],
    deps=["billing_facts", "tracker_runs", "attribution"],
    code_version=code_version(("focus_export", "focus_export_prepare"),
                              ("cost_pipeline.export.focus",)),
    description="The month's bill as a FOCUS 1.2 dataset: one row per billing line × run | "
    "untracked | unallocated (FOCUS 1.3 allocation), metrics split to sum back to each line "
    "exactly, the run, model, purpose and search in x_ columns and cost-pipeline/* tags. "
    "Written to <warehouse folder>/exports/focus-YYYY-MM.parquet.",
)
def focus_export(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    from cost_pipeline.export.focus import (
        FOCUS_VERSION,
        default_focus_path,
        stream_focus,
        unbilled_month,
    )

    cfg, month = settings.load(), month_of(context)
    path = default_focus_path(cfg.warehouse_path, month)
    with duckdb.get_connection() as con:
        problem = unbilled_month(con, month, cfg.warehouse_path)
        if not problem:
            # the month as this run wrote it, streamed beside its place; moved there only
            # once the run's writes commit
            staged, rows, runs = stream_focus(con, month,
                                              path.with_name(f".{path.name}.pending"))
    if problem:
        # as `cost-pipeline export focus` refuses it (raised once the connection is closed:
        # a resource that does not close it on an error would keep the file open)
        raise dg.Failure(problem)
    if isinstance(duckdb, Warehouse):
        duckdb.publish_on_commit(staged, path)
    else:
        staged.replace(path)
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(path)),
        "focus_version": FOCUS_VERSION,
        "rows": rows,
        "runs": runs,
    })
