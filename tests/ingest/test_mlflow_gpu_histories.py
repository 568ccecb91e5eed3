"""GPU utilization from MLflow system metrics (SPEC §4): the mean of every
`system/gpu_N_utilization_percentage` value a run logged, read in batches — a SQL store a
batch of runs per query, a tracking server through its bulk history endpoint (answers cut
off at its value limit continued, a run that fills an answer read alone), a server without
that endpoint one run and metric at a time — and equal, to the bit, to the mean of the
values the test logged."""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
from pathlib import Path

import pytest

from cost_pipeline.demo.mlflow_server import mlflow_server
from cost_pipeline.demo.tool_venvs import ToolUnavailable
from cost_pipeline.ingest.sources import SourceError, mlflow_runs
from cost_pipeline.ingest.sources.mlflow_runs import read_mlflow_runs
from tests.support.mlflow_proxy import failing_proxy

T0_MS = 1_782_864_000_000          # 2026-07-01T00:00:00Z
GPU = "system/gpu_{}_utilization_percentage"
# run name → {gpu index: values in logging order}; 0.1 + 0.2 + 0.3 is where a plain sum
# and a correctly rounded one differ
HISTORIES: dict[str, dict[int, list[float]]] = {
    "r-two-gpus": {0: [10.0, 20.0, 30.0, 40.0, 50.0], 1: [90.0, 80.0, 70.0]},
    "r-one-value": {0: [42.5]},
    "r-long": {0: [1.0, 2.0], 2: [float(v) for v in range(12)], 3: [99.0]},
    "r-inexact": {0: [0.1, 0.2, 0.3], 1: [0.7, 0.1]},
    "r-deleted": {0: [60.0, 61.0]},
    "r-repeated-step": {0: [5.0, 7.0, 5.0]},
    "r-none": {},
}


def expected_mean(name: str) -> float | None:
    values = [v for history in HISTORIES[name].values() for v in history]
    return math.fsum(values) / len(values) if values else None


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A sqlite store holding HISTORIES (a val_auc metric beside them); its path and ids."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    shm = Path("/dev/shm")
    folder = (Path(tempfile.mkdtemp(prefix="cost-pipeline-gpu-", dir=shm)) if shm.is_dir()
              else tmp_path_factory.mktemp("gpu"))
    uri = f"sqlite:///{folder / 'gpu.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("gpu")
    ids = {}
    for name, histories in HISTORIES.items():
        run = client.create_run(experiment, start_time=T0_MS, run_name=name,
                                tags={"model": "m", "gpus": "4"})
        ids[name] = run.info.run_id
        metrics = [Metric("val_auc", 0.9, T0_MS, 0)]
        for gpu, values in histories.items():
            step_of = (lambda i: 0) if name == "r-repeated-step" else (lambda i: i)
            metrics += [Metric(GPU.format(gpu), v, T0_MS + 10_000 * i, step_of(i))
                        for i, v in enumerate(values)]
        client.log_batch(run.info.run_id, metrics=metrics)
        client.set_terminated(run.info.run_id, "FINISHED", end_time=T0_MS + 3_600_000)
    client.delete_run(ids["r-deleted"])
    yield folder, uri, ids
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def server(store):
    folder, _uri, _ids = store
    try:
        with mlflow_server(folder / "server", seed_store=folder / "gpu.db") as uri:
            yield uri
    except ToolUnavailable as exc:
        pytest.skip(f"mlflow server unavailable (its own venv could not be built): {exc}")


@pytest.fixture
def statements():
    """Every SQL statement any SQLAlchemy engine runs while the test does."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


def utilizations(uri: str, ids: dict[str, str]) -> dict[str, float | None]:
    names = {run_id: name for name, run_id in ids.items()}
    return {names[r["run_id"]]: r["gpu_utilization"] for r in read_mlflow_runs(uri, "mlflow")}


def expected() -> dict[str, float | None]:
    return {name: expected_mean(name) for name in HISTORIES}


def test_a_sql_store_is_read_a_batch_of_runs_per_query(store, monkeypatch, caplog,
                                                       statements):
    _folder, uri, ids = store
    monkeypatch.setattr(mlflow_runs, "HISTORY_BATCH_RUNS", 2)   # 6 runs: 3 queries
    asked = []
    monkeypatch.setattr(mlflow_runs, "_history", lambda *a: asked.append(a) or [])
    with caplog.at_level(logging.INFO, logger=mlflow_runs.__name__):
        got = utilizations(uri, ids)
    assert got == expected()
    assert not asked                      # no run asked one at a time
    hinted = [q for q in statements if "INDEXED BY index_metrics_run_uuid_key_step" in q]
    assert len(hinted) == 3               # SQLite told to seek each run's rows
    assert "GPU utilization histories of 6 run(s) (10 metric(s))" in caplog.text
    # the sum correctly rounded, not added up in whatever order the rows came
    inexact = [0.1, 0.2, 0.3, 0.7, 0.1]
    assert got["r-inexact"] == math.fsum(inexact) / 5 != sum(inexact) / 5


def test_a_server_is_read_through_its_bulk_endpoint_answers_continued(server, store,
                                                                      monkeypatch):
    _folder, _uri, ids = store
    # two runs per request, four values per answer: r-long's gpu_2 (12 values) fills an
    # answer alone; r-two-gpus' gpu_0 (5) cuts off an answer another run began
    monkeypatch.setattr(mlflow_runs, "SERVER_BULK_RUNS", 2)
    monkeypatch.setattr(mlflow_runs, "SERVER_BULK_POINTS", 4)
    with failing_proxy(server, lambda path, n: False) as (uri, answered):
        assert utilizations(uri, ids) == expected()
    paths = [path for path, status in answered if status == 200]
    bulk = [p for p in paths if "/metrics/get-history-bulk?" in p]
    alone = [p for p in paths if "/metrics/get-history?" in p]
    assert len(bulk) >= 6
    assert len(alone) == 2                # r-long's gpu_2 and r-two-gpus' gpu_0, paged alone
    assert any(ids["r-long"] in p and "gpu_2" in p for p in alone)


def test_a_server_without_the_bulk_endpoint_is_asked_run_by_run(server, store, caplog):
    _folder, _uri, ids = store
    with failing_proxy(server, lambda path, n: "get-history-bulk" in path,
                       refused=404) as (uri, answered):
        with caplog.at_level(logging.INFO, logger=mlflow_runs.__name__):
            assert utilizations(uri, ids) == expected()
    assert [s for p, s in answered if "get-history-bulk" in p] == [404]   # asked once
    assert sum("/metrics/get-history?" in p for p, _s in answered) == 10
    assert "no bulk metric-history endpoint" in caplog.text


def test_a_bulk_endpoint_answering_503_is_a_server_down_not_a_missing_endpoint(
        server, store, monkeypatch):
    """Its 503s, retried, end the read with what the server answered; asking each run alone
    instead would meet the same server."""
    monkeypatch.setattr(mlflow_runs, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    with failing_proxy(server, lambda path, n: "get-history-bulk" in path) as (uri, answered):
        with pytest.raises(SourceError) as error:
            read_mlflow_runs(uri, "mlflow")
    assert [s for p, s in answered if "get-history-bulk" in p] == [503] * 4
    assert not any("/metrics/get-history?" in p for p, _s in answered)
    assert "answered HTTP 503 Service Unavailable after 4 attempt(s)" in error.value.problem


def test_the_store_and_the_server_agree_to_the_bit(server, store):
    _folder, uri, ids = store
    from_store = read_mlflow_runs(uri, "mlflow")
    from_server = read_mlflow_runs(server, "mlflow")
    assert {r["run_id"]: r for r in from_store} == {r["run_id"]: r for r in from_server}
    assert len(from_store) == len(HISTORIES)


def test_a_store_without_mlflow_s_run_index_is_read_by_the_plain_query(store, monkeypatch,
                                                                      statements):
    """The SQLite query names MLflow's (run, key, step) index; a schema without it (the
    model does not declare that name) gets the query without the hint, and the same means."""
    _folder, uri, ids = store
    monkeypatch.setattr(mlflow_runs, "_RUN_INDEX", "no_such_index")
    monkeypatch.setattr(mlflow_runs, "HISTORY_BATCH_RUNS", 4)
    assert utilizations(uri, ids) == expected()
    assert not any("INDEXED BY" in q for q in statements)
    assert sum("FROM metrics" in q and "ORDER BY metrics.run_uuid" in q
               for q in statements) == 2  # 6 runs in batches of 4
