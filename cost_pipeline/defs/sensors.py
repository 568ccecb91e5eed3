"""Alert sensors: read failed checks and failed scheduled runs from the Dagster instance
(whoever launched the run: CLI, schedule, UI, `dagster asset materialize`) and hand them to
`cost_pipeline.alerts`, which decides what to send and keeps its state in the cursor."""


import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import dagster as dg

# not re-exported by `dagster`; the status filter keeps PLANNED rows out of the pages
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from cost_pipeline import alerts
from cost_pipeline.config import Alerts, ConfigError, load_config
from cost_pipeline.defs.resources import COMMIT_TAG, COMMITTED
from cost_pipeline.ingest.sources import redact
from cost_pipeline.run_errors import root_cause

SENSOR_INTERVAL_SECONDS = 30
PAGE = 100
MAX_PAGES = 10
# how far before the newest evaluation seen a check row may have been planned and still be
# unseen: a row is created when the check is planned, and completed when the step ends
LOOKBACK_SECONDS = 6 * 3600.0
COMPLETED = {AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED}
PARTITION_TAG = "dagster/partition"
# the warehouse file a run wrote (its jobs' run tag): code locations sharing one instance,
# one per account's warehouse, each alert on their own runs only
WAREHOUSE_TAG = "cost_pipeline/warehouse"
SCHEDULE_TAG = "dagster/schedule_name"
SENSOR_TAG = "dagster/sensor_name"
STATUS = " status"  # the run's status, beside its tags (no tag has a blank in its name)

Clock = Callable[[], float]


def _alerts_config(config_path: str) -> Alerts:
    try:
        return load_config(config_path).alerts
    except ConfigError:
        return Alerts()  # the default variable name: alerts keep flowing with a broken config


def read_check_evaluations(instance: dg.DagsterInstance, check_keys: Sequence[dg.AssetCheckKey],
                           watermark: float | None,
                           warehouse: str | None = None) -> list[alerts.CheckEvaluation]:
    """Completed evaluations of `check_keys`, newest first, back to LOOKBACK before the
    watermark (everything, up to MAX_PAGES pages, when there is none); with `warehouse`, not
    those of runs tagged with another warehouse (another code location's, whose check keys
    are the same)."""
    horizon = None if watermark is None else watermark - LOOKBACK_SECONDS
    runs: dict[str, dict] = {}
    found: list[alerts.CheckEvaluation] = []
    for key in check_keys:
        cursor = None
        for _ in range(MAX_PAGES):
            page = instance.event_log_storage.get_asset_check_execution_history(
                key, limit=PAGE, cursor=cursor, status=COMPLETED)
            for record in page:
                evaluation = _evaluation(instance, record, horizon, runs, warehouse)
                if evaluation is not None:
                    found.append(evaluation)
            if len(page) < PAGE or (horizon is not None and page[-1].create_timestamp < horizon):
                break
            cursor = page[-1].id
    return found


def _evaluation(instance: dg.DagsterInstance, record, horizon: float | None,
                runs: dict[str, dict], warehouse: str | None) -> alerts.CheckEvaluation | None:
    event = record.event
    data = event.dagster_event.event_specific_data if event and event.dagster_event else None
    if not isinstance(data, dg.AssetCheckEvaluation):
        return None
    if horizon is not None and event.timestamp < horizon:
        return None
    partition = data.partition or record.partition
    if record.run_id not in runs:
        run = instance.get_run_by_id(record.run_id)
        runs[record.run_id] = ({**run.tags, STATUS: run.status} if run else {})
    tags = runs[record.run_id]
    if warehouse is not None and tags.get(WAREHOUSE_TAG, warehouse) != warehouse:
        return None
    if not _kept(tags):
        return None
    # on the SQLite instance (`dagster dev`) the completed row carries no partition: the
    # run's partition tag is the month
    partition = partition or tags.get(PARTITION_TAG) or ""
    return alerts.CheckEvaluation(
        check=f"{data.asset_key.to_user_string()}.{data.check_name}",
        month=partition[:7] or "unpartitioned",
        passed=data.passed,
        severity=data.severity.value,
        evaluated_at=event.timestamp,
        run_id=record.run_id,
        metadata={k: v.value for k, v in data.metadata.items()},
    )


def _kept(run: dict) -> bool:
    """Whether the warehouse kept what the run's checks evaluated: its writes committed (the
    run's `cost_pipeline/commit` outcome). A run that rolled back (a later step failed, an
    interrupt, a failed commit) evaluated figures no table holds, and one not ended yet has
    no outcome: it is read again on a later tick (LOOKBACK). A run that ended without an
    outcome tag (an earlier version's) counts when it succeeded."""
    outcome = run.get(COMMIT_TAG)
    if outcome:
        return outcome == COMMITTED or outcome.startswith(f"{COMMITTED}:")
    return run.get(STATUS) == dg.DagsterRunStatus.SUCCESS


def read_failed_scheduled_runs(instance: dg.DagsterInstance, schedule_names: Sequence[str],
                               watermark: float | None,
                               sensor_names: Sequence[str] = (),
                               warehouse: str | None = None) -> list[alerts.FailedRun]:
    """Failed runs launched by `schedule_names` or by `sensor_names` (the delivery sensor's
    refresh of a restated month: after the monthly close it is the only run that brings a
    closed month's new bill in, and its cursor has moved on — unalerted, its failure left
    the old bill in place silently), newest first; with `warehouse`, only runs tagged with
    it (every run of this code location's jobs is; another location's schedules have the
    same names)."""
    after = (None if watermark is None
             else datetime.fromtimestamp(watermark - LOOKBACK_SECONDS, UTC))
    records = {}
    for tag, names in ((SCHEDULE_TAG, schedule_names), (SENSOR_TAG, sensor_names)):
        if not names:
            continue
        for r in instance.get_run_records(
                filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE],
                                      tags={tag: list(names),
                                            **({WAREHOUSE_TAG: warehouse} if warehouse else {})},
                                      updated_after=after),
                limit=PAGE, order_by="update_timestamp", ascending=False):
            records[r.dagster_run.run_id] = r
    return [
        alerts.FailedRun(
            run_id=r.dagster_run.run_id, job=r.dagster_run.job_name,
            schedule=r.dagster_run.tags.get(SCHEDULE_TAG, ""),
            month=(r.dagster_run.tags.get(PARTITION_TAG) or "")[:7],
            failed_at=r.end_time or r.update_timestamp.timestamp(),
            error=_failure_reason(instance, r.dagster_run.run_id),
            sensor=r.dagster_run.tags.get(SENSOR_TAG, ""),
        )
        for r in sorted(records.values(), key=lambda r: (r.update_timestamp,
                                                         r.dagster_run.run_id), reverse=True)
    ]


def _failure_reason(instance: dg.DagsterInstance, run_id: str) -> str:
    for entry in instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_FAILURE,
                                                    dg.DagsterEventType.RUN_FAILURE}):
        event = entry.dagster_event
        error = (event.step_failure_data.error if event.is_step_failure
                 # a run failed outside its steps (a commit that failed): its own error
                 else getattr(event.event_specific_data, "error", None)) if event else None
        # the innermost error's line, without its exception class (as the command prints it)
        message = root_cause(error) if error is not None else redact(entry.message or "")
        if message.strip():
            return shortened(message.strip().splitlines()[0])
    return "the run failed"


def shortened(text: str, limit: int = alerts.ERROR_CHARS) -> str:
    """`text` in at most `limit` characters: cut after its last whole word that fits, ending
    with "…" (a hard cut when no blank stands in the second half of what fits)."""
    if len(text) <= limit:
        return text
    blank = text.rfind(" ", limit // 2, limit)
    return (text[:blank].rstrip() if blank > 0 else text[:limit - 1]) + "…"


def _tick(context: dg.SensorEvaluationContext, config_path: str, clock: Clock,
          observe: Callable[[dict, float], list]) -> dg.SensorResult:
    state = alerts.load_state(context.cursor)
    settings = _alerts_config(config_path)
    initializing = not state["initialized"]
    queued = observe(state, clock())
    sender = alerts.webhook_sender(settings.webhook_url_env, settings.timeout_seconds)
    outcomes = alerts.deliver_due(state, clock(), sender)
    for o in outcomes:
        if o.delivered:
            context.log.info(f"alert {o.alert_id} delivered (attempt {o.attempts})")
        else:
            context.log.warning(f"alert {o.alert_id} not delivered: {o.error}; attempt "
                                f"{o.attempts}, next in {o.retry_in:.0f} s")
    delivered = sum(o.delivered for o in outcomes)
    summary = ("initialized: history recorded, nothing sent" if initializing else
               f"{len(queued)} new alert(s), {delivered} delivered, "
               f"{len(state['pending'])} waiting for delivery")
    return dg.SensorResult(skip_reason=summary, cursor=alerts.dump_state(state))


def build_check_alert_sensor(config_path: str, check_keys: Sequence[dg.AssetCheckKey],
                             clock: Clock = time.time,
                             warehouse: str | None = None) -> dg.SensorDefinition:
    @dg.sensor(
        name="check_failure_alerts",
        minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="POSTs one alert per failure episode of an ERROR check of a month "
        "(reconciliation, conservation, billing completeness) to the webhook named by "
        "alerts.webhook_url_env; retries with backoff, state in the cursor.",
    )
    def check_failure_alerts(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        def observe(state: dict, now: float) -> list:
            found = read_check_evaluations(context.instance, check_keys, state["watermark"],
                                           warehouse)
            return alerts.observe_checks(state, found, now, config=config_path)

        return _tick(context, config_path, clock, observe)

    return check_failure_alerts


def build_run_failure_alert_sensor(config_path: str, schedule_names: Sequence[str],
                                   clock: Clock = time.time,
                                   sensor_names: Sequence[str] = (),
                                   warehouse: str | None = None) -> dg.SensorDefinition:
    @dg.sensor(
        name="scheduled_run_failure_alerts",
        minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="POSTs an alert when a run launched by this pipeline's schedules (or its "
        "delivery sensor) fails.",
    )
    def scheduled_run_failure_alerts(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        def observe(state: dict, now: float) -> list:
            found = read_failed_scheduled_runs(context.instance, schedule_names,
                                               state["watermark"], sensor_names, warehouse)
            return alerts.observe_runs(state, found, now)

        return _tick(context, config_path, clock, observe)

    return scheduled_run_failure_alerts
