"""The monthly report as an asset: the month's HTML page next to the warehouse, and its key
figures, tables and a chart as metadata the Dagster UI shows."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, Warehouse, month_of

READS = ["billing_facts", "attribution", "reconciliation", "untracked_usage",
         "cost_per_model_monthly", "search_costs", "search_trend", "retention_violations",
         "cost_levers"]


@dg.asset(
    partitions_def=monthly,
    group_name="decisions",
    kinds={"html"},
    owners=["team:finops"],
    deps=READS,
    code_version=code_version(("report_headline", "report_models", "report_bridge",
                               "top_untracked", "period_month_totals",
                               "period_purpose_component", "period_untracked_share"),
                              ("cost_pipeline.report.data", "cost_pipeline.report.render",
                               "cost_pipeline.report.charts",
                               "cost_pipeline.report.markdown",
                               "cost_pipeline.report.strip"),
                              ("report/templates/report.html.j2",
                               "report/templates/page.css")),
    description="The month's cost report for a finance director: one self-contained HTML "
    "file in <warehouse folder>/reports/.",
)
def monthly_report(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    # imported here: matplotlib costs a second, and loading the code location needs none of it
    from cost_pipeline.report import report_path, write_report
    from cost_pipeline.report.charts import bill_figure, png_data_uri
    from cost_pipeline.report.markdown import bill_markdown, levers_markdown
    from cost_pipeline.report.money import cents, symbol_of

    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        (lines,) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                               [month]).fetchone()
        if not lines:  # an empty month (nothing billed yet) is not an error: no page to show
            context.log.warning(f"no billing lines for {month:%Y-%m}: no report written")
            return dg.MaterializeResult(metadata={"report": "none (no billing lines)",
                                                  "total_effective_cost": 0.0})
        # written beside its place, moved there only once the run's writes commit
        path = report_path(cfg.warehouse_path, month)
        staged, data = write_report(cfg.warehouse_path, month, con=con,
                                 out=path.with_name(f".{path.name}.pending"))
    html_bytes = staged.stat().st_size
    if isinstance(duckdb, Warehouse):
        duckdb.publish_on_commit(staged, path)
    else:
        staged.replace(path)
    rec = data["reconciliation"]
    metadata = {
        "report": dg.MetadataValue.path(str(path)),
        "html_bytes": html_bytes,
        "total_effective_cost": float(cents(data["headline"]["effective_cost"])),
        "billed_cost": float(cents(data["headline"]["billed_cost"])),
        "currency": data["headline"]["currency"],
        "bill_as_lines": dg.MetadataValue.md(bill_markdown(data["bill"],
                                                           data["headline"]["currency"])),
        "top_levers": dg.MetadataValue.md(levers_markdown(data["levers"],
                                                          data["headline"]["currency"])),
    }
    if rec:
        metadata.update(untracked_share_pct=round(rec["untracked_share"] * 100, 1),
                        reconciliation_status=rec["status"], provisional=rec["provisional"])
    if data["bill"] and data["bill"]["cost"]:
        # a small PNG inline: the UI renders data-URI images inside markdown metadata
        chart = png_data_uri(bill_figure, data["bill"], symbol_of(data["headline"]["currency"]))
        metadata["chart"] = dg.MetadataValue.md(f"![cost by purpose and component]({chart})")
    return dg.MaterializeResult(metadata=metadata)
