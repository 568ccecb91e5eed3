"""The monthly report's strip: the 6 months ending with the month — each month's total and
its cost by purpose class, in that month's currency, and its untracked share — and the month
arithmetic and readers the period report shares with it (`assets/queries/period_*.sql`, money
summed as DECIMAL)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import duckdb

from cost_pipeline.months import next_month
from cost_pipeline.warehouse import materialized_empty, rows_of, sql_text, table_names

STRIP_MONTHS = 6  # the monthly report's strip: the 6 months ending with the month
NAMED = 10  # searches named in a summary's sentence; the others are counted
ZERO = Decimal(0)


def months_between(first: date, last: date) -> list[date]:
    months, month = [], first
    while month <= last:
        months.append(month)
        month = next_month(month)
    return months


def months_back(month: date, count: int) -> date:
    """The first of the `count` months ending with `month`."""
    index = month.year * 12 + month.month - 1 - (count - 1)
    return date(index // 12, index % 12 + 1, 1)


def read_rows(con: duckdb.DuckDBPyConnection, name: str, first: date,
              last: date, digits: int = 2) -> list[dict[str, Any]]:
    """The rows of `assets/queries/<name>.sql` over the months [first, last]; `digits`, the
    decimals of the months' currency, for a query that ranks money as the page shows it."""
    return rows_of(con, sql_text(name), {"first": first, "last": last, "digits": digits})


def by_purpose(cells: list[dict]) -> dict[date, dict[str, Decimal]]:
    """{month: {purpose class: cost}} from the purpose × component rows."""
    out: dict[date, dict[str, Decimal]] = {}
    for c in cells:
        month = out.setdefault(c["month"], {})
        month[c["purpose_class"]] = month.get(c["purpose_class"], ZERO) + c["cost"]
    return out


# the `decision_basis` row that keeps what a month's searches were computed from
SEARCHES_READ = "search_trend:read"


def searches_read(con: duckdb.DuckDBPyConnection, month: date) -> tuple[str | None, str]:
    """(the digest kept as the month's `search_trend:read` basis, None when none was; the
    digest `searches_read.sql` reads now): written by the month's search step
    (decisions.py `keep_searches_read`), compared by its reports."""
    kept = con.execute("SELECT inputs FROM decision_basis WHERE month = ? AND table_name = ?",
                       [month, SEARCHES_READ]).fetchall()
    now = rows_of(con, sql_text("searches_read"), {"last": month})[0]["digest"]
    return (kept[0][0] if kept else None), now


def searches_read_moved(con: duckdb.DuckDBPyConnection, last: date, have: set[str]) -> bool:
    """Whether a month up to `last` changed since `last`'s searches were computed from it
    (`searches_read`). False when none was kept (a month written before it)."""
    if not {"decision_basis", "input_tokens"} <= have:
        return False
    kept, now = searches_read(con, last)
    return kept is not None and kept != now


def stale_searches_note(searches: list[dict] | None, last: date,
                        moved: bool = False) -> str | None:
    """What to do when the searches' cost to date, as `last` computed it, is older than a
    month before it (restated and materialized again after it; `period_searches.sql`
    `stale`), or when a month up to it changed since in what no cost shows (`moved`: a run's
    metric restated), else None — said by the period report and by `last`'s own page."""
    stale = [s["search_id"] for s in searches or [] if s["stale"]]
    if not stale and moved and searches:
        return (f"Out of date: the searches' figures as {last:%Y-%m} computed them (cost to "
                "date, best, improvement, saturation) predate a change to a month up to it — "
                "its bill, runs or attribution materialized again after it. Materialize the "
                "months again, in order, then this report.")
    if not stale:
        return None
    named = ", ".join(stale[:NAMED]) + (f" and {len(stale) - NAMED:,} more" if
                                        len(stale) > NAMED else "")
    return (f"Out of date: the cost to date of {named}, as {last:%Y-%m} computed it, "
            "differs from the months' own figures: a month before it was materialized again "
            "after it, or the runs changed since some months were. Materialize the months "
            "again, in order, then this report.")


def six_months(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any]:
    """The monthly report's strip: the 6 months ending with `month` — each month's total,
    its cost by purpose class (both in the month's own currency, `currencies`) and its
    untracked share; months the warehouse does not hold are listed as absent, and those
    materialized with no billing line as `empty` (the strip marks them, it does not invent a
    zero)."""
    have = table_names(con)
    first = months_back(month, STRIP_MONTHS)
    month_rows = read_rows(con, "period_month_totals", first, month)
    totals = {r["month"]: r["effective_cost"] for r in month_rows}
    cells = (read_rows(con, "period_purpose_component", first, month)
             if "attribution" in have else [])
    shares = {r["month"]: r for r in read_rows(con, "period_untracked_share", first, month)} \
        if "reconciliation" in have else {}
    months = months_between(first, month)
    return {
        "months": months,
        "totals": totals,
        "empty": [m for m in months if m not in totals and materialized_empty(con, m)],
        # each month is billed in its own currency (SPEC §5): its figures are shown in it
        "currencies": {r["month"]: r["currency"] for r in month_rows},
        "by_purpose": by_purpose(cells),
        "shares": shares,
    }
