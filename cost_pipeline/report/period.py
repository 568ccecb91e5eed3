"""The period report (SPEC §12): the months `first` … `last` of the warehouse as one
self-contained HTML page, the finance director's quarter — totals, what moved, the bill as
lines, the trends to watch and the levers summed (period_data.py → period_charts.py →
templates/period.html.j2)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from cost_pipeline.report.data import (
    LONG,
    PURPOSE_LABELS,
    PURPOSES,
    ReportError,
    head_and_rest,
    rest_of,
)
from cost_pipeline.report.money import money, signed, smallest, symbol_of
from cost_pipeline.report.period_charts import period_charts
from cost_pipeline.report.period_data import collect_period
from cost_pipeline.report.render import (
    _environment,
    biggest_lever,
    charges_to,
    percent,
    share_against,
    write_page,
)
from cost_pipeline.report.strip import NAMED, months_between, stale_searches_note

MAX_MONTHS = 36  # a page of month columns stays readable up to three years


def check_range(first: date, last: date, bounds: tuple[str, str] = ("--from", "--to")
                ) -> None:
    """Refuse a period ending before it starts, naming the `bounds` it was given by (the
    command's flags, the job's fields), or longer than MAX_MONTHS."""
    if first > last:
        raise ReportError(f"the period starts {first:%Y-%m}, after its end {last:%Y-%m}: "
                          f"{bounds[0]} must not be after {bounds[1]}")
    if len(months_between(first, last)) > MAX_MONTHS:
        raise ReportError(f"{first:%Y-%m} … {last:%Y-%m} is more than {MAX_MONTHS} months: "
                          "report a shorter period")


def period_report_path(warehouse: str | Path, first: date, last: date) -> Path:
    """`<warehouse folder>/reports/cost-report-YYYY-MM_YYYY-MM.html`."""
    return (Path(warehouse).resolve().parent / "reports"
            / f"cost-report-{first:%Y-%m}_{last:%Y-%m}.html")


def _refuse_gaps(data: dict, warehouse: str | Path) -> None:
    """A trend with a silent hole misleads: every month of the period must be materialized,
    and all of them in one currency. A month not materialized names the `warehouse` file, as
    the monthly report and the exports do."""
    unmaterialized = [m for m in data["missing"] if m not in data["empty"]]
    names = ", ".join(f"{m:%Y-%m}" for m in unmaterialized)
    them = "it" if len(unmaterialized) == 1 else "them"
    empty = (f"{', '.join(f'{m:%Y-%m}' for m in data['empty'])} "
             f"{'has' if len(data['empty']) == 1 else 'have'} no billing lines (materialized: "
             "nothing billed yet)")
    if unmaterialized and data["empty"]:  # both said: mending one must not meet the other
        raise ReportError(f"no billing data for {names} in {warehouse} (materialize {them} "
                          f"first), and {empty}: report a period of billed months")
    if unmaterialized:
        raise ReportError(f"no billing data for {names} in {warehouse}: materialize {them} "
                          "first, or report a shorter period")
    if data["empty"]:
        raise ReportError(f"{empty}: report a period of billed months")
    if data["mixed_currency_months"] or len(data["currencies"]) > 1:
        raise ReportError(f"the period's bill is in more than one currency "
                          f"({', '.join(data['currencies'])}): report each currency's months "
                          "separately")


def stale_searches(data: dict) -> str | None:
    """What to do when the searches' cost to date, as the last month computed it, is older
    than a month before it (restated and materialized again after it), else None."""
    return stale_searches_note(data["searches"], data["last"],
                               data.get("searches_moved", False))


def month_format(data: dict) -> str:
    """How the period names a month: `January`, or `January 2025` when the period crosses a
    year (January 2025 to January 2026 read "from January to January")."""
    return "%B" if data["first"].year == data["last"].year else "%B %Y"


def summary(data: dict, symbol: str) -> list[str]:
    """The sentences a finance director reads first."""
    first, last, totals = data["first"], data["last"], data["totals"]
    named = month_format(data)
    out = [f"{_span(data)} cost {money(data['total'], symbol)}: "
           + ", ".join(f"{money(totals[m]['effective_cost'], symbol)} in {m:{named}}"
                       for m in data["months"]) + "."]
    stale = stale_searches(data)
    if stale:
        out.insert(0, stale)
    if first != last:
        before, after = totals[first]["effective_cost"], totals[last]["effective_cost"]
        # a change that reads zero in the currency (a few sen, float noise) is no change
        change = after - before
        shown = smallest(change, symbol)
        verb = "rose" if shown > 0 else "fell" if shown < 0 else "stayed"
        text = f"From {first:{named}} to {last:{named}} the monthly bill {verb}"
        if shown:
            text += f" by {money(abs(change), symbol)}"
            if before > 0:
                text += f" ({'+' if change > 0 else '−'}{percent(abs(change) / before)})"
        attributed = data["by_purpose"] or {}
        if data["moves"] and first in attributed and last in attributed:  # (else not computed)
            text += "; most of the move: " + ", ".join(
                f"{PURPOSE_LABELS.get(c['purpose_class'], c['purpose_class'])} {c['component']} "
                f"{signed(c['change'], symbol)}"
                for c in data["moves"])
        out.append(text + ".")
    if data["levers"]:
        out.append(biggest_lever(data["levers"], "over the period", symbol))
    failed = [s for s in data["shares"] or [] if s["status"] != "pass"]
    if failed:
        # a share and its threshold that differ never read alike (as the month's page)
        out.append("Reconciliation failed in " + ", ".join(
            "{:%Y-%m} ({} of GPU-hours untracked, threshold {})".format(
                s["month"], *share_against(s["untracked_share"], s["threshold"]))
            for s in failed) + ".")
    # the period's searches: one that cost nothing in it (an older one) is history, not news
    saturating = [s for s in data["searches"] or [] if s["saturating"] and s["cost_in_period"]]
    if saturating:
        named = ", ".join(f"{s['search_id']} ({s['model'] or 'no model'})"
                          for s in saturating[:NAMED])
        if len(saturating) > NAMED:
            named += f" and {len(saturating) - NAMED:,} more searches"
        out.append("Searching has saturated: " + named
                   + " bought less improvement per dollar than the search before, or none.")
    return out


def searches_shown(searches: list[dict] | None,
                   long: int = LONG) -> tuple[list[dict] | None, dict[str, Any] | None]:
    """The searches the page lists and charts: every search of the models whose searches cost
    most in the period, a model at a time while they fit in `long` rows (the first model's
    first `long` at least), in the table's order; and the others' {"count", "cost"} (Σ their
    cost in the period), or None."""
    if searches is None or len(searches) <= long:
        return searches, None
    spend: dict[Any, Any] = {}
    counts: dict[Any, int] = {}
    for s in searches:
        spend[s["model"]] = spend.get(s["model"], 0) + s["cost_in_period"]
        counts[s["model"]] = counts.get(s["model"], 0) + 1
    chosen, rows = set(), 0
    for model in sorted(spend, key=lambda m: (-spend[m], m is None, m or "")):
        if chosen and rows + counts[model] > long:
            break
        chosen.add(model)
        rows += counts[model]
    picked = [s for s in searches if s["model"] in chosen][:long]
    kept = {id(s) for s in picked}
    return picked, rest_of([s for s in searches if id(s) not in kept], "cost_in_period")


def in_own_currency(search: dict, symbol: str) -> dict[str, Any]:
    """`search` with the `symbol` of the currency its cost to date and cost per unit are in
    (period_searches.sql `currency`: an April search billed in yen reads `JPY 1,001` on a
    dollar period's page, where it read `$1,000.60`), the period's `symbol` when it was
    billed in none, and `mixed` when it was billed in more than one (`currencies`): no sum
    of two currencies is shown, nor a price per unit of one. A NULL currency alone is not
    "more than one": rows written before search_trend kept a currency hold none."""
    currency = search.get("currency")
    mixed = (search.get("currencies") or 0) > 1
    return {**search, "symbol": symbol_of(currency) if currency else symbol, "mixed": mixed,
            "cost_per_improvement": None if mixed else search["cost_per_improvement"]}


def _span(data: dict) -> str:
    first, last = data["first"], data["last"]
    if first == last:
        return f"{first:%B %Y}"
    if first.year == last.year:
        return f"{first:%B} – {last:%B %Y}"
    return f"{first:%B %Y} – {last:%B %Y}"


def quarters(first: date, last: date) -> str | None:
    """The calendar quarters the months `first` … `last` are, when they are whole ones
    (January–March, April–June, July–September, October–December): `Q3 2026`, `Q3–Q4 2026`,
    `Q4 2026 – Q1 2027`; None for any other period, which its months alone name."""
    if first.month % 3 != 1 or last.month % 3 != 0 or first > last:
        return None
    start, end = f"Q{first.month // 3 + 1}", f"Q{last.month // 3}"
    if first.year != last.year:
        return f"{start} {first.year} – {end} {last.year}"
    return f"{start} {first.year}" if start == end else f"{start}–{end} {first.year}"


def heading(data: dict) -> str:
    """The page's title and heading: the period's quarters when it is whole ones, its months
    beside them (`Q3 2026 (July – September 2026)`), else its months."""
    quarter = quarters(data["first"], data["last"])
    return f"{quarter} ({_span(data)})" if quarter else _span(data)


def model_rows(models: list[dict], months: list[date]) -> list[dict[str, Any]]:
    """One row per model (untracked and unallocated last): its cost each month and in all."""
    out: dict[Any, dict[str, Any]] = {}
    for r in models:
        row = out.setdefault(r["model"], {"model": r["model"], "months": {}, "total": 0,
                                          "search": 0, "production": 0})
        row["months"][r["month"]] = r["cost"]
        row["total"] += r["cost"]
        row["search"] += r["search"]
        row["production"] += r["production"]
    return sorted(out.values(), key=lambda r: (r["model"] is None, -r["total"], r["model"] or ""))


def storage_rows(storage: list[dict]) -> list[dict[str, Any]]:
    order = ["live", "production", "dead", "orphan"]
    out: dict[str, dict[str, Any]] = {}
    for r in storage:
        out.setdefault(r["run_status"], {"run_status": r["run_status"], "months": {}})
        out[r["run_status"]]["months"][r["month"]] = r
    return sorted(out.values(), key=lambda r: (order.index(r["run_status"])
                                               if r["run_status"] in order else 99,
                                               r["run_status"]))


def render_period_html(data: dict, source: str) -> str:
    symbol = symbol_of(data["currency"])
    present = {p for month in (data["by_purpose"] or {}).values() for p in month}
    purposes = [p for p in PURPOSES if p in present] + sorted(present - set(PURPOSES))
    # the long tables show their head and what the rest adds up to (data.LONG)
    models, models_rest = head_and_rest(
        model_rows(data["models"], data["months"]) if data["models"] else None,
        keep=lambda r: r["model"] is None, cost="total")
    searches, searches_rest = searches_shown(data["searches"])
    if searches is not None:
        searches = [in_own_currency(s, symbol) for s in searches]
    shown = {**data, "searches": searches}
    # the months a section's table has no rows for while it has some for others (a month
    # whose bill was written but not what is derived from it): the section says so, where it
    # read them as $0 before
    has = {"attribution": set(data["by_purpose"] or {}),
           "cost_per_model_monthly": {r["month"] for r in data["models"] or []},
           "cost_levers": {m for lever in data["levers"] or [] for m in lever["by_month"]}}
    missing = {table: [m for m in data["months"] if m not in months] if months else []
               for table, months in has.items()}
    return _environment().get_template("period.html.j2").render(
        d=shown, symbol=symbol, span=_span(data), heading=heading(data),
        quarter=quarters(data["first"], data["last"]), summary=summary(data, symbol),
        missing=missing,
        purposes=purposes, purpose_labels=PURPOSE_LABELS,
        purpose_totals={p: sum((m.get(p, 0) for m in (data["by_purpose"] or {}).values()), 0)
                        for p in purposes},
        models=models, models_rest=models_rest, searches_rest=searches_rest,
        storage=storage_rows(data["storage"]) if data["storage"] else None,
        shares={s["month"]: s for s in data["shares"] or []},
        bill_total=sum(line.cost for line in data["bill_lines"] or []),
        # the splits whose shares the page shows: every part, so that one below zero leaves
        # them all `–` (money.shares_shown)
        bill_costs=[line.cost for line in data["bill_lines"] or []],
        month_costs=[t["effective_cost"] for t in data["totals"].values()],
        charts=period_charts(shown), source=source,
        charges_to=charges_to(data["charges_to"]), named=month_format(data),
    )


def lever_summary(data: dict) -> list[str]:
    """One line per lever of the period, ranked: its dollars over the period and per month."""
    symbol = symbol_of(data["currency"])
    width = max((len(lever["lever"]) for lever in data["levers"] or []), default=0)
    short = "%b" if data["first"].year == data["last"].year else "%b %Y"
    return [f"{lever['rank']}. {lever['lever']:<{width}}  {money(lever['dollars'], symbol):>12}"
            + "  (" + ", ".join(f"{m:{short}} {money(lever['by_month'].get(m, 0), symbol)}"
                               for m in data["months"]) + ")"
            for lever in data["levers"] or []]


def read_period(con: duckdb.DuckDBPyConnection, first: date, last: date,
                warehouse: str | Path) -> dict:
    """The period's figures, read through `con` (of the `warehouse` file)."""
    check_range(first, last)
    data = collect_period(con, first, last)
    _refuse_gaps(data, warehouse)
    return data


def write_period_report(warehouse: str | Path, first: date, last: date,
                        out: str | Path | None = None,
                        con: duckdb.DuckDBPyConnection | None = None) -> tuple[Path, dict]:
    """Write the period's report; returns its path and the figures it shows. Reads through
    `con` when given (a Dagster op's connection), else a read-only connection."""
    check_range(first, last)
    return write_page(warehouse, Path(out) if out else period_report_path(warehouse, first, last),
                      lambda c: read_period(c, first, last, warehouse), render_period_html,
                      con)

