"""Billing facts: every configured bill's month, normalized to FOCUS columns."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from ..billing import build_billing_facts
from .partitions import monthly
from .resources import PipelineSettings, month_of


@dg.asset(
    partitions_def=monthly,
    group_name="billing",
    kinds={"duckdb"},
    owners=["team:finops"],
    description="Normalized billing line items of the month (FOCUS names, SPEC §5): net "
    "amortized EffectiveCost, ChargeCategory, cost component, accelerator count, usage hours.",
)
def billing_facts(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        summary = build_billing_facts(con, cfg, month, context.log)
    return dg.MaterializeResult(
        metadata={
            "rows": summary.rows,
            "total_effective_cost": round(summary.total_effective_cost, 2),
            "total_billed_cost": round(summary.total_billed_cost, 2),
            "currency": summary.currency or "",
            "duplicates_dropped": summary.duplicates_dropped,
            "unknown_instance_types": ", ".join(summary.unknown_instance_types),
            "files": sum(len(d.files) for d in summary.deliveries),
        }
    )
