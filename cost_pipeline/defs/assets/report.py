"""The monthly report as an asset: the month's HTML page next to the warehouse, and its key
figures, tables and a chart as metadata the Dagster UI shows.

The page is kept (neither drawn nor written again) when what it shows is as when it was
written: the bases of the tables it reads, every month's input tokens, the reconciliations of
the strip's months, the report's code and its path (`page_inputs`), with the page still in
place, byte for byte (`report_pages`)."""

import hashlib
import json
from datetime import date
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.defs.assets.decisions import DECISION_INPUTS
from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.metadata import to_minor_unit
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, Warehouse, forced, month_of
from cost_pipeline.report import report_path
from cost_pipeline.report.strip import STRIP_MONTHS, months_back
from cost_pipeline.warehouse import (
    dataset_rows,
    month_transaction,
    query,
    register_datasets,
    sql_text,
)

READS = ["billing_facts", "attribution", "reconciliation", "untracked_usage",
         "cost_per_model_monthly", "search_costs", "search_trend", "retention_violations",
         "cost_levers", "retrain_cadence", "preemption"]
# the tables among READS whose month has a decision_basis row
SHOWN = sorted(set(READS) - {"billing_facts", "attribution"})
CODE = code_version(("report_headline", "report_models", "report_bridge", "top_untracked",
                     "period_month_totals", "period_purpose_component",
                     "period_untracked_share", DECISION_INPUTS),
                    ("cost_pipeline.report.data", "cost_pipeline.report.render",
                     "cost_pipeline.report.charts", "cost_pipeline.report.markdown",
                     "cost_pipeline.report.strip", "cost_pipeline.report.money",
                     "cost_pipeline.report.bill_lines", "cost_pipeline.text",
                     "cost_pipeline.defs.assets.report"),
                    ("report/templates/report.html.j2", "report/templates/macros.j2",
                     "report/templates/page.css"))


def page_inputs(con, month: date, path: Path) -> str:
    """What the month's page is computed from, as one hash: the bases of the tables it shows
    and every month's input tokens (`decision_inputs.sql`), the strip's months'
    reconciliations (their `decision_basis` rows), the report's code and the page's path."""
    ((tables,),) = query(con, sql_text(DECISION_INPUTS),
                         {"month": month, "parents": ",".join(SHOWN)}).fetchall()
    strip = con.execute(
        "SELECT coalesce(string_agg(month || '=' || inputs || '/' || rows, ',' ORDER BY month),"
        " '') FROM decision_basis WHERE table_name = 'reconciliation' AND month BETWEEN ? AND ?",
        [months_back(month, STRIP_MONTHS), month]).fetchone()[0]
    return hashlib.sha256(json.dumps([tables, strip, CODE, str(path)]).encode()).hexdigest()


def kept_page(con, month: date, inputs: str, path: Path) -> dict | None:
    """The metadata of the month's page when it was written from `inputs` (which name its
    `path`) and is still there with the bytes it was written with; else None."""
    stored = con.execute("SELECT html_sha256, metadata FROM report_pages "
                         "WHERE month = ? AND inputs = ?", [month, inputs]).fetchall()
    if len(stored) != 1:
        return None
    ((digest, metadata),) = stored
    try:  # ~1 ms for a page of 300 KB; a row from before the hashes has none
        if page_digest(path) != digest:
            return None
    except OSError:  # deleted since: drawn again
        return None
    return _metadata_of(json.loads(metadata))


def page_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def store_page(con, month: date, inputs: str, path: Path, html_bytes: int, digest: str,
               metadata: dict) -> None:
    with month_transaction(con):
        con.execute("DELETE FROM report_pages WHERE month = ?", [month])
        con.execute("INSERT INTO report_pages (month, inputs, path, html_bytes, html_sha256, "
                    "metadata) VALUES (?, ?, ?, ?, ?, ?)",
                    [month, inputs, str(path), html_bytes, digest,
                     json.dumps(_plain(metadata), sort_keys=True)])


def _plain(metadata: dict) -> dict:
    """The metadata as JSON values: [kind, value], kind `path`, `md` or `value`."""
    out = {}
    for key, value in metadata.items():
        if isinstance(value, dg.PathMetadataValue):
            out[key] = ["path", value.path]
        elif isinstance(value, dg.MarkdownMetadataValue):
            out[key] = ["md", value.md_str]
        else:
            out[key] = ["value", value]
    return out


def _metadata_of(plain: dict) -> dict:
    makers = {"path": dg.MetadataValue.path, "md": dg.MetadataValue.md}
    return {key: makers[kind](value) if kind in makers else value
            for key, (kind, value) in plain.items()}


@dg.asset(
    partitions_def=monthly,
    group_name="decisions",
    kinds={"html"},
    owners=["team:finops"],
    deps=READS,
    code_version=CODE,
    description="The month's cost report for a finance director: one self-contained HTML "
    "file in <warehouse folder>/reports/.",
)
def monthly_report(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg, month = settings.load(), month_of(context)
    with duckdb.get_connection() as con:
        (lines,) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                               [month]).fetchone()
        if not lines:  # an empty month (nothing billed yet) is not an error: no page to show
            context.log.warning(f"no billing lines for {month:%Y-%m}: no report written")
            return dg.MaterializeResult(metadata={"report": "none (no billing lines)",
                                                  "total_effective_cost": 0.0})
        path = report_path(cfg.warehouse_path, month)
        register_datasets(con, dataset_rows(cfg))  # decision_inputs.sql reads them
        inputs = page_inputs(con, month, path)
        kept = None if forced(context) else kept_page(con, month, inputs, path)
        if kept is not None:
            context.log.info(f"monthly_report: what the page shows is as when it was written: "
                             f"{path} is kept")
            return dg.MaterializeResult(metadata={**kept, "kept": True})
        from cost_pipeline.report import write_report

        # written beside its place, moved there only once the run's writes commit; until
        # that move is registered below, a failure (the chart, the page's row) removes it
        staged, data = write_report(cfg.warehouse_path, month, con=con,
                                    out=path.with_name(f".{path.name}.pending"))
        try:
            metadata = _page_metadata(path, staged.stat().st_size, data)
            store_page(con, month, inputs, path, metadata["html_bytes"], page_digest(staged),
                       metadata)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
    if isinstance(duckdb, Warehouse):
        duckdb.publish_on_commit(staged, path)
    else:
        staged.replace(path)
    return dg.MaterializeResult(metadata={**metadata, "kept": False})


def _page_metadata(path: Path, html_bytes: int, data: dict) -> dict:
    """The page's key figures, tables and chart as the Dagster UI shows them."""
    # imported here: matplotlib costs a second, and neither loading the code location nor a
    # kept page needs it
    from cost_pipeline.report.bill_lines import share_against
    from cost_pipeline.report.charts import bill_figure, png_data_uri
    from cost_pipeline.report.markdown import bill_markdown, levers_markdown
    from cost_pipeline.report.money import symbol_of

    rec = data["reconciliation"]
    metadata = {
        "report": dg.MetadataValue.path(str(path)),
        "html_bytes": html_bytes,
        # to the currency's smallest unit, as the page shows them (a fils, a yen)
        "total_effective_cost": to_minor_unit(float(data["headline"]["effective_cost"]),
                                              data["headline"]["currency"]),
        "billed_cost": to_minor_unit(float(data["headline"]["billed_cost"]),
                                     data["headline"]["currency"]),
        "currency": data["headline"]["currency"],
        "bill_as_lines": dg.MetadataValue.md(bill_markdown(data["bill"],
                                                           data["headline"]["currency"])),
        "top_levers": dg.MetadataValue.md(levers_markdown(data["levers"],
                                                          data["headline"]["currency"])),
    }
    if rec:
        # the page's figures, in percent: half up from the share's own digits (0.5625 is
        # 56.3, where `round` of the double 56.25 gave 56.2, half to even), with the digits
        # that tell a share from its threshold (100 of 1,999 is 5.003 beside 5.0: one
        # decimal read 5.0 beside `reconciliation_status: fail`)
        share_pct, threshold_pct = share_against(rec["untracked_share"], rec["threshold"])
        metadata.update(untracked_share_pct=_percent_value(share_pct),
                        threshold_pct=_percent_value(threshold_pct),
                        reconciliation_status=rec["status"], provisional=rec["provisional"])
    if data["bill"] and data["bill"]["cost"]:
        # a small PNG inline: the UI renders data-URI images inside markdown metadata
        chart = png_data_uri(bill_figure, data["bill"],
                             symbol_of(data["headline"]["currency"]))
        metadata["chart"] = dg.MetadataValue.md(f"![cost by purpose and component]({chart})")
    return metadata


def _percent_value(text: str) -> float | str:
    """A percentage as the page writes it (`5.003%`), as a number (5.003); one that is no
    finite number (`–`, `∞`) as the page's text."""
    try:
        return float(text.removesuffix("%").replace(",", "").replace("−", "-"))
    except ValueError:
        return text
