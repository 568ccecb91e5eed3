"""The figures behind the asset checks: conservation of cost, the reconciliation, billing
completeness, the retention budget and tracker claims the bill never shows."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import dagster as dg
import duckdb

from cost_pipeline.defs.metadata import kept_apart, rounded, to_minor_unit
from cost_pipeline.months import next_month
from cost_pipeline.report import data as report_data
from cost_pipeline.report.bill_lines import share_against
from cost_pipeline.report.limits import ESTIMATE_TOLERANCE, over_limit
from cost_pipeline.warehouse import query, rows_of, sql_text

ABS_TOLERANCE = 0.01  # a cent
REL_TOLERANCE = 1e-9  # of Σ|EffectiveCost|


def conservation(con: duckdb.DuckDBPyConnection, month: date) -> dg.AssetCheckResult:
    """SPEC §6.6: attribution + untracked + unallocated = EffectiveCost, per currency."""
    # the sums reconciliation's coverage reads too (macros.sql month_cost_totals)
    billed, magnitude, currency, attributed, untracked, unallocated = con.execute(
        "SELECT total_effective_cost, effective_cost_magnitude, currency, attributed_cost, "
        "untracked_cost, unallocated_cost FROM month_cost_totals(?)", [month]).fetchone()
    delta = attributed + untracked + unallocated - billed
    tolerance = max(ABS_TOLERANCE, REL_TOLERANCE * magnitude)
    figures = {
        "month": f"{month:%Y-%m}",
        # a month without lines: bill_currency's default, as every other asset names it
        # (it read "")
        "currency": currency or con.execute("SELECT bill_currency(?)", [month]).fetchone()[0],
        "effective_cost": billed,
        "attributed": attributed,
        "untracked": untracked,
        "unallocated": unallocated,
        "delta": delta,
        "tolerance": tolerance,
    }
    return dg.AssetCheckResult(
        check_name="cost_conserved",
        asset_key="attribution",
        passed=abs(delta) <= tolerance,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=kept_apart(rounded(figures), figures, "delta", "tolerance"),
    )


def top_untracked(con: duckdb.DuckDBPyConnection, month: date, currency: str | None,
                  limit: int = 5) -> list[dict]:
    """The untracked GPU resources the failed reconciliation's alert names: the report's and
    the demo's list too (assets/queries/top_untracked.sql), rounded for the metadata (the
    cost to `currency`'s smallest unit)."""
    return [
        {"resource_id": r["resource_id"], "instance_type": r["instance_type"],
         "gpu_hours": round(r["gpu_hours"] or 0, 3), "hours": round(r["hours"] or 0, 3),
         "cost": to_minor_unit(r["cost"] or 0, currency)}
        for r in report_data.top_untracked(con, month, "gpu", limit)
    ]


def reconciliation_outcome(
    con: duckdb.DuckDBPyConnection, month: date
) -> tuple[dg.AssetCheckResult, dict[str, Any]]:
    cursor = con.execute("SELECT * EXCLUDE (by_accelerator_type) FROM reconciliation "
                         "WHERE month = ?", [month])
    names = [d[0] for d in cursor.description]
    row = dict(zip(names, cursor.fetchone(), strict=True))
    figures: dict[str, Any] = {
        "month": f"{month:%Y-%m}",
        "status": row["status"],
        "billed_gpu_hours": row["billed_gpu_hours"],
        "tracked_gpu_hours": row["tracked_gpu_hours"],
        "untracked_gpu_hours": row["untracked_gpu_hours"],
        "untracked_share": row["untracked_share"],
        "threshold": row["threshold"],
        "untracked_cost_share": row["untracked_cost_share"],
        "coverage": row["coverage"],
        "over_claimed_gpu_hours": row["over_claimed_gpu_hours"],
        "unbilled_claim_gpu_hours": row["unbilled_claim_gpu_hours"],
        "provisional": bool(row["provisional"]),
        # the currency of the costs in top_untracked (alerts write them in it)
        "currency": con.execute("SELECT bill_currency(?)", [month]).fetchone()[0],
    }
    top = top_untracked(con, month, figures["currency"])
    shown = kept_apart(rounded({**figures, "top_untracked": dg.MetadataValue.json(top)}),
                       figures, "untracked_share", "threshold")
    check = dg.AssetCheckResult(
        check_name="reconciliation_within_threshold",
        asset_key="reconciliation",
        passed=row["status"] == "pass",
        severity=dg.AssetCheckSeverity.ERROR,
        # the share and its threshold in percent as the month's page writes them, from the
        # exact figures, beside those rounded for display: the alert writes these (a share
        # of 0.062452… shown 0.0625 read 6.3% in the alert, rounded twice, 6.2% on the page)
        metadata={**shown, **dict(zip(("untracked_percent", "threshold_percent"),
                                      share_against(row["untracked_share"], row["threshold"]),
                                      strict=True))},
    )
    return check, figures


# ----------------------------------------------------------------- completeness and budgets

UNBILLED_EPSILON = 1e-9  # GPU-hours; below it a claim is float noise, not a finding
TOP_RESOURCES = 10

def billing_complete(con: duckdb.DuckDBPyConnection, month: date,
                     today: date) -> dg.AssetCheckResult:
    """Every day of the month has Usage lines: ERROR for a closed month; for the open month
    a WARN over the days through yesterday (a bill lags about a day)."""
    end = next_month(month)
    closed = end <= today
    last_day = end - timedelta(days=1) if closed else min(today, end) - timedelta(days=1)
    expected = [month + timedelta(days=i) for i in range((last_day - month).days + 1)]
    present = {d for (d,) in con.execute(
        "SELECT DISTINCT CAST(ChargePeriodStart AS DATE) FROM billing_facts "
        "WHERE month = ? AND ChargeCategory = 'Usage'", [month]).fetchall()}
    (usage_lines,) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ? AND "
                                 "ChargeCategory = 'Usage'", [month]).fetchone()
    missing = [d for d in expected if d not in present]
    return dg.AssetCheckResult(
        check_name="billing_complete",
        asset_key="billing_facts",
        passed=not missing,
        severity=dg.AssetCheckSeverity.ERROR if closed else dg.AssetCheckSeverity.WARN,
        metadata=rounded({
            "month": f"{month:%Y-%m}",
            "closed": closed,
            "days_expected": len(expected),
            "days_with_usage": len(present & set(expected)),
            "missing_days": ", ".join(f"{d:%Y-%m-%d}" for d in missing),
            "usage_lines": int(usage_lines),
        }),
    )


def retention_within_budget(con: duckdb.DuckDBPyConnection, month: date,
                            budget: float) -> dg.AssetCheckResult:
    """SPEC §8: the month's retention violations cost at most the configured budget (WARN)."""
    by_reason = con.execute(
        "SELECT reason, count(*), coalesce(sum(bytes), 0), coalesce(fsum(monthly_cost), 0) "
        "FROM retention_violations WHERE month = ? GROUP BY 1 ORDER BY 1", [month]).fetchall()
    top_runs = con.execute(
        "SELECT coalesce(run_id, '(orphan)'), any_value(run_status), count(*), "
        "fsum(monthly_cost) FROM retention_violations WHERE month = ? "
        "GROUP BY 1 ORDER BY 4 DESC, 1 LIMIT ?", [month, TOP_RESOURCES]).fetchall()
    # to 10 decimal places (CUR's own precision for amounts): 0.01 + 65.40 + 34.59 reads
    # 100.00000000000001 in doubles
    cost = round(sum(r[3] for r in by_reason), 10)
    # over the budget: the cost minus it, to 10 decimals, above 1e-12 of the larger of the two.
    # Figures equal within the doubles' precision are equal at any size: at $1M and more a
    # double's spacing passes 1e-10 (1,100,000.10 + 2,200,000.20 reads 3300000.3000000003)
    # and 10 decimals alone failed a budget of exactly the cost; a cent over is over to $1e9
    over = over_limit(cost - budget, max(abs(cost), abs(budget)))
    currency = con.execute("SELECT bill_currency(?)", [month]).fetchone()[0]
    figures = {
        "month": f"{month:%Y-%m}",
        "currency": currency,
        "violation_cost": cost,
        "budget": budget,
        "objects": sum(r[1] for r in by_reason),
        "bytes": int(sum(r[2] for r in by_reason)),
        **{f"cost_{r[0]}": r[3] for r in by_reason},
        "top_runs": dg.MetadataValue.json([
            {"run_id": r[0], "run_status": r[1], "objects": r[2],
             "cost": to_minor_unit(r[3], currency)}
            for r in top_runs]),
    }
    return dg.AssetCheckResult(
        check_name="retention_within_budget",
        asset_key="retention_violations",
        passed=not over,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=kept_apart(rounded(figures), figures, "violation_cost", "budget"),
    )


def tracker_claims_billed(con: duckdb.DuckDBPyConnection, month: date,
                          params: dict[str, Any]) -> dg.AssetCheckResult:
    """Runs that list resources no billing line of the month shows (wrong ids, other
    accounts): `reconciliation.unbilled_claim_gpu_hours` and the resources behind it (WARN)."""
    (hours,) = con.execute("SELECT unbilled_claim_gpu_hours FROM reconciliation "
                           "WHERE month = ?", [month]).fetchone()
    resources = query(con, sql_text("unbilled_resources"), params).fetchall()
    return dg.AssetCheckResult(
        check_name="tracker_claims_billed",
        asset_key="reconciliation",
        passed=hours <= UNBILLED_EPSILON,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=rounded({
            "month": f"{month:%Y-%m}",
            "unbilled_claim_gpu_hours": hours,
            "unbilled_resources": len(resources),
            "resource_ids": ", ".join(r[0] for r in resources[:TOP_RESOURCES]),
            "top_unbilled_resources": dg.MetadataValue.json([
                {"resource_id": r[0], "runs": r[1], "run_ids": list(r[2]),
                 "gpu_hours": round(r[3], 3)} for r in resources[:TOP_RESOURCES]]),
        }),
    )


def model_cost_trend(con: duckdb.DuckDBPyConnection, month: date,
                     max_growth: float) -> dg.AssetCheckResult:
    """SPEC §12: no model costs more than `max_growth` × the median of its previous 3 months
    (at least 2 of them held by the warehouse and billed in this month's currency, a held
    month without its cost a cost of 0); the models that do, with their cost and that median,
    and the models not judged because their earlier months were billed in another currency
    (WARN). The SQL and what counts as a previous month: assets/queries/model_cost_trend.sql."""
    rows = rows_of(con, sql_text("model_cost_trend"),
                   {"month": month, "max_growth": max_growth})
    currency = con.execute("SELECT bill_currency(?)", [month]).fetchone()[0]
    models = [
        {"model": r["model"], "cost": to_minor_unit(r["cost"], currency),
         "previous_median": to_minor_unit(r["previous_median"], currency),
         "previous_months": list(r["months"]), "judged": r["judged"],
         "growth": (growth_shown(r["cost"] / r["previous_median"], max_growth)
                    if r["previous_median"] and r["previous_median"] > 0 else None)}
        for r in rows]
    exceeding = [m for r, m in zip(rows, models, strict=True) if r["exceeds"]]
    # a month billed in another currency than its earlier months is no trend: the amounts are
    # not comparable (SPEC §5), so the model is not judged, and the check says why
    other_currency = [
        f"{r['model']} ({', '.join(r['other_currency_months'])} billed in "
        f"{', '.join(r['other_currencies'])}, not {r['currency']})"
        for r in rows if not r["judged"] and r["other_currency_months"]]
    metadata = rounded({
        "month": f"{month:%Y-%m}",
        "currency": currency,
        "max_growth": max_growth,
        "models_judged": sum(1 for m in models if m["judged"]),
        "models_not_judged": sum(1 for m in models if not m["judged"]),
        "models_exceeding": len(exceeding),
        "models": ", ".join(m["model"] for m in exceeding),
        "not_judged_other_currency": "; ".join(other_currency),
        "exceeding": dg.MetadataValue.json(exceeding),
    })
    return dg.AssetCheckResult(
        check_name="model_cost_trend",
        asset_key="cost_per_model_monthly",
        passed=not exceeding,
        severity=dg.AssetCheckSeverity.WARN,
        # the limit as configured, unrounded: a growth kept apart from it is shown with the
        # digits that tell the two apart, which 4 digits of the limit would hide again
        metadata={**metadata, "max_growth": max_growth},
    )


def growth_shown(growth: float, max_growth: float) -> float:
    """A model's growth (its cost over its previous median) to 3 decimals, or to the digits
    that tell it from `max_growth` when 3 make the two equal and they are not (`kept_apart`):
    $1,440.01 over a $960 median, 1.5000104…, read 1.5 beside a 1.5 limit on a failed check."""
    raw = {"growth": float(growth), "max_growth": float(max_growth)}
    shown = {key: round(value, 3) for key, value in raw.items()}
    return kept_apart(shown, raw, "growth", "max_growth")["growth"]


def searches_within_estimate(con: duckdb.DuckDBPyConnection, month: date,
                             tolerance: float = ESTIMATE_TOLERANCE) -> dg.AssetCheckResult:
    """SPEC §12: every search active in the month has a recorded estimate and has cost at most
    `tolerance` × it so far (assets/queries/searches_within_estimate.sql) (WARN). A search
    whose estimate is in another currency than its spend is named apart, not failed: it was
    approved, and the amounts do not compare."""
    found = rows_of(con, sql_text("searches_within_estimate"),
                    {"month": month, "tolerance": tolerance})
    other_currency = [f for f in found if f["reason"] == "other_currency"]
    failing = [{k: v for k, v in f.items() if k != "estimate_currency"}
               for f in found if f["reason"] != "other_currency"]
    ((searches,),) = con.execute("SELECT count(*) FROM search_costs WHERE month = ?",
                                 [month]).fetchall()
    unapproved = [f["search_id"] for f in failing if f["reason"] == "no_estimate"]
    over = [f["search_id"] for f in failing if f["reason"] == "over_estimate"]
    currency = con.execute("SELECT bill_currency(?)", [month]).fetchone()[0]
    return dg.AssetCheckResult(
        check_name="searches_within_estimate",
        asset_key="search_costs",
        passed=not failing,
        severity=dg.AssetCheckSeverity.WARN,
        # `tolerance` is a factor of the estimate, no amount: not rounded as money (a yen
        # bill's 1.1 read 1.0)
        metadata={"tolerance": tolerance, **rounded({
            "month": f"{month:%Y-%m}",
            "currency": currency,
            "searches": int(searches),
            "without_estimate": ", ".join(unapproved),
            "over_estimate": ", ".join(over),
            "estimate_in_other_currency": ", ".join(
                f"{f['search_id']} ({f['estimate_currency']})" for f in other_currency),
            "failing": dg.MetadataValue.json([
                failing_search(f, tolerance, currency) for f in failing]),
        })},
    )


def failing_search(found: dict[str, Any], tolerance: float,
                   currency: str | None) -> dict[str, Any]:
    """A search the check fails, its estimate, cost to date and overrun as amounts of the bill
    (`currency`'s smallest unit), the cost and the overrun with the digits that tell them from
    their limits (`tolerance` × the estimate, and the part of it over the estimate) when the
    smallest unit makes them equal (`kept_apart`): $1,100.004 against a $1,000 estimate read
    a cost of 1100.0 and an overrun of 100.0, the limit itself, on a failed check."""
    shown = {k: (to_minor_unit(v, currency) if isinstance(v, float) else v)
             for k, v in found.items()}
    if found["reason"] != "over_estimate" or found["cumulative_cost"] is None:
        return shown
    estimate = float(found["estimated_cost"])
    for key, limit in (("cumulative_cost", tolerance * estimate),
                       ("overrun", (tolerance - 1) * estimate)):
        raw = {key: float(found[key]), "limit": limit}
        apart = kept_apart({key: shown[key], "limit": to_minor_unit(limit, currency)}, raw,
                           key, "limit")
        shown[key] = apart[key]
    return shown
