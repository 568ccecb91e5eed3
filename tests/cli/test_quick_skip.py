"""An unchanged month decided without Dagster (cli/quick_skip.py): the graph and the instance's
watermark left by the last `materialize` say the same as the full check, and anything the
full check could find — another run of the instance, other inputs, another instance storage —
sends the month to it."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from cost_pipeline.cli import quick_skip
from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from cost_pipeline.defs.definitions import JOB_NAME, ON_DEMAND_ASSETS, build_defs
from tests.cli.test_cli import copy_demo

JULY = date(2026, 7, 1)


@pytest.fixture(scope="module")
def july(demo_quarter, tmp_path_factory, dagster_home):
    config = copy_demo(demo_quarter, tmp_path_factory.mktemp("quick_skip"))
    assert materialize_month(str(config), JULY, progress=False).success
    return config


def _unchanged(config: Path):
    return quick_skip.unchanged(load_config(config), config.read_text(encoding="utf-8"), JULY)


def test_an_unchanged_month_is_decided_without_dagster(july):
    found = _unchanged(july)
    assert found is not None
    skipped, records = found
    graph = build_defs(str(july)).resolve_asset_graph()
    assert set(skipped) == {k.to_user_string() for k in graph.toposorted_asset_keys
                            if k.to_user_string() not in ON_DEMAND_ASSETS}
    again = materialize_month(str(july), JULY, progress=False)
    assert again.run_id is None and again.skipped == skipped
    assert {(c.asset, c.name) for c in again.checks} == {
        (a, c["name"]) for a in skipped for c in records[a].checks}
    # the command itself never imports Dagster for it
    probe = ("import sys; from cost_pipeline.cli.main import main; "
             f"code = main(['materialize', '--config', {str(july)!r}, '--month', '2026-07']); "
             "assert 'dagster' not in sys.modules, 'dagster imported'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unchanged, skipped" in done.stdout


def test_another_run_of_the_instance_sends_the_month_to_the_full_check(july):
    assert _unchanged(july) is not None
    job = build_defs(str(july)).resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.get() as instance:
        assert job.execute_in_process(partition_key="2026-07-01", instance=instance,
                                      asset_selection=[dg.AssetKey("reconciliation")]).success
    assert _unchanged(july) is None
    result = materialize_month(str(july), JULY, progress=False)
    assert result.run_id and "reconciliation" not in result.skipped
    assert _unchanged(july) is not None  # recorded again by that materialize


def test_a_changed_input_or_other_storage_takes_the_full_path(july, monkeypatch, tmp_path):
    runs = july.parent / "runs.csv"
    stat = runs.stat()
    os.utime(runs, (stat.st_atime, stat.st_mtime + 30))
    assert _unchanged(july) is None
    assert materialize_month(str(july), JULY, progress=False).success
    assert _unchanged(july) is not None
    # an instance configured with its own storage (Postgres in deploy/) has no watermark
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("storage:\n  postgres: {}\n", encoding="utf-8")
    (home / quick_skip.STAMP).write_text(
        (Path(os.environ["DAGSTER_HOME"]) / quick_skip.STAMP).read_text(encoding="utf-8"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert _unchanged(july) is None
