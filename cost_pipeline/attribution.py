"""The month's `attribution` (SPEC §6): the claims as temp tables, then the rows — a slice of
the month's lines at a time, so that memory holds a slice, not the month."""

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
    summarize_month,
)

# lines per slice: a slice's claims, periods and lines fit well inside the default 1200MB
SLICE_LINES = 2_000_000
_SLICE_TABLES = ("attribution_lines", "attribution_compute_lines", "attribution_claims",
                 "attribution_claimed")
_MONTH_TABLES = ("attribution_claimants", "attribution_run_resources",
                 "attribution_dated_snapshots", "attribution_listed_bytes",
                 "attribution_run_bytes")


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
            con.execute("DELETE FROM attribution_rows WHERE month = ?", [month])
            run_script(con, sql_text("attribution_prepare"), params)
            parts = slices(con, month, lines_per_slice)
            for number, (start, end) in enumerate(parts, start=1):
                bounds = {**params, "slice_start": start, "slice_end": end}
                run_script(con, sql_text("attribution_claims"), bounds)
                query(con, f"INSERT INTO attribution_rows BY NAME ({sql_text('attribution')})",
                      bounds)
                _drop(con, _SLICE_TABLES)
                if log is not None and len(parts) > 1:
                    log.info(f"attribution: slice {number} of {len(parts)} written")
            ((written,),) = con.execute(
                "SELECT count(*) FROM attribution_rows WHERE month = ?", [month]).fetchall()
            summarize_month(con, month)
    finally:
        # an error inside a run's transaction aborts it: only its rollback may run then
        if not in_run_transaction(con) or not _aborted(con):
            _drop(con, _SLICE_TABLES + _MONTH_TABLES)
    return int(written)


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
