"""The one Definitions object: assets, checks, job, schedules, alert sensors and resources,
read from the config named by $COST_PIPELINE_CONFIG."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from cost_pipeline.config import (
    CONFIG_ENV,
    ConfigError,
    ScheduleSettings,
    config_file,
    load_config,
)
from cost_pipeline.defs.assets.attribution import attribution, reconciliation
from cost_pipeline.defs.assets.decisions import derived_assets
from cost_pipeline.defs.assets.focus_export import focus_export
from cost_pipeline.defs.assets.ingest import ingest
from cost_pipeline.defs.assets.report import monthly_report
from cost_pipeline.defs.assets.tracker_tags import tracker_cost_tags
from cost_pipeline.defs.delivery_sensor import SENSOR_NAME as DELIVERY_SENSOR
from cost_pipeline.defs.delivery_sensor import build_delivery_sensor
from cost_pipeline.defs.partitions import monthly, monthly_from
from cost_pipeline.defs.period_report import build_period_job
from cost_pipeline.defs.resources import PipelineSettings, Warehouse
from cost_pipeline.defs.schedules import DAILY_REFRESH, MONTHLY_CLOSE, daily_refresh, monthly_close
from cost_pipeline.defs.sensors import (
    WAREHOUSE_TAG,
    build_check_alert_sensor,
    build_run_failure_alert_sensor,
)
from cost_pipeline.months import FIRST_MONTH

ALL_ASSETS = [ingest, attribution, reconciliation, *derived_assets, monthly_report,
              tracker_cost_tags, focus_export]
CHECK_KEYS = [key for asset in ALL_ASSETS for key in asset.check_keys]
JOB_NAME = "monthly_costs"
# assets the monthly job leaves out, each with a job of its own the UI or the CLI runs on
# demand: the FOCUS export writes a row per line × run (several times the bill), a file for
# other tools, not a table the month's decisions need
ON_DEMAND_ASSETS = ("focus_export",)
FOCUS_EXPORT_JOB = "focus_export_job"


def default_config_path() -> str:
    return os.environ.get(CONFIG_ENV) or str(Path.cwd() / "demo" / "config.yaml")


def build_defs(config_path: str | None = None, now: datetime | None = None) -> dg.Definitions:
    """The Definitions of the config at `config_path`. `now` (default: the clock) dates the
    period report's default range, the last three complete months of its UTC date: set when
    the code location loads, not when a run is launched (Dagster's config defaults are
    static)."""
    # as load_config names it: a linked config's warehouse beside the link, where the CLI
    # reads it
    path = str(config_file(config_path or default_config_path()))
    try:
        cfg = load_config(path)
        warehouse, warehouse_cfg, timing = cfg.warehouse_path, cfg.warehouse, cfg.schedule
        first_month = cfg.first_month
    except ConfigError as exc:
        # the code location still loads (the UI shows the graph); runs report the error, and
        # so does loading (`dagster definitions validate`, the daemon's log): it passed silently
        dg.get_dagster_logger().warning(
            f"{exc}: the code location loads, but its runs fail until the config is fixed")
        warehouse, warehouse_cfg = str(Path(path).parent / "warehouse.duckdb"), None
        timing, first_month = ScheduleSettings(), FIRST_MONTH
    # as every date of the product: the UTC one, not the machine's local date
    utc_today = (now or datetime.now(UTC)).astimezone(UTC).date()
    partitions, assets = monthly, ALL_ASSETS
    if first_month != FIRST_MONTH:
        # the same assets (keys, code versions, checks) over the configured months
        partitions = monthly_from(first_month)
        assets = [asset.map_asset_specs(lambda spec: spec.replace_attributes(
            partitions_def=partitions)) for asset in ALL_ASSETS]
    connection_config = {}
    if warehouse_cfg and warehouse_cfg.memory_limit:
        connection_config["memory_limit"] = warehouse_cfg.memory_limit
    if warehouse_cfg and warehouse_cfg.threads:
        connection_config["threads"] = warehouse_cfg.threads
    monthly_job = dg.define_asset_job(
        JOB_NAME, selection=dg.AssetSelection.all() - dg.AssetSelection.assets(*ON_DEMAND_ASSETS),
        partitions_def=partitions,
        description="Every asset of one month: bill → runs → attribution → decisions.",
        # a deployment's run queue allows one run per warehouse file (deploy/dagster.yaml.example);
        # a backfill's runs take the job's definition tags, the others its run tags: both, so
        # a backfill's months queue one after another, in order
        tags={WAREHOUSE_TAG: warehouse}, run_tags={WAREHOUSE_TAG: warehouse},
    )
    return dg.Definitions(
        assets=assets,
        jobs=[monthly_job, build_period_job(utc_today, {WAREHOUSE_TAG: warehouse}),
              dg.define_asset_job(
                  FOCUS_EXPORT_JOB, selection=dg.AssetSelection.assets("focus_export"),
                  partitions_def=partitions, tags={WAREHOUSE_TAG: warehouse},
                  run_tags={WAREHOUSE_TAG: warehouse},
                  description="The month's attributed bill as a FOCUS 1.2 file (on demand; "
                  "the month must be materialized).")],
        schedules=[monthly_close(monthly_job, timing, first_month),
                   daily_refresh(monthly_job, timing)],
        sensors=[build_delivery_sensor(path, JOB_NAME, partitions),
                 build_check_alert_sensor(path, CHECK_KEYS, warehouse=warehouse),
                 build_run_failure_alert_sensor(path, [MONTHLY_CLOSE, DAILY_REFRESH],
                                                sensor_names=[DELIVERY_SENSOR],
                                                warehouse=warehouse)],
        resources={
            "duckdb": Warehouse(database=warehouse, connection_config=connection_config),
            "settings": PipelineSettings(config_path=path),
        },
        executor=dg.in_process_executor,
    )



