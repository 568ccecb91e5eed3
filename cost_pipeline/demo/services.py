"""`make demo-services`: the demo quarter read through real services instead of local files,
then materialized and printed exactly like `make demo` (which stays offline).

Each service is one step in `SERVICE_STEPS`: it starts its server inside the ExitStack (so
every server stops when the demo ends, even on error), uploads its part of the demo's files
and points its part of the config at the server:
- `s3_step`: a local S3-compatible server (moto, 127.0.0.1, a free port) holding the CUR
  2.0 export (`s3://demo-billing/exports/cur/ml-cur`) and the checkpoint inventory.
- `mlflow_step`: a local `mlflow server` (127.0.0.1, a free port, its own virtual
  environment under `.cache/mlflow-venv`, store in `<out>/mlflow/`) into which `runs.csv` is
  logged as MLflow runs; `tracker:` reads them back from it by run name, with `write_back:
  true`: each month writes the runs' `cost.*` tags into the server, and the demo prints one
  run's tags (costly, over several months) as they read back from it.

    python -m cost_pipeline.demo.services [--out DIR] [--strict]
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import duckdb
import yaml

from cost_pipeline.cli.main import EXIT_ERROR, CommandParser, UsageError
from cost_pipeline.config import load_config
from cost_pipeline.demo.generate import generate_demo
from cost_pipeline.demo.local_s3 import (
    LocalS3,
    create_bucket,
    dummy_credentials,
    s3_client,
    upload_tree,
)
from cost_pipeline.demo.mlflow_server import (
    MLFLOW_TRACKER_TAGS,
    load_runs_into_mlflow,
    mlflow_server,
)
from cost_pipeline.demo.quarter import CKPT_PREFIX
from cost_pipeline.demo.run import materialize_and_print
from cost_pipeline.ingest.sources.mlflow_runs import RUN_NAME_TAG

BUCKET = "demo-billing"
EXPORT_PREFIX = "exports/cur/ml-cur"
INVENTORY_KEY = "inventory/inventory.csv"
REGION = "us-east-1"

# (stack, demo folder, config dict) → None: starts a service, uploads, rewrites the config
ServiceStep = Callable[[ExitStack, Path, dict], None]


def s3_config(config: dict, endpoint_url: str, bucket: str = BUCKET) -> dict:
    """The demo config with the bill and the inventory read from `s3://bucket/…`."""
    where = {"endpoint_url": endpoint_url, "region": REGION}
    return {
        **config,
        "billing": [{"kind": "aws_cur2", "path": f"s3://{bucket}/{EXPORT_PREFIX}", **where}],
        "checkpoints": [{"kind": "inventory", "path": f"s3://{bucket}/{INVENTORY_KEY}",
                         "prefix": CKPT_PREFIX, **where}],
    }


def upload_demo(endpoint_url: str, demo_dir: Path, bucket: str = BUCKET) -> None:
    """The demo's CUR export and inventory, uploaded as they would sit in S3."""
    create_bucket(endpoint_url, bucket)
    upload_tree(endpoint_url, demo_dir / "exports" / "cur" / "ml-cur", bucket, EXPORT_PREFIX)
    s3_client(endpoint_url).upload_file(str(demo_dir / "inventory.csv"), bucket, INVENTORY_KEY)


def s3_step(stack: ExitStack, demo_dir: Path, config: dict) -> None:
    stack.enter_context(dummy_credentials())  # moto takes any; the AWS chain needs some
    server = stack.enter_context(LocalS3())
    print(f"S3-compatible server (moto) on {server.endpoint_url}: uploading the CUR export "
          f"and the inventory to s3://{BUCKET}/", file=sys.stderr)
    upload_demo(server.endpoint_url, demo_dir)
    config.update(s3_config(config, server.endpoint_url))


def mlflow_step(stack: ExitStack, demo_dir: Path, config: dict) -> None:
    store = demo_dir / "mlflow"
    if store.exists():  # a rerun starts from an empty store, not on top of the last one
        shutil.rmtree(store)
    print("MLflow: starting a local mlflow server (its virtual environment is built on "
          "first use, ~1 min)", file=sys.stderr)
    uri = stack.enter_context(mlflow_server(store))
    runs = load_runs_into_mlflow(demo_dir / "runs.csv", uri)
    print(f"MLflow server on {uri}: {runs} runs logged from runs.csv", file=sys.stderr)
    config["tracker"] = [{"kind": "mlflow", "tracking_uri": uri,
                          "tags": dict(MLFLOW_TRACKER_TAGS), "write_back": True}]


def print_cost_tags(config_path: Path) -> None:
    """The proof of the write-back: the `cost.*` tags of the costliest of the runs with cost
    in the most months, read back from the MLflow server, beside its cost in the warehouse."""
    from mlflow import MlflowClient

    cfg = load_config(config_path)
    tracker = next((t for t in cfg.tracker if getattr(t, "write_back", False)), None)
    if tracker is None:
        return
    with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
        found = con.execute("SELECT run_id, sum(cost), count(*) FROM run_costs GROUP BY run_id "
                            "ORDER BY count(*) DESC, sum(cost) DESC, run_id LIMIT 1").fetchall()
    if not found:
        return
    (run_id, cost, months), = found
    runs = MlflowClient(tracker.tracking_uri).search_runs(
        [e.experiment_id for e in MlflowClient(tracker.tracking_uri).search_experiments()],
        filter_string=f"tags.`{RUN_NAME_TAG}` = '{run_id}'", max_results=1)
    tags = runs[0].data.tags if runs else {}
    print(f"\nMLflow run {run_id} ({tracker.tracking_uri}), its cost tags as written back "
          f"(warehouse: {cost:,.2f} over its {months} month(s)):")
    for name in sorted(t for t in tags if t.startswith("cost.")):
        print(f"  {name} = {tags[name]}")


SERVICE_STEPS: list[ServiceStep] = [s3_step, mlflow_step]


def run_demo_services(out_dir: Path, strict: bool = False) -> int:
    out_dir = out_dir.resolve()
    print(f"writing the demo quarter to {out_dir}", file=sys.stderr)
    config = yaml.safe_load(generate_demo(out_dir).read_text(encoding="utf-8"))
    config["warehouse"] = {**config.get("warehouse", {}), "path": "warehouse-services.duckdb"}
    with ExitStack() as stack:
        for step in SERVICE_STEPS:
            step(stack, out_dir, config)
        path = out_dir / "config-services.yaml"
        path.write_text("# the demo quarter read through local servers (make demo-services)\n"
                        + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        code = materialize_and_print(path, strict)
        if code != 1:
            print_cost_tags(path)
        return code


def main(argv: list[str] | None = None) -> int:
    # the command line's parser: a wrong option is one line and exit 1, as `cost-pipeline`'s
    # (exit 2 means an ERROR check failed under --strict)
    parser = CommandParser(prog="python -m cost_pipeline.demo.services",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("demo-services"))
    parser.add_argument("--strict", action="store_true",
                        help="exit 2 when an ERROR check failed")
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return run_demo_services(args.out, args.strict)


if __name__ == "__main__":
    sys.exit(main())
