"""A run of months read from the warehouse: the period report's figures (SPEC §12) and the
6-month strip of the monthly report. The queries are `assets/queries/period_*.sql`; money is
summed there as DECIMAL, so every total is exact to the cent; rounding happens on the page.

A section whose table the warehouse lacks is None; a month of the period without billing
lines is listed in `missing` (the caller refuses the period: a gap in a trend is a lie)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import duckdb

from cost_pipeline.months import next_month
from cost_pipeline.report.bill_lines import bill_lines
from cost_pipeline.warehouse import query, sql_text

STRIP_MONTHS = 6  # the monthly report's strip: the 6 months ending with the month
MOVES = 3  # the (purpose class × component) cells that moved most, first month → last
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


def _rows(con: duckdb.DuckDBPyConnection, name: str, first: date,
          last: date) -> list[dict[str, Any]]:
    cursor = query(con, sql_text(name), {"first": first, "last": last})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall()}


def by_purpose(cells: list[dict]) -> dict[date, dict[str, Decimal]]:
    """{month: {purpose class: cost}} from the purpose × component rows."""
    out: dict[date, dict[str, Decimal]] = {}
    for c in cells:
        month = out.setdefault(c["month"], {})
        month[c["purpose_class"]] = month.get(c["purpose_class"], ZERO) + c["cost"]
    return out


def moves(cells: list[dict], first: date, last: date) -> list[dict[str, Any]]:
    """The (purpose class × component) cells whose cost changed most from `first` to `last`,
    by the size of the change (ties by purpose class, component)."""
    if first == last:
        return []
    before = {(c["purpose_class"], c["component"]): c["cost"] for c in cells
              if c["month"] == first}
    after = {(c["purpose_class"], c["component"]): c["cost"] for c in cells
             if c["month"] == last}
    changes = [{"purpose_class": p, "component": k, "first": before.get((p, k), ZERO),
                "last": after.get((p, k), ZERO),
                "change": after.get((p, k), ZERO) - before.get((p, k), ZERO)}
               for p, k in sorted(before.keys() | after.keys())]
    changes.sort(key=lambda c: (-abs(c["change"]), c["purpose_class"], c["component"]))
    return [c for c in changes if c["change"]][:MOVES]


def collect_period(con: duckdb.DuckDBPyConnection, first: date, last: date) -> dict[str, Any]:
    """Every section of the period report for the months `first` … `last`."""
    have = _tables(con)
    months = months_between(first, last)
    totals = {r["month"]: r for r in _rows(con, "period_month_totals", first, last)} \
        if "billing_facts" in have else {}
    currencies = sorted({r["currency"] for r in totals.values()})
    mixed = [f"{m:%Y-%m}" for m, r in totals.items() if r["currencies"] > 1]

    def section(table: str, name: str):
        return _rows(con, name, first, last) if table in have else None

    cells = section("attribution", "period_purpose_component")
    levers = section("cost_levers", "period_levers")
    return {
        "first": first,
        "last": last,
        "months": months,
        "missing": [m for m in months if m not in totals],
        "currencies": currencies,
        "mixed_currency_months": mixed,
        "currency": currencies[0] if currencies else "USD",
        "totals": totals,
        "total": sum((r["effective_cost"] for r in totals.values()), ZERO),
        "billed_total": sum((r["billed_cost"] for r in totals.values()), ZERO),
        "lines": sum(r["lines"] for r in totals.values()),
        "by_purpose": by_purpose(cells) if cells is not None else None,
        "moves": moves(cells, first, last) if cells is not None else None,
        "bill_lines": bill_lines(con, first, last) if "attribution" in have else None,
        "models": section("cost_per_model_monthly", "period_models"),
        "searches": section("search_trend", "period_searches"),
        "storage": section("storage_by_run_status", "period_storage"),
        "shares": section("reconciliation", "period_untracked_share"),
        "levers": levers,
        "tables": have,
    }


def six_months(con: duckdb.DuckDBPyConnection, month: date) -> dict[str, Any]:
    """The monthly report's strip: the 6 months ending with `month` — each month's total,
    its cost by purpose class and its untracked share; months the warehouse does not hold
    are listed as absent (the strip marks them, it does not invent a zero)."""
    have = _tables(con)
    first = months_back(month, STRIP_MONTHS)
    totals = {r["month"]: r["effective_cost"]
              for r in _rows(con, "period_month_totals", first, month)}
    cells = _rows(con, "period_purpose_component", first, month) if "attribution" in have else []
    shares = {r["month"]: r for r in _rows(con, "period_untracked_share", first, month)} \
        if "reconciliation" in have else {}
    return {
        "months": months_between(first, month),
        "totals": totals,
        "by_purpose": by_purpose(cells),
        "shares": shares,
    }
