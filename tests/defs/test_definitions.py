"""The whole Definitions object loads: assets, checks, job, schedule, resources."""

from __future__ import annotations

import dagster as dg

from cost_pipeline.definitions import JOB_NAME, build_defs

ASSETS = {"billing_facts", "tracker_runs", "checkpoint_inventory", "attribution",
          "reconciliation", "untracked_usage", "cost_per_model_monthly", "search_costs",
          "retention_violations", "storage_by_run_status", "search_trend",
          "preprocessing_waste", "egress", "gpu_utilization", "showback", "cost_levers",
          "monthly_report", "search_shape", "run_costs", "tracker_cost_tags", "retrain_cadence",
          "preemption", "focus_export"}


def test_definitions_load_and_list_everything(tmp_path):
    defs = build_defs(str(tmp_path / "missing.yaml"))  # loads even before a config exists
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == ASSETS
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert checks >= {("attribution", "cost_conserved"),
                      ("reconciliation", "reconciliation_within_threshold")}
    job = defs.resolve_job_def(JOB_NAME)
    assert job.partitions_def is not None
    keys = job.partitions_def.get_partition_keys()
    assert keys[0] == "2015-01-01"  # any bill a user still has (config `first_month`)
    schedule = defs.resolve_schedule_def("monthly_close")
    assert schedule.job_name == JOB_NAME
    assert set(defs.resources) >= {"duckdb", "settings"}


def test_checks_never_block_downstream(tmp_path):
    defs = build_defs(str(tmp_path / "missing.yaml"))
    for spec in defs.resolve_asset_graph().asset_check_keys:
        check = defs.resolve_asset_graph().get_check_spec(spec)
        assert check.blocking is False


def test_workspace_module_exposes_defs():
    from cost_pipeline import definitions

    assert isinstance(definitions.defs, dg.Definitions)


def test_the_monthly_job_leaves_the_focus_export_to_its_own_job(tmp_path):
    defs = build_defs(str(tmp_path / "missing.yaml"))
    monthly = defs.resolve_job_def(JOB_NAME)
    on_demand = defs.resolve_job_def("focus_export_job")
    assert dg.AssetKey("focus_export") not in monthly.asset_layer.executable_asset_keys
    assert dg.AssetKey("attribution") in monthly.asset_layer.executable_asset_keys
    assert on_demand.asset_layer.executable_asset_keys == {dg.AssetKey("focus_export")}


def test_a_broken_config_is_named_by_dagster_definitions_validate(tmp_path):
    """The code location loads with a broken config (the UI shows the graph), and `dagster
    definitions validate` passed it silently: it names the config and the key now."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: w.duckdb}\nbilling: 3\n")
    (tmp_path / "dagster.yaml").write_text("")
    env = {**os.environ, "COST_PIPELINE_CONFIG": str(config), "DAGSTER_HOME": str(tmp_path)}
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run([str(dagster), "definitions", "validate", "-m",
                           "cost_pipeline.definitions"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr  # it still loads
    assert (f"config {config}: billing: Input should be a valid list: the code location "
            "loads, but its runs fail until the config is fixed") in done.stdout + done.stderr


def test_a_backfills_runs_carry_the_warehouse_tag_the_queue_limits(tmp_path):
    """A backfill (the UI's "Launch backfill", `dagster job backfill`) tags its runs with the
    job's definition tags, not its run tags: the months' runs named no warehouse, so the
    queue's one-run-per-warehouse limit let them start together, and a later month computed
    before an earlier one read its figures ($480 of a search's $1,200 to date). Real queued
    runs of a real instance, as `dagster job backfill` queues them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from cost_pipeline.cli.materialize import DEFAULT_SETTINGS
    from cost_pipeline.definitions import WAREHOUSE_TAG

    home, config = tmp_path / "home", tmp_path / "config.yaml"
    home.mkdir()
    (home / "dagster.yaml").write_text(DEFAULT_SETTINGS, encoding="utf-8")
    config.write_text("warehouse: {path: w.duckdb}\n", encoding="utf-8")
    env = {**os.environ, "COST_PIPELINE_CONFIG": str(config), "DAGSTER_HOME": str(home)}
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run([str(dagster), "job", "backfill", "-m", "cost_pipeline.definitions",
                           "-j", JOB_NAME, "--partitions", "2026-03-01,2026-04-01",
                           "--noprompt"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert sorted(r.tags["dagster/partition"] for r in runs) == ["2026-03-01", "2026-04-01"]
        assert {r.tags.get(WAREHOUSE_TAG) for r in runs} == {str(tmp_path / "w.duckdb")}
        assert {r.status for r in runs} == {dg.DagsterRunStatus.QUEUED}
    defs = build_defs(str(config))
    for job in (JOB_NAME, "focus_export_job", "period_report"):
        assert defs.resolve_job_def(job).tags[WAREHOUSE_TAG] == str(tmp_path / "w.duckdb")
