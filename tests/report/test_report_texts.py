"""The sentences and figures the reports and the printed bill say about a month, built from
hand-made tables: why the largest untracked resource is untracked, the threshold with its
digits, a month whose credits exceed its usage, a month whose levers are all worth nothing,
and the wording of the strip, the retention section and the period page."""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.report import write_report
from cost_pipeline.report.bill_lines import bill_lines, reconciliation_notes, render
from cost_pipeline.report.charts import charts
from cost_pipeline.report.data import PURPOSE_LABELS
from cost_pipeline.report.period import write_period_report
from cost_pipeline.report.render import LINE_ITEM_LABELS
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.report.test_report import Elements, _bridge_section
from tests.support.sql_backend import run_month
from tests.support.warehouse_rows import (
    BILLING_DEFAULTS,
    RUN_DEFAULTS,
    insert,
    insert_lines,
    insert_runs,
)

JULY = date(2026, 7, 1)
LEVERS = ["bound the search", "retrain on measured decay", "cache preprocessing",
          "delete dead checkpoints", "co-locate compute & data", "chase untracked usage",
          "checkpoint before going preemptible", "use a cheaper card"]


def _line(n: int, cost: float, *, item_type: str = "Usage", category: str = "Usage",
          component: str = "gpu", resource: str | None = None,
          instance_type: str | None = None, month: date = JULY,
          currency: str = "USD") -> dict:
    start = datetime(month.year, month.month, 1, n)
    return {"ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=n + 1),
            "ChargeCategory": category, "x_LineItemType": item_type, "EffectiveCost": cost,
            "BilledCost": cost, "x_CostComponent": component, "x_SourceLine": f"l{n}",
            "ResourceId": resource, "x_InstanceType": instance_type,
            "BillingCurrency": currency}


def _attributed(n: int, cost: float, purpose_class: str, run_id: str | None = None,
                component: str = "gpu", gpu_hours: float | None = None) -> dict:
    return {"x_SourceLine": f"l{n}", "run_id": run_id, "purpose_class": purpose_class,
            "component": component, "cost": cost, "hours": 1.0 if gpu_hours else None,
            "accelerator_hours": gpu_hours, "share": 1.0,
            "rule": "compute" if gpu_hours else "non_usage"}


def _reconciliation(con, *, billed: float, untracked: float, threshold: float,
                    runs: float = 0.0, untracked_cost: float = 0.0,
                    unallocated: float = 0.0, tracked: float | None = None,
                    over_claimed: float = 0.0, unbilled_claim: float = 0.0) -> None:
    """The month's reconciliation row; `runs`, `untracked_cost` and `unallocated` split its
    cost, and coverage is runs ÷ their sum, as reconciliation.sql writes it; `tracked` the
    runs' GPU-hours when they are not the billed ones less the untracked (over-claims);
    `over_claimed` and `unbilled_claim` the GPU-hours runs claim beyond the bill."""
    share_ = untracked / billed
    total = runs + untracked_cost + unallocated
    insert(con, "reconciliation", JULY, [{
        "billed_gpu_hours": billed,
        "tracked_gpu_hours": billed - untracked if tracked is None else tracked,
        "untracked_gpu_hours": untracked, "untracked_share": share_, "threshold": threshold,
        "status": "pass" if share_ <= threshold else "fail", "untracked_cost_share": share_,
        "by_accelerator_type": [], "coverage": runs / total if total else 0.0,
        "over_claimed_gpu_hours": over_claimed, "unbilled_claim_gpu_hours": unbilled_claim,
        "provisional": True,
        "total_effective_cost": total, "attributed_cost": runs,
        "untracked_cost": untracked_cost, "unallocated_cost": unallocated,
        "runs_without_end": 0}], {})


def _levers(con, dollars: dict[str, float]) -> None:
    ranked = sorted(LEVERS[:-1], key=lambda lever: -dollars.get(lever, 0.0)) + LEVERS[-1:]
    insert(con, "cost_levers", JULY, [
        {"rank": rank, "lever": lever, "dollars": dollars.get(lever, 0.0),
         "what_it_costs_to_pull": "-", "evidence": "-"}
        for rank, lever in enumerate(ranked, 1)], {})


def _summary(html: str) -> list[str]:
    """The summary's sentences, as text (an amount in one is a span of its own)."""
    return [re.sub(r"<[^>]+>", "", li) for li in re.findall(
        r"<li>(.*?)</li>", html[html.index('class="summary"'):html.index("</ul>")])]


def _bill_text(path: Path) -> str:
    with duckdb.connect(str(path), read_only=True) as con:
        return render(bill_lines(con, JULY, JULY), reconciliation_notes(con, JULY, JULY),
                      "bill", "USD")


def test_a_note_of_one_gpu_hour_says_it_in_the_singular(tmp_path):
    """One untracked GPU-hour of one billed read "1 billed GPU-hours … 1 GPU-hours in all"."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 4.0, resource="i-gpu1", instance_type="g5.xlarge")])
        _reconciliation(con, billed=1.0, untracked=1.0, threshold=0.05)
        con.execute("INSERT INTO untracked_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (JULY, "i-gpu1", JULY, "gpu", "no_run", 1.0, 1.0, 4.0))
        assert reconciliation_notes(con, JULY, JULY) == [
            "2026-07: FAIL — 100.0% of 1 billed GPU-hour untracked (threshold 5%); largest "
            "untracked: i-gpu1 (g5.xlarge) 1 GPU-hour, $4.00, claimed by no run; "
            "1 GPU-hour in all"]
    # and the page's summary ("of 1 billed GPU-hours belong to no recorded run")
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    assert [s for s in _summary(page.read_text(encoding="utf-8"))
            if s.startswith("Tracker vs bill")][0].startswith(
        "Tracker vs bill: 100.0% of 1 billed GPU-hour belongs to no recorded run, above the "
        "5.0% threshold.")


def test_the_largest_untracked_resource_says_why_it_is_untracked(tmp_path):
    """A p4d.24xlarge (8 GPUs) two hours, a run using 4 of its GPUs: 8 GPU-hours untracked,
    idle capacity of a resource a run claimed — the note said "claimed by no run"."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 32.0, resource="i-gpu1", instance_type="p4d.24xlarge"),
                                 _line(1, 32.0, resource="i-gpu1", instance_type="p4d.24xlarge")])
        _reconciliation(con, billed=16.0, untracked=8.0, threshold=0.05)
        con.executemany("INSERT INTO untracked_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
            (JULY, "i-gpu1", JULY, "gpu", "idle_capacity", 1.0, 4.0, 16.0),
            (JULY, "i-gpu1", JULY, "gpu", "idle_capacity", 1.0, 4.0, 16.0)])
        assert reconciliation_notes(con, JULY, JULY) == [
            "2026-07: FAIL — 50.0% of 16 billed GPU-hours untracked (threshold 5%); largest "
            "untracked: i-gpu1 (p4d.24xlarge) 8 GPU-hours, $32.00, idle capacity of a claimed "
            "resource; 8 GPU-hours in all"]
    from cost_pipeline.report.bill_lines import untracked_because

    assert untracked_because("no_run") == "claimed by no run"
    assert untracked_because("idle_capacity, no_run") == (
        "partly claimed by no run, partly idle capacity of a claimed resource")
    assert untracked_because("idle_capacity, no_run, shared") == (
        "partly claimed by no run, partly idle capacity of a claimed resource, "
        "partly shared, no run can name it")


def test_the_threshold_keeps_its_digits_and_the_share_enough_to_differ():
    """threshold 0.025 read "(threshold 2%)" beside a passing 2.3%; the share keeps the
    digits that tell it from the threshold (the alert's rule)."""
    from cost_pipeline.report.bill_lines import share_and_threshold

    assert share_and_threshold(1 / 43, 0.025) == ("2.3", "2.5")
    assert share_and_threshold(0.018, 0.05) == ("1.8", "5")
    assert share_and_threshold(0.0249, 0.025) == ("2.49", "2.5")
    assert share_and_threshold(0.05004, 0.05) == ("5.004", "5")
    assert share_and_threshold(0.013, 0.0125) == ("1.30", "1.25")
    assert share_and_threshold(0.05, 0.05) == ("5.0", "5")
    # in percent from their own digits: 100 × 0.0515 is the double 5.1499…, read 5.1%
    assert share_and_threshold(0.0515, 0.05) == ("5.2", "5")
    assert share_and_threshold(0.0515, 0.0185) == ("5.15", "1.85")
    assert share_and_threshold(0.2, 1 / 3) == ("20.000000", "33.333333")


def test_the_printed_share_and_the_alert_round_half_up_as_the_page_does():
    """The page writes an untracked share of 56.25% as 56.3% (`money.percent`, half up); the
    printed note and the alert said 56.2% (Python's half to even) beside it."""
    from cost_pipeline.alerts import figures_apart
    from cost_pipeline.report.bill_lines import share_and_threshold
    from cost_pipeline.report.money import in_percent, percent

    assert percent(0.5625) == "56.3%"
    assert share_and_threshold(0.5625, 0.05) == ("56.3", "5")
    assert share_and_threshold(0.4375, 0.05) == ("43.8", "5")
    assert figures_apart(56.25, 5.0) == ("56.3", "5.0")
    assert figures_apart(0.0125, 0.5, 3) == ("0.013", "0.500")
    assert figures_apart(-12.25, 0.0) == ("-12.3", "0.0")
    assert figures_apart(1234.55, 5.0) == ("1,234.6", "5.0")
    # a share in percent from its own digits: 100 × 0.0515 is the double 5.1499999…
    assert in_percent(0.0515) == Decimal("5.15") and percent(0.0515) == "5.2%"
    assert figures_apart(in_percent(0.0515), in_percent(0.05)) == ("5.2", "5.0")
    assert figures_apart(in_percent(0.05004), in_percent(0.05)) == ("5.004", "5.000")


@pytest.mark.parametrize(("billed", "untracked", "threshold", "share", "limit"), [
    # 21,622 of 100,000: 21.622% against 21.6%, which one decimal read "21.6% … 21.6%"
    (100_000.0, 21_622.0, 0.216, "21.62", "21.6"),
    # 1,251 of 100,000 against 1.25%: the threshold was rounded to 1.3% beside a 1.3% share
    (100_000.0, 1_251.0, 0.0125, "1.251", "1.25"),
    # 5,004 of 100,000 against 5%: "5.0% FAIL · threshold 5.0%"
    (100_000.0, 5_004.0, 0.05, "5.004", "5.0"),
    (100_000.0, 5_000.0, 0.05, "5.0", "5.0"),
])
def test_the_page_tells_a_share_from_its_threshold_as_the_printed_note_does(
        tmp_path, billed, untracked, threshold, share, limit):
    """A share of 21.622% failing a 21.6% threshold read "21.6% FAIL · threshold 21.6%" and
    "… above the 21.6% threshold" on the page, where the printed note reads "21.62% …
    (threshold 21.6%)". The page writes them by the note's rule: the threshold with its own
    digits (one at least, as the page's percentages), the share with as many, and more while
    it would read as the threshold it is not."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 10.0)])
        _reconciliation(con, billed=billed, untracked=untracked, threshold=threshold,
                        runs=10.0)
        (note,) = reconciliation_notes(con, JULY, JULY)
    status = "FAIL" if untracked / billed > threshold else "PASS"
    assert f"— {share}% of 100,000 billed GPU-hours untracked (threshold " in note
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    kpi = html[html.index(">", html.index('id="untracked-share"')) + 1:]
    kpi = " ".join(re.sub(r"<[^>]+>", "", kpi[:kpi.index('<div class="kpi">')]).split())
    tracked = f"{billed - untracked:,.0f}"
    assert kpi.startswith(f'{share}% {status} {untracked:,.0f} of 100,000 billed GPU-hours · '
                          f'threshold {limit}%')
    assert _tracker_vs_bill(html).startswith(
        f"{status}: {tracked} of 100,000 billed GPU-hours are recorded runs; "
        f"{untracked:,.0f} ({share}%) are not (threshold {limit}%).")
    verdict = "above" if status == "FAIL" else "within"
    assert (f"Tracker vs bill: {share}% of 100,000 billed GPU-hours belong to no recorded "
            f"run, {verdict} the {limit}% threshold.") in _summary(html)


def test_the_printed_reconciliation_line_of_a_threshold_with_decimals(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 43.0)])
        _reconciliation(con, billed=43.0, untracked=1.0, threshold=0.025)
        assert reconciliation_notes(con, JULY, JULY) == [
            "2026-07: PASS — 2.3% of 43 billed GPU-hours untracked (threshold 2.5%)"]


def _credited_month(path: Path) -> None:
    """Production $10, an untracked resource $2 and a $5 refund on it, a $50 credit: −$43."""
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [
            _line(0, 10.0, resource="i-gpu1", instance_type="g5.xlarge"),
            _line(1, 2.0, resource="i-gpu2", instance_type="g5.xlarge"),
            _line(2, -5.0, item_type="Refund", category="Credit", resource="i-gpu2",
                  instance_type="g5.xlarge"),
            _line(3, -50.0, item_type="Credit", category="Credit", component="other")])
        insert(con, "attribution", JULY, [
            _attributed(0, 10.0, "production", "prod1", gpu_hours=10.0),
            _attributed(1, 2.0, "untracked", gpu_hours=2.0),
            _attributed(2, -5.0, "untracked"),
            _attributed(3, -50.0, "unallocated", component="other")], {})
        _levers(con, {"chase untracked usage": 2.0})


def test_a_month_whose_credits_exceed_its_usage_shows_no_shares(tmp_path):
    path = tmp_path / "w.duckdb"
    _credited_month(path)
    page, data = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    # it read "production training -23% ($10.00)", the credit that makes the total unsaid
    assert _summary(html)[:2] == [
        "Where the money went: production training $10.00.",
        "Credits and refunds (unallocated −$50.00, untracked −$3.00) bring the month&#39;s "
        "total to −$43.00: no class is shown as a share of it."]
    text = _bill_text(path).splitlines()
    # shares of −43 read −23.3%, 7.0% and 116.3%
    assert [line.split()[-1] for line in text[2:5]] == ["–", "–", "–"]
    assert [line.split()[-2] for line in text[2:5]] == ["10.00", "−3.00", "−50.00"]
    assert text[5].split()[-1] == "−43.00"
    svg = charts(data, LINE_ITEM_LABELS)["bill"]
    assert "(–)" in svg and not re.search(r"\(−?-?\d+%\)", svg)


def test_a_month_whose_credits_shrink_a_positive_total_shows_no_shares(tmp_path):
    """Production $100, search $10 and a $90 credit: the total is $20, still above zero,
    and the shares read "production training 500% ($100.00), hyperparameter search 50%",
    the printed bill 500.0%, 50.0%, −450.0%. A share is shown only of a total above zero
    split into no negative part; otherwise `–`, the classes by amount and the credit said."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 100.0), _line(1, 10.0),
                                 _line(2, -90.0, item_type="Credit", category="Credit",
                                       component="other")])
        insert(con, "attribution", JULY, [
            _attributed(0, 100.0, "production", "prod1", gpu_hours=1.0),
            _attributed(1, 10.0, "search", "s1", gpu_hours=1.0),
            _attributed(2, -90.0, "unallocated", component="other")], {})
        _reconciliation(con, billed=2.0, untracked=0.0, threshold=0.05, runs=110.0,
                        unallocated=-90.0)
    page, data = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    assert _summary(html)[:2] == [
        "Where the money went: production training $100.00, hyperparameter search $10.00.",
        "Credits and refunds (unallocated −$90.00) bring the month&#39;s total to $20.00: "
        "no class is shown as a share of it."]
    assert " Runs account for $110.00 of the month's cost, which credits and refunds bring "\
        "to $20.00 in all: no share of it is shown; untracked cost $0.00, unallocated "\
        "−$90.00." in _tracker_vs_bill(html)
    assert [line.split()[-1] for line in _bill_text(path).splitlines()[2:5]] == ["–"] * 3
    svg = charts(data, LINE_ITEM_LABELS)["bill"]
    assert "(–)" in svg and not re.search(r"\(−?-?\d+%\)", svg)
    from cost_pipeline.report.money import percent, share

    assert [percent(-0.233), percent(-0.0001), percent(0.5, 0)] == ["−23.3%", "0.0%", "50%"]
    assert [share(1, 0), share(1, -4), share(-1, 4)] == ["–", "–", "–"]
    assert [share(1, 4, split=[3]), share(5, 4, split=[-1]), share(1, 4, split=[5, -2])] == [
        "25.0%", "–", "–"]


def test_a_month_without_credits_keeps_its_shares(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 90.0), _line(1, 10.0)])
        insert(con, "attribution", JULY, [
            _attributed(0, 90.0, "production", "prod1", gpu_hours=1.0),
            _attributed(1, 10.0, "search", "s1", gpu_hours=1.0)], {})
    page, data = write_report(str(path), JULY, out=tmp_path / "r.html")
    assert _summary(page.read_text(encoding="utf-8"))[0] == (
        "Where the money went: production training 90% ($90.00), hyperparameter search 10% "
        "($10.00).")
    assert [line.split()[-1] for line in _bill_text(path).splitlines()[2:4]] == [
        "90.0%", "10.0%"]
    assert "(90%)" in charts(data, LINE_ITEM_LABELS)["bill"]


def test_an_amount_in_running_text_never_breaks_inside(tmp_path):
    """A minus sign (U+2212) before the symbol, or the space after a currency code, is a place
    a line may break: "unallocated −" ended a line and "$5.00." began the next. Every amount
    of the page's running text is one span that does not wrap; the text reads as before."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [
            _line(0, 15.0, currency="EUR"),
            _line(1, -5.0, item_type="Credit", category="Credit", component="other",
                  currency="EUR")])
        insert(con, "attribution", JULY, [
            _attributed(0, 15.0, "production", "prod1", gpu_hours=1.0),
            _attributed(1, -5.0, "unallocated", component="other")], {})
        _reconciliation(con, billed=1.0, untracked=0.0, threshold=0.05, runs=15.0,
                        unallocated=-5.0)
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    assert re.search(r"\.amt\b[^{}]*\{[^}]*white-space: nowrap", html)
    lede = html[html.index('<h2 id="reconciliation">'):]
    lede = lede[lede.index('<p class="lede">'):lede.index("</p>")]
    assert 'unallocated <span class="amt">−EUR 5.00</span>.' in lede
    assert _tracker_vs_bill(html).endswith(
        "Runs account for EUR 15.00 of the month's cost, which credits and refunds bring to "
        "EUR 10.00 in all: no share of it is shown; untracked cost EUR 0.00, unallocated "
        "−EUR 5.00.")
    assert _summary(html)[:2] == [
        "Where the money went: production training EUR 15.00.",
        "Credits and refunds (unallocated −EUR 5.00) bring the month&#39;s total to "
        "EUR 10.00: no class is shown as a share of it."]
    summary = html[html.index('class="summary"'):html.index("</ul>")]
    kpi = html[html.index("invoice (BilledCost)"):html.index("</div>",
                                                            html.index("invoice (BilledCost)"))]
    for part in (lede, summary, kpi):
        amounts = re.findall(r"[−+]?(?:\$|[A-Z]{3} )\d[\d,]*(?:\.\d+)?",
                             re.sub(r"<[^>]+>", "", part))
        assert amounts and re.findall(r'<span class="amt"[^>]*>([^<]*)</span>', part) == amounts


def test_the_period_shows_no_shares_of_a_total_a_credited_month_shrinks(tmp_path):
    """July $121, August $5, September −$100 (a credit): the period's $26 read "share of the
    period" 465.4%, 19.2%, −384.6%, and the bill as lines 565.4% … −484.6%."""
    path, aug, sep = tmp_path / "w.duckdb", date(2026, 8, 1), date(2026, 9, 1)
    with duckdb.connect(str(path)) as con:
        for month, cost, purpose in ((JULY, 121.0, "production"), (aug, 5.0, "search"),
                                     (sep, -100.0, "unallocated")):
            insert_lines(con, month, [_line(0, cost, month=month)])
            insert(con, "attribution", month, [
                _attributed(0, cost, purpose, None if purpose == "unallocated" else "r1",
                            gpu_hours=1.0)], {})
    out, data = write_period_report(str(path), JULY, sep, out=tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    months = re.findall(r'<tr data-month-total="[^"]+".*?<td class="num">([^<]*)</td></tr>',
                        html, re.S)
    assert months == ["–", "–", "–"]
    lines = re.findall(r'<tr data-line="[^"]+".*?<td class="num">([^<]*)</td></tr>', html)
    assert len(lines) == 3 and set(lines) == {"–"}
    assert "%" not in html[html.index('id="months"'):html.index('id="moved"')]


def _tracker_vs_bill(html: str) -> str:
    """Section 4's sentences, on one line."""
    lede = html[html.index('<h2 id="reconciliation">'):]
    lede = lede[lede.index('<p class="lede">'):lede.index("</p>")]
    return " ".join(re.sub(r"<[^>]+>", "", lede).split())


def test_tracker_vs_bill_shows_no_share_of_a_total_credits_bring_to_zero_or_below(tmp_path):
    """Runs hold $115 of a month whose credits and refunds bring its total to −$690, to $0 or
    (all refunds) to −$35: section 4 read "Runs account for −16.7%", "0.0%" and "37.1%" of
    the month's cost, where the headline shows no share of such a total."""
    months = {  # usage lines (runs, untracked) and the credit or refund beside them
        "credited": ([(115.0, "production"), (195.0, "untracked")], -1000.0),
        "zeroed": ([(115.0, "production"), (185.0, "untracked")], -300.0),
        "refunds": ([(-13.0, "production"), (-22.0, "untracked")], 0.0),
        "positive": ([(115.0, "production"), (195.0, "untracked")], 0.0),
    }
    said = {}
    for name, (usage, credit) in months.items():
        path = tmp_path / f"{name}.duckdb"
        lines = [(cost, purpose) for cost, purpose in usage] + [(credit, "unallocated")]
        with duckdb.connect(str(path)) as con:
            insert_lines(con, JULY, [_line(n, cost, component="gpu" if p != "unallocated"
                                           else "other") for n, (cost, p) in enumerate(lines)])
            insert(con, "attribution", JULY, [
                _attributed(n, cost, p, "prod1" if p == "production" else None,
                            component="gpu" if p != "unallocated" else "other")
                for n, (cost, p) in enumerate(lines)], {})
            _reconciliation(con, billed=10.0, untracked=4.0, threshold=0.05,
                            runs=usage[0][0], untracked_cost=usage[1][0], unallocated=credit)
        page, _ = write_report(str(path), JULY, out=tmp_path / f"{name}.html")
        said[name] = _tracker_vs_bill(page.read_text(encoding="utf-8"))
    runs_of = ("FAIL: 6 of 10 billed GPU-hours are recorded runs; 4 (40.0%) are not "
               "(threshold 5.0%).")
    assert said == {
        "credited": f"{runs_of} Runs account for $115.00 of the month's cost, which comes to "
                    "−$690.00 in all: no share of a total at or below zero is shown; untracked "
                    "cost $195.00, unallocated −$1,000.00.",
        "zeroed": f"{runs_of} Runs account for $115.00 of the month's cost, which comes to "
                  "$0.00 in all: no share of a total at or below zero is shown; untracked cost "
                  "$185.00, unallocated −$300.00.",
        "refunds": f"{runs_of} Runs account for −$13.00 of the month's cost, which comes to "
                   "−$35.00 in all: no share of a total at or below zero is shown; untracked "
                   "cost −$22.00, unallocated $0.00.",
        # 115 / 310
        "positive": f"{runs_of} Runs account for 37.1% of the month's cost; untracked cost "
                    "$195.00, unallocated $0.00.",
    }
    from cost_pipeline.report.money import share

    # a total that reads $0.00 is not above zero either (the headline's rule): not 25000.0%
    assert [share(1, 0.004), share(1, -0.004), share(1, 0.005)] == ["–", "–", "20000.0%"]


def test_the_period_shows_no_search_share_of_a_model_whose_cost_is_not_above_zero(tmp_path):
    """A model whose refunds outweigh its cost in the period: its search share read −50% (a
    $10 search of a −$20 model)."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 5.0)])
        insert(con, "cost_per_model_monthly", JULY, [
            {"model": m, "purpose_class": p, "component": "gpu", "cost": cost,
             "accelerator_hours": 1.0, "runs": 1}
            for m, p, cost in [("refunded", "search", 10.0), ("refunded", "production", -30.0),
                               ("kept", "search", 5.0), ("kept", "production", 15.0)]], {})
    page, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / "p.html")
    html = page.read_text(encoding="utf-8")
    search_share = {m: re.search(rf"<tr><td>{m}</td>.*?([^<>]*)</td></tr>", html).group(1)
                    for m in ("refunded", "kept")}
    assert search_share == {"refunded": "–", "kept": "25.0%"}  # 5 / 20


def _ticks(svg: str) -> list[str]:
    """A chart's axis tick labels, x axis then y axis (its ids under the chart's prefix)."""
    import html

    return [html.unescape(tick) for tick in
            re.findall(r'<g id="[\w-]*[xy]tick_\d+">.*?>([^<>]*)</text>', svg, re.S)]


def _charted_month(path: Path, cost: float, levers: dict[str, float],
                   currency: str = "USD") -> dict[str, str]:
    """A month of one production usage line of `cost` and `levers`: its charts' tick labels."""
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, cost, currency=currency)])
        insert(con, "attribution", JULY, [
            _attributed(0, cost, "production", "prod1", gpu_hours=1.0)], {})
        _levers(con, levers)
    _, data = write_report(str(path), JULY, out=path.with_suffix(".html"))
    return {name: _ticks(svg) for name, svg in charts(data, LINE_ITEM_LABELS).items()}


def test_chart_ticks_of_a_month_that_cost_nothing_and_of_a_trillion_dollar_bill(tmp_path):
    """A month that cost nothing drew its bill and lever axes from −0.06 to 0.06, ticks
    reading "−$0" three times and "$0" four; a $1e12 bill's read "$200,000,000k"."""
    from cost_pipeline.report.charts import _dollars

    names = [f"{rank}. {lever}" for rank, lever in enumerate(LEVERS, 1)][::-1]
    assert _charted_month(tmp_path / "nothing.duckdb", 0.0, {}) == {
        "bill": ["$0"], "levers": ["$0", *names]}
    ticks = _charted_month(tmp_path / "trillion.duckdb", 1e12,
                           {"bound the search": 5e11, "cache preprocessing": 2.5e6})
    assert ticks["bill"] == ["$0", "$200B", "$400B", "$600B", "$800B", "$1T", "$1.2T",
                             "production training"]
    assert ticks["levers"][:6] == ["$0", "$100B", "$200B", "$300B", "$400B", "$500B"]
    assert [_dollars(v, symbol="$") for v in (-0.004, -0.4, 0.5, 2.0, 9_999.0, -15_000.0,
                                               12_500.0, 2.5e6, -1.25e9, 1e15)] == [
        "$0", "−$0.40", "$0.50", "$2", "$9,999", "−$15k", "$12.5k", "$2.5M", "−$1.25B",
        "$1,000T"]
    assert _dollars(2.5e6, symbol="EUR ") == "EUR 2.5M"


def test_chart_ticks_in_yen_and_fils(tmp_path):
    """Ticks were written with two decimals whatever the currency: a JPY axis read
    `JPY 0.20 … JPY 1.20`, a KWD tick at 0.025 `KWD 0.03`. Yen ticks are whole yen (an axis
    under one yen has the one at zero), fils ticks have three decimals."""
    from cost_pipeline.report.charts import _dollars

    assert [_dollars(v, symbol="JPY ") for v in (0.0, -0.4, 2.0, 1_200.0, 12_500.0, 2.5e6)] == [
        "JPY 0", "JPY 0", "JPY 2", "JPY 1,200", "JPY 12.5k", "JPY 2.5M"]
    assert _dollars(0.5, symbol="JPY ") == "JPY 1"  # half up, as `money` rounds
    assert [_dollars(v, symbol="KWD ") for v in (0.025, -0.0004, 0.5, 2.0, 15_000.0)] == [
        "KWD 0.025", "KWD 0", "KWD 0.500", "KWD 2", "KWD 15k"]
    # one yen and a fifth: the bars' axis runs to ~1.5 yen; matplotlib's ticks were every 0.2
    assert _charted_month(tmp_path / "yen.duckdb", 1.2, {"bound the search": 1.2},
                          "JPY")["bill"] == ["JPY 0", "JPY 1", "production training"]
    # under one yen: a single tick
    ticks = _charted_month(tmp_path / "sen.duckdb", 0.6, {"bound the search": 0.6}, "JPY")
    assert ticks["bill"] == ["JPY 0", "production training"]
    assert ticks["levers"][:1] == ["JPY 0"] and "JPY 1" not in ticks["levers"]
    # a tenth of a dinar (the axis to 0.122): ticks every 20 fils, read to the fils
    assert _charted_month(tmp_path / "fils.duckdb", 0.1, {}, "KWD")["bill"] == [
        "KWD 0", "KWD 0.020", "KWD 0.040", "KWD 0.060", "KWD 0.080", "KWD 0.100", "KWD 0.120",
        "production training"]


def test_no_lever_named_when_none_has_a_price(tmp_path):
    """A month of one $7 tax line: every lever $0; the summary named "bound the search —
    $0.00" as this month's biggest lever."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 7.0, item_type="Tax", category="Tax",
                                       component="other")])
        _levers(con, {})
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    summary = _summary(page.read_text(encoding="utf-8"))
    assert "No lever has a price this month." in summary
    assert not [s for s in summary if s.startswith("Biggest lever")]
    period, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / "p.html")
    summary = _summary(period.read_text(encoding="utf-8"))
    assert "No lever has a price over the period." in summary
    with duckdb.connect(str(path)) as con:
        con.execute("DELETE FROM cost_levers")
        _levers(con, {"cache preprocessing": 0.004, "delete dead checkpoints": 3.5})
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    assert "Biggest lever this month: delete dead checkpoints — $3.50." in _summary(
        page.read_text(encoding="utf-8"))


def test_the_levers_chart_labels_a_lever_of_nothing_as_its_table_does(tmp_path):
    """A euro month whose one priced lever is EUR 3.50 (another is 0.4 of a cent): the table
    beside the chart reads "–" for the seven others, and the chart labelled them "EUR 0.00"."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 7.0, currency="EUR")])
        _levers(con, {"delete dead checkpoints": 3.5, "cache preprocessing": 0.004})
    page, data = write_report(str(path), JULY, out=tmp_path / "r.html")
    cells = re.findall(r'<td class="num[^"]*" data-dollars="[^"]*">([^<]*)</td>',
                       page.read_text(encoding="utf-8"))
    assert cells == ["EUR 3.50"] + ["–"] * 7
    svg = charts(data, LINE_ITEM_LABELS)["levers"]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    labels = [t.strip() for t in texts if t.startswith("  ")]  # the bars' labels, bottom up
    assert labels == ["–"] * 7 + ["EUR 3.50"]
    assert "EUR 0.00" not in svg


def _tiny_month(path: Path, cost: float, currency: str) -> tuple[str, dict]:
    """A month of one production GPU line of `cost` in `currency` whose one priced lever is
    worth as much: its page and figures."""
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, cost, currency=currency)])
        insert(con, "attribution", JULY, [
            _attributed(0, cost, "production", "prod1", gpu_hours=1.0)], {})
        _levers(con, {"delete dead checkpoints": cost})
    page, data = write_report(str(path), JULY, out=path.with_suffix(".html"))
    return page.read_text(encoding="utf-8"), data


def test_what_reads_zero_is_decided_at_the_currencys_smallest_unit(tmp_path):
    """Four fils (KWD 0.004) read `–` and were left out of the summary and the chart, as less
    than a cent; three tenths of a yen read `JPY 0` in the bill, the chart and the summary
    ("production training 100% (JPY 0)", "Biggest lever … — JPY 0")."""
    from cost_pipeline.report.markdown import bill_markdown, levers_markdown

    html, data = _tiny_month(tmp_path / "kwd.duckdb", 0.004, "KWD")
    cells = {a["data-purpose"]: a for a in Elements(html).having("data-component")
             if a["data-component"] == "gpu"}
    assert "zero" not in cells["production"]["class"]
    assert re.search(r'data-purpose="production" data-cost="[^"]*">KWD 0\.004</td>', html)
    assert _summary(html) == [
        "Where the money went: production training 100% (KWD 0.004).",
        "Biggest lever this month: delete dead checkpoints — KWD 0.004."]
    assert "| KWD 0.004 | KWD 0.004 |" in bill_markdown(data["bill"], "KWD")
    assert "KWD 0.004" in levers_markdown(data["levers"], "KWD")
    svg = charts(data, LINE_ITEM_LABELS)["bill"]
    assert "production training" in svg and "KWD 0.004  (100%)" in svg
    html, data = _tiny_month(tmp_path / "jpy.duckdb", 0.3, "JPY")
    cells = {a["data-purpose"]: a for a in Elements(html).having("data-component")
             if a["data-component"] == "gpu"}
    assert "zero" in cells["production"]["class"]
    assert re.search(r'data-purpose="production" data-cost="[^"]*">–</td>', html)
    assert _summary(html) == ["No lever has a price this month."]
    assert "| gpu | – | – |" in bill_markdown(data["bill"], "JPY")
    svg = charts(data, LINE_ITEM_LABELS)["bill"]
    assert "production training" not in svg and "JPY 0  (" not in svg
    with duckdb.connect(str(tmp_path / "jpy.duckdb"), read_only=True) as con:
        printed = render(bill_lines(con, JULY, JULY), [], "bill", "JPY")
    # a total that reads JPY 0 has no shares
    assert re.search(r"^production training .* 0      –$", printed, re.M), printed


def test_a_ui_amount_that_reads_zero_is_a_dash_in_every_cell(tmp_path):
    """A lever worth $0.004 read `$0.00` in the UI's levers table, and the bill's totals (the
    component's, the purpose class's, the month's) `$0.00` beside its cell's `–`: every
    amount of both tables reads `–` when it rounds to zero, as on the page."""
    from cost_pipeline.report.markdown import bill_markdown, levers_markdown

    _, data = _tiny_month(tmp_path / "usd.duckdb", 0.004, "USD")
    bill = bill_markdown(data["bill"], "USD").splitlines()
    assert "| gpu | – | – |" in bill
    assert "| **total** | **–** | **–** |" in bill
    levers = levers_markdown(data["levers"], "USD").splitlines()
    assert "| 1 | delete dead checkpoints | – | - |" in levers
    assert "| 2 | bound the search | – | - |" in levers
    assert not [line for line in [*bill, *levers] if "$" in line]


def test_strip_retention_and_labels_read_as_written(tmp_path):
    """A month the warehouse lacks has no total in the strip (it wrote 0.00 beside "–"); one
    object is "1 object"; the printed bill and the page spell "other runs" alike."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 5.0)])
        insert(con, "attribution", JULY, [_attributed(0, 5.0, "other", "eval1", gpu_hours=1.0)],
               {})
        insert(con, "retention_violations", JULY, [
            {"bucket": "b", "key": "k", "run_id": "r", "run_status": "dead", "reason": "dead_run",
             "bytes": 1024, "monthly_cost": 0.25}], {})
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    cells = {a["data-strip-month"]: a for a in Elements(html).having("data-strip-month")}
    assert len(cells) == 6 and "data-strip-total" not in cells["2026-06"]
    assert cells["2026-07"]["data-strip-total"] == "5.00"
    assert '<p class="lede">1 object, 1.0 KiB, cost' in html
    (line,) = bill_lines(duckdb.connect(str(path), read_only=True), JULY, JULY)
    assert line.line == PURPOSE_LABELS["other"] == "other runs (eval, ad hoc)"


def test_cross_region_line_holds_what_the_egress_table_counts():
    """ds1 lives in ds-bucket (us-east-1). 10 July 10:00-11:00: $6.00 (60 GB) of transfer on
    ds-bucket, read by E1 (us-west-2, the whole hour: 2/3 → $4.00) and E2 (eu-west-1, from
    10:30: 1/3 → $2.00); E3 reads it in us-east-1 (not cross-region). E4 (us-west-2) reads
    ds2, which the config does not place, from us-east-1 (its own dataset_region): its
    instance i-e4 billed $3.00 of network (30 GB) and $0.10 of compute. 11 July: $1.50 of
    transfer on ds-bucket no run overlaps (untracked). The egress table counts E1 $4, E2 $2,
    E4 $3 and the unclaimed $1.50; the line "cross-region dataset pulls" held only the
    bucket's transfer ($6.00, 2 runs) and E4's $3.00 sat under "other runs"."""
    def at(day, hour, minute=0):
        return datetime(2026, 7, day, hour, minute)

    def transfer(name, start, cost, gb):
        return {"x_SourceLine": name, "ResourceId": "ds-bucket", "x_CostComponent": "network",
                "x_ResourceKind": "bucket", "EffectiveCost": cost, "ChargeCategory": "Usage",
                "ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=11),
                "ConsumedQuantity": gb, "ConsumedUnit": "GB"}

    def run(run_id, start, end, region, dataset, **kw):
        return {"run_id": run_id, "status": "FINISHED", "purpose": "adhoc", "model": "churn",
                "start_time": start, "end_time": end, "region": region, "dataset": dataset,
                **kw}

    lines = [
        transfer("x1", at(10, 10), 6.0, 60.0),
        transfer("x2", at(11, 10), 1.5, 15.0),
        {"x_SourceLine": "n1", "ResourceId": "i-e4", "x_CostComponent": "network",
         "x_ResourceKind": "instance", "EffectiveCost": 3.0, "ChargeCategory": "Usage",
         "ChargePeriodStart": at(10, 10), "ChargePeriodEnd": at(10, 11),
         "ConsumedQuantity": 30.0, "ConsumedUnit": "GB"},
        {"x_SourceLine": "c1", "ResourceId": "i-e4", "x_CostComponent": "cpu",
         "x_ResourceKind": "instance", "EffectiveCost": 0.1, "ChargeCategory": "Usage",
         "ChargePeriodStart": at(10, 10), "ChargePeriodEnd": at(10, 11), "x_UsageHours": 1.0,
         "x_InstanceUsage": True, "x_InstanceType": "m6i.large"},
    ]
    runs = [run("E1", at(10, 10), at(10, 11), "us-west-2", "ds1"),
            run("E2", at(10, 10, 30), at(10, 12), "eu-west-1", "ds1"),
            run("E3", at(10, 9), at(10, 12), "us-east-1", "ds1"),
            run("E4", at(10, 10), at(10, 11), "us-west-2", "ds2", dataset_region="us-east-1",
                resource_ids=["i-e4"])]
    datasets = {"ds1": {"bucket": "ds-bucket", "region": "us-east-1"}}
    con = run_month(lines, runs, [], datasets, JULY)
    params = month_params(parse_config({"datasets": datasets}, Path(".")), JULY)
    replace_month(con, "egress", JULY, sql_text("egress"), params)
    assert con.execute("SELECT fsum(cost) FROM egress WHERE run_id IS NOT NULL").fetchone() == (
        9.0,)

    got = {ln.line: (round(ln.cost, 2), ln.runs, ln.cpu_hours) for ln in bill_lines(con, JULY,
                                                                                    JULY)}
    assert got == {"cross-region dataset pulls": (9.0, 3, 0.0),   # E1 4 + E2 2 + E4 3
                   "other runs (eval, ad hoc)": (0.1, 1, 1.0),    # E4's compute
                   "untracked": (1.5, 0, 0.0)}                    # the unclaimed transfer
    assert sum(c for c, _, _ in got.values()) == 10.6              # the month's total

    # a month whose egress was not computed: the line holds the transfer rule 5 gave runs
    con.execute("DELETE FROM egress")
    got = {ln.line: (round(ln.cost, 2), ln.runs) for ln in bill_lines(con, JULY, JULY)}
    assert got == {"cross-region dataset pulls": (6.0, 2), "other runs (eval, ad hoc)": (3.1, 1),
                   "untracked": (1.5, 0)}


def test_period_page_of_one_month_and_its_model_less_row(tmp_path):
    """One month's page compared March with March in its heading; the model-less row holds
    tracked runs that name no model, not only untracked and unallocated cost."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 5.0)])
        insert(con, "cost_per_model_monthly", JULY, [
            {"model": None, "purpose_class": "production", "component": "gpu", "cost": 5.0,
             "accelerator_hours": 1.0, "runs": 1}], {})
    page, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / "p.html")
    html = page.read_text(encoding="utf-8")
    assert '<h2 id="moved">2. What moved</h2>' in html
    assert "<td>no model (runs naming none, untracked, unallocated)</td>" in html
    with duckdb.connect(str(path)) as con:
        insert_lines(con, date(2026, 8, 1), [_line(0, 6.0, month=date(2026, 8, 1))])
    page, _ = write_period_report(str(path), JULY, date(2026, 8, 1), out=tmp_path / "p.html")
    assert '<h2 id="moved">2. What moved from July to August</h2>' in page.read_text(
        encoding="utf-8")


BAIT = ("i-x\n\n# HEADING [click me](https://evil.example/login) "
        "![t](https://evil.example/pixel.png)\n")


def _rendered(markdown: str) -> str:
    """`markdown` as a CommonMark renderer with tables shows it (the Dagster UI's metadata)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_the_ui_tables_show_text_from_the_bill_as_text(tmp_path):
    """A CUR resource id quoted in a lever's evidence ended the levers table and added a
    heading, a link and an external image that loaded for anyone viewing the asset; the
    bill's currency code went into every amount of both tables alike. Each cell now shows
    what the data holds as text: line breaks as spaces, markdown's characters escaped."""
    from cost_pipeline.report.markdown import bill_markdown, levers_markdown

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 5.0)])
        insert(con, "attribution", JULY, [
            _attributed(0, 5.0, "production", "prod1", gpu_hours=1.0)], {})
        insert(con, "cost_levers", JULY, [
            {"rank": 1, "lever": "chase untracked usage", "dollars": 5.0,
             "what_it_costs_to_pull": "-",
             "evidence": f"{BAIT} (p4d.24xlarge) 1 GPU-hour a|b, claimed by no run"}], {})
    _, data = write_report(str(path), JULY, out=tmp_path / "r.html")
    levers = levers_markdown(data["levers"], "USD")
    assert levers.splitlines() == [
        "| # | lever | this month | evidence |",
        "| ---: | --- | ---: | --- |",
        r"| 1 | chase untracked usage | $5.00 | i-x  \# HEADING \[click me\]\(https://"
        r"evil.example/login\) \!\[t\]\(https://evil.example/pixel.png\)  \(p4d.24xlarge\) "
        r"1 GPU-hour a\|b, claimed by no run |", "", OVERLAP]
    shown = _rendered(levers)
    # the table, then the one paragraph the levers end with, nothing the data added
    assert shown.endswith(f"</table>\n<p>{OVERLAP}</p>\n")
    shown = shown.removesuffix(f"<p>{OVERLAP}</p>\n")
    for tag in ("<h1", "<a ", "<img", "</table>\n<"):
        assert tag not in shown, shown
    assert shown.count("<tr>") == 2 and "[click me](https://evil.example/login)" in shown
    assert "a|b, claimed by no run" in shown  # a pipe of the data stays a pipe
    # a currency code from the bill (written upper case): every amount of both tables
    code = "x<img src=https://evil.example/p.png>"
    for table in (bill_markdown(data["bill"], code), levers_markdown(data["levers"], code)):
        shown = _rendered(table)
        assert "<img" not in shown.lower(), shown
        assert "X&lt;IMG SRC=HTTPS://EVIL.EXAMPLE/P.PNG&gt; 5.00" in shown
        # header, alignment, a line per row (the levers' then a blank and the overlap's line)
        assert table.split("\n\n")[0].count("\n") == shown.count("<tr>")
    cell = r"X\<IMG SRC=HTTPS://EVIL.EXAMPLE/P.PNG\> 5.00"
    assert f"| gpu | {cell} | {cell} |" in bill_markdown(data["bill"], code)


def test_a_ui_cell_drops_bidirectional_controls():
    """A right-to-left override in a resource id reversed the rest of its cell in the UI (the
    alerts and the command's lines dropped it already)."""
    from cost_pipeline.report.markdown import _text

    assert _text("i-x\u202egnp.exe\u2067 (g5)\n# h") == "i-xgnp.exe \\(g5\\) \\# h"


def test_a_search_of_fractional_configs_shows_the_fraction(tmp_path):
    """A search of 5 runs of seeds 1, 2, 1, 2, 1 and no config_id has 5 ÷ 2 = 2.5 configs
    (SPEC §7): the page rounded it half to even and read "2 × 2", four runs' worth of shape
    for five. A whole number stays whole."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 5.0)])
        insert(con, "search_costs", JULY, [
            {"search_id": "sC", "model": "fraud", "runs": 5, "configs": 2.5, "seeds": 2,
             "cost": 3.0},
            {"search_id": "sD", "model": "fraud", "runs": 6, "configs": 3.0, "seeds": 2,
             "cost": 2.0}],
            {"runs_this_month": 5, "hours": 1.0, "accelerator_hours": 1.0})
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    rows = dict(re.findall(r'<tr data-search="(\w+)">(.*?)</tr>', html, re.S))
    assert '<td class="num">5</td><td class="num">2.5 × 2</td>' in rows["sC"]
    assert '<td class="num">6</td><td class="num">3 × 2</td>' in rows["sD"]


def test_a_search_with_no_estimate_reads_no_estimate(tmp_path):
    """sN has no recorded estimate, sO one of $9,000 over the $5,000 approval budget: both
    read "not approved" in red, as if sN's estimate had been refused. sN reads "no estimate"
    (still flagged), sO "not approved", and the lede says which is which."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 5.0)])
        insert(con, "search_costs", JULY, [
            {"search_id": "sN", "model": "fraud", "cost": 3.0},
            {"search_id": "sO", "model": "fraud", "cost": 2.0, "estimated_cost": 9_000.0,
             "cumulative_cost": 2.0, "overrun": -8_998.0}],
            {"runs": 2, "configs": 2.0, "seeds": 1, "runs_this_month": 2, "hours": 1.0,
             "accelerator_hours": 1.0})
        insert(con, "search_approvals", JULY, [
            {"search_id": "sO", "model": "fraud", "configs": 2, "seeds": 1, "reruns": 0,
             "runs": 2, "per_run_cost": 4_500.0, "estimated_cost": 9_000.0,
             "approval_budget": 5_000.0, "approved": False,
             "recorded_at": datetime(2026, 6, 30)}], {})
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    rows = dict(re.findall(r'<tr data-search="(\w+)">(.*?)</tr>', html, re.S))
    estimate = {k: re.search(r"<td[^>]*data-estimate=[^>]*>(.*?)</td>", row).group(1)
                for k, row in rows.items()}
    assert estimate == {"sN": '<span class="fail-text">no estimate</span>',
                        "sO": '$9,000.00 <span class="fail-text">not approved</span>'}
    lede = html[html.index('<h2 id="search">'):]
    lede = " ".join(re.sub(r"<[^>]+>", "", lede[:lede.index("</p>")]).split())
    assert ("against what the search has cost so far: more than 10 % over is flagged, and "
            "so is a search with no estimate recorded at all (marked no estimate); an "
            "estimate recorded over the approval budget is marked not approved.") in lede


def _fractional_gpu_month(path: Path) -> None:
    """One g5.xlarge (1 GPU) billed 10:00-11:00 for $1.00, one production run listing it
    10:00-10:36: 1.0 GPU-hour billed, 0.6 tracked, 0.4 untracked (40%, a FAIL)."""
    instance = {"x_SourceLine": "g1", "ResourceId": "i-small", "x_CostComponent": "gpu",
                "x_ResourceKind": "instance", "x_InstanceUsage": True,
                "x_InstanceType": "g5.xlarge", "x_AcceleratorCount": 1, "x_UsageHours": 1.0,
                "EffectiveCost": 1.0, "ChargeCategory": "Usage",
                "ChargePeriodStart": datetime(2026, 7, 3, 10),
                "ChargePeriodEnd": datetime(2026, 7, 3, 11)}
    run = {"run_id": "prod1", "status": "FINISHED", "purpose": "production", "model": "churn",
           "start_time": datetime(2026, 7, 3, 10), "end_time": datetime(2026, 7, 3, 10, 36),
           "resource_ids": ["i-small"]}
    cfg = parse_config({}, Path("."))
    params = month_params(cfg, JULY)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [{**BILLING_DEFAULTS, **instance}])
        insert_runs(con, JULY, [{**RUN_DEFAULTS, **run}])
        build_attribution(con, JULY, params, [])
        for table in ("reconciliation", "untracked_usage"):
            replace_month(con, table, JULY, sql_text(table), params)


def test_fractional_gpu_hours_read_with_the_decimals_they_have(tmp_path):
    """1.0 billed, 0.6 tracked, 0.4 untracked read "0 of 1 billed GPU-hours · 40.0% FAIL",
    "1 of 1 billed GPU-hours are recorded runs; 0 (40.0%) are not" and "largest untracked:
    i-small (g5.xlarge) 0 GPU-hours … 0 GPU-hours in all": the figures of a statement now
    share their decimals, one here; whole hours stay whole."""
    path = tmp_path / "w.duckdb"
    _fractional_gpu_month(path)
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    kpi = html[html.index('id="untracked-share"'):html.index('<div class="kpi">', html.index(
        'id="untracked-share"'))]
    assert "0.4 of 1.0 billed GPU-hours" in " ".join(kpi.split())
    assert _tracker_vs_bill(html).startswith(
        "FAIL: 0.6 of 1.0 billed GPU-hours are recorded runs; 0.4 (40.0%) are not")
    assert [s for s in _summary(html) if s.startswith("Tracker vs bill")][0].startswith(
        "Tracker vs bill: 40.0% of 1.0 billed GPU-hours belong to no recorded run")
    with duckdb.connect(str(path), read_only=True) as con:
        assert reconciliation_notes(con, JULY, JULY) == [
            "2026-07: FAIL — 40.0% of 1.0 billed GPU-hours untracked (threshold 5%); largest "
            "untracked: i-small (g5.xlarge) 0.4 GPU-hours, $0.40, idle capacity of a claimed "
            "resource; 0.4 GPU-hours in all"]
    period, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / "p.html")
    row = re.search(r'<tr data-share-month="2026-07".*?</tr>', period.read_text(
        encoding="utf-8"), re.S).group(0)
    assert '<td class="num">0.4 of 1.0</td>' in row
    from cost_pipeline.report.money import gpu_hours_alike

    # the rule: whole figures none, else one decimal, more (up to 3) while a nonzero one
    # would read 0
    assert gpu_hours_alike(6720.0, 1080.0, 192.0 + 1e-12) == ["6,720", "1,080", "192"]
    assert gpu_hours_alike(1.0, 0.6, 0.4) == ["1.0", "0.6", "0.4"]
    assert gpu_hours_alike(100.0, 99.96, 0.04) == ["100.00", "99.96", "0.04"]
    assert gpu_hours_alike(100.0, 100.0, 0.0004) == ["100.000", "100.000", "0.000"]
    assert gpu_hours_alike(2.0, 0.0, None) == ["2", "0", "–"]


def _footer(html: str) -> str:
    return " ".join(html[html.index("<footer>"):html.index("</footer>")].split())


def test_the_footer_names_the_currencys_smallest_unit(tmp_path):
    """A yen page said "Amounts are shown to the cent" over whole yen; each page's footer says
    the unit its amounts are rounded to (ISO 4217's minor unit)."""
    said = {}
    for currency in ("USD", "EUR", "JPY", "KWD", "CLF"):
        path = tmp_path / f"{currency}.duckdb"
        html, _ = _tiny_month(path, 5.0, currency)
        period, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / f"{currency}.p.html")
        said[currency] = _footer(html)
        assert re.search(r"Amounts are shown.*?apart\.", said[currency]).group(0) == \
            re.search(r"Amounts are shown.*?apart\.", _footer(
                period.read_text(encoding="utf-8"))).group(0)
    assert "Amounts are shown to the cent; a total is the exact sum, rounded once, so the " \
           "rounded figures above it may add up to a cent or two apart." in said["USD"]
    assert "shown to the cent;" in said["EUR"]
    assert "Amounts are shown to the yen (no decimals); a total is the exact sum, rounded " \
           "once, so the rounded figures above it may add up to a yen or two apart." \
           in said["JPY"]
    assert "shown to the fils (three decimals);" in said["KWD"]
    assert "a fils or two apart" in said["KWD"]
    assert "shown to four decimals;" in said["CLF"]
    assert all("cent" not in said[c] for c in ("JPY", "KWD", "CLF"))


def test_a_months_gpu_hours_read_alike_on_its_page_and_the_periods(tmp_path):
    """Runs claim 10.5 GPU-hours of the 10 billed (over-claims: none untracked). The month's
    page writes its statement's figures — 10.5 tracked, 0 untracked, 10 billed — with one
    decimal ("0.0 of 10.0 billed GPU-hours"); the period page passed the untracked, the billed
    and billed − untracked (10, not the 10.5 tracked), and read "0 of 10" for the same month.
    It passes the same figures now: "0.0 of 10.0"."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 10.0)])
        _reconciliation(con, billed=10.0, untracked=0.0, tracked=10.5, threshold=0.05)
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    kpi = html[html.index('id="untracked-share"'):html.index('<div class="kpi">', html.index(
        'id="untracked-share"'))]
    assert "0.0 of 10.0 billed GPU-hours" in " ".join(kpi.split())
    assert _tracker_vs_bill(html).startswith(
        "PASS: 10.5 of 10.0 billed GPU-hours are recorded runs; 0.0 (0.0%) are not")
    period, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / "p.html")
    row = re.search(r'<tr data-share-month="2026-07".*?</tr>', period.read_text(
        encoding="utf-8"), re.S).group(0)
    assert '<td class="num">0.0 of 10.0</td>' in row


OVERLAP = ("Each lever is priced on its own: a run can pull several levers, so the figures "
           "overlap and are not to be added up.")


def _levers_section(html: str) -> str:
    """The levers section (its heading to the next), on one line."""
    section = html[html.index('<h2 id="levers">'):]
    section = section[:section.index("<h2", 1)] if "<h2" in section[1:] else section
    return " ".join(section.split())


def test_the_levers_say_their_figures_overlap_and_are_not_to_be_added_up(tmp_path):
    """A $30 spot search trial that was re-run, preempted, pulled its data across regions
    ($10) and left dead checkpoints ($5) after a recomputed preprocessing run ($5) is in five
    levers for 30 + 30 + 10 + 5 + 5 = $80; with $51 of untracked usage an $88 month's levers
    add up to $131. Each keeps its figure; the monthly page, the period page and the UI's
    table (and the demo's printed list) say once that the figures overlap."""
    from cost_pipeline.report.markdown import levers_markdown

    path = tmp_path / "w.duckdb"
    dollars = {"bound the search": 30.0, "checkpoint before going preemptible": 30.0,
               "co-locate compute & data": 10.0, "delete dead checkpoints": 5.0,
               "cache preprocessing": 5.0, "chase untracked usage": 51.0}
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 88.0)])
        insert(con, "attribution", JULY, [
            _attributed(0, 88.0, "search", "s1", gpu_hours=1.0)], {})
        _levers(con, dollars)
    page, data = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    shown = dict(re.findall(r'<tr data-lever="([^"]+)" data-rank="\d+">.*?data-dollars="([^"]+)"',
                            html))
    assert shown["bound the search"] == "30.00" and shown["chase untracked usage"] == "51.00"
    assert sum(float(v) for v in shown.values()) == 131.0     # over the month's $88.00
    section = _levers_section(html)
    assert section.count(OVERLAP) == 1
    assert section.index(OVERLAP) < section.index("<table>")
    period, _ = write_period_report(str(path), JULY, JULY, out=tmp_path / "p.html")
    section = _levers_section(period.read_text(encoding="utf-8"))
    assert section.count(OVERLAP) == 1 and section.index(OVERLAP) < section.index("<table>")
    assert 'data-lever="bound the search" data-rank="2" data-dollars="30.00"' in section
    table = levers_markdown(data["levers"], "USD")
    assert table.endswith(f"\n\n{OVERLAP}")
    assert "| 1 | chase untracked usage | $51.00 | - |" in table.splitlines()
    assert f"<p>{OVERLAP}</p>" in _rendered(table)


def test_percentages_round_half_up_as_amounts_do(tmp_path):
    """Shares of 43.75% and 56.25% read 43.8% and 56.2% on one page (Python's round half to
    even) while amounts round half up. Percentages round half up now, away from zero, from
    the figure's shortest form: 56.25% is 56.3%, −12.25% −12.3%."""
    from cost_pipeline.report.money import change_percent, percent

    assert [percent(0.4375), percent(0.5625), percent(-0.1225), percent(0.0125)] == [
        "43.8%", "56.3%", "−12.3%", "1.3%"]
    assert [percent(0.125, 0), percent(0.145, 1), percent(0.00125, 2)] == [
        "13%", "14.5%", "0.13%"]
    assert [change_percent(0.125), change_percent(-0.125), change_percent(0.0025),
            change_percent(-0.99995)] == ["+13%", "−13%", "+0.3%", "−99.995%"]
    path = tmp_path / "w.duckdb"
    aug = date(2026, 8, 1)
    with duckdb.connect(str(path)) as con:
        # July: $35 of runs, $45 untracked (9 of 16 billed GPU-hours); threshold 1.25%
        insert_lines(con, JULY, [_line(0, 35.0), _line(1, 45.0)])
        insert(con, "attribution", JULY, [
            _attributed(0, 35.0, "production", "prod1", gpu_hours=7.0),
            _attributed(1, 45.0, "untracked", gpu_hours=9.0)], {})
        _reconciliation(con, billed=16.0, untracked=9.0, threshold=0.0125, runs=35.0,
                        untracked_cost=45.0)
        # August: $176 of runs; the period's $256 is July's $80 (31.25%) and August's $176
        # (68.75%)
        insert_lines(con, aug, [_line(0, 176.0, month=aug)])
        insert(con, "attribution", aug, [
            _attributed(0, 176.0, "production", "prod1", gpu_hours=1.0)], {})
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    # the attribute rounds to one decimal, half up; the text beside the 1.25% threshold
    # has its two decimals (the printed note's rule)
    assert 'data-untracked-share="56.3">56.25%' in html
    assert _tracker_vs_bill(html) == (
        "FAIL: 7 of 16 billed GPU-hours are recorded runs; 9 (56.25%) are not (threshold "
        "1.25%). Runs account for 43.8% of the month's cost; untracked cost $45.00, "
        "unallocated $0.00.")
    period, _ = write_period_report(str(path), JULY, aug, out=tmp_path / "p.html")
    html = period.read_text(encoding="utf-8")
    months = re.findall(r'<tr data-month-total="[^"]+".*?<td class="num">([^<]*)</td></tr>',
                        html, re.S)
    assert months == ["31.3%", "68.8%"]
    row = re.search(r'<tr data-share-month="2026-07".*?</tr>', html, re.S).group(0)
    # the period's table writes the share and its threshold as the month's page does
    assert 'data-untracked-share="56.3"' in row and '<td class="num">56.25%</td>' in row
    assert '<td class="num">1.25%</td>' in row


def _kpi_note(html: str) -> str:
    """The untracked share's note under the headline, on one line."""
    kpi = html[html.index('id="untracked-share"'):]
    kpi = kpi[kpi.index('<div class="note">'):kpi.index("</div>", kpi.index('class="note"'))]
    return " ".join(re.sub(r"<[^>]+>", "", kpi).split())


@pytest.mark.parametrize(("billed", "untracked", "tracked", "claims", "note", "said"), [
    # one billed GPU-hour, untracked; runs claim 1 more on it and 1 on resources not billed
    (1.0, 1.0, 0.0, 1.0, "1 of 1 billed GPU-hour · threshold 5.0%",
     "FAIL: 0 of 1 billed GPU-hour are recorded runs; 1 (100.0%) is not (threshold 5.0%). "
     "Runs account for 0.0% of the month's cost; untracked cost $1.00, unallocated $0.00. "
     "Runs claim 1 GPU-hour more than billed. Runs name resources no bill line shows for "
     "1 GPU-hour (wrong ids or other accounts)."),
    (2.0, 1.0, 1.0, 2.0, "1 of 2 billed GPU-hours · threshold 5.0%",
     "FAIL: 1 of 2 billed GPU-hours is recorded runs; 1 (50.0%) is not (threshold 5.0%). "
     "Runs account for 0.0% of the month's cost; untracked cost $1.00, unallocated $0.00. "
     "Runs claim 2 GPU-hours more than billed. Runs name resources no bill line shows for "
     "2 GPU-hours (wrong ids or other accounts)."),
    # 1.0 is not one: it reads as the tenths it is
    (1.0, 0.4, 0.6, 1.0, "0.4 of 1.0 billed GPU-hours · threshold 5.0%",
     "FAIL: 0.6 of 1.0 billed GPU-hours are recorded runs; 0.4 (40.0%) are not (threshold "
     "5.0%). Runs account for 0.0% of the month's cost; untracked cost $1.00, unallocated "
     "$0.00. Runs claim 1 GPU-hour more than billed. Runs name resources no bill line shows "
     "for 1 GPU-hour (wrong ids or other accounts)."),
])
def test_one_gpu_hour_reads_as_one_hour(tmp_path, billed, untracked, tracked, claims, note,
                                        said):
    """"Runs claim 1 GPU-hours more than billed", "… for 1 GPU-hours", "0 of 1 billed
    GPU-hours" and "1 (100.0%) are not": a figure that reads 1 takes one hour and "is"."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [_line(0, 1.0)])
        _reconciliation(con, billed=billed, untracked=untracked, tracked=tracked,
                        threshold=0.05, untracked_cost=1.0, over_claimed=claims,
                        unbilled_claim=claims)
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    assert _kpi_note(html) == note
    assert _tracker_vs_bill(html) == said


def test_a_bridge_without_a_step_does_not_say_the_bill_has_no_discount(tmp_path):
    """A GCP month: a VM's $10.00 hour (list $12.50) and its sustained use discount, a
    −$2.00 credit, in both BilledCost and EffectiveCost. The invoice and the amortized cost
    agree ($8.00), but the bridge said "no commitment, amortized fee or discount on the
    bill"."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, JULY, [
            {**_line(0, 10.0), "ListCost": 12.5},
            {**_line(1, -2.0, item_type="SUSTAINED_USAGE_DISCOUNT", category="Credit"),
             "ListCost": 0.0}])
    page, _ = write_report(str(path), JULY, out=tmp_path / "r.html")
    section = _bridge_section(page.read_text(encoding="utf-8"))
    rows = [" ".join(re.sub(r"<[^>]+>", " ", row).split())
            for row in re.findall(r"<tr.*?</tr>", section, re.S)]
    assert rows[1:] == [
        "Invoice total (Σ BilledCost) $8.00",
        "No difference this month: the invoice and the amortized cost agree (any discount on "
        "the bill is in both).",
        "Amortized total (Σ EffectiveCost) $8.00"]
    assert "no commitment" not in section
