"""The tracker runs and checkpoint listing of one Dagster run, read once, before any write.

`billing_facts` is the first step of a month. It reads the trackers and the checkpoint
listings (and so validates them) before it writes its own month, so that a bad runs file or
listing fails the materialization while every table still holds its previous rows. The
`tracker_runs` and `checkpoint_inventory` steps of the same run, ordered after it, then write
what it read instead of reading the sources a second time (a second read costs time, and
could see a file changed in between). The parsed inputs are Arrow tables kept in process
memory, keyed by the Dagster run id: the in-process executor set at the root of the
definitions runs every step of a run in this process. A step that finds nothing cached (an
asset materialized on its own, another executor) reads its source itself.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import date

import dagster as dg
import pyarrow as pa

from ..config import PipelineConfig
from ..inventory import read_listing
from ..tracker import runs_table

RUNS, LISTING = "runs", "listing"
# the assets whose input billing_facts reads ahead, by the kind of input they write
READ_AHEAD: dict[str, str] = {RUNS: "tracker_runs", LISTING: "checkpoint_inventory"}
# runs whose inputs may be held at once: an entry is taken by its step, or dropped when its
# run fails; the cap only bounds what a run that stopped between steps would leave behind
_MAX_RUNS = 4

# run id → (kind, partition key) → the parsed input
_cache: OrderedDict[str, dict[tuple[str, str], pa.Table]] = OrderedDict()
_lock = threading.Lock()


def read(kind: str, cfg: PipelineConfig, month: date, log: logging.Logger) -> pa.Table:
    """Read and validate one input of the month (raises SourceError naming file and row)."""
    if kind == RUNS:
        return runs_table(cfg, log)
    return read_listing(cfg, month, log)


def read_ahead(context: dg.AssetExecutionContext, cfg: PipelineConfig, month: date) -> None:
    """Read every input of this run's selected tracker/checkpoint assets and keep it for
    their steps; a bad input raises here, before the caller has written anything."""
    selection = context.run.asset_selection  # None or empty: the whole job
    for kind, asset in READ_AHEAD.items():
        if not selection or dg.AssetKey(asset) in selection:
            value = read(kind, cfg, month, context.log)
            with _lock:
                _cache.setdefault(context.run_id, {})[kind, context.partition_key] = value
                _cache.move_to_end(context.run_id)
                while len(_cache) > _MAX_RUNS:
                    _cache.popitem(last=False)


def take(context: dg.AssetExecutionContext, kind: str,
         read_now: Callable[[], pa.Table]) -> pa.Table:
    """What `read_ahead` read for `kind` in this run (handed over once), else `read_now()`."""
    with _lock:
        held = _cache.get(context.run_id, {})
        value = held.pop((kind, context.partition_key), None)
        if not held:
            _cache.pop(context.run_id, None)
    return value if value is not None else read_now()


def forget(run_id: str) -> None:
    with _lock:
        _cache.pop(run_id, None)


def held_runs() -> list[str]:
    """Run ids with inputs still held (for tests)."""
    with _lock:
        return list(_cache)
