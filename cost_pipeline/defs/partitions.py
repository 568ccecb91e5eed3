"""The one partitioning: calendar months (keys `YYYY-MM-01`, UTC), from the first month
(default 2015-01, config `first_month`) through the current, still open month."""

from datetime import date

import dagster as dg

from cost_pipeline.months import FIRST_MONTH


def monthly_from(first_month: date) -> dg.MonthlyPartitionsDefinition:
    return dg.MonthlyPartitionsDefinition(start_date=f"{first_month:%Y-%m}-01", end_offset=1,
                                          timezone="UTC")


monthly = monthly_from(FIRST_MONTH)


def first_month(partitions: dg.PartitionsDefinition) -> date:
    return date.fromisoformat(partitions.get_first_partition_key())
