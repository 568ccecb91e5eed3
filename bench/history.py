"""A warehouse with history, for measuring what earlier months cost a month's run: copies every
table's rows of one month to the N months before it, its runs and searches renamed per month
(`<id>@<k>`), so that the decisions reading earlier months (search_costs, search_trend, the
report's 6-month strip, the period report) find that many months of that size.

    python bench/history.py WAREHOUSE --month 2026-07 --months 6
    cost-pipeline materialize --config … --month 2026-07 --force   # then time the run

The copies keep the month's timestamps: they are only for timing, not for their figures.
"""

from __future__ import annotations

import argparse
from datetime import date

import duckdb

# kept per month by their own rules, not copies of a month's rows
SKIPPED = ("materializations", "decision_basis", "billing_deliveries", "search_approvals")


def copy_back(path: str, month: date, months: int) -> list[tuple[date, int]]:
    """Copy `month`'s rows of every table to the `months` months before it; (month,
    attribution rows) per month after."""
    con = duckdb.connect(path)
    tables = [t for (t,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1"
    ).fetchall() if t not in SKIPPED]
    columns = {t: {c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ?", [t]).fetchall()}
        for t in tables}
    con.execute("BEGIN TRANSACTION")
    for k in range(1, months + 1):
        earlier = f"CAST(DATE '{month}' - INTERVAL {k} MONTH AS DATE)"
        for table in tables:
            if "month" not in columns[table]:
                continue
            renamed = [f"{earlier} AS month"] + [
                f"CASE WHEN {c} IS NOT NULL THEN {c} || '@{k}' END AS {c}"
                for c in ("run_id", "search_id") if c in columns[table]]
            con.execute(f"INSERT INTO {table} SELECT * REPLACE ({', '.join(renamed)}) "
                        f"FROM {table} WHERE month = ?", [month])
        # rows naming their run by key_hash(run_id) (macros.sql; inlined: this connection
        # has no macros): the renamed run's
        renamed_id = f"r.run_id || '@{k}'"
        con.execute(f"UPDATE attribution_rows AS a SET run_hash = "
                    f"hash({renamed_id}, reverse({renamed_id})) "
                    "FROM (SELECT DISTINCT run_id FROM tracker_runs WHERE month = ?) AS r "
                    f"WHERE a.month = {earlier} "
                    "AND a.run_hash = hash(r.run_id, reverse(r.run_id))", [month])
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    return con.execute("SELECT month, count(*) FROM attribution_rows GROUP BY 1 ORDER BY 1"
                       ).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("--month", default="2026-07", help="YYYY-MM (default 2026-07)")
    parser.add_argument("--months", type=int, default=6)
    args = parser.parse_args()
    for month, rows in copy_back(args.warehouse, date.fromisoformat(f"{args.month}-01"),
                                 args.months):
        print(f"{month:%Y-%m}: {rows:,} attribution rows")


if __name__ == "__main__":
    main()
