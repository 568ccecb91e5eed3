"""`gcp_billing_export` read with the real google-cloud-bigquery client from a real BigQuery
emulator (bqemulator, started on loopback for the session): the month's query, the
normalization to billing_facts, and a month through the Dagster runner."""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from cost_pipeline.config import GcpBillingExportSource, parse_config
from cost_pipeline.ingest.sources import SourceError, gcp_billing
from cost_pipeline.ingest.sources.gcp_billing import USAGE_DISCOUNT_TYPES, parse_table, read_month
from tests.support import bq_emulator
from tests.support import gcp_export_rows as export
from tests.support.gcp_export_rows import (
    BUCKET,
    DISK,
    VM_A,
    VM_B,
    VM_C,
    VM_D,
    export_rows,
    in_september,
)

SEPT = date(2026, 9, 1)
TABLE_ID = f"{bq_emulator.PROJECT}.{export.DATASET}.{export.TABLE}"
CENT = 0.005
LOG = logging.getLogger("test")


@pytest.fixture(scope="session")
def bigquery(tmp_path_factory):
    """The emulator's endpoint, with the export table created and filled once."""
    try:
        server = bq_emulator.running(tmp_path_factory.mktemp("bq"))
        emulator = server.__enter__()
    except bq_emulator.EmulatorUnavailable as exc:
        pytest.skip(f"BigQuery emulator unavailable: {exc}")
    try:
        _client(emulator.endpoint).create_dataset(export.DATASET)
        _export_table(emulator.endpoint, export.TABLE, export_rows())
        yield emulator.endpoint
    finally:
        server.__exit__(None, None, None)


def _client(endpoint: str):
    """The google-cloud-bigquery client of the emulator at `endpoint`."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import bigquery as bq

    return bq.Client(project=bq_emulator.PROJECT, credentials=AnonymousCredentials(),
                     client_options=ClientOptions(api_endpoint=endpoint))


def _export_table(endpoint: str, name: str, rows: list[dict],
                  without: str | None = None) -> GcpBillingExportSource:
    """A table `name` of `rows` in the export's dataset (the export's fields, less the field
    `without`), and a source reading it."""
    from google.cloud import bigquery as bq

    client = _client(endpoint)
    table_id = f"{bq_emulator.PROJECT}.{export.DATASET}.{name}"
    table = client.create_table(bq.Table(table_id, schema=[
        f for f in export.SCHEMA if f.name != without]))
    if rows:  # load jobs do not work on the emulator: streaming inserts do
        assert client.insert_rows_json(table, [
            {k: v for k, v in r.items() if k != without} for r in rows]) == []
    return _source(endpoint, table_id)


def _source(endpoint: str, table: str = TABLE_ID) -> GcpBillingExportSource:
    return GcpBillingExportSource(kind="gcp_billing_export", table=table,
                                  api_endpoint=endpoint)


def _billing(endpoint: str, table: str = TABLE_ID, **extra) -> dict:
    """The config's entry of the export `table` on the emulator at `endpoint`."""
    return {"kind": "gcp_billing_export", "table": table, "api_endpoint": endpoint, **extra}


def _config(tmp_path: Path, endpoint: str, runs: str | None = None,
            table: str = TABLE_ID) -> Path:
    doc = {"warehouse": {"path": "warehouse.duckdb"}, "billing": [_billing(endpoint, table)]}
    if runs is not None:
        (tmp_path / "runs.csv").write_text(runs, encoding="utf-8")
        doc["tracker"] = [{"kind": "runs_file", "path": "runs.csv"}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _expected_total(rows: list[dict]) -> float:
    return sum(r["cost"] + sum(c["amount"] for c in r["credits"]) for r in rows)


def _september(tmp_path: Path, billing: dict, query: str, **config) -> tuple:
    """September's billing_facts of the export `billing` (a config entry) in a warehouse of
    their own: the summary, and the rows of `query` (its one parameter the month)."""
    from cost_pipeline.ingest.billing import build_billing_facts

    cfg = parse_config({"billing": [billing], **config}, tmp_path)
    with duckdb.connect() as con:
        summary = build_billing_facts(con, cfg, SEPT, LOG)
        return summary, con.execute(query, [SEPT]).fetchall()


def _spot_chain(con) -> tuple[list[tuple], str]:
    """September's preemption chains, and the evidence of the lever to checkpoint before
    going preemptible."""
    chain = con.execute(
        "SELECT chain_id, runs, cost, lost_cost, on_demand_cost, last_run_id, "
        "last_run_on_demand_cost, spot_cost_more_than_on_demand FROM preemption "
        "WHERE month = ?", [SEPT]).fetchall()
    ((evidence,),) = con.execute(
        "SELECT evidence FROM cost_levers WHERE month = ? "
        "AND lever = 'checkpoint before going preemptible'", [SEPT]).fetchall()
    return chain, evidence


def test_month_is_read_by_usage_time_and_reduced_inside_bigquery(bigquery):
    read = read_month("gcp", _source(bigquery), SEPT, "run_id")
    all_rows = export_rows()
    september = [r for r in all_rows if in_september(r)]
    assert read.table_rows == len(all_rows) == 30
    # late rows (exported in October) are in; the August hour exported in September is not
    assert read.export_rows_read == len(september) == 28
    starts = {h.isoformat() for h in read.rows.column("hour_start").to_pylist()}
    assert "2026-09-30T23:00:00+00:00" in starts
    assert not any(s.startswith(("2026-08", "2026-10")) for s in starts)
    # one row per resource × hour × SKU (+ one per credit type that is not a usage discount)
    assert read.rows_returned == 20
    assert isinstance(read.bytes_scanned_estimate, int) and read.bytes_scanned_estimate >= 0
    amounts = read.rows.to_pylist()
    assert sum(r["amount"] + r["usage_discounts"] for r in amounts) == pytest.approx(
        _expected_total(september))
    gpu = [r for r in amounts if r["global_name"] == VM_A and r["sku_id"] == "039F-D0DA-4055"
           and r["credit_type"] is None and r["hour_start"].hour == 10
           and r["hour_start"].day == 10]
    assert len(gpu) == 1 and gpu[0]["export_rows"] == 2
    assert gpu[0]["usage_amount"] == 28800 and gpu[0]["usage_discounts"] == pytest.approx(-4.8)


def test_billing_facts_from_the_export(bigquery, tmp_path):
    summary, rows = _september(
        tmp_path, _billing(bigquery),
        """SELECT x_SourceLine, ChargeCategory, x_CostComponent, EffectiveCost, BilledCost,
                  x_AcceleratorCount, x_UsageHours, ResourceId, x_ResourceKind,
                  x_InstanceType, ChargePeriodStart, ChargePeriodEnd, Tags
           FROM billing_facts WHERE month = ? ORDER BY 1""")
    facts = {r[0]: r for r in rows}
    september = [r for r in export_rows() if in_september(r)]
    assert summary.rows == len(facts) == 20 and summary.currency == "USD"
    assert summary.total_effective_cost == pytest.approx(_expected_total(september))
    assert summary.total_billed_cost == pytest.approx(summary.total_effective_cost)
    meta = summary.source_metadata["gcp_billing_export"]
    assert (meta["table_rows"], meta["export_rows_read"], meta["rows_returned"]) == (30, 28, 20)

    def line(resource, hour, sku, suffix=""):
        return facts[f"gcp_billing_export:{resource}:{hour}:{sku}{suffix}"]

    h1 = "2026-09-10T10:00:00Z"
    gpu = line(VM_A, h1, "039F-D0DA-4055")
    # cost 24.00 + sustained use −4.80; G = 8 from a2-highgpu-8g; 8 GPU-hours ÷ 8
    assert gpu[1:8] == ("Usage", "gpu", pytest.approx(19.2), pytest.approx(19.2), 8,
                        pytest.approx(1.0), VM_A)
    assert gpu[8:12] == ("instance", "a2-highgpu-8g", datetime(2026, 9, 10, 10),
                         datetime(2026, 9, 10, 11))
    assert gpu[12] == {"team": "ml-platform"}
    promotion = line(VM_A, h1, "039F-D0DA-4055", ":credit=PROMOTION")
    assert promotion[1:4] == ("Credit", "gpu", pytest.approx(-2.0))
    # the accelerator VM's core and RAM: gpu lines with the same G, no hours of their own
    core, ram = line(VM_A, h1, "2E27-4F75-95CD"), line(VM_A, h1, "6E2A-DCD9-87ED")
    assert core[1:7] == ("Usage", "gpu", pytest.approx(2.4), pytest.approx(2.4), 8, None)
    assert ram[1:7] == ("Usage", "gpu", pytest.approx(0.5), pytest.approx(0.5), 8, None)
    egress = line(VM_A, h1, "9DE9-9092-B3BC")
    assert egress[1:4] == ("Usage", "network", pytest.approx(1.2)) and egress[6] is None
    # half an hour on 8 GPUs, exported in four slices per SKU
    assert line(VM_A, "2026-09-10T11:00:00Z", "039F-D0DA-4055")[5:7] == (8, pytest.approx(0.5))
    assert line(VM_A, "2026-09-30T23:00:00Z", "039F-D0DA-4055")[3] == pytest.approx(24.0)
    # a plain VM: the core line carries the VM-hours (vCPU-hours ÷ cores); CUD folded in
    n2 = line(VM_B, "2026-09-12T08:00:00Z", "BB77-5FDA-69D9", ":label=r-prep-1")
    assert n2[1:7] == ("Usage", "cpu", pytest.approx(0.11), pytest.approx(0.11), 0,
                       pytest.approx(0.5))
    assert n2[12] == {"run_id": "r-prep-1"}
    # no GPU count in n1-standard-8: G = 2 GPU-hours ÷ 1 VM-hour; g2-standard-48 → 4
    assert line(VM_C, "2026-09-20T05:00:00Z", "A1B2-C3D4-0T40")[5:7] == (2, pytest.approx(1.0))
    assert line(VM_D, "2026-09-21T07:00:00Z", "A1B2-C3D4-0L40")[5:7] == (4, pytest.approx(0.5))
    storage = line(f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
                   "2026-09-15T00:00:00Z", "E5F0-6A5D-7BAD")
    assert storage[1:4] == ("Usage", "storage", pytest.approx(2.0))
    assert storage[7:9] == (BUCKET, "bucket") and storage[11] == datetime(2026, 9, 16)
    disk = line(DISK, h1, "7C2D-9E1A-BALD")
    assert (disk[2], disk[8]) == ("storage", "volume")
    tax = line("", "2026-09-30T00:00:00Z", "", ":project=ml-train:tax")
    assert tax[1:4] == ("Tax", "other", pytest.approx(3.5))
    assert sum(f[3] for f in facts.values() if f[1] == "Credit") == pytest.approx(-2.1)


def test_list_cost_and_pricing_category_from_the_export(bigquery, tmp_path):
    """ListCost is the export's cost_at_list (credit rows 0), none on a Spot/Preemptible SKU
    (its cost_at_list is the spot SKU's); those SKUs are spot, usage with committed use
    credits committed, other usage on_demand, the rest other."""
    _, rows = _september(tmp_path, _billing(bigquery), "SELECT x_SourceLine, ListCost, "
                         "x_PricingCategory FROM billing_facts WHERE month = ?")
    facts = {r[0]: r[1:] for r in rows}

    def line(resource, hour, sku, suffix=""):
        return facts[f"gcp_billing_export:{resource}:{hour}:{sku}{suffix}"]

    h1 = "2026-09-10T10:00:00Z"
    assert line(VM_A, h1, "039F-D0DA-4055") == (pytest.approx(30.0), "on_demand")  # 1.25 × 24
    assert line(VM_A, h1, "039F-D0DA-4055", ":credit=PROMOTION") == (0.0, "other")
    assert line(VM_B, "2026-09-12T08:00:00Z", "BB77-5FDA-69D9", ":label=r-prep-1") == (
        pytest.approx(0.2), "committed")
    assert line(VM_D, "2026-09-21T07:00:00Z", "A1B2-C3D4-0L40") == (None, "spot")
    assert line(VM_D, "2026-09-21T07:00:00Z", "A1B2-C3D4-0G20")[1] == "spot"
    assert line("", "2026-09-30T00:00:00Z", "", ":project=ml-train:tax")[1] == "other"


def test_list_cost_falls_back_to_cost_before_credits_without_cost_at_list():
    from cost_pipeline.ingest.sources.gcp_billing import ExportTable, month_sql

    table = ExportTable("p", "d", "t")
    assert "cost_at_list AS cost_listed" in month_sql(table, has_cost_at_list=True)
    assert "cost AS cost_listed" in month_sql(table, has_cost_at_list=False)
    assert "{" not in month_sql(table)


def test_without_cost_at_list_a_spot_line_has_no_list_cost(bigquery, tmp_path, dagster_home):
    """An export without `cost_at_list` states no public price: its `cost` is what was paid,
    the spot price on a Spot/Preemptible SKU. That cost was taken as the spot line's ListCost,
    so preemption compared spot with spot and a restarted chain read as dearer than its last
    run on demand ($2.00 against $1.00). A spot line's ListCost is NULL now: the chain has no
    on-demand figure (as from CUR or FOCUS without the column); other usage keeps its cost
    before credits, the price without sustained or committed use discounts."""
    from cost_pipeline.cli.materialize import materialize_month

    source = _export_table(bigquery, f"{export.TABLE}_no_list", export_rows(),
                           without="cost_at_list")
    # VM_D, a Spot g2-standard-48, ran 07:00-07:30: its L4 line 1.40 and core line 0.60. s1
    # ran the first quarter hour, s2 restarted it from scratch for the second: half each
    config = _config(tmp_path, bigquery, (
        "run_id,status,start_time,end_time,resource_ids,restart_of,resumed_from\n"
        f"s1,KILLED,2026-09-21T07:00:00Z,2026-09-21T07:15:00Z,{VM_D},,\n"
        f"s2,FINISHED,2026-09-21T07:15:00Z,2026-09-21T07:30:00Z,{VM_D},s1,\n"), source.table)
    assert materialize_month(str(config), SEPT, progress=False).success
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        listed = {r[0].split(":", 1)[1]: r[1:] for r in con.execute(
            "SELECT x_SourceLine, ListCost, x_PricingCategory FROM billing_facts "
            "WHERE month = ?", [SEPT]).fetchall()}
        chain, evidence = _spot_chain(con)
    assert listed[f"{VM_D}:2026-09-21T07:00:00Z:A1B2-C3D4-0L40"] == (None, "spot")
    assert listed[f"{VM_D}:2026-09-21T07:00:00Z:A1B2-C3D4-0G20"] == (None, "spot")
    # on-demand and committed usage: the cost before credits; a credit row 0
    h1 = "2026-09-10T10:00:00Z"
    assert listed[f"{VM_A}:{h1}:039F-D0DA-4055"] == (pytest.approx(24.0), "on_demand")
    assert listed[f"{VM_A}:{h1}:039F-D0DA-4055:credit=PROMOTION"] == (0.0, "other")
    assert listed[f"{VM_B}:2026-09-12T08:00:00Z:BB77-5FDA-69D9:label=r-prep-1"] == (
        pytest.approx(0.16), "committed")
    assert chain == [("s1", 2, pytest.approx(2.0), pytest.approx(1.0), None, "s2", None, None)]
    assert "0 chains cost more than their last run on demand" in evidence
    assert "1 chain whose last run has no on-demand price this month" in evidence


def test_month_through_the_runner_attributes_the_vm_to_its_run(bigquery, tmp_path,
                                                                dagster_home):
    import dagster as dg

    from cost_pipeline.cli.materialize import materialize_month

    runs = (
        "run_id,status,start_time,end_time,resource_ids,gpus,purpose,search_id,model\n"
        # lists VM_A for its whole 10:00 hour: all of that hour's lines
        f"r-train-1,FINISHED,2026-09-10T10:00:00Z,2026-09-10T11:00:00Z,{VM_A},,production,,"
        "churn\n"
        # 4 of the 8 GPUs for the 30 minutes VM_A ran at 11:00: half of every line of it
        f"r-search-1,FINISHED,2026-09-10T11:00:00Z,2026-09-10T11:30:00Z,{VM_A},4,,s1,churn\n"
        # no resource listed: claims VM_B by its label
        "r-prep-1,FINISHED,2026-09-12T08:00:00Z,2026-09-12T08:30:00Z,,,preprocess,,churn\n"
    )
    result = materialize_month(str(_config(tmp_path, bigquery, runs)), SEPT, progress=False)
    assert result.success, result.error
    checks = {c.name: c.passed for c in result.checks}
    # most GPU-hours here are nobody's, and most days have no lines: findings, not errors
    assert checks["cost_conserved"] and not checks["reconciliation_within_threshold"]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        by_run = dict(con.execute(
            "SELECT coalesce(run_id, purpose_class), sum(cost) FROM attribution "
            "WHERE month = ? GROUP BY 1", [SEPT]).fetchall())
        gpu_hours = dict(con.execute(
            "SELECT run_id, sum(accelerator_hours) FROM attribution WHERE month = ? "
            "AND run_id IS NOT NULL GROUP BY 1", [SEPT]).fetchall())
        billed, tracked, total = con.execute(
            "SELECT billed_gpu_hours, tracked_gpu_hours, total_effective_cost "
            "FROM reconciliation WHERE month = ?", [SEPT]).fetchone()
    # GPU 19.20 + core 2.40 + RAM 0.50 + egress 1.20
    assert by_run["r-train-1"] == pytest.approx(23.3, abs=CENT)
    assert by_run["r-search-1"] == pytest.approx((12.0 + 1.5 + 0.25) / 2, abs=CENT)
    assert by_run["r-prep-1"] == pytest.approx(0.11 + 0.04, abs=CENT)
    # tax 3.50, promotion −2.00, free tier −0.10
    assert by_run["unallocated"] == pytest.approx(1.4, abs=CENT)
    assert sum(by_run.values()) == pytest.approx(total, abs=CENT)
    assert gpu_hours["r-train-1"] == pytest.approx(8.0) and gpu_hours["r-search-1"] == 2.0
    # A: 8 + 4 + 8 (late), C: 2, D: 2 — core and RAM lines add no GPU-hours
    assert (billed, tracked) == (pytest.approx(24.0), pytest.approx(10.0))
    with dg.DagsterInstance.get() as instance:
        event = instance.fetch_materializations(dg.AssetKey("billing_facts"), limit=1)
        metadata = event.records[0].asset_materialization.metadata
    assert metadata["gcp_billing_export.table_rows"].value == 30
    assert metadata["gcp_billing_export.export_rows_read"].value == 28
    assert metadata["gcp_billing_export.rows_returned"].value == 20
    assert metadata["gcp_billing_export.bytes_scanned_estimate"].value >= 0


def test_an_hours_rows_of_other_labels_reduce_to_the_same_labels_in_any_order(bigquery):
    # a label changed within an hour: two export rows of one resource × hour × SKU whose
    # labels differ but in the run's. The reduced row's labels were ANY_VALUE's pick — the
    # row BigQuery happens to meet first, which may change from one query to the next; they
    # are the greatest now, whatever the order the rows were written in
    hour = ("2026-09-12T08:00:00Z", "2026-09-12T09:00:00Z")
    rows = [export._row(export.CORE_N2, *hour, cost, resource=VM_B, amount=1800.0,
                        pricing=0.5, labels={"run_id": "r1", "team": team}, spec=export.N2)
            for cost, team in ((0.25, "nlp"), (0.5, "vision"))]
    read = []
    for name, order in (("relabelled_a", rows), ("relabelled_b", rows[::-1])):
        source = _export_table(bigquery, name, order)
        read.append([(r["amount"], r["run_label"], r["labels_json"])
                     for r in read_month("gcp", source, SEPT, "run_id").rows.to_pylist()])
    assert read[0] == read[1] == [(0.75, "r1", '[{"key":"run_id","value":"r1"},'
                                               '{"key":"team","value":"vision"}]')]


def _export_row(rows: list[dict], sku: dict, start: str, nth: int = 0) -> dict:
    return [r for r in rows if r["sku"] == sku and r["usage_start_time"] == start][nth]


def _vm_a_key(hour: str, sku: dict) -> str:
    return f"resource {VM_A}, hour 2026-09-10 {hour}:00 UTC, SKU {sku['id']} ({sku['description']})"


def _set(row: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        row = row[int(part)] if part.isdigit() else row[part]
    row[leaf] = value


H10, H11 = "2026-09-10T10:00:00Z", "2026-09-10T11:00:00Z"


@pytest.mark.parametrize(("sku", "start", "nth", "changes", "key", "problem"), [
    # an empty cost or credit amount: SUM in BigQuery would have skipped it
    (export.CORE_A2, H10, 0, {"cost": None}, _vm_a_key("10", export.CORE_A2),
     "cost is empty in 1 export row(s)"),
    (export.GPU_A100, H10, 1, {"credits.1.amount": None},
     _vm_a_key("10", export.GPU_A100) + ", credit PROMOTION",
     "credits.amount is empty in 1 credit(s) of its export rows"),
    (export.GPU_A100, H10, 1, {"credits.0.amount": None}, _vm_a_key("10", export.GPU_A100),
     "credits.amount is empty in 1 credit(s) of its export rows"),
    # one slice of four of the 11:00 RAM line: the key's other rows hid it
    (export.RAM_A2, H11, 2, {"currency": None}, _vm_a_key("11", export.RAM_A2),
     "currency is empty in 1 export row(s)"),
    (export.RAM_A2, H11, 2, {"currency": "EUR"}, _vm_a_key("11", export.RAM_A2),
     "its export rows are in EUR and USD: one currency per month is required"),
    # no start time: in no month, it was dropped from every month without a word
    (export.CORE_A2, H10, 0, {"usage_start_time": None},
     f"resource {VM_A}, invoice month 202609, SKU {export.CORE_A2['id']} "
     f"({export.CORE_A2['description']})",
     "usage_start_time is empty in 1 export row(s) invoiced in the month: a row is read in "
     "the month its usage starts"),
    (export.CORE_A2, H10, 0, {"usage_end_time": "2026-09-10T09:30:00Z"},
     _vm_a_key("10", export.CORE_A2), "usage_end_time is before usage_start_time in 1 "
     "export row(s)"),
    (export.CORE_A2, H10, 0, {"cost": "NaN"}, _vm_a_key("10", export.CORE_A2),
     "cost sums to nan: a cost or quantity must be a finite number below 1e28"),
    (export.GPU_A100, H10, 0, {"cost_at_list": "Infinity"}, _vm_a_key("10", export.GPU_A100),
     "cost_at_list sums to inf: a cost or quantity must be a finite number below 1e28"),
    (export.GPU_A100, H10, 1, {"credits.1.amount": -1e30},
     _vm_a_key("10", export.GPU_A100) + ", credit PROMOTION",
     "credits.amount sums to -1e+30: a cost or quantity must be a finite number below 1e28"),
    (export.RAM_A2, H10, 0, {"usage.amount": "-Infinity"}, _vm_a_key("10", export.RAM_A2),
     "usage.amount sums to -inf: a cost or quantity must be a finite number below 1e28"),
    # a whole key in another currency: the month's is the one most of its rows are in
    (export.PD_BAL, H10, 0, {"currency": "EUR"},
     f"resource {DISK}, hour 2026-09-10 10:00 UTC, SKU {export.PD_BAL['id']} "
     f"({export.PD_BAL['description']})",
     "currency EUR differs from USD: one currency per month is required (2026-09 has EUR, "
     "USD)"),
])
def test_an_export_row_the_month_cannot_take_is_refused_naming_its_key(
        bigquery, sku, start, nth, changes, key, problem):
    # the reader reduces the export inside BigQuery: an error names the export rows by the
    # fields that select them (a reduced row's number is nothing a user can look up), with
    # the export's own field names; before, an empty cost among a key's rows, another
    # currency or a reversed period in one slice of four was summed away without a word
    rows = export_rows()
    for path, value in changes.items():
        _set(_export_row(rows, sku, start, nth), path, value)
    name = "bad_" + hashlib.sha1(repr((sku, start, nth, changes)).encode()).hexdigest()[:10]
    source = _export_table(bigquery, name, rows)
    with pytest.raises(SourceError) as caught:
        read_month("gcp", source, SEPT, "run_id")
    assert caught.value.source == "gcp"
    assert caught.value.where == f"{source.table}, the export rows of {key}"
    assert caught.value.problem == problem


def test_the_months_lines_are_numbered_in_one_order_whatever_the_exports(bigquery, tmp_path):
    # BigQuery returns a GROUP BY's rows in any order, and x_Row numbers them: the
    # normalization numbers them in the order of their key, so the same export gives the same
    # billing facts. An export row without an end is the hour's (as before)
    rows = export_rows()
    _export_row(rows, export.CORE_A2, H10)["usage_end_time"] = None
    lines = []
    for name, order in (("ordered_a", rows), ("ordered_b", rows[::-1])):
        table = _export_table(bigquery, name, order).table
        lines.append(_september(tmp_path, _billing(bigquery, table, name="gcp"),
                                "SELECT x_Row, x_SourceLine, ChargePeriodEnd FROM billing_facts "
                                "WHERE month = ? ORDER BY x_Row")[1])
    assert [line[:2] for line in lines[0]] == [line[:2] for line in lines[1]]
    assert [line[0] for line in lines[0]] == list(range(1, len(lines[0]) + 1))
    core = [line for line in lines[0]
            if line[1] == f"gcp:{VM_A}:2026-09-10T10:00:00Z:{export.CORE_A2['id']}"]
    assert len(core) == 1 and core[0][2] == datetime(2026, 9, 10, 11)


def test_a_month_of_two_sources_names_the_other_currency_in_its_sources_own_field(
        bigquery, tmp_path):
    # the month's currency is the one most lines are in (here a FOCUS export's EUR): the
    # GCP lines' USD is named as GCP names it, where every source's was AWS's
    # `line_item_currency_code`
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.ingest.test_focus_source import row, write_csv

    euro = [row(f"eur-{i}", 1.0, BillingCurrency="EUR",
                BillingPeriodStart="2026-09-01T00:00:00Z",
                ChargePeriodStart="2026-09-03T10:00:00Z",
                ChargePeriodEnd="2026-09-03T11:00:00Z") for i in range(30)]
    focus = write_csv(tmp_path / "focus" / "september.csv", euro)
    cfg = parse_config({"billing": [_billing(bigquery), {"kind": "focus", "path": str(focus)}]},
                       tmp_path)
    with duckdb.connect() as con, pytest.raises(SourceError) as caught:
        build_billing_facts(con, cfg, SEPT, LOG)
    assert caught.value.source == "gcp_billing_export"
    assert caught.value.where.startswith(f"{TABLE_ID} row ")
    assert caught.value.problem == ("currency USD differs from EUR: one currency per month is "
                                    "required (2026-09 has EUR, USD)")


def test_an_export_after_another_source_is_read(bigquery, tmp_path):
    # a source's checks left a fetchone()'s result open, and the next source's export
    # (registered as a stream) was refused by DuckDB 2.0: "connection has an unfinished
    # result" — a second billing account, or AWS beside GCP, failed every month
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.ingest.test_focus_source import row, write_csv

    usd = [row(f"usd-{i}", 1.25, BillingPeriodStart="2026-09-01T00:00:00Z",
               ChargePeriodStart="2026-09-03T10:00:00Z",
               ChargePeriodEnd="2026-09-03T11:00:00Z") for i in range(4)]
    focus = {"kind": "focus", "path": str(write_csv(tmp_path / "focus" / "september.csv", usd))}
    gcp = _billing(bigquery)
    totals = {}
    for name, billing in (("gcp", [gcp]), ("focus", [focus]), ("both", [focus, gcp]),
                          ("two exports", [gcp, gcp | {"name": "gcp_b"}])):
        with duckdb.connect() as con:
            build_billing_facts(con, parse_config({"billing": billing}, tmp_path), SEPT, LOG)
            totals[name] = con.execute("SELECT count(*), sum(EffectiveCost)::DECIMAL(18, 6) "
                                       "FROM billing_facts").fetchone()
    assert totals["focus"] == (4, 5)
    assert totals["both"] == (totals["gcp"][0] + 4, totals["gcp"][1] + 5)
    assert totals["two exports"] == (2 * totals["gcp"][0], 2 * totals["gcp"][1])


def test_a_table_lacking_the_fields_read_is_refused_naming_them(bigquery):
    # the standard export (no `resource`), or a table lacking a field the query reads: named
    # before the query, where BigQuery's error named one field (`Unrecognized name: resource`)
    for dropped, problem in (
            ("resource", gcp_billing.STANDARD_EXPORT_FIX),
            ("usage", "not a detailed billing export: no field usage.amount, usage.unit, "
                      "usage.amount_in_pricing_units, usage.pricing_unit"),
            ("cost_type", "not a detailed billing export: no field cost_type")):
        source = _export_table(bigquery, f"without_{dropped}", [], without=dropped)
        with pytest.raises(SourceError) as caught:
            read_month("gcp", source, SEPT, "run_id")
        assert (caught.value.where, caught.value.problem) == (source.table, problem)


def test_missing_table_and_bad_table_ids_are_source_errors(bigquery):
    missing = _source(bigquery, f"{bq_emulator.PROJECT}.{export.DATASET}.no_such_table")
    with pytest.raises(SourceError, match="no_such_table"):
        read_month("gcp", missing, SEPT, "run_id")
    for bad in ("billing.t` WHERE true --", "a.b.c.d", "proj.dataset.ta-ble", "t"):
        with pytest.raises(SourceError, match="not a BigQuery table id"):
            parse_table("gcp", GcpBillingExportSource(kind="gcp_billing_export", table=bad))
    with pytest.raises(SourceError, match="names no project"):
        parse_table("gcp", GcpBillingExportSource(kind="gcp_billing_export", table="ds.t"))
    table = parse_table("gcp", GcpBillingExportSource(
        kind="gcp_billing_export", table="example.com:billing-proj.ds.t", project="runner"))
    assert (table.project, table.dataset, table.table) == ("example.com:billing-proj", "ds", "t")
    assert "PROMOTION" not in USAGE_DISCOUNT_TYPES


def test_transient_errors_are_retried_then_fail_clearly(bigquery, monkeypatch):
    import socket
    import time

    from cost_pipeline.ingest.sources import gcp_billing
    from tests.support.s3_server import FlakyProxy

    monkeypatch.setattr(gcp_billing, "RETRY_SECONDS", 3.0)
    monkeypatch.setattr(gcp_billing, "RETRY_INITIAL_DELAY_SECONDS", 0.05)
    # two 503 answers on the way: retried with backoff, the month reads as without them
    with FlakyProxy(bigquery, failures=2) as proxy:
        read = read_month("gcp", _source(proxy.endpoint_url), SEPT, "run_id")
    assert proxy.failed == 2 and proxy.requests > 2
    assert read.rows_returned == read_month("gcp", _source(bigquery), SEPT, "run_id").rows_returned
    # an endpoint that never answers: retried for the budget, then one clear line
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        read_month("gcp", _source(dead), SEPT, "run_id")
    assert 2.0 < time.monotonic() - started < 15
    message = str(caught.value)
    assert message.startswith(f"gcp: {TABLE_ID}: unreachable: still failing after retrying")
    assert "\n" not in message


TPU_TABLE = "gcp_billing_export_resource_v1_0A1B2C_3D4E5F_7C7C7C"
TPU_NODE = "//tpu.googleapis.com/projects/ml-train/locations/us-west4-a/nodes/{}"
CLOUD_TPU = {"id": "E3E1-4A35-BB2F", "description": "Cloud TPU"}


def _tpu_rows() -> list[dict]:
    """TPU slices as the export bills them: one SKU metered in chip-seconds over the slice."""
    from tests.support.gcp_export_rows import _row

    def tpu(node: str, sku: str, chips: int, hours: float, cost: float, **extra) -> dict:
        row = _row({"id": f"TPU-{node}", "description": sku}, "2026-09-14T10:00:00Z",
                   "2026-09-14T11:00:00Z", cost, resource=TPU_NODE.format(node),
                   service=CLOUD_TPU, amount=chips * hours * 3600, pricing=chips * hours,
                   **extra)
        return row

    v5e = tpu("v5e-trainer", "TPU v5e chip running in Americas", 8, 1.0, 9.6)
    v5e["system_labels"] = [{"key": "tpu.googleapis.com/accelerator_type",
                             "value": "v5litepod-8"}]
    return [
        v5e,
        # v4-32: 32 TensorCores = 16 chips, for half the hour; the type in a user label
        tpu("v4-pod", "TPU v4 chip running in Americas", 16, 0.5, 25.8,
            labels={"accelerator_type": "v4-32", "run_id": "r-tpu"}),
        # no accelerator type anywhere: G = chip-hours ÷ the period's hours
        tpu("unknown", "TPU v5p chip running in Americas", 4, 1.0, 16.8),
    ]


def test_tpu_skus_are_accelerator_lines_counted_in_chips(bigquery, tmp_path):
    """Issue 15.4: a TPU slice is a gpu line with G = its chips and hours per chip, so its
    accelerator-hours (x_UsageHours × G) are the chip-hours billed and reconcile like GPUs."""
    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.ingest.billing import build_billing_facts
    from cost_pipeline.warehouse import month_params
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    source = _export_table(bigquery, TPU_TABLE, _tpu_rows())
    cfg = parse_config({"billing": [_billing(bigquery, source.table)]}, tmp_path)
    with duckdb.connect() as con:
        summary = build_billing_facts(con, cfg, SEPT, LOG)
        facts = {r[0].rsplit("/", 1)[-1]: r[1:] for r in con.execute(
            "SELECT ResourceId, x_CostComponent, x_AcceleratorCount, x_UsageHours, "
            "x_InstanceUsage, x_InstanceType, x_UnknownAcceleratorType FROM billing_facts "
            "WHERE month = ?", [SEPT]).fetchall()}
        assert facts["v5e-trainer"] == ("gpu", 8, pytest.approx(1.0), True, "v5litepod-8",
                                        False)
        assert facts["v4-pod"] == ("gpu", 16, pytest.approx(0.5), True, "v4-32", False)
        assert facts["unknown"][:4] == ("gpu", 4, pytest.approx(1.0), True)
        assert facts["unknown"][5] is True  # counted from the usage: reported as unknown
        assert summary.unknown_instance_types == ["TPU v5p chip running in Americas"]
        # the v4 slice's run (by its label) covers its half hour: tracked chip-hours = 8
        insert_runs(con, SEPT, [{**RUN_DEFAULTS, "run_id": "r-tpu", "status": "FINISHED",
                                 "start_time": datetime(2026, 9, 14, 10),
                                 "end_time": datetime(2026, 9, 14, 11)}])
        build_attribution(con, SEPT, month_params(cfg, SEPT))
        billed = con.execute(
            "SELECT sum(x_UsageHours * x_AcceleratorCount) FROM billing_facts WHERE month = ? "
            "AND x_CostComponent = 'gpu' AND x_InstanceUsage", [SEPT]).fetchone()[0]
        tracked, untracked = con.execute(
            "SELECT sum(accelerator_hours) FILTER (WHERE run_id IS NOT NULL), "
            "sum(accelerator_hours) FILTER (WHERE purpose_class = 'untracked') "
            "FROM attribution WHERE month = ?", [SEPT]).fetchone()
    assert billed == pytest.approx(8 * 1.0 + 16 * 0.5 + 4 * 1.0)
    assert tracked == pytest.approx(8.0) and untracked == pytest.approx(12.0)


def test_the_gcp_month_exports_as_valid_focus(bigquery, tmp_path):
    """FOCUS out (issue 15.2) on a GCP month: its units (`hour`, `gibibyte month` …), a tax
    line without a service, credits as rows of their own — focus-validator 2.2.1 finds no
    failed rule but its InvoiceId alternative, and the totals are the month's."""
    from decimal import Decimal

    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.demo.focus_validator import validate_focus
    from cost_pipeline.demo.tool_venvs import ToolUnavailable
    from cost_pipeline.export.focus import focus_rows, write_focus
    from cost_pipeline.ingest.billing import build_billing_facts
    from cost_pipeline.warehouse import month_params

    cfg = parse_config({"billing": [_billing(bigquery)]}, tmp_path)
    with duckdb.connect() as con:
        summary = build_billing_facts(con, cfg, SEPT, LOG)
        build_attribution(con, SEPT, month_params(cfg, SEPT))
        rows = focus_rows(con, SEPT)
    path = write_focus(rows, tmp_path / "gcp-focus.parquet")
    assert abs(sum(rows.column("EffectiveCost").to_pylist())
               - Decimal(str(summary.total_effective_cost))) < Decimal("0.01")
    assert {"Hours", "GiB-Hours", "GiB-Months", "GiB"} & set(rows.column("PricingUnit").to_pylist())
    try:
        report = validate_focus(path)
    except ToolUnavailable as exc:
        pytest.skip(f"focus-validator unavailable: {exc}")
    assert report.real_failures() == {} and report.failed <= 1


def test_the_runs_transaction_does_not_keep_the_months_rows(tmp_path, monkeypatch):
    """As the listing and the runs: the month's rows as BigQuery returned them reach the
    run's transaction as a stream read once, so their Arrow memory goes when the insert has
    read them, not at the commit (registered as a table, it stayed through the attribution).
    The normalization still sees every row in both its reads of a VM's hour (`machine`,
    materialized): a VM's core line is gpu because its GPU line is in the same hour."""
    import gc

    import pyarrow as pa

    from cost_pipeline.ingest import billing
    from cost_pipeline.ingest.sources import gcp_billing
    from cost_pipeline.warehouse import begin_run_transaction, ensure_schema

    n = 10_000  # VM-hours, each a core line and a GPU line
    hours = [datetime(2026, 9, 2 + i // 24 % 20, i % 24, tzinfo=UTC) for i in range(n)]
    vm = [f"//compute.googleapis.com/projects/p/zones/z/instances/vm-{i}" for i in range(n)]
    rows = pa.table({
        "global_name": vm + vm,
        "hour_start": pa.array(hours + hours, pa.timestamp("us", tz="UTC")),
        "usage_end": pa.array([h.replace(minute=59, second=59) for h in hours] * 2,
                              pa.timestamp("us", tz="UTC")),
        "sku_id": ["N1-CORE"] * n + ["T4-GPU"] * n,
        "sku_description": (["N1 Predefined Instance Core running in Americas"] * n
                            + ["Nvidia Tesla T4 GPU running in Americas"] * n),
        "service_description": ["Compute Engine"] * (2 * n), "cost_type": ["regular"] * (2 * n),
        "amount": [0.1] * (2 * n), "usage_discounts": [0.0] * (2 * n),
        "commitment_discounts": [0.0] * (2 * n),
        "usage_amount": [3600.0 * 8] * n + [3600.0] * n, "usage_unit": ["seconds"] * (2 * n),
        "export_rows": [1] * (2 * n), "currency": ["USD"] * (2 * n),
        "invoice_month": ["202609"] * (2 * n), "cores": ["8"] * (2 * n),
    })
    months = [gcp_billing.MonthRead(TABLE_ID, gcp_billing._typed(rows))]
    held = months[0].rows.nbytes
    del rows
    # the reader hands the month over: nothing here keeps it
    monkeypatch.setattr(gcp_billing, "read_month", lambda *args: months.pop())
    warehouse = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_schema(warehouse)
    begin_run_transaction(warehouse)
    cfg = parse_config({"billing": [{"kind": "gcp_billing_export", "table": TABLE_ID}]},
                       tmp_path)
    before_insert = pa.total_allocated_bytes()
    assert held > 2_000_000
    billing.build_billing_facts(warehouse, cfg, SEPT, LOG)
    gc.collect()
    assert pa.total_allocated_bytes() < before_insert - 0.9 * held
    warehouse.execute("COMMIT")
    assert warehouse.execute(
        "SELECT count(*), round(sum(EffectiveCost), 6), count(*) FILTER (x_CostComponent = "
        "'gpu'), sum(x_UsageHours), min(x_AcceleratorCount) FROM billing_facts"
    ).fetchone() == (2 * n, round(0.2 * n, 6), 2 * n, 1.0 * n, 1)
    warehouse.close()


def _facts_of(endpoint: str, name: str, rows: list[dict], tmp_path: Path) -> dict:
    """billing_facts of a table of `rows`, by x_SourceLine."""
    names = ("x_SourceLine", "ChargeCategory", "x_CostComponent", "EffectiveCost",
             "x_AcceleratorCount", "x_UsageHours", "x_InstanceUsage", "Tags")
    _, facts = _september(tmp_path, _billing(endpoint, _export_table(endpoint, name, rows).table),
                          f"SELECT {', '.join(names)} FROM billing_facts WHERE month = ? "
                          "ORDER BY x_Row")
    return {r[0]: dict(zip(names, r, strict=True)) for r in facts}


def test_a_gpu_commitments_fee_is_a_purchase_not_gpu_hours_run(bigquery, tmp_path):
    """GCP names a GPU commitment's SKU "Commitment v1: Nvidia Tesla A100 GPU running in
    Americas for 1 Year": it matched the GPU lines' text, so its fee carried the committed
    GPU-hours as instance usage (G = 1) and every month with a commitment failed
    reconciliation on hours no VM ran. It is a Purchase line, without hours or a GPU count."""
    from tests.support.gcp_export_rows import _row

    hour = ("2026-09-10T10:00:00Z", "2026-09-10T11:00:00Z")
    vm = _row(export.GPU_A100, *hour, 24.0, resource=VM_A, amount=8 * 3600.0, pricing=8.0,
              spec=export.A2)
    fee = _row({"id": "CUD-A100-1Y", "description": "Commitment v1: Nvidia Tesla A100 GPU "
                "running in Americas for 1 Year"}, *hour, 14.0, amount=8 * 3600.0, pricing=8.0)
    facts = _facts_of(bigquery, "gpu_commitment", [vm, fee], tmp_path)
    commitment = next(f for line, f in facts.items() if ":CUD-A100-1Y" in line)
    assert (commitment["ChargeCategory"], commitment["x_AcceleratorCount"],
            commitment["x_UsageHours"], commitment["x_InstanceUsage"]) == (
        "Purchase", 0, None, False)
    assert commitment["EffectiveCost"] == pytest.approx(14.0)
    usage = next(f for line, f in facts.items() if line.endswith(":039F-D0DA-4055"))
    assert (usage["x_AcceleratorCount"], usage["x_UsageHours"], usage["x_InstanceUsage"]) == (
        8, pytest.approx(1.0), True)
    billed = sum(f["x_UsageHours"] * f["x_AcceleratorCount"] for f in facts.values()
                 if f["x_CostComponent"] == "gpu" and f["x_UsageHours"] is not None)
    assert billed == pytest.approx(8.0)  # the VM's 8 GPU-hours, not 16


def test_a_label_named_twice_keeps_its_first_entry_and_the_month_is_read(bigquery, tmp_path):
    """A row whose labels name a key twice (or an entry without a key) refused the month with
    DuckDB's "Map keys must be unique", naming no row: each key keeps its first entry — the
    run label too, read from the same entry — and an entry without a key is left out."""
    from tests.support.gcp_export_rows import _row

    row = _row(export.CORE_N2, "2026-09-12T08:00:00Z", "2026-09-12T09:00:00Z", 0.4,
               resource=VM_B, amount=8 * 3600.0, pricing=8.0, spec=export.N2)
    row["labels"] = [{"key": "team", "value": "nlp"}, {"key": "run_id", "value": "r1"},
                     {"key": "team", "value": "vision"}, {"key": "run_id", "value": "r2"},
                     {"key": None, "value": "loose"}]
    (line, fact), = _facts_of(bigquery, "labels_twice", [row], tmp_path).items()
    assert fact["Tags"] == {"team": "nlp", "run_id": "r1"}
    assert line.endswith(":label=r1")


def test_rows_naming_no_resource_keep_their_own_project_and_labels(bigquery, tmp_path):
    """Two projects' BigQuery analysis in one hour, neither naming a resource: they were one
    line of the summed cost, carrying the greater row's labels, so showback put team a's cost
    on team b. Each project and label set is a line of its own; an empty `global_name` is no
    name, as NULL is (the two were refused as a conflicting duplicate)."""
    from tests.support.gcp_export_rows import _row

    analysis = {"id": "3362-E469-6BEF", "description": "Analysis"}
    service = {"id": "24E6-581D-38E5", "description": "BigQuery"}
    hour = ("2026-09-10T10:00:00Z", "2026-09-10T11:00:00Z")
    rows = []
    for cost, team, project in ((1.0, "a", "ml-train"), (2.0, "b", "other-proj"),
                                (0.5, "b", "other-proj")):
        row = _row(analysis, *hour, cost, service=service, labels={"team": team})
        row["project"] = {**row["project"], "id": project, "name": project}
        rows.append(row)
    rows[2]["resource"] = {"name": None, "global_name": ""}
    facts = _facts_of(bigquery, "no_resource", rows, tmp_path)
    by_team = {f["Tags"]["team"]: f["EffectiveCost"] for f in facts.values()}
    assert len(facts) == 2 and by_team == {"a": pytest.approx(1.0), "b": pytest.approx(2.5)}
    assert all(":project=" in line and ":labels=" in line for line in facts)


def _month_of(endpoint: str, name: str, rows: list[dict], runs: str, tmp_path: Path) -> Path:
    """The warehouse of September materialized from a table of `rows` and the runs file
    `runs`."""
    from cost_pipeline.cli.materialize import materialize_month

    config = _config(tmp_path, endpoint, runs, _export_table(endpoint, name, rows).table)
    result = materialize_month(str(config), SEPT, progress=False)
    assert result.success, result.error
    assert {c.name: c.passed for c in result.checks}["cost_conserved"]
    return tmp_path / "warehouse.duckdb"


def test_a_spot_skus_cost_at_list_is_no_on_demand_price(bigquery, tmp_path, dagster_home):
    """On a Spot/Preemptible SKU the export's `cost_at_list` is that spot SKU's own list
    price, not the on-demand one: taken as ListCost, preemption compared spot with spot and
    a chain restarted on spot read as dearer than its last run on demand ($2.00 against
    $1.00). A spot line's ListCost is NULL whether the export states cost_at_list or not;
    the FOCUS export's ListCost of such a line is its BilledCost, as for any line without a
    list price."""
    from cost_pipeline.export.focus import focus_rows
    from tests.support.gcp_export_rows import G2, VM_D, _row

    rows = []
    for day in ("04", "05"):
        # a Spot g2-standard-48 for the hour: its L4 line 0.80 and its core line 0.20
        for sku, cost, units in ((export.GPU_L4, 0.8, 4), (export.CORE_G2, 0.2, 48)):
            row = _row(sku, f"2026-09-{day}T10:00:00Z", f"2026-09-{day}T11:00:00Z", cost,
                       resource=VM_D, amount=units * 3600.0, pricing=float(units), spec=G2)
            row["cost_at_list"] = cost
            rows.append(row)
    warehouse = _month_of(bigquery, "spot_at_list", rows, (
        "run_id,status,start_time,end_time,resource_ids,restart_of,resumed_from\n"
        f"ra,KILLED,2026-09-04T10:00:00Z,2026-09-04T11:00:00Z,{VM_D},,\n"
        f"rb,FINISHED,2026-09-05T10:00:00Z,2026-09-05T11:00:00Z,{VM_D},ra,\n"), tmp_path)
    with duckdb.connect(str(warehouse)) as con:
        listed = con.execute(
            "SELECT count(*), count(ListCost), min(x_PricingCategory), max(x_PricingCategory) "
            "FROM billing_facts WHERE month = ?", [SEPT]).fetchone()
        chain, evidence = _spot_chain(con)
        focus = focus_rows(con, SEPT).select(["BilledCost", "ListCost"]).to_pylist()
    assert listed == (4, 0, "spot", "spot")
    assert chain == [("ra", 2, pytest.approx(2.0), pytest.approx(1.0), None, "rb", None, None)]
    assert "0 chains cost more than their last run on demand" in evidence
    assert "1 chain whose last run has no on-demand price this month" in evidence
    assert len(focus) == 4 and all(r["ListCost"] == r["BilledCost"] for r in focus)
    assert sum(float(r["ListCost"]) for r in focus) == pytest.approx(2.0)

def test_n1_vms_with_other_gpus_are_other_accelerator_types(bigquery, tmp_path, dagster_home):
    """An N1 machine type names no GPU: two n1-standard-8 VMs, one with 2 T4 nobody claims
    and one with 2 V100 a run used, were one accelerator type `n1-standard-8` in the
    reconciliation (4 GPU-hours, 2 untracked). The type of every line of such a VM-hour
    (GPU, core and RAM) names the attached GPU too; G stays 2."""
    from tests.support.gcp_export_rows import N1, _row

    v100 = {"id": "V100-0000-0001", "description": "Nvidia Tesla V100 GPU running in Americas"}
    ram_n1 = {"id": "N1RM-0000-0001",
              "description": "N1 Predefined Instance Ram running in Americas"}
    t4_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/901"
    v100_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/902"
    hour = ("2026-09-04T10:00:00Z", "2026-09-04T11:00:00Z")
    rows = []
    for vm, gpu, gpu_cost in ((t4_vm, export.GPU_T4, 0.7), (v100_vm, v100, 4.96)):
        rows += [_row(gpu, *hour, gpu_cost, resource=vm, amount=2 * 3600.0, pricing=2.0,
                      spec=N1),
                 _row(export.CORE_N1, *hour, 0.3, resource=vm, amount=8 * 3600.0,
                      pricing=8.0, spec=N1),
                 _row(ram_n1, *hour, 0.1, resource=vm, amount=30 * export.GIB * 3600.0,
                      unit="byte-seconds", pricing=30.0, pricing_unit="gibibyte hour",
                      spec=N1)]
    warehouse = _month_of(bigquery, "n1_two_gpus", rows, (
        "run_id,status,start_time,end_time,resource_ids\n"
        f"r1,FINISHED,2026-09-04T10:00:00Z,2026-09-04T11:00:00Z,{v100_vm}\n"), tmp_path)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        types = con.execute(
            "SELECT ResourceId, x_InstanceType, x_CostComponent, x_AcceleratorCount, "
            "x_UsageHours FROM billing_facts WHERE month = ? "
            "ORDER BY ResourceId, x_UsageHours NULLS FIRST",
            [SEPT]).fetchall()
        (by_type,) = con.execute("SELECT by_accelerator_type FROM reconciliation "
                                 "WHERE month = ?", [SEPT]).fetchone()
    t4, v = "n1-standard-8 + nvidia-tesla-t4", "n1-standard-8 + nvidia-tesla-v100"
    # per VM: its core and RAM lines (no hours of their own), then its GPU line
    assert types == [
        (t4_vm, t4, "gpu", 2, None), (t4_vm, t4, "gpu", 2, None),
        (t4_vm, t4, "gpu", 2, pytest.approx(1.0)),
        (v100_vm, v, "gpu", 2, None), (v100_vm, v, "gpu", 2, None),
        (v100_vm, v, "gpu", 2, pytest.approx(1.0))]
    assert [(t["instance_type"], t["billed_gpu_hours"], t["untracked_gpu_hours"],
             t["untracked_share"], t["gpu_cost"]) for t in by_type] == [
        (t4, pytest.approx(2.0), pytest.approx(2.0), pytest.approx(1.0), pytest.approx(1.1)),
        (v, pytest.approx(2.0), pytest.approx(0.0), pytest.approx(0.0), pytest.approx(5.36))]


def test_a_shared_core_vms_instance_seconds_carry_its_hours(bigquery, tmp_path,
                                                             dagster_home):
    """A shared-core VM (g1-small, f1-micro) is billed in instance-seconds by a SKU naming
    no core ("Small Instance with 1 VCPU running in …", "Micro Instance with burstable CPU
    running in …"): its line carried no hours, so d was the whole hour and a run holding the
    VM for the 30 minutes it ran took half its cost. Those seconds are the VM's hours."""
    from tests.support.gcp_export_rows import _row

    small = {"id": "SMAL-0000-0001",
             "description": "Small Instance with 1 VCPU running in Americas"}
    micro = {"id": "MICR-0000-0001",
             "description": "Micro Instance with burstable CPU running in Americas"}
    small_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/555"
    micro_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/556"
    rows = [
        # g1-small ran 30 minutes, f1-micro 15 minutes of the hour
        _row(small, "2026-09-05T10:00:00Z", "2026-09-05T11:00:00Z", 0.01, resource=small_vm,
             amount=1800.0, pricing=0.5,
             spec={"machine_spec": "g1-small", "cores": "1", "memory": "1740"}),
        _row(micro, "2026-09-05T10:00:00Z", "2026-09-05T11:00:00Z", 0.002, resource=micro_vm,
             amount=900.0, pricing=0.25,
             spec={"machine_spec": "f1-micro", "cores": "1", "memory": "614"}),
    ]
    warehouse = _month_of(bigquery, "shared_core", rows, (
        "run_id,status,start_time,end_time,resource_ids\n"
        f"rs,FINISHED,2026-09-05T10:00:00Z,2026-09-05T10:30:00Z,{small_vm}\n"
        f"rm,FINISHED,2026-09-05T10:00:00Z,2026-09-05T10:15:00Z,{micro_vm}\n"), tmp_path)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        hours = con.execute(
            "SELECT ResourceId, x_CostComponent, x_UsageHours, x_InstanceUsage, x_InstanceType "
            "FROM billing_facts WHERE month = ? ORDER BY ResourceId", [SEPT]).fetchall()
        by_run = dict(con.execute(
            "SELECT coalesce(run_id, purpose_class), sum(cost) FROM attribution "
            "WHERE month = ? GROUP BY 1", [SEPT]).fetchall())
    assert hours == [(small_vm, "cpu", pytest.approx(0.5), True, "g1-small"),
                     (micro_vm, "cpu", pytest.approx(0.25), True, "f1-micro")]
    assert by_run == {"rs": pytest.approx(0.01), "rm": pytest.approx(0.002)}

def test_an_hours_slices_invoiced_in_two_months_keep_their_invoice_months(
        bigquery, tmp_path, dagster_home):
    """A resource-hour's export rows invoiced in two months (the hour's last slice invoiced
    the next month) were one line taking the later invoice month: September's invoice read
    24.00 and October's 24.00, where they bill 36.00 and 12.00. Each invoice month's slices
    are a line of their own; the two lines of the hour share its hours (d = 1 h), so a run
    holding the VM for half of it takes half of each, as it did of the one line."""
    from tests.support.gcp_export_rows import A2, _row

    vm_a = dict(resource=VM_A, name="trainer-a100", spec=A2)
    rows = [
        _row(export.GPU_A100, "2026-09-30T23:00:00Z", "2026-10-01T00:00:00Z", 12.0,
             amount=4 * 3600.0, pricing=4.0, invoice="202609", **vm_a),
        _row(export.GPU_A100, "2026-09-30T23:00:00Z", "2026-10-01T00:00:00Z", 12.0,
             amount=4 * 3600.0, pricing=4.0, exported="2026-10-06T02:00:00Z",
             invoice="202610", **vm_a),
        _row(export.GPU_A100, "2026-09-29T23:00:00Z", "2026-09-30T00:00:00Z", 24.0,
             amount=8 * 3600.0, pricing=8.0, invoice="202609", **vm_a),
    ]
    warehouse = _month_of(bigquery, "two_invoices", rows, (
        "run_id,status,start_time,end_time,resource_ids\n"
        f"r1,FINISHED,2026-09-30T23:00:00Z,2026-09-30T23:30:00Z,{VM_A}\n"), tmp_path)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        invoiced = con.execute(
            "SELECT BillingPeriodStart, sum(BilledCost), count(*) FROM billing_facts "
            "WHERE month = ? GROUP BY 1 ORDER BY 1", [SEPT]).fetchall()
        lines = con.execute(
            "SELECT x_SourceLine, x_UsageHours, x_AcceleratorCount FROM billing_facts "
            "WHERE month = ? ORDER BY x_Row", [SEPT]).fetchall()
        by_run = dict(con.execute(
            "SELECT coalesce(run_id, purpose_class), sum(cost) FROM attribution "
            "WHERE month = ? GROUP BY 1", [SEPT]).fetchall())
        total, attributed, untracked = con.execute(
            "SELECT total_effective_cost, attributed_cost, untracked_cost FROM reconciliation "
            "WHERE month = ?", [SEPT]).fetchone()
    assert invoiced == [(datetime(2026, 9, 1), pytest.approx(36.0), 2),
                        (datetime(2026, 10, 1), pytest.approx(12.0), 1)]
    gpu = export.GPU_A100["id"]
    assert lines == [
        (f"gcp_billing_export:{VM_A}:2026-09-29T23:00:00Z:{gpu}", pytest.approx(1.0), 8),
        (f"gcp_billing_export:{VM_A}:2026-09-30T23:00:00Z:{gpu}", pytest.approx(0.5), 8),
        (f"gcp_billing_export:{VM_A}:2026-09-30T23:00:00Z:{gpu}:invoice=202610",
         pytest.approx(0.5), 8)]
    # half of the 23:00 hour: 6.00 of each slice; the rest, and all of 09-29, untracked
    assert by_run == {"r1": pytest.approx(12.0), "untracked": pytest.approx(36.0)}
    assert (total, attributed, untracked) == (pytest.approx(48.0), pytest.approx(12.0),
                                              pytest.approx(36.0))


def test_a_refused_slice_invoiced_in_another_month_is_named_by_its_invoice_month():
    # the invoice month is part of a reduced row's key: an error names it where it is not
    # the month of the usage, so that the export rows it names are the ones at fault
    hour = datetime(2026, 9, 30, 23, tzinfo=UTC)
    row = {"global_name": VM_A, "shared_project": None, "hour_start": hour,
           "sku_id": export.GPU_A100["id"], "sku_description": export.GPU_A100["description"],
           "cost_type": "regular", "run_label": None, "credit_type": None}
    key = (f"resource {VM_A}, hour 2026-09-30 23:00 UTC, SKU {export.GPU_A100['id']} "
           f"({export.GPU_A100['description']})")
    assert gcp_billing.describe({**row, "invoice_month": "202609"}, "run_id") == key
    assert gcp_billing.describe({**row, "invoice_month": "202610"}, "run_id") == (
        key + ", invoice month 202610")


def test_a_months_first_hours_on_the_previous_invoice_keep_their_line_ids(bigquery, tmp_path):
    """Google's invoice month follows Pacific time: the first UTC hours of every month are on
    the previous month's invoice. Those lines were suffixed `:invoice=202608`, so the ids of
    every month's first hours changed. Only a key whose slices are on two invoices is a line
    per invoice month: the earliest keeps the plain id, a later one is suffixed."""
    from tests.support.gcp_export_rows import A2, _row

    vm_a = dict(resource=VM_A, name="trainer-a100", spec=A2)
    rows = [
        # 02:00 UTC on the 1st (19:00 on Aug 31 in California): 8 GPU-hours on August's invoice
        _row(export.GPU_A100, "2026-09-01T02:00:00Z", "2026-09-01T03:00:00Z", 24.0,
             amount=8 * 3600.0, pricing=8.0, invoice="202608", **vm_a),
        # 03:00 UTC: 6 GPU-hours on August's invoice, a late slice of 2 on September's
        _row(export.GPU_A100, "2026-09-01T03:00:00Z", "2026-09-01T04:00:00Z", 18.0,
             amount=6 * 3600.0, pricing=6.0, invoice="202608", **vm_a),
        _row(export.GPU_A100, "2026-09-01T03:00:00Z", "2026-09-01T04:00:00Z", 6.0,
             amount=2 * 3600.0, pricing=2.0, exported="2026-09-03T02:00:00Z",
             invoice="202609", **vm_a),
    ]
    source = _export_table(bigquery, "pacific_invoice", rows)
    _, lines = _september(tmp_path, _billing(bigquery, source.table),
                          "SELECT x_SourceLine, BillingPeriodStart, BilledCost, x_UsageHours "
                          "FROM billing_facts WHERE month = ? ORDER BY x_Row")
    line = f"gcp_billing_export:{VM_A}:2026-09-01T0{{}}:00:00Z:{export.GPU_A100['id']}"
    assert lines == [
        (line.format(2), datetime(2026, 8, 1), pytest.approx(24.0), pytest.approx(1.0)),
        (line.format(3), datetime(2026, 8, 1), pytest.approx(18.0), pytest.approx(0.75)),
        (line.format(3) + ":invoice=202609", datetime(2026, 9, 1), pytest.approx(6.0),
         pytest.approx(0.25))]


def test_an_unknown_n1_gpu_count_is_set_under_the_type_the_warning_names(bigquery, tmp_path):
    """An N1 VM's type names its attached GPU (`n1-standard-8 + nvidia-tesla-t4`): where its
    GPU count is unknown, the warning lists that type, and `accelerators:` under that name
    sets it. The count was looked up by the machine type alone, so the name listed never
    matched (and `n1-standard-8` would have made every n1-standard-8 VM an accelerator VM)."""
    from tests.support.gcp_export_rows import N1, _row

    t4_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/903"
    plain_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/904"
    hour = ("2026-09-06T10:00:00Z", "2026-09-06T11:00:00Z")
    rows = [
        # 4 T4-hours in the hour and no core line: G unknown, 4 GPU-hours ÷ 1 h → 4
        _row(export.GPU_T4, *hour, 1.4, resource=t4_vm, amount=4 * 3600.0, pricing=4.0,
             spec=N1),
        # a plain n1-standard-8 VM of the same hour
        _row(export.CORE_N1, *hour, 0.3, resource=plain_vm, amount=8 * 3600.0, pricing=8.0,
             spec=N1),
    ]
    source = _export_table(bigquery, "n1_unknown_count", rows)
    t4 = "n1-standard-8 + nvidia-tesla-t4"

    def facts(accelerators: dict) -> tuple:
        summary, lines = _september(
            tmp_path, _billing(bigquery, source.table),
            "SELECT ResourceId, x_InstanceType, x_CostComponent, x_AcceleratorCount, "
            "x_UsageHours, x_UnknownAcceleratorType FROM billing_facts WHERE month = ? "
            "ORDER BY ResourceId", accelerators=accelerators)
        return summary.unknown_instance_types, lines

    plain = (plain_vm, "n1-standard-8", "cpu", 0, pytest.approx(1.0), False)
    assert facts({}) == (
        [t4], [(t4_vm, t4, "gpu", 4, pytest.approx(1.0), True), plain])
    # the VM runs 2 T4s: its 4 GPU-hours are 2 hours of the VM
    assert facts({t4: 2}) == (
        [], [(t4_vm, t4, "gpu", 2, pytest.approx(2.0), False), plain])


def test_the_unknown_count_warning_states_the_count_each_type_is_counted_as(bigquery, tmp_path,
                                                                           caplog):
    """An unknown GPU count of a GCP VM is its GPU-hours ÷ the period's hours, rounded up, not
    1: the warning said "counted as 1" for every type where billing_facts held 2. It states
    each type's counts now, and how a count above 1 was found."""
    from tests.support.gcp_export_rows import N1, _row

    v100 = {"id": "V100-0000-0001", "description": "Nvidia Tesla V100 GPU running in Americas"}
    v100_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/905"
    t4_vm = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/906"
    n1_16 = {"machine_spec": "n1-standard-16"}  # no cores label: no VM-hours to divide by
    rows = [
        # 10:00: 4 × 1800 V100-seconds = 2 GPU-hours in 1 h → 2; 11:00: 3 GPU-hours → 3
        _row(v100, "2026-09-07T10:00:00Z", "2026-09-07T11:00:00Z", 4.96, resource=v100_vm,
             amount=4 * 1800.0, pricing=2.0, spec=n1_16),
        _row(v100, "2026-09-07T11:00:00Z", "2026-09-07T12:00:00Z", 7.44, resource=v100_vm,
             amount=3 * 3600.0, pricing=3.0, spec=n1_16),
        # half a T4-hour in the hour → 1
        _row(export.GPU_T4, "2026-09-07T10:00:00Z", "2026-09-07T11:00:00Z", 0.175,
             resource=t4_vm, amount=1800.0, pricing=0.5, spec=N1),
    ]
    source = _export_table(bigquery, "unknown_count_warning", rows)
    with caplog.at_level(logging.WARNING, logger="test"):
        summary, lines = _september(
            tmp_path, _billing(bigquery, source.table),
            "SELECT x_InstanceType, x_AcceleratorCount, x_UsageHours FROM billing_facts "
            "WHERE month = ? ORDER BY ResourceId, ChargePeriodStart")
    v, t4 = "n1-standard-16 + nvidia-tesla-v100", "n1-standard-8 + nvidia-tesla-t4"
    assert lines == [(v, 2, pytest.approx(1.0)), (v, 3, pytest.approx(1.0)),
                     (t4, 1, pytest.approx(0.5))]
    assert summary.unknown_instance_types == [v, t4]
    assert ("accelerator count unknown (add them under `accelerators:`): "
            f"{v} (counted as 2 or 3: its accelerator-hours ÷ the hours of its period, "
            f"rounded up), {t4} (counted as 1)") in caplog.text
    assert "counted as 1;" not in caplog.text
