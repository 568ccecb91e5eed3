"""The asset checks of issue 4 — billing completeness, the retention budget, tracker claims the
bill never shows — on hand-made months, then wired on the demo quarter's assets."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.cli.main import print_checks
from cost_pipeline.cli.materialize import CheckOutcome, MonthResult
from cost_pipeline.config import parse_config
from cost_pipeline.defs.checks import (
    billing_complete,
    retention_within_budget,
    searches_within_estimate,
    tracker_claims_billed,
)
from cost_pipeline.warehouse import month_params
from tests.support.sql_backend import run_month
from tests.support.warehouse_rows import insert, insert_lines

MARCH = date(2024, 3, 1)


def usage_day(day: int, category: str = "Usage") -> dict:
    start = datetime(2024, 3, day, 10)
    return {"ChargePeriodStart": start, "ChargePeriodEnd": start + timedelta(hours=1),
            "ChargeCategory": category, "EffectiveCost": 1.0, "x_CostComponent": "cpu",
            "x_SourceLine": f"L{day}-{category}"}


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    yield c
    c.close()


def test_closed_month_missing_a_day_is_an_error_naming_the_day(con):
    # every day but the 15th has usage; the 15th only a tax line, which does not count
    insert_lines(con, MARCH, [usage_day(d) for d in range(1, 32) if d != 15]
                 + [usage_day(15, "Tax")])
    result = billing_complete(con, MARCH, today=date(2024, 5, 2))
    assert not result.passed and result.severity.value == "ERROR"
    meta = {k: v.value for k, v in result.metadata.items()}
    assert meta["closed"] is True and meta["days_expected"] == 31
    assert meta["days_with_usage"] == 30 and meta["missing_days"] == "2024-03-15"
    assert meta["usage_lines"] == 30


def test_complete_closed_month_passes(con):
    insert_lines(con, MARCH, [usage_day(d) for d in range(1, 32)])
    result = billing_complete(con, MARCH, today=date(2024, 4, 1))  # closed since today
    assert result.passed and result.severity.value == "ERROR"


def test_open_month_is_a_warning_over_the_days_through_yesterday(con):
    # today is the 10th: days 1..9 are expected (a bill lags about a day); the 5th is missing
    insert_lines(con, MARCH, [usage_day(d) for d in (1, 2, 3, 4, 6, 7, 8, 9)])
    result = billing_complete(con, MARCH, today=date(2024, 3, 10))
    meta = {k: v.value for k, v in result.metadata.items()}
    assert not result.passed and result.severity.value == "WARN"
    assert meta["closed"] is False and meta["days_expected"] == 9
    assert meta["missing_days"] == "2024-03-05"
    # on the 1st nothing is expected yet
    assert billing_complete(con, MARCH, today=date(2024, 3, 1)).passed


def violation(key: str, cost: float, reason: str = "dead_run", run_id: str | None = "r1") -> dict:
    return {"bucket": "ckpt", "key": key, "run_id": run_id, "run_status": "FAILED",
            "reason": reason, "bytes": 1000, "monthly_cost": cost}


def test_retention_budget_is_a_warning_with_the_cost_by_reason(con):
    insert(con, "retention_violations", MARCH,
           [violation("a", 60.0), violation("b", 30.0, "beyond_keep_last", "r2"),
            violation("c", 20.0, "orphan", None)], {})
    over = retention_within_budget(con, MARCH, budget=100.0)
    meta = {k: v.value for k, v in over.metadata.items()}
    assert not over.passed and over.severity.value == "WARN"
    assert meta["violation_cost"] == pytest.approx(110.0) and meta["budget"] == 100.0
    assert meta["objects"] == 3 and meta["bytes"] == 3000
    assert meta["cost_dead_run"] == 60.0 and meta["cost_orphan"] == 20.0
    assert meta["top_runs"][0] == {"run_id": "r1", "run_status": "FAILED", "objects": 1,
                                   "cost": 60.0}
    assert retention_within_budget(con, MARCH, budget=110.0).passed  # at the budget: fine



def test_violations_costing_exactly_the_budget_are_within_it(con):
    """0.01 + 65.40 + 34.59 = 100.00, the budget: within it, though the three reasons' costs
    added up read 100.00000000000001 in doubles and failed it. A cent less of budget fails."""
    insert(con, "retention_violations", MARCH,
           [violation("a", 0.01, "beyond_keep_last"), violation("b", 65.40),
            violation("c", 34.59, "orphan", None)], {})
    at = retention_within_budget(con, MARCH, budget=100.0)
    meta = {k: v.value for k, v in at.metadata.items()}
    assert at.passed
    assert (meta["violation_cost"], meta["budget"]) == (100.0, 100.0)
    assert not retention_within_budget(con, MARCH, budget=99.99).passed


def test_violations_costing_millions_exactly_the_budget_are_within_it(con):
    """1,100,000.10 + 2,200,000.20 = 3,300,000.30, the budget: within it, though the two
    reasons' costs added up read 3300000.3000000003 in doubles, 5e-10 above the budget, which
    10 decimal places still told apart and failed. A cent less of budget fails."""
    insert(con, "retention_violations", MARCH,
           [violation("a", 1_100_000.10, "beyond_keep_last"), violation("b", 2_200_000.20)], {})
    assert retention_within_budget(con, MARCH, budget=3_300_000.30).passed
    assert not retention_within_budget(con, MARCH, budget=3_300_000.29).passed

H10 = datetime(2024, 3, 5, 10)


def test_runs_claiming_resources_the_bill_never_shows_are_listed():
    line = {"ChargePeriodStart": H10, "ChargePeriodEnd": H10 + timedelta(hours=1),
            "ChargeCategory": "Usage", "ResourceId": "i-billed", "EffectiveCost": 8.0,
            "x_CostComponent": "gpu", "x_AcceleratorCount": 8, "x_UsageHours": 1.0,
            "x_InstanceUsage": True, "x_ResourceKind": "instance", "x_SourceLine": "L1"}
    # the bill reaches the month's end: the runs' hours are all hours it covers
    last_hour = line | {"ChargePeriodStart": datetime(2024, 3, 31, 23),
                        "ChargePeriodEnd": datetime(2024, 4, 1), "x_SourceLine": "L2"}

    def run(run_id, resources, gpus, hours):
        return {"run_id": run_id, "status": "FINISHED", "purpose": "production",
                "start_time": H10, "end_time": H10 + timedelta(hours=hours),
                "resource_ids": resources, "gpus": gpus}

    # r1 names a ghost instance for 3 h on 2 GPUs (6 GPU-hours); r2 a ghost volume for
    # 2 h, gpus unset (counted as 1: 2 GPU-hours); r3 names only what the bill shows
    runs = [run("r1", ["i-billed", "i-ghost"], 2, 3), run("r2", ["vol-ghost"], None, 2),
            run("r3", ["i-billed"], 8, 1)]
    con = run_month([line, last_hour], runs, [], {}, MARCH)
    params = month_params(parse_config({}, Path(".")), MARCH)
    result = tracker_claims_billed(con, MARCH, params)
    meta = {k: v.value for k, v in result.metadata.items()}
    assert not result.passed and result.severity.value == "WARN"
    assert meta["unbilled_claim_gpu_hours"] == pytest.approx(8.0)
    assert meta["resource_ids"] == "i-ghost, vol-ghost"
    assert meta["top_unbilled_resources"] == [
        {"resource_id": "i-ghost", "runs": 1, "run_ids": ["r1"], "gpu_hours": 6.0},
        {"resource_id": "vol-ghost", "runs": 1, "run_ids": ["r2"], "gpu_hours": 2.0}]
    # the listed hours are the reconciliation's figure, resource by resource
    assert sum(r["gpu_hours"] for r in meta["top_unbilled_resources"]) == pytest.approx(
        meta["unbilled_claim_gpu_hours"])

    clean = run_month([line], [run("r3", ["i-billed"], 8, 1)], [], {}, MARCH)
    assert tracker_claims_billed(clean, MARCH, params).passed


def test_unbilled_resources_of_the_open_month_count_the_hours_its_bill_covers():
    """The bill of December so far reaches 6 December 24:00: a run RUNNING since 1 December on
    2 GPUs, listing a resource the bill never shows, has spent 144 h × 2 of the month the bill
    covers (not the month's 744 h × 2); a run that started on the 8th is past the bill's end,
    which could not show its resource yet, and is not listed."""
    december = date(2026, 12, 1)
    lines = [{"ChargePeriodStart": datetime(2026, 12, d, 23),
              "ChargePeriodEnd": datetime(2026, 12, d + 1), "ChargeCategory": "Usage",
              "ResourceId": "i-billed", "EffectiveCost": 1.0, "x_CostComponent": "gpu",
              "x_AcceleratorCount": 1, "x_UsageHours": 1.0, "x_InstanceUsage": True,
              "x_ResourceKind": "instance", "x_SourceLine": f"L{d}"} for d in range(1, 7)]
    runs = [{"run_id": "u", "status": "RUNNING", "purpose": "production",
             "start_time": datetime(2026, 12, 1), "end_time": None,
             "resource_ids": ["i-unbilled"], "gpus": 2},
            {"run_id": "late", "status": "RUNNING", "purpose": "production",
             "start_time": datetime(2026, 12, 8), "end_time": None,
             "resource_ids": ["i-later"], "gpus": 8}]
    con = run_month(lines, runs, [], {}, december)
    result = tracker_claims_billed(con, december,
                                   month_params(parse_config({}, Path(".")), december))
    meta = {k: v.value for k, v in result.metadata.items()}
    assert meta["unbilled_claim_gpu_hours"] == pytest.approx(288.0)
    assert meta["top_unbilled_resources"] == [
        {"resource_id": "i-unbilled", "runs": 1, "run_ids": ["u"], "gpu_hours": 288.0}]


def test_demo_quarter_carries_every_check_with_its_figures(demo_quarter):
    _, results = demo_quarter
    expected = {("billing_facts", "billing_complete"), ("attribution", "cost_conserved"),
                ("reconciliation", "reconciliation_within_threshold"),
                ("reconciliation", "tracker_claims_billed"),
                ("retention_violations", "retention_within_budget")}
    for month, result in results.items():
        checks = {(c.asset, c.name): c for c in result.checks}
        assert set(checks) >= expected, month
        complete = checks["billing_facts", "billing_complete"]
        # the demo months are closed (2026-07 … 09) and have usage every day
        assert complete.passed and complete.severity == "ERROR"
        assert complete.metadata["days_with_usage"] == complete.metadata["days_expected"]
        assert checks["reconciliation", "tracker_claims_billed"].passed
    september = {(c.asset, c.name): c for c in results[date(2026, 9, 1)].checks}
    budget = september["retention_violations", "retention_within_budget"]
    # dead search checkpoints pile up: September's violations exceed the $100 budget
    assert not budget.passed and budget.severity == "WARN"
    assert budget.metadata["violation_cost"] > budget.metadata["budget"] == 100.0
    # a WARN never makes the month fail: only August's reconciliation is an ERROR failure
    errors = {m: [c.name for c in r.failed_error_checks] for m, r in results.items()}
    assert errors == {date(2026, 7, 1): [], date(2026, 8, 1): ["reconciliation_within_threshold"],
                      date(2026, 9, 1): []}


def test_retention_figures_of_a_dinar_bill_keep_their_fils(con, capsys):
    """A bill in KWD (3 decimals): 1.0175 + 1.0175 = 2.035 of violations and a run's 1.0175
    read KWD 2.035 and KWD 1.018 (half up, once); to the cent they were 2.04 and 1.02, which
    the printed line and the alert wrote as KWD 2.040 and KWD 1.020."""
    insert_lines(con, MARCH, [{**usage_day(1), "BillingCurrency": "KWD"}])
    insert(con, "retention_violations", MARCH,
           [violation("a", 1.0175), violation("b", 1.0175, run_id="r2")], {})
    over = retention_within_budget(con, MARCH, budget=1.0)
    meta = {k: v.value for k, v in over.metadata.items()}
    assert meta["currency"] == "KWD"
    assert (meta["violation_cost"], meta["cost_dead_run"], meta["budget"]) == (2.035, 2.035, 1.0)
    assert [r["cost"] for r in meta["top_runs"]] == [1.018, 1.018]
    # a budget that reads alike in fils (2.0349: KWD 2.035) keeps the digits apart
    near = retention_within_budget(con, MARCH, budget=2.0349)
    meta = {k: v.value for k, v in near.metadata.items()}
    assert not near.passed and (meta["violation_cost"], meta["budget"]) == (2.035, 2.0349)
    outcome = CheckOutcome("retention_violations", "retention_within_budget", over.passed,
                           "WARN", {k: v.value for k, v in over.metadata.items()})
    print_checks(MonthResult(MARCH, True, "r", None, [outcome]))
    assert capsys.readouterr().out.splitlines() == [
        "2024-03 retention_violations.retention_within_budget: FAIL (WARN)  "
        "violation_cost KWD 2.035, budget KWD 1.000"]


def test_the_estimate_tolerance_is_a_factor_not_yen(con):
    """searches_within_estimate's `tolerance` (1.1 × the estimate) is no amount: a yen bill's
    metadata read 1.0, rounded to the yen as its amounts are."""
    insert_lines(con, MARCH, [{**usage_day(1), "BillingCurrency": "JPY"}])
    result = searches_within_estimate(con, MARCH)
    meta = {k: v.value for k, v in result.metadata.items()}
    assert meta["currency"] == "JPY" and meta["tolerance"] == 1.1

