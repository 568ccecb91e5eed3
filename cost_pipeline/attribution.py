"""The month's `attribution` (SPEC §6): the claims as temp tables, then the rows — a slice of
the month's lines at a time, so that memory holds a slice, not the month — and beside them
the temp table `attribution_by_run`, the rows summed per run and line group, which the
derived tables read (`assets/attribution/attribution_by_run.sql`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

import duckdb

from cost_pipeline.warehouse import (
    ensure_schema,
    in_run_transaction,
    month_transaction,
    query,
    run_script,
    sql_text,
)

# lines per slice: a slice's claims, periods and lines fit well inside the default 1200MB
SLICE_LINES = 2_000_000
_SLICE_TABLES = ("attribution_lines", "attribution_compute_lines", "attribution_claims",
                 "attribution_claimed")
_MONTH_TABLES = ("attribution_claimants", "attribution_run_resources",
                 "attribution_dated_snapshots", "attribution_listed_bytes",
                 "attribution_run_bytes")
BY_RUN = "attribution_by_run"
# which month's attribution the connection's `attribution_by_run` holds: (rows, Σ cost)
_BY_RUN_BUILT = "attribution_by_run_built"
_ALL_LINES = {"slice_start": datetime.min, "slice_end": datetime.max}


def slices(con: duckdb.DuckDBPyConnection, month: date,
           lines_per_slice: int = SLICE_LINES) -> list[tuple[datetime, datetime]]:
    """[start, end) bounds on ChargePeriodStart cutting the month's lines into slices of about
    `lines_per_slice` (lines starting at the same moment stay in one slice); the first
    starts at -infinity and the last ends at +infinity, so that every line is in one."""
    (lines,) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                           [month]).fetchone()
    count = max(1, -(-lines // lines_per_slice))
    cuts: list[datetime] = []
    if count > 1:
        (quantiles,) = con.execute(
            "SELECT quantile_disc(ChargePeriodStart, ?) FROM billing_facts WHERE month = ?",
            [[i / count for i in range(1, count)], month]).fetchone()
        cuts = sorted(set(quantiles))
    low, high = datetime.min, datetime.max
    bounds = [low, *cuts, high]
    return list(zip(bounds, bounds[1:], strict=False))


def build_attribution(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                      datasets: Iterable[tuple[str, str, str]] = (),
                      log: logging.Logger | None = None,
                      lines_per_slice: int = SLICE_LINES) -> int:
    """Replace the month's attribution, atomically; `datasets` are the config's (name, bucket,
    region). Returns the rows written."""
    ensure_schema(con)
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    rows = list(datasets)
    if rows:   # DuckDB's executemany refuses an empty list
        con.executemany("INSERT INTO config_datasets VALUES (?, ?, ?)", rows)
    try:
        with month_transaction(con):
            con.execute("DELETE FROM attribution WHERE month = ?", [month])
            _clear_by_run(con, month)
            run_script(con, sql_text("attribution_prepare"), params)
            parts = slices(con, month, lines_per_slice)
            rows_sql = sql_text("attribution")
            for number, (start, end) in enumerate(parts, start=1):
                bounds = {**params, "slice_start": start, "slice_end": end}
                run_script(con, sql_text("attribution_claims"), bounds)
                query(con, "INSERT INTO attribution BY NAME "
                      f"SELECT * EXCLUDE (line_key) FROM ({rows_sql}\n)", bounds)
                _group_by_run(con, rows_sql, bounds)
                _drop(con, _SLICE_TABLES)
                if log is not None and len(parts) > 1:
                    log.info(f"attribution: slice {number} of {len(parts)} written")
            ((written,),) = con.execute("SELECT count(*) FROM attribution WHERE month = ?",
                                        [month]).fetchall()
            _mark_by_run(con, month)
    finally:
        # an error inside a run's transaction aborts it: only its rollback may run then
        if not in_run_transaction(con) or not _aborted(con):
            _drop(con, _SLICE_TABLES + _MONTH_TABLES)
    return int(written)


def ensure_attribution_by_run(con: duckdb.DuckDBPyConnection, month: date) -> None:
    """Make the connection's `attribution_by_run` hold `month`'s `attribution`, as it is now:
    kept when the attribution step built it on this connection (the month's rows and Σ cost
    unchanged since), else built from the table — rows joined back to their lines."""
    if _by_run_current(con, month):
        return
    _clear_by_run(con, month)
    keyed = ("SELECT a.*, b.rowid AS line_key FROM attribution a LEFT JOIN billing_facts b "
             "ON b.month = a.month AND b.x_SourceLine = a.x_SourceLine WHERE a.month = $month")
    _group_by_run(con, keyed, {"month": month, **_ALL_LINES})
    _mark_by_run(con, month)


def _group_by_run(con: duckdb.DuckDBPyConnection, keyed_sql: str,
                  params: dict[str, Any]) -> None:
    """Add the groups of the rows of `keyed_sql` (attribution rows with their `line_key`)."""
    grouped = f"WITH attribution_keyed AS ({keyed_sql}\n) {sql_text(BY_RUN)}"
    query(con, f"INSERT INTO {BY_RUN} BY NAME ({grouped}\n)", params)


def _clear_by_run(con: duckdb.DuckDBPyConnection, month: date) -> None:
    if not _exists(con, BY_RUN):
        none = "SELECT *, CAST(NULL AS BIGINT) AS line_key FROM attribution LIMIT 0"
        empty = f"WITH attribution_keyed AS ({none}) {sql_text(BY_RUN)}"
        query(con, f"CREATE TEMP TABLE {BY_RUN} AS SELECT * FROM ({empty}\n) LIMIT 0",
              {"month": month, **_ALL_LINES})
        con.execute(f"CREATE TEMP TABLE {_BY_RUN_BUILT} "
                    "(month DATE, attribution_rows BIGINT, micro_cost HUGEINT)")
    con.execute(f"DELETE FROM {BY_RUN} WHERE month = ?", [month])
    con.execute(f"DELETE FROM {_BY_RUN_BUILT} WHERE month = ?", [month])


def _stamp(con: duckdb.DuckDBPyConnection, month: date) -> tuple:
    # an integer sum: the same whatever order DuckDB's threads add the rows in
    return con.execute("SELECT count(*), coalesce(sum(CAST(round(cost * 1e6) AS HUGEINT)), 0) "
                       "FROM attribution WHERE month = ?", [month]).fetchall()[0]


def _mark_by_run(con: duckdb.DuckDBPyConnection, month: date) -> None:
    con.execute(f"INSERT INTO {_BY_RUN_BUILT} VALUES (?, ?, ?)", [month, *_stamp(con, month)])


def _by_run_current(con: duckdb.DuckDBPyConnection, month: date) -> bool:
    if not _exists(con, _BY_RUN_BUILT):
        return False
    built = con.execute(f"SELECT attribution_rows, micro_cost FROM {_BY_RUN_BUILT} "
                        "WHERE month = ?", [month]).fetchall()
    return bool(built) and tuple(built[0]) == tuple(_stamp(con, month))


def _exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    ((found,),) = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary "
                              "AND table_name = ?", [table]).fetchall()
    return bool(found)


def _drop(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> None:
    for table in tables:
        con.execute(f"DROP TABLE IF EXISTS {table}")


def _aborted(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection's transaction failed (nothing but a rollback runs then)."""
    try:
        con.execute("SELECT 1").fetchall()
    except duckdb.Error:
        return True
    return False
