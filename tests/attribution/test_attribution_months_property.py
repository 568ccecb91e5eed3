"""Cost is conserved per month and currency when two months of random bills — July in USD,
August in EUR — share one warehouse: each month's attribution adds up to that month's bill,
every line's shares add up to one, no share is negative, and no month reaches into the
other's lines (random bills, runs and listings from test_attribution_property)."""

from __future__ import annotations

from datetime import date, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings

from cost_pipeline.attribution import build_attribution
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.attribution.test_attribution_property import CONFIG, scenarios
from tests.support.warehouse_rows import (
    BILLING_DEFAULTS,
    INVENTORY_DEFAULTS,
    RUN_DEFAULTS,
    insert_lines,
    insert_listing,
    insert_runs,
)

JULY, AUGUST = date(2026, 7, 1), date(2026, 8, 1)
SHIFT = timedelta(days=31)  # July → August, hour for hour (and day for day)


def _moved(row: dict, prefix: str) -> dict:
    out = {k: (v + SHIFT if isinstance(v, date) else v) for k, v in row.items()}
    if "x_SourceLine" in out:
        out["x_SourceLine"] = prefix + out["x_SourceLine"]
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), scenarios())
def test_each_month_conserves_its_own_bill_in_its_own_currency(july, august):
    months = {JULY: (july, "USD", lambda r: r),
              AUGUST: (august, "EUR", lambda r: _moved(r, "aug-"))}
    con = duckdb.connect()
    bills: dict[date, dict[str, float]] = {}
    for month, ((lines, runs, inventory), currency, move) in months.items():
        lines = [move({**BILLING_DEFAULTS, **ln, "BillingCurrency": currency}) for ln in lines]
        insert_lines(con, month, lines)
        insert_runs(con, month, [move({**RUN_DEFAULTS, **r}) for r in runs])
        insert_listing(con, month, [move({**INVENTORY_DEFAULTS, **o}) for o in inventory])
        bills[month] = {ln["x_SourceLine"]: ln["EffectiveCost"] for ln in lines}
    for month in months:
        params = month_params(CONFIG, month)
        build_attribution(con, month, params, [("ds1", "data", "us-west-2")])
        replace_month(con, "reconciliation", month, sql_text("reconciliation"), params)
    for month, bill in bills.items():
        (currency,) = con.execute("SELECT DISTINCT BillingCurrency FROM billing_facts "
                                  "WHERE month = ?", [month]).fetchone()
        assert currency == months[month][1]
        shares = dict(con.execute(
            "SELECT x_SourceLine, sum(share) FROM attribution WHERE month = ? GROUP BY 1",
            [month]).fetchall())
        assert set(shares) == set(bill)  # every line of the month, none of the other month
        assert all(s == pytest.approx(1.0, abs=1e-9) for s in shares.values())
        attributed, negative = con.execute(
            "SELECT sum(cost), count(*) FILTER (WHERE share < -1e-12) FROM attribution "
            "WHERE month = ?", [month]).fetchone()
        assert negative == 0
        assert attributed == pytest.approx(sum(bill.values()), abs=1e-9)
        (total,) = con.execute("SELECT total_effective_cost FROM reconciliation WHERE month = ?",
                               [month]).fetchone()
        assert total == pytest.approx(sum(bill.values()), abs=1e-9)
