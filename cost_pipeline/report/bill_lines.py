"""The bill as lines: a quarter's (or a month's) cost read back from the warehouse as the
decisions it is made of — production vs search, preprocessing, checkpoints, egress,
untracked — plus which month failed reconciliation and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb

from cost_pipeline.alerts import counted, figures_apart
from cost_pipeline.report.data import top_untracked
from cost_pipeline.report.money import (
    figure,
    gpu_hours_alike,
    in_percent,
    money,
    not_finite,
    percent,
    share,
    symbol_of,
)
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


# why a resource's GPU time is untracked (untracked_usage.kind, SPEC §7), in this order
KIND_WORDS = {"no_run": "claimed by no run",
              "idle_capacity": "idle capacity of a claimed resource",
              "shared": "shared, no run can name it"}


def untracked_because(kinds: str | None) -> str:
    """`top_untracked`'s kinds (`idle_capacity, no_run`) in words: a resource a run claimed
    whose GPUs stood partly idle is not one "claimed by no run"."""
    names = {k for k in (kinds or "").split(", ") if k}
    words = [KIND_WORDS[k] for k in KIND_WORDS if k in names]
    words += [k.replace("_", " ") for k in sorted(names - set(KIND_WORDS))]
    if len(words) < 2:
        return words[0] if words else "untracked"
    return "partly " + ", partly ".join(words)


def _digits(fraction: float) -> int:
    """The decimals `fraction` has as a percentage (`in_percent`, its own digits): 5% none,
    2.5% one, 1.25% two; six at most."""
    return min(6, max(0, -in_percent(fraction).normalize().as_tuple().exponent))


def share_and_threshold(share: float, threshold: float) -> tuple[str, str]:
    """The untracked share and its threshold as percentages (without `%`): the threshold with
    the digits it has (2.5, not 2: a 2.3% share passing read as passing a 2% threshold), the
    share with one decimal or the threshold's, and more when fewer would show a share that
    is not the threshold as equal to it (the alert's rule, `figures_apart`); both in percent
    from their own digits (`in_percent`: 100 × 0.0515 is the double 5.1499…, read 5.1%)."""
    digits, limit = _digits(threshold), in_percent(threshold)
    shown, _ = figures_apart(in_percent(share), limit, max(digits, 1))
    return shown, f"{limit:,.{digits}f}"


def share_against(share, threshold) -> tuple[str, str]:
    """The untracked share and its threshold in percent, as the printed reconciliation note
    writes them (`bill_lines.share_and_threshold`): the threshold with its own digits, one at
    least as the page's percentages have, the share with as many, and more while it would
    read as the threshold it is not. One decimal read "21.6% FAIL · threshold 21.6%" for a
    21.622% share of a 21.6% threshold; the note read "21.62% … (threshold 21.6%)"."""
    if not_finite(share) is not None or not_finite(threshold) is not None:
        return percent(share), percent(threshold)
    shown, limit = share_and_threshold(share, threshold)
    return f"{shown}%", f"{limit if '.' in limit else limit + '.0'}%"


def reconciliation_notes(con: duckdb.DuckDBPyConnection, first: date, last: date) -> list[str]:
    notes, symbol = [], symbol_of(bill_currency(con, first, last))
    rows = con.execute(
        "SELECT month, status, untracked_share, threshold, billed_gpu_hours, untracked_gpu_hours "
        "FROM reconciliation WHERE month BETWEEN ? AND ? ORDER BY month", [first, last]).fetchall()
    for month, status, untracked_share, threshold, billed, untracked in rows:
        shown, limit = share_and_threshold(untracked_share, threshold)
        # the resource the failed check's alert names first
        tops = top_untracked(con, month, "gpu", 1) if status == "fail" else []
        # the note's GPU-hour figures share their decimals (0.4 of 1.0 read "0 of 1")
        billed_hours, untracked_hours, *top_hours = gpu_hours_alike(
            billed, untracked, *(top["gpu_hours"] or 0 for top in tops))
        text = (f"{month:%Y-%m}: {status.upper()} — {shown}% of {billed_hours} billed "
                f"{counted(billed_hours, 'GPU-hour')} "
                f"untracked (threshold {limit}%)")
        if status == "fail":
            for top, hours in zip(tops, top_hours, strict=True):
                kind = f" ({top['instance_type']})" if top["instance_type"] else ""
                text += (f"; largest untracked: "
                         f"{top['resource_id'] or 'lines without a resource id'}{kind} "
                         f"{hours} {counted(hours, 'GPU-hour')}, {money(top['cost'], symbol)}, "
                         f"{untracked_because(top['kinds'])}")
            text += f"; {untracked_hours} {counted(untracked_hours, 'GPU-hour')} in all"
        notes.append(text)
    return notes


def render(lines: list[BillLine], notes: list[str], title: str, currency: str) -> str:
    """The bill as lines, amounts to `currency`'s smallest unit (the header names it: a yen
    bill reads `288,750`, a dinar bill `1.235`)."""
    total, symbol = sum(line.cost for line in lines), symbol_of(currency)
    costs = [line.cost for line in lines]
    width = max([len(line.line) for line in lines] + [5])
    out = [title, f"{'line':<{width}}  {'GPU-hours':>10}  {'CPU-hours':>10}  {'runs':>5}  "
           f"{'cost (' + currency + ')':>14}  share"]
    for line in lines:
        # a total that credits brought to zero or below, or shrank, has no shares (`share`: –)
        out.append(f"{line.line:<{width}}  {line.gpu_hours:>10,.1f}  {line.cpu_hours:>10,.1f}  "
                   f"{line.runs:>5}  {figure(line.cost, currency):>14}  "
                   f"{share(line.cost, total, 1, symbol, costs):>5}")
    out.append(f"{'total EffectiveCost':<{width}}  {'':>10}  {'':>10}  {'':>5}  "
               f"{figure(total, currency):>14}")
    out.append("")
    out.append("Reconciliation (tracker vs bill):")
    out.extend(f"  {note}" for note in notes)
    return "\n".join(out)
