"""A materialization killed with SIGKILL in the middle (a real `cost-pipeline materialize`
process, killed once its progress shows the attribution step started): the warehouse opens,
each table's month holds either all of its previous rows or all of its new ones, the other
months are untouched, and the next run completes with cost conserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from tests.support.warehouse_dump import copy_with_warehouse, dump

AUGUST = date(2026, 8, 1)
CUR = "exports/cur/ml-cur/data/BILLING_PERIOD=2026-08/ml-cur-00002.snappy.parquet"
# history of deliveries: seen-at times change with every read, whatever the outcome
VOLATILE = {"billing_deliveries": ("first_seen", "last_seen")}


def _cli(config: Path) -> list[str]:
    return [sys.executable, "-m", "cost_pipeline.cli", "materialize", "--config", str(config),
            "--month", f"{AUGUST:%Y-%m}"]


def test_sigkill_mid_run_leaves_every_table_whole(demo_quarter, tmp_path, dagster_home):
    config = copy_with_warehouse(Path(demo_quarter[0]), tmp_path / "demo")
    warehouse = config.parent / "warehouse.duckdb"
    # August is restated (the bill loses lines, a run changes model): new rows differ from old
    table = pq.read_table(config.parent / CUR)
    pq.write_table(table.slice(0, table.num_rows - 25), config.parent / CUR)
    runs = config.parent / "runs.csv"
    runs.write_text(runs.read_text().replace(",churn,churn,", ",churn,restated,", 1))
    old = dump(warehouse, VOLATILE)

    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    proc = subprocess.Popen(_cli(config), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("… attribution"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.stderr.close()
    assert proc.wait(timeout=60) == -signal.SIGKILL, "".join(seen)

    # the warehouse opens (DuckDB replays what committed)
    killed = dump(warehouse, VOLATILE)
    done = subprocess.run(_cli(config), capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "attribution.cost_conserved: PASS" in done.stdout
    new = dump(warehouse, VOLATILE)

    assert set(killed) == set(old) == set(new)
    for table in old:
        months = set(old[table]) | set(new[table]) | set(killed[table])
        for month in months - {AUGUST}:
            assert killed[table].get(month) == old[table].get(month) == new[table].get(month), (
                table, month)
        # the killed run's writes were one uncommitted transaction: the month is exactly as
        # before it, in every table
        assert killed[table].get(AUGUST) == old[table].get(AUGUST), table
    # the rerun wrote the restatement
    for table in ("billing_facts", "tracker_runs"):
        assert new[table][AUGUST] != old[table][AUGUST], table
    with duckdb.connect(str(warehouse), read_only=True) as con:
        billed, attributed = con.execute(
            "SELECT (SELECT sum(EffectiveCost) FROM billing_facts WHERE month = $m), "
            "(SELECT sum(cost) FROM attribution WHERE month = $m)", {"m": AUGUST}).fetchone()
    assert abs(billed - attributed) <= 0.01
