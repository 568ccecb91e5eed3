"""The demo quarter teaches the search lesson (issue 12.5): September re-runs August's grid,
one search overran its approved estimate and another ran without one, and "bound the search"
leads the quarter's levers with its dollars."""

from __future__ import annotations

import pytest

from cost_pipeline.demo.quarter import APPROVALS, P4D, RUN_GPUS, SEARCH_HOURS

SEPTEMBER = "2026-09-01"
RUN_PRICE = RUN_GPUS * SEARCH_HOURS * P4D.rate / P4D.gpus        # $196.64 of GPU per run


def test_september_reruns_the_august_grid(demo_warehouse):
    rows = {r[0]: r[1:] for r in demo_warehouse.execute(
        "SELECT search_id, configs, seeds_per_config, grid, rerun_configs, rerun_of, "
        "rerun_cost, questioned_cost, cost FROM search_shape WHERE month = ?",
        [SEPTEMBER]).fetchall()}
    configs, seeds, grid, reruns, rerun_of, rerun_cost, questioned, cost = rows["s-2026-09a"]
    assert (configs, seeds, grid, reruns, rerun_of) == (12, 3, True, 12, "s-2026-08")
    # every run of the re-run is questioned, once: the re-run cost is the search's cost
    assert rerun_cost == pytest.approx(cost) == pytest.approx(questioned)
    assert rows["s-2026-09b"][3] == 0 and rows["s-2026-09b"][2] is False    # 10 × 3 + 1 × 2


def test_september_bound_the_search_is_the_questioned_cost(demo_warehouse):
    (questioned,) = demo_warehouse.execute(
        "SELECT sum(questioned_cost) FROM search_shape WHERE month = ?", [SEPTEMBER]).fetchone()
    ((dollars, evidence),) = demo_warehouse.execute(
        "SELECT dollars, evidence FROM cost_levers WHERE month = ? "
        "AND lever = 'bound the search'", [SEPTEMBER]).fetchall()
    assert dollars > 0 and dollars == pytest.approx(questioned, abs=1e-6)
    assert "s-2026-09a: 12 configs × 3 seeds, a full grid; 12 of 12 configs already run in " \
           "s-2026-08" in evidence
    assert "saturating" in evidence


def test_one_search_overran_its_estimate_and_one_ran_without(demo_warehouse):
    rows = {r[0]: r[1:] for r in demo_warehouse.execute(
        "SELECT search_id, estimated_cost, cumulative_cost, overrun FROM search_costs "
        "WHERE month = ?", [SEPTEMBER]).fetchall()}
    estimates = {s: configs * seeds * RUN_PRICE for s, configs, seeds, *_ in APPROVALS}
    assert estimates["s-2026-08"] == pytest.approx(4719.25, abs=0.01)   # 2 seeds approved
    for search_id, estimate in estimates.items():
        assert rows[search_id][0] == pytest.approx(estimate)
        assert rows[search_id][2] == pytest.approx(rows[search_id][1] - estimate)
    assert rows["s-2026-08"][1] > 1.1 * rows["s-2026-08"][0]           # ran 3 seeds: overran
    assert rows["s-2026-07"][1] <= 1.1 * rows["s-2026-07"][0]          # within its estimate
    assert rows["s-2026-09b"][1] <= 1.1 * rows["s-2026-09b"][0]
    assert rows["s-2026-09a"][0] is None and rows["s-2026-09a"][2] is None   # never approved
    approvals = demo_warehouse.execute(
        "SELECT search_id, approved, approved_by FROM search_approvals ORDER BY search_id"
    ).fetchall()
    assert approvals == [(s, True, "ml-lead") for s, *_ in APPROVALS]


def test_the_check_flags_the_overrun_and_the_unapproved_search(demo_quarter):
    _, results = demo_quarter
    by_month = {}
    for month, result in results.items():
        (check,) = [c for c in result.checks if c.name == "searches_within_estimate"]
        by_month[f"{month:%Y-%m}"] = check
    assert by_month["2026-07"].passed
    assert not by_month["2026-08"].passed and not by_month["2026-09"].passed
    september = by_month["2026-09"].metadata
    assert september["over_estimate"] == "s-2026-08"
    assert september["without_estimate"] == "s-2026-09a"


def test_bound_the_search_leads_the_quarter(demo_warehouse):
    ranked = demo_warehouse.execute(
        "SELECT lever, sum(dollars) AS dollars FROM cost_levers GROUP BY lever "
        "ORDER BY dollars DESC, lever").fetchall()
    assert [lever for lever, _ in ranked[:2]].count("bound the search") == 1
    quarter = dict(ranked)["bound the search"]
    (questioned,) = demo_warehouse.execute("SELECT sum(questioned_cost) FROM search_shape"
                                           ).fetchone()
    assert quarter == pytest.approx(questioned) and quarter > 10_000
