"""`retrain_cadence` and `preemption` (SPEC §12) on small hand-made months; every expected
figure is worked out by hand next to it. Preemption runs the real attribution over billing
lines, so shares and the ListCost join are the production ones."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import (
    ensure_schema,
    month_params,
    register_datasets,
    replace_month,
    sql_text,
    summarize_month,
)
from tests.support.warehouse_rows import insert_lines, insert_runs

FEB, MARCH = date(2024, 2, 1), date(2024, 3, 1)
d = datetime
TOL = 1e-9


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    ensure_schema(c)
    register_datasets(c, [])  # the SQL joins the config's datasets: none here
    yield c
    c.close()


def build(con, table: str, month: date = MARCH, **policy) -> list[dict]:
    cfg = parse_config({"policy": policy}, Path("."))
    replace_month(con, table, month, sql_text(table), month_params(cfg, month))
    cur = con.execute(f"SELECT * FROM {table} WHERE month = ? ORDER BY ALL", [month])
    names = [c[0] for c in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def attr(con, run_id, purpose_class, cost, month=MARCH):
    con.execute(
        """INSERT INTO attribution_rows BY NAME
           SELECT * EXCLUDE (run_id), run_hash_of(run_id) AS run_hash FROM (
           SELECT ? AS month, key_hash(?) AS line_key, ? AS run_id, ? AS purpose_class,
                  'gpu' AS component, ? AS cost, 1.0 AS share, 'compute' AS rule)""",
        [month, f"line-{run_id}", run_id, purpose_class, cost])
    summarize_month(con, month)  # the per-run sums the attribution step writes with it


# ---------------------------------------------------------------------------- retrain_cadence

def prod(run_id, model, start, metric, trigger=None):
    return {"run_id": run_id, "model": model, "purpose": "production", "status": "FINISHED",
            "start_time": start, "end_time": start.replace(hour=6), "metric_name": "auc",
            "metric_value": metric, "trigger": trigger}


RETRAIN_RUNS = [
    # churn: retrained monthly on a schedule, the metric flat; one manual retrain that helped
    prod("c1", "churn", d(2024, 1, 5), 0.900, "schedule"),
    prod("c2", "churn", d(2024, 2, 5), 0.901, "schedule"),     # +0.001: flat
    prod("c3", "churn", d(2024, 3, 5), 0.9005, "schedule"),    # −0.0005: flat
    prod("c4", "churn", d(2024, 3, 20), 0.905, "manual"),      # +0.0045: moved
    # fraud: retrained on drift (a small change, but drift said retrain: never flat)
    prod("f1", "fraud", d(2023, 12, 1), 0.800),
    prod("f2", "fraud", d(2024, 3, 10), 0.801, "drift"),
    # credit: a model with one retrain (nothing before it: no change, no cadence)
    prod("k1", "credit", d(2024, 3, 15), 0.700),
    {"run_id": "s1", "model": "churn", "purpose": "search", "search_id": "S1",
     "status": "FINISHED", "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 2)},
]


def retrain_months(con):
    for month in (FEB, MARCH):                  # each month's tracker snapshot: every run
        insert_runs(con, month, RETRAIN_RUNS)
    attr(con, "c2", "production", 80.0, FEB)
    for run_id, cls, cost in (("c2", "production", 10.0), ("c3", "production", 100.0),
                              ("c4", "production", 120.0), ("f2", "production", 50.0),
                              ("k1", "production", 30.0), ("s1", "search", 40.0)):
        attr(con, run_id, cls, cost)


def test_retrain_cadence_per_model(con):
    retrain_months(con)
    rows = {r["model"]: r for r in build(con, "retrain_cadence")}
    assert sorted(rows) == ["churn", "credit", "fraud"]
    churn = rows["churn"]
    assert churn["retrains"] == 2                                   # c3, c4
    assert churn["by_trigger"] == {"schedule": 1, "drift": 0, "manual": 1, "unknown": 0}
    assert (churn["schedule_retrains"], churn["manual_retrains"]) == (1, 1)
    # starts 01-05, 02-05, 03-05, 03-20: gaps 31, 29 (2024 is a leap year), 15 → median 29
    assert churn["median_days_between"] == pytest.approx(29.0, abs=TOL)
    assert churn["cost"] == pytest.approx(230.0, abs=TOL)          # c2 10 + c3 100 + c4 120
    assert churn["search_cost"] == pytest.approx(40.0, abs=TOL)
    # (−0.0005 + 0.0045) / 2
    assert churn["mean_metric_change"] == pytest.approx(0.002, abs=TOL)
    assert (churn["flat_retrains"], churn["flat_retrain_cost"]) == (1, pytest.approx(100.0))

    fraud = rows["fraud"]
    assert (fraud["retrains"], fraud["drift_retrains"]) == (1, 1)
    # 2023-12-01 → 2024-03-10: 31 + 31 + 29 + 9 days, within the 6 months ending in March
    assert fraud["median_days_between"] == pytest.approx(100.0, abs=TOL)
    assert fraud["mean_metric_change"] == pytest.approx(0.001, abs=TOL)
    assert (fraud["flat_retrains"], fraud["flat_retrain_cost"]) == (0, 0.0)
    assert (fraud["cost"], fraud["search_cost"]) == (pytest.approx(50.0), 0.0)

    credit = rows["credit"]
    assert credit["retrains"] == 1 and credit["unknown_retrains"] == 1
    assert credit["median_days_between"] is None and credit["mean_metric_change"] is None
    assert (credit["flat_retrains"], credit["flat_retrain_cost"], credit["cost"]) == (
        0, 0.0, pytest.approx(30.0))


def test_retrains_spanning_months(con):
    retrain_months(con)
    feb = build(con, "retrain_cadence", FEB)
    assert [r["model"] for r in feb] == ["churn"]                 # fraud, credit: none in Feb
    churn = feb[0]
    assert (churn["retrains"], churn["schedule_retrains"]) == (1, 1)
    assert churn["median_days_between"] == pytest.approx(31.0, abs=TOL)   # 01-05 → 02-05
    assert churn["mean_metric_change"] == pytest.approx(0.001, abs=TOL)
    assert (churn["flat_retrains"], churn["flat_retrain_cost"]) == (1, pytest.approx(80.0))
    assert churn["cost"] == pytest.approx(80.0)
    # March is unchanged by February's rows
    march = {r["model"]: r for r in build(con, "retrain_cadence")}
    assert march["churn"]["flat_retrain_cost"] == pytest.approx(100.0)


def test_the_flat_threshold_is_the_policy(con):
    retrain_months(con)
    rows = {r["model"]: r for r in build(con, "retrain_cadence",
                                         retrain={"min_metric_change": 0.005})}
    # c4's +0.0045 is flat too under a 0.005 threshold; fraud's drift retrain still is not
    assert (rows["churn"]["flat_retrains"], rows["churn"]["flat_retrain_cost"]) == (
        2, pytest.approx(220.0))
    assert rows["fraud"]["flat_retrains"] == 0


def test_the_levers_threshold_reads_as_written(con):
    """The retrain lever's evidence wrote the policy's threshold as a double's text: "moved
    the metric by at least 1e-05". It reads as a decimal, as the config wrote it."""
    runs = [prod("c1", "churn", d(2024, 2, 5), 0.900, "schedule"),
            prod("c2", "churn", d(2024, 3, 5), 0.9005, "schedule")]   # +0.0005: not flat
    insert_runs(con, MARCH, runs)
    attr(con, "c2", "production", 70.0)
    policy = {"retrain": {"min_metric_change": 0.00001}}
    build(con, "retrain_cadence", **policy)
    build(con, "preemption", **policy)
    (retrain,) = [r for r in build(con, "cost_levers", **policy)
                  if r["lever"] == "retrain on measured decay"]
    assert retrain["evidence"] == ("every measured retrain moved the metric by at least "
                                   "0.00001 or was triggered by drift (1 retrain)")
    policy = {"retrain": {"min_metric_change": 0.001}}             # +0.0005 is flat
    build(con, "retrain_cadence", **policy)
    (retrain,) = [r for r in build(con, "cost_levers", **policy)
                  if r["lever"] == "retrain on measured decay"]
    assert retrain["evidence"].startswith("1 of 1 retrain was not triggered by drift and "
                                          "moved the metric less than 0.001: ")


def test_a_trigger_outside_the_vocabulary_is_unknown_and_may_be_flat(con):
    """`trigger: cron` refused the month's runs (an optional field); it counts as unknown,
    and, not being drift, a flat change of it is a flat retrain."""
    runs = [prod("c1", "churn", d(2024, 2, 5), 0.900, "schedule"),
            prod("c2", "churn", d(2024, 3, 5), 0.9005, "cron"),     # +0.0005: flat
            prod("c3", "churn", d(2024, 3, 20), 0.9105, "drift")]   # +0.01
    insert_runs(con, MARCH, runs)
    attr(con, "c2", "production", 70.0)
    attr(con, "c3", "production", 30.0)
    (churn,) = build(con, "retrain_cadence")
    assert churn["by_trigger"] == {"schedule": 0, "drift": 1, "manual": 0, "unknown": 1}
    assert (churn["flat_retrains"], churn["flat_retrain_cost"]) == (1, pytest.approx(70.0))


def test_a_metric_change_is_between_values_of_one_metric(con):
    """m3's February retrain logs logloss after January's auc: 0.901 − 0.900 is no change of
    anything (it was +0.001, a flat retrain priced by the lever). March's first retrain
    follows that logloss run: unknown too; its second follows an auc run."""
    runs = [prod("m1", "m3", d(2024, 1, 4), 0.900, "schedule"),
            {**prod("m2", "m3", d(2024, 2, 4), 0.901, "schedule"), "metric_name": "logloss"},
            prod("m3a", "m3", d(2024, 3, 4), 0.950, "schedule"),
            prod("m3b", "m3", d(2024, 3, 18), 0.951, "schedule")]
    for month in (FEB, MARCH):
        insert_runs(con, month, runs)
    attr(con, "m2", "production", 10.0, FEB)
    attr(con, "m3a", "production", 20.0)
    attr(con, "m3b", "production", 30.0)
    (feb,) = build(con, "retrain_cadence", FEB)
    assert (feb["retrains"], feb["mean_metric_change"], feb["flat_retrains"],
            feb["flat_retrain_cost"]) == (1, None, 0, 0.0)
    (march,) = build(con, "retrain_cadence")
    assert march["retrains"] == 2
    assert march["mean_metric_change"] == pytest.approx(0.001, abs=TOL)   # m3b − m3a alone
    assert (march["flat_retrains"], march["flat_retrain_cost"]) == (1, pytest.approx(30.0))


def test_a_metric_change_exactly_at_the_threshold_is_not_flat(con):
    """0.811 → 0.813 moved the metric by 0.002, the threshold: not flat (|change| < 0.002 is),
    but 0.813 − 0.811 reads 0.0019999999999998908 in doubles and was counted flat, its $40 a
    lever. The change is kept to 10 decimals: 0.002. 0.813 → 0.8149 (0.0019) still is flat."""
    runs = [prod("c1", "churn", d(2024, 2, 5), 0.811, "schedule"),
            prod("c2", "churn", d(2024, 3, 5), 0.813, "schedule"),     # +0.002: moved
            prod("c3", "churn", d(2024, 3, 20), 0.8149, "schedule")]   # +0.0019: flat
    insert_runs(con, MARCH, runs)
    attr(con, "c2", "production", 40.0)
    attr(con, "c3", "production", 25.0)
    (churn,) = build(con, "retrain_cadence")
    assert churn["retrains"] == 2
    assert (churn["flat_retrains"], churn["flat_retrain_cost"]) == (1, 25.0)
    assert churn["mean_metric_change"] == 0.00195                  # (0.002 + 0.0019) / 2

    con.execute("DELETE FROM tracker_runs WHERE run_id = 'c3'")
    (churn,) = build(con, "retrain_cadence")
    assert (churn["flat_retrains"], churn["flat_retrain_cost"]) == (0, 0.0)
    assert churn["mean_metric_change"] == 0.002


MAY_2026 = date(2026, 5, 1)


def retrain_and_lever(con, month: date) -> tuple[list[dict], str]:
    """The month's retrain_cadence rows and the evidence of its lever."""
    rows = build(con, "retrain_cadence", month)
    (lever,) = [r for r in build(con, "cost_levers", month)
                if r["lever"] == "retrain on measured decay"]
    return rows, lever["evidence"]


def tied_retrains(con, names: dict[str, str], metric_t0: float | None = 0.800) -> tuple:
    """risk's production runs: t0 in April, then t1 ($30) and t2 ($36) started at the same
    instant of May, each run under the name `names` gives it."""
    at = d(2026, 5, 12)
    runs = [prod(names["t0"], "risk", d(2026, 4, 12), metric_t0, "manual"),
            prod(names["t1"], "risk", at, 0.805, "schedule"),
            prod(names["t2"], "risk", at, 0.8005, "schedule")]
    con.execute("DELETE FROM tracker_runs")
    con.execute("DELETE FROM attribution_rows")
    insert_runs(con, MAY_2026, runs)
    attr(con, names["t1"], "production", 30.0, MAY_2026)
    attr(con, names["t2"], "production", 36.0, MAY_2026)
    return retrain_and_lever(con, MAY_2026)


@pytest.mark.parametrize("names", [
    {"t0": "r-t0", "t1": "r-t1", "t2": "r-t2"},
    {"t0": "r-t0", "t1": "r-t3", "t2": "r-t2"},
    {"t0": "r-t9", "t1": "r-t2", "t2": "r-t1"}])
def test_retrains_started_at_one_instant_each_compare_with_the_run_before_them(con, names):
    """t1 and t2 start at the same instant: neither is the other's previous production run,
    both follow t0 (auc 0.800): +0.005 and +0.0005 (flat under the default 0.002). t2 was
    compared with t1 (−0.0045, mean 0.00025, nothing flat), or t1 with t2 once the ids sort
    the other way: the figures followed the run ids."""
    ((risk,), evidence) = tied_retrains(con, names)
    assert risk["retrains"] == 2
    assert risk["mean_metric_change"] == 0.00275                   # (0.005 + 0.0005) / 2
    assert (risk["flat_retrains"], risk["flat_retrain_cost"]) == (1, 36.0)
    # starts 04-12, 05-12, 05-12: gaps 30 and 0 days, median 15
    assert risk["median_days_between"] == pytest.approx(15.0, abs=TOL)
    assert evidence == ("1 of 2 retrains was not triggered by drift and moved the metric "
                        "less than 0.002: risk: 1 of 2 retrains flat, $36.00, every 15.0 days")


def test_retrains_at_one_instant_after_a_run_without_a_metric_are_unmeasured(con):
    """t0 logged no metric_value: neither of t1 and t2 (started at one instant) is measured,
    both for that reason. The lever's count of reasons paired t2 with t1 and gave t2 none of
    them: "none measured (1 whose previous production run has no metric_value)" of 2."""
    for names in ({"t0": "r-t0", "t1": "r-t1", "t2": "r-t2"},
                  {"t0": "r-t0", "t1": "r-t2", "t2": "r-t1"}):
        ((risk,), evidence) = tied_retrains(con, names, metric_t0=None)
        assert (risk["mean_metric_change"], risk["flat_retrains"]) == (None, 0)
        assert evidence == ("2 retrains this month, none measured (2 whose previous production "
                            "run has no metric_value): flatness cannot be measured")


@pytest.mark.parametrize(("late", "early"), [("p-a", "p-b"), ("p-b", "p-a")])
def test_the_previous_run_of_runs_started_at_one_instant_is_the_one_that_ended_last(
        con, late, early):
    """Two production runs of April start at one instant: the one that ended last (08:00,
    auc 0.790) is the previous run of May's retrain (0.8005: +0.0105, not flat), whatever
    their ids; it was the one whose id sorts last (the other's 0.800: +0.0005, flat)."""
    at = d(2026, 4, 12)
    runs = [{**prod(late, "risk", at, 0.790), "end_time": at.replace(hour=8)},
            {**prod(early, "risk", at, 0.800), "end_time": at.replace(hour=6)},
            prod("r-may", "risk", d(2026, 5, 12), 0.8005, "schedule")]
    insert_runs(con, MAY_2026, runs)
    attr(con, "r-may", "production", 36.0, MAY_2026)
    ((risk,), evidence) = retrain_and_lever(con, MAY_2026)
    assert risk["mean_metric_change"] == 0.0105
    assert (risk["flat_retrains"], risk["flat_retrain_cost"]) == (0, 0.0)
    assert evidence == ("every measured retrain moved the metric by at least 0.002 or was "
                        "triggered by drift (1 retrain)")



def test_a_month_of_measured_and_unmeasured_retrains_says_how_many_were_measured(con):
    """One retrain measured (+0.01, not flat) and one a model's first production run: the
    evidence said "every measured retrain moved the metric … (2 retrains)", as if both were
    measured. It says how many were, and why the other was not."""
    runs = [prod("p-apr", "churn", d(2026, 4, 6), 0.80, "schedule"),
            prod("p-may", "churn", d(2026, 5, 6), 0.81, "schedule"),
            prod("c-may", "credit", d(2026, 5, 9), 0.70, "manual")]
    insert_runs(con, MAY_2026, runs)
    attr(con, "p-may", "production", 30.0, MAY_2026)
    attr(con, "c-may", "production", 12.0, MAY_2026)
    _, evidence = retrain_and_lever(con, MAY_2026)
    assert evidence == ("every measured retrain moved the metric by at least 0.002 or was "
                        "triggered by drift (1 of 2 retrains measured; 1 with a metric_value "
                        "but no previous production run of its model to compare with)")

# --------------------------------------------------------------------------------- preemption

def instance_line(name, start_h, end_h, cost, list_cost, pricing="spot", component="gpu",
                  resource=None, day=2):
    usage = component in ("gpu", "cpu")
    return {"x_SourceLine": name, "ResourceId": resource or name, "ChargeCategory": "Usage",
            "ChargePeriodStart": d(2024, 3, day, start_h),
            "ChargePeriodEnd": d(2024, 3, day, end_h),
            "EffectiveCost": cost, "ListCost": list_cost, "x_PricingCategory": pricing,
            "x_CostComponent": component, "x_AcceleratorCount": 1 if component == "gpu" else 0,
            "x_UsageHours": float(end_h - start_h) if usage else None,
            "x_InstanceUsage": usage, "x_ResourceKind": "instance" if usage else "volume"}


def run(run_id, start_h, end_h, resources, restart_of=None, resumed_from=None,
        status="KILLED", model="churn", day=2):
    return {"run_id": run_id, "model": model, "purpose": "search", "search_id": "S1",
            "status": status, "start_time": d(2024, 3, day, start_h),
            "end_time": d(2024, 3, day, end_h), "resource_ids": resources,
            "restart_of": restart_of, "resumed_from": resumed_from}


LINES = [
    # chain a → b (from scratch) → c (resumed from b's checkpoint): spot at $1/h, list $3/h
    instance_line("i-a", 0, 4, 4.0, 12.0),
    instance_line("i-b", 5, 9, 4.0, 12.0),
    instance_line("i-c", 10, 16, 6.0, 18.0),
    instance_line("vol-c", 10, 16, 0.6, 0.6, pricing="on_demand", component="storage"),
    # chain x → y (from scratch); y ran 3 of the line's 6 hours: share 0.5
    instance_line("i-x", 0, 6, 6.0, 9.0),
    instance_line("i-y", 6, 12, 6.0, 9.0),
    # chain p → q (resumed)
    instance_line("i-p", 0, 2, 2.0, 6.0, day=3),
    instance_line("i-q", 3, 5, 2.0, 6.0, day=3),
    # on demand: n1 → n2 restarted from scratch, but no spot: not listed
    instance_line("i-n1", 0, 2, 6.0, 6.0, pricing="on_demand", day=4),
    instance_line("i-n2", 2, 4, 6.0, 6.0, pricing="on_demand", day=4),
    # a spot run that was never interrupted: a chain of one
    instance_line("i-solo", 0, 1, 1.0, 3.0, day=5),
]
RUNS = [
    run("a", 0, 4, ["i-a"]),
    run("b", 5, 9, ["i-b"], restart_of="a"),
    run("c", 10, 16, ["i-c", "vol-c"], restart_of="b", resumed_from="s3://ckpt/b/step-300",
        status="FINISHED"),
    run("x", 0, 6, ["i-x"], model="fraud"),
    run("y", 6, 9, ["i-y"], restart_of="x", status="FINISHED", model="fraud"),
    run("p", 0, 2, ["i-p"], day=3),
    run("q", 3, 5, ["i-q"], restart_of="p", resumed_from="p/ckpt-1", status="FINISHED", day=3),
    run("n1", 0, 2, ["i-n1"], day=4),
    run("n2", 2, 4, ["i-n2"], restart_of="n1", status="FINISHED", day=4),
    run("solo", 0, 1, ["i-solo"], status="FINISHED", day=5),
]


def preemption_month(con, lines=LINES, runs=RUNS) -> list[dict]:
    insert_lines(con, MARCH, lines)
    insert_runs(con, MARCH, runs)
    cfg = parse_config({}, Path("."))
    build_attribution(con, MARCH, month_params(cfg, MARCH), [])
    return build(con, "preemption")


def test_chains_their_restarts_and_what_from_scratch_repeated(con):
    rows = {r["chain_id"]: r for r in preemption_month(con)}
    assert sorted(rows) == ["a", "p", "solo", "x"]                 # n1's chain has no spot
    a = rows["a"]
    assert (a["model"], a["runs"], a["restarts"], a["restarts_from_scratch"]) == (
        "churn", 3, 2, 1)
    assert a["cost"] == pytest.approx(14.6, abs=TOL)                # 4 + 4 + 6 + 0.6
    assert a["lost_cost"] == pytest.approx(4.0, abs=TOL)           # b repeated a; c resumed
    assert a["on_demand_cost"] == pytest.approx(42.6, abs=TOL)     # 12 + 12 + 18 + 0.6
    assert a["last_run_id"] == "c"
    assert a["last_run_on_demand_cost"] == pytest.approx(18.6, abs=TOL)
    assert a["spot_cost_more_than_on_demand"] is False             # 14.6 < 18.6

    x = rows["x"]
    assert (x["model"], x["runs"], x["restarts"], x["restarts_from_scratch"]) == (
        "fraud", 2, 1, 1)
    # y ran 3 h of i-y's 6: cost 6 × 0.5 = 3, on demand 9 × 0.5 = 4.5
    assert x["cost"] == pytest.approx(9.0, abs=TOL)
    assert x["lost_cost"] == pytest.approx(6.0, abs=TOL)
    assert x["on_demand_cost"] == pytest.approx(13.5, abs=TOL)
    assert x["last_run_on_demand_cost"] == pytest.approx(4.5, abs=TOL)
    assert x["spot_cost_more_than_on_demand"] is True              # 9 > 4.5

    p = rows["p"]                                                   # a restart that resumed
    assert (p["runs"], p["restarts"], p["restarts_from_scratch"]) == (2, 1, 0)
    assert (p["cost"], p["lost_cost"]) == (pytest.approx(4.0), 0.0)
    assert p["on_demand_cost"] == pytest.approx(12.0)
    assert p["last_run_on_demand_cost"] == pytest.approx(6.0)
    assert p["spot_cost_more_than_on_demand"] is False

    solo = rows["solo"]
    assert (solo["runs"], solo["restarts"], solo["lost_cost"], solo["cost"]) == (
        1, 0, 0.0, pytest.approx(1.0))
    # the lever: Σ lost_cost
    assert sum(r["lost_cost"] for r in rows.values()) == pytest.approx(10.0, abs=TOL)


def test_a_line_without_list_cost_leaves_on_demand_unknown(con):
    lines = [{**ln, "ListCost": None} if ln["x_SourceLine"] == "i-a" else ln for ln in LINES]
    rows = {r["chain_id"]: r for r in preemption_month(con, lines=lines)}
    assert rows["a"]["on_demand_cost"] is None
    # the last run's own lines are priced: its figure and the comparison stand
    assert rows["a"]["last_run_on_demand_cost"] == pytest.approx(18.6)
    assert rows["a"]["spot_cost_more_than_on_demand"] is False


def test_restart_of_an_unknown_run_or_itself_and_a_cycle(con):
    lines = [instance_line("i-u", 0, 2, 2.0, 6.0), instance_line("i-v", 3, 5, 2.0, 6.0),
             instance_line("i-s", 6, 8, 2.0, 6.0)]
    runs = [run("u", 0, 2, ["i-u"], restart_of="gone"),            # its first run is unknown
            run("v", 3, 5, ["i-v"], restart_of="u"),
            run("s", 6, 8, ["i-s"], restart_of="s")]               # names itself: no restart
    rows = {r["chain_id"]: r for r in preemption_month(con, lines=lines, runs=runs)}
    assert sorted(rows) == ["s", "u"]
    # u restarted "gone" from scratch (a restart), v restarted u from scratch: u was repeated
    assert (rows["u"]["runs"], rows["u"]["restarts"], rows["u"]["restarts_from_scratch"]) == (
        2, 2, 2)
    assert rows["u"]["lost_cost"] == pytest.approx(2.0)
    assert (rows["s"]["runs"], rows["s"]["restarts"], rows["s"]["lost_cost"]) == (1, 0, 0.0)


@pytest.mark.parametrize(("a_cost", "b_cost", "on_demand", "below"), [
    (1.10, 2.20, 3.30, 3.29), (1_100_000.10, 2_200_000.20, 3_300_000.30, 3_300_000.29)])
def test_a_chain_costing_exactly_its_last_run_on_demand_is_not_dearer(con, a_cost, b_cost,
                                                                       on_demand, below):
    """a ($1.10 spot) restarted from scratch by b ($2.20 spot, $3.30 on demand): the chain
    cost 1.10 + 2.20 = 3.30, what b alone costs on demand, so it is not dearer — but the sum
    reads 3.3000000000000003 in doubles and was; at a million times the amounts
    ($1,100,000.10 + $2,200,000.20 against $3,300,000.30) it read 5e-10 above, which 10
    decimal places still told apart. A cent below the chain's cost on demand, it is dearer."""
    runs = [run("a", 0, 2, ["i-a"]), run("b", 3, 5, ["i-b"], restart_of="a", status="FINISHED")]

    def chain(b_list_cost: float) -> dict:
        with duckdb.connect(":memory:") as c:
            ensure_schema(c)
            register_datasets(c, [])
            lines = [instance_line("i-a", 0, 2, a_cost, on_demand),
                     instance_line("i-b", 3, 5, b_cost, b_list_cost)]
            (row,) = preemption_month(c, lines=lines, runs=runs)
            return row

    at = chain(on_demand)
    assert (at["cost"], at["last_run_id"], at["last_run_on_demand_cost"]) == (
        pytest.approx(on_demand, rel=TOL), "b", on_demand)
    assert at["spot_cost_more_than_on_demand"] is False
    assert chain(below)["spot_cost_more_than_on_demand"] is True


@pytest.mark.parametrize(("cheap", "dear"), [("b", "c"), ("c", "b"), ("b", "a0")])
def test_restarts_started_at_one_instant_are_the_chains_last_runs_together(con, cheap, dear):
    """a ($4 spot) is restarted from scratch twice at one instant: `cheap` ($3 spot, $6 on
    demand) and `dear` ($3 spot, $12). Both are the chain's last runs; the figure prices them
    together, $18, against the chain's $10: not dearer. The last run was the one whose id
    sorts last: $12 (not dearer) or $6 (dearer) as the runs were named."""
    lines = [instance_line("i-a", 0, 4, 4.0, 12.0), instance_line("i-cheap", 5, 9, 3.0, 6.0),
             instance_line("i-dear", 5, 9, 3.0, 12.0)]
    runs = [run("a", 0, 4, ["i-a"]),
            run(cheap, 5, 9, ["i-cheap"], restart_of="a", status="FINISHED"),
            run(dear, 5, 9, ["i-dear"], restart_of="a", status="FINISHED")]
    (chain,) = preemption_month(con, lines=lines, runs=runs)
    assert (chain["chain_id"], chain["runs"], chain["restarts"],
            chain["restarts_from_scratch"]) == ("a", 3, 2, 2)
    assert (chain["cost"], chain["lost_cost"], chain["on_demand_cost"]) == (
        pytest.approx(10.0, abs=TOL), pytest.approx(4.0, abs=TOL),      # a repeated once
        pytest.approx(30.0, abs=TOL))
    assert chain["last_run_id"] == min(cheap, dear)                 # the first tied by id
    assert chain["last_run_on_demand_cost"] == pytest.approx(18.0, abs=TOL)   # 6 + 12
    assert chain["spot_cost_more_than_on_demand"] is False          # 10 < 18
    preempt = levers(con)["checkpoint before going preemptible"]
    assert preempt["evidence"] == (
        "2 restarts from scratch in 1 spot chain repeated $4.00: a (3 runs, 2 from scratch) "
        "$4.00 of $10.00; 0 chains cost more than their last run on demand")


def test_a_tied_last_run_without_compute_this_month_leaves_the_figure_unknown(con):
    """b and c restart a at one instant; c lists no billed resource: the last runs' on-demand
    figure would be b's alone, a part of it. It is unknown, as a last run without compute is."""
    lines = [instance_line("i-a", 0, 4, 4.0, 12.0), instance_line("i-b", 5, 9, 3.0, 6.0)]
    runs = [run("a", 0, 4, ["i-a"]),
            run("b", 5, 9, ["i-b"], restart_of="a", status="FINISHED"),
            run("c", 5, 9, ["i-none"], restart_of="a", status="FINISHED")]
    (chain,) = preemption_month(con, lines=lines, runs=runs)
    assert (chain["last_run_id"], chain["last_run_on_demand_cost"],
            chain["spot_cost_more_than_on_demand"]) == ("b", None, None)
    assert chain["cost"] == pytest.approx(7.0, abs=TOL)


@pytest.mark.parametrize(("first", "second"), [("m", "n"), ("n", "m")])
def test_a_cycle_whose_runs_start_at_one_instant_has_the_same_figures_whatever_the_ids(
        con, first, second):
    """`first` and `second` restart each other from scratch and start at one instant: the
    cycle's first run is the lower id (a chain must be named by one run), and every figure
    is the same whichever run that is; o resumes the cycle later and is the last run."""
    lines = [instance_line("i-1", 0, 2, 2.0, 6.0), instance_line("i-2", 0, 2, 3.0, 9.0),
             instance_line("i-o", 6, 8, 2.0, 6.0)]
    runs = [run(first, 0, 2, ["i-1"], restart_of=second),
            run(second, 0, 2, ["i-2"], restart_of=first),
            run("o", 6, 8, ["i-o"], restart_of=second, resumed_from="ckpt", status="FINISHED")]
    (chain,) = preemption_month(con, lines=lines, runs=runs)
    assert chain["chain_id"] == "m"
    assert (chain["runs"], chain["restarts"], chain["restarts_from_scratch"]) == (3, 3, 2)
    assert (chain["cost"], chain["lost_cost"], chain["on_demand_cost"]) == (
        pytest.approx(7.0, abs=TOL), pytest.approx(5.0, abs=TOL), pytest.approx(21.0, abs=TOL))
    assert (chain["last_run_id"], chain["last_run_on_demand_cost"],
            chain["spot_cost_more_than_on_demand"]) == ("o", pytest.approx(6.0), True)


# -------------------------------------------------------------------------------- the levers

def levers(con) -> dict[str, dict]:
    for table in ("retrain_cadence", "preemption"):
        build(con, table)
    return {r["lever"]: r for r in build(con, "cost_levers")}


def test_the_two_levers_in_the_mission_order_with_their_dollars(con):
    preemption_month(con)            # builds the month's attribution: the retrains' rows after it
    retrain_months(con)
    rows = levers(con)
    order = [r["lever"] for r in sorted(rows.values(), key=lambda r: r["rank"])]
    assert order[-1] == "use a cheaper card"
    retrain = rows["retrain on measured decay"]
    assert retrain["dollars"] == pytest.approx(100.0)              # c3, flat on a schedule
    assert "1 of 4 retrains was not" in retrain["evidence"] and "churn" in retrain["evidence"]
    preempt = rows["checkpoint before going preemptible"]
    assert preempt["dollars"] == pytest.approx(10.0)               # a 4 + x 6
    assert "2 restarts from scratch" in preempt["evidence"]
    # ties at 0 keep the mission order: bound the search, retrain, …, checkpoint, card
    zero = [r["lever"] for r in sorted(rows.values(), key=lambda r: r["rank"])
            if r["dollars"] == 0 and r["lever"] != "use a cheaper card"]
    mission = ["bound the search", "retrain on measured decay", "cache preprocessing",
               "delete dead checkpoints", "co-locate compute & data",
               "chase untracked usage", "checkpoint before going preemptible"]
    assert zero == [lever for lever in mission if lever in zero]


def test_without_the_data_the_levers_say_zero_and_why(con):
    runs_without_metric = [{**r, "metric_value": None} for r in RETRAIN_RUNS[:4]]
    insert_runs(con, MARCH, runs_without_metric)
    rows = levers(con)
    retrain = rows["retrain on measured decay"]
    assert retrain["dollars"] == 0.0
    assert "none with a metric_value" in retrain["evidence"]
    preempt = rows["checkpoint before going preemptible"]
    assert (preempt["dollars"], preempt["evidence"]) == (
        0.0, "no spot compute billed to a run this month")


def test_restarts_from_scratch_that_repeated_nothing_billed_say_so(con):
    """A from-scratch restart of a run the tracker does not hold (or one billed in another
    month): a restart from scratch, but no chain lost anything this month. The evidence was
    the list of chains that did — NULL — and its NOT NULL constraint rolled the month back."""
    lines = [instance_line("i-r2", 0, 4, 12.0, 40.0)]
    runs = [run("r2", 0, 4, ["i-r2"], restart_of="r1-not-in-tracker", status="FINISHED")]
    rows = {r["chain_id"]: r for r in preemption_month(con, lines=lines, runs=runs)}
    assert (rows["r2"]["restarts_from_scratch"], rows["r2"]["lost_cost"]) == (1, 0.0)
    preempt = levers(con)["checkpoint before going preemptible"]
    assert preempt["dollars"] == 0.0
    assert preempt["evidence"] == ("1 restart from scratch in 1 spot chain, repeating no "
                                   "run billed this month")


def test_a_lever_at_zero_still_names_the_chains_dearer_than_on_demand(con):
    """x → y resumed from x's checkpoint (no restart from scratch: the lever is $0), and y's
    3 h of i-y's 6 ($3.00 on demand) beside the chain's $9.00: x costs more than its last run
    on demand; q → q2 (resumed, q2 in April) has no on-demand figure. The $0 evidence said
    "… none from scratch" and left both out, where the priced evidence names them."""
    lines = [instance_line("i-x", 0, 6, 6.0, 9.0), instance_line("i-y", 6, 12, 6.0, 9.0),
             instance_line("i-q", 0, 4, 8.0, 24.0)]
    runs = [run("x", 0, 6, ["i-x"]), run("y", 6, 9, ["i-y"], restart_of="x", resumed_from="c1"),
            run("q", 0, 4, ["i-q"]),
            {**run("q2", 0, 5, ["i-z"], restart_of="q", resumed_from="c9", status="FINISHED"),
             "start_time": d(2024, 4, 1, 0), "end_time": d(2024, 4, 1, 5)}]
    rows = {r["chain_id"]: r for r in preemption_month(con, lines=lines, runs=runs)}
    assert rows["x"]["spot_cost_more_than_on_demand"] is True
    assert rows["q"]["last_run_on_demand_cost"] is None
    preempt = levers(con)["checkpoint before going preemptible"]
    assert preempt["dollars"] == 0.0
    assert preempt["evidence"] == (
        "2 chains on spot capacity, 2 restarts, none from scratch; "
        "1 chain cost more than its last run on demand: x $9.00 vs $4.50; "
        "1 chain whose last run has no on-demand price this month (no compute row, or a "
        "line without ListCost): q")


def test_a_last_run_without_compute_this_month_is_compared_with_nothing(con):
    """q's restart q2 starts in April (and lists no billed resource): the chain's last run
    has no compute row in March, so its on-demand figure is unknown, not $0 — "$8.00 vs
    $0.00" called the chain dearer than nothing. The evidence lists each chain under the
    heading that counts it: m lost compute but is not dearer than its last run on demand."""
    lines = [instance_line("i-q", 0, 4, 8.0, 24.0),
             instance_line("i-m", 5, 6, 5.0, 15.0), instance_line("i-m2", 6, 7, 5.0, 15.0),
             instance_line("i-x", 0, 6, 6.0, 9.0, day=3),
             instance_line("i-y", 6, 12, 6.0, 9.0, day=3)]
    runs = [run("q", 0, 4, ["i-q"]),
            {**run("q2", 0, 5, ["i-z"], restart_of="q", status="FINISHED"),
             "start_time": d(2024, 4, 1, 0), "end_time": d(2024, 4, 1, 5)},
            run("m", 5, 6, ["i-m"]), run("m2", 6, 7, ["i-m2"], restart_of="m"),
            run("x", 0, 6, ["i-x"], day=3), run("y", 6, 9, ["i-y"], restart_of="x", day=3)]
    rows = {r["chain_id"]: r for r in preemption_month(con, lines=lines, runs=runs)}
    q = rows["q"]
    assert (q["runs"], q["cost"], q["lost_cost"], q["on_demand_cost"], q["last_run_id"]) == (
        2, pytest.approx(8.0), pytest.approx(8.0), pytest.approx(24.0), "q2")
    assert q["last_run_on_demand_cost"] is None
    assert q["spot_cost_more_than_on_demand"] is None
    m = rows["m"]
    assert (m["cost"], m["lost_cost"], m["last_run_on_demand_cost"]) == (
        pytest.approx(10.0), pytest.approx(5.0), pytest.approx(15.0))
    assert m["spot_cost_more_than_on_demand"] is False
    x = rows["x"]                       # y ran 3 h of i-y's 6: 6 + 3 against 9 × 0.5
    assert (x["cost"], x["lost_cost"], x["last_run_on_demand_cost"]) == (
        pytest.approx(9.0), pytest.approx(6.0), pytest.approx(4.5))
    assert x["spot_cost_more_than_on_demand"] is True
    preempt = levers(con)["checkpoint before going preemptible"]
    assert preempt["dollars"] == pytest.approx(19.0)                # 8 + 5 + 6
    assert preempt["evidence"] == (
        "3 restarts from scratch in 3 spot chains repeated $19.00: "
        "q (2 runs, 1 from scratch) $8.00 of $8.00, x (2 runs, 1 from scratch) $6.00 of $9.00, "
        "m (2 runs, 1 from scratch) $5.00 of $10.00; "
        "1 chain cost more than its last run on demand: x $9.00 vs $4.50; "
        "1 chain whose last run has no on-demand price this month (no compute row, or a "
        "line without ListCost): q")


def test_spot_chains_without_restart_records(con):
    runs = [{**r, "restart_of": None, "resumed_from": None} for r in RUNS]
    preemption_month(con, runs=runs)
    preempt = levers(con)["checkpoint before going preemptible"]
    assert preempt["dollars"] == 0.0
    assert preempt["evidence"].endswith("no run records restart_of: restarts cannot be told")


def test_the_monthly_report_shows_retrains_and_preemption(con):
    from cost_pipeline.report.data import collect
    from cost_pipeline.report.render import render_html

    preemption_month(con)
    retrain_months(con)
    levers(con)
    data = collect(con, MARCH)
    assert [r["model"] for r in data["retrains"]] == ["churn", "fraud", "credit"]
    assert [c["chain_id"] for c in data["preemption"]] == ["x", "a", "p", "solo"]
    page = render_html(data, "test.duckdb")
    assert 'data-flat-retrain-cost="100.00"' in page
    assert 'data-chain="x"' in page and 'data-lost-cost="6.00"' in page
    assert "spot cost more than on demand" in page


def test_the_report_lists_every_chain_or_says_what_the_rest_lost(con, monkeypatch):
    """A top 5 of the chains left the others off the page without a word while the lever
    counted them: the page shows the head and a row of what the rest add up to."""
    from cost_pipeline.report import data as report_data
    from cost_pipeline.report.render import render_html

    monkeypatch.setattr(report_data, "LONG", 2)
    preemption_month(con)
    levers(con)
    data = report_data.collect(con, MARCH)
    assert [c["chain_id"] for c in data["preemption"]] == ["x", "a"]
    assert data["preemption_rest"]["count"] == 2                        # p and solo
    assert data["preemption_rest"]["cost"] == pytest.approx(5.0)        # 4 + 1
    assert data["preemption_rest"]["lost_cost"] == pytest.approx(0.0)
    page = render_html(data, "test.duckdb")
    assert "… and 2 more chains" in page and 'data-rest-cost="5.00"' in page


def test_runs_restarting_each_other_in_a_cycle_are_one_chain(con):
    lines = [instance_line("i-m", 0, 2, 2.0, 6.0), instance_line("i-n", 3, 5, 2.0, 6.0),
             instance_line("i-o", 6, 8, 2.0, 6.0)]
    runs = [run("m", 0, 2, ["i-m"], restart_of="n"), run("n", 3, 5, ["i-n"], restart_of="m"),
            run("o", 6, 8, ["i-o"], restart_of="n", resumed_from="n/step-2")]
    (chain,) = preemption_month(con, lines=lines, runs=runs)
    # the cycle's earliest start is its first run; m and n each repeated the other from scratch
    assert (chain["chain_id"], chain["runs"], chain["restarts"],
            chain["restarts_from_scratch"]) == ("m", 3, 3, 2)
    assert (chain["lost_cost"], chain["last_run_id"]) == (pytest.approx(4.0), "o")


MARCH_2 = d(2024, 3, 2)


def hour_run(run_id: str, hour: int, restart_of: str | None, resumed: bool,
             start: datetime = MARCH_2) -> tuple[dict, dict]:
    """A spot run alone on its own instance for one hour, `hour` hours after `start`: billed
    $1, $3 on demand."""
    at = start + timedelta(hours=hour)
    line = {**instance_line(f"i-{run_id}", 0, 1, 1.0, 3.0),
            "ChargePeriodStart": at, "ChargePeriodEnd": at + timedelta(hours=1)}
    restart = {**run(run_id, 0, 1, [f"i-{run_id}"], restart_of=restart_of,
                     resumed_from=f"{restart_of}/ckpt" if resumed else None),
               "start_time": at, "end_time": at + timedelta(hours=1)}
    return line, restart


def test_a_chain_of_300_restarts_is_one_chain(con):
    """r00001 … r00299 each restart the run before, resumed unless its number is a multiple
    of 3. The walk up restart_of stopped at 256 steps: 44 chains (r00000 with 257 runs, then
    r00001 … r00043 alone)."""
    made = [hour_run(f"r{k:05d}", k, f"r{k - 1:05d}" if k else None, k % 3 != 0)
            for k in range(300)]
    (chain,) = preemption_month(con, lines=[ln for ln, _ in made], runs=[r for _, r in made])
    # restarts from scratch: 3, 6, …, 297 → 99, each repeating the run before it ($1 each)
    assert (chain["chain_id"], chain["runs"], chain["restarts"],
            chain["restarts_from_scratch"]) == ("r00000", 300, 299, 99)
    assert (chain["cost"], chain["lost_cost"], chain["on_demand_cost"]) == (
        pytest.approx(300.0, abs=TOL), pytest.approx(99.0, abs=TOL),
        pytest.approx(900.0, abs=TOL))
    assert (chain["last_run_id"], chain["last_run_on_demand_cost"]) == (
        "r00299", pytest.approx(3.0, abs=TOL))
    assert chain["spot_cost_more_than_on_demand"] is True            # 300 > 3


def test_a_cycle_of_200_runs_is_one_chain_whatever_restarts_into_it(con):
    """q000 restarts q199 and q001 … q199 each the run before: a cycle of 200. q_k starts at
    hour (k + 100) mod 200, so q100 is the cycle's earliest start; t, started a day earlier,
    resumes q005: it is in the chain, but not in the cycle, so not its first run. The walk's
    bound split such a cycle into 72 chains."""
    made = [hour_run(f"q{k:03d}", (k + 100) % 200, f"q{(k - 1) % 200:03d}", k % 2 != 0)
            for k in range(200)]
    made.append(hour_run("t", 0, "q005", True, start=d(2024, 3, 1)))
    (chain,) = preemption_month(con, lines=[ln for ln, _ in made], runs=[r for _, r in made])
    # every run restarts another; from scratch: the even q's (q000 … q198), each repeating
    # the odd run before it (q000 repeats q199): 100 runs, $100 lost
    assert (chain["chain_id"], chain["runs"], chain["restarts"],
            chain["restarts_from_scratch"]) == ("q100", 201, 201, 100)
    assert (chain["cost"], chain["lost_cost"], chain["on_demand_cost"]) == (
        pytest.approx(201.0, abs=TOL), pytest.approx(100.0, abs=TOL),
        pytest.approx(603.0, abs=TOL))
    # the latest start is hour 199: (k + 100) mod 200 = 199 → q099
    assert (chain["last_run_id"], chain["last_run_on_demand_cost"]) == (
        "q099", pytest.approx(3.0, abs=TOL))
    assert chain["spot_cost_more_than_on_demand"] is True


# ------------------------------------------------- preemption against chains followed by hand

def chain_of(run_id: str, by_id: dict[str, dict]) -> str:
    """The chain's first run, followed here one step at a time: up through restart_of while
    it names another known run; a walk that comes back to a run met before is in a cycle,
    whose first run is its earliest start."""
    path = [run_id]
    while True:
        parent = by_id[path[-1]]["restart_of"]
        if parent not in by_id or parent == path[-1]:
            return path[-1]
        if parent in path:
            cycle = path[path.index(parent):]
            return min(cycle, key=lambda r: (by_id[r]["start_time"], r))
        path.append(parent)


def expected_chains(runs: list[dict], spot: dict[str, bool], cost: dict[str, float],
                    list_cost: dict[str, float]) -> dict[str, dict]:
    by_id = {r["run_id"]: r for r in runs}
    restart = {r["run_id"]: r["restart_of"] if r["restart_of"] != r["run_id"] else None
               for r in runs}
    repeated = {restart[r["run_id"]] for r in runs
                if restart[r["run_id"]] is not None and r["resumed_from"] is None}
    chains: dict[str, list[str]] = {}
    for r in runs:
        chains.setdefault(chain_of(r["run_id"], by_id), []).append(r["run_id"])
    out = {}
    for chain_id, members in chains.items():
        if not any(spot[m] for m in members):
            continue
        # the last runs: every run started at the chain's latest start, priced together
        latest = max(by_id[m]["start_time"] for m in members)
        last = [m for m in members if by_id[m]["start_time"] == latest]
        out[chain_id] = {
            "runs": len(members),
            "restarts": sum(restart[m] is not None for m in members),
            "restarts_from_scratch": sum(restart[m] is not None
                                         and by_id[m]["resumed_from"] is None for m in members),
            "cost": sum(cost[m] for m in members),
            "lost_cost": sum(cost[m] for m in members if m in repeated),
            "on_demand_cost": sum(list_cost[m] for m in members),
            "last_run_id": min(last),
            "last_run_on_demand_cost": sum(list_cost[m] for m in last),
        }
    return out


RUN_IDS = [f"r{i}" for i in range(7)]
a_run = st.fixed_dictionaries({
    # the first three runs named most often: cycles, and runs restarted twice, are common
    "restart_of": st.sampled_from([None, "gone", *RUN_IDS, *RUN_IDS[:3] * 3]),
    "resumed": st.booleans(),
    "spot": st.booleans(),
    "day": st.integers(2, 4),
    "hour": st.integers(0, 20),
    "cost": st.integers(1, 9),
    "list_cost": st.integers(1, 30),
})


@settings(max_examples=25, deadline=None)
@given(st.lists(a_run, min_size=1, max_size=len(RUN_IDS)))
@example([  # r1 and r2 restart r0 at one instant: both are the chain's last runs
    {"restart_of": None, "resumed": False, "spot": True, "day": 2, "hour": 0, "cost": 4,
     "list_cost": 12},
    {"restart_of": "r0", "resumed": False, "spot": True, "day": 2, "hour": 5, "cost": 3,
     "list_cost": 12},
    {"restart_of": "r0", "resumed": False, "spot": True, "day": 2, "hour": 5, "cost": 3,
     "list_cost": 6}])
def test_chains_equal_the_restarts_followed_by_hand(drawn):
    """Random restart records — none, an unknown run, the run itself, another run, cycles of
    any length, a run restarted twice, runs started at one instant — each run alone on its own
    spot or on-demand instance:
    the listed chains and every figure equal those of following restart_of one run at a
    time (runs without a restart are walked by nobody in the SQL: they are their own chain)."""
    ids = RUN_IDS[:len(drawn)]
    runs, lines = [], []
    for run_id, x in zip(ids, drawn, strict=True):
        restart_of = x["restart_of"] if x["restart_of"] in (*ids, "gone", None) else "gone"
        runs.append(run(run_id, x["hour"], x["hour"] + 2, [f"i-{run_id}"], day=x["day"],
                        restart_of=restart_of,
                        resumed_from=f"{restart_of}/ckpt" if x["resumed"] and restart_of
                        else None))
        lines.append(instance_line(f"i-{run_id}", x["hour"], x["hour"] + 2, float(x["cost"]),
                                   float(x["list_cost"]), day=x["day"],
                                   pricing="spot" if x["spot"] else "on_demand"))
    spot = {i: x["spot"] for i, x in zip(ids, drawn, strict=True)}
    cost = {i: float(x["cost"]) for i, x in zip(ids, drawn, strict=True)}
    list_cost = {i: float(x["list_cost"]) for i, x in zip(ids, drawn, strict=True)}
    con = duckdb.connect(":memory:")
    try:
        ensure_schema(con)
        register_datasets(con, [])
        got = {r.pop("chain_id"): r for r in preemption_month(con, lines=lines, runs=runs)}
    finally:
        con.close()
    want = expected_chains(runs, spot, cost, list_cost)
    assert sorted(got) == sorted(want)
    for chain_id, row in got.items():
        w = want[chain_id]
        assert {k: row[k] for k in ("runs", "restarts", "restarts_from_scratch",
                                    "last_run_id")} == {k: w[k] for k in (
            "runs", "restarts", "restarts_from_scratch", "last_run_id")}, chain_id
        for k in ("cost", "lost_cost", "on_demand_cost", "last_run_on_demand_cost"):
            assert row[k] == pytest.approx(w[k], abs=TOL), (chain_id, k)
        assert row["spot_cost_more_than_on_demand"] == (
            w["cost"] > w["last_run_on_demand_cost"])
