"""The write-back to the experiment tracker: each `mlflow` tracker with `write_back: true` gets
the `cost.*` tags of SPEC §12 on its runs (ingest/sources/mlflow_tags.py), after the month's
`run_costs`.

An asset of its own, so a failed write-back (the tracker down) shows as this step's failure and
is retried alone, without recomputing the month. It reads `run_costs` on the run's own
connection — the month as this run wrote it, not yet committed — and talks to MLflow only
after leaving that connection: an error here fails this step, never the warehouse's
transaction, so the month's tables still commit. The converse is accepted: when a later step
of the same run fails and the month rolls back, the tags already say what this run computed;
the next successful materialization of the month brings them back in line (it rewrites only
tags whose value differs)."""

from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.config import MlflowTracker
from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings
from cost_pipeline.ingest.sources import source_names
from cost_pipeline.ingest.sources.mlflow_runs import resolve_tracking_uri

COUNTS = ("runs_written", "tags_written", "runs_unchanged", "runs_cleared", "tags_deleted",
          "runs_skipped_deleted", "runs_skipped_not_in_tracker")


def store_of(tracker, base_dir: Path) -> str | None:
    """The MLflow store a tracker reads (its tracking URI as resolved, without a trailing
    slash); None for a tracker that is no MLflow store (a runs file)."""
    if not isinstance(tracker, MlflowTracker):
        return None
    return resolve_tracking_uri(tracker.tracking_uri, base_dir).rstrip("/")


@dg.asset(
    partitions_def=monthly,
    group_name="tracker",
    kinds={"mlflow"},
    owners=["team:ml-platform"],
    deps=["run_costs"],
    code_version=code_version(("run_cost_tags",), (
        "cost_pipeline.defs.assets.tracker_tags", "cost_pipeline.ingest.sources.mlflow_tags")),
    description="The runs' cost (summed over every month of the warehouse) as `cost.*` tags "
    "in each MLflow tracker configured with `write_back: true`; unchanged tags are not "
    "rewritten, stale ones (a run without cost now) deleted, deleted runs are skipped; "
    "trackers on one store share their runs' tags.",
)
def tracker_cost_tags(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg = settings.load()
    targets = [(name, t) for name, t in zip(source_names(cfg.tracker), cfg.tracker, strict=True)
               if isinstance(t, MlflowTracker) and t.write_back]
    if not targets:
        return dg.MaterializeResult(metadata={"trackers": "none with write_back: true"})
    from cost_pipeline.ingest.sources.mlflow_tags import cost_tags_by_run, write_cost_tags

    names = source_names(cfg.tracker)
    from cost_pipeline.warehouse import ensure_schema

    with duckdb.get_connection() as con:
        # the macros its query reads: this step may run alone (the UI's "materialize")
        ensure_schema(con)
        costs = cost_tags_by_run(con)
        # a run two trackers know is kept as the first tells it (runs.collect_runs): its cost
        # is that run's, not the run of the same id in another store
        kept_from = dict(con.execute(
            "SELECT run_id, source FROM tracker_runs "
            "QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY month DESC) = 1"
        ).fetchall())
    # outside the connection: a tracker that fails fails this step, not the month's commit
    stores = {name: store_of(t, cfg.base_dir) for name, t in zip(names, cfg.tracker,
                                                                 strict=True)}
    totals = dict.fromkeys(COUNTS, 0)
    per_tracker = {}
    for name, tracker in targets:
        # a run kept from another tracker on the same store is this store's run too: its
        # tags are written (unchanged when that tracker wrote them), never deleted as stale
        same_store = {n for n, store in stores.items() if store == stores[name]}
        elsewhere = set(names) - same_store
        mine = {run_id: tags for run_id, tags in costs.items()
                if kept_from.get(run_id) not in elsewhere}
        shared = {run_id for run_id in mine if kept_from.get(run_id) in same_store - {name}}
        done = write_cost_tags(resolve_tracking_uri(tracker.tracking_uri, cfg.base_dir), name,
                               mine, experiments=tracker.experiments, tags=tracker.tags,
                               log=context.log, shared=shared)
        per_tracker[name] = {k: getattr(done, k) for k in COUNTS}
        for k in COUNTS:
            totals[k] += getattr(done, k)
    return dg.MaterializeResult(metadata={
        **totals,
        "runs_with_cost": len(costs),
        "trackers": dg.MetadataValue.json(per_tracker),
    })
