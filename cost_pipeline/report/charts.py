"""The report's charts, drawn with matplotlib (no pyplot: no global state, no GUI backend) and
returned as inline SVG for the HTML page, or a small PNG data URI for the Dagster UI."""

from __future__ import annotations

import base64
import io
import re
import textwrap
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from cost_pipeline.report.data import PURPOSE_LABELS
from cost_pipeline.report.money import (
    minor_digits,
    money,
    rounded_steps,
    share,
    smallest,
    symbol_of,
)

FONT = ["Helvetica Neue", "Helvetica", "Arial", "Liberation Sans", "DejaVu Sans"]
INK, MUTED, GRID = "#1d2733", "#5f6b7a", "#e3e7ec"
COMPONENT_COLORS = {"gpu": "#1f4e79", "cpu": "#4f86b8", "storage": "#9cc0de",
                    "network": "#d6a243", "other": "#b7bec7"}
TOTAL, DECREASE, INCREASE = "#1f4e79", "#2f7d4f", "#b8433b"
WIDTH = 10.0  # inches: the page shows charts ~960 px wide, so 9.5 pt text reads as ~12.7 px
STYLE = {
    "svg.fonttype": "none",  # text stays text: small, crisp, set in the page's fonts
    "font.family": "sans-serif", "font.sans-serif": FONT, "font.size": 9.5,
    "text.color": INK, "axes.labelcolor": MUTED, "xtick.color": MUTED, "ytick.color": INK,
    "axes.edgecolor": GRID, "axes.spines.top": False, "axes.spines.right": False,
    # labels come from the bill (a ChargeCategory `Fee $\frac{a}$ x`, amounts in `$`): drawn
    # verbatim, never read as matplotlib math text
    "text.parse_math": False, "text.usetex": False,
}


@contextmanager
def _style(name: str) -> Iterator[None]:
    # a salt per chart keeps the SVG ids of several inline charts distinct and stable
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": name}):
        yield


# an axis tick from this size on is written in trillions, billions, millions, thousands
UNITS = ((1e12, 1e12, "T"), (1e9, 1e9, "B"), (1e6, 1e6, "M"), (1e4, 1e3, "k"))


def _dollars(value: float, _pos=None, *, symbol: str) -> str:
    """An axis tick in the bill's currency (`symbol` from report.money.symbol_of): whole
    units, or the currency's decimals when the tick has a fraction (cents `$0.50`, fils
    `KWD 0.025`; a yen has none: `JPY 2`), rounded half up as `money` rounds; from 10,000 on
    in k, M, B or T with the decimals the tick needs ($12.5k, $2.5M, $100B). The sign is the
    shown figure's: a tick that reads zero has none (`money` alike), where a float a hair
    below zero read "−$0"."""
    size, unit = abs(value), ""
    for from_size, per_unit, name in UNITS:
        if size >= from_size:
            size, unit = size / per_unit, name
            break
    if unit:
        shown = f"{size:,.2f}".rstrip("0").rstrip(".")
    else:
        digits = minor_digits(symbol)
        shown = f"{smallest(size, symbol):,.{digits}f}"
        if digits:
            shown = shown.removesuffix("." + "0" * digits)
    sign = "−" if value < 0 and shown.strip("0.,") else ""
    return f"{sign}{symbol}{shown}{unit}"


class _SmallestUnitLocator(MaxNLocator):
    """matplotlib's ticks (its default locator's steps), on whole multiples of the currency's
    smallest unit: a yen axis has ticks on whole yen, and one that spans less than a yen
    only the tick at zero, where the ticks every 0.2 read `JPY 0.20 … JPY 1.20`."""

    def __init__(self, digits: int):
        super().__init__(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=True)
        self.per_unit = 10 ** digits

    def tick_values(self, vmin, vmax):
        # in the smallest unit (cents, yen, fils): whole ticks only, back in the currency
        ticks = super().tick_values(vmin * self.per_unit, vmax * self.per_unit)
        whole = np.round(ticks)
        return whole[np.isclose(ticks, whole, rtol=1e-9, atol=1e-6)] / self.per_unit


def _label(value: float, symbol: str) -> str:
    return money(value, symbol)


def _own_ids(svg: str, prefix: str) -> str:
    """`svg` with its element ids, and what refers to them (`url(#…)`, `href="#…"`), under
    `prefix`: matplotlib names every figure's elements alike (`figure_1`, `patch_1`,
    `axes_1` …), and a page of three inline charts held each id three times. Only the tags
    are rewritten: a label's text stays as drawn."""
    return re.sub(r"<[^>]+>", lambda tag: re.sub(r'(\sid="|url\(#|href="#)', rf"\1{prefix}-",
                                                 tag.group(0)), svg)


def _svg(fig: Figure, title: str) -> str:
    """`fig` as inline SVG, its ids under the chart's name (the salt `_style` sets)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    # scale with the page: keep the viewBox, drop the fixed size
    text = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"',
                  rf'<svg \1role="img" aria-label="{title}" class="chart"', text, count=1)
    prefix = matplotlib.rcParams["svg.hashsalt"] or re.sub(r"\W+", "-", title.lower())
    return _own_ids(text.strip(), f"chart-{prefix}")


def _frame(ax, axis: str, symbol: str, amounts: Iterable | None = None) -> None:
    """The money axis: a grid, ticks in the bill's currency on whole multiples of its smallest
    unit; when none of the `amounts` drawn on it is worth that unit (a month that cost
    nothing), one tick at zero — the range matplotlib picks around nothing (±0.06) had seven
    ticks all reading $0."""
    ax.grid(axis=axis, color=GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    ax.tick_params(length=0)
    money_axis = ax.xaxis if axis == "x" else ax.yaxis
    money_axis.set_major_formatter(
        FuncFormatter(lambda value, pos: _dollars(value, pos, symbol=symbol)))
    money_axis.set_major_locator(_SmallestUnitLocator(minor_digits(symbol)))
    if amounts is not None and not any(smallest(a, symbol) for a in amounts if a is not None):
        money_axis.set_ticks([0])


def bill_figure(bill: dict, symbol: str) -> Figure:
    """Purpose classes as horizontal bars, stacked by component, largest first."""
    # a class worth less than the currency's smallest unit reads zero: not drawn
    purposes = [p for p in bill["purposes"] if smallest(bill["column_total"][p], symbol)]
    purposes.sort(key=lambda p: bill["column_total"][p])
    fig = Figure(figsize=(WIDTH, 0.34 * len(purposes) + 0.8), layout="constrained")
    ax = fig.subplots()
    names = [PURPOSE_LABELS.get(p, p) for p in purposes]
    # credits can make a segment negative: stack positives rightwards, negatives leftwards
    right, left = [0.0] * len(purposes), [0.0] * len(purposes)
    drawn = False
    for component in bill["components"]:
        values = [bill["cost"].get((component, p), 0.0) for p in purposes]
        if not any(values):
            continue
        drawn = True
        starts = [right[i] if v >= 0 else left[i] for i, v in enumerate(values)]
        ax.barh(names, values, left=starts, height=0.62, label=component,
                color=COMPONENT_COLORS.get(component, "#888888"))
        for i, v in enumerate(values):
            if v >= 0:
                right[i] += v
            else:
                left[i] += v
    for y, p in enumerate(purposes):
        cost = bill["column_total"][p]
        # no share of a total that credits brought to zero or below, or shrank (`share`: –)
        of_total = share(cost, bill["total"], 0, symbol, bill["column_total"].values())
        ax.text(max(cost, 0), y, f"  {_label(cost, symbol)}  ({of_total})",
                va="center", fontsize=8.5, color=INK)
    _frame(ax, "x", symbol, [bill["column_total"][p] for p in purposes])
    if not purposes:  # nothing worth a unit: no purpose axis either (it read 0 and 1)
        ax.set_yticks([])
    ax.margins(x=0.22)
    if drawn:  # a month that cost nothing has no bars, and so no legend (nor its warning)
        ax.legend(ncols=5, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False,
                  fontsize=8.5, handlelength=1, columnspacing=1.2)
    return fig


def bridge_figure(bridge: dict, labels: dict[str, str], symbol: str) -> Figure:
    """The waterfall from the invoice (BilledCost) to the amortized cost (EffectiveCost); each
    step labelled as the bridge's table shows it (`money.rounded_steps`), so the labels add up
    in the currency's smallest unit."""
    names = ["Invoice\n(BilledCost)"]
    names += [textwrap.fill(labels.get(s["item_type"], s["item_type"]), 24)
              for s in bridge["steps"]]
    names.append("Amortized\n(EffectiveCost)")
    fig = Figure(figsize=(WIDTH, 3.2), layout="constrained")
    ax = fig.subplots()
    level = float(bridge["start"])
    ax.bar(0, level, color=TOTAL, width=0.6)
    ax.text(0, level, _label(level, symbol), ha="center", va="bottom", fontsize=8.5)
    shown = rounded_steps(bridge["start"], [s["amount"] for s in bridge["steps"]], symbol)
    for x, (step, label) in enumerate(zip(bridge["steps"], shown, strict=True), start=1):
        amount = float(step["amount"])
        ax.bar(x, amount, bottom=level, width=0.6,
               color=DECREASE if amount < 0 else INCREASE)
        ax.plot([x - 1.3, x + 0.3], [level, level], color=MUTED, linewidth=0.6)
        level += amount
        ax.text(x, max(level, level - amount), _label(label, symbol), ha="center",
                va="bottom", fontsize=8.5)
    end = len(names) - 1
    ax.plot([end - 1.3, end + 0.3], [level, level], color=MUTED, linewidth=0.6)
    ax.bar(end, float(bridge["end"]), color=TOTAL, width=0.6)
    ax.text(end, float(bridge["end"]), _label(float(bridge["end"]), symbol), ha="center",
            va="bottom", fontsize=8.5)
    ax.set_xticks(range(len(names)), names, fontsize=8.5)
    _frame(ax, "y", symbol)
    # the steps are small beside the totals: start the axis near them, and say so
    levels = [float(bridge["start"])]
    for step in bridge["steps"]:
        levels.append(levels[-1] + float(step["amount"]))
    low, high = min(levels), max(levels)
    floor = low - 1.5 * (high - low)
    if low > 0 and floor > 0.25 * low and high > low:  # equal limits: a matplotlib warning
        ax.set_ylim(bottom=floor, top=high + 0.25 * (high - low))
        ax.set_title("axis does not start at zero", loc="left", fontsize=8, color=MUTED)
    else:
        ax.margins(y=0.12)
    return fig


def levers_figure(levers: list[dict], symbol: str) -> Figure:
    """The ranked levers, rank 1 on top, with the dollars each touches; a lever that reads
    zero in the currency is labelled "–", as the table beside the chart shows it."""
    rows = list(reversed(levers))
    fig = Figure(figsize=(WIDTH, 0.3 * len(rows) + 0.55), layout="constrained")
    ax = fig.subplots()
    names = [f"{r['rank']}. {r['lever']}" for r in rows]
    ax.barh(names, [r["dollars"] for r in rows], height=0.6,
            color=[TOTAL if r["rank"] == 1 else COMPONENT_COLORS["cpu"] for r in rows])
    for y, r in enumerate(rows):
        shown = _label(r["dollars"], symbol) if smallest(r["dollars"], symbol) else "–"
        ax.text(max(r["dollars"], 0), y, f"  {shown}", va="center", fontsize=8.5)
    _frame(ax, "x", symbol, [r["dollars"] for r in rows])
    ax.margins(x=0.18)
    return fig


def charts(data: dict, labels: dict[str, str]) -> dict[str, str]:
    """The page's inline SVG charts, by section."""
    out, symbol = {}, symbol_of(data["headline"]["currency"])
    with _style("bill"):
        if data["bill"] and data["bill"]["cost"]:
            out["bill"] = _svg(bill_figure(data["bill"], symbol), "Cost by purpose and component")
    with _style("bridge"):
        if data["bridge"]["steps"]:
            out["bridge"] = _svg(bridge_figure(data["bridge"], labels, symbol),
                                 "Bridge from BilledCost to EffectiveCost")
    with _style("levers"):
        if data["levers"]:
            out["levers"] = _svg(levers_figure(data["levers"], symbol),
                                 "Levers ranked by amount")
    return out


def png_data_uri(figure_of, *args, dpi: int = 72) -> str:
    """A small PNG as a data URI (the Dagster UI renders it inside markdown metadata)."""
    with _style("png"):
        buffer = io.BytesIO()
        figure_of(*args).savefig(buffer, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
