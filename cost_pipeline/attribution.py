"""The month's `attribution` (SPEC §6): the claims as temp tables, then the rows."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

import duckdb

from .warehouse import replace_month, run_script, sql_text

_TEMP_TABLES = ("attribution_lines", "attribution_claimants", "attribution_compute_lines",
                "attribution_run_resources", "attribution_claims", "attribution_claimed")


def build_attribution(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                      datasets: Iterable[tuple[str, str, str]] = ()) -> int:
    """Write the month's attribution; `datasets` are the config's (name, bucket, region).
    Returns the rows written."""
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    rows = list(datasets)
    if rows:   # DuckDB's executemany refuses an empty list
        con.executemany("INSERT INTO config_datasets VALUES (?, ?, ?)", rows)
    try:
        run_script(con, sql_text("attribution_claims"), params)
        return replace_month(con, "attribution", month, sql_text("attribution"), params)
    finally:
        for table in _TEMP_TABLES:
            con.execute(f"DROP TABLE IF EXISTS {table}")
