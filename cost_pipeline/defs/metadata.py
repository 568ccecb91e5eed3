"""Figures as the Dagster UI shows them: money to the cent, shares to 4 digits, hours to 3,
so a reader sees `0.1032`, not `0.10318394393345327`. Rounded only here, for display: the
tables keep full precision and every pass/fail is decided before rounding."""

from __future__ import annotations

import math
import re
from typing import Any

_HOURS = re.compile(r"hours")
_SHARE = re.compile(r"share|coverage|threshold|ratio|fraction|utilization")
_MONEY = re.compile(r"cost|delta|tolerance|attributed|untracked|unallocated|budget|dollars"
                    r"|price|amount|spend")


def rounded_figure(key: str, value: Any) -> Any:
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    name = key.lower()
    if _HOURS.search(name):
        return round(value, 3)
    if _SHARE.search(name):
        return round(value, 4)
    if _MONEY.search(name):
        return round(value, 2)
    return round(value, 4)


def kept_apart(shown: dict[str, Any], raw: dict[str, Any], key: str,
               limit: str) -> dict[str, Any]:
    """`shown` (rounded) with `key` to the digits that keep it apart from `limit` when
    rounding made the two equal (in size) but they are not: a share of 0.05004 against a
    0.05 threshold showed 0.05 and 0.05 on a failed check, and the alert said so."""
    value, bound = raw.get(key), raw.get(limit)
    if not (isinstance(value, float) and isinstance(bound, float)) \
            or abs(shown[key]) != abs(shown[limit]) or abs(value) == abs(bound):
        return shown
    for digits in range(3, 13):
        if round(abs(value), digits) != round(abs(bound), digits):
            return {**shown, key: round(value, digits)}
    return {**shown, key: value}


def rounded(metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` with its float figures rounded by what they are (from the key's name);
    lists and dicts of plain figures (JSON metadata before wrapping) likewise."""
    return {key: _rounded(key, value) for key, value in metadata.items()}


def _rounded(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return rounded(value)
    if isinstance(value, list):
        return [_rounded(key, v) for v in value]
    return rounded_figure(key, value)
