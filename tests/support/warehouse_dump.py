"""Whole-warehouse dumps for the fault and bad-input tests: every table's rows by month, each
row as its exact `repr` (floats to the last bit), sorted, so that two dumps are equal only when
the tables hold the same rows."""

from __future__ import annotations

import shutil
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

import duckdb

Dump = dict[str, dict[date, list[str]]]


def _rounded(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, list | tuple):
        return type(value)(_rounded(v, digits) for v in value)
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    return value


def dump(database: Path, exclude: dict[str, tuple[str, ...]] | None = None,
         float_digits: int | None = None) -> Dump:
    """{table: {month: sorted rows}} of every table; `exclude` drops columns per table
    (history timestamps that change on every read); `float_digits` rounds doubles to that
    many significant digits (two runs over the same rows may add doubles in another order:
    DuckDB's parallel sums differ in the last bit)."""
    out: Dump = {}
    with duckdb.connect(str(database), read_only=True) as con:
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type IN ('BASE TABLE', 'VIEW') ORDER BY 1").fetchall()]  # views: attribution
        for table in tables:
            dropped = (exclude or {}).get(table, ())
            select = f"* EXCLUDE ({', '.join(dropped)})" if dropped else "*"
            cursor = con.execute(f'SELECT month, {select} FROM "{table}"')
            by_month: dict[date, list[str]] = defaultdict(list)
            for row in cursor.fetchall():
                values = row[1:] if float_digits is None else _rounded(row[1:], float_digits)
                by_month[row[0]].append(repr(values))
            out[table] = {month: sorted(rows) for month, rows in by_month.items()}
    return out


def copy_with_warehouse(config: Path, target: Path) -> Path:
    """A copy of a materialized project folder (warehouse included, its lock file not);
    returns the copied config's path."""
    shutil.copytree(config.parent, target, ignore=shutil.ignore_patterns("*.lock", "reports"))
    return target / config.name
