"""Figures as the Dagster UI shows them: money to its currency's smallest unit (the cent, a
yen, a fils: `to_minor_unit`, half up as every text shows it), shares to 4 digits, hours to
3, so a reader sees `0.1032`, not `0.10318394393345327`. Rounded only here, for display: the
tables keep full precision and every pass/fail is decided before rounding."""

from __future__ import annotations

import math
import re
from typing import Any

from cost_pipeline.report.money import smallest, symbol_of

_HOURS = re.compile(r"hours")
_SHARE = re.compile(r"share|coverage|threshold|ratio|fraction|utilization")
_MONEY = re.compile(r"cost|delta|tolerance|attributed|untracked|unallocated|budget|dollars"
                    r"|price|amount|spend")


def to_minor_unit(value: Any, currency: str | None) -> Any:
    """`value` rounded half up to `currency`'s smallest unit (ISO 4217's minor unit: the cent,
    and of a bill that names no currency; a yen; a fils), as a float: the figure
    `in_currency` shows. None, NaN and ±infinity as they are: nothing to round."""
    if value is None or not math.isfinite(value):
        return value
    return float(smallest(value, symbol_of(currency)))


def rounded_figure(key: str, value: Any, currency: str | None = None) -> Any:
    """`value` rounded by what `key` names; an amount to `currency`'s smallest unit (the
    cent when it names none). Rounded once, from the exact figure: the command's lines and
    the alerts write it again in the currency, and a yen figure of 1234.4951 rounded to the
    cent first (1234.5) read JPY 1,235."""
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    name = key.lower()
    if _HOURS.search(name):
        shown = round(value, 3)
    elif _SHARE.search(name) or not _MONEY.search(name):
        shown = round(value, 4)
    else:
        return to_minor_unit(value, currency)
    # a figure under the last digit keeps its first three significant ones: 0.1 s of a GPU
    # on a resource no bill shows read "unbilled_claim_gpu_hours 0.0000" on a failed check
    return float(f"{value:.3g}") if shown == 0 and value != 0 else shown


def kept_apart(shown: dict[str, Any], raw: dict[str, Any], key: str,
               limit: str) -> dict[str, Any]:
    """`shown` (rounded) with `key` and `limit` to the digits that keep them apart when
    rounding made the two equal (in size) but they are not: a share of 0.05004 against a
    0.05 threshold showed 0.05 and 0.05 on a failed check, and the alert said so; in yen a
    delta of 0.3 and its 0.01 tolerance both showed 0."""
    value, bound = raw.get(key), raw.get(limit)
    if not (isinstance(value, float) and isinstance(bound, float)) \
            or abs(shown[key]) != abs(shown[limit]) or abs(value) == abs(bound):
        return shown
    for digits in range(3, 13):
        if round(abs(value), digits) != round(abs(bound), digits):
            return {**shown, key: round(value, digits), limit: round(bound, digits)}
    return {**shown, key: value, limit: bound}


def rounded(metadata: dict[str, Any], currency: str | None = None) -> dict[str, Any]:
    """`metadata` with its float figures rounded by what they are (from the key's name), its
    amounts in `currency`, else in the `currency` it carries (USD when neither names one);
    lists and dicts of plain figures (JSON metadata before wrapping) likewise."""
    if currency is None and isinstance(metadata.get("currency"), str):
        currency = metadata["currency"] or None
    return {key: _rounded(key, value, currency) for key, value in metadata.items()}


def _rounded(key: str, value: Any, currency: str | None) -> Any:
    if isinstance(value, dict):
        return rounded(value, currency)
    if isinstance(value, list):
        return [_rounded(key, v, currency) for v in value]
    return rounded_figure(key, value, currency)
