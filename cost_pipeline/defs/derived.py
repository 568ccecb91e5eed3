"""What a finance director and an ML lead act on, each table one `assets/<name>.sql`."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from ..warehouse import replace_month, sql_text
from .partitions import monthly
from .resources import PipelineSettings, month_of, month_params

DERIVED = {
    "untracked_usage": (
        ["attribution"], "finops",
        "Untracked cost per resource × day × component × kind: the list to chase."),
    "cost_per_model_monthly": (
        ["attribution"], "finops",
        "Cost and accelerator-hours per model × purpose class × component (production vs "
        "search is the headline)."),
    "search_costs": (
        ["attribution"], "ml-platform",
        "Per search active in the month: runs, configs, seeds, hours, cost, best metric, "
        "improvement and cost per unit of improvement."),
    "retention_violations": (
        ["checkpoint_inventory", "billing_facts", "tracker_runs"], "ml-platform",
        "Objects breaking the retention policy (dead runs, beyond keep-last, orphans), priced."),
    "storage_by_run_status": (
        ["checkpoint_inventory", "billing_facts", "tracker_runs"], "ml-platform",
        "Checkpoint bytes and cost by run status: live, production, dead, orphan."),
}


def _sql_asset(table: str, deps: list[str], owner: str, description: str) -> dg.AssetsDefinition:
    @dg.asset(
        name=table,
        partitions_def=monthly,
        group_name="decisions",
        kinds={"duckdb"},
        owners=[f"team:{owner}"],
        deps=deps,
        description=description,
    )
    def _asset(
        context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
    ) -> dg.MaterializeResult:
        cfg, month = settings.load(), month_of(context)
        with duckdb.get_connection() as con:
            rows = replace_month(con, table, month, sql_text(table), month_params(cfg, month))
        return dg.MaterializeResult(metadata={"rows": rows})

    return _asset


derived_assets = [_sql_asset(name, *spec) for name, spec in DERIVED.items()]
