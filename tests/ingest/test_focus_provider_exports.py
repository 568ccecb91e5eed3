"""The providers' own FOCUS exports keep their GPUs (issue 15.5, issue 16.2): the instance
type is read from every column AWS, Azure and GCP put it in, on rows spelled as their exports
spell them, and the FinOps Foundation's FOCUS 1.0 sample (AWS g5/g3 rows named only in
ChargeDescription) gets its GPU-hours."""

from __future__ import annotations

import csv
import json
import logging
from datetime import date
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import build_billing_facts

MAY = date(2026, 5, 1)
LOG = logging.getLogger("test")
COLUMNS = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "ProviderName",
           "ServiceName", "ServiceCategory", "ChargeCategory", "ChargeDescription",
           "ResourceId", "ResourceType", "SkuId", "SkuPriceDetails", "ConsumedQuantity",
           "ConsumedUnit", "BilledCost", "EffectiveCost", "BillingCurrency", "Tags",
           "x_UsageType", "x_SkuMeterName", "x_SkuMeterCategory", "x_SkuDetails",
           "x_AcceleratorCount", "x_InstanceType", "x_CostComponent")


def line(sku: str, **cols) -> dict:
    """One hour of Compute usage on 2026-05-03; `sku` is its SkuId."""
    return {"BillingPeriodStart": "2026-05-01T00:00:00Z",
            "ChargePeriodStart": "2026-05-03T10:00:00Z",
            "ChargePeriodEnd": "2026-05-03T11:00:00Z", "ChargeCategory": "Usage",
            "ServiceCategory": "Compute", "SkuId": sku, "ResourceId": f"res-{sku}",
            "ConsumedQuantity": 1.0, "ConsumedUnit": "Hours", "BilledCost": 3.0,
            "EffectiveCost": 3.0, "BillingCurrency": "USD", **cols}


AWS = {"ProviderName": "AWS", "ServiceName": "Amazon Elastic Compute Cloud"}
AZURE = {"ProviderName": "Microsoft", "ServiceName": "Virtual Machines",
         "x_SkuMeterCategory": "Virtual Machines", "ResourceType": "Virtual machine",
         "ConsumedUnit": "1 Hour"}
GCP = {"ProviderName": "Google Cloud", "ServiceName": "Compute Engine",
       "ResourceType": "compute.googleapis.com/Instance"}
TPU = {**GCP, "ServiceName": "Cloud TPU", "ResourceType": "tpu.googleapis.com/Node"}

# SkuId: (row, component, G, x_UsageHours)
CASES = {
    # AWS Data Exports "FOCUS 1.2 with AWS columns": the type only in x_UsageType
    "aws-box-g5": (line("aws-box-g5", **AWS, x_UsageType="USE1-BoxUsage:g5.4xlarge"),
                   "gpu", 1, 1.0),
    "aws-spot-g5": (line("aws-spot-g5", **AWS, x_UsageType="USE1-SpotUsage:g5.12xlarge"),
                    "gpu", 4, 1.0),
    "aws-box-m5": (line("aws-box-m5", **AWS, x_UsageType="USE1-BoxUsage:m5.xlarge"),
                   "cpu", 0, 1.0),
    "aws-sagemaker": (line("aws-sagemaker", ProviderName="AWS", ServiceName="Amazon SageMaker",
                           ServiceCategory="AI and Machine Learning",
                           x_UsageType="USE1-Train:ml.p4d.24xlarge"), "gpu", 8, 1.0),
    # … or in SkuPriceDetails, whatever the key's case
    "aws-details": (line("aws-details", **AWS, SkuPriceDetails=json.dumps(
        {"x_InstanceType": "g6.12xlarge", "x_OperatingSystem": "Linux"})), "gpu", 4, 1.0),
    "aws-details-lower": (line("aws-details-lower", **AWS, SkuPriceDetails=json.dumps(
        {"instanceType": "p5.48xlarge"})), "gpu", 8, 1.0),
    # the FinOps Foundation FOCUS 1.0 sample: the type only in ChargeDescription
    "sample-g5": (line("sample-g5", **AWS, ConsumedUnit="Hrs", ResourceType="",
                       ChargeDescription="$1.006 per On Demand Linux g5.xlarge Instance Hour"),
                  "gpu", 1, 1.0),
    "sample-g3": (line("sample-g3", **AWS, ConsumedQuantity=2.0, ConsumedUnit="Hrs",
                       ChargeDescription="$2.28 per On Demand Linux g3.8xlarge Instance Hour"),
                  "gpu", 2, 2.0),
    "sample-t3": (line("sample-t3", **AWS, ConsumedUnit="Hrs",
                       ChargeDescription="$0.0104 per On Demand Linux t3.micro Instance Hour"),
                  "cpu", 0, 1.0),
    # Azure's FOCUS export: the meter name, or the meter's details
    "azure-meter": (line("azure-meter", **AZURE, x_SkuMeterName="NC24ads A100 v4"),
                    "gpu", 1, 1.0),
    "azure-meter-spot": (line("azure-meter-spot", **AZURE, x_SkuMeterName="ND96asr v4 Spot"),
                         "gpu", 8, 1.0),
    "azure-details": (line("azure-details", **AZURE, x_SkuMeterName="", x_SkuDetails=json.dumps(
        {"ServiceType": "Standard_NC12s_v3", "VCPUs": 12, "UsageType": "ComputeHR"})),
                      "gpu", 2, 1.0),
    "azure-d4": (line("azure-d4", **AZURE, x_SkuMeterName="D4s v5"), "cpu", 0, 1.0),
    # a confidential H100 VM (NCC, was read as cpu) and an ND GB200 v6 (four GPUs)
    "azure-ncc": (line("azure-ncc", **AZURE, x_SkuMeterName="NCC40ads H100 v5"),
                  "gpu", 1, 1.0),
    "azure-gb200": (line("azure-gb200", **AZURE, x_SkuMeterName="ND128isr NDR GB200 v6"),
                    "gpu", 4, 1.0),
    # GCP: the machine type in the `machine_spec` system label; the GPU SKU is metered in
    # GPU-seconds over all the VM's GPUs (8 × 3600 s = one hour of the VM), the core SKU in
    # vCPU-seconds: an accelerator VM's hours are its GPU lines' (tests/ingest/
    # test_focus_gcp_view.py), a plain VM's its vCPU-hours ÷ its vCPUs
    "gcp-core": (line("gcp-core", **GCP, ChargeDescription="A2 Instance Core running in Americas",
                      ConsumedQuantity=96 * 3600.0, ConsumedUnit="seconds",
                      Tags=json.dumps({"compute.googleapis.com/machine_spec": "a2-highgpu-8g"})),
                 "gpu", 8, None),
    "gcp-n2": (line("gcp-n2", **GCP, ChargeDescription="N2 Instance Core running in Americas",
                    ConsumedQuantity=8 * 3600.0, ConsumedUnit="seconds",
                    Tags=json.dumps({"compute.googleapis.com/machine_spec": "n2-standard-8",
                                     "compute.googleapis.com/cores": "8"})), "cpu", 0, 1.0),
    "gcp-gpu": (line("gcp-gpu", **GCP,
                     ChargeDescription="Nvidia Tesla A100 GPU running in Americas",
                     ConsumedQuantity=28800.0, ConsumedUnit="Seconds",
                     Tags=json.dumps({"compute.googleapis.com/machine_spec": "a2-highgpu-8g"})),
                "gpu", 8, 1.0),
    "gcp-g2": (line("gcp-g2", **GCP, ChargeDescription="G2 Instance Core running in Americas",
                    ConsumedQuantity=24 * 3600.0, ConsumedUnit="seconds",
                    SkuPriceDetails=json.dumps({"MachineType": "g2-standard-24"})),
               "gpu", 2, None),
    # a TPU slice: chip-seconds over the slice, G = its chips (v4-32: 32 TensorCores, 16 chips)
    "gcp-tpu-v5e": (line("gcp-tpu-v5e", **TPU,
                         ChargeDescription="TPU v5e chip running in Americas",
                         ConsumedQuantity=8 * 3600.0, ConsumedUnit="Seconds",
                         Tags=json.dumps({"tpu.googleapis.com/accelerator_type": "v5litepod-8"})),
                    "gpu", 8, 1.0),
    "gcp-tpu-v4": (line("gcp-tpu-v4", **TPU,
                        ChargeDescription="TPU v4 chip running in Americas",
                        ConsumedQuantity=8.0, ConsumedUnit="Hours",
                        Tags=json.dumps({"accelerator_type": "v4-32"})), "gpu", 16, 0.5),
    # a training job of 2 instances bills 2 instance-hours an hour (SPEC §5): its hours are
    # per instance and its G both instances' GPUs, its half last hour (2 × 30 min) included
    **{sku: (line(sku, ProviderName="AWS", ServiceName="Amazon SageMaker",
                  ServiceCategory="AI and Machine Learning",
                  x_UsageType="USE1-Train:ml.p4d.24xlarge",
                  ResourceId="arn:aws:sagemaker:us-east-1:123456789012:training-job/two",
                  ConsumedQuantity=amount, **period), "gpu", 16, amount / 2)
       for sku, amount, period in (
           ("aws-sagemaker-2x", 2.0, {}),
           ("aws-sagemaker-2x-last", 1.0, {"ChargePeriodStart": "2026-05-03T11:00:00Z",
                                           "ChargePeriodEnd": "2026-05-03T12:00:00Z"}))},
    # the same job's hour billed as a savings-plan row and an on-demand row of 1.0 instance-
    # hour each: still 2 instances (the most one row showed, 1.0, read as 1: G 8, 1 h a row)
    **{sku: (line(sku, ProviderName="AWS", ServiceName="Amazon SageMaker",
                  ServiceCategory="AI and Machine Learning",
                  x_UsageType="USE1-Train:ml.p4d.24xlarge",
                  ResourceId="arn:aws:sagemaker:us-east-1:123456789012:training-job/split",
                  ConsumedQuantity=1.0), "gpu", 16, 0.5)
       for sku in ("aws-sagemaker-split-sp", "aws-sagemaker-split-od")},
    # a file giving the job's accelerators itself (x_AcceleratorCount: the resource's, all
    # its instances'): its count is kept, the hours still per instance
    "aws-sagemaker-2x-given": (line("aws-sagemaker-2x-given", ProviderName="AWS",
                                    ServiceName="Amazon SageMaker",
                                    ServiceCategory="AI and Machine Learning",
                                    x_UsageType="USE1-Train:ml.p4d.24xlarge",
                                    ResourceId="arn:aws:sagemaker:us-east-1:123456789012:"
                                               "training-job/given",
                                    ConsumedQuantity=2.0, x_AcceleratorCount=16),
                               "gpu", 16, 1.0),
    # an AWS instance-hour whose description names the word GPU (as this product's FOCUS
    # export described its gpu lines): an instance's hour, not GPU-seconds over its 8 GPUs
    # (it read 1 h ÷ 8, so a run's half hour claimed the whole line)
    "aws-described-gpu": (line("aws-described-gpu", **AWS, x_InstanceType="p4d.24xlarge",
                               ChargeDescription="Usage of gpu in Amazon Elastic Compute "
                                                 "Cloud (p4d.24xlarge)",
                               x_CostComponent="gpu", x_AcceleratorCount=8),
                          "gpu", 8, 1.0),
    # not instance usage: a training job's ML storage volume, billed under the job's ARN as
    # `Train:VolumeUsage.gp2` (SPEC §5: only `Train:ml.<type>` is a training job's instances):
    # in GB-Mo as AWS meters it, and in a time unit, where the volume was read as the job's
    # instance-hours (type `VolumeUsage.gp2`, 1.344086 h): storage, as the CUR reader reads it
    **{sku: (line(sku, ProviderName="AWS", ServiceName="Amazon SageMaker",
                  ServiceCategory="AI and Machine Learning",
                  x_UsageType="USE1-Train:VolumeUsage.gp2",
                  ResourceId="arn:aws:sagemaker:us-east-1:123456789012:training-job/two",
                  ConsumedQuantity=1.344086, ConsumedUnit=unit, BilledCost=0.188172,
                  EffectiveCost=0.188172), "storage", 0, None)
       for sku, unit in (("aws-sagemaker-volume", "GB-Mo"),
                         ("aws-sagemaker-volume-hours", "Hrs"))},
    # not instance usage: a data-transfer usage type names no instance
    "aws-transfer": (line("aws-transfer", **AWS, ServiceCategory="Networking",
                          x_UsageType="USE1-DataTransfer-Out-Bytes", ConsumedUnit="GB"),
                     "network", 0, None),
}


def write_csv(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def facts(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("focus")
    path = write_csv(folder / "export.csv", [case[0] for case in CASES.values()])
    cfg = parse_config({"billing": [{"kind": "focus", "path": str(path), "name": "focus"}]},
                       folder)
    con = duckdb.connect()
    build_billing_facts(con, cfg, MAY, LOG)
    cursor = con.execute("SELECT SkuId, x_CostComponent, x_AcceleratorCount, x_UsageHours "
                         "FROM billing_facts WHERE month = ?", [MAY])
    rows = {r[0]: r[1:] for r in cursor.fetchall()}
    con.close()
    return rows


@pytest.mark.parametrize("sku", sorted(CASES))
def test_the_instance_type_is_read_where_the_export_puts_it(facts, sku):
    _row, component, accelerators, hours = CASES[sku]
    got_component, got_accelerators, got_hours = facts[sku]
    assert (got_component, got_accelerators) == (component, accelerators)
    assert got_hours == (pytest.approx(hours) if hours is not None else None)


def test_gpu_hours_of_the_aws_sample_rows(facts):
    gpu_hours = sum(g * h for c, g, h in facts.values() if c == "gpu" and h is not None)
    expected = sum(case[2] * case[3] for case in CASES.values()
                   if case[1] == "gpu" and case[3] is not None)
    assert gpu_hours == pytest.approx(expected)
    assert facts["sample-g5"][0] == "gpu" and facts["sample-g3"][1] * facts["sample-g3"][2] == 4


SAMPLE = Path(__file__).parent / "data" / "focus-1.0-sample-aws-instances.csv"


def test_the_finops_foundation_focus_1_0_sample_gets_its_gpu_hours(tmp_path):
    """The public FOCUS 1.0 sample: its g5/g3 rows are gpu lines with their GPU-hours (the
    type is only in ChargeDescription), the other instance rows cpu."""
    with SAMPLE.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    gpu_hours = sum(float(r["ConsumedQuantity"]) for r in rows
                    if " g5." in r["ChargeDescription"] or " g3." in r["ChargeDescription"])
    cpu_rows = sum(1 for r in rows if "Instance Hour" in r["ChargeDescription"]
                   and " g5." not in r["ChargeDescription"]
                   and " g3." not in r["ChargeDescription"])
    assert gpu_hours > 7 and cpu_rows > 10
    cfg = parse_config({"billing": [{"kind": "focus", "path": str(SAMPLE), "name": "sample"}]},
                       tmp_path)
    with duckdb.connect() as con:
        summary = build_billing_facts(con, cfg, date(2024, 9, 1), LOG)
        got = con.execute(
            "SELECT sum(x_UsageHours * x_AcceleratorCount) FILTER (WHERE x_CostComponent = "
            "'gpu'), count(*) FILTER (WHERE x_CostComponent = 'cpu' AND x_InstanceUsage), "
            "list(DISTINCT x_InstanceType ORDER BY x_InstanceType) FILTER (WHERE "
            "x_CostComponent = 'gpu') FROM billing_facts").fetchall()[0]
    assert got[0] == pytest.approx(gpu_hours) and got[1] == cpu_rows
    assert got[2] == ["g3.4xlarge", "g5.4xlarge"]
    assert summary.rows == len(rows) and summary.unknown_instance_types == []
