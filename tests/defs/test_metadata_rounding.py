"""Dagster metadata shows figures as a reader wants them (issue 16.6): money to the cent,
shares to 4 digits, hours to 3 — never `0.10318394393345327`."""

from __future__ import annotations

import dagster as dg

from cost_pipeline.defs.metadata import kept_apart, rounded


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


def test_money_is_rounded_to_its_currency_s_smallest_unit_half_up():
    """The cent was every currency's: a KWD 214.728 showed 214.73, and yen 1,234.4951 showed
    1234.5, which reads JPY 1,235 where the figure is 1,234. The `currency` the metadata
    carries, or the one given, says how many decimals; half up, once, from the exact figure."""
    kwd = rounded({"currency": "KWD", "effective_cost": 214.728, "untracked_share": 0.123456,
                   "by_type": [{"gpu_cost": 2.0345}], "billed_gpu_hours": 3.14159})
    assert kwd == {"currency": "KWD", "effective_cost": 214.728, "untracked_share": 0.1235,
                   "by_type": [{"gpu_cost": 2.035}], "billed_gpu_hours": 3.142}
    assert rounded({"cost": 1234.4951}, "JPY") == {"cost": 1234.0}
    assert rounded({"cost": -2.5}, "JPY") == {"cost": -3.0}  # half up, away from zero
    assert rounded({"cost": 1.23456}, "CLF") == {"cost": 1.2346}
    assert rounded({"cost": 0.125}, None) == {"cost": 0.13}  # no currency: USD's cents
    assert rounded({"cost": 0.125, "currency": "EUR"}) == {"cost": 0.13, "currency": "EUR"}


def test_a_delta_and_its_tolerance_are_kept_apart_in_yen():
    """A yen shows none of a 0.01 tolerance: the delta (0.3) and the tolerance both read 0 on
    a failed check. Both keep the digits that tell them apart; a share and its threshold as
    before (the threshold already exact)."""
    raw = {"currency": "JPY", "delta": 0.3, "tolerance": 0.01}
    assert kept_apart(rounded(raw), raw, "delta", "tolerance") == {
        "currency": "JPY", "delta": 0.3, "tolerance": 0.01}
    passing = {"currency": "JPY", "delta": 0.0, "tolerance": 0.01}
    assert kept_apart(rounded(passing), passing, "delta", "tolerance") == passing
    share = {"untracked_share": 0.05004, "threshold": 0.05}
    assert kept_apart(rounded(share), share, "untracked_share", "threshold") == {
        "untracked_share": 0.05004, "threshold": 0.05}
    kwd = {"currency": "KWD", "delta": 0.0104, "tolerance": 0.01}
    assert kept_apart(rounded(kwd), kwd, "delta", "tolerance") == {
        "currency": "KWD", "delta": 0.0104, "tolerance": 0.01}
