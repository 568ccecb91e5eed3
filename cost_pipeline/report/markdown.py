"""The report's key tables as markdown, for the Dagster UI's asset metadata."""

from __future__ import annotations

from cost_pipeline.report.data import LEVERS_OVERLAP, PURPOSE_LABELS
from cost_pipeline.report.money import money, smallest, symbol_of
from cost_pipeline.text import AS_TEXT

# what markdown reads as markup: emphasis, code, links and images, headings, lists, raw
# HTML, a cell's end, strikethrough; backslash-escaped, each shows as the character it is
_MARKUP = str.maketrans({c: f"\\{c}" for c in "\\`*_[]()#+!<>|~"})


def _text(value) -> str:
    """A cell as text: a resource id, an evidence sentence or a currency code from the bill
    shows as it reads (`[click me](https://…)` as those characters, no link, no image); a line
    break (it ended the table row) a blank, a right-to-left override dropped (`AS_TEXT`)."""
    return str(value).translate(AS_TEXT).translate(_MARKUP)


def _money(value: float, symbol: str) -> str:
    """A cell, a total or a lever's figure: `–` when it reads zero in the currency (to its
    smallest unit: four fils are KWD 0.004, three tenths of a yen nothing), as on the page."""
    return money(value, symbol) if value is not None and smallest(value, symbol) else "–"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    """`header` and `rows` (each cell's text escaped by `_text` already) as a table."""
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def bill_markdown(bill: dict | None, currency: str | None) -> str:
    """Component × purpose class, with totals and GPU-hours (the bill as lines)."""
    if not bill:
        return "_not computed: no attribution table_"
    symbol = symbol_of(currency)
    purposes = [p for p in bill["purposes"] if bill["column_total"][p] or bill["gpu_hours"][p]]
    rows = [[_text(k), *(_text(_money(bill["cost"].get((k, p), 0.0), symbol))
                         for p in purposes),
             _text(_money(bill["row_total"][k], symbol))]
            for k in bill["components"] if bill["row_total"][k]]
    rows.append(["**total**",
                 *(f"**{_text(_money(bill['column_total'][p], symbol))}**" for p in purposes),
                 f"**{_text(_money(bill['total'], symbol))}**"])
    rows.append(["GPU-hours", *(f"{bill['gpu_hours'][p]:,.1f}" for p in purposes),
                 f"{bill['gpu_hours_total']:,.1f}"])
    header = ["component", *(_text(PURPOSE_LABELS.get(p, p)) for p in purposes), "total"]
    return _table(header, rows, set(range(1, len(header))))


def levers_markdown(levers: list[dict] | None, currency: str | None) -> str:
    """The ranked levers, then `LEVERS_OVERLAP`: each is priced on its own."""
    if levers is None:
        return "_not computed: no cost_levers table_"
    if not levers:
        return "_not computed for this month_"
    rows = [[_text(r["rank"]), _text(r["lever"]), _text(_money(r["dollars"], symbol_of(currency))),
             _text(r["evidence"])]
            for r in levers]
    # a paragraph after the table: the figures overlap, their sum is no saving
    return (_table(["#", "lever", "this month", "evidence"], rows, {0, 2})
            + f"\n\n{LEVERS_OVERLAP}")
