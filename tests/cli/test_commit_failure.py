"""A commit that cannot happen: the warehouse sits in a folder named `wh?1`, for which DuckDB
builds a wrong WAL path (`wh.wal?1/…`), so every step succeeds and the final COMMIT fails.
The run must fail (Dagster's run status included), the CLI must not print `materialized` nor
exit 0, no fingerprint may be recorded (the next run must not say "unchanged, skipped"), no
report may be written, and every table keeps its previous month."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from cost_pipeline.defs.resources import COMMIT_FAILED, COMMIT_TAG
from cost_pipeline.defs.sensors import _failure_reason
from tests.cli.test_kill import VOLATILE, _cli
from tests.cli.test_signals import _restated
from tests.support.dagster_home import new_dagster_home
from tests.support.warehouse_dump import dump


@pytest.fixture
def unwritable_wal(tmp_path) -> Path:
    """A folder where DuckDB accepts a database file and fails only at COMMIT (the
    reproduction itself is asserted here)."""
    folder = tmp_path / "wh?1"
    folder.mkdir()
    with duckdb.connect(str(folder / "probe.duckdb")) as con:
        con.execute("BEGIN TRANSACTION")
        con.execute("CREATE TABLE t AS SELECT 1 AS a")
        with pytest.raises(duckdb.Error, match="wh.wal"):
            con.execute("COMMIT")
    return folder


def test_failed_commit_fails_the_run(demo_quarter, unwritable_wal, tmp_path):
    config = _restated(demo_quarter, unwritable_wal / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    old = dump(warehouse, VOLATILE)
    home = new_dagster_home(tmp_path / "dagster_home")
    env = {**os.environ, "DAGSTER_HOME": str(home)}

    for attempt in range(2):  # the second run recomputes: nothing was recorded as done
        done = subprocess.run(_cli(config), capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 1, (attempt, done.stdout, done.stderr)
        assert "materialized" not in done.stdout and "skipped" not in done.stdout
        (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert "could not commit" in error and "keeps its previous rows" in error, error
        assert "✓ monthly_report" in done.stderr  # every step ran: only the commit failed
        assert "Traceback" not in done.stderr
        assert dump(warehouse, VOLATILE) == old  # fingerprints (materializations) included
        reports = config.parent / "reports"
        assert not reports.exists() or not any(reports.iterdir()), list(reports.iterdir())

    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2
        for run in runs:
            assert run.status == dg.DagsterRunStatus.FAILURE
            assert run.tags[COMMIT_TAG].startswith(COMMIT_FAILED)
            # what a scheduled run's failure alert would say
            assert "could not commit" in _failure_reason(instance, run.run_id)
