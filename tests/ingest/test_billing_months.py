"""`billing_months`: each month's whole bill, written with the month's lines, so that the
reports' 6-month strip and the period report read a row a month instead of every line again.
Its figures are those of summing the lines as DECIMAL; a month without a row (a warehouse
written before the table) is summed from its lines, and an older warehouse gets its rows."""

from __future__ import annotations

from datetime import date

import duckdb
import pytest

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.report.strip import read_rows
from cost_pipeline.warehouse import ensure_schema, upgrade
from tests.support.cur_rows import build, config, line, write_export

JULY = date(2026, 7, 1)
# amounts whose doubles do not add up exactly
COSTS = [0.1, 0.2, 1.005, 2.675, -0.5, 1000000.0000000001, 1000000.0000000001]
FROM_LINES = """
    SELECT month, count(*), sum(CAST(EffectiveCost AS DECIMAL(38, 10))),
           sum(CAST(BilledCost AS DECIMAL(38, 10))), count(DISTINCT BillingCurrency),
           min(BillingCurrency)
    FROM billing_facts GROUP BY month ORDER BY month"""
WRITTEN = """
    SELECT month, lines, effective_cost, billed_cost, currencies, currency
    FROM billing_months ORDER BY month"""


def _month(tmp_path, costs, name="w.duckdb"):
    con = duckdb.connect(str(tmp_path / name))
    export = write_export(tmp_path / "bill", {"part-0.parquet": [line(c) for c in costs]})
    cfg = config(tmp_path, export)
    build(con, cfg)
    return con, cfg


def _totals(con, first=JULY, last=JULY):
    return [tuple(r.values()) for r in read_rows(con, "period_month_totals", first, last)]


def test_a_months_row_is_written_with_its_lines_and_replaced_with_them(tmp_path):
    con, cfg = _month(tmp_path, COSTS)
    assert con.execute(WRITTEN).fetchall() == con.execute(FROM_LINES).fetchall()
    assert con.execute(WRITTEN).fetchall()[0][1] == len(COSTS)
    assert _totals(con) == con.execute(WRITTEN).fetchall()
    # the month delivered again, other lines: one row, the new lines'
    write_export(tmp_path / "bill", {"part-0.parquet": [line(c) for c in COSTS[:3]]})
    build(con, cfg)
    assert con.execute(WRITTEN).fetchall() == con.execute(FROM_LINES).fetchall()
    assert con.execute("SELECT count(*), max(lines) FROM billing_months").fetchone() == (1, 3)


def test_a_load_that_fails_keeps_the_months_row(tmp_path):
    con, cfg = _month(tmp_path, COSTS)
    before = con.execute(WRITTEN).fetchall()
    write_export(tmp_path / "bill", {"part-0.parquet": [line(1.0), line(float("nan"))]})
    with pytest.raises(SourceError):
        build(con, cfg)
    assert con.execute(WRITTEN).fetchall() == before


def test_the_reports_read_the_written_row_and_sum_a_month_without_one(tmp_path):
    con, _ = _month(tmp_path, COSTS)
    # a row a month is what they read: not the lines again
    con.execute("UPDATE billing_months SET effective_cost = 42")
    assert _totals(con)[0][2] == 42
    # a month without its row is summed from its lines
    con.execute("DELETE FROM billing_months")
    assert _totals(con) == con.execute(FROM_LINES).fetchall()


def test_an_older_warehouse_gets_a_row_for_every_month_it_holds(tmp_path):
    con, _ = _month(tmp_path, COSTS)
    con.execute("INSERT INTO billing_facts SELECT * REPLACE (DATE '2026-06-01' AS month) "
                "FROM billing_facts")  # a second month
    want = con.execute(FROM_LINES).fetchall()
    con.execute("DROP TABLE billing_months")  # as written before the table existed
    con.close()
    path = tmp_path / "w.duckdb"
    upgrade(path)  # what a read-only reader (the report) does first
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute(WRITTEN).fetchall() == want
        assert [r[0] for r in want] == [date(2026, 6, 1), JULY]
    with duckdb.connect(str(path)) as con:
        ensure_schema(con)  # a current warehouse: nothing added twice
        assert con.execute(WRITTEN).fetchall() == want
