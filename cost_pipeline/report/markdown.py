"""The report's key tables as markdown, for the Dagster UI's asset metadata."""

from __future__ import annotations

from cost_pipeline.report.data import PURPOSE_LABELS
from cost_pipeline.report.money import money, smallest, symbol_of


def _money(value: float, symbol: str) -> str:
    """A cell: `–` when it reads zero in the currency (to its smallest unit: four fils are
    KWD 0.004, three tenths of a yen nothing)."""
    return money(value, symbol) if smallest(value, symbol) else "–"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def bill_markdown(bill: dict | None, currency: str | None) -> str:
    """Component × purpose class, with totals and GPU-hours (the bill as lines)."""
    if not bill:
        return "_not computed: no attribution table_"
    symbol = symbol_of(currency)
    purposes = [p for p in bill["purposes"] if bill["column_total"][p] or bill["gpu_hours"][p]]
    rows = [[k, *(_money(bill["cost"].get((k, p), 0.0), symbol) for p in purposes),
             money(bill["row_total"][k], symbol)]
            for k in bill["components"] if bill["row_total"][k]]
    rows.append(["**total**",
                 *(f"**{money(bill['column_total'][p], symbol)}**" for p in purposes),
                 f"**{money(bill['total'], symbol)}**"])
    rows.append(["GPU-hours", *(f"{bill['gpu_hours'][p]:,.1f}" for p in purposes),
                 f"{bill['gpu_hours_total']:,.1f}"])
    header = ["component", *(PURPOSE_LABELS.get(p, p) for p in purposes), "total"]
    return _table(header, rows, set(range(1, len(header))))


def levers_markdown(levers: list[dict] | None, currency: str | None) -> str:
    if levers is None:
        return "_not computed: no cost_levers table_"
    if not levers:
        return "_not computed for this month_"
    rows = [[str(r["rank"]), r["lever"], money(r["dollars"], symbol_of(currency)),
             r["evidence"].replace("|", "/")]
            for r in levers]
    return _table(["#", "lever", "this month", "evidence"], rows, {0, 2})
