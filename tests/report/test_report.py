"""The monthly report: its figures equal the warehouse to the cent, the invoice → amortized
bridge closes exactly, missing tables degrade to a note, the CLI and the Dagster asset write
it, and it renders in a real headless Chromium."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date, datetime
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.config import load_config
from cost_pipeline.report import ReportError, report_path, write_report
from tests.support.chromium import render_in_chromium
from tests.support.warehouse_rows import insert, insert_lines

FAILING, AMORTIZED = date(2026, 8, 1), date(2026, 9, 1)  # demo: reconciliation fails / SP bill
CENT = Decimal("0.01")


class Elements(HTMLParser):
    """Every element's attributes, in document order."""

    def __init__(self, html: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def having(self, attribute: str) -> list[dict]:
        return [a for _, a in self.elements if attribute in a]

    def one(self, attribute: str) -> str:
        (found,) = self.having(attribute)
        return found[attribute]


def sql_cents(con, sql: str, params: list) -> Decimal:
    (value,) = con.execute(f"SELECT round(({sql}), 2)", params).fetchone()
    return Decimal(str(value or 0)).quantize(CENT)


def render(warehouse: str, month: date, tmp_path: Path) -> tuple[Elements, str]:
    path, _ = write_report(warehouse, month, out=tmp_path / f"{month:%Y-%m}.html")
    html = path.read_text(encoding="utf-8")
    return Elements(html), html


@pytest.fixture
def warehouse(demo_quarter) -> str:
    return load_config(demo_quarter[0]).warehouse_path


@pytest.mark.parametrize("month", [FAILING, AMORTIZED])
def test_report_figures_equal_the_warehouse(warehouse, demo_warehouse, month, tmp_path):
    page, _ = render(warehouse, month, tmp_path)
    con, m = demo_warehouse, [month]
    total = sql_cents(con, "SELECT sum(EffectiveCost) FROM billing_facts WHERE month = ?", m)
    assert Decimal(page.one("data-total")) == total
    assert Decimal(page.one("data-billed")) == sql_cents(
        con, "SELECT sum(BilledCost) FROM billing_facts WHERE month = ?", m)
    share, status, provisional = con.execute(
        "SELECT untracked_share, status, provisional FROM reconciliation WHERE month = ?",
        m).fetchone()
    assert page.one("data-untracked-share") == f"{share * 100:.1f}"
    assert page.one("data-status") == status
    assert page.one("data-provisional") == str(provisional).lower()
    # the bill as lines: every cell, every purpose total, and the whole (conservation)
    cells = page.having("data-component")
    assert len(cells) == 5 * 6
    for cell in cells:
        assert Decimal(cell["data-cost"]) == sql_cents(
            con, "SELECT sum(cost) FROM attribution WHERE month = ? AND component = ? "
            "AND purpose_class = ?", [month, cell["data-component"], cell["data-purpose"]])
    for column in page.having("data-purpose-total"):
        assert Decimal(column["data-cost"]) == sql_cents(
            con, "SELECT sum(cost) FROM attribution WHERE month = ? AND purpose_class = ?",
            [month, column["data-purpose-total"]])
    assert Decimal(page.one("data-bill-total")) == total
    levers = con.execute("SELECT rank, lever, round(dollars, 2) FROM cost_levers "
                         "WHERE month = ? ORDER BY rank", m).fetchall()
    shown = [(int(a["data-rank"]), a["data-lever"]) for a in page.having("data-lever")]
    assert shown == [(r, lever) for r, lever, _ in levers] and len(shown) == 8
    assert [Decimal(a["data-dollars"]) for a in page.having("data-dollars")] == [
        Decimal(str(d)).quantize(CENT) for *_, d in levers]
    models = page.having("data-model-total")
    assert abs(sum(Decimal(a["data-cost"]) for a in models) - total) <= 2 * CENT
    for row in models:
        assert Decimal(row["data-cost"]) == sql_cents(
            con, "SELECT sum(cost) FROM cost_per_model_monthly WHERE month = ? "
            "AND model IS NOT DISTINCT FROM ?", [month, row["data-model-total"] or None])
    assert Decimal(page.one("data-retention-cost")) == sql_cents(
        con, "SELECT sum(monthly_cost) FROM retention_violations WHERE month = ?", m)
    searches = page.having("data-search")
    assert {a["data-search"] for a in searches} == {s for (s,) in con.execute(
        "SELECT search_id FROM search_costs WHERE month = ?", m).fetchall()}
    top = page.having("data-untracked-cost")[0]
    assert Decimal(top["data-untracked-cost"]) == sql_cents(
        con, "SELECT max(c) FROM (SELECT sum(cost) AS c FROM untracked_usage WHERE month = ? "
        "GROUP BY resource_id)", m)


def test_page_is_self_contained(warehouse, tmp_path):
    page, html = render(warehouse, AMORTIZED, tmp_path)
    fetched = [a.get("src") or a.get("href") for tag, a in page.elements
               if tag in ("script", "link", "img", "iframe", "image", "use")]
    assert not [u for u in fetched if u and not u.startswith("#")]
    assert "url(http" not in html and "@import" not in html
    assert html.count("<svg") >= 3  # the bill, the levers, the bridge (SP month)


def test_bridge_closes_exactly(warehouse, demo_warehouse, tmp_path):
    page, _ = render(warehouse, AMORTIZED, tmp_path)
    (table,) = page.having("data-bridge-start")
    start, end = Decimal(table["data-bridge-start"]), Decimal(table["data-bridge-end"])
    steps = page.having("data-step")
    assert start + sum(Decimal(s["data-amount"]) for s in steps) == end
    con = demo_warehouse
    assert start == sql_cents(con, "SELECT sum(BilledCost) FROM billing_facts WHERE month = ?",
                              [AMORTIZED])
    assert end == sql_cents(con, "SELECT sum(EffectiveCost) FROM billing_facts WHERE month = ?",
                            [AMORTIZED])
    expected = dict(con.execute(
        "SELECT x_LineItemType, sum(EffectiveCost - BilledCost) FROM billing_facts "
        "WHERE month = ? GROUP BY 1 HAVING abs(sum(EffectiveCost - BilledCost)) > 1e-9",
        [AMORTIZED]).fetchall())
    assert {s["data-step"] for s in steps} == set(expected) and len(expected) >= 3
    for s in steps:
        assert abs(Decimal(s["data-amount"]) - Decimal(str(expected[s["data-step"]]))) <= CENT
        assert float(s["data-exact"]) == pytest.approx(expected[s["data-step"]], abs=1e-6)


def _line(n: int, item_type: str, billed: float, effective: float, category="Usage",
          currency: str = "USD") -> dict:
    start = datetime(2026, 10, 1, n)
    return {"ChargePeriodStart": start, "ChargePeriodEnd": start.replace(hour=n + 1),
            "ChargeCategory": category, "x_LineItemType": item_type, "BilledCost": billed,
            "EffectiveCost": effective, "x_CostComponent": "gpu", "x_SourceLine": f"l{n}",
            "BillingCurrency": currency}


def test_bridge_rounding_and_missing_tables(tmp_path):
    """Three steps of 0.4 cents: each rounds to 0.00 alone, yet they move the total a cent.
    Tables the warehouse lacks become a one-line note, not an error."""
    month, path = date(2026, 10, 1), tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, [
            _line(0, "Usage", 100.0, 100.0),
            _line(1, "DiscountedUsage", 1.0, 1.004),
            _line(2, "SavingsPlanCoveredUsage", 1.0, 1.004),
            _line(3, "EdpDiscount", 0.0, 0.004, "Credit"),
            _line(4, "Tax", 5.0, 5.0, "Tax"),
        ])
        for table in ("cost_levers", "reconciliation", "search_trend", "untracked_usage"):
            con.execute(f"DROP TABLE {table}")
    page, html = render(str(path), month, tmp_path)
    assert Decimal(page.one("data-total")) == Decimal("107.01")
    assert Decimal(page.one("data-bridge-start")) == Decimal("107.00")
    shown = [Decimal(s["data-amount"]) for s in page.having("data-step")]
    assert len(shown) == 3 and sum(shown) == Decimal("0.01")
    assert sum(Decimal(s["data-exact"]).quantize(CENT) for s in page.having("data-step")) == 0
    for table in ("cost_levers", "reconciliation", "untracked_usage"):
        assert f"the warehouse has no <code>{table}</code> table" in html
    assert "<code>attribution</code> has no rows for\n2026-10" in html
    assert "No hyperparameter search was active this month." in html
    with pytest.raises(ReportError, match="no billing data for 2026-11"):
        write_report(str(path), date(2026, 11, 1), out=tmp_path / "none.html")


def _bridge_section(html: str) -> str:
    return html[html.index('<h2 id="bridge">'):html.index('<h2 id="reconciliation">')]


@pytest.mark.parametrize(("currency", "lines", "start", "steps", "end"), [
    # 216.8294 → 216.829; −2.10124 → 214.72816 → 214.728; +0.84248 → 215.57064 → 215.571:
    # the steps read −2.101 and 0.843 (to the cent they read −2.10 and 0.84 shown as
    # −KWD 2.100 and KWD 0.840, and 216.829 − 2.100 + 0.840 is 215.569)
    ("KWD", [(0, "Usage", 213.8294, 213.8294), (1, "SavingsPlanCoveredUsage", 3.0, 0.89876),
             (2, "DiscountedUsage", 0.0, 0.84248)],
     "216.829", {"SavingsPlanCoveredUsage": "-2.101", "DiscountedUsage": "0.843"}, "215.571"),
    # 103,252 − 1,000.4 → 102,251.6 → 102,252; + 400.5 → 102,652.1 → 102,652: the steps read
    # −1,000 and 400 (to the cent −1,000.40 and 400.50 read −JPY 1,000 and JPY 401, and
    # 103,252 − 1,000 + 401 is 102,653)
    ("JPY", [(0, "Usage", 100000.0, 100000.0), (1, "SavingsPlanCoveredUsage", 2000.0, 999.6),
             (2, "DiscountedUsage", 1252.0, 1652.5)],
     "103252", {"SavingsPlanCoveredUsage": "-1000", "DiscountedUsage": "400"}, "102652"),
])
def test_the_bridge_adds_up_in_the_currencys_smallest_unit(tmp_path, currency, lines, start,
                                                           steps, end):
    """The bridge's running totals rounded to the fils and the yen, not the cent: its figures
    add up exactly, and the waterfall labels each step as the table shows it."""
    month, path = date(2026, 10, 1), tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, [_line(*line, currency=currency) for line in lines])
    page, html = render(str(path), month, tmp_path)
    assert (page.one("data-bridge-start"), page.one("data-bridge-end")) == (start, end)
    assert {s["data-step"]: s["data-amount"] for s in page.having("data-step")} == steps
    assert Decimal(start) + sum(Decimal(v) for v in steps.values()) == Decimal(end)
    section = _bridge_section(html)
    symbol = f"{currency} "
    for amount in (start, *steps.values(), end):
        text = f"{'−' if amount.startswith('-') else ''}{symbol}{Decimal(amount.lstrip('-')):,}"
        assert section.count(text) == 2, text  # the waterfall's label and the table's row
    assert "KWD 2.100" not in section and "KWD 0.840" not in section
    assert "JPY 401" not in section


def model_cost_rows(costs: dict[str, float], purpose_class: str,
                    untracked: float) -> list[dict]:
    """`cost_per_model_monthly` rows: each model's GPU cost in `purpose_class`, and the
    model-less (untracked) row."""
    return ([{"model": m, "purpose_class": purpose_class, "component": "gpu", "cost": c,
              "accelerator_hours": 1.0, "runs": 1} for m, c in costs.items()]
            + [{"model": None, "purpose_class": "untracked", "component": "gpu",
                "cost": untracked, "accelerator_hours": 0.0, "runs": 0}])


def test_long_tables_show_their_head_and_what_the_rest_adds_up_to(tmp_path):
    """A month of more models, searches and retrained models than a page should list: each
    table shows the first LONG rows in its order and one row with the others' count and cost;
    the model-less row (untracked, unallocated) is shown whatever its rank."""
    from cost_pipeline.report.data import LONG

    month, path = date(2026, 10, 1), tmp_path / "w.duckdb"
    n = LONG + 7
    # costs 1 … n: the cheapest are left out; the model-less row is the cheapest of all
    costs = {f"m{i:03d}": float(i) + 0.125 for i in range(1, n + 1)}
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, [_line(0, "Usage", 100.0, 100.0)])
        insert(con, "cost_per_model_monthly", month,
               model_cost_rows(costs, "production", untracked=0.5), {})
        insert(con, "search_costs", month,
               [{"search_id": f"s-{m}", "model": m, "runs": 2, "configs": 2.0, "seeds": 1,
                 "runs_this_month": 2, "hours": 1.0, "accelerator_hours": 1.0, "cost": c}
                for m, c in costs.items()], {})
        insert(con, "retrain_cadence", month,
               [{"model": m, "retrains": 1, "schedule_retrains": 1, "drift_retrains": 0,
                 "manual_retrains": 0, "unknown_retrains": 0, "cost": c, "search_cost": c / 2,
                 "flat_retrains": 1, "flat_retrain_cost": c / 4} for m, c in costs.items()],
               {})
    page, html = render(str(path), month, tmp_path)
    ranked = sorted(costs, key=lambda m: -costs[m])
    left_out = ranked[LONG:]
    assert [a["data-model-total"] for a in page.having("data-model-total")] == [
        *ranked[:LONG], ""]                                   # the model-less row is kept
    assert [a["data-search"] for a in page.having("data-search")] == [
        f"s-{m}" for m in ranked[:LONG]]
    assert [a["data-retrain-model"] for a in page.having("data-retrain-model")] == ranked[:LONG]
    rest = Decimal(str(sum(costs[m] for m in left_out))).quantize(CENT)
    assert [Decimal(a["data-rest-cost"]) for a in page.having("data-rest-cost")] == [rest] * 3
    assert html.count(f"… and {len(left_out)} more models") == 2
    assert f"… and {len(left_out)} more searches" in html
    assert "every row is in the warehouse's <code>search_costs</code>" in html
    # the retrained models left out: their search cost, flat retrains and flat retrain cost
    # too (the lever "retrain on measured decay" counts theirs; the row showed cost alone)
    half, quarter = (Decimal(str(sum(costs[m] / k for m in left_out))).quantize(CENT)
                     for k in (2, 4))
    assert page.one("data-rest-search-cost") == f"{half}"
    assert page.one("data-rest-flat-retrain-cost") == f"{quarter}"
    assert page.one("data-rest-flat-retrains") == f"{len(left_out)}"


def test_figures_that_are_not_finite_numbers_render_and_large_ones_to_the_cent(tmp_path):
    """A search whose improvement was NaN (a warehouse written while a NaN metric counted) or
    infinite renders `–` / `∞`, where money() raised decimal.InvalidOperation and the month's
    report failed; a finite amount, however large, is written to the cent."""
    from cost_pipeline.report.money import in_currency
    from cost_pipeline.report.render import number, percent

    nan, inf = float("nan"), float("inf")
    assert [in_currency(v, "USD") for v in (nan, inf, -inf)] == ["–", "$∞", "−$∞"]
    assert in_currency(1e26, "EUR") == "EUR 100,000,000,000,000,000,000,000,000.00"
    assert in_currency(-1e300, "USD").startswith("−$1,000,000,000,")
    assert [number(nan), number(-inf), percent(nan), percent(inf)] == ["–", "−∞", "–", "∞"]
    month, path = date(2026, 10, 1), tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, [_line(0, "Usage", 100.0, 100.0)])
        insert(con, "search_costs", month, [
            {"search_id": "s-1", "model": "m", "runs": 2, "configs": 2.0, "seeds": 1,
             "runs_this_month": 2, "hours": 1.0, "accelerator_hours": 1.0, "cost": 60.0,
             "metric_name": "val_auc", "best_metric": nan, "previous_best": 0.8,
             "improvement": nan, "cost_per_improvement": nan},
            {"search_id": "s-2", "model": "m", "runs": 1, "configs": 1.0, "seeds": 1,
             "runs_this_month": 1, "hours": 1.0, "accelerator_hours": 1.0, "cost": 40.0,
             "metric_name": "val_auc", "best_metric": 0.9, "previous_best": 0.9,
             "improvement": 1e-320, "cost_per_improvement": inf}], {})
    page, html = render(str(path), month, tmp_path)
    assert [a["data-search"] for a in page.having("data-search")] == ["s-1", "s-2"]
    assert "$∞" in html and not {"nan", "NaN", "inf"} & set(re.findall(r"\b\w+\b", html))


def test_cli_writes_the_report_and_prints_its_path(demo_quarter, warehouse, dagster_home,
                                                   tmp_path):
    import os

    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    cli = [sys.executable, "-m", "cost_pipeline.cli", "report", "--config", str(demo_quarter[0])]
    done = subprocess.run([*cli, "--month", "2026-08"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(report_path(warehouse, FAILING))
    assert Path(done.stdout.strip()).stat().st_size > 10_000
    out = tmp_path / "r.html"
    done = subprocess.run([*cli, "--month", "2026-09", "--out", str(out)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == str(out) and out.exists()
    missing = subprocess.run([*cli, "--month", "2026-05"], capture_output=True, text=True,
                             env=env, timeout=120)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"error: no billing data for 2026-05 in {warehouse}: materialize the month first"]


def test_open_says_when_no_browser_could_be_opened(tmp_path, monkeypatch):
    """`report --open` on a machine with no browser (a headless server, `BROWSER` a command
    that fails) printed the path and nothing else, as if the page had opened: a note on
    stderr says to open it, and the exit code is still 0 (the page was written)."""
    import os

    month, warehouse = date(2026, 10, 1), tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        insert_lines(con, month, [_line(0, "Usage", 10.0, 10.0)])
    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: w.duckdb}\n")
    # webbrowser tries `BROWSER`, then the graphical and console browsers it finds: none here
    monkeypatch.setenv("BROWSER", "false")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "TERM"):
        monkeypatch.delenv(name, raising=False)
    done = subprocess.run([sys.executable, "-m", "cost_pipeline.cli", "report", "--config",
                           str(config), "--month", "2026-10", "--open"], capture_output=True,
                          text=True, env=dict(os.environ), timeout=120)
    page = report_path(str(warehouse), month)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{page}\n" and page.exists()
    assert done.stderr == f"note: no web browser could be opened; open {page} yourself\n"


def test_asset_metadata_in_the_instance(demo_quarter, warehouse, demo_warehouse, dagster_home):
    import dagster as dg

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("monthly_report"),
                                  asset_partitions=["2026-08-01"]), limit=1).records
    metadata = {k: v.value for k, v in
                records[0].event_log_entry.asset_materialization.metadata.items()}
    total = sql_cents(demo_warehouse, "SELECT sum(EffectiveCost) FROM billing_facts "
                      "WHERE month = ?", [FAILING])
    assert Decimal(str(metadata["total_effective_cost"])) == total
    assert metadata["reconciliation_status"] == "fail"
    assert metadata["untracked_share_pct"] == 36.7
    assert f"**${total:,}**" in metadata["bill_as_lines"]
    # the search is the multiplier: bounding it ranks first, the untracked notebook second
    levers = metadata["top_levers"].splitlines()
    assert levers[2].startswith("| 1 | bound the search |")
    assert levers[3].startswith("| 2 | chase untracked usage |")
    assert metadata["chart"].startswith("![") and "data:image/png;base64," in metadata["chart"]
    assert len(metadata["chart"]) < 60_000
    assert Path(metadata["report"]).exists()


def test_the_metadata_share_is_the_pages_rounded_half_up(tmp_path):
    """An untracked share of 0.5625 read 56.3% on the page and `untracked_share_pct` 56.2 in
    the asset's metadata (`round` of the double 56.25, half to even): both say 56.3."""
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from cost_pipeline.defs.assets.report import monthly_report
    from cost_pipeline.defs.resources import PipelineSettings

    month, path = date(2026, 10, 1), tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, [_line(0, "Usage", 16.0, 16.0)])
        # 9 of 16 billed GPU-hours claimed by no run: 0.5625
        insert(con, "reconciliation", month, [{
            "billed_gpu_hours": 16.0, "tracked_gpu_hours": 7.0, "untracked_gpu_hours": 9.0,
            "untracked_share": 0.5625, "threshold": 0.05, "status": "fail",
            "untracked_cost_share": 0.5625, "by_accelerator_type": [], "coverage": 0.4375,
            "over_claimed_gpu_hours": 0.0, "unbilled_claim_gpu_hours": 0.0,
            "provisional": False, "total_effective_cost": 16.0, "attributed_cost": 7.0,
            "untracked_cost": 9.0, "unallocated_cost": 0.0, "runs_without_end": 0}], {})
    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: w.duckdb}\n")
    result = dg.materialize(
        [monthly_report], partition_key="2026-10-01",
        resources={"duckdb": DuckDBResource(database=str(path)),
                   "settings": PipelineSettings(config_path=str(config))})
    (materialization,) = result.asset_materializations_for_node("monthly_report")
    assert materialization.metadata["untracked_share_pct"].value == 56.3
    page = Elements(report_path(str(path), month).read_text(encoding="utf-8"))
    assert page.one("data-untracked-share") == "56.3"


def test_report_renders_in_headless_chromium(warehouse, demo_warehouse, tmp_path):
    path, _ = write_report(warehouse, FAILING, out=tmp_path / "report.html")
    pixels, dom = render_in_chromium(path, tmp_path, height=2400)
    assert pixels.shape[:2] == (2400, 1200)
    assert pixels.std() > 0.05  # not a blank page
    ink = (pixels.mean(axis=2) < 0.6).mean()
    assert 0.01 < ink < 0.5  # text and charts, not a solid block
    total = sql_cents(demo_warehouse, "SELECT sum(EffectiveCost) FROM billing_facts "
                      "WHERE month = ?", [FAILING])
    share = demo_warehouse.execute("SELECT untracked_share FROM reconciliation WHERE month = ?",
                                   [FAILING]).fetchone()[0]
    assert f"${total:,}" in dom and f"{share * 100:.1f}%" in dom and "FAIL" in dom


def test_warm_up_compiles_the_template_once_for_the_process():
    # what a run prepares in a thread before its report step: the same environment and
    # compiled template the report then renders with
    from cost_pipeline.report import render

    render.warm_up()
    env = render._environment()
    assert render._environment() is env
    assert env.get_template("report.html.j2") is env.get_template("report.html.j2")
    import sys
    assert "matplotlib.backends.backend_svg" in sys.modules


def test_a_change_in_percent_never_reads_100_or_0_when_it_is_not():
    """$41.00 spent against a $15,156.47 estimate is −99.73 %: "%+.0f%%" wrote "-100%" (as if
    nothing was spent, and with a hyphen where amounts carry "−"). A change reads whole
    percents, one more decimal at a time (up to six) while it would read ±100 % or 0 % and is
    not; signed "+" or "−"; exactly 0 without a sign."""
    from cost_pipeline.report.render import change_percent

    assert change_percent((41.0 - 15_156.47) / 15_156.47) == "−99.7%"
    assert change_percent(-0.3) == "−30%" and change_percent(0.1) == "+10%"
    assert change_percent(-1.0) == "−100%" and change_percent(1.0) == "+100%"
    assert change_percent(0.1 / 109.9) == "+0.1%"          # 0.091 %: not "+0%"
    assert change_percent(-0.000004) == "−0.0004%"
    assert change_percent(0.9996) == "+99.96%"             # not "+100%", nor "+100.0%"
    assert change_percent(55.1 / 54.9) == "+100.4%"        # 100.36 %: not "+100%"
    assert change_percent(2.5) == "+250%" and change_percent(0.0) == "0%"
    assert change_percent(None) == "–" and change_percent(float("-inf")) == "−∞"


def test_negative_figures_carry_the_minus_sign_amounts_do():
    """`-2.0` GPU-hours and a `-0.01` metric change beside `−$0.60`: one sign on the page."""
    from cost_pipeline.report.render import metric, number

    assert number(-2.0) == "−2.0" and number(-1234.5, 0) == "−1,234" and number(3.0) == "3.0"
    assert metric(-0.01, "%+.4g") == "−0.01" and metric(0.0025, "%+.4g") == "+0.0025"
    assert metric(1e-05) == "1e-05" and metric(-1e-05) == "−1e-05"


MEASURE_TABLES = """<script>
const main = document.querySelector("main"), style = getComputedStyle(main);
document.body.dataset.measured = JSON.stringify({
  client: document.documentElement.clientWidth,
  content: main.getBoundingClientRect().right - parseFloat(style.paddingRight),
  tables: [...document.querySelectorAll("table")].map(t => [
    ([...document.querySelectorAll("h2")].filter(
      h => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING).pop() || {}).id,
    t.getBoundingClientRect().right])});
</script>"""


def table_right_edges(page: Path, work: Path, width: int) -> dict:
    """Where each table of `page` ends in a `width`-px Chromium window, by the section that
    holds it (its `h2` id), beside the document's client width and the right edge of the
    page's text column (a copy of the page measures itself: the page has no script)."""
    import html as html_text
    import json

    from tests.support.chromium import chromium

    browser = chromium()
    if browser is None:
        pytest.skip("chromium not installed (.ci/run installs the Debian package)")
    probe = work / f"{page.stem}-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>",
                                                              MEASURE_TABLES + "</body>"),
                     encoding="utf-8")
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={work / 'profile'}",
                          f"--window-size={width},900", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=90, check=True).stdout
    return json.loads(html_text.unescape(re.search(r'data-measured="([^"]*)"', dom).group(1)))


def searched_month(path: Path, month: date) -> None:
    """A month of two searches, the first as wide as the search table gets: a long id and
    model, thousands of GPU-hours, an estimate recorded over the budget and overrun, a
    cost per unit of improvement in millions, saturating; the second estimated and within."""
    first = "search-churn-2026-10-learning-rate-sweep"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, [_line(0, "Usage", 12_347.67, 12_347.67)])
        insert(con, "search_costs", month, [
            {"search_id": first, "model": "churn-classifier", "runs": 120, "configs": 40.0,
             "seeds": 3, "accelerator_hours": 1_234.5, "cost": 12_345.67,
             "estimated_cost": 10_000.0, "cumulative_cost": 23_456.78, "overrun": 13_456.78,
             "metric_name": "val_auc", "best_metric": 0.91234, "improvement": 0.0012,
             "cost_per_improvement": 10_288_058.33},
            {"search_id": "s2", "model": "fraud", "runs": 6, "configs": 3.0, "seeds": 2,
             "accelerator_hours": 2.0, "cost": 2.0, "estimated_cost": 50.0,
             "cumulative_cost": 2.0, "overrun": -48.0, "metric_name": "val_auc",
             "best_metric": 0.8, "improvement": 0.01, "cost_per_improvement": 200.0}],
            {"runs_this_month": 5, "hours": 1.0})
        insert(con, "search_trend", month, [
            {"model": m, "search_id": s, "search_order": 2, "runs": 6, "accelerator_hours": 1.0,
             "cost": 1.0, "cost_this_month": 1.0, "saturating": s == first}
            for m, s in (("churn-classifier", first), ("fraud", "s2"))], {})
        insert(con, "search_approvals", month, [
            {"search_id": s, "model": m, "configs": 1, "seeds": 1, "reruns": 0, "runs": 1,
             "per_run_cost": e, "estimated_cost": e, "approval_budget": 5_000.0,
             "approved": e <= 5_000.0, "recorded_at": datetime(2026, 9, 1)}
            for s, m, e in ((first, "churn-classifier", 10_000.0), ("s2", "fraud", 50.0))], {})


@pytest.mark.parametrize("width", [1200, 1024])
def test_every_table_fits_the_page(warehouse, tmp_path, width):
    """The search table's 12 columns kept their long headers on one line: at a 1200 px window
    it ended at 1,355 px, and the cost per unit of improvement, its amounts and the red
    "saturating" were cut off. Headers wrap now, amounts do not: every table of a month with
    searches and of the demo's August ends inside the page's text column."""
    month = date(2026, 10, 1)
    searched_month(tmp_path / "w.duckdb", month)
    page, html = render(str(tmp_path / "w.duckdb"), month, tmp_path)
    assert "<span class=\"fail-text\">saturating</span>" in html
    demo, _ = write_report(warehouse, FAILING, out=tmp_path / "demo.html")
    for path in (tmp_path / f"{month:%Y-%m}.html", demo):
        measured = table_right_edges(path, tmp_path, width)
        edge = min(measured["client"], measured["content"]) + 0.5
        assert "search" in [section for section, _ in measured["tables"]]
        assert [t for t in measured["tables"] if t[1] > edge] == [], (path.name, measured)


def test_the_pages_element_ids_are_unique(warehouse, tmp_path):
    """Each inline chart carried matplotlib's default ids (`figure_1`, `patch_1`, `axes_1` …):
    three charts on a page, each id three times, invalid HTML. Each chart's ids have its own
    prefix, and what refers to one (a clip path's `url(#…)`) refers to its chart's."""
    from collections import Counter

    page, html = render(warehouse, AMORTIZED, tmp_path)
    ids = Counter(a["id"] for _, a in page.elements if "id" in a)
    assert html.count("<svg") >= 3 and len(ids) > 30
    assert [i for i, n in ids.items() if n > 1] == []
    referred = set(re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', html))
    assert {r for pair in referred for r in pair if r} <= set(ids)
