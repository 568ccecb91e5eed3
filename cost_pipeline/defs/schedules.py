"""Schedules: the monthly close of the previous month once its bill has settled, and a daily
month-to-date refresh of the open month (the bill of the open month is restated daily)."""


from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg

from cost_pipeline.config import ScheduleSettings
from cost_pipeline.months import FIRST_MONTH

MONTHLY_CLOSE = "monthly_close"
DAILY_REFRESH = "daily_refresh"
LAUNCHED_BY_TAG = "cost_pipeline/launched_by"


def monthly_close(job: Any,  # the asset job of define_asset_job
                  settings: ScheduleSettings,
                  first_month: date = FIRST_MONTH) -> dg.ScheduleDefinition:
    # Not build_schedule_from_partitioned_job: with the open month as a partition
    # (end_offset=1) it would target the open month, not the month that just closed.
    @dg.schedule(
        name=MONTHLY_CLOSE,
        job=job,
        cron_schedule=f"0 {settings.hour_of_day} {settings.day_of_month} * *",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Materializes the previous month on day {settings.day_of_month} at "
        f"{settings.hour_of_day:02d}:00 UTC, once its bill has settled (config `schedule`).",
    )
    def _monthly_close(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        day = _tick_day(context)
        previous = (day.replace(day=1) - timedelta(days=1)).replace(day=1)
        if previous < first_month:  # config `first_month` is the open month: nothing closed
            return dg.SkipReason(f"{previous:%Y-%m} is before the first partition "
                                 f"{first_month:%Y-%m} (config `first_month`)")
        return dg.RunRequest(
            run_key=f"{MONTHLY_CLOSE}:{previous:%Y-%m}",
            partition_key=f"{previous:%Y-%m}-01",
            tags={LAUNCHED_BY_TAG: "schedule"},
        )

    return _monthly_close


def daily_refresh(job: Any,  # the asset job of define_asset_job
                  settings: ScheduleSettings) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=DAILY_REFRESH,
        job=job,
        cron_schedule=f"0 {settings.daily_refresh_hour} * * *",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Month-to-date refresh of the open month, daily at "
        f"{settings.daily_refresh_hour:02d}:00 UTC (config `schedule.daily_refresh_hour`).",
    )
    def _daily_refresh(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        day = _tick_day(context)
        return dg.RunRequest(
            run_key=f"{DAILY_REFRESH}:{day:%Y-%m-%d}",
            partition_key=f"{day:%Y-%m}-01",
            tags={LAUNCHED_BY_TAG: "schedule"},
        )

    return _daily_refresh


def _tick_day(context: dg.ScheduleEvaluationContext) -> date:
    when = context.scheduled_execution_time or datetime.now(UTC)
    return when.astimezone(UTC).date()
