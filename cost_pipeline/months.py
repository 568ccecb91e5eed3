"""Month arithmetic for the monthly partitions (keys `YYYY-MM-01`, UTC)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

_MONTH = re.compile(r"^([0-9]{4})-([0-9]{2})(?:-01)?$")  # ASCII: \d takes any digit (２０２６)


def parse_month(text: str) -> date:
    """`YYYY-MM` or a partition key `YYYY-MM-01` → the month's first day."""
    match = _MONTH.match(text.strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise ValueError(f"month {text!r}: expected YYYY-MM")
    return date(int(match.group(1)), int(match.group(2)), 1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """[first instant, first instant of the next month) as naive UTC datetimes."""
    end = next_month(month)
    return datetime(month.year, month.month, 1), datetime(end.year, end.month, 1)


FIRST_MONTH = date(2015, 1, 1)
"""The default first partition: older than any bill a provider still lets one download (AWS
keeps CUR 2.0 exports from their creation; the oldest public samples are 2017-2018). The
config key `first_month` moves it."""


def open_month(today: date | None = None) -> date:
    """The current, still open month (the last partition), UTC."""
    day = today or datetime.now(UTC).date()
    return day.replace(day=1)


def out_of_range(month: date, first_month: date = FIRST_MONTH,
                 today: date | None = None) -> str | None:
    """None when `month` is a partition, else the one line that says why not and what to do."""
    last = open_month(today)
    span = f"the months run {first_month:%Y-%m} through the open month {last:%Y-%m}"
    if month < first_month:
        return (f"month {month:%Y-%m} is before the first partition: {span}; "
                f"set `first_month: {month:%Y-%m}` in the config to include it")
    if month > last:
        return (f"month {month:%Y-%m} has not started yet: {span}; "
                "a month can be materialized from its first day (UTC)")
    return None
