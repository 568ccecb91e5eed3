"""Source readers: each turns one configured input into rows of the normalized tables."""

from __future__ import annotations


class SourceError(ValueError):
    """Bad input: names the source, the file or table, and the row or field."""

    def __init__(self, source: str, where: str | None, problem: str):
        self.source, self.where, self.problem = source, where, problem
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


def source_names(entries: list, default: str = "") -> list[str]:
    """A distinct, stable name per configured entry: its `name`, else its kind (+ index)."""
    names: list[str] = []
    for i, entry in enumerate(entries):
        name = getattr(entry, "name", None) or entry.kind
        if name in names:
            name = f"{name}{i + 1}"
        names.append(name)
    return names


# the largest cost or quantity the warehouse sums exactly (the report's DECIMAL(38, 10)): an
# amount at or beyond it, or not finite (inf, NaN), is refused where it is read, named by its
# file, row and field, never left to fail a later step
MAX_AMOUNT = 1e28
MAX_AMOUNT_TEXT = "1e28"
# accelerators of one resource or run: far above any machine, far below INTEGER's range
MAX_ACCELERATORS = 1_000_000


def bad_amount_sql(expr: str) -> str:
    """SQL true when `expr` (a DOUBLE) is not a finite amount below MAX_AMOUNT."""
    return f"(NOT isfinite({expr}) OR abs({expr}) >= {MAX_AMOUNT_TEXT})"
