"""An unchanged month is not recomputed; a changed input re-runs only the assets that depend
on it; `force`, a changed config and another run's materialization recompute."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from cost_pipeline.cli.incremental import fingerprints
from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config, parse_config
from cost_pipeline.definitions import JOB_NAME, WAREHOUSE_TAG, build_defs
from cost_pipeline.defs.assets.decisions import DERIVED
from tests.cli.test_cli import copy_demo

JULY = date(2026, 7, 1)
SOURCES = {"billing_facts", "tracker_runs", "checkpoint_inventory"}
KEEPING = {*DERIVED, "reconciliation"}  # the assets that keep their rows when their basis is


@pytest.fixture(scope="module")
def july(demo_quarter, tmp_path_factory, dagster_home):
    """A copy of the demo quarter with July materialized once; each test leaves the month
    recorded as materialized from the copy's current files."""
    config = copy_demo(demo_quarter, tmp_path_factory.mktemp("incremental"))
    first = materialize_month(str(config), JULY, progress=False)
    assert first.success and first.run_id and first.skipped == []
    return config, first


@pytest.fixture
def demo_copy(july) -> Path:
    return july[0]


def _assets(config: Path) -> set[str]:
    """The assets a month's materialization runs (not the on-demand FOCUS export)."""
    from cost_pipeline.defs.definitions import ON_DEMAND_ASSETS

    graph = build_defs(str(config)).resolve_asset_graph()
    return {k.to_user_string() for k in graph.toposorted_asset_keys} - set(ON_DEMAND_ASSETS)


def test_an_unchanged_month_is_skipped_with_its_recorded_checks(july):
    demo_copy, first = july
    first_checks = {(c.asset, c.name): c.passed for c in first.checks}
    again = materialize_month(str(demo_copy), JULY, progress=False)
    assert again.success and again.run_id is None
    assert set(again.skipped) == _assets(demo_copy)
    assert {(c.asset, c.name): c.passed for c in again.checks} == first_checks
    assert all(c.recorded for c in again.checks)
    warehouse = load_config(demo_copy).warehouse_path
    with duckdb.connect(warehouse, read_only=True) as con:
        recorded = con.execute("SELECT count(DISTINCT asset), count(DISTINCT run_id) "
                               "FROM materializations WHERE month = ?", [JULY]).fetchone()
    assert recorded == (len(_assets(demo_copy)), 1)


def test_a_changed_runs_file_reruns_only_what_depends_on_it(demo_copy):
    runs = demo_copy.parent / "runs.csv"
    os.utime(runs, (runs.stat().st_atime, runs.stat().st_mtime + 10))
    result = materialize_month(str(demo_copy), JULY, progress=False)
    assert result.success and result.run_id
    assert set(result.skipped) == {"billing_facts", "checkpoint_inventory"}
    materialized = _materialized(result.run_id)
    ran = set(materialized)
    assert ran == _assets(demo_copy) - {"billing_facts", "checkpoint_inventory"}
    # the same runs: they stay unwritten, every decision table and the reconciliation keep
    # their rows, as the attribution does, and the report its page
    assert {a: meta["kept"] for a, meta in materialized.items() if "kept" in meta} == {
        a: True for a in {*KEEPING, "monthly_report", "tracker_runs"}}
    assert materialized["attribution"]["mode"] == "kept"
    assert materialize_month(str(demo_copy), JULY, progress=False).run_id is None


def _materialized(run_id: str) -> dict[str, dict]:
    """Each asset a run materialized, with its materialization's metadata values."""
    with dg.DagsterInstance.get() as instance:
        return {e.dagster_event.asset_key.to_user_string():
                {k: v.value for k, v in e.asset_materialization.metadata.items()}
                for e in instance.all_logs(
                    run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)}


def test_force_and_a_changed_config_recompute_everything(demo_copy):
    forced = materialize_month(str(demo_copy), JULY, progress=False, force=True)
    assert forced.run_id and forced.skipped == []
    assert {a: m["kept"] for a, m in _materialized(forced.run_id).items() if "kept" in m} == {
        a: False for a in {*KEEPING, "monthly_report", "tracker_runs"}}
    demo_copy.write_text(demo_copy.read_text() + "\n# a comment changes the config file\n")
    changed = materialize_month(str(demo_copy), JULY, progress=False)
    assert changed.run_id and changed.skipped == []


def test_a_later_materialization_by_another_run_is_not_trusted(demo_copy):
    # an on-demand refresh of one asset, as the UI or `dagster asset materialize` launches it
    job = build_defs(str(demo_copy)).resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.get() as instance:
        assert job.execute_in_process(partition_key="2026-07-01", instance=instance,
                                      asset_selection=[dg.AssetKey("reconciliation")]).success
    result = materialize_month(str(demo_copy), JULY, progress=False)
    assert result.run_id and "reconciliation" not in result.skipped
    assert set(result.skipped) == _assets(demo_copy) - {"reconciliation"}


def test_a_run_without_the_warehouse_tag_is_not_trusted_either(demo_copy):
    # `dagster asset materialize` and the UI's asset launcher run the implicit asset job,
    # whose runs name no warehouse: it may have been this one
    job = build_defs(str(demo_copy)).resolve_implicit_global_asset_job_def()
    with dg.DagsterInstance.get() as instance:
        done = job.execute_in_process(partition_key="2026-07-01", instance=instance,
                                      asset_selection=[dg.AssetKey("reconciliation")])
        assert done.success and WAREHOUSE_TAG not in done.dagster_run.tags
    result = materialize_month(str(demo_copy), JULY, progress=False)
    assert result.run_id and "reconciliation" not in result.skipped
    assert set(result.skipped) == _assets(demo_copy) - {"reconciliation"}


def test_another_warehouses_runs_in_the_instance_are_not_newer(demo_quarter, tmp_path):
    """Two warehouses in one Dagster home (two configs, two demos): a run of the other one,
    tagged with its warehouse, does not make this one's month recompute."""
    first = copy_demo(demo_quarter, tmp_path / "first")
    second = copy_demo(demo_quarter, tmp_path / "second")
    assert materialize_month(str(first), JULY, progress=False).run_id
    other = materialize_month(str(second), JULY, progress=False)
    assert other.run_id and other.skipped == []
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(other.run_id).tags[WAREHOUSE_TAG] == str(
            second.parent / "warehouse.duckdb")
    again = materialize_month(str(first), JULY, progress=False)
    assert again.success and again.run_id is None
    assert set(again.skipped) == _assets(first)
    # and the other way round: the first one's earlier run is older than the second's
    assert materialize_month(str(second), JULY, progress=False).run_id is None


def test_more_runs_of_other_warehouses_than_looked_at_recompute(demo_quarter, tmp_path,
                                                               monkeypatch):
    """Past the records looked at, a newer run of this warehouse may hide: recompute."""
    from cost_pipeline.cli import incremental

    first = copy_demo(demo_quarter, tmp_path / "first")
    second = copy_demo(demo_quarter, tmp_path / "second")
    assert materialize_month(str(first), JULY, progress=False).run_id
    assert materialize_month(str(second), JULY, progress=False).run_id
    assert materialize_month(str(second), JULY, progress=False, force=True).run_id
    # newest first: the second's two runs, then the first's own
    monkeypatch.setattr(incremental, "RECORDS_LOOKED_AT", 3)
    assert materialize_month(str(first), JULY, progress=False).run_id is None
    assert materialize_month(str(second), JULY, progress=False, force=True).run_id
    # the second's three runs fill the three looked at: the first's may be past them
    again = materialize_month(str(first), JULY, progress=False)
    assert again.run_id and again.skipped == []


def test_inputs_that_cannot_be_fingerprinted_always_run(tmp_path):
    runs = tmp_path / "runs.csv"
    runs.write_text("run_id,status,start_time\nr1,FINISHED,2026-07-01T00:00:00Z\n")
    text = ("tracker:\n  - {kind: mlflow, tracking_uri: http://127.0.0.1:5000}\n"
            "checkpoints:\n  - {kind: s3, bucket: ckpt}\n")
    cfg = parse_config({"tracker": [{"kind": "mlflow", "tracking_uri": "http://127.0.0.1:5000"}],
                        "checkpoints": [{"kind": "s3", "bucket": "ckpt"}]}, tmp_path)
    graph = build_defs(str(tmp_path / "absent.yaml")).resolve_asset_graph()
    prints = fingerprints(graph, cfg, text, JULY)
    assert prints["billing_facts"]  # no billing source: an empty, known input
    assert prints["tracker_runs"] is None and prints["checkpoint_inventory"] is None
    assert prints["attribution"] is None and prints["monthly_report"] is None
    local = parse_config({"tracker": [{"kind": "runs_file", "path": "runs.csv"}]}, tmp_path)
    before = fingerprints(graph, local, text, JULY)
    assert before["tracker_runs"] and before["attribution"]
    os.utime(runs, (runs.stat().st_atime, runs.stat().st_mtime + 10))
    after = fingerprints(graph, local, text, JULY)
    assert after["billing_facts"] == before["billing_facts"]
    assert after["tracker_runs"] != before["tracker_runs"]
    assert after["attribution"] != before["attribution"]


def test_a_failed_run_records_nothing(demo_copy, monkeypatch):
    from cost_pipeline.defs.assets import decisions as derived

    warehouse = load_config(demo_copy).warehouse_path

    def recorded_runs():
        with duckdb.connect(warehouse, read_only=True) as con:
            return dict(con.execute("SELECT asset, run_id FROM materializations "
                                    "WHERE month = ?", [JULY]).fetchall())

    before = recorded_runs()
    runs = demo_copy.parent / "runs.csv"
    os.utime(runs, (runs.stat().st_atime, runs.stat().st_mtime + 20))
    real = derived.sql_text
    # the month's last SQL step fails: the run's one transaction rolls every table back
    monkeypatch.setattr(derived, "sql_text", lambda name: "SELECT no_such_column"
                        if name == "cost_levers" else real(name))
    failed = materialize_month(str(demo_copy), JULY, progress=False)
    assert not failed.success and "no_such_column" in failed.error
    assert recorded_runs() == before
    monkeypatch.undo()
    again = materialize_month(str(demo_copy), JULY, progress=False)
    assert again.success and set(again.skipped) == {"billing_facts", "checkpoint_inventory"}


def test_a_month_restated_after_a_later_one_reruns_what_reads_it(demo_quarter, tmp_path):
    """A CUR delivered again for July after August was written (AWS restates a month): July's
    costs change, and August's skip must not keep the figures that read July — a search's
    cost to date, the trends, the strip. August's own bill, runs and attribution stay kept."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from cost_pipeline.cli.incremental import MONTH_LOCAL

    config = copy_demo(demo_quarter, tmp_path)
    august = date(2026, 8, 1)
    for month in (JULY, august):
        assert materialize_month(str(config), month, progress=False).success
    for path in (config.parent / "exports").rglob("BILLING_PERIOD=2026-07/*.parquet"):
        table = pq.read_table(path)  # every cost of July doubled
        for i, name in enumerate(table.column_names):
            if name.endswith("_cost") and pc.sum(table[name]).as_py() is not None:
                table = table.set_column(i, name, pc.multiply(table[name], 2))
        pq.write_table(table, path)
    assert materialize_month(str(config), JULY, progress=False).run_id
    again = materialize_month(str(config), august, progress=False)
    assert again.success and again.run_id
    assert {*SOURCES, "attribution"} <= set(again.skipped) <= MONTH_LOCAL

    def to_date() -> list:
        with duckdb.connect(load_config(config).warehouse_path, read_only=True) as con:
            return con.execute("SELECT search_id, round(cumulative_cost, 2) FROM search_costs "
                               "WHERE month = ? ORDER BY search_id", [august]).fetchall()

    kept = to_date()
    assert materialize_month(str(config), august, progress=False, force=True).success
    assert kept == to_date() and kept  # what a forced run writes
