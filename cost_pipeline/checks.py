"""The figures behind the asset checks: conservation of cost and the reconciliation."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg
import duckdb

ABS_TOLERANCE = 0.01  # a cent
REL_TOLERANCE = 1e-9  # of Σ|EffectiveCost|


def conservation(con: duckdb.DuckDBPyConnection, month: date) -> dg.AssetCheckResult:
    """SPEC §6.6: attribution + untracked + unallocated = EffectiveCost, per currency."""
    billed, magnitude, currency = con.execute(
        "SELECT coalesce(sum(EffectiveCost), 0), coalesce(sum(abs(EffectiveCost)), 0), "
        "any_value(BillingCurrency) FROM billing_facts WHERE month = ?", [month]).fetchone()
    attributed, untracked, unallocated = con.execute(
        "SELECT coalesce(sum(cost) FILTER (WHERE run_id IS NOT NULL), 0), "
        "coalesce(sum(cost) FILTER (WHERE purpose_class = 'untracked'), 0), "
        "coalesce(sum(cost) FILTER (WHERE purpose_class = 'unallocated'), 0) "
        "FROM attribution WHERE month = ?", [month]).fetchone()
    delta = attributed + untracked + unallocated - billed
    tolerance = max(ABS_TOLERANCE, REL_TOLERANCE * magnitude)
    return dg.AssetCheckResult(
        check_name="cost_conserved",
        asset_key="attribution",
        passed=abs(delta) <= tolerance,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "month": f"{month:%Y-%m}",
            "currency": currency or "",
            "effective_cost": billed,
            "attributed": attributed,
            "untracked": untracked,
            "unallocated": unallocated,
            "delta": delta,
            "tolerance": tolerance,
        },
    )


def top_untracked(con: duckdb.DuckDBPyConnection, month: date, limit: int = 5) -> list[dict]:
    rows = con.execute(
        """SELECT l.ResourceId, any_value(l.x_InstanceType), sum(a.accelerator_hours),
                  sum(a.hours), sum(a.cost)
           FROM attribution a JOIN billing_facts l
             ON l.month = a.month AND l.x_SourceLine = a.x_SourceLine
           WHERE a.month = ? AND a.purpose_class = 'untracked' AND a.component = 'gpu'
           GROUP BY 1 ORDER BY 3 DESC NULLS LAST, 5 DESC LIMIT ?""", [month, limit]).fetchall()
    return [
        {"resource_id": r[0], "instance_type": r[1], "gpu_hours": round(r[2] or 0, 3),
         "hours": round(r[3] or 0, 3), "cost": round(r[4] or 0, 2)}
        for r in rows
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
    }
    top = top_untracked(con, month)
    check = dg.AssetCheckResult(
        check_name="reconciliation_within_threshold",
        asset_key="reconciliation",
        passed=row["status"] == "pass",
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={**figures, "top_untracked": dg.MetadataValue.json(top)},
    )
    return check, figures
