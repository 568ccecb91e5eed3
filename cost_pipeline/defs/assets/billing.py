"""Billing facts: every configured bill's month, normalized to FOCUS columns."""


from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.assets import run_inputs
from cost_pipeline.defs.checks import billing_complete
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, month_of
from cost_pipeline.ingest.billing import build_billing_facts


@dg.asset(
    partitions_def=monthly,
    group_name="billing",
    kinds={"duckdb"},
    owners=["team:finops"],
    check_specs=[dg.AssetCheckSpec("billing_complete", asset="billing_facts", blocking=False,
                                   description="every day of the month has Usage lines (ERROR "
                                   "for a closed month, WARN for the open month)")],
    description="Normalized billing line items of the month (FOCUS names, SPEC §5): net "
    "amortized EffectiveCost, ChargeCategory, cost component, accelerator count, usage hours. "
    "The month's first step: it also reads and validates the tracker and checkpoint inputs, so "
    "that bad input fails the materialization before any table is written.",
)
def billing_facts(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with run_inputs.failing_run_forgotten(context):
        # the run's tracker and checkpoint inputs are validated before anything is written
        run_inputs.read_ahead(context, cfg, month)
        with duckdb.get_connection() as con:
            summary = build_billing_facts(con, cfg, month, context.log)
            complete = billing_complete(con, month, datetime.now(UTC).date())
    return dg.MaterializeResult(
        metadata={
            "rows": summary.rows,
            "total_effective_cost": round(summary.total_effective_cost, 2),
            "total_billed_cost": round(summary.total_billed_cost, 2),
            "currency": summary.currency or "",
            "duplicates_dropped": summary.duplicates_dropped,
            "unknown_instance_types": ", ".join(summary.unknown_instance_types),
            "files": sum(len(d.files) for d in summary.deliveries),
            # per source: e.g. `gcp_billing_export.bytes_scanned_estimate`, rows read/returned
            **{f"{source}.{key}": value
               for source, values in summary.source_metadata.items()
               for key, value in values.items() if value is not None},
        },
        check_results=[complete],
    )
