"""All configured trackers → the month's `tracker_runs` snapshot (every run they know)."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa

from .config import MlflowTracker, PipelineConfig, RunsFileTracker
from .sources import SourceError, source_names
from .sources.mlflow_runs import read_mlflow_runs, resolve_tracking_uri
from .sources.runs_file import RUN_COLUMNS, read_runs
from .warehouse import replace_month

RUN_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("source", pa.string()), ("experiment", pa.string()),
    ("model", pa.string()), ("purpose", pa.string()), ("search_id", pa.string()),
    ("seed", pa.string()), ("config_id", pa.string()), ("status", pa.string()),
    ("start_time", pa.timestamp("us")), ("end_time", pa.timestamp("us")),
    ("resource_ids", pa.list_(pa.string())), ("gpus", pa.int32()), ("region", pa.string()),
    ("dataset", pa.string()), ("dataset_region", pa.string()), ("input_hash", pa.string()),
    ("transform_version", pa.string()), ("metric_name", pa.string()),
    ("metric_value", pa.float64()), ("keep", pa.bool_()), ("deleted", pa.bool_()),
    ("parent_run_id", pa.string()), ("team", pa.string()), ("gpu_utilization", pa.float64()),
])
assert tuple(RUN_SCHEMA.names) == RUN_COLUMNS


def collect_runs(cfg: PipelineConfig, log: logging.Logger) -> list[dict]:
    runs: dict[str, dict] = {}
    for name, tracker in zip(source_names(cfg.tracker), cfg.tracker, strict=True):
        if isinstance(tracker, RunsFileTracker):
            found = read_runs(Path(cfg.resolve(tracker.path)), name)
        elif isinstance(tracker, MlflowTracker):
            found = read_mlflow_runs(
                resolve_tracking_uri(tracker.tracking_uri, cfg.base_dir), name,
                experiments=tracker.experiments, metric=tracker.metric, tags=tracker.tags,
                log=log)
        else:
            raise SourceError(name, None, f"tracker kind {tracker.kind!r} is not supported yet")
        log.info(f"{name}: {len(found)} run(s)")
        for run in found:
            if run["run_id"] in runs:
                log.warning(f"{name}: run {run['run_id']} also comes from "
                            f"{runs[run['run_id']]['source']}; the first one is kept")
                continue
            runs[run["run_id"]] = run
    return list(runs.values())


def runs_table(cfg: PipelineConfig, log: logging.Logger) -> pa.Table:
    """Every configured tracker's runs as one Arrow table (RUN_SCHEMA)."""
    return pa.Table.from_pylist(collect_runs(cfg, log), schema=RUN_SCHEMA)


def build_tracker_runs(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    runs: pa.Table | None = None,
) -> int:
    """Write the month's snapshot of `runs` (default: read the trackers now)."""
    con.register("runs_arrow", runs_table(cfg, log) if runs is None else runs)
    try:
        return replace_month(
            con, "tracker_runs", month,
            "SELECT CAST($month AS DATE) AS month, * FROM runs_arrow", {"month": month},
        )
    finally:
        con.unregister("runs_arrow")
