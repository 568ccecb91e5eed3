"""`bench/mlflow_read.py` at a tiny size: a store it builds by SQL is one MLflow reads (every
run, its tags and histories), and the batched read gives the per-run baseline's means."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_mlflow_bench_builds_a_store_mlflow_reads_and_agrees_with_its_baseline(tmp_path):
    results = tmp_path / "mlflow.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mlflow_read.py"), "--runs", "40", "--gpus", "3",
         "--values", "5", "--results", str(results)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [store] = json.loads(results.read_text())["results"]
    assert store["where"] == "sqlite store"
    assert store["runs"] == 41                    # the 40 built and MLflow's deleted template
    assert store["means_equal"] is True
    assert store["read_mlflow_runs_s"] > 0 and store["per_run_histories_s"] > 0
    assert store["read_mlflow_runs_peak_mib"] > 50 and store["per_run_histories_peak_mib"] > 50
    assert "40 runs × 3 GPUs × 5 values" in done.stdout


def test_the_bench_store_reads_as_the_runs_it_was_built_from(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import mlflow_read
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from cost_pipeline.ingest.sources.mlflow_runs import read_mlflow_runs

    uri = mlflow_read.build_store(tmp_path / "m.db", runs=12, gpus=2, values=3)
    rows = {r["run_id"]: r for r in read_mlflow_runs(uri, "bench")}
    active = [r for r in rows.values() if not r["deleted"]]
    assert len(active) == 12 and len(rows) == 13
    assert {r["model"] for r in active} == {f"model-{n % 7}" for n in range(12)}
    assert all(r["gpus"] == 2 and 0 <= r["gpu_utilization"] <= 100 for r in active)
    assert all(r["metric_value"] is None for r in active)   # no metric named: none read
