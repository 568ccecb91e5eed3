"""The `period_report` job the UI launches for a range: op config from_month / to_month, the
launchpad's default is the last three complete months, and it writes the CLI's page."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg

from cost_pipeline.config import load_config
from cost_pipeline.defs.definitions import build_defs
from cost_pipeline.defs.period_report import PERIOD_JOB, last_quarter
from cost_pipeline.report.period import period_report_path


def test_last_quarter_default():
    assert last_quarter(date(2026, 10, 15)) == ("2026-07", "2026-09")
    assert last_quarter(date(2026, 2, 1)) == ("2025-11", "2026-01")


def test_job_writes_the_period_report(demo_quarter):
    config = str(demo_quarter[0])
    job = build_defs(config).resolve_job_def(PERIOD_JOB)
    assert job.partitions_def is None
    run_config = {"ops": {"write_period_report": {"config": {"from_month": "2026-07",
                                                             "to_month": "2026-09"}}}}
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(run_config=run_config, instance=instance)
        assert result.success
        path = Path(result.output_for_node("write_period_report"))
        assert path == period_report_path(load_config(config).warehouse_path,
                                          date(2026, 7, 1), date(2026, 9, 1))
        assert path.exists()
        run_config["ops"]["write_period_report"]["config"]["from_month"] = "2026-05"
        failed = job.execute_in_process(run_config=run_config, instance=instance,
                                        raise_on_error=False)
        assert not failed.success
        (failure,) = [e for e in failed.all_events if e.is_step_failure]
        assert "no billing data for 2026-05, 2026-06" in str(
            failure.step_failure_data.error.cause)
