"""The `period_report` job the UI launches for a range: op config from_month / to_month, the
launchpad's default is the last three complete months, and it writes the CLI's page."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

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


def test_the_default_range_is_of_the_utc_date(tmp_path):
    """Every date of the product is UTC: at 20:00 on 30 September in New York it is already
    October, whose last complete quarter is July … September; at 08:00 on 1 October in Tokyo
    it is still September (June … August). The machine's local date gave the other."""
    def default_range(now: datetime) -> dict:
        job = build_defs(str(tmp_path / "missing.yaml"), now=now).resolve_job_def(PERIOD_JOB)
        return job.run_config["ops"]["write_period_report"]["config"]

    new_york = datetime(2026, 9, 30, 20, 0, tzinfo=ZoneInfo("America/New_York"))
    assert default_range(new_york) == {"from_month": "2026-07", "to_month": "2026-09"}
    tokyo = datetime(2026, 10, 1, 8, 0, tzinfo=ZoneInfo("Asia/Tokyo"))
    assert default_range(tokyo) == {"from_month": "2026-06", "to_month": "2026-08"}


def test_a_code_location_far_from_utc_defaults_to_the_utc_quarter(tmp_path):
    """The code location loaded on a machine whose local date is not UTC's (UTC+14 in the
    afternoon UTC, UTC-12 in the morning: a day apart, now) reads the UTC clock."""
    hour = datetime.now(UTC).hour
    zone = "Etc/GMT-14" if hour >= 12 else "Etc/GMT+12"
    probe = ("from cost_pipeline.defs.definitions import build_defs; "
             f"job = build_defs({str(tmp_path / 'missing.yaml')!r})"
             ".resolve_job_def('period_report'); "
             "c = job.run_config['ops']['write_period_report']['config']; "
             "import datetime; print(datetime.date.today(), c['from_month'], c['to_month'])")
    before = datetime.now(UTC).date()
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "TZ": zone}, timeout=120)
    after = datetime.now(UTC).date()
    assert done.returncode == 0, done.stderr
    local, first, last = done.stdout.split()
    assert local not in (str(before), str(after))  # the process's own date is not UTC's
    assert (first, last) in (last_quarter(before), last_quarter(after))


def test_a_reversed_range_names_the_jobs_own_fields(tmp_path):
    """from_month 2026-09 after to_month 2026-07: the run failed saying `--from must not be
    after --to`, the command's flags, in a UI whose fields are from_month and to_month. It
    names them; the command's own text is as it was."""
    from cost_pipeline.report.data import ReportError
    from cost_pipeline.report.period import check_range

    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: w.duckdb}\n")
    job = build_defs(str(config)).resolve_job_def(PERIOD_JOB)
    run_config = {"ops": {"write_period_report": {"config": {"from_month": "2026-09",
                                                             "to_month": "2026-07"}}}}
    with dg.instance_for_test() as instance:
        failed = job.execute_in_process(run_config=run_config, instance=instance,
                                        raise_on_error=False)
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.is_step_failure]
    error = str(failure.step_failure_data.error.cause)
    assert "the period starts 2026-09, after its end 2026-07: from_month must not be after " \
           "to_month" in error
    assert "--from" not in error and "--to" not in error
    with pytest.raises(ReportError, match=": --from must not be after --to$"):
        check_range(date(2026, 9, 1), date(2026, 7, 1))
