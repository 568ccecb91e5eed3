"""The partitions cover any bill (from 2015-01, config `first_month` moves it), and a month
outside them is one line naming the range and the key, on every path that names a month."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
import yaml

from cost_pipeline.cli.main import main
from cost_pipeline.definitions import JOB_NAME, build_defs
from cost_pipeline.months import open_month


def config_file(tmp_path, **keys) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"warehouse": {"path": "w.duckdb"}, **keys}))
    return str(path)


def test_default_partitions_start_2015_and_end_with_the_open_month(tmp_path):
    partitions = build_defs(config_file(tmp_path)).resolve_job_def(JOB_NAME).partitions_def
    keys = partitions.get_partition_keys()
    assert keys[0] == "2015-01-01"
    assert keys[-1] == f"{open_month():%Y-%m}-01"


def test_first_month_key_moves_every_asset_and_keeps_their_identity(tmp_path):
    (tmp_path / "moved").mkdir()
    default = build_defs(config_file(tmp_path))
    moved = build_defs(config_file(tmp_path / "moved", first_month="2009-11"))
    job = moved.resolve_job_def(JOB_NAME)
    assert job.partitions_def.get_first_partition_key() == "2009-11-01"
    graph, before = moved.resolve_asset_graph(), default.resolve_asset_graph()
    assert graph.get_all_asset_keys() == before.get_all_asset_keys()
    assert graph.asset_check_keys == before.asset_check_keys
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.partitions_def.get_first_partition_key() == "2009-11-01"
        assert node.code_version == before.get(key).code_version


def _one_line_error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 1
    out = capsys.readouterr()
    assert out.out == "" and "Traceback" not in out.err
    [line] = out.err.strip().splitlines()
    return line


def test_month_before_the_range_names_the_range_and_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    config = config_file(tmp_path)
    line = _one_line_error(capsys, "materialize", "--config", config, "--month", "2014-12")
    assert "2014-12" in line and "2015-01" in line and f"{open_month():%Y-%m}" in line
    assert "first_month: 2014-12" in line
    later = _one_line_error(capsys, "materialize", "--config", config, "--month", "2099-01")
    assert "2099-01 has not started" in later and "2015-01" in later


def test_first_month_is_validated(tmp_path, capsys):
    line = _one_line_error(capsys, "materialize", "--config",
                           config_file(tmp_path, first_month="2099-01"), "--month", "2026-01")
    assert "first_month" in line and "not started" in line


@pytest.fixture(scope="module")
def instance():
    # module-wide: Definitions built after a closed test instance fail to load
    with dg.instance_for_test() as instance:
        yield instance


def test_monthly_close_skips_a_month_before_the_first(tmp_path, instance):
    first = open_month()
    defs = build_defs(config_file(tmp_path, first_month=f"{first:%Y-%m}"))
    schedule = defs.resolve_schedule_def("monthly_close")
    context = dg.build_schedule_context(
        instance=instance, repository_def=defs.get_repository_def(),
        scheduled_execution_time=datetime(first.year, first.month, 3, 6, tzinfo=UTC))
    result = schedule.evaluate_tick(context)
    assert not result.run_requests and "first_month" in result.skip_message


@pytest.mark.parametrize("month", ["2015-01", "2018-03"])
def test_old_bills_are_partitions(tmp_path, month):
    partitions = build_defs(config_file(tmp_path)).resolve_job_def(JOB_NAME).partitions_def
    assert f"{month}-01" in partitions.get_partition_keys()
