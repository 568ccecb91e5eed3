"""The `mlflow` tracker (SPEC §4, §9): runs read with the real MLflow client from a real
sqlite store and from a real `mlflow server` on 127.0.0.1, paged, deleted runs included, tag
names configurable; and the demo quarter's runs loaded into MLflow attribute the bill exactly
as the runs file does."""

from __future__ import annotations

import logging
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from cost_pipeline.config import parse_config
from cost_pipeline.demo.mlflow_server import (
    MLFLOW_TRACKER_TAGS,
    load_runs_into_mlflow,
    mlflow_server,
)
from cost_pipeline.demo.tool_venvs import ToolUnavailable
from cost_pipeline.ingest.sources import SourceError, mlflow_runs
from cost_pipeline.ingest.sources.mlflow_runs import read_mlflow_runs, resolve_tracking_uri
from tests.support.mlflow_proxy import failing_proxy

T0 = datetime(2026, 7, 1)
HOUR_MS = 3_600_000
PAGE = 5                      # smaller than every experiment's run count but one
LOG = logging.getLogger("test")


def ms(moment: datetime) -> int:
    return int(moment.replace(tzinfo=UTC).timestamp() * 1000)


def write_sample(uri: str) -> dict[str, str]:
    """18 runs in 3 experiments (a sweep of 4 configs × 3 seeds under a parent, a nested
    child, a deleted, a running and a scheduled run, renamed tags); run name → MLflow id."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient(uri)
    churn, credit, scratch = (client.create_experiment(n)
                              for n in ("churn", "credit-risk", "scratch"))
    ids: dict[str, str] = {}

    def run(experiment, name, start_h, end_h=None, status="FINISHED", tags=None, params=None,
            metrics=()):
        created = client.create_run(experiment, start_time=ms(T0) + start_h * HOUR_MS,
                                    tags=tags or {}, run_name=name)
        rid = ids[name] = created.info.run_id
        client.log_batch(rid, params=[Param(k, str(v)) for k, v in (params or {}).items()],
                         metrics=[Metric(k, v, ms(T0) + step, step) for k, v, step in metrics])
        if status in ("FINISHED", "FAILED", "KILLED"):
            client.set_terminated(rid, status, end_time=ms(T0) + end_h * HOUR_MS)
        elif status != "RUNNING":
            client.update_run(rid, status=status)
        return rid

    search = {"model": "churn", "search_id": "s1", "region": "us-east-1"}
    sweep = run(churn, "sweep-1", 0, 30, tags={**search, "purpose": "search"})
    for config in range(4):
        for seed in range(3):
            run(churn, f"c{config}-s{seed}", 2 * seed, 2 * seed + 2,
                tags={**search, "mlflow.parentRunId": sweep, "resource_ids": "i-01, vol-01",
                      "gpus": "4", "dataset": "churn-events", "dataset_region": "us-west-2"},
                params={"lr": 10 ** -config, "depth": 6, "seed": seed},
                metrics=[("val_auc", 0.70, 0), ("val_auc", 0.80, 1),
                         ("val_auc", 0.75 + config / 100, 2)])
    run(churn, "c0-s0-eval", 1, 2, tags={"purpose": "eval", "model": "churn",
                                         "mlflow.parentRunId": ids["c0-s0"]})
    client.delete_run(ids["c3-s2"])
    run(churn, "prod-1", 10, status="RUNNING",
        tags={"model": "churn", "purpose": "production", "keep": "true",
              "config_id": "prod-cfg", "resource_ids": "i-02", "team": "growth",
              "trigger": "Drift"},
        params={"lr": 0.01}, metrics=[("system/gpu_0_utilization_percentage", 50.0, 0),
                                      ("system/gpu_0_utilization_percentage", 70.0, 1),
                                      ("system/gpu_1_utilization_percentage", 90.0, 0)])
    run(churn, "queued", 20, status="SCHEDULED", tags={"model": "churn"})
    run(credit, "cr-1", 5, 9, tags={"model": "credit-risk", "cloud.resources": "i-03",
                                    "metric_name": "val_loss", "why": "manual"},
        metrics=[("val_loss", 0.5, 0), ("val_loss", 0.4, 1), ("val_auc", 0.9, 1)])
    run(scratch, "scratch-1", 3, 4, status="FAILED",
        tags={"restart_of": ids["cr-1"], "resumed_from": "ckpt-3"})
    return ids


@pytest.fixture(scope="session")
def fast_dir(tmp_path_factory):
    """sqlite fsyncs every MLflow commit: on tmpfs a store is written ~6× faster."""
    shm = Path("/dev/shm")
    if shm.is_dir():
        path = Path(tempfile.mkdtemp(prefix="cost-pipeline-mlflow-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("mlflow")


@pytest.fixture(scope="session")
def sample_store(fast_dir):
    uri = f"sqlite:///{fast_dir / 'sample.db'}"
    return uri, write_sample(uri)


@pytest.fixture(scope="session")
def server_uri(fast_dir, sample_store):
    """`mlflow server` over a copy of the sample store."""
    try:
        with mlflow_server(fast_dir / "server", seed_store=fast_dir / "sample.db") as uri:
            yield uri
    except ToolUnavailable as exc:
        pytest.skip(f"mlflow server unavailable (its own venv could not be built): {exc}")


def by_name(rows, ids) -> dict[str, dict]:
    names = {v: k for k, v in ids.items()}
    return {names[r["run_id"]]: r for r in rows}


def test_runs_field_by_field_from_a_sqlite_store(sample_store):
    uri, ids = sample_store
    rows = read_mlflow_runs(uri, "mlflow", page_size=PAGE)
    runs = by_name(rows, ids)
    assert sorted(runs) == sorted(ids)  # every page read: 18 runs in pages of 5
    child = runs["c1-s2"]
    assert child == {
        "run_id": ids["c1-s2"], "source": "mlflow", "experiment": "churn", "model": "churn",
        "purpose": "search", "search_id": "s1", "seed": "2", "config_id": child["config_id"],
        "status": "FINISHED", "start_time": datetime(2026, 7, 1, 4),
        "end_time": datetime(2026, 7, 1, 6), "resource_ids": ["i-01", "vol-01"], "gpus": 4,
        "region": "us-east-1", "dataset": "churn-events", "dataset_region": "us-west-2",
        "input_hash": None, "transform_version": None, "metric_name": None,
        "metric_value": None, "keep": False, "deleted": False, "parent_run_id": ids["sweep-1"],
        "team": None, "gpu_utilization": None, "trigger": None, "restart_of": None,
        "resumed_from": None,
    }
    # one configuration across its seeds, another configuration elsewhere
    configs = {name: r["config_id"] for name, r in runs.items() if name[:2] in ("c0", "c1")}
    assert configs["c1-s0"] == configs["c1-s1"] == configs["c1-s2"] != configs["c0-s0"]
    assert configs["c1-s0"].startswith("params:")
    assert runs["c0-s0-eval"]["parent_run_id"] == ids["c0-s0"]
    assert runs["c3-s2"]["deleted"] is True
    assert sum(r["deleted"] for r in rows) == 1
    prod = runs["prod-1"]
    assert (prod["status"], prod["end_time"], prod["keep"], prod["config_id"], prod["team"],
            prod["gpu_utilization"]) == ("RUNNING", None, True, "prod-cfg", "growth", 70.0)
    assert prod["purpose"] == "production" and prod["resource_ids"] == ["i-02"]
    assert prod["trigger"] == "drift"
    assert (runs["scratch-1"]["restart_of"], runs["scratch-1"]["resumed_from"]) == (
        ids["cr-1"], "ckpt-3")
    assert runs["queued"]["status"] == "RUNNING"
    assert runs["sweep-1"]["purpose"] == "search" and runs["sweep-1"]["parent_run_id"] is None
    assert runs["scratch-1"]["status"] == "FAILED"
    assert runs["scratch-1"]["experiment"] == "scratch"
    # without a configured metric, the run's metric_name tag names it (its latest value)
    assert (runs["cr-1"]["metric_name"], runs["cr-1"]["metric_value"]) == ("val_loss", 0.4)
    assert runs["cr-1"]["resource_ids"] == []  # its tag has another name: see the next test


def test_named_experiments_renamed_tags_and_the_configured_metric(sample_store):
    uri, ids = sample_store
    rows = read_mlflow_runs(uri, "mlflow", experiments=["credit-risk", "scratch"],
                            metric="val_auc", tags={"resource_ids": "cloud.resources",
                                                    "trigger": "why"})
    runs = by_name(rows, ids)
    assert sorted(runs) == ["cr-1", "scratch-1"]
    assert runs["cr-1"]["trigger"] == "manual"      # the renamed tag
    assert runs["cr-1"]["resource_ids"] == ["i-03"]
    assert (runs["cr-1"]["metric_name"], runs["cr-1"]["metric_value"]) == ("val_auc", 0.9)
    assert (runs["scratch-1"]["metric_name"], runs["scratch-1"]["metric_value"]) == (
        "val_auc", None)
    churn = read_mlflow_runs(uri, "mlflow", experiments=["churn"], metric="val_auc",
                             page_size=PAGE)
    assert by_name(churn, ids)["c2-s1"]["metric_value"] == pytest.approx(0.77)  # step 2


def test_tracker_runs_rows_through_the_tracker_asset_code(sample_store, tmp_path):
    from cost_pipeline.ingest.runs import build_tracker_runs

    uri, ids = sample_store
    cfg = parse_config({"tracker": [{"kind": "mlflow", "tracking_uri": uri, "name": "ml"}]},
                       tmp_path)
    with duckdb.connect() as con:
        assert build_tracker_runs(con, cfg, date(2026, 7, 1), LOG) == 18
        row = con.execute(
            "SELECT source, experiment, status, start_time, end_time, resource_ids, gpus, "
            "deleted, parent_run_id FROM tracker_runs WHERE run_id = ?", [ids["c3-s2"]]
        ).fetchone()
    assert row == ("ml", "churn", "FINISHED", datetime(2026, 7, 1, 4),
                   datetime(2026, 7, 1, 6), ["i-01", "vol-01"], 4, True, ids["sweep-1"])


def test_a_real_server_gives_the_same_rows(sample_store, server_uri):
    uri, _ids = sample_store
    named = {"tags": MLFLOW_TRACKER_TAGS, "page_size": PAGE}
    from_store = {r["run_id"]: r for r in read_mlflow_runs(uri, "mlflow", **named)}
    from_server = {r["run_id"]: r for r in read_mlflow_runs(server_uri, "mlflow", **named)}
    assert len(from_server) == 18
    assert from_server == from_store
    assert from_server["c0-s0-eval"]["parent_run_id"] == "c0-s0"  # parents named like runs


def test_runs_written_through_the_server_read_back_as_written(server_uri, tmp_path):
    from cost_pipeline.demo.quarter import build_plan, runs_csv
    from cost_pipeline.ingest.sources.runs_file import read_runs

    lines = runs_csv(build_plan()).splitlines()
    # a sweep parent, its children (one deleted) and a preprocessing run
    picked = [lines[0]] + [ln for ln in lines if ln.startswith(("s2607-sweep,", "s2607-c11-",
                                                               "pp-s2607-c01-s0,"))]
    runs_file = tmp_path / "runs.csv"
    runs_file.write_text("\n".join(picked).replace(",churn,churn,", ",churn-http,churn,") + "\n")
    written = load_runs_into_mlflow(runs_file, server_uri)
    rows = read_mlflow_runs(server_uri, "runs_file", experiments=["churn-http"],
                            tags=MLFLOW_TRACKER_TAGS)
    expected = read_runs(runs_file, "runs_file")
    assert written == len(expected) == len(rows) >= 4
    assert any(r["deleted"] for r in rows) and any(r["parent_run_id"] for r in rows)
    assert {r["run_id"]: r for r in rows} == {r["run_id"]: r for r in expected}


def test_transient_errors_are_retried_then_reported(server_uri, monkeypatch):
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", (0.05, 0.1, 0.2))
    # the first two requests are answered 503, then the server answers
    with failing_proxy(server_uri, lambda path, n: n < 2) as (uri, answered):
        rows = read_mlflow_runs(uri, "mlflow", experiments=["scratch"])
        assert [r["status"] for r in rows] == ["FAILED"]
        assert [status for _, status in answered[:3]] == [503, 503, 200]
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(dead, "mlflow")
    assert error.value.where == dead
    assert "unreachable after 4 attempt(s)" in error.value.problem
    assert time.monotonic() - started < 10



@pytest.mark.parametrize(("status", "said"), [(503, "HTTP 503 Service Unavailable"),
                                               (500, "HTTP 500 Internal Server Error")])
def test_a_tracker_answering_5xx_says_what_it_answered(monkeypatch, status, said):
    """A server that answers 503 (or another 5xx) every time was reached: it read
    "unreachable after 4 attempt(s)", the wording of a connection refused or timed out."""
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    # a real HTTP server answering `status` to every request
    with failing_proxy("http://127.0.0.1:9", lambda path, n: True, refused=status) as (
            uri, answered):
        with pytest.raises(SourceError) as error:
            read_mlflow_runs(uri, "mlflow")
    assert [code for _, code in answered] == [status] * 4   # the first try and 3 retries
    assert error.value.where == uri
    assert error.value.problem.startswith(
        f"search_experiments: answered {said} after 4 attempt(s): ")
    assert "unreachable" not in error.value.problem


def test_an_unreachable_tracker_says_why_within_the_line(monkeypatch):
    """MLflow's error for a port nothing listens on is ~390 characters, its reason last: cut
    at 300 it ended `NewConnectionError("HTTPConnection(host='127.0.` without "Connection
    refused". The line keeps 300 characters, the innermost cause's reason at its end."""
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", (0.01,))
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(dead, "mlflow")
    head = "search_experiments: unreachable after 2 attempt(s): "
    assert error.value.problem.startswith(head)
    reason = error.value.problem[len(head):]
    assert len(reason) == 300 and "\n" not in reason
    assert reason.startswith(f"API request to {dead}/api/2.0/mlflow/experiments/search failed "
                             "with exception HTTPConnectionPool(host='127.0.0.1'")
    assert reason.endswith(" … [Errno 111] Connection refused")
    # a reason that fits is left whole
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as exc:
            raise RuntimeError("connect failed") from exc
    except RuntimeError as exc:
        assert mlflow_runs._first_line(exc) == "connect failed"


def test_bad_configuration_is_named(sample_store, tmp_path):
    uri, _ids = sample_store
    with pytest.raises(SourceError, match="experiment 'nope' not found"):
        read_mlflow_runs(uri, "mlflow", experiments=["nope"])
    with pytest.raises(SourceError, match="unknown column.s. colour"):
        read_mlflow_runs(uri, "mlflow", tags={"colour": "x"})
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    with pytest.raises(SourceError, match="no MLflow sqlite store") as error:
        read_mlflow_runs(missing, "mlflow")
    assert error.value.where == missing and not (tmp_path / "missing.db").exists()
    assert resolve_tracking_uri("sqlite:///runs/m.db", tmp_path) == (
        f"sqlite:///{tmp_path.resolve()}/runs/m.db")
    assert resolve_tracking_uri("sqlite:////abs/m.db", tmp_path) == "sqlite:////abs/m.db"


@pytest.mark.parametrize("found", ["empty file", "other database"])
def test_a_sqlite_file_that_is_not_an_mlflow_store_is_refused_untouched(tmp_path, found):
    """MLflow would turn any sqlite file into a new, empty store (its tables and a Default
    experiment written into it): the month's runs would read as none, and another
    application's database would be changed."""
    import sqlite3

    path = tmp_path / "runs.db"
    if found == "empty file":
        path.write_bytes(b"")
        what = "an empty file"
    else:
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
            con.execute("INSERT INTO invoices VALUES (1, 12.5)")
        con.close()
        what = "a SQLite database without MLflow's tables alembic_version, experiments, runs"
    before = path.read_bytes()
    uri = f"sqlite:///{path}"
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(uri, "mlflow")
    assert str(error.value) == f"mlflow: {uri}: not an MLflow store ({what})"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path):
    path = tmp_path / "runs.db"
    path.write_text("run_id,status\nr1,FINISHED\n")
    uri = f"sqlite:///{path}"
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(uri, "mlflow")
    assert str(error.value) == f"mlflow: {uri}: not an MLflow store (not a SQLite database)"
    assert path.read_text() == "run_id,status\nr1,FINISHED\n"


def test_demo_runs_in_mlflow_attribute_like_the_runs_file(demo_quarter, fast_dir):
    from cost_pipeline.cli.materialize import materialize_month
    from cost_pipeline.config import load_config
    from cost_pipeline.demo.run import DEMO_MONTHS

    config_path, _results = demo_quarter
    demo_dir = Path(config_path).parent
    uri = f"sqlite:///{fast_dir / 'demo.db'}"
    # 287 runs, the spot pair's 2 restarts and fraud's 3 retrains (SPEC §12)
    assert load_runs_into_mlflow(demo_dir / "runs.csv", uri) == 292
    config = yaml.safe_load(Path(config_path).read_text())
    config["warehouse"] = {"path": "warehouse-mlflow.duckdb"}
    config["tracker"] = [{"kind": "mlflow", "tracking_uri": uri, "tags": MLFLOW_TRACKER_TAGS}]
    mlflow_config = demo_dir / "config-mlflow.yaml"
    mlflow_config.write_text(yaml.safe_dump(config))
    for month in DEMO_MONTHS:
        assert materialize_month(str(mlflow_config), month, progress=False).success

    totals = """SELECT month, run_id, purpose_class, component, kind, round(sum(cost), 6),
                       round(sum(accelerator_hours), 6)
                FROM attribution GROUP BY ALL ORDER BY ALL"""
    # (the MLflow run id each month recorded: a runs file has none)
    runs = "SELECT * EXCLUDE (source, tracker_run_uuid) FROM tracker_runs ORDER BY month, run_id"
    outcomes = "SELECT month, status, round(untracked_share, 9) FROM reconciliation ORDER BY 1"
    per_model = """SELECT month, model, purpose_class, component, round(cost, 6), runs
                   FROM cost_per_model_monthly ORDER BY ALL"""
    searches = """SELECT month, search_id, runs, configs, seeds, round(cost, 6), best_metric
                  FROM search_costs ORDER BY ALL"""
    figures = []
    for path in (load_config(config_path).warehouse_path,
                 load_config(mlflow_config).warehouse_path):
        with duckdb.connect(path, read_only=True) as con:
            figures.append([con.execute(q).fetchall()
                            for q in (totals, runs, outcomes, per_model, searches)])
    from_file, from_mlflow = figures
    assert len(from_mlflow[1]) == 3 * 292 and from_mlflow[0]
    assert from_mlflow == from_file


@pytest.mark.parametrize(("id_tag", "tags", "run_name", "expected"), [
    ("team_run", {"team_run": "tr-7"}, "trial-3", "tr-7"),
    ("team_run", {}, "trial-3", "mlflow-id"),
    ("mlflow.runName", {}, "trial-3", "trial-3"),  # MLflow keeps the name in the run's info
    ("mlflow.runName", {"mlflow.runName": "named"}, "trial-3", "named"),
    ("mlflow.runName", {"mlflow.runName": ""}, "trial-3", "mlflow-id"),
    ("mlflow.runName", {}, None, "mlflow-id"),
])
def test_a_runs_warehouse_id_is_the_same_for_reading_and_writing_back(id_tag, tags, run_name,
                                                                       expected):
    """`warehouse_run_id` names a run for the read (`raw_run`) and the cost write-back
    (mlflow_tags) alike: a run the warehouse knows by one id is found again by it."""
    from types import SimpleNamespace

    run = SimpleNamespace(
        info=SimpleNamespace(run_id="mlflow-id", run_name=run_name, status="FINISHED",
                             start_time=0, end_time=1, lifecycle_stage="active"),
        data=SimpleNamespace(tags=tags, params={}, metrics={}))
    assert mlflow_runs.warehouse_run_id(run, id_tag) == expected
    tags_of = mlflow_runs.tag_names({"run_id": id_tag}, "mlflow")
    assert mlflow_runs.raw_run(run, "exp", tags_of, None, None)["run_id"] == expected


def test_a_run_started_while_the_pages_are_read_leaves_every_run_read_once(tmp_path):
    """MLflow pages by offset, newest start first by default: a run started after the first
    page shifted the next one, its first run was the first page's last again, and the read
    failed on a run id "shared by more than one run". Oldest first, the new run comes on the
    last page; every run is handed over once."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'live.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("live")
    for i in range(7):
        run = client.create_run(experiment, start_time=ms(datetime(2026, 7, 1, i)),
                                run_name=f"r{i}")
        client.set_terminated(run.info.run_id, "FINISHED", end_time=ms(datetime(2026, 7, 1, i, 30)))
    pages = mlflow_runs.search_all_runs(client, [experiment], "mlflow", uri, page_size=3)
    read = [run.info.run_name for run in next(pages)]
    client.create_run(experiment, run_name="r-new")  # started now: after every other run
    read += [run.info.run_name for page in pages for run in page]
    assert sorted(read) == sorted([f"r{i}" for i in range(7)] + ["r-new"])
    assert len(read) == len(set(read)) == 8


JULY = date(2026, 7, 1)


def july_params() -> dict:
    """The parameters a month's decision tables are built with (July 2026)."""
    return {"month": JULY, "month_start": datetime(2026, 7, 1),
            "month_end": datetime(2026, 8, 1), "metric_goal": "max", "keep_last_live": 3,
            "keep_last_production": 3, "grace_days": 7, "max_untracked_share": 0.05,
            "min_metric_change": 0.002}


def july_warehouse(uri: str, tmp_path: Path, costs: dict[str, float], ids: dict[str, str]
                   ) -> duckdb.DuckDBPyConnection:
    """July's tracker_runs read from the store through the tracker asset's code, each named
    run given its cost as the attribution step records it, and search_costs and
    search_shape built on them."""
    from cost_pipeline.ingest.runs import build_tracker_runs
    from cost_pipeline.warehouse import replace_month, sql_text, summarize_month

    cfg = parse_config({"tracker": [{"kind": "mlflow", "tracking_uri": uri, "name": "ml"}]},
                       tmp_path)
    con = duckdb.connect()
    build_tracker_runs(con, cfg, JULY, LOG)
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    con.executemany(
        "INSERT INTO attribution_rows (month, line_key, run_hash, purpose_class, component, "
        "cost, hours, accelerator_hours, share, rule) VALUES (?, hash('L-' || ?), "
        "run_hash_of(?), 'search', 'gpu', ?, 1.0, 4.0, 1.0, 'compute')",
        [(JULY, ids[name], ids[name], cost) for name, cost in costs.items()])
    summarize_month(con, JULY)
    for table in ("search_costs", "search_shape"):
        replace_month(con, table, JULY, sql_text(table), july_params())
    return con


def test_a_random_seed_or_random_state_param_is_the_runs_seed(tmp_path):
    """Three trials of lr 0.1 told apart by a `random_seed` param: the param was left out of
    the config hash but not read as the seed, so the three had one config and no seed, and
    search_costs said 1 seed where search_shape said 3. The seed is the first of `seed`,
    `random_seed`, `random_state` a run has (a `seed` tag before any)."""
    from mlflow import MlflowClient
    from mlflow.entities import Param

    uri = f"sqlite:///{tmp_path / 'seeds.db'}"
    client = MlflowClient(uri)
    tuning, order = (client.create_experiment(n) for n in ("tuning", "order"))
    ids: dict[str, str] = {}

    def run(experiment, name, hour, tags, params):
        created = client.create_run(experiment, start_time=ms(T0) + hour * HOUR_MS,
                                    tags=tags, run_name=name)
        ids[name] = created.info.run_id
        client.log_batch(ids[name], params=[Param(k, str(v)) for k, v in params.items()])
        client.set_terminated(ids[name], "FINISHED", end_time=ms(T0) + (hour + 1) * HOUR_MS)

    for seed in range(3):
        run(tuning, f"t{seed}", seed, {"search_id": "s9", "model": "m"},
            {"lr": 0.1, "random_seed": seed})
    run(order, "tag-first", 5, {"seed": "7"}, {"seed": 1, "random_seed": 2, "lr": 1})
    run(order, "seed-param", 5, {}, {"random_state": 3, "random_seed": 2, "seed": 1, "lr": 1})
    run(order, "random-seed", 5, {}, {"random_state": 3, "random_seed": 2, "lr": 1})
    run(order, "random-state", 5, {}, {"Random_State": 3, "lr": 1})

    runs = by_name(read_mlflow_runs(uri, "mlflow"), ids)
    assert [runs[f"t{s}"]["seed"] for s in range(3)] == ["0", "1", "2"]
    assert runs["t0"]["config_id"] == runs["t1"]["config_id"] == runs["t2"]["config_id"]
    assert {name: runs[name]["seed"] for name in
            ("tag-first", "seed-param", "random-seed", "random-state")} == {
        "tag-first": "7", "seed-param": "1", "random-seed": "2", "random-state": "3"}

    with july_warehouse(uri, tmp_path, {"t0": 1.0, "t1": 2.0, "t2": 4.0}, ids) as con:
        costs = con.execute("SELECT search_id, runs, configs, seeds, cost FROM search_costs "
                            "WHERE month = ?", [JULY]).fetchall()
        shape = con.execute("SELECT search_id, runs, configs, seeds_per_config, grid, "
                            "extra_seed_cost FROM search_shape WHERE month = ?",
                            [JULY]).fetchall()
    # 1 config × 3 seeds; no metric, so the seeds after the first ("0") are extra: 2 + 4
    assert costs == [("s9", 3, 1, 3, 7.0)]
    assert shape == [("s9", 3, 1, 3, True, 6.0)]


def write_nested_sweeps(uri: str) -> dict[str, str]:
    """Two sweeps logged as hyperopt and Optuna's callback log them: `search_id` and `model`
    on the parent only, the trials carrying only `mlflow.parentRunId`; an eval run under a
    parent that says its own purpose; run name → MLflow id."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.create_experiment("nested")
    ids: dict[str, str] = {}

    def run(name, hour, tags):
        created = client.create_run(experiment, start_time=ms(T0) + hour * HOUR_MS,
                                    tags=tags, run_name=name)
        ids[name] = created.info.run_id
        client.set_terminated(ids[name], "FINISHED", end_time=ms(T0) + (hour + 1) * HOUR_MS)

    run("hp-parent", 0, {"search_id": "hp1", "model": "churn", "purpose": "search"})
    run("op-parent", 0, {"search_id": "op2", "model": "fraud"})
    for trial in range(3):
        run(f"hp-trial-{trial}", 1 + trial, {PARENT: ids["hp-parent"]})
    for trial in range(2):
        run(f"op-trial-{trial}", 1 + trial, {PARENT: ids["op-parent"]})
    run("hp-eval", 5, {PARENT: ids["hp-parent"], "purpose": "eval"})
    return ids


PARENT = "mlflow.parentRunId"


def test_trials_whose_sweep_parent_alone_has_the_search_id_are_warned_of(tmp_path, caplog):
    """SPEC §4 reads each run's columns from its own tags: a nested sweep's trials, tagged
    with their parent only, are not the search's runs (the search costs its parent's share
    alone). That is said once, naming the searches, and changes no figure."""
    uri = f"sqlite:///{tmp_path / 'nested.db'}"
    ids = write_nested_sweeps(uri)
    costs = {"hp-parent": 8.0, "op-parent": 16.0, "hp-trial-0": 1.0, "hp-trial-1": 2.0,
             "hp-trial-2": 4.0, "op-trial-0": 32.0, "op-trial-1": 64.0, "hp-eval": 128.0}
    with caplog.at_level(logging.WARNING, logger="test"):
        con = july_warehouse(uri, tmp_path, costs, ids)
    said = [r.getMessage() for r in caplog.records if "whose parent has a search_id" in
            r.getMessage()]
    assert said == [
        "ml: 5 runs whose parent has a search_id (hp1, op2) carry none themselves: they are "
        "not counted as its trials; tag each trial with its search_id (and model)"]
    with con:
        trials = con.execute(
            "SELECT run_id, search_id, model, purpose, parent_run_id FROM tracker_runs "
            "WHERE month = ? AND parent_run_id IS NOT NULL "
            "ORDER BY run_id", [JULY]).fetchall()
        searches = con.execute("SELECT search_id, runs, cost FROM search_costs "
                               "WHERE month = ? ORDER BY 1", [JULY]).fetchall()
    names = {v: k for k, v in ids.items()}
    assert sorted((names[r[0]], *r[1:4]) for r in trials) == [
        ("hp-eval", None, None, "eval"), ("hp-trial-0", None, None, None),
        ("hp-trial-1", None, None, None), ("hp-trial-2", None, None, None),
        ("op-trial-0", None, None, None), ("op-trial-1", None, None, None)]
    # each search holds its parent alone: the parent's cost, no trial run
    assert searches == [("hp1", 0, 8.0), ("op2", 0, 16.0)]


def test_a_missing_experiment_lists_the_trackers_experiments(sample_store, tmp_path):
    """`experiment 'chrun' not found` said neither what there is nor how names are matched."""
    from mlflow import MlflowClient

    uri, _ids = sample_store
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(uri, "mlflow", experiments=["chrun"])
    assert error.value.problem == (
        "experiment 'chrun' not found (names are matched exactly, case-sensitive; "
        "experiment ids are not accepted). The tracker's experiments: Default, churn, "
        "credit-risk, scratch")
    many = f"sqlite:///{tmp_path / 'many.db'}"
    client = MlflowClient(many)
    numbers = {f"exp-{n:02d}": client.create_experiment(f"exp-{n:02d}") for n in range(12)}
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(many, "mlflow", experiments=["Exp-03", numbers["exp-05"]])
    assert error.value.problem == (
        "experiment 'Exp-03' not found (names are matched exactly, case-sensitive; "
        "experiment ids are not accepted). Did you mean 'exp-03'? The tracker's experiments: "
        "Default, exp-00, exp-01, exp-02, exp-03, exp-04, exp-05, exp-06, exp-07, exp-08, "
        "… and 3 more")
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(many, "mlflow", experiments=[numbers["exp-05"]])
    assert error.value.problem.startswith(
        f"experiment {numbers['exp-05']!r} not found (names are matched exactly, "
        f"case-sensitive; experiment ids are not accepted). {numbers['exp-05']!r} is the id "
        "of experiment 'exp-05': name it instead. The tracker's experiments: Default, exp-00, ")


@contextmanager
def answering(status: int, body: dict) -> Iterator[tuple[str, list]]:
    """A real HTTP server answering every request with `status` and MLflow's JSON error
    body (`{"error_code": …, "message": …}`, as a tracking server behind authentication
    answers); the URI and the paths asked."""
    import http.server
    import json
    import threading

    asked: list[str] = []
    payload = json.dumps(body).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _answer

        def log_message(self, *_args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_permission_denied_says_what_to_check(monkeypatch):
    """A 403 read `search_experiments: request failed: PERMISSION_DENIED: Permission denied`
    and stopped there: it names the credentials MLflow's client sends and the permission."""
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    with answering(403, {"error_code": "PERMISSION_DENIED",
                         "message": "Permission denied"}) as (uri, asked):
        with pytest.raises(SourceError) as error:
            read_mlflow_runs(uri, "mlflow")
    assert len(asked) == 1                    # refused: not retried
    assert error.value.where == uri
    assert error.value.problem == (
        "search_experiments: request failed: PERMISSION_DENIED: Permission denied: the "
        "server refused the credentials or their account: check MLFLOW_TRACKING_USERNAME "
        "and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) in the pipeline's "
        "environment, and the account's permission on the experiment(s) (READ to read their "
        "runs, EDIT to write tags back)")


def test_a_bad_value_under_a_renamed_tag_names_the_tag_and_the_run(tmp_path):
    """`run cb485e…: gpus: 'two' is not a whole number` named the column, which is no tag in
    the tracker, and the run by its MLflow id only."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'bad.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("bad")
    created = client.create_run(experiment, start_time=ms(T0),
                                tags={"cloud.gpus": "two"}, run_name="trial-4")
    uuid = created.info.run_id
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(uri, "mlflow", tags={"gpus": "cloud.gpus", "run_id": RUN_NAME})
    assert error.value.where == f"{uri} run {uuid} (run_id 'trial-4')"
    assert error.value.problem == "gpus (tag 'cloud.gpus'): 'two' is not a whole number"


RUN_NAME = "mlflow.runName"


def test_two_runs_sharing_a_run_id_are_both_named_with_the_remedy(tmp_path):
    """`run_id '試行 1' (tag 'mlflow.runName') is shared by more than one run` named one of
    them, and not what to do."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'twice.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("twice")
    uuids = [client.create_run(experiment, start_time=ms(T0) + hour * HOUR_MS,
                               run_name="試行 1").info.run_id for hour in range(2)]
    with pytest.raises(SourceError) as error:
        read_mlflow_runs(uri, "mlflow", tags={"run_id": RUN_NAME})
    assert error.value.where == f"{uri} run {uuids[1]} (run_id '試行 1')"
    assert error.value.problem == (
        f"run_id '試行 1' (tag 'mlflow.runName') is shared by MLflow runs {uuids[0]} and "
        f"{uuids[1]}: rename one of them, or key runs on another tag (tags: {{run_id: …}})")
