"""The month's figures (data.py) and charts (charts.py) → one self-contained HTML file:
styles and SVG inline, nothing fetched when it is opened."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import jinja2
from markupsafe import Markup, escape

from cost_pipeline.report import report_path
from cost_pipeline.report.bill_lines import share_against
from cost_pipeline.report.charts import charts
from cost_pipeline.report.data import LEVERS_OVERLAP, PURPOSE_LABELS, ReportError, collect
from cost_pipeline.report.limits import ESTIMATE_TOLERANCE
from cost_pipeline.report.money import (  # noqa: F401 (re-exported)
    cents,
    change_percent,
    gpu_hours_alike,
    money,
    not_finite,
    percent,
    percent_figure,
    rounded_steps,
    rounded_to,
    share,
    shares_shown,
    signed,
    smallest,
    symbol_of,
)
from cost_pipeline.warehouse import connect_read_only

# the source's line item types, as the bridge's steps read to a finance director
LINE_ITEM_LABELS = {
    "SavingsPlanCoveredUsage": "Covered usage repriced at the savings-plan rate",
    "SavingsPlanNegation": "Savings-plan negations removed",
    "SavingsPlanRecurringFee": "Savings-plan fee spread onto usage (unused part stays)",
    "SavingsPlanUpfrontFee": "Savings-plan upfront fee spread over the term",
    "DiscountedUsage": "Reserved-instance usage at its amortized rate",
    # a FOCUS bill's commitment rows whose kind the file does not say, and its unused
    # commitment (a CUR keeps that inside its RIFee / SavingsPlanRecurringFee lines)
    "CommitmentCoveredUsage": "Commitment-covered usage at its amortized rate",
    "UnusedCommitment": "Commitment paid for but not used",
    "RIFee": "Reserved-instance fee spread onto usage (unused part stays)",
    "Fee": "Upfront fees spread over the term",
    "EdpDiscount": "Enterprise discount",
    "BundledDiscount": "Bundled discount",
    "PrivateRateDiscount": "Private-rate discount",
    "Discount": "Discounts",
    "Credit": "Credits",
    "Refund": "Refunds",
    "Tax": "Tax",
    "Usage": "On-demand usage",
}


# an amount as `money` writes it (`−$5.00`, `EUR 1,234.50`, `+JPY 12`, `$∞`): a minus sign
# before a symbol, or the space after a currency code, is a place a line may break
AMOUNT = re.compile(r"[−+]?(?:\$|\b[A-Z]{3} )(?:\d[\d,]*(?:\.\d+)?|∞)")


def unbroken(text: str) -> Markup:
    """`text` (a sentence, a lever's evidence) as HTML, each amount in it one span that the
    page's stylesheet does not let wrap (`.amt`): "unallocated −" ended a line and "$5.00."
    began the next. The words are the same; the text and markdown outputs do not have it."""
    return Markup(AMOUNT.sub(lambda m: f'<span class="amt">{m.group(0)}</span>',
                             str(escape(text))))


def amount(value, symbol: str) -> Markup:
    """`money` in running text: one span that does not wrap (`unbroken`)."""
    return unbroken(money(value, symbol))


def number(value, digits: int = 1) -> str:
    """A figure with thousands separators; a negative one with the minus sign (U+2212) the
    page's amounts and shares use, not a hyphen."""
    text = not_finite(value)
    return minus(f"{value:,.{digits}f}") if text is None else text


def metric(value, spec: str = "%.4g") -> str:
    """A metric value or change (`spec`: 4 significant digits, a negative one with the minus
    sign); `–` or `∞` as `number`."""
    text = not_finite(value)
    return minus(spec % value) if text is None else text


def minus(text: str) -> str:
    """A figure's leading hyphen as the minus sign (an exponent's, `1e-05`, stays)."""
    return "−" + text[1:] if text.startswith("-") else text


def size(num_bytes) -> str:
    """Bytes in the largest binary unit under 1,024 of it as written (macros.sql `byte_size`):
    1,048,575 bytes are `1.0 MiB`, not `1,024.0 KiB`."""
    value = float(num_bytes or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if (value if unit == "B" else round(value, 1)) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} PiB"


def bridge_rows(bridge: dict, symbol: str) -> list[dict[str, Any]]:
    """The steps as shown: each rounded as the difference of the running totals rounded to
    the currency's smallest unit (`symbol`'s: the cent, a yen, a fils), so the figures on the
    page add up exactly from the invoice to the amortized total (`money.rounded_steps`)."""
    shown = rounded_steps(bridge["start"], [s["amount"] for s in bridge["steps"]], symbol)
    return [{**step, "label": LINE_ITEM_LABELS.get(step["item_type"], step["item_type"]),
             "shown": amount} for step, amount in zip(bridge["steps"], shown, strict=True)]


def where_the_money_went(bill: dict, symbol: str) -> list[str]:
    """The purpose classes that cost most, as shares of the month's attributed total; when
    credits and refunds bring that total to zero or below, or only shrink it (a class below
    zero), a share of it reads backwards (a $10 class as −23%, a $100 one of $20 as 500%), so
    the classes are named by amount and the credits said (`money.shares_shown`)."""
    ranked = sorted(bill["column_total"].items(), key=lambda kv: -kv[1])
    spent = [(p, c) for p, c in ranked[:3] if smallest(c, symbol) > 0]
    if shares_shown(bill["column_total"].values(), bill["total"], symbol):
        return ["Where the money went: " + ", ".join(
            f"{PURPOSE_LABELS.get(p, p)} {percent(c / bill['total'], 0)} ({money(c, symbol)})"
            for p, c in spent) + "."]
    credited = [(p, c) for p, c in reversed(ranked) if smallest(c, symbol) < 0]
    if not credited:  # nothing cost anything
        return []
    out = []
    if spent:
        out.append("Where the money went: " + ", ".join(
            f"{PURPOSE_LABELS.get(p, p)} {money(c, symbol)}" for p, c in spent) + ".")
    out.append("Credits and refunds (" + ", ".join(
        f"{PURPOSE_LABELS.get(p, p)} {money(c, symbol)}" for p, c in credited)
        + f") bring the month's total to {money(bill['total'], symbol)}: no class is shown "
        "as a share of it.")
    return out


def biggest_lever(levers: list[dict], when: str, symbol: str) -> str:
    """The first lever, in rank order, that is worth the currency's smallest unit (a cent, a
    yen, a fils); when none is, that none has a price (naming one at $0.00 read as advice)."""
    priced = [lever for lever in levers if smallest(lever["dollars"], symbol) > 0]
    if not priced:
        return f"No lever has a price {when}."
    return f"Biggest lever {when}: {priced[0]['lever']} — {money(priced[0]['dollars'], symbol)}."


def summary(data: dict, symbol: str) -> list[str]:
    """The three or four sentences a finance director reads first (after what to redo when
    the searches' cost to date is out of date)."""
    out, total = [], data["headline"]["effective_cost"]
    if data.get("stale"):
        out.append(data["stale"])
    if data["bill"]:
        out.extend(where_the_money_went(data["bill"], symbol))
    rec = data["reconciliation"]
    if rec:
        verdict = "within" if rec["status"] == "pass" else "above"
        # billed as section 4 and the headline write it, with the statement's decimals
        *_, billed_hours = gpu_hours_alike(rec["tracked_gpu_hours"],
                                           rec["untracked_gpu_hours"], rec["billed_gpu_hours"])
        share, threshold = share_against(rec["untracked_share"], rec["threshold"])
        one = billed_hours == "1"  # one hour, as `alerts.counted` reads it ("1 … GPU-hours")
        text = (f"Tracker vs bill: {share} of {billed_hours} billed "
                f"{'GPU-hour belongs' if one else 'GPU-hours belong'} to no recorded run, "
                f"{verdict} the {threshold} threshold.")
        if data.get("untracked_gpu") and rec["status"] != "pass":
            # the same resource the failed check's alert names first (top_untracked.sql)
            first = data["untracked_gpu"][0]
            text += (f" Largest: {first['resource_id'] or 'lines without a resource id'} "
                     f"({money(first['cost'], symbol)} of GPU time).")
        out.append(text)
    if data["levers"]:
        out.append(biggest_lever(data["levers"], "this month", symbol))
    billed = data["headline"]["billed_cost"]
    if smallest(billed, symbol) != smallest(total, symbol):
        out.append(f"The invoice says {money(billed, symbol)}; amortized (commitments spread, "
                   f"discounts applied) the month costs {money(total, symbol)}.")
    return out


@cache
def _environment() -> jinja2.Environment:
    """One environment per process: it compiles each template once."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("cost_pipeline.report", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(money=money, percent=percent, percent_figure=percent_figure,
                       share=share, number=number, metric=metric, size=size, cents=cents,
                       smallest=smallest, signed=signed, change_percent=change_percent,
                       currency_symbol=symbol_of,
                       hours_alike=lambda hours: gpu_hours_alike(*hours),
                       shares_shown=shares_shown, rounded_to=rounded_to, amount=amount,
                       unbroken=unbroken, share_against=share_against)
    # the pages' levers say it in the words the UI's table and the demo use
    env.globals["levers_overlap"] = LEVERS_OVERLAP
    # what a search may cost over its estimate, a fraction (0.1): an overrun flagged over it
    # keeps the digits that tell it from it
    env.globals["estimate_allowance"] = Decimal(str(ESTIMATE_TOLERANCE)) - 1
    return env


def warm_up() -> None:
    """What the first report of a process would otherwise pay for on its own: importing the
    chart backends and compiling the page's template (~0.6 s). A run calls it in a thread
    while the warehouse works, which does not hold the interpreter."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.backends.backend_svg  # noqa: F401

    _environment().get_template("report.html.j2")


def charges_to(end: datetime | None) -> str:
    """What dates a page: the end of the latest charge it shows (UTC), so the same months
    drawn again are the same bytes (a page stamped with the clock differed a minute later)."""
    return f"charges to {end:%Y-%m-%d %H:%M} UTC" if end else "no charge dated"


def render_html(data: dict, source: str) -> str:
    head = data["headline"]
    symbol = symbol_of(head["currency"])
    return _environment().get_template("report.html.j2").render(
        d=data, head=head, symbol=symbol, rec=data["reconciliation"],
        purpose_labels=PURPOSE_LABELS, bridge_steps=bridge_rows(data["bridge"], symbol),
        summary=summary(data, symbol), charts=charts(data, LINE_ITEM_LABELS),
        source=source, charges_to=charges_to(head["charges_to"]),
    )


def write_report(warehouse: str | Path, month: date, out: str | Path | None = None,
                 con: duckdb.DuckDBPyConnection | None = None) -> tuple[Path, dict]:
    """Write the month's report; returns its path and the figures it shows. Reads through
    `con` when given (a Dagster asset's connection), else a read-only connection."""
    return write_page(warehouse, Path(out) if out else report_path(warehouse, month),
                      lambda c: collect(c, month), render_html, con)


def write_page(warehouse: str | Path, target: Path,
               read: Callable[[duckdb.DuckDBPyConnection], dict],
               render: Callable[[dict, str], str],
               con: duckdb.DuckDBPyConnection | None = None) -> tuple[Path, dict]:
    """A page's figures `read` through `con`, else a read-only connection of `warehouse`,
    `render`ed and written to `target` whole or not at all (a folder that cannot be made
    named as such: it was "[Errno 17] File exists: '…/reports'"); its path and figures."""
    if con is None:
        if not Path(warehouse).exists():
            raise ReportError(f"no warehouse at {warehouse}: materialize a month first")
        try:
            with connect_read_only(warehouse) as ro:
                data = read(ro)
        except duckdb.Error as exc:  # e.g. another process holds the write lock
            raise ReportError(f"cannot read {warehouse}: {str(exc).splitlines()[0]}") from exc
    else:
        data = read(con)
    html = render(data, Path(warehouse).name)
    from cost_pipeline.export import written_atomically

    with written_atomically(target) as partial:
        partial.write_text(html, encoding="utf-8")
    return target.resolve(), data
