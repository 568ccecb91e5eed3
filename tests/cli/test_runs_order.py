"""Where a run's row lies in `tracker_runs` changes nothing the job computes: a re-delivery of
the runs file writes again only the runs that changed (warehouse.py `_rewrite_changed`), which
leaves them after the others, where a whole write keeps the file's order. The demo's July
materialized from its runs file, then again from the same runs in another order: every
table, every column, to the last bit, the same."""

from __future__ import annotations

import csv
from datetime import date, datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

import cost_pipeline.defs.assets.ingest as ingest_asset
import cost_pipeline.warehouse as warehouse_module
from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from tests.cli.test_cli import copy_demo
from tests.demo.test_same_input_same_output import tables

JULY = date(2026, 7, 1)
# what the rows were computed from, not the rows: the runs' order moves no token, but these
# record the run's own keys and times (a forced run writes them again)
BOOKKEEPING = {"attribution_basis", "decision_basis", "input_tokens", "report_pages"}


def _shuffled(table: pa.Table) -> pa.Table:
    """The runs in an order of their own (by their ids read backwards), not the file's."""
    return table.take(pc.sort_indices(pc.utf8_reverse(table.column("run_id"))))


def test_the_runs_physical_order_changes_no_table(demo_quarter, tmp_path, dagster_home,
                                                   monkeypatch):
    config = copy_demo(demo_quarter, tmp_path)
    assert materialize_month(str(config), JULY, progress=False).success
    warehouse = load_config(config).warehouse_path
    first = tables(warehouse)
    with duckdb.connect(warehouse, read_only=True) as con:
        file_order = [r for (r,) in con.execute(
            "SELECT run_id FROM tracker_runs WHERE month = ? ORDER BY rowid", [JULY]).fetchall()]
    reader = ingest_asset.runs_table
    monkeypatch.setattr(ingest_asset, "runs_table", lambda cfg, log: _shuffled(reader(cfg, log)))
    forced = materialize_month(str(config), JULY, progress=False, force=True)
    assert forced.success, forced.error
    with duckdb.connect(warehouse, read_only=True) as con:
        stored_order = [r for (r,) in con.execute(
            "SELECT run_id FROM tracker_runs WHERE month = ? ORDER BY rowid", [JULY]).fetchall()]
    assert len(stored_order) > 100 and sorted(stored_order) == sorted(file_order)
    assert stored_order != file_order  # the rows do lie elsewhere
    second = tables(warehouse)
    assert sorted(first) == sorted(second)
    differ = [name for name in first if first[name] != second[name]]
    assert set(differ) <= BOOKKEEPING, differ  # no computed table


def test_a_changed_run_is_written_again_alone_and_the_month_is_as_a_whole_write(
        demo_quarter, tmp_path, dagster_home, monkeypatch):
    """Two July runs end an hour earlier in a later runs file: only their rows are deleted and
    written again; every table is then what a whole write of the same runs computes."""
    config = copy_demo(demo_quarter, tmp_path)
    assert materialize_month(str(config), JULY, progress=False).success
    warehouse = load_config(config).warehouse_path
    path = config.parent / "runs.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    moved = [r for r in rows if r["start_time"].startswith("2026-07") and r["end_time"]][:2]
    for run in moved:  # an hour earlier, in the file's own spelling of times (…Z)
        end = datetime.fromisoformat(run["end_time"]) - timedelta(hours=1)
        run["end_time"] = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    rewrites = []
    real = warehouse_module._rewrite_changed

    def recording(con, table, staged, month, key, stored):
        done = real(con, table, staged, month, key, stored)
        rewrites.append((table, done, sorted(k for (k,) in con.execute(
            f"SELECT k FROM {staged}_changed").fetchall())))
        return done

    monkeypatch.setattr(warehouse_module, "_rewrite_changed", recording)
    assert materialize_month(str(config), JULY, progress=False).success
    assert rewrites == [("tracker_runs", True, sorted(r["run_id"] for r in moved))]
    again = tables(warehouse)
    assert materialize_month(str(config), JULY, progress=False, force=True).success
    whole = tables(warehouse)
    differ = [name for name in whole if again[name] != whole[name]]
    assert set(differ) <= BOOKKEEPING, differ
