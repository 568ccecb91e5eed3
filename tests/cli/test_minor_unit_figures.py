"""A month billed in Kuwaiti dinars (3 decimals) or yen (none), materialized through the
command's own path: the printed check lines, the alert and the Dagster metadata show each
amount to its currency's smallest unit, rounded half up once from the exact figure. Rounded
to the cent first, KWD 214.728 printed `KWD 214.730` and yen 1,234.4951 `JPY 1,235`."""

from __future__ import annotations

import csv
import json
from datetime import date, datetime, timedelta
from pathlib import Path

import dagster as dg
import yaml

from cost_pipeline.cli.main import print_checks
from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.defs.definitions import build_defs
from cost_pipeline.defs.period_report import PERIOD_JOB
from tests.cli.test_incremental import _materialized

JULY = date(2026, 7, 1)
COLUMNS = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "ProviderName",
           "ChargeCategory", "ServiceCategory", "ResourceId", "ResourceType", "SkuId",
           "SkuPriceDetails", "ConsumedQuantity", "ConsumedUnit", "BilledCost",
           "EffectiveCost", "BillingCurrency", "InvoiceId")


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _vm(resource: str, instance_type: str, at: datetime, cost: float, currency: str) -> dict:
    return {"BillingPeriodStart": "2026-07-01T00:00:00Z", "ChargePeriodStart": _iso(at),
            "ChargePeriodEnd": _iso(at + timedelta(hours=1)), "ProviderName": "AWS",
            "ChargeCategory": "Usage", "ServiceCategory": "Compute", "ResourceId": resource,
            "ResourceType": "Virtual Machine", "SkuId": instance_type,
            "SkuPriceDetails": json.dumps({"InstanceType": instance_type}),
            "ConsumedQuantity": 1.0, "ConsumedUnit": "Hours", "BilledCost": cost,
            "EffectiveCost": cost, "BillingCurrency": currency, "InvoiceId": "INV-1"}


def project(tmp_path: Path, currency: str, p4d: tuple[float, float],
            ghost: tuple[float, float, float], storage: float) -> Path:
    """July billed in `currency`: i-p4d (8 GPUs) two hours, both claimed by the production
    run `prod`; i-ghost (g5.12xlarge, 4 GPUs) three hours no run claims (12 of the 28
    GPU-hours untracked: the reconciliation fails); a storage line nobody claims."""
    at = datetime(2026, 7, 3, 10)
    lines = [_vm("i-p4d", "p4d.24xlarge", at + timedelta(hours=h), cost, currency)
             for h, cost in enumerate(p4d)]
    lines += [_vm("i-ghost", "g5.12xlarge", at + timedelta(hours=h), cost, currency)
              for h, cost in enumerate(ghost)]
    lines.append({**_vm("arn:aws:s3:::logs", "", at, storage, currency),
                  "ServiceCategory": "Storage", "ResourceType": "Bucket", "SkuId": "s3",
                  "SkuPriceDetails": "", "ConsumedUnit": "GB-Months"})
    with (tmp_path / "focus.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, COLUMNS)
        writer.writeheader()
        writer.writerows(lines)
    (tmp_path / "runs.csv").write_text(
        "run_id,status,start_time,end_time,resource_ids,purpose,model\n"
        "prod,FINISHED,2026-07-03T10:00:00Z,2026-07-03T12:00:00Z,i-p4d,production,churn\n",
        encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "warehouse": {"path": "warehouse.duckdb"},
        "billing": [{"kind": "focus", "path": "focus.csv"}],
        "tracker": [{"kind": "runs_file", "path": "runs.csv"}],
        "checkpoints": [{"kind": "local", "path": ".", "bucket": "ml-checkpoints"}]}),
        encoding="utf-8")
    return config


def materialized(config: Path, capsys) -> tuple[dict[str, str], dict[str, dict], dict]:
    """The month's printed check lines and metadata (by check), each asset's metadata, and
    the failed reconciliation's alert as the check-failure sensor reads it from the instance."""
    from cost_pipeline import alerts
    from cost_pipeline.defs.sensors import read_check_evaluations

    capsys.readouterr()
    result = materialize_month(str(config), JULY, progress=False, force=True)
    assert result.success, result.error
    print_checks(result)
    printed = {line.split(": ")[0].split(" ")[1]: line
               for line in capsys.readouterr().out.splitlines()}
    printed.update({f"{c.asset}.{c.name}.metadata": c.metadata for c in result.checks})
    key = dg.AssetCheckKey(dg.AssetKey("reconciliation"), "reconciliation_within_threshold")
    with dg.DagsterInstance.get() as instance:
        (evaluation, *_) = [e for e in read_check_evaluations(instance, [key], None)
                            if e.run_id == result.run_id]
    return printed, _materialized(result.run_id), alerts.check_alert(evaluation)


def period_totals(config: Path) -> dict:
    """The metadata of the `period_report` job's run for July alone."""
    job = build_defs(str(config)).resolve_job_def(PERIOD_JOB)
    run_config = {"ops": {"write_period_report": {"config": {"from_month": "2026-07",
                                                             "to_month": "2026-07"}}}}
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(run_config=run_config, instance=instance)
    (output,) = [e for e in result.all_events if e.is_successful_output]
    return {k: v.value for k, v in output.event_specific_data.metadata.items()}


def test_a_kwd_month_shows_its_amounts_to_the_fils(tmp_path, dagster_home, capsys):
    # 101.4985 × 2 = 202.997 production; 2.101 × 3 = 6.303 untracked; 5.428 storage:
    # 214.728 billed. To the cent they were 203.0, 6.3 and 214.73
    config = project(tmp_path, "KWD", (101.4985, 101.4985), (2.101, 2.101, 2.101), 5.428)
    printed, metadata, alert = materialized(config, capsys)
    assert printed["attribution.cost_conserved"] == (
        "2026-07 attribution.cost_conserved: PASS  effective_cost KWD 214.728, delta KWD 0.000")
    assert "i-ghost (g5.12xlarge) 12 GPU-hours KWD 6.303. " in alert["text"], alert["text"]
    conserved = printed["attribution.cost_conserved.metadata"]
    assert (conserved["effective_cost"], conserved["attributed"],
            conserved["untracked"]) == (214.728, 202.997, 11.731)
    assert alert["top_untracked_resources"][0]["cost"] == 6.303
    billing = metadata["billing_facts"]
    assert (billing["total_effective_cost"], billing["total_billed_cost"]) == (214.728, 214.728)
    assert metadata["attribution"]["cost_production"] == 202.997
    assert metadata["attribution"]["currency"] == "KWD"
    # i-ghost and the storage line: 6.303 + 5.428
    assert metadata["untracked_usage"]["cost"] == metadata["attribution"]["cost_untracked"] \
        == 11.731
    assert metadata["run_costs"]["cost"] == 202.997 and metadata["showback"]["cost"] == 214.728
    assert (metadata["monthly_report"]["total_effective_cost"],
            metadata["monthly_report"]["billed_cost"]) == (214.728, 214.728)
    totals = period_totals(config)
    assert (totals["total_effective_cost"], totals["total_2026_07"]) == (214.728, 214.728)


def test_a_jpy_month_shows_whole_yen_rounded_once(tmp_path, dagster_home, capsys):
    # 600.2 × 2 = 1,200.4 production; 10 + 10 + 10.4951 = 30.4951 untracked; 3.6 storage:
    # 1,234.4951 billed — to the cent 1,234.5, which printed JPY 1,235; to the yen 1,234.
    # The untracked 30.4951 was 30.5: JPY 31, not JPY 30
    config = project(tmp_path, "JPY", (600.2, 600.2), (10.0, 10.0, 10.4951), 3.6)
    printed, metadata, alert = materialized(config, capsys)
    assert printed["attribution.cost_conserved"] == (
        "2026-07 attribution.cost_conserved: PASS  effective_cost JPY 1,234, delta JPY 0")
    assert "i-ghost (g5.12xlarge) 12 GPU-hours JPY 30. " in alert["text"], alert["text"]
    # a yen shows none of the 0.01 tolerance: the delta and it keep the digits apart
    conserved = printed["attribution.cost_conserved.metadata"]
    assert (conserved["effective_cost"], conserved["tolerance"]) == (1234.0, 0.01)
    assert abs(conserved["delta"]) < 0.001
    assert metadata["billing_facts"]["total_effective_cost"] == 1234.0
    assert metadata["attribution"]["cost_production"] == 1200.0
    assert metadata["untracked_usage"]["cost"] == 34.0  # 30.4951 + 3.6
    assert metadata["showback"]["cost"] == 1234.0
    assert metadata["monthly_report"]["total_effective_cost"] == 1234.0
    totals = period_totals(config)
    assert (totals["total_effective_cost"], totals["total_2026_07"]) == (1234.0, 1234.0)
