"""The one Definitions object: assets, checks, job, schedule and resources, read from the
config named by $COST_PIPELINE_CONFIG."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from .config import CONFIG_ENV, ConfigError, load_config
from .defs.attribution import attribution, reconciliation
from .defs.billing import billing_facts
from .defs.derived import derived_assets
from .defs.partitions import monthly
from .defs.resources import PipelineSettings
from .defs.tracker import checkpoint_inventory, tracker_runs

ALL_ASSETS = [billing_facts, tracker_runs, checkpoint_inventory, attribution, reconciliation,
              *derived_assets]
JOB_NAME = "monthly_costs"


def default_config_path() -> str:
    return os.environ.get(CONFIG_ENV) or str(Path.cwd() / "demo" / "config.yaml")


def build_defs(config_path: str | None = None) -> dg.Definitions:
    path = str(Path(config_path or default_config_path()).expanduser().resolve())
    try:
        warehouse = load_config(path).warehouse_path
        warehouse_cfg = load_config(path).warehouse
    except ConfigError:
        # the code location still loads (the UI shows the graph); runs report the error
        warehouse, warehouse_cfg = str(Path(path).parent / "warehouse.duckdb"), None
    connection_config = {}
    if warehouse_cfg and warehouse_cfg.memory_limit:
        connection_config["memory_limit"] = warehouse_cfg.memory_limit
    if warehouse_cfg and warehouse_cfg.threads:
        connection_config["threads"] = warehouse_cfg.threads
    monthly_job = dg.define_asset_job(
        JOB_NAME, selection=dg.AssetSelection.all(), partitions_def=monthly,
        description="Every asset of one month: bill → runs → attribution → decisions.",
    )
    return dg.Definitions(
        assets=ALL_ASSETS,
        jobs=[monthly_job],
        schedules=[dg.build_schedule_from_partitioned_job(
            monthly_job, day_of_month=3, hour_of_day=6, name="monthly_close")],
        resources={
            "duckdb": DuckDBResource(database=warehouse, connection_config=connection_config),
            "settings": PipelineSettings(config_path=path),
        },
        executor=dg.in_process_executor,
    )


defs = build_defs()
