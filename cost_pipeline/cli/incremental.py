"""Which assets of a month need recomputing. Each asset has a fingerprint: the code version
(the package version and the hash of its Python, SQL and template files), the config file's
content, the month, and — for the three source assets — the inputs they read (every file's
path, size and modification time, local or on S3), or — for every other asset — its parents'
fingerprints, and for those that read the warehouse's other months too (all but
`MONTH_LOCAL`) what those months hold (`input_tokens`). An asset whose fingerprint equals
the one recorded in the warehouse table `materializations` for its last successful
materialization is unchanged and skipped; a changed runs file therefore re-runs
`tracker_runs` and what depends on it, not the bill.

Inputs that cannot be fingerprinted without reading them (an MLflow server, a BigQuery
export, a whole-bucket S3 listing) make their asset, and everything downstream, always run.
A materialization of the month that some other run of this warehouse made later (the UI, a
schedule) in the same Dagster instance also makes the asset run again: a run tagged with
another warehouse (`cost_pipeline/warehouse`, a second config or demo in the same Dagster home)
does not; one without the tag (the implicit asset job, `dagster asset materialize`) does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow.fs as pafs

from cost_pipeline.config import (
    AwsCur2Source,
    FocusSource,
    InventoryCheckpoints,
    LocalCheckpoints,
    PipelineConfig,
    RunsFileTracker,
)
from cost_pipeline.ingest.sources import s3
from cost_pipeline.ingest.sources.local_files import walk_files
from cost_pipeline.months import month_bounds
from cost_pipeline.warehouse import ensure_schema

if TYPE_CHECKING:  # Dagster is imported by what needs it: an unchanged month needs none of it
    import dagster as dg

CODE_SUFFIXES = (".py", ".sql", ".j2")


@cache
def code_version() -> str:
    """The package version and a hash of every file of code the assets run."""
    from cost_pipeline.warehouse import sql_files

    digest = hashlib.sha256()
    try:
        digest.update(metadata.version("cost-pipeline").encode())
    except metadata.PackageNotFoundError:
        pass
    package = Path(__file__).resolve().parent.parent  # cost_pipeline/
    files = [p for p in package.rglob("*") if p.suffix in CODE_SUFFIXES]
    files += sorted(sql_files().values())
    for path in sorted(set(files)):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _listing(path: str, endpoint_url: str | None = None,
             region: str | None = None) -> list | None:
    """(path, size, mtime) of the file or of every file below the folder; None when it cannot
    be listed (the run then reports the real error)."""
    try:
        if s3.is_s3(path):
            fs, base = s3.filesystem(endpoint_url, region), s3.S3Uri.parse(path).path
        else:
            fs, base = pafs.LocalFileSystem(), str(Path(path).resolve())
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.NotFound:
            return [[base, "missing"]]
        if info.type == pafs.FileType.File:
            entries = [info]
        elif not s3.is_s3(path):  # the sources' rule: no link followed out of the folder
            return sorted([str(p), st.st_size, st.st_mtime_ns]
                          for p, st in walk_files(Path(base), "fingerprint"))
        else:
            entries = [e for e in fs.get_file_info(pafs.FileSelector(base, recursive=True))
                       if e.type == pafs.FileType.File]
        return sorted([e.path, e.size, e.mtime_ns] for e in entries)
    except (OSError, ValueError):  # a SourceError too (a dangling link): the run names it
        return None


def _billing_inputs(cfg: PipelineConfig, month: date) -> list | None:
    inputs = []
    for source in cfg.billing:
        if isinstance(source, AwsCur2Source):
            root = cfg.resolve(source.path).rstrip("/")
            for part in ("data", "metadata"):
                inputs.append(_listing(f"{root}/{part}/BILLING_PERIOD={month:%Y-%m}",
                                       source.endpoint_url, source.region))
        elif isinstance(source, FocusSource):  # a folder or an s3:// prefix
            inputs.append(_listing(cfg.resolve(source.path), source.endpoint_url,
                                   source.region))
        else:  # a BigQuery export changes in place: always read it
            return None
    if month_bounds(month)[1] > datetime.now(UTC).replace(tzinfo=None):
        inputs.append(["open month as of", datetime.now(UTC).date().isoformat()])
    return None if any(i is None for i in inputs) else inputs


def _tracker_inputs(cfg: PipelineConfig) -> list | None:
    inputs = []
    for tracker in cfg.tracker:
        if not isinstance(tracker, RunsFileTracker):  # an MLflow server: always read it
            return None
        inputs.append(_listing(cfg.resolve(tracker.path)))
    return None if any(i is None for i in inputs) else inputs


def _checkpoint_inputs(cfg: PipelineConfig) -> list | None:
    inputs = []
    for entry in cfg.checkpoints:
        if isinstance(entry, InventoryCheckpoints):
            inputs.append(_listing(cfg.resolve(entry.path), entry.endpoint_url, entry.region))
        elif isinstance(entry, LocalCheckpoints):
            inputs.append(_listing(cfg.resolve(entry.path)))
        else:  # listing the bucket is the whole work: always list it
            return None
    return None if any(i is None for i in inputs) else inputs


SOURCE_INPUTS = {
    "billing_facts": _billing_inputs,
    "tracker_runs": lambda cfg, month: _tracker_inputs(cfg),
    "checkpoint_inventory": lambda cfg, month: _checkpoint_inputs(cfg),
}


def _warehouse_state(cfg: PipelineConfig, month: date) -> dict[str, list] | None:
    """What the fingerprints read of the warehouse, in one read-only look: the recorded search
    estimates (`estimate --approve`, a table no asset writes, read by search_costs) and what
    the other months hold — each month's bill, runs and attribution as their writers noted
    them (`input_tokens`, which the decision tables' bases read too). None when it cannot be
    read now (then what reads it runs)."""
    state: dict[str, list] = {"approvals": [], "other_months": []}
    if not Path(cfg.warehouse_path).exists():
        return state
    try:
        with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
            tables = {t for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_name IN ('search_approvals', 'input_tokens')").fetchall()}
            if "search_approvals" in tables:
                state["approvals"] = [list(r) for r in con.execute(
                    "SELECT search_id, recorded_at, estimated_cost FROM search_approvals "
                    "ORDER BY search_id, recorded_at").fetchall()]
            if "input_tokens" in tables:
                state["other_months"] = [[str(m), name, token] for m, name, token in con.execute(
                    "SELECT month, input, token FROM input_tokens WHERE month <> ? "
                    "ORDER BY month, input", [month]).fetchall()]
    except duckdb.Error:
        return None
    return state


# assets that also read a table of the warehouse written outside the pipeline
WAREHOUSE_INPUTS = {"search_costs": "approvals"}

# the assets that read their month alone; every other one also reads the warehouse's other
# months (a search's cost to date, earlier searches and retrains, the trends, the strip, the
# write-back's sums over every month): a month restated after a later one was written (a
# CUR delivered again) must not leave the later month's skip keeping its figures
MONTH_LOCAL = frozenset({"billing_facts", "tracker_runs", "checkpoint_inventory", "attribution",
                         "reconciliation", "retention_violations", "storage_by_run_status"})


def fingerprints(asset_graph, cfg: PipelineConfig, config_text: str,
                 month: date) -> dict[str, str | None]:
    """asset name → fingerprint (None: cannot tell, always run), in dependency order."""
    return fingerprints_of(graph_of(asset_graph), cfg, config_text, month)


def graph_of(asset_graph) -> list[tuple[str, list[str]]]:
    """(asset, its parents) in dependency order: what the fingerprints need of the graph."""
    return [(key.to_user_string(),
             sorted(p.to_user_string() for p in asset_graph.get(key).parent_keys))
            for key in asset_graph.toposorted_asset_keys]


def fingerprints_of(graph: list[tuple[str, list[str]]], cfg: PipelineConfig, config_text: str,
                    month: date) -> dict[str, str | None]:
    """`fingerprints` over (asset, parents) pairs in dependency order."""
    base = {"code": code_version(), "month": month.isoformat(),
            "config": hashlib.sha256(config_text.encode()).hexdigest()}
    out: dict[str, str | None] = {}
    state: dict[str, list] | None = None
    read = False
    for name, parents in graph:
        if name in SOURCE_INPUTS:
            inputs = SOURCE_INPUTS[name](cfg, month)
        elif all(out.get(p) for p in parents):
            inputs = {p: out[p] for p in parents}
        else:
            inputs = None
        if inputs is not None and (name not in MONTH_LOCAL or name in WAREHOUSE_INPUTS):
            if not read:  # the warehouse is looked at once, and only when an asset reads it
                state, read = _warehouse_state(cfg, month), True
            if state is None:
                inputs = None
            else:
                if name not in MONTH_LOCAL:
                    inputs = {"parents": inputs, "other_months": state["other_months"]}
                if name in WAREHOUSE_INPUTS:
                    inputs = {"parents": inputs, "warehouse": state[WAREHOUSE_INPUTS[name]]}
        out[name] = None if inputs is None else hashlib.sha256(json.dumps(
            {**base, "asset": name, "inputs": inputs}, sort_keys=True, default=str
        ).encode()).hexdigest()
    return out


@dataclass
class Recorded:
    fingerprint: str
    materialized_at: datetime
    run_id: str | None
    checks: list[dict] = field(default_factory=list)


def month_rows(warehouse: str, table: str, columns: str, month: date) -> list[tuple] | None:
    """`columns` of the month's rows of `table`, read-only: none when the warehouse or the
    table does not exist yet, None when the warehouse cannot be read now (another process
    writing it)."""
    if not Path(warehouse).exists():
        return []
    try:
        with duckdb.connect(warehouse, read_only=True) as con:
            if not con.execute("SELECT count(*) FROM information_schema.tables "
                               "WHERE table_name = ?", [table]).fetchone()[0]:
                return []
            return con.execute(f"SELECT {columns} FROM {table} WHERE month = ?",
                               [month]).fetchall()
    except duckdb.Error:
        return None


def recorded(warehouse: str, month: date) -> dict[str, Recorded]:
    """The month's recorded materializations; none when the warehouse cannot be read now (a
    missing file, another process writing it): then everything runs."""
    rows = month_rows(warehouse, "materializations",
                      "asset, fingerprint, materialized_at, run_id, checks", month) or []
    return {asset: Recorded(fp, at, run_id, json.loads(checks or "[]"))
            for asset, fp, at, run_id, checks in rows}


# the newest materializations of an asset's partition looked at for one of this warehouse's
# runs; when they are all other warehouses' and newer, an older one may be: it is run again
RECORDS_LOOKED_AT = 50


def newer_elsewhere(instance: dg.DagsterInstance, asset: str, partition_key: str,
                    record: Recorded, warehouse: str,
                    run_warehouses: dict[str, str | None] | None = None) -> bool:
    """Whether another run of this warehouse materialized the asset's partition after the
    recorded one. A run tagged with another warehouse (`WAREHOUSE_TAG`: another config in the
    same Dagster home) does not count; a run without the tag (the implicit asset job of the
    UI or `dagster asset materialize`) does. `run_warehouses` caches run id → tag across
    calls."""
    import dagster as dg

    from cost_pipeline.defs.sensors import WAREHOUSE_TAG

    records = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset),
                                    asset_partitions=[partition_key])
    found = instance.fetch_materializations(records, limit=1)
    if not found.records or found.records[0].run_id == record.run_id:
        return False  # (the usual case: the recorded run is the latest, one record read)
    found = instance.fetch_materializations(records, limit=RECORDS_LOOKED_AT)
    newer = []
    for event in found.records:  # the newest first
        at = datetime.fromtimestamp(event.timestamp, UTC).replace(tzinfo=None)
        if event.run_id == record.run_id or at <= record.materialized_at:
            break
        newer.append(event.run_id)
    else:
        if found.has_more:  # this warehouse's newer run may be past those looked at
            return True
    cache = {} if run_warehouses is None else run_warehouses
    unknown = sorted({r for r in newer if r not in cache})
    if unknown:
        runs = {run.run_id: run for run in instance.get_runs(dg.RunsFilter(run_ids=unknown))}
        for run_id in unknown:
            run = runs.get(run_id)
            cache[run_id] = run.tags.get(WAREHOUSE_TAG) if run else None
    return any(cache[r] is None or _same_file(cache[r], warehouse) for r in newer)


def _same_file(tagged: str, warehouse: str) -> bool:
    return tagged == warehouse or Path(tagged).resolve() == Path(warehouse).resolve()


def latest_materialization(instance: dg.DagsterInstance, asset: str, partition_key: str,
                           run_id: str) -> datetime | None:
    import dagster as dg

    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition_key]),
        limit=1).records
    if found and found[0].run_id == run_id:
        return datetime.fromtimestamp(found[0].timestamp, UTC).replace(tzinfo=None)
    return None


def record(warehouse: str, month: date, rows: list[tuple[str, str, datetime, str, list]]) -> None:
    """Record (asset, fingerprint, materialized_at, run_id, checks) of the month's assets."""
    if not rows:
        return
    with duckdb.connect(warehouse) as con:
        ensure_schema(con)
        con.execute("BEGIN TRANSACTION")
        con.executemany("DELETE FROM materializations WHERE month = ? AND asset = ?",
                        [(month, asset) for asset, *_ in rows])
        con.executemany(
            "INSERT INTO materializations VALUES (?, ?, ?, ?, ?, ?)",
            [(month, asset, fp, at, run_id, json.dumps(checks, default=_plain))
             for asset, fp, at, run_id, checks in rows])
        con.execute("COMMIT")


def _plain(value: Any) -> Any:
    return str(value)
