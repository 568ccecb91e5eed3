"""What a finance director and an ML lead act on, each table one `assets/<name>.sql`."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.checks import (
    model_cost_trend,
    retention_within_budget,
    searches_within_estimate,
)
from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.metadata import rounded
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, forced, month_of
from cost_pipeline.report.money import in_currency
from cost_pipeline.report.strip import SEARCHES_READ, searches_read
from cost_pipeline.text import AS_TEXT
from cost_pipeline.warehouse import (
    dataset_rows,
    month_params,
    register_datasets,
    replace_month_unless_same,
    sql_text,
)

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
        "improvement and cost per unit of improvement; the approved estimate "
        "(search_approvals), the cost to date and the overrun."),
    "retention_violations": (
        ["checkpoint_inventory", "billing_facts", "tracker_runs"], "ml-platform",
        "Objects breaking the retention policy (dead runs, beyond keep-last, orphans), priced."),
    "storage_by_run_status": (
        ["checkpoint_inventory", "billing_facts", "tracker_runs"], "ml-platform",
        "Checkpoint bytes and cost by run status: live, production, dead, orphan."),
    "search_trend": (
        ["attribution"], "ml-platform",
        "Every search of each model in launch order: cost to date, improvement, cost per unit "
        "of improvement against the previous search, and whether searching has saturated."),
    "search_shape": (
        ["attribution"], "ml-platform",
        "Per search active in the month: configs × seeds, grid or not, the best config, configs "
        "re-run from an earlier search, and the cost of re-runs and of extra seeds of non-best "
        "configs (the lever \"bound the search\")."),
    "preprocessing_waste": (
        ["attribution"], "ml-platform",
        "Preprocess runs that recomputed a cached (input_hash, transform_version), and runs "
        "that trained on a stale transform_version, priced."),
    "egress": (
        ["attribution"], "finops",
        "Network cost of runs pulling a dataset from another region, per run and dataset."),
    "gpu_utilization": (
        ["attribution"], "ml-platform",
        "GPU cost and accelerator-hours runs paid for but left idle (mean utilization)."),
    "showback": (
        ["attribution"], "finops",
        "The month's bill by team (run's team, else the line's team tag) × purpose × component."),
    "run_costs": (
        ["attribution", "tracker_runs"], "ml-platform",
        "Per run with cost in the month: cost by component, accelerator-hours and CPU-hours "
        "(what the tracker write-back and `cost-pipeline export runs` carry)."),
    "retrain_cadence": (
        ["attribution", "tracker_runs"], "ml-platform",
        "Per model with production runs started in the month: retrains, their triggers, the "
        "median days between them, cost, metric change per retrain, and the flat calendar "
        "retrains' cost (the lever \"retrain on measured decay\")."),
    "preemption": (
        ["attribution", "billing_facts", "tracker_runs"], "ml-platform",
        "Chains of runs restarted via restart_of with spot compute in the month: restarts, "
        "restarts from scratch, the cost they repeated, and the chain against its last run "
        "on demand (the lever \"checkpoint before going preemptible\")."),
    "cost_levers": (
        ["search_trend", "search_shape", "preprocessing_waste", "retention_violations", "egress",
         "gpu_utilization", "retrain_cadence", "preemption", "untracked_usage", "attribution",
         # whether the month has a listing at all (a lever's missing-data reason); its
         # objects reach the kept basis through retention_violations'
         "checkpoint_inventory"],
        "finops",
        "The mission's levers ranked by the dollars they touch this month, with the figure "
        "behind each and what it costs to pull."),
}


# An optional check per table: its spec and how to evaluate it (con, config, month).
DERIVED_CHECKS = {
    "search_costs": (
        dg.AssetCheckSpec("searches_within_estimate", asset="search_costs",
                          blocking=False, description="every search active in the month has a "
                          "recorded estimate (estimate --approve) and has cost at most 1.1 × it "
                          "so far (WARN)"),
        lambda con, cfg, month: searches_within_estimate(con, month)),
    "cost_per_model_monthly": (
        dg.AssetCheckSpec("model_cost_trend", asset="cost_per_model_monthly",
                          blocking=False, description="no model costs more than "
                          "policy.trend.max_growth × the median of its previous 3 months "
                          "(needs 2 of them) (WARN)"),
        lambda con, cfg, month: model_cost_trend(con, month, cfg.policy.trend.max_growth)),
    "retention_violations": (
        dg.AssetCheckSpec("retention_within_budget", asset="retention_violations",
                          blocking=False, description="the month's retention violations cost "
                          "≤ policy.retention.max_monthly_violation_cost (WARN)"),
        lambda con, cfg, month: retention_within_budget(
            con, month, cfg.policy.retention.max_monthly_violation_cost)),
}
# the queries a table's check runs besides the table's own SQL (part of its code_version)
CHECK_SQL = {"cost_per_model_monthly": ("model_cost_trend",)}
# Every table keeps its month's rows when what it is computed from (a query in
# assets/queries/), the parameters and the SQL are as when they were written
# (warehouse.py `replace_month_unless_same`); a `--force` run writes them again. The tables
# that read few of a run's fields name exactly what they read: a runs file delivered again
# with moved end times keeps them, unless an end moved across the month's end. The others
# read the runs' costs: every month's bill, runs and attribution as noted when written, the
# approvals, the datasets and the tables they read (`DECISION_INPUTS`): an MLflow tracker
# read again, a runs file delivered again with the same runs, keep them.
KEPT_WHEN_SAME = {"retention_violations": "checkpoint_basis",
                  "storage_by_run_status": "checkpoint_basis"}
DECISION_INPUTS = "decision_inputs"


def basis_of(table: str, reads: list[str]) -> tuple[str, dict[str, str]]:
    """The basis query of `table`, and the parameters it needs beside the month's: the decision
    tables among `reads` (its dependencies)."""
    if table in KEPT_WHEN_SAME:
        return KEPT_WHEN_SAME[table], {}
    return DECISION_INPUTS, {"parents": ",".join(sorted(d for d in reads if d in DERIVED))}


COST_COLUMNS = ("cost", "monthly_cost")  # summed into the asset's `cost` headline in the UI


def _headline(con, table: str, month) -> dict:
    columns = {c for (c,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
        [table]).fetchall()}
    # the month's own cost: search_trend's `cost` is each search's cost to date (summed,
    # August read 15,026.23 where its searches cost 7,527.58), its month's part
    # `cost_this_month`
    column = next((c for c in ("cost_this_month", *COST_COLUMNS) if c in columns), None)
    if column is None:
        return {}
    (cost, currency) = con.execute(
        f"SELECT coalesce(fsum({column}), 0), bill_currency(?) FROM {table} WHERE month = ?",
        [month, month]).fetchone()
    # rounded with the rest (`rounded`) to the currency's smallest unit: a fils, a yen
    return {"cost": float(cost), "currency": currency}


def write_unless_same(context: dg.AssetExecutionContext, con, table: str, reads: list[str],
                      params: dict) -> tuple[int, bool]:
    """Write the month of `table` (its `assets/<table>.sql`) unless its basis is as when its rows
    were written (`basis_of`): (rows, kept)."""
    basis, extra = basis_of(table, reads)
    rows, kept = replace_month_unless_same(con, table, params["month"], sql_text(table), params,
                                           sql_text(basis), force=forced(context),
                                           basis_params=extra)
    if kept:
        context.log.info(f"{table}: what it is computed from ({basis}.sql) is as when the "
                         "month was written: its rows are kept")
    return rows, kept


def dataset_region_mismatch(context: dg.AssetExecutionContext, con, month) -> dict:
    """Warn of each dataset whose bucket's transfer lines this month give another region than
    the config's (assets/queries/dataset_region_mismatch.sql): its `dataset_region_mismatch`
    metadata."""
    (currency,) = con.execute("SELECT bill_currency(?)", [month]).fetchone()
    found = []
    for name, bucket, region, regions, lines, cost, bucket_lines, bucket_cost in con.execute(
            sql_text("dataset_region_mismatch"), [month]).fetchall():
        given = ", ".join(regions)
        # the bill's regions and the config's names as text: a control character in a value
        # would forge a line of the command's output
        context.log.warning(
            f"egress: dataset {name} is in {region} by the config, but the bill gives {given} "
            f"for {lines:,} of the {bucket_lines:,} transfer "
            f"line{'' if bucket_lines == 1 else 's'} on its bucket {bucket} "
            f"({in_currency(cost, currency)} of {in_currency(bucket_cost, currency)}): its "
            f"transfer goes to the runs outside {region}, as the config says; if the "
            f"bucket lives in {given}, correct datasets.{name}.region".translate(AS_TEXT))
        found.append({"dataset": name, "bucket": bucket, "config_region": region,
                      "bill_regions": regions, "lines": lines, "bucket_lines": bucket_lines,
                      "cost": cost, "bucket_cost": bucket_cost})
    if not found:
        return {}
    return {"dataset_region_mismatch": dg.MetadataValue.json(
        [rounded(mismatch, currency) for mismatch in found])}


def keep_searches_read(context: dg.AssetExecutionContext, con, month) -> dict:
    """Keep what the month's searches were computed from — every month's input tokens up to
    it, as one digest (assets/queries/searches_read.sql) — as its `search_trend:read`
    basis row: a report of the month tells from it that an earlier month changed since, in
    what no cost shows (a run's metric restated: the searches' best and improvement)."""
    kept, digest = searches_read(con, month)
    if kept != digest:  # (a re-run reading the same writes nothing)
        con.execute("DELETE FROM decision_basis WHERE month = ? AND table_name = ?",
                    [month, SEARCHES_READ])
        con.execute("INSERT INTO decision_basis VALUES (?, ?, ?, 0)",
                    [month, SEARCHES_READ, digest])
    return {}


# what a table's step reports or keeps beside its rows (logged, and returned as metadata)
DERIVED_NOTES = {"egress": dataset_region_mismatch, "search_trend": keep_searches_read}
# the queries they run (part of the table's code_version)
NOTE_SQL = {"search_trend": ("searches_read",)}


def _sql_asset(table: str, deps: list[str], owner: str, description: str,
               check: tuple | None = None) -> dg.AssetsDefinition:
    @dg.asset(
        name=table,
        partitions_def=monthly,
        group_name="decisions",
        kinds={"duckdb"},
        owners=[f"team:{owner}"],
        deps=deps,
        description=description,
        code_version=code_version((table, *CHECK_SQL.get(table, ()), *NOTE_SQL.get(table, ()),
                                   basis_of(table, deps)[0]),
                                  ("cost_pipeline.defs.assets.decisions",
                                   "cost_pipeline.defs.checks")),
        check_specs=[check[0]] if check else None,
    )
    def _asset(
        context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
    ) -> dg.MaterializeResult:
        cfg, month = settings.load(), month_of(context)
        with duckdb.get_connection() as con:
            register_datasets(con, dataset_rows(cfg))
            rows, kept = write_unless_same(context, con, table, deps, month_params(cfg, month))
            headline = _headline(con, table, month)
            notes = DERIVED_NOTES[table](context, con, month) if table in DERIVED_NOTES \
                else {}
            results = [check[1](con, cfg, month)] if check else []
        return dg.MaterializeResult(metadata={**rounded({"rows": rows, **headline, "kept": kept}),
                                              **notes},
                                    check_results=results)

    return _asset


derived_assets = [_sql_asset(name, *spec, check=DERIVED_CHECKS.get(name))
                  for name, spec in DERIVED.items()]
