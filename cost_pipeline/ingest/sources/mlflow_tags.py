"""`run_costs` of every month the warehouse holds → the `cost.*` tags of the runs of an MLflow
tracker with `write_back: true` (SPEC §12).

A month's cost of a run goes to the MLflow run its tracker snapshot recorded for it that month
(`tracker_runs.tracker_run_uuid`), whatever the run is called now: runs keyed by name, a run
renamed in MLflow keeps its cost, and a new run given the old name gets none of it. A month
without that record (a runs file's run, a month written before it) goes to the run bearing its
run id now (`TrackerRuns.place`). Each MLflow run with rows in `run_costs` gets its cost
summed over its months (`cost.total_usd`,
`cost.gpu_usd`, `cost.cpu_usd`, `cost.storage_usd`, `cost.network_usd`, `cost.other_usd`, 2
decimals, rounded half up as the reports round), its accelerator-hours (`cost.gpu_hours`, 3
decimals) — both summed exactly, as DECIMALs (run_cost_tags.sql), so that the cents are the
reports' — its months (`cost.months`, `YYYY-MM` ascending, comma-separated) and the currency
they are billed in (`cost.currency`: the `_usd` names are SPEC §12's, the amounts are the
bill's). A run whose months are billed in two currencies gets no amounts (they do not add
up): its `cost.currency` names both. The nine names are the product's: on a run with a cost,
any value under them is written over. The tracker's runs are listed once (deleted ones too, so
they can be told apart from runs it does not know); a run's current tags come with the
listing, and only the tags whose value differs are written, with `log_batch` (≤ 100 tags a
call). A run whose tags the write-back wrote (the warehouse records them per store:
`tagged`) that the warehouse no longer gives a cost (its cost moved to another run, or its
months are gone) has them deleted: left, they said a cost it no longer has. Only those runs,
and only values in the product's own format (`1.00`, `1.000`, `2026-05`, `USD`): a user's
own value under one of the names, on a run never costed, is kept (a store the warehouse has
no record of yet takes as tagged the runs holding the product's `cost.months`:
`TrackerRuns.holding_product_tags`). A run whose cost the
warehouse kept from another tracker on the same store is in `costs` (the asset puts it
there), so it is written, not deleted. The trackers of one
materialization share a `Ledger` keyed by MLflow run id: a run another tracker gives a
cost — the same server under another URI — is never cleared, a tag written in the
materialization is never deleted by it, and another tracker's writes count as done only on a
run listed alike (a copy of a store lists its own tags). Calls are retried on
connection errors and 5xx answers; a retried delete that finds the tag already gone (its
first attempt reached the server, the answer was lost) has done its work. The last failure
is one line naming the tracker (its URI without the password) and the run.

Dagster-free: the asset `tracker_cost_tags` (defs/assets/tracker_tags.py) calls it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from functools import cached_property
from typing import TypeVar
from urllib.parse import urlsplit

import duckdb

from cost_pipeline.ingest.sources import redact
from cost_pipeline.ingest.sources.mlflow_runs import (
    _client,
    _experiments,
    call_with_retries,
    search_all_runs,
    tag_names,
    warehouse_run_id,
)
from cost_pipeline.report.money import cents, half_up
from cost_pipeline.warehouse import sql_text

TAG_PREFIX = "cost."
MONEY_TAGS = {  # tag → column of the run_cost_tags query (2 decimals)
    "cost.total_usd": "total_usd", "cost.gpu_usd": "gpu_usd", "cost.cpu_usd": "cpu_usd",
    "cost.storage_usd": "storage_usd", "cost.network_usd": "network_usd",
    "cost.other_usd": "other_usd",
}
HOURS_TAG, MONTHS_TAG, CURRENCY_TAG = "cost.gpu_hours", "cost.months", "cost.currency"
HOURS_STEP = Decimal("0.001")  # cost.gpu_hours: 3 decimals
EXACT_DIGITS = 80              # Decimal precision adding DECIMAL(38, 10) sums: never rounds
COST_TAGS = (*MONEY_TAGS, HOURS_TAG, MONTHS_TAG, CURRENCY_TAG)
MAX_TAGS_PER_CALL = 100        # MLflow's log_batch limit on tags (1000 items in all)
MAX_TAG_VALUE = 8000           # MLflow's limit on a tag value's length (cost.months)
RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 4.0)   # seconds before each retry of a call

# the values the write-back writes under each name: only such a value is ever deleted
FORMATS = {**dict.fromkeys(MONEY_TAGS, re.compile(r"-?\d+\.\d{2}")),
           HOURS_TAG: re.compile(r"-?\d+\.\d{3}"),
           MONTHS_TAG: re.compile(r"\d{4}-\d{2}(,\d{4}-\d{2})*"),
           CURRENCY_TAG: re.compile(r"[A-Za-z]{3}(,[A-Za-z]{3})*")}

T = TypeVar("T")


def redact_uri(uri: str) -> str:
    """The URI without its secrets (the password of its user info, tokens): what errors and
    logs may show — the package's one rule, `cost_pipeline.ingest.sources.redact`."""
    return redact(uri)


def _money(value: Decimal) -> str:
    """To the cent, half up, as the reports round (`report.money.cents`): Python's `round`
    of the double 2.675 is 2.67 where the report shows $2.68."""
    text = f"{cents(value):f}"
    return "0.00" if text == "-0.00" else text


def written_here(key: str, value: str) -> bool:
    """Whether `value` under the tag `key` is in the form the write-back writes it (a user's
    `user` or `999` under `cost.total_usd` is not)."""
    return key in FORMATS and FORMATS[key].fullmatch(value) is not None


def _hours(value: Decimal) -> str:
    text = f"{half_up(value, HOURS_STEP):f}"
    return "0.000" if text == "-0.000" else text


@dataclass
class RunCost:
    """A warehouse run's exact cost over the months its tracker snapshots recorded one MLflow
    run for it (`mlflow_run_id`), or over its months with none recorded (None: a runs file's
    run, a month written before the record): a row of `run_cost_tags.sql`."""

    run_id: str
    mlflow_run_id: str | None
    source: str | None               # the tracker that told it (the latest of the months)
    amounts: dict[str, Decimal]      # MONEY_TAGS' columns → the exact sum
    gpu_hours: Decimal
    months: list[str]                # YYYY-MM, ascending
    currencies: list[str]

    @cached_property
    def tags(self) -> dict[str, str]:
        """Its `cost.*` tags, as a run with no other months would carry them."""
        return _tags(self.amounts, self.gpu_hours, self.months, self.currencies)


def _tags(amounts: dict[str, Decimal], gpu_hours: Decimal, months: list[str],
          currencies: list[str]) -> dict[str, str]:
    run_tags = ({} if len(currencies) > 1 else
                {tag: _money(amounts[column]) for tag, column in MONEY_TAGS.items()})
    run_tags[HOURS_TAG] = _hours(gpu_hours)
    run_tags[MONTHS_TAG] = ",".join(months)[:MAX_TAG_VALUE]
    run_tags[CURRENCY_TAG] = ",".join(currencies)
    return run_tags


def run_costs_by_mlflow_run(con: duckdb.DuckDBPyConnection) -> list[RunCost]:
    """Every run's cost, a `RunCost` per MLflow run its months recorded, from `run_costs` of
    every month as `con` sees them (inside a Dagster run: the run's own, uncommitted month
    included)."""
    cursor = con.execute(sql_text("run_cost_tags"))
    names = [d[0] for d in cursor.description]
    costs = []
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        costs.append(RunCost(
            row["run_id"], row["mlflow_run_id"], row["source"],
            {column: row[column] or Decimal(0) for column in MONEY_TAGS.values()},
            row["gpu_hours"] or Decimal(0), row["months"], row["currencies"]))
    return costs


def cost_tags(costs: Sequence[RunCost]) -> dict[str, str]:
    """The `cost.*` tags of the MLflow run these costs are all of (the months whose
    snapshots recorded it, and months without the record matched to it by its id now): the
    amounts and hours added exactly, the months and currencies together."""
    if len(costs) == 1:
        return costs[0].tags
    with localcontext() as exact:
        exact.prec = EXACT_DIGITS
        amounts = {column: sum((c.amounts[column] for c in costs), Decimal(0))
                   for column in MONEY_TAGS.values()}
        hours = sum((c.gpu_hours for c in costs), Decimal(0))
    return _tags(amounts, hours, sorted({m for c in costs for m in c.months}),
                 sorted({currency for c in costs for currency in c.currencies}))


def cost_tags_by_run(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """run_id → its `cost.*` tags over every month, whichever MLflow run each recorded, from
    `run_costs` as `con` sees them."""
    by_run: dict[str, list[RunCost]] = {}
    for cost in run_costs_by_mlflow_run(con):
        by_run.setdefault(cost.run_id, []).append(cost)
    return {run_id: cost_tags(costs) for run_id, costs in by_run.items()}


@dataclass
class WriteBack:
    """What one tracker's write-back did (the asset's metadata)."""

    tracker: str
    runs_written: int = 0
    tags_written: int = 0
    runs_unchanged: int = 0
    runs_skipped_deleted: int = 0
    runs_skipped_not_in_tracker: int = 0
    runs_cleared: int = 0          # runs whose stale cost tags were deleted
    tags_deleted: int = 0
    calls: int = 0                 # log_batch and delete_tag calls made


@dataclass
class TrackerRuns:
    """A tracker's runs as listed once: warehouse run id → (MLflow run id, whether deleted,
    the `cost.*` tags it holds), and the client that listed them."""

    tracker: str
    uri: str                       # redacted: what errors and logs show
    password: str | None
    client: object
    found: dict[str, tuple[str, bool, dict[str, str]]]

    def covered(self, costs: dict[str, dict[str, str]]) -> set[str]:
        """The MLflow ids of the live runs `costs` gives a cost."""
        return {mlflow_id for run_id, (mlflow_id, deleted, _) in self.found.items()
                if run_id in costs and not deleted}

    @cached_property
    def run_ids(self) -> dict[str, str]:
        """MLflow run id → the id the warehouse would know the run by now."""
        return {mlflow_id: run_id for run_id, (mlflow_id, _, _) in self.found.items()}

    def place(self, costs: Iterable[RunCost], kept: Callable[[RunCost], bool]
              ) -> tuple[dict[str, list[RunCost]], list[RunCost]]:
        """The `costs` that `kept` keeps, by the id the tracker lists their MLflow run under
        now (`write_cost_tags`' keys), and those whose recorded MLflow run it does not list. A
        cost whose months recorded an MLflow run goes to that run, whatever its name is now (a
        run renamed since is still theirs; a new run given the old name is not); one without
        to the run bearing its run id now, as before the record (listed or not)."""
        placed: dict[str, list[RunCost]] = {}
        unlisted: list[RunCost] = []
        for cost in costs:
            if not kept(cost):
                continue
            if cost.mlflow_run_id is None:
                placed.setdefault(cost.run_id, []).append(cost)
            elif cost.mlflow_run_id in self.run_ids:
                placed.setdefault(self.run_ids[cost.mlflow_run_id], []).append(cost)
            else:
                unlisted.append(cost)
        return placed, unlisted

    def holding_product_tags(self) -> set[str]:
        """The MLflow ids of the runs holding the tags the write-back writes: a `cost.months`
        in its format, which every version of it wrote on every run it tagged (a user's
        lone `cost.other_usd=12.00` is not the product's)."""
        return {mlflow_id for mlflow_id, _, current in self.found.values()
                if written_here(MONTHS_TAG, current.get(MONTHS_TAG, ""))}


@dataclass
class Ledger:
    """The write-backs of one materialization, by MLflow run id: the same whatever URI a
    tracker spells its server with — and alike in a copy of a store, so what one tracker left
    stands for another's run only when both listed it alike before any write (the same
    server; a copy lists its own tags)."""

    covered: set[str] = field(default_factory=set)   # runs some tracker gives a cost
    listed: dict[str, dict[str, str]] = field(default_factory=dict)  # cost tags before
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # cost tags as left
    written: dict[str, set[str]] = field(default_factory=dict)     # tags written


def _with_retries(call: Callable[[], T], tracker: str, uri: str, what: str,
                  password: str | None, log: logging.Logger) -> T:
    """The reader's retry rule (`call_with_retries`) with this module's delays."""
    return call_with_retries(call, tracker, uri, what, delays=RETRY_DELAYS, log=log,
                             secret=password)


def _batches(tags: list, size: int = MAX_TAGS_PER_CALL) -> Iterable[list]:
    for start in range(0, len(tags), size):
        yield tags[start:start + size]


def list_tracker_runs(
    tracking_uri: str,
    tracker: str,
    experiments: list[str] | None = None,
    tags: dict[str, str] | None = None,
    log: logging.Logger | None = None,
) -> TrackerRuns:
    """The tracker's runs under the ids the warehouse uses (as mlflow_runs reads them), deleted
    ones too, with the cost tags each holds (not the whole run: every tag, param and metric
    of a tracker's every run would be kept until the end)."""
    log = log or logging.getLogger(__name__)
    uri = redact_uri(tracking_uri)
    try:
        password = urlsplit(tracking_uri).password
    except ValueError:
        password = None
    tags_of = tag_names(tags or {}, tracker)
    client = _with_retries(lambda: _client(tracking_uri, tracker), tracker, uri, "connect",
                           password, log)
    names = _with_retries(lambda: _experiments(client, experiments, tracker, uri), tracker,
                          uri, "list experiments", password, log)

    def listing() -> dict[str, tuple[str, bool, dict[str, str]]]:
        found: dict[str, tuple[str, bool, dict[str, str]]] = {}
        for page in search_all_runs(client, list(names), tracker, uri):
            for run in page:
                run_tags = run.data.tags
                found.setdefault(warehouse_run_id(run, tags_of["run_id"]), (
                    run.info.run_id, run.info.lifecycle_stage == "deleted",
                    {k: v for k, v in run_tags.items() if k.startswith(TAG_PREFIX)}))
        return found

    found = _with_retries(listing, tracker, uri, "list runs", password, log)
    return TrackerRuns(tracker, uri, password, client, found)


def _delete_tag(client, mlflow_id: str, key: str) -> None:
    """A tag already gone is deleted: a retried call whose first attempt reached the server
    (its answer lost to a 5xx or a timeout) finds no tag left to delete."""
    from mlflow.exceptions import MlflowException

    try:
        client.delete_tag(mlflow_id, key)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise


def write_cost_tags(
    tracking_uri: str,
    tracker: str,
    costs: dict[str, dict[str, str]],
    experiments: list[str] | None = None,
    tags: dict[str, str] | None = None,
    log: logging.Logger | None = None,
    shared: set[str] | None = None,
    runs: TrackerRuns | None = None,
    ledger: Ledger | None = None,
    tagged: set[str] | None = None,
    unlisted: int = 0,
) -> WriteBack:
    """Bring the `cost.*` tags of the tracker's runs to `costs` (run_id → tags, run ids as
    the tracker's config names them: `tags: {run_id: …}` too). `shared`: the runs of `costs`
    another tracker on the same store tells (the warehouse kept its), written when this
    tracker lists them and not counted `runs_skipped_not_in_tracker` when it does not (an
    experiment it does not read). `runs`: the tracker's runs when already listed
    (`list_tracker_runs`). `ledger`: the materialization's other write-backs: a run another
    tracker gives a cost is never cleared here, nor a tag written by this materialization
    deleted, and a tag another tracker already brought to its value is not written again.
    `tagged`: the MLflow ids of the store's runs whose cost tags the write-back wrote (the
    warehouse's record; none when not given): only those are cleared, of their values in the
    product's format alone. It is brought up to date in place: a run left with its cost tags
    is added, a run cleared taken out. `unlisted`: the runs whose months recorded an MLflow
    run this tracker does not list (`TrackerRuns.place`), counted with those not in the
    tracker. Returns what was done."""
    from mlflow.entities import RunTag  # heavy: imported only when a tracker writes back

    log = log or logging.getLogger(__name__)
    if runs is None:
        runs = list_tracker_runs(tracking_uri, tracker, experiments, tags, log)
    ledger = ledger or Ledger()
    uri, password, client, found = runs.uri, runs.password, runs.client, runs.found
    done = WriteBack(tracker)
    shared = shared or set()
    tagged = set() if tagged is None else tagged
    done.runs_skipped_not_in_tracker = unlisted + sum(
        1 for run_id in costs if run_id not in found and run_id not in shared)

    def now(run_id: str) -> tuple[str, bool, dict[str, str]]:
        """The run's tags as this materialization has left them so far: as another tracker
        left them when it listed the run alike (its server), else as this one listed them."""
        mlflow_id, deleted, current = found[run_id]
        alike = mlflow_id in ledger.tags and ledger.listed.get(mlflow_id) == current
        return mlflow_id, deleted, ledger.tags[mlflow_id] if alike else current

    def ours(current: dict[str, str]) -> set[str]:
        """The cost tags of a run whose values are in the write-back's format."""
        return {k for k, v in current.items() if written_here(k, v)}

    # the runs with cost, and the live runs the write-back tagged holding cost tags the
    # warehouse no longer gives them — unless another tracker of this materialization gives
    # the MLflow run a cost, or wrote those tags (the same server under another URI: the same
    # run). A run it never tagged keeps what it holds: a user's own values
    stale = set()
    for run_id in found:
        mlflow_id, deleted, current = now(run_id)
        if deleted or run_id in costs or mlflow_id in ledger.covered or mlflow_id not in tagged:
            continue
        if ours(current) - ledger.written.get(mlflow_id, set()):
            stale.add(run_id)
    for run_id in sorted(stale | (set(costs) & set(found))):
        mlflow_id, deleted, current = now(run_id)
        if deleted:
            done.runs_skipped_deleted += 1
            continue
        wanted = costs.get(run_id, {})
        fresh = ledger.written.get(mlflow_id, set())
        changed = [RunTag(k, v) for k, v in wanted.items() if current.get(k) != v]
        dropped = sorted(k for k in ours(current) if k not in wanted and k not in fresh)
        if run_id in costs:  # recorded before its tags are written: a failed call left some
            tagged.add(mlflow_id)
        if not changed and not dropped:
            done.runs_unchanged += 1
            continue
        where = f"run {run_id}" + (f" (MLflow {mlflow_id})" if mlflow_id != run_id else "")
        for batch in _batches(changed):
            _with_retries(lambda b=batch, r=mlflow_id: client.log_batch(r, tags=b), tracker, uri,
                          f"writing the cost tags of {where}", password, log)
            done.calls += 1
        for key in dropped:  # MLflow deletes one tag a call
            _with_retries(lambda k=key, r=mlflow_id: _delete_tag(client, r, k), tracker, uri,
                          f"deleting the stale tag {key} of {where}", password, log)
            done.calls += 1
        ledger.listed.setdefault(mlflow_id, found[run_id][2])
        ledger.tags[mlflow_id] = {**{k: v for k, v in current.items() if k not in dropped},
                                  **{tag.key: tag.value for tag in changed}}
        ledger.written.setdefault(mlflow_id, set()).update(tag.key for tag in changed)
        if changed:
            done.runs_written += 1
            done.tags_written += len(changed)
        if run_id not in costs:
            done.runs_cleared += 1
            tagged.discard(mlflow_id)
        done.tags_deleted += len(dropped)
    log.info(f"{tracker}: cost tags written on {done.runs_written} run(s) "
             f"({done.tags_written} tag(s)), {done.runs_unchanged} unchanged, "
             f"{done.tags_deleted} stale tag(s) deleted ({done.runs_cleared} run(s) without "
             f"cost now), {done.runs_skipped_deleted} deleted and "
             f"{done.runs_skipped_not_in_tracker} not in {uri} skipped")
    return done
