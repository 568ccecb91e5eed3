"""The tracker runs and checkpoint listing of one Dagster run, read once, before any write.

A month's run writes nothing when its input is bad. `billing_facts` is the month's first
step (`tracker_runs` and `checkpoint_inventory` are ordered after it) and validates the bill
before it writes; before that, it reads the trackers and the checkpoint listings of the run
(and so validates them too), so that a bad runs file or listing fails the materialization
while every table still holds its previous rows. The `tracker_runs` and
`checkpoint_inventory` steps then write what was read, instead of reading the sources a
second time (a second read costs time, and could see a file changed in between). When
`billing_facts` is not part of the run (materialized on its own, or skipped as unchanged),
whichever of the two runs first reads both.

The parsed inputs are Arrow tables kept in process memory, keyed by the Dagster run id and
partition: the in-process executor set at the root of the definitions runs every step of a
run in this process. A step that finds nothing (another executor) reads its source itself.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date

import dagster as dg
import pyarrow as pa

from cost_pipeline.config import PipelineConfig
from cost_pipeline.ingest.checkpoints import read_listing
from cost_pipeline.ingest.runs import runs_table

RUNS, LISTING = "runs", "listing"
# the kind of input each asset writes
WRITERS: dict[str, str] = {RUNS: "tracker_runs", LISTING: "checkpoint_inventory"}
# runs whose inputs may be held at once: a value is taken by its step, and a run's entry is
# dropped when one of its steps fails; the cap bounds what a stopped run leaves behind
_MAX_RUNS = 4


@dataclass
class _Run:
    read: set[tuple[str, str]] = field(default_factory=set)   # (kind, partition) read
    values: dict[tuple[str, str], pa.Table] = field(default_factory=dict)  # not yet taken


_runs: OrderedDict[str, _Run] = OrderedDict()
_lock = threading.Lock()


def read(kind: str, cfg: PipelineConfig, month: date, log: logging.Logger) -> pa.Table:
    """Read and validate one input of the month (raises SourceError naming file and row)."""
    if kind == RUNS:
        return runs_table(cfg, log)
    return read_listing(cfg, month, log)


def read_ahead(context: dg.AssetExecutionContext, cfg: PipelineConfig, month: date) -> None:
    """Read every tracker/checkpoint input this run will write that no earlier step of the
    run has read; a bad input raises here, before the calling step has written anything."""
    selection = context.run.asset_selection  # None or empty: the whole job
    for kind, asset in WRITERS.items():
        if selection and dg.AssetKey(asset) not in selection:
            continue
        key = (kind, context.partition_key)
        with _lock:
            if key in _runs.get(context.run_id, _Run()).read:
                continue
        value = read(kind, cfg, month, context.log)
        with _lock:
            run = _runs.setdefault(context.run_id, _Run())
            run.read.add(key)
            run.values[key] = value
            _runs.move_to_end(context.run_id)
            while len(_runs) > _MAX_RUNS:
                _runs.popitem(last=False)


def take(context: dg.AssetExecutionContext, kind: str,
         read_now: Callable[[], pa.Table]) -> pa.Table:
    """What this run read for `kind` (handed over once), else `read_now()`."""
    with _lock:
        run = _runs.get(context.run_id)
        value = run.values.pop((kind, context.partition_key), None) if run else None
    return value if value is not None else read_now()


def forget(run_id: str) -> None:
    with _lock:
        _runs.pop(run_id, None)


@contextmanager
def failing_run_forgotten(context: dg.AssetExecutionContext) -> Iterator[None]:
    """Drop what the run holds when the step fails: its later steps will not run."""
    try:
        yield
    except BaseException:
        forget(context.run_id)
        raise


def held() -> dict[str, int]:
    """Run id → inputs read but not yet taken (for tests)."""
    with _lock:
        return {run_id: len(run.values) for run_id, run in _runs.items()}
