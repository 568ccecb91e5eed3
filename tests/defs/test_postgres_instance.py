"""deploy/dagster.yaml.example, as it is, against a Postgres started on 127.0.0.1 in a temp
folder: command-line runs, their events and check results land in Postgres, the incremental
skip reads them back, and runs carry the warehouse tag the example's run queue limits on.
Skipped where the Debian `postgresql` binaries or dagster-postgres are missing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.cli.test_cli import copy_demo

ROOT = Path(__file__).resolve().parents[2]
PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))

pytest.importorskip("dagster_postgres")
pytestmark = pytest.mark.skipif(not PG_BINS, reason="no PostgreSQL server binaries "
                                "(Debian package postgresql)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A throwaway cluster on 127.0.0.1 (trust auth, no fsync); as root it runs as the
    `postgres` user, which initdb requires."""
    bin_dir = PG_BINS[-1].parent
    folder = Path(tempfile.mkdtemp(prefix="cost-pipeline-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()

    def pg(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, timeout=60)

    pg(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
       "-E", "UTF8", "--no-sync")
    pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
       f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off", "start")
    try:
        import psycopg2

        con = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
        con.autocommit = True
        con.cursor().execute("CREATE DATABASE dagster")
        con.close()
        yield port
    finally:
        pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def test_the_example_instance_runs_the_cli_on_postgres(postgres, demo_quarter, tmp_path):
    import dagster as dg
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml.example", home / "dagster.yaml")
    config = copy_demo(demo_quarter, tmp_path)
    pg_env = {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(postgres),
              "DAGSTER_PG_DB": "dagster", "DAGSTER_PG_USERNAME": "postgres",
              "DAGSTER_PG_PASSWORD": "trust-auth-ignores-it"}
    env = {**os.environ, **pg_env, "DAGSTER_HOME": str(home)}
    cli = [sys.executable, "-m", "cost_pipeline.cli", "materialize", "--config", str(config),
           "--month", "2026-08", "--strict"]
    first = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 2, first.stderr  # August fails reconciliation (the demo)
    assert "2026-08: materialized (run" in first.stdout
    again = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 2, again.stderr  # the recorded ERROR check still counts
    assert "2026-08: unchanged, skipped" in again.stdout

    old = {k: os.environ.get(k) for k in pg_env}
    os.environ.update(pg_env)
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert isinstance(instance.run_storage, PostgresRunStorage)
            assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
            runs = instance.get_runs(filters=dg.RunsFilter(
                tags={"cost_pipeline/launched_by": "cli"}))
            assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.SUCCESS
            warehouse = config.parent / yaml.safe_load(config.read_text())["warehouse"]["path"]
            assert runs[0].tags["cost_pipeline/warehouse"] == str(warehouse.resolve())
            check = dg.AssetCheckKey(dg.AssetKey("reconciliation"),
                                     "reconciliation_within_threshold")
            history = instance.event_log_storage.get_asset_check_execution_history(check, 5)
            # August fails it (the demo); a PLANNED row also stays, as on SQLite
            failed = [h for h in history if h.status.value == "FAILED"]
            assert len(failed) == 1 and failed[0].run_id == runs[0].run_id
            queue = instance.get_concurrency_config().run_queue_config
            assert queue.max_concurrent_runs == 4
            (limit,) = queue.tag_concurrency_limits
            assert limit["key"] == "cost_pipeline/warehouse" and limit["limit"] == 1
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
