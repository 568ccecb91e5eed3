"""The bill as lines: a quarter's (or a month's) cost read back from the warehouse as the
decisions it is made of — production vs search, preprocessing, checkpoints, egress,
untracked — plus which month failed reconciliation and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb

from cost_pipeline.report.data import top_untracked
from cost_pipeline.report.money import money, symbol_of
from cost_pipeline.warehouse import query, sql_text


@dataclass
class BillLine:
    line: str
    gpu_hours: float
    cpu_hours: float
    runs: int
    cost: float


def bill_lines(con: duckdb.DuckDBPyConnection, first: date, last: date) -> list[BillLine]:
    rows = query(con, sql_text("bill_as_lines"), {"first": first, "last": last}).fetchall()
    return [BillLine(*row) for row in rows]


def bill_currency(con: duckdb.DuckDBPyConnection, first: date, last: date) -> str:
    """The months' BillingCurrency (one per month, SPEC §5); months in different currencies
    cannot be summed into one bill."""
    currencies = [c for (c,) in con.execute(
        "SELECT DISTINCT coalesce(BillingCurrency, 'USD') FROM billing_facts "
        "WHERE month BETWEEN ? AND ? ORDER BY 1", [first, last]).fetchall()]
    if len(currencies) > 1:
        raise ValueError(f"the months {first:%Y-%m} … {last:%Y-%m} are billed in "
                         f"{', '.join(currencies)}: show each currency's months apart")
    return currencies[0] if currencies else "USD"


def reconciliation_notes(con: duckdb.DuckDBPyConnection, first: date, last: date) -> list[str]:
    notes, symbol = [], symbol_of(bill_currency(con, first, last))
    rows = con.execute(
        "SELECT month, status, untracked_share, threshold, billed_gpu_hours, untracked_gpu_hours "
        "FROM reconciliation WHERE month BETWEEN ? AND ? ORDER BY month", [first, last]).fetchall()
    for month, status, share, threshold, billed, untracked in rows:
        text = (f"{month:%Y-%m}: {status.upper()} — {share:.1%} of {billed:,.0f} billed GPU-hours "
                f"untracked (threshold {threshold:.0%})")
        if status == "fail":
            # the resource the failed check's alert names first
            for top in top_untracked(con, month, "gpu", 1):
                text += (f"; largest untracked: {top['resource_id']} ({top['instance_type']}) "
                         f"{top['gpu_hours'] or 0:,.0f} GPU-hours, {money(top['cost'], symbol)}, "
                         "claimed by no run")
            text += f"; {untracked:,.0f} GPU-hours in all"
        notes.append(text)
    return notes


def render(lines: list[BillLine], notes: list[str], title: str, currency: str) -> str:
    total = sum(line.cost for line in lines)
    width = max([len(line.line) for line in lines] + [5])
    out = [title, f"{'line':<{width}}  {'GPU-hours':>10}  {'CPU-hours':>10}  {'runs':>5}  "
           f"{'cost (' + currency + ')':>14}  share"]
    for line in lines:
        share = line.cost / total if total else 0
        out.append(f"{line.line:<{width}}  {line.gpu_hours:>10,.1f}  {line.cpu_hours:>10,.1f}  "
                   f"{line.runs:>5}  {line.cost:>14,.2f}  {share:>5.1%}")
    out.append(f"{'total EffectiveCost':<{width}}  {'':>10}  {'':>10}  {'':>5}  {total:>14,.2f}")
    out.append("")
    out.append("Reconciliation (tracker vs bill):")
    out.extend(f"  {note}" for note in notes)
    return "\n".join(out)
