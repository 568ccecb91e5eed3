"""Figures held against a policy limit (docs/tables.md, "Policy boundaries"): over means the
excess, to 10 decimal places (CUR's own precision for amounts), above 1e-12 of the figures'
size, so figures equal within the doubles' precision are equal at any size and a cent over
is over up to $1e9. The SQL checks' rule is assets/macros.sql `over_limit`; the retention
budget check and the report's flags use this one."""

from __future__ import annotations

# figures held against a limit are equal when they differ by at most this much of their size
LIMIT_PRECISION = 1e-12
# a search may cost up to 10 % more than its approved estimate (SPEC §12,
# `searches_within_estimate`)
ESTIMATE_TOLERANCE = 1.1


def over_limit(excess: float, size: float) -> bool:
    """`excess` (a figure minus its limit) is above the limit by more than the doubles'
    precision of `size` (the larger of the two figures): 1.1 × 1.13 reads
    1.2429999999999999, and a cost of 1.243 is not over it."""
    return round(excess, 10) > LIMIT_PRECISION * size


def over_estimate(cumulative_cost: float | None, estimated_cost: float | None,
                  tolerance: float = ESTIMATE_TOLERANCE) -> bool:
    """A search's cost to date is over `tolerance` × its recorded estimate (False when
    either is unknown)."""
    if cumulative_cost is None or estimated_cost is None:
        return False
    limit = tolerance * float(estimated_cost)
    cost = float(cumulative_cost)
    return over_limit(cost - limit, max(abs(cost), abs(limit)))
