"""`run_costs` (SPEC §12) on a hand-made month: every figure below is worked out by hand from
the attribution rules of SPEC §6, through the real attribution SQL."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.support.warehouse_rows import (
    BILLING_DEFAULTS,
    RUN_DEFAULTS,
    insert_lines,
    insert_runs,
)

MARCH, APRIL = date(2024, 3, 1), date(2024, 4, 1)
TOL = 1e-9


def line(name, resource, start, cost, component, *, g=0, usage_hours=None, kind="instance",
         category="Usage"):
    return {**BILLING_DEFAULTS, "x_SourceLine": name, "ResourceId": resource,
            "ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=start.hour + 1),
            "ChargeCategory": category, "EffectiveCost": cost, "x_CostComponent": component,
            "x_AcceleratorCount": g, "x_UsageHours": usage_hours,
            "x_InstanceUsage": usage_hours is not None, "x_ResourceKind": kind}


def run(run_id, start, end, **cols):
    return {**RUN_DEFAULTS, "run_id": run_id, "status": "FINISHED", "start_time": start,
            "end_time": end, **cols}


def materialize(con, month):
    params = month_params(parse_config({}, Path(".")), month)
    build_attribution(con, month, params, [])
    return replace_month(con, "run_costs", month, sql_text("run_costs"), params)


@pytest.fixture
def con():
    c = duckdb.connect()
    at = datetime(2024, 3, 5, 10)
    insert_lines(c, MARCH, [
        line("gpu", "i-gpu", at, 32.0, "gpu", g=8, usage_hours=1.0),
        line("cpu", "i-cpu", at, 0.40, "cpu", usage_hours=1.0),
        line("ebs", "vol-1", at, 0.10, "storage", kind="volume"),
        line("net", "i-gpu", at, 0.08, "network"),
        line("misc", "i-gpu", at, 0.02, "other"),
        line("tax", None, at, 5.0, "other", kind="other", category="Tax"),
    ])
    insert_runs(c, MARCH, [
        run("A", at, datetime(2024, 3, 5, 11), model="m1", purpose="production", gpus=4,
            resource_ids=["i-gpu", "i-cpu", "vol-1"]),
        run("B", datetime(2024, 3, 5, 10, 30), datetime(2024, 3, 5, 11), model="m1",
            search_id="s1", gpus=2, resource_ids=["i-gpu"]),
        run("C", at, datetime(2024, 3, 5, 11), model="m2", resource_ids=["i-nothing"]),
    ])
    april = datetime(2024, 4, 2, 0)
    insert_lines(c, APRIL, [line("gpu-apr", "i-gpu", april, 8.0, "gpu", g=8, usage_hours=0.5)])
    # April's snapshot names another model for A: each month takes its own snapshot's
    insert_runs(c, APRIL, [run("A", april, datetime(2024, 4, 2, 1), model="m1-v2",
                               purpose="production", gpus=8, resource_ids=["i-gpu"])])
    yield c
    c.close()


def by_run(con, month):
    cur = con.execute("SELECT * EXCLUDE (month) FROM run_costs WHERE month = ? ORDER BY run_id",
                      [month])
    names = [d[0] for d in cur.description]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def assert_row(actual, expected):
    for column, value in expected.items():
        if isinstance(value, float):
            assert actual[column] == pytest.approx(value, abs=TOL), column
        else:
            assert actual[column] == value, column


def test_run_costs_hand_computed(con):
    assert materialize(con, MARCH) == 2  # C claims nothing billed: no row
    rows = by_run(con, MARCH)
    # gpu line (G = 8, d = 1 h): A 1 h × 4/8 = 0.5 → 16.00, 0.5 h × 8 = 4 accelerator-hours;
    #   B 0.5 h × 2/8 = 0.125 → 4.00, 1 accelerator-hour; untracked 0.375 → 12.00
    # cpu line: A alone, share 1 → 0.40 and 1 cpu-hour (A's gpu hours are not cpu-hours)
    # EBS volume (no instance hours: d = 1 h): A alone → 0.10
    # network and other lines of i-gpu (G = 0, d = i-gpu's 1 instance-hour): A 1 + B 0.5 =
    #   S 1.5 > 1 → A 1/1.5, B 0.5/1.5 of 0.08 and of 0.02; the tax line is unallocated
    assert_row(rows["A"], {
        "model": "m1", "purpose_class": "production", "search_id": None,
        "gpu_cost": 16.0, "cpu_cost": 0.40, "storage_cost": 0.10,
        "network_cost": 0.08 / 1.5, "other_cost": 0.02 / 1.5,
        "cost": 16.0 + 0.40 + 0.10 + 0.10 / 1.5, "accelerator_hours": 4.0, "cpu_hours": 1.0})
    assert_row(rows["B"], {
        "model": "m1", "purpose_class": "search", "search_id": "s1",
        "gpu_cost": 4.0, "cpu_cost": 0.0, "storage_cost": 0.0,
        "network_cost": 0.04 / 1.5, "other_cost": 0.01 / 1.5,
        "cost": 4.0 + 0.05 / 1.5, "accelerator_hours": 1.0, "cpu_hours": 0.0})
    # every run's row is the Σ of its attribution rows
    ((attributed,),) = con.execute("SELECT sum(cost) FROM attribution WHERE month = ? AND "
                                   "run_id IS NOT NULL", [MARCH]).fetchall()
    assert sum(r["cost"] for r in rows.values()) == pytest.approx(attributed, abs=TOL)


def test_months_are_separate_and_take_their_own_snapshot(con):
    materialize(con, MARCH)
    assert materialize(con, APRIL) == 1
    # April: A has the whole card (8 of 8 GPUs) for its 1 h, the line 0.5 instance-hours
    #   → share min(1, 1/0.5) = 1 → 8.00 and 0.5 × 8 = 4 accelerator-hours
    assert_row(by_run(con, APRIL)["A"], {
        "model": "m1-v2", "gpu_cost": 8.0, "cost": 8.0, "accelerator_hours": 4.0,
        "cpu_hours": 0.0})
    assert by_run(con, MARCH)["A"]["model"] == "m1"
    # re-running a month replaces it: the same rows, not twice as many
    assert materialize(con, MARCH) == 2
    ((count,),) = con.execute("SELECT count(*) FROM run_costs").fetchall()
    assert count == 3


def test_a_runs_month_is_the_exact_sum_of_its_rows():
    """Five hours of $0.011 are $0.055: the month's row holds the double of the exact DECIMAL
    Σ of its attribution rows, as the reports add them (each row's cost cast first), not the
    doubles' Σ 0.05499999999999999 that the write-back's tags rounded to 0.05. Its
    accelerator-hours alike: 5 × 0.0003 = 0.0015, not 0.0014999999999999998."""
    c = duckdb.connect()
    hours = [datetime(2024, 3, 5, h) for h in range(10, 15)]
    insert_lines(c, MARCH, [line(f"gpu-{at.hour}", "i-gpu", at, 0.011, "gpu", g=1,
                                 usage_hours=0.0003) for at in hours]
                 + [line(f"net-{at.hour}", "i-gpu", at, -0.011, "network") for at in hours])
    insert_runs(c, MARCH, [run("R", hours[0], datetime(2024, 3, 5, 15), gpus=1,
                               resource_ids=["i-gpu"])])
    assert materialize(c, MARCH) == 1
    row = by_run(c, MARCH)["R"]
    # by hand: R alone on i-gpu every hour, share 1: gpu 5 × 0.011 = 0.055, network
    # 5 × −0.011 = −0.055, cost 0; accelerator-hours 5 × 0.0003 × 1 GPU = 0.0015
    assert (row["gpu_cost"], row["network_cost"], row["cost"]) == (0.055, -0.055, 0.0)
    assert row["accelerator_hours"] == 0.0015
