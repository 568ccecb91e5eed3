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
tags whose value differs).

A month's cost of a run goes to the MLflow run that month's tracker snapshot recorded for it
(`tracker_runs.tracker_run_uuid`), under whatever name it bears now: a run renamed since keeps
its cost, a new run given its old name gets none. A month without the record (a runs file, a
month written before it) goes to the run bearing the run id now, as it did before.

Every tracker's runs are listed before any is written, so the MLflow runs that have a cost
are known by their own ids: a run another tracker of the materialization gives a cost is
never cleared as stale, whatever URI each spells the server with (`127.0.0.1` and
`localhost`, a proxy). The warehouse records, per store, the runs whose tags the write-back
wrote (`tracker_tagged_runs`): only those are ever cleared, so a user's own tag under one of
the names, on a run never costed, stays. A store with no record yet (a warehouse made before
it, or the store's first write-back into it) takes as tagged the listed runs holding the
product's `cost.months` (every version wrote it on every run it tagged): a run whose cost
went before the record existed loses its product-format tags, a user's other values stay.
The record is written on the run's connection once
the trackers are done, or one has failed (what it wrote before failing is recorded too)."""

import ipaddress
import os
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg
from dagster_duckdb import DuckDBResource

from cost_pipeline.config import MlflowTracker
from cost_pipeline.defs.code_versions import code_version
from cost_pipeline.defs.partitions import monthly
from cost_pipeline.defs.resources import PipelineSettings, month_of
from cost_pipeline.ingest.sources import source_names
from cost_pipeline.ingest.sources.mlflow_runs import resolve_tracking_uri, sqlite_store_file

COUNTS = ("runs_written", "tags_written", "runs_unchanged", "runs_cleared", "tags_deleted",
          "runs_skipped_deleted", "runs_skipped_not_in_tracker")


DEFAULT_PORTS = {"http": 80, "https": 443}


def _host(host: str) -> str:
    """A loopback address by any of its names is `localhost`."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    return "localhost" if loopback else host


def store_of(tracker, base_dir: Path) -> str | None:
    """The MLflow store a tracker reads, one text however its tracking URI is spelled: scheme
    and host in lower case, without user info, the default port written out, a loopback
    host as `localhost`, no trailing slash; a sqlite store by its file's real path. None for
    a tracker that is no MLflow store (a runs file)."""
    if not isinstance(tracker, MlflowTracker):
        return None
    uri = resolve_tracking_uri(tracker.tracking_uri.strip(), base_dir)
    if uri.startswith("sqlite:///"):
        return "sqlite:///" + os.path.realpath(sqlite_store_file(uri))
    try:
        parts = urlsplit(uri)
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return uri.rstrip("/")
    if not host:
        return uri.rstrip("/")
    port = port or DEFAULT_PORTS.get(scheme)
    return (f"{scheme}://{_host(host)}" + (f":{port}" if port else "")
            + parts.path.rstrip("/") + (f"?{parts.query}" if parts.query else ""))


def record_tagged_runs(con, month: date, before: dict[str, set[str]],
                       after: dict[str, set[str]]) -> None:
    """Bring `tracker_tagged_runs` from `before` to `after` (store → MLflow run ids), a run
    added by the materialization of `month`: only the runs that came or went are written (one
    list each, not a statement a run)."""
    for store, ids in after.items():
        gone, new = sorted(before.get(store, set()) - ids), sorted(ids - before.get(store, set()))
        if gone:
            con.execute("DELETE FROM tracker_tagged_runs WHERE store = ? AND mlflow_run_id IN "
                        "(SELECT unnest(CAST(? AS VARCHAR[])))", [store, gone])
        if new:
            con.execute("INSERT INTO tracker_tagged_runs (month, store, mlflow_run_id) "
                        "SELECT ?, ?, unnest(CAST(? AS VARCHAR[]))", [month, store, new])


@dg.asset(
    partitions_def=monthly,
    group_name="tracker",
    kinds={"mlflow"},
    owners=["team:ml-platform"],
    deps=["run_costs"],
    code_version=code_version(("run_cost_tags",), (
        "cost_pipeline.defs.assets.tracker_tags", "cost_pipeline.ingest.sources.mlflow_tags")),
    description="The runs' cost (summed over every month of the warehouse, each month's on the "
    "MLflow run its tracker snapshot recorded, renamed since or not) as `cost.*` tags "
    "in each MLflow tracker configured with `write_back: true`; unchanged tags are not "
    "rewritten, stale ones (a run it tagged, without cost now) deleted, a user's own kept, "
    "deleted runs are skipped; "
    "trackers on one store share their runs' tags, however their URIs are spelled.",
)
def tracker_cost_tags(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: PipelineSettings
) -> dg.MaterializeResult:
    cfg = settings.load()
    targets = [(name, t) for name, t in zip(source_names(cfg.tracker), cfg.tracker, strict=True)
               if isinstance(t, MlflowTracker) and t.write_back]
    if not targets:
        return dg.MaterializeResult(metadata={"trackers": "none with write_back: true"})
    from cost_pipeline.ingest.sources.mlflow_tags import (
        Ledger,
        RunCost,
        cost_tags,
        list_tracker_runs,
        run_costs_by_mlflow_run,
        write_cost_tags,
    )

    names = source_names(cfg.tracker)
    kinds = dict(zip(names, cfg.tracker, strict=True))
    from cost_pipeline.warehouse import ensure_schema

    with duckdb.get_connection() as con:
        # the macros its query reads: this step may run alone (the UI's "materialize")
        ensure_schema(con)
        costs = run_costs_by_mlflow_run(con)
        # a run two trackers know is kept as the first tells it (runs.collect_runs): its cost
        # is that run's, not the run of the same id in another store. A month that recorded
        # the run's MLflow run is told by that month's tracker (`RunCost.source`); the others
        # by the latest snapshot's
        kept_from = dict(con.execute(
            "SELECT run_id, source FROM tracker_runs "
            "QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY month DESC) = 1"
        ).fetchall())
        recorded = con.execute("SELECT store, mlflow_run_id FROM tracker_tagged_runs"
                               ).fetchall()
    # outside the connection: a tracker that fails fails this step, not the month's commit
    stores = {name: store_of(t, cfg.base_dir) for name, t in kinds.items()}
    # the runs whose tags the write-back wrote, per store: the trackers of one store share it
    before = {stores[name]: set() for name, _ in targets}
    for store, mlflow_id in recorded:
        before.setdefault(store, set()).add(mlflow_id)
    tagged = {store: set(ids) for store, ids in before.items()}
    # every tracker's runs are listed before any is written: which MLflow runs have a cost is
    # then known by their own ids, whatever URI each tracker spells its server with
    listed = {name: list_tracker_runs(resolve_tracking_uri(t.tracking_uri, cfg.base_dir), name,
                                      t.experiments, t.tags, context.log)
              for name, t in targets}
    # a store with no record yet (a warehouse from before it, or the store's first
    # write-back into it): the runs holding the product's tags count as tagged by it, so a
    # run whose cost went before the record existed is cleared as it was then
    for name, _ in targets:
        if not before[stores[name]]:
            tagged[stores[name]] |= listed[name].holding_product_tags()

    def teller(cost: RunCost) -> str | None:
        """The tracker that told the run in the cost's months."""
        return cost.source if cost.mlflow_run_id is not None else kept_from.get(cost.run_id)

    plans = {}
    for name, _tracker in targets:
        # a run kept from another tracker on the same store is this store's run too: its
        # tags are written (unchanged when that tracker wrote them), never deleted as stale;
        # so is one kept from another mlflow tracker whose id is this store's MLflow run id
        same_store = {n for n, store in stores.items() if store == stores[name]}
        elsewhere, others = set(names) - same_store, set(names) - {name}
        found = listed[name].found

        def own(run_id: str, found=found) -> bool:
            return run_id in found and found[run_id][0] == run_id

        def kept(cost: RunCost, elsewhere=elsewhere, own=own) -> bool:
            told = teller(cost)
            return told not in elsewhere or (isinstance(kinds.get(told), MlflowTracker)
                                             and own(cost.mlflow_run_id or cost.run_id))

        # by the id each MLflow run is listed under now (renamed since or not)
        placed, unlisted = listed[name].place(costs, kept)
        mine = {run_id: cost_tags(run_costs) for run_id, run_costs in placed.items()}
        shared = {run_id for run_id, run_costs in placed.items()
                  if any(teller(cost) in others for cost in run_costs)}
        missing = {cost.mlflow_run_id for cost in unlisted if teller(cost) not in others}
        plans[name] = (mine, shared, len(missing))
    ledger = Ledger(covered=set().union(*(listed[name].covered(mine)
                                          for name, (mine, _, _) in plans.items())))
    totals = dict.fromkeys(COUNTS, 0)
    per_tracker = {}
    try:
        for name, tracker in targets:
            mine, shared, unlisted = plans[name]
            done = write_cost_tags(resolve_tracking_uri(tracker.tracking_uri, cfg.base_dir),
                                   name, mine, log=context.log, shared=shared,
                                   runs=listed[name], ledger=ledger, tagged=tagged[stores[name]],
                                   unlisted=unlisted)
            per_tracker[name] = {k: getattr(done, k) for k in COUNTS}
            for k in COUNTS:
                totals[k] += getattr(done, k)
    finally:
        with duckdb.get_connection() as con:
            record_tagged_runs(con, month_of(context), before, tagged)
    return dg.MaterializeResult(metadata={
        **totals,
        "runs_with_cost": len({cost.run_id for cost in costs}),
        "trackers": dg.MetadataValue.json(per_tracker),
    })
