"""The write-back of SPEC §12: `run_costs` summed over the warehouse's months → the `cost.*`
tags of MLflow runs, with the real MLflow client against a sqlite store and a real
`mlflow server`; then the whole month through Dagster (`tracker_cost_tags`): tags equal to
the runs' attributed cost to the cent, a re-run writes nothing, a deleted run is skipped, and
a tracker that fails its writes is retried, then named with the run — the month's tables
committed all the same."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import tempfile
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import yaml

from cost_pipeline.demo.mlflow_server import mlflow_server
from cost_pipeline.demo.tool_venvs import ToolUnavailable
from cost_pipeline.ingest.sources import SourceError, mlflow_runs, mlflow_tags
from cost_pipeline.ingest.sources.mlflow_tags import (
    COST_TAGS,
    cost_tags_by_run,
    redact_uri,
    write_cost_tags,
)
from cost_pipeline.warehouse import ensure_schema, sql_text
from tests.support.mlflow_proxy import failing_proxy

MAY, JUNE = date(2026, 5, 1), date(2026, 6, 1)
BY_NAME = {"run_id": "mlflow.runName"}
LOG = logging.getLogger("test")


def ms(moment: datetime) -> int:
    return int(moment.replace(tzinfo=UTC).timestamp() * 1000)


# ----------------------------------------------------------------------------- the runs
# r-a: production on i-1 (a p4d, 8 GPUs) from May 3rd to June 3rd; r-b: a search run on i-2
# (cpu) in May; r-del: deleted in the tracker, on i-3 in June (its compute is still billed);
# r-idle: on no billed resource (no cost, no tags)
RUNS = {
    "r-a": (datetime(2026, 5, 3, 10), datetime(2026, 6, 3, 11),
            {"model": "churn", "purpose": "production", "resource_ids": "i-1", "gpus": "8"}),
    "r-b": (datetime(2026, 5, 3, 10), datetime(2026, 5, 3, 11),
            {"model": "churn", "search_id": "s1", "resource_ids": "i-2"}),
    "r-del": (datetime(2026, 6, 3, 10), datetime(2026, 6, 3, 11),
              {"model": "fraud", "purpose": "adhoc", "resource_ids": "i-3"}),
    "r-idle": (datetime(2026, 6, 3, 10), datetime(2026, 6, 3, 11),
               {"model": "fraud", "purpose": "adhoc", "resource_ids": "i-none"}),
}


def finished_run(client, experiment: str, name: str, start: datetime, end: datetime,
                 tags: dict[str, str]) -> str:
    """Run `name` of `experiment`, FINISHED, from `start` to `end`: its MLflow id."""
    run = client.create_run(experiment, start_time=ms(start), tags=tags, run_name=name)
    client.set_terminated(run.info.run_id, "FINISHED", end_time=ms(end))
    return run.info.run_id


def write_runs(uri: str, experiment_name: str = "costs") -> dict[str, str]:
    """The runs above in the MLflow at `uri`, named by their ids; name → MLflow id."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.create_experiment(experiment_name)
    ids = {name: finished_run(client, experiment, name, *run) for name, run in RUNS.items()}
    client.delete_run(ids["r-del"])
    return ids


def sqlite_runs(folder: Path, db: str, experiment: str | None = None) -> tuple[str, dict]:
    """The runs above in a sqlite store `db`.db of `folder`, in `experiment` (by default the
    store's name): its URI, and name → MLflow id."""
    uri = f"sqlite:///{folder / f'{db}.db'}"
    return uri, write_runs(uri, experiment or db)


def cost_tags(uri: str, mlflow_id: str) -> dict[str, str]:
    from mlflow import MlflowClient

    tags = MlflowClient(uri).get_run(mlflow_id).data.tags
    return {k: v for k, v in tags.items() if k.startswith("cost.")}


@pytest.fixture(scope="module")
def fast_dir():
    """sqlite fsyncs every MLflow commit: on tmpfs a store is written ~6× faster."""
    shm = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(prefix="cost-pipeline-writeback-",
                                 dir=shm if shm.is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def server(fast_dir):
    """A real `mlflow server` over an empty store, for the module."""
    try:
        with mlflow_server(fast_dir / "server") as uri:
            yield uri
    except ToolUnavailable as exc:
        pytest.skip(f"mlflow server unavailable (its own venv could not be built): {exc}")


# ------------------------------------------------------------ the write-back on its own


COMPONENTS = ("gpu", "cpu", "storage", "network", "other")


def run_costs_rows(con, rows) -> None:
    """(month, run_id, gpu, cpu, storage, network, other, accelerator_hours) → run_costs, and
    the per-run sums it is computed from (`attribution_runs`, one row a component, its
    `cost_exact` the DECIMAL of the cost; the accelerator-hours on the gpu row)."""
    ensure_schema(con)
    con.executemany(
        "INSERT INTO run_costs VALUES (?, ?, NULL, 'search', NULL, ?, ?, ?, ?, ?, ?, ?, 0)",
        [(m, r, g, c, s, n, o, g + c + s + n + o, h) for m, r, g, c, s, n, o, h in rows])
    con.executemany(
        "INSERT INTO attribution_runs (month, run_id, purpose_class, component, rule, cost, "
        "accelerator_hours, rows, cost_exact) "
        "VALUES (?, ?, 'search', ?, 'compute', ?, ?, 1, CAST(? AS DECIMAL(38, 10)))",
        [(m, r, component, cost, h if component == "gpu" else 0.0, cost)
         for m, r, *costs, h in rows
         for component, cost in zip(COMPONENTS, costs, strict=True)])


HAND_ROWS = [  # month, run, gpu, cpu, storage, network, other, accelerator-hours
    (JUNE, "r-a", 26.6666666666, 0.0, 0.104, 0.0, 0.0, 5.3333333333),
    (MAY, "r-a", 40.1234, 0.0, 0.0, 0.001, 0.0, 8.0),
    (MAY, "r-b", 0.0, 0.5, 0.0, 0.0, 0.0049, 0.0),
    (JUNE, "r-del", 0.0, 0.25, 0.0, 0.0, 0.0, 0.0),
    (JUNE, "r-gone", 3.0, 0.0, 0.0, 0.0, 0.0, 1.0),   # a run this tracker does not know
]
# by hand: r-a gpu 26.6666666666 + 40.1234 = 66.7900666666 → 66.79; storage 0.104 → 0.10;
# network 0.001 → 0.00; total 66.7900666666 + 0.105 = 66.8950666666 → 66.90;
# gpu-hours 13.3333333333 → 13.333; months May then June
EXPECTED = {
    "r-a": {"cost.total_usd": "66.90", "cost.gpu_usd": "66.79", "cost.cpu_usd": "0.00",
            "cost.storage_usd": "0.10", "cost.network_usd": "0.00", "cost.other_usd": "0.00",
            "cost.gpu_hours": "13.333", "cost.months": "2026-05,2026-06",
            "cost.currency": "USD"},
    "r-b": {"cost.total_usd": "0.50", "cost.gpu_usd": "0.00", "cost.cpu_usd": "0.50",
            "cost.storage_usd": "0.00", "cost.network_usd": "0.00", "cost.other_usd": "0.00",
            "cost.gpu_hours": "0.000", "cost.months": "2026-05", "cost.currency": "USD"},
}


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_tags_written_once_deleted_and_unknown_runs_skipped(store, fast_dir, request):
    if store == "sqlite":
        uri = f"sqlite:///{fast_dir / 'unit.db'}"
    else:
        uri = request.getfixturevalue("server")
    ids = write_runs(uri)
    con = duckdb.connect()
    run_costs_rows(con, HAND_ROWS)
    costs = cost_tags_by_run(con)
    assert {k: costs[k] for k in EXPECTED} == EXPECTED

    done = write_cost_tags(uri, "mlflow", costs, experiments=["costs"], tags=BY_NAME, log=LOG)
    assert (done.runs_written, done.tags_written, done.runs_unchanged) == (2, 18, 0)
    assert (done.runs_skipped_deleted, done.runs_skipped_not_in_tracker) == (1, 1)
    assert done.calls == 2  # one log_batch per run: 9 tags
    for name, tags in EXPECTED.items():
        assert cost_tags(uri, ids[name]) == tags
    assert cost_tags(uri, ids["r-del"]) == {} and cost_tags(uri, ids["r-idle"]) == {}

    again = write_cost_tags(uri, "mlflow", costs, experiments=["costs"], tags=BY_NAME, log=LOG)
    assert (again.runs_written, again.tags_written, again.runs_unchanged, again.calls) == (
        0, 0, 2, 0)

    # a corrected month changes only the tags whose value moved
    con.execute("UPDATE run_costs SET cpu_cost = cpu_cost + 1, cost = cost + 1 "
                "WHERE run_id = 'r-b'")
    con.execute("UPDATE attribution_runs SET cost = cost + 1, cost_exact = cost_exact + 1 "
                "WHERE run_id = 'r-b' AND component = 'cpu'")
    changed = write_cost_tags(uri, "mlflow", cost_tags_by_run(con), experiments=["costs"],
                              tags=BY_NAME, log=LOG)
    assert (changed.runs_written, changed.tags_written, changed.runs_unchanged) == (1, 2, 1)
    assert cost_tags(uri, ids["r-b"])["cost.total_usd"] == "1.50"


def test_amounts_are_summed_over_the_months_exactly():
    """The months' amounts are added as DECIMALs, each month's cast first, as the reports add
    them: five months of $0.011 are $0.055 → 0.06 half up, where the doubles' Σ
    0.05499999999999999 was tagged 0.05; nine of $0.045 → 0.41 (0.40); five credits of
    −$0.011 → −0.06, away from zero (−0.05); five months of 0.0003 accelerator-hours →
    0.0015 → 0.002 (the doubles' Σ 0.0014999999999999998 gave 0.001)."""
    months = [date(2025, m, 1) for m in range(1, 10)]
    con = duckdb.connect()
    run_costs_rows(con, [*((m, "r-r", 0.011, 0.0, 0.0, 0.0, 0.0, 0.0003) for m in months[:5]),
                         *((m, "r-s", 0.0, 0.045, 0.0, 0.0, 0.0, 0.0) for m in months),
                         *((m, "r-t", 0.0, 0.0, 0.0, -0.011, 0.0, 0.0) for m in months[:5])])
    costs = cost_tags_by_run(con)
    zero = dict.fromkeys(mlflow_tags.MONEY_TAGS, "0.00")
    assert costs["r-r"] == {**zero, "cost.total_usd": "0.06", "cost.gpu_usd": "0.06",
                            "cost.gpu_hours": "0.002",
                            "cost.months": "2025-01,2025-02,2025-03,2025-04,2025-05",
                            "cost.currency": "USD"}
    assert costs["r-s"] == {**zero, "cost.total_usd": "0.41", "cost.cpu_usd": "0.41",
                            "cost.gpu_hours": "0.000",
                            "cost.months": ",".join(f"{m:%Y-%m}" for m in months),
                            "cost.currency": "USD"}
    assert costs["r-t"] == {**zero, "cost.total_usd": "-0.06", "cost.network_usd": "-0.06",
                            "cost.gpu_hours": "0.000", "cost.months": costs["r-r"]["cost.months"],
                            "cost.currency": "USD"}


def test_the_tags_and_run_costs_sum_one_exact_macro():
    """The tags' query and `run_costs` each spelled the DECIMAL of attribution_runs' sums
    (`cost_exact`, the double cast when it is NULL; the hours cast): one macro,
    `exact_run_sums`, gives both. Run r-x: gpu $0.011 with 0.0003 accelerator-hours, cpu
    $0.50 without `cost_exact` (its double cast, 0.5); the unattributed row (no run) is
    left out."""
    con = duckdb.connect()
    run_costs_rows(con, [(MAY, "r-x", 0.011, 0.5, 0.0, 0.0, 0.0, 0.0003)])
    con.execute("UPDATE attribution_runs SET cost_exact = NULL WHERE component = 'cpu'")
    con.execute("INSERT INTO attribution_runs (month, run_id, purpose_class, component, rule, "
                "cost, rows) VALUES (?, NULL, 'unallocated', 'gpu', 'compute', 9.0, 1)", [MAY])
    rows = con.execute("SELECT run_id, component, dollars, accelerator_hours "
                       "FROM exact_run_sums() WHERE component IN ('gpu', 'cpu') "
                       "ORDER BY component").fetchall()
    assert rows == [("r-x", "cpu", Decimal("0.5"), Decimal("0")),
                    ("r-x", "gpu", Decimal("0.011"), Decimal("0.0003"))]
    for name in ("run_cost_tags", "run_costs"):
        text = sql_text(name)
        assert "exact_run_sums()" in text and "coalesce(cost_exact" not in text, name


@pytest.mark.parametrize("id_tags", [BY_NAME, {"run_id": "run_id"}])
def test_runs_are_matched_by_the_id_the_reader_keeps(id_tags, fast_dir):
    """A name or `run_id` tag with blanks around it is the stripped id in `run_costs`; a tag of
    only blanks is no tag (the MLflow id). The write-back finds each run under that same id."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{fast_dir / ('blanks-' + id_tags['run_id'] + '.db')}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("blanks")
    start, end, tags = RUNS["r-b"]
    ids = {}
    for name, id_tag in (("  nb-child ", "\tnb-child "), ("nb-blank", "   ")):
        run_tags = {**tags, "run_id": id_tag} if "run_id" in id_tags.values() else tags
        ids[name] = finished_run(client, experiment, name, start, end, run_tags)
    read = {row["run_id"] for row in mlflow_runs.read_mlflow_runs(
        uri, "mlflow", experiments=["blanks"], tags=id_tags, log=LOG)}
    blank_id = "nb-blank" if id_tags == BY_NAME else ids["nb-blank"]
    assert read == {"nb-child", blank_id}

    con = duckdb.connect()
    run_costs_rows(con, [(MAY, run_id, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0) for run_id in read])
    done = write_cost_tags(uri, "mlflow", cost_tags_by_run(con), experiments=["blanks"],
                           tags=id_tags, log=LOG)
    assert (done.runs_written, done.runs_skipped_not_in_tracker) == (2, 0)
    for mlflow_id in ids.values():
        assert cost_tags(uri, mlflow_id)["cost.cpu_usd"] == "0.50"


def test_a_run_without_cost_now_loses_its_tags_and_amounts_round_half_up(fast_dir):
    """A restated bill moved r-b's only cost to another resource: `run_costs` no longer lists
    it, and its tags kept saying $0.50 in May (the writer visited only runs with cost). Its
    `cost.*` tags are deleted — only those: its other tags stay. Amounts round half up to
    the cent as the report does ($2.675 → 2.68, where Python's round of the double gave
    2.67); a run whose months are billed in two currencies gets no amounts, and its
    `cost.currency` names both."""
    from mlflow import MlflowClient

    uri, ids = sqlite_runs(fast_dir, "stale")
    con = duckdb.connect()
    run_costs_rows(con, [(MAY, "r-a", 2.675, 0.0, 0.0, 0.0, 0.0, 0.0005),
                         (MAY, "r-b", 0.0, 0.5, 0.0, 0.0, 0.0, 0.0)])
    tagged: set[str] = set()  # the store's runs the write-back tagged (the warehouse's record)
    write_cost_tags(uri, "mlflow", cost_tags_by_run(con), experiments=["stale"], tags=BY_NAME,
                    log=LOG, tagged=tagged)
    assert tagged == {ids["r-a"], ids["r-b"]}
    assert cost_tags(uri, ids["r-a"])["cost.total_usd"] == "2.68"
    assert cost_tags(uri, ids["r-a"])["cost.gpu_hours"] == "0.001"
    assert cost_tags(uri, ids["r-b"])["cost.cpu_usd"] == "0.50"

    con.execute("DELETE FROM run_costs WHERE run_id = 'r-b'")
    con.execute("DELETE FROM attribution_runs WHERE run_id = 'r-b'")
    # r-a's months now in two currencies: June billed in EUR, May in USD
    run_costs_rows(con, [(JUNE, "r-a", 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)])
    con.execute("INSERT INTO billing_months VALUES ('2026-05-01', 1, 1, 1, 1, 'USD'), "
                "('2026-06-01', 1, 1, 1, 1, 'EUR')")
    done = write_cost_tags(uri, "mlflow", cost_tags_by_run(con), experiments=["stale"],
                           tags=BY_NAME, log=LOG, tagged=tagged)
    assert (done.runs_cleared, done.tags_deleted) == (1, 9 + 6)  # r-b's 9, r-a's 6 amounts
    assert tagged == {ids["r-a"]}
    assert cost_tags(uri, ids["r-b"]) == {}
    assert MlflowClient(uri).get_run(ids["r-b"]).data.tags["model"] == "churn"
    assert cost_tags(uri, ids["r-a"]) == {"cost.gpu_hours": "1.001",
                                          "cost.months": "2026-05,2026-06",
                                          "cost.currency": "EUR,USD"}
    again = write_cost_tags(uri, "mlflow", cost_tags_by_run(con), experiments=["stale"],
                            tags=BY_NAME, log=LOG, tagged=tagged)
    assert (again.calls, again.runs_unchanged, again.tags_deleted) == (0, 1, 0)


def team_mlflow(uri: str, experiment: str) -> dict:
    """Tracker `team-mlflow`: `experiment` of the MLflow at `uri`, its runs known by their
    names, written back."""
    return {"kind": "mlflow", "name": "team-mlflow", "tracking_uri": uri,
            "experiments": [experiment], "tags": BY_NAME, "write_back": True}


def june_warehouse(folder: Path, cost_rows: list[tuple], sources: dict[str, str],
                   trackers: list[dict]) -> tuple[Path, Path]:
    """A warehouse in `folder` holding `cost_rows` (as HAND_ROWS) and May's runs, run id →
    the tracker that told it, and a config reading it with the `trackers`: both paths."""
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    warehouse = folder / "w.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        run_costs_rows(con, cost_rows)
        insert_runs(con, MAY, [{**RUN_DEFAULTS, "run_id": run_id, "source": source,
                                "status": "FINISHED", "start_time": datetime(2026, 5, 3)}
                               for run_id, source in sources.items()])
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump({"warehouse": {"path": str(warehouse)},
                                      "tracker": trackers}))
    return warehouse, config


def write_back_june(warehouse: Path, config: Path) -> tuple[dict, set]:
    """June's `tracker_cost_tags` alone, through Dagster: its metadata and the warehouse's
    record of the runs it tagged, (store, MLflow run id) pairs."""
    import dagster as dg

    from cost_pipeline.defs.assets.tracker_tags import tracker_cost_tags
    from cost_pipeline.defs.resources import PipelineSettings, Warehouse

    result = dg.materialize(
        [tracker_cost_tags], partition_key="2026-06-01",
        resources={"duckdb": Warehouse(database=str(warehouse)),
                   "settings": PipelineSettings(config_path=str(config))})
    assert result.success
    (event,) = result.asset_materializations_for_node("tracker_cost_tags")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        recorded = set(con.execute("SELECT store, mlflow_run_id FROM tracker_tagged_runs"
                                   ).fetchall())
    return {k: v.value for k, v in event.metadata.items()}, recorded


def test_a_run_another_tracker_tells_gets_no_tags_here(fast_dir, tmp_path):
    """Run r-b is in a runs file listed first and in MLflow: the warehouse keeps the runs
    file's (SPEC: the first tracker's), so its cost is that run's; the MLflow run of the same
    id, whose facts were set aside, got that cost as its `cost.*` tags."""
    uri, ids = sqlite_runs(fast_dir, "two-trackers")
    write_back_june(*june_warehouse(
        tmp_path, HAND_ROWS[:3], {"r-a": "team-mlflow", "r-b": "runs"},
        [{"kind": "runs_file", "name": "runs", "path": "runs.csv"},
         team_mlflow(uri, "two-trackers")]))
    assert cost_tags(uri, ids["r-a"]) == EXPECTED["r-a"]
    assert cost_tags(uri, ids["r-b"]) == {}


@pytest.mark.parametrize("first_writes_back", [True, False])
def test_two_trackers_on_one_store_leave_each_others_runs_tagged(first_writes_back, fast_dir,
                                                                 tmp_path):
    """Trackers `all` (every experiment) and `fraud-team` (experiment fraud) read the same
    MLflow store: the warehouse keeps each run as `all` tells it (the first), and the MLflow
    run is the same either way. `all` wrote its 9 tags, then `fraud-team` deleted them as
    stale, on every materialization. Now the run keeps them, written once (by `fraud-team`
    too when `all` does not write back), and a second materialization writes and deletes
    nothing."""
    uri, ids = sqlite_runs(fast_dir, f"same-store-{first_writes_back}", "fraud")
    warehouse, config = june_warehouse(
        tmp_path, HAND_ROWS[:3], {"r-a": "all", "r-b": "all"},
        [{"kind": "mlflow", "name": "all", "tracking_uri": uri, "tags": BY_NAME,
          "write_back": first_writes_back},
         {"kind": "mlflow", "name": "fraud-team", "tracking_uri": uri,
          "experiments": ["fraud"], "tags": BY_NAME, "write_back": True}])
    first, _ = write_back_june(warehouse, config)
    for name, tags in EXPECTED.items():
        assert cost_tags(uri, ids[name]) == tags
    # r-a and r-b: 9 tags each, written once; nothing deleted
    assert (first["runs_written"], first["tags_written"]) == (2, 18)
    assert (first["runs_cleared"], first["tags_deleted"]) == (0, 0)
    again, _ = write_back_june(warehouse, config)
    assert (again["runs_written"], again["tags_written"], again["tags_deleted"]) == (0, 0, 0)
    for name, tags in EXPECTED.items():
        assert cost_tags(uri, ids[name]) == tags


def test_tags_go_in_batches_of_at_most_100():
    batches = list(mlflow_tags._batches(list(range(250))))
    assert [len(b) for b in batches] == [100, 100, 50]
    assert len(COST_TAGS) <= mlflow_tags.MAX_TAGS_PER_CALL  # a run's tags: one call


def test_a_dead_tracker_is_retried_then_named_without_its_password(monkeypatch):
    monkeypatch.setattr(mlflow_tags, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = f"http://ml:s3cret@127.0.0.1:{port}"
    with pytest.raises(SourceError) as error:
        write_cost_tags(uri, "team-mlflow", {"r-a": EXPECTED["r-a"]}, log=LOG)
    message = str(error.value)
    assert message.startswith(f"team-mlflow: http://ml:***@127.0.0.1:{port}: ")
    assert "unreachable after 4 attempt(s)" in message and "s3cret" not in message
    assert "\n" not in message
    assert redact_uri("http://ml:s3cret@host:5000/x") == "http://ml:***@host:5000/x"
    assert redact_uri("sqlite:////tmp/m.db") == "sqlite:////tmp/m.db"
    assert redact_uri("https://host") == "https://host"



def test_a_locked_sqlite_store_says_it_is_locked_in_one_line(fast_dir, monkeypatch, capfd):
    """Another process holding a SQLite store's lock: the write-back retried, then said the
    store was "unreachable" (it was reached: locked), and MLflow logged every failed query
    with its traceback — some 400 lines on stderr before the one-line error."""
    import sqlite3

    monkeypatch.setattr(mlflow_tags, "RETRY_DELAYS", ())  # each attempt waits out the lock
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", ())
    folder = Path(tempfile.mkdtemp(dir=fast_dir))
    uri, _ = sqlite_runs(folder, "locked")
    uri += "?timeout=0.2"  # a query on the URI, as SQLAlchemy reads it
    capfd.readouterr()
    holder = sqlite3.connect(folder / "locked.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # readers read, writers wait
    try:
        with pytest.raises(SourceError) as error:
            write_cost_tags(uri, "team-mlflow", {"r-a": EXPECTED["r-a"]}, tags=BY_NAME,
                            log=LOG)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(error.value)
    assert "still locked after 1 attempt(s): " in message and "database is locked" in message
    assert "unreachable" not in message and "\n" not in message
    assert "Traceback" not in capfd.readouterr().err


def test_a_sqlite_uri_with_a_query_or_a_sqlite_file_uri_names_its_file(tmp_path):
    """`sqlite:///m.db?timeout=1` was checked as a file named `m.db?timeout=1` ("no MLflow
    sqlite store at this path"), and a SQLite URI (`sqlite:///file:/srv/m.db?mode=ro&uri=
    true`, which MLflow reads) was made a path below the config's folder."""
    from cost_pipeline.ingest.sources.mlflow_runs import resolve_tracking_uri, sqlite_store_file

    assert resolve_tracking_uri("sqlite:///m.db?timeout=1", tmp_path) == (
        f"sqlite:///{tmp_path.resolve() / 'm.db'}?timeout=1")
    file_uri = "sqlite:///file:/srv/m.db?mode=ro&uri=true"
    assert resolve_tracking_uri(file_uri, tmp_path) == file_uri
    assert sqlite_store_file(file_uri) == Path("/srv/m.db")
    assert sqlite_store_file("sqlite:///file:///srv/a%20b.db?uri=true") == Path("/srv/a b.db")
    assert sqlite_store_file(f"sqlite:///{tmp_path}/m.db?timeout=1") == tmp_path / "m.db"
    # and read as the store it names
    uri, ids = sqlite_runs(tmp_path, "ro")
    runs = mlflow_tags.list_tracker_runs(
        f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true", "team-mlflow", ["ro"],
        BY_NAME, LOG)
    assert runs.found["r-a"][0] == ids["r-a"]


def test_a_retried_delete_whose_first_attempt_reached_the_server_succeeds(server, monkeypatch):
    """Run h-1 has no cost now: its 9 tags are deleted, one call a tag. The first call
    reaches the server — the tag is gone — but its answer is lost (a 503): the retry found
    no tag and failed the step with RESOURCE_DOES_NOT_EXIST. A tag already gone is deleted."""
    from mlflow import MlflowClient

    monkeypatch.setattr(mlflow_tags, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    client = MlflowClient(server)
    h1 = finished_run(client, client.create_experiment("h-exp"), "h-1", *RUNS["r-b"])
    tagged: set[str] = set()
    write_cost_tags(server, "srv", {"h-1": EXPECTED["r-b"]}, experiments=["h-exp"],
                    tags=BY_NAME, log=LOG, tagged=tagged)
    assert cost_tags(server, h1) == EXPECTED["r-b"]

    def lost_answer(path: str, _n: int) -> bool:
        """The first delete-tag reaches the server (the first tag in name order), its answer
        is a 503."""
        if "delete-tag" not in path or any("delete-tag" in p for p, _ in answered):
            return False
        client.delete_tag(h1, "cost.cpu_usd")
        return True

    with failing_proxy(server, lost_answer) as (proxy_uri, answered):
        done = write_cost_tags(proxy_uri, "srv", {}, experiments=["h-exp"], tags=BY_NAME,
                               log=LOG, tagged=tagged)
    assert (done.runs_cleared, done.tags_deleted, done.calls) == (1, 9, 9)
    assert cost_tags(server, h1) == {}
    assert client.get_run(h1).data.tags["model"] == "churn"
    # the lost answer, the retry finding no tag (404), the other 8 tags deleted
    assert [status for path, status in answered if "delete-tag" in path] == [503, 404] + [200] * 8


# ------------------------------------------------------------ the month through Dagster

FOCUS_COLUMNS = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "ProviderName",
                 "ChargeCategory", "ServiceCategory", "ServiceName", "ResourceId",
                 "ResourceType", "RegionId", "SkuId", "SkuPriceDetails", "ConsumedQuantity",
                 "ConsumedUnit", "BilledCost", "EffectiveCost", "BillingCurrency", "InvoiceId")


def vm(sku: str, resource: str, instance_type: str, day: str, cost: float) -> dict:
    """A FOCUS usage row: one hour (10:00-11:00 UTC) of an instance."""
    return {"BillingPeriodStart": f"{day[:7]}-01T00:00:00Z",
            "ChargePeriodStart": f"{day}T10:00:00Z", "ChargePeriodEnd": f"{day}T11:00:00Z",
            "ProviderName": "AWS", "ChargeCategory": "Usage", "ServiceCategory": "Compute",
            "ServiceName": "Amazon EC2", "ResourceId": resource,
            "ResourceType": "Virtual Machine", "RegionId": "us-east-1", "SkuId": sku,
            "SkuPriceDetails": json.dumps({"InstanceType": instance_type}),
            "ConsumedQuantity": 1.0, "ConsumedUnit": "Hours", "BilledCost": cost,
            "EffectiveCost": cost, "BillingCurrency": "USD", "InvoiceId": "INV-1"}


BILL = [
    vm("may-gpu", "i-1", "p4d.24xlarge", "2026-05-03", 40.1234),
    vm("may-cpu", "i-2", "m6i.large", "2026-05-03", 0.5),
    vm("june-gpu", "i-1", "p4d.24xlarge", "2026-06-03", 40.0),
    vm("june-cpu", "i-3", "m6i.large", "2026-06-03", 0.25),
]


EXPERIMENT = "costs-e2e"


def write_config(folder: Path, uri: str) -> Path:
    return config_of(folder, BILL, [team_mlflow(uri, EXPERIMENT)])


def config_of(folder: Path, bill_rows: list[dict], trackers: list[dict]) -> Path:
    """A config reading `bill_rows` as a FOCUS file and the `trackers`."""
    import csv

    bill = folder / "focus" / "bill.csv"
    bill.parent.mkdir(parents=True, exist_ok=True)
    with bill.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=FOCUS_COLUMNS)
        writer.writeheader()
        writer.writerows(bill_rows)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({
        "warehouse": {"path": "warehouse.duckdb"},
        "billing": [{"kind": "focus", "path": "focus/bill.csv"}],
        "tracker": trackers}), encoding="utf-8")
    return path


def last_metadata(instance, month: date) -> dict:
    import dagster as dg

    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("tracker_cost_tags"),
                              asset_partitions=[f"{month:%Y-%m}-01"]), limit=1).records
    materialization = found[0].event_log_entry.asset_materialization
    return {k: v.value for k, v in materialization.metadata.items()}


def test_the_month_writes_back_through_dagster(server, tmp_path, dagster_home, monkeypatch):
    import dagster as dg

    from cost_pipeline.cli.materialize import materialize_month

    uri = server  # the module's other test has its runs in experiment "costs"
    ids = write_runs(uri, EXPERIMENT)
    config = write_config(tmp_path, uri)
    for month in (MAY, JUNE):
        result = materialize_month(str(config), month, progress=False)
        assert result.success, result.error
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        attributed = dict(con.execute(
            "SELECT run_id, sum(cost) FROM attribution WHERE run_id IS NOT NULL "
            "GROUP BY run_id").fetchall())
        in_run_costs = dict(con.execute(
            "SELECT run_id, sum(cost) FROM run_costs GROUP BY run_id").fetchall())
    # by hand: r-a has the whole p4d both hours: 40.1234 + 40.00; r-b its m6i hour in
    # May; r-del (deleted) its m6i hour in June, attributed but not tagged
    assert attributed == pytest.approx({"r-a": 80.1234, "r-b": 0.5, "r-del": 0.25})
    assert in_run_costs == pytest.approx(attributed)
    assert cost_tags(uri, ids["r-a"]) == {
        "cost.total_usd": "80.12", "cost.gpu_usd": "80.12", "cost.cpu_usd": "0.00",
        "cost.storage_usd": "0.00", "cost.network_usd": "0.00", "cost.other_usd": "0.00",
        "cost.gpu_hours": "16.000", "cost.months": "2026-05,2026-06",
        "cost.currency": "USD"}
    for name, cost in attributed.items():
        tags = cost_tags(uri, ids[name])
        if name == "r-del":
            assert tags == {}
        else:
            assert tags["cost.total_usd"] == f"{round(cost, 2):.2f}"
    assert cost_tags(uri, ids["r-idle"]) == {}
    with dg.DagsterInstance.get() as instance:
        june = last_metadata(instance, JUNE)
    assert (june["runs_written"], june["runs_unchanged"], june["runs_skipped_deleted"]) == (
        1, 1, 1)  # June added r-a's second month; r-b's May tags were already right

    # re-running a month writes nothing
    assert materialize_month(str(config), JUNE, progress=False, force=True).success
    with dg.DagsterInstance.get() as instance:
        again = last_metadata(instance, JUNE)
    assert (again["tags_written"], again["runs_written"], again["runs_unchanged"]) == (
        0, 0, 2)

    # the tracker's writes fail (503): retried, then one line naming tracker and run; the
    # month's tables commit all the same
    monkeypatch.setattr(mlflow_tags, "RETRY_DELAYS", (0.01, 0.02, 0.04))
    from mlflow import MlflowClient

    MlflowClient(uri).delete_tag(ids["r-a"], "cost.total_usd")
    # the tracker's reads work, every write (log-batch) is answered 503
    with failing_proxy(uri, lambda path, n: "log-batch" in path) as (proxy_uri, answered):
        port = int(proxy_uri.rsplit(":", 1)[1])
        failing = write_config(tmp_path, f"http://ml:s3cret@127.0.0.1:{port}")
        with duckdb.connect(str(warehouse)) as con:  # mark June's tables as "old"
            con.execute("DELETE FROM run_costs WHERE month = ?", [JUNE])
        result = materialize_month(str(failing), JUNE, progress=False, force=True)
    assert not result.success
    refused = [path for path, status in answered if status == 503]
    assert len(refused) == 4  # the first try and 3 retries
    assert result.error.startswith(f"team-mlflow: http://ml:***@127.0.0.1:{port}: ")
    assert "writing the cost tags of run r-a" in result.error
    assert "answered HTTP 503 Service Unavailable after 4 attempt(s)" in result.error
    assert "s3cret" not in result.error and "\n" not in result.error
    with duckdb.connect(str(warehouse), read_only=True) as con:
        june_rows = con.execute("SELECT run_id, cost FROM run_costs WHERE month = ? "
                                "ORDER BY run_id", [JUNE]).fetchall()
        ((attribution_rows,),) = con.execute(
            "SELECT count(*) FROM attribution WHERE month = ?", [JUNE]).fetchall()
    assert june_rows == [("r-a", pytest.approx(40.0)), ("r-del", pytest.approx(0.25))]
    assert attribution_rows > 0
    assert "cost.total_usd" not in cost_tags(uri, ids["r-a"])


# ------------------------------------- trackers on one server under different tracking URIs


def test_a_store_is_one_whatever_its_uri_spelling(tmp_path):
    """Scheme and host in any case, the user info, the default port, a trailing slash, a
    loopback host's name: one store. Another port, host or path is another store."""
    from cost_pipeline.config import MlflowTracker
    from cost_pipeline.defs.assets.tracker_tags import store_of

    def store(uri: str) -> str | None:
        return store_of(MlflowTracker(kind="mlflow", tracking_uri=uri), tmp_path)

    one = store("http://127.0.0.1:5000")
    assert one == "http://localhost:5000"
    for same in ("http://localhost:5000/", "HTTP://LocalHost:5000", "http://u:p@127.0.0.1:5000",
                 "http://[::1]:5000", "http://127.0.0.2:5000"):
        assert store(same) == one, same
    assert store("https://ML.example.com") == store("https://u:s3cret@ml.example.com:443/")
    assert store("https://ml.example.com") == "https://ml.example.com:443"
    assert store("http://ml.example.com:80/mlflow/") == "http://ml.example.com:80/mlflow"
    for other in ("http://127.0.0.1:5001", "https://127.0.0.1:5000", "http://ml:5000"):
        assert store(other) != one, other
    (tmp_path / "runs").mkdir()
    assert store("sqlite:///runs/../m.db") == f"sqlite:///{tmp_path.resolve()}/m.db"
    assert store(f"sqlite:///{tmp_path}/runs/../m.db") == store("sqlite:///m.db")


D_BILL = [vm("june-cpu", "i-31", "m6i.large", "2026-06-03", 5.0)]
BILLED_HOUR = (datetime(2026, 6, 3, 10), datetime(2026, 6, 3, 11))  # vm()'s on June 3rd
D_RUN = (*BILLED_HOUR, {"model": "fraud", "purpose": "adhoc", "resource_ids": "i-31"})
# by hand: d-1 holds i-31 the whole billed hour (10:00-11:00), alone: its $5.00 is all cpu
D_TAGS = {"cost.total_usd": "5.00", "cost.gpu_usd": "0.00", "cost.cpu_usd": "5.00",
          "cost.storage_usd": "0.00", "cost.network_usd": "0.00", "cost.other_usd": "0.00",
          "cost.gpu_hours": "0.000", "cost.months": "2026-06", "cost.currency": "USD"}


def two_tracker_config(folder: Path, trackers: list[dict]) -> Path:
    return config_of(folder, D_BILL, trackers)


@pytest.mark.parametrize("spelling", ["localhost", "proxy", "proxy-by-mlflow-id"])
def test_two_trackers_on_one_server_spelled_apart_keep_its_runs_tags(
        spelling, server, tmp_path, dagster_home):
    """Trackers `all` (http://127.0.0.1:PORT) and `fraud` (http://localhost:PORT, or a
    forwarding proxy: another URI of the same server) read experiment d-exp of one server:
    `all` wrote d-1's 9 tags and `fraud`, taking the URIs for two stores, deleted them as
    stale, on every materialization. The MLflow run is one (its id is unique across stores):
    it keeps its tags, written once, and a second materialization writes and deletes
    nothing. With `all` not writing back and d-1 known by its MLflow id, `fraud` tags it."""
    import dagster as dg
    from mlflow import MlflowClient

    from cost_pipeline.cli.materialize import materialize_month

    experiment = f"d-exp-{spelling}"
    client = MlflowClient(server)
    d1 = finished_run(client, client.create_experiment(experiment), "d-1", *D_RUN)
    by_mlflow_id = spelling == "proxy-by-mlflow-id"
    ids = {} if by_mlflow_id else {"tags": BY_NAME}
    with failing_proxy(server, lambda path, n: False) as (proxy_uri, _answered):
        other = (server.replace("127.0.0.1", "localhost") if spelling == "localhost"
                 else proxy_uri)
        config = two_tracker_config(tmp_path, [
            {"kind": "mlflow", "name": "all", "tracking_uri": server,
             "experiments": [experiment], "write_back": not by_mlflow_id, **ids},
            {"kind": "mlflow", "name": "fraud", "tracking_uri": other,
             "experiments": [experiment], "write_back": True, **ids}])
        done = []
        for _ in range(2):
            result = materialize_month(str(config), JUNE, progress=False, force=True)
            assert result.success, result.error
            with dg.DagsterInstance.get() as instance:
                done.append(last_metadata(instance, JUNE))
    first, again = done
    assert cost_tags(server, d1) == D_TAGS
    assert (first["runs_written"], first["tags_written"]) == (1, 9)
    assert (first["runs_cleared"], first["tags_deleted"]) == (0, 0)
    assert (again["runs_written"], again["tags_written"], again["tags_deleted"]) == (0, 0, 0)
    writer = "fraud" if by_mlflow_id else "all"
    assert first["trackers"][writer]["tags_written"] == 9


def test_a_copied_store_keeps_its_own_tags(tmp_path, dagster_home):
    """staging.db, a copy of prod.db (its runs' MLflow ids alike), lists d-1 with a stale
    `cost.total_usd` 1.00: `staging` compared d-1 with what `prod` had just written there, so
    it wrote nothing and the copy kept 1.00. A run another tracker writes is taken as written
    only when this tracker listed it alike (the same server): a copy writes its own."""
    import dagster as dg
    from mlflow import MlflowClient

    from cost_pipeline.cli.materialize import materialize_month

    prod, staging = tmp_path / "prod.db", tmp_path / "staging.db"
    client = MlflowClient(f"sqlite:///{prod}")
    d1 = finished_run(client, client.create_experiment("d-exp"), "d-1", *D_RUN)
    shutil.copy(prod, staging)
    MlflowClient(f"sqlite:///{staging}").set_tag(d1, "cost.total_usd", "1.00")
    config = two_tracker_config(tmp_path, [
        {"kind": "mlflow", "name": name, "tracking_uri": f"sqlite:///{db}",
         "experiments": ["d-exp"], "write_back": True}
        for name, db in (("prod", prod), ("staging", staging))])
    result = materialize_month(str(config), JUNE, progress=False)
    assert result.success, result.error
    with dg.DagsterInstance.get() as instance:
        written = last_metadata(instance, JUNE)["trackers"]
    assert cost_tags(f"sqlite:///{prod}", d1) == D_TAGS
    assert cost_tags(f"sqlite:///{staging}", d1) == D_TAGS
    assert written["prod"]["tags_written"] == 9 and written["staging"]["tags_written"] == 9


# ------------------------------------------- a run's exact sum, whatever its magnitude

BIG_BILL = [vm("big-gpu", "i-41", "p4d.24xlarge", "2026-06-03", 1048576.00),
            vm("big-cpu", "i-42", "m6i.large", "2026-06-03", 0.005),
            vm("big-gpu-a", "i-43", "p4d.24xlarge", "2026-06-03", 1048576.00),
            vm("big-gpu-b", "i-44", "p4d.24xlarge", "2026-06-03", 0.005)]


def test_a_large_runs_tags_are_rounded_from_its_exact_sum(tmp_path, dagster_home):
    """Run big-1 holds i-41 (a p4d, $1,048,576.00) and i-42 (an m6i, $0.005) for their billed
    hour, alone; run big-2 holds two p4d, i-43 ($1,048,576.00) and i-44 ($0.005). Each run's
    exact cost is $1,048,576.005 → 1048576.01 half up, as the report rounds it — big-2's all
    gpu. Summed through the doubles of `run_costs`, CAST(CAST(1048576.0050000000 AS DOUBLE)
    AS DECIMAL(38, 10)) is 1048576.0049999998: both were tagged 1048576.00, a cent below the
    report."""
    from mlflow import MlflowClient

    from cost_pipeline.cli.materialize import materialize_month

    uri = f"sqlite:///{tmp_path / 'big.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("big")
    ids = {}
    for name, resources in (("big-1", "i-41,i-42"), ("big-2", "i-43,i-44")):
        ids[name] = finished_run(client, experiment, name, *BILLED_HOUR,
                                 {"model": "big", "purpose": "production",
                                  "resource_ids": resources})
    config = config_of(tmp_path, BIG_BILL, [{"kind": "mlflow", "name": "big",
                                             "tracking_uri": uri, "experiments": ["big"],
                                             "tags": BY_NAME, "write_back": True}])
    result = materialize_month(str(config), JUNE, progress=False)
    assert result.success, result.error
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        exact = dict(con.execute("SELECT run_id, sum(cost_exact) FROM attribution_runs "
                                 "WHERE run_id IS NOT NULL GROUP BY run_id").fetchall())
    assert exact == {"big-1": Decimal("1048576.0050000000"),
                     "big-2": Decimal("1048576.0050000000")}
    big1, big2 = cost_tags(uri, ids["big-1"]), cost_tags(uri, ids["big-2"])
    assert (big1["cost.total_usd"], big1["cost.gpu_usd"], big1["cost.cpu_usd"]) == (
        "1048576.01", "1048576.00", "0.01")
    assert (big2["cost.total_usd"], big2["cost.gpu_usd"], big2["cost.cpu_usd"]) == (
        "1048576.01", "1048576.01", "0.00")


# ------------------------------------------------ a user's own tags under the product's names


def test_only_the_tags_the_write_back_wrote_are_deleted(fast_dir, tmp_path):
    """u1 carries `cost.total_usd=user`, u2 `cost.gpu_usd=999`, u3 `cost.other_usd=12.00`:
    the users' own values, on runs the warehouse never costed. They were deleted as stale
    ("3 run(s) without cost now"). The warehouse records the runs whose tags the write-back
    wrote, per store: only those lose their tags when their cost goes (r-b), and only the
    values in the product's format (r-b's `cost.cpu_usd` hand-set to `user` stays); a
    hand-edited tag on a costed run (r-a's total) is written back all the same."""
    from mlflow import MlflowClient

    from cost_pipeline.config import MlflowTracker
    from cost_pipeline.defs.assets.tracker_tags import store_of

    uri, ids = sqlite_runs(fast_dir, "users")
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("users").experiment_id
    start, end, run_tags = RUNS["r-idle"]
    users = {"u1": {"cost.total_usd": "user", "cost.note": "keep me"},
             "u2": {"cost.gpu_usd": "999"}, "u3": {"cost.other_usd": "12.00"}}
    for name, own in users.items():
        ids[name] = finished_run(client, experiment, name, start, end, {**run_tags, **own})
    warehouse, config = june_warehouse(tmp_path, HAND_ROWS[:3],
                                       {"r-a": "team-mlflow", "r-b": "team-mlflow"},
                                       [team_mlflow(uri, "users")])
    store = store_of(MlflowTracker(kind="mlflow", tracking_uri=uri), tmp_path)

    def users_kept() -> None:
        for name, own in users.items():
            assert cost_tags(uri, ids[name]) == {k: v for k, v in own.items()
                                                 if k != "cost.note"} | (
                {"cost.note": "keep me"} if name == "u1" else {}), name

    first, recorded = write_back_june(warehouse, config)
    assert (first["runs_written"], first["tags_written"]) == (2, 18)
    assert (first["runs_cleared"], first["tags_deleted"]) == (0, 0)
    users_kept()
    assert recorded == {(store, ids["r-a"]), (store, ids["r-b"])}

    # r-b's cost goes (its only line moved); its cpu tag hand-set to a user's value, r-a's
    # total hand-edited
    client.set_tag(ids["r-b"], "cost.cpu_usd", "user")
    client.set_tag(ids["r-a"], "cost.total_usd", "1.00")
    with duckdb.connect(str(warehouse)) as con:
        con.execute("DELETE FROM run_costs WHERE run_id = 'r-b'")
        con.execute("DELETE FROM attribution_runs WHERE run_id = 'r-b'")
    second, recorded = write_back_june(warehouse, config)
    assert (second["runs_written"], second["tags_written"]) == (1, 1)
    assert (second["runs_cleared"], second["tags_deleted"]) == (1, 8)
    assert cost_tags(uri, ids["r-a"]) == EXPECTED["r-a"]
    assert cost_tags(uri, ids["r-b"]) == {"cost.cpu_usd": "user"}
    users_kept()
    assert recorded == {(store, ids["r-a"])}

    third, recorded = write_back_june(warehouse, config)
    assert (third["runs_written"], third["tags_deleted"], third["runs_unchanged"]) == (0, 0, 1)
    users_kept()
    assert recorded == {(store, ids["r-a"])}


def test_a_warehouse_without_a_record_clears_the_tags_an_earlier_version_wrote(fast_dir,
                                                                               tmp_path):
    """A warehouse made before the record of tagged runs starts with none for the store. r-b
    holds the 9 tags an earlier version wrote ($0.50 in May), its `cost.cpu_usd` since
    hand-set to `user`; its cost is gone now. It kept those tags forever: its first
    write-back recorded only the runs given a cost. A store with no record yet takes the runs
    holding the product's tags (`cost.months` in its format: every version wrote it) as
    tagged by it: r-b loses its 8 product values and keeps the user's; r-idle's own
    `cost.total_usd=user` stays. Then the record is r-a alone, and a second write-back
    deletes nothing."""
    from mlflow import MlflowClient

    from cost_pipeline.config import MlflowTracker
    from cost_pipeline.defs.assets.tracker_tags import store_of

    uri, ids = sqlite_runs(fast_dir, "before-record")
    client = MlflowClient(uri)
    for key, value in {**EXPECTED["r-b"], "cost.cpu_usd": "user"}.items():
        client.set_tag(ids["r-b"], key, value)
    client.set_tag(ids["r-idle"], "cost.total_usd", "user")
    warehouse, config = june_warehouse(tmp_path, HAND_ROWS[:2],  # r-a alone has a cost
                                       {"r-a": "team-mlflow"},
                                       [team_mlflow(uri, "before-record")])
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tracker_tagged_runs").fetchone() == (0,)
    store = store_of(MlflowTracker(kind="mlflow", tracking_uri=uri), tmp_path)

    first, recorded = write_back_june(warehouse, config)
    # r-a: its 9 tags written; r-b: 9 product tags less the user's cpu value → 8 deleted
    assert (first["runs_written"], first["tags_written"]) == (1, 9)
    assert (first["runs_cleared"], first["tags_deleted"]) == (1, 8)
    assert cost_tags(uri, ids["r-a"]) == EXPECTED["r-a"]
    assert cost_tags(uri, ids["r-b"]) == {"cost.cpu_usd": "user"}
    assert cost_tags(uri, ids["r-idle"]) == {"cost.total_usd": "user"}
    assert recorded == {(store, ids["r-a"])}

    again, recorded = write_back_june(warehouse, config)
    assert (again["runs_written"], again["tags_deleted"], again["runs_unchanged"]) == (0, 0, 1)
    assert cost_tags(uri, ids["r-b"]) == {"cost.cpu_usd": "user"}
    assert cost_tags(uri, ids["r-idle"]) == {"cost.total_usd": "user"}
    assert recorded == {(store, ids["r-a"])}


# ------------------------------------------------ a run renamed in MLflow keeps its cost

JULY = date(2026, 7, 1)
# p1 holds i-51 (an m6i) for its billed hour in May ($12.00) and in June ($24.00), alone;
# July's one line is on a resource no run holds
P_BILL = [vm("p-may", "i-51", "m6i.large", "2026-05-03", 12.0),
          vm("p-june", "i-51", "m6i.large", "2026-06-03", 24.0),
          vm("p-july", "i-59", "m6i.large", "2026-07-03", 1.0)]
P_RUN = (datetime(2026, 5, 3, 10), datetime(2026, 6, 3, 11),
         {"model": "churn", "purpose": "production", "resource_ids": "i-51"})
NEW_P_RUN = (datetime(2026, 7, 3, 10), datetime(2026, 7, 3, 11),
             {"model": "churn", "purpose": "adhoc"})


def cpu_tags(dollars: str, months: str) -> dict[str, str]:
    """The 9 tags of a run whose cost is all cpu, without accelerator-hours."""
    return {"cost.total_usd": dollars, "cost.gpu_usd": "0.00", "cost.cpu_usd": dollars,
            "cost.storage_usd": "0.00", "cost.network_usd": "0.00", "cost.other_usd": "0.00",
            "cost.gpu_hours": "0.000", "cost.months": months, "cost.currency": "USD"}


def renamed_store(stores: Path, folder: Path, db: str) -> tuple[str, str, Path]:
    """Run p1 of experiment `db` in a sqlite store `db`.db of `stores`, and a config in
    `folder` reading it by run name with P_BILL: its URI, p1's MLflow id, the config."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{stores / f'{db}.db'}"
    client = MlflowClient(uri)
    p1 = finished_run(client, client.create_experiment(db), "p1", *P_RUN)
    return uri, p1, config_of(folder, P_BILL, [team_mlflow(uri, db)])


def rename_and_reuse(uri: str, db: str, p1: str) -> str:
    """p1 renamed `p1-old` in MLflow, and a new run named `p1` with no resource: its id."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    client.update_run(p1, name="p1-old")
    return finished_run(client, client.get_experiment_by_name(db).experiment_id, "p1",
                        *NEW_P_RUN)


def test_a_renamed_run_keeps_its_cost_and_the_new_run_of_its_name_gets_none(
        fast_dir, tmp_path, dagster_home):
    """May and June materialized: p1 (runs keyed by name) carries $12.00 + $24.00 = $36.00.
    Renamed `p1-old` in MLflow, and a new run named `p1` that ran on no billed hardware: July's
    write-back summed the warehouse's `p1` over every month and wrote it on the run bearing
    the name now — the new p1 got $36.00 and months 2026-05,2026-06, and p1-old lost its 9
    tags as stale. Each month's cost goes to the MLflow run that month's tracker snapshot
    recorded: p1-old keeps its tags, the new run gets none."""
    import dagster as dg

    from cost_pipeline.cli.materialize import materialize_month

    uri, p1, config = renamed_store(fast_dir, tmp_path, "renamed")
    for month in (MAY, JUNE):
        result = materialize_month(str(config), month, progress=False)
        assert result.success, result.error
    assert cost_tags(uri, p1) == cpu_tags("36.00", "2026-05,2026-06")

    new_p1 = rename_and_reuse(uri, "renamed", p1)
    result = materialize_month(str(config), JULY, progress=False)
    assert result.success, result.error
    assert cost_tags(uri, p1) == cpu_tags("36.00", "2026-05,2026-06")
    assert cost_tags(uri, new_p1) == {}
    with dg.DagsterInstance.get() as instance:
        july = last_metadata(instance, JULY)
    assert (july["runs_written"], july["tags_written"], july["runs_unchanged"]) == (0, 0, 1)
    assert (july["runs_cleared"], july["tags_deleted"]) == (0, 0)
    assert july["runs_skipped_not_in_tracker"] == 0
    # each month's snapshot names the MLflow run that bore the id then
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        recorded = con.execute("SELECT month, run_id, tracker_run_uuid FROM tracker_runs "
                               "ORDER BY month, run_id").fetchall()
    assert recorded == [(MAY, "p1", p1), (JUNE, "p1", p1), (JULY, "p1", new_p1),
                        (JULY, "p1-old", p1)]


def test_months_without_the_recorded_mlflow_run_go_to_the_run_bearing_the_id_now(
        fast_dir, tmp_path, dagster_home):
    """May's snapshot written before the MLflow run ids were recorded (its
    `tracker_run_uuid` NULL), June's with p1's: p1 carries $12.00 + $24.00 = $36.00, May's
    matched by the id, June's by the MLflow run, added exactly. p1 renamed `p1-old` and a new
    `p1` created: May's $12.00 goes to the run named p1 now, as before the record; June's
    $24.00 stays on p1-old, its months 2026-06 alone."""
    from cost_pipeline.cli.materialize import materialize_month

    uri, p1, config = renamed_store(fast_dir, tmp_path, "before-uuids")
    for month in (MAY, JUNE):
        result = materialize_month(str(config), month, progress=False)
        assert result.success, result.error
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE tracker_runs SET tracker_run_uuid = NULL WHERE month = ?", [MAY])
    same, _ = write_back_june(warehouse, config)
    assert (same["runs_written"], same["runs_unchanged"], same["runs_cleared"]) == (0, 1, 0)
    assert cost_tags(uri, p1) == cpu_tags("36.00", "2026-05,2026-06")

    new_p1 = rename_and_reuse(uri, "before-uuids", p1)
    split, _ = write_back_june(warehouse, config)
    assert cost_tags(uri, p1) == cpu_tags("24.00", "2026-06")
    assert cost_tags(uri, new_p1) == cpu_tags("12.00", "2026-05")
    # p1-old: its total, cpu and months moved; the new p1: its 9 tags
    assert (split["runs_written"], split["tags_written"], split["tags_deleted"]) == (2, 12, 0)
    assert split["runs_with_cost"] == 1   # the warehouse's one run id, p1


def test_the_snapshot_records_each_mlflow_runs_id_and_none_for_a_runs_file(fast_dir,
                                                                           tmp_path):
    """`tracker_runs.tracker_run_uuid`: the MLflow run id of an MLflow tracker's run, NULL for
    a run a runs file tells — r-a too, which both trackers know and the runs file (the first)
    is kept for."""
    from cost_pipeline.config import parse_config
    from cost_pipeline.ingest.runs import build_tracker_runs

    uri, ids = sqlite_runs(fast_dir, "snapshot")
    (tmp_path / "runs.csv").write_text("run_id,status,start_time\n"
                                       "f-1,FINISHED,2026-05-03T10:00:00\n"
                                       "r-a,FINISHED,2026-05-03T10:00:00\n")
    cfg = parse_config({"tracker": [{"kind": "runs_file", "name": "runs", "path": "runs.csv"},
                                    team_mlflow(uri, "snapshot")]}, tmp_path)
    with duckdb.connect() as con:
        assert build_tracker_runs(con, cfg, MAY, LOG) == 5
        rows = con.execute("SELECT run_id, source, tracker_run_uuid FROM tracker_runs "
                           "ORDER BY run_id").fetchall()
    assert rows == [("f-1", "runs", None), ("r-a", "runs", None),
                    ("r-b", "team-mlflow", ids["r-b"]), ("r-del", "team-mlflow", ids["r-del"]),
                    ("r-idle", "team-mlflow", ids["r-idle"])]


def test_a_month_written_before_the_record_gets_it_without_being_attributed_again(
        fast_dir, tmp_path, dagster_home):
    """June's snapshot written before the MLflow run ids were recorded: materialized again,
    it records p1's, and its attribution is kept (a run's key is what its rows read: its
    MLflow run id is not part of it)."""
    import dagster as dg

    from cost_pipeline.cli.materialize import materialize_month

    uri, p1, config = renamed_store(fast_dir, tmp_path, "upgraded")
    warehouse = tmp_path / "warehouse.duckdb"
    assert materialize_month(str(config), JUNE, progress=False).success
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE tracker_runs SET tracker_run_uuid = NULL")
    result = materialize_month(str(config), JUNE, progress=False)
    assert result.success, result.error
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT run_id, tracker_run_uuid FROM tracker_runs").fetchall() == [
            ("p1", p1)]
    with dg.DagsterInstance.get() as instance:
        (record,) = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("attribution"),
                                  asset_partitions=["2026-06-01"]), limit=1).records
    assert record.event_log_entry.asset_materialization.metadata["mode"].value == "kept"
    assert cost_tags(uri, p1) == cpu_tags("24.00", "2026-06")
