"""Resources: the validated config, and the DuckDB warehouse — dagster-duckdb's DuckDBResource
plus
- a lock held for the whole run, so that two materializations of the same warehouse (CLI,
  schedule, UI) never interleave their writes — the second waits, then fails clearly;
- one connection and one transaction for the whole run: every step's writes commit together
  only when the run is known to have succeeded completely — every planned step succeeded, no
  step failed, no interrupt (SIGINT / SIGTERM) arrived, no termination was requested — and
  roll back together otherwise: a run that fails, is interrupted, terminated or killed
  (SIGKILL) leaves every table of the month as it was;
- the commit is part of the run's success: its outcome is the run's `cost_pipeline/commit`
  tag, and a COMMIT that fails (disk full, a bad WAL path) fails the run; files a step
  publishes (the report) appear only once the month committed."""


import os
import re
import time
from contextlib import contextmanager
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._utils.interrupts import check_captured_interrupt
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from cost_pipeline import interrupts
from cost_pipeline.config import PipelineConfig, load_config
from cost_pipeline.months import parse_month

# WarehouseBusyError is re-exported: a run's wait for the writer lock ran out
from cost_pipeline.warehouse import WarehouseBusyError as WarehouseBusyError
from cost_pipeline.warehouse import (
    acquire_writer_lock,
    begin_run_transaction,
    lock_path,
    query_interrupted,
    release_writer_lock,
)


@lru_cache(maxsize=8)
def _load(path: str, mtime_marker: float) -> PipelineConfig:
    return load_config(path)


class PipelineSettings(dg.ConfigurableResource):
    """The pipeline's YAML config (SPEC §9), validated on use."""

    config_path: str

    def load(self) -> PipelineConfig:
        try:
            marker = os.stat(self.config_path).st_mtime
        except OSError:
            marker = 0.0
        return _load(self.config_path, marker)


def month_of(context: dg.AssetExecutionContext) -> date:
    return parse_month(context.partition_key[:7])


def forced(context: dg.AssetExecutionContext) -> bool:
    """Whether the run is to recompute every asset whole (`WHOLE_TAG`, `materialize --force`)."""
    return context.run.tags.get(WHOLE_TAG) == "true"


# the outcome of a run's transaction, as a tag on the run: the CLI (and anyone reading the
# run) knows whether the month reached the warehouse; a run is successful only with `committed`
COMMIT_TAG = "cost_pipeline/commit"
# a run tagged so recomputes every asset from its inputs (`materialize --force`): the
# attribution too, even when nothing it depends on changed
WHOLE_TAG = "cost_pipeline/whole"
COMMITTED = "committed"
ROLLED_BACK = "rolled back"
COMMIT_FAILED = "commit failed"
# steps that write elsewhere (the tracker's cost tags, read from this run's rows), to the
# warehouse only their own record (`tracker_tagged_runs`, what they wrote, kept on failure):
# their failure fails the run but keeps the month's commit, so the step is retried alone
# against the committed month (docs/tracker-costs.md)
OUTSIDE_WAREHOUSE_STEPS = frozenset({"tracker_cost_tags"})
# how long the run's connection waits for another process (a reader) to release the file
OPEN_RETRY_SECONDS = 3.0


class WarehouseLockedError(RuntimeError):
    """The DuckDB file is held by another program, or cannot be written at all."""


class WarehouseCommitError(BaseException):
    """The run's writes could not be committed: the month keeps its previous rows.

    A BaseException on purpose: Dagster turns an Exception raised at resource teardown into a
    log line and still reports the run successful; this one ends the run as failed."""


class Warehouse(DuckDBResource):
    lock_timeout_seconds: float = 900.0
    run_transaction: bool = True
    _lock: Any = PrivateAttr(default=None)
    _run_con: Any = PrivateAttr(default=None)
    _failed: bool = PrivateAttr(default=False)
    _staged: list = PrivateAttr(default_factory=list)
    _run: Any = PrivateAttr(default=None)  # (instance, run id) of the run holding the lock

    @property
    def lock_path(self) -> Path | None:
        return lock_path(self.database)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        path = self.lock_path
        if path is None:
            return

        def waiting(holder: str) -> None:
            if context.log is not None:
                context.log.warning(f"waiting for another materialization of "
                                    f"{self.database} ({holder}) to finish")

        try:
            handle = acquire_writer_lock(self.database, "materialization", None,
                                         self.lock_timeout_seconds, on_wait=waiting)
        except OSError as exc:
            # a file where a folder of the path must be: said as such (it read "File exists
            # (…/runs.csv/w.duckdb.lock)")
            blocker = next((folder for folder in reversed(Path(self.database).parents)
                            if folder.exists() and not folder.is_dir()), None)
            cause = (f"{blocker} is a file, not a folder" if blocker is not None
                     else f"{exc.strerror or exc} ({path})")
            raise WarehouseLockedError(f"warehouse {self.database} cannot be written: "
                                       f"{cause}") from None
        self._lock = handle
        self._staged = []
        # in any process running the job (a run worker the daemon launched, too), a signal a
        # finalizer swallowed must still stop the run (interrupts.py)
        interrupts.install()
        self._run = (context.instance, context.run_id) if context.instance else None
        if self.run_transaction:
            try:
                self._run_con = self._open()
            except BaseException:
                self._release()
                raise
            begin_run_transaction(self._run_con)
            self._failed = False

    def _open(self) -> duckdb.DuckDBPyConnection:
        """The run's own connection. Another process holding the file (a notebook, a BI tool,
        a reader of the CLI) is waited for a few seconds, then named: DuckDB's lock error
        says which PID holds it."""
        config = {"custom_user_agent": "dagster", **self.connection_config}
        deadline = time.monotonic() + OPEN_RETRY_SECONDS
        delay = 0.1
        while True:
            try:
                con = duckdb.connect(self.database, read_only=False, config=config)
                # long queries would draw DuckDB's progress bar: the CLI prints its own
                con.execute("SET enable_progress_bar = false")
                return con
            except duckdb.IOException as exc:
                problem = locked_message(self.database, exc)
                if problem is None or time.monotonic() >= deadline or "read-only" in problem:
                    raise WarehouseLockedError(problem or f"warehouse {self.database} cannot "
                                               f"be opened: {_first_line(exc)}") from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def publish_on_commit(self, staged: Path, final: Path) -> None:
        """Move the file a step wrote to `staged` (a report) to `final` once the run's writes
        committed; drop it when they roll back — no file shows figures the warehouse lacks."""
        if self._run_con is None:
            staged.replace(final)
        else:
            self._staged.append((staged, final))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        with interrupts.deferred():  # the outcome, the file and the tag as one (interrupts.py)
            self._end_run(context)

    def _end_run(self, context: dg.InitResourceContext) -> None:
        failure: WarehouseCommitError | None = None
        if self._run_con is not None:
            reason = self._rollback_reason(context)
            outcome = ROLLED_BACK if reason else COMMITTED
            try:
                self._run_con.execute("ROLLBACK" if reason else "COMMIT")
            except duckdb.Error as exc:
                failure = WarehouseCommitError(
                    f"the warehouse {self.database} could not commit the run's writes "
                    f"({_first_line(exc)}); the month keeps its previous rows")
                outcome = COMMIT_FAILED
                try:
                    self._run_con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # the failed commit already ended the transaction
            finally:
                self._run_con.close()
                self._run_con = None
                self._publish(outcome == COMMITTED)
            self._report(context, outcome, reason, failure)
        self._release()
        if failure is not None:
            raise failure

    def _rollback_reason(self, context: dg.InitResourceContext) -> str | None:
        """Why the run's writes must not commit; None only when the run is known to have
        succeeded completely (every step, no interrupt, no termination request)."""
        if self._failed:
            return "a step failed"
        if check_captured_interrupt() or interrupts.swallowed():
            return "interrupted"
        instance, run = context.instance, context.dagster_run
        if instance is None or run is None:
            return "not part of a Dagster run"
        # the resources are torn down before Dagster decides the run's status: read the steps
        plan = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id) \
            if run.execution_plan_snapshot_id else None
        if plan is None:
            return "the run's steps are unknown"
        events = instance.all_logs(run.run_id, of_type={
            dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE,
            dg.DagsterEventType.RUN_CANCELING, dg.DagsterEventType.RUN_FAILURE})
        kinds = {e.dagster_event.event_type for e in events
                 if e.dagster_event and e.step_key not in OUTSIDE_WAREHOUSE_STEPS}
        if dg.DagsterEventType.RUN_CANCELING in kinds:
            return "the run was asked to terminate"
        if kinds & {dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}:
            return "a step failed"
        succeeded = {e.step_key for e in events
                     if e.dagster_event and e.dagster_event.is_step_success}
        missing = set(plan.step_keys_to_execute) - succeeded - OUTSIDE_WAREHOUSE_STEPS
        if missing:
            return f"step(s) not finished: {', '.join(sorted(missing))}"
        if check_captured_interrupt() or interrupts.swallowed():
            return "interrupted"
        return None

    def _publish(self, committed: bool) -> None:
        for staged, final in self._staged:
            if committed:
                staged.replace(final)
            else:
                staged.unlink(missing_ok=True)
        self._staged = []

    def _report(self, context: dg.InitResourceContext, outcome: str, reason: str | None,
                failure: BaseException | None) -> None:
        """Tag the run with the transaction's outcome (the CLI reads it) and say it in the
        run's log."""
        instance, run_id = context.instance, context.run_id
        if instance is None or run_id is None or instance.get_run_by_id(run_id) is None:
            return
        detail = str(failure) if failure else reason
        instance.add_run_tags(run_id, {COMMIT_TAG: f"{outcome}: {detail}" if detail else outcome})
        if context.log is not None:  # a failure is the run's failure event: no second line
            context.log.debug(f"warehouse: {outcome}" + (f" ({detail})" if detail else ""))

    def _termination_requested(self) -> bool:
        if self._run is None or self._run[1] is None:
            return False
        instance, run_id = self._run
        run = instance.get_run_by_id(run_id)
        return run is not None and run.status in (dg.DagsterRunStatus.CANCELING,
                                                  dg.DagsterRunStatus.CANCELED)

    def _release(self) -> None:
        self._run = None
        release_writer_lock(self._lock)
        self._lock = None

    @contextmanager
    def get_connection(self):
        if self._run_con is not None:
            if self._termination_requested():
                # Dagster's run termination (UI, `dagster run terminate`, a run launched in a
                # thread) stops the run at its next step; its writes roll back at teardown
                self._failed = True
                raise DagsterExecutionInterruptedError("the run was asked to terminate")
            if interrupts.swallowed():
                # a signal whose exception a finalizer swallowed (interrupts.py): the run
                # stops at this step, as it would have where the signal landed
                self._failed = True
                raise DagsterExecutionInterruptedError("interrupted")
            try:
                yield self._run_con
            except BaseException as exc:
                self._failed = True  # the run's writes roll back at teardown
                if query_interrupted(exc):
                    # Ctrl-C / SIGTERM while a query ran: DuckDB swallowed the interruption.
                    # Raised as one, the run stops here, as at a signal between queries
                    raise DagsterExecutionInterruptedError(str(exc)) from exc
                raise
            finally:
                self._run_con.abort()  # drop any unread result before the next step
            return
        with super().get_connection() as conn:
            try:
                yield conn
            finally:
                conn.close()


_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")


def locked_message(database: str, exc: BaseException) -> str | None:
    """The one line for a DuckDB file another process holds (or a read-only file system);
    None when `exc` is about something else."""
    text = str(exc)
    found = _LOCK_HOLDER.search(text)
    if found:
        return (f"warehouse {database} is locked by PID {found['pid']} ({found['program']}): "
                "another program (a notebook, a BI tool) has it open; close it and retry")
    if "Read-only file system" in text or "read-only" in text.lower():
        return f"warehouse {database} cannot be written: read-only file system"
    return None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
