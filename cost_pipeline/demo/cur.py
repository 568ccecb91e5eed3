"""The demo quarter's AWS bill as an AWS Data Exports CUR 2.0 export (hourly, with resource
ids and the net columns), written as AWS writes it:

  <export>/data/BILLING_PERIOD=YYYY-MM/ml-cur-0000N.snappy.parquet   (2 files a month)
  <export>/metadata/BILLING_PERIOD=YYYY-MM/ml-cur-Manifest.json       (dataFiles: s3:// URIs)

Lines: one per instance-hour (Usage, or SavingsPlanCoveredUsage + SavingsPlanNegation under
the Savings Plan), one per EBS volume-hour, one a day for the checkpoint bucket's storage and
for the NAT gateway, one per hour in which training runs pulled the dataset across regions,
and per month one Tax and one Credit line (plus the Savings Plan's recurring fee). Closed
months carry `bill_invoice_id`; the last month is provisional (NULL).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cost_pipeline.demo import quarter as d
from cost_pipeline.demo.quarter import HOUR, REGION, Resource

EXPORT = "ml-cur"
S3_EXPORT = f"s3://demo-billing/exports/cur/{EXPORT}"
PAYER, ACCOUNT = "999988887777", "111122223333"
FILES_PER_MONTH = 2
DAY = timedelta(days=1)

_TS = pa.timestamp("ms", tz="UTC")
_MAP = pa.map_(pa.string(), pa.string())
_F, _S = pa.float64(), pa.string()
SCHEMA = pa.schema([
    ("bill_bill_type", _S), ("bill_billing_entity", _S),
    ("bill_billing_period_end_date", _TS), ("bill_billing_period_start_date", _TS),
    ("bill_invoice_id", _S), ("bill_invoicing_entity", _S),
    ("bill_payer_account_id", _S), ("bill_payer_account_name", _S),
    ("identity_line_item_id", _S), ("identity_time_interval", _S),
    ("line_item_availability_zone", _S), ("line_item_blended_cost", _F),
    ("line_item_blended_rate", _S), ("line_item_currency_code", _S),
    ("line_item_legal_entity", _S), ("line_item_line_item_description", _S),
    ("line_item_line_item_type", _S), ("line_item_net_unblended_cost", _F),
    ("line_item_net_unblended_rate", _S), ("line_item_operation", _S),
    ("line_item_product_code", _S), ("line_item_resource_id", _S),
    ("line_item_unblended_cost", _F), ("line_item_unblended_rate", _S),
    ("line_item_usage_account_id", _S), ("line_item_usage_account_name", _S),
    ("line_item_usage_amount", _F), ("line_item_usage_end_date", _TS),
    ("line_item_usage_start_date", _TS), ("line_item_usage_type", _S),
    ("pricing_public_on_demand_cost", _F), ("pricing_public_on_demand_rate", _S),
    ("pricing_term", _S), ("pricing_unit", _S), ("product", _MAP),
    ("product_instance_type", _S), ("product_product_family", _S),
    ("product_region_code", _S), ("product_servicecode", _S), ("product_sku", _S),
    ("reservation_effective_cost", _F), ("reservation_net_effective_cost", _F),
    ("reservation_net_unused_amortized_upfront_fee_for_billing_period", _F),
    ("reservation_net_unused_recurring_fee", _F), ("reservation_reservation_a_r_n", _S),
    ("reservation_unused_amortized_upfront_fee_for_billing_period", _F),
    ("reservation_unused_recurring_fee", _F), ("resource_tags", _MAP),
    ("savings_plan_net_savings_plan_effective_cost", _F),
    ("savings_plan_savings_plan_a_r_n", _S), ("savings_plan_savings_plan_effective_cost", _F),
    ("savings_plan_savings_plan_rate", _F), ("savings_plan_total_commitment_to_date", _F),
    ("savings_plan_used_commitment", _F),
])


def _month_bounds(at: datetime) -> tuple[datetime, datetime]:
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


def _month_hours(at: datetime) -> float:
    start, end = _month_bounds(at)
    return (end - start) / HOUR


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


class Bill:
    """The quarter's lines, grouped by billing period (the month of the usage start)."""

    def __init__(self) -> None:
        self.months: dict[str, list[dict]] = {m: [] for m in d.MONTHS}

    def add(self, t0: datetime, t1: datetime, line_type: str, cost: float, **cols) -> None:
        month = f"{t0:%Y-%m}"
        m0, m1 = _month_bounds(t0)
        interval = f"{_stamp(t0)}/{_stamp(t1)}"
        key = "|".join((line_type, str(cols.get("line_item_resource_id")),
                        str(cols.get("line_item_usage_type")), interval))
        digest = base64.b32encode(hashlib.sha256(key.encode()).digest()).decode().lower()
        row = dict.fromkeys(SCHEMA.names)
        row.update(
            bill_bill_type="Anniversary", bill_billing_entity="AWS",
            bill_billing_period_start_date=m0, bill_billing_period_end_date=m1,
            bill_invoice_id=None if month == d.MONTHS[-1] else f"{month.replace('-', '')}0417",
            bill_invoicing_entity="Amazon Web Services, Inc.", bill_payer_account_id=PAYER,
            bill_payer_account_name="demo-payer", identity_line_item_id=digest[:52],
            identity_time_interval=interval, line_item_currency_code="USD",
            line_item_legal_entity="Amazon Web Services, Inc.", line_item_line_item_type=line_type,
            line_item_usage_account_id=ACCOUNT, line_item_usage_account_name="ml-training",
            line_item_usage_start_date=t0, line_item_usage_end_date=t1,
            line_item_unblended_cost=cost, line_item_net_unblended_cost=cost,
            line_item_blended_cost=cost, product={}, resource_tags={},
        )
        row.update(cols)
        if row["pricing_public_on_demand_cost"] is None:
            # the line at the public on-demand price: usage at on-demand rates is its own
            # cost; a negation, fee, tax or credit has none
            row["pricing_public_on_demand_cost"] = cost if line_type == "Usage" else 0.0
        row["line_item_net_unblended_rate"] = row["line_item_blended_rate"] = \
            row["line_item_unblended_rate"]
        self.months[month].append(row)


def _instance_lines(bill: Bill, r: Resource) -> None:
    it = r.itype
    product = {"product_name": "Amazon Elastic Compute Cloud", "instance_type": it.name,
               "vcpu": str(it.vcpu), "memory": it.memory, "operating_system": "Linux",
               "tenancy": "Shared", "region": REGION}
    if it.gpus:
        product["gpu"] = str(it.gpus)
    common = dict(
        line_item_product_code="AmazonEC2", line_item_usage_type=it.usage_type,
        line_item_operation="RunInstances", line_item_availability_zone=d.AZ,
        line_item_resource_id=r.rid, product_instance_type=it.name,
        product_product_family="Compute Instance", product_region_code=REGION,
        product_servicecode="AmazonEC2", product_sku=it.sku, product=product,
        pricing_unit="Hrs", pricing_public_on_demand_rate=f"{it.on_demand_rate or it.rate}",
        line_item_unblended_rate=f"{it.rate}", resource_tags=r.tags,
    )
    for h in range(r.hours):
        t0 = r.start + h * HOUR
        covered = r.covered.get(h, 0.0)
        if covered:
            sp = dict(savings_plan_savings_plan_a_r_n=d.SP_ARN, line_item_usage_amount=covered)
            bill.add(t0, t0 + HOUR, "SavingsPlanCoveredUsage", it.rate * covered, **common, **sp,
                     pricing_term="OnDemand", pricing_public_on_demand_cost=it.rate * covered,
                     savings_plan_savings_plan_rate=d.SP_RATE,
                     savings_plan_savings_plan_effective_cost=d.SP_RATE * covered,
                     savings_plan_net_savings_plan_effective_cost=d.SP_RATE * covered,
                     line_item_line_item_description=f"{it.name} hour covered by Savings Plan "
                     f"{d.SP_ARN.rsplit('/', 1)[1]}")
            bill.add(t0, t0 + HOUR, "SavingsPlanNegation", -it.rate * covered, **common, **sp,
                     line_item_line_item_description="SavingsPlanNegation used by AccountId : "
                     f"{ACCOUNT} and UsageSku : {it.sku}")
        if covered < 1.0:
            amount = round(1.0 - covered, 10)
            # a spot hour: billed at the spot price, listed at the public on-demand one
            spot = it.on_demand_rate is not None
            bill.add(t0, t0 + HOUR, "Usage", it.rate * amount, **common,
                     line_item_usage_amount=amount, pricing_term="Spot" if spot else "OnDemand",
                     pricing_public_on_demand_cost=(it.on_demand_rate or it.rate) * amount,
                     line_item_line_item_description=f"${it.rate} per "
                     f"{'Spot' if spot else 'On Demand'} Linux {it.name} Instance Hour")


def _volume_lines(bill: Bill, r: Resource) -> None:
    for h in range(r.hours):
        t0 = r.start + h * HOUR
        amount = d.EBS_GB / _month_hours(t0)
        bill.add(t0, t0 + HOUR, "Usage", amount * d.EBS_RATE,
                 line_item_product_code="AmazonEC2", line_item_usage_type="EBS:VolumeUsage.gp3",
                 line_item_operation="CreateVolume-Gp3", line_item_availability_zone=d.AZ,
                 line_item_resource_id=r.rid, line_item_usage_amount=amount,
                 line_item_unblended_rate=f"{d.EBS_RATE}", product_product_family="Storage",
                 product_region_code=REGION, product_servicecode="AmazonEC2",
                 product_sku="7WPHVCWQ6RN7GKYV", pricing_unit="GB-Mo", pricing_term="OnDemand",
                 product={"product_name": "Amazon Elastic Compute Cloud",
                          "volume_api_name": "gp3", "storage_media": "SSD-backed"},
                 line_item_line_item_description=f"${d.EBS_RATE} per GB-month of General "
                 "Purpose (gp3) provisioned storage - US East (Northern Virginia)",
                 resource_tags=r.tags)


def _bucket_byte_hours(objects: list[d.Obj]) -> dict[datetime, float]:
    """Byte-hours stored in the checkpoint bucket on each day of the quarter."""
    days = {d.QUARTER_START + i * DAY: 0.0
            for i in range((d.QUARTER_END - d.QUARTER_START) // DAY)}
    for o in objects:
        start = max(o.created, d.QUARTER_START)
        end = min(o.deleted or d.QUARTER_END, d.QUARTER_END)
        day = start.replace(hour=0, minute=0, second=0)
        while day < end:
            hours = (min(end, day + DAY) - max(start, day)) / HOUR
            days[day] += o.size * hours
            day += DAY
    return days


def _daily_lines(bill: Bill, objects: list[d.Obj]) -> None:
    for day, byte_hours in _bucket_byte_hours(objects).items():
        gb_months = byte_hours / d.GIB / _month_hours(day)
        bill.add(day, day + DAY, "Usage", gb_months * d.S3_RATE,
                 line_item_product_code="AmazonS3",
                 line_item_usage_type="USE1-TimedStorage-ByteHrs",
                 line_item_operation="StandardStorage", line_item_resource_id=d.CKPT_BUCKET,
                 line_item_usage_amount=gb_months, line_item_unblended_rate=f"{d.S3_RATE}",
                 product_product_family="Storage", product_region_code=REGION,
                 product_servicecode="AmazonS3", product_sku="WP9ANXZGBYYSGJEA",
                 pricing_unit="GB-Mo", pricing_term="OnDemand",
                 product={"product_name": "Amazon Simple Storage Service",
                          "storage_class": "General Purpose", "volume_type": "Standard"},
                 line_item_line_item_description=f"${d.S3_RATE} per GB - first 50 TB / month "
                 "of storage used")
        bill.add(day, day + DAY, "Usage", 24 * d.NAT_RATE,
                 line_item_product_code="AmazonEC2", line_item_usage_type="NatGateway-Hours",
                 line_item_operation="NatGateway", line_item_resource_id=d.NAT_ID,
                 line_item_usage_amount=24.0, line_item_unblended_rate=f"{d.NAT_RATE}",
                 product_product_family="NAT Gateway", product_region_code=REGION,
                 product_servicecode="AmazonEC2", product_sku="M2YSHUBETB3JX4M4",
                 pricing_unit="Hrs", pricing_term="OnDemand",
                 product={"product_name": "Amazon Elastic Compute Cloud",
                          "group": "NGW:NatGateway"},
                 line_item_line_item_description=f"${d.NAT_RATE} per NAT Gateway Hour")


def _transfer_lines(bill: Bill, pulls: list[datetime]) -> None:
    """Cross-region reads are billed on the source bucket, in the hour they happen."""
    for hour, runs in sorted(Counter(pulls).items()):
        gb = d.PULL_GB * runs
        bill.add(hour, hour + HOUR, "Usage", gb * d.TRANSFER_RATE,
                 line_item_product_code="AmazonS3", line_item_usage_type="USW2-USE1-AWS-Out-Bytes",
                 line_item_operation="GetObject", line_item_resource_id=d.DATASET_BUCKET,
                 line_item_usage_amount=gb, line_item_unblended_rate=f"{d.TRANSFER_RATE}",
                 product_product_family="Data Transfer", product_region_code=d.DATASET_REGION,
                 product_servicecode="AWSDataTransfer", product_sku="HQEH3ZWJVT46JHRG",
                 pricing_unit="GB", pricing_term="OnDemand",
                 product={"product_name": "AWS Data Transfer", "transfer_type":
                          "InterRegion Outbound", "from_location": "US West (Oregon)",
                          "to_location": "US East (N. Virginia)"},
                 line_item_line_item_description=f"${d.TRANSFER_RATE} per GB - US West (Oregon) "
                 "data transfer to US East (Northern Virginia)")


def _month_lines(bill: Bill) -> None:
    """Per month: the Savings Plan's recurring fee (when it covered usage), Tax, Credit."""
    for rows in bill.months.values():
        m0, m1 = _month_bounds(rows[0]["line_item_usage_start_date"])
        used = sum(r["savings_plan_savings_plan_effective_cost"] or 0.0 for r in rows
                   if r["line_item_line_item_type"] == "SavingsPlanCoveredUsage")
        if used:
            total = used + d.SP_UNUSED
            hours = _month_hours(m0)
            bill.add(m0, m1, "SavingsPlanRecurringFee", total,
                     line_item_product_code="ComputeSavingsPlans",
                     line_item_usage_type="ComputeSP:1yrNoUpfront",
                     line_item_resource_id=d.SP_ARN, line_item_usage_amount=hours,
                     line_item_unblended_rate=f"{total / hours:.6f}", pricing_unit="Hrs",
                     savings_plan_savings_plan_a_r_n=d.SP_ARN,
                     savings_plan_total_commitment_to_date=total,
                     savings_plan_used_commitment=used,
                     line_item_line_item_description="1 year No Upfront Compute Savings Plan")
        net = sum(r["line_item_unblended_cost"] for r in rows)
        bill.add(m0, m1, "Tax", round(net * d.TAX_RATE, 2), line_item_product_code="AmazonEC2",
                 line_item_line_item_description="Tax for product code AmazonEC2")
        bill.add(m0, m1, "Credit", -d.CREDIT, line_item_product_code="AmazonEC2",
                 line_item_line_item_description="AWS Promotional Credit - ML Accelerate")


def build_bill(plan: d.Plan) -> Bill:
    bill = Bill()
    for r in plan.resources:
        (_instance_lines if r.itype else _volume_lines)(bill, r)
    _daily_lines(bill, plan.objects)
    _transfer_lines(bill, plan.pulls)
    _month_lines(bill)
    return bill


def _table(rows: list[dict]) -> pa.Table:
    cols = {name: [r[name] for r in rows] for name in SCHEMA.names}
    for name in ("product", "resource_tags"):
        cols[name] = [sorted(v.items()) for v in cols[name]]
    return pa.table(cols, schema=SCHEMA)


def write_export(plan: d.Plan, export_dir: Path) -> None:
    """The export folder: per month FILES_PER_MONTH parquet files and the manifest."""
    bill = build_bill(plan)
    for month, rows in bill.months.items():
        rows.sort(key=lambda r: (r["line_item_usage_start_date"], r["line_item_line_item_type"],
                                 r["line_item_resource_id"] or "", r["identity_line_item_id"]))
        part = f"BILLING_PERIOD={month}"
        data_dir = export_dir / "data" / part
        data_dir.mkdir(parents=True, exist_ok=True)
        size = -(-len(rows) // FILES_PER_MONTH)
        uris = []
        for i in range(FILES_PER_MONTH):
            name = f"{EXPORT}-{i + 1:05d}.snappy.parquet"
            pq.write_table(_table(rows[i * size:(i + 1) * size]), data_dir / name,
                           compression="snappy")
            uris.append(f"{S3_EXPORT}/data/{part}/{name}")
        meta_dir = export_dir / "metadata" / part
        meta_dir.mkdir(parents=True, exist_ok=True)
        manifest = {
            "executionId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{S3_EXPORT}/{month}")),
            "exportArn": f"arn:aws:bcm-data-exports:us-east-1:{PAYER}:export/{EXPORT}-"
                         "8c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8",
            "exportName": EXPORT,
            "billingPeriod": month,
            "tableConfigurations": {"COST_AND_USAGE_REPORT": {
                "TIME_GRANULARITY": "HOURLY", "INCLUDE_RESOURCES": "TRUE",
                "INCLUDE_SPLIT_COST_ALLOCATION_DATA": "FALSE",
                "INCLUDE_MANUAL_DISCOUNT_COMPATIBILITY": "FALSE"}},
            "dataFiles": uris,
        }
        (meta_dir / f"{EXPORT}-Manifest.json").write_text(
            json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
