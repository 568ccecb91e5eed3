"""Whole-warehouse dumps for the fault and bad-input tests: every table's rows by month, each
row as its exact `repr` (floats to the last bit), sorted, so that two dumps are equal only when
the tables hold the same rows."""

from __future__ import annotations

import shutil
from collections import defaultdict
from datetime import date
from pathlib import Path

import duckdb

Dump = dict[str, dict[date, list[str]]]


def dump(database: Path, exclude: dict[str, tuple[str, ...]] | None = None) -> Dump:
    """{table: {month: sorted rows}} of every table; `exclude` drops columns per table
    (history timestamps that change on every read)."""
    out: Dump = {}
    with duckdb.connect(str(database), read_only=True) as con:
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE' ORDER BY 1").fetchall()]
        for table in tables:
            dropped = (exclude or {}).get(table, ())
            select = f"* EXCLUDE ({', '.join(dropped)})" if dropped else "*"
            cursor = con.execute(f'SELECT month, {select} FROM "{table}"')
            by_month: dict[date, list[str]] = defaultdict(list)
            for row in cursor.fetchall():
                by_month[row[0]].append(repr(row[1:]))
            out[table] = {month: sorted(rows) for month, rows in by_month.items()}
    return out


def copy_with_warehouse(config: Path, target: Path) -> Path:
    """A copy of a materialized project folder (warehouse included, its lock file not);
    returns the copied config's path."""
    shutil.copytree(config.parent, target, ignore=shutil.ignore_patterns("*.lock", "reports"))
    return target / config.name
