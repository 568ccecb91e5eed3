"""FOCUS 1.x rows → billing_facts (SPEC §3, §5): the month, the components, accelerator
counts, usage hours, buckets, and every bad-input outcome, on rows written by hand in the
shapes AWS, Azure and GCP use. Expected values are computed from the rows written."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.ingest.sources import SourceError

MAY = date(2026, 5, 1)
LOG = logging.getLogger("test")
COLUMNS = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "ProviderName",
           "ChargeCategory", "ChargeClass", "ServiceCategory", "ServiceName", "ResourceId",
           "ResourceType", "RegionId", "SkuId", "SkuPriceDetails", "ConsumedQuantity",
           "ConsumedUnit", "BilledCost", "EffectiveCost", "BillingCurrency",
           "CommitmentDiscountStatus", "InvoiceId", "Tags")


def row(name: str, cost: float, **cols) -> dict:
    """A FOCUS Usage row of one hour on 2026-05-03, billed in May; `name` is its SkuId."""
    base = {"BillingPeriodStart": "2026-05-01T00:00:00Z",
            "ChargePeriodStart": "2026-05-03T10:00:00Z",
            "ChargePeriodEnd": "2026-05-03T11:00:00Z", "ProviderName": "AWS",
            "ChargeCategory": "Usage", "ServiceCategory": "Compute", "SkuId": name,
            "BilledCost": cost, "EffectiveCost": cost, "BillingCurrency": "USD",
            "InvoiceId": "INV-1"}
    return {**base, **cols}


def vm(name: str, instance_type: str, hours: float = 1.0, cost: float = 10.0, **cols) -> dict:
    return row(name, cost, **{"ResourceId": f"res-{name}", "ResourceType": "Virtual Machine",
                              "ConsumedQuantity": hours, "ConsumedUnit": "Hours",
                              "SkuPriceDetails": json.dumps({"InstanceType": instance_type}),
                              **cols})


ROWS = [
    vm("p4d", "p4d.24xlarge", Tags=json.dumps({"user:run_id": "r1", "size": 3})),
    vm("sagemaker", "", ServiceCategory="AI and Machine Learning",
       ResourceType="Training Job", SkuPriceDetails="", x_InstanceType="ml.p4d.24xlarge"),
    vm("azure-nd", "Standard_ND96asr_v4", ProviderName="Microsoft"),
    vm("azure-d4", "Standard_D4s_v5", ProviderName="Microsoft"),
    vm("azure-unknown", "Standard_NC999zz_v9", ProviderName="Microsoft"),
    vm("gcp-a2", "a2-highgpu-8g", ProviderName="Google Cloud"),
    vm("gcp-g2", "g2-standard-24", ProviderName="Google Cloud"),
    # a daily line (Azure's FOCUS exports are daily) and a line metered in seconds
    vm("daily", "m6i.large", hours=24.0, ChargePeriodStart="2026-05-04T00:00:00Z",
       ChargePeriodEnd="2026-05-05T00:00:00Z"),
    vm("seconds", "m6i.large", hours=1800.0, ConsumedUnit="Seconds"),
    row("s3", 4.0, ServiceCategory="Storage", ServiceName="Amazon Simple Storage Service",
        ResourceId="arn:aws:s3:::ml-checkpoints", ResourceType="Bucket",
        ConsumedQuantity=100.0, ConsumedUnit="GB-Months"),
    row("gcs", 2.0, ServiceCategory="Storage", ServiceName="Cloud Storage",
        ResourceId="//storage.googleapis.com/projects/_/buckets/ml-data",
        ResourceType="Storage Bucket"),
    row("nat", 1.5, ServiceCategory="Networking", ResourceId="nat-0abc",
        ResourceType="NAT Gateway", ConsumedQuantity=30.0, ConsumedUnit="GB"),
    row("lambda", 0.5, ResourceId="fn-1", ResourceType="Lambda Function",
        ConsumedQuantity=9000.0, ConsumedUnit="GB-Seconds"),
    row("unused", 7.0, BilledCost=0.0, ResourceId="arn:aws:savingsplans::1:savingsplan/x",
        ResourceType="Savings Plan", CommitmentDiscountStatus="Unused"),
    row("purchase", 0.0, BilledCost=700.0, ChargeCategory="Purchase"),
    row("tax", 3.0, ChargeCategory="Tax", ServiceCategory=""),
    # billed in May for April's usage: May's (a correction of a closed month)
    row("correction", -2.0, ChargeClass="Correction", ChargePeriodStart="2026-04-20T00:00:00Z",
        ChargePeriodEnd="2026-04-20T01:00:00Z"),
    # used on May 31st, billed in June: June's
    row("june", 100.0, BillingPeriodStart="2026-06-01T00:00:00Z",
        ChargePeriodStart="2026-05-31T23:00:00Z", ChargePeriodEnd="2026-06-01T00:00:00Z"),
]
MAY_TOTAL = sum(r["EffectiveCost"] for r in ROWS if r["SkuId"] != "june")


def write_csv(path: Path, rows: list[dict], columns=COLUMNS + ("x_InstanceType",),
              delimiter: str = ",") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore",
                                delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def load(con, path: Path, **cfg) -> dict[str, dict]:
    config = parse_config({"billing": [{"kind": "focus", "path": str(path), "name": "focus"}],
                           "checkpoints": [{"kind": "local", "path": ".", "bucket": "ml-data"}],
                           **cfg}, path.parent)
    build_billing_facts(con, config, MAY, LOG)
    cursor = con.execute("SELECT * FROM billing_facts WHERE month = ? ORDER BY SkuId", [MAY])
    names = [d[0] for d in cursor.description]
    return {r[names.index("SkuId")]: dict(zip(names, r, strict=True)) for r in cursor.fetchall()}


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def test_rows_of_the_billing_period_with_their_components(con, tmp_path):
    facts = load(con, write_csv(tmp_path / "focus" / "may.csv", ROWS))
    assert sorted(facts) == sorted(r["SkuId"] for r in ROWS if r["SkuId"] != "june")
    assert sum(f["EffectiveCost"] for f in facts.values()) == pytest.approx(MAY_TOTAL, rel=1e-12)
    expected = {  # SkuId: (component, G, usage hours, instance type, resource kind)
        "p4d": ("gpu", 8, 1.0, "p4d.24xlarge", "instance"),
        "sagemaker": ("gpu", 8, 1.0, "p4d.24xlarge", "instance"),
        "azure-nd": ("gpu", 8, 1.0, "Standard_ND96asr_v4", "instance"),
        "azure-d4": ("cpu", 0, 1.0, "Standard_D4s_v5", "instance"),
        "azure-unknown": ("gpu", 1, 1.0, "Standard_NC999zz_v9", "instance"),
        "gcp-a2": ("gpu", 8, 1.0, "a2-highgpu-8g", "instance"),
        "gcp-g2": ("gpu", 2, 1.0, "g2-standard-24", "instance"),
        "daily": ("cpu", 0, 24.0, "m6i.large", "instance"),
        "seconds": ("cpu", 0, 0.5, "m6i.large", "instance"),
        "s3": ("storage", 0, None, None, "bucket"),
        "gcs": ("storage", 0, None, None, "bucket"),
        "nat": ("network", 0, None, None, "shared"),
        "lambda": ("other", 0, None, None, "other"),
        "unused": ("other", 0, None, None, "other"),
        "purchase": ("other", 0, None, None, "shared"),
        "tax": ("other", 0, None, None, "shared"),
        "correction": ("other", 0, None, None, "shared"),
    }
    got = {k: (f["x_CostComponent"], f["x_AcceleratorCount"], f["x_UsageHours"],
               f["x_InstanceType"], f["x_ResourceKind"]) for k, f in facts.items()}
    assert got == expected
    # FOCUS columns as they are; bucket ids reduced to the bucket's name
    assert facts["s3"]["ResourceId"] == "ml-checkpoints"
    assert facts["gcs"]["ResourceId"] == "ml-data"
    assert facts["p4d"]["ResourceId"] == "res-p4d"
    assert facts["p4d"]["Tags"] == {"user:run_id": "r1", "size": "3"}
    assert facts["unused"]["CommitmentDiscountStatus"] == "Unused"
    assert facts["purchase"]["BilledCost"] == 700.0 and facts["purchase"]["EffectiveCost"] == 0
    assert facts["correction"]["ChargeClass"] == "Correction"
    assert facts["tax"]["ChargeCategory"] == "Tax"
    assert facts["azure-nd"]["ProviderName"] == "Microsoft"
    assert facts["p4d"]["x_InvoiceId"] == "INV-1"
    assert facts["p4d"]["x_SourceLine"] == "focus:may.csv:2"
    assert facts["p4d"]["BillingPeriodStart"].isoformat() == "2026-05-01T00:00:00"




def test_retired_azure_gpu_sizes_count_their_gpus(con, tmp_path, caplog):
    # NC v1 (K80), NCv2 (P100), ND v1 (P40) and NV v1 (M60) sizes were missing from the
    # table: each counted 1 GPU, listed as unknown
    sizes = {"Standard_NC12": 2, "Standard_NC24r": 4, "Standard_NC24s_v2": 4,
             "Standard_NC12s_v2": 2, "Standard_ND12s": 2, "Standard_ND24rs": 4,
             "Standard_NV12": 2, "Standard_NV24": 4}
    rows = [vm(size, size, ProviderName="Microsoft") for size in sizes]
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        facts = load(con, write_csv(tmp_path / "may.csv", rows))
    assert {size: (f["x_CostComponent"], f["x_AcceleratorCount"], f["x_UsageHours"])
            for size, f in facts.items()} == {size: ("gpu", g, 1.0) for size, g in sizes.items()}
    assert "accelerator count unknown" not in caplog.text

@pytest.mark.parametrize("count", [2, 1])
def test_a_config_type_in_other_letters_overrides_the_built_in_one(con, tmp_path, caplog,
                                                                    count):
    """`accelerators:` naming a built-in type in other letters (`standard_nc24ads_a100_v4`,
    built in as `Standard_NC24ads_A100_v4`, 1 GPU) kept both in the table, and the line
    matching both in any case became two lines of one id: with 2 the month failed as a
    conflicting duplicate line, with 1 it reported an identical duplicate dropped. The
    config's count is the type's."""
    path = write_csv(tmp_path / "may.csv",
                     [vm("a100", "Standard_NC24ads_A100_v4", cost=3.67, ProviderName="Microsoft")])
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        facts = load(con, path, accelerators={"standard_nc24ads_a100_v4": count})
    assert list(facts) == ["a100"]
    assert (facts["a100"]["x_AcceleratorCount"], facts["a100"]["EffectiveCost"]) == (count, 3.67)
    assert "duplicate" not in caplog.text

@pytest.mark.parametrize(("unit", "quantity", "hours"), [
    ("10 Hours", 0.15, 1.5), ("100 Hours", 0.015, 1.5), ("Days", 1.5 / 24, 1.5),
    ("1 Day", 1.5 / 24, 1.5), ("Milliseconds", 5.4e6, 1.5), ("Microseconds", 5.4e9, 1.5),
    ("1 Minute", 90.0, 1.5), ("0 Hours", 1.5, None), ("GB-Hours", 1.5, None)])
def test_a_time_unit_with_its_unit_quantity_gives_the_hours(con, tmp_path, unit, quantity,
                                                             hours):
    # FOCUS's UnitFormat: a time unit (days down to microseconds) optionally preceded by a
    # unit quantity, a positive integer (each unit of `10 Hours` is ten hours); a unit that
    # is not time (or a quantity of 0) makes the row no instance usage
    got = load(con, write_csv(tmp_path / "may.csv", [
        vm("g5", "g5.xlarge", hours=quantity, ConsumedUnit=unit)]))["g5"]
    assert got["x_UsageHours"] == (pytest.approx(hours) if hours else None)
    assert got["x_CostComponent"] == ("gpu" if hours else "other")


def test_a_row_cancelling_its_bill_carries_no_hours(con, tmp_path):
    """A covered hour billed 0 and amortized, and beside it a row that only cancels a bill
    (BilledCost < 0, EffectiveCost 0, the hour's usage: what a CUR savings-plan negation
    is). The instance ran one hour: the cancelling row carries no hours, as the CUR reader's
    negations carry none, so the hour is not billed twice in GPU-hours."""
    rows = [vm("covered", "p4d.24xlarge", cost=7.2, BilledCost=0.0, ResourceId="i-1",
               CommitmentDiscountStatus="Used"),
            vm("negation", "p4d.24xlarge", cost=0.0, BilledCost=-10.0, ResourceId="i-1",
               CommitmentDiscountStatus="Used"),
            # a correction refunding usage keeps its (negative) hours: its cost is not 0
            vm("refund", "m6i.large", cost=-3.0, ResourceId="i-2", ChargeClass="Correction")]
    facts = load(con, write_csv(tmp_path / "focus" / "may.csv", rows))
    got = {k: (f["x_CostComponent"], f["x_AcceleratorCount"], f["x_UsageHours"],
               f["x_ResourceKind"]) for k, f in facts.items()}
    assert got == {"covered": ("gpu", 8, 1.0, "instance"), "negation": ("gpu", 8, None, "instance"),
                   "refund": ("cpu", 0, 1.0, "instance")}


def test_a_commitments_usage_rows_have_the_cur_readers_line_item_types(con, tmp_path):
    """A Usage row of a commitment discount is named as the CUR reader names the same line,
    so the report's bridge says what moved (every Usage row was `Usage`: "On-demand usage");
    the other rows keep their ChargeCategory."""
    sp = "arn:aws:savingsplans::1:savingsplan/sp-1"
    rows = [vm("on-demand", "p4d.24xlarge"),
            vm("sp-covered", "p4d.24xlarge", cost=7.2, CommitmentDiscountStatus="Used",
               CommitmentDiscountCategory="spend"),   # in any case, as FOCUS spells it
            vm("sp-negation", "p4d.24xlarge", cost=0.0, BilledCost=-10.0,
               CommitmentDiscountStatus="Used", CommitmentDiscountCategory="Spend"),
            vm("ri-covered", "p4d.24xlarge", cost=6.0, BilledCost=0.0,
               CommitmentDiscountStatus="Used", CommitmentDiscountCategory="Usage"),
            vm("covered", "p4d.24xlarge", cost=6.0, BilledCost=0.0,
               CommitmentDiscountStatus="Used"),
            row("sp-unused", 7.0, BilledCost=0.0, ResourceId=sp, ResourceType="Savings Plan",
                CommitmentDiscountStatus="Unused", CommitmentDiscountCategory="Spend"),
            row("purchase", 0.0, BilledCost=700.0, ChargeCategory="Purchase",
                CommitmentDiscountCategory="Spend"),
            row("tax", 3.0, ChargeCategory="Tax", ServiceCategory="")]
    facts = load(con, write_csv(tmp_path / "focus" / "may.csv", rows,
                                COLUMNS + ("CommitmentDiscountCategory",)))
    assert {k: f["x_LineItemType"] for k, f in facts.items()} == {
        "on-demand": "Usage", "sp-covered": "SavingsPlanCoveredUsage",
        "sp-negation": "SavingsPlanNegation", "ri-covered": "DiscountedUsage",
        "covered": "CommitmentCoveredUsage", "sp-unused": "UnusedCommitment",
        "purchase": "Purchase", "tax": "Tax"}
    # the hours are the reader's as before: the negation and the unused commitment carry none
    assert {k: f["x_UsageHours"] for k, f in facts.items()} == {
        "on-demand": 1.0, "sp-covered": 1.0, "sp-negation": None, "ri-covered": 1.0,
        "covered": 1.0, "sp-unused": None, "purchase": None, "tax": None}


def test_lines_sharing_tags_and_details_each_keep_their_own(con, tmp_path):
    """The tags and the SKU details are read once per distinct text and joined back: lines
    that share them (a run's hours, a SKU's lines) each arrive once with their hints, lines
    without them keep none, and a tag naming the machine still names it."""
    run = json.dumps({"user:run_id": "r7", "team": "ml"})
    gcp = json.dumps({"goog-gke-node-pool": "a", "compute.googleapis.com/machine_spec":
                      "a2-highgpu-2g"})
    rows = [*(vm(f"p4d-{h}", "p4d.24xlarge", Tags=run) for h in range(3)),
            vm("m6i", "m6i.large", Tags=run),
            vm("g5-untagged", "g5.xlarge"),
            vm("gcp-tagged", "", SkuPriceDetails="", ProviderName="Google Cloud", Tags=gcp),
            vm("gcp-same-tags", "", SkuPriceDetails="", ProviderName="Google Cloud", Tags=gcp)]
    facts = load(con, write_csv(tmp_path / "focus" / "may.csv", rows))
    assert sorted(facts) == sorted(r["SkuId"] for r in rows)
    got = {k: (f["x_InstanceType"], f["x_AcceleratorCount"], f["Tags"])
           for k, f in facts.items()}
    tags = {"user:run_id": "r7", "team": "ml"}
    assert got == {**{f"p4d-{h}": ("p4d.24xlarge", 8, tags) for h in range(3)},
                   "m6i": ("m6i.large", 0, tags),
                   "g5-untagged": ("g5.xlarge", 1, None),
                   **{k: ("a2-highgpu-2g", 2, json.loads(gcp))
                      for k in ("gcp-tagged", "gcp-same-tags")}}


def test_lines_sharing_a_meter_each_keep_their_resources_reading(con, tmp_path):
    """A meter (description, usage type, unit, categories) is classified once and each
    resource id read once, then joined back: lines of one meter on different resources each
    keep their own bucket or shared gateway, and lines of one resource under different
    meters (one without a unit, one without a description) each keep their meter's reading."""
    storage = {"ServiceCategory": "Storage", "ServiceName": "Amazon Simple Storage Service",
               "ResourceType": "Bucket", "ConsumedQuantity": 10.0, "ConsumedUnit": "GB-Months"}
    transfer = {"ServiceCategory": "Networking", "ConsumedQuantity": 5.0, "ConsumedUnit": "GB",
                "x_UsageType": "USE1-DataTransfer-Out-Bytes"}
    rows = [row("s3-a", 1.0, ResourceId="arn:aws:s3:::ckpt-a", **storage),
            row("s3-b", 1.0, ResourceId="arn:aws:s3:::ckpt-b", **storage),
            row("s3-blank", 1.0, ResourceId="  ", **storage),
            row("nat", 1.0, ResourceId="arn:aws:ec2:us-east-1:1:natgateway/nat-1", **transfer),
            row("instance-out", 1.0, ResourceId="i-0abc", **transfer),
            vm("hours", "", x_UsageType="USE1-BoxUsage:g5.xlarge", SkuPriceDetails=""),
            vm("no-unit", "", x_UsageType="USE1-BoxUsage:g5.xlarge", SkuPriceDetails="",
               ConsumedUnit="", ResourceId="res-hours"),
            vm("by-description", "", SkuPriceDetails="", ResourceId="res-hours",
               ChargeDescription="$1.006 per On Demand Linux g5.xlarge Instance Hour")]
    columns = COLUMNS + ("x_InstanceType", "x_UsageType", "ChargeDescription")
    facts = load(con, write_csv(tmp_path / "focus" / "may.csv", rows, columns))
    got = {k: (f["ResourceId"], f["x_ResourceKind"], f["x_CostComponent"], f["x_InstanceType"],
               f["x_UsageHours"]) for k, f in facts.items()}
    assert got == {
        "s3-a": ("ckpt-a", "bucket", "storage", None, None),
        "s3-b": ("ckpt-b", "bucket", "storage", None, None),
        "s3-blank": (None, "shared", "storage", None, None),
        "nat": ("arn:aws:ec2:us-east-1:1:natgateway/nat-1", "shared", "network", None, None),
        "instance-out": ("i-0abc", "other", "network", None, None),
        "hours": ("res-hours", "instance", "gpu", "g5.xlarge", 1.0),
        "no-unit": ("res-hours", "other", "other", None, None),
        "by-description": ("res-hours", "instance", "gpu", "g5.xlarge", 1.0)}


@pytest.mark.parametrize(("unit", "zone", "money"), [
    ("ms", "UTC", None), ("ns", "Asia/Kathmandu", None),
    ("us", "UTC", pa.decimal128(38, 10))])  # FOCUS's Decimal type, as Spark writes it
def test_parquet_with_typed_columns_reads_like_csv(con, tmp_path, unit, zone, money):
    csv_facts = load(con, write_csv(tmp_path / "csv" / "may.csv", ROWS))
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS + ("x_InstanceType",)}
                                  for r in ROWS])
    for column in ("BilledCost", "EffectiveCost", "ConsumedQuantity") if money else ():
        table = table.set_column(table.schema.get_field_index(column), column,
                                 table[column].cast(pa.float64()).cast(money))
    for column in ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd"):
        stamps = pa.compute.strptime(table[column], "%Y-%m-%dT%H:%M:%SZ", "s")
        table = table.set_column(table.schema.get_field_index(column), column,
                                 stamps.cast(pa.timestamp(unit, tz=zone)))
    tags = pa.array([[(k, str(v)) for k, v in json.loads(r["Tags"]).items()] if r.get("Tags")
                     else None
                     for r in ROWS], pa.map_(pa.string(), pa.string()))
    table = table.set_column(table.schema.get_field_index("Tags"), "Tags", tags)
    (tmp_path / "parquet").mkdir()
    pq.write_table(table, tmp_path / "parquet" / "may.parquet")
    parquet_facts = load(con, tmp_path / "parquet" / "may.parquet")
    assert parquet_facts["p4d"]["x_SourceLine"] == "focus:may.parquet:1"
    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    assert ({k: {c: v for c, v in f.items() if c not in drop} for k, f in parquet_facts.items()}
            == {k: {c: v for c, v in f.items() if c not in drop} for k, f in csv_facts.items()})


@pytest.mark.parametrize("fold", [str.upper, str.lower], ids=["snowflake", "redshift"])
def test_column_names_in_another_case_read_as_focus_names_them(con, tmp_path, fold):
    # a FOCUS table unloaded from a warehouse: Snowflake names its columns in capitals
    # (BILLEDCOST), Redshift in lower case; a CSV streamed through pyarrow and a parquet
    # file DuckDB reads itself give the facts of FOCUS's own spelling
    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    want = {k: {c: v for c, v in f.items() if c not in drop}
            for k, f in load(con, write_csv(tmp_path / "own" / "may.csv", ROWS)).items()}
    columns = COLUMNS + ("x_InstanceType",)
    folded = [{fold(c): r.get(c) for c in columns} for r in ROWS]
    write_csv(tmp_path / "csv" / "may.csv", folded, columns=tuple(map(fold, columns)))
    (tmp_path / "parquet").mkdir()
    pq.write_table(pa.Table.from_pylist(folded), tmp_path / "parquet" / "may.parquet")
    for path in (tmp_path / "csv" / "may.csv", tmp_path / "parquet" / "may.parquet"):
        got = load(con, path)
        assert {k: {c: v for c, v in f.items() if c not in drop} for k, f in got.items()} == want
    # two spellings, neither FOCUS's own: which is meant?
    both = [{**r, "BILLEDCOST": r[fold("BilledCost")], "billedcost": r[fold("BilledCost")]}
            for r in folded]
    header = [c for c in map(fold, columns) if c.lower() != "billedcost"]
    write_csv(tmp_path / "both" / "may.csv", both, columns=(*header, "BILLEDCOST", "billedcost"))
    with pytest.raises(SourceError, match="columns BILLEDCOST and billedcost both name "
                                          "FOCUS's BilledCost"):
        load(con, tmp_path / "both" / "may.csv")


def test_strings_without_their_utf8_annotation_read_like_csv(con, tmp_path):
    # Impala and older Hive write strings as plain binary: read as the UTF-8 they hold
    from tests.support.cur_rows import binary_strings

    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    want = {k: {c: v for c, v in f.items() if c not in drop}
            for k, f in load(con, write_csv(tmp_path / "csv" / "may.csv", ROWS)).items()}
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS + ("x_InstanceType",)}
                                  for r in ROWS])
    (tmp_path / "parquet").mkdir()
    pq.write_table(binary_strings(table), tmp_path / "parquet" / "may.parquet")
    assert pq.read_schema(tmp_path / "parquet" / "may.parquet").field("Tags").type == pa.binary()
    got = load(con, tmp_path / "parquet" / "may.parquet")
    assert {k: {c: v for c, v in f.items() if c not in drop} for k, f in got.items()} == want


def test_timestamps_as_a_warehouse_writes_them_read_like_iso(con, tmp_path):
    # a FOCUS table unloaded from Snowflake writes its TIMESTAMP_TZ columns with a blank
    # before the offset (`2026-05-03 10:00:00.000 +0000`), BigQuery with ` UTC`: the same
    # instants as FOCUS's ISO 8601 (the first was refused as no timestamp)
    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    want = {k: {c: v for c, v in f.items() if c not in drop}
            for k, f in load(con, write_csv(tmp_path / "iso" / "may.csv", ROWS)).items()}
    stamps = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd")
    for name, spell in (("snowflake", lambda t: t.replace("T", " ").replace("Z", ".000 +0000")),
                        ("offset", lambda t: t.replace("T", " ").replace("Z", " -00:00")),
                        ("bigquery", lambda t: t.replace("T", " ").replace("Z", " UTC"))):
        rows = [{**r, **{c: spell(r[c]) for c in stamps if r.get(c)}} for r in ROWS]
        got = load(con, write_csv(tmp_path / name / "may.csv", rows))
        assert {k: {c: v for c, v in f.items() if c not in drop}
                for k, f in got.items()} == want, name


def test_a_csv_separated_otherwise_reads_like_commas(con, tmp_path):
    # a spreadsheet saves CSV with semicolons where the decimal mark is a comma; tabs and
    # bars are other exports' choices: the delimiter that splits the header into FOCUS
    # columns reads the file (a semicolon file was refused as missing every column), and a
    # decimal comma is then refused naming its row
    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    want = {k: {c: v for c, v in f.items() if c not in drop}
            for k, f in load(con, write_csv(tmp_path / "comma" / "may.csv", ROWS)).items()}
    for name, delimiter in (("semicolon", ";"), ("tab", "\t"), ("bar", "|")):
        got = load(con, write_csv(tmp_path / name / "may.csv", ROWS, delimiter=delimiter))
        assert {k: {c: v for c, v in f.items() if c not in drop}
                for k, f in got.items()} == want, name
    decimal_comma = [ROWS[0], {**ROWS[1], "EffectiveCost": "12,5"}]
    path = write_csv(tmp_path / "comma-decimal" / "may.csv", decimal_comma, delimiter=";")
    with pytest.raises(SourceError) as error:
        load(con, path)
    assert (error.value.where, error.value.problem) == (
        f"{path} row 3", 'EffectiveCost "12,5" is not a number')


def test_azure_tags_written_without_their_braces_are_read(con, tmp_path):
    # Azure's cost details write a resource's tags without braces; the FinOps toolkit's
    # mapping to FOCUS adds them, and so does the reader (such a row was refused); text that
    # is no JSON object either way is still refused, naming its row
    rows = [vm("azure", "Standard_ND96asr_v4", ProviderName="Microsoft",
               Tags='"team": "nlp","user:run_id": "r1"'),
            vm("braced", "m6i.large", Tags='{"team": "cv"}'), vm("none", "m6i.large", Tags="")]
    got = load(con, write_csv(tmp_path / "ok" / "may.csv", rows))
    assert {k: v["Tags"] for k, v in got.items()} == {
        "azure": {"team": "nlp", "user:run_id": "r1"}, "braced": {"team": "cv"}, "none": None}
    for bad in ("team=nlp", '"team"', "[1, 2]"):
        with pytest.raises(SourceError) as err:
            load(con, write_csv(tmp_path / "bad" / "may.csv", [*rows, vm("x", "m6i.large",
                                                                          Tags=bad)]))
        assert f'may.csv row 5: Tags "{bad}" is not a JSON object' in str(err.value)


def test_tags_as_json_arrays_of_entries_read_as_their_maps(con, tmp_path):
    # a repeated key-value record turned to text (BigQuery's TO_JSON_STRING of GCP's tags,
    # which carry `inherited` and `namespace` too; a polars map written as JSON): the map of
    # its entries, as the same record exported to parquet reads; refused before
    record = ('[{"key":"team","value":"nlp","inherited":false,"namespace":"123"},'
              '{"key":"user:run_id","value":"r1","inherited":true,"namespace":""}]')
    rows = [vm("gcp", "a2-highgpu-1g", ProviderName="Google Cloud", Tags=record),
            vm("empty", "m6i.large", Tags="[]"),
            vm("number", "m6i.large", Tags='[{"key": "size", "value": 3}]'),
            # a key named twice (Google's FOCUS view: a label the project repeats) is its first
            vm("twice", "m6i.large",
               Tags='[{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]')]
    got = load(con, write_csv(tmp_path / "ok" / "may.csv", rows))
    assert {k: v["Tags"] for k, v in got.items()} == {
        "gcp": {"team": "nlp", "user:run_id": "r1"}, "empty": {}, "number": {"size": "3"},
        "twice": {"a": "1"}}
    for bad in ('[{"key": "a"}, {"name": "b"}]', '["a"]'):
        with pytest.raises(SourceError) as err:
            load(con, write_csv(tmp_path / "bad" / "may.csv", [*rows, vm("x", "m6i.large",
                                                                          Tags=bad)]))
        assert f'may.csv row 6: Tags "{bad}" is not a JSON object' in str(err.value)


def tags_as(rows: list[dict], shape: str) -> pa.Array:
    """The rows' Tags as a struct (pandas writes a column of dicts so: a field for every key
    of any row, NULL where a row lacks it), lists of [key, value] pairs (pandas writes back
    a map it read), of {key, value} entries (polars) or of records holding more (a BigQuery
    repeated record exported to parquet)."""
    tags = [{k: str(v) for k, v in json.loads(r["Tags"]).items()} if r.get("Tags") else None
            for r in rows]
    if shape == "struct":
        keys = sorted({k for t in tags if t for k in t})
        return pa.array([{k: t.get(k) for k in keys} if t else None for t in tags],
                        pa.struct([(k, pa.string()) for k in keys]))
    if shape == "pairs":
        return pa.array([[[k, v] for k, v in t.items()] if t else None for t in tags],
                        pa.list_(pa.list_(pa.string())))
    if shape == "records":  # a BigQuery repeated record, as GCP's tags: more than key, value
        record = pa.struct([("key", pa.string()), ("value", pa.string()),
                            ("inherited", pa.bool_()), ("namespace", pa.string())])
        return pa.array([[{"key": k, "value": v, "inherited": False, "namespace": "123"}
                          for k, v in t.items()] if t else None for t in tags],
                        pa.list_(record))
    entry = pa.struct([("key", pa.string()), ("value", pa.string())])
    return pa.array([[{"key": k, "value": v} for k, v in t.items()] if t else None
                     for t in tags], pa.list_(entry))


@pytest.mark.parametrize("shape", ["struct", "pairs", "entries", "records"])
def test_tags_written_as_structs_or_lists_of_entries_read_like_csv(con, tmp_path, shape):
    # the lists failed with a binder error ("Cannot concatenate types VARCHAR and …[]"), and
    # a struct kept its NULL fields as keys of every row
    rows = [{**r, "Tags": json.dumps({"team": "nlp"})} if r["SkuId"] == "gcp-a2" else r
            for r in ROWS]
    csv_facts = load(con, write_csv(tmp_path / "csv" / "may.csv", rows))
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS + ("x_InstanceType",)}
                                  for r in rows])
    table = table.set_column(table.schema.get_field_index("Tags"), "Tags",
                             tags_as(rows, shape))
    (tmp_path / shape).mkdir()
    pq.write_table(table, tmp_path / shape / "may.parquet")
    got = load(con, tmp_path / shape / "may.parquet")
    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    assert ({k: {c: v for c, v in f.items() if c not in drop} for k, f in got.items()}
            == {k: {c: v for c, v in f.items() if c not in drop} for k, f in csv_facts.items()})
    assert got["p4d"]["Tags"] == {"user:run_id": "r1", "size": "3"}
    assert got["gcp-a2"]["Tags"] == {"team": "nlp"}


def test_a_list_of_entries_naming_a_key_twice_reads_as_its_first(con, tmp_path):
    # refused before: a BigQuery repeated record of a resource's labels and its project's
    # (Google's FOCUS view) names a key twice, and the resource's own label comes first
    rows = [vm("ok", "m6i.large"), vm("twice", "m6i.large")]
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in rows])
    record = pa.struct([("key", pa.string()), ("value", pa.string()),
                        ("x_inherited", pa.bool_())])
    table = table.set_column(table.schema.get_field_index("Tags"), "Tags", pa.array(
        [None, [{"key": "env", "value": "prod", "x_inherited": False},
                {"key": "team", "value": "nlp", "x_inherited": False},
                {"key": "env", "value": "research", "x_inherited": True}]],
        pa.list_(record)))
    (tmp_path / "f").mkdir()
    pq.write_table(table, tmp_path / "f" / "may.parquet")
    assert load(con, tmp_path / "f" / "may.parquet")["twice"]["Tags"] == {
        "env": "prod", "team": "nlp"}


@pytest.mark.parametrize(("tags", "kind", "message"), [
    ([[1, 2]], pa.list_(pa.int64()), "Tags \"[1, 2]\" is not a JSON object")])
def test_tags_that_no_map_holds_name_their_row(con, tmp_path, tags, kind, message):
    rows = [vm("ok", "m6i.large"), vm("bad", "m6i.large")]
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in rows])
    table = table.set_column(table.schema.get_field_index("Tags"), "Tags",
                             pa.array([None, *tags], kind))
    (tmp_path / "f").mkdir()
    pq.write_table(table, tmp_path / "f" / "may.parquet")
    with pytest.raises(SourceError) as err:
        load(con, tmp_path / "f" / "may.parquet")
    assert "may.parquet row 2: Tags" in str(err.value) and message in str(err.value)


def test_a_folder_of_parquet_and_csv_files_reads_as_one_month(con, tmp_path):
    """Local parquet files are read as a view over them, any other file is copied in: a
    folder holding both reads every row once, as the same rows in one CSV do."""
    csv_facts = load(con, write_csv(tmp_path / "one" / "may.csv", ROWS))
    folder = tmp_path / "mixed"
    write_csv(folder / "b.csv", ROWS[5:])
    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS + ("x_InstanceType",)}
                                         for r in ROWS[:5]]), folder / "a.parquet")
    mixed = load(con, folder)
    drop = ("x_SourceLine", "month", "x_File", "x_Row")  # lineage
    assert ({k: {c: v for c, v in f.items() if c not in drop} for k, f in mixed.items()}
            == {k: {c: v for c, v in f.items() if c not in drop} for k, f in csv_facts.items()})
    assert mixed["p4d"]["x_SourceLine"] == "focus:a.parquet:1"


def test_a_local_parquet_file_numbers_its_rows_across_row_groups(con, tmp_path, monkeypatch):
    """DuckDB reads a local parquet file itself (sources/focus.py `_native`): each line's
    x_SourceLine names its 1-based row in the file, across row groups, a bad value names its
    row, and the month is what the streamed read (the path of a file on S3) gives."""
    from cost_pipeline.ingest.sources import focus

    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in ROWS])
    path = tmp_path / "p" / "may.parquet"
    path.parent.mkdir()
    pq.write_table(table, path, row_group_size=3)
    assert pq.ParquetFile(path).metadata.num_row_groups > 2
    reads = []
    with monkeypatch.context() as patch:  # the rows as read: a view over the file, not a copy
        patch.setattr(focus, "_load_file", lambda *args: reads.append(args))
        native = load(con, path)
    assert reads == []
    # and dropped once inserted, not left to the commit
    assert con.execute("SELECT (SELECT count(*) FROM duckdb_tables() WHERE temporary AND "
                       "table_name = $name) + (SELECT count(*) FROM duckdb_views() WHERE "
                       "temporary AND view_name = $name)",
                       {"name": focus.RAW_TABLE}).fetchall() == [(0,)]
    assert {k: f["x_SourceLine"] for k, f in native.items()} == {
        r["SkuId"]: f"focus:may.parquet:{i}" for i, r in enumerate(ROWS, start=1)
        if r["SkuId"] != "june"}
    with monkeypatch.context() as patch:
        patch.setattr(focus, "_native", lambda *_: False)
        assert load(con, path) == native

    # a name DuckDB would read as a glob pattern (`a*` also matching `ab`) is streamed
    folder = tmp_path / "glob"
    folder.mkdir()
    pq.write_table(table.slice(0, 2), folder / "a*.parquet")
    pq.write_table(table.slice(2, 1), folder / "ab.parquet")
    assert sorted(load(con, folder)) == sorted(r["SkuId"] for r in ROWS[:3])
    # a column named as DuckDB names its row numbers, in any case, is streamed
    for name in ("file_row_number", "FILE_ROW_NUMBER"):
        pq.write_table(table.append_column(name, pa.array(range(len(ROWS)))),
                       tmp_path / "p" / "may.parquet")
        assert load(con, path) == native

    bad = table.set_column(table.schema.get_field_index("EffectiveCost"), "EffectiveCost",
                           pa.array([str(r["EffectiveCost"]) if i != 7 else "12,5"
                                     for i, r in enumerate(ROWS, start=1)]))
    pq.write_table(bad, path, row_group_size=3)
    with pytest.raises(SourceError) as error:
        load(con, path)
    assert (error.value.where, error.value.problem) == (
        f"{path} row 7", 'EffectiveCost "12,5" is not a number')


def test_a_folder_skips_other_focus_datasets_and_reads_gzip(con, tmp_path):
    import gzip
    folder = tmp_path / "exports"
    write_csv(folder / "a" / "part-1.csv", ROWS[:5])
    plain = write_csv(tmp_path / "part-2.csv", ROWS[5:])
    (folder / "b").mkdir()
    with gzip.open(folder / "b" / "part-2.csv.gz", "wb") as out:
        out.write(plain.read_bytes())
    (folder / "contract_commitment.csv").write_text(
        "ContractCommitmentId,ContractCommitmentCost,BillingCurrency\nc-1,100,USD\n")
    facts = load(con, folder)
    assert len(facts) == len(ROWS) - 1
    assert facts["p4d"]["x_SourceLine"] == "focus:a/part-1.csv:2"
    assert facts["gcp-a2"]["x_SourceLine"] == "focus:b/part-2.csv.gz:2"


def test_attribution_of_focus_lines(con, tmp_path):
    """The production attribution SQL on FOCUS lines: a tag claim, a resource claim of half
    the accelerators, and unused commitment, tax and purchases unallocated."""
    from datetime import datetime

    from cost_pipeline.warehouse import month_params
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    path = write_csv(tmp_path / "f" / "may.csv", ROWS)
    load(con, path)
    start, end = datetime(2026, 5, 3, 9), datetime(2026, 5, 3, 12)
    insert_runs(con, MAY, [
        {**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED", "start_time": start,
         "end_time": end},
        {**RUN_DEFAULTS, "run_id": "r2", "status": "FINISHED", "start_time": start,
         "end_time": end, "resource_ids": ["res-azure-nd"], "gpus": 4},
    ])
    cfg = parse_config({}, tmp_path)
    build_attribution(con, MAY, month_params(cfg, MAY))
    rows = con.execute(
        "SELECT b.SkuId, a.run_id, a.purpose_class, a.kind, a.cost FROM attribution a "
        "JOIN billing_facts b USING (month, x_SourceLine) ORDER BY 1, 2").fetchall()
    by_line: dict[str, list] = {}
    for sku, run_id, purpose_class, kind, cost in rows:
        by_line.setdefault(sku, []).append((run_id, purpose_class, kind, cost))
    assert by_line["p4d"] == [("r1", "other", None, 10.0)]
    assert sorted(by_line["azure-nd"], key=str) == sorted(
        [("r2", "other", None, 5.0), (None, "untracked", "idle_capacity", 5.0)], key=str)
    assert by_line["unused"] == [(None, "unallocated", "unused_commitment", 7.0)]
    assert by_line["tax"] == [(None, "unallocated", "tax", 3.0)]
    assert by_line["purchase"] == [(None, "unallocated", "purchase", 0.0)]
    assert sum(r[4] for r in rows) == pytest.approx(MAY_TOTAL, rel=1e-12)


# GPU usage lines a FOCUS file gives no ResourceId: 31 days of a p4d.24xlarge's hour, $32 each,
# the type in SkuPriceDetails. Read as `other` with no hours and no accelerators, the month
# billed 0 GPU-hours and its reconciliation passed with the $992 all untracked.
NAMELESS_P4D = [vm(f"p4d-{d:02d}", "p4d.24xlarge", cost=32.0, ResourceId="",
                   ChargePeriodStart=f"2026-05-{d:02d}T10:00:00Z",
                   ChargePeriodEnd=f"2026-05-{d:02d}T11:00:00Z") for d in range(1, 32)]


def reconciled(con, path: Path, runs: list[dict]) -> dict:
    """The month of the file at `path` attributed to `runs` and reconciled: its row."""
    from cost_pipeline.warehouse import month_params, replace_month, sql_text
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    load(con, path)
    insert_runs(con, MAY, [{**RUN_DEFAULTS, "status": "FINISHED", **run} for run in runs])
    params = month_params(parse_config({}, path.parent), MAY)
    build_attribution(con, MAY, params)
    replace_month(con, "reconciliation", MAY, sql_text("reconciliation"), params)
    cursor = con.execute("SELECT * FROM reconciliation WHERE month = ?", [MAY])
    names = [d[0] for d in cursor.description]
    return dict(zip(names, cursor.fetchone(), strict=True))


def test_gpu_lines_without_a_resource_id_are_instance_usage(con, tmp_path):
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", NAMELESS_P4D))
    assert len(facts) == 31
    for fact in facts.values():
        assert (fact["ResourceId"], fact["x_CostComponent"], fact["x_AcceleratorCount"],
                fact["x_UsageHours"], fact["x_InstanceUsage"], fact["x_InstanceType"],
                fact["x_ResourceKind"]) == (None, "gpu", 8, 1.0, True, "p4d.24xlarge",
                                            "shared")


def test_a_month_of_gpu_lines_without_a_resource_id_is_all_untracked(con, tmp_path):
    """The run names `i-p4d`, which no line shows (the lines name no resource): 31 h × 8
    GPUs = 248 GPU-hours billed, none tracked, untracked share 1.0, the check failing."""
    got = reconciled(con, write_csv(tmp_path / "f" / "may.csv", NAMELESS_P4D), [{
        "run_id": "r1", "resource_ids": ["i-p4d"], "gpus": 8,
        "start_time": datetime(2026, 5, 1), "end_time": datetime(2026, 6, 1)}])
    assert (got["billed_gpu_hours"], got["tracked_gpu_hours"], got["untracked_gpu_hours"]) == (
        pytest.approx(248.0), 0.0, pytest.approx(248.0))
    assert (got["untracked_share"], got["status"]) == (pytest.approx(1.0), "fail")
    assert got["untracked_cost_share"] == pytest.approx(1.0)
    assert got["by_accelerator_type"] == [{
        "instance_type": "p4d.24xlarge", "billed_gpu_hours": pytest.approx(248.0),
        "untracked_gpu_hours": pytest.approx(248.0), "untracked_share": pytest.approx(1.0),
        "gpu_cost": pytest.approx(992.0), "untracked_cost_share": pytest.approx(1.0)}]
    # a line naming no resource is `shared`: only a tag can claim it
    kinds = con.execute("SELECT kind, count(*), sum(cost), sum(accelerator_hours) "
                        "FROM attribution GROUP BY ALL").fetchall()
    assert kinds == [("shared", 31, pytest.approx(992.0), pytest.approx(248.0))]


def test_a_tag_claims_a_gpu_line_without_a_resource_id_by_its_hours(con, tmp_path):
    """A run tagged on May 3rd's line, running 10:00-10:30 with 4 of the 8 GPUs: d is the
    line's own hour, so it takes 0.5 × 4/8 = 0.25 of $32 (8 GPU-hours × 0.25 = 2 tracked);
    246 of the 248 GPU-hours are untracked."""
    rows = [r | {"Tags": json.dumps({"user:run_id": "r1"})} if r["SkuId"] == "p4d-03" else r
            for r in NAMELESS_P4D]
    got = reconciled(con, write_csv(tmp_path / "f" / "may.csv", rows), [{
        "run_id": "r1", "gpus": 4, "start_time": datetime(2026, 5, 3, 10),
        "end_time": datetime(2026, 5, 3, 10, 30)}])
    assert (got["billed_gpu_hours"], got["tracked_gpu_hours"]) == (
        pytest.approx(248.0), pytest.approx(2.0))
    assert got["untracked_share"] == pytest.approx(246.0 / 248.0)
    assert con.execute("SELECT cost, hours, accelerator_hours FROM attribution "
                       "WHERE run_id = 'r1'").fetchall() == [
        (pytest.approx(8.0), pytest.approx(0.25), pytest.approx(2.0))]


def attributed_with_datasets(con, tmp_path: Path, datasets: dict) -> None:
    """May attributed with the config's `datasets`, then its `egress` and `cost_levers`."""
    from cost_pipeline.warehouse import dataset_rows, month_params, replace_month, sql_text

    cfg = parse_config({"datasets": datasets}, tmp_path)
    params = month_params(cfg, MAY)
    build_attribution(con, MAY, params, dataset_rows(cfg))
    for table in ("egress", "cost_levers"):
        replace_month(con, table, MAY, sql_text(table), params)


def test_azure_storage_accounts_as_datasets_take_their_cross_region_transfer(con, tmp_path):
    """Azure's cost data lowercases a storage account's id; a dataset's bucket matched the
    line only when written exactly so. `clicks` names its account by its id as the export
    writes it, `images` by its id as created (`resourceGroups/ML-RG/…storageAccounts/mldata2`):
    the second line, billed as `…/resourcegroups/ml-rg/…`, was untracked. z1 (westeurope)
    reads clicks and z2 (westeurope) reads images, both in eastus: z1 takes mldata's $2.00
    (20 GB), z2 mldata2's $3.00 (30 GB), the lever $5.00 (50 GB). The mldata line names its
    resource type (a storage account); the mldata2 line none: it is a bucket because a
    dataset names it."""
    from datetime import datetime

    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    account = ("/subscriptions/0000/resourcegroups/ml-rg/providers/microsoft.storage/"
               "storageaccounts/")
    day = {"ProviderName": "Microsoft", "ServiceCategory": "Networking",
           "ServiceName": "Bandwidth", "ChargePeriodStart": "2026-05-03T00:00:00Z",
           "ChargePeriodEnd": "2026-05-04T00:00:00Z", "ConsumedUnit": "1 GB"}
    rows = [row("mldata", 2.0, ResourceId=account + "mldata", ResourceType="Storage account",
                ConsumedQuantity=20.0, **day),
            row("mldata2", 3.0, ResourceId=account + "mldata2", ConsumedQuantity=30.0, **day)]
    datasets = {"clicks": {"bucket": account + "mldata", "region": "eastus"},
                "images": {"bucket": "/subscriptions/0000/resourceGroups/ML-RG/providers/"
                                     "Microsoft.Storage/storageAccounts/mldata2",
                           "region": "eastus"}}
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows), datasets=datasets)
    assert {sku: f["x_ResourceKind"] for sku, f in facts.items()} == {
        "mldata": "bucket", "mldata2": "bucket"}
    start, end = datetime(2026, 5, 3, 6), datetime(2026, 5, 3, 18)
    insert_runs(con, MAY, [
        {**RUN_DEFAULTS, "run_id": run_id, "status": "FINISHED", "start_time": start,
         "end_time": end, "region": "westeurope", "dataset": dataset}
        for run_id, dataset in (("z1", "clicks"), ("z2", "images"))])
    attributed_with_datasets(con, tmp_path, datasets)
    assert con.execute(
        "SELECT b.SkuId, a.run_id, a.purpose_class, a.cost FROM attribution a "
        "JOIN billing_facts b USING (month, x_SourceLine) ORDER BY 1").fetchall() == [
        ("mldata", "z1", "other", 2.0), ("mldata2", "z2", "other", 3.0)]
    assert con.execute(
        "SELECT run_id, dataset, dataset_region, run_region, gigabytes, transfer_cost "
        "FROM egress ORDER BY run_id").fetchall() == [
        ("z1", "clicks", "eastus", "westeurope", 20.0, 2.0),
        ("z2", "images", "eastus", "westeurope", 30.0, 3.0)]
    dollars, evidence = con.execute(
        "SELECT dollars, evidence FROM cost_levers "
        "WHERE lever = 'co-locate compute & data'").fetchone()
    assert dollars == pytest.approx(5.0)
    assert evidence == ("2 runs pulled 50 GB across regions: clicks eastus → westeurope, "
                        "images eastus → westeurope")


def test_an_s3_bucket_does_not_take_the_transfer_of_an_azure_account_of_its_name(con, tmp_path):
    """A dataset names the S3 bucket `mldata`; an Azure storage account is also called
    `mldata`. Matched by its bare name, the account's $3.00 of transfer went to z1 with the
    bucket's $2.00 (the lever $5.00, 50 GB); an account is a dataset by its id only: z1 takes
    the bucket's $2.00 (20 GB), the account's $3.00 stays untracked."""
    from datetime import datetime

    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    day = {"ServiceCategory": "Networking", "ChargePeriodStart": "2026-05-03T00:00:00Z",
           "ChargePeriodEnd": "2026-05-04T00:00:00Z", "ConsumedUnit": "GB"}
    rows = [row("s3-xfer", 2.0, ProviderName="AWS", ServiceName="Amazon Simple Storage Service",
                ResourceId="arn:aws:s3:::mldata", ConsumedQuantity=20.0, **day),
            row("azure-xfer", 3.0, ProviderName="Microsoft", ServiceName="Bandwidth",
                ResourceId="/subscriptions/0000/resourcegroups/ml-rg/providers/"
                           "microsoft.storage/storageaccounts/mldata",
                ResourceType="Storage account", ConsumedQuantity=30.0, **day)]
    datasets = {"clicks": {"bucket": "mldata", "region": "us-east-1"}}
    load(con, write_csv(tmp_path / "f" / "may.csv", rows), datasets=datasets)
    insert_runs(con, MAY, [{**RUN_DEFAULTS, "run_id": "z1", "status": "FINISHED",
                            "start_time": datetime(2026, 5, 3, 6),
                            "end_time": datetime(2026, 5, 3, 18), "region": "eu-west-1",
                            "dataset": "clicks"}])
    attributed_with_datasets(con, tmp_path, datasets)
    assert con.execute(
        "SELECT b.SkuId, coalesce(a.run_id, a.purpose_class), a.cost FROM attribution a "
        "JOIN billing_facts b USING (month, x_SourceLine) ORDER BY 1").fetchall() == [
        ("azure-xfer", "untracked", 3.0), ("s3-xfer", "z1", 2.0)]
    assert con.execute("SELECT run_id, gigabytes, transfer_cost FROM egress "
                       "WHERE run_id IS NOT NULL").fetchall() == [("z1", 20.0, 2.0)]


@pytest.mark.parametrize(("change", "column", "message"), [
    ({"ChargePeriodStart": "yesterday"}, None, 'ChargePeriodStart "yesterday" is not a timestamp'),
    # DuckDB parses it, but no charge period ends there
    ({"ChargePeriodEnd": "infinity"}, None, 'ChargePeriodEnd "infinity" is not a timestamp'),
    ({"EffectiveCost": "12,5"}, None, 'EffectiveCost "12,5" is not a number'),
    ({"EffectiveCost": ""}, None, "EffectiveCost is empty"),
    ({"Tags": "{not json"}, None, 'Tags "{not json" is not a JSON object'),
    ({"ChargePeriodEnd": "2026-05-03T09:00:00Z"}, None,
     "ChargePeriodEnd is before ChargePeriodStart"),
])
def test_a_bad_value_names_file_row_and_column(con, tmp_path, change, column, message):
    rows = [ROWS[0], {**ROWS[1], **change}]
    path = write_csv(tmp_path / "f" / "bad.csv", rows)
    with pytest.raises(SourceError) as error:
        load(con, path)
    assert error.value.source == "focus"
    assert error.value.where == f"{path} row 3"
    assert error.value.problem == message


def test_a_broken_file_or_record_is_refused_naming_the_file(con, tmp_path, caplog):
    # a parquet file cut short; a CSV record of more cells than the header, in the first
    # block pyarrow parses (on opening the file) and beyond it (while DuckDB reads the rows,
    # inside the month's transaction): each a SourceError naming the file, where a raw
    # ArrowInvalid named neither source nor file, and DuckDB's "transaction is aborted"
    # replaced the error of a record beyond the first block
    (tmp_path / "p").mkdir()
    cut = tmp_path / "p" / "may.parquet"
    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in ROWS]), cut)
    cut.write_bytes(cut.read_bytes()[:-100])
    with pytest.raises(SourceError, match=r"may\.parquet: not a readable parquet file") as err:
        load(con, cut)
    assert err.value.source == "focus"
    for rows in (2, 60_000):  # 60,000 rows: ~10 MB, past the 4 MiB first block
        path = write_csv(tmp_path / f"c{rows}" / "may.csv", [ROWS[0]] * rows + [ROWS[1]])
        with path.open("a", encoding="utf-8") as out:
            out.write("2026-05-01T00:00:00Z,too,many,cells" + ",x" * len(COLUMNS) + "\n")
        # the record's row, found by a second read (csv_fault): pyarrow fails a whole block;
        # the second read is said first (a file of millions of records takes seconds)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=LOG.name), \
                pytest.raises(SourceError, match=rf"may\.csv row {rows + 3}: unreadable: CSV "
                                                 r"parse error: Expected \d+ columns, got \d+"):
            load(con, path)
        assert f"focus: {path}: unreadable; reading it again to name the record" in caplog.text
    assert con.execute("SELECT 1").fetchone() == (1,)  # the connection is usable again


def test_a_missing_column_or_path_is_refused(con, tmp_path):
    path = write_csv(tmp_path / "f" / "no-cost.csv", ROWS[:2],
                     columns=tuple(c for c in COLUMNS if c != "EffectiveCost"))
    with pytest.raises(SourceError, match="missing FOCUS column.s. EffectiveCost") as error:
        load(con, path)
    assert error.value.where == str(path)
    with pytest.raises(SourceError, match="not found"):
        load(con, tmp_path / "nowhere")


def test_a_cost_file_lacking_a_required_column_in_a_folder_is_refused_not_skipped(con, tmp_path):
    # a cost-and-usage file without ChargePeriodStart (or EffectiveCost) was taken for another
    # FOCUS dataset and skipped: the month loaded $0.00, or, held before, blamed a moved path
    folder = tmp_path / "exports"
    may = write_csv(folder / "may.csv", ROWS)
    (folder / "contract_commitment.csv").write_text(
        "ContractCommitmentId,ContractCommitmentCost,BillingCurrency\nc-1,100,USD\n")
    # FOCUS's invoice detail dataset shares BilledCost and ChargeCategory: still skipped
    (folder / "invoice_detail.csv").write_text(
        "InvoiceDetailId,InvoiceId,BilledCost,BillingCurrency,ChargeCategory\n"
        "d-1,INV-1,250,USD,Usage\n")
    facts = load(con, folder)
    assert sum(f["EffectiveCost"] for f in facts.values()) == pytest.approx(MAY_TOTAL)
    for dropped, missing in (("ChargePeriodStart", "ChargePeriodStart"),
                             ("EffectiveCost", "EffectiveCost"),
                             ("ChargePeriodStart ChargePeriodEnd",
                              "ChargePeriodStart, ChargePeriodEnd")):
        write_csv(may, ROWS, columns=tuple(c for c in COLUMNS if c not in dropped.split()))
        with pytest.raises(SourceError) as error:
            load(con, folder)
        assert (error.value.where, error.value.problem) == (
            str(may), f"missing FOCUS column(s) {missing}")
    # the month keeps the lines it held
    (total,) = con.execute("SELECT sum(EffectiveCost) FROM billing_facts WHERE month = ?",
                           [MAY]).fetchone()
    assert total == pytest.approx(MAY_TOTAL)


AZURE_COST_DETAILS = (
    "InvoiceSectionName,AccountName,SubscriptionId,ResourceGroup,ResourceLocation,Date,"
    "ProductName,MeterCategory,MeterSubCategory,MeterId,MeterName,UnitOfMeasure,Quantity,"
    "EffectivePrice,CostInBillingCurrency,ConsumedService,ResourceId,Tags,ChargeType,"
    "PricingModel,BillingCurrencyCode,BillingPeriodStartDate,BillingPeriodEndDate\n"
    "sec,acct,0000-1111,ml-rg,eastus,05/03/2026,Virtual Machines NCads A100 v4 Series,"
    "Virtual Machines,NCadsA100v4 Series,abc,NC24ads A100 v4,1 Hour,24,3.67,88.08,"
    "Microsoft.Compute,/subscriptions/0000-1111/resourceGroups/ml-rg/providers/"
    "Microsoft.Compute/virtualMachines/vm-a100,\"\"\"run_id\"\": \"\"r1\"\"\",Usage,OnDemand,"
    "EUR,05/01/2026,05/31/2026\n")


def test_azures_cost_details_are_refused_naming_the_focus_export(con, tmp_path):
    # Azure's cost details (not FOCUS: CostInBillingCurrency, MeterCategory, Date as
    # MM/DD/YYYY) in a `focus` folder were skipped as another FOCUS dataset: the month
    # loaded $0.00, its reconciliation passing
    folder = tmp_path / "focus"
    folder.mkdir()
    details = folder / "detail.csv"
    details.write_text(AZURE_COST_DETAILS, encoding="utf-8")
    (folder / "contract_commitment.csv").write_text(
        "ContractCommitmentId,ContractCommitmentCost,BillingCurrency\nc-1,100,USD\n")
    for path in (folder, details):   # a folder holding it, or the file named
        with pytest.raises(SourceError) as error:
            load(con, path)
        assert (error.value.where, error.value.problem) == (
            str(details), "Azure's cost details, not a FOCUS file: export Cost Management's "
                          "FOCUS cost and usage dataset instead")
    assert con.execute("SELECT count(*) FROM billing_facts").fetchone() == (0,)
    # beside a FOCUS file, other datasets are still skipped
    details.unlink()
    facts = load(con, write_csv(folder / "may.csv", ROWS))
    assert sum(f["EffectiveCost"] for f in facts.values()) == pytest.approx(MAY_TOTAL)


def test_a_parquet_amount_of_a_list_type_is_named_with_its_type(con, tmp_path):
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in ROWS[:2]])
    table = table.set_column(table.schema.get_field_index("BilledCost"), "BilledCost",
                             pa.array([[10.0], [10.0]], pa.list_(pa.float64())))
    path = tmp_path / "p" / "may.parquet"
    path.parent.mkdir()
    pq.write_table(table, path)
    with pytest.raises(SourceError) as error:
        load(con, path)
    assert (error.value.where, error.value.problem) == (
        str(path), "column BilledCost is list<element: double>, expected a number")

def test_a_month_without_rows_is_empty_and_reruns_replace_it(con, tmp_path):
    path = write_csv(tmp_path / "f" / "may.csv", ROWS)
    load(con, path)
    write_csv(path, [r for r in ROWS if r["SkuId"] in ("p4d", "tax")])
    facts = load(con, path)
    assert sorted(facts) == ["p4d", "tax"]


def test_focus_older_column_names_as_oracle_cloud_writes_them(tmp_path, con):
    """Oracle Cloud's FOCUS reports keep FOCUS 0.5 / 1.0-preview names (`Provider`, `Region`,
    `UsageQuantity`, `UsageUnit`) with their `oci_*` columns: the GPU hour lost its hours,
    region and provider (component `other`, 0 billed GPU-hours, reconciliation passing).
    Read as the 1.0 names they became; a file with both spellings reads FOCUS 1.0's."""
    import gzip

    renamed = {"ProviderName": "Provider", "RegionId": "Region",
               "ConsumedQuantity": "UsageQuantity", "ConsumedUnit": "UsageUnit"}
    columns = tuple(renamed.get(c, c) for c in COLUMNS) + (
        "x_InstanceType", "oci_CompartmentId", "oci_ReferenceNumber")
    rows = [{renamed.get(k, k): v for k, v in r.items()} | {"oci_CompartmentId": "ocid1.c"}
            for r in (vm("gpu", "g5.12xlarge", hours=1.0, cost=8.0, ProviderName="Oracle",
                         RegionId="us-ashburn-1"),
                      row("egress", 0.5, ProviderName="Oracle", RegionId="us-ashburn-1",
                          ServiceCategory="Networking", ConsumedQuantity=10.0,
                          ConsumedUnit="GB"))]
    text = tmp_path / "plain.csv"
    write_csv(text, rows, columns=columns)
    path = tmp_path / "FOCUS Reports" / "2026" / "05" / "03" / "0001-00001.csv.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(text.read_bytes()))
    text.unlink()
    facts = load(con, path)
    gpu = facts["gpu"]
    assert (gpu["ProviderName"], gpu["RegionId"], gpu["ConsumedQuantity"], gpu["ConsumedUnit"]) \
        == ("Oracle", "us-ashburn-1", 1.0, "Hours")
    assert (gpu["x_CostComponent"], gpu["x_AcceleratorCount"], gpu["x_UsageHours"]) == (
        "gpu", 4, 1.0)
    assert (facts["egress"]["ConsumedQuantity"], facts["egress"]["ConsumedUnit"]) == (10.0, "GB")
    both = tmp_path / "both" / "focus.csv"
    write_csv(both, [r | {"UsageQuantity": 99.0} for r in ROWS[:1]],
              columns=COLUMNS + ("x_InstanceType", "UsageQuantity"))
    (first,) = load(con, both).values()
    assert first["ConsumedQuantity"] == ROWS[0]["ConsumedQuantity"]


def test_a_currency_code_in_small_letters_is_the_same_currency(tmp_path, con):
    # `inr` beside `INR` refused the month as two currencies ("2024-02 has INR, inr")
    path = write_csv(tmp_path / "focus.csv", [row("a", 84.0, BillingCurrency="INR"),
                                              row("b", 42.0, BillingCurrency=" inr ")])
    facts = load(con, path)
    assert {f["BillingCurrency"] for f in facts.values()} == {"INR"}


# one line of May, as (column, value): `BilledCost` and `EffectiveCost` 1.00
ONE_LINE = (("BillingPeriodStart", "2026-05-01T00:00:00Z"),
            ("ChargePeriodStart", "2026-05-01T10:00:00Z"),
            ("ChargePeriodEnd", "2026-05-01T11:00:00Z"), ("ChargeCategory", "Usage"),
            ("SkuId", "once"), ("ResourceId", "i-1"), ("BilledCost", 1.0),
            ("EffectiveCost", 1.0), ("BillingCurrency", "USD"))


def write_named(path: Path, cells: list[tuple[str, object]]) -> Path:
    """One line whose header is `cells`' names as given, a name written twice included:
    parquet (pyarrow writes such a file), CSV or gzipped CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names, values = [n for n, _ in cells], [v for _, v in cells]
    if path.name.endswith(".parquet"):
        pq.write_table(pa.Table.from_arrays([pa.array([v]) for v in values], names=names), path)
        return path
    text = io.StringIO()
    csv.writer(text).writerows([names, values])
    data = text.getvalue().encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("file", ["m.parquet", "numbered.parquet", "m.csv", "m.csv.gz"])
@pytest.mark.parametrize("twice", ["EffectiveCost", "BilledCost", "BILLEDCOST", "Region"])
def test_a_column_read_named_twice_in_the_header_is_refused(con, tmp_path, file, twice):
    # a parquet file with EffectiveCost twice failed with `'Column EffectiveCost does not
    # exist in schema'`, naming neither source nor file; a CSV with BilledCost twice loaded
    # its first copy's $1.00 with exit 0, whichever copy was meant
    cells = [(twice if c == "BilledCost" and twice == "BILLEDCOST" else c, v)
             for c, v in ONE_LINE]
    cells.append((twice, "eu-west-1" if twice == "Region" else 2.0))
    if twice == "Region":  # FOCUS 1.0-preview's RegionId, read when RegionId is absent
        cells.insert(-1, ("Region", "us-east-1"))
    if file == "numbered.parquet":  # a column of DuckDB's row numbers: streamed by pyarrow
        cells.insert(0, ("file_row_number", 7))
    path = write_named(tmp_path / "exp" / file, cells)
    with pytest.raises(SourceError) as error:
        load(con, tmp_path / "exp")
    assert (error.value.source, error.value.where, error.value.problem) == (
        "focus", str(path), f"column {twice} appears twice in the header: keep one")
    assert str(error.value) == (
        f"focus: {path}: column {twice} appears twice in the header: keep one")


@pytest.mark.parametrize("file", ["m.parquet", "numbered.parquet", "m.csv", "m.csv.gz"])
def test_a_column_never_read_named_twice_is_tolerated(con, tmp_path, file):
    # only the columns the normalization reads are refused twice: a provider's column it
    # never reads, and FOCUS 1.0-preview's Region beside 1.0's RegionId (which is read)
    cells = [*ONE_LINE, ("x_Note", "a"), ("RegionId", "us-east-1"), ("Region", "x"),
             ("x_Note", "b"), ("Region", "y")]
    if file == "numbered.parquet":
        cells.insert(0, ("file_row_number", 7))
    write_named(tmp_path / "exp" / file, cells)
    # another FOCUS dataset's file, skipped, may name a cost column twice too
    (tmp_path / "exp" / "invoice_detail.csv").write_text(
        "InvoiceDetailId,InvoiceId,BilledCost,BillingCurrency,BilledCost\n"
        "d-1,INV-1,250,USD,260\n")
    (line,) = load(con, tmp_path / "exp").values()
    assert (line["BilledCost"], line["EffectiveCost"], line["RegionId"]) == (
        1.0, 1.0, "us-east-1")


@pytest.mark.parametrize(("text", "shared"), [
    ("arn:aws:ec2:us-east-1:111122223333:transit-gateway/tgw-0abc", True),
    ("arn:aws:ec2:us-east-1:111122223333:transit-gateway-attachment/tgw-attach-0abc", True),
    ("arn:aws:ec2:us-east-1:111122223333:vpc-endpoint/vpce-0abc", True),
    ("arn:aws:ec2:us-east-1:111122223333:natgateway/nat-0abc", True),
    ("USE1-TransitGateway-Hours", True), ("Transit Gateway", True), ("vpc_endpoint", True),
    ("NAT-Gateway", True), ("PrivateLink", True), ("Private Endpoint", True),
    ("arn:aws:ec2:us-east-1:111122223333:instance/i-0abc", False),
    ("arn:aws:ec2:us-east-1:111122223333:vpc/vpc-0abc", False), ("transit--gateway", False),
    (None, False)])
def test_a_shared_network_resource_is_named_with_any_separator(text, shared):
    # macros.sql `names_shared_network`: an AWS ARN spells its resource types with a hyphen
    # (`transit-gateway/`, `vpc-endpoint/`), a usage type and a meter run the words together
    # or apart
    from cost_pipeline.warehouse import ensure_schema

    with duckdb.connect() as connection:
        ensure_schema(connection)
        assert connection.execute("SELECT names_shared_network(?)", [text]).fetchone() == (
            shared,)


def test_transit_gateway_and_vpc_endpoint_arns_are_shared(con, tmp_path):
    """A transit gateway's and a VPC endpoint's hour named by their ARNs alone (no resource
    type, a meter that does not say it) are shared network, as a NAT gateway's is: no run can
    own them. `transit ?gateway` and `vpc ?endpoint` missed the ARNs' hyphens: `no_run`."""
    arn = "arn:aws:ec2:us-east-1:111122223333:"
    rows = [row(name, 0.05, ServiceCategory="Networking", ResourceId=f"{arn}{resource}",
                ConsumedQuantity=1.0, ConsumedUnit="Hours")
            for name, resource in (("tgw", "transit-gateway/tgw-0abc"),
                                   ("vpce", "vpc-endpoint/vpce-0abc"),
                                   ("nat", "natgateway/nat-0abc"))]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows))
    assert {sku: (f["x_CostComponent"], f["x_ResourceKind"]) for sku, f in facts.items()} == {
        "tgw": ("network", "shared"), "vpce": ("network", "shared"),
        "nat": ("network", "shared")}
