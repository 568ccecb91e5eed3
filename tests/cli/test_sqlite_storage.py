"""The command line's instance on pooled SQLite connections (cli/sqlite_storage.py): Dagster's
own files, read and written alike by a plain `DagsterInstance.get()`; one engine per file,
bounded, disposed of with the instance; any storage configured otherwise left to Dagster."""

from __future__ import annotations

import threading
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy
from dagster._core.errors import DagsterHomeNotSetError
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

from cost_pipeline.cli import sqlite_storage
from cost_pipeline.cli.sqlite_storage import (
    MAX_SHARD_ENGINES,
    PooledSqliteEventLogStorage,
    PooledSqliteRunStorage,
    PooledSqliteScheduleStorage,
    PooledSqliteStorage,
    instance_of_home,
)
from tests.support.dagster_home import new_dagster_home


@dg.asset(check_specs=[dg.AssetCheckSpec("positive", asset="tally")],
          partitions_def=dg.StaticPartitionsDefinition(["a", "b"]))
def tally(context):  # (no annotation: the module postpones them, Dagster reads it)
    context.log.info(f"counting {context.partition_key}")
    return dg.MaterializeResult(metadata={"rows": 3},
                                check_results=[dg.AssetCheckResult(passed=True)])


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = new_dagster_home(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def _records(instance: dg.DagsterInstance, run_id: str) -> list[tuple]:
    return [(e.dagster_event_type, e.step_key, e.user_message)
            for e in instance.all_logs(run_id)]


def _latest_materialization(instance: dg.DagsterInstance):
    """(run, partition, rows) of tally's latest materialization."""
    event = instance.get_latest_materialization_event(dg.AssetKey("tally"))
    return (event.run_id, event.asset_materialization.partition,
            event.asset_materialization.metadata["rows"].value) if event else None


def test_a_default_home_is_opened_pooled(home):
    with instance_of_home() as instance:
        assert instance.get_ref().storage_data.class_name == PooledSqliteStorage.__name__
        assert type(instance.run_storage) is PooledSqliteRunStorage
        assert type(instance.event_log_storage) is PooledSqliteEventLogStorage
        assert type(instance.schedule_storage) is PooledSqliteScheduleStorage
        instance.get_runs(limit=1)
        instance.schedule_storage.all_instigator_state()
    # Dagster's own files, where Dagster keeps them
    assert (home / "history" / "runs.db").exists()
    assert (home / "history" / "runs" / "index.db").exists()
    assert (home / "schedules" / "schedules.db").exists()


def test_storage_configured_as_sqlite_is_pooled_in_its_own_folder(home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (home / "dagster.yaml").write_text(f"storage:\n  sqlite:\n    base_dir: {elsewhere}\n")
    with instance_of_home() as instance:
        assert type(instance.event_log_storage) is PooledSqliteEventLogStorage
        result = dg.materialize([tally], instance=instance, partition_key="a")
    assert (elsewhere / "history" / "runs" / f"{result.run_id}.db").exists()
    assert not (home / "history").exists()


def test_any_other_storage_is_dagsters_own(home, tmp_path):
    (home / "dagster.yaml").write_text(
        "run_storage:\n  module: dagster._core.storage.runs\n  class: SqliteRunStorage\n"
        f"  config:\n    base_dir: {tmp_path / 'runs'}\n")
    with instance_of_home() as instance:
        assert type(instance.run_storage) is SqliteRunStorage
        assert type(instance.event_log_storage) is SqliteEventLogStorage


def test_a_missing_or_relative_home_is_dagsters_own_error(monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with pytest.raises(DagsterHomeNotSetError):
        instance_of_home()
    monkeypatch.setenv("DAGSTER_HOME", "relative/home")
    with pytest.raises(dg.DagsterInvariantViolationError, match="must be an absolute path"):
        instance_of_home()


def test_what_one_writes_the_other_reads(home):
    with instance_of_home() as pooled:
        first = dg.materialize([tally], instance=pooled, partition_key="a")
    with dg.DagsterInstance.get() as plain:
        assert type(plain.event_log_storage) is SqliteEventLogStorage
        assert plain.get_run_by_id(first.run_id).is_success
        assert _latest_materialization(plain) == (first.run_id, "a", 3)
        check = plain.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("tally"), "positive"), limit=5)
        assert [c.run_id for c in check] == [first.run_id]
        assert ("tally", "counting a") in {(step, msg) for _, step, msg in
                                           _records(plain, first.run_id)}
        plain_records = _records(plain, first.run_id)
        second = dg.materialize([tally], instance=plain, partition_key="b")
    with instance_of_home() as pooled:
        assert _records(pooled, first.run_id) == plain_records
        assert pooled.get_run_by_id(second.run_id).is_success
        assert _latest_materialization(pooled) == (second.run_id, "b", 3)
        assert {r.run_id for r in pooled.get_runs()} == {first.run_id, second.run_id}


def test_each_file_keeps_one_engine_and_dispose_closes_them(home, monkeypatch):
    created: list[str] = []
    connects: list[str] = []
    real = sqlite_storage.pooled_engine

    def counting(conn_string, **connect_args):
        engine = real(conn_string, **connect_args)
        created.append(conn_string)
        sqlalchemy.event.listen(engine, "connect", lambda *_: connects.append(conn_string))
        return engine

    monkeypatch.setattr(sqlite_storage, "pooled_engine", counting)
    instance = instance_of_home()
    result = dg.materialize([tally], instance=instance, partition_key="a")
    events = len(instance.all_logs(result.run_id))
    assert events >= 10
    # runs.db, schedules.db (untouched by a run: not opened), index.db, the run's own file
    assert len(created) == len(set(created)) <= 4, created
    assert len(connects) <= 2 * len(created), connects  # not one per event
    storage = instance.event_log_storage
    assert storage._engines  # noqa: SLF001
    instance.dispose()
    assert not storage._engines  # noqa: SLF001
    assert instance.run_storage._engine is None  # noqa: SLF001


def test_the_engines_kept_are_bounded_and_an_evicted_file_opens_again(home):
    with instance_of_home() as instance:
        runs = [dg.materialize([tally], instance=instance, partition_key="a").run_id
                for _ in range(MAX_SHARD_ENGINES + 2)]
        storage = instance.event_log_storage
        assert len(storage._engines) <= MAX_SHARD_ENGINES  # noqa: SLF001
        assert runs[0] not in storage._engines  # noqa: SLF001
        assert any(e.step_key == "tally" for e in instance.all_logs(runs[0]))


def test_wipe_deletes_the_run_files_and_the_next_run_starts_afresh(home):
    with instance_of_home() as instance:
        first = dg.materialize([tally], instance=instance, partition_key="a").run_id
        shard = Path(instance.event_log_storage.path_for_shard(first))
        assert shard.exists()
        instance.event_log_storage.wipe()
        assert not shard.exists()
        assert instance.all_logs(first) == []
        second = dg.materialize([tally], instance=instance, partition_key="b").run_id
        assert _latest_materialization(instance) == (second, "b", 3)


def test_threads_share_the_pooled_storage(home):
    errors: list[BaseException] = []
    with instance_of_home() as instance:
        run_id = dg.materialize([tally], instance=instance, partition_key="a").run_id

        def read():
            try:
                for _ in range(20):
                    assert instance.all_logs(run_id)
                    assert instance.get_run_by_id(run_id) is not None
            except BaseException as error:  # noqa: BLE001 — reported below
                errors.append(error)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []


def test_the_index_tables_are_looked_up_once_not_per_asset_event(home, monkeypatch):
    from dagster._core.storage.event_log.sqlite import sqlite_event_log

    with instance_of_home() as instance:
        dg.materialize([tally], instance=instance, partition_key="a")  # the files exist
        engines: list[str] = []
        real = sqlite_event_log.create_engine

        def counting(conn_string, **kwargs):
            engines.append(conn_string)
            return real(conn_string, **kwargs)

        monkeypatch.setattr(sqlite_event_log, "create_engine", counting)
        runs = [dg.materialize([tally], instance=instance, partition_key=key).run_id
                for key in ("b", "a", "b")]
        # Dagster's own has_table opens an engine for each materialization's tags; the
        # pooled storage asked once already and remembers the answer
        assert engines == []
        assert _latest_materialization(instance) == (runs[-1], "b", 3)
        assert instance.event_log_storage.has_table("asset_event_tags")
        assert not instance.event_log_storage.has_table("no_such_table")
        assert engines == [instance.event_log_storage.conn_string_for_shard("index")]
