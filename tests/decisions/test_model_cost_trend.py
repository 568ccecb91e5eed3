"""The WARN check `model_cost_trend` (SPEC §12) on hand-made months of
cost_per_model_monthly: a model fails when its month costs more than policy.trend.max_growth ×
the median of its previous 3 months' costs, and is judged only with at least 2 of them."""

from __future__ import annotations

from datetime import date

import duckdb
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.defs.checks import model_cost_trend
from cost_pipeline.warehouse import ensure_schema

JAN, FEB, MAR, APR, MAY = (date(2026, m, 1) for m in range(1, 6))


@pytest.fixture
def con():
    with duckdb.connect(":memory:") as con:
        ensure_schema(con)
        yield con


def costs(con, month: date, **by_model: float | list[float]) -> None:
    """The month's cost_per_model_monthly rows; a list is several purpose-class rows."""
    for model, cost in by_model.items():
        parts = cost if isinstance(cost, list) else [cost]
        for purpose, part in zip(["search", "production", "preprocessing"], parts,
                                 strict=False):
            con.execute("INSERT INTO cost_per_model_monthly VALUES (?, ?, ?, 'gpu', ?, 0, 1)",
                        [month, None if model == "untracked" else model, purpose, part])


def test_passes_within_growth_and_fails_above_it(con):
    costs(con, JAN, churn=100.0, fraud=1000.0)
    costs(con, FEB, churn=200.0, fraud=1000.0)
    costs(con, MAR, churn=[200.0, 25.0], fraud=1400.0)  # churn 225 = 1.5 × median(100, 200)
    check = model_cost_trend(con, MAR, 1.5)
    assert check.passed and check.severity.value == "WARN"
    assert check.metadata["models_judged"].value == 2
    assert check.metadata["models_exceeding"].value == 0

    costs(con, APR, churn=[300.0, 60.0], fraud=1000.0)  # churn 360 > 1.5 × median(100, 200, 225)
    check = model_cost_trend(con, APR, 1.5)
    assert not check.passed
    assert check.metadata["models"].value == "churn"
    (failing,) = check.metadata["exceeding"].value
    assert failing == {"model": "churn", "cost": 360.0, "previous_median": 200.0,
                       "previous_months": ["2026-01", "2026-02", "2026-03"], "judged": True,
                       "growth": 1.8}


def test_median_of_two_is_their_mean_and_the_window_is_three_months(con):
    costs(con, JAN, churn=10_000.0)  # four months back from MAY: outside the window
    costs(con, MAR, churn=100.0)
    costs(con, APR, churn=300.0)
    costs(con, MAY, churn=301.0)  # 301 > 1.5 × 200 (the mean of 100 and 300)
    check = model_cost_trend(con, MAY, 1.5)
    (failing,) = check.metadata["exceeding"].value
    assert failing["previous_median"] == 200.0
    assert failing["previous_months"] == ["2026-03", "2026-04"]
    assert model_cost_trend(con, MAY, 1.51).passed  # the growth comes from the policy


def test_a_model_needs_two_previous_months(con):
    costs(con, FEB, churn=100.0)
    costs(con, MAR, churn=1000.0, fraud=5000.0)  # churn: one previous month; fraud: none
    check = model_cost_trend(con, MAR, 1.5)
    assert check.passed
    assert check.metadata["models_judged"].value == 0
    assert check.metadata["models_not_judged"].value == 2


def test_a_held_month_the_model_spent_nothing_in_is_a_cost_of_zero(con):
    """m1 and m2 spent 100, 200, nothing, 200: m1's March has a $0 row, m2's none. March is
    held (materialized) either way, so both are judged against median(100, 200, 0) = 100 —
    m2 was judged against median(100, 200) = 150 and passed. A month the warehouse holds
    counts towards the 2 needed; months before a model's first are not its history."""
    for month in (JAN, FEB, MAR, APR):
        con.execute("INSERT INTO billing_months (month, lines, currencies, currency) "
                    "VALUES (?, 1, 1, 'USD')", [month])
    costs(con, JAN, m1=100.0, m2=100.0, k=100.0)
    costs(con, FEB, m1=200.0, m2=200.0, fresh=0.5)
    costs(con, MAR, m1=0.0)
    costs(con, APR, m1=200.0, m2=200.0, k=100.0, fresh=0.3, new=50.0)
    check = model_cost_trend(con, APR, 1.5)
    assert not check.passed
    assert check.metadata["models"].value == "m1, m2, k"
    months = ["2026-01", "2026-02", "2026-03"]
    assert check.metadata["exceeding"].value == [
        {"model": m, "cost": 200.0, "previous_median": 100.0, "previous_months": months,
         "judged": True, "growth": 2.0} for m in ("m1", "m2")] + [
        # 100 in January, nothing in February and March: median(100, 0, 0) = 0
        {"model": "k", "cost": 100.0, "previous_median": 0.0, "previous_months": months,
         "judged": True, "growth": None}]
    # fresh: first costed in February, so February and March (0.5 and 0: median 0.25, 0.3
    # within 1.5 × it); new: no month before April is its history, not judged
    assert check.metadata["models_judged"].value == 4
    assert check.metadata["models_not_judged"].value == 1


def test_untracked_cost_has_no_model_and_is_not_judged(con):
    for month in (JAN, FEB):
        costs(con, month, untracked=10.0, churn=100.0)
    costs(con, MAR, untracked=10_000.0, churn=100.0)
    check = model_cost_trend(con, MAR, 1.5)
    assert check.passed and check.metadata["models_judged"].value == 1


def test_max_growth_is_a_policy_setting_with_default():
    assert parse_config({}, base_dir=".").policy.trend.max_growth == 1.5
    cfg = parse_config({"policy": {"trend": {"max_growth": 2.0}}}, base_dir=".")
    assert cfg.policy.trend.max_growth == 2.0
    with pytest.raises(ValueError, match="max_growth"):
        parse_config({"policy": {"trend": {"max_growth": 0}}}, base_dir=".")


def test_the_demo_quarter_flags_september(demo_quarter):
    """September's churn spend (two more searches) is twice its July–August median."""
    _, results = demo_quarter
    checks = {m: {c.name: c for c in r.checks}["model_cost_trend"] for m, r in results.items()}
    assert checks[date(2026, 8, 1)].passed  # one previous month: not judged yet
    september = checks[date(2026, 9, 1)]
    assert not september.passed and september.severity == "WARN"
    assert september.metadata["models"] == "churn"


def test_a_negative_median_is_judged_on_the_net_spends_growth(con):
    # credits above the model's spend: −5, −5, then −6 is a fall, not a growth (−6 > 1.5 × −5
    # held it for one); −2 is: −2 − (−5) = 3 > 0.5 × |−5|
    costs(con, JAN, churn=-5.0, fraud=-5.0)
    costs(con, FEB, churn=-5.0, fraud=-5.0)
    costs(con, MAR, churn=-6.0, fraud=-2.0)
    check = model_cost_trend(con, MAR, 1.5)
    (failing,) = check.metadata["exceeding"].value
    assert failing == {"model": "fraud", "cost": -2.0, "previous_median": -5.0,
                       "previous_months": ["2026-01", "2026-02"], "judged": True,
                       "growth": None}
    assert check.metadata["models_judged"].value == 2


@pytest.mark.parametrize(("history", "growth", "limit", "above", "others"), [
    # 16.05 − 10.70 read 5.350000000000001 > 0.5 × 10.70 in doubles; fraud: 1.5 × 13.08
    ((10.00, 11.40), 1.5, 16.05, 16.06, {"fraud": (10.28, 15.88, 19.62)}),
    # 0.15 × 11,300,000 read 1694999.999999999, 1e-9 short of 1,695,000, which 10 decimal
    # places still told apart
    ((11_300_000.0, 11_300_000.0), 1.15, 12_995_000.0, 12_995_000.01, {})])
def test_a_cost_exactly_at_the_growth_limit_passes(con, history, growth, limit, above, others):
    """churn's June costs exactly `growth` × the median of its April and May (to the cent; at
    millions too): at the limit, not above it. A cent above the limit still fails."""
    JUN = date(2026, 6, 1)
    for i, month in enumerate((APR, MAY, JUN)):
        costs(con, month, churn=(*history, limit)[i],
              **{model: figures[i] for model, figures in others.items()})
    check = model_cost_trend(con, JUN, growth)
    assert check.passed
    assert (check.metadata["models_judged"].value,
            check.metadata["models_exceeding"].value) == (1 + len(others), 0)

    con.execute("UPDATE cost_per_model_monthly SET cost = ? WHERE month = ? AND model = 'churn'",
                [above, JUN])
    check = model_cost_trend(con, JUN, growth)
    assert not check.passed
    (failing,) = check.metadata["exceeding"].value
    assert (failing["model"], failing["cost"], failing["previous_median"]) == (
        "churn", above, sum(history) / 2)


def billed_in(con, **by_month: str) -> None:
    """billing_months rows: each month (JAN … MAY) billed in the given currency."""
    for name, currency in by_month.items():
        con.execute("INSERT INTO billing_months (month, lines, currencies, currency) "
                    "VALUES (?, 1, 1, ?)", [globals()[name], currency])


def test_a_month_is_held_against_earlier_months_of_its_own_currency(con):
    """churn cost EUR 400 in March and EUR 464 in April, then JPY 43,200 in May: May was
    judged against median(400, 464) = 432 — euros — and failed as "JPY 43,200 against a median
    of JPY 432". May has no earlier month billed in yen: not judged, and the check says why."""
    billed_in(con, MAR="EUR", APR="EUR", MAY="JPY")
    costs(con, MAR, churn=400.0)
    costs(con, APR, churn=464.0)
    costs(con, MAY, churn=43_200.0)
    check = model_cost_trend(con, MAY, 1.5)
    assert check.passed
    assert (check.metadata["models_judged"].value,
            check.metadata["models_not_judged"].value) == (0, 1)
    assert check.metadata["not_judged_other_currency"].value == \
        "churn (2026-03, 2026-04 billed in EUR, not JPY)"


def test_the_median_is_over_the_earlier_months_of_the_same_currency(con):
    """churn: JPY 100 in January, JPY 200 in February, EUR 1 in March. April's JPY 220 is held
    against median(100, 200) = 150 (220 ≤ 225: passes), not median(100, 200, 1) = 100, where
    it failed; JPY 301 is over 1.5 × 150."""
    billed_in(con, JAN="JPY", FEB="JPY", MAR="EUR", APR="JPY")
    costs(con, JAN, churn=100.0)
    costs(con, FEB, churn=200.0)
    costs(con, MAR, churn=1.0)
    costs(con, APR, churn=220.0)
    check = model_cost_trend(con, APR, 1.5)
    assert check.passed and check.metadata["models_judged"].value == 1
    assert check.metadata["not_judged_other_currency"].value == ""

    con.execute("UPDATE cost_per_model_monthly SET cost = 301.0 WHERE month = ?", [APR])
    check = model_cost_trend(con, APR, 1.5)
    assert check.metadata["exceeding"].value == [
        {"model": "churn", "cost": 301.0, "previous_median": 150.0,
         "previous_months": ["2026-01", "2026-02"], "judged": True, "growth": 2.007}]


def test_a_failing_growth_is_never_shown_equal_to_the_limit(con):
    """churn cost $960, $992, $960 (median $960: a limit of 1.5 × 960 = $1,440), then
    $1,440.01 in May, a growth of 1,440.01 / 960 = 1.5000104…: it fails, and its growth read
    1.5 beside max_growth 1.5 — to 3 decimals. It keeps the digits that tell it from the
    limit (1.50001); $1,440.00 is at the limit and passes."""
    costs(con, FEB, churn=960.0)
    costs(con, MAR, churn=992.0)
    costs(con, APR, churn=960.0)
    costs(con, MAY, churn=1440.0)
    assert model_cost_trend(con, MAY, 1.5).passed

    con.execute("UPDATE cost_per_model_monthly SET cost = 1440.01 WHERE month = ?", [MAY])
    check = model_cost_trend(con, MAY, 1.5)
    assert not check.passed and check.metadata["max_growth"].value == 1.5
    assert check.metadata["exceeding"].value == [
        {"model": "churn", "cost": 1440.01, "previous_median": 960.0,
         "previous_months": ["2026-02", "2026-03", "2026-04"], "judged": True,
         "growth": 1.50001}]
    # a limit of more digits than the metadata's 4 is shown as configured: 1.23456 × 1,000
    con.execute("UPDATE cost_per_model_monthly SET cost = ? WHERE month = ?", [1234.57, MAY])
    con.execute("UPDATE cost_per_model_monthly SET cost = 1000.0 WHERE month < ?", [MAY])
    check = model_cost_trend(con, MAY, 1.23456)
    (failing,) = check.metadata["exceeding"].value
    assert (failing["growth"], check.metadata["max_growth"].value) == (1.23457, 1.23456)
