"""CUR 2.0 → billing_facts (SPEC §5) and the aws_cur2 source's outcomes on bad or restated
input (SPEC §3, §11). Every expected value below is computed by hand from the lines written.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, date, datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.ingest.sources import SourceError
from tests.support.cur_rows import (
    EXPORT,
    HOUR,
    S3_EXPORT,
    T0,
    build,
    config,
    facts,
    line,
    month_dir,
    write_export,
    write_manifest,
    write_parquet,
)

JULY = date(2026, 7, 1)
SP_ARN = "arn:aws:savingsplans::999988887777:savingsplan/0a1b2c3d"
RI_ARN = "arn:aws:ec2:us-east-1:999988887777:reserved-instances/5e6f7a8b"
NAT = "arn:aws:ec2:us-east-1:111122223333:natgateway/nat-0abc"
JOB = "arn:aws:sagemaker:us-east-1:111122223333:training-job/churn-hpo-001"
NET_COLUMNS = (
    "line_item_net_unblended_cost", "reservation_net_effective_cost",
    "reservation_net_unused_amortized_upfront_fee_for_billing_period",
    "reservation_net_unused_recurring_fee", "savings_plan_net_savings_plan_effective_cost",
)


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def L(name: str, cost: float = 1.0, **cols) -> dict:
    """A line whose identity_line_item_id is `name` (the key of `facts`)."""
    return line(cost, **{"identity_line_item_id": name, **cols})


def gpu_box(name: str, usage_type: str, cost: float = 10.0, **cols) -> dict:
    return L(name, cost, line_item_usage_type=usage_type, line_item_resource_id=f"i-{name}",
             **cols)


# ------------------------------------------------------------------ 1. normalization

def bill_lines() -> list[dict]:
    june = datetime(2026, 6, 15, tzinfo=UTC)
    sp = dict(savings_plan_savings_plan_a_r_n=SP_ARN, line_item_usage_type="BoxUsage:p3.2xlarge",
              product_instance_type="p3.2xlarge", line_item_resource_id="i-0sp")
    return [
        # Savings Plans: covered usage at the net SP rate, else the gross one; negation 0
        L("sp_cov", 3.06, line_item_line_item_type="SavingsPlanCoveredUsage", **sp,
          savings_plan_savings_plan_effective_cost=2.0,
          savings_plan_net_savings_plan_effective_cost=1.8),
        L("sp_cov_gross", 3.06, start=T0 + HOUR, line_item_line_item_type="SavingsPlanCoveredUsage",
          **sp, savings_plan_savings_plan_effective_cost=2.5,
          savings_plan_net_savings_plan_effective_cost=None),
        L("sp_neg", -3.06, line_item_line_item_type="SavingsPlanNegation", **sp),
        L("sp_fee", 100.0, hours=744, line_item_line_item_type="SavingsPlanRecurringFee",
          line_item_resource_id=SP_ARN, line_item_product_code="ComputeSavingsPlans",
          line_item_usage_type="ComputeSP:1yrNoUpfront", line_item_usage_amount=1.0,
          savings_plan_total_commitment_to_date=100.0, savings_plan_used_commitment=62.5),
        L("sp_upfront", 1000.0, hours=744, line_item_line_item_type="SavingsPlanUpfrontFee",
          line_item_resource_id=SP_ARN, line_item_product_code="ComputeSavingsPlans",
          line_item_usage_type="ComputeSP:1yrAllUpfront"),
        # Reserved Instances
        L("ri_used", 0.0, line_item_line_item_type="DiscountedUsage",
          line_item_usage_type="USE1-BoxUsage:m5.large", line_item_resource_id="i-0ri",
          reservation_reservation_a_r_n=RI_ARN, reservation_effective_cost=0.06,
          reservation_net_effective_cost=0.05),
        L("ri_used_gross", 0.0, start=T0 + HOUR, line_item_line_item_type="DiscountedUsage",
          line_item_usage_type="USE1-BoxUsage:m5.large", line_item_resource_id="i-0ri",
          reservation_reservation_a_r_n=RI_ARN, reservation_effective_cost=0.06,
          reservation_net_effective_cost=None),
        L("ri_fee", 43.8, hours=744, line_item_line_item_type="RIFee",
          line_item_usage_type="HeavyUsage:m5.large", line_item_resource_id=RI_ARN,
          reservation_reservation_a_r_n=RI_ARN,
          reservation_net_unused_amortized_upfront_fee_for_billing_period=5.0,
          reservation_net_unused_recurring_fee=2.5,
          reservation_unused_amortized_upfront_fee_for_billing_period=6.0,
          reservation_unused_recurring_fee=3.0),
        L("ri_fee_gross", 20.0, hours=744, line_item_line_item_type="RIFee",
          line_item_usage_type="HeavyUsage:m5.xlarge", line_item_resource_id=RI_ARN + "x",
          reservation_reservation_a_r_n=RI_ARN + "x",
          reservation_unused_amortized_upfront_fee_for_billing_period=4.0,
          reservation_unused_recurring_fee=1.0),
        L("ri_upfront", 500.0, hours=744, line_item_line_item_type="Fee",
          line_item_usage_type="HeavyUsage:m5.large", line_item_resource_id=RI_ARN,
          reservation_reservation_a_r_n=RI_ARN),
        L("support", 29.0, hours=744, line_item_line_item_type="Fee",
          line_item_product_code="AWSSupportBusiness", line_item_usage_type="Dollar",
          line_item_resource_id=None),
        # discounts, tax, credits, refunds
        L("edp", -5.0, net=0.0, hours=744, line_item_line_item_type="EdpDiscount",
          line_item_resource_id=None, line_item_usage_type="BoxUsage:m5.large"),
        L("tax", 12.34, hours=744, line_item_line_item_type="Tax", line_item_resource_id=None,
          line_item_usage_type="Tax"),
        L("credit", -20.0, hours=744, line_item_line_item_type="Credit",
          line_item_resource_id=None, line_item_usage_type="Credit"),
        L("refund_old", -3.0, start=june, line_item_line_item_type="Refund"),
        L("refund_now", -1.0, start=T0 + 24 * HOUR, line_item_line_item_type="Refund"),
        gpu_box("refund_gpu", "USE1-BoxUsage:g5.xlarge", -5.0,
                line_item_line_item_type="Refund"),  # a refunded GPU hour: gpu, G as its type's
        # a refund of a reservation's or savings plan's fee is a purchase, of a tax a tax
        L("refund_ri_fee", -300.0, hours=744, line_item_line_item_type="Refund",
          line_item_usage_type="USE1-HeavyUsage:g5.xlarge", line_item_resource_id=RI_ARN,
          reservation_reservation_a_r_n=RI_ARN),
        L("refund_sp_fee", -50.0, hours=744, line_item_line_item_type="Refund",
          line_item_product_code="ComputeSavingsPlans", line_item_resource_id=SP_ARN,
          line_item_usage_type="ComputeSP:1yrNoUpfront"),
        L("refund_tax", -2.0, hours=744, line_item_line_item_type="Refund",
          line_item_resource_id=None, line_item_usage_type="", line_item_tax_type="USSalesTax"),
        # instance usage of every kind, accelerator counts
        L("box", 0.096, product_instance_type="m5.large"),
        L("neg_usage", -0.048, line_item_usage_amount=-0.5),
        gpu_box("spot_p4d", "USW2-SpotUsage:p4d.24xlarge", 5.0, line_item_usage_amount=0.5),
        L("host", 6.5, line_item_usage_type="HostUsage:mac1.metal", line_item_resource_id="h-0m"),
        gpu_box("trn2", "USE1-BoxUsage:trn2.48xlarge"),
        gpu_box("inf2", "BoxUsage:inf2.48xlarge"),
        gpu_box("g6e", "BoxUsage:g6e.12xlarge"),
        gpu_box("gpu_attr", "BoxUsage:x9g.8xlarge", product={"gpu": "2"}),
        gpu_box("p9", "BoxUsage:p9.48xlarge"),
        L("sm_train", 3.825, line_item_product_code="AmazonSageMaker",
          line_item_usage_type="USE1-Train:ml.p3.2xlarge", line_item_resource_id=JOB,
          product_instance_type="ml.p3.2xlarge", product_servicecode="AmazonSageMaker"),
        L("sm_train_2x", 14.0, line_item_product_code="AmazonSageMaker",
          line_item_usage_type="USE1-Train:ml.g5.12xlarge", line_item_resource_id=JOB + "-b",
          line_item_usage_amount=2.0),
        # storage and network
        L("ebs", 0.011, line_item_usage_type="EBS:VolumeUsage.gp3",
          line_item_resource_id="vol-0abc", line_item_usage_amount=0.137,
          product_product_family="Storage", pricing_unit="GB-Mo"),
        L("s3_storage", 0.5, hours=24, line_item_product_code="AmazonS3",
          line_item_usage_type="USE1-TimedStorage-ByteHrs", line_item_resource_id="ml-ckpt",
          product_product_family="Storage", line_item_usage_amount=21.7),
        L("s3_xregion", 0.2, line_item_product_code="AmazonS3",
          line_item_usage_type="USW2-USE1-AWS-Out-Bytes", line_item_resource_id="ml-datasets",
          product_product_family="Data Transfer", line_item_usage_amount=10.0),
        L("nat", 0.045, line_item_usage_type="USE1-NatGateway-Hours",
          line_item_resource_id=NAT, product_product_family="NAT Gateway"),
    ]


# (ChargeCategory, ChargeClass, EffectiveCost, BilledCost, CommitmentDiscountStatus)
EXPECTED_COSTS = {
    "sp_cov": ("Usage", None, 1.8, 3.06, "Used"),
    "sp_cov_gross": ("Usage", None, 2.5, 3.06, "Used"),
    "sp_neg": ("Usage", None, 0.0, -3.06, None),
    "sp_fee": ("Purchase", None, 37.5, 100.0, "Unused"),          # 100 − 62.5
    "sp_upfront": ("Purchase", None, 0.0, 1000.0, None),
    "ri_used": ("Usage", None, 0.05, 0.0, "Used"),
    "ri_used_gross": ("Usage", None, 0.06, 0.0, "Used"),
    "ri_fee": ("Purchase", None, 7.5, 43.8, "Unused"),             # 5.0 + 2.5 (net)
    "ri_fee_gross": ("Purchase", None, 5.0, 20.0, "Unused"),       # 4.0 + 1.0 (gross)
    "ri_upfront": ("Purchase", None, 0.0, 500.0, None),
    "support": ("Purchase", None, 29.0, 29.0, None),
    "edp": ("Adjustment", None, 0.0, 0.0, None),
    "tax": ("Tax", None, 12.34, 12.34, None),
    "credit": ("Credit", None, -20.0, -20.0, None),
    "refund_old": ("Usage", "Correction", -3.0, -3.0, None),
    "refund_now": ("Usage", None, -1.0, -1.0, None),
    "refund_gpu": ("Usage", None, -5.0, -5.0, None),
    "refund_ri_fee": ("Purchase", None, -300.0, -300.0, None),
    "refund_sp_fee": ("Purchase", None, -50.0, -50.0, None),
    "refund_tax": ("Tax", None, -2.0, -2.0, None),
    "box": ("Usage", None, 0.096, 0.096, None),
    "neg_usage": ("Usage", None, -0.048, -0.048, None),
    "spot_p4d": ("Usage", None, 5.0, 5.0, None),
    "host": ("Usage", None, 6.5, 6.5, None),
    "trn2": ("Usage", None, 10.0, 10.0, None),
    "inf2": ("Usage", None, 10.0, 10.0, None),
    "g6e": ("Usage", None, 10.0, 10.0, None),
    "gpu_attr": ("Usage", None, 10.0, 10.0, None),
    "p9": ("Usage", None, 10.0, 10.0, None),
    "sm_train": ("Usage", None, 3.825, 3.825, None),
    "sm_train_2x": ("Usage", None, 14.0, 14.0, None),
    "ebs": ("Usage", None, 0.011, 0.011, None),
    "s3_storage": ("Usage", None, 0.5, 0.5, None),
    "s3_xregion": ("Usage", None, 0.2, 0.2, None),
    "nat": ("Usage", None, 0.045, 0.045, None),
}

# (x_CostComponent, x_AcceleratorCount, x_UsageHours, x_InstanceType, x_ResourceKind)
EXPECTED_USAGE = {
    "sp_cov": ("gpu", 1, 1.0, "p3.2xlarge", "instance"),
    "sp_neg": ("gpu", 1, None, "p3.2xlarge", "instance"),  # a negation carries no hours
    "refund_gpu": ("gpu", 1, None, "g5.xlarge", "instance"),  # nor does a refund
    "ri_used": ("cpu", 0, 1.0, "m5.large", "instance"),
    "box": ("cpu", 0, 1.0, "m5.large", "instance"),
    "neg_usage": ("cpu", 0, -0.5, "m5.large", "instance"),
    "spot_p4d": ("gpu", 8, 0.5, "p4d.24xlarge", "instance"),
    "host": ("cpu", 0, 1.0, "mac1.metal", "instance"),
    "trn2": ("gpu", 16, 1.0, "trn2.48xlarge", "instance"),
    "inf2": ("gpu", 12, 1.0, "inf2.48xlarge", "instance"),
    "g6e": ("gpu", 4, 1.0, "g6e.12xlarge", "instance"),
    "gpu_attr": ("gpu", 2, 1.0, "x9g.8xlarge", "instance"),  # the product's gpu attribute
    "p9": ("gpu", 1, 1.0, "p9.48xlarge", "instance"),        # unknown: counted as 1
    "sm_train": ("gpu", 1, 1.0, "p3.2xlarge", "instance"),
    # 2 instance-hours in one hour: a 2-instance job → 1 h of a resource with 2 × 4 GPUs
    "sm_train_2x": ("gpu", 8, 1.0, "g5.12xlarge", "instance"),
    "ebs": ("storage", 0, None, None, "volume"),
    "s3_storage": ("storage", 0, None, None, "bucket"),
    "s3_xregion": ("network", 0, None, None, "bucket"),
    "nat": ("network", 0, None, None, "shared"),
    "sp_fee": ("other", 0, None, None, "other"),
    "tax": ("other", 0, None, None, "shared"),
}


@pytest.fixture
def normalized(tmp_path, con, caplog):
    export = write_export(tmp_path, {"part-00001.snappy.parquet": bill_lines()})
    with caplog.at_level(logging.WARNING, logger="test"):
        summary = build(con, config(tmp_path, export))
    return summary, facts(con), caplog.text


def test_effective_billed_cost_and_charge_category(normalized):
    summary, rows, _ = normalized
    assert set(rows) == set(EXPECTED_COSTS)
    for name, (category, charge_class, effective, billed, status) in EXPECTED_COSTS.items():
        row = rows[name]
        got = (row["ChargeCategory"], row["ChargeClass"], row["EffectiveCost"],
               row["BilledCost"], row["CommitmentDiscountStatus"])
        assert got[:2] == (category, charge_class), name
        assert got[2] == pytest.approx(effective, abs=1e-12), name
        assert got[3] == pytest.approx(billed, abs=1e-12), name
        assert got[4] == status, name
    assert summary.rows == len(EXPECTED_COSTS)
    assert summary.total_effective_cost == pytest.approx(
        sum(v[2] for v in EXPECTED_COSTS.values()))
    assert summary.total_billed_cost == pytest.approx(sum(v[3] for v in EXPECTED_COSTS.values()))
    assert summary.currency == "USD" and summary.duplicates_dropped == 0


def test_components_hours_and_accelerators(normalized):
    _, rows, _ = normalized
    for name, expected in EXPECTED_USAGE.items():
        row = rows[name]
        got = (row["x_CostComponent"], row["x_AcceleratorCount"], row["x_UsageHours"],
               row["x_InstanceType"], row["x_ResourceKind"])
        assert got == expected, name
    assert rows["sp_neg"]["x_InstanceUsage"] and not rows["ebs"]["x_InstanceUsage"]
    # a refund of instance usage is that usage's component and kind, without hours of its
    # own (they would double the hours the instance ran): it was `other`
    for refund in ("refund_old", "refund_now"):
        assert rows[refund]["x_InstanceUsage"], refund
        assert (rows[refund]["x_CostComponent"], rows[refund]["x_UsageHours"],
                rows[refund]["x_ResourceKind"]) == ("cpu", None, "instance"), refund


def test_columns_of_a_line(normalized):
    _, rows, _ = normalized
    box = rows["box"]
    assert box["month"] == JULY
    assert box["BillingPeriodStart"] == datetime(2026, 7, 1)
    assert (box["ChargePeriodStart"], box["ChargePeriodEnd"]) == (datetime(2026, 7, 1),
                                                                  datetime(2026, 7, 1, 1))
    assert box["ProviderName"] == "AWS" and box["ResourceId"] == "i-0aaa"
    assert box["RegionId"] == "us-east-1" and box["SkuId"] == "SKU1"
    assert (box["ConsumedQuantity"], box["ConsumedUnit"]) == (1.0, "Hrs")
    assert box["BillingCurrency"] == "USD" and box["x_LineItemType"] == "Usage"
    assert box["x_SourceLine"] == "aws_cur2:box:2026-07-01T00:00:00Z/2026-07-01T01:00:00Z"
    assert rows["sm_train"]["ResourceId"] == JOB
    assert rows["support"]["ResourceId"] is None and rows["support"]["x_InvoiceId"] is None
    # negative usage keeps its sign in the quantity too
    assert rows["neg_usage"]["ConsumedQuantity"] == -0.5


def test_unknown_accelerator_type_is_counted_once_and_reported(normalized):
    summary, _, log = normalized
    assert summary.unknown_instance_types == ["p9.48xlarge"]  # not x9g: its product says 2
    assert "p9.48xlarge" in log and "accelerators" in log


def test_config_accelerators_extend_and_override(tmp_path, con):
    export = write_export(tmp_path, {"a.parquet": [
        gpu_box("p9", "BoxUsage:p9.48xlarge"),
        gpu_box("g6e", "BoxUsage:g6e.12xlarge"),
        L("sm", 2.0, line_item_product_code="AmazonSageMaker",
          line_item_usage_type="USE1-Train:ml.g6e.12xlarge", line_item_resource_id=JOB),
    ]})
    cfg = config(tmp_path, export, accelerators={"p9.48xlarge": 16, "ml.g6e.12xlarge": 5})
    summary = build(con, cfg)
    rows = facts(con)
    assert rows["p9"]["x_AcceleratorCount"] == 16
    assert rows["g6e"]["x_AcceleratorCount"] == 5       # the config overrides the built-in 4
    assert rows["sm"]["x_AcceleratorCount"] == 5        # `ml.` stripped on both sides
    assert summary.unknown_instance_types == []


def test_retired_g2_instances_count_their_gpus(tmp_path, con):
    # g2.2xlarge (1 GRID K520) and g2.8xlarge (4) were missing from the table: 1 each,
    # listed as unknown
    export = write_export(tmp_path, {"a.parquet": [
        gpu_box("g2_2x", "BoxUsage:g2.2xlarge"),
        gpu_box("g2_8x", "BoxUsage:g2.8xlarge"),
    ]})
    summary = build(con, config(tmp_path, export))
    rows = facts(con)
    assert {name: (rows[name]["x_CostComponent"], rows[name]["x_AcceleratorCount"])
            for name in ("g2_2x", "g2_8x")} == {"g2_2x": ("gpu", 1), "g2_8x": ("gpu", 4)}
    assert summary.unknown_instance_types == []


def test_config_accelerators_in_other_letters_override_the_types(tmp_path, con):
    # a config key is a type in any case: `G5.12XLARGE` is the built-in g5.12xlarge (4), and
    # `ML.P9.48XLarge` the p9.48xlarge the bill names
    export = write_export(tmp_path, {"a.parquet": [
        gpu_box("g5", "BoxUsage:g5.12xlarge"),
        gpu_box("p9", "BoxUsage:p9.48xlarge"),
    ]})
    cfg = config(tmp_path, export, accelerators={"G5.12XLARGE": 2, "ML.P9.48XLarge": 16})
    summary = build(con, cfg)
    rows = facts(con)
    assert (rows["g5"]["x_AcceleratorCount"], rows["p9"]["x_AcceleratorCount"]) == (2, 16)
    assert summary.unknown_instance_types == []


def test_discount_rows_without_net_columns_are_adjustments(tmp_path, con):
    export = write_export(tmp_path, {"a.parquet": [
        L("use", 10.0),
        L("edp", -1.5, hours=744, line_item_line_item_type="EdpDiscount",
          line_item_resource_id=None),
        L("prd", -0.5, hours=744, line_item_line_item_type="PrivateRateDiscount",
          line_item_resource_id=None),
        L("sp_cov", 3.06, line_item_line_item_type="SavingsPlanCoveredUsage",
          savings_plan_savings_plan_effective_cost=2.0),
    ]}, drop=NET_COLUMNS)
    summary = build(con, config(tmp_path, export))
    rows = facts(con)
    assert (rows["edp"]["ChargeCategory"], rows["edp"]["EffectiveCost"],
            rows["edp"]["BilledCost"]) == ("Adjustment", -1.5, -1.5)
    assert rows["prd"]["EffectiveCost"] == -0.5
    assert (rows["use"]["EffectiveCost"], rows["use"]["BilledCost"]) == (10.0, 10.0)
    assert rows["sp_cov"]["EffectiveCost"] == 2.0 and rows["sp_cov"]["BilledCost"] == 3.06
    assert summary.total_effective_cost == pytest.approx(10.0 - 1.5 - 0.5 + 2.0)
    assert summary.total_billed_cost == pytest.approx(10.0 - 1.5 - 0.5 + 3.06)


def test_net_columns_without_values_count_as_absent(tmp_path, con):
    # the columns exist but carry nothing: the discount must still reach the totals
    export = write_export(tmp_path, {"a.parquet": [
        L("use", 10.0, net=None),
        L("edp", -1.5, net=None, hours=744, line_item_line_item_type="EdpDiscount",
          line_item_resource_id=None),
    ]})
    summary = build(con, config(tmp_path, export))
    assert facts(con)["edp"]["EffectiveCost"] == -1.5
    assert summary.total_effective_cost == pytest.approx(8.5)
    assert summary.total_billed_cost == pytest.approx(8.5)


COMMITMENT_LINES = {
    "SavingsPlanCoveredUsage": dict(savings_plan_savings_plan_a_r_n=SP_ARN,
                                    line_item_usage_type="BoxUsage:p3.2xlarge",
                                    savings_plan_savings_plan_effective_cost=2.0),
    "DiscountedUsage": dict(reservation_reservation_a_r_n=RI_ARN, reservation_effective_cost=0.06),
    "SavingsPlanRecurringFee": dict(line_item_resource_id=SP_ARN,
                                    line_item_usage_type="ComputeSP:1yrNoUpfront",
                                    savings_plan_total_commitment_to_date=100.0,
                                    savings_plan_used_commitment=62.5),
    "RIFee": dict(line_item_resource_id=RI_ARN, line_item_usage_type="HeavyUsage:m5.large",
                  reservation_unused_amortized_upfront_fee_for_billing_period=4.0,
                  reservation_unused_recurring_fee=1.0),
}


@pytest.mark.parametrize("kind", sorted(COMMITMENT_LINES))
def test_a_commitment_line_without_its_figures_is_refused(tmp_path, con, kind):
    # an export whose query left out the savings plan / reservation columns: read as 0, the
    # covered usage was free and the unused commitment gone, silently
    fields = COMMITMENT_LINES[kind]
    figures = [c for c in fields if c.startswith(("savings_plan_", "reservation_"))
               and not c.endswith("_a_r_n")]
    net = [c.replace("savings_plan_savings_plan", "savings_plan_net_savings_plan")
           .replace("reservation_", "reservation_net_") for c in figures]
    lines = [L("use", 10.0), L("commit", 3.0, line_item_line_item_type=kind, **fields)]
    export = write_export(tmp_path / "absent", {"a.parquet": lines}, drop=(*figures, *net))
    with pytest.raises(SourceError, match=rf"a.parquet row 2: a {kind} line without "
                                          r".*the export has no such column"):
        build(con, config(tmp_path, export))
    # the columns there, empty on the line: named as empty
    empty = [L("commit", 3.0, line_item_line_item_type=kind,
               **{**fields, **dict.fromkeys(figures)})]
    export = write_export(tmp_path / "empty", {"a.parquet": empty})
    with pytest.raises(SourceError, match=rf"row 1: a {kind} line without .*empty on this line"):
        build(con, config(tmp_path, export))
    # with its figures the line reads (and an empty net column falls back to the gross one)
    export = write_export(tmp_path / "whole", {"a.parquet": lines})
    assert build(con, config(tmp_path, export)).rows == 2


# ------------------------------------------------------------------ 2. source-level outcomes

def _total(con, month: str = "2026-07-01") -> tuple[int, float]:
    n, total = con.execute("SELECT count(*), coalesce(sum(EffectiveCost), 0) FROM billing_facts "
                           "WHERE month = ?", [month]).fetchone()
    return n, round(total, 9)


def test_manifest_lists_the_month_stale_files_are_ignored(tmp_path, con):
    export = write_export(tmp_path, {"cur-00001.snappy.parquet": [L("a", 1.0)],
                                     "cur-00002.snappy.parquet": [L("b", 2.0)]})
    write_parquet(month_dir(export) / "old-00001.snappy.parquet", [L("stale", 100.0)])
    summary = build(con, config(tmp_path, export))
    assert _total(con) == (2, 3.0)
    assert summary.deliveries[0].manifest.endswith(f"{EXPORT}-Manifest.json")


def test_local_copy_in_a_folder_of_another_name(tmp_path, con):
    export = write_export(tmp_path, {"cur-00001.snappy.parquet": [L("a", 1.0)]})
    copy = export.rename(tmp_path / "my-local-copy")
    build(con, config(tmp_path, copy))
    assert _total(con) == (1, 1.0)


def test_without_manifest_every_parquet_below_the_month(tmp_path, con):
    export = write_export(tmp_path, {"a.parquet": [L("a", 1.0)]}, manifest=False)
    write_parquet(month_dir(export) / "20260702T0000Z" / "b.parquet", [L("b", 2.0)])
    write_parquet(month_dir(export, month="2026-08") / "c.parquet", [L("c", 4.0)])
    build(con, config(tmp_path, export))
    assert _total(con) == (2, 3.0)


def test_manifest_listing_a_missing_file(tmp_path, con):
    export = write_export(tmp_path, {"a.parquet": [L("a", 1.0)]})
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/a.parquet",
                            f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/gone-00002.parquet"])
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "aws_cur2" in str(err.value) and "gone-00002.parquet" in str(err.value)
    assert "Manifest.json" in str(err.value)


def test_a_new_delivery_replaces_the_month(tmp_path, con):
    export = write_export(tmp_path, {"d1-00001.parquet": [L("a", 1.0), L("b", 2.0)]})
    cfg = config(tmp_path, export)
    build(con, cfg)
    assert _total(con) == (2, 3.0)
    # AWS restates the month: new files, the manifest now lists only them
    write_parquet(month_dir(export) / "d2-00001.parquet", [L("a", 1.5), L("b", 2.0),
                                                           L("c", 0.25)])
    manifest = write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/"
                                       "d2-00001.parquet"])
    later = manifest.stat().st_mtime + 10
    os.utime(manifest, (later, later))
    build(con, cfg)
    assert _total(con) == (3, 3.75)
    # and a re-run on the same delivery is idempotent
    build(con, cfg)
    assert _total(con) == (3, 3.75)


def test_rerun_after_files_change_without_manifest(tmp_path, con):
    export = write_export(tmp_path, {"a.parquet": [L("a", 1.0), L("b", 2.0)]}, manifest=False)
    cfg = config(tmp_path, export)
    build(con, cfg)
    write_parquet(month_dir(export) / "a.parquet", [L("a", 1.0), L("b", 5.0)])
    build(con, cfg)
    assert _total(con) == (2, 6.0)


def test_identical_duplicates_are_dropped_and_counted(tmp_path, con, caplog):
    a, b = L("a", 1.0), L("b", 2.0)
    export = write_export(tmp_path, {"x.parquet": [a, b, dict(a)],
                                     "y.parquet": [dict(b), dict(a)]})
    with caplog.at_level(logging.WARNING, logger="test"):
        summary = build(con, config(tmp_path, export))
    assert summary.duplicates_dropped == 3
    assert _total(con) == (2, 3.0)
    assert "3 identical duplicate" in caplog.text


def test_same_line_id_in_another_hour_is_not_a_duplicate(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0), L("a", 1.0, start=T0 + HOUR)]})
    summary = build(con, config(tmp_path, export))
    assert summary.duplicates_dropped == 0 and _total(con) == (2, 2.0)


def test_conflicting_duplicates_are_an_error(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0)],
                                     "y.parquet": [L("b", 1.0), L("a", 1.25)]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    message = str(err.value)
    assert "aws_cur2" in message and "x.parquet" in message and "y.parquet" in message
    assert "line a:2026-07-01T00:00:00Z/2026-07-01T01:00:00Z" in message
    assert "conflicting" in message and "\n" not in message
    assert "BilledCost, EffectiveCost differ" in message  # the values that differ, named


@pytest.mark.parametrize(("field", "one", "other"), [
    ("resource_tags", {"user_run_id": "r1"}, {"user_run_id": "r2"}),
    ("line_item_usage_type", "BoxUsage:p4d.24xlarge", "BoxUsage:m5.large")])
def test_copies_differing_only_in_tags_or_instance_are_conflicting(tmp_path, con, field, one,
                                                                    other):
    # they were dropped as identical duplicates: the run a line's tag names, or the GPUs its
    # usage type gives, depended on which file sorted first
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0, **{field: one})],
                                     "y.parquet": [L("a", 1.0, **{field: other})]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "conflicting duplicate line id" in str(err.value)
    assert ("Tags" if field == "resource_tags" else "x_InstanceType") in str(err.value)


def test_mixed_currencies_are_an_error(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a"), L("b")],
                                     "y.parquet": [L("c"), L("d", line_item_currency_code="EUR")]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    message = str(err.value)
    assert message.startswith("aws_cur2: ") and "y.parquet row 2" in message
    assert "EUR" in message and "USD" in message and "currency" in message


@pytest.mark.parametrize("empty", [None, "", " "])
def test_an_empty_currency_beside_a_named_one_is_refused_as_empty(tmp_path, con, empty):
    # it read as USD: "row 2: line_item_currency_code USD differs from EUR"
    export = write_export(tmp_path, {"x.parquet": [
        L("a", line_item_currency_code="EUR"), L("b", line_item_currency_code=empty),
        L("c", line_item_currency_code="EUR")]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert (err.value.where, err.value.problem) == (
        str(month_dir(export) / "x.parquet") + " row 2", "line_item_currency_code is empty")


def test_a_bill_naming_no_currency_is_in_dollars(tmp_path, con):
    for name, drop in (("empty", ()), ("absent", ("line_item_currency_code",))):
        export = write_export(tmp_path / name, {"x.parquet": [
            L("a", 2.5, line_item_currency_code=None), L("b", 1.5, line_item_currency_code="")]},
            drop=drop)
        summary = build(con, config(tmp_path / name, export))
        assert summary.currency == "USD"
        assert {f["BillingCurrency"] for f in facts(con).values()} == {"USD"}
        assert sum(f["BilledCost"] for f in facts(con).values()) == 4.0


@pytest.mark.parametrize("net", [None, 3.0])
def test_a_line_without_its_unblended_cost_is_refused(tmp_path, con, net):
    # with no net cost either it loaded as $0.00: the gross cost is on every CUR line (0 on a
    # covered or split row), so an empty one is a broken export, as an empty FOCUS cost is
    export = write_export(tmp_path, {"x.parquet": [
        L("a", 3.0), L("b", None, net=net), L("c", 3.0)]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert (err.value.where, err.value.problem) == (
        str(month_dir(export) / "x.parquet") + " row 2", "line_item_unblended_cost is empty")
    assert con.execute("SELECT count(*) FROM billing_facts").fetchone() == (0,)


def test_the_first_of_a_bad_amount_and_an_empty_currency_is_named(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [
        L("a", line_item_currency_code="EUR"), L("b", line_item_currency_code="EUR"),
        L("c", float("inf"), line_item_currency_code="EUR"),
        L("d", line_item_currency_code=None)]})
    with pytest.raises(SourceError, match=r"x\.parquet row 3: line_item_unblended_cost is inf"):
        build(con, config(tmp_path, export))
    export = write_export(tmp_path / "later", {"x.parquet": [
        L("a", line_item_currency_code="EUR"), L("b", line_item_currency_code=None),
        L("c", None, line_item_currency_code="EUR")]})
    with pytest.raises(SourceError, match=r"x\.parquet row 2: line_item_currency_code is empty"):
        build(con, config(tmp_path / "later", export))

def test_missing_resource_ids_says_how_to_fix_the_export(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a")]}, drop=("line_item_resource_id",))
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "x.parquet" in str(err.value) and "INCLUDE_RESOURCES" in str(err.value)


def test_a_file_of_another_schema_is_refused_as_no_cur_file(tmp_path, con):
    # a FOCUS file listed beside the month's CUR file was refused as an export created
    # without resource IDs, to be recreated with 'Include resource IDs'
    export = write_export(tmp_path, {"x.parquet": [L("a")]}, manifest=False)
    focus = pa.table({"BilledCost": [1.5], "EffectiveCost": [1.5],
                      "ChargePeriodStart": [T0], "ResourceId": ["i-0a"]})
    pq.write_table(focus, month_dir(export) / "focus.parquet")
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("x.parquet", "focus.parquet")])
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert (err.value.where, err.value.problem) == (
        str(month_dir(export) / "focus.parquet"),
        "not a CUR 2.0 data file: none of its columns (BilledCost, EffectiveCost, "
        "ChargePeriodStart, ResourceId) is one of CUR 2.0's (identity_line_item_id, "
        "line_item_unblended_cost, line_item_usage_start_date, …); they are FOCUS columns: "
        "read FOCUS files with a billing source of kind: focus")
    # any other schema: its first five columns named
    pq.write_table(pa.table({name: [1] for name in "abcdefg"}),
                   month_dir(export) / "focus.parquet")
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert err.value.problem == (
        "not a CUR 2.0 data file: none of its columns (a, b, c, d, e, …) is one of CUR 2.0's "
        "(identity_line_item_id, line_item_unblended_cost, line_item_usage_start_date, …)")
    # a CUR 2.0 file lacking only line_item_resource_id: an export without resource IDs
    write_parquet(month_dir(export) / "focus.parquet", [L("b")],
                  drop=("line_item_resource_id",))
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert err.value.problem == (
        "the export has no line_item_resource_id column: it was created without resource "
        "IDs. Recreate the Data Export (CUR 2.0) with 'Include resource IDs' "
        "(INCLUDE_RESOURCES) and hourly time granularity")


def test_manifest_of_an_export_without_resources_or_not_hourly(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a")]},
                          table_config={"INCLUDE_RESOURCES": "FALSE"})
    with pytest.raises(SourceError, match="INCLUDE_RESOURCES"):
        build(con, config(tmp_path, export))
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/x.parquet"],
                   table_config={"TIME_GRANULARITY": "DAILY"})
    with pytest.raises(SourceError, match="DAILY.*HOURLY"):
        build(con, config(tmp_path, export))


def test_daily_export_is_refused(tmp_path, con):
    day = timedelta(days=1)
    export = write_export(tmp_path, {"x.parquet": [
        L("a", 2.3, hours=24, line_item_usage_amount=24.0),
        L("b", 2.3, hours=24, start=T0 + day, line_item_usage_amount=24.0),
        L("s3", 0.5, hours=24, line_item_product_code="AmazonS3",
          line_item_usage_type="USE1-TimedStorage-ByteHrs", line_item_resource_id="b"),
    ]}, manifest=False)
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "aws_cur2" in str(err.value) and "hourly" in str(err.value).lower()
    assert "TIME_GRANULARITY HOURLY" in str(err.value)


def test_truncated_parquet_file_is_named(tmp_path, con):
    export = write_export(tmp_path, {"good.parquet": [L("a")], "bad.parquet": [L("b")]})
    bad = month_dir(export) / "bad.parquet"
    bad.write_bytes(bad.read_bytes()[:-40])
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert str(bad) in str(err.value) and "good.parquet" not in str(err.value)


def test_corrupted_data_pages_name_the_file(tmp_path, con):
    rows = [L(f"r{i}", i * 0.37, product_sku=f"SKU-{i:06d}") for i in range(500)]
    export = write_export(tmp_path, {"good.parquet": [L("a")], "bad.parquet": rows})
    bad = month_dir(export) / "bad.parquet"
    # the footer stays intact (the schema check passes); a column's pages are garbage
    meta = pq.ParquetFile(bad).metadata.row_group(0)
    chunk = next(meta.column(i) for i in range(meta.num_columns)
                 if meta.column(i).path_in_schema == "line_item_usage_start_date")
    data = bytearray(bad.read_bytes())
    begin = chunk.dictionary_page_offset or chunk.data_page_offset
    for i in range(begin, begin + chunk.total_compressed_size):
        data[i] = (data[i] * 7 + 13) % 256
    bad.write_bytes(bytes(data))
    pq.read_schema(bad)
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert str(bad) in str(err.value) and "good.parquet" not in str(err.value)


def test_wrong_column_type_is_named(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a", line_item_unblended_cost=[1.0])]},
                          types={"line_item_unblended_cost": pa.list_(pa.float64())})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "x.parquet: column line_item_unblended_cost is list<element: double>, expected a " \
           "number" in str(err.value)


AMOUNT_COLUMNS = ("line_item_unblended_cost", "line_item_net_unblended_cost",
                  "line_item_usage_amount", "savings_plan_savings_plan_effective_cost")


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(),
                                  pa.dictionary(pa.int32(), pa.string())])
def test_amounts_held_as_text_are_the_numbers_they_spell(tmp_path, con, kind):
    # a CSV export converted to parquet with every column a string (pandas' dtype=str,
    # a category): an amount reads as the number its text spells, empty text as no value;
    # another file of the month holds the same columns as numbers
    text = [L("t1", 2.5, net=" 2.25 ", line_item_usage_amount="1"),
            L("t2", 3.0, start=T0 + HOUR, net="", line_item_usage_amount="0.5E0"),
            L("t3", 0.0, start=T0 + 2 * HOUR, net="1e-3", line_item_usage_amount="null",
              line_item_line_item_type="SavingsPlanCoveredUsage",
              savings_plan_savings_plan_effective_cost="0.125")]
    for row in text:
        row["line_item_unblended_cost"] = str(row["line_item_unblended_cost"])
    export = write_export(tmp_path, {"text.parquet": text},
                          types=dict.fromkeys(AMOUNT_COLUMNS, kind))
    data = month_dir(export)
    write_parquet(data / "numbers.parquet", [L("n1", 4.0, start=T0 + 3 * HOUR)])
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("text.parquet", "numbers.parquet")])
    build(con, config(tmp_path, export))
    got = {k: (v["BilledCost"], v["EffectiveCost"], v["ConsumedQuantity"])
           for k, v in facts(con).items()}
    assert got == {"t1": (2.25, 2.25, 1.0), "t2": (3.0, 3.0, 0.5), "t3": (1e-3, 0.125, None),
                   "n1": (4.0, 4.0, 1.0)}


def test_an_engine_error_beside_amounts_held_as_text_names_no_sound_file(tmp_path, con):
    # an engine error naming no file makes the reader look for the file DuckDB cannot take
    # by reading each alone: a file holding the amounts as numbers, beside one holding them
    # as text, is read as sound there
    from cost_pipeline.ingest.sources import cur2

    export = write_export(tmp_path, {"text.parquet": [L("t1", net="2.25")]},
                          types={"line_item_net_unblended_cost": pa.string()})
    write_parquet(month_dir(export) / "numbers.parquet", [L("n1", 4.0)])
    delivery = cur2.find_delivery("aws_cur2", str(export), JULY)
    delivery.files.append(str(month_dir(export) / "numbers.parquet"))
    cur2.inspect_schema(delivery)
    assert delivery.text_amounts == {"line_item_net_unblended_cost"}
    assert cur2.locate_bad_file(delivery, "Conversion Error: an error naming no file") is None


@pytest.mark.parametrize(("text", "message"), [
    ("1,234.50", "column line_item_unblended_cost is text that is not a number: '1,234.50'"),
    ("$3", "column line_item_unblended_cost is text that is not a number: '$3'"),
    ("12 USD", "column line_item_unblended_cost is text that is not a number: '12 USD'"),
    (" NaN", "line_item_unblended_cost is nan: a cost or quantity must be a finite number"),
    ("-inf", "line_item_unblended_cost is -inf: a cost or quantity must be a finite number")])
def test_an_amount_whose_text_spells_no_number_names_the_row(tmp_path, con, text, message):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0), L("b", 1.0)]},
                          types={"line_item_unblended_cost": pa.string()})
    table = pq.read_table(month_dir(export) / "x.parquet")
    index = table.schema.get_field_index("line_item_unblended_cost")
    pq.write_table(table.set_column(index, "line_item_unblended_cost", pa.array(["1", text])),
                   month_dir(export) / "x.parquet")
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert f"x.parquet row 2: {message}" in str(err.value)


def test_missing_required_column(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a")]}, drop=("line_item_usage_type",))
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "x.parquet" in str(err.value) and "line_item_usage_type" in str(err.value)


@pytest.mark.parametrize("column", ["line_item_usage_start_date", "line_item_usage_end_date",
                                    "identity_line_item_id"])
def test_an_empty_required_value_names_the_row(tmp_path, con, column):
    export = write_export(tmp_path, {"x.parquet": [L("a"), L("b", **{column: None})]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "x.parquet row 2" in str(err.value) and f"{column} is empty" in str(err.value)


def test_end_before_start_names_the_row(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [
        L("a"), L("b", line_item_usage_end_date=T0 - HOUR)]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "x.parquet row 2" in str(err.value) and "line_item_usage_end_date" in str(err.value)


def test_export_folder_not_found(tmp_path, con):
    with pytest.raises(SourceError, match="aws_cur2: .*nowhere: export folder not found"):
        build(con, config(tmp_path, tmp_path / "nowhere"))


def test_text_timestamps_with_offsets_are_utc(tmp_path, con):
    # ISO 8601, and with a blank before the offset as Snowflake writes a TIMESTAMP_TZ by
    # default (`… 00:00:00.000 +0000`; refused as no timestamp before)
    export = write_export(tmp_path, {"x.parquet": [
        L("a", line_item_usage_start_date="2026-07-01T02:00:00+02:00",
          line_item_usage_end_date="2026-07-01T01:00:00Z"),
        L("b", line_item_usage_start_date="2026-06-30 17:00:00.000 -0700",
          line_item_usage_end_date="2026-07-01 01:00:00 Z"),
        L("c", line_item_usage_start_date="2026-07-01 05:30:00 +05:30",
          line_item_usage_end_date="2026-07-01 01:00:00.000 +0000"),
    ]}, types={"line_item_usage_start_date": pa.string(), "line_item_usage_end_date": pa.string()})
    build(con, config(tmp_path, export))
    for line_id in "abc":
        row = facts(con)[line_id]
        assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == (datetime(2026, 7, 1),
                                                                      datetime(2026, 7, 1, 1))


def test_naive_timestamps_are_read_as_utc(tmp_path, con):
    naive = pa.timestamp("us")
    export = write_export(tmp_path, {"x.parquet": [
        L("a", line_item_usage_start_date=datetime(2026, 7, 3, 5),
          line_item_usage_end_date=datetime(2026, 7, 3, 6)),
    ]}, types={"line_item_usage_start_date": naive, "line_item_usage_end_date": naive})
    con.execute("SET TimeZone = 'America/New_York'")
    build(con, config(tmp_path, export))
    assert facts(con)["a"]["ChargePeriodStart"] == datetime(2026, 7, 3, 5)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("zone", ["UTC", "Asia/Kathmandu", "-03:30"])
def test_zoned_timestamps_of_any_unit_are_the_utc_instant(tmp_path, con, unit, zone):
    # a writer's zone only labels the stored UTC instant; the unit sets the precision kept
    zoned = pa.timestamp(unit, tz=zone)
    start = datetime(2026, 7, 3, 5, 0, 0, 0 if unit == "s" else 250_000, tzinfo=UTC)
    export = write_export(tmp_path, {"x.parquet": [
        L("a", line_item_usage_start_date=start, line_item_usage_end_date=start + HOUR),
    ]}, types={"line_item_usage_start_date": zoned, "line_item_usage_end_date": zoned,
               "bill_billing_period_start_date": zoned})
    con.execute("SET TimeZone = 'America/New_York'")  # the reader's own zone plays no part
    build(con, config(tmp_path, export))
    row = facts(con)["a"]
    naive = start.replace(tzinfo=None)
    assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == (naive, naive + HOUR)


def test_an_infinite_timestamp_names_the_row(tmp_path, con):
    # int64's maximum is DuckDB's `infinity`: no charge period ends there
    stamp = pa.timestamp("us", tz="UTC")
    export = write_export(tmp_path, {"x.parquet": [
        L("a"), L("b", line_item_usage_end_date=pa.scalar(2**63 - 1, stamp)),
    ]}, types={"line_item_usage_end_date": stamp})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert "x.parquet row 2" in str(err.value)
    assert "line_item_usage_end_date is empty or not a timestamp" in str(err.value)


def test_empty_month_is_zero_rows(tmp_path, con, caplog):
    export = write_export(tmp_path, {"x.parquet": [L("a")]}, month="2026-06")
    with caplog.at_level(logging.WARNING, logger="test"):
        summary = build(con, config(tmp_path, export))
    assert summary.rows == 0 and _total(con) == (0, 0.0)
    assert "no billing files for 2026-07" in caplog.text
    assert "the export holds 1 other month(s): 2026-06" in caplog.text
    caplog.clear()
    (export / "data").rename(tmp_path / "moved")
    with caplog.at_level(logging.WARNING, logger="test"):
        build(con, config(tmp_path, export))
    assert "no data/BILLING_PERIOD=YYYY-MM folder yet" in caplog.text


def test_a_held_month_whose_files_are_gone_keeps_its_lines(tmp_path, con):
    """A month the warehouse holds lines of, whose sources now hold none (the files deleted,
    a path moved), was emptied with exit 0 — every table of the month with it. It is an
    error now, the month keeping its lines; `--force` (keep_held=False) empties it."""
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.support.cur_rows import LOG

    export = write_export(tmp_path, {"x.parquet": [L("a", 2.0), L("b", 3.0)]})
    build(con, config(tmp_path, export))
    assert _total(con) == (2, 5.0)
    for file in month_dir(export).glob("*.parquet"):
        file.unlink()
    for manifest in month_dir(export, "metadata").glob("*.json"):
        manifest.unlink()
    with pytest.raises(SourceError, match=r"billing: 2026-07: the sources hold no line of the "
                                          r"month, where the warehouse holds 2"):
        build(con, config(tmp_path, export))
    assert _total(con) == (2, 5.0)
    summary = build_billing_facts(con, config(tmp_path, export), JULY, LOG, keep_held=False)
    assert summary.rows == 0 and _total(con) == (0, 0.0)


def test_one_of_two_sources_whose_files_are_gone_keeps_the_month(tmp_path, con):
    """Two exports, one of them gone (its files deleted, its path moved): the month shrank by
    that source's share with exit 0. It is an error naming the source, the month keeping
    every line; `--force` (keep_held=False) takes what the sources hold."""
    from cost_pipeline.config import parse_config
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.support.cur_rows import LOG

    east = write_export(tmp_path / "east", {"x.parquet": [L("a", 2.0), L("b", 3.0)]})
    west = write_export(tmp_path / "west", {"y.parquet": [L("c", 7.0)]})
    cfg = parse_config({"billing": [{"kind": "aws_cur2", "path": str(east), "name": "east"},
                                    {"kind": "aws_cur2", "path": str(west), "name": "west"}]},
                       tmp_path)
    build(con, cfg)
    assert _total(con) == (3, 12.0)
    (month_dir(west) / "y.parquet").unlink()
    for manifest in month_dir(west, "metadata").glob("*.json"):
        manifest.unlink()
    with pytest.raises(SourceError, match=r"west: 2026-07: the source holds no line of the "
                                          r"month, where the warehouse holds lines from it"):
        build(con, cfg)
    assert _total(con) == (3, 12.0)
    summary = build_billing_facts(con, cfg, JULY, LOG, keep_held=False)
    assert summary.rows == 2 and _total(con) == (2, 5.0)
    build(con, cfg)  # held from east alone now: a run as before passes
    assert _total(con) == (2, 5.0)


def test_a_source_taken_out_of_the_config_keeps_the_month(tmp_path, con):
    """A billing source removed from the config (or renamed) while the month holds its lines:
    the month lost them with exit 0, its bill shrunk by that source's share. It is an error
    naming the source and its lines, the month keeping every line; `--force` (keep_held=False)
    takes what the configured sources hold."""
    from cost_pipeline.config import parse_config
    from cost_pipeline.ingest.billing import build_billing_facts
    from tests.support.cur_rows import LOG

    east = write_export(tmp_path / "east", {"x.parquet": [L("a", 2.0), L("b", 3.0)]})
    west = write_export(tmp_path / "west", {"y.parquet": [L("c", 7.0)]})
    both = parse_config({"billing": [
        {"kind": "aws_cur2", "path": str(east), "name": "east"},
        {"kind": "aws_cur2", "path": str(west), "name": "west"}]}, tmp_path)
    build(con, both)
    assert _total(con) == (3, 12.0)
    for sources in ([{"kind": "aws_cur2", "path": str(east), "name": "east"}],
                    [{"kind": "aws_cur2", "path": str(east), "name": "east"},
                     {"kind": "aws_cur2", "path": str(west), "name": "west-2"}]):
        cfg = parse_config({"billing": sources}, tmp_path)
        with pytest.raises(SourceError, match=(
                r"billing: 2026-07: the warehouse holds 1 line of the month from west, "
                r"a billing source the config no longer names: put it back \(its name as "
                r"it was\), or `materialize --force` drops its lines")):
            build(con, cfg)
        assert _total(con) == (3, 12.0)
    summary = build_billing_facts(con, cfg, JULY, LOG, keep_held=False)
    assert summary.rows == 3 and _total(con) == (3, 12.0)
    assert {line.split(":")[0] for (line,) in con.execute(
        "SELECT x_SourceLine FROM billing_facts").fetchall()} == {"east", "west-2"}
    build(con, cfg)  # held from the configured sources alone now: a run as before passes


def test_sources_taken_out_of_the_config_are_named_each(tmp_path, con):
    from cost_pipeline.config import parse_config

    paths = {name: write_export(tmp_path / name, {f"{name}.parquet": [
        L(f"{name}{i}", 1.0) for i in range(lines)]}) for name, lines in
        (("a", 1), ("b", 2), ("c", 1))}
    build(con, parse_config({"billing": [{"kind": "aws_cur2", "path": str(path), "name": name}
                                         for name, path in paths.items()]}, tmp_path))
    with pytest.raises(SourceError, match=(
            r"billing: 2026-07: the warehouse holds 2 lines of the month from b, 1 line of the "
            r"month from c, billing sources the config no longer names: put them back \(their "
            r"names as they were\), or `materialize --force` drops their lines")):
        build(con, parse_config({"billing": [{"kind": "aws_cur2", "path": str(paths["a"]),
                                              "name": "a"}]}, tmp_path))
    assert _total(con) == (4, 4.0)


def test_a_path_that_is_no_export_folder_is_refused_saying_which_it_is(tmp_path, con):
    # the export's data/ folder configured in its place, or a legacy Cost and Usage Report
    # (its manifests in YYYYMMDD-YYYYMMDD/, its Athena parquet in year=/month=): every month
    # would read as empty, so the run is refused, naming the path and what it holds
    export = write_export(tmp_path, {"x.parquet": [L("a")]})
    with pytest.raises(SourceError, match=r"aws_cur2: .*/data: this is an export's data/ "
                                          r"folder .*the folder above it"):
        build(con, config(tmp_path, export / "data"))
    legacy = tmp_path / "cur" / "ml-cur"
    (legacy / "20260701-20260801").mkdir(parents=True)
    (legacy / "ml-cur" / "year=2026" / "month=7").mkdir(parents=True)
    for path, folder in ((legacy, "20260701-20260801"), (legacy / "ml-cur", "year=2026")):
        with pytest.raises(SourceError, match=rf"a legacy Cost and Usage Report \({folder}/\): "
                                              r"aws_cur2 reads a CUR 2\.0 export"):
            build(con, config(tmp_path, path))


def test_a_failed_build_keeps_the_previous_rows(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0)], "y.parquet": [L("b", 2.0)]})
    cfg = config(tmp_path, export)
    build(con, cfg)
    before = con.execute("SELECT * FROM billing_facts ORDER BY x_SourceLine").fetchall()
    bad = month_dir(export) / "y.parquet"
    bad.write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(SourceError, match="y.parquet"):
        build(con, cfg)
    assert con.execute("SELECT * FROM billing_facts ORDER BY x_SourceLine").fetchall() == before
    # a later conflicting delivery fails at the month check: still nothing replaced
    write_parquet(bad, [L("a", 9.0)])
    with pytest.raises(SourceError, match="conflicting"):
        build(con, cfg)
    assert con.execute("SELECT * FROM billing_facts ORDER BY x_SourceLine").fetchall() == before


AUGUST_BILL = {"bill_billing_period_start_date": datetime(2026, 8, 1, tzinfo=UTC)}


def test_other_months_are_untouched(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0)]})
    write_export(tmp_path, {"y.parquet": [L("b", 7.0, start=datetime(2026, 8, 2, tzinfo=UTC),
                                            **AUGUST_BILL)]}, month="2026-08")
    cfg = config(tmp_path, export)
    build(con, cfg)
    build(con, cfg, date(2026, 8, 1))
    build(con, cfg)
    assert _total(con) == (1, 1.0) and _total(con, "2026-08-01") == (1, 7.0)


def test_a_file_of_another_month_in_the_months_folder_is_refused(tmp_path, con):
    # July's file copied into August's folder (same name: the manifest still lists it) was
    # read as August: July's $1.00 + $2.00 counted in two months, nothing said
    july = [L("a", 1.0), L("b", 2.0, start=T0 + HOUR)]
    export = write_export(tmp_path, {"x.parquet": july})
    write_export(tmp_path, {"x.parquet": [L("c", 7.0, start=datetime(2026, 8, 2, tzinfo=UTC),
                                            **AUGUST_BILL)]}, month="2026-08")
    cfg = config(tmp_path, export)
    build(con, cfg, date(2026, 8, 1))
    assert _total(con, "2026-08-01") == (1, 7.0)
    write_parquet(month_dir(export, month="2026-08") / "x.parquet", july)
    with pytest.raises(SourceError) as err:
        build(con, cfg, date(2026, 8, 1))
    assert str(err.value) == (
        f"aws_cur2: {month_dir(export, month='2026-08') / 'x.parquet'} row 1: "
        "bill_billing_period_start_date 2026-07-01 is not the delivery's billing period "
        "2026-08: a file of another month in its folder?")
    assert _total(con, "2026-08-01") == (1, 7.0)  # the month keeps its lines


def test_a_line_of_another_billing_period_is_named_by_its_row(tmp_path, con):
    # the first such line of the month, in file and row order, whatever else is wrong after it
    export = write_export(tmp_path, {
        "a.parquet": [L("a"), L("b", 2.0, start=T0 + HOUR)],
        "b.parquet": [L("c"), L("d", bill_billing_period_start_date=datetime(
            2026, 6, 15, 12, tzinfo=UTC)), L("e", float("nan"))]})
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert (err.value.where, err.value.problem) == (
        str(month_dir(export) / "b.parquet") + " row 2",
        "bill_billing_period_start_date 2026-06-15 12:00:00 UTC is not the delivery's billing "
        "period 2026-07: a file of another month in its folder?")
    assert con.execute("SELECT count(*) FROM billing_facts").fetchone() == (0,)


def test_an_empty_or_absent_billing_period_is_the_deliverys(tmp_path, con):
    for name, drop in (("empty", ()), ("absent", ("bill_billing_period_start_date",))):
        export = write_export(tmp_path / name, {"x.parquet": [
            L("a", 2.5, bill_billing_period_start_date=None), L("b", 1.5)]}, drop=drop)
        build(con, config(tmp_path / name, export))
        assert {k: f["BillingPeriodStart"] for k, f in facts(con).items()} == {
            "a": datetime(2026, 7, 1), "b": datetime(2026, 7, 1)}
        assert _total(con) == (2, 4.0)


def test_a_billing_period_is_compared_as_its_utc_instant(tmp_path, con):
    # AWS writes UTC midnight of the 1st: the same instant labelled with another zone (as
    # text, or a parquet column of a zone west of UTC, whose wall clock is still June) is July
    export = write_export(tmp_path, {"x.parquet": [
        L("a", 1.0, bill_billing_period_start_date="2026-06-30T20:00:00-04:00"),
        L("b", 2.0, bill_billing_period_start_date="2026-07-01 05:30:00 +05:30"),
        L("c", 4.0, bill_billing_period_start_date="2026-07-01T00:00:00Z"),
    ]}, types={"bill_billing_period_start_date": pa.string()})
    con.execute("SET TimeZone = 'America/New_York'")
    build(con, config(tmp_path, export))
    assert {f["BillingPeriodStart"] for f in facts(con).values()} == {datetime(2026, 7, 1)}
    assert _total(con) == (3, 7.0)
    zoned = write_export(tmp_path / "zoned", {"x.parquet": [L("a", 1.0)]},
                         types={"bill_billing_period_start_date": pa.timestamp("ms", "-03:30")})
    build(con, config(tmp_path / "zoned", zoned))
    assert facts(con)["a"]["BillingPeriodStart"] == datetime(2026, 7, 1)
    # July's midnight in a zone east of UTC is 30 June 22:00 UTC: June's billing period
    export = write_export(tmp_path / "east", {"x.parquet": [
        L("a", 1.0, bill_billing_period_start_date="2026-07-01T00:00:00+02:00")]},
        types={"bill_billing_period_start_date": pa.string()})
    with pytest.raises(SourceError, match=r"x\.parquet row 1: bill_billing_period_start_date "
                                          r"2026-06-30 22:00:00 UTC is not the delivery's "
                                          r"billing period 2026-07"):
        build(con, config(tmp_path / "east", export))


def test_usage_dated_in_the_next_month_stays_in_the_deliverys_month(tmp_path, con):
    # its billing period is the delivery's: the usage date does not move a line
    export = write_export(tmp_path, {"x.parquet": [
        L("a", 1.0), L("late", 3.0, start=datetime(2026, 8, 1, 2, tzinfo=UTC))]})
    build(con, config(tmp_path, export))
    late = facts(con)["late"]
    assert (late["month"], late["ChargePeriodStart"], late["BillingPeriodStart"]) == (
        date(2026, 7, 1), datetime(2026, 8, 1, 2), datetime(2026, 7, 1))
    assert _total(con) == (2, 4.0) and _total(con, "2026-08-01") == (0, 0.0)


def test_two_exports_are_two_sources(tmp_path, con):
    first = write_export(tmp_path / "one", {"x.parquet": [L("a", 1.0)]})
    second = write_export(tmp_path / "two", {"x.parquet": [L("a", 1.0)]})
    cfg = config(tmp_path, None, billing=[
        {"kind": "aws_cur2", "path": str(first), "name": "payer-a"},
        {"kind": "aws_cur2", "path": str(second), "name": "payer-b"}])
    build(con, cfg)
    lines = [r[0] for r in con.execute(
        "SELECT x_SourceLine FROM billing_facts ORDER BY 1").fetchall()]
    assert [x.split(":")[0] for x in lines] == ["payer-a", "payer-b"]


def test_manifest_file_uris_as_objects_and_unreadable_manifest(tmp_path, con):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0)]})
    manifest = month_dir(export, "metadata") / f"{EXPORT}-Manifest.json"
    doc = json.loads(manifest.read_text())
    doc["dataFiles"] = [{"key": doc["dataFiles"][0]}]
    manifest.write_text(json.dumps(doc))
    build(con, config(tmp_path, export))
    assert _total(con) == (1, 1.0)
    manifest.write_text("{not json")
    with pytest.raises(SourceError, match="Manifest.json.*unreadable manifest"):
        build(con, config(tmp_path, export))


def test_a_line_without_product_code_loads_as_no_instance_usage(tmp_path, con):
    # every required value is set even when the columns the classification reads are empty
    export = write_export(tmp_path, {"a.parquet": [
        L("bare", 0.5, line_item_product_code=None, line_item_usage_type="USE1-Train:ml.m5.large",
          product_product_family=None),
    ]})
    build(con, config(tmp_path, export))
    row = facts(con)["bare"]
    assert row["x_InstanceUsage"] is False and row["x_UsageHours"] is None
    assert row["EffectiveCost"] == 0.5 and row["ChargeCategory"] == "Usage"


@pytest.mark.parametrize("column", ["filename", "FILE_ROW_NUMBER"])
def test_a_file_holding_a_column_named_as_duckdbs_lineage_columns_reads(tmp_path, con, column):
    # a copy written by DuckDB with its `filename` / `file_row_number` columns kept: DuckDB's
    # reader refused to add its own beside them (a binder error naming the file); such a
    # delivery is streamed as from S3, to the same facts, each line named by its file and row
    rows = [L("a", 1.0), L("b", 2.0, start=T0 + HOUR), L("c", 4.0, start=T0 + 2 * HOUR)]
    plain = write_export(tmp_path / "plain", {"x.parquet": rows})
    build(con, config(tmp_path, plain))
    query = "SELECT * EXCLUDE (month, x_File) FROM billing_facts ORDER BY x_SourceLine"
    expected = con.execute(query).fetchall()
    copied = write_export(tmp_path / "copied", {"x.parquet": rows},
                          extra={column: pa.string()})
    build(con, config(tmp_path, copied))
    assert con.execute(query).fetchall() == expected
    assert {f for (f,) in con.execute("SELECT DISTINCT x_File FROM billing_facts").fetchall()} == {
        str(month_dir(copied) / "x.parquet")}
    # an engine error naming no file is no fault of this sound file (probing it with DuckDB's
    # own reader would fail on the very columns streaming avoids)
    from cost_pipeline.ingest.sources import cur2

    delivery = cur2.find_delivery("aws_cur2", str(copied), JULY)
    cur2.inspect_schema(delivery)
    assert delivery.engine_columns
    assert cur2.locate_bad_file(delivery, "Conversion Error: an error naming no file") is None
