"""Who holds the warehouse: a notebook (`duckdb.connect(path)` in another process) holding the
DuckDB file makes the CLI say so in its one line — the PID that holds it — within seconds,
and leaves the month as it was."""

from __future__ import annotations

import subprocess
import sys
import time

from cost_pipeline.defs.resources import locked_message
from tests.cli.test_cli import run_cli
from tests.support.warehouse_dump import copy_with_warehouse, dump

NOTEBOOK = ("import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
            "print('ready', flush=True); sys.stdin.read()")


def test_warehouse_held_by_another_process_names_it(demo_quarter, tmp_path, dagster_home):
    config = copy_with_warehouse(demo_quarter[0], tmp_path / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    before = dump(warehouse)
    notebook = subprocess.Popen([sys.executable, "-c", NOTEBOOK, str(warehouse)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert notebook.stdout.readline().strip() == "ready"
        started = time.monotonic()
        done = run_cli("materialize", "--config", str(config), "--month", "2026-08", "--force",
                       env_home=dagster_home)
        took = time.monotonic() - started
    finally:
        notebook.stdin.close()
        notebook.wait(timeout=30)
    assert done.returncode == 1, done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [errors[0]] and f"is locked by PID {notebook.pid}" in errors[0], done.stderr
    assert str(warehouse) in errors[0]
    assert "before any step started" not in done.stderr
    assert took < 40, took  # was 54 s of retries before the message
    assert dump(warehouse) == before


def test_read_only_file_system_is_said():
    exc = OSError('IO Error: Cannot open file "/ro/w.duckdb": Read-only file system')
    assert locked_message("/ro/w.duckdb", exc) == \
        "warehouse /ro/w.duckdb cannot be written: read-only file system"


def test_a_warehouse_under_a_file_is_said(tmp_path, dagster_home):
    # it read "cannot be written: File exists (…/runs.csv/w.duckdb.lock)"
    (tmp_path / "runs.csv").write_text("run_id,status,start_time\n")
    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: runs.csv/w.duckdb}\n")
    done = run_cli("materialize", "--config", str(config), "--month", "2026-07",
                   env_home=dagster_home)
    assert done.returncode == 1, done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: warehouse {tmp_path / 'runs.csv' / 'w.duckdb'} cannot be "
                      f"written: {tmp_path / 'runs.csv'} is a file, not a folder"], done.stderr
