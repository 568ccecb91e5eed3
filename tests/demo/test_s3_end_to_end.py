"""The demo quarter's CUR export and inventory uploaded to a real S3-compatible server (moto
on 127.0.0.1) and materialized through the Dagster job with the config `make demo-services`
writes: the tables equal those built from the local files (the `demo_quarter` fixture)."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import yaml

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config, parse_config
from cost_pipeline.demo.services import s3_config, upload_demo
from cost_pipeline.ingest.billing import build_billing_facts
from tests.support.s3_server import new_bucket

AUGUST, SEPTEMBER = date(2026, 8, 1), date(2026, 9, 1)
MONTHS = (AUGUST,)  # through the whole job: the month that fails reconciliation

QUERIES = {
    "billing_facts rows": "SELECT * EXCLUDE (month, x_File) FROM billing_facts WHERE month = ? "
                          "ORDER BY x_SourceLine",
    "billing_facts totals": "SELECT count(*), round(sum(EffectiveCost), 6), "
                            "round(sum(BilledCost), 6) FROM billing_facts WHERE month = ?",
    "attribution by purpose class": "SELECT purpose_class, count(*), round(sum(cost), 6), "
                                    "round(sum(hours), 6), round(sum(accelerator_hours), 6) "
                                    "FROM attribution WHERE month = ? GROUP BY 1 ORDER BY 1",
    "reconciliation": "SELECT * FROM reconciliation WHERE month = ?",
    "checkpoint_inventory": "SELECT bucket, key, size, last_modified, run_id, checkpoint "
                            "FROM checkpoint_inventory WHERE month = ? ORDER BY key",
    "retention_violations": "SELECT key, reason, round(monthly_cost, 9) "
                            "FROM retention_violations WHERE month = ? ORDER BY key",
    "delivery": "SELECT source, execution_id, round(total_effective_cost, 6) "
                "FROM billing_deliveries WHERE month = ?",
}


def _rounded(value):
    """Sums over the same rows in another order differ in the last bits: compare to 1e-6."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_rounded(v) for v in value)
    return value


def _tables(warehouse: str) -> dict:
    with duckdb.connect(warehouse, read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        return {(name, month): _rounded(con.execute(sql, [month]).fetchall())
                for name, sql in QUERIES.items() for month in MONTHS}


def test_demo_through_s3_equals_local_files(demo_quarter, s3_server, tmp_path):
    local_config, _ = demo_quarter
    demo_dir = Path(local_config).parent
    bucket = new_bucket(s3_server.endpoint_url, "demo-billing")
    upload_demo(s3_server.endpoint_url, demo_dir, bucket)
    config = yaml.safe_load(Path(local_config).read_text(encoding="utf-8"))
    config = s3_config(config, s3_server.endpoint_url, bucket)
    config["warehouse"] = {"path": str(tmp_path / "from-s3.duckdb")}
    config["tracker"] = [{"kind": "runs_file", "path": str(demo_dir / "runs.csv")}]
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")

    for month in MONTHS:
        result = materialize_month(str(config_path), month, progress=False)
        assert result.success, result.error

    remote = _tables(load_config(config_path).warehouse_path)
    local = _tables(load_config(local_config).warehouse_path)
    for key, rows in local.items():
        assert rows, f"{key}: no rows from the local files"
        assert remote[key] == rows, key
    # the asset records what the S3 read cost: the demo's files are small, so fetched whole
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("billing_facts"))
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    assert event.run_id == result.run_id
    assert metadata["aws_cur2.bytes_read"] == metadata["aws_cur2.file_bytes"] > 100_000
    assert metadata["aws_cur2.delivery"] == remote[("delivery", MONTHS[-1])][0][1]
    assert "fail" in remote[("reconciliation", AUGUST)][0]


def test_september_bill_through_s3_equals_local_files(demo_quarter, s3_server, tmp_path):
    """The Savings Plan month (covered usage, negations, the recurring fee), billing only."""
    local_config, _ = demo_quarter
    bucket = new_bucket(s3_server.endpoint_url, "demo-billing")
    upload_demo(s3_server.endpoint_url, Path(local_config).parent, bucket)
    config = s3_config({}, s3_server.endpoint_url, bucket)
    sql = QUERIES["billing_facts rows"]
    with duckdb.connect() as con:
        build_billing_facts(con, parse_config(config, tmp_path), SEPTEMBER,
                            logging.getLogger("test"))
        remote = con.execute(sql, [SEPTEMBER]).fetchall()
    with duckdb.connect(load_config(local_config).warehouse_path, read_only=True) as con:
        local = con.execute(sql, [SEPTEMBER]).fetchall()
    assert remote == local
    assert any("SavingsPlanRecurringFee" in str(row) for row in local)
