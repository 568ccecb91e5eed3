"""The code location (`workspace.yaml`, `dagster dev`, `[tool.dagster]`): the one Definitions
object, assembled in `defs/definitions.py` from the config named by $COST_PIPELINE_CONFIG."""

from cost_pipeline.defs.definitions import (
    ALL_ASSETS,
    CHECK_KEYS,
    JOB_NAME,
    WAREHOUSE_TAG,
    build_defs,
    default_config_path,
)

defs = build_defs()

__all__ = ["ALL_ASSETS", "CHECK_KEYS", "JOB_NAME", "WAREHOUSE_TAG", "build_defs",
           "default_config_path", "defs"]
