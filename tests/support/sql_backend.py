"""The production attribution / reconciliation SQL behind the oracle's call signatures, so
the same hand-computed cases and random cases run against both."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb

from cost_pipeline.attribution import SLICE_LINES, build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.support.warehouse_rows import (
    BILLING_DEFAULTS,
    INVENTORY_DEFAULTS,
    RUN_DEFAULTS,
    insert_lines,
    insert_listing,
    insert_runs,
)


def table_rows(con, table: str) -> list[dict]:
    cur = con.execute(f"SELECT * FROM {table}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def loaded(lines, runs, inventory, month: date) -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse holding the month's lines, runs and listed objects (each row
    completed with the defaults); an object whose `key` is None is a dated report listing no
    object (a `checkpoint_snapshots` row)."""
    con = duckdb.connect()
    insert_lines(con, month, [{**BILLING_DEFAULTS, **ln} for ln in lines])
    insert_runs(con, month, [{**RUN_DEFAULTS, **r} for r in runs])
    insert_listing(con, month, [{**INVENTORY_DEFAULTS, **o} for o in inventory])
    return con


def run_month(lines, runs, inventory, datasets, month: date, run_tag="run_id",
              threshold=0.05, lines_per_slice=SLICE_LINES) -> duckdb.DuckDBPyConnection:
    cfg = parse_config({"run_tag": run_tag, "datasets": datasets or {},
                        "policy": {"reconciliation": {"max_untracked_share": threshold}}},
                       Path("."))
    con = loaded(lines, runs, inventory, month)
    params = month_params(cfg, month)
    build_attribution(con, month, params, [(name, ds["bucket"], ds["region"])
                                           for name, ds in (datasets or {}).items()],
                      lines_per_slice=lines_per_slice)
    replace_month(con, "reconciliation", month, sql_text("reconciliation"), params)
    return con


def attribute(lines, runs, inventory, datasets, month, run_tag="run_id") -> list[dict]:
    con = run_month(lines, runs, inventory, datasets, month, run_tag)
    return table_rows(con, "attribution")


def reconcile(lines, attribution_rows, runs, month, threshold, run_tag="run_id") -> dict:
    con = run_month(lines, runs, [], {}, month, run_tag, threshold)
    return table_rows(con, "reconciliation")[0]
