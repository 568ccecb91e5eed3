"""A lever renamed to SPEC §12's words is one lever over a period whose earlier months were
written under its old name."""

from __future__ import annotations

from datetime import date

import duckdb

from tests.support.warehouse_rows import insert


def test_a_month_written_under_the_levers_old_name_sums_with_the_new_one():
    from cost_pipeline.report.strip import read_rows

    jan, feb = date(2026, 1, 1), date(2026, 2, 1)
    with duckdb.connect() as con:
        for month, name, dollars in ((jan, "co-locate compute with data", 5.0),
                                     (feb, "co-locate compute & data", 7.0)):
            insert(con, "cost_levers", month, [{"rank": 1, "lever": name, "dollars": dollars,
                                                "what_it_costs_to_pull": "-", "evidence": "-"}],
                   {})
        got = read_rows(con, "period_levers", jan, feb)
    assert [(r["lever"], float(r["dollars"])) for r in got] == [
        ("co-locate compute & data", 12.0)]
