"""The schedules as the daemon evaluates them: the monthly close targets the month that just
closed, the daily refresh the open month, both configurable."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
import yaml
from dagster._utils.schedules import cron_string_iterator

from cost_pipeline.config import ConfigError, load_config
from cost_pipeline.definitions import JOB_NAME, build_defs


def config_file(tmp_path, schedule: dict | None = None):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"warehouse": {"path": "w.duckdb"},
                                    **({"schedule": schedule} if schedule else {})}))
    return str(path)


def next_tick(schedule: dg.ScheduleDefinition, after: datetime) -> datetime:
    """The first tick strictly after `after`, as the daemon computes it."""
    ticks = cron_string_iterator(after.timestamp(), schedule.cron_schedule,
                                 schedule.execution_timezone)
    return next(t for t in ticks if t > after)


@pytest.fixture(scope="module")
def instance():
    with dg.instance_for_test() as instance:
        yield instance


def evaluate(defs: dg.Definitions, name: str, when: datetime,
             instance: dg.DagsterInstance) -> dg.RunRequest:
    schedule = defs.resolve_schedule_def(name)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=when,
                                        repository_def=defs.get_repository_def())
    [request] = schedule.evaluate_tick(context).run_requests
    assert schedule.job_name == JOB_NAME
    assert request.tags["cost_pipeline/launched_by"] == "schedule"
    return request


def test_monthly_close_next_tick_targets_the_previous_month(tmp_path, instance):
    defs = build_defs(config_file(tmp_path))
    schedule = defs.resolve_schedule_def("monthly_close")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING  # the daemon runs it
    tick = next_tick(schedule, datetime(2026, 11, 30, 3, tzinfo=UTC))
    assert tick == datetime(2026, 12, 3, 6, tzinfo=UTC)  # default: the 3rd, 06:00 UTC
    assert evaluate(defs, "monthly_close", tick, instance).partition_key == "2026-11-01"
    # across a year boundary
    january = next_tick(schedule, datetime(2026, 12, 31, tzinfo=UTC))
    assert evaluate(defs, "monthly_close", january, instance).partition_key == "2026-12-01"


def test_settle_day_and_hours_come_from_the_config(tmp_path, instance):
    defs = build_defs(config_file(tmp_path, {"day_of_month": 6, "hour_of_day": 7,
                                             "daily_refresh_hour": 4}))
    close = defs.resolve_schedule_def("monthly_close")
    tick = next_tick(close, datetime(2026, 11, 30, tzinfo=UTC))
    assert tick == datetime(2026, 12, 6, 7, tzinfo=UTC)
    assert evaluate(defs, "monthly_close", tick, instance).partition_key == "2026-11-01"
    refresh = defs.resolve_schedule_def("daily_refresh")
    assert next_tick(refresh, datetime(2026, 11, 30, 5, tzinfo=UTC)) == datetime(
        2026, 12, 1, 4, tzinfo=UTC)


def test_daily_refresh_targets_the_open_month(tmp_path, instance):
    defs = build_defs(config_file(tmp_path))
    refresh = defs.resolve_schedule_def("daily_refresh")
    tick = next_tick(refresh, datetime(2026, 11, 29, 6, tzinfo=UTC))
    assert tick == datetime(2026, 11, 30, 5, tzinfo=UTC)
    today = evaluate(defs, "daily_refresh", tick, instance)
    assert today.partition_key == "2026-11-01"
    tomorrow = evaluate(defs, "daily_refresh", next_tick(refresh, tick), instance)
    assert tomorrow.partition_key == "2026-12-01"  # the 1st: the new month is the open one
    assert today.run_key != tomorrow.run_key  # one run per day, not one per month
    # the open month is a partition of the job (end_offset=1)
    partitions = defs.resolve_job_def(JOB_NAME).partitions_def
    assert partitions.get_partition_keys(current_time=tick)[-1] == today.partition_key


def test_schedule_config_is_validated(tmp_path):
    with pytest.raises(ConfigError, match="schedule.day_of_month"):
        load_config(config_file(tmp_path, {"day_of_month": 31}))  # not every month has it
    with pytest.raises(ConfigError, match="schedule.daily_refresh_hour"):
        load_config(config_file(tmp_path, {"daily_refresh_hour": 24}))
    with pytest.raises(ConfigError, match="alerts.webhook_url_env") as err:
        # the variable's NAME belongs in the file, never the URL itself
        path = tmp_path / "c.yaml"
        path.write_text("alerts: {webhook_url_env: 'https://hooks.slack.com/services/x'}\n")
        load_config(str(path))
    # said so ("must not be blank" was said of it), and the secret not repeated
    assert "must name the environment variable holding the webhook URL" in str(err.value)
    assert "hooks.slack.com" not in str(err.value)
