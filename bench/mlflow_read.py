"""Reading runs from MLflow at scale: `read_mlflow_runs` against the previous way of reading
GPU utilization (one `get_metric_history` call per run and metric), on the same store, in
the same run, from a sqlite store and (`--server`) through a local `mlflow server`, each
read in its own process (its wall time and peak RSS).

    .venv/bin/python bench/mlflow_read.py --runs 2000 --gpus 4 --values 60 [--server]

The store is made by MLflow (its schema, one template run) and filled by SQL: creating
runs one by one through the client takes ~14 ms each. Every run carries the tags a runs
file would, a `val_auc` metric and `--gpus` histories of `--values` utilization values.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost_pipeline.ingest.sources import mlflow_runs  # noqa: E402

T0_MS = 1_782_864_000_000          # 2026-07-01T00:00:00Z
GPU = "system/gpu_{}_utilization_percentage"


def build_store(path: Path, runs: int, gpus: int, values: int, seed: int = 7) -> str:
    """A sqlite MLflow store at `path` with `runs` finished runs; returns its URI."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{path}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("bench")
    template = client.create_run(experiment, start_time=T0_MS, run_name="template")
    client.delete_run(template.info.run_id)
    rng = random.Random(seed)
    db = sqlite3.connect(path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(runs)")]
    base = dict(zip(columns, db.execute("SELECT * FROM runs").fetchone(), strict=True))
    run_rows, tags, metrics, latest = [], [], [], []
    for n in range(runs):
        run_id = uuid.UUID(int=rng.getrandbits(128)).hex
        start = T0_MS + n * 60_000
        run_rows.append({**base, "run_uuid": run_id, "name": f"run-{n}", "status": "FINISHED",
                         "start_time": start, "end_time": start + 3_600_000,
                         "lifecycle_stage": "active", "deleted_time": None})
        tags += [(k, v, run_id) for k, v in (
            ("mlflow.runName", f"run-{n}"), ("model", f"model-{n % 7}"),
            ("purpose", "search" if n % 3 else "production"), ("search_id", f"s-{n % 50}"),
            ("gpus", str(gpus)), ("resource_ids", f"i-{n % 977:04x}"))]
        auc = round(rng.uniform(0.6, 0.95), 6)
        metrics.append(("val_auc", auc, start, run_id, 0, 0))
        latest.append(("val_auc", auc, start, 0, 0, run_id))
        for gpu in range(gpus):
            history = [round(rng.uniform(0, 100), 3) for _ in range(values)]
            metrics += [(GPU.format(gpu), v, start + 10_000 * i, run_id, i, 0)
                        for i, v in enumerate(history)]
            latest.append((GPU.format(gpu), history[-1], start + 10_000 * (values - 1),
                           values - 1, 0, run_id))
    names = ", ".join(f'"{c}"' for c in columns)
    db.executemany(f"INSERT INTO runs ({names}) VALUES ({', '.join('?' * len(columns))})",
                   [tuple(row[c] for c in columns) for row in run_rows])
    db.executemany('INSERT INTO tags ("key", value, run_uuid) VALUES (?, ?, ?)', tags)
    db.executemany('INSERT INTO metrics ("key", value, timestamp, run_uuid, step, is_nan) '
                   "VALUES (?, ?, ?, ?, ?, ?)", metrics)
    db.executemany('INSERT INTO latest_metrics ("key", value, timestamp, step, is_nan, '
                   "run_uuid) VALUES (?, ?, ?, ?, ?, ?)", latest)
    db.commit()
    db.close()
    return uri


def per_run_means(uri: str) -> dict[str, float]:
    """The previous way: every run's GPU histories one `get_metric_history` call at a time,
    over the runs listed as `read_mlflow_runs` lists them."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiments = mlflow_runs._experiments(client, None, "bench", uri)
    means = {}
    for page in mlflow_runs.search_all_runs(client, list(experiments), "bench", uri):
        for run in page:
            keys = sorted(k for k in run.data.metrics if mlflow_runs.GPU_UTILIZATION.match(k))
            values = [m.value for k in keys
                      for m in client.get_metric_history(run.info.run_id, k)]
            if values:
                means[run.info.run_id] = math.fsum(values) / len(values)
    return means


def timed(call):
    started = time.perf_counter()
    result = call()
    return result, round(time.perf_counter() - started, 2)


def _peak_kib() -> int:
    """This process's peak RSS since it began this program: Linux's VmHWM. (`ru_maxrss` is
    kept across fork and exec, so a child would report the bench's own peak at its fork.)"""
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM:")))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _read(uri: str, way: str, out: Path) -> None:
    """In a child process: one way of reading, its means written to `out` with its time."""
    if way == "batched":
        rows, seconds = timed(lambda: mlflow_runs.read_mlflow_runs(uri, "bench"))
        means = {r["run_id"]: r["gpu_utilization"] for r in rows
                 if r["gpu_utilization"] is not None}
        extra = {"runs": len(rows)}
    else:
        means, seconds = timed(lambda: per_run_means(uri))
        extra = {}
    peak_mib = round(_peak_kib() / 1024)
    out.write_text(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "means": means,
                               **extra}))


def read_in_child(uri: str, way: str, folder: Path) -> dict:
    """`_read` as its own process: its wall time and peak RSS."""
    out = folder / f"{way}.json"
    done = subprocess.run([sys.executable, __file__, "--read", uri, way, str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"reading {uri} ({way}) failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def measure(uri: str, where: str, baseline: bool, folder: Path) -> dict:
    new = read_in_child(uri, "batched", folder)
    result = {"where": where, "runs": new["runs"], "read_mlflow_runs_s": new["seconds"],
              "read_mlflow_runs_peak_mib": new["peak_mib"]}
    if baseline:
        old = read_in_child(uri, "per_run", folder)
        result["per_run_histories_s"] = old["seconds"]
        result["per_run_histories_peak_mib"] = old["peak_mib"]
        result["ratio"] = round(new["seconds"] / old["seconds"], 3)
        result["means_equal"] = new["means"] == old["means"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--values", type=int, default=60, help="values per GPU history")
    parser.add_argument("--server", action="store_true", help="also through an mlflow server")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the per-run baseline (slow: quadratic in a sqlite store)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench-mlflow.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-mlflow-") as folder:
        store = Path(folder) / "mlflow.db"
        _uri, build_s = timed(lambda: build_store(store, args.runs, args.gpus, args.values))
        print(f"store: {args.runs:,} runs × {args.gpus} GPUs × {args.values} values "
              f"built in {build_s} s", flush=True)
        results = [measure(f"sqlite:///{store}", "sqlite store", not args.no_baseline,
                           Path(folder))]
        if args.server:
            from cost_pipeline.demo.mlflow_server import mlflow_server

            with mlflow_server(Path(folder) / "server", seed_store=store) as uri:
                results.append(measure(uri, "mlflow server", not args.no_baseline,
                                       Path(folder)))
    for r in results:
        line = f"{r['where']:>14}: {r['runs']:,} runs read in {r['read_mlflow_runs_s']} s"
        line += f" (peak {r['read_mlflow_runs_peak_mib']:,} MiB)"
        if "ratio" in r:
            line += (f"; per-run histories {r['per_run_histories_s']} s; ratio {r['ratio']}×; "
                     f"means equal: {r['means_equal']}")
        print(line)
    args.results.write_text(json.dumps({"params": vars(args) | {"results": str(args.results)},
                                        "results": results}, indent=2) + "\n")
    return 0 if all(r.get("means_equal", True) for r in results) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--read"]:
        _read(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
        raise SystemExit(0)
    raise SystemExit(main())
