"""Money as people read it: in the bill's currency (BillingCurrency), to the cent. The one
formatter every table text, report, alert and command output uses; SQL text uses the
same rule through the `fmt_money(amount, currency)` macro (assets/macros.sql)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def cents(value) -> Decimal:
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def symbol_of(currency: str | None) -> str:
    """`$` for US dollars (or a bill that names no currency), else the ISO code and a space:
    `NOK 1,234.50` is unambiguous where `kr` or `$` (CAD, AUD …) is not."""
    code = (currency or "USD").strip().upper() or "USD"
    return "$" if code == "USD" else f"{code} "


def money(value, symbol: str) -> str:
    """`value` to the cent after `symbol` (from `symbol_of`), a minus sign before it."""
    if value is None:
        return "–"
    amount = cents(value)
    return f"{'−' if amount < 0 else ''}{symbol}{abs(amount):,.2f}"


def in_currency(value, currency: str | None) -> str:
    return money(value, symbol_of(currency))
