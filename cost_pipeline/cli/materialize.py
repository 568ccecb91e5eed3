"""Materialize one month of every asset in the Dagster instance of $DAGSTER_HOME, so the UI
and the sensors see command-line runs like any other run. Assets whose code, config and
inputs are unchanged since their last materialization are skipped (`incremental.py`)."""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from cost_pipeline.cli import incremental, quick_skip
from cost_pipeline.config import load_config
from cost_pipeline.interrupts import INTERRUPT_NAMES
from cost_pipeline.months import out_of_range
from cost_pipeline.run_errors import root_cause

if TYPE_CHECKING:  # imported when a run is needed: an unchanged month is decided without it
    import dagster as dg


@dataclass
class CheckOutcome:
    asset: str
    name: str
    passed: bool
    severity: str
    metadata: dict = field(default_factory=dict)
    recorded: bool = False  # from the asset's last materialization: it was skipped


@dataclass
class MonthResult:
    month: date
    success: bool
    run_id: str | None  # None when every asset was unchanged and skipped
    error: str | None
    checks: list[CheckOutcome]
    skipped: list[str] = field(default_factory=list)  # unchanged assets, not recomputed
    error_detail: str | None = None  # the failed step's whole error chain (for --debug)
    interrupted: bool = False  # SIGINT / SIGTERM stopped the run: its writes rolled back
    # later months the warehouse holds, when the run changed what they read of this month
    # (its bill, runs or attribution): they hold this month's figures as they were
    later_months: list[str] = field(default_factory=list)

    @property
    def failed_error_checks(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed and c.severity == "ERROR"]


class DagsterHomeError(ValueError):
    """$DAGSTER_HOME cannot hold the instance: one line naming it and why."""


def must_be_folder(folder: Path, name: str) -> str | None:
    """Why `folder` (what `name` names: `DAGSTER_HOME`, `--out`) cannot be a folder, when a
    file stands there or at one of its parents."""
    for path in (folder, *folder.parents):
        if path.is_dir():
            return None
        if path.exists() or path.is_symlink():  # (a dangling link is in the way too)
            return (f"{name} {folder} is a file: it must be a folder" if path == folder
                    else f"{name} {folder} must be a folder: {path} is a file")
    return None


def dagster_home() -> Path:
    """The command's Dagster home, absolute and made: $DAGSTER_HOME (`~` expanded, a relative
    one read from the working directory: Dagster refuses a relative one), else
    `./.dagster_home`. Written back to the environment, so the instance Dagster opens and the
    one set up here are the same folder."""
    setting = os.environ.get("DAGSTER_HOME")
    home = Path(os.path.abspath(os.path.expanduser(setting or ".dagster_home")))
    os.environ["DAGSTER_HOME"] = str(home)
    problem = must_be_folder(home, "DAGSTER_HOME")
    if problem:
        raise DagsterHomeError(problem)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DagsterHomeError(f"DAGSTER_HOME {home}: cannot make the folder: "
                               f"{exc.strerror or exc}") from exc
    return home


# the settings of a Dagster home the CLI (or `make dev`) makes: no telemetry, and the run
# queue (the UI's, the schedules' and the delivery sensor's runs) one run per warehouse file
# at a time, as deploy/dagster.yaml.example has it — two queued runs of one warehouse
# started together, kept apart only by its lock, in an order it did not choose
DEFAULT_SETTINGS = """telemetry:
  enabled: false
concurrency:
  runs:
    tag_concurrency_limits:
      # every run of the monthly job carries its warehouse file as this tag
      - key: cost_pipeline/warehouse
        value: {applyLimitPerUniqueValue: true}
        limit: 1
"""


def ensure_dagster_home() -> Path:
    home = dagster_home()
    settings = home / "dagster.yaml"
    if not settings.exists():
        try:
            settings.write_text(DEFAULT_SETTINGS, encoding="utf-8")
        except OSError as exc:
            raise DagsterHomeError(f"DAGSTER_HOME {settings}: cannot write it: "
                                   f"{exc.strerror or exc}") from exc
    return home


@contextmanager
def _setup_lock(home: Path) -> Iterator[None]:
    """An exclusive lock inside the Dagster home, held while it is set up."""
    lock = home / ".cost-pipeline-setup.lock"
    try:
        handle = open(lock, "a+")  # noqa: SIM115 (closed below, after the lock is released)
    except OSError as exc:
        raise DagsterHomeError(f"DAGSTER_HOME {home}: cannot write in it: "
                               f"{exc.strerror or exc}") from exc
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def dagster_instance() -> Iterator[dg.DagsterInstance]:
    """The instance of $DAGSTER_HOME. Its set-up (the folder, `dagster.yaml`, the SQLite
    storages and their schema) is serialized by a file lock: two first-ever runs on a fresh
    home otherwise race creating the same tables. A `dagster.yaml` Dagster cannot read (not
    YAML, a storage class that cannot be imported, keys Dagster does not know) is one line
    naming it."""
    from cost_pipeline.cli.sqlite_storage import instance_of_home

    home = ensure_dagster_home_locked()
    with _setup_lock(home):
        try:
            instance = instance_of_home()
        except Exception as exc:
            raise DagsterHomeError(settings_problem(home / "dagster.yaml", exc)) from exc
        try:  # the storages create their tables on first use: do it while holding the lock
            instance.get_runs(limit=1)
            instance.event_log_storage.get_asset_records([])
            instance.schedule_storage  # noqa: B018
        except Exception as exc:  # a database that cannot be opened or is not Dagster's
            instance.dispose()
            raise DagsterHomeError(f"DAGSTER_HOME {home}: the Dagster instance cannot be "
                                   f"opened: {_first_line(exc)}") from exc
    with instance:
        yield instance


def settings_problem(settings: Path, exc: Exception) -> str:
    """Dagster's error reading the instance's settings (`dagster.yaml`) as one line naming
    the file: its YAML error with line and column, its config errors, its failed import."""
    import yaml
    from dagster._core.errors import DagsterInvalidConfigError

    from cost_pipeline.config.yaml_reader import yaml_problem

    if isinstance(exc, yaml.YAMLError):
        try:
            text = settings.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        return f"DAGSTER_HOME {settings}{yaml_problem(exc, text)}"
    if isinstance(exc, DagsterInvalidConfigError) and exc.errors:
        problems = "; ".join(" ".join(e.message.split()).rstrip(".") for e in exc.errors)
        return f"DAGSTER_HOME {settings}: not a valid Dagster instance config: {problems}"
    return f"DAGSTER_HOME {settings}: {_first_line(exc).removeprefix('Failure condition: ')}"


def _first_line(exc: Exception) -> str:
    """An error's first line (its summary; the rest quotes SQL, links, a config schema)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def ensure_dagster_home_locked() -> Path:
    """`ensure_dagster_home`, its `dagster.yaml` written by one process at a time."""
    home = dagster_home()
    with _setup_lock(home):
        return ensure_dagster_home()


def materialize_month(config_path: str, month: date, progress: bool = True,
                      force: bool = False) -> MonthResult:
    cfg = load_config(config_path)  # a config error is reported before anything runs
    problem = out_of_range(month, cfg.first_month)
    if problem:  # not Dagster's unknown-partition traceback
        raise ValueError(problem)
    ensure_dagster_home_locked()
    config_text = Path(config_path).expanduser().read_text(encoding="utf-8")
    quick = None if force else quick_skip.unchanged(cfg, config_text, month)
    if quick is not None:  # the whole month unchanged, the instance untouched: no Dagster
        skipped, records = quick
        return MonthResult(month, True, None, None,
                           [CheckOutcome(**c, recorded=True) for a in skipped
                            for c in records[a].checks], skipped)
    import dagster as dg

    from cost_pipeline.cli.progress import direct_stderr, progress_logger
    from cost_pipeline.cli.warm_up import report_warm_up_logger
    from cost_pipeline.defs.definitions import JOB_NAME, build_defs
    from cost_pipeline.defs.resources import COMMIT_TAG, COMMITTED, WHOLE_TAG

    defs = build_defs(config_path)
    job = defs.resolve_job_def(JOB_NAME)
    partition_key = f"{month:%Y-%m}-01"
    in_job = {key.to_user_string() for key in job.asset_layer.executable_asset_keys}
    graph = [(name, parents) for name, parents in incremental.graph_of(defs.resolve_asset_graph())
             if name in in_job]  # the job's assets: not the on-demand ones
    wanted = incremental.fingerprints_of(graph, cfg, config_text, month)
    with dagster_instance() as instance:
        before = {} if force else incremental.recorded(cfg.warehouse_path, month)
        run_warehouses: dict[str, str | None] = {}  # the runs' warehouse tags, looked up once
        skipped = [a for a, fp in wanted.items() if fp and a in before
                   and before[a].fingerprint == fp
                   and not incremental.newer_elsewhere(instance, a, partition_key, before[a],
                                                       cfg.warehouse_path, run_warehouses)]
        recorded_checks = [CheckOutcome(**c, recorded=True) for a in skipped
                           for c in before[a].checks]
        if len(skipped) == len(wanted):
            unchanged = MonthResult(month, True, None, None, recorded_checks, skipped)
        else:
            unchanged = None
            read_before = _read_by_later_months(cfg.warehouse_path, month)
            loggers = {}
            if progress:
                loggers["progress"] = progress_logger
                if "monthly_report" not in skipped:
                    loggers["report_warm_up"] = report_warm_up_logger
            with direct_stderr():
                result = (job.with_logger_defs(loggers) if loggers else job).execute_in_process(
                    run_config={"loggers": dict.fromkeys(loggers, {})} if loggers else None,
                    partition_key=partition_key, instance=instance, raise_on_error=False,
                    tags={"cost_pipeline/launched_by": "cli",
                          **({WHOLE_TAG: "true"} if force else {})},
                    asset_selection=[dg.AssetKey(a) for a in wanted if a not in skipped]
                    if skipped else None,
                )
            checks = [
                CheckOutcome(
                    asset=e.asset_key.to_user_string(), name=e.check_name, passed=e.passed,
                    severity=e.severity.value,
                    metadata={k: v.value for k, v in e.metadata.items()},
                )
                for e in result.get_asset_check_evaluations()
            ]
            # the month is in the warehouse only when the resource committed the run's
            # transaction (defs/resources.py): a run Dagster calls successful is not enough
            run = instance.get_run_by_id(result.run_id)
            commit = (run.tags.get(COMMIT_TAG) if run else None) or ""
            success = result.success and commit == COMMITTED
            if success:  # only now: a failed commit must not make the next run skip the month
                _record(instance, cfg.warehouse_path, month, partition_key, result.run_id,
                        wanted, skipped, checks)
    if unchanged is not None:
        quick_skip.remember(cfg, month, graph)  # the next unchanged check needs no Dagster
        return unchanged
    later: list[str] = []
    if success:
        quick_skip.remember(cfg, month, graph)
        later = _later_months(cfg.warehouse_path, month, read_before)
    error = detail = None
    interrupted = False
    if not success:
        error, detail, interrupted = _failure(result, commit)
    return MonthResult(month, success, result.run_id, error, recorded_checks + checks,
                       skipped, error_detail=detail, interrupted=interrupted,
                       later_months=later)


# what the later months read of a month: its bill's, runs' and attribution's tokens as their
# writers noted them (in the later months' fingerprints)
TOKENS, TOKEN_COLUMNS = "input_tokens", "input, token"


def _read_by_later_months(warehouse: str, month: date) -> dict[str, str] | None:
    """The month's tokens before the run; None when the warehouse cannot be read now (then
    the note is given)."""
    rows = incremental.month_rows(warehouse, TOKENS, TOKEN_COLUMNS, month)
    return None if rows is None else dict(rows)


def _later_months(warehouse: str, month: date, read_before: dict[str, str] | None) -> list[str]:
    """The months after `month` the warehouse holds (`YYYY-MM`) when the run changed what
    they read of it (`read_before`, before the run); none when nothing of it changed or the
    warehouse cannot be read (a note, not the run's result). The run just wrote it: no
    upgrade to check first."""
    try:
        with duckdb.connect(warehouse, read_only=True) as con:  # one open, after the run
            after = dict(con.execute(f"SELECT {TOKEN_COLUMNS} FROM {TOKENS} WHERE month = ?",
                                     [month]).fetchall())
            if read_before is not None and after == read_before:
                return []  # the later months' skip is right: they read the same
            return [f"{m:%Y-%m}" for (m,) in con.execute(
                "SELECT DISTINCT month FROM billing_months WHERE month > ? ORDER BY month",
                [month]).fetchall()]
    except duckdb.Error:
        return []


def _failure(result, commit: str) -> tuple[str, str | None, bool]:
    """(one line, the whole error chain, whether a signal stopped the run) of a run whose
    month did not reach the warehouse."""
    from cost_pipeline.defs.resources import COMMIT_FAILED, COMMITTED, ROLLED_BACK

    errors = []
    for event in result.all_events:
        data = event.event_specific_data
        error = (event.step_failure_data.error if event.is_step_failure
                 else getattr(data, "error", None))
        if error is not None:
            errors.append((event, error))
    stopped = ("interrupted after the month's writes were committed" if commit == COMMITTED
               else "interrupted: the run stopped and its writes were rolled back")
    for _, error in errors:
        chain = error
        while chain is not None:
            if chain.cls_name in INTERRUPT_NAMES:
                return stopped, error.to_string(), True
            chain = chain.cause
    if any(e.is_job_failure and "interrupted" in (e.message or "") for e in result.all_events):
        return stopped, None, True
    if commit == f"{ROLLED_BACK}: interrupted":  # (a signal a finalizer swallowed in the last
        return stopped, None, True                # step: every step succeeded, nothing raised)
    steps = [error for event, error in errors if event.is_step_failure]
    if steps:
        return root_cause(steps[0]), steps[0].to_string(), False
    if commit.startswith(COMMIT_FAILED):
        return commit.partition(": ")[2] or commit, None, False
    if errors:  # a resource that could not start (the warehouse is locked, read-only …)
        return root_cause(errors[0][1]), errors[0][1].to_string(), False
    if commit:
        return f"the run's writes were not committed ({commit})", None, False
    return "the run failed before any step started", None, False


def _record(instance, warehouse: str, month: date, partition_key: str, run_id: str,
            wanted: dict[str, str | None], skipped: list[str], checks: list[CheckOutcome]) -> None:
    """Record the fingerprint of every asset the (successful) run materialized. Recorded
    after the run's transaction committed: a crash in between only means a recomputation."""
    rows = []
    for asset, fingerprint in wanted.items():
        if asset in skipped or not fingerprint:
            continue
        at = incremental.latest_materialization(instance, asset, partition_key, run_id)
        if at is not None:
            mine = [{k: v for k, v in c.__dict__.items() if k != "recorded"}
                    for c in checks if c.asset == asset]
            rows.append((asset, fingerprint, at, run_id, mine))
    try:
        incremental.record(warehouse, month, rows)
    except duckdb.Error as exc:  # the next run recomputes: nothing is wrong, only slower
        print(f"warning: could not record the materialized fingerprints: {exc}",
              file=sys.stderr)
