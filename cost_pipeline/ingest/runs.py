"""All configured trackers → the month's `tracker_runs` snapshot (every run they know)."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from cost_pipeline.config import MlflowTracker, PipelineConfig, RunsFileTracker
from cost_pipeline.ingest.sources import SourceError, first_named, source_names
from cost_pipeline.ingest.sources.mlflow_runs import (
    read_mlflow_runs_with_ids,
    resolve_tracking_uri,
)
from cost_pipeline.ingest.sources.runs_file import RUN_SCHEMA
from cost_pipeline.ingest.sources.runs_file_sql import read_runs_table
from cost_pipeline.warehouse import (
    ensure_schema,
    register_once,
    replace_month_unless_identical,
    unregister,
)

# a run's measurements as every reader takes them: a metric or GPU utilization that is not a
# finite number is no measurement (NULL). MLflow stores NaN for a metric a diverged run logged,
# a runs file may say `nan`: kept as NaN, it made a search's best metric, improvement and cost
# per improvement NaN, and the report's money() raised on it
MEASURED_RUN_COLUMNS = ("* REPLACE (CASE WHEN isfinite(metric_value) THEN metric_value END "
                        "AS metric_value, CASE WHEN isfinite(gpu_utilization) "
                        "THEN gpu_utilization END AS gpu_utilization)")
# an MLflow tracker's runs carry, after RUN_SCHEMA's columns, each run's MLflow run id: the
# write-back tags the run that bore the id in the month, renamed since or not. A runs file has
# none (NULL); nor have months written before the column
TRACKER_RUN_UUID = "tracker_run_uuid"
SEARCHES_NAMED = 5   # search ids a warning of trials without their search's id names


def collect_runs(cfg: PipelineConfig, log: logging.Logger) -> pa.Table:
    """Every configured tracker's runs (RUN_SCHEMA, and `tracker_run_uuid` when an MLflow
    tracker is configured: NULL on a runs file's runs); a run two trackers know is kept as
    the first one tells it."""
    kept: list[pa.Table] = []
    for name, tracker in zip(source_names(cfg.tracker), cfg.tracker, strict=True):
        if isinstance(tracker, RunsFileTracker):
            found = read_runs_table(Path(cfg.resolve(tracker.path)), name)
        elif isinstance(tracker, MlflowTracker):
            rows, uuids = read_mlflow_runs_with_ids(
                resolve_tracking_uri(tracker.tracking_uri, cfg.base_dir), name,
                experiments=tracker.experiments, metric=tracker.metric, tags=tracker.tags,
                log=log)
            found = pa.Table.from_pylist(rows, schema=RUN_SCHEMA).append_column(
                TRACKER_RUN_UUID, pa.array(uuids, pa.string()))
        else:
            raise SourceError(name, None, f"tracker kind {tracker.kind!r} is not supported yet")
        log.info(f"{name}: {found.num_rows} run(s)")
        _warn_untagged_trials(found, name, log)
        if kept:
            known = pa.concat_tables(kept, promote_options="default")
            known_ids = known["run_id"].combine_chunks()
            again = pc.is_in(found["run_id"], value_set=known_ids)
            if pc.any(again).as_py():
                repeated = found.filter(again)["run_id"]
                first = known["source"].take(pc.index_in(repeated, value_set=known_ids))
                for run_id, first_source in zip(repeated.to_pylist(), first.to_pylist(),
                                                strict=True):
                    log.warning(f"{name}: run {run_id} also comes from {first_source}; "
                                "the first one is kept")
                found = found.filter(pc.invert(again))
        kept.append(found)
    # (a runs file's runs get a NULL `tracker_run_uuid` beside an MLflow tracker's)
    return (pa.concat_tables(kept, promote_options="default") if kept
            else RUN_SCHEMA.empty_table())


def _warn_untagged_trials(runs: pa.Table, source: str, log: logging.Logger) -> None:
    """Nested sweeps (hyperopt, Optuna's MLflow callback) tag the parent run with the
    search_id and model and each trial only with its parent: the trials are no runs of the
    search (SPEC §4 reads a run's columns from its own tags, nothing is inherited) and the
    search costs its parent's share alone. Said once per tracker: runs without a search_id
    or a purpose of their own (an `eval` child is meant) under a parent having one."""
    with_search = runs.filter(pc.is_valid(runs["search_id"]))
    if not with_search.num_rows:
        return
    parents = with_search["run_id"].combine_chunks()
    own_purpose = pc.fill_null(pc.not_equal(runs["purpose"], "search"), False)
    untagged = runs.filter(pc.and_(
        pc.and_(pc.is_null(runs["search_id"]), pc.invert(own_purpose)),
        pc.fill_null(pc.is_in(runs["parent_run_id"], value_set=parents), False)))
    if not untagged.num_rows:
        return
    searches = sorted(set(with_search["search_id"].take(
        pc.index_in(untagged["parent_run_id"], value_set=parents)).to_pylist()))
    log.warning(f"{source}: {untagged.num_rows:,} runs whose parent has a search_id "
                f"({first_named(searches, SEARCHES_NAMED)}) "
                "carry none themselves: they are not counted as its trials; tag each trial "
                "with its search_id (and model)")


def runs_table(cfg: PipelineConfig, log: logging.Logger) -> pa.Table:
    """Every configured tracker's runs as one Arrow table (`collect_runs`)."""
    return collect_runs(cfg, log)


def build_tracker_runs(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    runs: pa.Table | None = None,
) -> int:
    """Write the month's snapshot of `runs` (default: read the trackers now); the rows."""
    return write_tracker_runs(con, cfg, month, log, runs)[0]


def write_tracker_runs(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    runs: pa.Table | None = None, keep_identical: bool = True,
) -> tuple[int, bool]:
    """`build_tracker_runs`, and whether the month already held exactly these runs and kept
    them unwritten (`keep_identical`: `materialize --force` writes them again)."""
    runs = runs_table(cfg, log) if runs is None else runs
    if keep_identical:
        _refuse_emptied_trackers(con, cfg, month, runs)
    once = _check_run_ids(runs)
    register_once(con, "runs_arrow", runs)
    try:
        # one row per run (SPEC §4), which every reader relies on (macros.sql `month_runs`):
        # the readers above already keep a run once, so this only guards the table
        select = (f"SELECT CAST($month AS DATE) AS month, {MEASURED_RUN_COLUMNS} "
                  "FROM runs_arrow" + ("" if once else
                  " QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY source NULLS LAST, "
                  "start_time) = 1"))
        rows, kept = replace_month_unless_identical(con, "tracker_runs", month, select,
                                                    {"month": month}, "tracker",
                                                    keep_identical, key="run_id")
        if kept:
            log.info(f"tracker_runs: the month's {rows} run(s) are as stored: kept")
        return rows, kept
    finally:
        unregister(con, "runs_arrow")


def _refuse_emptied_trackers(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date,
                             runs: pa.Table) -> None:
    """A configured tracker that now hands over no run, where the month holds runs from it (a
    runs file cut to its header, a path moved to an empty store), is refused as an emptied
    bill is: its runs replaced by none left every line untracked. `materialize --force`
    (keep_identical false) empties it."""
    ensure_schema(con)
    held = dict(con.execute("SELECT source, count(*) FROM tracker_runs WHERE month = ? "
                            "GROUP BY source", [month]).fetchall())
    handed = set(pc.unique(runs["source"]).to_pylist()) if runs.num_rows else set()
    for name in source_names(cfg.tracker):
        if held.get(name) and name not in handed:
            raise SourceError(name, f"{month:%Y-%m}", (
                f"the tracker holds no run, where the warehouse holds {held[name]:,} of the "
                "month's from it: its file emptied or a path moved? The month keeps its "
                "runs; `materialize --force` empties them"))


def _check_run_ids(runs: pa.Table) -> bool:
    """attribution_rows names a run by hash(run_id, reverse(run_id)) (macros.sql `key_hash`):
    two run ids sharing one (about a one-in-a-hundred-million chance for a month of 100,000
    runs; DuckDB's hash of the id alone is far weaker on ids differing in a few digits) would
    mix their rows.
    Whether every run id comes once — counted on a connection of its own, which lets go of
    the table when it closes."""
    with duckdb.connect() as check:
        check.register("runs_arrow", runs)
        ((rows, ids, hashes),) = check.execute(
            "SELECT count(*), count(DISTINCT run_id), "
            "count(DISTINCT hash(run_id, reverse(run_id))) "
            "FROM runs_arrow").fetchall()
        if ids == hashes:
            return rows == ids
        ((source, run_ids),) = check.execute(
            "SELECT min(source), list(DISTINCT run_id ORDER BY run_id) FROM runs_arrow "
            "GROUP BY hash(run_id, reverse(run_id)) HAVING count(DISTINCT run_id) > 1 "
            "ORDER BY 2 LIMIT 1"
        ).fetchall()
    raise SourceError(source or "tracker", "run_id",
                      f"run ids {' and '.join(run_ids[:2])} share a 64-bit hash, which the "
                      "attribution keys runs by: this month cannot be attributed")
