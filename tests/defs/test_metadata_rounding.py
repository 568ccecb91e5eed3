"""Dagster metadata shows figures as a reader wants them (issue 16.6): money to the cent,
shares to 4 digits, hours to 3 — never `0.10318394393345327`."""

from __future__ import annotations

import dagster as dg

from cost_pipeline.defs.metadata import rounded


def test_figures_are_rounded_by_what_they_are():
    got = rounded({
        "effective_cost": 1234.567891, "delta": -0.0049999, "tolerance": 0.01,
        "untracked_share": 0.10318394393345327, "coverage": 0.999999, "threshold": 0.05,
        "billed_gpu_hours": 3696.123456, "rows": 12, "month": "2026-09", "provisional": True,
        "top_untracked": dg.MetadataValue.json([{"cost": 1.23456}]),
        "by_type": [{"gpu_cost": 68.06399999999998, "untracked_share": 1 / 3}],
        "nan": float("nan"),
    })
    assert got["effective_cost"] == 1234.57 and got["delta"] == -0.0
    assert got["untracked_share"] == 0.1032 and got["coverage"] == 1.0
    assert got["billed_gpu_hours"] == 3696.123
    assert (got["rows"], got["month"], got["provisional"]) == (12, "2026-09", True)
    assert got["by_type"] == [{"gpu_cost": 68.06, "untracked_share": 0.3333}]
    assert isinstance(got["top_untracked"], dg.JsonMetadataValue)
    assert got["nan"] != got["nan"]  # left as it is: not a figure to round
