"""search_approvals (estimate --approve), search_costs' estimate columns and the WARN check
searches_within_estimate (SPEC §12), against hand-computed figures.

    SX  costs 60 in February and 50 in March → cumulative 110 in March
        recorded twice: 200 (1 Feb), then 100 (2 Feb) → the latest counts: 100, overrun 10;
        110 ≤ 1.1 × 100 = 110 → within the estimate
    SY  costs 7 in March, never approved → the check fails, naming it
"""

from __future__ import annotations

import fcntl
import re
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.config import load_config
from cost_pipeline.defs.checks import searches_within_estimate
from cost_pipeline.estimate import EstimateError, estimate_search, record_approval
from cost_pipeline.report.data import collect
from cost_pipeline.report.render import render_html
from cost_pipeline.warehouse import ensure_schema, replace_month, sql_text
from tests.decisions.test_search_shape import FEB, MARCH, d, params, put_costs
from tests.support.warehouse_rows import insert_lines, insert_runs


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("warehouse: {path: wh/warehouse.duckdb}\n"
                    "billing: [{kind: focus, path: focus/}]\n"
                    "tracker: [{kind: runs_file, path: runs.csv}]\n"
                    "policy: {search: {approval_budget: 1000.0}}\n")
    return load_config(path)


def approve(cfg, search_id, configs, at, *, price=1.0, **kw):
    # configs × 1 seed × 1 GPU × 1 h × price: the estimate is configs × price
    est = estimate_search(cfg, "churn", configs, 1, gpus=1, hours=1, price=price)
    return record_approval(cfg, est, search_id, recorded_at=at, **kw)


def months(con, month=MARCH) -> None:
    x1 = {"run_id": "x1", "status": "FINISHED", "start_time": d(20, 2), "end_time": d(2),
          "model": "churn", "purpose": "search", "search_id": "SX", "config_id": "c1"}
    insert_runs(con, FEB, [x1])  # February's snapshot: x1 ran then too
    insert_runs(con, month, [
        x1,
        {"run_id": "y1", "status": "FINISHED", "start_time": d(3), "end_time": d(4),
         "model": "churn", "purpose": "search", "search_id": "SY", "config_id": "c1"}])
    put_costs(con, [(FEB, "x1", 60.0), (MARCH, "x1", 50.0), (MARCH, "y1", 7.0)])


def search_costs(con) -> dict:
    replace_month(con, "search_costs", MARCH, sql_text("search_costs"), params())
    return {r[0]: r[1:] for r in con.execute(
        "SELECT search_id, estimated_cost, cumulative_cost, overrun FROM search_costs "
        "WHERE month = ? ORDER BY search_id", [MARCH]).fetchall()}


def test_the_latest_recording_counts_and_the_check_names_the_unapproved(cfg):
    first = approve(cfg, "SX", 200, datetime(2024, 2, 1, tzinfo=UTC), approved_by="ana")
    assert first["month"] == date(2024, 2, 1) and first["approved"] is True
    approve(cfg, "SX", 100, datetime(2024, 2, 2, 9, 30, tzinfo=UTC),
            expected_improvement=0.004, approved_by="ben")
    with duckdb.connect(cfg.warehouse_path) as con:
        ensure_schema(con)
        con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                    "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
        months(con)
        rows = con.execute("SELECT search_id, model, runs, per_run_cost, estimated_cost, "
                           "approval_budget, approved, expected_improvement, approved_by, "
                           "recorded_at FROM search_approvals ORDER BY recorded_at").fetchall()
        assert rows == [
            ("SX", "churn", 200, 1.0, 200.0, 1000.0, True, None, "ana", datetime(2024, 2, 1)),
            ("SX", "churn", 100, 1.0, 100.0, 1000.0, True, 0.004, "ben",
             datetime(2024, 2, 2, 9, 30)),
        ]
        got = search_costs(con)
        assert got["SX"] == pytest.approx((100.0, 110.0, 10.0))
        assert got["SY"][0] is None and got["SY"][1] == pytest.approx(7.0) \
            and got["SY"][2] is None
        check = searches_within_estimate(con, MARCH)
        assert not check.passed
        assert check.metadata["without_estimate"].value == "SY"
        assert check.metadata["over_estimate"].value == ""
        assert check.severity.value == "WARN"

    approve(cfg, "SY", 10, datetime(2024, 3, 3, tzinfo=UTC))          # 10 ≥ 7: within
    with duckdb.connect(cfg.warehouse_path) as con:
        search_costs(con)
        assert searches_within_estimate(con, MARCH).passed          # SX: 110 = 1.1 × 100

    approve(cfg, "SX", 99, datetime(2024, 3, 4, tzinfo=UTC))          # 110 > 1.1 × 99
    with duckdb.connect(cfg.warehouse_path) as con:
        assert search_costs(con)["SX"] == pytest.approx((99.0, 110.0, 11.0))
        check = searches_within_estimate(con, MARCH)
        assert not check.passed
        assert check.metadata["over_estimate"].value == "SX"
        assert check.metadata["without_estimate"].value == ""


def test_over_budget_is_recorded_as_not_approved(cfg):
    row = approve(cfg, "SZ", 3, datetime(2024, 3, 1, tzinfo=UTC), price=500.0)   # 1,500
    assert row["estimated_cost"] == 1500.0 and row["approved"] is False
    with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
        assert con.execute("SELECT approved FROM search_approvals").fetchall() == [(False,)]


def test_recording_the_same_instant_again_replaces_it(cfg):
    at = datetime(2024, 3, 1, tzinfo=UTC)
    approve(cfg, "SX", 5, at)
    approve(cfg, "SX", 6, at)
    with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
        assert con.execute("SELECT estimated_cost FROM search_approvals").fetchall() == [(6.0,)]


def test_an_approval_waits_for_the_warehouse_writer_lock(cfg, tmp_path):
    lock = tmp_path / "wh" / "warehouse.duckdb.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)           # a materialization holds the warehouse
        held.write("pid 1 (a materialization)")
        held.flush()
        est = estimate_search(cfg, "churn", 1, 1, gpus=1, hours=1, price=1.0)
        with pytest.raises(EstimateError, match="being written by another process"):
            record_approval(cfg, est, "SX", lock_timeout_seconds=0.3)
    assert not (tmp_path / "wh" / "warehouse.duckdb").exists()    # nothing written
    record_approval(cfg, est, "SX")                                  # free again: recorded


def test_a_search_id_is_required(cfg):
    est = estimate_search(cfg, "churn", 1, 1, gpus=1, hours=1, price=1.0)
    with pytest.raises(EstimateError, match="--search-id"):
        record_approval(cfg, est, "  ")


@pytest.mark.parametrize(("given", "error"), [
    ({"search_id": "s1\nforged"}, r"^--search-id holds a control character \(a line break, "
                                   r"an escape …\): name the search as the tracker does$"),
    ({"approved_by": "  "}, r"^--approved-by names who approved: got no name$"),
    ({"expected_improvement": float("inf")}, r"^--expected-improvement must be a finite "
                                             r"number: the number given is too large for one$"),
])
def test_an_approval_refuses_what_it_would_record_wrong(cfg, given, error):
    """A search id holding a line break was recorded and printed as two lines; a blank
    `--approved-by` was recorded as the empty text; `--expected-improvement 1e400` said
    "got inf", a number nobody wrote."""
    est = estimate_search(cfg, "churn", 1, 1, gpus=1, hours=1, price=1.0)
    with pytest.raises(EstimateError, match=error):
        record_approval(cfg, est, **{"search_id": "s1", **given})
    if Path(cfg.warehouse_path).exists():   # nothing recorded
        with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
            tables = {t for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables").fetchall()}
            assert "search_approvals" not in tables or con.execute(
                "SELECT count(*) FROM search_approvals").fetchone() == (0,)


def test_a_search_billed_in_two_currencies_has_no_cost_to_date(cfg):
    """SX cost EUR 60 in February and USD 50 in March: the sum (110) was its "cost to date",
    shown under "$" and held against its estimate. Amounts of two currencies do not add up:
    no cost to date, no overrun; a search billed in one currency keeps both."""
    approve(cfg, "SX", 100, datetime(2024, 2, 2, tzinfo=UTC))
    with duckdb.connect(cfg.warehouse_path) as con:
        ensure_schema(con)
        con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                    "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
        months(con)
        con.execute("INSERT INTO billing_months VALUES ('2024-02-01', 1, 1, 1, 1, 'EUR'), "
                    "('2024-03-01', 1, 1, 1, 1, 'USD')")
        got = search_costs(con)
        insert_lines(con, MARCH, [{  # March's bill, in USD
            "ChargePeriodStart": d(3), "ChargePeriodEnd": d(3, hour=1), "ChargeCategory": "Usage",
            "EffectiveCost": 57.0, "x_CostComponent": "gpu", "x_SourceLine": "l0",
            "BillingCurrency": "USD"}])
        page = render_html(collect(con, MARCH), "test.duckdb")  # the page says "–", no sum
    assert got["SX"] == (100.0, None, None)
    assert got["SY"][1] == pytest.approx(7.0)  # March alone: USD
    assert 'data-search="SX"' in page and 'data-cost-to-date=""' in page


def search_row(page: str, search_id: str) -> str:
    (row,) = re.findall(rf'<tr data-search="{search_id}">.*?</tr>', page, re.S)
    return row


def report_page(cfg) -> tuple[dict, object, str]:
    """search_costs, the check and the page of March (`months`), with a bill for the page."""
    with duckdb.connect(cfg.warehouse_path) as con:
        ensure_schema(con)
        con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                    "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
        months(con)
        got = search_costs(con)
        check = searches_within_estimate(con, MARCH)
        insert_lines(con, MARCH, [{
            "ChargePeriodStart": d(3), "ChargePeriodEnd": d(3, hour=1), "ChargeCategory": "Usage",
            "EffectiveCost": 57.0, "x_CostComponent": "gpu", "x_SourceLine": "l0"}])
        return got, check, render_html(collect(con, MARCH), "test.duckdb")


def test_the_report_flags_a_cost_over_a_zero_estimate(cfg):
    """SX recorded at $0 (priced at $0) has cost $110: the check fails (110 > 1.1 × 0), but
    the page showed "$0.00 … $110.00" unflagged: a zero estimate was read as none. No share
    of $0 can be computed: the flag says "over a $0.00 estimate"."""
    approve(cfg, "SX", 1, datetime(2024, 2, 2, tzinfo=UTC), price=0.0)
    approve(cfg, "SY", 10, datetime(2024, 3, 3, tzinfo=UTC))           # 7 of 10: within
    got, check, page = report_page(cfg)
    assert got["SX"] == pytest.approx((0.0, 110.0, 110.0))
    assert check.metadata["over_estimate"].value == "SX"
    sx, sy = search_row(page, "SX"), search_row(page, "SY")
    assert 'data-estimate="0.00"' in sx
    assert '$110.00 <span class="fail-text">over a $0.00 estimate</span>' in sx
    assert "$7.00 (−30%)" in sy and "fail-text" not in sy


def test_the_report_marks_an_estimate_over_budget_as_not_approved(cfg):
    """SY recorded at 3 × $500 = $1,500, over the $1,000 budget: `approved = false`. It has
    cost $7, within the recorded estimate, so the check passes it (a recording counts,
    approved or not); the page showed the $1,500.00 as an approved estimate."""
    approve(cfg, "SX", 100, datetime(2024, 2, 2, tzinfo=UTC))            # 110 of 100: within
    assert approve(cfg, "SY", 3, datetime(2024, 3, 3, tzinfo=UTC),
                   price=500.0)["approved"] is False
    got, check, page = report_page(cfg)
    assert got["SY"] == pytest.approx((1500.0, 7.0, -1493.0))
    assert check.passed
    sx, sy = search_row(page, "SX"), search_row(page, "SY")
    assert 'data-estimate="1500.00" data-approved="false"' in sy
    assert '$1,500.00 <span class="fail-text">not approved</span>' in sy
    assert "$7.00 (−99.5%)" in sy                 # within it: the share, unflagged
    assert 'data-estimate="100.00" data-approved="true"' in sx
    assert "$100.00</td>" in sx and "not approved" not in sx


def test_the_page_reads_an_overrun_and_a_share_of_the_estimate_without_rounding_to_100(cfg):
    """The cost to date against the estimate: SY's $7.00 of $1,750.00 is −99.6 %
    (7 ÷ 1,750 − 1) and read "(-100%)", as if nothing was spent; SX's $110.00 against $54.90
    is +100.4 % over (55.1 ÷ 54.9) and read "+100%". Each keeps one more decimal when whole
    percents would read ±100 % (or 0 %), and carries the page's minus sign "−"."""
    approve(cfg, "SX", 1, datetime(2024, 2, 2, tzinfo=UTC), price=54.9)
    approve(cfg, "SY", 1, datetime(2024, 3, 3, tzinfo=UTC), price=1750.0)   # over budget
    got, _, page = report_page(cfg)
    assert got["SX"] == pytest.approx((54.9, 110.0, 55.1))
    assert got["SY"] == pytest.approx((1750.0, 7.0, -1743.0))
    sx, sy = search_row(page, "SX"), search_row(page, "SY")
    assert '$110.00 <span class="fail-text">+100.4%</span>' in sx
    assert "$7.00 (−99.6%)</td>" in sy and "-" not in sy.split("$7.00")[1].split("</td>")[0]


def one_trial_costing(con, cost: float) -> None:
    """March: search SX's one trial x1, costing `cost`."""
    ensure_schema(con)
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    insert_runs(con, MARCH, [
        {"run_id": "x1", "status": "FINISHED", "start_time": d(3), "end_time": d(4),
         "model": "churn", "purpose": "search", "search_id": "SX", "config_id": "c1"}])
    put_costs(con, [(MARCH, "x1", cost)])


@pytest.mark.parametrize(("estimate", "tolerance", "cost"), [
    # 1.1 × 1.13 reads 1.2429999999999999 in doubles, and 1.243 was over
    (1.13, 1.1, 1.243),
    # 1.15 × 11,300,000 reads 12994999.999999998, 2e-9 short, which 10 decimal places still
    # told apart: the cost was over
    (11_300_000.0, 1.15, 12_995_000.0)])
def test_a_cost_exactly_at_the_tolerance_is_within_the_estimate(cfg, estimate, tolerance, cost):
    """SX has cost exactly `tolerance` × its estimate (to the tenth of a cent; at millions
    too): at the tolerance, not over it. A cent more is over."""
    approve(cfg, "SX", 1, datetime(2024, 3, 1, tzinfo=UTC), price=estimate)
    with duckdb.connect(cfg.warehouse_path) as con:
        one_trial_costing(con, cost)
        assert search_costs(con)["SX"] == pytest.approx((estimate, cost, cost - estimate))
        check = searches_within_estimate(con, MARCH, tolerance)
        assert check.passed
        assert check.metadata["over_estimate"].value == ""

        put_costs(con, [(MARCH, "x1", 0.01)])                      # a cent more
        search_costs(con)
        check = searches_within_estimate(con, MARCH, tolerance)
        assert not check.passed
        assert check.metadata["over_estimate"].value == "SX"


def test_the_page_flags_a_search_over_its_estimate_as_the_check_does(cfg):
    """SX has cost exactly 1.1 × its $1.13 estimate ($1.243; 1.1 × 1.13 reads
    1.2429999999999999 in doubles): the check passes it, and the page flagged it in red as an
    overrun all the same, comparing the two in plain doubles. The page holds the cost to date
    against the estimate by the check's own rule; a cent more is flagged by both."""
    approve(cfg, "SX", 1, datetime(2024, 3, 1, tzinfo=UTC), price=1.13)
    for cost, over in ((1.243, False), (1.253, True)):
        with duckdb.connect(cfg.warehouse_path) as con:
            one_trial_costing(con, cost)
            search_costs(con)
            assert searches_within_estimate(con, MARCH).passed is not over
            insert_lines(con, MARCH, [{
                "ChargePeriodStart": d(3), "ChargePeriodEnd": d(3, hour=1),
                "ChargeCategory": "Usage", "EffectiveCost": cost, "x_CostComponent": "gpu",
                "x_SourceLine": "l0"}])
            row = search_row(render_html(collect(con, MARCH), "test.duckdb"), "SX")
        assert ('<span class="fail-text">+' in row) is over, row
        assert ("(+10%)" in row) is not over, row


JANUARY = date(2024, 1, 1)


def billed_in(con, currency: str, month: date = JANUARY) -> None:
    """A bill line of `month` in `currency` (the estimate's currency: the bill's latest)."""
    insert_lines(con, month, [{
        "ChargePeriodStart": datetime(month.year, month.month, 2),
        "ChargePeriodEnd": datetime(month.year, month.month, 2, 1), "ChargeCategory": "Usage",
        "EffectiveCost": 1.0, "x_CostComponent": "gpu", "x_SourceLine": f"bill-{month}",
        "BillingCurrency": currency}])


def approved_in_euros_billed_in_yen(cfg) -> dict:
    """SX approved at EUR 100 on a euro bill (January), then `months`' spend billed in yen in
    February and March: the approval's row, then the warehouse ready for `search_costs`."""
    Path(cfg.warehouse_path).parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(cfg.warehouse_path) as con:
        billed_in(con, "EUR")
    row = approve(cfg, "SX", 100, datetime(2024, 2, 2, tzinfo=UTC))
    with duckdb.connect(cfg.warehouse_path) as con:
        ensure_schema(con)
        con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                    "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
        months(con)
        con.execute("INSERT INTO billing_months VALUES ('2024-01-01', 1, 1, 1, 1, 'EUR'), "
                    "('2024-02-01', 1, 1, 1, 1, 'JPY'), ('2024-03-01', 1, 1, 1, 1, 'JPY')")
    return row


def test_an_estimate_in_another_currency_is_not_held_against_the_spend(cfg):
    """SX approved at EUR 100 (the bill was in euros), then billed JPY 60 in February and JPY
    50 in March: search_costs held JPY 110 against the EUR 100 (overrun 10; in the reported
    case JPY 24,691 against EUR 247, "+9900 %" and the check failing it). The approval records
    its currency; an estimate in another currency than the spend is no estimate of it:
    estimated_cost and overrun are NULL and the check neither fails it as over nor as
    unapproved, naming it apart. Approved again in yen (JPY 99), it is compared: 110 > 1.1 ×
    99, over."""
    assert approved_in_euros_billed_in_yen(cfg)["currency"] == "EUR"
    with duckdb.connect(cfg.warehouse_path) as con:
        assert con.execute("SELECT currency FROM search_approvals").fetchall() == [("EUR",)]
        got = search_costs(con)
        assert got["SX"] == (None, pytest.approx(110.0), None)
        check = searches_within_estimate(con, MARCH)
        assert not check.passed                                      # SY: no estimate
        assert check.metadata["without_estimate"].value == "SY"
        assert check.metadata["over_estimate"].value == ""
        assert check.metadata["estimate_in_other_currency"].value == "SX (EUR)"
        assert [f["search_id"] for f in check.metadata["failing"].value] == ["SY"]

    approve(cfg, "SY", 10, datetime(2024, 3, 3, tzinfo=UTC))           # in yen: 7 of 10
    approve(cfg, "SX", 99, datetime(2024, 3, 4, tzinfo=UTC))           # in yen: 110 > 108.9
    with duckdb.connect(cfg.warehouse_path) as con:
        assert con.execute("SELECT search_id, currency FROM search_approvals "
                           "ORDER BY recorded_at").fetchall() == [
            ("SX", "EUR"), ("SY", "JPY"), ("SX", "JPY")]
        assert search_costs(con)["SX"] == pytest.approx((99.0, 110.0, 11.0))
        check = searches_within_estimate(con, MARCH)
        assert check.metadata["over_estimate"].value == "SX"
        assert check.metadata["without_estimate"].value == ""
        assert check.metadata["estimate_in_other_currency"].value == ""


def test_an_approval_recorded_without_a_currency_is_compared_as_before(cfg, tmp_path):
    """A warehouse whose search_approvals predates the currency column: the column is added,
    its recordings keep no currency, and such a recording is held against the spend as it
    was (SX: 110 against 100, within 1.1 × 100), whatever the spend's currency."""
    warehouse = Path(cfg.warehouse_path)
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(warehouse)) as con:  # the table as it was before the column
        con.execute("CREATE TABLE search_approvals (month DATE NOT NULL, search_id VARCHAR "
                    "NOT NULL, model VARCHAR NOT NULL, configs BIGINT NOT NULL, seeds BIGINT "
                    "NOT NULL, reruns BIGINT NOT NULL, runs BIGINT NOT NULL, per_run_cost "
                    "DOUBLE NOT NULL, estimated_cost DOUBLE NOT NULL, approval_budget DOUBLE "
                    "NOT NULL, approved BOOLEAN NOT NULL, expected_improvement DOUBLE, "
                    "approved_by VARCHAR, recorded_at TIMESTAMP NOT NULL)")
        con.execute("INSERT INTO search_approvals VALUES ('2024-02-01', 'SX', 'churn', 100, 1, "
                    "1, 100, 1.0, 100.0, 1000.0, true, NULL, NULL, '2024-02-02')")
    with duckdb.connect(str(warehouse)) as con:
        ensure_schema(con)
        con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                    "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
        months(con)
        con.execute("INSERT INTO billing_months VALUES ('2024-02-01', 1, 1, 1, 1, 'JPY'), "
                    "('2024-03-01', 1, 1, 1, 1, 'JPY')")
        assert con.execute("SELECT search_id, currency FROM search_approvals").fetchall() == [
            ("SX", None)]
        assert search_costs(con)["SX"] == pytest.approx((100.0, 110.0, 10.0))
        check = searches_within_estimate(con, MARCH)
        assert check.metadata["over_estimate"].value == ""
        assert check.metadata["estimate_in_other_currency"].value == ""


def test_the_page_shows_an_estimate_in_another_currency_apart(cfg):
    """SX approved at EUR 100 (a euro bill), then billed in yen: search_costs holds no estimate
    for it, and the page read "not approved" in red, as for a search never estimated. It shows
    the recorded EUR 100.00 in its own currency, said not to be compared with the yen spend,
    unflagged; SY, never estimated, reads "no estimate"."""
    approved_in_euros_billed_in_yen(cfg)
    with duckdb.connect(cfg.warehouse_path) as con:
        insert_lines(con, MARCH, [{
            "ChargePeriodStart": d(3), "ChargePeriodEnd": d(3, hour=1), "ChargeCategory": "Usage",
            "EffectiveCost": 57.0, "x_CostComponent": "gpu", "x_SourceLine": "l0",
            "BillingCurrency": "JPY"}])
        assert search_costs(con)["SX"] == (None, pytest.approx(110.0), None)
        page = render_html(collect(con, MARCH), "test.duckdb")
    sx, sy = search_row(page, "SX"), search_row(page, "SY")
    assert ('EUR 100.00 <span class="note" data-estimate-currency="EUR">in EUR: not compared '
            'with spend in JPY</span>') in sx
    assert "fail-text" not in sx and 'data-estimate=""' in sx
    assert '<span class="fail-text">no estimate</span>' in sy


def test_a_read_only_page_shows_the_latest_estimate_in_another_currency(cfg):
    """The page as `cost-pipeline report` reads it: through a read-only connection, which has
    none of the pipeline's macros. SX recorded at EUR 200 (1 Feb), then at EUR 100 (2 Feb), on
    a euro bill, then billed in yen: the latest recording (EUR 100, not 200) is shown apart in
    euros, as on the pipeline's own connection."""
    Path(cfg.warehouse_path).parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(cfg.warehouse_path) as con:
        billed_in(con, "EUR")
    earlier = approve(cfg, "SX", 200, datetime(2024, 2, 1, tzinfo=UTC))
    latest = approve(cfg, "SX", 100, datetime(2024, 2, 2, tzinfo=UTC))
    assert [(r["estimated_cost"], r["currency"]) for r in (earlier, latest)] == [
        (200.0, "EUR"), (100.0, "EUR")]
    with duckdb.connect(cfg.warehouse_path) as con:
        ensure_schema(con)
        con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                    "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
        months(con)  # JPY 60 in February, JPY 50 in March
        con.execute("INSERT INTO billing_months VALUES ('2024-01-01', 1, 1, 1, 1, 'EUR'), "
                    "('2024-02-01', 1, 1, 1, 1, 'JPY'), ('2024-03-01', 1, 1, 1, 1, 'JPY')")
        insert_lines(con, MARCH, [{
            "ChargePeriodStart": d(3), "ChargePeriodEnd": d(3, hour=1), "ChargeCategory": "Usage",
            "EffectiveCost": 57.0, "x_CostComponent": "gpu", "x_SourceLine": "l0",
            "BillingCurrency": "JPY"}])
        assert search_costs(con)["SX"] == (None, pytest.approx(110.0), None)
    with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
        page = render_html(collect(con, MARCH), "test.duckdb")
    sx = search_row(page, "SX")
    assert ('EUR 100.00 <span class="note" data-estimate-currency="EUR">in EUR: not compared '
            'with spend in JPY</span>') in sx
    assert "EUR 200.00" not in sx


def test_a_cost_a_tenth_of_a_cent_over_the_tolerance_keeps_its_digits(cfg):
    """SX has cost $1,100.004 against a $1,000 estimate: over 1.1 × 1,000 = 1,100 by 0.4 of a
    cent, so the check fails it, and its metadata read a cost of 1100.0 and an overrun of
    100.0, the limit itself. The failing search keeps the digits that tell the cost from the
    limit (1100.004; the overrun 100.004 against the 100 allowed); the estimate is a cent."""
    approve(cfg, "SX", 1, datetime(2024, 3, 1, tzinfo=UTC), price=1000.0)
    with duckdb.connect(cfg.warehouse_path) as con:
        one_trial_costing(con, 1100.004)
        assert search_costs(con)["SX"] == pytest.approx((1000.0, 1100.004, 100.004))
        check = searches_within_estimate(con, MARCH)
    assert not check.passed and check.metadata["tolerance"].value == 1.1
    assert check.metadata["failing"].value == [
        {"search_id": "SX", "model": "churn", "reason": "over_estimate",
         "estimated_cost": 1000.0, "cumulative_cost": 1100.004, "overrun": 100.004}]


def test_a_page_flags_a_search_over_its_estimate_apart_from_the_allowance(cfg):
    """The month's page flagged SX in red with "+10%", the allowance itself, for $1,100.004
    against $1,000 (10.0004% over): the overrun in percent keeps the digits that tell it from
    the 10% allowed, as it does from 0% and 100%."""
    approve(cfg, "SX", 1, datetime(2024, 3, 1, tzinfo=UTC), price=1000.0)
    with duckdb.connect(cfg.warehouse_path) as con:
        one_trial_costing(con, 1100.004)
        search_costs(con)
        insert_lines(con, MARCH, [{
            "ChargePeriodStart": d(3), "ChargePeriodEnd": d(3, hour=1), "ChargeCategory": "Usage",
            "EffectiveCost": 1100.004, "x_CostComponent": "gpu", "x_SourceLine": "l0"}])
        page = render_html(collect(con, MARCH), "test.duckdb")
    assert '$1,100.00 <span class="fail-text">+10.0004%</span>' in search_row(page, "SX")
