"""The period report (SPEC §12): its figures equal the warehouse to the cent (the period and
each month's SUM(EffectiveCost), the moves, models, storage, untracked shares, levers summed),
months the warehouse lacks are refused in one line, the monthly report's 6-month strip, and
the page renders in a real headless Chromium."""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.config import load_config
from cost_pipeline.report import ReportError, write_report
from cost_pipeline.report.money import percent
from cost_pipeline.report.period import period_report_path, write_period_report
from cost_pipeline.warehouse import ensure_schema, register_datasets
from tests.report.test_report import Elements, model_cost_rows, sql_cents
from tests.support.chromium import render_in_chromium
from tests.support.warehouse_rows import insert, insert_lines

FIRST, LAST = date(2026, 7, 1), date(2026, 9, 1)
MONTHS = [date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1)]
CENT = Decimal("0.01")


@pytest.fixture
def warehouse(demo_quarter) -> str:
    return load_config(demo_quarter[0]).warehouse_path


@pytest.fixture
def quarter(warehouse, tmp_path):
    path, data = write_period_report(warehouse, FIRST, LAST, out=tmp_path / "quarter.html")
    return path, Elements(path.read_text(encoding="utf-8")), data


def month_total(con, month: date) -> Decimal:
    return sql_cents(con, "SELECT sum(EffectiveCost) FROM billing_facts WHERE month = ?", [month])


def test_period_and_month_totals_exact_to_the_cent(quarter, demo_warehouse):
    _, page, _ = quarter
    con = demo_warehouse
    assert Decimal(page.one("data-period-total")) == sql_cents(
        con, "SELECT sum(EffectiveCost) FROM billing_facts WHERE month BETWEEN ? AND ?",
        [FIRST, LAST])
    shown = {a["data-month-total"]: Decimal(a["data-cost"])
             for a in page.having("data-month-total")}
    assert shown == {f"{m:%Y-%m}": month_total(con, m) for m in MONTHS}
    assert Decimal(page.one("data-period-billed")) == sql_cents(
        con, "SELECT sum(BilledCost) FROM billing_facts WHERE month BETWEEN ? AND ?",
        [FIRST, LAST])
    # the bill as lines over the period adds up to the same total (conservation)
    lines = [Decimal(a["data-cost"]) for a in page.having("data-line")]
    assert abs(sum(lines) - Decimal(page.one("data-period-total"))) <= len(lines) * CENT
    assert {a["data-line"] for a in page.having("data-line")} >= {
        "hyperparameter search", "production training", "preprocessing", "untracked",
        "checkpoint & artifact storage", "cross-region dataset pulls"}


def test_what_moved_is_the_three_largest_cell_changes(quarter, demo_warehouse):
    _, page, _ = quarter
    cells = demo_warehouse.execute(
        "SELECT purpose_class, component, "
        "coalesce(sum(cost) FILTER (WHERE month = ?), 0) - "
        "coalesce(sum(cost) FILTER (WHERE month = ?), 0) AS change FROM attribution "
        "GROUP BY ALL ORDER BY abs(change) DESC, purpose_class, component LIMIT 3",
        [LAST, FIRST]).fetchall()
    moves = page.having("data-move")
    assert [a["data-move"] for a in moves] == [f"{p}/{k}" for p, k, _ in cells]
    for shown, (*_, change) in zip(moves, cells, strict=True):
        assert Decimal(shown["data-change"]) == Decimal(str(round(change, 2))).quantize(CENT)
    assert Decimal(page.having("data-change")[0]["data-change"]) == (
        month_total(demo_warehouse, LAST) - month_total(demo_warehouse, FIRST))


def test_sections_equal_their_tables(quarter, demo_warehouse):
    path, page, data = quarter
    con = demo_warehouse
    for cell in page.having("data-model"):
        assert Decimal(cell["data-cost"]) == sql_cents(
            con, "SELECT coalesce(sum(cost), 0) FROM cost_per_model_monthly WHERE month = ? "
            "AND model IS NOT DISTINCT FROM ?",
            [date.fromisoformat(cell["data-month"] + "-01"), cell["data-model"] or None])
    assert len(page.having("data-model")) == 3 * 3  # churn, fraud, no model × 3 months
    # each model's "of which search" with one decimal, as every other share of the page (it
    # read whole percents: 1 of 13 as "8%")
    html = path.read_text(encoding="utf-8")
    for model in ("churn", "fraud"):
        search, total = con.execute(
            "SELECT sum(CAST(cost AS DECIMAL(38, 10))) FILTER (WHERE purpose_class = 'search'), "
            "sum(CAST(cost AS DECIMAL(38, 10))) FROM cost_per_model_monthly WHERE model = ? "
            "AND month BETWEEN ? AND ?", [model, FIRST, LAST]).fetchone()
        shown = re.search(rf"<tr><td>{model}</td>.*?<td class=\"num\">([^<]*)</td></tr>",
                          html).group(1)
        assert shown == (percent(search / total, 1) if search else "–")
    for cell in page.having("data-storage"):
        row = con.execute("SELECT bytes, cost FROM storage_by_run_status WHERE month = ? AND "
                          "run_status = ?", [date.fromisoformat(cell["data-month"] + "-01"),
                                             cell["data-storage"]]).fetchone() or (0, 0.0)
        assert int(cell["data-bytes"]) == row[0]
        assert Decimal(cell["data-cost"]) == Decimal(str(round(row[1], 2))).quantize(CENT)
    shares = {a["data-share-month"]: (a["data-untracked-share"], a["data-status"])
              for a in page.having("data-share-month")}
    assert shares == {f"{m:%Y-%m}": (f"{s * 100:.1f}", status) for m, s, status in con.execute(
        "SELECT month, untracked_share, status FROM reconciliation ORDER BY month").fetchall()}
    assert shares["2026-08"][1] == "fail"
    searches = {a["data-search"]: a["data-saturating"] for a in page.having("data-search")}
    assert searches == {s: str(sat).lower() for s, sat in con.execute(
        "SELECT search_id, saturating FROM search_trend WHERE month = ?", [LAST]).fetchall()}
    assert data["by_purpose"][LAST]["search"] > data["by_purpose"][FIRST]["search"]
    # a search without an improvement (each model's first) says why, as its chart mark does
    # (its cell read "–")
    html = quarter[0].read_text(encoding="utf-8")
    firsts = [s for s in data["searches"] if s["improvement"] is None]
    assert firsts and all(re.search(
        rf'<tr data-search="{s["search_id"]}".*?<span class="na">no baseline</span>', html)
        for s in firsts)


def test_levers_summed_over_the_period_and_ranked(quarter, demo_warehouse):
    _, page, _ = quarter
    summed = dict(demo_warehouse.execute(
        "SELECT lever, round(sum(dollars), 2) FROM cost_levers WHERE month BETWEEN ? AND ? "
        "GROUP BY lever", [FIRST, LAST]).fetchall())
    shown = [(int(a["data-rank"]), a["data-lever"], Decimal(a["data-dollars"]))
             for a in page.having("data-lever")]
    assert [r for r, *_ in shown] == list(range(1, len(summed) + 1))
    assert {lever: dollars for _, lever, dollars in shown} == {
        k: Decimal(str(v)).quantize(CENT) for k, v in summed.items()}
    assert shown[-1][1] == "use a cheaper card"
    ranked = [dollars for _, lever, dollars in shown[:-1]]
    assert ranked == sorted(ranked, reverse=True)


MISSION_ORDER = ["bound the search", "retrain on measured decay", "cache preprocessing",
                 "delete dead checkpoints", "co-locate compute & data", "chase untracked usage",
                 "checkpoint before going preemptible", "use a cheaper card"]   # SPEC §12


def test_levers_tied_over_the_period_rank_in_the_mission_order():
    """Summed over the period, equal levers rank in the mission order (SPEC §12), not in the
    last month's order: "bound the search" ($50 in January) before "chase untracked usage"
    ($50 in February, first there); $0.30 and $0.30 + 1e-9 are equal to the cent."""
    from cost_pipeline.report.strip import read_rows

    jan, feb = date(2026, 1, 1), date(2026, 2, 1)
    dollars = {jan: {"bound the search": 50.0, "cache preprocessing": 0.1 + 1e-9,
                     "retrain on measured decay": 0.1},
               feb: {"chase untracked usage": 50.0, "cache preprocessing": 0.2,
                     "retrain on measured decay": 0.2}}
    with duckdb.connect() as con:
        for month, figures in dollars.items():
            ranked = sorted(MISSION_ORDER, key=lambda lever: -figures.get(lever, 0.0))
            insert(con, "cost_levers", month,
                   [{"rank": rank, "lever": lever, "dollars": figures.get(lever, 0.0),
                     "what_it_costs_to_pull": "-", "evidence": "-"}
                    for rank, lever in enumerate(ranked, 1)], {})
        got = read_rows(con, "period_levers", jan, feb)
    assert [r["lever"] for r in got] == [
        "bound the search", "chase untracked usage", "retrain on measured decay",
        "cache preprocessing", "delete dead checkpoints", "co-locate compute & data",
        "checkpoint before going preemptible", "use a cheaper card"]
    assert [r["rank"] for r in got] == list(range(1, 9))
    with duckdb.connect() as con:  # yen: JPY 100.4 and JPY 100.3 read alike, a tie
        insert(con, "cost_levers", jan,
               [{"rank": rank, "lever": lever, "dollars": dollars, "what_it_costs_to_pull": "-",
                 "evidence": "-"} for rank, (lever, dollars) in enumerate(
                     [("cache preprocessing", 100.4), ("bound the search", 100.3)], 1)], {})
        assert [r["lever"] for r in read_rows(con, "period_levers", jan, jan, 0)][:2] == [
            "bound the search", "cache preprocessing"]
        assert [r["lever"] for r in read_rows(con, "period_levers", jan, jan)][:2] == [
            "cache preprocessing", "bound the search"]


def test_levers_of_a_period_without_dollars_rank_as_cost_levers_ranks_a_month():
    """The mission order period_levers.sql spells out is cost_levers.sql's."""
    from cost_pipeline.config import parse_config
    from cost_pipeline.report.strip import read_rows
    from cost_pipeline.warehouse import month_params, register_datasets, replace_month, sql_text

    month = date(2026, 1, 1)
    with duckdb.connect() as con:
        insert_lines(con, month, [])
        register_datasets(con, [])
        replace_month(con, "cost_levers", month, sql_text("cost_levers"),
                      month_params(parse_config({}, Path(".")), month))
        monthly = [lever for (lever,) in con.execute(
            "SELECT lever FROM cost_levers ORDER BY rank").fetchall()]
        period = [r["lever"] for r in read_rows(con, "period_levers", month, month)]
    assert monthly == period == MISSION_ORDER


def test_default_path_and_one_month_period(warehouse, demo_warehouse):
    path, data = write_period_report(warehouse, FIRST, LAST)
    assert path == period_report_path(warehouse, FIRST, LAST)
    assert path.name == "cost-report-2026-07_2026-09.html" and path.parent.name == "reports"
    path, data = write_period_report(warehouse, LAST, LAST)
    html = path.read_text(encoding="utf-8")
    assert "One month: nothing to compare." in html
    assert Decimal(Elements(html).one("data-period-total")) == month_total(demo_warehouse, LAST)
    # one month's levers rank as that month ranks them, ties included
    assert [(r["rank"], r["lever"]) for r in data["levers"]] == demo_warehouse.execute(
        "SELECT rank, lever FROM cost_levers WHERE month = ? ORDER BY rank", [LAST]).fetchall()


def test_missing_months_and_bad_ranges_are_one_line_errors(warehouse, tmp_path):
    with pytest.raises(ReportError) as missing:
        write_period_report(warehouse, date(2026, 5, 1), LAST, out=tmp_path / "x.html")
    # the file named, as the monthly report and the exports name it
    assert str(missing.value) == (f"no billing data for 2026-05, 2026-06 in {warehouse}: "
                                  "materialize them first, or report a shorter period")
    with pytest.raises(ReportError, match="starts 2026-09, after its end 2026-07"):
        write_period_report(warehouse, LAST, FIRST)
    with pytest.raises(ReportError, match="more than 36 months"):
        write_period_report(warehouse, date(2020, 1, 1), LAST)
    assert not (tmp_path / "x.html").exists()


def _line(n: int, month: date, cost: float, currency: str = "EUR") -> dict:
    start = datetime(month.year, month.month, 1, n)
    return {"ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=n + 1),
            "ChargeCategory": "Usage", "EffectiveCost": cost, "BillingCurrency": currency,
            "x_CostComponent": "gpu", "x_SourceLine": f"l{n}"}


def test_hand_made_months_exact_in_their_currency(tmp_path):
    """Totals as DECIMAL sums of the lines (0.1 + 0.2 is not 0.30000000000000004 here), the
    bill's currency on the page, a missing table a note, mixed currencies refused."""
    path, oct_, nov = tmp_path / "w.duckdb", date(2026, 10, 1), date(2026, 11, 1)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, oct_, [_line(0, oct_, 0.1), _line(1, oct_, 0.2), _line(2, oct_, 1.005)])
        insert_lines(con, nov, [_line(0, nov, 2.675), _line(1, nov, -0.5)])
        con.execute("DROP TABLE cost_levers")
    out, data = write_period_report(str(path), oct_, nov, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    page = Elements(html)
    assert {a["data-month-total"]: a["data-cost"] for a in page.having("data-month-total")} == {
        "2026-10": "1.31", "2026-11": "2.18"}  # 1.305 and 2.175, rounded half up
    assert page.one("data-period-total") == "3.48"
    assert "EUR 3.48" in html and "$" not in page.one("data-period-total")
    assert "the warehouse has no <code>cost_levers</code> table" in html
    assert html.count("<code>attribution</code> has no rows for them") == 3  # moved, lines, chart
    with duckdb.connect(str(path)) as con:
        insert_lines(con, nov, [_line(5, nov, 1.0, "USD")])
    with pytest.raises(ReportError, match="more than one currency"):
        write_period_report(str(path), oct_, nov, out=tmp_path / "p.html")


def test_a_month_billed_but_not_attributed_is_not_computed_not_zero(tmp_path):
    """January's bill is in the warehouse, its attribution is not (a month materialized in
    part): the sections that read the attribution say so for January, and the summary does
    not call February's search cost the month's move — they read January as $0 before."""
    path, jan, feb = tmp_path / "w.duckdb", date(2026, 1, 1), date(2026, 2, 1)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, jan, [_line(0, jan, 100.0, "USD")])
        insert_lines(con, feb, [_line(0, feb, 90.0, "USD")])
        insert(con, "attribution", feb, [{
            "x_SourceLine": "l0", "run_id": "r0", "purpose_class": "search",
            "component": "gpu", "cost": 90.0, "hours": 1.0, "accelerator_hours": 1.0,
            "share": 1.0, "rule": "compute"}], {})
    out, data = write_period_report(str(path), jan, feb, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    notes = Elements(html).having("data-not-computed")
    assert [n["data-not-computed"] for n in notes] == ["attribution"] * 3  # moved, lines, chart
    assert "Not computed for January 2026: <code>attribution</code>" in html
    assert "most of the move" not in html and "data-move=" not in html


def _attributed_months(path: Path, currency: str, months: dict[date, tuple]) -> None:
    """Each month: one billing line of its total, and its production and search storage."""
    with duckdb.connect(str(path)) as con:
        for month, (total, production, search) in months.items():
            insert_lines(con, month, [_line(0, month, total, currency)])
            insert(con, "attribution", month, [
                {"x_SourceLine": "l0", "run_id": run, "purpose_class": purpose,
                 "component": "storage", "cost": cost, "hours": None,
                 "accelerator_hours": None, "share": cost / total, "rule": "bucket_storage"}
                for run, purpose, cost in (("p", "production", production),
                                           ("s", "search", search)) if cost is not None], {})


def _period_summary(path: Path, tmp_path: Path) -> tuple[list[str], str]:
    out, _ = write_period_report(str(path), FIRST, LAST, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    return re.findall(r"<li>([^<]*)</li>", html[html.index('class="summary"'):]
                      .split("</ul>")[0]), html


def test_moves_that_round_to_nothing_in_the_currency_are_not_moves(tmp_path):
    """Three months that read alike in yen: the summary said "the monthly bill rose by JPY 0
    (+0.0%); most of the move: production training storage −JPY 0, hyperparameter search
    storage +JPY 0" (changes of −0.3 and +0.2 yen). In dinars a move of 50 fils is kept, one
    of 0.3 fils is not."""
    jpy = tmp_path / "jpy.duckdb"
    _attributed_months(jpy, "JPY", {FIRST: (800.2, 500.0, 300.2), MONTHS[1]: (800.2, 500.0, 300.2),
                                    LAST: (800.4, 499.7, 300.4)})
    summary, html = _period_summary(jpy, tmp_path)
    assert summary[1] == "From July to September the monthly bill stayed."
    assert "−JPY 0" not in html and "+JPY 0" not in html and "data-move=" not in html
    assert "No purpose class × component changed" in html
    kwd = tmp_path / "kwd.duckdb"
    _attributed_months(kwd, "KWD", {FIRST: (80.0002, 50.0, 30.0002),
                                    MONTHS[1]: (80.0002, 50.0, 30.0002),
                                    LAST: (80.0499, 49.9997, 30.0502)})
    summary, html = _period_summary(kwd, tmp_path)
    # 80.0499 − 80.0002 = 0.0497 → 0.050, 0.0621% of July's; 30.0502 − 30.0002 = +0.050
    assert summary[1] == ("From July to September the monthly bill rose by KWD 0.050 (+0.1%); "
                          "most of the move: hyperparameter search storage +KWD 0.050.")
    assert [a["data-move"] for a in Elements(html).having("data-move")] == ["search/storage"]
    assert "−KWD 0.000" not in html and "+KWD 0.000" not in html


def test_a_cell_absent_from_a_month_reads_none_not_zero(tmp_path):
    """A search that began after July: its storage cell was absent in July, and "what moved"
    wrote July's cost `$0.00` as if it had been billed nothing; it reads "–" (none), and the
    change is its whole September cost."""
    path = tmp_path / "w.duckdb"
    _attributed_months(path, "USD", {FIRST: (500.0, 500.0, None), MONTHS[1]: (500.0, 500.0, None),
                                     LAST: (800.0, 500.0, 300.0)})
    summary, html = _period_summary(path, tmp_path)
    assert summary[1] == ("From July to September the monthly bill rose by $300.00 (+60.0%); "
                          "most of the move: hyperparameter search storage +$300.00.")
    row = html[html.index('data-move="search/storage"'):].split("</tr>")[0]
    assert re.findall(r'<td class="num">([^<]*)</td>', row) == ["–", "$300.00"]


def test_a_failed_months_share_reads_apart_from_its_threshold(tmp_path):
    """September's untracked share 21.622% against a 21.6% threshold read "21.6% … threshold
    21.6%" in the summary and the table; both write it as the month's page does (21.62%)."""
    path = tmp_path / "w.duckdb"
    _attributed_months(path, "USD", {m: (500.0, 400.0, 100.0) for m in MONTHS})
    with duckdb.connect(str(path)) as con:
        for month, share in zip(MONTHS, (0.05, 0.1, 0.21622), strict=True):
            insert(con, "reconciliation", month, [{
                "untracked_share": share, "threshold": 0.216,
                "status": "fail" if share > 0.216 else "pass", "billed_gpu_hours": 100.0,
                "tracked_gpu_hours": 100.0 * (1 - share), "untracked_gpu_hours": 100.0 * share,
                "untracked_cost": 0.0, "provisional": False, "untracked_cost_share": share,
                "coverage": 1.0, "over_claimed_gpu_hours": 0.0,
                "unbilled_claim_gpu_hours": 0.0, "total_effective_cost": 500.0,
                "attributed_cost": 500.0, "unallocated_cost": 0.0, "runs_without_end": 0}], {})
    summary, html = _period_summary(path, tmp_path)
    assert "Reconciliation failed in 2026-09 (21.62% of GPU-hours untracked, threshold 21.6%)." \
        in summary
    row = html[html.index('data-share-month="2026-09"'):].split("</tr>")[0]
    assert re.findall(r'<td class="num">([^<]*)</td>', row)[:2] == ["21.62%", "21.6%"]
    row = html[html.index('data-share-month="2026-07"'):].split("</tr>")[0]
    assert re.findall(r'<td class="num">([^<]*)</td>', row)[:2] == ["5.0%", "21.6%"]


def test_monthly_report_strip_of_six_months(warehouse, demo_warehouse, tmp_path):
    path, data = write_report(warehouse, LAST, out=tmp_path / "sep.html")
    html = path.read_text(encoding="utf-8")
    page = Elements(html)
    strip = {a["data-strip-month"]: a.get("data-strip-total")
             for a in page.having("data-strip-month")}
    assert list(strip) == ["2026-04", "2026-05", "2026-06", "2026-07", "2026-08", "2026-09"]
    for month in MONTHS:
        assert Decimal(strip[f"{month:%Y-%m}"]) == month_total(demo_warehouse, month)
    # a month the warehouse lacks has no total (it wrote 0.00 beside its "–")
    assert [strip[m] for m in ("2026-04", "2026-05", "2026-06")] == [None] * 3
    assert html.count("not in the warehouse") == 3  # April to June were never materialized
    shares = [a["data-strip-share"] for a in page.having("data-strip-share")]
    assert len(shares) == 6
    search = data["strip"]["by_purpose"][LAST]["search"]
    assert search.quantize(CENT) == sql_cents(
        demo_warehouse, "SELECT sum(cost) FROM attribution WHERE month = ? AND "
        "purpose_class = 'search'", [LAST])


def test_monthly_report_strip_shows_each_month_in_its_own_currency(tmp_path):
    """SPEC §5: one currency per month, not per warehouse. January billed USD 100 reads
    `$100.00` in February's (EUR) strip, where it read `EUR 100.00`."""
    path, jan, feb = tmp_path / "w.duckdb", date(2026, 1, 1), date(2026, 2, 1)
    with duckdb.connect(str(path)) as con:
        for month, cost, currency in ((jan, 100.0, "USD"), (feb, 90.0, "EUR")):
            insert_lines(con, month, [_line(0, month, cost, currency)])
            insert(con, "attribution", month, [
                {"x_SourceLine": "l0", "run_id": None, "purpose_class": "untracked",
                 "component": "gpu", "cost": cost, "hours": 1.0, "accelerator_hours": 1.0,
                 "share": 1.0, "rule": "compute"}], {})
    out, data = write_report(str(path), feb, out=tmp_path / "feb.html")
    html = out.read_text(encoding="utf-8")
    strip = html[html.index('id="strip"'):html.index('id="bill"')]
    assert strip.count("$100.00") == 2 and strip.count("EUR 90.00") == 2  # untracked, total
    assert "EUR 100.00" not in strip and "$90.00" not in strip
    cells = {a["data-strip-month"]: a for a in Elements(strip).having("data-strip-month")}
    assert (cells["2026-01"]["data-strip-currency"], cells["2026-02"]["data-strip-currency"]) == (
        "USD", "EUR")
    assert "Each month in the currency it was billed in" in strip
    assert data["strip"]["currencies"] == {jan: "USD", feb: "EUR"}


def test_period_report_renders_in_headless_chromium(quarter, demo_warehouse, tmp_path):
    path, _, _ = quarter
    pixels, dom = render_in_chromium(path, tmp_path, height=3000)
    assert pixels.shape[:2] == (3000, 1200)
    assert pixels.std() > 0.05  # not a blank page
    ink = (pixels.mean(axis=2) < 0.6).mean()
    assert 0.01 < ink < 0.5  # text and charts, not a solid block
    period = sql_cents(demo_warehouse, "SELECT sum(EffectiveCost) FROM billing_facts "
                       "WHERE month BETWEEN ? AND ?", [FIRST, LAST])
    assert f"${period:,}" in dom
    for month in MONTHS:
        assert f"${month_total(demo_warehouse, month):,}" in dom
    assert dom.count("<svg") >= 2  # cost by purpose class, cost per unit of improvement
    assert "saturating" in dom and "FAIL" in dom


def test_long_tables_list_the_costliest_models_and_their_searches(tmp_path):
    """More models and searches than a page should list: the models table shows the LONG
    costliest and one row with the others' count and cost; the searches table and chart show
    whole models, those whose searches cost most in the period, while they fit in LONG rows;
    the summary names the first saturating searches and counts the others."""
    from cost_pipeline.report.data import LONG
    from cost_pipeline.report.period import NAMED

    path, oct_ = tmp_path / "w.duckdb", date(2026, 10, 1)
    n, per_model = LONG + 5, 4                  # 4 searches a model: 12 models fill LONG = 50
    spend = {f"m{i:03d}": float(i) for i in range(1, n + 1)}    # m055 spends most
    with duckdb.connect(str(path)) as con:
        insert_lines(con, oct_, [_line(0, oct_, 1.0, "USD")])
        insert(con, "cost_per_model_monthly", oct_,
               model_cost_rows(spend, "search", untracked=0.25), {})
        insert(con, "search_trend", oct_,
               [{"model": m, "metric_name": "auc", "search_id": f"{m}-s{k}",
                 "search_start": datetime(2026, 10, 1 + k), "search_order": k + 1, "runs": 3,
                 "best_metric": 0.9, "improvement": 0.01, "accelerator_hours": 1.0,
                 "cost": c / per_model, "cost_this_month": c / per_model,
                 "cost_per_improvement": 100 * c / per_model, "saturating": k > 0}
                for m, c in spend.items() for k in range(per_model)], {})
    out, _ = write_period_report(str(path), oct_, oct_, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    page = Elements(html)
    ranked = sorted(spend, key=lambda m: -spend[m])
    assert [a["data-model"] for a in page.having("data-model")] == [*ranked[:LONG], ""]
    rests = [Decimal(a["data-rest-cost"]) for a in page.having("data-rest-cost")]
    fits = LONG // per_model
    assert rests == [Decimal(str(sum(spend[m] for m in ranked[LONG:]))).quantize(CENT),
                     Decimal(str(sum(spend[m] for m in ranked[fits:]))).quantize(CENT)]
    shown = [a["data-search"] for a in page.having("data-search")]
    assert shown == [f"{m}-s{k}" for m in sorted(ranked[:fits]) for k in range(per_model)]
    assert f"… and {(n - fits) * per_model} more searches" in html
    assert f"… and {n - LONG} more models" in html
    saturating = (n * (per_model - 1))
    assert f"and {saturating - NAMED} more searches bought less improvement" in html
    # the chart marks the searches the table lists, and no other
    chart = html[html.index('aria-label="Cost per unit of improvement across searches"'):]
    chart = chart[:chart.index("</svg>")]
    marked = set(re.findall(r"\bm\d{3}-s\d\b", chart))
    assert marked == set(shown)


def test_a_last_month_older_than_a_restated_month_says_so(warehouse, quarter, tmp_path):
    """August restated and materialized again after September: September's searches kept the
    cost to date of August's old attribution, and the page showed it beside August's new
    figures, saying nothing. The summary (and the command's stderr) say what to redo."""
    import html
    import shutil

    assert not [s for s in quarter[2]["searches"] if s["stale"]]   # the demo as materialized
    copy = tmp_path / "restated.duckdb"
    shutil.copy(warehouse, copy)
    with duckdb.connect(str(copy)) as con:
        (search,) = con.execute(
            "SELECT min(search_id) FROM search_trend WHERE month = ? AND cost_this_month > 0",
            [MONTHS[1]]).fetchone()
        con.execute("UPDATE search_trend SET cost_this_month = cost_this_month + 25 "
                    "WHERE month = ? AND search_id = ?", [MONTHS[1], search])
    path, data = write_period_report(copy, FIRST, LAST, out=tmp_path / "restated.html")
    assert [s["search_id"] for s in data["searches"] if s["stale"]] == [search]
    first = path.read_text(encoding="utf-8").split('<ul class="summary">')[1]
    assert html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", first))).strip().startswith(
        f"Out of date: the cost to date of {search}, as 2026-09 computed it, differs from the "
        "months' own figures: a month before it was materialized again after it, or the runs "
        "changed since some months were. Materialize the months again, in order, then this "
        "report.")
    # September's own page showed the same stale cost to date saying nothing: it says so too
    page, _ = write_report(copy, LAST, out=tmp_path / "september.html")
    first = page.read_text(encoding="utf-8").split('<ul class="summary">')[1]
    assert html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", first))).strip().startswith(
        f"Out of date: the cost to date of {search}, as 2026-09 computed it, differs from the "
        "months' own figures")
    page, _ = write_report(copy, MONTHS[0], out=tmp_path / "july.html")   # July: before it
    assert "Out of date" not in page.read_text(encoding="utf-8")


def test_a_last_month_older_than_a_months_changed_runs_says_so(demo_quarter, tmp_path):
    """An August search run's metric restated in the runs file and August materialized again
    after September: the searches' costs stay, so their best, improvement and saturation
    were September's old ones, shown as current on the period page and September's with no
    word. What September's searches were computed from (every month's input tokens up to it,
    kept as its `search_trend:read` basis) no longer holds August's runs as they are now:
    both pages say so, without naming searches, and September materialized again clears
    it; July's and August's own pages read no later month."""
    import html

    from cost_pipeline.cli.materialize import materialize_month
    from tests.support.warehouse_dump import copy_with_warehouse

    config = copy_with_warehouse(Path(demo_quarter[0]), tmp_path / "demo")
    runs = config.parent / "runs.csv"
    runs.write_text(runs.read_text().replace(",val_auc,0.8487,", ",val_auc,0.9487,", 1))
    warehouse = load_config(config).warehouse_path
    assert materialize_month(str(config), MONTHS[1], progress=False).success

    def summary(page: Path) -> str:
        first = page.read_text(encoding="utf-8").split('<ul class="summary">')[1]
        return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", first))).strip()

    path, data = write_period_report(warehouse, FIRST, LAST, out=tmp_path / "p.html")
    assert not [s for s in data["searches"] if s["stale"]]   # the costs agree
    note = ("Out of date: the searches' figures as 2026-09 computed them (cost to date, best, "
            "improvement, saturation) predate a change to a month up to it — its bill, runs "
            "or attribution materialized again after it. Materialize the months again, in "
            "order, then this report.")
    assert summary(path).startswith(note)
    assert summary(write_report(warehouse, LAST, out=tmp_path / "09.html")[0]).startswith(note)
    for month in MONTHS[:2]:
        page, _ = write_report(warehouse, month, out=tmp_path / f"{month:%m}.html")
        assert "Out of date" not in page.read_text(encoding="utf-8")
    assert materialize_month(str(config), LAST, progress=False).success
    path, _ = write_period_report(warehouse, FIRST, LAST, out=tmp_path / "p.html")
    assert "Out of date" not in path.read_text(encoding="utf-8")


def test_the_summary_names_the_periods_saturated_searches_only(warehouse, tmp_path):
    # a one-month report named every saturated search of the model's history, ones that
    # cost nothing in the month among them; the search table still lists that history
    import shutil

    from cost_pipeline.report.period import summary

    copy = tmp_path / "w.duckdb"
    shutil.copy(warehouse, copy)
    old = "s-2026-07"
    with duckdb.connect(str(copy)) as con:   # July's search saturated, idle in September
        con.execute("UPDATE search_trend SET saturating = true, cost_this_month = 0 "
                    "WHERE month = ? AND search_id = ?", [LAST, old])
    for first in (FIRST, LAST):
        _, data = write_period_report(copy, first, LAST, out=tmp_path / "p.html")
        said = [s for s in summary(data, "$") if s.startswith("Searching has saturated")]
        named = re.findall(r"(\S+) \(", said[0]) if said else []
        assert (old in named) == (first == FIRST), (first, named)
        assert old in [s["search_id"] for s in data["searches"]]


def test_a_month_materialized_without_lines_is_not_called_unmaterialized(tmp_path):
    """A month materialized with nothing billed yet was "no billing data … materialize the
    month first", which materializing again could not mend: the monthly and the period report
    say it has no billing lines; a month never materialized still says to materialize it."""
    from cost_pipeline.config import parse_config
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.support.cur_rows import LOG

    path, oct_, nov, dec = tmp_path / "w.duckdb", date(2026, 10, 1), date(2026, 11, 1), date(
        2026, 12, 1)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, oct_, [_line(0, oct_, 1.0)])
        build_billing_facts(con, parse_config({}, tmp_path), nov, LOG)   # nothing billed
    with pytest.raises(ReportError) as empty:
        write_report(str(path), nov, out=tmp_path / "n.html")
    assert str(empty.value) == ("2026-11 has no billing lines (it was materialized: nothing "
                                "billed yet), so there is no report")
    with pytest.raises(ReportError) as never:
        write_report(str(path), dec, out=tmp_path / "d.html")
    assert str(never.value) == (f"no billing data for 2026-12 in {path}: materialize the "
                                "month first")
    with pytest.raises(ReportError) as period:
        write_period_report(str(path), oct_, nov, out=tmp_path / "p.html")
    assert str(period.value) == ("2026-11 has no billing lines (materialized: nothing billed "
                                 "yet): report a period of billed months")
    with pytest.raises(ReportError) as both:  # November was not named beside December
        write_period_report(str(path), oct_, dec, out=tmp_path / "p.html")
    assert str(both.value) == (f"no billing data for 2026-12 in {path} (materialize it "
                               "first), and 2026-11 has no billing lines (materialized: nothing "
                               "billed yet): report a period of billed months")
    with pytest.raises(ReportError) as alone:
        write_period_report(str(path), dec, dec, out=tmp_path / "p.html")
    assert str(alone.value) == (f"no billing data for 2026-12 in {path}: materialize it first, "
                                "or report a shorter period")
    # the 6-month strip of a later month: November was materialized with nothing billed,
    # December never was (November's header said "not in the warehouse" too, beside the
    # reconciliation's 0.0% of a materialized month)
    jan = date(2027, 1, 1)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, jan, [_line(1, jan, 2.0)])
    html = write_report(str(path), jan, out=tmp_path / "j.html")[0].read_text(encoding="utf-8")
    strip = html[html.index('id="strip"'):html.index('id="bill"')]
    heads = re.findall(r'<th class="num">(\w+ \d+)(?:<br><span class="na">([^<]+)</span>)?',
                       strip)
    assert heads == [("Aug 2026", "not in the warehouse"), ("Sep 2026", "not in the warehouse"),
                     ("Oct 2026", ""), ("Nov 2026", "nothing billed"),
                     ("Dec 2026", "not in the warehouse"), ("Jan 2027", "")]


def test_a_report_folder_that_cannot_be_made_is_one_line_naming_it(warehouse, tmp_path):
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the reports folder goes")
    for write, args in ((write_report, (LAST,)), (write_period_report, (FIRST, LAST))):
        with pytest.raises(OSError) as caught:
            write(warehouse, *args, out=blocker / "page.html")
        assert str(caught.value) == (f"cannot write {blocker / 'page.html'}: {blocker} is a "
                                     "file, not a folder")
    assert blocker.read_text() == "a file where the reports folder goes"


def test_a_search_that_improved_at_no_cost_is_marked_no_cost_not_no_gain():
    """A search whose cost is 0 or a credit has no unit cost (search_trend) though it
    improved: a hollow mark on the axis saying so, not the red "no gain" at the top edge of
    one that bought nothing."""
    from cost_pipeline.report.period_charts import search_trend_figure

    def search(search_id, order, improvement, unit, saturating):
        return {"model": "m", "search_id": search_id, "search_order": order,
                "best_metric": 0.9, "improvement": improvement, "cost_per_improvement": unit,
                "saturating": saturating}

    fig = search_trend_figure([
        search("S1", 1, None, None, False), search("S2", 2, 0.01, None, False),
        search("S3", 3, 0.0, None, True), search("S4", 4, 0.02, 500.0, False)], "$")
    notes = {t.get_text(): t.xy for t in fig.axes[0].texts if "\n" in t.get_text()}
    assert notes.keys() == {"S1\nno baseline", "S2\nno cost", "S3\nno gain  saturating",
                            "S4\n$500"}
    assert notes["S2\nno cost"][1] == 0.0  # on the axis; no gain above the dearest unit cost
    assert notes["S3\nno gain  saturating"][1] > notes["S4\n$500"][1] == 500.0


def test_a_search_that_logged_no_metric_says_no_metric_not_no_baseline(tmp_path):
    """churn's third search SC logged no metric (best_metric NULL) though the model had a
    previous best (0.92): its row read "no baseline" and its chart mark too, as if the model
    had no earlier result. It says "no metric"; SA, the model's first search (a result, no
    previous best), still says "no baseline"; SB improved +0.02 at $1,000.00 a unit."""
    path, mar = tmp_path / "w.duckdb", date(2026, 3, 1)

    def search(search_id, order, best, previous, cost, metric_name="val_auc"):
        improvement = None if best is None or previous is None else round(best - previous, 6)
        return {"model": "churn", "metric_name": metric_name, "search_id": search_id,
                "search_start": datetime(2026, 3, order), "search_order": order, "runs": 3,
                "best_metric": best, "previous_best": previous, "improvement": improvement,
                "accelerator_hours": 1.0, "cost": cost, "cost_this_month": cost,
                "cost_per_improvement": cost / improvement if improvement else None,
                "saturating": False, "currency": "USD"}

    with duckdb.connect(str(path)) as con:
        insert_lines(con, mar, [_line(0, mar, 81.0, "USD")])
        insert(con, "search_trend", mar, [search("SA", 1, 0.90, None, 20.0),
                                          search("SB", 2, 0.92, 0.90, 20.0),
                                          search("SC", 3, None, 0.92, 41.0, None)], {})
    out, _ = write_period_report(str(path), mar, mar, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    rows = dict(re.findall(r'<tr data-search="(S\w)".*?>(.*?)</tr>', html, re.S))

    def cells(search_id):
        return [c for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[search_id]) if c]

    assert cells("SC")[:5] == ["3", "<code>SC</code>", "churn", "2026-03-03", "3"]
    assert cells("SC")[5:] == ["$41.00", "$41.00", '<span class="na">no metric</span>', "–"]
    assert cells("SA")[5:] == ["$20.00", "$20.00",
                               '<span class="na">no baseline</span> <code>val_auc</code>', "–"]
    assert cells("SB")[5:] == ["$20.00", "$20.00", "+0.02 <code>val_auc</code>", "$1,000.00"]
    chart = html[html.index('aria-label="Cost per unit of improvement across searches"'):]
    chart = chart[:chart.index("</svg>")]
    assert chart.count("no metric") == 1 and chart.count("no baseline") == 1

    from cost_pipeline.report.period_charts import search_trend_figure
    fig = search_trend_figure([search("SA", 1, 0.90, None, 20.0),
                               search("SC", 3, None, 0.92, 41.0, None)], "$")
    notes = {t.get_text(): t.xy for t in fig.axes[0].texts if "\n" in t.get_text()}
    assert notes == {"SA\nno baseline": (1, 0.0), "SC\nno metric": (3, 0.0)}


def test_pages_drawn_again_later_are_the_same_bytes(tmp_path, monkeypatch):
    """Same input, same output: a page said when it was drawn ("generated 2026-12-07 08:28
    UTC"), so the same months drawn a minute later differed. It says what the bill holds
    instead: the end of its latest charge."""
    import cost_pipeline.report.period as period_module
    import cost_pipeline.report.render as render_module

    path, oct_, nov = tmp_path / "w.duckdb", date(2026, 10, 1), date(2026, 11, 1)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, oct_, [_line(0, oct_, 1.0), _line(3, oct_, 2.0)])
        insert_lines(con, nov, [_line(5, nov, 2.0)])
    first = (write_report(str(path), oct_, out=tmp_path / "m1.html")[0].read_bytes(),
             write_period_report(str(path), oct_, nov, out=tmp_path / "p1.html")[0].read_bytes())

    class Later(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2031, 1, 2, 3, 4, tzinfo=tz)

    for module in (render_module, period_module):
        if hasattr(module, "datetime"):
            monkeypatch.setattr(module, "datetime", Later)
    again = (write_report(str(path), oct_, out=tmp_path / "m2.html")[0].read_bytes(),
             write_period_report(str(path), oct_, nov, out=tmp_path / "p2.html")[0].read_bytes())
    assert again == first
    assert "charges to 2026-10-01 04:00 UTC" in first[0].decode()
    assert "charges to 2026-11-01 06:00 UTC" in first[1].decode()


def test_a_period_crossing_a_year_names_its_months_with_their_years(tmp_path):
    """January 2025 to January 2026 read "From January to January the monthly bill rose",
    under a table headed January | January."""
    from cost_pipeline.report.period import lever_summary, summary

    path, jan, dec, next_jan = (tmp_path / "w.duckdb", date(2025, 1, 1), date(2025, 12, 1),
                                date(2026, 1, 1))
    with duckdb.connect(str(path)) as con:
        month = jan
        while month <= next_jan:
            insert_lines(con, month, [_line(0, month, 2.0 if month == next_jan else 1.0,
                                            "USD")])
            month = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    out, data = write_period_report(str(path), jan, next_jan, out=tmp_path / "p.html")
    said = summary(data, "$")
    assert said[0].endswith("$1.00 in December 2025, $2.00 in January 2026.")
    assert said[1].startswith("From January 2025 to January 2026 the monthly bill rose by $1.00")
    html = out.read_text(encoding="utf-8")
    assert "What moved from January 2025 to January 2026</h2>" in html
    _, data = write_period_report(str(path), jan, dec, out=tmp_path / "q.html")
    assert summary(data, "$")[1].startswith("From January to December the monthly bill")
    # the levers' lines `demo` prints: "(Dec $5.00, Jan $7.00)" across a year
    levers = [{"rank": 1, "lever": "bound the search", "dollars": Decimal("12.00"),
               "by_month": {dec: Decimal("5.00"), next_jan: Decimal("7.00")}}]
    lines = lever_summary({"currency": "USD", "first": dec, "last": next_jan,
                           "months": [dec, next_jan], "levers": levers})
    assert lines == ["1. bound the search        $12.00  (Dec 2025 $5.00, Jan 2026 $7.00)"]
    lines = lever_summary({"currency": "USD", "first": dec, "last": dec, "months": [dec],
                           "levers": levers})
    assert lines == ["1. bound the search        $12.00  (Dec $5.00)"]


def test_searches_of_other_currencies_read_in_their_own(tmp_path):
    """A dollar period (July–August) listed S2, billed ¥1,000.6 in April, as "$1,000.60" at
    "$33,353.33" a unit, S3 (€12.34 in May) as "$12.34", and said "Searching has saturated:
    S4" from S4's $2,000 a unit against S3's €1,234. Each search's cost to date and price read
    in the currency it was billed in, and S4 is compared with S1's $3,000 only."""
    from tests.decisions.test_waste_sql import AUGUST, JULY, currency_months

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        ensure_schema(con)
        register_datasets(con, [])
        currency_months(con)
    out, data = write_period_report(str(path), JULY, AUGUST, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    rows = dict(re.findall(r'<tr data-search="(S\d)".*?>(.*?)</tr>', html, re.S))

    def cells(search):
        return [c for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[search]) if c]

    # cost to date, in the period (none: they ran before it), improvement, cost per unit
    assert cells("S1")[5:] == ["$30.00", "–", "+0.01 <code>val_auc</code>", "$3,000.00"]
    assert cells("S2")[5:] == ["JPY 1,001", "–", "+0.03 <code>val_auc</code>", "JPY 33,353"]
    assert cells("S3")[5:] == ["EUR 12.34", "–", "+0.01 <code>val_auc</code>", "EUR 1,234.00"]
    assert cells("S4")[5:7] == ["$40.00", "$40.00"]   # to date, in the period
    assert cells("S4")[-1] == "$2,000.00"
    assert [a["data-search-currency"] for a in Elements(html).having("data-search-currency")] \
        == ["USD", "JPY", "EUR", "USD"]
    assert "saturating</span></td>" not in html and "Searching has saturated" not in html
    chart = html[html.index('aria-label="Cost per unit of improvement across searches"'):]
    chart = chart[:chart.index("</svg>")]
    assert "JPY 33.35k" in chart and "EUR 1,234" in chart and "$2,000" in chart


def test_the_strip_shows_no_untracked_share_for_a_month_nothing_billed(tmp_path):
    """November was materialized with nothing billed: its reconciliation row holds share 0
    and status pass (SPEC §7: 0 when nothing is billed), and the strip showed a green "0.0%"
    under "nothing billed". Its share reads "–", without the pass colour; a billed month's
    share stays."""
    from cost_pipeline.config import parse_config
    from cost_pipeline.ingest.billing import build_billing_facts
    from cost_pipeline.warehouse import month_params, replace_month, sql_text
    from tests.support.cur_rows import LOG

    path, oct_, nov, dec = tmp_path / "w.duckdb", date(2026, 10, 1), date(2026, 11, 1), date(
        2026, 12, 1)
    cfg = parse_config({}, tmp_path)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, oct_, [_line(0, oct_, 1.0, "USD")])
        build_billing_facts(con, cfg, nov, LOG)   # nothing billed
        insert_lines(con, dec, [_line(0, dec, 2.0, "USD")])
        register_datasets(con, [])
        for month in (oct_, nov, dec):
            replace_month(con, "reconciliation", month, sql_text("reconciliation"),
                          month_params(cfg, month))
        assert con.execute("SELECT untracked_share, status FROM reconciliation WHERE month = ?",
                           [nov]).fetchone() == (0.0, "pass")
    html = write_report(str(path), dec, out=tmp_path / "d.html")[0].read_text(encoding="utf-8")
    strip = html[html.index('id="strip"'):html.index('id="bill"')]
    shares = dict(re.findall(r'<td class="num" data-strip-share="([\d-]+)">(.*?)</td>', strip))
    assert shares["2026-11"] == "–"
    assert shares["2026-10"] == '<span class="pass-text">0.0%</span>'


def _search_cells(html: str) -> dict[str, list[str]]:
    """Each search's row of the page: its cost to date, cost in the period, improvement and
    cost per unit (the cells after its order, id, model, start and runs)."""
    rows = dict(re.findall(r'<tr data-search="(S\d)".*?>(.*?)</tr>', html, re.S))
    return {search: [c for c in re.findall(r"<td[^>]*>(.*?)</td>", row) if c][5:]
            for search, row in rows.items()}


# S1 … S4 as tests.decisions.test_waste_sql.currency_months bills them: in their own currency
EACH_IN_ITS_OWN = {
    "S1": ["$30.00", "–", "+0.01 <code>val_auc</code>", "$3,000.00"],
    "S2": ["JPY 1,001", "–", "+0.03 <code>val_auc</code>", "JPY 33,353"],
    "S3": ["EUR 12.34", "–", "+0.01 <code>val_auc</code>", "EUR 1,234.00"],
    "S4": ["$40.00", "$40.00", "+0.02 <code>val_auc</code>", "$2,000.00"],
}


def test_a_warehouse_written_before_search_currencies_reads_each_search_in_its_own(tmp_path):
    """A warehouse whose search_trend predates its `currency` column: both reports stopped
    with "Binder Error: Table "t" does not have a column named "currency"" (a report opens
    the warehouse read-only and adds no column). Once a materialization added it, the rows
    written before held NULL there, and every search of those months read "billed in more
    than one currency". Each search's currency is that of the months its runs were billed
    in, read from the attribution and the months' bills: S2 (April, yen) reads JPY 1,001 and
    JPY 33,353 a unit, S3 (May, euros) EUR 12.34, in the old layout and after it alike."""
    from tests.decisions.test_waste_sql import AUGUST, JULY, currency_months

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        ensure_schema(con)
        register_datasets(con, [])
        currency_months(con)
        # the table as it was before the column, with the same rows
        con.execute("CREATE TABLE search_trend_before AS "
                    "SELECT * EXCLUDE (currency) FROM search_trend")
        con.execute("DROP TABLE search_trend")
        con.execute("ALTER TABLE search_trend_before RENAME TO search_trend")
    out, data = write_period_report(str(path), JULY, AUGUST, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    assert _search_cells(html) == EACH_IN_ITS_OWN
    assert [a["data-search-currency"] for a in Elements(html).having("data-search-currency")] \
        == ["USD", "JPY", "EUR", "USD"]
    assert "more than one currency" not in html
    page, _ = write_report(str(path), AUGUST, out=tmp_path / "august.html")
    assert "Out of date" not in page.read_text(encoding="utf-8")
    with duckdb.connect(str(path)) as con:   # a later materialization adds the column
        ensure_schema(con)
        assert con.execute("SELECT count(*) FROM search_trend WHERE currency IS NOT NULL"
                           ).fetchone() == (0,)
    out, _ = write_period_report(str(path), JULY, AUGUST, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    assert _search_cells(html) == EACH_IN_ITS_OWN
    assert "more than one currency" not in html


def test_a_search_billed_in_two_currencies_says_so_and_one_billed_in_none_reads_the_periods(
        tmp_path):
    """S2 billed ¥1,000.6 in April and $7 in July: its cost to date adds yen to dollars, so
    the page says it was billed in more than one currency, with no price per unit (search_trend
    has none for it either). S5, whose run was billed in no month, reads the period's $0.00,
    not "more than one currency"."""
    from tests.decisions.test_waste_sql import AUGUST, JULY, attr, currency_months, line, run
    from tests.support.warehouse_rows import insert_runs

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        ensure_schema(con)
        register_datasets(con, [])
        currency_months(con)
        line(con, "S2-j", cost=7.0, component="gpu", month=JULY)
        attr(con, "S2-j", "s2-a", "search", 7.0, acc=1.0, month=JULY)
        insert_runs(con, AUGUST, [{"run_id": "s5-a", "model": "churn", "purpose": "search",
                                   "search_id": "S5", "status": "FINISHED",
                                   "start_time": datetime(2024, 8, 5),
                                   "end_time": datetime(2024, 8, 6), "metric_name": "val_auc",
                                   "metric_value": 0.88}])
        for month in (JULY, AUGUST):
            run(con, "search_trend", month)
        assert con.execute("SELECT currency, cost_per_improvement FROM search_trend "
                           "WHERE month = ? AND search_id = 'S2'", [AUGUST]).fetchone() == (
            None, None)
    out, data = write_period_report(str(path), JULY, AUGUST, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    cells = _search_cells(html)
    # in the period: S2's $7.00 of July; to date, ¥1,000.6 + $7: no sum of the two is shown
    assert cells["S2"] == ['<span class="na">billed in more than one currency</span>', "$7.00",
                           "+0.03 <code>val_auc</code>", "–"]
    assert cells["S5"][:2] == ["$0.00", "–"]
    assert {k: cells[k] for k in ("S1", "S3")} == {k: EACH_IN_ITS_OWN[k] for k in ("S1", "S3")}
    assert [a["data-search-currency"] for a in Elements(html).having("data-search-currency")] \
        == ["USD", "", "EUR", "USD", ""]


def _title_and_heading(html: str) -> tuple[str, str, str | None]:
    heading = re.search(r'<h1 data-first="[^"]*" data-last="[^"]*"(?: data-quarter="([^"]*)")?>'
                        r"([^<]*)</h1>", html)
    title = re.search(r"<title>([^<]*)</title>", html)
    return title.group(1), heading.group(2), heading.group(1)


def test_a_period_of_whole_calendar_quarters_is_named_by_them(tmp_path):
    """A period named its months only: July – September 2026 is Q3 2026 to a finance
    director. A period of whole calendar quarters says them in its title and heading, the
    months beside; any other period its months alone; the file keeps its months' name."""
    path = tmp_path / "w.duckdb"
    months = [date(2026, m, 1) for m in range(7, 13)] + [date(2027, m, 1) for m in (1, 2, 3)]
    with duckdb.connect(str(path)) as con:
        for month in months:
            insert_lines(con, month, [_line(0, month, 1.0, "USD")])
    said = {}
    for first, last in ((date(2026, 7, 1), date(2026, 9, 1)),
                        (date(2026, 7, 1), date(2026, 12, 1)),
                        (date(2026, 10, 1), date(2027, 3, 1)),
                        (date(2026, 8, 1), date(2026, 10, 1)),
                        (date(2026, 9, 1), date(2026, 9, 1))):
        out, _ = write_period_report(str(path), first, last)
        assert out.name == f"cost-report-{first:%Y-%m}_{last:%Y-%m}.html"
        said[out.name[12:-5]] = _title_and_heading(out.read_text(encoding="utf-8"))
    assert said == {
        "2026-07_2026-09": ("ML training cloud cost · Q3 2026 (July – September 2026)",
                            "Q3 2026 (July – September 2026)", "Q3 2026"),
        "2026-07_2026-12": ("ML training cloud cost · Q3–Q4 2026 (July – December 2026)",
                            "Q3–Q4 2026 (July – December 2026)", "Q3–Q4 2026"),
        "2026-10_2027-03": ("ML training cloud cost · Q4 2026 – Q1 2027 (October 2026 – "
                            "March 2027)", "Q4 2026 – Q1 2027 (October 2026 – March 2027)",
                            "Q4 2026 – Q1 2027"),
        # not whole quarters: the months alone
        "2026-08_2026-10": ("ML training cloud cost · August – October 2026",
                            "August – October 2026", None),
        "2026-09_2026-09": ("ML training cloud cost · September 2026", "September 2026", None),
    }


def test_the_quarters_a_period_spans():
    """Whole calendar quarters only (January–March, April–June, July–September,
    October–December): one, several of one year, or across years; else none."""
    from cost_pipeline.report.period import quarters

    def named(first: tuple[int, int], last: tuple[int, int]) -> str | None:
        return quarters(date(*first, 1), date(*last, 1))

    assert named((2026, 1), (2026, 3)) == "Q1 2026"
    assert named((2026, 10), (2026, 12)) == "Q4 2026"
    assert named((2026, 4), (2026, 9)) == "Q2–Q3 2026"
    assert named((2026, 1), (2026, 12)) == "Q1–Q4 2026"
    assert named((2025, 10), (2026, 3)) == "Q4 2025 – Q1 2026"
    assert named((2025, 1), (2026, 12)) == "Q1 2025 – Q4 2026"
    assert named((2026, 2), (2026, 4)) is None  # three months, not a quarter
    assert named((2026, 1), (2026, 2)) is None  # part of one
    assert named((2026, 1), (2026, 4)) is None  # a quarter and a month
    assert named((2026, 3), (2026, 3)) is None
