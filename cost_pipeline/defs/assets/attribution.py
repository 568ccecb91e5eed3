"""The reconciled attribution of every billed cost, and the reconciliation against the
tracker — each guarded by an ERROR check that never blocks the tables downstream."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.attribution import build_attribution
from cost_pipeline.defs.assets.decisions import DECISION_INPUTS, write_unless_same
from cost_pipeline.defs.checks import conservation, reconciliation_outcome, tracker_claims_billed
from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.metadata import kept_apart, rounded
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, forced, month_of
from cost_pipeline.warehouse import dataset_rows, month_params, register_datasets


@dg.asset(
    partitions_def=monthly,
    group_name="attribution",
    kinds={"duckdb"},
    owners=["team:finops"],
    deps=["billing_facts", "tracker_runs", "checkpoint_inventory"],
    code_version=code_version(("attribution_prepare", "attribution_storage",
                               "attribution_claims", "attribution", "attribution_runs",
                               "attribution_basis", "attribution_affected"),
                              ("cost_pipeline.attribution", "cost_pipeline.defs.checks")),
    check_specs=[dg.AssetCheckSpec("cost_conserved", asset="attribution", blocking=False,
                                   description="attribution + untracked + unallocated = the "
                                   "month's EffectiveCost, to the cent (SPEC §6.6)")],
    description="One row per (billing line, run | untracked | unallocated): SPEC §6.",
)
def attribution(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        # the rows are kept when nothing they depend on changed (an MLflow tracker read
        # again, a runs file delivered again); a `--force` run attributes the month whole
        done = build_attribution(con, month, month_params(cfg, month),
                                 dataset_rows(cfg),
                                 log=context.log,
                                 keep_unchanged=not forced(context))
        check = conservation(con, month)
        # each purpose class's cost, to the bill's smallest unit (`rounded`: a fils, a yen)
        split = dict(con.execute(
            "SELECT purpose_class, fsum(cost) FROM attribution_runs WHERE month = ? "
            "GROUP BY 1 ORDER BY 1", [month]).fetchall())
        (currency,) = con.execute("SELECT bill_currency(?)", [month]).fetchone()
    return dg.MaterializeResult(
        metadata=rounded({"rows": done.rows, "mode": done.mode,
                          "changed_runs": done.changed_runs,
                          "lines_reattributed": done.lines_reattributed,
                          **{f"cost_{k}": v for k, v in split.items()},
                          "currency": currency}),
        check_results=[check],
    )


RECONCILIATION_READS = ["attribution", "untracked_usage"]


@dg.asset(
    partitions_def=monthly,
    group_name="attribution",
    kinds={"duckdb"},
    owners=["team:finops"],
    deps=RECONCILIATION_READS,  # the check names untracked_usage's top resources
    code_version=code_version(("reconciliation", "top_untracked", "unbilled_resources",
                               DECISION_INPUTS),
                              ("cost_pipeline.defs.checks", "cost_pipeline.report.data")),
    check_specs=[dg.AssetCheckSpec("reconciliation_within_threshold", asset="reconciliation",
                                   blocking=False, description="untracked GPU-hour share ≤ "
                                   "policy.reconciliation.max_untracked_share"),
                 dg.AssetCheckSpec("tracker_claims_billed", asset="reconciliation",
                                   blocking=False, description="no run claims a resource the "
                                   "month's bill never shows (WARN: wrong ids, other accounts)")],
    description="Billed vs tracked GPU-hours per month, untracked share and status (SPEC §7).",
)
def reconciliation(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        register_datasets(con, dataset_rows(cfg))  # the basis reads them (decision_inputs.sql)
        params = month_params(cfg, month)
        _, kept = write_unless_same(context, con, "reconciliation", RECONCILIATION_READS, params)
        check, figures = reconciliation_outcome(con, month)
        claims = tracker_claims_billed(con, month, params)
    # a failing share is never shown equal to its threshold, as on the check's metadata
    # (0.0500250… read 0.05 beside a 0.05 threshold under `status: fail`)
    return dg.MaterializeResult(
        metadata=kept_apart(rounded({**figures, "kept": kept}), figures, "untracked_share",
                            "threshold"),
        check_results=[check, claims])
