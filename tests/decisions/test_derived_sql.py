"""The derived SQL assets (assets/*.sql) against small hand-made months.

Every expected figure is worked out by hand in the comments next to it, so a failure points
at a rule of SPEC section 7, not at a number someone copied from a previous run.
"""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.defs.assets.decisions import KEPT_WHEN_SAME
from cost_pipeline.warehouse import (
    ensure_schema,
    replace_month,
    replace_month_unless_same,
    sql_text,
    summarize_month,
)

MARCH = date(2024, 3, 1)
FEB = date(2024, 2, 1)
DERIVED = [
    "untracked_usage",
    "cost_per_model_monthly",
    "search_costs",
    "retention_violations",
    "storage_by_run_status",
]


def params(month: date = MARCH, metric_goal: str = "max") -> dict:
    nxt = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    return {
        "month": month,
        "month_start": datetime(month.year, month.month, 1),
        "month_end": datetime(nxt.year, nxt.month, 1),
        "keep_last_live": 3,
        "keep_last_production": 3,
        "grace_days": 7,
        "metric_goal": metric_goal,
    }


def run(con, table: str, month: date = MARCH, metric_goal: str = "max") -> int:
    return replace_month(con, table, month, sql_text(table), params(month, metric_goal))


def rows(con, sql: str, *args):
    return con.execute(sql, list(args)).fetchall()


# --------------------------------------------------------------------------- row builders


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    ensure_schema(c)
    yield c
    c.close()


def bill(con, line, resource, start, cost, component="gpu", hours=1.0, usage_hours=None,
         g=0, category="Usage", month=MARCH, resource_kind=None):
    con.execute(
        """INSERT INTO billing_facts BY NAME
           SELECT ? AS month, ?::TIMESTAMP AS ChargePeriodStart,
                  ?::TIMESTAMP AS ChargePeriodEnd, ? AS ChargeCategory, ? AS ResourceId,
                  ? AS BilledCost, ? AS EffectiveCost, ? AS x_CostComponent,
                  ? AS x_AcceleratorCount, ? AS x_UsageHours, ? AS x_InstanceUsage,
                  ? AS x_ResourceKind, ? AS x_SourceLine""",
        [month, start, start + timedelta(hours=hours), category, resource, cost, cost,
         component, g, usage_hours, usage_hours is not None, resource_kind, line],
    )


def tracker(con, run_id, status="FINISHED", start=datetime(2024, 3, 1), end=None, *,
            model=None, purpose=None, search_id=None, seed=None, config_id=None,
            metric_name=None, metric_value=None, keep=False, deleted=False, parent=None,
            source="mlflow", month=MARCH, restart_of=None):
    con.execute(
        """INSERT INTO tracker_runs BY NAME
           SELECT ? AS month, ? AS run_id, ? AS source, ? AS model, ? AS purpose,
                  ? AS search_id, ? AS seed, ? AS config_id, ? AS status,
                  ?::TIMESTAMP AS start_time, ?::TIMESTAMP AS end_time, ? AS metric_name,
                  ? AS metric_value, ? AS keep, ? AS deleted, ? AS parent_run_id,
                  ? AS restart_of""",
        [month, run_id, source, model, purpose, search_id, seed, config_id, status, start, end,
         metric_name, metric_value, keep, deleted, parent, restart_of],
    )


def obj(con, bucket, key, size, last_modified, *, snapshot_date=None, month=MARCH,
        prefix="checkpoints/"):
    """An inventory row; run id and checkpoint are parsed from `<prefix><run>/<ckpt>[/…]`."""
    run_id = checkpoint = None
    if prefix is not None and key.startswith(prefix):
        parts = key[len(prefix):].split("/")
        run_id, checkpoint = parts[0], parts[1]
    else:
        prefix = None
    con.execute(
        """INSERT INTO checkpoint_inventory BY NAME
           SELECT ? AS month, 'test' AS source, ? AS bucket, ? AS key, ? AS size,
                  ?::TIMESTAMP AS last_modified, ?::DATE AS snapshot_date, ? AS prefix,
                  ? AS run_id, ? AS checkpoint""",
        [month, bucket, key, size, last_modified, snapshot_date, prefix, run_id, checkpoint],
    )


def attr(con, line, run_id, purpose_class, cost, component="gpu", hours=None, acc_hours=None,
         kind=None, month=MARCH):
    con.execute(
        """INSERT INTO attribution_rows BY NAME
           SELECT * EXCLUDE (run_id), run_hash_of(run_id) AS run_hash FROM (
           SELECT ? AS month, key_hash(?) AS line_key, ? AS run_id, ? AS purpose_class,
                  ? AS component, ? AS cost, ? AS hours, ? AS accelerator_hours,
                  1.0 AS share, 'compute' AS rule, ? AS kind)""",
        [month, line, run_id, purpose_class, component, cost, hours, acc_hours, kind],
    )
    summarize_month(con, month)  # the per-run sums the attribution step writes with it


# ------------------------------------------------------------------------ untracked_usage


def test_untracked_usage_groups_by_resource_day_component_kind(con):
    t = datetime(2024, 3, 5, 10)
    bill(con, "L1", "i-1", t, 8.0, usage_hours=1.0, g=8)
    bill(con, "L2", "i-1", datetime(2024, 3, 5, 23), 8.0, usage_hours=1.0, g=8)
    bill(con, "L3", "i-1", datetime(2024, 3, 6, 0), 8.0, usage_hours=1.0, g=8)
    bill(con, "L4", "i-2", t, 10.0, usage_hours=1.0, g=8)
    bill(con, "L5", None, t, 1.2, component="network")
    bill(con, "L6", None, t, 3.0, component="other", category="Tax")
    bill(con, "LF", "i-1", datetime(2024, 2, 5), 99.0, usage_hours=1.0, g=8, month=FEB)
    attr(con, "L1", None, "untracked", 8.0, hours=1.0, acc_hours=8.0, kind="no_run")
    attr(con, "L2", None, "untracked", 8.0, hours=1.0, acc_hours=8.0, kind="no_run")
    attr(con, "L3", None, "untracked", 8.0, hours=1.0, acc_hours=8.0, kind="no_run")
    # L4: a run used 6 of the 8 GPUs; the other quarter of the line is idle capacity
    attr(con, "L4", "r1", "production", 7.5, hours=0.75, acc_hours=6.0)
    attr(con, "L4", None, "untracked", 2.5, hours=0.25, acc_hours=2.0, kind="idle_capacity")
    attr(con, "L5", None, "untracked", 1.2, component="network", kind="shared")
    attr(con, "L6", None, "unallocated", 3.0, component="other", kind="tax")
    attr(con, "LF", None, "untracked", 99.0, hours=1.0, acc_hours=8.0, kind="no_run",
         month=FEB)

    assert run(con, "untracked_usage") == 4
    got = rows(con, """SELECT resource_id, day, component, kind, hours, accelerator_hours, cost
                       FROM untracked_usage WHERE month = ? ORDER BY ALL""", MARCH)
    assert got == [
        # L1 (10:00) + L2 (23:00) are both 5 March UTC: 1+1 h, 8+8 GPU-h, 8+8
        ("i-1", date(2024, 3, 5), "gpu", "no_run", 2.0, 16.0, 16.0),
        # L3 starts at midnight: the next day
        ("i-1", date(2024, 3, 6), "gpu", "no_run", 1.0, 8.0, 8.0),
        # only the untracked quarter of L4, not the run's 7.5
        ("i-2", date(2024, 3, 5), "gpu", "idle_capacity", 0.25, 2.0, 2.5),
        # a line without resource: no hours at all; the tax line (unallocated) is not here,
        # neither is February's line
        (None, date(2024, 3, 5), "network", "shared", None, None, 1.2),
    ]


# ----------------------------------------------------------------- cost_per_model_monthly


def test_cost_per_model_sums_to_the_attribution_total(con):
    tracker(con, "r-prod", model="churn", purpose="production")
    # the same run reported by a second tracker source must not double its cost
    tracker(con, "r-prod", model="churn", purpose="production", source="runs_file")
    tracker(con, "r-s1", model="churn", purpose="search", search_id="S1")
    tracker(con, "r-s2", model="churn", purpose="search", search_id="S1")
    tracker(con, "r-f", model="fraud", purpose="eval")
    # February's snapshot names the model differently: March must use March's snapshot
    tracker(con, "r-prod", model="churn-v0", purpose="production", month=FEB)

    attr(con, "L1", "r-prod", "production", 100.0, hours=1.0, acc_hours=8.0)
    attr(con, "L2", "r-s1", "search", 30.0, hours=1.0, acc_hours=4.0)
    attr(con, "L3", "r-s2", "search", 20.0, hours=1.0, acc_hours=4.0)
    attr(con, "L4", "r-s2", "search", 5.0, component="storage")
    attr(con, "L5", "r-f", "other", 7.0, component="cpu", hours=2.0, acc_hours=0.0)
    attr(con, "L3", None, "untracked", 40.0, hours=1.0, acc_hours=8.0, kind="idle_capacity")
    attr(con, "L6", None, "unallocated", 12.5, component="other", kind="tax")
    attr(con, "L7", None, "unallocated", -2.5, component="other", kind="credit")
    attr(con, "LF", "r-prod", "production", 1000.0, month=FEB)

    run(con, "cost_per_model_monthly")
    got = rows(con, """SELECT model, purpose_class, component, cost, accelerator_hours, runs
                       FROM cost_per_model_monthly WHERE month = ? ORDER BY ALL""", MARCH)
    assert got == [
        ("churn", "production", "gpu", 100.0, 8.0, 1),    # not 200: no double count
        ("churn", "search", "gpu", 50.0, 8.0, 2),         # 30 + 20; 4 + 4 GPU-h; 2 runs
        ("churn", "search", "storage", 5.0, 0.0, 1),      # no accelerator hours → 0
        ("fraud", "other", "cpu", 7.0, 0.0, 1),
        (None, "unallocated", "other", 10.0, 0.0, 0),     # 12.5 tax − 2.5 credit
        (None, "untracked", "gpu", 40.0, 8.0, 0),         # no run, no model
    ]
    # conservation: 100 + 30 + 20 + 5 + 7 + 40 + 12.5 − 2.5 = 212
    (total,) = con.execute("SELECT sum(cost) FROM cost_per_model_monthly WHERE month = ?",
                           [MARCH]).fetchone()
    (attributed,) = con.execute("SELECT sum(cost) FROM attribution WHERE month = ?",
                                [MARCH]).fetchone()
    assert total == pytest.approx(212.0) == pytest.approx(attributed)


# --------------------------------------------------------------------------- search_costs


def search_month(con):
    """Two model families, several searches, for March 2024."""
    # --- churn, metric val_auc (higher is better) -----------------------------------------
    # baselines finished before search S1 started (its controller started 20 Feb)
    tracker(con, "prod-old", model="churn", purpose="production", start=datetime(2024, 1, 10),
            end=datetime(2024, 1, 15), metric_name="val_auc", metric_value=0.80)
    tracker(con, "s0-a", model="churn", purpose="search", search_id="S0",
            start=datetime(2024, 1, 20), end=datetime(2024, 2, 1),
            metric_name="val_auc", metric_value=0.83)
    # ... and results that must not count as the previous best:
    # another search's run that ended after S1 started
    tracker(con, "s0-late", model="churn", purpose="search", search_id="S0",
            start=datetime(2024, 2, 10), end=datetime(2024, 2, 21),
            metric_name="val_auc", metric_value=0.90)
    # a production run finished after S1 started
    tracker(con, "prod-new", model="churn", purpose="production", start=datetime(2024, 3, 15),
            end=datetime(2024, 3, 20), metric_name="val_auc", metric_value=0.95)
    # an adhoc run (neither production nor a search)
    tracker(con, "adhoc-1", model="churn", purpose="adhoc", start=datetime(2024, 1, 1),
            end=datetime(2024, 1, 2), metric_name="val_auc", metric_value=0.99)
    # another metric entirely (a loss): not comparable with an AUC
    tracker(con, "prod-loss", model="churn", purpose="production", start=datetime(2024, 1, 1),
            end=datetime(2024, 1, 2), metric_name="logloss", metric_value=5.0)
    # a production run still RUNNING, no end recorded, started before S1: its metric is a
    # reading in flight, not a result the search had to beat
    tracker(con, "prod-live", "RUNNING", model="churn", purpose="production",
            start=datetime(2024, 1, 5), metric_name="val_auc", metric_value=0.93)
    # another model
    tracker(con, "fraud-old", model="fraud", purpose="production", start=datetime(2024, 1, 1),
            end=datetime(2024, 1, 2), metric_name="val_auc", metric_value=0.97)

    # search S1: a sweep controller and four trials, two seeds, no config ids
    tracker(con, "s1-ctl", "RUNNING", start=datetime(2024, 2, 20), model="churn",
            purpose="search", search_id="S1")
    for run_id, seed, start, end, auc in [
        ("s1-1", "1", datetime(2024, 2, 25), datetime(2024, 3, 2), 0.85),
        ("s1-2", "2", datetime(2024, 3, 3), datetime(2024, 3, 5), 0.86),
        ("s1-3", "1", datetime(2024, 3, 6), datetime(2024, 3, 8), 0.87),
        ("s1-4", "2", datetime(2024, 3, 9), datetime(2024, 3, 10), 0.84),
    ]:
        tracker(con, run_id, start=start, end=end, model="churn", purpose="search",
                search_id="S1", seed=seed, parent="s1-ctl",
                metric_name="val_auc", metric_value=auc)
    attr(con, "L1", "s1-1", "search", 10.0, hours=2.0, acc_hours=16.0)
    attr(con, "L2", "s1-1", "search", 1.0, component="storage")
    attr(con, "L3", "s1-2", "search", 20.0, hours=4.0, acc_hours=32.0)
    attr(con, "L4", "s1-3", "search", 30.0, hours=6.0, acc_hours=48.0)
    attr(con, "L2", "s1-ctl", "search", 0.5, component="storage")   # the controller's bytes
    attr(con, "LF", "s1-1", "search", 500.0, hours=9.0, acc_hours=72.0, month=FEB)

    # S5: its trials disagree on the model (one each) → the first by name; nothing before it
    tracker(con, "s5-1", "RUNNING", start=datetime(2024, 3, 1), model="b", search_id="S5",
            purpose="search", metric_name="val_auc", metric_value=0.5)
    tracker(con, "s5-2", "RUNNING", start=datetime(2024, 3, 1), model="a", search_id="S5",
            purpose="search", metric_name="val_auc", metric_value=0.6)
    # S6: started in January, still running (no end), nothing billed this month → active
    tracker(con, "s6-1", "RUNNING", start=datetime(2024, 1, 5), model="churn",
            search_id="S6", purpose="search")
    # S7: all done in February, nothing billed in March → not active
    tracker(con, "s7-1", start=datetime(2024, 2, 5), end=datetime(2024, 2, 28), model="churn",
            search_id="S7", purpose="search", metric_name="val_auc", metric_value=0.1)
    # S8: done in February, but its checkpoints were billed in March → active
    tracker(con, "s8-1", start=datetime(2024, 2, 5), end=datetime(2024, 2, 6), model="churn",
            search_id="S8", purpose="search", metric_name="val_auc", metric_value=0.70)
    attr(con, "L9", "s8-1", "search", 0.25, component="storage")

    # --- fraud, metric logloss (lower is better) -------------------------------------------
    tracker(con, "f-prod", model="fraud", purpose="production", start=datetime(2024, 1, 1),
            end=datetime(2024, 1, 10), metric_name="logloss", metric_value=0.50)
    tracker(con, "f-s3", model="fraud", purpose="search", search_id="S3",
            start=datetime(2024, 1, 20), end=datetime(2024, 2, 1),
            metric_name="logloss", metric_value=0.45)
    tracker(con, "f-prod-new", model="fraud", purpose="production", start=datetime(2024, 3, 20),
            end=datetime(2024, 3, 21), metric_name="logloss", metric_value=0.30)
    # search S2: config ids recorded → configs = distinct config ids
    for run_id, cfg, seed, loss in [("s2-1", "A", "1", 0.44), ("s2-2", "A", "2", 0.42),
                                    ("s2-3", "B", "1", 0.47)]:
        tracker(con, run_id, start=datetime(2024, 3, 2), end=datetime(2024, 3, 3),
                model="fraud", purpose="search", search_id="S2", seed=seed, config_id=cfg,
                metric_name="logloss", metric_value=loss)
    attr(con, "L5", "s2-1", "search", 3.0, hours=1.5, acc_hours=6.0)


SEARCH_COLS = """search_id, model, runs, configs, seeds, runs_this_month, hours,
                 accelerator_hours, cost, metric_name, best_metric, previous_best,
                 improvement, cost_per_improvement, accelerator_hours_per_improvement"""


def by_search(con) -> dict:
    cur = con.execute(f"SELECT {SEARCH_COLS} FROM search_costs WHERE month = ?", [MARCH])
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def test_search_costs_max_goal(con):
    search_month(con)
    run(con, "search_costs", metric_goal="max")
    got = by_search(con)
    # S0, S3 and S7 ended before March and were not billed in March
    assert set(got) == {"S1", "S2", "S5", "S6", "S8"}

    s1 = got["S1"]
    assert s1["model"] == "churn"
    assert s1["runs"] == 4                    # the controller s1-ctl is not a run
    assert s1["seeds"] == 2
    assert s1["configs"] == 2.0               # no config ids: 4 runs ÷ 2 seeds
    assert s1["runs_this_month"] == 3         # s1-1, s1-2, s1-3 billed; s1-4 not; no ctl
    assert s1["hours"] == pytest.approx(12.0)               # 2 + 4 + 6 (February's 9 not)
    assert s1["accelerator_hours"] == pytest.approx(96.0)   # 16 + 32 + 48
    assert s1["cost"] == pytest.approx(61.5)                # 10 + 1 + 20 + 30 + 0.5 (ctl)
    assert s1["metric_name"] == "val_auc"
    assert s1["best_metric"] == pytest.approx(0.87)
    # before 20 Feb: prod-old 0.80, s0-a 0.83 → 0.83 (not s0-late 0.90, ended 21 Feb;
    # not prod-new 0.95; not prod-live 0.93, still running; not adhoc 0.99; not the
    # logloss 5.0; not fraud's 0.97)
    assert s1["previous_best"] == pytest.approx(0.83)
    assert s1["improvement"] == pytest.approx(0.04)                  # 0.87 − 0.83
    assert s1["cost_per_improvement"] == pytest.approx(1537.5)      # 61.5 ÷ 0.04
    assert s1["accelerator_hours_per_improvement"] == pytest.approx(2400.0)  # 96 ÷ 0.04

    s5 = got["S5"]
    assert s5["model"] == "a"                 # one run each: the tie goes to the name
    assert s5["runs_this_month"] == 0 and s5["cost"] == 0.0
    assert s5["best_metric"] == pytest.approx(0.6)
    assert s5["previous_best"] is None and s5["improvement"] is None
    assert s5["cost_per_improvement"] is None

    s6 = got["S6"]                            # active through a run with no end
    assert (s6["runs"], s6["seeds"], s6["configs"]) == (1, 1, 1.0)   # no seed: one seed
    assert s6["best_metric"] is None and s6["improvement"] is None

    s8 = got["S8"]                            # active through a March storage bill
    assert s8["cost"] == pytest.approx(0.25) and s8["runs_this_month"] == 1
    # worse than the 0.80 production run of January: negative improvement, no unit cost
    assert s8["previous_best"] == pytest.approx(0.83)    # prod-old 0.80, s0-a 0.83
    assert s8["improvement"] == pytest.approx(0.70 - 0.83)
    assert s8["cost_per_improvement"] is None
    assert s8["accelerator_hours_per_improvement"] is None


def test_search_costs_min_goal(con):
    search_month(con)
    run(con, "search_costs", metric_goal="min")
    s2 = by_search(con)["S2"]
    assert s2["model"] == "fraud" and s2["metric_name"] == "logloss"
    assert s2["runs"] == 3 and s2["seeds"] == 2
    assert s2["configs"] == 2.0               # config ids A, B
    assert s2["best_metric"] == pytest.approx(0.42)
    # lowest loss before 2 March: f-prod 0.50, f-s3 0.45 → 0.45 (f-prod-new 0.30 is later;
    # fraud-old reports val_auc, another metric)
    assert s2["previous_best"] == pytest.approx(0.45)
    assert s2["improvement"] == pytest.approx(0.03)                  # 0.45 − 0.42
    assert s2["cost_per_improvement"] == pytest.approx(100.0)       # 3 ÷ 0.03
    assert s2["accelerator_hours_per_improvement"] == pytest.approx(200.0)  # 6 ÷ 0.03



def test_a_search_whose_runs_record_no_seed_has_one_seed(con):
    """S9's two trials record no seed (nor a config): its configs × seeds read "2 × 0"
    (seeds 0, a count of distinct seeds none of them has) while search_shape says 1 seed per
    config. Runs without a recorded seed are one seed: 2 runs ÷ 1 seed = 2 configs × 1 seed,
    as in search_shape. A search with seeds 1, 2 and a trial without one keeps 2 (the
    divisor of its configs, as search_shape's)."""
    for run_id, seed, search_id in (("n1", None, "S9"), ("n2", None, "S9"),
                                    ("m1", "1", "S10"), ("m2", "2", "S10"),
                                    ("m3", None, "S10")):
        tracker(con, run_id, start=datetime(2024, 3, 2), end=datetime(2024, 3, 3),
                model="churn", purpose="search", search_id=search_id, seed=seed)
        attr(con, f"L-{run_id}", run_id, "search", 4.0, hours=1.0, acc_hours=1.0)
    run(con, "search_costs")
    got = by_search(con)
    assert (got["S9"]["runs"], got["S9"]["configs"], got["S9"]["seeds"]) == (2, 2.0, 1)
    assert (got["S10"]["runs"], got["S10"]["configs"], got["S10"]["seeds"]) == (3, 1.5, 2)
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    run(con, "search_shape")
    assert rows(con, "SELECT search_id, configs, seeds_per_config FROM search_shape "
                     "ORDER BY search_id") == [("S10", 2, 2), ("S9", 2, 1)]

def test_configs_count_a_restarted_trial_once_as_search_shape_does(con):
    """A run restarting (`restart_of`) a run of the same search, config and seed continues
    that trial: search_shape counts trials, and search_costs divided its runs by its seeds, so
    the two disagreed on a search naming no config. `runs` stays the runs; configs are trials
    ÷ seeds. Per search (search_costs runs, configs, seeds; search_shape runs, configs,
    seeds_per_config, grid):
        SU  no seed: u1, u2 restarts u1 → 2 runs, 1 trial: 1 config × 1 seed (it said 2 ÷ 1
            = 2.0 configs, "2 × 1", beside search_shape's 1 × 1)
        SW  seeds 0, 0 (w2 restarts w1), 1 → 3 runs, 2 trials ÷ 2 seeds = 1 config × 2 seeds
            (it said 3 ÷ 2 = 1.5, beside search_shape's 1 × 2)
        SX  seeds 0, 0 (no restart_of: a trial of its own), 1 → 3 runs, 3 trials ÷ 2 seeds
            = 1.5 configs; search_shape rounds up: 2 × 2, no grid (seed 0 ran twice)"""
    for run_id, seed, search_id, restart_of in (
            ("u1", None, "SU", None), ("u2", None, "SU", "u1"),
            ("w1", "0", "SW", None), ("w2", "0", "SW", "w1"), ("w3", "1", "SW", None),
            ("x1", "0", "SX", None), ("x2", "0", "SX", None), ("x3", "1", "SX", None)):
        tracker(con, run_id, start=datetime(2024, 3, 2), end=datetime(2024, 3, 3),
                model="churn", purpose="search", search_id=search_id, seed=seed,
                restart_of=restart_of)
        attr(con, f"L-{run_id}", run_id, "search", 4.0, hours=1.0, acc_hours=1.0)
    run(con, "search_costs")
    got = by_search(con)
    assert {s: (got[s]["runs"], got[s]["configs"], got[s]["seeds"]) for s in got} == {
        "SU": (2, 1.0, 1), "SW": (3, 1.0, 2), "SX": (3, 1.5, 2)}
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    run(con, "search_shape")
    assert rows(con, "SELECT search_id, runs, configs, seeds_per_config, grid "
                     "FROM search_shape ORDER BY search_id") == [
        ("SU", 1, 1, 1, True), ("SW", 2, 1, 2, True), ("SX", 3, 2, 2, False)]


def test_a_stopped_run_without_an_end_is_active_only_in_the_month_it_started(con):
    """SPEC §6: a non-RUNNING run with no end claims nothing. Its search is active in the
    month the run started, not in every month after (there it was listed at $0 and failed
    searches_within_estimate month after month); a RUNNING run with no end is running until
    the month's end, every month."""
    jan = date(2024, 1, 1)
    for month in (jan, MARCH):                          # each month's tracker snapshot
        for run_id, status, start in [("jan-failed", "FAILED", datetime(2024, 1, 3)),
                                      ("jan-killed", "KILLED", datetime(2024, 1, 4)),
                                      ("jan-running", "RUNNING", datetime(2024, 1, 5)),
                                      ("mar-failed", "FAILED", datetime(2024, 3, 3))]:
            tracker(con, run_id, status, start=start, model="churn", purpose="search",
                    search_id=f"S-{run_id}", month=month)
    expected = {jan: {"S-jan-failed", "S-jan-killed", "S-jan-running"},
                MARCH: {"S-jan-running", "S-mar-failed"}}
    for month, searches in expected.items():
        for table in ("search_costs", "search_shape"):
            run(con, table, month)
            listed = rows(con, f"SELECT search_id, cost FROM {table} WHERE month = ?", month)
            assert {search for search, _ in listed} == searches, (table, month)


def test_a_nan_metric_is_no_metric_in_every_table_that_reads_one(con, tmp_path):
    """A runs file's (or MLflow's) NaN metric, read through the tracker ingest, is no metric:
    the search's best is its other trial's, as search_shape says, and nothing is NaN (a NaN
    improvement made the report's money() raise, and the month failed)."""
    import logging
    import math

    from cost_pipeline.config import parse_config
    from cost_pipeline.ingest.runs import build_tracker_runs
    from cost_pipeline.warehouse import month_params

    (tmp_path / "runs.csv").write_text(
        "run_id,status,start_time,end_time,model,purpose,search_id,config_id,seed,"
        "metric_name,metric_value\n"
        "p0,FINISHED,2024-02-20T00:00:00Z,2024-02-20T05:00:00Z,m,production,,,,val_auc,0.80\n"
        "t1,FINISHED,2024-03-02T00:00:00Z,2024-03-02T10:00:00Z,m,search,S1,c1,0,val_auc,0.85\n"
        "t2,FINISHED,2024-03-02T00:00:00Z,2024-03-02T10:00:00Z,m,search,S1,c2,0,val_auc,nan\n"
        "p1,FINISHED,2024-03-20T00:00:00Z,2024-03-20T05:00:00Z,m,production,,,,val_auc,NaN\n",
        encoding="utf-8")
    cfg = parse_config({"tracker": [{"kind": "runs_file", "path": "runs.csv"}]}, tmp_path)
    build_tracker_runs(con, cfg, MARCH, logging.getLogger("test"))
    attr(con, "L1", "t1", "search", 100.0, hours=10.0, acc_hours=10.0)
    attr(con, "L2", "t2", "search", 100.0, hours=10.0, acc_hours=10.0)
    attr(con, "L3", "p1", "production", 50.0, hours=5.0, acc_hours=5.0)
    params = month_params(cfg, MARCH)
    tables = ("search_costs", "search_trend", "search_shape", "retrain_cadence")
    for table in tables:
        replace_month(con, table, MARCH, sql_text(table), params)

    got = by_search(con)["S1"]
    assert got["best_metric"] == pytest.approx(0.85)                  # t1's; t2 has none
    assert got["improvement"] == pytest.approx(0.05)                  # over p0's 0.80
    assert got["cost_per_improvement"] == pytest.approx(4000.0)       # 200 ÷ 0.05
    assert rows(con, "SELECT best_metric, improvement FROM search_trend") == [
        (pytest.approx(0.85), pytest.approx(0.05))]
    assert rows(con, "SELECT best_config_id FROM search_shape") == [("c1",)]
    # p1's change is unknown (no metric): not a flat retrain, no mean change
    assert rows(con, "SELECT retrains, mean_metric_change, flat_retrains FROM retrain_cadence"
                ) == [(1, None, 0)]
    for table in tables:
        cur = con.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        for row in cur.fetchall():
            assert not [n for n, v in zip(names, row, strict=True)
                        if isinstance(v, float) and not math.isfinite(v)], (table, row)


NOV, DEC = date(2025, 11, 1), date(2025, 12, 1)


def searches_as_of(con, month: date) -> dict:
    """What each table says of every search of `month`: search_costs' runs, configs, seeds,
    best, improvement and cost per unit; search_trend's runs, cost, cost per unit, the
    previous search's and saturating; search_shape's runs, configs and seeds per config."""
    for table in ("search_costs", "search_trend", "search_shape"):
        run(con, table, month)
    return {
        "costs": {r[0]: r[1:] for r in rows(
            con, "SELECT search_id, runs, configs, seeds, best_metric, improvement, "
                 "cost_per_improvement FROM search_costs WHERE month = ?", month)},
        "trend": {r[0]: r[1:] for r in rows(
            con, "SELECT search_id, runs, cost, cost_per_improvement, "
                 "previous_cost_per_improvement, saturating FROM search_trend "
                 "WHERE month = ?", month)},
        "shape": {r[0]: r[1:] for r in rows(
            con, "SELECT search_id, runs, configs, seeds_per_config FROM search_shape "
                 "WHERE month = ?", month)},
    }


def test_a_months_search_figures_are_as_of_its_end(con):
    """Each month's tracker snapshot holds every run, also those started after the month: a
    December re-materialized in March read s-dec's February trial r-ds2 (seed 1, 0.90) as
    December's, where December closed on schedule (r-ds2 not started yet) did not. Every
    search figure of a month is as of its end: a run belongs to it when it started before.
        churn: p-old 0.74 (October), s-nov's r-nv1 0.76 ($10 in November: +0.02 over 0.74,
        $500 a unit), s-dec's r-ds1 seed 0 (31 Dec 23:00 → 1 Jan, 0.78, $30 in December)
        December: s-dec 1 run, 1 config × 1 seed, best 0.78, +0.02 over r-nv1's 0.76,
        $30 ÷ 0.02 = $1,500 a unit, above s-nov's $500: saturating. With r-ds2 it read 2 runs,
        1 × 2, best 0.90, +0.14, $214.29 a unit, not saturating."""
    runs = [("p-old", None, None, datetime(2025, 10, 1), datetime(2025, 10, 5), 0.74),
            ("r-nv1", "s-nov", "0", datetime(2025, 11, 10), datetime(2025, 11, 11), 0.76),
            ("r-ds1", "s-dec", "0", datetime(2025, 12, 31, 23), datetime(2026, 1, 1), 0.78),
            ("r-ds2", "s-dec", "1", datetime(2026, 2, 1), datetime(2026, 2, 2), 0.90)]
    for month in (NOV, DEC):                  # each month's snapshot: the runs file as read
        for run_id, search_id, seed, start, end, auc in runs:
            tracker(con, run_id, start=start, end=end, model="churn",
                    purpose="production" if search_id is None else "search",
                    search_id=search_id, seed=seed, metric_name="val_auc",
                    metric_value=auc, month=month)
    attr(con, "L-nv1", "r-nv1", "search", 10.0, hours=1.0, acc_hours=8.0, month=NOV)
    attr(con, "L-ds1", "r-ds1", "search", 30.0, hours=1.0, acc_hours=8.0, month=DEC)

    nov = searches_as_of(con, NOV)
    assert nov["costs"] == {"s-nov": (1, 1.0, 1, pytest.approx(0.76), pytest.approx(0.02),
                                      pytest.approx(500.0))}
    assert list(nov["trend"]) == ["s-nov"]    # s-dec starts after November

    dec = searches_as_of(con, DEC)
    assert dec["costs"] == {"s-dec": (1, 1.0, 1, pytest.approx(0.78), pytest.approx(0.02),
                                      pytest.approx(1500.0))}
    assert dec["trend"] == {
        "s-nov": (1, pytest.approx(10.0), pytest.approx(500.0), None, False),
        "s-dec": (1, pytest.approx(30.0), pytest.approx(1500.0), pytest.approx(500.0), True)}
    assert dec["shape"] == {"s-dec": (1, 1, 1)}

    # December closed on schedule, before r-ds2 existed, says the same
    con.execute("DELETE FROM tracker_runs WHERE run_id = 'r-ds2'")
    assert searches_as_of(con, DEC) == dec


def test_a_controller_whose_trials_start_after_the_month_is_no_trial_of_it(con):
    """s-ctl's run c0 starts on 20 December; the runs naming it their parent start in January.
    c0 is a sweep controller whenever its trials start, as the attribution reads it (it claims
    nothing): December's search has no trial yet (0 runs, 0 configs × 0 seeds, no best), not
    c0 as its one run with c0's metric as its best. Its $5 in December is the month's cost."""
    for month in (DEC, date(2026, 1, 1)):
        tracker(con, "c0", "RUNNING", start=datetime(2025, 12, 20), model="churn",
                purpose="search", search_id="s-ctl", metric_name="val_auc",
                metric_value=0.99, month=month)
        for run_id, seed in (("c1", "0"), ("c2", "1")):
            tracker(con, run_id, start=datetime(2026, 1, 5), end=datetime(2026, 1, 6),
                    model="churn", purpose="search", search_id="s-ctl", seed=seed,
                    parent="c0", metric_name="val_auc", metric_value=0.8, month=month)
    attr(con, "L-c0", "c0", "search", 5.0, hours=1.0, acc_hours=1.0, month=DEC)
    run(con, "search_costs", DEC)
    run(con, "search_shape", DEC)
    assert rows(con, "SELECT search_id, runs, configs, seeds, cost, best_metric "
                     "FROM search_costs WHERE month = ?", DEC) == [
        ("s-ctl", 0, 0.0, 0, pytest.approx(5.0), None)]
    assert rows(con, "SELECT runs, configs, cost FROM search_shape WHERE month = ?", DEC) == [
        (0, 0, pytest.approx(5.0))]
    # January: c1 and c2 started, c0 is their sweep controller
    run(con, "search_costs", date(2026, 1, 1))
    assert rows(con, "SELECT runs, configs, seeds FROM search_costs WHERE month = ?",
                date(2026, 1, 1)) == [(2, 1.0, 2)]


def test_the_previous_best_of_thousands_of_searches(con):
    """4,400 searches of churn, one an hour from 2026-01-01, 10 trials each ending within its
    hour; July's 56 searches (hour 4,344 on) billed $1 a trial: each search's previous best is
    the one before it. (Pairing each search with every run of its model took 9-11 s for this
    month of search_costs; one sort of the model's runs ~0.3 s — measured, not asserted: time
    is the benchmark's.)"""
    july = date(2026, 7, 1)
    # trial j of search k: 0.5 + 0.00001 k + 0.000001 j, ending at hour k + (30 + j) minutes
    con.execute(
        """INSERT INTO tracker_runs BY NAME
           SELECT ? AS month, 's' || k || '-' || j AS run_id, 'test' AS source,
                  'churn' AS model, 'search' AS purpose, 'S' || k AS search_id,
                  'FINISHED' AS status, TIMESTAMP '2026-01-01' + to_hours(k) AS start_time,
                  TIMESTAMP '2026-01-01' + to_hours(k) + to_minutes(30 + j) AS end_time,
                  'val_auc' AS metric_name, 0.5 + 0.00001 * k + 0.000001 * j AS metric_value,
                  false AS keep, false AS deleted
           FROM range(4400) AS searches(k), range(10) AS trials(j)""", [july])
    con.execute(
        """INSERT INTO attribution_rows BY NAME
           SELECT month, key_hash('L-' || run_id) AS line_key, run_hash_of(run_id) AS run_hash,
                  'search' AS purpose_class, 'gpu' AS component, 1.0 AS cost, 1.0 AS hours,
                  8.0 AS accelerator_hours, 1.0 AS share, 'compute' AS rule
           FROM tracker_runs WHERE start_time >= ?""", [datetime(2026, 7, 1)])
    summarize_month(con, july)

    run(con, "search_costs", july)

    got = rows(con, "SELECT search_id, runs_this_month, cost, best_metric, previous_best, "
                    "improvement, cost_per_improvement FROM search_costs WHERE month = ?", july)
    assert sorted(r[0] for r in got) == sorted(f"S{k}" for k in range(4344, 4400))
    for search_id, runs, cost, best, previous, improvement, per_unit in got:
        k = int(search_id[1:])
        assert (runs, cost) == (10, pytest.approx(10.0))
        assert best == pytest.approx(0.5 + 0.00001 * k + 0.000009, abs=1e-12)
        # S(k−1)'s best trial ended at 00:39 of the hour before: the previous best
        assert previous == pytest.approx(0.5 + 0.00001 * (k - 1) + 0.000009, abs=1e-12)
        assert improvement == pytest.approx(0.00001, abs=1e-12)
        assert per_unit == pytest.approx(1_000_000.0, rel=1e-6)        # $10 ÷ 0.00001


# ---------------------------------------------------- retention_violations, storage by status

CUTOFF = datetime(2024, 3, 25)   # month end (1 April) − 7 grace days


def retention_month(con):
    """Bucket `ckpt`: 1000 listed bytes at month end, storage billed 100 → 0.1 per byte."""
    bill(con, "S1", "ckpt", datetime(2024, 3, 1), 60.0, component="storage", hours=24 * 31,
         resource_kind="bucket")
    bill(con, "S2", "ckpt", datetime(2024, 3, 1), 40.0, component="storage", hours=24 * 31,
         resource_kind="bucket")
    # compute on the same resource id (not storage): not part of the bucket's price
    bill(con, "S3", "ckpt", datetime(2024, 3, 1), 999.0, component="network",
         resource_kind="bucket")
    bill(con, "S4", "other-bucket", datetime(2024, 3, 1), 7.0, component="storage")

    tracker(con, "live1", "RUNNING", start=datetime(2024, 2, 1))
    tracker(con, "failed1", "FAILED", end=datetime(2024, 3, 2))
    tracker(con, "deleted1", "FINISHED", end=datetime(2024, 3, 2), purpose="production",
            deleted=True)
    tracker(con, "keep1", "FINISHED", end=datetime(2024, 3, 2), purpose="adhoc", keep=True)
    tracker(con, "prod1", "FINISHED", end=datetime(2024, 3, 2), purpose="production")
    tracker(con, "other1", "FINISHED", end=datetime(2024, 3, 2), purpose="adhoc")

    d = datetime
    # live1 (RUNNING, keeps 3). Newest time per checkpoint: ck-b 10 Mar (its shard1), ck-a
    # 10 Mar, ck-d 5 Mar, ck-c 5 Mar, ck-e 1 Mar. Ties by name, higher first:
    # ck-b 1, ck-a 2, ck-d 3 | ck-c 4, ck-e 5 → ck-c and ck-e are beyond the newest 3.
    obj(con, "ckpt", "checkpoints/live1/ck-a/shard0", 10, d(2024, 3, 10))
    obj(con, "ckpt", "checkpoints/live1/ck-b/shard0", 10, d(2024, 3, 1))   # old shard, kept
    obj(con, "ckpt", "checkpoints/live1/ck-b/shard1", 10, d(2024, 3, 10))
    obj(con, "ckpt", "checkpoints/live1/ck-c/shard0", 10, d(2024, 3, 5))
    obj(con, "ckpt", "checkpoints/live1/ck-d/shard0", 10, d(2024, 3, 5))
    obj(con, "ckpt", "checkpoints/live1/ck-e/shard0", 10, d(2024, 3, 1))
    # written after the month ended: not in the month-end snapshot, so it neither pushes
    # ck-d out of the newest 3 nor counts in the listed bytes
    obj(con, "ckpt", "checkpoints/live1/ck-f/shard0", 999, d(2024, 4, 2))
    # failed1 (dead): exactly 7 days old is still within grace; one second older is not
    obj(con, "ckpt", "checkpoints/failed1/ck-1", 20, CUTOFF)
    obj(con, "ckpt", "checkpoints/failed1/ck-2", 20, CUTOFF - timedelta(seconds=1))
    # deleted1: a production run deleted in the tracker is dead
    obj(con, "ckpt", "checkpoints/deleted1/ck-1", 50, d(2024, 3, 1))
    # keep1: FINISHED, not production but keep=true → keeps its newest 3 of 4
    for i in range(1, 5):
        obj(con, "ckpt", f"checkpoints/keep1/ck-{i}", 25, d(2024, 3, i))
    # prod1: FINISHED production, 2 checkpoints ≤ 3 → nothing to delete
    obj(con, "ckpt", "checkpoints/prod1/ck-1", 30, d(2024, 3, 1))
    obj(con, "ckpt", "checkpoints/prod1/ck-2", 30, d(2024, 3, 2))
    # other1: FINISHED adhoc, not kept → dead
    obj(con, "ckpt", "checkpoints/other1/ck-1", 40, d(2024, 3, 1))
    # ghost: a run folder the tracker does not know
    obj(con, "ckpt", "checkpoints/ghost/ck-1", 50, d(2024, 2, 1))
    # a dataset in the same bucket, outside the checkpoint prefix: priced into the listed
    # bytes, but never a violation
    obj(con, "ckpt", "datasets/train.parquet", 600, d(2024, 1, 1), prefix=None)
    # listed bytes: live1 60 + failed1 40 + deleted1 50 + keep1 100 + prod1 60 + other1 40
    #             + ghost 50 + dataset 600 = 1000;   price = (60 + 40) ÷ 1000 = 0.1 / byte


def test_retention_violations(con):
    retention_month(con)
    assert run(con, "retention_violations") == 7
    got = rows(con, """SELECT run_id, run_status, purpose, checkpoint, key, reason, bytes,
                              last_modified, round(monthly_cost, 9)
                       FROM retention_violations WHERE month = ? ORDER BY key""", MARCH)
    d = datetime
    assert got == [
        ("deleted1", "FINISHED", "production", "ck-1", "checkpoints/deleted1/ck-1",
         "dead_run", 50, d(2024, 3, 1), 5.0),                   # 50 × 0.1
        ("failed1", "FAILED", None, "ck-2", "checkpoints/failed1/ck-2",
         "dead_run", 20, CUTOFF - timedelta(seconds=1), 2.0),   # ck-1 (exactly 7 d) absent
        ("ghost", None, None, "ck-1", "checkpoints/ghost/ck-1",
         "orphan", 50, d(2024, 2, 1), 5.0),
        ("keep1", "FINISHED", "adhoc", "ck-1", "checkpoints/keep1/ck-1",
         "beyond_keep_last", 25, d(2024, 3, 1), 2.5),           # the oldest of 4
        ("live1", "RUNNING", None, "ck-c", "checkpoints/live1/ck-c/shard0",
         "beyond_keep_last", 10, d(2024, 3, 5), 1.0),           # lost the tie to ck-d
        ("live1", "RUNNING", None, "ck-e", "checkpoints/live1/ck-e/shard0",
         "beyond_keep_last", 10, d(2024, 3, 1), 1.0),
        ("other1", "FINISHED", "adhoc", "ck-1", "checkpoints/other1/ck-1",
         "dead_run", 40, d(2024, 3, 1), 4.0),
    ]
    # 5 + 2 + 5 + 2.5 + 1 + 1 + 4
    (total,) = con.execute("SELECT sum(monthly_cost) FROM retention_violations").fetchone()
    assert total == pytest.approx(20.5)


def test_keep_last_counts_a_runs_checkpoints_in_every_bucket(con):
    """Keep-last is per run (SPEC §7 "a run's checkpoints"): production run P has c1–c3 in
    bucket b1 and c4, c5 in b2, so c1 and c2 are beyond its newest 3 (ranked per bucket, it
    kept all five). A checkpoint of one name in both buckets (a replica) is one checkpoint:
    c5's copy in b1 is as new as c5, kept with it."""
    for bucket in ("b1", "b2"):
        bill(con, f"S-{bucket}", bucket, datetime(2024, 3, 1), 10.0, component="storage",
             resource_kind="bucket")
    tracker(con, "P", "FINISHED", end=datetime(2024, 3, 6), purpose="production")
    for day, bucket, name in ((1, "b1", "c1"), (2, "b1", "c2"), (3, "b1", "c3"),
                              (4, "b2", "c4"), (5, "b2", "c5"), (5, "b1", "c5")):
        obj(con, bucket, f"checkpoints/P/{name}/shard0", 10, datetime(2024, 3, day))
    run(con, "retention_violations")
    assert rows(con, "SELECT bucket, checkpoint, reason, round(monthly_cost, 9) "
                     "FROM retention_violations ORDER BY bucket, key") == [
        ("b1", "c1", "beyond_keep_last", 2.5),    # b1: 40 listed bytes, $10 → 0.25 / byte
        ("b1", "c2", "beyond_keep_last", 2.5),
    ]


def test_storage_by_run_status(con):
    retention_month(con)
    assert run(con, "storage_by_run_status") == 4
    got = rows(con, """SELECT run_status, objects, bytes, round(cost, 9)
                       FROM storage_by_run_status WHERE month = ? ORDER BY run_status""",
               MARCH)
    assert got == [
        ("dead", 4, 130, 13.0),        # failed1 2 obj 40 B + deleted1 50 B + other1 40 B
        ("live", 6, 60, 6.0),          # live1's 6 shards (ck-f came after the month)
        ("orphan", 1, 50, 5.0),        # ghost
        ("production", 6, 160, 16.0),  # keep1 4 obj 100 B + prod1 2 obj 60 B
    ]   # the 600 B dataset outside the prefix is in none of them


def runs_that_ended_later_month(con):
    """Bucket `ml-ckpt`: 800 listed bytes, storage billed $8 → $0.01 per byte. The runs file
    is read after March: some runs that were running on 1 April have ended since."""
    bill(con, "S1", "ml-ckpt", datetime(2024, 3, 1), 8.0, component="storage",
         resource_kind="bucket")
    d = datetime
    # R: FINISHED on 20 April, so RUNNING at March's end: keeps its newest 3 of 4
    tracker(con, "R", "FINISHED", start=d(2024, 3, 10), end=d(2024, 4, 20), purpose="adhoc")
    for i in range(1, 5):
        obj(con, "ml-ckpt", f"checkpoints/R/step-{i}", 100, d(2024, 3, 10 + i))
    # E: FAILED exactly at the month's end (1 April 00:00): a run is [start, end), so it had
    # ended at that instant: dead
    tracker(con, "E", "FAILED", start=d(2024, 3, 1), end=d(2024, 4, 1))
    obj(con, "ml-ckpt", "checkpoints/E/ck-1", 100, d(2024, 3, 2))
    # B: FINISHED one second before the month's end: dead at it
    tracker(con, "B", "FINISHED", start=d(2024, 3, 1), end=d(2024, 3, 31, 23, 59, 59),
            purpose="adhoc")
    obj(con, "ml-ckpt", "checkpoints/B/ck-1", 100, d(2024, 3, 2))
    # N: KILLED with no end: when it ended is unknown, its recorded status stands
    tracker(con, "N", "KILLED", start=d(2024, 3, 1))
    obj(con, "ml-ckpt", "checkpoints/N/ck-1", 100, d(2024, 3, 2))
    # D: a production run that ended on 10 April and was deleted since: the tracker keeps no
    # time of the deletion, so it stays dead, shown with its recorded status
    tracker(con, "D", "FINISHED", start=d(2024, 3, 1), end=d(2024, 4, 10),
            purpose="production", deleted=True)
    obj(con, "ml-ckpt", "checkpoints/D/ck-1", 100, d(2024, 3, 2))


def test_a_run_that_ended_after_the_month_was_running_at_its_end(con):
    """SPEC §7 judges the checkpoints present at the month's end, and a RUNNING run keeps its
    newest 3: a run that started before the month's end and ended after it was RUNNING then,
    whatever the runs file says of it now; one that ended at the month's end had ended."""
    runs_that_ended_later_month(con)
    run(con, "retention_violations")
    assert rows(con, """SELECT run_id, run_status, purpose, checkpoint, reason, bytes,
                               round(monthly_cost, 9)
                        FROM retention_violations ORDER BY key""") == [
        ("B", "FINISHED", "adhoc", "ck-1", "dead_run", 100, 1.0),        # 100 × 0.01
        ("D", "FINISHED", "production", "ck-1", "dead_run", 100, 1.0),   # deleted: dead
        ("E", "FAILED", None, "ck-1", "dead_run", 100, 1.0),             # ended at the end
        ("N", "KILLED", None, "ck-1", "dead_run", 100, 1.0),
        ("R", "RUNNING", "adhoc", "step-1", "beyond_keep_last", 100, 1.0),  # oldest of 4
    ]
    run(con, "storage_by_run_status")
    assert rows(con, "SELECT run_status, objects, bytes, round(cost, 9) "
                     "FROM storage_by_run_status ORDER BY run_status") == [
        ("dead", 4, 400, 4.0),   # B, N, D, E
        ("live", 4, 400, 4.0),   # R's 4
    ]


def test_daily_snapshots_use_the_last_one_of_the_month(con):
    # bucket `daily` has daily inventories: only the 31 March snapshot describes month end
    bill(con, "S1", "daily", datetime(2024, 3, 1), 40.0, component="storage",
         resource_kind="bucket")
    tracker(con, "f1", "FAILED", end=datetime(2024, 3, 2))
    old = datetime(2024, 3, 1)
    # 30 March: an orphan that was deleted on the 31st
    obj(con, "daily", "checkpoints/ghost/ck-1", 500, old, snapshot_date=date(2024, 3, 30))
    obj(con, "daily", "checkpoints/f1/ck-1", 100, old, snapshot_date=date(2024, 3, 30))
    # 31 March: the dead run's checkpoint and a dataset: 400 listed bytes → 40 ÷ 400 = 0.1
    obj(con, "daily", "checkpoints/f1/ck-1", 100, old, snapshot_date=date(2024, 3, 31))
    obj(con, "daily", "data/x", 300, old, snapshot_date=date(2024, 3, 31), prefix=None)
    # an undated listing of a bucket that has dated snapshots is ignored
    obj(con, "daily", "checkpoints/ghost2/ck-1", 700, old)

    run(con, "retention_violations")
    assert rows(con, "SELECT key, reason, bytes, round(monthly_cost, 9) "
                     "FROM retention_violations") == [
        ("checkpoints/f1/ck-1", "dead_run", 100, 10.0),   # 100 × 0.1
    ]
    run(con, "storage_by_run_status")
    assert rows(con, "SELECT run_status, objects, bytes, round(cost, 9) "
                     "FROM storage_by_run_status") == [("dead", 1, 100, 10.0)]


OBJECTS = st.lists(st.tuples(
    st.sampled_from(["a", "b", "c"]),                          # bucket
    st.integers(0, 5),                                         # key
    st.sampled_from([None, date(2024, 3, 5), date(2024, 3, 20), date(2024, 3, 31)]),
    st.sampled_from([datetime(2024, 3, 9), datetime(2024, 4, 1), datetime(2024, 4, 2)]),
    st.sampled_from([MARCH, FEB])), max_size=25)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OBJECTS)
def test_the_month_end_snapshot_is_each_buckets_last_and_its_listing(con, objects):
    """macros.sql `month_end_snapshot`: of the month's rows, a bucket with dated snapshots
    keeps those of its last one, and its undated rows written before the month's end whose
    keys the dated rows' source does not cover (the text common to all the keys it listed
    in the month: `checkpoints/r` once it listed two runs, the key itself when one); a
    bucket without, its undated rows written before the month's end — worked out here
    bucket by bucket."""
    con.execute("DELETE FROM checkpoint_inventory")
    for bucket, key, day, modified, month in objects:
        obj(con, bucket, f"checkpoints/r{key}/ck", key, modified, snapshot_date=day,
            month=month)
    expected = []
    for bucket in "abc":
        mine = [o for o in objects if o[0] == bucket and o[4] == MARCH]
        days = [o[2] for o in mine if o[2] is not None]
        keys = sorted(f"checkpoints/r{o[1]}/ck" for o in mine if o[2] is not None)
        scope = os.path.commonprefix([keys[0], keys[-1]]) if keys else None
        expected += [(bucket, o[1], o[2]) for o in mine
                     if (o[2] == max(days) if o[2] is not None
                         else o[3] < datetime(2024, 4, 1)
                         and (scope is None or not f"checkpoints/r{o[1]}/ck".startswith(scope)))]
    got = rows(con, "SELECT bucket, size, snapshot_date FROM month_end_snapshot(?, ?)",
               MARCH, datetime(2024, 4, 1))
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_bucket_without_storage_bill_costs_nothing(con):
    tracker(con, "f1", "FAILED", end=datetime(2024, 3, 2))
    obj(con, "free", "checkpoints/f1/ck-1", 100, datetime(2024, 3, 1))
    run(con, "retention_violations")
    assert rows(con, "SELECT reason, bytes, monthly_cost FROM retention_violations") == [
        ("dead_run", 100, 0.0)
    ]


# ----------------------------------------------------------------------------- idempotence


def test_every_derived_table_is_idempotent_per_month(con):
    retention_month(con)
    search_month(con)
    bill(con, "U1", "i-9", datetime(2024, 3, 7), 4.0, usage_hours=1.0, g=8)
    attr(con, "U1", None, "untracked", 4.0, hours=1.0, acc_hours=8.0, kind="no_run")
    # February has data of its own, which a March rebuild must leave alone
    tracker(con, "s1-1", start=datetime(2024, 2, 1), end=datetime(2024, 2, 2),
            search_id="S1", month=FEB)
    attr(con, "LF", "s1-1", "search", 500.0, month=FEB)

    def snapshot():
        return {t: rows(con, f"SELECT * FROM {t} ORDER BY ALL") for t in DERIVED}

    for t in DERIVED:
        run(con, t, FEB)
        run(con, t)
    first = snapshot()
    assert all(first[t] for t in DERIVED), "every table should have rows for this test"
    for t in DERIVED:
        run(con, t)
    assert snapshot() == first


# ---------------------------------------------- kept rows: the checkpoint tables' own inputs

CHECKPOINT_TABLES = ("retention_violations", "storage_by_run_status")


def run_unless_same(con, table: str, force: bool = False) -> tuple[int, bool]:
    return replace_month_unless_same(con, table, MARCH, sql_text(table), params(),
                                     sql_text(KEPT_WHEN_SAME[table]), force=force)


def recomputed(con, table: str) -> list:
    """The month's rows as computing them afresh writes them (the stored ones put back)."""
    stored = rows(con, f"SELECT * FROM {table} WHERE month = ? ORDER BY ALL", MARCH)
    run(con, table)
    fresh = rows(con, f"SELECT * FROM {table} WHERE month = ? ORDER BY ALL", MARCH)
    con.execute(f"DELETE FROM {table} WHERE month = ?", [MARCH])
    if stored:
        con.execute(f"INSERT INTO {table} SELECT * FROM (VALUES "
                    + ", ".join(["(" + ", ".join(["?"] * len(stored[0])) + ")"] * len(stored))
                    + ")", [v for row in stored for v in row])
    return fresh


# each change to what the checkpoint tables read, made after their rows were written
CHANGES = {
    "a run's status": "UPDATE tracker_runs SET status = 'FAILED' WHERE run_id = 'prod1'",
    "a run's purpose": "UPDATE tracker_runs SET purpose = 'production' WHERE run_id = 'other1'",
    "a run's keep": "UPDATE tracker_runs SET keep = false WHERE run_id = 'keep1'",
    "a run deleted in the tracker": "UPDATE tracker_runs SET deleted = true "
                                    "WHERE run_id = 'live1'",
    "a run added": "INSERT INTO tracker_runs BY NAME SELECT DATE '2024-03-01' AS month, "
                   "'ghost' AS run_id, 'RUNNING' AS status, TIMESTAMP '2024-02-01' AS start_time, "
                   "false AS keep, false AS deleted",
    "a run removed": "DELETE FROM tracker_runs WHERE run_id = 'failed1'",
    # other1 then ended after the month: it was RUNNING at its end (live, keeps 3)
    "a run's end moved past the month's end": "UPDATE tracker_runs SET end_time = TIMESTAMP "
                                              "'2024-04-02' WHERE run_id = 'other1'",
    # live1 then ended within the month: dead at its end
    "a RUNNING run now ended within the month": "UPDATE tracker_runs SET status = 'FINISHED', "
                                                "end_time = TIMESTAMP '2024-03-20' "
                                                "WHERE run_id = 'live1'",
    "an object's size": "UPDATE checkpoint_inventory SET size = 11 "
                        "WHERE key = 'checkpoints/live1/ck-a/shard0'",
    "an object's time": "UPDATE checkpoint_inventory SET last_modified = TIMESTAMP "
                        "'2024-03-20' WHERE key = 'checkpoints/live1/ck-e/shard0'",
    "an object added": "INSERT INTO checkpoint_inventory BY NAME SELECT DATE '2024-03-01' "
                       "AS month, 't' AS source, 'ckpt' AS bucket, 'checkpoints/x/ck-1' AS "
                       "key, 5 AS size, TIMESTAMP '2024-03-01' AS last_modified, "
                       "'checkpoints/' AS prefix, 'x' AS run_id, 'ck-1' AS checkpoint",
    "the bucket's storage bill": "UPDATE billing_facts SET EffectiveCost = 80 "
                                 "WHERE x_SourceLine = 'S1'",
}


@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_checkpoint_tables_keep_their_rows_when_only_run_times_change(con, table):
    retention_month(con)
    assert run_unless_same(con, table) == (rows(con, f"SELECT count(*) FROM {table}")[0][0],
                                           False)
    written = rows(con, f"SELECT * FROM {table} ORDER BY ALL")
    # what a re-delivered runs file changes without touching these tables: times, metrics
    con.execute("UPDATE tracker_runs SET end_time = end_time - INTERVAL 1 HOUR, "
                "start_time = start_time - INTERVAL 1 HOUR, metric_value = 0.5")
    assert run_unless_same(con, table) == (len(written), True)
    assert rows(con, f"SELECT * FROM {table} ORDER BY ALL") == written == recomputed(con, table)
    # --force writes them again
    assert run_unless_same(con, table, force=True) == (len(written), False)
    # rows lost since (a month deleted by hand) are written again, not kept
    con.execute(f"DELETE FROM {table}")
    assert run_unless_same(con, table) == (len(written), False)
    assert rows(con, f"SELECT * FROM {table} ORDER BY ALL") == written


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_checkpoint_tables_are_written_again_when_what_they_read_changes(con, table, change):
    retention_month(con)
    run_unless_same(con, table)
    con.execute(CHANGES[change])
    count, kept = run_unless_same(con, table)
    assert not kept, change
    after = rows(con, f"SELECT * FROM {table} ORDER BY ALL")
    assert after == recomputed(con, table)
    assert count == len(after)


def test_a_parameter_change_writes_the_rows_again(con):
    retention_month(con)
    run_unless_same(con, "retention_violations")
    changed = {**params(), "keep_last_live": 1}
    count, kept = replace_month_unless_same(
        con, "retention_violations", MARCH, sql_text("retention_violations"), changed,
        sql_text("checkpoint_basis"))
    assert not kept
    assert count == 9   # live1 now keeps 1 of its 5 checkpoints: ck-a, ck-d and the 2 above
