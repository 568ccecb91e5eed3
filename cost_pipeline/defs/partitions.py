"""The one partitioning: calendar months (keys `YYYY-MM-01`, UTC), 2020-01 through the
current, still open month."""

import dagster as dg

monthly = dg.MonthlyPartitionsDefinition(start_date="2020-01-01", end_offset=1, timezone="UTC")
