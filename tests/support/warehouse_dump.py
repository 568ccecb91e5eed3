"""Whole-warehouse dumps for the fault and bad-input tests: every table's rows by month, each
row as its JSON text (DuckDB's `to_json`: doubles to the last bit, −0.0 apart from 0.0, NULL
apart from 'NULL'), sorted, so that two dumps are equal only when the tables hold the same
rows."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import duckdb

Dump = dict[str, dict[date, list[str]]]


def dump(database: Path, exclude: dict[str, tuple[str, ...]] | None = None) -> Dump:
    """{table: {month: sorted rows}} of every table; `exclude` drops columns per table
    (history timestamps that change on every read). The rows are written out and sorted by
    DuckDB: a demo quarter (51,000 rows) in ~0.25 s, where Python's `repr` of each row took
    ~0.75 s."""
    out: Dump = {}
    with duckdb.connect(str(database), read_only=True) as con:
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type IN ('BASE TABLE', 'VIEW') ORDER BY 1").fetchall()]  # views: attribution
        for table in tables:
            dropped = (exclude or {}).get(table, ())
            select = f"* EXCLUDE ({', '.join(dropped)})" if dropped else "*"
            out[table] = dict(con.execute(
                f'SELECT month, list(row ORDER BY row) FROM (SELECT month, to_json(t) AS row '
                f'FROM (SELECT {select} FROM "{table}") AS t) GROUP BY month').fetchall())
    return out


def copy_with_warehouse(config: Path, target: Path) -> Path:
    """A copy of a materialized project folder (warehouse included, its lock file not);
    returns the copied config's path."""
    shutil.copytree(config.parent, target, ignore=shutil.ignore_patterns("*.lock", "reports"))
    return target / config.name
