"""Every table, nothing persisted: the pipeline's own readers and SQL run once on an in-memory
DuckDB — the bill, runs and listing read as `ingest` reads them, the attribution, the 15
decision tables, the reconciliation — with no Dagster, no warehouse file, no transaction to
commit, no check and no report. What the pipeline costs beyond this is its orchestration and
persistence; this is the floor that issue 14's "reference" stands for (one in-memory DuckDB
statement set computing the same tables), measured with our SQL rather than another's.

    python bench/in_memory.py DATA_DIR     # prints {"totals": {...}, "seconds": {...}} as JSON
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import duckdb
import impl_cli

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import load_config
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.ingest.checkpoints import build_checkpoint_inventory, read_listing
from cost_pipeline.ingest.runs import build_tracker_runs, runs_table
from cost_pipeline.warehouse import (
    dataset_rows,
    ensure_schema,
    month_params,
    register_datasets,
    replace_month,
    sql_text,
)

MONTH = date(2026, 7, 1)
# the decision tables in an order their dependencies allow (cost_levers reads the others,
# reconciliation reads untracked_usage); tests/cli/test_bench_smoke.py checks it against the
# job's assets
TABLES = ("untracked_usage", "cost_per_model_monthly", "search_costs", "retention_violations",
          "storage_by_run_status", "search_trend", "search_shape", "preprocessing_waste",
          "egress", "gpu_utilization", "showback", "run_costs", "retrain_cadence", "preemption",
          "cost_levers", "reconciliation")


def run(data: Path) -> dict:
    con, seconds = build(data)
    totals = dict(con.execute("SELECT purpose_class, sum(cost) FROM attribution_rows "
                              "WHERE month = ? GROUP BY 1", [MONTH]).fetchall())
    return {"totals": {k: float(v) for k, v in totals.items()},
            "query_seconds": round(seconds["total"], 3),
            "seconds": {k: round(v, 3) for k, v in seconds.items() if k != "total"}}


def build(data: Path) -> tuple[duckdb.DuckDBPyConnection, dict[str, float]]:
    """Every table of the month in `data` on an in-memory DuckDB, and each step's seconds
    (`total`: all of them)."""
    cfg = load_config(data / "config.yaml")
    log = logging.getLogger("in_memory")
    seconds: dict[str, float] = {}
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    ensure_schema(con)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:  # as `ingest` does
        runs = pool.submit(runs_table, cfg, log)
        listing = pool.submit(read_listing, cfg, MONTH, log)
        build_billing_facts(con, cfg, MONTH, log)
        build_tracker_runs(con, cfg, MONTH, log, runs=runs.result())
        build_checkpoint_inventory(con, cfg, MONTH, log, listing=listing.result())
    seconds["ingest"] = time.perf_counter() - t0
    params = month_params(cfg, MONTH)
    datasets = dataset_rows(cfg)
    t = time.perf_counter()
    build_attribution(con, MONTH, params, datasets)
    seconds["attribution"] = time.perf_counter() - t
    register_datasets(con, datasets)  # as each decision step does
    for table in TABLES:
        t = time.perf_counter()
        replace_month(con, table, MONTH, sql_text(table), params)
        seconds[table] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    return con, seconds


if __name__ == "__main__":
    impl_cli.main(run, __doc__)
