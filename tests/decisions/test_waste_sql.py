"""The bill as decisions (issue 5): search trend, preprocessing waste, egress, GPU utilization,
showback and the ranked levers, on small hand-made months.

Each expected figure is worked out by hand next to it. The demo quarter's figures are in
tests/test_levers_demo.py.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import (
    ensure_schema,
    month_params,
    register_datasets,
    replace_month,
    sql_text,
    summarize_month,
)
from tests.support.warehouse_rows import insert_inventory, insert_lines, insert_runs

JAN, FEB, MARCH, APRIL = date(2024, 1, 1), date(2024, 2, 1), date(2024, 3, 1), date(2024, 4, 1)
d = datetime


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    ensure_schema(c)
    register_datasets(c, [])  # the SQL joins the config's datasets: none here
    yield c
    c.close()


def run(con, table: str, month: date = MARCH, metric_goal: str = "max") -> int:
    cfg = parse_config({"policy": {"search": {"metric_goal": metric_goal}}}, Path("."))
    return replace_month(con, table, month, sql_text(table), month_params(cfg, month))


def select(con, sql: str, *args) -> list[dict]:
    cur = con.execute(sql, list(args))
    names = [c[0] for c in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def runs(con, *rows: dict, month: date = MARCH) -> None:
    insert_runs(con, month, [{"status": "FINISHED", **r} for r in rows])


def line(con, name, *, resource=None, component="network", cost=0.0, unit=None, qty=None,
         tags=None, resource_kind="other", instance_type=None, month=MARCH):
    start = d(month.year, month.month, 2)
    insert_lines(con, month, [{
        "x_SourceLine": name, "ResourceId": resource, "x_CostComponent": component,
        "EffectiveCost": cost, "ChargeCategory": "Usage", "ChargePeriodStart": start,
        "ChargePeriodEnd": d(month.year, month.month, 2, 1), "ConsumedUnit": unit,
        "ConsumedQuantity": qty, "Tags": tags, "x_ResourceKind": resource_kind,
        "x_InstanceType": instance_type}])


def attr(con, line_name, run_id, purpose_class, cost, *, component="gpu", hours=None,
         acc=None, share=1.0, rule="compute", kind=None, month=MARCH):
    con.execute(
        """INSERT INTO attribution_rows BY NAME
           SELECT * EXCLUDE (run_id), run_hash_of(run_id) AS run_hash FROM (
           SELECT ? AS month, key_hash(?) AS line_key, ? AS run_id, ? AS purpose_class,
                  ? AS component, ? AS cost, ? AS hours, ? AS accelerator_hours,
                  ? AS share, ? AS rule, ? AS kind)""",
        [month, line_name, run_id, purpose_class, component, cost, hours, acc, share, rule,
         kind])
    summarize_month(con, month)  # the per-run sums the attribution step writes with it


# ------------------------------------------------------------------------- search_trend


def trend_months(con):
    """churn (val_auc, higher is better): a production run, then searches S1 … S4."""
    runs(con, {"run_id": "prod-0", "model": "churn", "purpose": "production",
               "start_time": d(2024, 1, 1), "end_time": d(2024, 1, 10),
               "metric_name": "val_auc", "metric_value": 0.80})
    trials = [  # run, search, start, auc, metric
        ("s1-a", "S1", d(2024, 1, 20), 0.84, "val_auc"),
        ("s1-b", "S1", d(2024, 1, 20), 0.82, "val_auc"),
        ("s2-a", "S2", d(2024, 2, 10), 0.86, "val_auc"),
        ("s2-b", "S2", d(2024, 2, 10), 0.83, "val_auc"),
        ("s2-c", "S2", d(2024, 2, 10), 0.99, "logloss"),   # another metric: not its result
        ("s3-a", "S3", d(2024, 3, 5), 0.85, "val_auc"),
        ("s4-a", "S4", d(2024, 3, 20), 0.90, "val_auc"),
        ("s6-a", "S6", d(2024, 4, 2), 0.99, "val_auc"),     # starts after March: not yet
    ]
    for run_id, search, start, auc, metric in trials:
        runs(con, {"run_id": run_id, "model": "churn", "purpose": "search", "search_id": search,
                   "start_time": start, "end_time": start.replace(day=start.day + 1),
                   "metric_name": metric, "metric_value": auc,
                   "parent_run_id": "s4-ctl" if search == "S4" else None})
    # S4's sweep controller starts the search (19 March) and owns some storage
    runs(con, {"run_id": "s4-ctl", "model": "churn", "search_id": "S4",
               "start_time": d(2024, 3, 19), "end_time": d(2024, 3, 22)})
    runs(con, {"run_id": "s5-a", "model": "fraud", "search_id": "S5",
               "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 2),
               "metric_name": "val_auc", "metric_value": 0.7})
    # each month's snapshot holds the runs its attribution rows name (by key_hash(run_id))
    for month in (JAN, FEB, APRIL):
        con.execute("INSERT INTO tracker_runs SELECT * REPLACE (CAST(? AS DATE) AS month) "
                    "FROM tracker_runs WHERE month = ?", [month, MARCH])
    attr(con, "J1", "s1-a", "search", 30.0, acc=8.0, month=JAN)
    attr(con, "J2", "s1-b", "search", 10.0, acc=8.0, month=JAN)
    attr(con, "F1", "s1-a", "search", 4.0, component="storage", month=FEB)
    attr(con, "F2", "s2-a", "search", 60.0, acc=16.0, month=FEB)
    attr(con, "M1", "s2-a", "search", 6.0, component="storage")
    attr(con, "M2", "s3-a", "search", 50.0, acc=16.0)
    attr(con, "M3", "s4-a", "search", 40.0, acc=16.0)
    attr(con, "M4", "s4-ctl", "search", 1.0, component="storage")
    attr(con, "M5", "s5-a", "search", 7.0, acc=4.0)
    attr(con, "A1", "s4-a", "search", 999.0, month=APRIL)   # after March: not counted


def test_search_trend_prices_each_search_whole_and_flags_saturation(con):
    trend_months(con)
    assert run(con, "search_trend") == 5
    got = {r["search_id"]: r for r in select(
        con, "SELECT * FROM search_trend WHERE month = ? ORDER BY model, search_order", MARCH)}
    assert list(got) == ["S1", "S2", "S3", "S4", "S5"]     # S6 starts in April

    def figures(s):
        r = got[s]
        return (r["search_order"], r["runs"], r["best_metric"], r["previous_best"],
                r["improvement"], r["cost"], r["cost_this_month"], r["cost_per_improvement"],
                r["previous_search_id"], r["previous_cost_per_improvement"], r["saturating"])

    a = pytest.approx
    # S1: best 0.84 over prod-0's 0.80 → +0.04; 30 + 10 (Jan) + 4 (Feb) = 44 → 1,100 per unit
    assert figures("S1") == (1, 2, a(0.84), a(0.80), a(0.04), a(44.0), 0.0, a(1100.0),
                             None, None, False)
    # S2: best 0.86 (not the 0.99 logloss) over 0.84 → +0.02; 60 + 6 = 66 → 3,300 > 1,100
    assert figures("S2") == (2, 3, a(0.86), a(0.84), a(0.02), a(66.0), a(6.0), a(3300.0),
                             "S1", a(1100.0), True)
    # S3: 0.85 is worse than S2's 0.86: it bought nothing → saturating, no unit cost
    assert figures("S3") == (3, 1, a(0.85), a(0.86), a(-0.01), a(50.0), a(50.0), None,
                             "S2", a(3300.0), True)
    # S4: 0.90 over 0.86 → +0.04; 40 + controller 1 (April's 999 not yet) = 41 → 1,025,
    # cheaper than S2's 3,300 (S3 had no unit cost and is skipped): not saturating
    assert figures("S4") == (4, 1, a(0.90), a(0.86), a(0.04), a(41.0), a(41.0), a(1025.0),
                             "S2", a(3300.0), False)
    assert got["S4"]["search_start"] == d(2024, 3, 19)     # the controller's start
    assert got["S4"]["accelerator_hours"] == pytest.approx(16.0)
    # fraud's only search: nothing to compare with
    assert figures("S5") == (1, 1, a(0.7), None, None, a(7.0), a(7.0), None, None, None, False)


def test_a_search_that_cost_nothing_or_a_refund_has_no_unit_cost_to_saturate_against(con):
    """churn, val_auc over prod-0's 0.80. S1 (20 Jan, 0.84: +0.04) was refunded −$40 in
    January; S2 (10 Feb, 0.86: +0.02) is billed nothing; S3 (5 Mar, 0.90: +0.04) costs $40.
    S1 showed −$1,000.00 per unit of improvement (search_costs and search_trend alike), S2's
    $0.00 was "saturating" because it rose from −$1,000, and S3's $1,000 because it rose
    from S2's $0. A search whose cost is 0 or below paid nothing for its gain: it has no
    cost per unit of improvement (NULL) and is no baseline for the next search's, so S3 has
    no earlier unit cost to compare with, and none of the three saturates."""
    runs(con, {"run_id": "prod-0", "model": "churn", "purpose": "production",
               "start_time": d(2024, 1, 1), "end_time": d(2024, 1, 10),
               "metric_name": "val_auc", "metric_value": 0.80})
    for run_id, search, start, auc in [("s1-a", "S1", d(2024, 1, 20), 0.84),
                                       ("s2-a", "S2", d(2024, 2, 10), 0.86),
                                       ("s3-a", "S3", d(2024, 3, 5), 0.90)]:
        runs(con, {"run_id": run_id, "model": "churn", "purpose": "search",
                   "search_id": search, "start_time": start,
                   "end_time": start.replace(day=start.day + 1), "metric_name": "val_auc",
                   "metric_value": auc})
    for month in (JAN, FEB):
        con.execute("INSERT INTO tracker_runs SELECT * REPLACE (CAST(? AS DATE) AS month) "
                    "FROM tracker_runs WHERE month = ?", [month, MARCH])
    attr(con, "J1", "s1-a", "search", -40.0, acc=8.0, month=JAN)
    attr(con, "M1", "s3-a", "search", 40.0, acc=8.0)

    run(con, "search_costs", JAN)
    (s1,) = select(con, "SELECT search_id, cost, improvement, cost_per_improvement "
                        "FROM search_costs WHERE month = ?", JAN)
    assert (s1["cost"], s1["improvement"], s1["cost_per_improvement"]) == (
        -40.0, pytest.approx(0.04), None)
    for month in (JAN, FEB, MARCH):
        run(con, "search_trend", month)
    got = {r["search_id"]: (r["cost"], r["cost_per_improvement"], r["previous_search_id"],
                            r["previous_cost_per_improvement"], r["saturating"])
           for r in select(con, "SELECT * FROM search_trend WHERE month = ?", MARCH)}
    assert got == {"S1": (-40.0, None, None, None, False),
                   "S2": (0.0, None, None, None, False),
                   "S3": (40.0, pytest.approx(1000.0), None, None, False)}   # 40 ÷ 0.04
    feb = dict(con.execute("SELECT search_id, saturating FROM search_trend WHERE month = ?",
                           [FEB]).fetchall())
    assert feb == {"S1": False, "S2": False}


MAY, JULY, AUGUST = date(2024, 5, 1), date(2024, 7, 1), date(2024, 8, 1)
CURRENCY_MONTHS = {MARCH: "USD", APRIL: "JPY", MAY: "EUR", JULY: "USD", AUGUST: "USD"}


def currency_months(con) -> None:
    """churn (val_auc) over prod-0's 0.80, each search billed in its month's currency:
    S1 (March, USD) 0.81: +0.01 for $30 → $3,000 a unit; S2 (April, JPY) 0.84: +0.03 for
    ¥1,000.6 → ¥33,353.33; S3 (May, EUR) 0.85: +0.01 for €12.34 → €1,234; S4 (July, USD)
    0.87: +0.02 for $40 → $2,000. Each month's bill is one line of its searches' cost."""
    searches = [("S1", MARCH, 0.81, 30.0), ("S2", APRIL, 0.84, 1000.6),
                ("S3", MAY, 0.85, 12.34), ("S4", JULY, 0.87, 40.0)]
    prod = {"run_id": "prod-0", "model": "churn", "purpose": "production",
            "start_time": d(2024, 1, 1), "end_time": d(2024, 1, 10), "metric_name": "val_auc",
            "metric_value": 0.80}
    trials = [{"run_id": f"{search.lower()}-a", "model": "churn", "purpose": "search",
               "search_id": search, "start_time": d(month.year, month.month, 5),
               "end_time": d(month.year, month.month, 6), "metric_name": "val_auc",
               "metric_value": auc} for search, month, auc, _ in searches]
    for month in CURRENCY_MONTHS:   # each month's snapshot holds every run started by then
        runs(con, prod, *[t for t in trials if t["start_time"].date() < month.replace(
            month=month.month + 1)], month=month)
    for search, month, _, cost in searches:
        line(con, f"{search}-l", cost=cost, component="gpu", month=month)
        con.execute("UPDATE billing_facts SET BillingCurrency = ? WHERE month = ?",
                    [CURRENCY_MONTHS[month], month])
        attr(con, f"{search}-l", f"{search.lower()}-a", "search", cost, acc=1.0, month=month)
    line(con, "A-l", cost=5.0, month=AUGUST)   # August: a bill, no search spend
    from cost_pipeline.warehouse import query

    query(con, f"INSERT INTO billing_months BY NAME ({sql_text('period_month_totals')})",
          {"first": MARCH, "last": AUGUST})
    for month in CURRENCY_MONTHS:
        run(con, "search_trend", month)


def test_search_trend_compares_unit_costs_in_one_currency_only(con):
    """S2's ¥33,353.33 a unit was "saturating" against S1's $3,000, and S4's $2,000 against
    S3's €1,234: amounts of two currencies compared as numbers. A search's unit cost is
    compared with the model's earlier searches billed in its own currency only: S2 and S3
    have none (not saturating on that basis), S4's $2,000 is below S1's $3,000."""
    currency_months(con)
    got = {r["search_id"]: (r["currency"], r["cost_per_improvement"], r["previous_search_id"],
                            r["previous_cost_per_improvement"], r["saturating"])
           for r in select(con, "SELECT * FROM search_trend WHERE month = ? ORDER BY search_order",
                           AUGUST)}
    a = pytest.approx
    assert got == {"S1": ("USD", a(3000.0), None, None, False),
                   "S2": ("JPY", a(1000.6 / 0.03), None, None, False),
                   "S3": ("EUR", a(1234.0), None, None, False),
                   "S4": ("USD", a(2000.0), "S1", a(3000.0), False)}
    april = dict(con.execute("SELECT search_id, saturating FROM search_trend WHERE month = ?",
                             [APRIL]).fetchall())
    assert april == {"S1": False, "S2": False}


def test_search_costs_best_metric_is_on_the_searchs_own_metric(con):
    trend_months(con)
    run(con, "search_costs")
    (best,) = con.execute("SELECT best_metric FROM search_costs WHERE search_id = 'S2'"
                          ).fetchone()
    assert best == pytest.approx(0.86)    # not s2-c's 0.99, which is a logloss


# ------------------------------------------------------------------ preprocessing_waste


def pp(run_id, input_hash, version, start, end, status="FINISHED"):
    return {"run_id": run_id, "purpose": "preprocess", "input_hash": input_hash,
            "transform_version": version, "start_time": start, "end_time": end,
            "status": status}


def train(run_id, input_hash, version, start, purpose="production"):
    return {"run_id": run_id, "purpose": purpose, "model": "churn", "input_hash": input_hash,
            "transform_version": version, "start_time": start, "end_time": start}


def test_preprocessing_waste(con):
    runs_of_both_months = (
         pp("pp-a", "h1", "v1", d(2024, 2, 10), d(2024, 2, 10, 10)),    # (h1, v1) first
         pp("pp-old", "h1", "v1", d(2024, 2, 20), d(2024, 2, 20, 5)),   # February's waste
         pp("pp-b", "h1", "v1", d(2024, 3, 2), d(2024, 3, 2, 5)),
         pp("pp-c", "h1", "v1", d(2024, 3, 3), d(2024, 3, 3, 1), "FAILED"),
         pp("pp-d", "h1", "v2", d(2024, 3, 4), d(2024, 3, 4, 4)),       # (h1, v2) first
         pp("pp-f", "h2", "v1", d(2024, 3, 5), d(2024, 3, 5, 2)),       # same start as pp-e:
         pp("pp-e", "h2", "v1", d(2024, 3, 5), d(2024, 3, 5, 2)),       # neither was cached
         pp("pp-g", "h3", "v1", d(2024, 3, 1), d(2024, 3, 1, 1), "FAILED"),  # computed nothing
         pp("pp-h", "h3", "v1", d(2024, 3, 6), d(2024, 3, 6, 1)),       # so (h3, v1) first
         pp("pp-nocost", "h1", "v1", d(2024, 3, 20), d(2024, 3, 20, 1)),
         train("t-stale", "h1", "v1", d(2024, 3, 10)),      # v2 available since 4 March
         train("t-edge", "h1", "v1", d(2024, 3, 4, 4)),     # v2 became available that instant
         train("t-early", "h1", "v1", d(2024, 3, 3), "search"),   # v2 did not exist yet
         train("t-fresh", "h1", "v2", d(2024, 3, 10)),
         train("t-unknown", "h1", "v9", d(2024, 3, 10)),    # no tracked run made v9
         train("t-other", "h9", "v1", d(2024, 3, 10)))
    runs(con, *runs_of_both_months)
    runs(con, *runs_of_both_months, month=FEB)     # the tracker snapshot is stored monthly
    attr(con, "P1", "pp-b", "preprocessing", 4.0, component="cpu", hours=5.0)
    attr(con, "P2", "pp-b", "preprocessing", 0.5, component="storage")
    attr(con, "P3", "pp-c", "preprocessing", 1.0, component="cpu", hours=1.0)
    attr(con, "P4", "pp-d", "preprocessing", 3.2, component="cpu", hours=4.0)
    attr(con, "P5", "pp-f", "preprocessing", 6.0, hours=2.0, acc=8.0)
    attr(con, "P6", "pp-e", "preprocessing", 6.0, hours=2.0, acc=8.0)
    attr(con, "P7", "pp-h", "preprocessing", 0.8, component="cpu", hours=1.0)
    attr(con, "T1", "t-stale", "production", 20.0, hours=2.0, acc=16.0)
    attr(con, "T2", "t-edge", "production", 5.0, hours=1.0, acc=4.0)
    attr(con, "FP", "pp-old", "preprocessing", 9.0, component="cpu", month=FEB)
    # a stale run's checkpoints: kept storage, not compute spent on outdated features
    attr(con, "B1", "t-stale", "production", 2.0, component="storage", rule="bucket_storage")

    run(con, "preprocessing_waste")
    got = [(r["kind"], r["run_id"], r["transform_version"], r["current_transform_version"],
            r["reference_run_id"], r["cpu_hours"], r["accelerator_hours"], r["cost"])
           for r in select(con, "SELECT * FROM preprocessing_waste ORDER BY kind, run_id")]
    assert got == [
        ("recomputed", "pp-b", "v1", "v1", "pp-a", 5.0, 0.0, 4.5),     # cpu 4 + storage 0.5
        ("recomputed", "pp-c", "v1", "v1", "pp-a", 1.0, 0.0, 1.0),     # failed, still paid
        ("recomputed", "pp-nocost", "v1", "v1", "pp-a", 0.0, 0.0, 0.0),  # started in March
        ("stale_transform", "t-edge", "v1", "v2", "pp-d", 0.0, 4.0, 5.0),
        ("stale_transform", "t-stale", "v1", "v2", "pp-d", 0.0, 16.0, 20.0),
    ]   # pp-old is February's (no March cost); pp-a, pp-d, pp-e, pp-g, pp-h were first; pp-f
    #     started with pp-e, before pp-e's table existed

    run(con, "preprocessing_waste", FEB)
    assert select(con, "SELECT run_id, cost FROM preprocessing_waste WHERE month = ?", FEB) \
        == [{"run_id": "pp-old", "cost": 9.0}]

    # April: t-stale ran nothing, its checkpoints are still billed; pp-b's too: a stale run
    # is no row (it read "1 run(s) ($2.00) trained on a stale transform_version"), a
    # recomputation's table is still kept at the cache's price
    april = date(2024, 4, 1)
    runs(con, *runs_of_both_months, month=april)
    attr(con, "B2", "t-stale", "production", 2.0, component="storage", rule="bucket_storage",
         month=april)
    attr(con, "B3", "pp-b", "preprocessing", 0.5, component="storage", rule="bucket_storage",
         month=april)
    run(con, "preprocessing_waste", april)
    assert select(con, "SELECT kind, run_id, cost FROM preprocessing_waste WHERE month = ?",
                  april) == [{"kind": "recomputed", "run_id": "pp-b", "cost": 0.5}]


def test_a_run_started_before_the_first_computation_finished_recomputed_nothing(con):
    """ppB computes (h1, v1) from 02:00 to 04:00; ppC starts at 03:00, while ppB still runs:
    no cache could have served it a table that did not exist yet (it was flagged, $4.00 in
    the lever). ppD starts at 06:00, after ppB finished: a recomputation. For (h2, v1) the
    first run is still RUNNING (no end): it finished nothing, so nothing after it is flagged
    until a computation of the pair has finished."""
    runs(con, pp("ppB", "h1", "v1", d(2024, 3, 2, 2), d(2024, 3, 2, 4)),
         pp("ppC", "h1", "v1", d(2024, 3, 2, 3), d(2024, 3, 2, 5)),
         pp("ppD", "h1", "v1", d(2024, 3, 2, 6), d(2024, 3, 2, 7)),
         pp("ppR", "h2", "v1", d(2024, 3, 3, 1), None, "RUNNING"),
         pp("ppS", "h2", "v1", d(2024, 3, 3, 5), d(2024, 3, 3, 6)),
         pp("ppT", "h2", "v1", d(2024, 3, 3, 6), d(2024, 3, 3, 7)))
    for n, (run_id, cost) in enumerate([("ppB", 2.0), ("ppC", 4.0), ("ppD", 1.5),
                                        ("ppR", 3.0), ("ppS", 0.5), ("ppT", 0.25)]):
        attr(con, f"P{n}", run_id, "preprocessing", cost, component="cpu", hours=1.0)
    run(con, "preprocessing_waste")
    got = [(r["run_id"], r["reference_run_id"], r["cost"]) for r in select(
        con, "SELECT * FROM preprocessing_waste WHERE kind = 'recomputed' ORDER BY run_id")]
    # ppS finished (h2, v1) at 06:00, when ppT started
    assert got == [("ppD", "ppB", 1.5), ("ppT", "ppS", 0.25)]
    run(con, "cost_levers")
    ((dollars, evidence),) = con.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE lever = 'cache preprocessing'"
    ).fetchall()
    assert dollars == pytest.approx(1.75)
    assert evidence == ("2 preprocess runs recomputed an (input_hash, transform_version) "
                        "already computed: 2.0 CPU-hours")


# ------------------------------------------------------------------------------- egress


def test_egress_is_cross_region_network_cost_per_run_and_dataset(con):
    con.execute("INSERT INTO config_datasets VALUES ('events', 'data-west', 'us-west-2'), "
                "('logs', 'data-east', 'us-east-1')")

    def reader(run_id, region, dataset, dataset_region=None):
        return {"run_id": run_id, "purpose": "search", "model": "churn", "region": region,
                "dataset": dataset, "dataset_region": dataset_region,
                "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 3)}

    runs(con, reader("r1", "us-east-1", "events"),
         reader("r2", "us-east-1", "events"),
         reader("r3", "us-east-1", "logs"),                    # same region as its data
         reader("r4", "eu-west-1", "adhoc", "us-east-1"),      # not configured: its own region
         reader("r5", None, "events"),                         # no region: cannot tell
         reader("r6", "us-west-2", "events", "eu-west-1"))     # the config's region wins
    line(con, "T1", resource="data-west", cost=10.0, unit="GB", qty=500.0,
         resource_kind="bucket")
    line(con, "T2", resource="data-west", cost=3.0, unit="GB", qty=150.0,
         resource_kind="bucket")
    line(con, "T3", resource="ckpt", cost=9.0, unit="GB", qty=450.0, resource_kind="bucket")
    for name, cost in [("N1", 0.5), ("N2", 0.7), ("N4", 0.3), ("N5", 1.1), ("N6", 5.0)]:
        line(con, name, resource=f"i-{name}", cost=cost, unit="Hrs", qty=1.0)
    line(con, "N3", resource="i-N3", cost=2.0, unit="GB", qty=100.0)
    attr(con, "T1", "r1", "search", 6.0, component="network", share=0.6, rule="bucket_transfer")
    attr(con, "T1", "r2", "search", 4.0, component="network", share=0.4, rule="bucket_transfer")
    attr(con, "T2", None, "untracked", 3.0, component="network", rule="bucket_transfer",
         kind="no_run")
    attr(con, "T3", None, "untracked", 9.0, component="network", rule="bucket_transfer",
         kind="no_run")                                          # not a dataset's bucket
    attr(con, "N1", "r1", "search", 0.5, component="network")
    attr(con, "N2", "r3", "search", 0.7, component="network")
    attr(con, "N3", "r4", "search", 2.0, component="network")
    attr(con, "N4", "r5", "search", 0.3, component="network")
    attr(con, "N5", "r6", "search", 1.1, component="network")
    attr(con, "N6", None, "untracked", 5.0, component="network", kind="shared")
    attr(con, "G1", "r1", "search", 100.0)                       # compute is not egress

    assert run(con, "egress") == 4
    cols = ("run_id, purpose_class, dataset, dataset_bucket, dataset_region, run_region, lines, "
            "gigabytes, transfer_cost, other_network_cost, cost")
    got = con.execute(f"SELECT {cols} FROM egress ORDER BY run_id NULLS LAST").fetchall()
    assert got == [
        # 0.6 of T1 (300 of its 500 GB) + its instance's network line N1
        ("r1", "search", "events", "data-west", "us-west-2", "us-east-1", 2, 300.0, 6.0, 0.5,
         6.5),
        ("r2", "search", "events", "data-west", "us-west-2", "us-east-1", 1, 200.0, 4.0, 0.0,
         4.0),
        ("r4", "search", "adhoc", None, "us-east-1", "eu-west-1", 1, 100.0, 0.0, 2.0, 2.0),
        # the transfer on events' bucket no run claimed
        (None, "untracked", "events", "data-west", "us-west-2", None, 1, 150.0, 3.0, 0.0, 3.0),
    ]


def test_egress_reads_the_volume_in_each_providers_unit(con):
    """GCP meters a transfer in `gibibyte`, FOCUS may say `GiB` or `TB`, Azure `10 GB`: only
    CUR's `GB` was read, so a GCP month's egress had no volume and the lever said "(0 GB)".
    A month whose network lines carry no byte unit leaves the volume unsaid."""
    con.execute("INSERT INTO config_datasets VALUES ('events', 'data-west', 'us-west-2')")
    runs(con, {"run_id": "r1", "purpose": "search", "model": "churn", "region": "us-east-1",
               "dataset": "events", "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 3)})
    for name, unit, qty in [("G1", "gibibyte", 500.0), ("G2", "GiB", 60.0), ("G3", "10 GB", 1.0),
                            ("G4", "TB", 0.002), ("G5", "Gb", 8.0), ("G6", "byte", 5e8)]:
        line(con, name, resource="data-west", cost=1.0, unit=unit, qty=qty,
             resource_kind="bucket")
        attr(con, name, "r1", "search", 1.0, component="network", rule="bucket_transfer")
    run(con, "egress")
    # 560 GiB = 601.295 GB, + 10 + 2 + 0.5; the gigabits are not bytes
    ((gigabytes, lines),) = con.execute("SELECT gigabytes, lines FROM egress").fetchall()
    assert (round(gigabytes, 6), lines) == (round(560 * 1.073741824 + 12.5, 6), 6)
    run(con, "cost_levers")
    (evidence,) = con.execute("SELECT evidence FROM cost_levers "
                              "WHERE lever = 'co-locate compute & data'").fetchone()
    assert evidence == "1 run pulled 614 GB across regions: events us-west-2 → us-east-1"

    con.execute("UPDATE billing_facts SET ConsumedUnit = 'Hrs'")
    run(con, "egress")
    run(con, "cost_levers")
    assert con.execute("SELECT gigabytes FROM egress").fetchall() == [(None,)]
    (evidence,) = con.execute("SELECT evidence FROM cost_levers "
                              "WHERE lever = 'co-locate compute & data'").fetchone()
    assert evidence == "1 run pulled data across regions: events us-west-2 → us-east-1"


def test_co_locate_evidence_keeps_the_runs_apart_from_unclaimed_transfer(con):
    """ds1 lives in ds-bucket (us-east-1). T1: $6.00 (60 GB) of transfer, 2/3 to e1
    (us-west-2, 40 GB), 1/3 to e2 (eu-west-1, 20 GB); N1: $3.00 (30 GB) on e4's instance, e4
    (us-west-2) reading ds2 from us-east-1 (its own dataset_region); T2: $1.50 (15 GB) of
    transfer on ds-bucket no run claimed. The evidence said "3 run(s) pulled data across
    regions (105 GB)", counting the 15 GB no run pulled, and listed "ds1 us-east-1 →
    untracked" as a route; a month with only the unclaimed transfer said "0 run(s) pulled"."""
    con.execute("INSERT INTO config_datasets VALUES ('ds1', 'ds-bucket', 'us-east-1')")

    def reader(run_id, region, dataset, dataset_region=None):
        return {"run_id": run_id, "purpose": "adhoc", "model": "churn", "region": region,
                "dataset": dataset, "dataset_region": dataset_region,
                "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 3)}

    runs(con, reader("e1", "us-west-2", "ds1"), reader("e2", "eu-west-1", "ds1"),
         reader("e3", "us-east-1", "ds1"), reader("e4", "us-west-2", "ds2", "us-east-1"))
    line(con, "T1", resource="ds-bucket", cost=6.0, unit="GB", qty=60.0, resource_kind="bucket")
    line(con, "T2", resource="ds-bucket", cost=1.5, unit="GB", qty=15.0, resource_kind="bucket")
    line(con, "N1", resource="i-e4", cost=3.0, unit="GB", qty=30.0)
    attr(con, "T1", "e1", "other", 4.0, component="network", share=2 / 3,
         rule="bucket_transfer")
    attr(con, "T1", "e2", "other", 2.0, component="network", share=1 / 3,
         rule="bucket_transfer")
    attr(con, "T2", None, "untracked", 1.5, component="network", rule="bucket_transfer",
         kind="no_run")
    attr(con, "N1", "e4", "other", 3.0, component="network")

    def co_locate():
        run(con, "egress")
        run(con, "cost_levers")
        return con.execute("SELECT dollars, evidence FROM cost_levers "
                           "WHERE lever = 'co-locate compute & data'").fetchone()

    dollars, evidence = co_locate()
    assert dollars == pytest.approx(10.5)   # 4 + 2 + 3 + the unclaimed 1.50, as before
    assert evidence == (
        "3 runs pulled 90 GB across regions: ds1 us-east-1 → eu-west-1, ds1 us-east-1 → "
        "us-west-2, ds2 us-east-1 → us-west-2; $1.50 (15 GB) of transfer on dataset buckets "
        "no run claims: ds1 us-east-1")

    # only e1 left in the month: one run, 40 GB
    con.execute("DELETE FROM attribution_rows WHERE run_hash IN "
                "(run_hash_of('e2'), run_hash_of('e4'))")
    dollars, evidence = co_locate()
    assert dollars == pytest.approx(5.5)
    assert evidence == ("1 run pulled 40 GB across regions: ds1 us-east-1 → us-west-2; $1.50 "
                        "(15 GB) of transfer on dataset buckets no run claims: ds1 us-east-1")

    # no run reads across regions (e3 reads ds1 in us-east-1): the unclaimed transfer alone
    con.execute("DELETE FROM attribution_rows WHERE run_hash IS NOT NULL")
    dollars, evidence = co_locate()
    assert dollars == pytest.approx(1.5)
    assert evidence == ("no run pulled data across regions; $1.50 (15 GB) of transfer on "
                        "dataset buckets no run claims: ds1 us-east-1")


def test_regions_are_compared_whatever_their_case_and_blanks(con):
    """GCS reports a bucket's location in upper case (`US-EAST1`), Compute a VM's region in
    lower case (`us-east1`): a9 (us-east1) and a8 (` US-East1 `) read ds-gcs where it lives,
    yet took T1, the $0.08 transfer on its bucket, as a pull from another region, and the
    lever's evidence read "ds-gcs US-EAST1 → us-east1". r4 (europe-west4) reads adhoc, which
    its own dataset_region places in EUROPE-WEST4: its instance's network line N1 ($0.50)
    is no egress either. T1 is untracked, an unclaimed transfer on a dataset's bucket ($0.08,
    the lever's whole figure); the regions are written as they were given."""
    from cost_pipeline.attribution import build_attribution

    datasets = [("ds-gcs", "gcs-data", "US-EAST1")]

    def reader(run_id, region, dataset, dataset_region=None, resource_ids=()):
        return {"run_id": run_id, "purpose": "adhoc", "model": "churn", "region": region,
                "dataset": dataset, "dataset_region": dataset_region,
                "resource_ids": list(resource_ids),
                "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 3)}

    runs(con, reader("a9", "us-east1", "ds-gcs"), reader("a8", " US-East1 ", "ds-gcs"),
         reader("r4", "europe-west4", "adhoc", "EUROPE-WEST4", ["i-r4"]))
    line(con, "T1", resource="gcs-data", cost=0.08, resource_kind="bucket")
    line(con, "N1", resource="i-r4", cost=0.5)
    cfg = parse_config({}, Path("."))
    build_attribution(con, MARCH, month_params(cfg, MARCH), datasets)
    assert select(con, "SELECT x_SourceLine, run_id, purpose_class, kind, cost FROM attribution "
                       "ORDER BY x_SourceLine") == [
        {"x_SourceLine": "N1", "run_id": "r4", "purpose_class": "other", "kind": None,
         "cost": 0.5},
        {"x_SourceLine": "T1", "run_id": None, "purpose_class": "untracked", "kind": "no_run",
         "cost": 0.08}]
    run(con, "egress")
    cols = "run_id, dataset, dataset_bucket, dataset_region, run_region, transfer_cost, cost"
    assert con.execute(f"SELECT {cols} FROM egress").fetchall() == [
        (None, "ds-gcs", "gcs-data", "US-EAST1", None, 0.08, 0.08)]
    run(con, "cost_levers")
    dollars, evidence = con.execute("SELECT dollars, evidence FROM cost_levers "
                                    "WHERE lever = 'co-locate compute & data'").fetchone()
    assert dollars == pytest.approx(0.08)
    assert evidence == ("no run pulled data across regions; $0.08 of transfer on dataset "
                        "buckets no run claims: ds-gcs US-EAST1")


def test_a_dataset_whose_bill_gives_another_region_is_warned_of(tmp_path):
    """The config places dataset images (bucket ml-datasets) in us-east-1; every transfer line
    the July CUR bills on ml-datasets gives eu-west-1 (product_region_code): T1 $2.00 (100 GB)
    and T2 $1.00 (50 GB). Rule 5 prices the transfer from the config (SPEC): r-west
    (eu-west-1) takes the $3.00 (150 GB) as a cross-region pull, r-east (us-east-1) none — the
    reverse of what the bill says — and nothing said so. The egress step now warns, naming
    the dataset, its bucket, both regions, the 2 lines and their $3.00, and records it in its
    metadata; the money stays as the config prices it. logs (ml-logs, `EU-West-1`) agrees with
    its line's eu-west-1 whatever the case; ckpt (ap-south-1) is no dataset's bucket."""
    import dagster as dg
    import yaml

    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.config import load_config
    from cost_pipeline.defs.assets.decisions import derived_assets
    from cost_pipeline.defs.resources import PipelineSettings, Warehouse
    from cost_pipeline.warehouse import dataset_rows
    from tests.support import cur_rows

    def transfer(bucket, region, gigabytes, cost, hour):
        return cur_rows.line(
            cost, start=d(2026, 7, 3, hour, tzinfo=cur_rows.T0.tzinfo),
            line_item_product_code="AmazonS3", product_servicecode="AmazonS3",
            line_item_resource_id=bucket, line_item_usage_type="EUW1-USE1-AWS-Out-Bytes",
            line_item_operation="GetObject", product_product_family="Data Transfer",
            product_region_code=region, line_item_availability_zone=None, pricing_unit="GB",
            line_item_usage_amount=gigabytes, product={"product_name": "Amazon S3"})

    export = cur_rows.write_export(tmp_path, {"july.parquet": [
        transfer("ml-datasets", "eu-west-1", 100.0, 2.0, 10),        # T1
        transfer("ml-datasets", "eu-west-1", 50.0, 1.0, 11),         # T2
        transfer("ml-logs", "eu-west-1", 20.0, 0.4, 10),             # logs, where it lives
        transfer("ckpt", "ap-south-1", 250.0, 5.0, 10)]})            # no dataset's bucket
    warehouse = tmp_path / "w.duckdb"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "warehouse": {"path": str(warehouse)},
        "billing": [{"kind": "aws_cur2", "path": str(export)}],
        "datasets": {"images": {"bucket": "ml-datasets", "region": "us-east-1"},
                     "logs": {"bucket": "ml-logs", "region": "EU-West-1"}}}))
    cfg = load_config(config)
    july = date(2026, 7, 1)
    with duckdb.connect(str(warehouse)) as wh:
        cur_rows.build(wh, cfg, july)
        insert_runs(wh, july, [
            {"run_id": run_id, "status": "FINISHED", "purpose": "adhoc", "model": "vision",
             "region": region, "dataset": "images", "start_time": d(2026, 7, 3, 9),
             "end_time": d(2026, 7, 3, 13)}
            for run_id, region in (("r-east", "us-east-1"), ("r-west", "eu-west-1"))])
        build_attribution(wh, july, month_params(cfg, july), dataset_rows(cfg))

    (egress,) = [a for a in derived_assets if a.key == dg.AssetKey("egress")]
    instance = dg.DagsterInstance.ephemeral()

    def materialize():
        result = dg.materialize(
            [egress], partition_key="2026-07-01", instance=instance,
            resources={"duckdb": Warehouse(database=str(warehouse)),
                       "settings": PipelineSettings(config_path=str(config))})
        assert result.success
        warnings = [e.user_message for e in instance.all_logs(result.run_id)
                    if e.level == logging.WARNING and e.step_key == "egress"]
        (materialization,) = result.asset_materializations_for_node("egress")
        return warnings, {k: v.value for k, v in materialization.metadata.items()}

    warnings, metadata = materialize()
    assert warnings == [
        "egress: dataset images is in us-east-1 by the config, but the bill gives eu-west-1 "
        "for 2 of the 2 transfer lines on its bucket ml-datasets ($3.00 of $3.00): its "
        "transfer goes to the runs outside us-east-1, as the config says; if the "
        "bucket lives in eu-west-1, correct datasets.images.region"]
    assert metadata["dataset_region_mismatch"] == [
        {"dataset": "images", "bucket": "ml-datasets", "config_region": "us-east-1",
         "bill_regions": ["eu-west-1"], "lines": 2, "bucket_lines": 2, "cost": 3.0,
         "bucket_cost": 3.0}]
    assert not metadata["kept"]
    # a re-run that keeps the month's rows (nothing changed) says so again
    again, kept = materialize()
    assert again == warnings
    assert kept["kept"] and kept["dataset_region_mismatch"] == metadata["dataset_region_mismatch"]
    # the money as the config prices it: r-west pulled images from us-east-1
    with duckdb.connect(str(warehouse), read_only=True) as wh:
        assert wh.execute(
            "SELECT run_id, dataset, dataset_region, run_region, gigabytes, transfer_cost "
            "FROM egress ORDER BY run_id NULLS LAST").fetchall() == [
            ("r-west", "images", "us-east-1", "eu-west-1", 150.0, 3.0),
            (None, "logs", "EU-West-1", None, 20.0, 0.4)]


# ---------------------------------------------------------------------- gpu_utilization


def test_gpu_utilization_prices_idle_gpu_hours(con):
    def gpu_run(run_id, util, gpus=4):
        return {"run_id": run_id, "purpose": "search", "model": "churn", "gpus": gpus,
                "start_time": d(2024, 3, 1), "end_time": d(2024, 3, 2),
                "gpu_utilization": util}

    runs(con, gpu_run("g1", 25.0), gpu_run("g2", None), gpu_run("g3", 100.0),
         gpu_run("g4", 0.0))
    attr(con, "L1", "g1", "search", 80.0, hours=8.0, acc=32.0)
    attr(con, "L2", "g1", "search", 20.0, hours=2.0, acc=8.0)
    attr(con, "L3", "g1", "search", 5.0, component="cpu", hours=8.0)     # not GPU cost
    attr(con, "L4", "g2", "search", 50.0, hours=4.0, acc=16.0)           # no figure
    attr(con, "L5", "g3", "search", 40.0, hours=4.0, acc=16.0)
    attr(con, "L6", "g4", "search", 3.0, component="cpu", hours=4.0)     # no GPU billed

    run(con, "gpu_utilization")
    got = con.execute("SELECT run_id, gpu_utilization, accelerator_hours, gpu_cost, "
                      "idle_accelerator_hours, idle_cost FROM gpu_utilization ORDER BY run_id"
                      ).fetchall()
    assert got == [
        ("g1", 25.0, 40.0, 100.0, 30.0, 75.0),   # 40 GPU-h × 0.75 idle; 100 × 0.75
        ("g3", 100.0, 16.0, 40.0, 0.0, 0.0),
    ]


def test_runs_file_reads_gpu_utilization(tmp_path):
    from cost_pipeline.ingest.sources import SourceError
    from cost_pipeline.ingest.sources.runs_file import read_runs

    path = tmp_path / "runs.csv"
    path.write_text("run_id,status,start_time,gpu_utilization\n"
                    "a,FINISHED,2024-03-01T00:00:00Z,47.5\nb,FINISHED,2024-03-01,\n")
    assert {r["run_id"]: r["gpu_utilization"] for r in read_runs(path, "t")} == \
        {"a": 47.5, "b": None}
    path.write_text("run_id,status,start_time,gpu_utilization\nc,FINISHED,2024-03-01,150\n")
    with pytest.raises(SourceError, match="row 2.*gpu_utilization"):
        read_runs(path, "t")


# ----------------------------------------------------------------------------- showback


def test_showback_by_team_adds_up_to_the_month(con):
    runs(con, {"run_id": "a", "purpose": "production", "team": "risk",
               "start_time": d(2024, 3, 1)},
         {"run_id": "b", "purpose": "search", "start_time": d(2024, 3, 1)},
         {"run_id": "c", "purpose": "eval", "team": "  ", "start_time": d(2024, 3, 1)})
    line(con, "L1", resource="i-1", component="gpu", tags={"user_team": "ml"})
    line(con, "L2", resource="i-2", component="gpu", tags={"team": "fraud"})
    line(con, "L3", resource="vol-3", component="storage")
    line(con, "L4", component="other", tags={"user:team": "data"})
    attr(con, "L1", "a", "production", 10.0, hours=1.0, acc=4.0)   # the run's team wins
    attr(con, "L1", "b", "search", 6.0, hours=1.0, acc=2.0)        # no team: the line's tag
    attr(con, "L1", None, "untracked", 4.0, hours=1.0, acc=2.0, kind="idle_capacity")
    attr(con, "L2", "c", "other", 3.0)                              # blank team = none
    attr(con, "L3", "b", "search", 2.0, component="storage")
    attr(con, "L3", None, "untracked", 1.0, component="storage", kind="idle_capacity")
    attr(con, "L4", None, "unallocated", 0.5, component="other", rule="non_usage", kind="tax")

    run(con, "showback")
    got = con.execute("SELECT team, purpose_class, component, cost, accelerator_hours, runs "
                      "FROM showback ORDER BY ALL").fetchall()
    assert got == [
        ("data", "unallocated", "other", 0.5, 0.0, 0),
        ("fraud", "other", "gpu", 3.0, 0.0, 1),
        ("ml", "search", "gpu", 6.0, 2.0, 1),
        ("ml", "untracked", "gpu", 4.0, 2.0, 0),
        ("risk", "production", "gpu", 10.0, 4.0, 1),
        (None, "search", "storage", 2.0, 0.0, 1),
        (None, "untracked", "storage", 1.0, 0.0, 0),
    ]
    assert sum(r[3] for r in got) == pytest.approx(26.5)   # = the attribution total


NAIVE_SHOWBACK = """
    SELECT coalesce(r.team, nullif(trim(user_tag(b.Tags, 'team')), '')) AS team,
           CAST(a.purpose_class AS VARCHAR), CAST(a.component AS VARCHAR), fsum(a.cost),
           count(DISTINCT r.run_id)
    FROM attribution AS a
    JOIN billing_facts AS b ON b.x_SourceLine = a.x_SourceLine
    LEFT JOIN (SELECT run_id, min(nullif(trim(team), '')) AS team FROM tracker_runs
               GROUP BY run_id) AS r ON r.run_id = a.run_id
    GROUP BY ALL ORDER BY ALL"""


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_showback_gives_every_row_its_runs_team_else_its_lines_tag(data):
    """On random months: showback (which reads only some rows one by one, the rest as per-run
    sums) equals taking every attribution row's team from its run, else from its line."""
    teams = data.draw(st.lists(st.sampled_from([None, "", " ", "risk", "ml"]), min_size=4,
                               max_size=4))
    tags = data.draw(st.lists(st.sampled_from(
        [None, {"user_team": "ml"}, {"team": "fraud"}, {"user_team": " "}, {"other": "x"}]),
        min_size=5, max_size=5))
    rows = data.draw(st.lists(st.tuples(
        st.integers(0, 4), st.sampled_from([None, 0, 1, 2, 3]),
        st.sampled_from(["gpu", "storage"]), st.integers(1, 400)), min_size=1, max_size=14))
    c = duckdb.connect(":memory:")
    ensure_schema(c)
    register_datasets(c, [])
    runs(c, *[{"run_id": f"r{i}", "purpose": "production", "team": team,
               "start_time": d(2024, 3, 1)} for i, team in enumerate(teams)])
    for i, tag in enumerate(tags):
        line(c, f"L{i}", resource=f"i-{i}", component="gpu", tags=tag)
    for n, (line_no, run_no, component, cents) in enumerate(rows):
        c.execute(
            "INSERT INTO attribution_rows BY NAME SELECT * EXCLUDE (run_id), "
            "run_hash_of(run_id) AS run_hash FROM (SELECT ? AS month, key_hash(?) AS line_key, "
            "? AS run_id, ? AS purpose_class, ? AS component, ? AS cost, 1.0 AS share, "
            "'compute' AS rule)",
            [MARCH, f"L{line_no}", None if run_no is None else f"r{run_no}",
             "untracked" if run_no is None else "production", component,
             cents / 100 + n / 1000])
    summarize_month(c, MARCH)
    run(c, "showback")
    got = c.execute("SELECT team, CAST(purpose_class AS VARCHAR), CAST(component AS VARCHAR), "
                    "cost, runs FROM showback ORDER BY ALL").fetchall()
    want = c.execute(NAIVE_SHOWBACK).fetchall()
    assert [(t, p, k, r) for t, p, k, _, r in got] == [(t, p, k, r) for t, p, k, _, r in want]
    for (*_, cost, _), (*_, expected, _) in zip(got, want, strict=True):
        assert cost == pytest.approx(expected, rel=1e-12, abs=1e-12)
    c.close()


# -------------------------------------------------------------------------- cost_levers


def put(con, table: str, **values) -> None:
    names = ", ".join(f"? AS {k}" for k in values)
    con.execute(f"INSERT INTO {table} BY NAME SELECT ? AS month, {names}",
                [MARCH, *values.values()])


def test_cost_levers_rank_by_dollars_with_the_cheaper_card_last(con):
    def trend(search_id, cost, saturating, improvement, cpi=None, prev=None, prev_cpi=None):
        put(con, "search_trend", model="churn", metric_name="val_auc", search_id=search_id,
            search_order=1, runs=1, improvement=improvement, accelerator_hours=0.0, cost=cost,
            cost_this_month=cost, cost_per_improvement=cpi, previous_search_id=prev,
            previous_cost_per_improvement=prev_cpi, saturating=saturating)

    def shape(search_id, configs, seeds, grid, best, reruns, rerun_cost, extra, cost,
              rerun_of=None, without_config=0):
        put(con, "search_shape", search_id=search_id, model="churn", runs=configs * seeds,
            configs=configs, seeds_per_config=seeds, grid=grid, best_config_id=best,
            rerun_configs=reruns, rerun_of=rerun_of, runs_without_config=without_config,
            rerun_cost=rerun_cost, extra_seed_cost=extra,
            questioned_cost=rerun_cost + extra, cost=cost)

    # bound the search = Σ search_shape.questioned_cost; search_trend adds the saturation
    trend("S2", 6.0, True, 0.02, 3300.0, "S1", 1100.0)
    trend("S3", 50.0, True, -0.01)
    trend("S4", 41.0, False, 0.04, 1025.0, "S2", 3300.0)
    trend("S9", 0.0, True, -0.02)                           # saturating but not billed now
    shape("S2", 4, 2, True, "c1", 2, 6.0, 0.0, 6.0, rerun_of="S1")  # 2 configs of S1 again
    shape("S3", 3, 3, False, None, 0, 0.0, 50.0, 50.0, without_config=1)  # no metric
    shape("S4", 2, 1, True, "c9", 0, 0.0, 0.0, 41.0)        # nothing questioned
    for kind, cost, hours in [("recomputed", 4.5, 5.0), ("recomputed", 1.0, 1.0),
                              ("stale_transform", 20.0, 0.0)]:
        put(con, "preprocessing_waste", kind=kind, run_id=f"r-{cost}", input_hash="h1",
            transform_version="v1", current_transform_version="v1", reference_run_id="pp-a",
            cpu_hours=hours, accelerator_hours=0.0, cost=cost)
    put(con, "retention_violations", bucket="b", key="k1", reason="dead_run",
        bytes=1 << 30, monthly_cost=30.0)
    put(con, "retention_violations", bucket="b", key="k2", reason="orphan",
        bytes=1 << 30, monthly_cost=12.5)
    for run_id, cost in [("r1", 6.5), (None, 3.0)]:
        put(con, "egress", run_id=run_id, purpose_class="search", dataset="events",
            dataset_region="us-west-2", run_region="us-east-1" if run_id else None, lines=1,
            gigabytes=100.0, transfer_cost=cost, other_network_cost=0.0, cost=cost)
    put(con, "gpu_utilization", run_id="g1", purpose_class="search", gpu_utilization=20.0,
        accelerator_hours=100.0, gpu_cost=625.0, idle_accelerator_hours=80.0, idle_cost=500.0)
    line(con, "U1", resource="i-nb", component="gpu", instance_type="g5.12xlarge")
    line(con, "U2", resource="i-cpu", component="cpu")
    attr(con, "U1", None, "untracked", 70.0, hours=10.0, acc=40.0, kind="no_run")
    attr(con, "U2", None, "untracked", 10.0, component="cpu", hours=20.0, kind="no_run")
    attr(con, "U3", None, "untracked", 100.0, component="storage", kind="idle_capacity")
    attr(con, "U4", None, "untracked", 5.0, component="network", kind="shared")
    attr(con, "S1", "s3-a", "search", 50.0)
    run(con, "untracked_usage")  # the largest untracked resource comes from it

    assert run(con, "cost_levers") == 8
    got = select(con, "SELECT rank, lever, dollars, evidence FROM cost_levers ORDER BY rank")
    assert [(r["rank"], r["lever"], r["dollars"]) for r in got] == [
        (1, "chase untracked usage", 80.0),      # GPU 70 + CPU 10 (storage, network not)
        (2, "bound the search", 56.0),           # questioned: S2 6 + S3 50, not S4
        (3, "delete dead checkpoints", 42.5),    # 30 + 12.5
        (4, "co-locate compute & data", 9.5),  # 6.5 + the unclaimed 3.0
        (5, "cache preprocessing", 5.5),         # 4.5 + 1.0, not the stale run's 20
        (6, "retrain on measured decay", 0.0),   # no retrain (retrain_cadence is empty)
        (7, "checkpoint before going preemptible", 0.0),   # no spot chain (preemption)
        (8, "use a cheaper card", 500.0),        # the largest figure, and still last
    ]
    evidence = {r["lever"]: r["evidence"] for r in got}
    assert "largest i-nb (g5.12xlarge) $70.00" in evidence["chase untracked usage"]
    assert evidence["bound the search"] == (
        "$56.00 of $50.00 search cost this month re-ran configs or ran extra seeds: "
        "S3: 3 configs × up to 3 seeds, not a full grid; no config run in an earlier search; "
        "1 run without config_id, never counted as re-runs; no metric picks a best config: "
        "extra seeds of every config $50.00; saturating: no improvement | "
        "S2: 4 configs × 2 seeds, a full grid; 2 of 4 configs already run in S1 — $6.00 "
        "re-run; extra seeds of non-best configs $0.00 (best c1); saturating: $3,300.00 per "
        "unit of val_auc vs $1,100.00 for S1")
    assert "6.0 CPU-hours" in evidence["cache preprocessing"]
    assert "1 run ($20.00) trained on a stale" in evidence["cache preprocessing"]
    assert "80.0 of 100.0 GPU-hours" in evidence["use a cheaper card"]
    assert all(r["evidence"] for r in got)


def test_cost_levers_evidence_is_in_the_bills_currency(con):
    # issue 16: a NOK bill's evidence said "$0.10"; every amount carries BillingCurrency
    insert_lines(con, MARCH, [{
        "x_SourceLine": "U1", "ResourceId": "i-nb", "x_CostComponent": "gpu",
        "EffectiveCost": 0.1, "BilledCost": 0.1, "BillingCurrency": "NOK",
        "ChargeCategory": "Usage", "ChargePeriodStart": d(2024, 3, 2),
        "ChargePeriodEnd": d(2024, 3, 2, 1), "x_InstanceType": "g5.xlarge"}])
    attr(con, "U1", None, "untracked", 0.1, hours=1.0, acc=1.0, kind="no_run")
    runs(con, {"run_id": "s-a", "purpose": "search", "start_time": d(2024, 3, 2)})
    attr(con, "S1", "s-a", "search", -1234.5)
    put(con, "retention_violations", bucket="b", key="k1", reason="dead_run",
        bytes=1 << 30, monthly_cost=30.0)
    run(con, "untracked_usage")
    run(con, "cost_levers")
    evidence = dict(con.execute("SELECT lever, evidence FROM cost_levers").fetchall())
    assert all("$" not in text for text in evidence.values()), evidence
    assert "largest i-nb (g5.xlarge) NOK 0.10" in evidence["chase untracked usage"]
    assert "(search cost this month −NOK 1,234.50)" in evidence["bound the search"]
    assert "dead runs NOK 30.00" in evidence["delete dead checkpoints"]
    assert "tracked GPU cost this month −NOK 1,234.50" in evidence["use a cheaper card"]


def test_untracked_compute_that_is_a_credit_is_nothing_to_chase(con):
    """A refund on an unclaimed instance made "chase untracked usage" −$3.00, ranked below
    the $0 levers: a lever's dollars are a saving, 0 here, saying why."""
    insert_lines(con, MARCH, [{
        "x_SourceLine": "R1", "ResourceId": "i-r", "x_CostComponent": "gpu",
        "EffectiveCost": -3.0, "BilledCost": -3.0, "ChargeCategory": "Usage",
        "ChargePeriodStart": d(2024, 3, 2), "ChargePeriodEnd": d(2024, 3, 2, 1)}])
    attr(con, "R1", None, "untracked", -3.0, hours=1.0, acc=1.0, kind="no_run")
    run(con, "untracked_usage")
    run(con, "cost_levers")
    dollars, evidence = con.execute("SELECT dollars, evidence FROM cost_levers "
                                    "WHERE lever = 'chase untracked usage'").fetchone()
    assert dollars == 0
    assert evidence.startswith("untracked compute is a credit this month (−$3.00): "
                               "nothing to chase; untracked compute: ")


CREDIT_NOTES = {  # lever → what its figure is, when refunds leave it below zero
    "bound the search": "the re-run configs' and extra seeds' cost",
    "retrain on measured decay": "the flat retrains' cost",
    "cache preprocessing": "the recomputations' cost",
    "delete dead checkpoints": "the storage of the checkpoints breaking the retention policy",
    "co-locate compute & data": "the cross-region pulls' cost",
    "chase untracked usage": "untracked compute",
    "checkpoint before going preemptible": "the cost of the runs restarted from scratch",
    "use a cheaper card": "the idle GPU cost",
}


def test_every_lever_of_a_month_of_refunds_is_zero_saying_so(con):
    """A lever is the money it could save (SPEC §12): never below 0. Refunds larger than the
    charges left every figure below 0 — bound the search −$100.00, delete dead checkpoints
    −$60.00, … — ranked below the $0 levers; only "chase untracked usage" said 0. Each is 0
    now, its evidence opening with the credit, and they rank as $0 levers: in the mission
    order, the cheaper card last."""
    put(con, "search_shape", search_id="S8", model="churn", runs=1, configs=1,
        seeds_per_config=1, grid=True, best_config_id="c1", rerun_configs=1, rerun_of="S7",
        runs_without_config=0, rerun_cost=-100.0, extra_seed_cost=0.0, questioned_cost=-100.0,
        cost=-100.0)
    runs(con, {"run_id": "s-8", "purpose": "search", "search_id": "S8", "config_id": "c1",
               "start_time": d(2024, 3, 2)},
         {"run_id": "sp-2", "purpose": "production", "restart_of": "sp-1",
          "start_time": d(2024, 3, 3)})
    attr(con, "S1", "s-8", "search", -100.0, acc=8.0)
    put(con, "retrain_cadence", model="churn", retrains=2, schedule_retrains=2,
        drift_retrains=0, manual_retrains=0, unknown_retrains=0, median_days_between=14.0,
        cost=-80.0, search_cost=0.0, mean_metric_change=0.001, flat_retrains=1,
        flat_retrain_cost=-40.0)
    put(con, "preprocessing_waste", kind="recomputed", run_id="pp-b", input_hash="h1",
        transform_version="v1", current_transform_version="v1", reference_run_id="pp-a",
        cpu_hours=3.0, accelerator_hours=0.0, cost=-7.5)
    for i in range(4):
        put(con, "retention_violations", bucket="b", key=f"k{i}", reason="dead_run",
            bytes=150, monthly_cost=-15.0)
    put(con, "egress", run_id="r1", purpose_class="search", dataset="events",
        dataset_region="us-west-2", run_region="us-east-1", lines=1, gigabytes=10.0,
        transfer_cost=-6.5, other_network_cost=0.0, cost=-6.5)
    attr(con, "U1", None, "untracked", -3.0, hours=1.0, acc=1.0, kind="no_run")
    put(con, "preemption", chain_id="sp-1", model="churn", runs=2, restarts=1,
        restarts_from_scratch=1, cost=-20.0, lost_cost=-12.0, on_demand_cost=-30.0,
        last_run_id="sp-2", last_run_on_demand_cost=-30.0,
        spot_cost_more_than_on_demand=True)
    put(con, "gpu_utilization", run_id="g1", purpose_class="search", gpu_utilization=20.0,
        accelerator_hours=10.0, gpu_cost=-62.5, idle_accelerator_hours=8.0, idle_cost=-50.0)
    run(con, "untracked_usage")
    run(con, "cost_levers")
    got = select(con, "SELECT rank, lever, dollars, evidence FROM cost_levers ORDER BY rank")
    assert [(r["rank"], r["lever"], r["dollars"]) for r in got] == [
        (rank, lever, 0.0) for rank, lever in enumerate(CREDIT_NOTES, 1)]
    figures = {"bound the search": "−$100.00", "retrain on measured decay": "−$40.00",
               "cache preprocessing": "−$7.50", "delete dead checkpoints": "−$60.00",
               "co-locate compute & data": "−$6.50", "chase untracked usage": "−$3.00",
               "checkpoint before going preemptible": "−$12.00",
               "use a cheaper card": "−$50.00"}
    for r in got:
        verb = "chase" if r["lever"] == "chase untracked usage" else "save"
        assert r["evidence"].startswith(
            f"{CREDIT_NOTES[r['lever']]} is a credit this month ({figures[r['lever']]}): "
            f"nothing to {verb}; "), r
    evidence = {r["lever"]: r["evidence"] for r in got}
    # what follows is the lever's own evidence, the figures as they stand
    assert evidence["bound the search"].endswith(
        "nothing to save; −$100.00 of −$100.00 search cost this month re-ran configs or ran "
        "extra seeds: S8: 1 config × 1 seed, a full grid; 1 of 1 config already run in "
        "S7 — −$100.00 re-run; extra seeds of non-best configs $0.00 (best c1)")
    assert evidence["delete dead checkpoints"].endswith(
        "nothing to save; 4 objects, 600 B, break the retention policy: dead runs "
        "−$60.00, beyond keep-last $0.00, orphans $0.00 a month")


def test_a_credit_within_a_levers_charges_nets_and_a_lever_below_a_cent_says_nothing(con):
    """The floor is on the lever's net figure: a $15 dead checkpoint beside a −$5 refunded
    one is $10 to save, no credit said; −$0.004 (a float sum's crumbs) is 0 without a note
    of a "−$0.00" credit."""
    put(con, "retention_violations", bucket="b", key="k1", reason="dead_run", bytes=1,
        monthly_cost=15.0)
    put(con, "retention_violations", bucket="b", key="k2", reason="orphan", bytes=1,
        monthly_cost=-5.0)
    put(con, "egress", run_id="r1", purpose_class="search", dataset="events",
        dataset_region="us-west-2", run_region="us-east-1", lines=1, gigabytes=None,
        transfer_cost=-0.004, other_network_cost=0.0, cost=-0.004)
    run(con, "cost_levers")
    got = {r["lever"]: r for r in select(con, "SELECT * FROM cost_levers")}
    assert got["delete dead checkpoints"]["dollars"] == 10.0
    assert got["delete dead checkpoints"]["rank"] == 1
    assert got["delete dead checkpoints"]["evidence"].startswith("2 objects")
    assert got["co-locate compute & data"]["dollars"] == 0.0
    assert got["co-locate compute & data"]["evidence"].startswith("1 run pulled data")


def test_dead_checkpoints_in_a_refunded_bucket_are_no_saving_below_zero(con):
    """Bucket `ckpt` has only Refund storage lines, −$2 a day over March (−$62), and 620
    listed bytes: −$0.10 a byte. Four dead checkpoints of 150 bytes each cost −$15.00 a
    month each in retention_violations (the table keeps the bill's figure), and the lever
    "delete dead checkpoints" was −$60.00, ranked 7th below the $0 levers: it is 0 now,
    ranked among them in the mission order (4th), saying the figure is a credit."""
    insert_lines(con, MARCH, [{
        "x_SourceLine": f"R{day}", "ResourceId": "ckpt", "x_CostComponent": "storage",
        "EffectiveCost": -2.0, "BilledCost": -2.0, "ChargeCategory": "Refund",
        "x_ResourceKind": "bucket", "ChargePeriodStart": d(2024, 3, day),
        "ChargePeriodEnd": d(2024, 3, day, 23)} for day in range(1, 32)])
    runs(con, *[{"run_id": f"f{i}", "status": "FAILED", "start_time": d(2024, 3, 1),
                 "end_time": d(2024, 3, 2)} for i in range(4)])
    insert_inventory(con, MARCH, [
        {"bucket": "ckpt", "key": f"checkpoints/f{i}/ck-1", "size": 150,
         "last_modified": d(2024, 3, 2), "prefix": "checkpoints/", "run_id": f"f{i}",
         "checkpoint": "ck-1"} for i in range(4)]
        + [{"bucket": "ckpt", "key": "data/x", "size": 20, "last_modified": d(2024, 3, 2)}])
    run(con, "retention_violations")
    costs = [c for (c,) in con.execute("SELECT monthly_cost FROM retention_violations "
                                       "ORDER BY key").fetchall()]
    assert costs == [pytest.approx(-15.0)] * 4           # 150 B × −62 ÷ 620 B
    run(con, "cost_levers")
    rank, dollars, evidence = con.execute(
        "SELECT rank, dollars, evidence FROM cost_levers "
        "WHERE lever = 'delete dead checkpoints'").fetchone()
    assert (rank, dollars) == (4, 0.0)     # bound, retrain, cache, then it: all $0
    assert evidence.startswith(
        "the storage of the checkpoints breaking the retention policy is a credit this month "
        "(−$60.00): nothing to save; 4 objects")
    assert min(v for (v,) in con.execute("SELECT dollars FROM cost_levers").fetchall()) == 0


def test_levers_without_the_data_to_price_them_say_zero_and_why(con):
    """SPEC §12: every lever row says 0 with its reason when the data to price it is missing.
    No checkpoint listing, no preprocess run with an input_hash, no dataset region: these
    three levers read like clean findings ("0 object(s) … break the retention policy")."""
    runs(con, *[{"run_id": f"pp{i}", "model": "churn", "purpose": "preprocess",
                 "start_time": d(2024, 3, i)} for i in (1, 2)])
    attr(con, "L1", "pp1", "preprocessing", 2.0, component="cpu", hours=1.0)
    attr(con, "L2", "pp2", "preprocessing", 2.5, component="cpu", hours=1.0)
    attr(con, "B1", None, "untracked", 0.75, component="storage", kind="idle_capacity")
    attr(con, "N1", None, "untracked", 0.25, component="network", kind="shared")
    run(con, "preprocessing_waste")

    def levers():
        run(con, "cost_levers")
        got = select(con, "SELECT lever, dollars, evidence FROM cost_levers")
        assert all(r["dollars"] == 0.0 for r in got if r["lever"] != "use a cheaper card")
        return {r["lever"]: r["evidence"] for r in got}

    evidence = levers()
    assert evidence["cache preprocessing"] == (
        "no preprocess run records an input_hash and transform_version: recomputations cannot "
        "be told (preprocessing cost this month $4.50)")
    assert evidence["delete dead checkpoints"] == (
        "no checkpoint listing this month (no checkpoints source in the config, or it listed "
        "nothing): dead checkpoints cannot be told (storage cost this month $0.75)")
    assert evidence["co-locate compute & data"] == (
        "no dataset region known (no datasets in the config, no run records dataset_region): "
        "cross-region pulls cannot be told (network cost this month $0.25)")

    # a configured dataset's region: no pull crossed a region, a finding
    con.execute("INSERT INTO config_datasets VALUES ('events', 'data-west', 'us-west-2')")
    assert levers()["co-locate compute & data"] == "no cross-region pull billed this month"
    con.execute("DELETE FROM config_datasets")
    # a run's dataset_region, a keyed preprocess run and a dated report of an empty bucket:
    # each lever's 0 is a finding again
    runs(con, {"run_id": "pp3", "model": "churn", "purpose": "preprocess", "input_hash": "h1",
               "transform_version": "v1", "start_time": d(2024, 3, 3),
               "dataset_region": "us-west-2"})
    con.execute("INSERT INTO checkpoint_snapshots VALUES (?, 'test', 'ckpt', ?)",
                [MARCH, date(2024, 3, 31)])
    run(con, "preprocessing_waste")
    evidence = levers()
    assert evidence["cache preprocessing"] == (
        "0 preprocess runs recomputed an (input_hash, transform_version) already computed: "
        "0.0 CPU-hours")
    assert evidence["delete dead checkpoints"] == (
        "0 objects, 0 B, break the retention policy: dead runs $0.00, beyond keep-last "
        "$0.00, orphans $0.00 a month")
    assert evidence["co-locate compute & data"] == "no cross-region pull billed this month"


def test_retrains_that_cannot_be_measured_say_why(con):
    """March's retrains of churn, fraud and credit each log a metric_value but are their
    model's first production run: the lever said "none with a metric_value to compare with
    the previous production run", as if the metric were missing. It says which it is; with
    more models each retrain is counted under the first reason that holds:
        text  no metric_value (and no earlier run either)          → without a metric_value
        churn, fraud, credit  metric_value, nothing before         → no previous production run
        ads   its February run logged no metric_value              → previous has none
        rank  its February run logged ndcg, March's auc            → another metric_name"""
    def prod(run_id, model, start, metric, name="auc"):
        return {"run_id": run_id, "model": model, "purpose": "production", "start_time": start,
                "metric_name": name if metric is not None else None, "metric_value": metric}

    def evidence():
        run(con, "retrain_cadence")
        run(con, "cost_levers")
        ((dollars, text),) = con.execute(
            "SELECT dollars, evidence FROM cost_levers "
            "WHERE lever = 'retrain on measured decay'").fetchall()
        assert dollars == 0.0
        return text

    runs(con, prod("c1", "churn", d(2024, 3, 3), 0.90), prod("f1", "fraud", d(2024, 3, 4), 0.80),
         prod("k1", "credit", d(2024, 3, 5), 0.70))
    assert evidence() == (
        "3 retrains this month, none measured (3 with a metric_value but no previous "
        "production run of its model to compare with): flatness cannot be measured")
    runs(con, prod("t1", "text", d(2024, 3, 8), None),
         prod("a0", "ads", d(2024, 2, 1), None), prod("a1", "ads", d(2024, 3, 6), 0.60),
         prod("r0", "rank", d(2024, 2, 1), 0.50, "ndcg"), prod("r1", "rank", d(2024, 3, 7), 0.60))
    assert evidence() == (
        "6 retrains this month, none measured (1 without a metric_value, 3 with a "
        "metric_value but no previous production run of its model to compare with, 1 whose "
        "previous production run has no metric_value, 1 whose previous production run logged "
        "another metric_name): flatness cannot be measured")
    # every retrain without a metric_value: that is the one reason given
    con.execute("DELETE FROM tracker_runs")
    runs(con, prod("t1", "text", d(2024, 3, 8), None), prod("a0", "ads", d(2024, 2, 1), 0.5),
         prod("a1", "ads", d(2024, 3, 6), None))
    assert evidence() == (
        "2 retrains this month, none with a metric_value to compare with the previous "
        "production run: flatness cannot be measured")


def test_fmt_money_matches_the_python_formatter(con):
    from cost_pipeline.report.money import in_currency

    for amount in [0.0, 0.1, 1.005, -0.004, -1234567.125, 2.675, 1e15 + 0.5, None,
                   float("nan"), float("inf"), float("-inf"), 1234.4999996, 2.0354999996,
                   0.0049999996, 752.4999999999998, -0.5, 1e-07, 1.5e-10, 2.5e-05]:
        for currency in ["USD", "NOK", None, "eur", "JPY", "kwd ", "CLF", "JPY\t", "usd\n"]:
            (sql,) = con.execute("SELECT fmt_money(?, ?)", [amount, currency]).fetchone()
            assert sql == in_currency(amount, currency), (amount, currency)
    # nothing finite is refused (a DECIMAL(38, 6) holds less than 1e32): beyond a double's
    # 17 digits the two may spell its noise apart
    for amount in [1e26, 1e32, 1e34, -5e35, 1e37, -1e300]:
        for currency, decimals in [("USD", ".00"), ("JPY", None), ("KWD", ".000")]:
            (sql,) = con.execute("SELECT fmt_money(?, ?)", [amount, currency]).fetchone()
            if abs(amount) <= 1e32:  # from 1e34 SQL writes the double's own digits (9,999…)
                assert sql[:6] == in_currency(amount, currency)[:6], (amount, currency)
            assert sql.startswith("−" if amount < 0 else ("$" if currency == "USD" else currency))
            assert sql.endswith(decimals) if decimals else "." not in sql, (amount, currency)


def test_money_is_shown_to_its_currency_s_smallest_unit(con):
    """ISO 4217's minor units: a yen has no decimals, a Kuwaiti dinar three (fils); the SQL
    macro and the Python formatter hold the same list."""
    import re

    from cost_pipeline.report.money import MINOR_UNITS, in_currency
    from cost_pipeline.warehouse import sql_text

    assert [in_currency(v, c) for v, c in [(1234.5, "JPY"), (-0.4, "JPY"), (-0.6, "JPY"),
                                           (38272.6685, "KWD"), (1.0005, "BHD"),
                                           (0.00005, "CLF"), (1234.5, "NOK")]] == [
        "JPY 1,235", "JPY 0", "−JPY 1", "KWD 38,272.669", "BHD 1.001", "CLF 0.0001",
        "NOK 1,234.50"]
    macro = sql_text("macros")
    body = macro[macro.index("MACRO minor_digits"):macro.index("MACRO money_digits")]
    listed = {code: int(digits) for code, digits in re.findall(r"'([A-Z]{3})': (\d)", body)}
    assert listed == MINOR_UNITS
    for code, digits in [*MINOR_UNITS.items(), ("USD", 2), ("EUR", 2), ("", 2), (None, 2)]:
        assert con.execute("SELECT minor_digits(?)", [code]).fetchone()[0] == digits, code


def test_cost_levers_of_an_empty_month_keep_the_mission_order(con):
    assert run(con, "cost_levers", FEB) == 8
    got = con.execute("SELECT lever, dollars FROM cost_levers ORDER BY rank").fetchall()
    assert got == [("bound the search", 0.0), ("retrain on measured decay", 0.0),
                   ("cache preprocessing", 0.0), ("delete dead checkpoints", 0.0),
                   ("co-locate compute & data", 0.0), ("chase untracked usage", 0.0),
                   ("checkpoint before going preemptible", 0.0), ("use a cheaper card", 0.0)]


def test_cost_levers_equal_to_the_cent_rank_in_the_mission_order(con):
    # untracked compute $0.1 + $0.2 (0.30000000000000004 as a float sum) and dead
    # checkpoints $0.30: both read $0.30, so the mission order decides, not the last bit
    attr(con, "U1", None, "untracked", 0.1, component="gpu", hours=1.0, acc=1.0, kind="no_run")
    attr(con, "U2", None, "untracked", 0.2, component="cpu", hours=1.0, kind="no_run")
    put(con, "retention_violations", bucket="b", key="k1", reason="dead_run", bytes=1,
        monthly_cost=0.3)
    run(con, "untracked_usage")
    run(con, "cost_levers")
    got = con.execute("SELECT lever, dollars FROM cost_levers ORDER BY rank LIMIT 2").fetchall()
    assert [lever for lever, _ in got] == ["delete dead checkpoints", "chase untracked usage"]
    assert got[1][1] > got[0][1]     # by a float's last bit


def test_the_new_tables_are_idempotent_per_month(con):
    trend_months(con)
    con.execute("INSERT INTO config_datasets VALUES ('events', 'data-west', 'us-west-2')")
    tables = ["search_trend", "preprocessing_waste", "egress", "gpu_utilization", "showback",
              "untracked_usage", "cost_levers"]

    def snapshot():
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}

    for t in tables:
        run(con, t, FEB)
        run(con, t)
    first = snapshot()
    assert first["search_trend"] and first["showback"] and first["cost_levers"]
    for t in tables:
        run(con, t)
    assert snapshot() == first


def test_levers_of_a_yen_bill_rank_and_say_credits_at_the_yen(con):
    """A yen has no decimals: JPY 100.4 and JPY 100.3 read alike, so they rank in the mission
    order (they ranked by their sen), and a figure of −JPY 0.3 reads JPY 0 — no credit to
    name (it read "is a credit this month (JPY 0)")."""
    insert_lines(con, MARCH, [{"x_SourceLine": "Y0", "BillingCurrency": "JPY",
                               "EffectiveCost": 1.0, "BilledCost": 1.0}])
    put(con, "retention_violations", bucket="b", key="k1", reason="dead_run",
        bytes=1 << 30, monthly_cost=100.3)
    for run_id, cost in [("r1", 100.4)]:
        put(con, "egress", run_id=run_id, purpose_class="search", dataset="events",
            dataset_region="us-west-2", run_region="us-east-1", lines=1, gigabytes=100.0,
            transfer_cost=cost, other_network_cost=0.0, cost=cost)
    line(con, "U1", resource="i-nb", component="gpu", instance_type="g5.12xlarge")
    attr(con, "U1", None, "untracked", -0.3, hours=1.0, acc=4.0, kind="no_run")
    assert run(con, "cost_levers") == 8
    got = select(con, "SELECT rank, lever, evidence FROM cost_levers ORDER BY rank")
    assert [r["lever"] for r in got][:2] == ["delete dead checkpoints",
                                            "co-locate compute & data"]
    untracked = next(r["evidence"] for r in got if r["lever"] == "chase untracked usage")
    assert "credit" not in untracked


SIZES = {0: "0 B", 1_023: "1,023 B", 1_062_200: "1.0 MiB", 5 * 1024**3: "5.0 GiB",
         3 * 1024**4: "3.0 TiB",
         # a figure that rounds to 1,024 of a unit is one of the next: "1,024.0 KiB" before
         1024**2 - 1: "1.0 MiB", 1024**3 - 1: "1.0 GiB", 1024**4 - 1: "1.0 TiB",
         1024**2 - 52: "1,023.9 KiB", 1024**2 - 51: "1.0 MiB"}


@pytest.mark.parametrize("num_bytes", list(SIZES))
def test_a_size_in_sql_reads_as_the_report_writes_it(con, num_bytes):
    """macros.sql `byte_size` and the report's `size()` write one size alike: the largest
    binary unit under 1,024 of it as written (TiB at most), bytes whole, the others to one
    decimal."""
    from cost_pipeline.report.render import size

    ((written,),) = con.execute("SELECT byte_size(?)", [num_bytes]).fetchall()
    assert written == size(num_bytes)
    assert written == SIZES[num_bytes]


def test_dead_checkpoints_evidence_writes_their_size_as_the_report_does(con):
    """1,057 objects of 1,062,200 bytes read `0.0 GiB` in the lever's evidence, where the
    report's section 7 prints `1.0 MiB`."""
    for i in range(1_057):
        put(con, "retention_violations", bucket="b", key=f"k{i}", reason="dead_run",
            bytes=1_062_200 // 1_057 + (1 if i < 1_062_200 % 1_057 else 0),
            monthly_cost=0.01)
    run(con, "cost_levers")
    ((evidence,),) = con.execute("SELECT evidence FROM cost_levers "
                                 "WHERE lever = 'delete dead checkpoints'").fetchall()
    assert evidence.startswith("1,057 objects, 1.0 MiB, break the retention policy: dead runs "
                               "$10.57")
