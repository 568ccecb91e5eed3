"""A runs file (the demo's `runs.csv`) → runs in an MLflow tracking server or store, and a
local `mlflow server` to hold them (`make demo-services`, the tests).

Each run becomes an MLflow run named by its run id, with the section 4 columns as tags, its
metric as a metric, its status, times, parent (`mlflow.parentRunId`) and deletion. Reading
the store back with the tracker entry `MLFLOW_TRACKER_TAGS` gives the same runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cost_pipeline.demo.tool_venvs import tool_executable
from cost_pipeline.ingest.sources.mlflow_runs import PARENT_TAG, RUN_NAME_TAG
from cost_pipeline.ingest.sources.runs_file import read_runs

# the tracker config that reads these runs back under their own ids
MLFLOW_TRACKER_TAGS = {"run_id": RUN_NAME_TAG}
_TAGGED = ("model", "purpose", "search_id", "seed", "config_id", "gpus", "region", "dataset",
           "dataset_region", "input_hash", "transform_version", "metric_name", "team",
           "trigger", "restart_of", "resumed_from")


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.replace(tzinfo=UTC).timestamp() * 1000)


def _tags(run: dict[str, Any]) -> dict[str, str]:
    tags = {c: str(run[c]) for c in _TAGGED if run.get(c) is not None}
    if run["resource_ids"]:
        tags["resource_ids"] = ",".join(run["resource_ids"])
    if run["keep"]:
        tags["keep"] = "true"
    return tags


def _parents_first(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs ordered so that a parent is created before its children (its MLflow id is the
    children's `mlflow.parentRunId`)."""
    known = {r["run_id"] for r in runs}
    done: set[str] = set()
    ordered: list[dict[str, Any]] = []
    pending = list(runs)
    while pending:
        ready = [r for r in pending
                 if r["parent_run_id"] not in known or r["parent_run_id"] in done]
        if not ready:  # a cycle: create the rest with their parents as plain tags
            ready = pending
        ordered.extend(ready)
        done |= {r["run_id"] for r in ready}
        pending = [r for r in pending if r["run_id"] not in done]
    return ordered


def load_runs_into_mlflow(runs_csv: str | os.PathLike[str], tracking_uri: str) -> int:
    """Create every run of `runs_csv` in the MLflow at `tracking_uri`; returns the count."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri=tracking_uri)
    runs = read_runs(Path(runs_csv), "runs_file")
    experiments: dict[str, str] = {}
    mlflow_ids: dict[str, str] = {}
    for run in _parents_first(runs):
        name = run["experiment"] or "Default"
        if name not in experiments:
            found = client.get_experiment_by_name(name)
            experiments[name] = found.experiment_id if found else client.create_experiment(name)
        tags = _tags(run)
        if run["parent_run_id"]:
            tags[PARENT_TAG] = mlflow_ids.get(run["parent_run_id"], run["parent_run_id"])
        created = client.create_run(experiments[name], start_time=_ms(run["start_time"]),
                                    tags=tags, run_name=run["run_id"])
        run_id = created.info.run_id
        mlflow_ids[run["run_id"]] = run_id
        at = _ms(run["end_time"] or run["start_time"])
        metrics = []
        if run["metric_name"] and run["metric_value"] is not None:
            metrics.append(Metric(run["metric_name"], run["metric_value"], at, 0))
        if run["gpu_utilization"] is not None:
            metrics.append(Metric("system/gpu_0_utilization_percentage",
                                  run["gpu_utilization"], at, 0))
        if metrics:
            client.log_batch(run_id, metrics=metrics)
        if run["status"] != "RUNNING":
            if run["end_time"] is not None:
                client.set_terminated(run_id, run["status"], end_time=_ms(run["end_time"]))
            else:  # a finished run without an end stays without one
                client.update_run(run_id, status=run["status"])
        if run["deleted"]:
            client.delete_run(run_id)
    return len(runs)


def mlflow_requirement() -> str:
    """The full MLflow matching the client installed here (same store schema, same API)."""
    from importlib.metadata import version

    return f"mlflow=={version('mlflow-skinny')}"


def mlflow_executable() -> Path:
    """`mlflow` from its own virtual environment (`.cache/mlflow-venv`, built on first use)."""
    return tool_executable("mlflow", mlflow_requirement(), "mlflow")


@contextmanager
def mlflow_server(store_dir: Path, seed_store: Path | None = None,
                  ready_timeout: float = 90.0) -> Iterator[str]:
    """A local `mlflow server` on 127.0.0.1 (a free port) over the sqlite store
    `store_dir/mlflow.db` (a copy of `seed_store` when given), run from its own virtual
    environment; yields its tracking URI and stops it (its whole process group) on exit."""
    exe = mlflow_executable()
    store_dir.mkdir(parents=True, exist_ok=True)
    if seed_store is not None:
        shutil.copyfile(seed_store, store_dir / "mlflow.db")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log_path = store_dir / "mlflow-server.log"
    # no background job runner (a dozen huey workers): runs and metrics need none
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [str(exe), "server", "--backend-store-uri", f"sqlite:///{store_dir / 'mlflow.db'}",
             "--default-artifact-root", str(store_dir / "artifacts"), "--host", "127.0.0.1",
             "--port", str(port), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace").splitlines()[-5:]
                raise RuntimeError(f"mlflow server on {uri} did not start: " + " | ".join(tail))
            time.sleep(0.25)
        yield uri
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
