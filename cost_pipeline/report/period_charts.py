"""The period report's charts (matplotlib → inline SVG, the monthly report's style): each
month's cost by purpose class, and each model's cost per unit of improvement across its
searches in launch order, saturation marked."""

from __future__ import annotations

from datetime import date

from matplotlib.figure import Figure

from cost_pipeline.report.charts import (
    INCREASE,
    INK,
    MUTED,
    WIDTH,
    _dollars,
    _frame,
    _label,
    _style,
    _svg,
)
from cost_pipeline.report.data import PURPOSE_LABELS, PURPOSES
from cost_pipeline.report.money import symbol_of

PURPOSE_COLORS = {"production": "#1f4e79", "search": "#4f86b8", "preprocessing": "#9cc0de",
                  "other": "#b7bec7", "untracked": "#d6a243", "unallocated": "#7a8593"}
SEARCH_LINE = "#1f4e79"


def purpose_by_month_figure(months: list[date], by_purpose: dict, symbol: str) -> Figure:
    """One stacked bar per month, a segment per purpose class, the month's total on top
    (credits stack below zero)."""
    labels = [f"{m:%b %Y}" for m in months]
    present = {p for m in months for p in by_purpose.get(m, {})}
    purposes = [p for p in PURPOSES if p in present] + sorted(present - set(PURPOSES))
    fig = Figure(figsize=(WIDTH, 3.4), layout="constrained")
    ax = fig.subplots()
    up, down = [0.0] * len(months), [0.0] * len(months)
    for purpose in purposes:
        values = [float(by_purpose.get(m, {}).get(purpose, 0)) for m in months]
        if not any(values):
            continue
        bottoms = [up[i] if v >= 0 else down[i] for i, v in enumerate(values)]
        ax.bar(labels, values, bottom=bottoms, width=0.56,
               label=PURPOSE_LABELS.get(purpose, purpose),
               color=PURPOSE_COLORS.get(purpose, "#888888"))
        for i, v in enumerate(values):
            if v >= 0:
                up[i] += v
            else:
                down[i] += v
    for i, m in enumerate(months):
        total = sum(float(v) for v in by_purpose.get(m, {}).values())
        ax.text(i, up[i], _label(total, symbol), ha="center", va="bottom", fontsize=8.5,
                color=INK)
    _frame(ax, "y", symbol, [v for m in months for v in by_purpose.get(m, {}).values()])
    ax.margins(y=0.12)
    if ax.get_legend_handles_labels()[0]:  # months that cost nothing draw no bars, no legend
        ax.legend(ncols=6, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False,
                  fontsize=8.5, handlelength=1, columnspacing=1.2)
    return fig


def search_trend_figure(searches: list[dict], symbol: str) -> Figure:
    """Cost per unit of improvement of each search, a line per model in launch order.
    Saturating searches are red crosses. A search that bought no improvement has no unit
    cost: a red cross at the top edge ("no gain"); one with nothing to compare a hollow mark
    on the axis: "no metric" when it logged no metric (no best), "no baseline" when the model
    had no result before it (its first search), as one that improved at a cost of 0 or a
    credit ("no cost": nothing to divide)."""
    models = sorted({s["model"] or "" for s in searches})
    fig = Figure(figsize=(WIDTH, 3.2), layout="constrained")
    ax = fig.subplots()
    priced = [float(s["cost_per_improvement"]) for s in searches
              if s["cost_per_improvement"] is not None]
    top = max(priced) * 1.18 if priced else 1.0
    # each search's price in its own currency (`symbol`, period.in_own_currency); a line joins
    # a model's searches of one currency only, and an axis of several currencies has none
    symbols = {s.get("symbol", symbol) for s in searches if s["cost_per_improvement"] is not None}
    for model in models:
        rows = [s for s in searches if (s["model"] or "") == model]
        for own in sorted({s.get("symbol", symbol) for s in rows}):
            line = [s for s in rows if s["cost_per_improvement"] is not None
                    and s.get("symbol", symbol) == own]
            ax.plot([s["search_order"] for s in line],
                    [float(s["cost_per_improvement"]) for s in line], color=SEARCH_LINE,
                    linewidth=1.2, zorder=1,
                    label=(model or "no model") + (f" ({own.strip()})" if len(symbols) > 1
                                                   else ""),
                    alpha=0.7 if len(models) > 1 else 1)
        for s in rows:
            x, unit = s["search_order"], s["cost_per_improvement"]
            color = INCREASE if s["saturating"] else SEARCH_LINE
            if unit is not None:
                y, value = float(unit), _dollars(float(unit), symbol=s.get("symbol", symbol))
            elif s["improvement"] is not None and s["improvement"] <= 0:
                y, value = top, "no gain"
            elif s["improvement"] is not None:  # improved, at a cost of 0 or a credit
                y, value = 0.0, "no cost"
            elif s["best_metric"] is None:  # the search logged no metric: nothing to compare
                y, value = 0.0, "no metric"
            else:  # a result, but no earlier one of the model to improve on
                y, value = 0.0, "no baseline"
            ax.scatter([x], [y], s=46, zorder=2, marker="X" if s["saturating"] else "o",
                       color=color if value not in ("no baseline", "no metric", "no cost")
                       else "white",
                       edgecolors=color, clip_on=False)
            note = f"{s['search_id']}\n{value}" + ("  saturating" if s["saturating"] else "")
            ax.annotate(note, (x, y), textcoords="offset points", xytext=(0, 8), ha="center",
                        fontsize=8, color=color if s["saturating"] else INK)
    ax.set_xlabel("search, in launch order (per model)")
    ax.set_ylabel("cost per unit of improvement" + (
        "\n(each in its search's currency)" if len(symbols) > 1 else ""))
    orders = sorted({s["search_order"] for s in searches})
    ax.set_xticks(orders, [str(o) for o in orders])
    _frame(ax, "y", symbol if len(symbols) <= 1 else "")
    ax.set_ylim(bottom=0, top=top * 1.3 or 1.0)  # all unit costs 0: not a 0-high axis
    ax.margins(x=0.12)
    if len(models) > 1 or len(symbols) > 1:
        ax.legend(frameon=False, fontsize=8.5, loc="upper left")
    ax.text(0, 1.02, "× saturating: the unit cost rose over the model's previous search, or "
            "the search bought no improvement", transform=ax.transAxes, fontsize=8, color=MUTED)
    return fig


def period_charts(data: dict) -> dict[str, str]:
    out, symbol = {}, symbol_of(data["currency"])
    with _style("period-purpose"):
        if data["by_purpose"]:
            out["purpose"] = _svg(purpose_by_month_figure(data["months"], data["by_purpose"],
                                                          symbol),
                                  "Cost by purpose class per month")
    with _style("period-search"):
        if data["searches"]:
            out["searches"] = _svg(search_trend_figure(data["searches"], symbol),
                                   "Cost per unit of improvement across searches")
    return out
