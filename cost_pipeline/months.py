"""Month arithmetic for the monthly partitions (keys `YYYY-MM-01`, UTC)."""

from __future__ import annotations

import re
from datetime import date, datetime

_MONTH = re.compile(r"^(\d{4})-(\d{2})(?:-01)?$")


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
