"""Dagster's own run termination (what the UI's Terminate and `dagster run terminate` ask):
a run of the monthly job, executing in a thread on a SQLite instance, is asked to terminate
while `attribution` runs; it stops at its next step, ends CANCELED, and every table's month
is as before — even though `attribution` itself finished."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import dagster as dg

from cost_pipeline.definitions import JOB_NAME, build_defs
from cost_pipeline.defs.resources import COMMIT_TAG, ROLLED_BACK
from tests.cli.test_kill import AUGUST, VOLATILE
from tests.cli.test_signals import _restated
from tests.support.dagster_home import new_dagster_home
from tests.support.warehouse_dump import dump


def _started(instance: dg.DagsterInstance, run_id: str, step: str) -> bool:
    return any(e.step_key == step for e in instance.all_logs(
        run_id, of_type=dg.DagsterEventType.STEP_START))


def test_terminated_run_leaves_the_month_whole(demo_quarter, tmp_path):
    config = _restated(demo_quarter, tmp_path / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    old = dump(warehouse, VOLATILE)
    home = new_dagster_home(tmp_path / "dagster_home")
    # no stdout/stderr capture: inside the whole suite (not alone, where the test takes 2 s)
    # the capture's `tail -F` child did not stop on SIGTERM and the run waited on it, 61 s;
    # the run's termination, not the capture, is what this test is about
    with open(home / "dagster.yaml", "a", encoding="utf-8") as settings:
        settings.write("compute_logs:\n"
                       "  module: dagster._core.storage.noop_compute_log_manager\n"
                       "  class: NoOpComputeLogManager\n")
    job = build_defs(str(config)).resolve_job_def(JOB_NAME)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        outcome: dict = {}
        worker = threading.Thread(target=lambda: outcome.update(result=job.execute_in_process(
            partition_key=f"{AUGUST:%Y-%m-%d}", instance=instance, raise_on_error=False)))
        worker.start()
        deadline = time.monotonic() + 120
        run = None
        while time.monotonic() < deadline:
            runs = instance.get_runs()
            if runs and _started(instance, runs[0].run_id, "attribution"):
                run = runs[0]
                break
            time.sleep(0.05)
        assert run is not None, "attribution never started"
        instance.report_run_canceling(run, message="terminate requested by the test")
        worker.join(timeout=300)
        assert not worker.is_alive()
        result = outcome["result"]
        assert not result.success
        final = instance.get_run_by_id(run.run_id)
        assert final.status == dg.DagsterRunStatus.CANCELED, final.status
        assert final.tags[COMMIT_TAG].startswith(ROLLED_BACK), final.tags[COMMIT_TAG]
        assert not _started(instance, run.run_id, "monthly_report")
    assert dump(warehouse, VOLATILE) == old
    assert not (Path(config.parent) / "reports" / f"cost-report-{AUGUST:%Y-%m}.html").exists()
