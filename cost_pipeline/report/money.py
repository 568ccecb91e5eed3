"""Money as people read it: in the bill's currency (BillingCurrency), to its smallest unit
(the cent of most, a yen, a fils). The one formatter every table text, report, alert and
command output uses; SQL text uses the same rule through the `fmt_money(amount, currency)`
macro (assets/macros.sql). And the percentages the reports and the printed bill show beside
it, with the same minus sign, rounded half up as it is."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal

CENT = Decimal("0.01")
# ISO 4217's minor units of the currencies not counted in hundredths; every other code (and
# a bill that names none) has two. `money` shows an amount to its currency's smallest unit
# (`JPY 1,235`, `KWD 38,272.669`); `fmt_money` in assets/macros.sql holds the same list
MINOR_UNITS = {
    **dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF",
                     "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}
# how a page says what its amounts are rounded to: ISO 4217's minor unit by name where one
# name is the usual, else by its decimals (`rounded_to`)
UNIT_NAMES = {"USD": "cent", "EUR": "cent", "JPY": "yen", "KRW": "won", "BHD": "fils",
              "IQD": "fils", "JOD": "fils", "KWD": "fils"}
DECIMALS_IN_WORDS = {0: "no decimals", 2: "two decimals", 3: "three decimals",
                     4: "four decimals"}
# digits enough for any double to the cent (the largest, ~1.8e308, has 309 before the point):
# the default context's 28 refused to round an amount from 1e26 on
_ANY_DOUBLE = Context(prec=330)


def half_up(value, step: Decimal) -> Decimal:
    """`value` rounded half up to `step` (`Decimal("0.01")`, `Decimal("0.001")`), however
    large; a value that is not a finite number (NaN, ±infinity) comes back as that Decimal,
    unrounded: there is nothing to round."""
    amount = Decimal(str(value))
    if not amount.is_finite():
        return amount
    return amount.quantize(step, rounding=ROUND_HALF_UP, context=_ANY_DOUBLE)


def cents(value) -> Decimal:
    """`value` rounded half up to the cent (`half_up`)."""
    return half_up(value, CENT)


def symbol_of(currency: str | None) -> str:
    """`$` for US dollars (or a bill that names no currency), else the ISO code and a space:
    `NOK 1,234.50` is unambiguous where `kr` or `$` (CAD, AUD …) is not."""
    code = (currency or "USD").strip().upper() or "USD"
    return "$" if code == "USD" else f"{code} "


def minor_digits(symbol: str) -> int:
    """The decimals of the currency `symbol` (from `symbol_of`) names: ISO 4217's minor unit."""
    return MINOR_UNITS.get(symbol.strip().upper(), 2)


def smallest(value, symbol: str) -> Decimal:
    """`value` rounded half up to the smallest unit of the currency `symbol` names (the cent,
    a yen, a fils: `minor_digits`), as `money` shows it: what decides whether an amount reads
    zero, and what rounded figures that must add up are rounded to."""
    return half_up(value, Decimal(1).scaleb(-minor_digits(symbol)))


def _written(value, symbol: str, digits: int) -> str:
    if value is None:
        return "–"
    amount = half_up(value, Decimal(1).scaleb(-digits))
    if amount.is_nan():
        return "–"
    if amount.is_infinite():
        return f"{'−' if amount < 0 else ''}{symbol}∞"
    return f"{'−' if amount < 0 else ''}{symbol}{abs(amount):,.{digits}f}"


def money(value, symbol: str) -> str:
    """`value` to its currency's smallest unit (the cent, a yen, a fils: `minor_digits`) after
    `symbol` (from `symbol_of`), a minus sign before it. A value that is not a number reads
    `–`, as a missing one; an infinite one `∞` (`fmt_money` alike)."""
    return _written(value, symbol, minor_digits(symbol))


def in_currency(value, currency: str | None) -> str:
    return money(value, symbol_of(currency))


def figure(value, currency: str | None) -> str:
    """`value` as `in_currency` writes it, without the symbol: a table whose header names the
    currency (`cost (JPY)`: `288,750`, `1.235` dinars)."""
    return _written(value, "", minor_digits(symbol_of(currency)))


def signed(value, symbol: str) -> str:
    """A change: `money` with a plus sign before a rise; one that reads zero has no sign."""
    text = money(value, symbol)
    if value is None or not smallest(value, symbol).is_finite():
        return text
    return f"+{text}" if smallest(value, symbol) > 0 else text


def money_apart(value, limit, symbol: str) -> tuple[str, str]:
    """`value` and `limit` as `money` writes them, or with as many more digits (up to six
    more) as tell them apart when they differ but read alike: a total of JPY 2,221.2 over a
    budget of JPY 2,221 read "JPY 2,221" twice (the checks' rule, `figures_apart`)."""
    digits = minor_digits(symbol)
    shown = money(value, symbol), money(limit, symbol)
    if shown[0] != shown[1] or value is None or limit is None \
            or Decimal(str(value)) == Decimal(str(limit)):
        return shown
    for more in range(digits + 1, digits + 7):
        shown = _written(value, symbol, more), _written(limit, symbol, more)
        if shown[0] != shown[1]:
            break
    return shown


def rounded_steps(start, amounts, symbol: str) -> list[Decimal]:
    """Steps from `start` (`start` + Σ `amounts` is the end) as they are shown: each the
    difference of the running totals rounded to the currency's smallest unit, so the shown
    start, steps and end add up exactly (the steps alone, rounded, may not)."""
    level, before, out = start, smallest(start, symbol), []
    for amount in amounts:
        level += amount
        shown = smallest(level, symbol)
        out.append(shown - before)
        before = shown
    return out


def not_finite(value) -> str | None:
    """How a figure that is not a finite number reads (as `money` writes one): `–` for none
    or NaN, `∞` or `−∞`; None for a finite figure."""
    if value is None or math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return None


def in_percent(fraction) -> Decimal:
    """`fraction` in percent, exactly: its shortest decimal form with the point moved two
    places (0.0515 is 5.15). The double `100 * fraction` is not: 100 × 0.0515 is 5.1499999…,
    which rounds to 5.1 where the figure's own digits say 5.2."""
    return Decimal(str(fraction)).scaleb(2)


def _percent_figure(fraction, digits: int) -> str:
    """`|fraction|` in percent to `digits` decimals, rounded half up (away from zero) as
    amounts are, from the figure's shortest form (`in_percent`): 0.5625 is 56.3, where
    Python's `:.1f` (half to even, on the double's binary value) wrote 56.2 beside a 43.75
    written 43.8."""
    return f"{half_up(abs(in_percent(fraction)), Decimal(1).scaleb(-digits)):.{digits}f}"


def percent_figure(fraction, digits: int = 1) -> str:
    """`fraction` in percent as `percent` rounds it, without the sign `%` and with an ASCII
    minus: a page's `data-*` attribute beside the figure it shows (`56.3`)."""
    text = not_finite(fraction)
    if text is not None:
        return text
    shown = _percent_figure(fraction, digits)
    return f"{'-' if fraction < 0 and any(c in '123456789' for c in shown) else ''}{shown}"


def percent(fraction, digits: int = 1) -> str:
    """`fraction` as a percentage to `digits` decimals, rounded half up (`_percent_figure`:
    43.75% and 56.25% read 43.8% and 56.3%, −12.25% −12.3%), a minus sign (`−`, as `money`)
    before a negative one; a negative that rounds to zero reads as zero, as a cent does."""
    text = not_finite(fraction)
    if text is not None:
        return text
    return percent_figure(fraction, digits).replace("-", "−") + "%"


MOST_CHANGE_DIGITS = 6


def change_percent(fraction, digits: int = 0, limit=None) -> str:
    """`fraction` as a signed change in percent (an estimate's overrun, or the share of it a
    search fell short by): `+` before a rise, `−` (as `money`) before a fall, exactly 0 with
    no sign. To `digits` decimals, rounded half up as `percent`, one more at a time (up to
    MOST_CHANGE_DIGITS) while the figure would read 100 % or 0 % and is not: $41 against a
    $15,156.47 estimate is −99.7 %, where whole percents said −100 %, as if nothing was
    spent. One that reads 100 % or 0 % even then is that, to a double's crumbs, and reads
    so with `digits` decimals. With `limit` (a fraction: the 10 % over its estimate a search
    may cost), likewise while it would read as the limit it is not: 10.0004 % over, flagged,
    read "+10%"."""
    text = not_finite(fraction)
    if text is not None:
        return text
    shown = _percent_figure(fraction, digits)
    alike = {Decimal(0), Decimal(100)} | ({abs(in_percent(limit))} if limit is not None else set())
    if abs(in_percent(fraction)) not in alike - {Decimal(0)}:
        for more in range(digits, MOST_CHANGE_DIGITS + 1):
            if Decimal(_percent_figure(fraction, more)) not in alike:
                shown = _percent_figure(fraction, more)
                break
    if Decimal(shown) == 0:
        return f"{shown}%"
    return f"{'−' if fraction < 0 else '+'}{shown}%"


def shares_shown(parts, whole, symbol: str = "$") -> bool:
    """Whether the parts of a split of `whole` (all of them: the classes of a month, the months
    of a period, the lines of a bill) read as shares of it: only when `whole` to its
    currency's smallest unit (`symbol`'s, the cent when none is named) is above zero and no
    part is below zero. Credits larger than the usage make a total negative, and a share of
    it (−23%, 116%) reads backwards; credits that only shrink it leave it positive, and the
    shares read backwards all the same ($100 of $20: 500%, the credit −450%); a total that
    reads $0.00 (JPY 0) makes any share of it absurd (the headline's rule)."""
    if whole is None or not (whole > 0 and smallest(whole, symbol) > 0):
        return False
    return not any(p is not None and smallest(p, symbol) < 0 for p in parts)


def share(part, whole, digits: int = 1, symbol: str = "$", split=()) -> str:
    """`part` as a share of `whole`, or `–` unless `shares_shown` of the split: `part` and
    the split's other parts (`split`: each split passes them all, so that every share of it
    reads `–` alike)."""
    if part is None or not shares_shown([part, *split], whole, symbol):
        return "–"
    return percent(part / whole, digits)


WHOLE = 1e-9  # a GPU-hour figure this close to a whole number is whole (float sums' crumbs)
MOST_HOUR_DIGITS = 3


def gpu_hours_alike(*hours) -> list[str]:
    """The GPU-hour figures of one statement (tracked, untracked, billed …) as it writes them,
    with one number of decimals: none when every one is whole (`1,000 of 2,728`), else one,
    more (up to 3) only while a figure that is not zero would read 0 (`0.04`). Whole hours
    printed as `0 of 1` hid a 0.4 of 1.0 that failed the threshold. None reads `–`."""
    known = [float(h) for h in hours if h is not None and math.isfinite(h)]
    digits = 0
    if any(abs(h - round(h)) > WHOLE for h in known):
        digits = 1
        while digits < MOST_HOUR_DIGITS and any(
                h and float(f"{abs(h):.{digits}f}") == 0 for h in known):
            digits += 1
    out = []
    for h in hours:
        text = "–" if h is None else not_finite(h)
        if text is None:
            shown = f"{abs(h):,.{digits}f}"
            text = ("−" if h < 0 and any(c in "123456789" for c in shown) else "") + shown
        out.append(text)
    return out


def rounded_to(symbol: str) -> str:
    """What a page's footer says its amounts in the currency `symbol` (from `symbol_of`) are
    rounded to, by the currency's minor unit: "Amounts are shown to the cent …" over whole
    yen was wrong. The cent, the yen (no decimals), the fils (three decimals); a currency
    without a usual name for its unit by its decimals (whole units, four decimals)."""
    code = "USD" if symbol == "$" else symbol.strip().upper()
    digits = minor_digits(symbol)
    unit = UNIT_NAMES.get(code)
    if unit is None:
        unit = "unit" if digits == 0 else "unit of the last decimal"
        shown = "whole units" if digits == 0 else DECIMALS_IN_WORDS.get(digits,
                                                                        f"{digits} decimals")
    else:
        shown = f"the {unit}" if digits == 2 else \
            f"the {unit} ({DECIMALS_IN_WORDS.get(digits, f'{digits} decimals')})"
    return (f"Amounts are shown to {shown}; a total is the exact sum, rounded once, so the "
            f"rounded figures above it may add up to a {unit} or two apart.")
