"""The warehouse's background write-back (warehouse.py `WriteBack`): while a run computes, a
thread syncs the DuckDB file through DuckDB's own descriptor, so the commit finds little left
to write — and DuckDB's lock on the file holds throughout: another program still cannot open
the warehouse mid-run (a descriptor of our own, once closed, would drop that lock)."""

from __future__ import annotations

import subprocess
import sys
import time

import dagster as dg
import duckdb
import pytest

from cost_pipeline.defs.resources import Warehouse
from cost_pipeline.warehouse import WriteBack

NOTEBOOK = "import duckdb, sys; duckdb.connect(sys.argv[1]); print('opened')"

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the write-back finds DuckDB's descriptor in /proc")


def _another_program_opens(path) -> bool:
    done = subprocess.run([sys.executable, "-c", NOTEBOOK, str(path)], capture_output=True,
                          text=True, timeout=60)
    if done.returncode == 0:
        return True
    assert "Could not set lock" in done.stderr, done.stderr
    return False


def _until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@linux_only
def test_it_syncs_the_file_duckdb_holds_and_duckdbs_lock_holds(tmp_path):
    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    con.execute("BEGIN")
    con.execute("CREATE TABLE t AS SELECT range AS i, hash(range)::VARCHAR AS s "
                "FROM range(300000)")
    back = WriteBack(path, interval=0.02).start()
    _until(lambda: back.syncs >= 3)
    assert not _another_program_opens(path)  # mid-run
    back.stop()
    syncs = back.syncs
    time.sleep(0.1)
    assert back.syncs == syncs  # stopped
    assert not _another_program_opens(path)  # stopped, the connection still open
    con.execute("COMMIT")
    con.close()
    assert _another_program_opens(path)
    assert duckdb.connect(str(path), read_only=True).execute(
        "SELECT count(*) FROM t").fetchall() == [(300000,)]


def test_a_file_nothing_holds_gets_no_thread(tmp_path):
    for path in (tmp_path / "absent.duckdb", tmp_path / "closed.duckdb"):
        if path.name == "closed.duckdb":
            duckdb.connect(str(path)).close()
        back = WriteBack(path, interval=0.01).start()
        time.sleep(0.05)
        back.stop()
        assert back.syncs == 0


@linux_only
def test_a_run_syncs_its_warehouse_until_its_teardown(tmp_path):
    warehouse = Warehouse(database=str(tmp_path / "w.duckdb"))
    warehouse.setup_for_execution(dg.build_init_resource_context())
    back = warehouse._writeback
    try:
        assert back is not None
        with warehouse.get_connection() as con:
            con.execute("CREATE TABLE t AS SELECT range AS i FROM range(100000)")
        _until(lambda: back.syncs >= 1)
    finally:
        warehouse.teardown_after_execution(dg.build_init_resource_context())
    assert warehouse._writeback is None
    syncs = back.syncs
    time.sleep(0.7)  # more than its interval: no sync after the teardown
    assert back.syncs == syncs
    assert _another_program_opens(tmp_path / "w.duckdb")
