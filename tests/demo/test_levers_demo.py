"""The bill as decisions on the demo quarter: 141 preprocessing runs of one (input_hash,
transform_version), every training run pulling its dataset across regions, searches that
saturate, and levers ranked by the dollars they touch."""

from __future__ import annotations

import pytest

from cost_pipeline.demo.quarter import PREPROCESS_HOURS, PULL_GB, STORY, TRANSFER_RATE


def test_every_preprocessing_run_after_the_first_finished_is_a_recomputation(demo_warehouse):
    # all 141 preprocess runs compute the same pair; the first one's table exists once it
    # finished (20 h after its start): every run started from then on recomputes it, 117 —
    # July's first two waves of 12 started while it still ran, and a cache held nothing yet
    assert STORY["preprocess_runs"] == 141
    runs, cpu_hours, cost = demo_warehouse.execute(
        "SELECT count(DISTINCT run_id), sum(cpu_hours), sum(cost) FROM preprocessing_waste "
        "WHERE kind = 'recomputed'").fetchone()
    assert runs == 117
    assert cpu_hours == pytest.approx(117 * PREPROCESS_HOURS)          # 2,340 CPU-hours
    (first, finished) = demo_warehouse.execute(
        "SELECT run_id, end_time FROM tracker_runs WHERE month = '2026-09-01' "
        "AND purpose = 'preprocess' ORDER BY end_time, run_id LIMIT 1").fetchone()
    flagged = {r for (r,) in demo_warehouse.execute(
        "SELECT DISTINCT run_id FROM preprocessing_waste").fetchall()}
    later = {r for (r,) in demo_warehouse.execute(
        "SELECT run_id FROM tracker_runs WHERE month = '2026-09-01' AND purpose = 'preprocess' "
        "AND start_time >= ?", [finished]).fetchall()}
    assert first not in flagged and flagged == later
    # the waste is the preprocessing cost of exactly those runs
    (later_cost,) = demo_warehouse.execute(
        "SELECT sum(cost) FROM attribution WHERE purpose_class = 'preprocessing' "
        "AND list_contains(?, run_id)", [sorted(later)]).fetchone()
    assert cost == pytest.approx(later_cost)
    # no run trains on a stale table: there is one transform version
    assert demo_warehouse.execute("SELECT count(*) FROM preprocessing_waste "
                                  "WHERE kind = 'stale_transform'").fetchone() == (0,)


def test_every_training_run_pays_egress(demo_warehouse):
    training = {r for (r,) in demo_warehouse.execute(
        "SELECT run_id FROM tracker_runs WHERE month = '2026-09-01' AND dataset IS NOT NULL "
        "AND purpose IN ('search', 'production')").fetchall()}
    assert len(training) == 141
    per_run = dict(demo_warehouse.execute(
        "SELECT run_id, sum(cost) FROM egress GROUP BY run_id").fetchall())
    assert set(per_run) == training
    # each pulled 500 GB once at $0.02/GB
    assert all(cost == pytest.approx(PULL_GB * TRANSFER_RATE) for cost in per_run.values())
    (total, gigabytes) = demo_warehouse.execute(
        "SELECT sum(cost), sum(gigabytes) FROM egress").fetchone()
    assert total == pytest.approx(141 * PULL_GB * TRANSFER_RATE)          # 1,410.00
    assert gigabytes == pytest.approx(141 * PULL_GB)


def test_later_searches_saturate(demo_warehouse):
    rows = demo_warehouse.execute(
        "SELECT search_id, improvement, cost_per_improvement, saturating FROM search_trend "
        "WHERE month = '2026-09-01' ORDER BY search_order").fetchall()
    assert [r[0] for r in rows] == ["s-2026-07", "s-2026-08", "s-2026-09a", "s-2026-09b"]
    assert rows[0][1] is None                 # the first search has nothing to beat
    unit_costs = [r[2] for r in rows[1:]]
    assert unit_costs == sorted(unit_costs)   # each AUC point costs more than the last
    assert [r[3] for r in rows] == [False, False, True, True]


def test_showback_adds_up_to_each_month(demo_warehouse):
    got = demo_warehouse.execute(
        "SELECT s.month, s.total, a.total FROM (SELECT month, sum(cost) total FROM showback "
        "GROUP BY 1) s JOIN (SELECT month, sum(cost) total FROM attribution GROUP BY 1) a "
        "USING (month)").fetchall()
    assert len(got) == 3
    for _, showback, attributed in got:
        assert showback == pytest.approx(attributed)
    (team,) = demo_warehouse.execute(
        "SELECT sum(cost) FILTER (WHERE team = 'ml-platform') / sum(cost) FROM showback"
    ).fetchone()
    assert team > 0.8                         # the instances carry user_team=ml-platform


def test_levers_rank_the_months_story(demo_warehouse):
    rows = demo_warehouse.execute(
        "SELECT strftime(month, '%Y-%m'), rank, lever, dollars FROM cost_levers "
        "ORDER BY month, rank").fetchall()
    by_month: dict[str, list] = {}
    for month, rank, lever, dollars in rows:
        by_month.setdefault(month, []).append((rank, lever, dollars))
    assert list(by_month) == ["2026-07", "2026-08", "2026-09"]
    for levers in by_month.values():
        assert [r for r, _, _ in levers] == [1, 2, 3, 4, 5, 6, 7, 8]
        assert levers[0][2] > 0
        assert [x for _, _, x in levers[:7]] == sorted((x for _, _, x in levers[:7]),
                                                       reverse=True)
        assert levers[7][1] == "use a cheaper card"
    # every month: the searches' extra seeds of non-best configs (and in September the re-run
    # of August's grid) come first; August's untracked notebook ($1,418) second
    assert [levers[0][1] for levers in by_month.values()] == ["bound the search"] * 3
    assert by_month["2026-08"][1][1:] == ("chase untracked usage", pytest.approx(1418.0))


def test_retrains_and_preemption_in_the_demo(demo_warehouse):
    """fraud retrains monthly on a schedule, flat in August and September (10 h × $5.44 each);
    churn's production run came on drift; the spot pair of s-2026-09b: c03-s0 restarted from
    scratch (its September cost is lost), c03-s1 resumed from its checkpoint."""
    from cost_pipeline.demo import quarter as demo

    cadence = demo_warehouse.execute(
        "SELECT strftime(month, '%Y-%m'), model, retrains, schedule_retrains, drift_retrains, "
        "flat_retrains, flat_retrain_cost FROM retrain_cadence ORDER BY ALL").fetchall()
    flat = demo.FRAUD_HOURS * demo.C6I.rate
    assert cadence == [
        ("2026-07", "fraud", 1, 1, 0, 0, 0.0),        # the first: nothing to compare with
        ("2026-08", "fraud", 1, 1, 0, 1, pytest.approx(flat)),
        ("2026-09", "churn", 1, 0, 1, 0, 0.0),
        ("2026-09", "fraud", 1, 1, 0, 1, pytest.approx(flat)),
    ]
    chains = demo_warehouse.execute(
        "SELECT chain_id, runs, restarts, restarts_from_scratch, lost_cost, "
        "last_run_on_demand_cost, spot_cost_more_than_on_demand FROM preemption "
        "WHERE month = '2026-09-01' ORDER BY chain_id").fetchall()
    scratch, resumed = STORY["interrupted_runs"]
    (lost,) = demo_warehouse.execute(
        "SELECT sum(cost) FROM attribution WHERE month = '2026-09-01' AND run_id = ?",
        [scratch]).fetchone()
    # the replacement instance's 9 h at the on-demand rate, half of it (4 of 8 GPUs), plus
    # the run's volume (500 GB-month prorated over September's 720 h)
    last_on_demand = 9 * demo.P4D.rate / 2 + 9 * demo.EBS_GB * demo.EBS_RATE / 720
    assert chains == [(scratch, 2, 1, 1, pytest.approx(lost), pytest.approx(last_on_demand),
                       False),
                      (resumed, 2, 1, 0, 0.0, pytest.approx(last_on_demand), False)]
    # 3 h of half the reclaimed spot p4d, its volume, its dataset pull and checkpoint bytes
    assert lost > 3 * demo.P4D_SPOT.rate / 2 + demo.PULL_GB * demo.TRANSFER_RATE
    levers = dict(demo_warehouse.execute(
        "SELECT strftime(month, '%Y-%m') || ' ' || lever, dollars FROM cost_levers "
        "WHERE lever IN ('retrain on measured decay', 'checkpoint before going preemptible')"
    ).fetchall())
    assert levers == {
        "2026-07 retrain on measured decay": 0.0,
        "2026-07 checkpoint before going preemptible": 0.0,
        "2026-08 retrain on measured decay": pytest.approx(flat),
        "2026-08 checkpoint before going preemptible": 0.0,
        "2026-09 retrain on measured decay": pytest.approx(flat),
        "2026-09 checkpoint before going preemptible": pytest.approx(lost),
    }
