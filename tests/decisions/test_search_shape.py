"""search_shape and the lever "bound the search" (SPEC §12) against a hand-made March 2024.

Every search tunes model `churn` unless said otherwise; costs are powers of two or round
figures so that each expected sum below can be checked by eye.

    S1  started 1 Feb, ended in Feb (no March cost: not active in March)
        c1 × seeds 0, 1; c2 × seeds 0, 1
    S5  model fraud, started 15 Feb: runs c1 too (another model: never a re-run for churn)
    S2  started 1 Mar, a sweep controller (64, its storage) and six trials, not a grid:
        c1 seeds 0, 1, 2 costs 1, 2, 4     metric .70 .72 .71
        c2 seeds 0, 1    costs 8, 16       metric .85 .86
        c3 seed 0        cost 32           metric .90  ← best (max)
        re-runs: c1, c2 (S1)          = 1 + 2 + 4 + 8 + 16 = 31
        extra seeds (c1, c2 ≠ best)   = 2 + 4 + 16         = 22
        questioned (each run once)    = 31 (every extra seed is also a re-run)
        cost                          = 63 + 64            = 127
    S3  started 5 Mar — c1 a third time, a tie for best, text seeds, a run without config:
        c1 seeds "10", "2"  costs 100, 200   metric .70, .80
        c4 seeds "10", "2"  costs 400, 800   metric .75, .80   (tie at .80 → c1, the lower id)
        nc (no config_id)   cost 1000
        re-runs: c1 (first run by S1) = 300; extra seeds: c4's first seed is "2"
        (numerically lowest, though it started later), so "10" is extra = 400; c1 is the
        best: none.
        questioned = 700, cost = 2500, configs 2 (c1, c4: the run without config_id is
        in no config, as in search_costs), a 2 × 2 grid
    S4  started 10 Mar, no metric at all: every config's extra seeds count
        d1 seeds -, -  (no seed: the earlier start is first) costs 3, 5
        d2 seeds 0, 1   costs 7, 11
        extra = 5 + 11 = 16 = questioned; cost 26; a 2 × 2 grid
    S6  started 20 Mar: c3 again (S2 started earlier) cost 1 → rerun 1, questioned 1
    S7  started 12 Mar, runs without config_id only, seeds 0, 1: costs 9, 10 → nothing
        questioned; 2 runs ÷ 2 seeds = 1 config × 2 seeds, a grid

bound the search = 31 + 700 + 16 + 1 + 0 = 748.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import duckdb
import pytest

from cost_pipeline.warehouse import ensure_schema, replace_month, sql_text, summarize_month
from tests.support.warehouse_rows import insert_runs

MARCH, FEB = date(2024, 3, 1), date(2024, 2, 1)
TOL = 1e-6


def params(month: date = MARCH, metric_goal: str = "max") -> dict:
    nxt = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    return {"month": month, "month_start": datetime(month.year, month.month, 1),
            "month_end": datetime(nxt.year, nxt.month, 1), "metric_goal": metric_goal,
            "keep_last_live": 3, "keep_last_production": 3, "grace_days": 7,
            "max_untracked_share": 0.05, "min_metric_change": 0.002}


def build(con, table: str, month: date = MARCH, metric_goal: str = "max") -> int:
    return replace_month(con, table, month, sql_text(table), params(month, metric_goal))


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    ensure_schema(c)
    c.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
              "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    yield c
    c.close()


def trial(run_id, search_id, config_id, seed, start, cost, metric=None, *, model="churn",
          parent=None, month=MARCH, restart_of=None, resumed_from=None, status="FINISHED"):
    """A trial's tracker row (all months in the March snapshot) and its cost in `month`."""
    run = {"run_id": run_id, "status": status, "start_time": start,
           "end_time": start.replace(hour=start.hour + 2), "model": model, "purpose": "search",
           "search_id": search_id, "config_id": config_id,
           "seed": None if seed is None else str(seed), "parent_run_id": parent,
           "metric_name": "val_auc" if metric is not None else None, "metric_value": metric,
           "restart_of": restart_of, "resumed_from": resumed_from}
    return run, (month, run_id, cost)


def put_costs(con, costs) -> None:
    con.executemany(
        "INSERT INTO attribution_rows (month, line_key, run_hash, purpose_class, component, "
        "cost, hours, accelerator_hours, share, rule) VALUES (?, hash('L-' || ?), "
        "run_hash_of(?), 'search', 'gpu', ?, 1.0, 4.0, 1.0, 'compute')",
        [(m, r, r, c) for m, r, c in costs if c])
    for month in sorted({m for m, _, c in costs if c}):
        summarize_month(con, month)  # the per-run sums the attribution step writes with it


def d(day: int, month: int = 3, hour: int = 0) -> datetime:
    return datetime(2024, month, day, hour)


def march(con) -> None:
    rows = [
        trial("s1-c1-0", "S1", "c1", 0, d(1, 2), 50.0, 0.60, month=FEB),
        trial("s1-c1-1", "S1", "c1", 1, d(1, 2), 50.0, 0.61, month=FEB),
        trial("s1-c2-0", "S1", "c2", 0, d(2, 2), 50.0, 0.62, month=FEB),
        trial("s1-c2-1", "S1", "c2", 1, d(2, 2), 50.0, 0.63, month=FEB),
        trial("s5-c1-0", "S5", "c1", 0, d(15, 2), 70.0, 0.5, model="fraud", month=FEB),
        trial("s2-c1-0", "S2", "c1", 0, d(1, hour=1), 1.0, 0.70, parent="s2-ctl"),
        trial("s2-c1-1", "S2", "c1", 1, d(1, hour=1), 2.0, 0.72, parent="s2-ctl"),
        trial("s2-c1-2", "S2", "c1", 2, d(1, hour=1), 4.0, 0.71, parent="s2-ctl"),
        trial("s2-c2-0", "S2", "c2", 0, d(1, hour=3), 8.0, 0.85, parent="s2-ctl"),
        trial("s2-c2-1", "S2", "c2", 1, d(1, hour=3), 16.0, 0.86, parent="s2-ctl"),
        trial("s2-c3-0", "S2", "c3", 0, d(1, hour=3), 32.0, 0.90, parent="s2-ctl"),
        trial("s3-c1-10", "S3", "c1", 10, d(5), 100.0, 0.70),
        trial("s3-c1-2", "S3", "c1", 2, d(6), 200.0, 0.80),
        trial("s3-c4-10", "S3", "c4", 10, d(5), 400.0, 0.75),
        trial("s3-c4-2", "S3", "c4", 2, d(6), 800.0, 0.80),
        trial("s3-nc", "S3", None, 0, d(5), 1000.0),
        trial("s4-d1-a", "S4", "d1", None, d(10), 3.0),
        trial("s4-d1-b", "S4", "d1", None, d(11), 5.0),
        trial("s4-d2-0", "S4", "d2", 0, d(10), 7.0),
        trial("s4-d2-1", "S4", "d2", 1, d(10), 11.0),
        trial("s6-c3-0", "S6", "c3", 0, d(20), 1.0),
        trial("s7-a", "S7", None, 0, d(12), 9.0),
        trial("s7-b", "S7", None, 1, d(12), 10.0),
    ]
    controller = {"run_id": "s2-ctl", "status": "FINISHED", "start_time": d(1),
                  "end_time": d(2), "model": "churn", "purpose": "search", "search_id": "S2"}
    insert_runs(con, MARCH, [r for r, _ in rows] + [controller])
    put_costs(con, [c for _, c in rows] + [(MARCH, "s2-ctl", 64.0)])


COLUMNS = ("search_id, model, runs, configs, seeds_per_config, grid, best_config_id, "
           "rerun_configs, rerun_of, runs_without_config, rerun_cost, extra_seed_cost, "
           "questioned_cost, cost")


def shape(con, month: date = MARCH) -> dict[str, dict]:
    cursor = con.execute(f"SELECT {COLUMNS} FROM search_shape WHERE month = ? "
                         "ORDER BY search_id", [month])
    names = [c[0] for c in cursor.description]
    return {r[0]: dict(zip(names, r, strict=True)) for r in cursor.fetchall()}


def test_each_search_against_the_hand_computed_shape(con):
    """The shape of each March search (the module's table). S3's `rerun_of` is "S1", the
    search that first ran c1; it was "S1, S2", every earlier search that ran c1."""
    march(con)
    assert build(con, "search_shape") == 5
    got = shape(con)
    assert list(got) == ["S2", "S3", "S4", "S6", "S7"]
    expected = {
        #       runs cfg seeds grid   best  rerun rerun_of  no-cfg rerun  extra  quest  cost
        "S2": (6, 3, 3, False, "c3", 2, "S1", 0, 31.0, 22.0, 31.0, 127.0),
        "S3": (5, 2, 2, True, "c1", 1, "S1", 1, 300.0, 400.0, 700.0, 2500.0),
        "S4": (4, 2, 2, True, None, 0, None, 0, 0.0, 16.0, 16.0, 26.0),
        "S6": (1, 1, 1, True, None, 1, "S2", 0, 1.0, 0.0, 1.0, 1.0),
        "S7": (2, 1, 2, True, None, 0, None, 2, 0.0, 0.0, 0.0, 19.0),
    }
    for search_id, (runs, configs, seeds, grid, best, reruns, rerun_of, no_config,
                    rerun_cost, extra, questioned, cost) in expected.items():
        row = got[search_id]
        assert (row["runs"], row["configs"], row["seeds_per_config"], row["grid"],
                row["best_config_id"], row["rerun_configs"], row["rerun_of"],
                row["runs_without_config"]) == (runs, configs, seeds, grid, best, reruns,
                                                rerun_of, no_config), search_id
        assert row["rerun_cost"] == pytest.approx(rerun_cost, abs=TOL), search_id
        assert row["extra_seed_cost"] == pytest.approx(extra, abs=TOL), search_id
        assert row["questioned_cost"] == pytest.approx(questioned, abs=TOL), search_id
        assert row["cost"] == pytest.approx(cost, abs=TOL), search_id
        assert row["model"] == "churn"
    # S1 ran in February only: not active in March; S5 (fraud) neither
    assert "S1" not in got and "S5" not in got


def costs_configs(con, month: date = MARCH) -> dict[str, tuple]:
    build(con, "search_costs", month)
    return {r[0]: r[1:] for r in con.execute(
        "SELECT search_id, configs, seeds FROM search_costs WHERE month = ?", [month]).fetchall()}


def test_seeds_per_config_counts_distinct_seeds(con):
    """SPEC §12: `seeds_per_config` is the most seeds any config has. x1 ran seed 1 twice and
    seed 2 once, x2 seeds 1 and 2: two seeds each, a full grid (the runs were counted: 3, and
    no grid). A run without a seed is a seed of its own, as `extra_seed_cost` takes it: y1's
    two seedless runs are two seeds. `extra_seed_cost` still counts every run after its
    config's first (no metric: every config's): x1's repeat of seed 1 too."""
    rows = [trial("x1-1a", "SD", "x1", 1, d(2, hour=1), 1.0),
            trial("x1-1b", "SD", "x1", 1, d(2, hour=2), 2.0),
            trial("x1-2", "SD", "x1", 2, d(2, hour=3), 4.0),
            trial("x2-1", "SD", "x2", 1, d(2, hour=1), 8.0),
            trial("x2-2", "SD", "x2", 2, d(2, hour=2), 16.0),
            trial("y1-a", "SE", "y1", None, d(3, hour=1), 1.0),
            trial("y1-b", "SE", "y1", None, d(3, hour=2), 2.0),
            trial("y2-0", "SE", "y2", 0, d(3, hour=1), 4.0)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    build(con, "search_shape")
    got = shape(con)
    sd, se = got["SD"], got["SE"]
    assert (sd["runs"], sd["configs"], sd["seeds_per_config"], sd["grid"]) == (5, 2, 2, True)
    assert sd["extra_seed_cost"] == pytest.approx(2.0 + 4.0 + 16.0, abs=TOL)
    assert costs_configs(con)["SD"] == (2.0, 2)            # search_costs: 2 configs, 2 seeds
    assert (se["configs"], se["seeds_per_config"], se["grid"]) == (2, 2, False)
    assert se["extra_seed_cost"] == pytest.approx(2.0, abs=TOL)    # y1's later run



def test_seeds_equal_as_numbers_are_one_seed_first_by_start(con):
    """Seeds are text in the tracker, compared as numbers: "1" and "01" are one seed. Config
    a ran "1" (00:00, $5) and "01" (05:00, $3): the first seed is the earlier start, "01" is
    the extra one ($3); it was "01", whose text sorts first ($5 questioned), and the two
    were counted as two seeds. b ("0", .9) is the best; c's "0" has no metric."""
    rows = [trial("r1", "T", "a", "1", d(2, hour=0), 5.0, 0.5),
            trial("r2", "T", "a", "01", d(2, hour=5), 3.0, 0.5),
            trial("r3", "T", "b", "0", d(2, hour=1), 7.0, 0.9),
            trial("r4", "T", "c", "0", d(2, hour=2), 11.0)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    build(con, "search_shape")
    t = shape(con)["T"]
    assert (t["extra_seed_cost"], t["questioned_cost"]) == (pytest.approx(3.0, abs=TOL),
                                                            pytest.approx(3.0, abs=TOL))
    assert (t["configs"], t["seeds_per_config"]) == (3, 1)
    assert costs_configs(con)["T"] == (3.0, 2)     # search_costs: seeds 0 and 1 (not "01")

def test_configs_without_config_id_are_runs_over_seeds_as_in_search_costs(con):
    """SPEC §7: configs are distinct `config_id`, else runs ÷ distinct seeds; search_shape's
    `configs` is that figure. Each run without config_id was a config of its own: NC's six
    runs (seeds 1, 2, 1, 2, 1 and none) were "6 configs × 1 seeds, a full grid" where
    search_costs says 3. Per search (runs, configs, seeds_per_config, grid):
        NC  6 runs ÷ 2 seeds = 3 configs; not a grid (seed 1 ran 3 times, seed 2 twice, one
            run has no seed)
        NG  seeds 0, 1, 0, 1: 2 configs × 2 seeds, a grid
        NF  seeds 0, 1, 0, 1, 0: 2.5 in search_costs; 3 here (a whole number: the fewest
            configs that hold 5 runs of 2 seeds), not a grid
        NS  no seed at all: 3 runs ÷ 1 = 3 configs × 1 seed, a grid
        MX  c1 × seeds 0, 1 and c2 × seed 0, and a run without config_id: 2 configs (the
            run without config_id is in none), up to 2 seeds, not a grid
    No run without config_id is a re-run or an extra seed: nothing is questioned but MX's
    c1 seed 1 (no metric: every config's extra seeds count)."""
    def runs(search_id, seeds, config_ids=None):
        config_ids = config_ids or [None] * len(seeds)
        return [trial(f"{search_id}-{i}", search_id, c, s, d(4, hour=i), float(2 ** i))
                for i, (s, c) in enumerate(zip(seeds, config_ids, strict=True))]
    rows = (runs("NC", [1, 2, 1, 2, 1, None]) + runs("NG", [0, 1, 0, 1])
            + runs("NF", [0, 1, 0, 1, 0]) + runs("NS", [None, None, None])
            + runs("MX", [0, 1, 0, 0], ["c1", "c1", "c2", None]))
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    build(con, "search_shape")
    got = shape(con)
    costs = costs_configs(con)
    expected = {"NC": (6, 3, 2, False), "NG": (4, 2, 2, True), "NF": (5, 3, 2, False),
                "NS": (3, 3, 1, True), "MX": (4, 2, 2, False)}
    for search_id, figures in expected.items():
        row = got[search_id]
        assert (row["runs"], row["configs"], row["seeds_per_config"], row["grid"]) == figures, \
            search_id
        if search_id != "NF":
            assert costs[search_id][0] == row["configs"], search_id
    assert costs["NF"][0] == pytest.approx(2.5)
    assert got["NC"]["runs_without_config"] == 6 and got["MX"]["runs_without_config"] == 1
    assert [got[s]["questioned_cost"] for s in expected] == [0.0, 0.0, 0.0, 0.0, 2.0]


def test_a_run_resumed_from_a_checkpoint_is_the_trial_it_continues_not_an_extra_seed(con):
    """SPEC §12: `restart_of` marks a run that continues or repeats an interrupted one. SR's
    config a ran seed 0 once, in two pieces: r1 KILLED ($10, .70) and r2 resumed from r1's
    checkpoint ($20, .75); b ran seeds 0 ($40, .90, the best) and 1 ($80, .85). r2 was
    priced as a's second seed: extra seeds $20, questioned $20, and "bound the search"
    $20.00 "extra seeds of non-best configs $20.00 (best b)". Now a's two runs are one
    trial: 3 trials, a × 1 seed and b × 2 seeds (not a full grid), nothing questioned."""
    rows = [trial("r1", "SR", "a", 0, d(2, hour=0), 10.0, 0.70, status="KILLED"),
            trial("r2", "SR", "a", 0, d(2, hour=1), 20.0, 0.75, restart_of="r1",
                  resumed_from="step-100"),
            trial("r3", "SR", "b", 0, d(2, hour=2), 40.0, 0.90),
            trial("r4", "SR", "b", 1, d(2, hour=3), 80.0, 0.85)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    for table in ("search_trend", "search_shape", "cost_levers"):
        build(con, table)
    row = shape(con)["SR"]
    assert (row["runs"], row["configs"], row["seeds_per_config"], row["grid"],
            row["best_config_id"]) == (3, 2, 2, False, "b")
    assert row["extra_seed_cost"] == pytest.approx(0.0, abs=TOL)
    assert row["questioned_cost"] == pytest.approx(0.0, abs=TOL)
    assert row["cost"] == pytest.approx(150.0, abs=TOL)       # 10 + 20 + 40 + 80: every run
    ((dollars, evidence),) = con.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE lever = 'bound the search'").fetchall()
    assert dollars == 0.0
    assert evidence == ("no search re-ran a config of an earlier search or ran extra seeds of "
                        "a non-best config (search cost this month $150.00)")


def restart_chains(con) -> None:
    """The searches of `test_a_chain_of_restarts_of_one_config_and_seed_is_one_trial`."""
    rows = [trial("t1", "ST", "c", 0, d(2, hour=1), 1.0, status="KILLED"),
            trial("t2", "ST", "c", 0, d(2, hour=2), 2.0, restart_of="t1"),
            trial("t3", "ST", "c", 0, d(2, hour=3), 4.0, restart_of="t2",
                  resumed_from="s3://ckpt/t2/step-50/"),
            trial("t4", "ST", "c", 0, d(2, hour=4), 8.0),
            trial("t5", "ST", "c", 1, d(2, hour=1), 16.0),
            trial("t6", "ST", "d", 0, d(2, hour=1), 32.0),
            trial("t7", "ST", "d", 1, d(2, hour=2), 64.0, restart_of="t6",
                  resumed_from="step-10"),
            trial("u1", "SU", None, 0, d(3, hour=1), 1.0),
            trial("u2", "SU", None, 0, d(3, hour=2), 2.0, restart_of="u1",
                  resumed_from="step-10"),
            trial("u3", "SU", None, 1, d(3, hour=1), 4.0),
            trial("v1", "SV", "e", 0, d(4, hour=1), 1.0, restart_of="v2"),
            trial("v2", "SV", "e", 0, d(4, hour=2), 2.0, restart_of="v1"),
            trial("v3", "SV", "e", 1, d(4, hour=1), 4.0)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])


def test_a_chain_of_restarts_of_one_config_and_seed_is_one_trial(con):
    """A run restarting (`restart_of`) a trial of the same search, config and seed continues
    that trial, whether it resumed from a checkpoint or started from scratch, along the whole
    chain; a run repeating a seed without `restart_of`, or restarting a run of another seed,
    is a trial of its own. ST logs no metric (every config's extra seeds count):
        c seed 0  t1 $1 KILLED; t2 restarts t1 from scratch $2; t3 resumes t2 $4: one trial
        c seed 0  t4 $8, run again without restart_of: an extra seed
        c seed 1  t5 $16: an extra seed
        d seed 0  t6 $32: d's first seed
        d seed 1  t7 $64 restarts t6 (another seed): a trial of its own, an extra seed
    5 trials, 2 configs × 2 seeds, a full grid; extra seeds 8 + 16 + 64 = 88 (t2, t3 were
    extra too: 94, and 7 runs). SU names no config: u1 seed 0, u2 resumes it, u3 seed 1 are
    2 trials, 1 config × 2 seeds, a grid (3 runs ÷ 2 seeds made 2 configs, no grid). In SV,
    v1 and v2 restart each other (one trial, whose first run is v1, the earlier start) and
    v3 is seed 1: v3's $4 alone is an extra seed (v2's $2 was too)."""
    restart_chains(con)
    build(con, "search_shape")
    got = shape(con)
    st, su, sv = got["ST"], got["SU"], got["SV"]
    assert (st["runs"], st["configs"], st["seeds_per_config"], st["grid"]) == (5, 2, 2, True)
    assert st["extra_seed_cost"] == pytest.approx(88.0, abs=TOL)
    assert st["questioned_cost"] == pytest.approx(88.0, abs=TOL)
    assert st["cost"] == pytest.approx(127.0, abs=TOL)
    assert (su["runs"], su["configs"], su["seeds_per_config"], su["grid"],
            su["runs_without_config"]) == (2, 1, 2, True, 2)
    assert su["questioned_cost"] == pytest.approx(0.0, abs=TOL)
    assert (sv["runs"], sv["configs"], sv["seeds_per_config"], sv["grid"]) == (2, 1, 2, True)
    assert sv["extra_seed_cost"] == pytest.approx(4.0, abs=TOL)
    assert sv["cost"] == pytest.approx(7.0, abs=TOL)


def test_search_costs_counts_the_trials_search_shape_counts(con):
    """`search_trials` groups a search's trial runs into trials once, for search_shape and
    search_costs: each run's trial is the first run of the restart chain it is in (a cycle's
    earliest start). ST: t1 ← t2 ← t3 one trial (t1), t4, t5, t6 and t7 (restarting another
    seed) trials of their own; SU: u1 ← u2 (u1), u3; SV: v1 ⇄ v2 (v1, the earlier start), v3.
    search_costs' configs of SU (no config_id, seeds 0, 0 resumed, 1) were 3 runs ÷ 2 seeds
    = 1.5 beside search_shape's 1 config × 2 seeds; they are 2 trials ÷ 2 seeds = 1.0, its
    `runs` still 3."""
    restart_chains(con)
    assert dict(con.execute("SELECT run_id, trial_id FROM search_trials(?, ?, ?)",
                            [MARCH, d(1), d(1, 4)]).fetchall()) == {
        "t1": "t1", "t2": "t1", "t3": "t1", "t4": "t4", "t5": "t5", "t6": "t6", "t7": "t7",
        "u1": "u1", "u2": "u1", "u3": "u3", "v1": "v1", "v2": "v1", "v3": "v3"}
    assert costs_configs(con) == {"ST": (2.0, 2), "SU": (1.0, 2), "SV": (1.0, 2)}
    assert con.execute("SELECT search_id, runs FROM search_costs ORDER BY search_id"
                       ).fetchall() == [("ST", 7), ("SU", 3), ("SV", 3)]
    build(con, "search_shape")
    assert {s: (r["configs"], r["seeds_per_config"]) for s, r in shape(con).items()} == {
        "ST": (2, 2), "SU": (1, 2), "SV": (1, 2)}


def test_searches_without_a_model_re_run_nothing(con):
    """SPEC §12: a re-run is a config "already run in an earlier search of the model". Two
    searches naming no model, config ids "0" and "1" then "0" and "5": N2's "0" was a re-run
    of N1's (NULL matched NULL) and $100 went to "bound the search"."""
    rows = [trial("n1-0", "N1", "0", 0, d(1), 100.0, model=None),
            trial("n1-1", "N1", "1", 0, d(1), 100.0, model=None),
            trial("n2-0", "N2", "0", 0, d(10), 100.0, model=None),
            trial("n2-5", "N2", "5", 0, d(10), 100.0, model=None)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    build(con, "search_shape")
    n2 = shape(con)["N2"]
    assert (n2["rerun_configs"], n2["rerun_of"], n2["rerun_cost"], n2["questioned_cost"]) == (
        0, None, 0.0, 0.0)


def test_a_min_metric_goal_picks_the_lowest_value(con):
    march(con)
    build(con, "search_shape", metric_goal="min")
    got = shape(con)
    # S2: c1 has the lowest metric (.70): c2's second seed (16) is the only extra seed left;
    # the re-runs of c1 and c2 are questioned all the same
    assert got["S2"]["best_config_id"] == "c1"
    assert got["S2"]["extra_seed_cost"] == pytest.approx(16.0, abs=TOL)
    assert got["S2"]["questioned_cost"] == pytest.approx(31.0, abs=TOL)
    # S3: .70 (c1, seed 10) is the lowest: c1 is best; c4's extra seed stays 400
    assert got["S3"]["best_config_id"] == "c1"
    assert got["S3"]["extra_seed_cost"] == pytest.approx(400.0, abs=TOL)


def test_the_best_run_without_a_config_names_no_best_config(con):
    # the best metric belongs to a run without config_id: the best config is the best of the
    # runs that name one
    rows = [trial("a0", "SX", "k1", 0, d(3), 1.0, 0.5), trial("a1", "SX", "k1", 1, d(3), 2.0, 0.4),
            trial("b0", "SX", "k2", 0, d(3), 4.0, 0.6), trial("b1", "SX", "k2", 1, d(3), 8.0, 0.1),
            trial("n0", "SX", None, 0, d(3), 16.0, 0.99)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    build(con, "search_shape")
    (row,) = shape(con).values()
    assert row["best_config_id"] == "k2"
    assert row["extra_seed_cost"] == pytest.approx(2.0, abs=TOL)     # k1's seed 1
    # k1, k2 × seeds 0, 1: the run without config_id is in no config (search_costs' count)
    assert (row["configs"], row["grid"], row["runs_without_config"]) == (2, True, 1)


def test_a_search_only_active_through_a_running_run_has_a_row_without_cost(con):
    insert_runs(con, MARCH, [{"run_id": "r", "status": "RUNNING", "start_time": d(28, 2),
                              "model": "churn", "purpose": "search", "search_id": "SR",
                              "config_id": "c1", "seed": "0"}])
    build(con, "search_shape")
    row = shape(con)["SR"]
    assert (row["runs"], row["configs"], row["cost"], row["questioned_cost"]) == (1, 1, 0.0, 0.0)


def test_bound_the_search_is_the_sum_of_questioned_cost_with_the_shape_as_evidence(con):
    """S3's re-run is "already run in S1", the search that first ran c1 (`rerun_of`); it
    read "S1, S2", every earlier search that ran c1."""
    march(con)
    for table in ("search_trend", "search_shape", "cost_levers"):
        build(con, table)
    ((dollars, evidence),) = con.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE lever = 'bound the search'").fetchall()
    (questioned,) = con.execute("SELECT sum(questioned_cost) FROM search_shape").fetchone()
    assert dollars == pytest.approx(748.0, abs=TOL) == questioned
    # the largest questioned search first; S7 (nothing questioned) is not listed
    assert evidence.startswith("$748.00 of $2,673.00 search cost this month re-ran configs or "
                               "ran extra seeds: S3: 2 configs × 2 seeds, a full grid; "
                               "1 of 2 configs already run in S1 — $300.00 re-run; 1 run "
                               "without config_id, never counted as re-runs; extra seeds of "
                               "non-best configs $400.00 (best c1)")
    assert ("S4: 2 configs × 2 seeds, a full grid; no config run in an earlier search; no metric "
            "picks a best config: extra seeds of every config $16.00") in evidence
    assert evidence.index("S3:") < evidence.index("S2:") < evidence.index("S4:") \
        < evidence.index("S6:")
    assert "S7" not in evidence
    # deterministic: the same month again gives the same text
    build(con, "cost_levers")
    assert con.execute("SELECT evidence FROM cost_levers WHERE lever = 'bound the search'"
                       ).fetchone() == (evidence,)


def test_bound_the_search_says_how_much_of_the_extra_seeds_was_also_re_run(con):
    """A run both re-run and an extra seed is counted once in `questioned_cost`, and the
    evidence gave the two parts side by side: S2 read "$31.00 re-run; extra seeds of non-best
    configs $22.00" for a lever of $31.00 — a reader adds them and gets $53. The evidence says
    how much of the extra seeds was also re-run now:
        S2  re-run 31, extra seeds 22 (2 + 4 + 16, every one a re-run of c1 or c2): 22 of it
            also re-run; questioned 31 + 22 − 22 = 31
        P2  (below) configs a, b, c; a was run by P1 (a re-run); c is the best:
                a seeds 0, 1  costs 1, 2      re-run 1 + 2 = 3
                b seeds 0, 1  costs 4, 8      extra seeds 2 (a's seed 1) + 8 (b's) = 10
                c seed 0      cost 16         questioned 1 + 2 + 8 = 11 = 3 + 10 − 2
        S3  re-run 300 (c1), extra seeds 400 (c4): apart, questioned 700, nothing said
        S4  no re-run: extra seeds of every config $16.00, nothing said
    bound the search = 748 + 11 = 759."""
    march(con)
    rows = [trial("p1-a", "P1", "a", 0, d(1, 2), 50.0, 0.5, month=FEB),
            trial("p2-a0", "P2", "a", 0, d(15), 1.0, 0.60),
            trial("p2-a1", "P2", "a", 1, d(15), 2.0, 0.61),
            trial("p2-b0", "P2", "b", 0, d(15), 4.0, 0.70),
            trial("p2-b1", "P2", "b", 1, d(15), 8.0, 0.71),
            trial("p2-c0", "P2", "c", 0, d(15), 16.0, 0.90)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    for table in ("search_trend", "search_shape", "cost_levers"):
        build(con, table)
    p2 = shape(con)["P2"]
    assert (p2["rerun_cost"], p2["extra_seed_cost"], p2["questioned_cost"]) == (
        pytest.approx(3.0, abs=TOL), pytest.approx(10.0, abs=TOL), pytest.approx(11.0, abs=TOL))
    ((dollars, evidence),) = con.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE lever = 'bound the search'").fetchall()
    assert dollars == pytest.approx(759.0, abs=TOL)
    searches = dict(part.split(": ", 1) for part in evidence.split(": ", 1)[1].split(" | "))
    assert searches["S2"] == (
        "3 configs × up to 3 seeds, not a full grid; 2 of 3 configs already run in S1 — "
        "$31.00 re-run; extra seeds of non-best configs $22.00 (best c3; $22.00 of it also "
        "re-run, counted once)")
    assert searches["P2"] == (
        "3 configs × up to 2 seeds, not a full grid; 1 of 3 configs already run in P1 — "
        "$3.00 re-run; extra seeds of non-best configs $10.00 (best c; $2.00 of it also "
        "re-run, counted once); saturating: no improvement")     # .90, S2's best too
    assert "re-run; 1 run without config_id, never counted as re-runs; extra seeds of " \
        "non-best configs $400.00 (best c1);" in searches["S3"]
    assert "no metric picks a best config: extra seeds of every config $16.00" in searches["S4"]
    assert evidence.count("counted once") == 2


def test_bound_the_search_says_why_it_is_zero(con):
    insert_runs(con, MARCH, [
        {"run_id": "n1", "status": "FINISHED", "start_time": d(2), "end_time": d(3),
         "model": "churn", "purpose": "search", "search_id": "SN", "seed": "0"},
        {"run_id": "n2", "status": "FINISHED", "start_time": d(2), "end_time": d(3),
         "model": "churn", "purpose": "search", "search_id": "SN", "seed": "1"}])
    put_costs(con, [(MARCH, "n1", 5.0), (MARCH, "n2", 6.0)])
    for table in ("search_trend", "search_shape", "cost_levers"):
        build(con, table)
    ((dollars, evidence),) = con.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE lever = 'bound the search'").fetchall()
    assert dollars == 0.0
    assert evidence == ("no search run records a config_id: re-runs and extra seeds cannot be "
                        "told (search cost this month $11.00)")


def test_search_costs_and_search_trend_agree_on_the_previous_best(con):
    # one home (macros.sql): both tables read the same previous best and improvement
    march(con)
    build(con, "search_costs")
    build(con, "search_trend")
    costs = dict(con.execute("SELECT search_id, previous_best FROM search_costs").fetchall())
    trend = dict(con.execute("SELECT search_id, previous_best FROM search_trend").fetchall())
    assert costs["S2"] == trend["S2"] == pytest.approx(0.63)     # S1's best, over by 1 Mar
    assert costs["S3"] == trend["S3"] == pytest.approx(0.90)     # S2's c3
    assert set(costs) <= set(trend)


def test_an_earlier_searchs_controller_is_no_previous_best(con):
    """S1's sweep controller logs 0.99, its only trial 0.80: S1's result is 0.80 (a controller
    is not a trial), so the best S2 had to beat is 0.80, not the controller's 0.99."""
    rows = [trial("s1-t", "S1", "k1", 0, d(1, 2), 5.0, 0.80, parent="s1-ctl", month=FEB),
            trial("s2-a", "S2", "c1", 0, d(2), 1.0, 0.85),
            trial("s2-b", "S2", "c1", 1, d(2), 2.0, 0.84)]
    controller = {"run_id": "s1-ctl", "status": "FINISHED", "start_time": d(1, 2),
                  "end_time": d(1, 2, hour=3), "model": "churn", "purpose": "search",
                  "search_id": "S1", "metric_name": "val_auc", "metric_value": 0.99}
    insert_runs(con, MARCH, [r for r, _ in rows] + [controller])
    put_costs(con, [c for _, c in rows])
    build(con, "search_costs")
    build(con, "search_trend")
    costs = {r[0]: r[1:] for r in con.execute(
        "SELECT search_id, best_metric, previous_best, improvement FROM search_costs").fetchall()}
    trend = {r[0]: r[1:] for r in con.execute(
        "SELECT search_id, previous_best, improvement FROM search_trend").fetchall()}
    assert costs["S2"] == (pytest.approx(0.85), pytest.approx(0.80), pytest.approx(0.05))
    assert trend["S2"] == (pytest.approx(0.80), pytest.approx(0.05))


def test_a_refunded_re_run_is_no_saving_below_zero_in_a_month_or_a_period(con):
    """S7 ran config c1 in July; S8 ran it again from 1 August (a re-run, all questioned).
    August's bill refunds S8's run −$100 net; October and November charge it $50 and $30.
    "bound the search" was −$100.00 in August ("−$100.00 of −$100.00 search cost this month
    re-ran configs…"), ranked 7th below the $0 levers, and the period Jul–Nov summed it to
    −$20.00 though the questioned spend of October and November was $80. August's lever is
    0 now, first of the $0 levers, saying its figure is a credit; the period sums the months'
    floored figures: 0 + 0 + 0 + 50 + 30 = $80."""
    from cost_pipeline.report.strip import read_rows

    jul, aug, sep, oc, nov = (date(2024, m, 1) for m in (7, 8, 9, 10, 11))
    rows = [trial("s7-c1", "S7", "c1", 0, d(2, 7), 40.0, 0.80, month=jul),
            trial("s-8", "S8", "c1", 0, d(1, 8), -100.0, 0.82, month=aug)]
    for month in (jul, aug, sep, oc, nov):
        insert_runs(con, month, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows] + [(oc, "s-8", 50.0), (nov, "s-8", 30.0)])
    for month in (jul, aug, sep, oc, nov):
        for table in ("search_trend", "search_shape", "cost_levers"):
            build(con, table, month)
    levers = {m: dict(con.execute(
        "SELECT lever, (rank, dollars, evidence) FROM cost_levers WHERE month = ?",
        [m]).fetchall())["bound the search"] for m in (jul, aug, sep, oc, nov)}
    assert [(r, dollars) for r, dollars, _ in levers.values()] == [
        (1, 0.0), (1, 0.0), (1, 0.0), (1, 50.0), (1, 30.0)]
    assert levers[aug][2] == (
        "the re-run configs' and extra seeds' cost is a credit this month (−$100.00): nothing "
        "to save; −$100.00 of −$100.00 search cost this month re-ran configs or ran extra "
        "seeds: S8: 1 config × 1 seed, a full grid; 1 of 1 config already run in S7 — "
        "−$100.00 re-run; extra seeds of non-best configs $0.00 (best c1)")
    period = {r["lever"]: r for r in read_rows(con, "period_levers", jul, nov)}
    bound = period["bound the search"]
    assert (bound["rank"], bound["dollars"]) == (1, Decimal("80"))
    assert list(bound["by_month"].values()) == [0.0, 0.0, 0.0, 50.0, 30.0]
    assert all(r["dollars"] >= 0 for r in period.values())
    # a month written before the floor (its −$100 stored) reads floored in the period too
    con.execute("UPDATE cost_levers SET dollars = -100 WHERE month = ? "
                "AND lever = 'bound the search'", [aug])
    bound = {r["lever"]: r for r in read_rows(con, "period_levers", jul, nov)}[
        "bound the search"]
    assert (bound["rank"], bound["dollars"]) == (1, Decimal("80"))
    assert bound["by_month"][aug] == 0.0


def earlier_searches(con, searches: int) -> None:
    """`searches` finished searches of churn, E0000 one an hour from 1 Jan 2023, each trying
    configs "0" … "9" with seed 0 (in the March snapshot, billed in no month)."""
    con.execute(
        "INSERT INTO tracker_runs BY NAME "
        "SELECT ? AS month, printf('E%04d-%d', s, c) AS run_id, 'test' AS source, "
        "'churn' AS model, 'search' AS purpose, printf('E%04d', s) AS search_id, '0' AS seed, "
        "CAST(c AS VARCHAR) AS config_id, 'FINISHED' AS status, "
        "TIMESTAMP '2023-01-01' + to_hours(s) AS start_time, "
        "TIMESTAMP '2023-01-01' + to_hours(s) + INTERVAL 30 MINUTE AS end_time, "
        "false AS keep, false AS deleted "
        "FROM range(?) AS s(s), range(10) AS c(c)", [MARCH, searches])


def test_thousands_of_earlier_searches_of_the_same_configs_fit_in_little_memory(con):
    """1,200 searches of churn ran configs "0" … "9" in 2023; SA (1 Mar, configs "0" … "9",
    $1 each) and SB (2 Mar: "9" $4, "10" $8) are March's only active searches. Each active
    (search, config) was joined to every other search of that config, and every search of
    the snapshot to every other: 1,202 × 10 × 1,201 pairs, out of memory at 64 MB. Only the
    active searches' configs need their first run now.
        SA  10 re-run configs (each first run by E0000), rerun_cost 10 = questioned, cost 10
        SB  "9" re-run (E0000), "10" new: 1 re-run config, rerun_cost 4, cost 12
    `rerun_of` is E0000 for both, the search that first ran their configs (it began "E0000,
    E0001, E0002, E0003, E0004": every earlier search that ran one)."""
    earlier_searches(con, 1200)
    rows = ([trial(f"sa-{c}", "SA", str(c), 0, d(1), 1.0) for c in range(10)]
            + [trial("sb-9", "SB", "9", 0, d(2), 4.0), trial("sb-10", "SB", "10", 0, d(2), 8.0)])
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    con.execute("SET temp_directory = ''")  # nothing spilled to disk: the query fits or fails
    con.execute("SET threads = 2")
    con.execute("SET memory_limit = '64MB'")
    assert build(con, "search_shape") == 2
    got = shape(con)
    sa, sb = got["SA"], got["SB"]
    assert (sa["runs"], sa["configs"], sa["rerun_configs"], sa["runs_without_config"]) == (
        10, 10, 10, 0)
    assert (sa["rerun_cost"], sa["questioned_cost"], sa["cost"]) == (10.0, 10.0, 10.0)
    assert (sb["runs"], sb["configs"], sb["rerun_configs"]) == (2, 2, 1)
    assert (sb["rerun_cost"], sb["extra_seed_cost"], sb["questioned_cost"], sb["cost"]) == (
        4.0, 0.0, 4.0, 12.0)
    assert (sa["rerun_of"], sb["rerun_of"]) == ("E0000", "E0000")


def test_rerun_of_names_five_earlier_searches_and_counts_the_rest(con):
    """With 1,200 earlier searches of the same configs SA's `rerun_of` listed all 1,200 ids
    (8,399 characters; 13,991 at 2,000 searches) and the lever's evidence repeated each list.
    It names the first 5 by search id and counts the others. The searches named are those
    that first ran each re-run config (they were every earlier search sharing a config: SA
    named E0000 … E0004 "… and 1,195 more searches", F6 "F0, F1, F2, F3, F4 … and 1 more
    search"):
        SA, SB  re-ran configs of E0000 … E1199, all first run by E0000: "E0000"
        U0000 … U1199 (2023) each first ran its own config "u0" … "u1199"
        SC  re-ran all 1,200: U0000 … U0004 and 1,195 more; SD "u0" … "u5": 1 more;
        SE  "u0" … "u4": exactly 5, all named
        F0 … F6 (fraud) each ran "x" again after F0: "F0" """
    earlier_searches(con, 1200)
    con.execute(
        "INSERT INTO tracker_runs BY NAME "
        "SELECT ? AS month, printf('U%04d', s) AS run_id, 'test' AS source, 'churn' AS model, "
        "'search' AS purpose, printf('U%04d', s) AS search_id, '0' AS seed, "
        "printf('u%d', s) AS config_id, 'FINISHED' AS status, "
        "TIMESTAMP '2023-06-01' + to_hours(s) AS start_time, "
        "TIMESTAMP '2023-06-01' + to_hours(s) + INTERVAL 30 MINUTE AS end_time, "
        "false AS keep, false AS deleted FROM range(1200) AS s(s)", [MARCH])
    rows = ([trial(f"sa-{c}", "SA", str(c), 0, d(1), 1.0) for c in range(10)]
            + [trial("sb-9", "SB", "9", 0, d(2), 4.0), trial("sb-10", "SB", "10", 0, d(2), 8.0)]
            + [trial(f"sc-{i}", "SC", f"u{i}", 0, d(4), 1.0) for i in range(1200)]
            + [trial(f"sd-{i}", "SD", f"u{i}", 0, d(5), 1.0) for i in range(6)]
            + [trial(f"se-{i}", "SE", f"u{i}", 0, d(6), 1.0) for i in range(5)]
            + [trial(f"f{i}", f"F{i}", "x", 0, d(3, hour=i), 1.0, model="fraud")
               for i in range(7)])
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    build(con, "search_shape")
    got = shape(con)
    assert (got["SA"]["rerun_of"], got["SB"]["rerun_of"]) == ("E0000", "E0000")
    assert got["SC"]["rerun_of"] == "U0000, U0001, U0002, U0003, U0004 … and 1,195 more searches"
    assert got["SD"]["rerun_of"] == "U0000, U0001, U0002, U0003, U0004 … and 1 more search"
    assert got["SE"]["rerun_of"] == "U0000, U0001, U0002, U0003, U0004"
    assert [got[f"F{i}"]["rerun_of"] for i in range(7)] == [None] + ["F0"] * 6
    assert (got["SA"]["rerun_configs"], got["SB"]["rerun_configs"], got["SC"]["rerun_configs"],
            got["SD"]["rerun_configs"], got["F6"]["rerun_configs"]) == (10, 1, 1200, 6, 1)


def test_bound_the_search_lists_ten_searches_and_sums_the_rest(con):
    """Thirteen March searches of churn, M00 … M12 an hour apart, each run config "0" (seed
    0) for $1 … $13: every one after M00 re-runs it, questioning its whole cost. The evidence
    listed every questioned search (14.3 million characters for 2,000 searches); it lists
    the 10 largest — M12 $13 … M03 $4 — then "… and 2 more searches" (M02 $3 + M01 $2 = $5).
    bound the search = 2 + 3 + … + 13 = $90. M12's config was first run by M00: "already
    run in M00" (it named every earlier search of config "0": M00 … M04 and 7 more)."""
    rows = [trial(f"m{i:02d}", f"M{i:02d}", "0", 0, d(2, hour=i), float(i + 1))
            for i in range(13)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    for table in ("search_trend", "search_shape", "cost_levers"):
        build(con, table)
    ((dollars, evidence),) = con.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE lever = 'bound the search'").fetchall()
    assert dollars == pytest.approx(90.0, abs=TOL)
    assert evidence.startswith(
        "$90.00 of $91.00 search cost this month re-ran configs or ran extra seeds: M12: "
        "1 config × 1 seed, a full grid; 1 of 1 config already run in M00 — $13.00 "
        "re-run; no metric picks a best config: extra seeds of every config $0.00 | M11: ")
    *searches, rest = evidence.split(": ", 1)[1].split(" | ")
    assert [s.split(":")[0] for s in searches] == [f"M{i:02d}" for i in range(12, 2, -1)]
    assert rest == "… and 2 more searches ($5.00 questioned; every row is in the warehouse's "\
        "search_shape)"
    assert evidence.endswith(" | … and 2 more searches ($5.00 questioned; every row is in the "
                             "warehouse's search_shape)")


def test_rerun_of_names_the_search_that_first_ran_each_config(con):
    """`rerun_of` names, for each re-run config, the model's search that first ran it (the
    earliest start, a tie to the lowest search id), each once. It named every earlier search
    sharing a config: 4,400 searches of configs "0" … "9" all active in a month paired each
    (search, config) with every earlier search of that config.
        P1  1 Feb: a, b       P2  2 Feb: c       T2, T1  both 4 Feb 00:00: e (T1 first: id)
        G1 … G7  5 Feb: f1 … f7 (Gi runs fi)     H  6 Feb: f1 … f7 again
        S1  1 Mar: c1         S2  2 Mar: c1      S3  3 Mar: c1
        X  10 Mar: a, b, c, e, c1, z — a, b first run by P1, c by P2, e by T1, c1 by S1;
            z new: 5 re-run configs, rerun_of "P1, P2, S1, T1" (it was "P1, P2, S1, S2,
            S3 … and 2 more searches": T1, T2 too), rerun_cost 1 + 2 + 4 + 8 + 16 = 31
        Y  12 Mar: f1 … f7 — G1 … G7 (H re-ran them): "G1, G2, G3, G4, G5 … and 2 more
            searches" (it was 3 more: H); Y6 13 Mar: f1 … f6 — "… and 1 more search"
        S2, S3 re-ran c1: both name S1 (S3 named S1, S2)."""
    feb = [("P1", d(1, 2), ["a", "b"]), ("P2", d(2, 2), ["c"]), ("T2", d(4, 2), ["e"]),
           ("T1", d(4, 2), ["e"]), *((f"G{i}", d(5, 2), [f"f{i}"]) for i in range(1, 8)),
           ("H", d(6, 2), [f"f{i}" for i in range(1, 8)])]
    rows = [trial(f"{s}-{c}", s, c, 0, start, 1.0, month=FEB)
            for s, start, configs in feb for c in configs]
    rows += [trial(f"s{i}-c1", f"S{i}", "c1", 0, d(i), 1.0) for i in (1, 2, 3)]
    rows += [trial(f"x-{c}", "X", c, 0, d(10), cost)
             for c, cost in [("a", 1.0), ("b", 2.0), ("c", 4.0), ("e", 8.0), ("c1", 16.0),
                             ("z", 32.0)]]
    rows += [trial(f"y-f{i}", "Y", f"f{i}", 0, d(12), 1.0) for i in range(1, 8)]
    rows += [trial(f"y6-f{i}", "Y6", f"f{i}", 0, d(13), 1.0) for i in range(1, 7)]
    insert_runs(con, MARCH, [r for r, _ in rows])
    put_costs(con, [c for _, c in rows])
    assert build(con, "search_shape") == 6
    got = shape(con)
    assert {s: got[s]["rerun_of"] for s in got} == {
        "S1": None, "S2": "S1", "S3": "S1", "X": "P1, P2, S1, T1",
        "Y": "G1, G2, G3, G4, G5 … and 2 more searches",
        "Y6": "G1, G2, G3, G4, G5 … and 1 more search"}
    x = got["X"]
    assert (x["rerun_configs"], x["rerun_cost"], x["questioned_cost"], x["cost"]) == (
        5, 31.0, 31.0, 63.0)
    assert (got["Y"]["rerun_configs"], got["Y6"]["rerun_configs"], got["S3"]["rerun_configs"]
            ) == (7, 6, 1)


def test_the_preemption_and_retrain_levers_list_ten_then_count_the_rest(con):
    """Twelve chains that lost compute ($1 … $12, c01 … c12), each dearer than its last run on
    demand, and twelve models with flat retrains ($1 … $12): the evidence
    listed every one (a month of 1,000 spot chains wrote them all into the lever and the
    page); it lists the 10 largest, then "… and 2 more chains" / "… and 2 more models"."""
    for i in range(1, 13):
        con.execute("INSERT INTO preemption VALUES (?, ?, 'churn', 2, 1, 1, ?, ?, ?, ?, ?, true)",
                    [MARCH, f"c{i:02d}", 2.0 * i, float(i), 1.0 * i, f"c{i:02d}-b", 0.5 * i])
        con.execute("INSERT INTO retrain_cadence VALUES (?, ?, 1, {'schedule': 1, 'drift': 0, "
                    "'manual': 0, 'unknown': 0}, 1, 0, 0, 0, NULL, ?, 0, 0.0, 1, ?)",
                    [MARCH, f"m{i:02d}", float(i), float(i)])
    insert_runs(con, MARCH, [{"run_id": "c01-b", "status": "FINISHED", "start_time": d(2),
                              "end_time": d(3), "model": "churn", "purpose": "production",
                              "restart_of": "c01", "metric_value": 0.5}])
    build(con, "cost_levers")
    evidence = dict(con.execute("SELECT lever, evidence FROM cost_levers").fetchall())
    preempt = evidence["checkpoint before going preemptible"]
    lost = preempt.split(": ", 1)[1].split("; ")[0]
    assert lost.startswith("c12 (2 runs, 1 from scratch) $12.00 of $24.00, c11 (")
    assert lost.count(" from scratch) ") == 10
    assert lost.endswith("c03 (2 runs, 1 from scratch) $3.00 of $6.00, … and 2 more chains")
    assert "c12 $24.00 vs $6.00, " in preempt and "c03 $6.00 vs $1.50, … and 2 more chains" \
        in preempt
    retrain = evidence["retrain on measured decay"]
    assert retrain.count(" retrain flat, ") == 10
    assert "m12: 1 of 1 retrain flat, $12.00; m11: " in retrain
    assert retrain.endswith("m03: 1 of 1 retrain flat, $3.00; … and 2 more models")
