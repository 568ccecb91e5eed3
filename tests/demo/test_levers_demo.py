"""The bill as decisions on the demo quarter: 141 preprocessing runs of one (input_hash,
transform_version), every training run pulling its dataset across regions, searches that
saturate, and levers ranked by the dollars they touch."""

from __future__ import annotations

import pytest

from cost_pipeline.demo.quarter import PREPROCESS_HOURS, PULL_GB, STORY, TRANSFER_RATE


def test_every_preprocessing_run_after_the_first_is_a_recomputation(demo_warehouse):
    # all 141 preprocess runs compute the same pair: the first one is the cache, 140 recompute
    assert STORY["preprocess_runs"] == 141
    runs, cpu_hours, cost = demo_warehouse.execute(
        "SELECT count(DISTINCT run_id), sum(cpu_hours), sum(cost) FROM preprocessing_waste "
        "WHERE kind = 'recomputed'").fetchone()
    assert runs == 140
    assert cpu_hours == pytest.approx(140 * PREPROCESS_HOURS)          # 2,800 CPU-hours
    (first,) = demo_warehouse.execute(
        "SELECT run_id FROM tracker_runs WHERE month = '2026-09-01' AND purpose = 'preprocess' "
        "ORDER BY start_time, run_id LIMIT 1").fetchone()
    flagged = {r for (r,) in demo_warehouse.execute(
        "SELECT DISTINCT run_id FROM preprocessing_waste").fetchall()}
    assert first not in flagged
    # the waste is all preprocessing cost but the first run's
    (all_preprocessing, first_cost) = demo_warehouse.execute(
        "SELECT sum(cost), sum(cost) FILTER (WHERE run_id = ?) FROM attribution "
        "WHERE purpose_class = 'preprocessing'", [first]).fetchone()
    assert cost == pytest.approx(all_preprocessing - first_cost)
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
