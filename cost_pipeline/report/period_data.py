"""A run of months read from the warehouse: the period report's figures (SPEC §12). The
queries are `assets/queries/period_*.sql`; money is summed there as DECIMAL, so every total is
exact to the cent; rounding happens on the page.

A section whose table the warehouse lacks is None; a month of the period without billing
lines is listed in `missing` (the caller refuses the period: a gap in a trend is a lie)."""

from __future__ import annotations

from datetime import date
from typing import Any

import duckdb

from cost_pipeline.report.bill_lines import bill_lines
from cost_pipeline.report.money import minor_digits, smallest, symbol_of
from cost_pipeline.report.strip import (
    ZERO,
    by_purpose,
    months_between,
    read_rows,
    searches_read_moved,
    table_names,
)
from cost_pipeline.warehouse import materialized_empty

MOVES = 3  # the (purpose class × component) cells that moved most, first month → last


def moves(cells: list[dict], first: date, last: date,
          currency: str | None = None) -> list[dict[str, Any]]:
    """The (purpose class × component) cells whose cost changed most from `first` to `last`,
    by the size of the change (ties by purpose class, component); a change that rounds to
    zero in `currency` (less than half its smallest unit: a few sen, float noise) is none.
    A cell the month lacks has `first` or `last` None: it read `$0.00`, as if billed nothing."""
    symbol = symbol_of(currency)
    if first == last:
        return []
    before = {(c["purpose_class"], c["component"]): c["cost"] for c in cells
              if c["month"] == first}
    after = {(c["purpose_class"], c["component"]): c["cost"] for c in cells
             if c["month"] == last}
    # a cell absent in a month (a search begun after it) is None there, not a cost of zero
    changes = [{"purpose_class": p, "component": k, "first": before.get((p, k)),
                "last": after.get((p, k)),
                "change": after.get((p, k), ZERO) - before.get((p, k), ZERO)}
               for p, k in sorted(before.keys() | after.keys())]
    changes.sort(key=lambda c: (-abs(c["change"]), c["purpose_class"], c["component"]))
    return [c for c in changes if smallest(c["change"], symbol)][:MOVES]


def collect_period(con: duckdb.DuckDBPyConnection, first: date, last: date) -> dict[str, Any]:
    """Every section of the period report for the months `first` … `last`."""
    have = table_names(con)
    months = months_between(first, last)
    totals = {r["month"]: r for r in read_rows(con, "period_month_totals", first, last)} \
        if "billing_facts" in have else {}
    currencies = sorted({r["currency"] for r in totals.values()})
    mixed = [f"{m:%Y-%m}" for m, r in totals.items() if r["currencies"] > 1]

    def section(table: str, name: str):
        return read_rows(con, name, first, last) if table in have else None

    cells = section("attribution", "period_purpose_component")
    # ranked at the currency's smallest unit (`$digits`): JPY 100.4 and 100.3 read alike
    levers = read_rows(con, "period_levers", first, last, minor_digits(
        symbol_of(currencies[0] if currencies else None))) if "cost_levers" in have else None
    return {
        "first": first,
        "last": last,
        "months": months,
        "missing": [m for m in months if m not in totals],
        # of those, the months materialized with no billing line (nothing billed yet)
        "empty": [m for m in months if m not in totals and materialized_empty(con, m)],
        "currencies": currencies,
        "mixed_currency_months": mixed,
        "currency": currencies[0] if currencies else "USD",
        "totals": totals,
        # the end of the period's latest charge: what dates the page
        "charges_to": con.execute("SELECT max(ChargePeriodEnd) FROM billing_facts WHERE month "
                                  "BETWEEN ? AND ?", [first, last]).fetchone()[0],
        "total": sum((r["effective_cost"] for r in totals.values()), ZERO),
        "billed_total": sum((r["billed_cost"] for r in totals.values()), ZERO),
        "lines": sum(r["lines"] for r in totals.values()),
        "by_purpose": by_purpose(cells) if cells is not None else None,
        "moves": moves(cells, first, last, currencies[0] if currencies else None)
        if cells is not None else None,
        "bill_lines": bill_lines(con, first, last) if "attribution" in have else None,
        "models": section("cost_per_model_monthly", "period_models"),
        "searches": section("search_trend", "period_searches"),
        # a month up to the last changed since the last's searches were computed
        "searches_moved": searches_read_moved(con, last, have),
        "storage": section("storage_by_run_status", "period_storage"),
        "shares": section("reconciliation", "period_untracked_share"),
        "levers": levers,
        "tables": have,
    }
