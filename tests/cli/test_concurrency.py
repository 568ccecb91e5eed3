"""Two materializations of one warehouse never interleave: the second waits for the first's
run-level lock (then proceeds), or fails clearly when it waits too long."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time

import dagster as dg
import pytest

from cost_pipeline.defs.resources import Warehouse, WarehouseBusyError
from tests.cli.test_cli import copy_demo


def test_second_materialization_waits_for_the_first(demo_quarter, tmp_path, dagster_home):
    config = copy_demo(demo_quarter, tmp_path)
    lock = config.parent / "warehouse.duckdb.lock"
    with open(lock, "a+") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        holder.write("pid 424242 (test)")
        holder.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "cost_pipeline.cli", "materialize", "--config", str(config),
             "--month", "2026-07"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "DAGSTER_HOME": str(dagster_home)})
        time.sleep(8)
        assert proc.poll() is None  # still waiting on the lock
        fcntl.flock(holder, fcntl.LOCK_UN)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "waiting for another materialization" in err and "pid 424242" in err
    assert "2026-07: materialized" in out


def test_waiting_too_long_is_a_clear_error(tmp_path):
    database = str(tmp_path / "w.duckdb")
    first = Warehouse(database=database)
    second = Warehouse(database=database, lock_timeout_seconds=0.5)
    first.setup_for_execution(dg.build_init_resource_context())
    try:
        with pytest.raises(WarehouseBusyError, match="being written by another materialization"):
            second.setup_for_execution(dg.build_init_resource_context())
    finally:
        first.teardown_after_execution(dg.build_init_resource_context())
    second.setup_for_execution(dg.build_init_resource_context())  # free again
    second.teardown_after_execution(dg.build_init_resource_context())
