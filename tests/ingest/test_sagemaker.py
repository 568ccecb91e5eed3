"""SageMaker training jobs in CUR 2.0 (SPEC §3, §5): the job is the line's resource, and a run
may name the job by its name or by its ARN.

The bill's shape: product `AmazonSageMaker`, one usage line per hour of the job with usage
type `USE1-Train:ml.p4d.24xlarge`, usage amount = instance-hours (2 instances → 2.0 per full
hour) and resource id = the training job's ARN, whose name SageMaker writes in lowercase.
Here `llm-sft-0042` ran on 2 × ml.p4d.24xlarge (8 A100 each) from 08:00 to 10:30, at $37.688
per instance-hour: hours 1–2 cost 75.376 each, the half hour 37.688.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.defs.checks import tracker_claims_billed
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.support.cur_rows import T0, build, config, facts, line, write_export
from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

JULY = date(2026, 7, 1)
START = T0 + timedelta(days=19, hours=8)  # 2026-07-20 08:00 UTC
NAME = "llm-sft-0042"
ARN = f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{NAME}"
RATE = 37.688
JOB_COST = 2 * RATE * 2.5


def training_hours() -> list[dict]:
    rows = []
    for h, used in enumerate((1.0, 1.0, 0.5)):
        rows.append(line(
            2 * RATE * used, start=START + timedelta(hours=h), identity_line_item_id=f"train{h}",
            line_item_product_code="AmazonSageMaker", product_servicecode="AmazonSageMaker",
            line_item_usage_type="USE1-Train:ml.p4d.24xlarge", line_item_operation="RunInstance",
            line_item_resource_id=ARN, line_item_usage_amount=2 * used,
            product_instance_type="ml.p4d.24xlarge", product_product_family="ML Instance",
            product={"product_name": "Amazon SageMaker"}))
    return rows


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def month(con, tmp_path, runs: list[dict], rows: list[dict] | None = None) -> tuple[dict, dict]:
    """The export (`rows`, else the job's training hours) through billing_facts, attribution
    and reconciliation: the cost per owner (run id or untracked kind) and the reconciliation
    row."""
    export = write_export(tmp_path, {"part-0.parquet": rows or training_hours()})
    cfg = config(tmp_path, export)
    build(con, cfg)
    insert_runs(con, JULY, [{**RUN_DEFAULTS, **r} for r in runs])
    build_attribution(con, JULY, month_params(cfg, JULY))
    replace_month(con, "reconciliation", JULY, sql_text("reconciliation"),
                  month_params(cfg, JULY))
    claims = tracker_claims_billed(con, JULY, month_params(cfg, JULY))
    by_owner = dict(con.execute(
        "SELECT coalesce(run_id, kind), sum(cost) FROM attribution GROUP BY 1").fetchall())
    cur = con.execute("SELECT * FROM reconciliation")
    recon = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
    # the check names the resources behind the figure
    recon["unbilled_resources"] = claims.metadata["unbilled_resources"].value
    return by_owner, recon


def run(listed: str, **cols) -> dict:
    return {"run_id": "sft-42", "status": "FINISHED", "start_time": START,
            "end_time": datetime(2026, 7, 20, 10, 30), "resource_ids": [listed],
            "purpose": "production", **cols}


def test_training_lines_have_the_job_as_resource(tmp_path, con):
    build(con, config(tmp_path, write_export(tmp_path, {"p.parquet": training_hours()})))
    rows = facts(con)
    first, half = rows["train0"], rows["train2"]
    assert (first["ResourceId"], first["x_CostComponent"]) == (ARN, "gpu")
    assert (first["x_InstanceType"], first["x_ResourceKind"]) == ("p4d.24xlarge", "instance")
    # G over the job's instances; hours per instance: 2 instance-hours in the hour → 1 h
    assert (first["x_AcceleratorCount"], first["x_UsageHours"]) == (16, 1.0)
    assert (half["x_AcceleratorCount"], half["x_UsageHours"]) == (16, 0.5)


def test_a_two_instance_hour_split_into_rows_of_one_is_still_two_instances(tmp_path, con):
    """Each hour of a 2-instance job billed as a savings-plan row (1.0 instance-hour, with its
    negation) and an on-demand row (1.0): the most one row showed was 1.0, so the job read
    as 1 instance (G 8, 1 h a row, d 2 h): its run got half and the rest was untracked."""
    sp = {"savings_plan_savings_plan_a_r_n": "arn:aws:savingsplans::1:savingsplan/x",
          "savings_plan_savings_plan_effective_cost": 30.0}
    rows = []
    for h in range(2):
        at = START + timedelta(hours=h)
        common = dict(start=at, line_item_product_code="AmazonSageMaker",
                      line_item_usage_type="USE1-Train:ml.p4d.24xlarge",
                      line_item_resource_id=ARN, line_item_usage_amount=1.0)
        rows += [line(RATE, identity_line_item_id=f"sp{h}",
                      line_item_line_item_type="SavingsPlanCoveredUsage", **common, **sp),
                 line(-RATE, identity_line_item_id=f"neg{h}",
                      line_item_line_item_type="SavingsPlanNegation", **common, **sp),
                 line(40.0, identity_line_item_id=f"od{h}", **common)]
    cfg = config(tmp_path, write_export(tmp_path, {"p.parquet": rows}))
    build(con, cfg)
    got = facts(con)
    assert {(got[k]["x_AcceleratorCount"], got[k]["x_UsageHours"]) for k in ("sp0", "od1")} == {
        (16, 0.5)}
    insert_runs(con, JULY, [{**RUN_DEFAULTS, **run(NAME, end_time=START + timedelta(hours=2))}])
    build_attribution(con, JULY, month_params(cfg, JULY))
    assert dict(con.execute("SELECT coalesce(run_id, kind), round(sum(cost), 6) "
                            "FROM attribution GROUP BY 1").fetchall()) == {"sft-42": 140.0}


@pytest.mark.parametrize("listed", [NAME, ARN, NAME.upper()],
                         ids=["job name", "job ARN", "job name as created"])
def test_a_run_naming_the_job_gets_its_full_cost(tmp_path, con, listed):
    # SageMaker keeps a job's name as created (`LLM-SFT-0042`) and writes it lowercased in
    # its ARN, which the bill names: the name as created claimed nothing
    by_owner, recon = month(con, tmp_path, [run(listed)])
    assert by_owner == {"sft-42": pytest.approx(JOB_COST)}
    # 16 A100 for 2.5 hours, all of them the run's, and the name is no unknown resource
    assert recon["billed_gpu_hours"] == pytest.approx(40.0)
    assert recon["tracked_gpu_hours"] == pytest.approx(40.0)
    assert recon["unbilled_claim_gpu_hours"] == 0 and recon["unbilled_resources"] == 0


def test_another_job_name_claims_nothing(tmp_path, con):
    by_owner, recon = month(con, tmp_path, [run("llm-sft-0043", gpus=8)])
    assert by_owner == {"no_run": pytest.approx(JOB_COST)}
    # the run's 2.5 hours on 8 GPUs point at a job the bill does not show
    assert recon["unbilled_claim_gpu_hours"] == pytest.approx(20.0)
    assert recon["unbilled_resources"] == 1


def test_the_jobs_storage_volume_is_storage_not_instance_hours(tmp_path, con):
    """A training job bills its ML storage volume (2 × 500 GB gp2) under the job's ARN too,
    as usage type `Train:VolumeUsage.gp2` in GB-Mo: 1.344086 GB-Mo for $0.188172 in the hour
    of its 2 × ml.p3.16xlarge (8 V100 each) at $28.152 an instance-hour. It was read as an
    instance's hours (cpu, 1.344086 ÷ 2 = 0.672043 h, type `VolumeUsage.gp2`): d read 1.672 h,
    so the run listing the job for the hour got 1 ÷ 1.672 of it ($33.79, 9.569 GPU-hours)
    and 40% went untracked."""
    at = T0 + timedelta(days=3, hours=5)  # 2026-07-04 05:00 UTC
    job = dict(start=at, line_item_product_code="AmazonSageMaker",
               product_servicecode="AmazonSageMaker", line_item_resource_id=ARN,
               product={"product_name": "Amazon SageMaker"})
    rows = [line(56.304, identity_line_item_id="sm3",
                 line_item_usage_type="USE1-Train:ml.p3.16xlarge", line_item_usage_amount=2.0,
                 product_instance_type="ml.p3.16xlarge", line_item_operation="RunInstance",
                 product_product_family="ML Instance", **job),
            line(0.188172, identity_line_item_id="smvol",
                 line_item_usage_type="USE1-Train:VolumeUsage.gp2",
                 line_item_usage_amount=1.344086, pricing_unit="GB-Mo",
                 line_item_operation="CreateVolume-Gp2", product_product_family="ML Storage",
                 **job)]
    by_owner, recon = month(con, tmp_path, [run(NAME.upper(), start_time=at,
                                                 end_time=at + timedelta(hours=1))], rows)
    got = facts(con)
    volume, instances = got["smvol"], got["sm3"]
    # the volume is block storage, as an EBS volume's line is: no hours, no instance type
    assert (volume["x_CostComponent"], volume["x_InstanceUsage"]) == ("storage", False)
    assert (volume["x_UsageHours"], volume["x_InstanceType"]) == (None, None)
    assert (volume["x_AcceleratorCount"], volume["EffectiveCost"]) == (0, 0.188172)
    # the instances' line: 2 instance-hours in the hour → 1 h, G = 2 × 8
    assert (instances["x_CostComponent"], instances["x_InstanceType"]) == ("gpu", "p3.16xlarge")
    assert (instances["x_UsageHours"], instances["x_AcceleratorCount"]) == (1.0, 16)
    # the run ran the job's whole hour: both lines are its, 56.304 + 0.188172
    assert by_owner == {"sft-42": pytest.approx(56.492172)}
    assert recon["billed_gpu_hours"] == pytest.approx(16.0)
    assert recon["tracked_gpu_hours"] == pytest.approx(16.0)
