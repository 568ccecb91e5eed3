"""The monthly report's figures, read from the warehouse: one function per section, each
returning plain rows/dicts (None when the table behind it was never built).

Money that must add up on the page (the headline, the BilledCost → EffectiveCost bridge) is
summed as DECIMAL, so the bridge closes exactly; display rounding happens in render.py.
The multi-line queries are `assets/queries/report_*.sql` and `top_untracked.sql`."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import duckdb

from cost_pipeline.report.limits import over_estimate
from cost_pipeline.report.strip import (
    read_rows,
    searches_read_moved,
    six_months,
    stale_searches_note,
)
from cost_pipeline.warehouse import (
    define_macro,
    materialized_empty,
    rows_of,
    sql_text,
    table_names,
)

COMPONENTS = ["gpu", "cpu", "storage", "network", "other"]
PURPOSES = ["production", "search", "preprocessing", "other", "untracked", "unallocated"]
PURPOSE_LABELS = {"production": "production training", "search": "hyperparameter search",
                  "preprocessing": "preprocessing", "other": "other runs (eval, ad hoc)",
                  "untracked": "untracked", "unallocated": "unallocated"}
# what every list of the levers says once (the pages, the UI's table, the demo's printout):
# each lever is priced from its own table (SPEC §12), and one run can be in several — a re-run
# spot trial preempted across regions is in bound the search, checkpoint before going
# preemptible and co-locate compute & data at once — so their sum is no saving
LEVERS_OVERLAP = ("Each lever is priced on its own: a run can pull several levers, so the "
                  "figures overlap and are not to be added up.")
TOP = 5  # rows in the "top N" lists: a finance director reads the head, the warehouse has all
# rows of the per-model, per-search and retrain tables on the page: a month of 20,000 searches
# and 2,000 models made a 10.7 MB page that took 1.5 s to render; the rest is one row, its
# count and cost, and every row stays in the warehouse's table
LONG = 50


class ReportError(ValueError):
    """The month cannot be reported (no warehouse, month not materialized)."""


def no_lines(con: duckdb.DuckDBPyConnection, month: date) -> str:
    """Why the month has no page: nothing billed in it, or not materialized."""
    if materialized_empty(con, month):
        return (f"{month:%Y-%m} has no billing lines (it was materialized: nothing billed "
                "yet), so there is no report")
    where = con.execute("SELECT coalesce(max(path), 'the warehouse') FROM duckdb_databases() "
                        "WHERE database_name = current_database()").fetchone()[0]
    return f"no billing data for {month:%Y-%m} in {where}: materialize the month first"


def headline(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any]:
    """The month's whole bill (tax, credits, fees included), amortized and as invoiced."""
    row = rows_of(con, sql_text("report_headline"), {"month": month})[0]
    if not row["lines"]:
        raise ReportError(no_lines(con, month))
    row["currency"] = row["currency"] or "USD"
    return row


def reconciliation(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any] | None:
    rows = rows_of(con, "SELECT * FROM reconciliation WHERE month = ?", [month])
    return rows[0] if rows else None


def bill_matrix(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any]:
    """The bill as lines: cost per component × purpose class, and GPU-hours per purpose
    (from the per-run sums, `attribution_runs`)."""
    cells = rows_of(con, """
        SELECT component, purpose_class, fsum(cost) AS cost,
               coalesce(fsum(accelerator_hours) FILTER (WHERE component = 'gpu'), 0) AS gpu_hours
        FROM attribution_runs WHERE month = ? GROUP BY ALL""", [month])
    components = COMPONENTS + sorted({c["component"] for c in cells} - set(COMPONENTS))
    purposes = PURPOSES + sorted({c["purpose_class"] for c in cells} - set(PURPOSES))
    cost = {(c["component"], c["purpose_class"]): c["cost"] for c in cells}
    gpu_hours = {p: sum(c["gpu_hours"] for c in cells if c["purpose_class"] == p)
                 for p in purposes}
    return {
        "components": components,
        "purposes": purposes,
        "cost": cost,
        "row_total": {k: sum(cost.get((k, p), 0.0) for p in purposes) for k in components},
        "column_total": {p: sum(cost.get((k, p), 0.0) for k in components) for p in purposes},
        "total": sum(cost.values()),
        "gpu_hours": gpu_hours,
        "gpu_hours_total": sum(gpu_hours.values()),
    }


def cost_per_model(con: duckdb.DuckDBPyConnection, month: date) -> list[dict[str, Any]]:
    return rows_of(con, sql_text("report_models"), {"month": month})


def head_and_rest(rows: list[dict[str, Any]] | None, keep=lambda row: False,
                  long: int = LONG, cost: str = "cost", sums: tuple[str, ...] = (),
                  ) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
    """The first `long` of `rows` (in their order) and every row `keep` says to show, and
    what the others add up to (`rest_of`), or None when none is left out."""
    if rows is None or len(rows) <= long:
        return rows, None
    shown = [r for i, r in enumerate(rows) if i < long or keep(r)]
    return shown, rest_of([r for i, r in enumerate(rows) if i >= long and not keep(r)], cost,
                          sums)


def rest_of(rows: list[dict[str, Any]], cost: str = "cost",
            sums: tuple[str, ...] = ()) -> dict[str, Any]:
    """What `rows`, left off the page, add up to: {"count", "cost"} (Σ their `cost`), and Σ of
    each column `sums` names (the figures a lever counts beside the cost)."""
    return {"count": len(rows), "cost": sum((r[cost] or 0 for r in rows), 0),
            **{name: sum((r[name] or 0 for r in rows), 0) for name in sums}}


def top_untracked(con: duckdb.DuckDBPyConnection, month: date, component: str | None = None,
                  top: int = TOP) -> list[dict[str, Any]]:
    """The resources to chase: untracked cost per resource, largest first, of every component
    or of one (`gpu`: what the reconciliation counts). The one list the reconciliation check
    (and so its alert), the demo and this report read: assets/queries/top_untracked.sql."""
    return rows_of(con, sql_text("top_untracked"),
                 {"month": month, "component": component, "top": top})


def retention(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any]:
    by_reason = rows_of(con, """
        SELECT reason, count(*) AS objects, sum(bytes) AS bytes, fsum(monthly_cost) AS cost
        FROM retention_violations WHERE month = ? GROUP BY reason ORDER BY cost DESC, reason
        """, [month])
    top = rows_of(con, f"""
        SELECT bucket, key, run_id, run_status, reason, bytes, last_modified, monthly_cost
        FROM retention_violations WHERE month = ?
        ORDER BY monthly_cost DESC, bytes DESC, bucket, key LIMIT {TOP}""", [month])
    return {"by_reason": by_reason, "top": top,
            "objects": sum(r["objects"] for r in by_reason),
            "bytes": sum(r["bytes"] for r in by_reason),
            "cost": sum(r["cost"] for r in by_reason)}


def searches(con: duckdb.DuckDBPyConnection, month: date, with_trend: bool,
             with_approvals: bool = True) -> list[dict[str, Any]]:
    """Search cost per unit of improvement; with the saturation flag when search_trend exists;
    the recorded estimate (estimate --approve) against the cost to date, and whether it was
    approved (`search_approvals.approved`: within the budget) — the latest recording of that
    estimate; NULL when search_approvals is missing — and `over_estimate`, the check's rule
    (cost_pipeline/report/limits.py). An estimate recorded in another currency than the
    search's spend (search_costs holds none) comes as `other_estimate` in `other_currency`,
    to be shown apart, not as "not approved"."""
    trend = ("LEFT JOIN (SELECT search_id, saturating FROM search_trend WHERE month = ?) "
             "AS t USING (search_id)") if with_trend else ""
    saturating = "t.saturating" if with_trend else "CAST(NULL AS BOOLEAN)"
    approvals = ("""LEFT JOIN (
            SELECT search_id, estimated_cost, approved FROM search_approvals
            QUALIFY row_number() OVER (PARTITION BY search_id, estimated_cost
                                       ORDER BY recorded_at DESC, month DESC) = 1
        ) AS ap ON ap.search_id = s.search_id AND ap.estimated_cost = s.estimated_cost"""
                 if with_approvals else "")
    approved = "ap.approved" if with_approvals else "CAST(NULL AS BOOLEAN)"
    # the latest estimate when search_costs holds none because it is in another currency
    # than the spend (search_costs.sql `estimate`): shown in its own, not compared
    elsewhere = with_approvals and bool(con.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'search_approvals' "
        "AND column_name = 'currency'").fetchone()[0])
    if elsewhere:
        define_macro(con, "latest_approvals")
        approvals += """ LEFT JOIN (
            SELECT search_id, estimated_cost, approved, upper(trim(currency)) AS currency
            FROM latest_approvals()
        ) AS la ON la.search_id = s.search_id AND s.estimated_cost IS NULL
                   AND la.currency IS NOT NULL"""
    other = ("la.estimated_cost AS other_estimate, la.currency AS other_currency, "
             "la.approved AS other_approved" if elsewhere else
             "NULL AS other_estimate, NULL AS other_currency, NULL AS other_approved")
    found = rows_of(con, f"""
        SELECT s.search_id, s.model, s.runs, s.configs, s.seeds, s.accelerator_hours, s.cost,
               s.metric_name, s.best_metric, s.previous_best, s.improvement,
               s.cost_per_improvement, {saturating} AS saturating,
               s.estimated_cost, {approved} AS approved, s.cumulative_cost, s.overrun, {other}
        FROM search_costs AS s {trend} {approvals}
        WHERE s.month = ?
        ORDER BY s.cost DESC, s.search_id""", [month, month] if with_trend else [month])
    for s in found:  # flagged as the check `searches_within_estimate` fails it
        s["over_estimate"] = over_estimate(s["cumulative_cost"], s["estimated_cost"])
    return found


def retrains(con: duckdb.DuckDBPyConnection, month: date) -> list[dict[str, Any]]:
    """Per model: this month's retrains, their triggers and the flat ones' cost."""
    return rows_of(con, """
        SELECT model, retrains, schedule_retrains, drift_retrains, manual_retrains,
               unknown_retrains, median_days_between, cost, search_cost, mean_metric_change,
               flat_retrains, flat_retrain_cost
        FROM retrain_cadence WHERE month = ?
        ORDER BY flat_retrain_cost DESC, cost DESC, model""", [month])


def preemption(con: duckdb.DuckDBPyConnection, month: date) -> list[dict[str, Any]]:
    """The spot run chains: restarts, what restarting from scratch repeated, vs on demand —
    every chain, the page showing the head and what the rest add up to (`head_and_rest`): a
    top 5 left the others out without a word, while the lever counted them."""
    return rows_of(con, """
        SELECT chain_id, model, runs, restarts, restarts_from_scratch, cost, lost_cost,
               on_demand_cost, last_run_id, last_run_on_demand_cost,
               spot_cost_more_than_on_demand
        FROM preemption WHERE month = ?
        ORDER BY lost_cost DESC, cost DESC, chain_id""", [month])


def levers(con: duckdb.DuckDBPyConnection, month: date) -> list[dict[str, Any]]:
    return rows_of(con, """
        SELECT rank, lever, dollars, what_it_costs_to_pull, evidence
        FROM cost_levers WHERE month = ? ORDER BY rank""", [month])


def bridge(con: duckdb.DuckDBPyConnection, month: date,
           head: dict[str, Any] | None = None) -> dict[str, Any]:
    """BilledCost (the invoice) → EffectiveCost (amortized): one step per line item type
    whose Σ(EffectiveCost − BilledCost) is not zero. Exact: start + Σ steps = end. `head`:
    the month's `headline`, when the caller has it already."""
    steps = rows_of(con, sql_text("report_bridge"), {"month": month})
    head = head if head is not None else headline(con, month)
    start, end = head["billed_cost"], head["effective_cost"]
    if start + sum((s["amount"] for s in steps), Decimal(0)) != end:  # cannot happen: exact
        raise ReportError(f"{month:%Y-%m}: the BilledCost → EffectiveCost bridge does not close")
    return {"start": start, "steps": steps, "end": end}


def collect(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any]:
    """Every section of the month; a section whose table is missing is None."""
    have = table_names(con)
    if "billing_facts" not in have:
        raise ReportError("the warehouse has no billing_facts table: materialize a month first")

    def section(table: str, read):
        return read(con, month) if table in have else None

    head = headline(con, month)
    # the model-less row (untracked, unallocated) is shown however many models there are
    models, models_rest = head_and_rest(section("cost_per_model_monthly", cost_per_model),
                                        keep=lambda r: r["model"] is None)
    found, searches_rest = head_and_rest(
        section("search_costs", lambda c, m: searches(c, m, "search_trend" in have,
                                                      "search_approvals" in have)))
    # what the models and chains left out add to the levers' figures too
    retrain_rows, retrains_rest = head_and_rest(
        section("retrain_cadence", retrains),
        sums=("search_cost", "flat_retrains", "flat_retrain_cost"))
    chain_rows, chains_rest = head_and_rest(section("preemption", preemption), long=LONG,
                                            sums=("lost_cost",))
    return {
        "month": month,
        "headline": head,
        "reconciliation": section("reconciliation", reconciliation),
        "bill": section("attribution_runs", bill_matrix),
        "models": models,
        "models_rest": models_rest,
        "untracked": section("untracked_usage", top_untracked),
        # the resource the failed reconciliation's alert names first
        "untracked_gpu": section("untracked_usage", lambda c, m: top_untracked(c, m, "gpu", 1)),
        "retention": section("retention_violations", retention),
        "searches": found,
        "searches_rest": searches_rest,
        "levers": section("cost_levers", levers),
        "retrains": retrain_rows,
        "retrains_rest": retrains_rest,
        "preemption": chain_rows,
        "preemption_rest": chains_rest,
        "bridge": bridge(con, month, head),
        "strip": six_months(con, month),  # the 6 months ending with this one
        # the searches' cost to date older than an earlier month's figures (restated after)
        "stale": stale_searches_note(read_rows(con, "period_searches", month, month), month,
                                     searches_read_moved(con, month, have))
        if "search_trend" in have else None,
        "tables": have,
    }
