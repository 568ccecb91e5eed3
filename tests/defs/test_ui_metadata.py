"""What the assets' metadata shows in the Dagster UI, materialized from hand-made months: a
failing figure never reads as its limit, each figure as the month's page writes it."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb

from cost_pipeline.defs.resources import PipelineSettings, Warehouse
from tests.support.warehouse_rows import insert_lines, insert_runs

MARCH = date(2024, 3, 1)
START = datetime(2024, 3, 5)


def gpu_line(resource: str, gpus: int, hours: float, line: str) -> dict:
    return {"ChargePeriodStart": START, "ChargePeriodEnd": START + timedelta(hours=hours),
            "ChargeCategory": "Usage", "ResourceId": resource, "EffectiveCost": 10.0,
            "x_CostComponent": "gpu", "x_AcceleratorCount": gpus, "x_UsageHours": hours,
            "x_InstanceUsage": True, "x_ResourceKind": "instance",
            "x_InstanceType": "g5.48xlarge", "x_SourceLine": line}


def warehouse_of(tmp_path: Path, lines: list[dict], runs: list[dict],
                 month: date = MARCH) -> dict:
    """A warehouse holding `month`'s bill lines and runs, and the resources to materialize
    its assets with (the policy's default threshold, 0.05)."""
    path, config = tmp_path / "w.duckdb", tmp_path / "config.yaml"
    with duckdb.connect(str(path)) as con:
        insert_lines(con, month, lines)
        insert_runs(con, month, runs)
    config.write_text("warehouse: {path: w.duckdb}\n")
    return {"duckdb": Warehouse(database=str(path)),
            "settings": PipelineSettings(config_path=str(config))}


def metadata_of(assets: list, resources: dict, node: str, month: date = MARCH) -> dict:
    result = dg.materialize(assets, partition_key=f"{month:%Y-%m-%d}", resources=resources)
    assert result.success
    (materialization,) = result.asset_materializations_for_node(node)
    return {k: v.value for k, v in materialization.metadata.items()}


def untracked_of_1999(tmp_path: Path) -> dict:
    """1,899 GPU-hours a run claims (8 GPUs × 237.375 h) and 100 no run claims: a share of
    100 / 1,999 = 0.0500250…, over the 0.05 threshold by 2.5e-5, 0.05 to 4 digits."""
    run = {"run_id": "r1", "status": "FINISHED", "purpose": "production", "start_time": START,
           "end_time": START + timedelta(hours=237.375), "resource_ids": ["i-tracked"],
           "gpus": 8}
    return warehouse_of(tmp_path, [gpu_line("i-tracked", 8, 237.375, "L1"),
                                   gpu_line("i-untracked", 1, 100.0, "L2")], [run])


def test_the_reconciliation_keeps_a_failing_share_apart_from_its_threshold(tmp_path):
    """The asset's metadata read `status: fail, untracked_share: 0.05, threshold: 0.05`
    for a share of 100 / 1,999: both with the digits that tell them apart (0.05003 and
    0.05), as the check's metadata shows them."""
    from cost_pipeline.defs.assets.attribution import attribution, reconciliation

    meta = metadata_of([attribution, reconciliation], untracked_of_1999(tmp_path),
                       "reconciliation")
    assert meta["status"] == "fail" and meta["billed_gpu_hours"] == 1999.0
    assert (meta["untracked_share"], meta["threshold"]) == (0.05003, 0.05)


def test_the_report_records_the_share_the_page_writes(tmp_path):
    """The page writes `5.003% FAIL … threshold 5.0%` for 100 of 1,999 GPU-hours untracked;
    the asset's metadata read `untracked_share_pct: 5.0` beside `reconciliation_status:
    fail`, always to one decimal. It records the page's figures: 5.003 and the threshold's
    5.0, in percent."""
    from cost_pipeline.defs.assets.attribution import attribution, reconciliation
    from cost_pipeline.defs.assets.report import monthly_report

    meta = metadata_of([attribution, reconciliation, monthly_report],
                       untracked_of_1999(tmp_path), "monthly_report")
    assert meta["reconciliation_status"] == "fail"
    assert meta["untracked_share_pct"] == 5.003 and meta["threshold_pct"] == 5.0
    page = Path(meta["report"]).read_text(encoding="utf-8")
    assert "5.003%" in page and "5.0%" in page


def test_the_search_trend_headline_is_the_months_cost(tmp_path):
    """search_trend holds each search's cost to date: SX cost 60 in February and 50 in March,
    SY 7 in March. March's headline `cost` summed the costs to date, 110 + 7 = 117, where the
    month's searches cost 50 + 7 = 57 (the demo's August read 15,026.23 for 7,527.58); it is
    the month's own cost, Σ cost_this_month."""
    from cost_pipeline.defs.assets.decisions import derived_assets
    from cost_pipeline.warehouse import ensure_schema
    from tests.decisions.test_search_shape import FEB, d, put_costs

    resources = warehouse_of(tmp_path, [gpu_line("i-1", 1, 1.0, "L1")], [])
    x1 = {"run_id": "x1", "status": "FINISHED", "start_time": d(20, 2), "end_time": d(2),
          "model": "churn", "purpose": "search", "search_id": "SX", "config_id": "c1"}
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        ensure_schema(con)
        insert_runs(con, FEB, [x1])
        insert_runs(con, MARCH, [x1, {
            "run_id": "y1", "status": "FINISHED", "start_time": d(3), "end_time": d(4),
            "model": "churn", "purpose": "search", "search_id": "SY", "config_id": "c1"}])
        put_costs(con, [(FEB, "x1", 60.0), (MARCH, "x1", 50.0), (MARCH, "y1", 7.0)])
    (search_trend,) = [a for a in derived_assets if a.key == dg.AssetKey("search_trend")]
    meta = metadata_of([search_trend], resources, "search_trend")
    assert meta["rows"] == 2 and meta["currency"] == "USD"
    assert meta["cost"] == 57.0


def focus_bill(tmp_path: Path) -> dict:
    """July 2026 billed in one FOCUS file (focus.csv: 2 + 3 GPU lines and a storage line,
    USD), with the resources to materialize its months."""
    from tests.cli.test_minor_unit_figures import project

    config = project(tmp_path, "USD", (10.0, 10.0), (1.0, 1.0, 1.0), 2.0)
    return {"duckdb": Warehouse(database=str(tmp_path / "warehouse.duckdb")),
            "settings": PipelineSettings(config_path=str(config))}


def billing_metadata(resources: dict, month: date) -> dict:
    from cost_pipeline.defs.assets.ingest import ingest

    result = dg.materialize([ingest], partition_key=f"{month:%Y-%m-%d}", resources=resources,
                            selection=["billing_facts"])
    assert result.success
    (materialization,) = result.asset_materializations_for_node("ingest")
    return {k: v.value for k, v in materialization.metadata.items()}


def test_the_bill_counts_the_focus_files_it_read(tmp_path):
    """A bill read from one FOCUS file: the metadata read `files: 0` beside `focus.files: 1`,
    counting only the CUR deliveries' files. `files` counts every source's files read."""
    meta = billing_metadata(focus_bill(tmp_path), date(2026, 7, 1))
    assert meta["rows"] == 6 and meta["total_effective_cost"] == 25.0
    assert meta["focus.files"] == 1
    assert meta["files"] == 1


def test_an_empty_month_names_the_currency_every_asset_names(tmp_path):
    """August, which the FOCUS file bills nothing of: billing_facts' metadata and
    attribution.cost_conserved's read `"currency": ""` where every other asset reads USD
    (`bill_currency`'s default for a month without lines). Both read USD."""
    from cost_pipeline.defs.assets.attribution import attribution
    from cost_pipeline.defs.assets.ingest import ingest

    august, resources = date(2026, 8, 1), focus_bill(tmp_path)
    meta = billing_metadata(resources, august)
    assert (meta["rows"], meta["total_effective_cost"]) == (0, 0.0)
    assert meta["currency"] == "USD"
    result = dg.materialize([ingest, attribution], partition_key="2026-08-01",
                            resources=resources)
    assert result.success
    (attributed,) = result.asset_materializations_for_node("attribution")
    assert attributed.metadata["currency"].value == "USD"
    (conserved,) = [e for e in result.get_asset_check_evaluations()
                    if e.check_name == "cost_conserved"]
    assert conserved.passed and conserved.metadata["effective_cost"].value == 0.0
    assert conserved.metadata["currency"].value == "USD"
