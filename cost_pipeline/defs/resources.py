"""Resources: the validated config and the DuckDB warehouse."""


from datetime import date
from functools import lru_cache
from typing import Any

import dagster as dg

from ..config import PipelineConfig, load_config
from ..months import month_bounds, parse_month


@lru_cache(maxsize=8)
def _load(path: str, mtime_marker: float) -> PipelineConfig:
    return load_config(path)


class PipelineSettings(dg.ConfigurableResource):
    """The pipeline's YAML config (SPEC §9), validated on use."""

    config_path: str

    def load(self) -> PipelineConfig:
        import os

        try:
            marker = os.stat(self.config_path).st_mtime
        except OSError:
            marker = 0.0
        return _load(self.config_path, marker)


def month_of(context: dg.AssetExecutionContext) -> date:
    return parse_month(context.partition_key[:7])


def month_params(cfg: PipelineConfig, month: date) -> dict[str, Any]:
    """Every named parameter the `assets/*.sql` files may use."""
    start, end = month_bounds(month)
    retention, search = cfg.policy.retention, cfg.policy.search
    return {
        "month": month,
        "month_start": start,
        "month_end": end,
        "run_tag": cfg.run_tag,
        "keep_last_live": retention.keep_last_live,
        "keep_last_production": retention.keep_last_production,
        "grace_days": retention.grace_days,
        "metric_goal": search.metric_goal,
        "max_untracked_share": cfg.policy.reconciliation.max_untracked_share,
    }
