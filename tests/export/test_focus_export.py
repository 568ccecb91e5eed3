"""FOCUS out (issue 15.1, 15.2): the demo months and a random bill exported as FOCUS 1.2 —
checked by the FinOps Foundation's focus-validator 2.2.1 (its own venv), totals equal to
billing_facts to the cent, each line's rows summing back to it exactly, Σ EffectiveCost by
x_RunId equal to the attribution per run, and the same bytes on every export."""

from __future__ import annotations

import csv
import json
import logging
import random
import re
import shutil
import subprocess
import sys
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import load_config, parse_config
from cost_pipeline.demo.tool_venvs import ToolUnavailable
from cost_pipeline.export.focus import FocusExportError, export_focus, focus_rows, write_focus
from cost_pipeline.warehouse import dataset_rows, ensure_schema, month_params
from tests.support.warehouse_rows import RUN_DEFAULTS, insert_lines, insert_runs

LOG = logging.getLogger("test")
DEMO_MONTHS = (date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1))
CENT = Decimal("0.01")
METRICS = ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity", "PricingQuantity")


# What AWS and GCP support among the validator's applicability criteria that the export
# covers: without them the rules of RegionId, RegionName, SkuId and PricingCategory (and the
# rules saying those columns must be present) are skipped.
PROVIDER_CRITERIA = ("REGION_SUPPORTED", "MULTIPLE_PRICING_CATEGORIES_SUPPORTED",
                     "UNIT_PRICING_SUPPORTED", "TAGGING_SUPPORTED", "USAGE_MEASUREMENT_SUPPORTED",
                     "ACCOUNT_NAMING_SUPPORTED")
# UNIT_PRICING_SUPPORTED, which SkuId's rules hang on, also wants these: billing_facts keeps
# no price ids, meters or price details, and the export does not invent them
NOT_EXPORTED = ("SkuPriceId", "SkuMeter", "SkuPriceDetails")
# the rules of the columns the export now writes: each must pass under PROVIDER_CRITERIA
REGION_SKU_PRICING_RULES = (
    "CostAndUsage-D-022-C", "CostAndUsage-D-060-C", "CostAndUsage-D-062-C",
    "CostAndUsage-D-063-C", "RegionId-C-000-C", "RegionName-C-000-C", "RegionName-C-004-C",
    "RegionName-C-005-C", "SkuId-C-000-C", "SkuId-C-004-C", "SkuId-C-005-C",
    "PricingCategory-C-000-M", "PricingCategory-C-003-C", "PricingCategory-C-004-C",
    "PricingCategory-C-007-M")


def validate(path: Path, criteria: tuple[str, ...] = ()):
    from cost_pipeline.demo.focus_validator import validate_focus

    try:
        return validate_focus(path, applicability_criteria=criteria)
    except ToolUnavailable as exc:
        pytest.skip(f"focus-validator unavailable (its own venv could not be built): {exc}")


def check_provider_criteria(path: Path, label: str) -> None:
    """Under what the providers support, the export's region, SKU and pricing-category
    columns pass every rule; what still fails is only the columns it does not write."""
    report = validate(path, PROVIDER_CRITERIA)
    print(f"{label} with {','.join(PROVIDER_CRITERIA)}: Total {report.total} | Pass "
          f"{report.passed} | Fail {report.failed} | Skipped {report.skipped}")
    unexported = {rule: line for rule, line in report.real_failures().items()
                  if rule.startswith(tuple(f"{c}-" for c in NOT_EXPORTED))
                  or any(f"Column '{c}' MUST be present" in line for c in NOT_EXPORTED)}
    assert {rule: line for rule, line in report.real_failures().items()
            if rule not in unexported} == {}
    assert set(REGION_SKU_PRICING_RULES) <= report.passed_rules()


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory) -> Path:
    """The demo quarter's warehouse, built by the production ingest and attribution code."""
    from cost_pipeline.demo.generate import generate_demo
    from cost_pipeline.ingest.billing import build_billing_facts
    from cost_pipeline.ingest.checkpoints import build_checkpoint_inventory
    from cost_pipeline.ingest.runs import build_tracker_runs

    cfg = load_config(generate_demo(tmp_path_factory.mktemp("demo")))
    with duckdb.connect(cfg.warehouse_path) as con:
        ensure_schema(con)
        for month in DEMO_MONTHS:
            build_billing_facts(con, cfg, month, LOG)
            build_tracker_runs(con, cfg, month, LOG)
            build_checkpoint_inventory(con, cfg, month, LOG)
            build_attribution(con, month, month_params(cfg, month), dataset_rows(cfg))
    return Path(cfg.warehouse_path)


def check_sums(con: duckdb.DuckDBPyConnection, month: date, path: Path) -> None:
    """Totals, each line's rows and each run's cost against the warehouse."""
    con.register("focus_file", pq.read_table(path))
    # every metric of a line's rows sums back to the origin line exactly (in DECIMAL)
    mismatched = con.execute(
        """SELECT f.x_SourceLine FROM focus_file f
           JOIN billing_facts b ON b.month = ? AND b.x_SourceLine = f.x_SourceLine
           GROUP BY f.x_SourceLine, b.BilledCost, b.EffectiveCost
           HAVING sum(f.BilledCost) <> CAST(b.BilledCost AS DECIMAL(38, 10))
               OR sum(f.EffectiveCost) <> CAST(b.EffectiveCost AS DECIMAL(38, 10))
           LIMIT 3""", [month]).fetchall()
    assert mismatched == []
    lines = con.execute("SELECT count(DISTINCT x_SourceLine) FROM focus_file").fetchall()[0][0]
    assert lines == con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                                [month]).fetchall()[0][0]
    # totals to the cent
    exported = con.execute("SELECT sum(BilledCost), sum(EffectiveCost) FROM focus_file"
                           ).fetchall()[0]
    billed, effective = con.execute("SELECT sum(BilledCost), sum(EffectiveCost) FROM "
                                    "billing_facts WHERE month = ?", [month]).fetchall()[0]
    assert abs(exported[0] - Decimal(str(billed))) < CENT
    assert abs(exported[1] - Decimal(str(effective))) < CENT
    # Σ EffectiveCost by x_RunId = the attribution per run, to the cent
    off = con.execute(
        """WITH f AS (SELECT x_RunId AS run_id, sum(EffectiveCost) AS cost FROM focus_file
                      WHERE x_RunId IS NOT NULL GROUP BY 1),
                a AS (SELECT run_id, sum(cost) AS cost FROM attribution WHERE month = ?
                      AND run_id IS NOT NULL GROUP BY 1)
           SELECT coalesce(f.run_id, a.run_id), f.cost, a.cost FROM f FULL JOIN a USING (run_id)
           WHERE f.cost IS NULL OR a.cost IS NULL OR abs(f.cost - a.cost) >= 0.005""",
        [month]).fetchall()
    assert off == []


@pytest.mark.parametrize("month", DEMO_MONTHS, ids=lambda m: f"{m:%Y-%m}")
def test_demo_months_pass_the_focus_validator(demo_warehouse, tmp_path, month):
    path, rows = export_focus(demo_warehouse, month, "parquet", tmp_path / "focus.parquet")
    report = validate(path)
    print(f"{month:%Y-%m}: {rows} rows; focus-validator 2.2.1 FOCUS 1.2: Total {report.total} "
          f"| Pass {report.passed} | Fail {report.failed} | Skipped {report.skipped} "
          f"{sorted(report.failures)}")
    assert report.real_failures() == {}
    assert report.failed <= 1 and report.passed > 100
    check_provider_criteria(path, f"{month:%Y-%m}")
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        check_sums(con, month, path)
    table = pq.read_table(path)
    run_rows = [r for r in table.select(["x_RunId", "Tags"]).to_pylist() if r["x_RunId"]]
    assert run_rows and all(json.loads(r["Tags"])["cost-pipeline/run_id"] == r["x_RunId"]
                            for r in run_rows)
    # a commitment's usage (and in September the fee's unused part) is Committed
    committed = table.filter(pc.is_valid(table["CommitmentDiscountStatus"]))
    assert set(committed.column("PricingCategory").to_pylist()) <= {"Committed"}


def test_reexport_is_byte_stable(demo_warehouse, tmp_path):
    month = DEMO_MONTHS[1]
    for fmt in ("parquet", "csv"):
        first, _ = export_focus(demo_warehouse, month, fmt, tmp_path / f"a.{fmt}")
        second, _ = export_focus(demo_warehouse, month, fmt, tmp_path / f"b.{fmt}")
        assert first.read_bytes() == second.read_bytes()
    with (tmp_path / "a.csv").open(newline="") as handle:
        row = next(csv.DictReader(handle))
    assert row["BillingPeriodStart"] == f"{month:%Y-%m}-01T00:00:00Z"
    assert row["ChargePeriodStart"].endswith("Z") and "T" in row["ChargePeriodStart"]


def random_bill(seed: int, month: date) -> tuple[list[dict], list[dict]]:
    """A month of billing lines in every category and spelling the normalizations leave
    (units, missing services and quantities, credits, corrections, unused commitment, list
    prices or none), and runs claiming parts of the instances."""
    rng = random.Random(seed)
    start = datetime(month.year, month.month, 1)
    instances = [f"i-{seed:02d}{n:04d}" for n in range(5)] + [f"vm-zürich-{seed}"]
    currency = rng.choice(["USD", "EUR", "NOK"])
    lines = []
    for n in range(rng.randint(40, 90)):
        at = start + timedelta(hours=rng.randrange(24 * 27))
        cost = round(rng.uniform(0.0001, 80), rng.choice((2, 4, 6, 9)))
        kind = rng.choices(["compute", "storage", "network", "tax", "credit", "purchase",
                            "adjustment", "unused", "correction"],
                           weights=[8, 2, 1, 1, 1, 1, 1, 1, 1])[0]
        line = {"x_SourceLine": f"src{seed % 3}:{n:05d}", "ChargePeriodStart": at,
                "ChargePeriodEnd": at + timedelta(hours=1), "ChargeCategory": "Usage",
                "EffectiveCost": cost, "BilledCost": cost,
                "ServiceName": rng.choice(["Amazon Elastic Compute Cloud", "Compute Engine",
                                           None, "ml svc", "Stockage Données™"]),
                "ServiceCategory": rng.choice(["Compute", "Storage", "Foo", None]),
                "ListCost": rng.choice([None, round(cost * 1.3, 6)]),
                "BillingCurrency": currency,
                "RegionId": rng.choice(["us-east-1", "europe-west4", "eu-zürich-1", None, " "]),
                "SkuId": rng.choice([f"SKU{seed}{n % 4}", None, ""]),
                "x_PricingCategory": rng.choice(["on_demand", "spot", "committed", "other",
                                                 None]),
                "x_CostComponent": "other", "Tags": rng.choice(
                    [None, {"team": "ml"}, {"user_run_id": "r0", "env": "prod"}])}
        if kind == "compute":
            gpu = rng.random() < 0.6
            line |= {"ResourceId": rng.choice(instances), "x_CostComponent": "gpu" if gpu
                     else "cpu", "x_AcceleratorCount": 8 if gpu else 0,
                     "x_InstanceUsage": True, "x_UsageHours": rng.choice([1.0, 0.5, 0.25]),
                     "x_ResourceKind": "instance", "x_InstanceType": "p4d.24xlarge",
                     "ConsumedQuantity": 1.0, "ConsumedUnit": rng.choice(["Hrs", "Hours",
                                                                          "1 Hour", None]),
                     "CommitmentDiscountStatus": rng.choice([None, None, "Used"])}
        elif kind in ("storage", "network"):
            line |= {"ResourceId": rng.choice([None, "bucket-a"]), "x_CostComponent": kind,
                     "ConsumedQuantity": rng.choice([None, 12.5]),
                     "ConsumedUnit": rng.choice(["GB-Mo", "gibibyte month", "GB",
                                                 "weird unit!", "byte-seconds"])}
        elif kind == "tax":
            line |= {"ChargeCategory": "Tax", "ServiceName": None}
        elif kind == "credit":
            line |= {"ChargeCategory": "Credit", "EffectiveCost": -cost, "BilledCost": -cost}
        elif kind == "purchase":
            line |= {"ChargeCategory": "Purchase", "EffectiveCost": 0.0,
                     "x_LineItemType": rng.choice(["Fee", "RIFee", "SavingsPlanRecurringFee"])}
        elif kind == "adjustment":
            line |= {"ChargeCategory": "Refund?", "EffectiveCost": -cost, "BilledCost": -cost}
        elif kind == "unused":
            line |= {"CommitmentDiscountStatus": "Unused", "BilledCost": 0.0,
                     "ConsumedQuantity": 3.0, "ConsumedUnit": "Hrs"}
        else:
            line |= {"ChargeClass": "Correction", "EffectiveCost": -cost / 3,
                     "BilledCost": -cost / 3}
        lines.append(line)
    runs = []
    for n in range(rng.randint(3, 12)):
        begin = start + timedelta(hours=rng.randrange(24 * 27))
        runs.append({**RUN_DEFAULTS, "run_id": f"r{n}", "status": "FINISHED",
                     "start_time": begin, "end_time": begin + timedelta(hours=rng.randint(1, 200)),
                     "resource_ids": rng.sample(instances, rng.randint(1, 3)),
                     "gpus": rng.choice([None, 2, 4, 8]), "model": rng.choice(["churn", None]),
                     "purpose": rng.choice(["search", "production", None]),
                     "search_id": rng.choice([None, f"s{seed}"])})
    return lines, runs


def random_warehouse(seed: int, month: date) -> duckdb.DuckDBPyConnection:
    lines, runs = random_bill(seed, month)
    con = duckdb.connect()
    insert_lines(con, month, lines)
    insert_runs(con, month, runs)
    build_attribution(con, month, month_params(parse_config({}, Path(".")), month))
    return con


def test_a_random_bill_passes_the_focus_validator(tmp_path):
    month = date(2026, 3, 1)
    with random_warehouse(20261, month) as con:
        path = write_focus(focus_rows(con, month), tmp_path / "random.parquet")
        check_sums(con, month, path)
    report = validate(path)
    print(f"random bill: Total {report.total} | Pass {report.passed} | Fail {report.failed} "
          f"| Skipped {report.skipped} {sorted(report.failures)}")
    assert report.real_failures() == {} and report.failed <= 1
    check_provider_criteria(path, "random bill")
    with pytest.raises(ValueError, match="unknown applicability criteria REGION_SUPORTED"):
        validate(path, ("REGION_SUPORTED",))  # a typo would skip the rules silently
    # FOCUS strings are ASCII: ids percent-encoded, names folded
    table = pq.read_table(path)
    assert "vm-z%C3%BCrich-20261" in set(table.column("ResourceId").to_pylist())
    assert "eu-z%C3%BCrich-1" in set(table.column("RegionName").to_pylist())
    assert "Stockage DonneesTM" in set(table.column("ServiceName").to_pylist())


def test_csv_amounts_are_plain_decimals(tmp_path):
    """A zero or a tiny amount is `0.0000000000`, not Arrow's `0E-10`: the CSV's figures read
    as numbers wherever a decimal point is understood, and as the parquet's values."""
    month = date(2026, 3, 1)
    with random_warehouse(20261, month) as con:
        rows = focus_rows(con, month)
    path = write_focus(rows, tmp_path / "a.csv", "csv")
    decimals = [f.name for f in rows.schema if pa.types.is_decimal(f.type)]
    with path.open(newline="") as handle:
        written = list(csv.DictReader(handle))
    cells = [row[name] for row in written for name in decimals if row[name]]
    assert cells and not [c for c in cells if "E" in c.upper()]
    assert any(Decimal(c) == 0 for c in cells)  # a purchase's effective cost, unused's billed
    assert all(re.fullmatch(r"-?\d+\.\d{10}", c) for c in cells)
    for name in decimals:
        assert [Decimal(r[name]) if r[name] else None for r in written] \
            == rows.column(name).to_pylist()


@pytest.mark.parametrize("seed", range(8))
def test_random_bills_split_exactly(seed):
    """Without the validator (fast): every line's rows sum back to it in DECIMAL, and each
    run gets what the attribution gave it."""
    month = date(2026, 2, 1)
    with random_warehouse(seed, month) as con:
        rows = focus_rows(con, month)
        expected = {r[0]: r[1:] for r in con.execute(
            "SELECT x_SourceLine, CAST(BilledCost AS DECIMAL(38, 10)), "
            "CAST(EffectiveCost AS DECIMAL(38, 10)) FROM billing_facts WHERE month = ?",
            [month]).fetchall()}
    sums: dict[str, list[Decimal]] = {}
    for row in rows.select(["x_SourceLine", "BilledCost", "EffectiveCost"]).to_pylist():
        total = sums.setdefault(row["x_SourceLine"], [Decimal(0), Decimal(0)])
        total[0] += row["BilledCost"]
        total[1] += row["EffectiveCost"]
    assert {k: tuple(v) for k, v in sums.items()} == expected
    assert all(v is not None for v in rows.column("ListCost").to_pylist())
    assert set(rows.column("ChargeCategory").to_pylist()) <= {
        "Usage", "Purchase", "Tax", "Credit", "Adjustment"}


PRICING_CATEGORIES = {"on_demand": "Standard", "spot": "Dynamic", "committed": "Committed",
                      "other": "Other"}


@pytest.mark.parametrize("seed", range(8))
def test_region_sku_and_pricing_category_follow_focus(seed):
    """Without the validator (fast): RegionName is RegionId; SkuId and PricingCategory are
    null for Tax and set on every Usage or Purchase row that is no correction (a SKU stand-in
    where the line has none); PricingCategory is x_PricingCategory mapped, Committed for a
    commitment's usage, x_PricingCategory kept as it was."""
    month = date(2026, 2, 1)
    with random_warehouse(seed, month) as con:
        rows = focus_rows(con, month).to_pylist()
        lines = {r["x_SourceLine"]: r for r in con.sql(
            "SELECT x_SourceLine, RegionId, SkuId, x_PricingCategory FROM billing_facts "
            "WHERE month = ?", params=[month]).to_arrow_table().to_pylist()}
    assert {"Tax", "Usage", "Purchase"} <= {r["ChargeCategory"] for r in rows}
    for row in rows:
        line = lines[row["x_SourceLine"]]
        region = (line["RegionId"] or "").strip() or None
        assert row["RegionId"] == row["RegionName"]
        assert row["RegionId"] == (region and region.replace("ü", "%C3%BC"))
        assert row["x_PricingCategory"] == line["x_PricingCategory"]
        required = (row["ChargeCategory"] in ("Usage", "Purchase")
                    and row["ChargeClass"] != "Correction")
        if row["ChargeCategory"] == "Tax":
            assert row["SkuId"] is None and row["PricingCategory"] is None
        elif row["CommitmentDiscountStatus"] is not None:  # Used, Unused, a fee's unused part
            assert row["PricingCategory"] == "Committed"
        else:
            assert row["PricingCategory"] == PRICING_CATEGORIES.get(line["x_PricingCategory"],
                                                                    "Other")
        sku = (line["SkuId"] or "").strip() or None
        if required:  # the line's, else a stand-in: service/component/…
            assert row["SkuId"] == sku if sku else row["SkuId"].count("/") >= 1
        elif row["ChargeCategory"] != "Tax":
            assert row["SkuId"] == sku


def test_cli_export_focus(demo_warehouse, tmp_path):
    config = demo_warehouse.parent / "config.yaml"
    run = [sys.executable, "-m", "cost_pipeline.cli", "export", "focus", "--config",
           str(config), "--month", "2026-07", "--format", "csv", "--out",
           str(tmp_path / "f.csv")]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str((tmp_path / "f.csv").resolve())
    missing = subprocess.run([*run[:-6], "--month", "2026-05"], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert "no billing lines for 2026-05" in missing.stderr
    with pytest.raises(FocusExportError, match="unknown format"):
        export_focus(demo_warehouse, DEMO_MONTHS[0], "xlsx")


def test_cli_export_focus_format_from_the_extension(demo_warehouse, tmp_path, capsys):
    # without --format, --out's extension says the format; without either, parquet; a
    # --format the extension contradicts is one line, exit 1, no file (parquet went into f.csv)
    from cost_pipeline.cli.main import main

    config = demo_warehouse.parent / "config.yaml"
    args = ["export", "focus", "--config", str(config), "--month", "2026-07"]
    assert main([*args, "--out", str(tmp_path / "f.csv")]) == 0
    assert (tmp_path / "f.csv").read_text(encoding="utf-8").startswith('"BillingAccountId"')
    assert main([*args, "--out", str(tmp_path / "f.data")]) == 0
    assert pq.read_metadata(tmp_path / "f.data").num_rows > 0
    assert main([*args, "--format", "csv", "--out", str(tmp_path / "f.parquet")]) == 1
    assert capsys.readouterr().err.endswith(
        f"error: --format csv contradicts --out {tmp_path / 'f.parquet'} (a .parquet file): "
        "drop --format, or name a .csv file\n")
    assert not (tmp_path / "f.parquet").exists()


def test_cli_export_focus_to_stdout(demo_warehouse, tmp_path):
    # `--out -` writes the CSV to stdout (no file named `-`), the same bytes as the file;
    # parquet cannot go there: one line, exit 1; a reader that stops early is one line too
    config = demo_warehouse.parent / "config.yaml"
    expected, _ = export_focus(demo_warehouse, DEMO_MONTHS[0], "csv", tmp_path / "f.csv")
    run = [sys.executable, "-m", "cost_pipeline.cli", "export", "focus", "--config",
           str(config), "--month", "2026-07", "--out", "-"]
    for fmt in (["--format", "csv"], []):  # stdout takes CSV: the format without --format
        done = subprocess.run([*run, *fmt], capture_output=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected.read_bytes() and done.stderr == b""
    refused = subprocess.run([*run, "--format", "parquet"], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == ("error: parquet cannot go to stdout (--out -): name a file with "
                              "--out, or use --format csv\n")
    assert not (tmp_path / "-").exists()
    with subprocess.Popen([*run, "--format", "csv"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=tmp_path) as head:  # `| head -c 100`
        assert len(head.stdout.read(100)) == 100
        head.stdout.close()
        stderr = head.stderr.read().decode()
    assert head.returncode == 1
    assert stderr == "error: stdout was closed before the whole export was written to it\n"
    assert sorted(p.name for p in demo_warehouse.parent.iterdir()
                  if p.name.startswith(".")) == []  # no staging folder left


def test_the_asset_writes_the_file_beside_the_warehouse(demo_warehouse):
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from cost_pipeline.defs.assets.focus_export import focus_export
    from cost_pipeline.defs.resources import PipelineSettings

    config = demo_warehouse.parent / "config.yaml"
    result = dg.materialize(
        [focus_export], partition_key="2026-09-01",
        resources={"duckdb": DuckDBResource(database=str(demo_warehouse)),
                   "settings": PipelineSettings(config_path=str(config))})
    assert result.success
    path = demo_warehouse.parent / "exports" / "focus-2026-09.parquet"
    (materialization,) = result.asset_materializations_for_node("focus_export")
    assert materialization.metadata["rows"].value == pq.read_metadata(path).num_rows > 0
    # a month without a bill fails as `export focus` does: it published an empty file, a
    # $0 month to the tools reading it
    failed = dg.materialize(
        [focus_export], partition_key="2026-10-01", raise_on_error=False,
        resources={"duckdb": DuckDBResource(database=str(demo_warehouse)),
                   "settings": PipelineSettings(config_path=str(config))})
    assert not failed.success
    (failure,) = failed.get_step_failure_events()
    assert "no billing lines for 2026-10" in str(failure.event_specific_data.error)
    assert not (demo_warehouse.parent / "exports" / "focus-2026-10.parquet").exists()


def test_the_asset_writes_utc_as_the_command_does_whatever_the_zone(demo_warehouse, tmp_path):
    # the resource's connection had the machine's zone: the periods came out
    # `tz=America/New_York` (a period start `2026-06-30 20:00:00-04:00`), other bytes than
    # the command's file of the same month
    import os

    script = """
import sys
import dagster as dg
from dagster_duckdb import DuckDBResource
from cost_pipeline.defs.assets.focus_export import focus_export
from cost_pipeline.defs.resources import PipelineSettings
warehouse, config = sys.argv[1:3]
with DuckDBResource(database=warehouse).get_connection() as con:
    print(con.execute("SELECT current_setting('TimeZone')").fetchone()[0])
result = dg.materialize([focus_export], partition_key="2026-09-01", resources={
    "duckdb": DuckDBResource(database=warehouse),
    "settings": PipelineSettings(config_path=config)})
assert result.success
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(demo_warehouse),
         str(demo_warehouse.parent / "config.yaml")], capture_output=True, text=True,
        env={**os.environ, "TZ": "America/New_York"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "America/New_York"   # the machine's zone
    asset = demo_warehouse.parent / "exports" / "focus-2026-09.parquet"
    schema = pq.read_schema(asset)
    assert str(schema.field("BillingPeriodStart").type) == "timestamp[us, tz=UTC]"
    command = tmp_path / "command.parquet"
    export_focus(demo_warehouse, date(2026, 9, 1), out=command)
    assert asset.read_bytes() == command.read_bytes()


def test_a_month_streamed_in_many_batches_is_the_month_in_memory(demo_warehouse, tmp_path,
                                                                  monkeypatch):
    # the export writes batch by batch (bounded memory): small batches give the same rows, in
    # the same order, as the whole month held in memory, and the same bytes twice
    from cost_pipeline.export import focus

    monkeypatch.setattr(focus, "BATCH_ROWS", 500)
    month = DEMO_MONTHS[-1]
    first, rows = export_focus(demo_warehouse, month, "parquet", tmp_path / "a.parquet")
    second, _ = export_focus(demo_warehouse, month, "parquet", tmp_path / "b.parquet")
    assert rows > 500 * 4 and pq.read_metadata(first).num_row_groups > 4
    assert first.read_bytes() == second.read_bytes()
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")  # as export_focus reads
        whole = write_focus(focus_rows(con, month), tmp_path / "whole.parquet")
    assert pq.read_table(first).equals(pq.read_table(whole))
    csv_path, csv_rows = export_focus(demo_warehouse, month, "csv", tmp_path / "a.csv")
    assert csv_rows == rows
    assert len(csv_path.read_text(encoding="utf-8").splitlines()) == rows + 1


def test_a_month_built_in_slices_is_the_month_built_whole(demo_warehouse, tmp_path,
                                                          monkeypatch):
    # a large month is built and sorted a slice of its lines at a time (ranges of
    # x_SourceLine of about SLICE_ROWS rows): many small slices give the same bytes as one
    # slice, the batches stay BATCH_ROWS long across the slices' edges, and the month-wide
    # facts (one category per service, the invoice ids) do not depend on the slicing
    from cost_pipeline.export import focus

    month = DEMO_MONTHS[-1]
    monkeypatch.setattr(focus, "BATCH_ROWS", 500)
    whole, rows = export_focus(demo_warehouse, month, "parquet", tmp_path / "whole.parquet")
    seen = []
    bounds = focus._slice_bounds
    monkeypatch.setattr(focus, "_slice_bounds", lambda con: seen.append(bounds(con)) or seen[-1])
    monkeypatch.setattr(focus, "SLICE_ROWS", 700)
    sliced, sliced_rows = export_focus(demo_warehouse, month, "parquet",
                                       tmp_path / "sliced.parquet")
    (slices,) = seen
    assert sliced_rows == rows and len(slices) >= rows // 700 > 3
    assert slices[0][0] is None and slices[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert sliced.read_bytes() == whole.read_bytes()
    meta = pq.read_metadata(sliced)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == (
        [500] * (rows // 500) + ([rows % 500] if rows % 500 else []))
    csv_whole, _ = export_focus(demo_warehouse, month, "csv", tmp_path / "sliced.csv")
    monkeypatch.setattr(focus, "SLICE_ROWS", 10**9)
    csv_one, _ = export_focus(demo_warehouse, month, "csv", tmp_path / "whole.csv")
    assert csv_whole.read_bytes() == csv_one.read_bytes()


def test_a_failure_mid_month_leaves_no_file_and_the_connection_usable(demo_warehouse, tmp_path,
                                                                      monkeypatch):
    # a batch that fails (here: its conversion, after two were written) leaves neither the
    # file nor its partial copy, and ends DuckDB's result: the same connection exports again
    from cost_pipeline.export import focus

    month = DEMO_MONTHS[-1]
    monkeypatch.setattr(focus, "BATCH_ROWS", 500)
    monkeypatch.setattr(focus, "SLICE_ROWS", 700)
    convert, calls = focus._ascii_strings, []

    def failing(rows):
        calls.append(rows.num_rows)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return convert(rows)

    target = tmp_path / "out" / "focus.parquet"
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        monkeypatch.setattr(focus, "_ascii_strings", failing)
        with pytest.raises(RuntimeError, match="disk full"):
            focus.stream_focus(con, month, target)
        assert list(target.parent.iterdir()) == []
        monkeypatch.setattr(focus, "_ascii_strings", convert)
        path, rows, runs = focus.stream_focus(con, month, target)
    assert rows == pq.read_metadata(path).num_rows > 1500 and runs > 0


def test_a_directory_or_a_failed_rename_leaves_no_partial_file(demo_warehouse, tmp_path,
                                                                monkeypatch):
    # the partial copy is removed whatever fails, the final rename included
    import cost_pipeline.export
    from cost_pipeline.export import focus

    month = DEMO_MONTHS[0]
    (tmp_path / "focus.parquet").mkdir()
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        with pytest.raises(ValueError, match="is a directory: name the file to write"):
            focus.stream_focus(con, month, tmp_path / "focus.parquet")

        def no_space(*_args, **_kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(cost_pipeline.export.os, "replace", no_space)
        with pytest.raises(OSError, match="No space left"):
            focus.stream_focus(con, month, tmp_path / "focus.csv", "csv")
        with pytest.raises(OSError, match="No space left"):
            write_focus(focus_rows(con, month), tmp_path / "small.parquet")
    assert [p.name for p in tmp_path.iterdir()] == ["focus.parquet"]


def test_two_exports_of_the_same_path_at_once_both_succeed(demo_warehouse, tmp_path,
                                                           monkeypatch):
    # each writer has a partial file of its own: both finish writing before either renames
    # (a barrier in the rename), and both renames succeed, leaving one whole copy. With one
    # fixed `.f.csv.partial` the second rename failed: No such file or directory.
    from tests.support.export_race import write_twice_at_once

    month, target = DEMO_MONTHS[0], tmp_path / "race" / "f.csv"
    expected, _ = export_focus(demo_warehouse, month, "csv", tmp_path / "alone.csv")
    outcomes = write_twice_at_once(
        lambda: export_focus(demo_warehouse, month, "csv", target)[0], monkeypatch)
    assert outcomes == [target.resolve()] * 2
    assert target.read_bytes() == expected.read_bytes()
    assert [p.name for p in target.parent.iterdir()] == ["f.csv"]  # no partial, no spill


def test_a_warehouse_on_a_read_only_disk_is_one_line_or_goes_to_stdout(demo_warehouse,
                                                                        tmp_path, capsysbinary):
    """A warehouse on a read-only disk: the default path is one line naming the file that
    cannot be written — it was `[Errno 30] Read-only file system:
    '…/exports/.focus-2026-07.parquet.….spill'`, the temporary folder DuckDB spills into —
    and `--out -` stages its copy (and spills) in the system's temporary folder, the same
    bytes as the file."""
    from cost_pipeline.cli.main import main
    from tests.support.read_only import read_only

    expected, _ = export_focus(demo_warehouse, DEMO_MONTHS[0], "csv", tmp_path / "f.csv")
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(demo_warehouse, folder / "warehouse.duckdb")
    (folder / "exports").mkdir()  # made before the disk went read-only
    (tmp_path / "config.yaml").write_text("warehouse: {path: ro/warehouse.duckdb}\n")
    args = ["export", "focus", "--config", str(tmp_path / "config.yaml"), "--month",
            "2026-07"]
    with read_only(folder) as cause:
        assert main(args) == 1
        out, err = capsysbinary.readouterr()
        assert out == b"" and err.decode() == (
            f"error: cannot write {folder / 'exports' / 'focus-2026-07.parquet'}: {cause}\n")
        assert main([*args, "--out", "-"]) == 0
        out, err = capsysbinary.readouterr()
        assert out == expected.read_bytes() and err == b""
    assert sorted(p.name for p in folder.iterdir()) == ["exports", "warehouse.duckdb"]
    assert list((folder / "exports").iterdir()) == []


def test_a_month_materialized_without_lines_is_not_called_unmaterialized(tmp_path, capsys):
    """A month materialized with nothing billed yet was "no billing lines for 2026-11 in …:
    materialize the month first", which materializing again could not mend: the command and
    the asset say it has no billing lines; a month never materialized still says to
    materialize it. Neither writes a file."""
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from cost_pipeline.cli.main import main
    from cost_pipeline.defs.assets.focus_export import focus_export
    from cost_pipeline.defs.resources import PipelineSettings
    from cost_pipeline.ingest.billing import build_billing_facts

    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: warehouse.duckdb}\n")
    warehouse = tmp_path / "warehouse.duckdb"
    nov = date(2026, 11, 1)
    with duckdb.connect(str(warehouse)) as con:
        build_billing_facts(con, load_config(config), nov, LOG)   # no billing source
    empty = ("2026-11 has no billing lines (it was materialized: nothing billed yet), so "
             "there is nothing to export")
    never = f"no billing lines for 2026-12 in {warehouse}: materialize the month first"
    with pytest.raises(FocusExportError) as raised:
        export_focus(warehouse, nov, out=tmp_path / "n.parquet")
    assert str(raised.value) == empty
    with pytest.raises(FocusExportError) as raised:
        export_focus(warehouse, date(2026, 12, 1), out=tmp_path / "d.parquet")
    assert str(raised.value) == never
    args = ["export", "focus", "--config", str(config), "--format", "csv", "--out",
            str(tmp_path / "f.csv")]
    assert main([*args, "--month", "2026-11"]) == 1
    assert capsys.readouterr().err == f"error: {empty}\n"
    assert main([*args, "--month", "2026-12"]) == 1
    assert capsys.readouterr().err == f"error: {never}\n"
    resources = {"duckdb": DuckDBResource(database=str(warehouse)),
                 "settings": PipelineSettings(config_path=str(config))}
    for key, message in (("2026-11-01", empty), ("2026-12-01", never)):
        failed = dg.materialize([focus_export], partition_key=key, raise_on_error=False,
                                resources=resources)
        (failure,) = failed.get_step_failure_events()
        assert failure.event_specific_data.error.message.strip().endswith(message)
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".parquet", ".csv")]


def test_the_export_read_back_as_focus_attributes_the_month_as_the_bill_did(tmp_path,
                                                                           dagster_home):
    """The month's own FOCUS export, read back as a `focus` source with the same runs, gives
    the month's attribution again. Its ChargeDescription read `Usage of gpu in Amazon Elastic
    Compute Cloud (p4d.24xlarge)`, which the FOCUS reader took for a GPU-seconds meter: the
    spot hour's 1 h was divided by its 8 GPUs, so the run's half hour claimed the whole line
    ($32.77 to A, nothing untracked, 1 GPU-hour billed instead of 8)."""
    import yaml

    from cost_pipeline.cli.main import main
    from tests.support.cur_rows import line, write_export

    runs = tmp_path / "runs.csv"
    runs.write_text("run_id,status,start_time,end_time,resource_ids\n"
                    "A,FINISHED,2026-07-01T00:00:00Z,2026-07-01T00:30:00Z,i-spot1\n",
                    encoding="utf-8")
    spot = line(32.77, line_item_usage_type="USE1-SpotUsage:p4d.24xlarge",
                line_item_resource_id="i-spot1", product_instance_type="p4d.24xlarge")
    folders = {}
    for name, billing in (("cur", lambda folder: {"kind": "aws_cur2", "path": str(
                              write_export(folder, {"part-1.parquet": [spot]}))}),
                          ("focus", lambda folder: {"kind": "focus", "path": "f.csv"})):
        folder = folders[name] = tmp_path / name
        folder.mkdir()
        shutil.copy(runs, folder / "runs.csv")
        (folder / "config.yaml").write_text(yaml.safe_dump({
            "warehouse": {"path": "warehouse.duckdb"}, "billing": [billing(folder)],
            "tracker": [{"kind": "runs_file", "path": "runs.csv"}]}), encoding="utf-8")

    def month_figures(folder: Path) -> tuple[dict, float]:
        assert main(["materialize", "--config", str(folder / "config.yaml"),
                     "--month", "2026-07"]) == 0
        with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as con:
            costs = dict(con.execute(
                "SELECT coalesce(run_id, purpose_class), round(sum(cost), 6) FROM attribution"
                " WHERE month = DATE '2026-07-01' GROUP BY ALL").fetchall())
            ((gpu_hours,),) = con.execute(
                "SELECT billed_gpu_hours FROM reconciliation"
                " WHERE month = DATE '2026-07-01'").fetchall()
        return costs, gpu_hours

    from_cur = month_figures(folders["cur"])
    assert from_cur == ({"A": 16.385, "untracked": 16.385}, pytest.approx(8.0))
    assert main(["export", "focus", "--config", str(folders["cur"] / "config.yaml"),
                 "--month", "2026-07", "--out", str(folders["focus"] / "f.csv")]) == 0
    assert month_figures(folders["focus"]) == from_cur


def test_a_gpu_line_is_described_by_what_its_quantity_meters(tmp_path):
    """An instance-hour of a GPU instance is `accelerated compute`, never the bare word `gpu`
    (which a FOCUS reader takes for GPU-seconds over the instance's 8 GPUs: 1 h read as
    0.125 h); a Google GPU SKU line, whose quantity is GPU time over all the VM's GPUs, says
    it is accelerator time. Read back, each has its 8 GPU-hours again."""
    from cost_pipeline.ingest.billing import build_billing_facts

    month = date(2026, 3, 1)
    hour = {"ChargePeriodStart": datetime(2026, 3, 2, 10),
            "ChargePeriodEnd": datetime(2026, 3, 2, 11), "ChargeCategory": "Usage",
            "x_CostComponent": "gpu", "x_AcceleratorCount": 8, "x_InstanceUsage": True,
            "x_ResourceKind": "instance", "x_UsageHours": 1.0}
    con = duckdb.connect()
    insert_lines(con, month, [
        {**hour, "x_SourceLine": "cur:i-p4d", "ProviderName": "AWS",
         "ServiceName": "Amazon Elastic Compute Cloud", "ResourceId": "i-p4d",
         "x_InstanceType": "p4d.24xlarge", "ConsumedQuantity": 1.0, "ConsumedUnit": "Hrs",
         "EffectiveCost": 32.77},
        {**hour, "x_SourceLine": "gcp:a2-gpu", "ProviderName": "Google Cloud",
         "ServiceName": "Compute Engine", "ResourceId": "projects/p/instances/a2",
         "SkuId": "039F-D0DA-4055", "x_InstanceType": "a2-highgpu-8g",
         "ConsumedQuantity": 8.0, "ConsumedUnit": "hour", "EffectiveCost": 29.39}])
    build_attribution(con, month, month_params(parse_config({}, Path(".")), month))
    path = write_focus(focus_rows(con, month), tmp_path / "own.csv", "csv")
    con.close()
    with path.open(newline="", encoding="utf-8") as handle:
        described = {r["x_SourceLine"]: r["ChargeDescription"] for r in csv.DictReader(handle)}
    assert described == {
        "cur:i-p4d": "Usage of accelerated compute in Amazon Elastic Compute Cloud "
                     "(p4d.24xlarge)",
        "gcp:a2-gpu": "Usage of accelerator time (GPU/TPU) in Compute Engine (a2-highgpu-8g)"}
    cfg = parse_config({"billing": [{"kind": "focus", "path": str(path), "name": "own"}]},
                       tmp_path)
    with duckdb.connect() as read_back:
        build_billing_facts(read_back, cfg, month, LOG)
        hours = dict(read_back.execute(
            "SELECT ResourceId, x_UsageHours * x_AcceleratorCount FROM billing_facts").fetchall())
    assert hours == {"i-p4d": pytest.approx(8.0), "projects/p/instances/a2": pytest.approx(8.0)}


def test_a_line_that_counted_no_hours_reads_back_without_hours(tmp_path):
    """A same-month refund of a p4d.24xlarge hour (-$1.00, usage amount 1) is instance usage
    that counts no hours (its hour was counted by the usage line it refunds), as is a
    savings-plan negation. Written with ConsumedQuantity 1 Hours, the FOCUS reader read the
    refund as a further hour: 8 GPU-hours billed on read-back instead of none. Its consumed
    quantity is 0 (its pricing quantity stays 1); the hour itself keeps its quantity."""
    from cost_pipeline.ingest.billing import build_billing_facts

    month = date(2026, 3, 1)
    p4d = {"ChargePeriodStart": datetime(2026, 3, 2, 10),
           "ChargePeriodEnd": datetime(2026, 3, 2, 11), "ChargeCategory": "Usage",
           "ProviderName": "AWS", "ServiceName": "Amazon Elastic Compute Cloud",
           "ResourceId": "i-p4d", "x_CostComponent": "gpu", "x_AcceleratorCount": 8,
           "x_InstanceUsage": True, "x_ResourceKind": "instance",
           "x_InstanceType": "p4d.24xlarge", "ConsumedQuantity": 1.0, "ConsumedUnit": "Hrs"}
    con = duckdb.connect()
    insert_lines(con, month, [
        {**p4d, "x_SourceLine": "cur:hour", "x_UsageHours": 1.0, "EffectiveCost": 32.77,
         "x_LineItemType": "Usage"},
        {**p4d, "x_SourceLine": "cur:refund", "x_UsageHours": None, "EffectiveCost": -1.0,
         "BilledCost": -1.0, "x_LineItemType": "Refund"}])
    build_attribution(con, month, month_params(parse_config({}, Path(".")), month))
    path = write_focus(focus_rows(con, month), tmp_path / "own.csv", "csv")
    con.close()
    with path.open(newline="", encoding="utf-8") as handle:
        quantities = {r["x_SourceLine"]: (Decimal(r["ConsumedQuantity"]),
                                          Decimal(r["PricingQuantity"]))
                      for r in csv.DictReader(handle)}
    assert quantities == {"cur:hour": (1, 1), "cur:refund": (0, 1)}
    cfg = parse_config({"billing": [{"kind": "focus", "path": str(path), "name": "own"}]},
                       tmp_path)
    with duckdb.connect() as read_back:
        build_billing_facts(read_back, cfg, month, LOG)
        gpu_hours = read_back.execute(
            "SELECT EffectiveCost, coalesce(x_UsageHours * x_AcceleratorCount, 0) "
            "FROM billing_facts ORDER BY 1").fetchall()
    assert gpu_hours == [(-1.0, 0.0), (32.77, 8.0)]


def split_month_read_back(tmp_path: Path) -> tuple[dict, dict, dict]:
    """An EKS node hour as the CUR reader leaves it after split cost allocation (SPEC §3): a
    g5.12xlarge node at $6.24, pod A's split rows $2.16 + $0.96, pod B's $1.08 + $0.48 (no
    hours, G 0: their cost is already their share), the node's line keeping the $1.56 left
    (x_SplitParent). Run ft-a lists pod A with 2 GPUs, ev-b pod B. Returns the cost per run
    or untracked kind of the month and of its FOCUS export read back with the same runs, and
    the lines read back by resource: (G, hours, resource kind, split parent)."""
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.ingest.test_split_cost import NODE, POD_A, POD_B

    month = date(2026, 7, 1)
    hour = {"ChargePeriodStart": datetime(2026, 7, 14, 10),
            "ChargePeriodEnd": datetime(2026, 7, 14, 11), "ChargeCategory": "Usage",
            "x_CostComponent": "gpu", "x_InstanceType": "g5.12xlarge",
            "x_PricingCategory": "on_demand"}
    pod = {**hour, "ServiceName": "Amazon Elastic Kubernetes Service",
           "x_ResourceKind": "container", "x_AcceleratorCount": 0}
    lines = [
        {**hour, "x_SourceLine": "cur:node10", "ServiceName": "Amazon Elastic Compute Cloud",
         "ResourceId": NODE, "ConsumedQuantity": 1.0, "ConsumedUnit": "Hrs",
         "EffectiveCost": 1.56, "x_AcceleratorCount": 4, "x_UsageHours": 1.0,
         "x_InstanceUsage": True, "x_ResourceKind": "instance", "x_SplitParent": True},
        *({**pod, "x_SourceLine": f"cur:{name}", "ResourceId": resource,
           "ConsumedQuantity": usage, "ConsumedUnit": unit, "EffectiveCost": cost}
          for name, resource, usage, unit, cost in (
              ("a_cpu", POD_A, 24.0, "vCPU-Hours", 2.16),
              ("a_mem", POD_A, 96.0, "GB-Hours", 0.96),
              ("b_cpu", POD_B, 12.0, "vCPU-Hours", 1.08),
              ("b_mem", POD_B, 48.0, "GB-Hours", 0.48)))]
    runs = [{**RUN_DEFAULTS, "run_id": "ft-a", "status": "FINISHED",
             "start_time": datetime(2026, 7, 14, 9, 30), "end_time": datetime(2026, 7, 14, 12),
             "resource_ids": [POD_A], "gpus": 2},
            {**RUN_DEFAULTS, "run_id": "ev-b", "status": "FINISHED",
             "start_time": datetime(2026, 7, 14, 10), "end_time": datetime(2026, 7, 14, 11),
             "resource_ids": [POD_B]}]

    def attributed(con: duckdb.DuckDBPyConnection) -> dict:
        insert_runs(con, month, runs)
        build_attribution(con, month, month_params(parse_config({}, tmp_path), month))
        return dict(con.execute(
            "SELECT coalesce(run_id, kind), round(sum(cost), 6) FROM attribution "
            "GROUP BY ALL").fetchall())

    with duckdb.connect() as con:
        insert_lines(con, month, lines)
        original = attributed(con)
        path = write_focus(focus_rows(con, month), tmp_path / "own.csv", "csv")
    cfg = parse_config({"billing": [{"kind": "focus", "path": str(path), "name": "own"}]},
                       tmp_path)
    with duckdb.connect() as con:
        build_billing_facts(con, cfg, month, LOG)
        facts = {}
        for resource, g, hours, kind, parent in con.execute(
                "SELECT ResourceId, x_AcceleratorCount, x_UsageHours, x_ResourceKind, "
                "coalesce(x_SplitParent, false) FROM billing_facts").fetchall():
            facts.setdefault(resource, set()).add((g, hours, kind, parent))
        return original, attributed(con), facts


def test_a_pods_split_cost_reads_back_as_its_share(tmp_path):
    """A pod's split row is written with G 0 and the node's instance type; the FOCUS reader
    took 0 for "not given" and G = 4 from the type, so ft-a's 2 GPUs halved pod A's split
    cost again ($1.56 instead of $3.12). It is now read back as the pod's split row it is: no
    accelerators, no hours, a container's."""
    from tests.ingest.test_split_cost import POD_A, POD_B

    original, read_back, facts = split_month_read_back(tmp_path)
    assert (original["ft-a"], original["ev-b"]) == (3.12, 1.56)
    assert (read_back["ft-a"], read_back["ev-b"]) == (3.12, 1.56)
    assert facts[POD_A] == facts[POD_B] == {(0, None, "container", False)}


def test_a_split_nodes_rest_reads_back_as_idle_capacity(tmp_path):
    """The node's line keeps what its pods' split rows left ($6.24 - $3.12 - $1.56 = $1.56):
    its unused capacity, `idle_capacity`. The export did not say the line was a split
    parent and the FOCUS reader set x_SplitParent false, so the $1.56 read back `no_run`."""
    from tests.ingest.test_split_cost import NODE

    original, read_back, facts = split_month_read_back(tmp_path)
    assert original == {"ft-a": 3.12, "ev-b": 1.56, "idle_capacity": 1.56}
    assert read_back == original
    assert facts[NODE] == {(4, 1.0, "instance", True)}


def test_split_pods_a_refund_and_shared_network_read_back_as_the_bill_did(tmp_path,
                                                                         dagster_home):
    """A month with split cost allocation (a g5.12xlarge node hour at $6.24, pod A $3.12 and
    pod B $1.56, the node's $1.56 left), a same-month refund of a p4d.24xlarge hour (-$1.00,
    usage amount 1) and a transit gateway, a VPC endpoint and a NAT gateway, exported and read
    back as a `focus` source with the same runs, attributes the month as the bill did.
    Read back, pod A's split cost was taken as 2 of the node's 4 GPUs again ($1.56 to ft-a),
    the refund counted 8 GPU-hours (12 billed instead of 4), the transit gateway and the VPC
    endpoint were `no_run` and the node's remainder `no_run` instead of idle capacity."""
    import yaml

    from cost_pipeline.cli.main import main
    from tests.ingest.test_split_cost import HOUR, NODE, POD_A, POD_B, node_hour, two_pods
    from tests.support.cur_rows import SPLIT_COLUMNS, line, write_export

    arn = "arn:aws:ec2:us-east-1:111122223333:"
    network = {"line_item_operation": None, "product_instance_type": None,
               "pricing_unit": "Hrs", "start": HOUR + timedelta(hours=2)}
    rows = [
        node_hour("node10"), *two_pods(),
        line(-1.00, identity_line_item_id="refund", line_item_line_item_type="Refund",
             line_item_usage_type="USE1-BoxUsage:p4d.24xlarge", line_item_usage_amount=1.0,
             line_item_resource_id="i-0p4d", product_instance_type="p4d.24xlarge",
             start=HOUR + timedelta(hours=3)),
        *(line(cost, identity_line_item_id=name, line_item_resource_id=f"{arn}{resource}",
               line_item_usage_type=usage_type, product_product_family=family, **network)
          for name, cost, resource, usage_type, family in (
              ("tgw", 0.05, "transit-gateway/tgw-0abc", "USE1-TransitGateway-Hours",
               "Transit Gateway"),
              ("vpce", 0.01, "vpc-endpoint/vpce-0abc", "USE1-VpcEndpoint-Hours", "VpcEndpoint"),
              ("nat", 0.045, "natgateway/nat-0abc", "USE1-NatGateway-Hours", "NAT Gateway"))),
    ]
    runs = ("run_id,status,start_time,end_time,resource_ids,gpus,purpose\n"
            f"ft-a,FINISHED,2026-07-14T09:30:00Z,2026-07-14T12:00:00Z,{POD_A},2,production\n"
            f"ev-b,FINISHED,2026-07-14T10:00:00Z,2026-07-14T11:00:00Z,{POD_B},,eval\n")
    folders = {}
    for name, billing in (("cur", lambda folder: {"kind": "aws_cur2", "path": str(
                              write_export(folder, {"part-1.parquet": rows},
                                           extra=SPLIT_COLUMNS))}),
                          ("focus", lambda folder: {"kind": "focus", "path": "f"})):
        folder = folders[name] = tmp_path / name
        folder.mkdir()
        (folder / "runs.csv").write_text(runs, encoding="utf-8")
        (folder / "config.yaml").write_text(yaml.safe_dump({
            "warehouse": {"path": "warehouse.duckdb"}, "billing": [billing(folder)],
            "tracker": [{"kind": "runs_file", "path": "runs.csv"}]}), encoding="utf-8")

    def month_figures(folder: Path) -> tuple[dict, dict, dict, float]:
        assert main(["materialize", "--config", str(folder / "config.yaml"),
                     "--month", "2026-07"]) == 0
        with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as con:
            costs = dict(con.execute(
                "SELECT coalesce(run_id, kind), round(sum(cost), 6) FROM attribution"
                " WHERE month = DATE '2026-07-01' GROUP BY ALL").fetchall())
            run_costs = dict(con.execute(
                "SELECT run_id, round(cost, 6) FROM run_costs"
                " WHERE month = DATE '2026-07-01'").fetchall())
            untracked = {resource: (kind, cost) for resource, kind, cost in con.execute(
                "SELECT resource_id, kind, round(sum(cost), 6) FROM untracked_usage"
                " WHERE month = DATE '2026-07-01' GROUP BY ALL").fetchall()}
            ((gpu_hours,),) = con.execute(
                "SELECT billed_gpu_hours FROM reconciliation"
                " WHERE month = DATE '2026-07-01'").fetchall()
        return costs, run_costs, untracked, gpu_hours

    from_cur = month_figures(folders["cur"])
    # pod A's split cost whole (gpus=2 does not halve a share), the node's rest idle, the
    # refund's dollar without hours, the three gateways and the endpoint shared: the node's
    # 4 GPU-hours alone are billed
    assert from_cur == (
        {"ft-a": 3.12, "ev-b": 1.56, "idle_capacity": 1.56, "no_run": -1.0, "shared": 0.105},
        {"ft-a": 3.12, "ev-b": 1.56},
        {NODE: ("idle_capacity", 1.56), "i-0p4d": ("no_run", -1.0),
         f"{arn}transit-gateway/tgw-0abc": ("shared", 0.05),
         f"{arn}vpc-endpoint/vpce-0abc": ("shared", 0.01),
         f"{arn}natgateway/nat-0abc": ("shared", 0.045)},
        pytest.approx(4.0))
    (folders["focus"] / "f").mkdir()
    assert main(["export", "focus", "--config", str(folders["cur"] / "config.yaml"),
                 "--month", "2026-07", "--out", str(folders["focus"] / "f" / "own.csv")]) == 0
    assert month_figures(folders["focus"]) == from_cur
