"""Materialize one month of every asset in the Dagster instance of $DAGSTER_HOME, so the UI
and the sensors see command-line runs like any other run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import dagster as dg

from .config import load_config
from .definitions import JOB_NAME, build_defs
from .progress import progress_logger


@dataclass
class CheckOutcome:
    asset: str
    name: str
    passed: bool
    severity: str
    metadata: dict = field(default_factory=dict)


@dataclass
class MonthResult:
    month: date
    success: bool
    run_id: str
    error: str | None
    checks: list[CheckOutcome]

    @property
    def failed_error_checks(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed and c.severity == "ERROR"]


def ensure_dagster_home() -> Path:
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(Path.cwd() / ".dagster_home")
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    settings = Path(home) / "dagster.yaml"
    if not settings.exists():
        settings.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return Path(home)


def _root_cause(error) -> str:
    """The innermost user error's message, one line, without the exception class."""
    while error is not None and getattr(error, "cause", None) is not None:
        error = error.cause
    if error is None:
        return "the run failed"
    message = (error.message or "").strip().splitlines()
    text = message[0] if message else error.cls_name or "error"
    prefix = f"{error.cls_name}: " if error.cls_name else ""
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def materialize_month(config_path: str, month: date, progress: bool = True) -> MonthResult:
    load_config(config_path)  # a config error is reported before anything runs
    ensure_dagster_home()
    job = build_defs(config_path).resolve_job_def(JOB_NAME)
    if progress:
        job = job.with_logger_defs({"progress": progress_logger})
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            run_config={"loggers": {"progress": {}}} if progress else None,
            partition_key=f"{month:%Y-%m}-01", instance=instance, raise_on_error=False,
            tags={"cost_pipeline/launched_by": "cli"},
        )
    error = None
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        error = (_root_cause(failures[0].step_failure_data.error) if failures
                 else "the run failed before any step started")
    checks = [
        CheckOutcome(
            asset=e.asset_key.to_user_string(), name=e.check_name, passed=e.passed,
            severity=e.severity.value,
            metadata={k: v.value for k, v in e.metadata.items()},
        )
        for e in result.get_asset_check_evaluations()
    ]
    return MonthResult(month, result.success, result.run_id, error, checks)
