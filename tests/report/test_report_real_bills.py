"""Issue 16 on the report side: a NOK bill says NOK everywhere (page, charts, UI metadata,
the demo's printed bill), a month whose only line costs 0 draws without a matplotlib
warning, and labels from the bill (a ChargeCategory holding `$…$`) are drawn verbatim."""

from __future__ import annotations

import re
import warnings
from datetime import date, datetime

import duckdb

from cost_pipeline.report import write_report
from cost_pipeline.report.bill_lines import bill_currency, bill_lines, reconciliation_notes, render
from cost_pipeline.report.charts import charts
from cost_pipeline.report.data import collect
from cost_pipeline.report.markdown import bill_markdown, levers_markdown
from cost_pipeline.report.render import LINE_ITEM_LABELS
from tests.support.warehouse_rows import insert, insert_lines

MONTH = date(2026, 10, 1)
MATH = r"Fee $\frac{a}$ x"


def _month(path, *, cost: float, currency: str, item_type: str = "Usage",
           category: str = "Usage") -> None:
    start = datetime(2026, 10, 1, 0)
    with duckdb.connect(str(path)) as con:
        insert_lines(con, MONTH, [
            {"ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=1),
             "ChargeCategory": "Usage", "x_LineItemType": "Usage", "BilledCost": cost,
             "EffectiveCost": cost, "x_CostComponent": "gpu", "x_SourceLine": "l0",
             "ResourceId": "i-0a", "BillingCurrency": currency},
            {"ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=1),
             "ChargeCategory": category, "x_LineItemType": item_type, "BilledCost": 0.0,
             "EffectiveCost": cost / 10, "x_CostComponent": "other", "x_SourceLine": "l1",
             "BillingCurrency": currency},
        ])
        insert(con, "attribution", MONTH, [
            {"x_SourceLine": "l0", "run_id": None, "purpose_class": "untracked",
             "component": "gpu", "cost": cost, "hours": 1.0, "accelerator_hours": 1.0,
             "share": 1.0, "rule": "compute"},
            {"x_SourceLine": "l1", "run_id": None, "purpose_class": "unallocated",
             "component": "other", "cost": cost / 10, "hours": None, "accelerator_hours": None,
             "share": 1.0, "rule": "non_usage"},
        ], {})
        insert(con, "cost_levers", MONTH, [
            {"rank": 1, "lever": "chase untracked usage", "dollars": cost,
             "what_it_costs_to_pull": "-", "evidence": "-"}], {})


def test_a_nok_bill_says_nok_everywhere(tmp_path):
    path = tmp_path / "w.duckdb"
    _month(path, cost=1234.5, currency="NOK")
    page, data = write_report(str(path), MONTH, out=tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    assert "NOK 1,357.95" in html  # the headline: 1,234.50 + 123.45
    amounts = re.findall(r"[−-]?\$[0-9][0-9,]*(?:\.[0-9]+)?k?", html)
    assert amounts == [], amounts  # no dollar amount anywhere, charts included
    assert "NOK 1,234.50" in levers_markdown(data["levers"], "NOK")
    assert "NOK 1,234.50" in bill_markdown(data["bill"], "NOK")
    with duckdb.connect(str(path), read_only=True) as con:
        assert bill_currency(con, MONTH, MONTH) == "NOK"
        text = render(bill_lines(con, MONTH, MONTH), reconciliation_notes(con, MONTH, MONTH),
                      "bill", bill_currency(con, MONTH, MONTH))
    assert "cost (NOK)" in text and "$" not in text


def _printed_bill(path) -> str:
    with duckdb.connect(str(path), read_only=True) as con:
        return render(bill_lines(con, MONTH, MONTH), reconciliation_notes(con, MONTH, MONTH),
                      "bill", bill_currency(con, MONTH, MONTH))


def test_the_printed_bill_shows_the_currencys_digits(tmp_path):
    """The printed bill as lines wrote every amount with two decimals: a JPY month read
    `288,750.00`. Yen are whole (288,750 + 28,875 = 317,625); fils have three decimals
    (1.2345 → 1.235, 0.12345 → 0.123, total 1.35795 → 1.358)."""
    _month(tmp_path / "jpy.duckdb", cost=288750.0, currency="JPY")
    text = _printed_bill(tmp_path / "jpy.duckdb")
    assert "cost (JPY)" in text
    assert re.search(r"untracked .* 288,750  ", text) and ".00" not in text
    assert re.search(r"total EffectiveCost +317,625$", text, re.M)
    _month(tmp_path / "kwd.duckdb", cost=1.2345, currency="KWD")
    text = _printed_bill(tmp_path / "kwd.duckdb")
    assert re.search(r"untracked .* 1\.235  ", text)
    assert re.search(r"unallocated .* 0\.123  ", text)
    assert re.search(r"total EffectiveCost +1\.358$", text, re.M)


def test_a_month_whose_only_line_costs_zero_draws_without_warnings(tmp_path):
    path = tmp_path / "w.duckdb"
    _month(path, cost=0.0, currency="USD")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a matplotlib UserWarning fails the test
        page, _ = write_report(str(path), MONTH, out=tmp_path / "r.html")
    assert page.exists()


def test_bill_labels_with_math_text_are_drawn_verbatim(tmp_path):
    # FOCUS ChargeCategory / CUR line item types are free text: `$…$` is not math here
    path = tmp_path / "w.duckdb"
    _month(path, cost=10.0, currency="USD", item_type=MATH, category="Purchase")
    with duckdb.connect(str(path), read_only=True) as con:
        data = collect(con, MONTH)
    svg = charts(data, LINE_ITEM_LABELS)["bridge"]
    assert r"Fee $\frac{a}$ x" in svg
    page, _ = write_report(str(path), MONTH, out=tmp_path / "r.html")
    assert r"Fee $\frac{a}$ x" in page.read_text(encoding="utf-8")


def test_the_period_report_of_a_nok_bill_says_nok(tmp_path):
    from cost_pipeline.report.period import write_period_report

    path = tmp_path / "w.duckdb"
    _month(path, cost=1234.5, currency="NOK")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page, _ = write_period_report(str(path), MONTH, MONTH, out=tmp_path / "p.html")
    html = page.read_text(encoding="utf-8")
    assert "NOK 1,357.95" in html
    assert re.findall(r"[−-]?\$[0-9][0-9,]*(?:\.[0-9]+)?k?", html) == []


def test_a_month_of_one_zero_cost_line_materializes_without_warnings(tmp_path, capfd,
                                                                      monkeypatch):
    # through the real job, as the CLI runs it: nothing but the outcome on stdout/stderr
    import yaml

    from cost_pipeline.cli.main import main
    from tests.support.cur_rows import line, write_export

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    export = write_export(tmp_path, {"a.parquet": [line(0.0, identity_line_item_id="zero")]})
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"warehouse": {"path": "w.duckdb"},
                                      "billing": [{"kind": "aws_cur2", "path": str(export)}]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # matplotlib's warnings are UserWarnings
        code = main(["materialize", "--config", str(config), "--month", "2026-07"])
    out = capfd.readouterr()
    assert code == 0, out.err
    assert "Warning" not in out.err and "warning" not in out.out.lower()
    assert (tmp_path / "reports" / "cost-report-2026-07.html").exists()
